# %% [markdown]
# # A mathematical framework & induction heads
#
# This module is for readers who want to *do* interpretability, not only read about it. This
# page gathers the ideas you need in one place. The next page lets you step through the
# induction circuit and build compositions by hand, two lab pages run `toy-2l` and SmolLM2
# in your browser, the problem set has you design, find and break induction heads, and a
# short quiz checks what stuck. Every measurement below is made on the book's two-layer
# model `toy-2l`, which learned induction from scratch (chapter 17b shows its training),
# except two parameter counts of real models, 99 untrained models of `toy-2l`'s shape,
# used as comparisons, and a few numbers read from the training histories and checkpoints
# of chapter 19's text models.
#
# The set-up cell loads `toy-2l` and the functions the page uses.

# %% tags=["hide-input"]
import copy as copy_module
import math
import warnings
from collections import Counter

import matplotlib.pyplot as plt
import torch

from circuitbook.book import (Null, attn_only_forward_terms,
                              bootstrap_means, finding, glue, identity,
                              identity_close, null_test, observation,
                              rounding_bound)
from circuitbook.circuits import full_ov_circuit
from circuitbook.composition import (composition_scores, random_baseline,
                                     rotated_baseline)
from circuitbook.data import repeated_random_tokens
from circuitbook.data.passages import passage_windows
from circuitbook.loss import per_token_loss
from circuitbook.heads import (copying_scores, induction_scores,
                               prev_token_scores)
from circuitbook.models import attn_only, load, zoo
from circuitbook.models.pretrained import smollm2_config
from circuitbook.neurons import haar_rotation
from circuitbook.paths import logit_attribution
from circuitbook.train import phase_change_step, phases, repeat_losses, streams
from circuitbook.train.text import (heldout_windows, icl_bands,
                                    row_icl_scores, row_position_losses)

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)
torch.set_grad_enabled(False)  # the page only reads models: no autograd graph
model = load("toy-2l")
cfg = model.cfg

# %% [markdown]
# ## A transformer is a sum, not a stack
#
# Diagrams draw transformers as a tower of layers, but the residual stream makes the tower a
# sum. Each head reads the stream, and what it writes is *added* to it. Once the attention
# patterns are fixed, every head is a linear map, so the logits of an attention-only model
# without layer norm split exactly into terms, one for each *path* from the embedding to
# the unembedding:
#
# $$\text{logits} = \underbrace{x W_U}_{\text{direct}} + \sum_{h} A^h x W_{OV}^h W_U
# + \sum_{h_1 \to h_2} A^{h_2} A^{h_1} x W_{OV}^{h_1} W_{OV}^{h_2} W_U + \dots$$
#
# (row-vector convention; $x = $ the token embeddings, one row per position, and $A^h$ the
# head's attention pattern). As written, the sum is for a model without biases or layer
# norm (a layer norm's scale would have to be frozen too). `toy-2l` has no layer norm, but
# it has biases: the unembedding's bias $b_U$ adds a constant to the logits, and each value bias and
# output bias enters like an extra source at its head or layer and travels the same paths
# onward. (Its positions are shortformer ones, added to the queries and keys only, so they
# shape the patterns and add no term.) We split the logits on a repeated random sequence
# into its paths, bias terms included; the collapsed cell after it checks, to rounding,
# that the terms add up to the model's logits.

# %%
tokens = repeated_random_tokens(1, 24, cfg.d_vocab, seed=0)
parts = logit_attribution(model, tokens)
logits = model(tokens)

# %% tags=["hide-input"]
# Rounding, not a hand-picked tolerance. Each path is a chain of products: at
# most two patterns (2 n), two heads' W_V W_O (2 (d_model + d_head)) and W_U
# (d_model); the parts are then added (one rounding each). The model computes
# the same logits along its own path (attn_only_forward_terms). The parts
# cancel, so the scale is the sum of their sizes (or the largest value in the
# forward pass, if larger).
n = tokens.shape[1]
all_parts = parts.parts()
path_terms = (2 * n + 2 * (cfg.d_model + cfg.d_head) + cfg.d_model
              + len(all_parts) + attn_only_forward_terms(cfg, n))
_, run_cache = model.run_with_cache(tokens)
largest = max(t[t.isfinite()].abs().max().item() for t in run_cache.values())
part_sizes = sum(t.abs() for _, t in all_parts).max().item()
identity_close("toy-2l's logits equal the sum of its path terms (direct + "
               "heads + virtual heads)", parts.total(), logits,
               terms=path_terms,
               scale=max(part_sizes, largest), chapter="induction module")

# %% [markdown]
# Because heads only add to the stream, heads in the same layer cannot see one another:
# they read the same input and their writes are summed. That is what makes a sentence like
# "head L1H1 is an induction head" meaningful, and why one head can be removed while the
# other heads *of its layer* keep doing their jobs (the problem set does exactly that);
# heads in later layers read its output and may change.
#
# ### What the framework leaves out
#
# Elhage et al. {cite}`elhage2021mathematical` work out attention-only models with zero, one
# and two layers, with no MLPs and no layer norm. That is a choice of where the algebra is
# exact, not a claim that MLPs do not matter. Even the attention-only sum is linear in
# the embeddings only once the patterns are frozen (the patterns themselves depend on the
# tokens through a softmax). An MLP adds a nonlinearity at each position. It too becomes
# linear once frozen, by fixing each neuron's ratio of output to input, $\text{act}(z)/z$
# (for a ReLU, its gate; in a gated MLP such as SmolLM2's, the gate branch's whole
# output), at the value this input gives it, but then thousands of neurons
# at each position each carry their own frozen number, and the sum has a term for every
# neuron rather than a few for each head: the algebra stays exact and stops being readable.
# How much of a real model is left out? We count the parameters of GPT-2 small (from its
# published configuration {cite}`radford2019language`) and of SmolLM2-135M (from the
# configuration the book loads it with).

# %%
def param_counts(d_model, n_layers, n_heads, d_head, d_mlp, d_vocab, n_ctx=0,
                 n_kv_heads=None, gated=False, biases=True, tied=False):
    """Parameters in the attention layers, MLPs and embeddings of a decoder."""
    kv = n_kv_heads or n_heads
    attn = (2 * n_heads + 2 * kv) * d_model * d_head    # W_Q, W_O; W_K, W_V
    mlp = (3 if gated else 2) * d_model * d_mlp
    if biases:
        attn += (n_heads + 2 * kv) * d_head + d_model    # b_Q, b_K, b_V, b_O
        mlp += d_mlp + d_model
    emb = d_vocab * d_model * (1 if tied else 2) + n_ctx * d_model
    return {"attention": n_layers * attn, "MLP": n_layers * mlp,
            "embeddings": emb}


# GPT-2 small's configuration (Radford et al. 2019; Hugging Face "gpt2"
# config.json). GPT-2 ties W_U to W_E, so the embedding is counted once.
gpt2 = param_counts(768, 12, 12, 64, 3072, 50257, n_ctx=1024, tied=True)
sc = smollm2_config(type("HF", (), {"rms_norm_eps": 1e-5})())
smol_shape = dict(n_kv_heads=sc.n_key_value_heads, gated=True, tied=True)
smol = param_counts(sc.d_model, sc.n_layers, sc.n_heads, sc.d_head, sc.d_mlp,
                    sc.d_vocab, biases=False, **smol_shape)


def mlp_share(c, of_all=False):
    body = c["attention"] + c["MLP"]
    return c["MLP"] / (sum(c.values()) if of_all else body)


for name, c in [("GPT-2 small", gpt2), ("SmolLM2-135M", smol)]:
    print(f"{name:13} {sum(c.values()) / 1e6:6.1f}M parameters: MLPs "
          f"{mlp_share(c, True):.0%} of all, {mlp_share(c):.0%} outside the "
          "embeddings")
glue("gpt2_mlp_body", mlp_share(gpt2))
glue("gpt2_mlp_all", mlp_share(gpt2, True))
glue("gpt2_total", sum(gpt2.values()) / 1e6)
glue("smol_mlp_body", mlp_share(smol))
glue("smol_mlp_all", mlp_share(smol, True))
# Counts, so exact. GPT-2 small's published size is 124,439,808 parameters;
# param_counts leaves out the 25 LayerNorms (a gain and a bias of 768 each).
layer_norms = 25 * 2 * 768
identity("GPT-2 small's configuration, with its LayerNorms, gives the "
         "published 124,439,808 parameters", sum(gpt2.values()) + layer_norms,
         sum(gpt2.values()) + layer_norms == 124_439_808,
         chapter="induction module")
# Without biases, a GPT-2 layer holds 4 d^2 attention and 2 d (4 d) MLP
# weights: exactly 2/3 in the MLP; SmolLM2's three d x 1536 matrices against
# attention's (2 * 9 + 2 * 3) heads of d x 64: exactly 3/4.
weights_only = param_counts(768, 12, 12, 64, 3072, 50257, biases=False)
smol_weights = (smol["MLP"], smol["attention"] + smol["MLP"])
identity("without biases, MLPs hold exactly 2/3 of GPT-2 small's and 3/4 of "
         "SmolLM2's non-embedding weights",
         f"{mlp_share(weights_only):.4f}, {mlp_share(smol):.4f}",
         3 * weights_only["MLP"] == 2 * (weights_only["attention"]
                                         + weights_only["MLP"])
         and 4 * smol_weights[0] == 3 * smol_weights[1],
         chapter="induction module")

# %% [markdown]
# In GPT-2 small the MLPs hold {glue:text}`gpt2_mlp_body:.0%` of the parameters outside the
# embeddings ({glue:text}`gpt2_mlp_all:.0%` of all {glue:text}`gpt2_total:.0f`M, because the
# 50,257-token embedding is large); in SmolLM2, whose gated MLPs have three matrices and
# whose attention shares keys and values across heads, {glue:text}`smol_mlp_body:.0%`
# ({glue:text}`smol_mlp_all:.0%` of all). The "two-thirds" often quoted is the first number:
# without biases a GPT-2 layer holds $4 d^2$ attention weights and $8 d^2$ MLP weights,
# exactly two-thirds, and SmolLM2's weights split exactly three-quarters to the MLPs.
# The path sum is exact for attention-only models without layer norm, once the patterns
# are frozen. Real models add MLPs, most of their non-embedding parameters, and
# normalisation; for them the path picture is an approximation, and how much it misses is
# not something a count of parameters measures. The copying and composition scores below
# are statistics of the weights, not terms of that exact sum.

# %% [markdown]
# ## QK and OV: where to look, what to bring
#
# Each head is two independent circuits. The **QK circuit** $W_{QK} = W_Q W_K^\top$ decides
# where the head looks: in the simplest model, with no biases and no normalisation, the
# score of query $x_i$ on key $x_j$ is $x_i W_{QK} x_j^\top / \sqrt{d_\text{head}}$. Real
# models change that form: `toy-2l` has query and key biases and adds its positional
# embeddings to the queries' and keys' input only (shortformer positions), GPT-2 and SmolLM2
# read a normalised stream, and SmolLM2 rotates queries and keys by position (RoPE), which
# makes the form depend on the offset between query and key. The
# **OV circuit** $W_{OV} = W_V W_O$ decides what the head brings
# back: in the simplest model, attending fully to $x_j$ adds $x_j W_{OV}$ to the query's
# stream (`toy-2l` adds its value and output biases as well, GPT-2 and SmolLM2 read the
# normalised $x_j$, and SmolLM2's heads share their $W_V$ in groups). Both are
# $d_\text{model} \times d_\text{model}$ matrices of rank at most $d_\text{head}$.

# %% [markdown]
# ```{admonition} Conventions: the paper's column vectors, the book's row vectors
# :class: note
# Elhage et al. write residual vectors as *columns* and weights as maps applied on the left
# ($q = W_Q x$, with $W_Q$ of shape $d_\text{head} \times d_\text{model}$). The book uses
# TransformerLens's *rows* ($q = x W_Q$, $W_Q$ of shape $d_\text{model} \times d_\text{head}$),
# so every weight is the transpose of the paper's and every product of maps reverses its
# order; the bilinear form $W_{QK}$ is the same matrix in both:
#
# | column vectors (paper) | row vectors (book, TransformerLens) | relation |
# |---|---|---|
# | $W_{QK} = W_Q^\top W_K$ | $W_{QK} = W_Q W_K^\top$ | the same matrix |
# | $W_{OV} = W_O W_V$ | $W_{OV} = W_V W_O$ | transposes of each other |
# | $W_U W_{OV} W_E$ (entry $[i, j]$: attend to $j$, logit $i$) | $W_E W_{OV} W_U$ (entry $[j, i]$) | transposes |
# | $\lVert W_{QK}^{H_1 \top} W_{OV}^{H_0}\rVert_F / (\lVert W_{QK}^{H_1}\rVert_F \lVert W_{OV}^{H_0}\rVert_F)$ | the same score, its matrices in row form (chapter 18) | **Q-composition** |
#
# The first three rows follow from transposing, by definition. The last row is the one to
# watch. The column formula $\lVert W_{QK}^\top W_{OV}\rVert_F / (\dots)$ is easily taken
# for the *K-composition* score, but in Elhage et al.'s own convention it is their
# **Q-composition** score. For the induction circuit the book measures K-composition, the
# route by which an induction head finds its match (chapter 18, problem 5). The collapsed
# cell below computes the column formula on `toy-2l`'s weights and checks that it equals
# the book's Q-composition score, not its K-composition score.
# ```

# %% tags=["hide-input"]
(P0, Q0), (P1, Q1) = (zoo.metrics("toy-2l")[k]
                      for k in ("prev_token_head", "induction_head"))
# the paper's column-convention weights: every matrix transposed
col = {k: getattr(model, k).transpose(-1, -2)
       for k in ("W_Q", "W_K", "W_V", "W_O")}
col_QK = col["W_Q"][P1, Q1].T @ col["W_K"][P1, Q1]
col_OV = col["W_O"][P0, Q0] @ col["W_V"][P0, Q0]
col_formula = ((col_QK.T @ col_OV).norm()
               / (col_QK.norm() * col_OV.norm())).item()
q_comp = float(composition_scores(model, "Q")[P0, Q0, P1, Q1])
k_comp = float(composition_scores(model, "K")[P0, Q0, P1, Q1])
# a Frobenius norm sums d_model^2 squares of d_model-term products; two norms,
# one ratio
score_terms = cfg.d_model ** 2 + 2 * cfg.d_model + cfg.d_head
identity_close("the column-convention formula of the table's last row is the "
               "book's Q-composition score", torch.tensor(col_formula),
               torch.tensor(q_comp), terms=score_terms, scale=1.0,
               chapter="induction module")
glue("conv_colq", col_formula)
glue("conv_k", k_comp)
# Does the previous-token head reach the layer-1 queries? The rotation null of
# the composition section below (chapter 18's): every head's output turned by
# a Haar-random rotation of the stream, and the largest Q-score any layer-0
# head then reaches into the reader. All four layer-1 heads are induction
# heads (see below), so each is tested as a reader.
n_rot = 200
q_scores = composition_scores(model, "Q")[0, Q0, 1, :]          # [reader]
q_null = rotated_baseline(model, "Q", n_samples=n_rot)[:, 0, :, 1, :]
q_max = q_null.max(1).values                                  # [rot, reader]
q_tests = [null_test(float(q_scores[r]), Null.draws(
    f"the largest Q-score of any layer-0 head into L1H{r}, outputs rotated, "
    f"{n_rot} rotations", q_max[:, r])) for r in range(cfg.n_heads)]
for r, t in enumerate(q_tests):
    if r == Q1:
        finding(f"the previous-token head L{P0}H{Q0}'s Q-composition score "
                f"into the induction head L{P1}H{r} cannot be told from the "
                "largest Q-score any layer-0 head reaches with its output "
                "randomly rotated", t, expect="no effect",
                chapter="induction module")
    else:
        finding(f"the previous-token head L{P0}H{Q0} composes with the "
                f"queries of L{P1}H{r}: its Q-score lies above the largest "
                "any layer-0 head reaches with its output randomly rotated",
                t, chapter="induction module")
q_test, q_other = q_tests[Q1], [r for r in range(cfg.n_heads) if r != Q1]
glue("q_reader", f"L{P1}H{Q1}")
glue("q_rot_mean", q_test.null.mean)
glue("q_rot_p", q_test.p)
glue("q_others", ", ".join(f"{q_tests[r].value:.3f} into L{P1}H{r}"
                           for r in q_other))
glue("q_others_max", ", ".join(f"{max(q_tests[r].null.samples):.3f}"
                               for r in q_other))
glue("q_others_p", max(q_tests[r].p for r in q_other))
glue("q_others_p4", 4 * max(q_tests[r].p for r in q_other))
glue("q_n_stand", sum(t.p < 0.05 for t in q_tests))

# %% [markdown]
# On `toy-2l`'s induction pair, the column formula gives {glue:text}`conv_colq:.3f` and
# K-composition gives {glue:text}`conv_k:.3f`: the two kinds are different measurements,
# of different routes. The pair's Q-score cannot be told from the rotation null of the
# composition section below: with every head's output turned at random, the largest
# Q-score that any layer-0 head reaches into the induction head {glue:text}`q_reader`
# averages {glue:text}`q_rot_mean:.3f` ($p$ = {glue:text}`q_rot_p:.2f`), while its K-score
# stands out. That is {glue:text}`q_reader`'s result alone. Into the other three induction
# heads the same previous-token head's Q-scores are {glue:text}`q_others`, each above every
# rotated maximum into that reader (those maxima reach at most {glue:text}`q_others_max`,
# in the same order; $p$ = {glue:text}`q_others_p:.3f` each, the smallest
# {glue:text}`n_rot` rotations allow, and {glue:text}`q_others_p4:.2f` after multiplying by
# the four readers tested). So {glue:text}`q_n_stand` of `toy-2l`'s four induction heads
# have Q-composition scores with the previous-token head above the rotation null (scores
# are statistics of the weights), and chapter {doc}`../17_induction_evidence` shows by
# patching that the route is used: the previous-token head's output, patched into all
# four layer-1 heads' queries together, restores the loss that corrupting each query's
# previous token had spoiled (chapter 17b finds this consistent with the query's previous
# token being checked against what head L0H1 wrote at the key, without isolating that term).
# Mistaking the column formula for K-composition therefore misleads either way: for
# {glue:text}`q_reader`, whose Q-score cannot be told from the null, it would hide the pair; for the other
# three it would find this query-side route and call it the key-side match that the
# induction circuit below is built on.
#
# ### What the rank bound means in GPT-2
#
# In GPT-2 small a head's $d_\text{head}$ is a twelfth of $d_\text{model}$ (problem 1
# applies the rank bound to GPT-2 small's numbers and to the full circuits): a head reads
# a subspace of the stream a twelfth as wide as the stream, and writes into another one.
# Twelve heads per layer could between them cover the stream once, but each head on its own
# is forced to choose what to look at and what to move. That bottleneck is a plausible
# reason why heads specialise, and why one head's job can often be described in a
# sentence; this page does not test it.
#
# ### The copying test
#
# Putting the embeddings on both sides turns the OV circuit into a vocabulary-by-vocabulary
# table, $W_E W_{OV} W_U$: row $a$ says how attending to token $a$ changes each logit. A head
# **copies** if attending to a token raises that same token's logit. Elhage et al. test this
# through the eigenvalues $\lambda_i$ of the full OV circuit: a copying head has mostly
# positive eigenvalues, and the summary $\sum_i \lambda_i / \sum_i |\lambda_i|$ is close to 1.
# The eigenvalues can be computed without ever forming the vocabulary-sized matrix, because
# the nonzero eigenvalues of $W_E W_V W_O W_U$ equal those of the small matrix
# $W_O W_U W_E W_V$ ($d_\text{head} \times d_\text{head}$). We check that on the induction
# head, and compare the score with a dense eigendecomposition.

# %%
# both scores on the same 8 random sequences of 32 tokens, each repeated once
# (the functions' default batch, seed 0)
IND_BATCH, IND_LEN = 8, 32
ind = induction_scores(model, batch=IND_BATCH, seq_len=IND_LEN)
prev = prev_token_scores(model, batch=IND_BATCH, seq_len=IND_LEN)
L1, H1 = 1, int(ind[1].argmax())      # the best induction head of layer 1
L0, H0 = 0, int(prev[0].argmax())     # the best previous-token head, layer 0
glue("ind_head", f"L{L1}H{H1}")
glue("prev_head", f"L{L0}H{H0}")
glue("ind_batch", IND_BATCH)
glue("ind_len", IND_LEN)
second = float(ind[1].sort(descending=True).values[1])
glue("ind_min", float(ind[1].min()))
glue("ind_top", float(ind[1].max()))
glue("ind_second", second)
glue("ind_lead", float(ind[1].max()) - second)
copy = copying_scores(model)
dense = full_ov_circuit(model, L1, H1).AB.double()   # 64 x 64: affordable here
lam = torch.linalg.eigvals(dense)
dense_score = (lam.sum().real / lam.abs().sum()).item()
print(f"induction head L{L1}H{H1}: copying score {copy[L1, H1]:.3f} "
      f"(dense eigendecomposition: {dense_score:.3f})")
print("copying scores of all heads:\n", copy.numpy().round(2))

# %% [markdown]
# The collapsed cell checks the identity to rounding: in float64 the factored score equals
# the dense one, and the book's float32 `copying_scores` agrees with both, within bounds
# worked out from the computation (the comments give the derivation).

# %% tags=["hide-input"]
# small = W_O W_U W_E W_V, the d_head x d_head matrix, in float64.
W_O1, W_V1 = model.W_O[L1, H1].double(), model.W_V[L1, H1].double()
W_U64, W_E64 = model.W_U.double(), model.W_E.double()
small = W_O1 @ W_U64 @ W_E64 @ W_V1
lam_small, vecs = torch.linalg.eig(small)
size = lam_small.abs().sum().item()
small_score = lam_small.sum().real.item() / size
d_head = cfg.d_head
# The backward error E of either computation: the product chain (2 d_model +
# d_vocab roundings of |W_O||W_U||W_E||W_V|, whose 2-norm bounds that of small)
# and the eigensolver (counted as d_head^2 roundings, d_vocab^2 for the dense
# matrix). The score Re sum(lambda) / sum |lambda| moves by at most
# 2 sum_i |d lambda_i| / sum |lambda|.
abs_chain = W_O1.abs() @ W_U64.abs() @ W_E64.abs() @ W_V1.abs()
chain_2norm = torch.linalg.matrix_norm(abs_chain, 2).item()
eig_terms = 2 * cfg.d_model + cfg.d_vocab + d_head ** 2
# float64, factored against dense: Bauer-Fike, |d lambda_i| <= kappa(V) ||E||
# for a diagonalisable matrix, with each matrix's own kappa(V) (of the
# eigenvectors as computed) and its own product chain. The dense matrix
# W_E W_V W_O W_U has d_vocab eigenvalues; its chain has 2 d_model + d_head
# roundings and its eigensolver d_vocab^2. The two errors add; the bound takes
# the larger count of terms for both.
kappa = torch.linalg.cond(vecs).item()
lam_dense, vecs_dense = torch.linalg.eig(W_E64 @ W_V1 @ W_O1 @ W_U64)
kappa_dense = torch.linalg.cond(vecs_dense).item()
dense_chain = W_E64.abs() @ W_V1.abs() @ W_O1.abs() @ W_U64.abs()
dense_2norm = torch.linalg.matrix_norm(dense_chain, 2).item()
dense_terms = 2 * cfg.d_model + d_head + cfg.d_vocab ** 2
dense64_score = (lam_dense.sum().real / lam_dense.abs().sum()).item()
identity_close("the factored copying score equals the dense eigenvalue "
               "computation (float64)",
               torch.tensor(small_score, dtype=torch.float64),
               torch.tensor(dense64_score, dtype=torch.float64),
               terms=max(eig_terms, dense_terms),
               scale=2 * (d_head * kappa * chain_2norm
                          + cfg.d_vocab * kappa_dense * dense_2norm) / size,
               chapter="induction module")
# float32 against float64, the same small matrix: to first order each
# eigenvalue moves by ||E|| / s_i, with s_i = |y_i^H x_i| for unit left and
# right eigenvectors (1 / s_i <= kappa(V); their sum is much smaller here than
# d_head kappa(V), whose bound would be near 1: a check that cannot fail).
inv_vecs = torch.linalg.inv(vecs)
inv_s = inv_vecs.abs().norm(dim=1) * vecs.abs().norm(dim=0)
identity_close("circuitbook's float32 copying score agrees with it",
               copy[L1, H1], torch.tensor(small_score, dtype=torch.float64),
               terms=eig_terms,
               scale=2 * inv_s.sum().item() * chain_2norm / size,
               chapter="induction module")
# that bound is loose beside the spread of the layer-1 heads' scores: it
# checks the float32 computation, not which head is which
glue("copy32_bound", rounding_bound(
    eig_terms, 2 * inv_s.sum().item() * chain_2norm / size))
glue("ind_copy", float(copy[L1, H1]))
glue("prev_copy", float(copy[L0, H0]))
glue("layer1_copy_min", float(copy[1].min()))

# %% [markdown]
# Is that a lot? A score is evidence only against what the cheapest mechanism would give.
# Heads at initialisation are too weak a comparison: a trained head's spectrum is uneven,
# and that alone moves the score (a head of rank 1 has one nonzero eigenvalue, a real one,
# so it always scores $+1$ or $-1$), and an untrained model lacks the trained embeddings
# that sit on both sides of $W_{OV}$. The null keeps all of that and destroys only the
# alignment between what the head writes and what the unembedding reads: the trained
# model with each head's output turned by a random rotation of the stream,
# $W_O \to W_O U$ with $U$ a uniformly (Haar) random orthogonal matrix, the same null chapter 18
# uses for composition. Each head is compared with its own rotated copies.

# %% tags=["hide-input"]
# the same trained model, every head's W_O turned by one Haar rotation U per
# draw (W_OV -> W_OV U: each head keeps its spectrum, W_E and W_U stay trained)
rotated = copy_module.deepcopy(model)
gen_rot = torch.Generator().manual_seed(0)
trained_W_O = [block.attn.W_O.clone() for block in model.blocks]
rot_copy = []
for _ in range(n_rot):
    U = haar_rotation(cfg.d_model, gen_rot, trained_W_O[0].dtype)
    for block, W_O in zip(rotated.blocks, trained_W_O):
        block.attn.W_O.copy_(W_O @ U)
    rot_copy.append(copying_scores(rotated))
rot_copy = torch.stack(rot_copy)                   # [n_rot, L, H]
finding("the induction head's OV circuit copies: its copying score lies "
        "above those of its own output randomly rotated", float(copy[L1, H1]),
        null=Null.draws(f"the induction head's copying score, its output "
                        f"rotated, {n_rot} rotations", rot_copy[:, L1, H1]),
        alternative="greater", chapter="induction module")
prev_copy_test = null_test(float(copy[L0, H0]), Null.draws(
    f"the previous-token head's copying score, its output rotated, {n_rot} "
    "rotations", rot_copy[:, L0, H0]), alternative="less")
finding("the previous-token head's copying score is negative, below those "
        "of its own output randomly rotated", prev_copy_test,
        chapter="induction module")
# and heads at initialisation, for scale only (not a test)
shape = dict(zoo.RECIPES["toy-2l"].model)
n_layers = shape.pop("n_layers")
inits = [attn_only(n_layers, **dict(shape, seed=s)) for s in range(1, 100)]
init_copy = torch.stack([copying_scores(m) for m in inits])   # [99, L, H]
observation("copying scores of all 8 heads of 99 models at initialisation: "
            "sd, largest size", f"{init_copy.std():.3f}, "
            f"{init_copy.abs().max():.3f}", chapter="induction module")
glue("rot_ind_mean", float(rot_copy[:, L1, H1].mean()))
glue("rot_ind_max", float(rot_copy[:, L1, H1].max()))
glue("rot_prev_sd", float(rot_copy[:, L0, H0].std()))
glue("rot_prev_min", float(rot_copy[:, L0, H0].min()))
glue("rot_copy_p", prev_copy_test.p)
glue("init_copy_sd", float(init_copy.std()))

# %% [markdown]
# Turned at random, the induction head's output scores {glue:text}`rot_ind_mean:.2f` on
# average and never above {glue:text}`rot_ind_max:.2f` over {glue:text}`n_rot` rotations;
# the previous-token head's rotated scores spread with a standard deviation of
# {glue:text}`rot_prev_sd:.2f` (heads at initialisation spread by
# {glue:text}`init_copy_sd:.2f`) and never fall below
# {glue:text}`rot_prev_min:.2f`. Both trained scores lie beyond every draw ($p$ =
# {glue:text}`rot_copy_p:.3f`, the smallest {glue:text}`n_rot` rotations allow).
# The induction head {glue:text}`ind_head` scores {glue:text}`ind_copy:.2f`: what it
# attends to, it promotes. The previous-token head {glue:text}`prev_head` scores
# {glue:text}`prev_copy:.2f`, and that is not a failure. Its output is not meant for the
# logits: it writes "my left neighbour was $A$" into the stream for the induction head's keys
# to read, and its direct effect on the logits, the only thing $W_E W_{OV} W_U$ measures, is
# a side effect. A negative score says that side effect on average pushes down the token it
# attended to; why it learned that direction we have not tested. The copying score describes
# one path of a head, not its job; chapter 18 measures the path that matters here.
#
# The printout also shows that {glue:text}`ind_head` is not alone: every layer-1 head
# scores at least {glue:text}`layer1_copy_min:.2f`. That fits their attention, because
# `toy-2l` has four induction heads, not one: on {glue:text}`ind_batch` sequences of
# {glue:text}`ind_len` random tokens, each repeated once, the layer-1 heads' induction
# scores run from {glue:text}`ind_min:.3f` to {glue:text}`ind_top:.3f`, and
# {glue:text}`ind_head`, the largest, leads the runner-up ({glue:text}`ind_second:.3f`)
# by only {glue:text}`ind_lead:.1e`; chapter {doc}`../17_induction_heads` studies all four
# (on a batch of its own, so its scores differ a little from these).
# This page follows {glue:text}`ind_head` as their representative. The closeness of the
# layer-1 heads' copying scores limits the float32 check above: its rounding bound, {glue:text}`copy32_bound:.3f`, is
# wider than the spread of the layer-1 heads' scores, so it confirms the float32
# computation but could not catch a mix-up between two layer-1 heads.

# %% [markdown]
# ## Composition and virtual heads
#
# A single layer of attention is limited in a way that shows in its outputs. Its QK circuit
# compares raw tokens, and its OV circuit writes a raw token's consequences to the logits, so
# a one-layer model is a table of bigrams (its direct path) and *skip-trigrams*,
# "$A \dots B \to C$": having seen $A$ somewhere before, at $B$ predict $C$. The QK and OV
# circuits are separate, so what attending to $A$ writes is the same whatever $B$ is; $B$
# only decides how much the head attends to $A$. A head that learned both "keep ... in mind"
# and "keep ... at bay" raises "bay" after "keep ... in" as well: Elhage et al. call these
# **skip-trigram bugs**, and they are evidence about the algorithm rather than the data.
# Chapter {doc}`../15_one_layer` measures one in a trained model.
#
# A head in layer 1 can read what a head in layer 0 wrote, in three ways, according to which
# of its inputs carries the earlier head's output:
#
# - **Q-composition**: its *queries* do, so the earlier head changes what it looks for;
# - **K-composition**: its *keys* do, so the earlier head changes what it finds;
# - **V-composition**: its *values* do, so it moves information the earlier head had already
#   moved.
#
# Only V-composition creates a new term in the logits: a **virtual head** with OV circuit
# $W_{OV}^{h_1} W_{OV}^{h_2}$ and pattern $A^{h_2} A^{h_1}$. Q- and K-composition change
# *where* the later head attends, which shows up inside its attention pattern rather than as an
# extra path. The strength of each kind is measured by a **composition score**,
# $\|W_A W_B\|_F / (\|W_A\|_F \|W_B\|_F)$, with $W_A = W_{OV}$ of the writer and $W_B$ the
# reader's circuit on the side that reads it: its $W_{QK}$, oriented for the query side or
# the key side, or its $W_{OV}$. Which orientation goes with which kind, chapter 18
# derives. In `toy-2l` it is the
# previous-token head's row that stands out most in K-composition: it feeds all four
# induction heads' keys.

# %% tags=["hide-input"]
# [writer head in layer 0, reader head in layer 1]
K = composition_scores(model, "K")[0, :, 1, :]
baseline = float(random_baseline(cfg.d_model, cfg.d_head, kind="K", seed=0))
init_K = torch.stack([composition_scores(m, "K")[0, :, 1, :] for m in inits])
fig, ax = plt.subplots(figsize=(4.2, 3.4))
im = ax.imshow(K, cmap="Blues")
ax.set_xlabel("reader: layer-1 head")
ax.set_ylabel("writer: layer-0 head")
ax.set_title("K-composition scores in toy-2l")
for w in range(K.shape[0]):
    for r in range(K.shape[1]):
        ax.text(r, w, f"{K[w, r]:.2f}", ha="center", va="center", fontsize=8)
fig.colorbar(im)
plt.show()
glue("k_pair", float(K[H0, H1]))
glue("k_row_min", float(K[H0].min()))
glue("k_row_max", float(K[H0].max()))
glue("k_others_max", float(torch.cat([K[:H0], K[H0 + 1:]]).max()))
glue("k_baseline", baseline)
glue("k_init_mean", float(init_K.mean()))
glue("k_init_max", float(init_K.max()))
observation("the previous-token -> induction pair's rank among toy-2l's 16 "
            "layer-0 -> layer-1 pairs", int((K > K[H0, H1]).sum()) + 1,
            chapter="induction module")
observation("K-composition scores of the 16 layer-0 -> layer-1 pairs of 99 "
            "models at initialisation: mean, largest",
            f"{init_K.mean():.3f}, {init_K.max():.3f}",
            chapter="induction module")
# chapter 18's null for trained heads: the same trained heads, every output
# turned by a Haar-random rotation of the stream (their spectra kept), and the
# largest score any layer-0 head then reaches into the reader
null_rot = rotated_baseline(model, "K", n_samples=n_rot)[:, 0, :, 1, :]
k_test = null_test(float(K[H0, H1]), Null.draws(
    f"the largest K-score of any layer-0 head into the reader, outputs "
    f"rotated, {n_rot} rotations", null_rot.max(1).values[:, H1]))
finding("the previous-token head composes with the induction head's keys: "
        "their K-composition score lies above the largest that any layer-0 "
        "head reaches with its output randomly rotated", k_test,
        chapter="induction module")
# chapter 18's rule applied to every pair: a writer passes into a reader when
# its score exceeds the 95th percentile of that reader's rotated maxima
rule = null_rot.max(1).values.quantile(0.95, dim=0)          # [reader]
passes = K > rule                                            # [writer, reader]
others_pass = [w for w in range(K.shape[0])
               if w != H0 and bool(passes[w].all())]
observation("layer-0 heads that pass chapter 18's rotation rule into every "
            "layer-1 head", ", ".join(f"L0H{w}" for w in range(K.shape[0])
                                      if bool(passes[w].all())),
            chapter="induction module")
glue("k_also_pass", ", ".join(f"L0H{w}" for w in others_pass) or "none")
glue("k_also_lo", float(K[others_pass].min()) if others_pass else float("nan"))
glue("k_also_hi", float(K[others_pass].max()) if others_pass else float("nan"))
glue("n_rot", n_rot)
glue("k_rot_mean", k_test.null.mean)
glue("k_rot_max", max(k_test.null.samples))
glue("k_rot_p", k_test.p)

# %% [markdown]
# The previous-token head {glue:text}`prev_head` feeds the induction head
# {glue:text}`ind_head` with a K-composition score of {glue:text}`k_pair:.3f`, and the
# other layer-1 heads about as strongly: its row runs from {glue:text}`k_row_min:.3f` to
# {glue:text}`k_row_max:.3f`, while no other layer-0 head scores above
# {glue:text}`k_others_max:.3f` with any reader. Is that more than chance? As for the
# copying scores, heads at initialisation are the wrong comparison: their pairs score
# {glue:text}`k_init_mean:.3f` on average, at most {glue:text}`k_init_max:.2f`, close to
# the {glue:text}`k_baseline:.3f` of independent random heads of this shape (chapter 18
# derives that baseline), but trained heads have uneven spectra, and that alone moves
# their scores. The rotation null keeps the trained heads and turns every head's output
# by a random rotation of the stream: over
# {glue:text}`n_rot` rotations, the largest score any layer-0 head reaches into
# {glue:text}`ind_head` averages {glue:text}`k_rot_mean:.3f` and never exceeds
# {glue:text}`k_rot_max:.3f`, so the pair's {glue:text}`k_pair:.3f` stands out
# ($p$ = {glue:text}`k_rot_p:.3f`, the smallest {glue:text}`n_rot` rotations allow;
# problem 5 repeats this test, with a K-composition score you write yourself).
# It is not the only writer that does. Chapter 18's rule (a score above the 95th
# percentile of the rotated maxima into that reader) also passes head
# {glue:text}`k_also_pass` into every layer-1 head, at a smaller margin (scores
# {glue:text}`k_also_lo:.3f` to {glue:text}`k_also_hi:.3f`); chapter 18 reads it as a head
# that attends two tokens back early in the context, one more token of context for the
# induction heads' keys.
#
# ## Induction heads: the circuit worth memorising
#
# An induction head completes patterns of the form $[A][B] \dots [A] \to [B]$: having seen
# "Mr Dursley" once, on the next "Mr" it predicts "Dursley". It takes two heads in two layers:
#
# 1. a **previous-token head** in an early layer copies each token's left neighbour into its
#    position's stream ("my left neighbour was $A$");
# 2. the **induction head**'s query at the current $[A]$ looks for keys whose stored left
#    neighbour is $A$, which is K-composition with the first head. It finds the position of the
#    earlier $[B]$;
# 3. its copying OV circuit writes $[B]$ into the logits.
#
# Because nothing in the circuit depends on what $A$ and $B$ are, it works on tokens the model
# has never seen together, even on random tokens. That is why the standard test uses a
# repeated random sequence: the second copy becomes predictable only through the context.

# %% tags=["hide-input"]
first, second = repeat_losses(model, seq_len=24, batch=16, seed=1)
init_gap = [a - b for a, b in (repeat_losses(m, seq_len=24, batch=16, seed=1)
                               for m in inits)]
glue("loss_first", first)
glue("chance", math.log(cfg.d_vocab))
glue("d_vocab", cfg.d_vocab)
glue("loss_second", second)
glue("gap_trained", first - second)
# the 99 models' gaps: their mean, with a bootstrap interval over the models,
# and their spread. Drawn by hand, not with book.bootstrap_means: this
# generator also draws the count rule's bootstrap below, whose interval would
# change with a fresh one
init_gap_t = torch.tensor(init_gap)
gen = torch.Generator().manual_seed(0)
boot_gap = init_gap_t[torch.randint(0, len(init_gap), (2000, len(init_gap)),
                                    generator=gen)].mean(-1)
init_gap_test = null_test(init_gap_t.mean().item(),
                          Null.point("no gap", 0.0), boot=boot_gap,
                          alternative="two-sided")
observation("first-copy minus second-copy loss of the 99 models at "
            "initialisation: mean [95% interval over models], sd",
            f"{init_gap_test.value:+.4f} [{init_gap_test.lo:+.4f}, "
            f"{init_gap_test.hi:+.4f}], sd {init_gap_t.std():.4f}",
            chapter="induction module")
glue("init_gap_mean", init_gap_test.value)
glue("init_gap_lo", init_gap_test.lo)
glue("init_gap_hi", init_gap_test.hi)
glue("init_gap_sd", float(init_gap_t.std()))
# The cheaper mechanisms use no order. The same 16 sequences as repeat_losses
# (seed 1); loss[:, t] predicts token t + 1 from tokens 0..t, and the
# second copy is t = 24..46. (a) Spread the guess evenly over the tokens seen:
# ln(number of distinct tokens seen). (b) The best any rule can do that sees
# the current token and the counts of the tokens so far, not their order: the
# exact posterior of the next token given those, under the sequences' own
# distribution (24 uniform tokens, repeated).
seqs = repeated_random_tokens(16, 24, cfg.d_vocab, seed=1)
second_seq = per_token_loss(model(seqs), seqs)[:, 24:].mean(1)
distinct = torch.tensor([[len(set(row[:t + 1].tolist()))
                          for t in range(24, 47)] for row in seqs])
seen_bound = distinct.double().log().mean(1)           # per sequence


def count_rule_loss(row, n=24):
    """-ln P(next token | current token, counts so far), second-copy positions.

    After k tokens of the second copy a token seen c times appeared a times in
    the first copy and b = c - a times among those k (b <= a). Every ordering
    of the first copy is equally likely, so a split {b_v} weighs
    prod_v 1 / (b_v! (c_v - 2 b_v)!) (orderings of the first k and of the
    other n - k tokens), times b_u for the current token u (the share of those
    orderings that end in u); the next token is v with probability
    (a_v - b_v) / (n - k). Polynomials in b keep sum_v b_v = k.
    """
    out = []
    for t in range(n, 2 * n - 1):
        k, cnt, cur, nxt = t - n + 1, Counter(row[:t + 1]), row[t], row[t + 1]

        def weights(v, target):
            c = cnt[v]
            return [(c - 2 * b if target else 1) * (b if v == cur else 1)
                    / (math.factorial(b) * math.factorial(c - 2 * b))
                    if b <= c // 2 else 0.0 for b in range(k + 1)]

        def times(p, q):
            return [sum(p[i] * q[j - i] for i in range(j + 1))
                    for j in range(k + 1)]
        total, hit = [1.0] + [0.0] * k, [1.0] + [0.0] * k
        for v, c in cnt.items():
            if c > 1 or v == cur:          # a token seen once has b = 0
                total = times(total, weights(v, False))
                hit = times(hit, weights(v, v == nxt))
        out.append(-math.log(hit[k] / total[k] / (n - k)))
    return out


count_bound = torch.tensor([count_rule_loss(row.tolist()) for row in seqs],
                           dtype=torch.float64).mean(1)  # per sequence
advantage = count_bound - second_seq.double()
boot_adv = advantage[torch.randint(0, 16, (2000, 16), generator=gen)].mean(-1)
adv_test = null_test(advantage.mean().item(), Null.point(
    "no better than the best rule that sees the current token and the "
    "counts of the tokens so far, not their order", 0.0),
    boot=boot_adv)
finding("toy-2l's second-copy loss lies below the best a rule that sees "
        "only the current token and the counts of earlier tokens could reach "
        "(that rule's loss minus the model's, 16 sequences)", adv_test,
        chapter="induction module")
glue("seen_bound", seen_bound.mean().item())
glue("count_bound", count_bound.mean().item())
glue("init_gap_ratio_k", (first - second) / init_gap_test.value / 1000)
glue("distinct_mean", distinct.double().mean().item())
glue("adv_lo", adv_test.lo)
glue("adv_hi", adv_test.hi)

# %% [markdown]
# On the first copy the model's loss is {glue:text}`loss_first:.2f` nats (chance, a
# uniform guess over {glue:text}`d_vocab` tokens, is {glue:text}`chance:.2f`); on the second
# it is {glue:text}`loss_second:.2f`, a gap of {glue:text}`gap_trained:.2f` nats. At
# initialisation the gap is small but not zero: {glue:text}`init_gap_mean:.1e` nats on
# average over the 99 models, with a 95% bootstrap interval over the models of
# {glue:text}`init_gap_lo:.1e` to {glue:text}`init_gap_hi:.1e`, which excludes 0 (from
# model to model it varies with a standard deviation of {glue:text}`init_gap_sd:.1e`).
# All 99 are scored on the same 16 sequences as the trained model, so the interval covers
# the spread over initialisations, not over sequences; what gives untrained models their
# slight lean to the second copy we have not tested. The trained gap is about
# {glue:text}`init_gap_ratio_k:.1f` thousand times as large, four orders of magnitude:
# beating this null says the model learned to use its context, not how.
#
# The question is whether `toy-2l`'s gap needs order, and the cheapest competitors use
# none: a head that boosts the tokens already seen. On the second copy
# the next token has always been seen, so spreading the guess evenly over the tokens seen
# so far (on average {glue:text}`distinct_mean:.1f` distinct tokens) would reach
# {glue:text}`seen_bound:.2f` nats, the log of that count averaged over the same sequences.
# Counts do better than an even spread: a token seen once in the sequence so far has
# certainly not come back yet, while a token seen twice may already have, so the counts say
# something about which tokens are still to come. The best that any
# rule can do which sees the current token and how often each token has appeared, but not
# where, is the exact probability of the next token given those counts (the cell above
# computes it); on the same sequences it reaches {glue:text}`count_bound:.2f` nats.
# `toy-2l` reaches {glue:text}`loss_second:.2f`, lower by {glue:text}`adv_lo:.2f` to
# {glue:text}`adv_hi:.2f` nats (95% bootstrap interval over the 16 sequences). The sharper
# bound leaves the conclusion as it was: the model uses where a token stood, not only how
# often it was there. Order is not yet induction: a head that attends a fixed distance
# back, whatever the tokens, also uses it, and repeats at one fixed offset, like these,
# cannot tell the two apart. That `toy-2l`'s heads match by token is what chapters
# {doc}`17a <../17_induction_heads>` and {doc}`17b <../17_induction_evidence>` show.
#
# ### The induction bump
#
# In `toy-2l` the induction heads do not grow slowly. It was trained with its scores recorded
# every 10 steps (chapter {doc}`../17_induction_evidence` reads the same history in detail).
# Below, its loss on the second copy of a repeated random sequence, and its best induction
# score: for a long stretch the second-copy loss only drifts down and the induction score
# stays near zero, then the loss falls and, within the 80 steps around that point, the
# induction head forms (the cell below measures how fast, against the rest of
# training). Olsson et al. {cite}`olsson2022context` saw the same *phase change* in every
# model they trained with two or more layers, as a bump in the training loss curve.

# %%
hist = zoo.history("toy-2l")
steps = hist["step"]
change = phase_change_step(hist, d_vocab=cfg.d_vocab)
fig, (ax_l, ax_s) = plt.subplots(2, 1, figsize=(8, 3.8), sharex=True)
ax_l.plot(steps, hist["loss_first_copy"], color="tab:orange", lw=1,
          label="first copy")
ax_l.plot(steps, hist["loss_second_copy"], color="tab:blue", lw=1.2,
          label="second copy")
ax_l.axhline(math.log(cfg.d_vocab), color="gray", ls=":", lw=0.8)
ax_l.set(ylabel="loss (nats)", xlim=(0, 1500))
ax_l.legend(fontsize=7, loc="lower left")
ax_s.plot(steps, hist["induction_best"], color="tab:red",
          label="best induction score")
ax_s.set(ylabel="score", xlabel="training step", ylim=(0, 1))
ax_s.legend(fontsize=7, loc="lower right")
for ax in (ax_l, ax_s):
    ax.axvline(change, color="black", ls="--", lw=0.8)
ax_l.set_title(f"toy-2l in training; dashed: the phase change, step {change}",
               fontsize=9)
fig.tight_layout()
plt.show()

# Co-occurrence, an observation and not a finding: the rise of the best induction
# score over the 80 steps around the phase change, against the rise over disjoint
# 80-step windows tiling the rest of the run (centres 90 steps apart, so that no two
# windows share a record). The width was fixed after looking at these curves, and the
# comparison is partly circular: the window is centred where the second-copy loss
# first falls below its midpoint, a loss below what the order-blind count rule reaches
# on the history's sequences, so one that needs where tokens stood (chapter 17b). Even disjoint
# windows are not exchangeable draws in the strict sense, since training is not
# stationary.
score = dict(zip(steps, hist["induction_best"]))
gap = steps[1] - steps[0]
rise = {s: score[s + 40] - score[s - 40] for s in steps
        if s - 40 in score and s + 40 in score}
elsewhere = [r for s, r in rise.items()
             if s != change and (s - change) % (80 + gap) == 0]
# abruptness: the share of the curve's whole change inside the window, beside the
# share a constant rate would put there (80 steps of the run's length)
glue("ind_share", 100 * rise[change] / (score[steps[-1]] - score[steps[0]]))
glue("linear_share", 100 * 80 / (steps[-1] - steps[0]))
glue("change_step", change)
# the loss the phase-change step is defined by: halfway from chance to the lowest
glue("mid_loss", (math.log(cfg.d_vocab) + min(hist["loss_second_copy"])) / 2)
# the order-blind count rule on the history's own batch (zoo.EVAL: the repeats its
# second-copy loss is scored on, 32 tokens long, not the 24 above)
n_hist = zoo.EVAL["repeat_seq_len"]
hist_seqs = repeated_random_tokens(zoo.EVAL["repeat_batch"], n_hist, cfg.d_vocab,
                                   seed=zoo.EVAL["repeat_seed"])
glue("hist_count_bound", torch.tensor(
    [count_rule_loss(row.tolist(), n=n_hist) for row in hist_seqs],
    dtype=torch.float64).mean().item())
glue("ind_before", score[change - 40])
glue("ind_after", score[change + 40])
glue("n_windows", len(elsewhere))
plain = zoo.history("text-2l-plain")["induction_best"]
glue("plain_ind_start", plain[0])
glue("plain_ind_end", plain[-1])
rise_test = null_test(rise[change], Null.draws(
    f"the rise over the {len(elsewhere)} disjoint 80-step windows tiling the "
    "rest of the history", elsewhere), alternative="greater")
glue("rise_rank", rise_test.rank)
glue("rise_p", rise_test.p)
observation("co-occurrence, an observation (width chosen after looking at "
            "the curves; window centred on the second-copy loss's midpoint "
            "crossing, below what an order-blind rule reaches): toy-2l's "
            "best induction score's rise over the 80 steps around its phase "
            "change, and its rank among the rises over the disjoint 80-step "
            "windows tiling the rest of training (rank of n + 1, p)",
            f"{rise[change]:.3f}; {rise_test.rank} of {rise_test.n + 1}, "
            f"{rise_test.p:.3f}", chapter="induction module")

# %% tags=["hide-input"]
# Chapter 19's bump test (phases.induction_bump), recomputed from the zoo's
# histories of its two text-2l runs: the bump margin of the induction window
# (how much faster the loss falls there than in the faster of its two
# neighbours), ranked among the window centres within 3 widths of it, after
# the early descent (chapter 19 fixed that reach after seeing the data and
# prints the p for other reaches).
def bump_rank(name, near=3):
    every = zoo.info(name)["recipe"]["train"]["history_every"]
    bump = phases.induction_bump(zoo.history(name), every=every)
    others = bump.others(near)
    return null_test(bump.margin, Null.draws(
        f"the bump margin at the other {len(others)} window centres within "
        f"{near} widths of {name}'s induction window", others))


for name, tag in (("text-2l", "c"), ("text-2l-seed1", "s1")):
    bump = bump_rank(name)
    observation(f"{name}: chapter 19's rank of the bump in the training loss "
                "among the window centres near it (rank of n + 1, p)",
                f"{bump.rank} of {bump.n + 1}, {bump.p:.3f}",
                chapter="induction module")
    glue(f"bump_p_{tag}", bump.p)


# Chapter 19's bound on text-2l's gain from context on plain text, recomputed
# with its functions: the ICL score (late-band loss minus early-band loss) of
# each held-out window (circuitbook.train.text.row_icl_scores) at the
# checkpoints on either side of the induction window, on plain windows and on
# the same windows with passages copied in as in training; the change of
# each, with a bootstrap interval over the windows.
def icl_change(name="text-2l"):
    recipe = zoo.RECIPES[name]
    every = zoo.info(name)["recipe"]["train"]["history_every"]
    bump = phases.induction_bump(zoo.history(name), every=every)
    around = phases.checkpoints_around(zoo.checkpoint_steps(name),
                                       bump.centre, bump.width)
    n, data = recipe.train["seq_len"], recipe.data
    plain_rows = heldout_windows(streams.text_streams(recipe)[1], n)
    copied_rows = plain_rows.gather(1, passage_windows(
        torch.arange(n + 1), len(plain_rows), n, seed=0,
        n_repeats=data["n_repeats"], min_len=data["min_len"],
        max_len=data["max_len"]))

    def icl(step, rows):
        losses = row_position_losses(zoo.load_checkpoint(name, step), rows)
        return row_icl_scores(losses, **icl_bands(data))
    out = []
    for rows in (plain_rows, copied_rows):
        d = icl(around[1], rows) - icl(around[0], rows)
        out.append(null_test(float(d.mean()), Null.point(
            "no change between the checkpoints", 0.0),
            boot=bootstrap_means(d), alternative="two-sided"))
    return out


plain_icl, copied_icl = icl_change()
# a fall of the ICL score is a gain: the largest plain-text gain the interval
# allows over the smallest gain on text with copies
observation("text-2l, change of the ICL score across the induction window, "
            "held-out plain text and the same windows with copies (95% "
            "bootstrap intervals over windows)",
            f"{plain_icl.value:+.3f} [{plain_icl.lo:+.3f}, {plain_icl.hi:+.3f}]"
            f", {copied_icl.value:+.3f} [{copied_icl.lo:+.3f}, "
            f"{copied_icl.hi:+.3f}] nats", chapter="induction module")
glue("c19_plain_frac", -plain_icl.lo / -copied_icl.hi)

# %% [markdown]
# The best induction score goes from {glue:text}`ind_before:.2f`, 40 steps before step
# {glue:text}`change_step`, to {glue:text}`ind_after:.2f`, 40 steps after it. The score rises
# there while the second-copy loss falls, and among the {glue:text}`n_windows` disjoint
# 80-step windows tiling the rest of the history, none rises as much (rank
# {glue:text}`rise_rank`, $p$ = {glue:text}`rise_p:.3f`, the smallest $p$ that many windows
# allow). We record that as an observation, not a finding, for the two reasons chapter
# {doc}`../17_induction_evidence` gives for the same comparison. The width, 40 steps either
# side, was fixed after looking at these curves, and the comparison does not vary it. And it
# is partly circular: the window is centred on the first record where the second-copy loss
# falls below {glue:text}`mid_loss:.2f` nats, the midpoint between chance and its lowest
# value. That is below the {glue:text}`hist_count_bound:.2f` nats the order-blind count
# rule reaches on the history's own sequences (repeats of 32 tokens, longer than the 24
# above), so by then the model uses where earlier tokens stood, not only how often they
# occurred. Attending to the token after an earlier copy, which the induction score
# measures, is the most direct way to do that, though not the only one, so a rise of the
# score in the same window is expected rather than independent. (Training is not
# stationary either, so the windows are not exchangeable draws in the strict sense.) The comparison says roughly where the score rises fastest, at the
# resolution of the tiling; it is not independent evidence in Olsson et al.'s sense, where the in-context-learning score is measured on text. How abrupt
# the rise is, is a description rather than a test: {glue:text}`ind_share:.0f`% of the
# score's whole change in training falls inside those 80 steps, where a constant rate would put
# {glue:text}`linear_share:.1f`% (chapter {doc}`../17_induction_evidence` makes the same
# comparison for the losses). In this toy, trained only on repeats, the change is a cliff,
# in the one training run there is. On text, Olsson et al. see it as a smaller bump in the
# training loss, in the same window as an abrupt fall in the *in-context-learning score*,
# the loss late in a context minus the loss early in it (a fall is a gain in in-context
# learning). The book's two text models (chapter
# {doc}`../19_training`) show it very differently, and they differ in their data and in
# several other settings (context length, steps, training batches, the positions their ICL
# scores compare), so chapter 19 does not pin the difference on the data alone. Trained on
# plain Shakespeare, `text-2l-plain` forms no head that scores like an induction head
# within its budget: its best induction score ends at {glue:text}`plain_ind_end:.3f`, against
# {glue:text}`plain_ind_start:.3f` at initialisation. Trained on text with copied passages,
# `text-2l` forms them, and the slope of its training loss may bend where they form; chapter
# 19 calls that bump suggestive, not shown: ranked among the window centres near it (chapter
# 19's rule, which it fixed after seeing the data), it gives $p$ = {glue:text}`bump_p_c:.3f`,
# and {glue:text}`bump_p_s1:.3f` for a second seed. Across that window the change of its gain
# from context on plain text was at most {glue:text}`c19_plain_frac:.0%` of the change on
# text with copies (the ratio of the ends of two 95% intervals over its held-out windows:
# each end is a one-sided 97.5% bound, so both hold together, and with them the ratio's
# bound, with at least 95% confidence, to the percentile bootstrap's approximation), and
# those windows cannot tell the plain-text change from zero.
# Problem 6 measures the ICL score of a real model, SmolLM2.
#
# ### The evidence and its limits
#
# Olsson et al. argue that induction heads are behind most of the in-context learning of
# small transformers, and plausibly of large ones. Their case rests on six arguments, which
# we paraphrase:
#
# 1. **Co-occurrence.** Induction heads form during a short window early in training, a *phase
#    change*, exactly when in-context learning improves abruptly; the loss curve shows it as a
#    bump.
# 2. **Co-perturbation.** Changing the architecture so that induction heads can form earlier
#    (letting keys see the previous token directly) moves the improvement in in-context learning
#    earlier with it.
# 3. **Ablation.** Removing induction heads at test time removes most in-context learning in
#    small attention-only models.
# 4. **Generality.** The same heads also do fuzzier copying, such as completing a pattern
#    across languages.
# 5. **Mechanistic plausibility.** In small models the circuit can be reverse-engineered from the
#    weights, as above.
# 6. **Continuity.** The phase change and the heads look alike from small to large models,
#    suggesting the same mechanism throughout.
#
# What they do *not* claim matters as much. For large models with MLPs the evidence is mostly
# correlational (arguments 1, 4 and 6); the ablation and mechanistic evidence is strongest for
# small attention-only models. They do not claim that induction heads are the only mechanism of
# in-context learning, nor that every head with a high induction score does only induction.
# Their own summary is that the evidence is strong for small models and suggestive, not
# conclusive, for large ones. Problem 6 puts argument 3 to the test on a real model, and
# reports what it finds.
#
# ### Universality
#
# Induction heads are the field's best example of *universality*, the hypothesis that
# different networks trained on similar data learn the same features and circuits. Olsson et
# al. found them in the models of two or more layers they studied, from small
# attention-only models to large language models {cite}`olsson2022context`. In this book
# the evidence of that kind is SmolLM2, a model trained by other people on other data with
# another architecture, in which chapter {doc}`../17_induction_evidence` finds them with the
# same scoring functions (induction and previous-token scores). `toy-2l` is the controlled
# case, not more evidence: trained only on repeated
# random segments, where copying from the context is the only way to lower the loss, its
# induction heads are what that task calls for. That a circuit learned by gradient descent
# can be recognised across models is what makes studying small ones worth the trouble.
#
# ### Fuzzy induction, and what in-context learning is
#
# The heads found in large models are not always the crisp circuit above. Olsson et al. show
# heads that copy *approximately*: they continue a pattern through a paraphrase or a
# translation, matching a token's meaning rather than its identity. Whether that is the same
# circuit with fuzzier matching or a family of related mechanisms is not settled.
#
# More broadly, "in-context learning" is not one thing. Literal induction is the
# best-understood floor. Above it sit fuzzy induction, *task vectors* (a few examples of a task
# compress into a direction in the residual stream that makes the model perform the task
# {cite}`hendel2023incontext`), and the claim that trained transformers implement gradient
# descent on the examples in their forward pass {cite}`vonoswald2023transformers`, shown for
# linear models trained on regression tasks and contested for language models trained on
# ordinary text {cite}`shen2024pretrained`. Keep the claims apart: each has its own evidence.
#
# ## In-context learning as fast weights
#
# An induction head turns the context into an associative memory that exists only for this
# input: the previous-token head stores "what came before" as a key at each position, the
# token itself is the value, and the induction head's query looks the current token up. The
# memory is built on the fly, used and discarded. That is the idea of *fast weights*, weights
# written by one network at run time and read by another {cite}`schmidhuber1992learning`, and
# linear attention can be rewritten exactly as such a fast-weight memory
# {cite}`schlag2021linear`. Softmax attention keeps the memory as the context itself rather than
# in a matrix, but the role is the same: a learned mapping that changes with every input, on
# top of the slow weights learned in training. That view explains why a model can use a fact
# it saw once in its prompt, and why its behaviour can change without any change to its
# parameters.
#
# ## Why this matters for safety
#
# If a model can acquire a behaviour from its context, then what is established about its
# weights can be undone at run time. *Many-shot jailbreaking* is the blunt demonstration
# {cite}`anil2024manyshot`: filling a long context with hundreds of made-up dialogues in which
# an assistant complies with harmful requests makes models comply too, despite their safety
# training, and the effect grows smoothly (as a power law) with the number of examples. It is
# in-context learning working as designed, pointed at the model's own training. An audit of
# the weights does not see which behaviour a given context will elicit, and monitoring what a model is shown is a different and
# largely open problem. Capabilities can also appear abruptly in training, as the phase change
# does, so a model can gain a skill between two checkpoints with little warning in the average
# loss. Understanding the circuits that implement in-context learning is one way to predict
# such changes rather than discover them.
#
# ## Summary
#
# - Attention-only transformers without layer norm are, with their patterns frozen, sums of
#   paths; we checked that the terms add up. Real models add MLPs, most of their
#   non-embedding parameters, and normalisation.
# - QK decides where a head looks, OV what it brings; both have rank at most $d_\text{head}$.
#   Eigenvalues of the full OV circuit test for copying, computed without vocabulary-sized
#   matrices; they describe one path, the head's direct effect on the logits, and not what
#   a head does through another head that reads its output.
# - Elhage et al. write column vectors; the book writes rows. In columns,
#   $\lVert W_{QK}^\top W_{OV}\rVert_F / (\dots)$ is Q-composition, not K-composition: taken
#   for K, it measures the query-side route instead of the key-side match (and for
#   {glue:text}`q_reader` it would miss the pair).
# - Q- and K-composition steer attention; only V-composition creates virtual heads.
# - An induction head is a K-composition of a previous-token head and a copying head. In
#   `toy-2l`, {glue:text}`q_n_stand` of the four induction heads also Q-compose with the
#   previous-token head beyond the rotation null (the rest cannot be told from
#   it), a second route that chapter 17b patches; in `toy-2l`'s one
#   training run the heads form abruptly. Induction heads appear in the models of two or
#   more layers that Olsson et al. studied and in SmolLM2 (chapter 17b), and are the clearest case of a model
#   learning from its context, with consequences for safety.
