# %% [markdown]
# # 14. Zero-layer transformers
#
# Take away every layer and a transformer still makes predictions. In the book's
# attention-only toy models (`toy-0l`, `toy-1l`, `toy-2l`), which have no LayerNorm and
# add positions only where queries and keys are read, it embeds the current token and
# unembeds it straight away. This chapter studies that model, the direct path of chapter {doc}`13_path_expansion` on its own. We train nothing here: `toy-0l` from the
# book's zoo was trained on a Markov chain whose transition probabilities we know, so we
# can compare what the model learned with the truth, entry by entry. On the way we settle
# a point that is easy to get wrong: a zero-layer model learns *bigram* statistics, the
# distribution of the next token given the current one, not the overall frequency of
# each token.
#
# Set-up: imports.

# %% tags=["hide-input"]
import copy
import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch

from circuitbook import checks
from circuitbook.book import (Null, finding, glue, identity_close,
                              null_test, observation, rounding_bound)
from circuitbook.circuits import direct_path
from circuitbook.data import bigram_chain
from circuitbook.models import load
from circuitbook.models.encoder_decoder import Embeddings, Generator
from circuitbook.models.zoo import RECIPES, info, metrics
from circuitbook.train import per_token_loss
from circuitbook.train.streams import batch_fn
from circuitbook.viz import heatmap  # hover a cell: its two tokens, value
from circuitbook.widgets import explore

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)
_ = torch.set_grad_enabled(False)  # we only read the model here
torch.set_num_threads(1)  # tiny models: one thread is fastest on 2 cores

# %% [markdown]
# The identities below compare two float computations within a worst-case rounding
# bound (Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 3), except one,
# which needs a tighter, probabilistic bound (its docstring says why); this folded cell
# counts the roundings each allows.

# %% tags=["hide-input"]
def logit_terms(d_model):
    """A logit: d_model products and the bias, computed twice."""
    return 2 * (d_model + 1)


def lookup_terms(d_model, d_vocab):
    """The lookup table stored as W_E / sqrt(d) and scaled back (2), the
    logits and the log-softmax's log-sum-exp (d_vocab + 3), on each side."""
    return 2 + 2 * (d_model + 1 + d_vocab + 3)


def record_terms(A, B, decimals, d_model, A_scale, lam=7.0):
    """One float32 row-centred correlation of A and B (the zoo build's) against
    the same in float64 (2^29 times finer, so its own rounding is negligible).
    The worst-case count (a sum of n terms: n + 1 roundings) gives about 0.001
    for toy-0l, as large as the gap between the records with and without b_U,
    so it could barely tell them apart. We count with Higham and Mary's
    probabilistic bound instead (SIAM J. Sci. Comput. 41, 2019): if the
    roundings are independent with mean zero, a sum of n products errs by at
    most lam sqrt(n) roundings of sum |a_i b_i|, except with probability at
    most 2 n exp(-lam^2 / 2) (below 1e-6 here, lam = 7 fixed beforehand).
    The cross sum of N = d_vocab^2 products: lam sqrt(N + 1) roundings of
    sum |a_i b_i| <= ||a|| ||b|| (Cauchy-Schwarz), the correlation's unit;
    each norm's relative error (the same) is halved by its square root;
    product, two roots, division: 3. Centring a row rounds its entries by
    lam sqrt(d_vocab + 1) eps max |M|, which moves the correlation by at most
    2 sqrt(N) lam sqrt(d_vocab + 1) max |M| / ||centre(M)|| roundings, per
    matrix; A = W_E W_U + b_U, formed on the build's machine, adds
    lam sqrt(d_model + 2) eps (|W_E| |W_U| + |b_U|) per entry in the same way
    (passed as A_scale). The record's printed decimals and its float32
    conversion add the rest."""
    d_vocab = A.shape[-1]
    n = d_vocab ** 2
    moved = sum(math.ceil(2 * d_vocab * lam * math.sqrt(d_vocab + 1)
                          * M.abs().max().item()
                          / (M - M.mean(-1, keepdim=True)).norm().item())
                for M in (A, B))
    formed = math.ceil(2 * d_vocab * lam * math.sqrt(d_model + 2) * A_scale
                       / (A - A.mean(-1, keepdim=True)).norm().item())
    eps = torch.finfo(torch.float32).eps
    return (2 * math.ceil(lam * math.sqrt(n + 1)) + 3 + moved + formed
            + math.ceil(0.5 * 10 ** -decimals / eps) + 1)


def shift_terms(L, d_vocab):
    """Adding a row constant rounds logits of size L once; softmax turns an
    absolute logit error into a relative probability error of up to twice
    that (counted in units of L), plus its own d_vocab + 3; two softmaxes."""
    return 2 * (2 * 2 * math.ceil(L) + d_vocab + 3)


def shifted_corr_terms(shifted, table):
    """The shifted table was rounded once in float32 (at most eps |shifted| per
    entry, twice that after centring); both correlations are then computed in
    float64, whose own rounding is negligible. A change delta of the centred
    table moves a correlation by at most 2 ||delta|| / ||centre(table)||, and
    ||delta|| <= sqrt(N) 2 eps max |shifted| with sqrt(N) = d_vocab. Plus
    one for the float64 work and one for storing a side in float32 (the
    precision the check is counted in)."""
    d_vocab = table.shape[-1]
    centred = table - table.mean(-1, keepdim=True)
    return 2 + math.ceil(4 * d_vocab * shifted.abs().max().item()
                         / centred.norm().item())


def solve_terms(W_E64, d_model):
    """The float32 table (d_model products and the bias) against a float64
    solve, exact to float64 rounding times W_E's condition number, counted
    in float32 units."""
    cond = torch.linalg.cond(W_E64).item()
    ratio = torch.finfo(torch.float64).eps / torch.finfo(torch.float32).eps
    return d_model + 1 + math.ceil(cond * W_E64.shape[0] * ratio)

# %% [markdown]
# ## Plain language
#
# A zero-layer transformer built like `toy-0l` looks up the current token's embedding
# (a vector of $d_\text{model}$ numbers) and multiplies it by the unembedding to get one
# logit per vocabulary entry. Nothing else happens: no position reads any other, and
# nothing reads the position either, since `toy-0l` adds its positional embedding only to
# the inputs of queries and keys ("shortformer" positions, chapter
# {doc}`03_residual_stream`) and with no layers there are none. So the prediction at a
# position depends on the token at that position *and nothing else*. Whatever the
# context, after token $a$ the model always predicts the same distribution. That is a fact
# about this architecture, not about every transformer: one that adds positions to the
# stream (as the Annotated Transformer does) would also predict from the position, and a
# final LayerNorm would normalise the embedding before the unembedding reads it (the next
# section).
#
# The best such a model can do is therefore to predict, for each token $a$, the
# **bigram** table $P(b \mid a)$: how often each token $b$ follows $a$ (on a finite
# training set, the best it can do on that set is the frequencies it saw, which differ a
# little from the chain's $P$; we come back to this below). That is the natural target,
# and it is not the same as the **unigram** distribution, the overall frequency $\pi(b)$ of each token, which would be the best
# prediction of a model that sees *no* token at all. A zero-layer model sees one, so it
# can, and does, do much better than unigram frequencies.
#
# So the model holds one table of logits with a row per current token: row $a$ is what
# comes out after token $a$ (its embedding times the unembedding, plus a bias that is the
# same for every row). A softmax turns a row of logits into probabilities,
# and softmax does not change if the same number is added to every logit of a row. So
# the best the model can do is match $\log P(b \mid a)$ *up to a constant per row*. When
# we compare the two tables we must therefore remove each row's mean first.
#
# "Can" needs one condition. $W_E W_U$ has rank at most $d_\text{model}$, and the bias
# $b_U$, one row shared by all rows, adds at most one more; a table of row-centred
# $\log P$ may need rank up to $d_\text{vocab} - 1$. `toy-0l` has
# $d_\text{model} = d_\text{vocab} = 64$, which is enough to hold any bigram table. It is
# more than necessary: each row of a row-centred table sums to zero ($M\mathbf{1} = 0$),
# so its rank is at most
# $d_\text{vocab} - 1 = 63$, and $d_\text{model} = 63$ would already hold any bigram table
# over 64 tokens (with no zero probabilities). Fewer dimensions suffice for a chain whose
# $\log P$ is a matrix of rank at most $d_\text{model}$, plus one row repeated in every
# row (the bias's part), plus a constant per row (which no softmax sees). When the table
# does not fit, the best the model can hold is not the
# least-squares low-rank approximation of $\log P$: training minimises the
# cross-entropy, which weights each current token by its frequency and each entry by its
# probability.

# %% [markdown]
# ## The Annotated Transformer view
#
# In the Annotated Transformer {cite}`rush2018annotated`, a decoder with no layers
# (`N = 0`) would still be more than `toy-0l`: the target embedding is `Embeddings`
# followed by `PositionalEncoding`, which adds a sinusoid for the position to the stream,
# and the `Decoder` ends with a LayerNorm (the code is pre-norm, chapter
# {doc}`11_layernorm`) before the `Generator` reads it. Its zero-layer logits would
# depend on the position and pass through a norm. `toy-0l` keeps only the two ends:
# `Embeddings` looks the token up and multiplies by $\sqrt{d_\text{model}}$, and
# `Generator` applies a linear map (with bias) and a log-softmax. We load the zoo model's
# weights into these two modules: the lookup
# table is $W_E / \sqrt{d_\text{model}}$ (to undo the scale) and `nn.Linear` stores its
# matrix transposed, so its weight is $W_U^\top$ (chapter {doc}`07_multi_head` explains
# that convention).

# %%
model = load("toy-0l")
cfg = model.cfg
d_model, d_vocab = cfg.d_model, cfg.d_vocab
print(f"layers: {cfg.n_layers}, d_model = {d_model}, d_vocab = {d_vocab}")

embed, generator = Embeddings(d_model, d_vocab), Generator(d_model, d_vocab)
embed.lut.weight.copy_(model.W_E / math.sqrt(d_model))
generator.proj.weight.copy_(model.W_U.T)
generator.proj.bias.copy_(model.b_U)

recipe = info("toy-0l")["recipe"]["data"]
chain = bigram_chain(d_vocab, seed=recipe["chain_seed"],
                     n_successors=recipe["n_successors"],
                     concentration=recipe["concentration"],
                     floor=recipe["floor"])
tokens = chain.sample(4, 32, seed=1)                  # [4, 32]
at_log_probs = generator(embed(tokens))
tl_log_probs = model(tokens).log_softmax(-1)
# scale: each logit's summands in absolute value, read off the same two modules
# with every weight made positive (over every token), or the log-probabilities
abs_embed, abs_generator = copy.deepcopy(embed), copy.deepcopy(generator)
for weight in [*abs_embed.parameters(), *abs_generator.parameters()]:
    weight.abs_()
logit_scale = abs_generator.proj(abs_embed(torch.arange(d_vocab))).max().item()
identity_close("Generator(Embeddings(t)) with toy-0l's weights gives the "
               "model's log-probabilities", at_log_probs, tl_log_probs,
               terms=lookup_terms(d_model, d_vocab),
               scale=max(logit_scale, tl_log_probs.abs().max().item()),
               chapter="14")
glue("chain_seed", recipe["chain_seed"])
glue("n_succ", recipe["n_successors"])

# %% [markdown]
# The chain is the one the model was trained on: the zoo records its recipe (chain seed
# {glue:text}`chain_seed`, each token with {glue:text}`n_succ` likely successors), so we
# rebuild it from there rather than guess. Every token also has a small probability of
# being followed by any token at all, so $\log P$ is finite everywhere.

# %% [markdown]
# ### Exercise 14.1: zero-layer logits
#
# Before we write the model down as a formula, write it as code from the description
# above. Write `zero_layer_logits(tokens, W_E, W_U, b_U)` returning the logits
# `[batch, pos, d_vocab]` of a zero-layer model for tokens `[batch, pos]`. (Here
# $d_\text{model} = d_\text{vocab}$, so the shapes will not catch a wrong order of
# multiplication.)

# %% tags=["exercise"]
def zero_layer_logits(tokens, W_E, W_U, b_U):
    """tokens: [batch, pos] -> logits [batch, pos, d_vocab]."""
    # BEGIN SOLUTION
    return W_E[tokens] @ W_U + b_U
    # END SOLUTION


checks.ch14_ex1(zero_layer_logits)

# %% tags=["hide-input"]
mine = zero_layer_logits(tokens, model.W_E, model.W_U, model.b_U)
identity_close("zero_layer_logits reproduces toy-0l on chain samples", mine,
               model(tokens), terms=logit_terms(d_model), scale=logit_scale,
               chapter="14")

# %% [markdown]
# ## The circuit view
#
# In TransformerLens's row-vector convention the zero-layer model `toy-0l` (shortformer
# positions, no LayerNorm) is
#
# $$\text{logits}_p = W_E[t_p]\, W_U + b_U ,$$
#
# so the logits after token $a$ are row $a$ of the $d_\text{vocab} \times d_\text{vocab}$
# matrix $W_E W_U + b_U$ (Elhage et al. {cite}`elhage2021mathematical` write $W_U W_E$
# in their column-vector convention; it is the transpose). `circuitbook.circuits`
# calls $W_E W_U$ the *direct path*; chapter {doc}`13_path_expansion` counts $b_U$ with
# the direct path, and `direct_path` returns $W_E W_U$ without it. Running the model on
# all 64 tokens at once reads the whole table:

# %%
table = direct_path(model).AB + model.b_U            # [d_vocab, d_vocab]
every_token = torch.arange(d_vocab)[None]            # [1, 64]
run = model(every_token)[0]
identity_close("row a of W_E W_U + b_U is the model's logits after token a",
               run, table, terms=logit_terms(d_model), scale=logit_scale,
               chapter="14")

# %% [markdown]
# ## Learned table against the true one
#
# Side by side, after removing each row's mean: the true $\log P$ (left) and the learned
# logit table $W_E W_U + b_U$ (right). The theory compares the model's *logits* with
# $\log P$, and the logits include the bias: $b_U$ is the same in every row, so centring
# the rows does not remove it, and we show below that how the model splits its table
# between $W_E W_U$ and $b_U$ is arbitrary. So the comparison is with the sum. Each row
# has a few bright entries, the likely successors of that
# token; every other entry of $\log P$ is the same small floor. We list the tokens in the
# order in which the chain's first successor visits them ($a$, its first successor, that
# token's first successor, ...: one cycle through all 64 tokens for this chain). The chain
# is built so that in this order every kind of successor lies on a diagonal stripe.

# %%
log_P = chain.log_transition()
W = model.W_E @ model.W_U                 # the direct path alone (without b_U)
logits = W + model.b_U                    # the model's logit table, as compared

order = [0]
while len(order) < d_vocab:
    order.append(int(chain.successors[order[-1], 0]))
order = torch.tensor(order)
assert sorted(order.tolist()) == list(range(d_vocab))   # a single cycle

# %% tags=["hide-input"]
chain_order = order.tolist()
fig = heatmap(torch.stack([(M - M.mean(-1, keepdim=True))[order][:, order]
                          for M in (log_P, logits)]),
              chain_order, chain_order,
              panel_titles=["true log P(b | a), row-centred",
                            "learned W_E W_U + b_U, row-centred"],
              x_title="next token b (chain order)",
              y_title="current token a (chain order)",
              zmin=-5, zmax=8, colorscale="Viridis", value_format=".2f")
fig.figure.update_layout(coloraxis_colorbar_title_text="logit minus row mean")
fig

# %% [markdown]
# To put a number on the agreement we use a *row-centred correlation*: one correlation
# of all the entries together, made blind to what the softmax ignores. Logits are only
# defined up to a constant per row, so a model that added 5 to every logit after token 3
# would make the same predictions, and the score must not punish it.
#
# ### Exercise 14.2: row-centred correlation
#
# Write `row_centred_correlation(A, B)` for two matrices of the same shape, returning a
# scalar tensor in $[-1, 1]$: one correlation over all the entries, which does not change
# when a constant is added to any row of $A$ or of $B$. Make it blind to that, and
# otherwise only to multiplying $A$ or $B$ by a positive number, which no correlation can
# see (that one does change the predictions: it is a change of temperature, so we measure
# the scale separately below). A constant added to a *column* changes the predictions, so
# it should change the score.

# %% tags=["exercise"]
def row_centred_correlation(A, B):
    """A scalar tensor in [-1, 1]: one correlation over all
    entries, unchanged by a constant added to any row of A or of B, and by
    scaling A or B by a positive number, but changed by a constant added to a
    column."""
    # BEGIN SOLUTION
    a = A - A.mean(-1, keepdim=True)
    b = B - B.mean(-1, keepdim=True)
    return (a * b).sum() / (a.norm() * b.norm())
    # END SOLUTION


checks.ch14_ex2(row_centred_correlation)

# %% [markdown]
# How high must the correlation be before it says anything? Two other tables set the
# scale. One has nothing to do with this chain: the true table with its tokens relabelled
# at random (the same permutation for rows and columns, so it is still a chain of the same
# kind), 1000 times. The other knows which {glue:text}`n_succ` successors each token has
# and nothing about their probabilities: the chain with equal weights on each row's
# successors (its row-centred $\log$ is a multiple of the row-centred indicator of the
# successors, so the indicator itself scores the same).

# %% tags=["hide-input"]
def centre(M):
    """Subtract each row's mean (the centring used from here on)."""
    return M - M.mean(-1, keepdim=True)


corr = row_centred_correlation(logits, log_P)
gen = torch.Generator().manual_seed(0)
shuffled = []
for _ in range(1000):
    perm = torch.randperm(d_vocab, generator=gen)
    shuffled.append(row_centred_correlation(logits, log_P[perm][:, perm]))
observation("for scale: the row-centred correlation of the learned logit "
            "table with log P; the largest |value| with the tokens of log P "
            "relabelled (1000 permutations)",
            f"{corr:.4f}; {torch.stack(shuffled).abs().max():.4f}",
            chapter="14")
recorded = metrics("toy-0l")["corr_logits_logP"]      # 6 decimals
# the zoo's float32 computation against ours in float64 (see record_terms)
ours64 = row_centred_correlation(logits.double(), log_P.double())
record_n = record_terms(logits, log_P, decimals=6, d_model=d_model,
                        A_scale=logit_scale)
identity_close("it matches the value recorded when the zoo model was built",
               ours64, torch.tensor(recorded), terms=record_n, scale=1.0,
               chapter="14")
observation("that bound; the record of the same correlation for W_E W_U "
            "alone (no b_U) differs from ours by",
            f"{rounding_bound(record_n, 1.0):.6f}; "
            f"{abs(ours64 - metrics('toy-0l')['corr_WEWU_logP']):.6f}",
            chapter="14")
corr_direct = row_centred_correlation(W, log_P)
observation("the same correlation for W_E W_U alone, without b_U",
            f"{corr_direct:.4f} (with b_U: {corr:.4f})", chapter="14")

# the table that knows only each row's successors: equal weights on them
likely = torch.zeros(d_vocab, d_vocab, dtype=torch.bool)
likely.scatter_(1, chain.successors, True)
n_succ = recipe["n_successors"]
support = (torch.where(likely, (1 - recipe["floor"]) / n_succ, 0.0)
           + recipe["floor"] / d_vocab)                  # rows sum to 1
corr_support = row_centred_correlation(support.log(), log_P)
observation("row-centred correlation with log P: the model; the table that "
            "knows only the successors (equal weights); its indicator",
            f"{corr:.4f}; {corr_support:.4f}; "
            f"{row_centred_correlation(likely.float(), log_P):.4f}",
            chapter="14")
# within each row's successors: centre over those entries only
lg_rows = logits[likely].view(d_vocab, n_succ)          # row a's successors
lp_rows = log_P[likely].view(d_vocab, n_succ)
within = row_centred_correlation(lg_rows, lp_rows)
g_within = torch.Generator().manual_seed(2)
within_null = []
for _ in range(1000):
    perm = torch.rand(d_vocab, n_succ, generator=g_within).argsort(-1)
    within_null.append(row_centred_correlation(lg_rows,
                                               lp_rows.gather(1, perm)))
finding("within each row's successors (row-centred over them), the logits "
        "correlate with log P (a low bar: see the column-preference table below)",
        within, null=Null.draws(
            "log P shuffled among each row's successors (the support kept, "
            "the weights lost), 1000 draws", torch.stack(within_null)),
        chapter="14")


def weighted_kl(log_Q):
    """sum_a pi(a) KL(P(. | a) || Q(. | a)) for a table of log-probabilities."""
    P64 = chain.transition.double()
    return (chain.stationary().double()
            * (P64 * (P64.log() - log_Q.double())).sum(-1)).sum().item()


kl_model = weighted_kl(logits.log_softmax(-1))
kl_support = weighted_kl(support.log())
observation("sum_a pi(a) KL(P(. | a) || row a) in nats: the model; the "
            "equal-weights table", f"{kl_model:.4f}; {kl_support:.4f}",
            chapter="14")
# the successors plus one preference per column, no weights of a row's own:
# logits alpha * likely + u_b, fit by the expected cross-entropy under the
# chain (which is the weighted KL plus a constant; convex, L-BFGS, < 1 s)
P64, pi64 = chain.transition.double(), chain.stationary().double()
alpha = torch.zeros((), dtype=torch.float64, requires_grad=True)
u_col = torch.zeros(d_vocab, dtype=torch.float64, requires_grad=True)
with torch.enable_grad():
    lbfgs = torch.optim.LBFGS([alpha, u_col], max_iter=500,
                              tolerance_grad=1e-12, tolerance_change=1e-14,
                              line_search_fn="strong_wolfe")

    def col_loss():
        lbfgs.zero_grad()
        ce = -(pi64[:, None] * P64
               * (alpha * likely.double() + u_col).log_softmax(-1)).sum()
        ce.backward()
        return ce

    lbfgs.step(col_loss)
    col_loss()
assert max(alpha.grad.abs().item(), u_col.grad.abs().max().item()) < 1e-6
col_table = (alpha * likely.double() + u_col).detach()
within_col = row_centred_correlation(col_table[likely].view(d_vocab, n_succ),
                                     lp_rows.double())
kl_col = weighted_kl(col_table.log_softmax(-1))
corr_col = row_centred_correlation(col_table, log_P.double())
observation("the table of the successors plus one preference per column "
            "(fit by cross-entropy): within-row correlation; weighted KL "
            "(nats); row-centred correlation. The model: within-row; KL",
            f"{within_col:.3f}; {kl_col:.3f}; {corr_col:.3f}. "
            f"{within:.3f}; {kl_model:.4f}", chapter="14")
glue("within_col", within_col.item())
glue("kl_col", kl_col)
glue("corr", corr.item())
glue("corr_direct", corr_direct.item())
glue("corr_null_max", torch.stack(shuffled).abs().max().item())
glue("corr_support", corr_support.item())
glue("within_corr", within.item())
glue("within_null_max", torch.stack(within_null).abs().max().item())
glue("kl_model", kl_model)
glue("kl_support", kl_support)
glue("share_entries", 100 * (~likely).float().mean().item())

# %% [markdown]
# The model's table correlates {glue:text}`corr:.3f` with $\log P$. For scale, a
# relabelled chain reaches at most {glue:text}`corr_null_max:.2f`, but that bar is low:
# any table that has learned which transitions are likely clears it. The table that knows
# only the successors scores {glue:text}`corr_support:.3f`, more than the model. This
# correlation is dominated by the contrast between likely and rare entries: the rare ones
# are {glue:text}`share_entries:.2f`% of the table and all share one value of $\log P$,
# far below almost all the likely ones. So it shows that the model knows *which*
# transitions are likely, not that it learned *how* likely; and the model's loose rare
# entries, measured below, pull it down. Two other measures look at the probabilities: a
# test within each row's successors, and a divergence. Within each row's successors
# (centred over them), the logits correlate {glue:text}`within_corr:.3f` with $\log P$,
# while shuffling $\log P$ among each row's successors, which keeps the support and loses
# the weights, gives at most {glue:text}`within_null_max:.2f` in 1000 draws. That bar is
# low too: the shuffle also loses how common each token is overall, and a successor that
# is likely in its row tends to be common overall, since $\pi(b) = \sum_a \pi(a) P(b \mid
# a)$. A table that knows the successors plus one preference per column, with logits
# $\alpha$ on each row's successors plus $u_b$ for every next token $b$ ($\alpha$ and the
# $u_b$ fit by cross-entropy to the chain), has no weights of any row's own, yet within the
# rows it correlates {glue:text}`within_col:.2f` with $\log P$. And the divergence of the
# model's rows from the chain's, weighted by how often each current token occurs,
# $\sum_a \pi(a)\, \mathrm{KL}(P(\cdot \mid a) \,\|\, \text{row } a)$, is
# {glue:text}`kl_model:.4f` nats, against {glue:text}`kl_col:.3f` for that table (the best
# of its form in this divergence) and {glue:text}`kl_support:.3f` for the equal-weights
# table. So the model's table holds more than the successors and a preference per column:
# something of how likely each successor is in its own row. These are comparisons on one
# model and one chain, not a test.
#
# Now the reason for centring, demonstrated. We add a random constant to every row of
# the model's logit table. Its predictions do not change at all; a correlation without
# centring drops; the row-centred one does not move.

# %% tags=["hide-input"]
g = torch.Generator().manual_seed(0)
shifts = 5 * torch.randn(d_vocab, 1, generator=g)
shifted = logits + shifts


def cosine(A, B):
    return (A * B).sum() / (A.norm() * B.norm())


plain, plain_shifted = cosine(logits, log_P), cosine(shifted, log_P)
identity_close("adding a constant to each row changes no prediction",
               shifted.softmax(-1), logits.softmax(-1),
               terms=shift_terms(shifted.abs().max().item(), d_vocab),
               scale=1.0, chapter="14")
observation("...but moves the uncentred correlation",
            f"{plain:.3f} -> {plain_shifted:.3f}", chapter="14")
identity_close("...and leaves the row-centred correlation unchanged",
               row_centred_correlation(shifted.double(), log_P.double()),
               row_centred_correlation(logits.double(), log_P.double())
               .float(), terms=shifted_corr_terms(shifted, logits), scale=1.0,
               chapter="14")
glue("plain", plain.item())
glue("plain_shifted", plain_shifted.item())

# %% [markdown]
# The uncentred score went from {glue:text}`plain:.2f` to {glue:text}`plain_shifted:.2f`
# for two models that make identical predictions; the row-centred correlation stays at
# {glue:text}`corr:.3f`. (Centring the *columns* instead would not help: it leaves the
# per-row constants in, and it removes per-column constants, which do change which tokens
# are predicted.)
#
# Where is the remaining disagreement? The theory fixes the comparison completely: the
# centred logits should *equal* the centred $\log P$, with no scale to fit. So the
# disagreement is the difference of the two centred tables, entry by entry. Does it sit
# in the few likely successors of each row or in the many rare transitions? If the fit
# were equally good everywhere, which entries of a row are the likely ones would not
# matter; the null draws that label at random, the same number of entries in each row,
# and the test counts a share that departs from it in either direction.

# %% tags=["hide-input"]
train_recipe = info("toy-0l")["recipe"]["train"]
Wc, Lc = centre(logits), centre(log_P)
residual = Wc - Lc                        # the theory's scale: 1
r2 = residual.pow(2)
share_rare = r2[~likely].sum() / r2.sum()
labels = []
for _ in range(1000):
    pick = torch.rand(d_vocab, d_vocab, generator=gen).argsort(-1)
    fake = torch.zeros_like(likely).scatter_(
        1, pick[:, :recipe["n_successors"]], True)
    labels.append(r2[~fake].sum() / r2.sum())
finding("the rare (floor) transitions hold a different share of the squared "
        "disagreement than their share of the entries (either side)",
        share_rare, null=Null.draws(
            "likely successors relabelled at random in each row, 1000 draws",
            torch.stack(labels)), alternative="two-sided", chapter="14")
per_entry = (r2[~likely].mean() / r2[likely].mean()).item()
# least squares of the centred table on the centred log P (theory: slope 1),
# and the other regression, of log P on the table
fit_slope = ((Wc * Lc).sum() / (Lc * Lc).sum()).item()
reverse = ((Wc * Lc).sum() / (Wc * Wc).sum()).item()
r2_rev = (reverse * Wc - Lc).pow(2)
# the two slopes multiply to the squared correlation, by construction:
# <W,L>/<L,L> * <W,L>/<W,W> = r^2. In float64 (three sums of N products,
# one centring each side, the roots and divisions)
Wc64, Lc64 = Wc.double(), Lc.double()
cross = (Wc64 * Lc64).sum()
identity_close("the reverse slope is r^2 over the forward slope",
               cross / (Wc64 * Wc64).sum(),
               row_centred_correlation(Wc64, Lc64) ** 2
               / (cross / (Lc64 * Lc64).sum()),
               terms=3 * (d_vocab ** 2 + 1) + 2 * (d_vocab + 1) + 8,
               scale=1.0, chapter="14")
observation("least-squares slope of the centred logits on the centred log P; "
            "of log P on the logits", f"{fit_slope:.3f}; {reverse:.3f}",
            chapter="14")
share_rev = (r2_rev[~likely].sum() / r2_rev.sum()).item()
observation("the rare entries' share of the squared residual if the table "
            "is first scaled by the second slope", f"{share_rev:.3f}",
            chapter="14")
glue("fit_slope", fit_slope)
glue("reverse_slope", reverse)
glue("share_rare_rev", 100 * share_rev)
glue("p_likely", chain.transition[likely].mean().item())
curvature = chain.transition * (1 - chain.transition)     # P (1 - P)
glue("curvature_ratio", (curvature[likely].mean()
                         / curvature[~likely].mean()).item())
# sampling noise: the training data rebuilt exactly (every batch the zoo drew,
# counted as transition pairs; about 2 s), and its table of frequencies, the
# best any table can do on that data
batches = batch_fn(RECIPES["toy-0l"])
counts = torch.zeros(d_vocab * d_vocab, dtype=torch.long)
for step in range(train_recipe["steps"]):
    x = batches(step)                                     # [64, 64]
    counts += torch.bincount((x[:, :-1] * d_vocab + x[:, 1:]).flatten(),
                             minlength=d_vocab * d_vocab)
counts = counts.view(d_vocab, d_vocab).double()
assert counts.min() > 0                                   # log finite
emp = (counts / counts.sum(-1, keepdim=True)).log()
res_emp = centre(emp) - centre(log_P.double())
r2_emp = res_emp.pow(2)
# a likely entry's centred error: its own error minus its row's mean error
dev = emp - log_P.double()
row_part = dev.mean(-1, keepdim=True).expand_as(dev)
observation("the frequency table's likely entries, root mean square: their "
            "own error; their row's mean error",
            f"{dev[likely].pow(2).mean().sqrt():.3f}; "
            f"{row_part[likely].pow(2).mean().sqrt():.3f}", chapter="14")
glue("emp_own_likely", dev[likely].pow(2).mean().sqrt().item())
glue("emp_rowmean_likely", row_part[likely].pow(2).mean().sqrt().item())


def rms(r2_table, mask):
    return r2_table[mask].mean().sqrt().item()


observation("training data's frequency table against log P, root mean "
            "square of the centred residual: rare; likely; the ratio of "
            "their squares", f"{rms(r2_emp, ~likely):.3f}; "
            f"{rms(r2_emp, likely):.3f}; "
            f"{(r2_emp[~likely].mean() / r2_emp[likely].mean()):.1f}",
            chapter="14")
# the null for the model's whole error: the frequency table of a fresh sample
# with the training data's number of visits to each current token (rows drawn
# multinomially from the true chain), 200 draws
rng = np.random.default_rng(0)
P_np = chain.transition.double().numpy()
fresh = torch.from_numpy(rng.multinomial(
    counts.sum(-1).long().numpy(), P_np / P_np.sum(-1, keepdims=True),
    size=(200, d_vocab))).double().clamp_min(0.5)  # a rare 0 count: 0.5
fresh_log = (fresh / fresh.sum(-1, keepdim=True)).log()
fresh_res = centre(fresh_log) - centre(log_P.double())
finding("the model's table misses log P by more than sampling noise of the "
        "training data's size (root mean square, all entries)",
        r2.mean().sqrt(), null=Null.draws(
            "frequency tables of fresh samples with the training data's "
            "visits per token, 200 draws", fresh_res.pow(2).mean((-2, -1))
            .sqrt()), chapter="14")
likely_corr = torch.corrcoef(torch.stack([residual[likely],
                                          log_P[likely]]))[0, 1].item()
# is that correlation more than noise? The null shuffles log P among each
# row's likely entries (which keeps every row's residuals and log P values,
# only not which goes with which), 1000 draws
res_rows = residual[likely].view(d_vocab, n_succ)
lp_rows = log_P[likely].view(d_vocab, n_succ)
g_corr = torch.Generator().manual_seed(1)
shuffled_likely = []
for _ in range(1000):
    perm = torch.rand(d_vocab, n_succ, generator=g_corr).argsort(-1)
    shuffled_likely.append(torch.corrcoef(torch.stack([
        res_rows.flatten(), lp_rows.gather(1, perm).flatten()]))[0, 1])
likely_test = null_test(likely_corr, Null.draws(
    "log P shuffled among each row's likely entries, 1000 draws",
    torch.stack(shuffled_likely)), alternative="two-sided")
finding("the likely entries' residual correlates with their log P (either "
        "sign)", likely_test, chapter="14")
glue("likely_corr_p", likely_test.p)
observation("squared residual per entry, rare over likely: the training "
            "data's frequency table; the model",
            f"{r2_emp[~likely].mean() / r2_emp[likely].mean():.1f}; "
            f"{per_entry:.1f}", chapter="14")
# the model's residual against the frequency table's, entry by entry: how much
# of the model's error follows the training data's own noise
res64 = residual.double()
follow = {name: np.corrcoef(res64[mask].numpy(), res_emp[mask].numpy())[0, 1]
          for name, mask in (("rare", ~likely), ("likely", likely))}
observation("correlation of the model's centred residual with the frequency "
            "table's: rare entries; likely entries",
            f"{follow['rare']:.3f}; {follow['likely']:.3f}", chapter="14")
glue("follow_rare", float(follow["rare"]))
glue("follow_share_rare", float(100 * follow["rare"] ** 2))
glue("follow_share_likely", float(100 * follow["likely"] ** 2))
# each row's error against how often its current token occurs
log_pi = chain.stationary().double().log()
rare_frac = (~likely).double()


def row_rms(r2_table):
    """Per row: root mean square of the rare entries' centred residual."""
    return ((r2_table.double() * rare_frac).sum(-1)
            / rare_frac.sum(-1)).sqrt()


def on_log_pi(y):
    """Least-squares slope of log y on log pi(a) across the rows, and the
    correlation of the two."""
    x, ly = log_pi - log_pi.mean(), y.log() - y.log().mean()
    return ((x * ly).sum() / (x * x).sum()).item(), \
        ((x * ly).sum() / (x.norm() * ly.norm())).item()


rows_model, rows_emp = row_rms(r2), row_rms(r2_emp)
slope_model, rcorr_model = on_log_pi(rows_model)
slope_emp, rcorr_emp = on_log_pi(rows_emp)
observation("per row, the rare entries' centred residual (root mean square): "
            "its range over the rows; log of it against log pi(a), slope and "
            "correlation: the model; the frequency table",
            f"{rows_model.min():.2f} to {rows_model.max():.2f}; "
            f"{slope_model:.2f} and {rcorr_model:.2f}; "
            f"{slope_emp:.2f} and {rcorr_emp:.2f}", chapter="14")
glue("row_rms_min", rows_model.min().item())
glue("row_rms_max", rows_model.max().item())
glue("row_slope", slope_model)
glue("row_corr", rcorr_model)
glue("emp_row_slope", slope_emp)
glue("emp_row_corr", rcorr_emp)
glue("likely_corr", likely_corr)
glue("n_transitions", int(counts.sum().item()))
glue("min_count", int(counts.min().item()))
glue("mean_rare_count", counts[~likely].mean().item())
glue("emp_rms_rare", rms(r2_emp, ~likely))
glue("emp_rms_likely", rms(r2_emp, likely))
glue("emp_ratio", (r2_emp[~likely].mean() / r2_emp[likely].mean()).item())
glue("emp_share_rare", 100 * (r2_emp[~likely].mean()
                              / r2[~likely].mean()).item())
glue("emp_share_likely", 100 * (r2_emp[likely].mean()
                                / r2[likely].mean()).item())
glue("fresh_rms_max", fresh_res.pow(2).mean((-2, -1)).sqrt().max().item())
glue("rms_all", r2.mean().sqrt().item())
glue("train_steps", train_recipe["steps"])
glue("train_lr", train_recipe["lr"])
glue("rms_rare", r2[~likely].mean().sqrt().item())
glue("rms_likely", r2[likely].mean().sqrt().item())
glue("share_rare", 100 * share_rare.item())
glue("per_entry", per_entry)
glue("floor_p", recipe["floor"] / d_vocab)
glue("pi_min", chain.stationary().min().item())
glue("pi_max", chain.stationary().max().item())
glue("pi_entropy", -(chain.stationary() * chain.stationary().log()).sum()
     .item())

# %% [markdown]
# {glue:text}`share_rare:.1f`% of the squared residual sits in the rare transitions,
# each of probability {glue:text}`floor_p:.7f`, which are
# {glue:text}`share_entries:.2f`% of the entries: per entry, their squared residual is
# {glue:text}`per_entry:.1f` times that of the likely successors (root mean square
# {glue:text}`rms_rare:.2f` against {glue:text}`rms_likely:.2f`, in logits). The model
# fits the rare transitions *worse*, and the null shows that this is not a matter of
# which entries we happened to call likely.
#
# Two mechanisms predict that direction. The loss: near the optimum, moving the logit of
# $b$ after $a$ by a small $\delta$ raises the expected cross-entropy by about $\pi(a)\, p
# (1 - p)\, \delta^2 / 2$ with $p = P(b \mid a)$ (the curvature of the softmax's log-loss
# in one logit). A likely successor has probability {glue:text}`p_likely:.3f` on average,
# and its $p(1-p)$ is {glue:text}`curvature_ratio:.0f` times a rare one's, so the same
# error costs that many times more there. And the finite training sample: the zoo's
# training data can be rebuilt exactly ({glue:text}`n_transitions:,d` transitions; each
# rare transition occurs {glue:text}`mean_rare_count:.0f` times on average, at least
# {glue:text}`min_count`), and its own table of transition frequencies, the best any table
# can do on that data, misses the centred $\log P$ by {glue:text}`emp_rms_rare:.3f` on the
# rare entries and {glue:text}`emp_rms_likely:.3f` on the likely ones (root mean square),
# a ratio of {glue:text}`emp_ratio:.0f` in squared error per entry. (The likely entries'
# error there comes mostly from their row's mean: centring a row passes on the mean error
# of its noisy rare entries, {glue:text}`emp_rowmean_likely:.3f` against
# {glue:text}`emp_own_likely:.3f` for a likely entry's own error.) The model's ratio is
# {glue:text}`per_entry:.1f`, and its errors are larger in both classes: it misses by
# {glue:text}`rms_rare:.2f` and {glue:text}`rms_likely:.2f`. If the model's error were the
# data's sampling noise plus an independent error, that noise would make up
# {glue:text}`emp_share_rare:.0f`% of its squared error on the rare entries and
# {glue:text}`emp_share_likely:.0f`% on the likely ones. Measured directly, the part is
# smaller still: on the rare entries the model's residual correlates only
# {glue:text}`follow_rare:.2f` with the frequency table's, so the data's own noise
# explains about {glue:text}`follow_share_rare:.0f`% of its variance (about
# {glue:text}`follow_share_likely:.0f`% on the likely entries). Over all entries the model
# misses by {glue:text}`rms_all:.2f`, while the frequency tables of 200 fresh samples of
# the same size miss by at most {glue:text}`fresh_rms_max:.3f`. The likely entries' error
# is not only at random either: their residual correlates {glue:text}`likely_corr:.2f`
# with $\log P$, more than shuffling $\log P$ among each row's likely entries gives ($p$ =
# {glue:text}`likely_corr_p:.3f`, 1000 shuffles).
#
# So something else sets most of the error, and it is not spread evenly: it grows as the
# current token gets rarer. Per row, the rare entries' error (root mean square) runs from
# {glue:text}`row_rms_min:.2f` to {glue:text}`row_rms_max:.2f`, and across the 64 rows the
# least-squares slope of its log on $\log \pi(a)$ is {glue:text}`row_slope:.2f`
# (correlation {glue:text}`row_corr:.2f`). The frequency table's own error does the same,
# slope {glue:text}`emp_row_slope:.2f` (correlation {glue:text}`emp_row_corr:.2f`), close
# to the $-1/2$ of sampling noise: a transition seen $c$ times has a log-frequency that
# errs by about $1/\sqrt{c}$, and $c$ grows in proportion to $\pi(a)$. The curvature
# $\pi(a)\, p (1 - p)$ above is smaller for a rarer current token too, so the loss holds
# such rows less tightly. These are observations on one model and one chain; we have not
# tested what adds the rest of the error. Candidates include rows that see little gradient
# being further from their optimum when training stopped (the zoo trained this model with
# Adam at a constant learning rate of {glue:text}`train_lr` for {glue:text}`train_steps`
# steps), and the noise of constant-learning-rate training acting like a smaller sample.
#
# Why not first fit the best single scale? Because which scale is "best" depends on the
# direction of the regression, and one direction reverses the conclusion. Regressing
# $\log P$ on the table gives {glue:text}`reverse_slope:.3f`, and after shrinking the
# table by it the rare entries hold only {glue:text}`share_rare_rev:.1f`% of the squared
# residual, less than their share. That slope below 1 is regression dilution, and here it
# is an identity, not a hypothesis: the two least-squares slopes multiply to the squared
# correlation (checked above), so the reverse slope is $r^2$ divided by the forward one,
# with $r$ = {glue:text}`corr:.3f`. Error in the table that does not follow $\log P$
# lowers $r$ and so this slope, and the loose rare entries hold most of that error
# ({glue:text}`share_rare:.1f`% of it). The shrinking itself then opens a gap at the
# large likely entries. The regression of the table on $\log P$, the direction in which
# the theory predicts a slope of 1, gives {glue:text}`fit_slope:.3f`, and the same picture
# as above.

# %% [markdown]
# ## Bigram, not unigram
#
# Three descriptions of the logit table $W_E W_U + b_U$ (Elhage et al. write it $W_U W_E$,
# for a model with no bias and with column vectors) are tempting: that it is learned to approximate the
# unigram distribution; that it is a bigram model; and that entry $(s, d)$ is proportional
# to $\log P(d \mid s)$. The second is the right one, and the third is not: the logits
# (with $b_U$) match $\log P$ up to a constant *added* to each row, which is not
# proportionality. (After that constant is removed, the factor between the two is 1, up to
# the fit's error: the least-squares slope of the centred logits on the centred $\log P$
# is {glue:text}`fit_slope:.3f`.) The model tells us which of the first two holds. If it
# had learned only how common each token is, every row of its prediction table would be
# the same distribution, the unigram (stationary) distribution $\pi$ of the chain. Instead
# its rows are almost disjoint, as the true chain's are: two different current tokens give
# predictions that differ in most of their mass.

# %%
Q = logits.softmax(-1)                           # the model's P(b | a)
pi = chain.stationary()                          # unigram frequencies


def tv(p, q):
    """Total variation distance: half the L1 distance (0 = same,
    1 = disjoint)."""
    return 0.5 * (p - q).abs().sum(-1)


off = ~torch.eye(d_vocab, dtype=torch.bool)
P_true = chain.transition
off_diag = tv(Q[:, None], Q[None])[off].mean()
off_diag_true = tv(P_true[:, None], P_true[None])[off].mean()
to_unigram, to_unigram_true = tv(Q, pi).mean(), tv(P_true, pi).mean()
mixture = pi @ Q                                 # sum_a pi(a) Q(. | a)
observation("mean TV distance between two rows: the model, the true chain",
            f"{off_diag:.3f}, {off_diag_true:.3f}", chapter="14")
observation("mean TV distance of a row from the unigram pi: the model, the "
            "true chain", f"{to_unigram:.3f}, {to_unigram_true:.3f}",
            chapter="14")
observation("averaged with weights pi, the model's rows against pi (TV; the "
            "true chain's give pi exactly)", f"{tv(mixture, pi):.3f}",
            chapter="14")
glue("off_diag", off_diag.item())
glue("off_diag_true", off_diag_true.item())
glue("to_unigram", to_unigram.item())
glue("mix_tv", tv(mixture, pi).item())

# %% [markdown]
# On average two rows differ in {glue:text}`off_diag:.2f` of their probability mass
# (total variation distance, 0 for equal distributions and 1 for disjoint ones; the
# true chain's rows differ in {glue:text}`off_diag_true:.2f`), and a
# row differs from the unigram distribution in {glue:text}`to_unigram:.2f`. The unigram
# distribution is in the model only as an average: weighting the rows by how often each
# current token occurs gives back $\pi$ to within {glue:text}`mix_tv:.3f`, because its
# rows are close to the chain's and the chain's stationary distribution satisfies
# $\pi P = \pi$.
#
# The bias $b_U$ on its own means nothing here. Since $W_E$ is invertible,
# there is a direction $w$ in the residual stream with $W_E w = (1, \dots, 1)^\top$, and
# $W_U + w\, b_U$ with no bias at all gives exactly the same logits. The split between
# $W_E W_U$ and $b_U$ is arbitrary; only their sum means anything, which is why we
# compared the sum with $\log P$ above. (For $W_E W_U$ alone the row-centred correlation
# is {glue:text}`corr_direct:.4f`, against {glue:text}`corr:.4f` with $b_U$.)

# %%
W_E64, W_U64 = model.W_E.double(), model.W_U.double()
w = torch.linalg.solve(W_E64, torch.ones(d_vocab, dtype=torch.float64))
no_bias = W_E64 @ (W_U64 + w[:, None] * model.b_U.double())
identity_close("the same logits with b_U folded into W_U (and no bias)",
               no_bias, logits, terms=solve_terms(W_E64, d_model),
               scale=logit_scale, chapter="14")

# %% [markdown]
# Finally the loss, on fresh samples of the chain (the held-out rows the zoo uses). The
# floor for any predictor, whatever context it reads, is the chain's entropy rate,
# $\sum_a \pi(a) H(P(\cdot \mid a))$: the chain is Markov, so tokens before the current
# one tell nothing more about the next. (Strictly, that is the floor on long samples:
# ours start each sequence with a uniform token rather than one drawn from $\pi$, which
# puts the expected loss of the true chain on them at {glue:text}`floor_sampled:.4f`, a
# little above the rate.) A unigram predictor (always $\pi$) and a uniform guess do far
# worse.

# %%
held_out = chain.sample(512, cfg.n_ctx, seed=999_983)
per_seq = per_token_loss(model(held_out), held_out).mean(-1)     # [512]
uni_seq = -pi.log()[held_out[:, 1:]].mean(-1)
loss, unigram_loss = per_seq.mean().item(), uni_seq.mean().item()
floor = chain.entropy()
# the true chain's expected loss on these samples: the first token uniform,
# the state distribution at position t is uniform @ P^t, and position t's
# loss is the entropy of the next token's row, averaged over that state
P64 = chain.transition.double()
row_entropy = -(P64 * P64.clamp_min(1e-300).log()).sum(-1)        # [d_vocab]
state = torch.full((d_vocab,), 1.0 / d_vocab, dtype=torch.float64)
floor_terms = []
for _ in range(cfg.n_ctx - 1):
    floor_terms.append(state @ row_entropy)
    state = state @ P64
glue("floor_sampled", torch.stack(floor_terms).mean().item())
chance = math.log(d_vocab)
observation("the model's loss above the chain's entropy floor (nats)",
            f"{loss - floor:.3f}", chapter="14")


def paired_interval(diff, n_boot=2000):
    """95% percentile bootstrap interval of the mean of per-sequence paired
    differences (both losses on the same sequences), resampling the
    sequences n_boot times with the page's generator."""
    boot = diff[torch.randint(0, len(diff), (n_boot, len(diff)),
                              generator=gen)].mean(-1)
    return boot.quantile(torch.tensor([0.025, 0.975])).tolist()


gap = uni_seq - per_seq
lo, hi = paired_interval(gap)
observation("a unigram predictor's loss minus the model's on held-out "
            "samples (nats per token; 95% bootstrap interval over 512 "
            "sequences, 2000 resamples)",
            f"{gap.mean():.3f} [{lo:.3f}, {hi:.3f}]", chapter="14")
truth_seq = -log_P[held_out[:, :-1], held_out[:, 1:]].mean(-1)   # [512]
truth = truth_seq.mean().item()
# the model against the true chain on the same tokens: the sample's own
# deviation from the entropy floor cancels in the difference
excess = per_seq - truth_seq
ex_lo, ex_hi = paired_interval(excess)
observation("the model's loss minus the true chain's on the same held-out "
            "samples (nats per token; 95% bootstrap interval over 512 "
            "sequences, 2000 resamples)",
            f"{excess.mean():.4f} [{ex_lo:.4f}, {ex_hi:.4f}]", chapter="14")
# the table that knows only each row's successors, on the same samples
support_seq = -support.log()[held_out[:, :-1], held_out[:, 1:]].mean(-1)
sup_excess = support_seq - truth_seq
sup_lo, sup_hi = paired_interval(sup_excess)
observation("the equal-weights table's loss minus the true chain's on the same "
            "samples (nats per token; 95% bootstrap interval, as above)",
            f"{sup_excess.mean():.3f} [{sup_lo:.3f}, {sup_hi:.3f}]",
            chapter="14")
glue("support_excess", sup_excess.mean().item())
for name, value in [("loss", loss), ("floor", floor), ("truth", truth),
                    ("unigram_loss", unigram_loss), ("chance", chance),
                    ("above_floor", loss - floor),
                    ("excess", excess.mean().item()), ("excess_lo", ex_lo),
                    ("excess_hi", ex_hi)]:
    glue(name, value)

fig, ax = plt.subplots(figsize=(7, 2.4))
bars = {"entropy floor": floor, "toy-0l": loss,
        "unigram pi": unigram_loss, "uniform": chance}
ax.barh(list(bars), list(bars.values()),
        color=["gray", "tab:blue", "tab:orange", "lightgray"])
for i, v in enumerate(bars.values()):
    ax.text(v + 0.05, i, f"{v:.3f}", va="center", fontsize=8)
ax.set_xlabel("loss on held-out chain samples (nats per token)")
ax.set_xlim(0, 4.8)
ax.invert_yaxis()
fig.tight_layout()
plt.show()

# %% [markdown]
# The model's loss, {glue:text}`loss:.3f` nats per token, is
# {glue:text}`above_floor:.3f` above the floor {glue:text}`floor:.3f`. Part of that gap
# is the sample's: the true chain itself scores {glue:text}`truth:.3f` on these samples.
# Compared on the same tokens, the model's loss exceeds the true chain's by
# {glue:text}`excess:.4f` nats per token (95% bootstrap interval over the 512 sequences
# {glue:text}`excess_lo:.4f` to {glue:text}`excess_hi:.4f`), the cost of its imperfect
# table; the table that knows only each row's successors exceeds the true chain's loss
# by {glue:text}`support_excess:.3f`. Predicting unigram frequencies would cost
# {glue:text}`unigram_loss:.2f`, barely better than the uniform
# {glue:text}`chance:.2f`. The tokens are not equally common (their frequencies range
# from {glue:text}`pi_min:.4f` to {glue:text}`pi_max:.3f`), yet $\pi$ is close to
# uniform in the sense that matters for this loss: its entropy is
# {glue:text}`pi_entropy:.2f` nats, and on long samples a unigram predictor beats the
# uniform guess by only $\ln 64 - H(\pi)$, the divergence of $\pi$ from uniform.
# The model does much better because what follows a given token is very predictable.
#
# Pick a current token to compare the true next-token distribution $P(\cdot \mid a)$
# with the model's, and with the unigram distribution that a context-free model would
# predict.

# %%
def draw_token(token=0):
    p_true, p_model = chain.transition[token], Q[token]
    idx = torch.arange(d_vocab)
    fig, ax = plt.subplots(figsize=(8, 3))
    ax.bar(idx - 0.2, p_true, width=0.4, label="true P(b | a)")
    ax.bar(idx + 0.2, p_model, width=0.4, label="toy-0l softmax row a")
    ax.step(idx, pi, where="mid", color="gray", lw=1, label="unigram pi")
    ax.set_ylim(0, 1)
    ax.set_xlabel("next token b")
    ax.set_ylabel("probability")
    kl = (p_true * (p_true.log() - p_model.log())).sum()
    ax.set_title(f"current token a = {token}: likely successors "
                 f"{sorted(chain.successors[token].tolist())}, "
                 f"KL(true || model) = {kl:.3f}", fontsize=9)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    plt.show()


explore(draw_token, token=(0, d_vocab - 1, 1))

# %% [markdown]
# ## Summary
#
# - A zero-layer transformer without LayerNorm whose positions enter only queries and
#   keys, like `toy-0l`, has logits $W_E[t] W_U + b_U$: one row of a fixed
#   $d_\text{vocab} \times d_\text{vocab}$ table per current token. We checked it against
#   the Annotated Transformer's `Embeddings` and `Generator` and against TransformerLens.
#   The Annotated Transformer's own zero-layer decoder would add the positional encoding
#   and a final LayerNorm, so its logits would also depend on the position.
# - With $d_\text{model} \ge d_\text{vocab}$, as in `toy-0l` (enough, not necessary), the
#   best it can learn is the bigram table $\log P(b \mid a)$ up to a constant per row
#   (when the table does not fit, the rank-limited table of least cross-entropy, a
#   weighted approximation).
#   On `toy-0l` the row-centred correlation between the logits $W_E W_U + b_U$ and the
#   true $\log P$ is {glue:text}`corr:.3f` (for scale, a relabelled chain: at most
#   {glue:text}`corr_null_max:.2f`), but a table that knows only each row's successors
#   scores {glue:text}`corr_support:.3f`, so the correlation shows only that the model
#   knows which transitions are likely, not how likely. The probabilities show elsewhere:
#   within each row's successors the correlation is {glue:text}`within_corr:.3f`, against
#   {glue:text}`within_col:.2f` for a table of the successors plus one preference per
#   column fit by cross-entropy (shuffled weights: at most
#   {glue:text}`within_null_max:.2f`), and the $\pi$-weighted divergence from the chain is
#   {glue:text}`kl_model:.4f` nats against {glue:text}`kl_col:.3f` for that table and
#   {glue:text}`kl_support:.3f` for the successors-only table (comparisons, not a test).
#   Compared at the theory's scale 1, the rare transitions are fit
#   worse than the likely successors ({glue:text}`per_entry:.1f` times the squared error
#   per entry). Sampling noise of the training data predicts that direction, with a ratio
#   of {glue:text}`emp_ratio:.0f`, but it is too small to be most of the model's error:
#   if the errors added independently it would be only
#   {glue:text}`emp_share_rare:.0f`% of the squared error on the rare entries, and the
#   model's residual there follows the data's noise only weakly (correlation
#   {glue:text}`follow_rare:.2f`). The model's error, like sampling noise, grows as the
#   current token gets rarer (an observation: slope {glue:text}`row_slope:.2f` of the log
#   error on $\log \pi(a)$ across rows); what adds the rest we have not tested.
# - Centre rows before comparing logit tables: a per-row constant changes no prediction
#   but can move an uncentred score a lot.
# - The model learns *bigram* statistics, not the unigram distribution one might
#   expect: its prediction depends strongly on the current token, and unigram frequencies
#   appear only as the $\pi$-weighted average of its rows. Its loss
#   ({glue:text}`loss:.3f`) exceeds the true chain's on the same samples by
#   {glue:text}`excess:.4f` nats per token ({glue:text}`excess_lo:.4f` to
#   {glue:text}`excess_hi:.4f`), against {glue:text}`support_excess:.3f` for the
#   successors-only table; a unigram predictor's loss is
#   {glue:text}`unigram_loss:.2f`.
