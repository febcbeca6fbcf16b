# %% [markdown]
# # 15. One-layer transformers
#
# Add one layer of attention heads to the zero-layer model of chapter
# {doc}`14_zero_layer` and the model can look back. This chapter writes the exact logit
# formula of a one-layer attention-only transformer, checks it against the zoo's
# `toy-1l`, and then reads what another trained model learned straight off its weights:
# *skip-trigrams*, rules of the form "A ... B → C", stored in a QK circuit (where B
# looks) and an OV circuit (what A adds). The same factoring makes the model boost
# combinations it never saw, a bug we measure. Finally we watch a one-layer model fail at
# a task that the two-layer `toy-2l` solves: continuing a sequence it has seen before.
#
# Set-up: imports.

# %% tags=["hide-input"]
import itertools
import math
import warnings

import matplotlib.pyplot as plt
import torch

from circuitbook import checks
from circuitbook.book import (Null, bootstrap_means, finding, glue,
                              identity_close, null_test, observation)
from circuitbook.circuits import full_ov_circuit, full_qk_circuit
from circuitbook.data import (
    SKIP_TRIGRAM_BUGS,
    repeated_random_tokens,
    skip_trigram_task,
)
from circuitbook.models import load
from circuitbook.models.encoder_decoder import (
    Embeddings,
    Generator,
    MultiHeadedAttention,
    subsequent_mask,
    tl_weights,
)
from circuitbook.models.zoo import info, metrics
from circuitbook.paths import logit_attribution
from circuitbook.train import per_token_loss
from circuitbook.widgets import explore

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)
_ = torch.set_grad_enabled(False)  # we only read the models here
torch.set_num_threads(1)  # tiny models: one thread is fastest on 2 cores


# %% [markdown]
# The identities below compare two float computations within a worst-case rounding
# bound (Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 3); this folded
# cell counts the roundings each allows.

# %% tags=["hide-input"]
def forward_terms(cfg, n):
    """Roundings along the longest path of a one-layer attention-only
    forward pass over n positions: the query/key input (1, + W_pos), the
    projection (d_model + 1), the score (d_head + 1), the softmax (n + 3),
    the values (d_model + 1), the weighted sum (n), W_O and the sum over
    heads (d_head + n_heads + 1), the residual addition (1), the
    unembedding (d_model + 1) and the log-softmax (d_vocab + 3)."""
    d_model = cfg.d_model
    return (1 + (d_model + 1) + (cfg.d_head + 1) + (n + 3) + (d_model + 1)
            + n + (cfg.d_head + cfg.n_heads + 1) + 1 + (d_model + 1)
            + (cfg.d_vocab + 3))


def largest_value(model, tokens):
    """The largest finite |value| in a forward pass: the scale of a
    whole-pass comparison."""
    _, cache = model.run_with_cache(tokens)
    return max(t[t.isfinite()].abs().max().item() for t in cache.values())


# %% [markdown]
# ## Plain language
#
# A one-layer attention-only model (without LayerNorm, and with positions entering only
# the queries and keys, like the zoo's toys; the scope is made exact below) adds to the
# zero-layer model's direct path one term per head. At each position, a head does two separable things:
#
# - **where to look** (the QK circuit): the current token B scores every earlier token,
#   and the softmax of the scores is the pattern;
# - **what to write** (the OV circuit): each earlier token A, if attended to, adds a
#   fixed vector to the logits, the same vector whatever the current token is.
#
# Together they implement rules "if B is current and A appeared earlier, raise C", the
# **skip-trigrams** A ... B → C of Elhage et al. {cite}`elhage2021mathematical` (the dots:
# anything may lie between A and B). The direct path still adds its own bigram table
# "B → C".
#
# Because the two circuits are separate, a head that has learned "keep ... in → mind"
# and "keep ... at → bay" also raises *bay* after "keep ... in": once the head attends
# to *keep*, its OV circuit adds all of keep's completions. Only the other paths, or the
# head's own attention to other keys, can correct the mistake. This is the **skip-trigram
# bug**.
#
# What a single layer cannot do is look for "the token that came *after* an earlier copy
# of the current token" when it cannot know in advance how far back that copy is (a
# repeat of unknown length). A key only carries its own token (and position); nothing at a
# key says what came before it, unless an earlier layer wrote it there. The head can find
# the earlier copy of the current token itself, but the value there carries only that
# token, not the one after it. With one layer there is no earlier layer.

# %% [markdown]
# ## The Annotated Transformer view
#
# With the Annotated Transformer's modules {cite}`rush2018annotated`, a one-layer,
# attention-only decoder is an `Embeddings`, one `MultiHeadedAttention` with a residual
# connection, and a `Generator`; no feed-forward layer and no LayerNorm. The zoo's
# attention-only models put positions only where queries and keys are read, so the
# attention call gets `x + pos` as query and key and the bare `x` as value. We load
# `toy-1l`'s weights into the modules (`nn.Linear` stores each matrix transposed; the four
# heads' slices sit side by side, as chapter {doc}`07_multi_head` showed) and compare the
# outputs.

# %%
model = load("toy-1l")
cfg = model.cfg
d_model, H = cfg.d_model, cfg.n_heads
embed = Embeddings(d_model, cfg.d_vocab)
generator = Generator(d_model, cfg.d_vocab)
mha = MultiHeadedAttention(H, d_model, dropout=0.0).eval()

embed.lut.weight.copy_(model.W_E / math.sqrt(d_model))
generator.proj.weight.copy_(model.W_U.T)
generator.proj.bias.copy_(model.b_U)
att = model.blocks[0].attn
for lin, W, b in zip(mha.linears[:3], (att.W_Q, att.W_K, att.W_V),
                     (att.b_Q, att.b_K, att.b_V)):
    lin.weight.copy_(W.permute(1, 0, 2).reshape(d_model, -1).T)
    lin.bias.copy_(b.reshape(-1))
mha.linears[3].weight.copy_(att.W_O.reshape(-1, d_model).T)
mha.linears[3].bias.copy_(att.b_O)
assert torch.equal(tl_weights(mha)["W_O"], att.W_O)   # the slices line up


def one_layer_decoder(tokens):
    """tokens [batch, n] -> log-probabilities [batch, n, d_vocab]."""
    n = tokens.shape[1]
    x = embed(tokens)
    pos = model.W_pos[:n]
    x = x + mha(x + pos, x + pos, x, subsequent_mask(n))
    return generator(x)


tokens = repeated_random_tokens(4, 16, cfg.d_vocab, seed=3)
at_out = one_layer_decoder(tokens)
tl_out = model(tokens).log_softmax(-1)
big = largest_value(model, tokens)
# two float32 computations of one function: twice one's rounding bound (+2
# for the lookup table stored as W_E / sqrt(d) and scaled back)
identity_close("the Annotated Transformer's modules with toy-1l's weights "
               "reproduce its log-probabilities", at_out, tl_out,
               terms=2 * forward_terms(cfg, tokens.shape[1]) + 2,
               scale=max(big, tl_out.abs().max().item()), chapter="15")

# %% [markdown]
# ## The circuit view
#
# Let $X$ be the one-hot matrix of the tokens ($n_\text{pos} \times d_\text{vocab}$) and
# $A^h$ head $h$'s pattern. What follows holds for a one-layer attention-only model with
# no LayerNorm whose positions enter only the queries and keys (the zoo's `toy-1l` and
# `toy-skip-trigram`). It does not hold as written for the zoo's encoder-decoder,
# `toy-translation`: its LayerNorms and feed-forward layers sit between the embedding and
# the logits, and its positions are added to the stream. Elhage et al. write the logits
# of a one-layer model, in the column-vector convention and with tensor products (the
# first factor acts on positions, the second on vectors), as
#
# $$T = \text{Id} \otimes W_U W_E + \sum_h A^h \otimes W_U W_{OV}^h W_E .$$
#
# In TransformerLens's row-vector convention, which this book uses, the same statement
# reads
#
# $$\text{logits} = X W_E W_U + \sum_h A^h X\, W_E W_{OV}^h W_U
# + \mathbf{1}\, b_\text{all},$$
#
# $$b_\text{all} = b_U + b_O W_U + \sum_h b_V^h W_O^h W_U ,$$
#
# with $W_{OV}^h = W_V^h W_O^h$. The last term collects the biases the paper leaves out
# ($\mathbf{1}$ is a column of ones: the biases add the same row at every position; the
# value bias passes through the pattern unchanged because each row of $A^h$ sums to
# one). $W_E W_U$ is the direct
# path of chapter {doc}`14_zero_layer`. (From the skip-trigram section on, a token's
# direct-path row is $W_E W_U + b_U$, with the unembedding bias, as circuitbook's
# `logit_attribution` counts it.) And $W_E W_{OV}^h W_U$ is head $h$'s *full OV
# circuit*, a vocabulary-by-vocabulary table: row A says how each logit changes when the
# head attends to token A. The formula is exact once the patterns are given. Before we
# check it on a model, write it yourself.

# %% [markdown]
# ### Exercise 15.1: one-layer logits from the path formula
#
# Write `one_layer_logits(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U)` for
# `tokens` of shape `[pos]` and `patterns` of shape `[n_heads, pos, pos]`, with weights in
# TransformerLens's shapes (`W_V` is `[n_heads, d_model, d_head]`, `W_O` is
# `[n_heads, d_head, d_model]`). Return the logits `[pos, d_vocab]`.

# %% tags=["exercise"]
def one_layer_logits(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    """The logits of a one-layer attention-only model, given its patterns."""
    # BEGIN SOLUTION
    e = W_E[tokens]                                       # [pos, d_model]
    v = torch.einsum("pm,hmd->hpd", e, W_V) + b_V[:, None]
    heads = torch.einsum("hqk,hkd,hdm->qm", patterns, v, W_O)
    return (e + heads + b_O) @ W_U + b_U
    # END SOLUTION


checks.ch15_ex1(one_layer_logits)

# %% [markdown]
# We take the patterns from a run of `toy-1l` and build its logits twice: once from the
# four full OV circuits, as in the formula, and once with your `one_layer_logits`. (The
# folded cell bounds the rounding of the first construction.)

# %% tags=["hide-input"]
def formula_bound(model, X, A, full_ov, cfg, n):
    """The path formula against the model. Each head's term is A (n) times a
    row of its full OV circuit (2 d_model + d_head); the bias row a sum of
    H + 2 chains (d_head + d_model each); the H + 2 parts are added; the
    model takes its own path (forward_terms without the log-softmax). The
    parts cancel, so the scale is the sum of their sizes."""
    att, W_E, W_U = model.blocks[0].attn, model.W_E, model.W_U
    H = cfg.n_heads
    parts_abs = ((X @ W_E @ W_U).abs()
                 + sum(A[h] @ (X @ full_ov[h]).abs() for h in range(H))
                 + (model.b_U.abs() + att.b_O.abs() @ W_U.abs()
                    + sum(att.b_V[h].abs() @ att.W_O[h].abs() @ W_U.abs()
                          for h in range(H))))
    terms = (n + 2 * cfg.d_model + cfg.d_head + 2 * (H + 2) + cfg.d_model
             + forward_terms(cfg, n))
    return terms, parts_abs.max().item()


# %%
seq = tokens[0]
_, cache = model.run_with_cache(seq)
A = cache["pattern", 0][0]                              # [head, q, k]
X = torch.nn.functional.one_hot(seq, cfg.d_vocab).float()
W_E, W_U = model.W_E, model.W_U
full_ov = W_E @ att.W_V @ att.W_O @ W_U                 # [head, vocab, vocab]
# one chain (inner sizes d_model, d_head, d_model) associated two ways;
# scale: the chain of absolute values
ov_chain = W_E.abs() @ att.W_V.abs() @ att.W_O.abs() @ W_U.abs()
identity_close("our full OV circuits equal circuitbook's full_ov_circuit",
               full_ov, full_ov_circuit(model, 0).AB,
               terms=2 * (2 * d_model + cfg.d_head),
               scale=ov_chain.max().item(), chapter="15")
bias_row = model.b_U + att.b_O @ W_U + sum(att.b_V[h] @ att.W_O[h] @ W_U
                                           for h in range(H))
heads = sum(A[h] @ X @ full_ov[h] for h in range(H))
formula = X @ W_E @ W_U + heads + bias_row
logits = model(seq)[0]
formula_terms, parts_scale = formula_bound(model, X, A, full_ov, cfg,
                                           seq.shape[0])
formula_scale = max(parts_scale, big)
identity_close("toy-1l: the logits are the direct path plus one term per "
               "head (pattern times full OV circuit) plus the bias row",
               formula, logits, terms=formula_terms, scale=formula_scale,
               chapter="15")
mine = one_layer_logits(seq, A, W_E, att.W_V, att.W_O, att.b_V, att.b_O,
                        W_U, model.b_U)
# the model's computation written out, given its patterns: twice the pass
identity_close("one_layer_logits reproduces toy-1l given its patterns", mine,
               logits, terms=2 * forward_terms(cfg, seq.shape[0]),
               scale=formula_scale, chapter="15")

# %% [markdown]
# ## Skip-trigrams, read off the weights
#
# The zoo's `toy-skip-trigram` is a one-layer model with a single head, trained on filler
# text in which most rows hide one planted triple "A ... B → C" from a small table. The
# sources *keep* and *hold* each go with several destinations, and the destinations
# *in* and *on* follow both sources, so A alone never determines C. In the other
# {glue:text}`orphan_pct:.0f`% of the rows ("orphans"), B appears with no A before it and
# is followed by filler, so B alone does not determine C either, not even *at*, which has
# a single completion (after *at* it is *bay* in {glue:text}`at_bay_pct:.0f`% of the
# rows):

# %%
st_model = load("toy-skip-trigram")
task = skip_trigram_task(st_model.cfg.d_vocab)
for row in task.table():
    print(f"  {row['A']:>5} ... {row['B']:<3} -> {row['C']}")
words = list(task.vocab[:task.n_words])
fillers = task.filler_ids
print(f"{len(words)} words; {len(fillers)} filler tokens (w10 ... w63)")
glue("orphan_pct", 100 * task.orphan_fraction)
# how often bay follows at in training: every triple is equally likely, and a
# row is an orphan (filler after B) with probability orphan_fraction
at_rows = [c for _, b, c in task.triples.tolist() if b == task.token("at")]
glue("at_bay_pct", 100 * (1 - task.orphan_fraction)
     * at_rows.count(task.token("bay")) / len(at_rows))

# %% [markdown]
# Its full QK circuit $W_E W_Q W_K^\top W_E^\top$ has one row per query token B and one
# column per key token A (the score before the $1/\sqrt{d_\text{head}}$ scale, leaving
# out the positional and bias terms of the score). Its full OV circuit
# $W_E W_{OV} W_U$ has one row per attended token A and one column per output C. Here
# are the rows that matter, over the ten words and the average filler:

# %%
qk = full_qk_circuit(st_model, 0, 0).AB                 # [B, A]
ov = full_ov_circuit(st_model, 0, 0).AB                 # [A, C]
tok = task.token
cols = [*range(task.n_words)]


def with_filler_mean(M, rows):
    """Rows of M over the words, plus the mean over filler columns."""
    sub = M[rows]
    filler_mean = sub[:, fillers].mean(-1, keepdim=True)
    return torch.cat([sub[:, cols], filler_mean], 1)


dests, sources = ["in", "at", "on"], ["keep", "hold"]
panels = [(with_filler_mean(qk, [tok(b) for b in dests]), dests,
           "full QK: query token B (row) -> key token A"),
          (with_filler_mean(ov, [tok(a) for a in sources]), sources,
           "full OV: attended token A (row) -> logit of C")]
fig, axes = plt.subplots(2, 1, figsize=(8.5, 4.6))
for ax, (M, row_names, title) in zip(axes, panels):
    lim = M.abs().max()
    ax.imshow(M, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            ax.text(j, i, f"{M[i, j]:.1f}", ha="center", va="center",
                    fontsize=7,
                    color="white" if abs(M[i, j]) > lim / 2 else "black")
    ax.set_xticks(range(M.shape[1]), words + ["filler\n(mean)"], fontsize=8)
    ax.set_yticks(range(len(row_names)), row_names)
    ax.set_title(title, fontsize=10)
fig.tight_layout()
plt.show()

# %% tags=["hide-input"]
def rank(row, index):
    """0 if row[index] is the row's largest entry, 1 if second, ..."""
    return int((row > row[index]).sum())


def worst_rank(M, pairs, perm=None):
    """The largest rank (1 = the row's largest entry), over (row, column)
    pairs, of M[row, column] in its row; `perm` relabels the word columns among themselves first (the null;
    the filler columns stay where they are)."""
    if perm is not None:
        cols_of = torch.arange(M.shape[1])
        cols_of[:task.n_words] = perm
        M = M[:, cols_of]
    return max(rank(M[r], c) + 1 for r, c in pairs)


qk_pairs = [(b, a) for a, b, _ in task.triples.tolist()]
ov_pairs = [(a, c) for a, _, c in task.triples.tolist()]
gen = torch.Generator().manual_seed(0)
# the null relabels only the ten words: a head that merely scored words above
# filler would pass a relabelling of all 64 columns, not this one
perms = [torch.randperm(task.n_words, generator=gen) for _ in range(1000)]
for M, pairs, what, tag in [(qk, qk_pairs, "A in B's QK row (keys)", "qk"),
                            (ov, ov_pairs, "C in A's OV row (outputs)", "ov")]:
    null_ranks = [worst_rank(M, pairs, p) for p in perms]
    finding(f"for all 5 triples, {what}: the worst rank is lower than with "
            "the ten words relabelled at random (the rows single out the "
            "table's words)", worst_rank(M, pairs),
            null=Null.draws("worst rank, word columns relabelled, 1000 draws",
                            null_ranks), alternative="less", chapter="15")
    glue(f"{tag}_null_hits",
         sum(r <= worst_rank(M, pairs) for r in null_ranks))
glue("qk_worst", worst_rank(qk, qk_pairs))
glue("ov_worst", worst_rank(ov, ov_pairs))
# every QK row's top two are keep and hold, so only a relabelling that sends
# {keep, hold} to itself ties the statistic: 2 of the 10 x 9 ordered choices
glue("qk_floor_n", task.n_words * (task.n_words - 1) // 2)
glue("qk_keep_in", qk[tok("in"), tok("keep")].item())
glue("qk_filler_in", qk[tok("in"), fillers].mean().item())
# the two keys each destination's QK row scores highest, over all 64
top_two = {b: {task.vocab[i] for i in range(qk.shape[1])
               if rank(qk[tok(b)], i) < 2} for b in dests}
observation("the two highest keys in the QK rows of in, at, on",
            {b: sorted(t) for b, t in top_two.items()}, chapter="15")
glue("n_dest_top", sum(t == {"keep", "hold"} for t in top_two.values()))

# %% [markdown]
# For every triple, A is among the top {glue:text}`qk_worst` of the 64 keys in B's QK
# row and C among the top {glue:text}`ov_worst` outputs in A's OV row. The null relabels
# the ten words among themselves (leaving the filler in place), since a head that merely
# scored words above filler would already put A and C high among all 64 tokens: of 1000
# such relabellings, {glue:text}`qk_null_hits` put all five keys that high and
# {glue:text}`ov_null_hits` all five outputs. (For the QK rows that count is set by the
# null itself: every relabelling that maps the pair {*keep*, *hold*} onto itself (either
# way round), a chance of 1 in {glue:text}`qk_floor_n`, ties the observed rank, so a p-value near 1 in
# {glue:text}`qk_floor_n` is the smallest this null can give.) So the rows single out the
# table's own words. Of the three destination words, {glue:text}`n_dest_top` put their two largest
# scores on *keep* and *hold*, *at* included, although only *keep* precedes it in the
# table (e.g. {glue:text}`qk_keep_in:.1f` for *in* → *keep*, against
# {glue:text}`qk_filler_in:.1f` for an average filler).
#
# That is not yet evidence that the head *pairs* the words. Relabelling moves a word's
# whole column, so a head that scored *keep* and *hold* high from every destination, or
# whose every source raised all five completions, would beat the relabelled words just as
# well. Pair-specific means more: B's row favours its own sources beyond what every
# destination gives them, and A's row raises its own completions beyond what every source
# does. So we take the table's rows (the three destinations of the QK circuit, the two
# sources of the OV circuit) and double-centre them over all 64 columns: subtract each
# row's mean and each column's mean over those rows, and add back the overall mean. What
# is left, the *interaction*, is the part no token's own level explains. The statistic is
# its mean over the five planted pairs. The null keeps the matrix, and with it every row
# and column mean, and changes the pairings: each row gets as many partners as in the
# table, chosen among the ten words, in every way but the table's own. In the OV circuit
# the table gives *keep* and *hold* no common completion, and neither does the null: with
# only two rows, double-centring makes *hold*'s interactions exactly minus *keep*'s
# (checked below), so a completion given to both would cancel to zero, and such pairings
# would make the null narrower than any pairing shaped like the table's. There are
# {glue:text}`ov_pair_n` such choices for the OV circuit and {glue:text}`qk_pair_n` for
# the QK circuit, the table's own included, and we take them all, so the p-value is
# exact. The partners come from the words, not from all 64 columns, for the reason the
# relabelling above keeps the filler in place: training treats the filler tokens alike,
# so their interactions should sit near zero, and partners drawn mostly from them would
# make a narrow null, while the words carry large interactions of their own (one more
# learned pairing among them, below). This null was chosen after a first one, which let
# the two rows share a partner, had been seen (both are reported). If the head were not
# pair-specific,
# the planted pairs would carry no more interaction than other pairings of the words. We
# test one-sided at 0.05.

# %% tags=["hide-input"]
def interaction(M, rows):
    """M's rows `rows`, double-centred over all columns [len(rows), 64]:
    what no row mean and no column mean (over these rows) explains."""
    sub = M[rows]
    return (sub - sub.mean(1, keepdim=True) - sub.mean(0, keepdim=True)
            + sub.mean())


def pair_interaction(M, pairs, disjoint=False):
    """The mean interaction over the (row, column) `pairs`, and its null:
    every other choice of as many partners in each row among the ten word
    columns (all of them, so the permutation p is exact); with `disjoint`,
    only choices in which no two rows share a partner."""
    rows = sorted({r for r, _ in pairs})
    R = interaction(M, rows)
    at = {r: i for i, r in enumerate(rows)}
    value = torch.stack([R[at[r], c] for r, c in pairs]).mean().item()
    own = [{c for r, c in pairs if r == row} for row in rows]
    options = [list(itertools.combinations(range(task.n_words), len(o)))
               for o in own]
    sums = [dict(zip(opts, torch.stack([R[i, list(o)].sum() for o in opts])
                     .tolist())) for i, opts in enumerate(options)]
    draws = []
    for choice in itertools.product(*options):
        if [set(o) for o in choice] == own:
            continue                         # the table's own pairing
        if disjoint and len(set().union(*choice)) < sum(map(len, choice)):
            continue                         # two rows share a partner
        draws.append(sum(sums[i][o] for i, o in enumerate(choice)))
    return value, torch.tensor(draws) / len(pairs)


def pair_test(M, pairs, disjoint=False):
    value, draws = pair_interaction(M, pairs, disjoint)
    shared = ", no partner shared by two rows" if disjoint else ""
    return null_test(value, Null.draws(
        "the same rows, partners chosen among the ten words"
        f"{shared}, all {len(draws)} choices but the table's", draws))


# the table gives keep and hold no common completion, so the null does not
# either: with two rows a shared partner's two entries cancel (below)
ov_test = pair_test(ov, ov_pairs, disjoint=True)
finding("the mean interaction (double-centred score) of the 5 planted (A, C) "
        "pairs in the OV circuit is larger than what the other pairings of "
        "the ten words in the same rows give, those in which keep and hold "
        "share no completion (their null)",
        ov_test, expect="effect", chapter="15")
# the looser null first used, shared partners allowed (narrower: see below)
ov_test_shared = pair_test(ov, ov_pairs)
observation("the same OV statistic against every other pairing, shared "
            "partners included: z, rank, p",
            f"{ov_test_shared.z:.1f}, {ov_test_shared.rank} of "
            f"{ov_test_shared.n + 1}, {ov_test_shared.p:.5f}", chapter="15")
glue("ov_shared_z", ov_test_shared.z)
glue("ov_shared_n", ov_test_shared.n + 1)
# The same statistic for QK is recorded as an observation, not a finding:
# it is one contrast (at against in and on, on hold: checked below), while
# the random pairings sum free entries and spread wider, so this null is not
# the statistic's. The matched look below is exploratory.
qk_test = pair_test(qk, qk_pairs)
observation("the mean interaction (double-centred score) of the 5 planted "
            "(B, A) pairs in the QK circuit, beside the other pairings of "
            "the words in the same rows, which is no test: the statistic is "
            "one contrast, at against in and on on hold, and those pairings "
            "are a wider null than it",
            f"{qk_test.value:.2f} against {qk_test.null.mean:.2f} "
            f"± {qk_test.null.sd:.2f}, rank {qk_test.rank} of "
            f"{qk_test.n + 1}",
            chapter="15")
for tag, test in [("qk", qk_test), ("ov", ov_test)]:
    glue(f"{tag}_pair", test.value)
    glue(f"{tag}_pair_null", test.null.mean)
    glue(f"{tag}_pair_sd", test.null.sd)
    glue(f"{tag}_pair_z", test.z)
    glue(f"{tag}_pair_p", test.p)
    glue(f"{tag}_pair_rank", test.rank)
    glue(f"{tag}_pair_n", test.n + 1)
# an example of the words' own interactions (rows keep, hold): keep's row
# with at, which is not its partner, and with bay, which is
R_ov = interaction(ov, [tok(a) for a in sources])
glue("R_keep_at", R_ov[0, tok("at")].item())
glue("R_keep_bay", R_ov[0, tok("bay")].item())
# at is a destination that follows only keep in training; in and on follow both
glue("R_keep_in", R_ov[0, tok("in")].item())
glue("R_keep_on", R_ov[0, tok("on")].item())
# with two rows, double-centring makes hold's row minus keep's (every column
# sums to 0 over the rows); roundings as for the QK rows below (128 entries)
identity_close("the OV interactions: hold's row is minus keep's",
               R_ov[1], -R_ov[0], terms=128 + 64 + 2 + 4,
               scale=ov[[tok(a) for a in sources]].abs().max().item(),
               chapter="15")

# What the QK statistic can see. Double-centring over the rows in, at, on makes
# every column's interaction sum to 0 over them, and keep is planted with all
# three, so keep's three pairs add up to 0 and the mean over the five pairs is
# -R[at, hold] / 5. Roundings: the grand mean sums 192 entries, a row mean 64,
# a column mean 3, four operations per entry, then a sum of up to 5.
R_qk = interaction(qk, [tok(b) for b in dests])          # rows in, at, on
keep_col, hold_col = R_qk[:, tok("keep")], R_qk[:, tok("hold")]
identity_close("the interactions of keep's three planted QK pairs sum to 0",
               keep_col.sum(), torch.tensor(0.0), terms=192 + 64 + 3 + 4 + 5,
               scale=qk[[tok(b) for b in dests]].abs().max().item(),
               chapter="15")
qk_pair_value = qk_test.value
identity_close("the QK statistic equals -R[at, hold] / 5, one contrast",
               torch.tensor(qk_pair_value), -hold_col[1] / 5,
               terms=192 + 64 + 3 + 4 + 5,
               scale=qk[[tok(b) for b in dests]].abs().max().item(),
               chapter="15")
# Exploratory (chosen after the test above): that one contrast, -R[at, .],
# for hold against every other key but keep put in hold's place
contrast = -R_qk[1]                                     # row of at, [64]
others = [c for c in range(qk.shape[1]) if c not in (tok("keep"), tok("hold"))]
observation("the contrast -R[at, key] for hold, for keep, the largest over the "
            "62 other keys, and hold's rank among hold and those 62",
            f"{contrast[tok('hold')]:.2f}, {contrast[tok('keep')]:.2f}, "
            f"{contrast[others].max():.2f}; "
            f"{1 + int((contrast[others] >= contrast[tok('hold')]).sum())} "
            f"of {len(others) + 1}", chapter="15")
glue("qk_c_hold", contrast[tok("hold")].item())
glue("qk_c_keep", contrast[tok("keep")].item())
glue("qk_c_other", contrast[others].max().item())
glue("qk_c_rank", 1 + int((contrast[others] >= contrast[tok("hold")]).sum()))
glue("qk_c_n", len(others) + 1)
margins = {b: (qk[tok(b), tok("keep")] - qk[tok(b), tok("hold")]).item()
           for b in dests}
observation("QK score of keep minus that of hold, in the rows of in, at, on",
            {b: round(v, 2) for b, v in margins.items()}, chapter="15")
for b, v in margins.items():
    glue(f"qk_margin_{b}", v)
# The softmax ignores what all keys share, so the margin that matters is the
# gap in attention logits: the margin over sqrt(d_head) gives the token terms'
# share of it. The key's position and b_K are shared by keep and hold at the
# same position, but the query's own position and b_Q are not: they meet the
# key's token through W_K, so they add to the gap.
d_head = st_model.cfg.d_head
logit_gap = {b: v / math.sqrt(d_head) for b, v in margins.items()}
observation("that margin over sqrt(d_head), the token terms' gap in attention "
            "logits, and the attention ratio exp(gap) it alone would make, in "
            "the rows of in, at, on",
            {b: (round(v, 3), round(math.exp(v), 3))
             for b, v in logit_gap.items()}, chapter="15")
glue("qk_gap_max", max(logit_gap.values()))
glue("qk_ratio_max", math.exp(max(logit_gap.values())))
glue("qk_ratio_min", math.exp(min(logit_gap.values())))
glue("d_head15", d_head)
# The full gap, as the model computes it: its attention scores (already over
# sqrt(d_head)) from the last of 24 positions, the query position of the
# sequences built below, on keep or on hold put at the same position in the
# same filler sequences.
n_probe = 16
g_probe = torch.Generator().manual_seed(1)
probe = fillers[torch.randint(0, len(fillers), (n_probe, 24),
                              generator=g_probe)]
probe_at = torch.randint(0, 22, (n_probe,), generator=g_probe)


def last_score(source, dest):
    """[n_probe]: the score from the last position to `source`."""
    t = probe.clone()
    t[torch.arange(n_probe), probe_at] = tok(source)
    t[:, -1] = tok(dest)
    scores = st_model.run_with_cache(t)[1]["attn_scores", 0][:, 0, -1]
    return scores[torch.arange(n_probe), probe_at]


st_att = st_model.blocks[0].attn
probe_scores = st_model.run_with_cache(probe)[1]["attn_scores", 0]
probe_scale = probe_scores[probe_scores.isfinite()].abs().max().item()
k_diff = (st_model.W_E[tok("keep")] - st_model.W_E[tok("hold")]) @ st_att.W_K[0]
# the query side the token circuit leaves out, at every query position:
# (W_pos[p] W_Q + b_Q) . (e_keep - e_hold) W_K / sqrt(d_head)  [n_ctx]
q_side = ((st_model.W_pos @ st_att.W_Q[0] + st_att.b_Q[0]) @ k_diff
          / math.sqrt(d_head))
full_gap = {}
for b in dests:
    gap_b = last_score("keep", b) - last_score("hold", b)      # [n_probe]
    # roundings: the query and key projections (d_model + 1 each), the score
    # (d_head + 1) and the difference, twice over (two computations)
    # scale: the largest finite score (the masked ones are -inf)
    identity_close(f"the model's gap keep - hold from {b} is the token terms' "
                   "gap plus the query-side term at position 23",
                   gap_b, torch.full_like(gap_b, logit_gap[b] + q_side[23].item()),
                   terms=2 * (2 * (st_model.cfg.d_model + 1) + d_head + 2),
                   scale=probe_scale, chapter="15")
    full_gap[b] = gap_b.mean().item()
observation("the full gap in attention logits keep - hold, and the attention "
            "ratio exp(gap), from the last of 24 positions, in the rows of in, "
            "at, on", {b: (round(v, 3), round(math.exp(v), 3))
                       for b, v in full_gap.items()}, chapter="15")
glue("qk_full_ratio_min", math.exp(min(full_gap.values())))
glue("qk_full_ratio_max", math.exp(max(full_gap.values())))
assert q_side[23] < 0     # the prose says this term lowers keep's gap
glue("qk_q_side_abs", -q_side[23].item())
glue("qk_q_side_min", q_side.min().item())
glue("qk_q_side_max", q_side.max().item())
glue("n_ctx15", st_model.cfg.n_ctx)
# over every query position the model has, where does keep beat hold?
keep_wins = {b: int((logit_gap[b] + q_side > 0).sum()) for b in dests}
observation("of the query positions 0..31, how many give keep a higher score "
            "than hold, from in, at, on", keep_wins, chapter="15")
for b in dests:
    glue(f"keep_wins_{b}", keep_wins[b])

# %% [markdown]
# The OV circuit is pair-specific: the planted (A, C) pairs carry a mean interaction of
# {glue:text}`ov_pair:.2f` against the other pairings'
# {glue:text}`ov_pair_null:.2f` ± {glue:text}`ov_pair_sd:.2f`
# (z = {glue:text}`ov_pair_z:.1f`, rank {glue:text}`ov_pair_rank` of
# {glue:text}`ov_pair_n`, p = {glue:text}`ov_pair_p:.5f`): *keep*'s row raises *keep*'s
# completions and *hold*'s row *hold*'s, beyond what either raises in general. Since
# *hold*'s interactions are minus *keep*'s, this is one contrast: *keep*'s interactions
# with its own three completions minus those with *hold*'s two, over five. (The null we
# first used let the two rows share a partner; it is narrower, {glue:text}`ov_shared_n`
# pairings with z = {glue:text}`ov_shared_z:.1f`. We replaced it by the one above after
# seeing that result, because only the disjoint pairings are shaped like the table.) The null
# is wide because the words carry a second learned pairing: *at* is a destination that
# follows only *keep* in training (*in* and *on* follow both sources), and *keep*'s row has
# {glue:text}`R_keep_at:.2f` with *at*, more than its {glue:text}`R_keep_bay:.2f` with its
# own completion *bay*, against {glue:text}`R_keep_in:.2f` with *in* and
# {glue:text}`R_keep_on:.2f` with *on*. That is more pair-specificity, not less: pairings
# that use it land in the null and make the test conservative.
# The QK test, though, measures much less than it seems. Double-centring over the three
# rows *in*, *at*, *on* makes every column's interaction sum to zero over them, and
# *keep* is planted with all three destinations, so *keep*'s three pairs add up to
# exactly zero (checked above). The statistic is then one contrast, a fifth of *hold*'s
# interaction in the row of *at* with its sign flipped: does *at*, the one destination
# not paired with *hold*, score *hold* lower than *in* and *on* do? On *keep*'s pairs the
# test has no power at all. Its value, {glue:text}`qk_pair:.2f` against the other
# pairings' {glue:text}`qk_pair_null:.2f` ± {glue:text}`qk_pair_sd:.2f` (rank
# {glue:text}`qk_pair_rank` of {glue:text}`qk_pair_n`), is therefore recorded as an
# observation, not a finding: other pairings do not cancel as *keep*'s do, so their
# spread is wider than the one contrast's, and a null wider than the statistic could hide an effect. Put each
# of the other keys in *hold*'s place instead, a null matched to the contrast (an
# exploratory look, chosen after the first one): *hold*'s contrast, five times the
# statistic or {glue:text}`qk_c_hold:.2f`, ranks {glue:text}`qk_c_rank` of
# {glue:text}`qk_c_n`. But *keep*'s, {glue:text}`qk_c_keep:.2f`, comes next, above every
# other key (at most {glue:text}`qk_c_other:.2f`), and *keep* is paired with *at*. So much
# of the contrast is *at* scoring both sources lower than *in* and *on* do, relative to
# its other keys, which is no pairing. Neither look shows that the QK circuit is
# pair-specific, nor that it is not; a test would need a statistic that *keep*'s pairs
# do not cancel from, fixed before looking.
#
# Read directly, the scores look alike (an observation, no test): every destination
# scores both sources far above everything else (about {glue:text}`qk_keep_in:.0f`
# against {glue:text}`qk_filler_in:.1f` for a filler), and *keep* beats *hold* by
# {glue:text}`qk_margin_in:.2f` in the row of *in*, {glue:text}`qk_margin_at:.2f` in
# that of *at* and {glue:text}`qk_margin_on:.2f` in that of *on*. The margin is largest
# where *hold* is not a planted source, as pairing would have it. What the softmax sees is
# not the score's size (it ignores anything all keys share) but the gap in attention
# logits. The token terms' share of that gap is the margin over $\sqrt{d_\text{head}}$
# (with $d_\text{head}$ = {glue:text}`d_head15`), at most {glue:text}`qk_gap_max:.2f`:
# from the token terms alone, *keep* would get {glue:text}`qk_ratio_min:.2f` to
# {glue:text}`qk_ratio_max:.2f` times *hold*'s attention at the same position. But the
# full QK circuit leaves out the query's own positional term and its bias $b_Q$, and
# these are not shared by all keys: they meet each key's *token* through $W_K$. (The
# key's position and $b_K$ are shared by *keep* and *hold* at the same position, so they
# do cancel.) From the last of 24 positions, the query position of the sequences built
# below, this term lowers *keep*'s gap over *hold* by {glue:text}`qk_q_side_abs:.2f`, the
# same for every destination. In the scores the model computes there (checked above against
# the two terms), *keep* gets only {glue:text}`qk_full_ratio_min:.2f` to
# {glue:text}`qk_full_ratio_max:.2f` times *hold*'s attention: *hold* is favoured from
# every destination, *at* included, although *hold* never precedes *at* in the table.
# Over the model's {glue:text}`n_ctx15` query positions the term runs from
# {glue:text}`qk_q_side_min:.2f` to {glue:text}`qk_q_side_max:.2f`, so *keep* wins at
# {glue:text}`keep_wins_in`, {glue:text}`keep_wins_at` and {glue:text}`keep_wins_on`
# positions from *in*, *at* and *on*. So the token circuit alone favours *keep* from every
# destination; the full score, at the position we use, favours *hold* from every
# destination. Since the added term is the same for all three, *keep* fares best from
# *at* either way. What survives either way is that each destination looks at both
# sources with weights of the same order: as far as these weights show, the QK circuit
# says "look at a source", and any preference for *my* source is modest. Note also what
# the OV rows cannot know: *keep*'s row raises *mind*, *bay* and *track* together, because it does not know which
# destination is asking.
#
# The weights predict; the model should agree. We build sequences of filler with A at a
# random position and B at the end, and read the model's prediction for the next token.
# Replacing A by filler ("no source") shows how much comes from B alone.

# %%
g = torch.Generator().manual_seed(0)
N, n = 256, 24
base = fillers[torch.randint(0, len(fillers), (N, n), generator=g)]
a_pos = torch.randint(0, n - 2, (N,), generator=g)
rows = torch.arange(N)


def build(source, dest):
    """N sequences: filler, `source` at a random position, `dest` last."""
    t = base.clone()
    if source is not None:
        t[rows, a_pos] = tok(source)
    t[:, -1] = tok(dest)
    return t


def next_probs(source, dest):
    """Mean next-token distribution after `dest` [d_vocab]."""
    return st_model(build(source, dest))[:, -1].softmax(-1).mean(0)


grid_sources = ["keep", "hold", None]
grid = {(s, d): next_probs(s, d) for s in grid_sources for d in dests}

fig, ax = plt.subplots(figsize=(7, 2.6))
best = torch.tensor([[grid[s, d].max() for d in dests] for s in grid_sources])
ax.imshow(best, cmap="Greens", vmin=0, vmax=1)
for i, s in enumerate(grid_sources):
    for j, d in enumerate(dests):
        p = grid[s, d]
        ax.text(j, i, f"{task.vocab[int(p.argmax())]}\n{p.max():.2f}",
                ha="center", va="center", fontsize=8,
                color="white" if p.max() > 0.5 else "black")
ax.set_xticks(range(3), [f"B = {d}" for d in dests])
ax.set_yticks(range(3), ["A = keep", "A = hold", "no source"])
ax.set_title("most likely next token (and its probability)", fontsize=10)
fig.tight_layout()
plt.show()

# %% tags=["hide-input"]
def p_next(source, dest, c):
    """[N]: p(c) after `dest` in each of the N built sequences."""
    return st_model(build(source, dest))[:, -1].softmax(-1)[:, c]


p_triples = [grid[task.vocab[a], task.vocab[b]][c].item()
             for a, b, c in task.triples.tolist()]
p_alone = [grid[None, task.vocab[b]][c].item()
           for _, b, c in task.triples.tolist()]
# per sequence: what putting A in (instead of filler) adds to p(C)
lift = torch.stack([p_next(task.vocab[a], task.vocab[b], c)
                    - p_next(None, task.vocab[b], c)
                    for a, b, c in task.triples.tolist()], 1)   # [N, 5]
finding("for each of the 5 triples, putting A in the sequence raises p(C) "
        "after B (the smallest of the 5 mean lifts; bootstrap over 256 "
        "built sequences)", lift.mean(0).min(), null=Null.point(
            "no lift", 0.0), boot=bootstrap_means(lift).min(-1).values,
        chapter="15")
observation("p(C | A ... B), smallest of the 5; p(C | ... B) with A "
            "replaced by filler, largest", f"{min(p_triples):.3f}; "
            f"{max(p_alone):.3f}", chapter="15")
glue("p_triple_min", min(p_triples))
glue("p_alone_max", max(p_alone))
# the other source in A's place (keep for hold, hold for keep): does A's
# identity matter, or would any source do?
other_src = {"keep": "hold", "hold": "keep"}
p_other = {(task.vocab[a], task.vocab[b]): grid[other_src[task.vocab[a]],
                                                task.vocab[b]][c].item()
           for a, b, c in task.triples.tolist()}
observation("p(C | A' ... B), A' the other source, for each triple",
            {f"{a} ... {b}": round(v, 4) for (a, b), v in p_other.items()},
            chapter="15")
glue("p_other_inon_max", max(v for (a, b), v in p_other.items() if b != "at"))
glue("p_other_at", p_other["keep", "at"])
# the cell "hold ... at", which training never shows: what the model predicts,
# and what at's direct-path row (W_E W_U + b_U) favours on its own
p_hold_at = grid["hold", "at"]
at_direct = (st_model.W_E[tok("at")] @ st_model.W_U + st_model.b_U).topk(2)
observation("after hold ... at: the model's top token and its probability; "
            "the direct path's top two outputs for at and their logit gap",
            f"{task.vocab[int(p_hold_at.argmax())]} {p_hold_at.max():.2f}; "
            f"{' '.join(task.vocab[i] for i in at_direct.indices.tolist())} "
            f"{(at_direct.values[0] - at_direct.values[1]).item():.1f}",
            chapter="15")
glue("p_hold_at_bay", p_hold_at[tok("bay")].item())
glue("at_direct_gap", (at_direct.values[0] - at_direct.values[1]).item())
# the same direct path with no source: where the head looks decides it
p_none_at = grid[None, "at"]
attn_self_at = st_model.run_with_cache(build(None, "at"))[1]["pattern", 0][
    :, 0, -1, -1].mean().item()
attn_hold_at = st_model.run_with_cache(build("hold", "at"))[1]["pattern", 0][
    rows, 0, -1, a_pos].mean().item()
observation("p(bay) after ... at with no source; the head's weight on at "
            "itself there, and on hold after hold ... at; OV entries of hold "
            "on bay and tight, and of at on bay",
            f"{p_none_at[tok('bay')]:.3f}; {attn_self_at:.2f}, "
            f"{attn_hold_at:.2f}; {ov[tok('hold'), tok('bay')]:.2f}, "
            f"{ov[tok('hold'), tok('tight')]:.2f}, "
            f"{ov[tok('at'), tok('bay')]:.2f}", chapter="15")
glue("p_none_at_bay", p_none_at[tok("bay")].item())
glue("attn_self_at", attn_self_at)
glue("attn_hold_at", attn_hold_at)
glue("ov_hold_bay", ov[tok("hold"), tok("bay")].item())
glue("ov_hold_tight", ov[tok("hold"), tok("tight")].item())
glue("ov_at_bay", ov[tok("at"), tok("bay")].item())
# hold's net push towards tight and check, over bay, against the direct
# path's lead of bay over each (the direct-path row with b_U, as above)
at_row = st_model.W_E[tok("at")] @ st_model.W_U + st_model.b_U
for c in ["tight", "check"]:
    glue(f"net_{c}", (ov[tok("hold"), tok(c)] - ov[tok("hold"), tok("bay")]).item())
    glue(f"lead_{c}", (at_row[tok("bay")] - at_row[tok(c)]).item())
    glue(f"p_hold_at_{c}", p_hold_at[tok(c)].item())
    glue(f"p_none_at_{c}", p_none_at[tok(c)].item())
glue("ov_hold_check", ov[tok("hold"), tok("check")].item())

# %% [markdown]
# Each planted completion gets at least {glue:text}`p_triple_min:.2f` of the
# probability when its source is present, and at most {glue:text}`p_alone_max:.2f`
# when the source is replaced by filler: the model looks back at a source. Does it matter
# which? Put the other source in A's place (*hold* for *keep*, and the reverse): for the
# four triples ending in *in* or *on*, C then gets at most
# {glue:text}`p_other_inon_max:.4f`, so there A's identity decides it. For
# *keep ... at → bay* it gets {glue:text}`p_other_at:.2f` even after *hold*: that lift
# comes from the head moving off *at* itself, whose OV row pushes *bay* down, onto the
# other source, *hold*; *at*'s direct path, the same in both conditions, then keeps *bay*
# ahead of *hold*'s own completions. (The cell "hold ... at" never occurs in training. There the model still gives *bay*, the only
# planted completion of *at*, {glue:text}`p_hold_at_bay:.2f` of the probability, although
# *hold*'s completions are *check* and *tight*. Two terms decide it. The direct path of
# *at* puts *bay* {glue:text}`at_direct_gap:.1f` logits above its next output, and the
# head, {glue:text}`attn_hold_at:.2f` of it on *hold*, adds *hold*'s OV row:
# {glue:text}`ov_hold_bay:.1f` to *bay*, {glue:text}`ov_hold_tight:.1f` to *tight* and
# {glue:text}`ov_hold_check:.1f` to *check*. Its net push towards *tight* over *bay*,
# {glue:text}`net_tight:.1f`, and towards *check*, {glue:text}`net_check:.1f`, is less
# than the direct path's lead of *bay* over each ({glue:text}`lead_tight:.1f` and
# {glue:text}`lead_check:.1f`); still, *tight* gets
# {glue:text}`p_hold_at_tight:.2f` and *check* {glue:text}`p_hold_at_check:.2f`, against
# {glue:text}`p_none_at_tight:.3f` and {glue:text}`p_none_at_check:.3f` with no source.
# The direct path alone does not do it: with no source
# the head puts {glue:text}`attn_self_at:.2f` of its attention on *at* itself, whose OV
# row gives *bay* {glue:text}`ov_at_bay:.1f`, and *bay* gets only
# {glue:text}`p_none_at_bay:.2f`. That is consistent with how the orphan rows of
# training, which look like this, would be kept from predicting *bay* (not tested).)
#
# ### Exercise 15.2: the head's favourite skip-trigram
#
# Write `top_skip_trigram(full_qk, full_ov, current)`: for each current token B in
# `current` (a LongTensor `[n]`), find the key token A that B's QK row scores highest,
# then the output C that A's OV row raises most. Return a LongTensor `[n, 2]` of
# (A, C) pairs.

# %% tags=["exercise"]
def top_skip_trigram(full_qk, full_ov, current):
    """full_qk [B, A], full_ov [A, C] (vocab x vocab); current [n] ->
    LongTensor [n, 2] of (source A, output C)."""
    # BEGIN SOLUTION
    source = full_qk[current].argmax(-1)
    output = full_ov[source].argmax(-1)
    return torch.stack([source, output], dim=-1)
    # END SOLUTION


checks.ch15_ex2(top_skip_trigram)

# %%
favourites = top_skip_trigram(qk, ov, torch.tensor([tok(d) for d in dests]))
for d, (a, c) in zip(dests, favourites.tolist()):
    print(f"B = {d:<3}: the head's favourite is {task.vocab[a]} ... {d} "
          f"-> {task.vocab[c]}")
observation("the head's favourite completion after in, at, on",
            " ".join(task.vocab[c] for _, c in favourites.tolist()),
            chapter="15")
bigram = st_model.W_E @ st_model.W_U + st_model.b_U    # the direct path
top2 = {d: sorted(task.vocab[i] for i in bigram[tok(d)].topk(2).indices)
        for d in dests}
observation("the direct path's top two outputs after in, at, on",
            "; ".join(" ".join(v) for v in top2.values()), chapter="15")
# the head's favourite key token with the full query, from the last of 24
# positions (the key's own position is shared by every token put there)
full_row = {b: ((st_model.W_E[tok(b)] + st_model.W_pos[23]) @ st_att.W_Q[0]
                + st_att.b_Q[0]) @ st_att.W_K[0].T @ st_model.W_E.T
            for b in dests}
full_fav = {b: task.vocab[int(r.argmax())] for b, r in full_row.items()}
observation("the key token scored highest from in, at, on with the full query "
            "at position 23", full_fav, chapter="15")
assert len(set(full_fav.values())) == 1     # one favourite for all three
glue("full_fav", next(iter(full_fav.values())))

# %% [markdown]
# Read on its own, the head has the same favourite after every destination: of all
# possible sources, *keep* gets the highest token-circuit score, and keep's strongest
# completion is *track*, even after *in* and *at*. (With the query's position and bias
# added, from the last of 24 positions, the favourite is {glue:text}`full_fav` instead,
# again the same for all three destinations.) The head can tell destinations apart only by
# *where* it looks; once it looks at a source, it writes the same thing. What turns its
# bet into the right answer is the direct path, whose bigram table puts *in*'s own
# completions, *mind* and *check*, on top (and *track* and *tight* for *on*).
#
# Which of the five triples, then, can be read off the weights? Per triple: the rank of A
# in B's QK row, the rank of C in A's OV row (1 = the largest entry), whether the head's
# favourite for B is the triple, and whether C comes out on top when B's direct-path row is
# added to A's OV row (the logits' two large terms if the head attended to A alone,
# leaving out the attention weight and the other keys); last, the behaviour measured
# above.

# %% tags=["hide-input"]
print("triple                 QK rank  OV rank  favourite  direct+OV  p(C | A ... B)")
read_off = []
for (a, b, c), p in zip(task.triples.tolist(), p_triples):
    qk_rank, ov_rank = rank(qk[b], a) + 1, rank(ov[a], c) + 1
    fav = qk_rank == 1 and ov_rank == 1      # what top_skip_trigram returns
    with_direct = int((bigram[b] + ov[a]).argmax()) == c
    read_off.append((qk_rank, ov_rank, fav, with_direct))
    name = f"{task.vocab[a]} ... {task.vocab[b]} -> {task.vocab[c]}"
    print(f"{name:<22} {qk_rank:>7}  {ov_rank:>7}  {'yes' if fav else 'no':>9}"
          f"  {'yes' if with_direct else 'no':>9}  {p:14.3f}")
observation("of the 5 triples: read off the head alone (QK then OV argmax); "
            "C on top of direct path + A's OV row",
            f"{sum(r[2] for r in read_off)}; {sum(r[3] for r in read_off)}",
            chapter="15")
glue("n_fav", sum(r[2] for r in read_off))
glue("n_direct_ov", sum(r[3] for r in read_off))
glue("n_qk_first", sum(r[0] == 1 for r in read_off))
glue("n_ov_first", sum(r[1] == 1 for r in read_off))

# %% [markdown]
# The head alone gives {glue:text}`n_fav` of the five: only *keep ... on → track*, where
# A is first in B's QK row and C first in A's OV row. A is first in B's row for
# {glue:text}`n_qk_first` triples (at worst {glue:text}`qk_worst`, behind the other
# source); C is first in A's OV row for {glue:text}`n_ov_first` (at worst
# {glue:text}`ov_worst`, behind A's other completions). With B's direct-path
# row added, C is on top for {glue:text}`n_direct_ov` of the five. So the triples are read
# off A's OV row *together with B's direct path*, given that the head attends to A (the
# QK circuit ranks A first or second among the keys), not off the two head circuits alone, and in the built
# sequences each planted completion is the likely one. The same division of labour produces the bug.
#
# ## The skip-trigram bug
#
# After "keep ... in" the correct completion is *mind*, but the head, attending to
# *keep*, also raises *bay* (the completion of "keep ... at"). How much? The head's
# contribution to a logit is a sum over the keys of attention weight times that key's
# entry of the OV circuit: mostly the weight on *keep* times a fixed entry
# ({glue:text}`ov_keep_bay:.1f` for *bay*), plus the entries of the other keys, which get
# little weight: B itself (the head looks at its own position too; its entries, given
# below, are of a size comparable to *keep*'s) and the filler ({glue:text}`ov_filler_bay:.1f` on average). To these the value bias adds a constant
# row, $b_V W_O W_U$ ({glue:text}`vb_bay:.2f` on *bay*; it passes through the pattern
# unchanged, as in the formula above). So the head's push should be nearly the same
# whether the destination is *in* (where
# *bay* is wrong) or *at* (where it is right). We measure it with the path expansion of
# chapter {doc}`13_path_expansion`: the head's term and the direct path's term for the
# logit of *bay*.

# %% tags=["hide-input"]
bay = tok("bay")
split, head_terms = {}, {}
for d in ["in", "at"]:
    la = logit_attribution(st_model, build("keep", d))
    head_terms[d] = la.heads[0, 0][:, -1, bay]             # [N]
    split[d] = (la.heads[0, 0][:, -1, bay].mean().item(),
                la.direct[:, -1, bay].mean().item())
    print(f"keep ... {d:<2} -> bay:  head adds {split[d][0]:5.2f}, "
          f"direct path adds {split[d][1]:5.2f}")
ratio_head = split["in"][0] / split["at"][0]
observation("the head's push on logit(bay) after 'keep ... in', as a "
            "fraction of its push after 'keep ... at'", f"{ratio_head:.3f}",
            chapter="15")
glue("head_in", split["in"][0])
glue("head_at", split["at"][0])
glue("direct_in", split["in"][1])
glue("direct_at", split["at"][1])
glue("ov_keep_bay", ov[tok("keep"), bay].item())
glue("ov_filler_bay", ov[fillers, bay].mean().item())
vb_bay = (st_att.b_V[0] @ st_att.W_O[0] @ st_model.W_U)[bay]
glue("vb_bay", vb_bay.item())
# roundings: the OV chain (2 d_model + d_head) or the head's own path
# (d_model + d_head + d_model), the sum over 24 keys, the value bias's chain
# (d_head + d_model) and its addition, twice over (two computations); scale:
# the largest chain of absolute values
ov_abs = (st_model.W_E.abs() @ st_att.W_V[0].abs() @ st_att.W_O[0].abs()
          @ st_model.W_U.abs())
vb_abs = st_att.b_V[0].abs() @ st_att.W_O[0].abs() @ st_model.W_U.abs()
# where the head's attention goes after keep ... in / at: keep, B itself
for d in ["in", "at"]:
    pat = st_model.run_with_cache(build("keep", d))[1]["pattern", 0][:, 0, -1]
    identity_close(f"after keep ... {d}: the head's term on bay is its weights "
                   "times the keys' OV entries on bay, plus the value bias's",
                   (pat * ov[build("keep", d), bay]).sum(-1) + vb_bay,
                   head_terms[d],
                   terms=2 * (2 * st_model.cfg.d_model + d_head + n
                              + st_model.cfg.d_model + d_head + 1),
                   scale=(ov_abs[:, bay].max() + vb_abs[bay]).item(),
                   chapter="15")
    w_keep, w_self = pat[rows, a_pos].mean().item(), pat[:, -1].mean().item()
    observation(f"after keep ... {d}: the head's weight on keep, on {d} "
                f"itself, and {d}'s OV entry on bay", f"{w_keep:.3f}, "
                f"{w_self:.3f}, {ov[tok(d), bay]:.1f}", chapter="15")
    glue(f"w_keep_{d}", w_keep)
    glue(f"w_self_{d}", w_self)
    glue(f"ov_{d}_bay_self", ov[tok(d), bay].item())

# %% [markdown]
# The head adds {glue:text}`head_in:.2f` to *bay* after "keep ... in" and
# {glue:text}`head_at:.2f` after "keep ... at": nearly the same push, whether it is right
# or wrong. What differs is how the head spreads its attention over *keep* and B itself:
# {glue:text}`w_keep_in:.3f` on *keep* and {glue:text}`w_self_in:.3f` on *in* (whose OV
# entry on *bay* is {glue:text}`ov_in_bay_self:.1f`), against {glue:text}`w_keep_at:.3f`
# and {glue:text}`w_self_at:.3f` on *at* (entry {glue:text}`ov_at_bay_self:.1f`). The
# difference in outcome comes from the direct path, which adds {glue:text}`direct_at:.1f` after *at* but only
# {glue:text}`direct_in:.1f` after *in*. So the bug is real but
# corrected by the direct path beside it, and what remains is measurable only as a ratio of small
# probabilities: *bay* after "keep ... in" against *bay* in the same sequences with
# *keep* replaced by filler ("no source", the baseline of the triples above). The zoo
# lists six such wrong combinations, each with a control: another source seen with the
# same destination, here *bay* after "hold ... in". We show both ratios:

# %%
bug_rows, per_seq = [], []
for a, d, wrong, control in SKIP_TRIGRAM_BUGS:
    probs = torch.stack([p_next(a, d, tok(wrong)), p_next(None, d, tok(wrong)),
                         p_next(control, d, tok(wrong))], -1)   # [N, 3]
    per_seq.append(probs)
    p_bug, p_none, p_ctrl = probs.mean(0).tolist()
    bug_rows.append((f"{a} ... {d} -> {wrong}\n(control {control})", p_bug,
                     p_none, p_ctrl))
ratios = torch.tensor([p / q for _, p, q, _ in bug_rows])       # over no source
ratios_ctrl = torch.tensor([p / r for _, p, _, r in bug_rows])  # over control

fig, ax = plt.subplots(figsize=(8.5, 3))
x = torch.arange(len(bug_rows))
ax.bar(x - 0.2, ratios, width=0.4, color="tab:purple", label="over no source")
ax.bar(x + 0.2, ratios_ctrl, width=0.4, color="tab:gray",
       label="over the control source")
ax.set_yscale("log")
ax.axhline(1, color="gray", lw=0.8)
ax.set_xticks(range(len(bug_rows)), [r[0] for r in bug_rows], fontsize=7)
ax.set_ylabel("p(wrong C | A ... B) /\np(wrong C | baseline)")
ax.set_title("the skip-trigram bug, toy-skip-trigram", fontsize=10)
for i, (_, p, q, _) in enumerate(bug_rows):
    ax.text(i - 0.2, ratios[i] * 1.15, f"{p:.1e}\nvs {q:.1e}", ha="center",
            fontsize=6)
ax.set_ylim(0.5, ratios_ctrl.max() * 8)
ax.legend(fontsize=7, loc="upper left")
fig.tight_layout()
plt.show()

per_seq = torch.stack(per_seq, 1)                 # [N, 6 rows, 3]
boot = bootstrap_means(per_seq)                   # [reps, 6, 3]
finding("in all 6 bug rows, putting A in the sequence makes the wrong "
        "completion likelier than with A replaced by filler (log of the "
        "smallest ratio; bootstrap over 256 built sequences)",
        ratios.min().log(), null=Null.point("no boost", 0.0),
        boot=(boot[..., 0] / boot[..., 1]).min(-1).values.log(),
        chapter="15")
observation("p(wrong C | A ... B) over p(wrong C | control ... B), the six "
            "rows", [round(r, 1) for r in ratios_ctrl.tolist()], chapter="15")
recorded = metrics("toy-skip-trigram")["bug_ratio_min"]
glue("bug_min", ratios.min().item())
glue("bug_max", ratios.max().item())
glue("bug_ctrl_min", ratios_ctrl.min().item())
glue("bug_ctrl_max", ratios_ctrl.max().item())
glue("bug_recorded", math.floor(recorded * 10) / 10)   # a lower bound: round down
glue("p_bug_max", max(p for _, p, _, _ in bug_rows))
# Why the two ratios differ: per row and condition (no source, control, A),
# the mean logit of the wrong C and the mean log-normaliser logsumexp(logits)
# after B; a log-probability is the one minus the other
lognorm, wrong_logit = [], []
for a, d, wrong, control in SKIP_TRIGRAM_BUGS:
    lg = [st_model(build(s, d))[:, -1] for s in (None, control, a)]
    wrong_logit.append([x[:, tok(wrong)].mean().item() for x in lg])
    lognorm.append([x.logsumexp(-1).mean().item() for x in lg])
lognorm, wrong_logit = torch.tensor(lognorm), torch.tensor(wrong_logit)
observation("per bug row: mean log-normaliser after B with no source, with the "
            "control, with A", [[round(v, 2) for v in r] for r in lognorm.tolist()],
            chapter="15")
observation("per bug row: mean logit of the wrong C with no source, with the "
            "control, with A", [[round(v, 2) for v in r]
                                for r in wrong_logit.tolist()], chapter="15")
glue("ln_none_min", lognorm[:, 0].min().item())
glue("ln_none_max", lognorm[:, 0].max().item())
glue("ln_src_min", lognorm[:, 1:].min().item())
glue("ln_src_max", lognorm[:, 1:].max().item())
glue("ln_pair_diff", (lognorm[:, 1] - lognorm[:, 2]).abs().max().item())
# the row with the largest control ratio, read in detail
i_top = int(ratios_ctrl.argmax())
a_top, d_top, w_top, c_top = SKIP_TRIGRAM_BUGS[i_top]
glue("bug_top_row", f"{a_top} ... {d_top} → {w_top}")
glue("bug_top_a", a_top)
glue("bug_top_w", w_top)
glue("bug_top_ctrl", c_top)
glue("bug_top_none", ratios[i_top].item())
glue("bug_top_ctrl_ratio", ratios_ctrl[i_top].item())
for j, cond in enumerate(["none", "ctrl", "src"]):
    glue(f"top_logit_{cond}", wrong_logit[i_top, j].item())
    glue(f"top_ln_{cond}", lognorm[i_top, j].item())
glue("top_logit_shift", (wrong_logit[i_top, 1] - wrong_logit[i_top, 0]).abs().item())
# the rows where the control ratio is the smaller one: there the control itself
# raises the wrong logit by more than it raises the normaliser (the text names it)
exceptions = [i for i in range(len(SKIP_TRIGRAM_BUGS)) if ratios_ctrl[i] < ratios[i]]
assert len(exceptions) == 1, exceptions   # the text: one row of six
i_exc = exceptions[0]
a_exc, d_exc, w_exc, c_exc = SKIP_TRIGRAM_BUGS[i_exc]
glue("exc_n_larger", len(SKIP_TRIGRAM_BUGS) - len(exceptions))
glue("exc_row", f"{a_exc} ... {d_exc} → {w_exc}")
glue("exc_ctrl", c_exc)
glue("exc_none_ratio", ratios[i_exc].item())
glue("exc_ctrl_ratio", ratios_ctrl[i_exc].item())
glue("exc_logit_rise", (wrong_logit[i_exc, 1] - wrong_logit[i_exc, 0]).item())
glue("exc_ln_rise", (lognorm[i_exc, 1] - lognorm[i_exc, 0]).item())
assert ratios.min() < ratios_ctrl.min()   # the text: the smallest factor is the no-source one
# each source's own planted completion after d_top, and its probability
own_c = {task.vocab[a]: task.vocab[c] for a, b, c in task.triples.tolist()
         if task.vocab[b] == d_top}
for tag, s in [("ctrl", c_top), ("src", a_top)]:
    glue(f"top_own_{tag}", own_c[s])
    glue(f"top_p_own_{tag}", grid[s, d_top][tok(own_c[s])].item())

# %% [markdown]
# Every wrong combination is boosted: putting its source in the sequence makes it
# {glue:text}`bug_min:.1f` to {glue:text}`bug_max:.0f` times likelier than with no
# source. Against the control source they run from
# {glue:text}`bug_ctrl_min:.0f` to {glue:text}`bug_ctrl_max:.0f`, larger in
# {glue:text}`exc_n_larger` of the six rows (the zoo measured a ratio over the control of
# at least {glue:text}`bug_recorded:.1f` on other sequences when it built the model). To see
# why, split each log-probability into the wrong completion's logit minus the
# log-normaliser, the log of the sum of all exponentiated logits. Take the row with the
# largest factor,
# {glue:text}`bug_top_row` ({glue:text}`bug_top_ctrl_ratio:.0f` over the control,
# {glue:text}`bug_top_none:.1f` over no source). Averaged over the 256 sequences, the
# logit of {glue:text}`bug_top_w` is {glue:text}`top_logit_none:.2f` with no source,
# {glue:text}`top_logit_ctrl:.2f` with the control {glue:text}`bug_top_ctrl` and
# {glue:text}`top_logit_src:.2f` with {glue:text}`bug_top_a`, so the control leaves it
# within {glue:text}`top_logit_shift:.2f` of its value with no source. The log-normaliser
# is {glue:text}`top_ln_none:.2f`, {glue:text}`top_ln_ctrl:.2f` and
# {glue:text}`top_ln_src:.2f`: the gap between the two baselines lies there. Either
# source makes its own planted completion near-certain ({glue:text}`top_own_ctrl` gets
# {glue:text}`top_p_own_ctrl:.3f` after the control, {glue:text}`top_own_src`
# {glue:text}`top_p_own_src:.3f` after {glue:text}`bug_top_a`), and that squeezes every
# other token; with no source there is no such completion. Over the six rows the log-normaliser is
# {glue:text}`ln_none_min:.1f` to {glue:text}`ln_none_max:.1f` with no source and
# {glue:text}`ln_src_min:.1f` to {glue:text}`ln_src_max:.1f` with either source, and in
# each row the two sources' normalisers differ by at most
# {glue:text}`ln_pair_diff:.1f`. So the control ratio compares two conditions whose
# normalisers nearly match, and mostly measures the wrong completion's logit with A
# against with the control, while the ratio over no source sets the rise of the wrong
# logit against the rise of the normaliser that any planted source brings. That usually
# makes it the smaller factor, but not always: in {glue:text}`exc_row` the control
# {glue:text}`exc_ctrl` itself raises the wrong logit by {glue:text}`exc_logit_rise:.1f`,
# more than it raises the normaliser ({glue:text}`exc_ln_rise:.1f`), so there the ratio
# over no source ({glue:text}`exc_none_ratio:.1f`) is the larger one (over the control,
# {glue:text}`exc_ctrl_ratio:.1f`). Only the smallest factor over the six rows is the
# conservative one: {glue:text}`bug_min:.1f` over no source, below the smallest over the
# control. Nor is "no source" free of the head:
# there it looks mostly at B itself, whose OV row also moves these logits, so the ratio
# measures what putting A in the sequence does, not A's OV row alone. In
# absolute terms the bug costs little here, at most {glue:text}`p_bug_max:.4f` of
# probability, because the direct path separates the destinations so cleanly. In a
# model where B's bigram table is less decisive, the same factoring could make the
# errors larger (we do not test that here); Elhage et al. describe such errors in a
# one-layer language model.
#
# ## What one layer cannot do: induction
#
# Feed a one-layer and a two-layer model the same sequences of 32 random tokens, each
# repeated once. On the second copy every token can be predicted by finding the earlier
# occurrence of the current token and copying the token after it. The two-layer `toy-2l`
# does exactly that (chapter {doc}`13_path_expansion` took its circuit apart); `toy-1l`,
# trained on data with repeats of the same kind in it, does not. The two models differ in
# more than depth: repeats were {glue:text}`rep_frac_1l:.0f`% of `toy-1l`'s training rows
# (the rest bigram and skip-trigram rows) and it trained {glue:text}`steps_1l` steps,
# while `toy-2l` trained {glue:text}`steps_2l` steps on repeats alone. So the comparison
# by itself does not show that the missing layer is the reason. The argument at the end
# of this section explains it only in part: it shows that one layer cannot do induction
# on repeats of unknown length, while our test repeats always sit at the same offset,
# which one layer could in principle use. That `toy-1l` does not use it plausibly
# reflects its training as well (not tested): its repeats ran {glue:text}`min_len_1l` to {glue:text}`max_len_1l`
# tokens, so their offset varied. As a control we shuffle
# the second half of each sequence: the same tokens come back, in another order, so
# knowing *which* tokens occurred still helps, but finding the token that came *after*
# an earlier copy does not. A second control has no planted repeat: fresh sequences of 64
# random tokens from a vocabulary of 64, where tokens recur only by chance, but often (so
# this control does not cleanly separate a token's position from which tokens have
# occurred).

# %%
two_layer = load("toy-2l")
recipes = {name: info(name)["recipe"] for name in ("toy-1l", "toy-2l")}
glue("rep_frac_1l",
     100 * recipes["toy-1l"]["data"]["fractions"]["repeats"])
glue("steps_1l", recipes["toy-1l"]["train"]["steps"])
glue("steps_2l", recipes["toy-2l"]["train"]["steps"])
glue("min_len_1l", recipes["toy-1l"]["data"]["min_len"])
glue("max_len_1l", recipes["toy-1l"]["data"]["max_len"])
chance = math.log(cfg.d_vocab)
models = {"toy-1l": model, "toy-2l": two_layer}
rep = repeated_random_tokens(64, 32, cfg.d_vocab, seed=0)
shuffled = rep.clone()
gen = torch.Generator().manual_seed(5)
for row in shuffled:
    row[32:] = row[:32][torch.randperm(32, generator=gen)]
fresh = torch.randint(0, cfg.d_vocab, rep.shape, generator=gen)
losses = {(name, kind): per_token_loss(m(t), t)          # [64, 63]
          for name, m in models.items()
          for kind, t in [("repeat", rep), ("shuffled", shuffled),
                          ("fresh", fresh)]}
curves = {name: losses[name, "repeat"].mean(0) for name in models}


def gain(name, kind):
    """[64]: first-copy loss minus second-copy loss, per sequence."""
    per = losses[name, kind]
    return per[:, :31].mean(-1) - per[:, 32:].mean(-1)

fig, ax = plt.subplots(figsize=(8, 3))
for name, curve in curves.items():
    ax.plot(range(1, 64), curve, label=name)
ax.axhline(chance, color="gray", ls="--", lw=0.8, label="ln 64 (guessing)")
ax.axvline(32, color="gray", lw=0.6)
ax.text(33, 0.3, "second copy starts", fontsize=8)
ax.set_xlabel("position of the predicted token")
ax.set_ylabel("loss (nats)")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

order = {name: gain(name, "repeat") - gain(name, "shuffled")
         for name in models}
finding("toy-2l gains far more on an exact repeat than on a shuffled one "
        "(nats; bootstrap over 64 sequences)", order["toy-2l"].mean(),
        null=Null.point("order does not matter", 0.0),
        boot=bootstrap_means(order["toy-2l"]), chapter="15")
observation("toy-1l's second-copy gain on an exact repeat, on a shuffled one, "
            "and on fresh sequences with no repeat (nats)",
            f"{gain('toy-1l', 'repeat').mean():.2f}, "
            f"{gain('toy-1l', 'shuffled').mean():.2f}, "
            f"{gain('toy-1l', 'fresh').mean():.3f}", chapter="15")
observation("toy-2l's second-half gain on a shuffled repeat and on fresh "
            "sequences with no repeat (nats)",
            f"{gain('toy-2l', 'shuffled').mean():.2f}, "
            f"{gain('toy-2l', 'fresh').mean():.2f}", chapter="15")
order_1 = null_test(order["toy-1l"].mean().item(), Null.point(
    "order does not matter", 0.0), boot=bootstrap_means(order["toy-1l"]),
    alternative="two-sided")
observation("toy-1l: what the order adds (exact minus shuffled gain, nats; "
            "95% bootstrap interval over 64 sequences)",
            f"{order_1.value:.3f} [{order_1.lo:.3f}, {order_1.hi:.3f}]",
            chapter="15")
glue("order_1_lo", order_1.lo)
glue("order_1_hi", order_1.hi)
first_1, second_1 = (losses["toy-1l", "repeat"][:, s].mean().item()
                     for s in (slice(0, 31), slice(32, None)))
first_2, second_2 = (losses["toy-2l", "repeat"][:, s].mean().item()
                     for s in (slice(0, 31), slice(32, None)))
observation("first-copy loss of toy-1l and toy-2l, against ln 64 (nats)",
            f"{first_1:.2f}, {first_2:.2f} vs {chance:.2f}", chapter="15")
for name, value in [("second_1", second_1), ("second_2", second_2),
                    ("first_1", first_1), ("chance", chance),
                    ("gain_1", gain("toy-1l", "repeat").mean().item()),
                    ("gain_1_shuf", gain("toy-1l", "shuffled").mean().item()),
                    ("gain_2", gain("toy-2l", "repeat").mean().item()),
                    ("gain_2_shuf", gain("toy-2l", "shuffled").mean().item()),
                    ("gain_1_fresh", gain("toy-1l", "fresh").mean().item()),
                    ("gain_2_fresh", gain("toy-2l", "fresh").mean().item()),
                    ("which_1", (gain("toy-1l", "shuffled")
                                 - gain("toy-1l", "fresh")).mean().item()),
                    ("repeat_2", (gain("toy-2l", "repeat")
                                  - gain("toy-2l", "fresh")).mean().item()),
                    ("order_1", order["toy-1l"].mean().item()),
                    ("order_2", order["toy-2l"].mean().item())]:
    glue(name, value)

# %%
pattern = model.run_with_cache(rep)[1]["pattern", 0]   # [batch, head, q, k]
# entry i of the diagonal is query 31 + i on key i; dropping i = 0 leaves
# the queries 32..63 of the second copy, each on the token after its match
induction_attn = pattern.diagonal(offset=-31, dim1=-2, dim2=-1)[..., 1:]
queries = torch.arange(32, pattern.shape[-2])          # 32..63
best_head = induction_attn.mean((0, 2)).max()
# an even spread gives query q a weight of 1 / (q + 1) on each key: its mean
# over the same queries
even = (1 / (queries.double() + 1)).mean().item()
assert len(queries) == induction_attn.shape[-1]   # the same 32 queries
observation("the most any toy-1l head puts on the induction target, and an "
            "even spread over the past", f"{best_head:.3f}, {even:.3f}",
            chapter="15")
glue("best_head", best_head.item())
glue("even_spread", even)
glue("best_over_even", best_head.item() / even)

# %% [markdown]
# `toy-1l` is not blind to the repeat, but it gains little from it: its loss falls by
# {glue:text}`gain_1:.2f` nats from the first copy to the second (to
# {glue:text}`second_1:.2f`, against {glue:text}`chance:.2f` for pure guessing). Part of
# that, {glue:text}`gain_1_fresh:.3f`, it gains on fresh sequences with no planted repeat as well,
# where tokens recur only by chance. When the second half is shuffled the gain is
# {glue:text}`gain_1_shuf:.2f`, so {glue:text}`which_1:.2f` comes from *which* tokens have
# occurred (a one-layer head can raise tokens that appear in the context, and every token
# of the second half does), and what order adds is {glue:text}`order_1:.2f` nats (95%
# interval {glue:text}`order_1_lo:.2f` to {glue:text}`order_1_hi:.2f`), small against the
# {glue:text}`order_2:.1f` nats it is worth to `toy-2l`. `toy-2l` gets down to
# {glue:text}`second_2:.3f` on the exact repeat. On the shuffled one its second half is
# *worse* than its first (a gain of {glue:text}`gain_2_shuf:.1f`), but so it is on fresh
# sequences with no planted repeat ({glue:text}`gain_2_fresh:.1f`): most of that penalty is there
# without a planted repeat, so it is not mainly the repeated tokens' doing. Against fresh
# sequences, the exact repeat is worth {glue:text}`repeat_2:.1f` nats to `toy-2l`. (Both
# models are slightly worse than guessing on the first copy, {glue:text}`first_1:.2f` for `toy-1l`,
# likely because they bet on regularities of their training data that random tokens do
# not have; we do not test that here.)
#
# Averaged over sequences and query positions, no head of `toy-1l` puts more than
# {glue:text}`best_head:.3f` of its attention on the token that followed the earlier
# copy, against the {glue:text}`even_spread:.3f` of a head that spreads its attention
# evenly ({glue:text}`best_over_even:.1f` times as much), far from the near-certainty of
# an induction head. In these sequences the target always
# sits 31 positions back, so a head could in principle find it by position alone; one
# trained on repeats of varying length has little reason to. Finding it for a repeat of
# unknown length needs the key there to carry the *previous* token, and in a one-layer
# model keys carry only their own token and position. Writing "my previous token" into
# each position is the job of a previous-token head in an earlier layer, which is what
# the second layer makes possible.
#
# ## Explore the skip-trigram head
#
# Pick a current token B. Left: B's row of the full QK circuit, which earlier tokens it
# would attend to (the token terms only, without the query's position and bias; scores
# scaled by $1/\sqrt{d_\text{head}}$, over the ten words and the average filler). Right: the OV row of the key it scores highest (found with your
# `top_skip_trigram`), that is, what attending there does to each logit.

# %%
choices = words + ["w10", "w30", "w50"]
scale = math.sqrt(st_model.cfg.d_head)
# the same axes for every choice, set from every row the widget can draw
choice_ids = torch.tensor([tok(c) for c in choices])
all_q = with_filler_mean(qk, choice_ids.tolist()) / scale
all_o = with_filler_mean(
    ov, top_skip_trigram(qk, ov, choice_ids)[:, 0].tolist())
ylims = [(min(0.0, M.min().item()) - 0.5, M.max().item() + 0.5)
         for M in (all_q, all_o)]


def draw_skip_trigram(current="in"):
    b = tok(current)
    a, c = top_skip_trigram(qk, ov, torch.tensor([b]))[0].tolist()
    q_row = with_filler_mean(qk, [b])[0] / scale
    o_row = with_filler_mean(ov, [a])[0]
    labels = words + ["filler"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for ax, row, title in [
            (axes[0], q_row, f"QK row of B = {current}: score of each key"),
            (axes[1], o_row, f"OV row of A = {task.vocab[a]}: logit change")]:
        ax.bar(range(len(row)), row,
               color=["tab:blue" if v >= 0 else "tab:red" for v in row])
        ax.axhline(0, color="gray", lw=0.6)
        ax.set_xticks(range(len(row)), labels, rotation=60, fontsize=8)
        ax.set_title(title, fontsize=9)
    axes[0].set_ylim(*ylims[0])
    axes[1].set_ylim(*ylims[1])
    fig.suptitle(f"favourite skip-trigram (token terms): {task.vocab[a]} ... "
                 f"{current} -> {task.vocab[c]}", fontsize=10)
    fig.tight_layout()
    plt.show()


explore(draw_skip_trigram, current=choices)

# %% [markdown]
# ## Summary
#
# - A one-layer attention-only model with positions only in its queries and keys and no
#   LayerNorm (the zoo's `toy-1l` and `toy-skip-trigram`) computes, exactly, the direct
#   path plus one term per head: $X W_E W_U + \sum_h A^h X W_E W_{OV}^h W_U$ plus biases in our row-vector
#   convention ($\text{Id} \otimes W_U W_E + \sum_h A^h \otimes W_U W_{OV}^h W_E$ in the
#   paper's column-vector one). We rebuilt `toy-1l`'s logits from it.
# - Its heads implement skip-trigrams: the token terms of the full QK circuit rank the
#   sources A a current token B attends to (which source wins also depends on the query's
#   position and bias), the full OV circuit says what A then adds. In `toy-skip-trigram` the
#   head alone (QK argmax, then OV argmax) gives {glue:text}`n_fav` of the five planted
#   triples; adding the direct path's row for B to A's OV row gives
#   {glue:text}`n_direct_ov`, and in built sequences each planted completion gets at least
#   {glue:text}`p_triple_min:.2f` of the probability. A's identity decides this for the
#   four triples ending in *in* or *on*; for *keep ... at → bay* any source that draws the
#   head off *at* (whose OV row pushes *bay* down) does most of it, with *at*'s direct
#   path keeping *bay* ahead (tested with *hold*). In this one model, the OV rows are
#   pair-specific (z = {glue:text}`ov_pair_z:.1f`, p = {glue:text}`ov_pair_p:.5f`,
#   against a null of all the other pairings of the ten words in which *keep* and *hold*
#   share no completion, as in the table; a null fixed after a first, narrower one, z =
#   {glue:text}`ov_shared_z:.1f`, had been seen). For the QK
#   rows the same statistic reduces to a single contrast (*at* against *in* and *on* on
#   *hold*) and has no power on *keep*'s pairs; the other pairings are too wide a null for it,
#   so we record it as an observation. Read directly (observations), the token circuit
#   alone would give *keep* {glue:text}`qk_ratio_min:.2f` to
#   {glue:text}`qk_ratio_max:.2f` times *hold*'s attention, but the full scores the model
#   computes, which add the query's position and bias, give *keep* only
#   {glue:text}`qk_full_ratio_min:.2f` to {glue:text}`qk_full_ratio_max:.2f` times
#   *hold*'s from the last of 24 positions: each destination looks at both sources with
#   weights of the same order, and favours the same one.
# - Because QK and OV factor, the head pushes a source's completions whatever the
#   destination: it raises *bay* after "keep ... in" about as much as after
#   "keep ... at", and the direct path has to correct it. Putting the source in makes the
#   wrong completions {glue:text}`bug_min:.1f`-{glue:text}`bug_max:.0f` times likelier
#   than with no source. Against a control source the factors are larger in
#   {glue:text}`exc_n_larger` of the six rows: a planted source, A or the control, makes
#   its own completion near-certain and so raises the log-normaliser that every other
#   token's log-probability subtracts. In {glue:text}`exc_row` the control raises the wrong
#   logit itself, and there the ratio over no source is the larger.
# - One layer cannot do induction on repeats of unknown length (a key carries only its
#   own token and position, and the value there only its own token, not the one after
#   it; keys that also mix in the previous token, chapter {doc}`19_training`'s smeared
#   keys, remove that premise), and, in line with that, `toy-1l`, trained on repeats of
#   varying length, also fails on our repeats at a fixed offset: its loss on the second
#   copy of a repeated
#   random sequence stays near $\ln 64$ (a gain of {glue:text}`gain_1:.2f` nats, of which
#   {glue:text}`gain_1_fresh:.3f` appears with no planted repeat and only
#   {glue:text}`order_1:.2f` depends on the order), while `toy-2l`'s falls to
#   {glue:text}`second_2:.3f` (the two models also differ in their training mix and
#   steps).
