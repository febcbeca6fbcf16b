# %% [markdown]
# # 8. The OV and QK circuits
#
# An attention head has four weight matrices, but it only ever uses them in two
# products. This chapter splits a head into the two circuits of Elhage et al.
# {cite}`elhage2021mathematical`: the **QK circuit** $W_{QK} = W_Q W_K^\top$, which
# decides where the head looks, and the **OV circuit** $W_{OV} = W_V W_O$, which
# decides what it moves. We recompute a trained head's pattern and output from these
# two matrices alone and match the model's own activations; find which changes of the
# four factors leave a model's outputs exactly as they were (any change of basis inside
# a head in a model with additive positions; far fewer in a rotary model with grouped
# queries such as SmolLM2); translate carefully between the paper's column vectors and
# TransformerLens's row vectors (exercise 8.2); and meet `FactoredMatrix`, the object
# that keeps a low-rank product in factored form.
#
# The first cell imports what the chapter uses; the collapsed cell after it counts the
# roundings behind the chapter's checks.

# %% tags=["hide-input"]
import contextlib
import copy
import io
import math
import warnings

import matplotlib.pyplot as plt
import torch

from circuitbook import checks
from circuitbook.book import (glue, identity, identity_close, observation,
                              rounding_bound)
from circuitbook.circuits import ov_circuit, qk_circuit, rotary_rotation
from circuitbook.data import repeated_random_tokens
from circuitbook.heads import induction_scores, prev_token_scores
from circuitbook.models import load
from circuitbook.models.encoder_decoder import (
    MultiHeadedAttention,
    head_outputs,
    tl_weights,
)
from circuitbook.models.zoo import EVAL, metrics
from circuitbook.widgets import explore

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)
_ = torch.set_grad_enabled(False)  # we only read weights: no autograd needed


# %% tags=["hide-input"]
# Rounding bookkeeping. A check "equal to rounding" passes when the largest
# difference is at most terms * eps * scale, terms counting the roundings of
# the longer computation (see the introduction). These functions count them
# and find the sizes they are relative to.
def softmax_terms(n):
    """Two softmaxes over n keys (n + 4 roundings each)."""
    return 2 * (n + 4)


def pattern_sizes(p, S):
    """Per-entry sizes for comparing two patterns. If the scores differ by at
    most t eps S_ij, then to first order (d log p_ij = ds_ij - sum_k p_ik
    ds_ik) |dp_ij| <= t eps p_ij (S_ij + sum_k p_ik S_ik), and each softmax
    adds p_ij (n + 4) eps. So |dp_ij| <= (t + softmax terms) eps size_ij with
    size_ij = p_ij (S_ij + sum_k p_ik S_ik + 1), plus float32's smallest
    normal number (below it a weight has an absolute, not a relative,
    precision). p: [..., q, k], S: its scores' sizes; masked entries, 0 on
    both sides, pass trivially."""
    return (p * (S + (p * S).sum(-1, keepdim=True) + 1)
            + torch.finfo(p.dtype).tiny)


def output_terms(d_model, d_head, n, bias=0):
    """A head's output from a pattern, each side: the values (d_model + 1),
    the mix (n), W_O (d_head) and `bias` more additions."""
    return 2 * (n + d_model + d_head + 1 + bias)


def forward_terms(cfg, n, per_layer_extra=0):
    """One attention-only forward pass, along its longest path: per layer the
    reads (d_model + 1), scores (d_head + 1), softmax (n + 4), mix (n), W_O
    (d_head), heads' sum (n_heads), plus per_layer_extra; the unembedding."""
    layer = (cfg.d_model + 2 * cfg.d_head + 2 * n + cfg.n_heads + 6
             + per_layer_extra)
    return cfg.n_layers * layer + cfg.d_model


def smol_forward_terms(cfg, n):
    """Two float64 forward passes of SmolLM2, one reparametrised. Per layer:
    RMSNorm (d_model + 2), the projections (d_model), the rotation (4; both
    runs use the same tables), scores (d_head), softmax (n + 4), mix (n),
    W_O and the heads' sum (d_head + n_heads), the MLP (d_model + d_mlp + 3);
    the new factors and inverses, as for toy-2l at d_head = 64, with the
    condition number e^2 of G and M; the unembedding (d_model)."""
    reparam = 2 * cfg.d_head + math.ceil(cfg.d_head * math.e ** 2)
    layer = (3 * cfg.d_model + cfg.d_mlp + 2 * cfg.d_head + 2 * n
             + cfg.n_heads + 13 + reparam)
    return 2 * (cfg.n_layers * layer + cfg.d_model)


def svd_terms(d_model, d_head):
    """QR and SVD of a FactoredMatrix's two factors (Householder: about
    d_model d_head roundings, backward stable, relative to the largest
    singular value), then the reconstruction's products and AB's own."""
    return d_model * d_head + 2 * d_head


# %% [markdown]
# ## Plain language
#
# A head does two jobs, and they use different weights.
#
# **Where to look.** For every pair of positions, the head computes a score from the
# query position's residual vector and the key position's residual vector, and turns
# each query's scores into weights with a softmax (chapter {doc}`06_attention`). The
# score only ever involves $W_Q$ and $W_K$ through their product: query and key vectors
# are compared, never used for anything else. So "where to look" is one
# $d_\text{model} \times d_\text{model}$ matrix, $W_{QK}$, a *bilinear form*: it takes
# two residual vectors and returns a number. (In a rotary model it is one such form per
# offset, $W_{QK}(\Delta) = W_Q R_\Delta W_K^\top$, chapter {doc}`05_positional`; in a
# model that normalises the stream before attention, as SmolLM2 does, the form acts on
# the normalised stream, and the norm's gain sits between the stream and $W_Q$, $W_K$;
# in `toy-2l` it acts on the stream plus the positional embedding, and with its biases
# the score is a bilinear form in that vector with a 1 appended, exercise 8.1.)
#
# **What to move.** Once the weights are fixed, the head reads each key position's
# residual vector through $W_V$, and writes the weighted average into the stream
# through $W_O$. Nothing happens between the two (attention mixes positions, but it does
# not touch the $d_\text{head}$ coordinates), so "what to move" is one linear map,
# $W_{OV}$: it takes the residual vector at the source position to the vector added at
# the destination. (In a model that normalises the stream before attention, as SmolLM2
# does, $W_V$ too reads the normalised stream, the norm's gain included; in `toy-2l` the
# values read the stream alone, without the positional embedding, and the head also adds
# the constant $b_V W_O$.)
#
# The head is then *the pattern computed by one circuit, applied to the output of the
# other*. Each circuit is a $d_\text{model} \times d_\text{model}$ matrix squeezed
# through $d_\text{head}$ dimensions, so its rank is at most $d_\text{head}$: a head can
# compare only a few directions and move only a few.
#
# One more consequence is worth saying before any code. The $d_\text{head}$-dimensional
# spaces in which queries, keys and values live are private to the head (to its
# key-value group, in grouped-query attention): nothing else in the model reads them, so
# the head may as well use other coordinates for them. How
# much freedom that leaves depends on the architecture. In a model whose positions are
# added (to the stream, or, as in the book's shortformer toy models, only to what the
# queries and keys read) or absent, and whose heads each have their own keys and values,
# the model computes exactly the same function with $W_Q G$ and $W_K G^{-\top}$ in place
# of $W_Q$ and $W_K$ for **any** invertible $G$, and with $W_V M$ and $M^{-1} W_O$ for
# any invertible $M$ (with the biases transformed alike: $b_Q G$, $b_K G^{-\top}$,
# $b_V M$). A rotary model turns the query and
# key spaces by position, and only the $G$ that commute with every one of those turns
# leave its scores the same for every vector $x$ a query or key could read (not merely
# for the token sequences the model meets; and "only" needs the query and key weights,
# with the norm's gain folded in, of full column rank, a condition we state and check in
# the section on rotary positions below): when the planes' frequencies are all
# different, none is 0 or $\pi$ and no two are opposite (all modulo a full turn), as in
# SmolLM2, that is a rotation and a scaling within each rotary plane and nothing that
# mixes planes (planes whose frequencies break this could be mixed). And where query
# heads share a key-value head (grouped-query attention), they must share its $G$, and
# also its $M$, for a different reason that needs a rank condition (both are stated and
# checked in that section). Within those limits the individual matrices are not pinned
# down by what the model computes.
#
# What these changes cannot move is the products $W_{QK}$ and $W_{OV}$ (and, in a
# rotary model, how each plane is used), and that is all the argument shows: the
# products are *unchanged by every such change of a head's factors*. It does not show
# that they are the only thing a model's function pins down. Other changes keep the
# model's predictions (for the key bias, the logits too) and do move a circuit. In a
# model without rotary positions a key bias adds the same amount to every score of a
# query, which the softmax ignores; it moves the bias-extended $W_{QK}$ of exercise 8.1
# (not $W_Q W_K^\top$ itself). In a model with no final normalisation whose unembedding
# can add one amount to every logit (some $u$
# has $u W_U$ all ones, as in `toy-2l`, whose $W_U$ is square and invertible), a head
# whose write is read by nothing but the unembedding (in an attention-only model such as
# `toy-2l`, a last-layer head) can change its
# $W_{OV}$ so as to add to every logit at a position the same amount, which the softmax
# over the vocabulary ignores. And heads can be relabelled. We show the first two on
# `toy-2l` below, and that the second is not available in the book's `text-2l`.

# %% [markdown]
# ## The Annotated Transformer view
#
# In the paper {cite}`vaswani2017attention` head $i$ is
# $\operatorname{Attention}(QW_i^Q, KW_i^K, VW_i^V)$, and its share of the layer's
# output is that times its block $W_i^O$ of $W^O$ (chapter {doc}`07_multi_head`). The
# Annotated Transformer's `MultiHeadedAttention` {cite}`rush2018annotated` stores those
# matrices, for all heads at once, in four `nn.Linear` layers, *with biases*. It builds
# the four as copies of one layer (its `clones`), so a fresh module has $W_Q = W_K = W_V$
# and $b_Q = b_K = b_V$ until something re-initialises or trains them. Then every head's
# $W_{QK}$ is symmetric, and no check could tell the query side from the key side. So we
# take a fresh module, re-initialise each of its four layers on its own (Xavier weights,
# as the Annotated Transformer's `make_model` does, and random biases), and check that
# each head's bias-extended $W_{QK}$ differs from its transpose by more than rounding.
# The identities below hold for any weights; independent ones let a check catch an
# orientation mistake. We read head $i$'s matrices in TransformerLens's shapes with
# `tl_weights`.
#
# Now regroup the head's computation around the two products. With biases the query
# is $x W_Q + b_Q$, and the score of query $x_i$ on key $x_j$ is
# $(x_i W_Q + b_Q)(x_j W_K + b_K)^\top$. That is not yet a bilinear form in $x_i$ and
# $x_j$: the biases add terms linear in one side only, and a constant. Appending a 1 to
# each residual vector makes it one.
#
# ### Exercise 8.1: the QK circuit with biases
#
# Write `extended_qk(W_Q, b_Q, W_K, b_K)`, returning the $(d_\text{model} + 1) \times
# (d_\text{model} + 1)$ matrix $M$ with
# $(x_i W_Q + b_Q)(x_j W_K + b_K)^\top = [x_i, 1]\, M\, [x_j, 1]^\top$ for all $x_i,
# x_j$, for one head's TransformerLens-shaped weights (`W_Q`, `W_K`:
# `[d_model, d_head]`; biases `[d_head]`).

# %% tags=["exercise"]
def extended_qk(W_Q, b_Q, W_K, b_K):
    """W_Q, W_K: [d_model, d_head]; b_Q, b_K: [d_head] -> [d_model + 1,
    d_model + 1], the QK circuit acting on residual rows with a 1 appended
    (query side on the left)."""
    # BEGIN SOLUTION
    Q_ext = torch.cat([W_Q, b_Q[None]], dim=0)   # [d_model + 1, d_head]
    K_ext = torch.cat([W_K, b_K[None]], dim=0)
    return Q_ext @ K_ext.T
    # END SOLUTION


checks.ch08_ex1(extended_qk)

# %% [markdown]
# <details><summary>Exercise 8.1 worked out (open it once your function passes)</summary>
#
# Written out, the matrix is the product of the two weight matrices, each with its bias
# as an extra row:
#
# $$(x_i W_Q + b_Q)(x_j W_K + b_K)^\top
# = \begin{bmatrix} x_i & 1 \end{bmatrix}
# \begin{bmatrix} W_Q \\ b_Q \end{bmatrix}
# \begin{bmatrix} W_K \\ b_K \end{bmatrix}^\top
# \begin{bmatrix} x_j & 1 \end{bmatrix}^\top ,$$
#
# a bilinear form on the residual vector with a 1 appended: the biases just add one row
# to each factor.
#
# </details>
#
# On the output side, the pattern's rows sum to one, so the value bias
# comes through unchanged and the head writes
# $A\,(X W_V + \mathbf{1} b_V)\,W_O = A X W_{OV} + \mathbf{1}\, b_V W_O$.
# Below, `head_from_circuits` computes every head of the module from its bias-extended
# $W_{QK}$ and its $W_{OV}$ only, and we compare with the module's own per-head outputs.
# These are identities, true by construction for any weights: the checks show that the
# code and the algebra agree, not something about a trained model. The collapsed cell
# runs them.

# %% tags=["hide-input"]
def score_sizes(x1, W_abs_ext, d_head):
    """[..., q, k]: the size each score's rounding is relative to,
    |x1_i| W_abs_ext |x1_j|^T / sqrt(d_head), with W_abs_ext the bias-extended
    QK circuit of the weights' absolute values: the products' absolute values."""
    return x1.abs() @ W_abs_ext @ x1.abs().transpose(-1, -2) / math.sqrt(d_head)


def score_terms(d_model, d_head, extra=0):
    """A score from a bias-extended W_QK against the module's own, both sides,
    at the pair's score size. Ours: W_QK_ext (d_head), x1 @ and @ x1^T
    (d_model + 1 each), the scale; the module's: q and k (d_model + 1 each),
    q . k (d_head), the scale (`extra` more per side, e.g. x + W_pos)."""
    return 2 * (2 * (d_model + 1) + d_head + 1 + extra)


d_model, n_heads = 32, 4
mha = MultiHeadedAttention(n_heads, d_model, dropout=0.0).eval()
for lin in mha.linears:   # clones() made them equal: one draw per layer
    torch.nn.init.xavier_uniform_(lin.weight)
    torch.nn.init.uniform_(lin.bias, -1.0, 1.0)
x_at = torch.randn(2, 7, d_model)   # batch 2, 7 positions
w = tl_weights(mha)                 # W_Q: [head, d_model, d_head], ...
d_head = w["W_Q"].shape[-1]


def head_from_circuits(x, W_QK_ext, W_OV, bias_out):
    """One head from its two circuits. x: [batch, pos, d_model]."""
    x1 = torch.cat([x, torch.ones(*x.shape[:-1], 1)], dim=-1)
    scores = x1 @ W_QK_ext @ x1.transpose(-1, -2) / math.sqrt(d_head)
    pattern = scores.softmax(-1)                # no mask: an encoder head
    return pattern @ x @ W_OV + bias_out, pattern


module_heads = head_outputs(mha, x_at, x_at, x_at)  # [batch, head, q, d_m]
outs, patterns, sizes, ranks, asyms, msizes = [], [], [], [], [], []
x1_at = torch.cat([x_at, torch.ones(*x_at.shape[:-1], 1)], dim=-1)
for h in range(n_heads):
    W_QK_ext = extended_qk(w["W_Q"][h], w["b_Q"][h], w["W_K"][h],
                           w["b_K"][h])                     # [33, 33]
    W_OV = w["W_V"][h] @ w["W_O"][h]                        # [32, 32]
    # W - W^T against the rounding of two d_head-term products (scale: your
    # function on the absolute weights): the checks below can tell W_QK from
    # its transpose
    W_abs = extended_qk(w["W_Q"][h].abs(), w["b_Q"][h].abs(),
                        w["W_K"][h].abs(), w["b_K"][h].abs())
    assert ((W_QK_ext - W_QK_ext.T).abs().max() > rounding_bound(
        2 * d_head, float(W_abs.max()))), h
    asyms.append(((W_QK_ext - W_QK_ext.T).norm() / W_QK_ext.norm()).item())
    out, pattern = head_from_circuits(x_at, W_QK_ext, W_OV,
                                      w["b_V"][h] @ w["W_O"][h])
    outs.append(out)
    patterns.append(pattern)
    sizes.append(score_sizes(x1_at, W_abs, d_head))  # [2, 7, 7]
    values = x_at.abs() @ w["W_V"][h].abs() + w["b_V"][h].abs()
    msizes.append(values @ w["W_O"][h].abs())       # [2, 7, d_model]
    # the rank, from a float64 product (float32 rounding would add rank)
    ranks.append(torch.linalg.matrix_rank(extended_qk(
        *(t.double() for t in (w["W_Q"][h], w["b_Q"][h], w["W_K"][h],
                               w["b_K"][h])))).item())
n_at = x_at.shape[1]
# each weight against a bound relative to its own size (see pattern_sizes)
p_size = pattern_sizes(mha.attn, torch.stack(sizes, 1))
identity_close("the pattern computed from the bias-extended W_QK is the "
               "module's own (each weight's error over its size)",
               torch.stack(patterns, 1) / p_size, mha.attn / p_size,
               terms=score_terms(d_model, d_head) + softmax_terms(n_at),
               scale=1.0, chapter="8")
# each output against its own size: the weights' bounds (relative to
# p_size, which is at least the weight) times the messages' sizes, plus each
# side's own mix, W_V, W_O and bias, relative to the same sizes
o_sizes = p_size @ torch.stack(msizes, 1)         # [batch, head, q, d_model]
identity_close("each Annotated Transformer head equals pattern(x, W_QK) @ "
               "x W_OV + b_V W_O, from the two circuits alone (each output's "
               "error over its size)",
               torch.stack(outs, 1) / o_sizes, module_heads / o_sizes,
               terms=(score_terms(d_model, d_head) + softmax_terms(n_at)
                      + output_terms(d_model, 2 * d_head, n_at, bias=1)),
               scale=1.0, chapter="8")
identity(f"the bias-extended W_QK ({d_model + 1} x {d_model + 1}) still has "
         f"rank <= d_head = {d_head}", max(ranks), max(ranks) <= d_head,
         chapter="8")
observation("with each layer re-initialised, no head's bias-extended W_QK is "
            "symmetric: the smallest |W - Wᵀ| / |W| over the heads",
            f"{min(asyms):.2f}", chapter="8")

# %% [markdown]
# ## The circuit view
#
# From here on we use TransformerLens's row-vector convention: a residual vector is a
# row, weights act on the right. For head $h$ of a layer, write $X$ for what its values
# read and $X_{QK}$ for what its queries and keys read, one row per position. In a
# model with positions added to the stream (or none) and no normalisation, both are the
# layer's input stream. In `toy-2l`, a shortformer model, $X$ is the stream and
# $X_{QK} = X + W_\text{pos}$ (the code's `x_qk` below); in SmolLM2 both are the
# RMSNorm's output, gain included, and the queries and keys are also rotated. In the
# book's encoder-decoder, which normalises before each sublayer, both are the
# LayerNorm's output; in its cross-attention (chapter {doc}`12_cross_attention`) the
# queries read the decoder's stream and the keys and values the encoder's output, so
# the two sides of $W_{QK}$ read different streams. Then
#
# $$W_{QK}^h = W_Q^h (W_K^h)^\top, \qquad W_{OV}^h = W_V^h W_O^h,$$
#
# both $d_\text{model} \times d_\text{model}$ and of rank at most $d_\text{head}$, and
#
# $$A^h = \operatorname{softmax}^*\!\Big(\frac{X_{QK} W_{QK}^h X_{QK}^\top}
# {\sqrt{d_\text{head}}} + \text{bias terms}\Big),$$
#
# $$h(X) = A^h\, X\, W_{OV}^h + \mathbf{1}\, b_V^h W_O^h ,$$
#
# where $\operatorname{softmax}^*$ masks the future before the softmax. Read the second
# formula right to left: $X W_{OV}^h$ is the *message* each position would send if it
# were attended to, and $A^h$ decides how much of each message reaches each
# destination. The pattern depends only on $W_{QK}$, the messages only on $W_{OV}$.
# (In a rotary model the score's $W_{QK}^h$ becomes $W_{QK}^h(i - j)$; the OV side is
# the same, since values are not rotated.)
#
# We test this on the book's trained two-layer attention-only model `toy-2l` (chapter
# {doc}`03_residual_stream` introduced it). Its queries and keys read the stream plus
# the positional embedding (*shortformer* positions {cite}`press2021shortformer`), its
# values read the stream alone. The zoo records which head is its strongest induction
# head on the zoo's evaluation batch; we recompute that score rather than trust the
# record. (Its lead over the runner-up is small: chapter {doc}`17_induction_heads`
# finds all four layer-1 heads are induction heads.)

# %%
with contextlib.redirect_stdout(io.StringIO()):  # loading reports the device
    model = load("toy-2l")
cfg = model.cfg
record = metrics("toy-2l")
L, H = record["induction_head"]
ind = induction_scores(model, seq_len=EVAL["repeat_seq_len"],  # the zoo's
                       batch=EVAL["repeat_batch"],            # own settings
                       seed=EVAL["repeat_seed"])
print(f"zoo record: induction head {L}.{H}, score "
      f"{record['induction_best']:.4f}; recomputed: {ind[L, H]:.4f}")
print("induction scores per head [layer, head]:\n", ind.numpy().round(3))
# The record: the same code on the same tokens, perhaps on another CPU,
# stored to 6 significant digits. A weight's rounding through both layers,
# on two CPUs, at the largest score on those tokens, plus half a unit of the
# record's 6th digit.
rep_tokens = repeated_random_tokens(EVAL["repeat_batch"],
                                    EVAL["repeat_seq_len"], cfg.d_vocab,
                                    seed=EVAL["repeat_seed"])
_, rep_cache = model.run_with_cache(
    rep_tokens, names_filter=lambda n: n.endswith("attn_scores"))
rep_scores = torch.cat([rep_cache["attn_scores", l].flatten()
                        for l in range(cfg.n_layers)])
rep_size = float(rep_scores[rep_scores.isfinite()].abs().max())
ind_tol = (rounding_bound(2 * forward_terms(cfg, rep_tokens.shape[1]),
                          rep_size) + 5e-6 * abs(record["induction_best"]))
identity(f"head {L}.{H}'s recomputed induction score is the zoo's record "
         "within a worst-case rounding bound (a loose one: see the text)",
         f"{ind[L, H].item():.6g} vs {record['induction_best']} "
         f"(tolerance {ind_tol:.1e})",
         abs(ind[L, H].item() - record["induction_best"]) <= ind_tol,
         chapter="8")
# which head leads is a fact about the trained weights, not an identity
assert ind.argmax().item() == L * cfg.n_heads + H   # the record's head
observation(f"head {L}.{H} is toy-2l's strongest induction head on the zoo's "
            "evaluation batch, as recorded (the recomputed argmax)",
            "{}.{}".format(*divmod(ind.argmax().item(), cfg.n_heads)),
            chapter="8")
ind_sorted = ind.flatten().sort(descending=True).values
ind_gap = (ind_sorted[0] - ind_sorted[1]).item()   # to the runner-up head
ind_diff = abs(ind[L, H].item() - record["induction_best"])
glue("ind_tol", ind_tol)
glue("ind_gap", ind_gap)
glue("ind_tol_ratio", ind_tol / ind_gap)
glue("ind_best", ind_sorted[0].item())
glue("ind_second", ind_sorted[1].item())
glue("ind_digits", "agrees with the record in all six of the record's "
     "significant digits" if f"{ind[L, H].item():.6g}"
     == f"{record['induction_best']:.6g}" else
     f"differs from the record by {ind_diff:.1e}")

# %% [markdown]
# The tolerance of that check, {glue:text}`ind_tol:.1e`, is a worst-case bound for
# float32 rounding through both layers on two machines, and a loose one: it is
# {glue:text}`ind_tol_ratio:.1f` times the gap between the best head's score
# ({glue:text}`ind_best:.3f`) and the runner-up's ({glue:text}`ind_second:.3f`). So it
# does not by itself tell the heads apart; the argmax does that, and the recomputed
# score {glue:text}`ind_digits`.
#
# TransformerLens can keep each head's write separately (`hook_result`, after
# `set_use_attn_result(True)`). We run a sequence of 20 random tokens repeated once,
# recompute head $L.H$'s pattern from its bias-extended QK circuit (exercise 8.1), and
# its output from the hooked pattern and the OV side (so that each check tests one
# circuit), as chapter {doc}`07_multi_head` computed a head's output, and compare both
# with the hooks. Again identities: they hold for any weights.

# %%
model.set_use_attn_result(True)
tokens = repeated_random_tokens(1, 20, cfg.d_vocab, seed=1)     # [1, 40]
logits, cache = model.run_with_cache(tokens)
attn = model.blocks[L].attn
x = cache["resid_pre", L][0]          # [pos, d_model]: what the values read
n_pos = x.shape[0]
x_qk = x + model.W_pos[:n_pos]        # queries and keys also see W_pos
x1 = torch.cat([x_qk, torch.ones(n_pos, 1)], dim=-1)
W_QK_ext = extended_qk(attn.W_Q[H], attn.b_Q[H], attn.W_K[H], attn.b_K[H])
scores = x1 @ W_QK_ext @ x1.T / math.sqrt(cfg.d_head)
future = torch.ones(n_pos, n_pos).triu(1).bool()
pattern = scores.masked_fill(future, float("-inf")).softmax(-1)
hooked_pattern = cache["pattern", L][0, H]
S_2l = score_sizes(x1, extended_qk(attn.W_Q[H].abs(), attn.b_Q[H].abs(),
                                  attn.W_K[H].abs(), attn.b_K[H].abs()),
                   cfg.d_head)
messages_size = x.abs() @ attn.W_V[H].abs() + attn.b_V[H].abs()
o_2l = float((hooked_pattern @ messages_size @ attn.W_O[H].abs()).max())
# as for the Annotated Transformer's heads, with x + W_pos on each side;
# each weight against a bound relative to its own size
p_size = pattern_sizes(hooked_pattern, S_2l)
identity_close(f"head {L}.{H}'s pattern, from its QK circuit alone, matches "
               "hook_pattern (each weight's error over its size)",
               pattern / p_size, hooked_pattern / p_size,
               terms=(score_terms(cfg.d_model, cfg.d_head, extra=1)
                      + softmax_terms(n_pos)), scale=1.0, chapter="8")

# the output side, from the hooked pattern (checked just above)
out = hooked_pattern @ (x @ attn.W_V[H] + attn.b_V[H]) @ attn.W_O[H]
hooked = cache["result", L][0, :, H]           # [pos, d_model]
OUT_2L = output_terms(cfg.d_model, cfg.d_head, n_pos)
identity_close(f"head {L}.{H}'s output = pattern (x W_V + b_V) W_O matches "
               "hook_result", out, hooked, terms=OUT_2L, scale=o_2l,
               chapter="8")
W_OV = attn.W_V[H] @ attn.W_O[H]
messages = x @ W_OV + attn.b_V[H] @ attn.W_O[H]   # what each position sends
# reassociated: W_OV and b_V W_O add d_head + 1 more
identity_close("the same output is the pattern applied to the OV messages "
               "x W_OV + b_V W_O", hooked_pattern @ messages, hooked,
               terms=OUT_2L + cfg.d_head + 1, scale=o_2l, chapter="8")

# %% [markdown]
# The figure shows the split on this sequence. Left, the pattern: in the second copy
# each position attends to the position just after the earlier occurrence of its token
# (the stripe below the diagonal), which is what an induction head does. Right, how
# large each position's message $x_j W_{OV} + b_V W_O$ is; the pattern picks which of
# them arrive where. We measure the stripe on this one sequence: in the second copy,
# the head's mean weight at the stripe's offset (19: query $20 + k$, key $k + 1$), next
# to its weight at every other offset and to what a head attending uniformly would give.

# %%
second = torch.arange(20, n_pos)                 # queries of the second copy
by_offset = torch.stack([pattern[second, second - off].mean()
                         for off in range(21)])  # mean weight at each offset
other_offsets = torch.cat([by_offset[:19], by_offset[20:]])
uniform_stripe = (1 / (second + 1.0)).mean()     # the uniform causal pattern
observation(f"in the second copy of one sequence, head {L}.{H}'s mean weight "
            "on the token after the earlier occurrence (offset 19); the "
            "largest at any other offset 0-20; the uniform causal pattern's",
            f"{by_offset[19]:.2f}; {other_offsets.max():.3f}; "
            f"{uniform_stripe:.3f}", chapter="8")
glue("stripe", by_offset[19].item())
glue("stripe_other", other_offsets.max().item())
glue("stripe_uniform", uniform_stripe.item())

import plotly.graph_objects as go

from circuitbook.viz import heatmap  # hover a cell for its query, key, weight

fig = heatmap(pattern, range(n_pos), range(n_pos),
              panel_titles=[f"QK: pattern of head {L}.{H}"],
              x_title="key position j", y_title="query position i",
              zmin=0, zmax=1,
              side=[go.Bar(x=list(range(n_pos)),
                           y=messages.norm(dim=-1).tolist(),
                           marker_color="#ff7f0e", name="message size")],
              side_title="OV: the message at each position", side_width=0.8)
fig.figure.update_xaxes(title_text="source position j", col=2)
fig.figure.update_yaxes(title_text="message length", col=2)
fig

# %% [markdown]
# In the second copy the head puts {glue:text}`stripe:.2f` of each query's weight, on
# average, on the token after the earlier occurrence of its own, and at most
# {glue:text}`stripe_other:.4f` on any other offset from 0 to 20; a head spreading its
# weight evenly over the past would put {glue:text}`stripe_uniform:.3f` there. That is
# an observation on one sequence of one model, not a test: whether training made the stripe, and
# whether it makes this head an induction head, are questions for nulls that this
# chapter does not draw (chapter {doc}`17_induction_heads` tests its induction score, and
# chapter {doc}`09_full_circuits` sets its circuits beside the same architecture at
# initialisation).
#
# ### The products do not depend on the heads' coordinates
#
# Start with a model like `toy-2l`: its positions are added, not rotated (and, since it
# is a shortformer model, only to the input of the queries and keys, never to the
# stream), and its heads each have their own keys and values. Take any invertible
# $d_\text{head} \times d_\text{head}$ matrices $G$ and $M$ and change a head's weights
# to
#
# $$W_Q \to W_Q G,\quad b_Q \to b_Q G,\quad W_K \to W_K G^{-\top},\quad
# b_K \to b_K G^{-\top},$$
#
# $$W_V \to W_V M,\quad b_V \to b_V M,\quad W_O \to M^{-1} W_O .$$
#
# Every query changes to $qG$ and every key to $kG^{-\top}$, and
# $qG\,(kG^{-\top})^\top = q G G^{-1} k^\top = q k^\top$: the scores do not move. The
# values become $vM$ and $vM M^{-1} W_O = v W_O$: the output does not move either. We
# apply a different random pair $(G, M)$ to every head of `toy-2l` (well-conditioned but
# far from orthogonal: singular values between $e^{-1}$ and $e$) and run the model.

# %%
g = torch.Generator().manual_seed(8)


def random_invertible(n):
    """A random n x n matrix with singular values between e^-1 and e."""
    Q1, _ = torch.linalg.qr(torch.randn(n, n, generator=g))
    Q2, _ = torch.linalg.qr(torch.randn(n, n, generator=g))
    return Q1 @ torch.diag(torch.exp(2 * torch.rand(n, generator=g) - 1)) @ Q2


def rows_times(b, T):
    """Per-head bias [head, d_head] times per-head matrix [head, d, d]."""
    return torch.einsum("he,hef->hf", b, T)


shuffled = copy.deepcopy(model)
for block in shuffled.blocks:
    a = block.attn
    G = torch.stack([random_invertible(cfg.d_head)
                     for _ in range(cfg.n_heads)])
    M = torch.stack([random_invertible(cfg.d_head)
                     for _ in range(cfg.n_heads)])
    G_inv_T = torch.linalg.inv(G).mT
    a.W_Q.copy_(a.W_Q @ G)
    a.b_Q.copy_(rows_times(a.b_Q, G))
    a.W_K.copy_(a.W_K @ G_inv_T)
    a.b_K.copy_(rows_times(a.b_K, G_inv_T))
    a.W_V.copy_(a.W_V @ M)
    a.b_V.copy_(rows_times(a.b_V, M))
    a.W_O.copy_(torch.linalg.inv(M) @ a.W_O)

new_logits, new_cache = shuffled.run_with_cache(tokens)
q_change = ((shuffled.W_Q - model.W_Q).norm() / model.W_Q.norm()).item()
v_change = ((shuffled.W_V - model.W_V).norm() / model.W_V.norm()).item()
# G and M have condition numbers up to COND = e^2: the new factors and their
# products' roundings grow by up to COND, and inverting G or M adds about
# d_head COND roundings, per layer, on top of one forward pass, both models
COND = math.e ** 2
REPARAM_TERMS = 2 * cfg.d_head + math.ceil(cfg.d_head * COND)
FWD_TERMS = forward_terms(cfg, n_pos, per_layer_extra=REPARAM_TERMS)
identity_close("with W_Q G, W_K G^-T, W_V M, M^-1 W_O in every head, the "
               "logits are unchanged", new_logits, logits,
               terms=2 * FWD_TERMS, scale=COND * float(logits.abs().max()),
               chapter="8")
logit_bound = rounding_bound(2 * FWD_TERMS, COND * float(logits.abs().max()))
# each score's size: sum_e |q_e| |k_e| / sqrt(d_head), the larger of the two
# models', pair by pair [layer, batch, head, q, k]
pair_sizes = torch.stack([torch.maximum(*[
    torch.einsum("bphe,bqhe->bhpq", c["q", l].abs(), c["k", l].abs())
    for c in (cache, new_cache)]) for l in range(cfg.n_layers)])
pair_sizes /= math.sqrt(cfg.d_head)
new_scores, old_scores = (
    torch.stack([c["attn_scores", l]
                 for l in range(cfg.n_layers)])[..., ~future]
    for c in (new_cache, cache))
# each score: both models' forward passes up to it, at its pair's size
identity_close("and so is every attention score (each score's error over its "
               "size)", new_scores / pair_sizes[..., ~future],
               old_scores / pair_sizes[..., ~future],
               terms=2 * FWD_TERMS, scale=1.0, chapter="8")
# each weight against a bound relative to its own size (see pattern_sizes)
old_patterns = torch.stack([cache["pattern", l] for l in range(cfg.n_layers)])
p_size = pattern_sizes(old_patterns, pair_sizes)
PATTERN_TERMS = 2 * FWD_TERMS + softmax_terms(n_pos)
identity_close("and so every attention pattern (each weight's error over its "
               "size)",
               torch.stack([new_cache["pattern", l]
                            for l in range(cfg.n_layers)]) / p_size,
               old_patterns / p_size, terms=PATTERN_TERMS, scale=1.0,
               chapter="8")
# the bound as a fraction of each weight (size_ij / p_ij), unmasked weights
mean_size = (old_patterns * pair_sizes).sum(-1, keepdim=True)
pattern_rel = (rounding_bound(PATTERN_TERMS, 1.0)
               * (pair_sizes + mean_size + 1))[..., ~future]
# W_Q G (G^-1)^T^T W_K^T vs W_Q W_K^T: three d_head products and the inverse,
# each side's rounding at COND times |W_Q| |W_K|^T (|W_V| |W_O| for OV)
circuit_diffs = torch.cat([
    (shuffled.W_Q @ shuffled.W_K.mT - model.W_Q @ model.W_K.mT).flatten(),
    (shuffled.W_V @ shuffled.W_O - model.W_V @ model.W_O).flatten()])
circuit_size = max(float((model.W_Q.abs() @ model.W_K.abs().mT).max()),
                   float((model.W_V.abs() @ model.W_O.abs()).max()))
identity_close("W_QK and W_OV of every head are unchanged", circuit_diffs,
               torch.zeros_like(circuit_diffs),
               terms=4 * cfg.d_head + REPARAM_TERMS,
               scale=COND * circuit_size, chapter="8")
observation("while W_Q and W_V themselves changed (relative Frobenius norm "
            "of the change)", f"{q_change:.2f}, {v_change:.2f}", chapter="8")
glue("q_change", q_change)
glue("v_change", v_change)
glue("shuffle_logit_bound", logit_bound)  # the bound, not the rounding noise
glue("pattern_rel_max", pattern_rel.max().item())
glue("pattern_rel_median", pattern_rel.median().item())

# %% [markdown]
# $W_Q$ moved by {glue:text}`q_change:.0%` of its norm and $W_V$ by
# {glue:text}`v_change:.0%`, yet the logits agree to within float32 rounding (the
# worst-case bound for this computation is {glue:text}`shuffle_logit_bound:.0e`), and
# so does every attention weight, each within a bound relative to its own size (at most
# {glue:text}`pattern_rel_max:.0%` of the weight, {glue:text}`pattern_rel_median:.1%`
# for the median one: loose, because it allows every rounding of both forward passes
# to pile up on one score, but it holds the many small weights as tightly as the large
# ones).
# No input, and no loss computed from the outputs, can tell the two sets of weights
# apart (a penalty on the weights themselves, such as weight decay, could). A statement
# such as "dimension 3 of head 1.1's queries detects punctuation" is therefore not a
# fact about the function this model computes: it holds in one choice of coordinates and
# fails in another. (Whether training made the stored coordinates special is a separate
# question, to be measured; chapter {doc}`03_residual_stream` explains why the symmetry
# does not settle it.)
# A statement about $W_{QK}$ or $W_{OV}$ survives every change of this kind (and a change
# of basis of the residual stream itself moves every head's circuits together). That is
# invariance under these changes, not uniqueness: the folded cell below changes each
# circuit in a way that is not of this kind and still leaves the model's predictions as
# they were. Chapter
# {doc}`03_residual_stream` made the same argument for the residual stream with
# rotations, the changes of the stream's basis that also survive an RMSNorm once its
# gain is folded (it commutes with them); `toy-2l` has no norms, so there any invertible
# change of the stream's basis would keep the function too. The
# freedom here is of a different space, each head's own: in `toy-2l` any invertible
# matrix will do, because its positions are added
# to what $W_Q$ and $W_K$ read (the stream plus $W_\text{pos}$) before they read it, and
# nothing touches queries, keys or values between their weights and their products: no
# rotation, no normalisation, no nonlinearity applied coordinate by coordinate.

# %% tags=["hide-input"]
# Two changes inside a head that are not of the G, M kind, on a float64 copy
# of toy-2l (rounding then cannot hide a change): a random key bias added to
# heads 0.2 and 1.1 (each query's scores all move by q . delta); and, for
# head 1.1 (the last layer, which nothing but the unembedding reads), W_O ->
# W_O + a^T u with u W_U = 1, all ones: toy-2l has no final normalisation and
# its W_U is square, so u exists, and the head then adds (z a^T) u to the
# stream, which adds z a^T to every logit of its position alike.
with contextlib.redirect_stdout(io.StringIO()):  # .to reports the dtype
    toy64 = copy.deepcopy(model).to(torch.float64)
logits64 = toy64(tokens)
g_demo = torch.Generator().manual_seed(88)   # leaves g's draws as they were
shifted = copy.deepcopy(toy64)
for l, h in ((0, 2), (L, H)):
    shifted.blocks[l].attn.b_K[h] += 3 * torch.randn(
        cfg.d_head, generator=g_demo, dtype=torch.float64)
qk_ext = [extended_qk(m.blocks[L].attn.W_Q[H], m.blocks[L].attn.b_Q[H],
                      m.blocks[L].attn.W_K[H], m.blocks[L].attn.b_K[H])
          for m in (toy64, shifted)]
kb_qk_change = ((qk_ext[1] - qk_ext[0]).norm() / qk_ext[0].norm()).item()
kb_logits = shifted(tokens)
_, kb_cache = shifted.run_with_cache(tokens,
                                     names_filter=lambda n: "scores" in n)
kb_score_size = max(float(kb_cache["attn_scores", l][..., ~future].abs().max())
                    for l in range(cfg.n_layers))
# both float64 forward passes, at the logits' size times the largest score
# (a score's rounding moves a weight by its own size, and a logit with it)
identity_close("a random key bias added to heads 0.2 and 1.1 leaves toy-2l's "
               "logits unchanged (float64)", kb_logits, logits64,
               terms=2 * forward_terms(cfg, n_pos),
               scale=float(logits64.abs().max()) * max(1, kb_score_size),
               chapter="8")
u = torch.linalg.solve(toy64.W_U.T, torch.ones(cfg.d_vocab,
                                               dtype=torch.float64))
u_size = float((u.abs() @ toy64.W_U.abs()).max())
# a backward-stable solve: u W_U = 1 to the rounding of a d_model-term product
assert ((u @ toy64.W_U - 1).abs().max()
        <= rounding_bound(2 * cfg.d_model, u_size, torch.float64))
a_dir = torch.randn(cfg.d_head, generator=g_demo, dtype=torch.float64)
lifted = copy.deepcopy(toy64)
lifted.blocks[L].attn.W_O[H] += a_dir[:, None] * u[None]
ov64 = [m.blocks[L].attn.W_V[H] @ m.blocks[L].attn.W_O[H]
        for m in (toy64, lifted)]
ls_ov_change = ((ov64[1] - ov64[0]).norm() / ov64[0].norm()).item()
ls_logits = lifted(tokens)
ls_moved = (ls_logits - logits64).abs().max().item()
# both passes and the log-softmax over the vocabulary, at the new logits'
# size; and u W_U's rounding (2 d_model, as just asserted), by which the
# shift z a^T u W_U can differ between logits, on each side of the softmax
identity_close(f"W_O -> W_O + aᵀu with u W_U = 1 in head {L}.{H} leaves the "
               "log-probabilities unchanged (float64)",
               ls_logits.log_softmax(-1), logits64.log_softmax(-1),
               terms=2 * forward_terms(cfg, n_pos) + 2 * cfg.d_vocab
               + 4 * cfg.d_model,
               scale=max(float(ls_logits.abs().max()), ls_moved * u_size),
               chapter="8")
observation(f"while head {L}.{H}'s bias-extended W_QK (key bias) and its "
            "W_OV (the lift) moved, relative to their norms; and the logits "
            "moved by", f"{kb_qk_change:.2f}; {ls_ov_change:.0f}; "
            f"{ls_moved:.2f}", chapter="8")
glue("kb_qk_change", kb_qk_change)
glue("ls_ov_change", ls_ov_change)
glue("ls_moved", ls_moved)


# The lift needs some u with u W_U = 1. text-2l has no final normalisation
# either, but its W_U is d_model x d_vocab = 64 x 512, so the ones vector
# need not lie in its row space: the least-squares u, and how far u W_U stays
# from all ones (relative to |1|); the same solver on toy-2l's W_U, where u
# exists, as the control
def ones_residual(W_U):
    ones = torch.ones(W_U.shape[1], dtype=torch.float64)
    u_ls = torch.linalg.lstsq(W_U.T, ones[:, None]).solution[:, 0]
    return ((u_ls @ W_U - ones).norm() / ones.norm()).item()


with contextlib.redirect_stdout(io.StringIO()):  # loading reports the device
    text2l = load("text-2l")
W_U_text = text2l.W_U.double()                   # [64, 512]
text_resid, toy_resid = ones_residual(W_U_text), ones_residual(toy64.W_U)
# a least-squares solve in float64: about d_model d_vocab roundings, times
# the condition number of W_U
ls_floor = rounding_bound(
    cfg.d_model * text2l.cfg.d_vocab,
    max(torch.linalg.cond(W).item() for W in (W_U_text, toy64.W_U)),
    torch.float64)
assert toy_resid <= ls_floor < text_resid   # the next line's claim
observation(f"text-2l (no final normalisation, W_U {text2l.cfg.d_model} x "
            f"{text2l.cfg.d_vocab}): the least-squares u leaves "
            "|u W_U - 1| / |1| at; toy-2l's (square W_U), the control",
            f"{text_resid:.2f}; {toy_resid:.0e}", chapter="8")
glue("text2l_ones_resid", text_resid)
glue("text2l_d_vocab", text2l.cfg.d_vocab)
glue("text2l_d_model", text2l.cfg.d_model)

# %% [markdown]
# A key bias moved the bias-extended $W_{QK}$ of head $L.H$ by
# {glue:text}`kb_qk_change:.0%` of its norm and left every logit as it was (to float64
# rounding); the change along $u$ moved its $W_{OV}$ by {glue:text}`ls_ov_change:.0f`
# times its norm, moved the logits by up to {glue:text}`ls_moved:.1f`, and left every
# predicted probability as it was. So, in a model without rotary positions, the
# key-bias column of exercise 8.1's matrix is not pinned down even by the logits. And a
# head's $W_{OV}$ can move along a direction that shifts all logits alike in a model that
# has what `toy-2l` has: no final normalisation, a $u$ with $u W_U$ all ones (`toy-2l`'s
# $W_U$ is square and invertible), and nothing after the head that reads $u$ (head
# $L.H$ is in the last layer; a layer-0 head's write along $u$ would be read by
# layer 1). The book's `text-2l` has no final normalisation either, but its $W_U$ is
# {glue:text}`text2l_d_model` by {glue:text}`text2l_d_vocab`: the closest $u W_U$ can
# come to all ones still misses by {glue:text}`text2l_ones_resid:.2f` of the all-ones
# vector's norm, so there no change of the stream that reaches the unembedding shifts
# all logits alike. The precise statement of this section is therefore: the products
# are unchanged by every change of a head's factors of the $G$, $M$ kind, and
# statements about the factors are not; it does not say that nothing else could change
# the products.

# %% [markdown]
# ### With rotary positions and shared keys
#
# That argument needs nothing to touch queries and keys between $W_Q$, $W_K$ and their
# dot product. In a rotary model something does: the rotations (chapter
# {doc}`05_positional`). With $W_Q \to W_Q G$ and $W_K \to W_K G^{-\top}$ the score of
# a query at $i$ on a key at $j$ becomes
#
# $$x_i\, W_Q G\, R_{i-j}\, G^{-1} W_K^\top\, x_j^\top,$$
#
# the same for every input and every offset if and only if
# $G R_\Delta G^{-1} = R_\Delta$ for every $\Delta$ (the "only if" needs $W_Q$ and
# $W_K$ of full column rank, here with the RMSNorm gain folded in,
# $\operatorname{diag}(\gamma) W_Q$, which we check below): when $G$ **commutes with every
# rotation**. $R_\Delta$ turns plane $m$
# (coordinates $m$ and $m + 32$ in SmolLM2's split-halves layout) by $\Delta\theta_m$,
# multiplying it, read as a complex number, by $e^{i\Delta\theta_m}$. SmolLM2's 32
# frequencies $\theta_m$ are all different and lie in $(0, \pi)$, so the 64 numbers
# $e^{\pm i\theta_m}$ are all different: $R_1$ has 64 distinct eigenvalues, and a $G$
# that commutes with it must keep each of its eigenvectors. That rules out mixing planes,
# and within plane $m$ leaves
#
# $$G_m = a_m I + b_m J = s_m R(\varphi_m), \qquad
# J = \begin{bmatrix} 0 & 1 \\ -1 & 0 \end{bmatrix},\quad
# a_m = s_m\cos\varphi_m,\; b_m = s_m\sin\varphi_m ,$$
#
# a scaled rotation ($R(\varphi)$ here is chapter {doc}`05_positional`'s row-vector
# block, the transpose of the textbook one): the complex number $s_m e^{i\varphi_m}$.
# Conversely, every such block-diagonal $G$ commutes with every $R_\Delta$, since
# complex numbers commute. So
# $G$ is one nonzero complex number per plane, 64 real numbers, where a model with
# additive positions allows any of the $64^2 = 4096$. On the key side
# $G_m^{-\top} = s_m^{-1} R(\varphi_m)$: query and key turn by the same angle, one grows
# as the other shrinks. The values are not rotated, so $M$ stays free.
#
# Grouped-query attention adds one more constraint. The three query heads of a group
# read one key head and one value head (chapter {doc}`07_multi_head`), so the one
# $W_K^{\mathrm{kv}} G^{-\top}$ must serve all three. Each head's score then needs
# $G_h R_\Delta G^{-1} = R_\Delta$, and $\Delta = 0$ gives $G_h = G$: they must share
# $G$. For $M$ the reason is different, since the heads' outputs are added, not
# compared one by one. Let the shared $W_V$ become $W_V M$ and head $h$'s $W_O^h$ become
# $M_h^{-1} W_O^h$. On a one-token input every pattern is 1, and the group's output
# changes by $x W_V \sum_h (M M_h^{-1} - I) W_O^h$. That is zero for every $x$ only if
# every $M_h = M$, provided $W_V$ has full column rank and the group's three $W_O^h$,
# stacked into one $3 d_\text{head} \times d_\text{model}$ matrix, have full row rank
# (full rank of each $W_O^h$ alone is not enough). That is the condition when only this
# group's factors change. When every group of a layer changes at once, the groups'
# changes add, $x \sum_g W_V^g \sum_{h \in g} (M_g M_h^{-1} - I) W_O^h$, and one group's
# change could cancel another's. What rules that out is that the layer's nine $W_O^h$,
# stacked into one $9 d_\text{head} \times d_\text{model}$ matrix (square in SmolLM2),
# be invertible: then every $W_V^g (M_g M_h^{-1} - I)$ is zero, and with each $W_V^g$ of
# full column rank every $M_h = M_g$. We check these conditions below. SmolLM2's
# freedom is then, per layer, three $G$ of 64 numbers and three $M$ of 4096, not nine of
# each. These changes cannot move, in each plane, the product of the query's and the
# key's size (the scale cancels) and the angle between them. So the plane amplitudes of
# chapter {doc}`05_positional` (the query's plane size times the key's) do not depend on
# these coordinates.
#
# We check both halves on SmolLM2 with a short passage (16 tokens). First the algebra:
# the frequencies are distinct, a complex scalar per plane commutes with every
# $R_\Delta$, and a generic $G$ does not; and, an observation about these weights, they
# have the full rank that the "only if" and the shared $M$ need (each group's stacked
# $W_O^h$ and each layer's nine included). Then the model, in
# float64 so that rounding cannot hide a real change (the float32 bound for the same
# 30 layers would be $2^{29}$ times the float64 one, too loose to show a small change),
# reparametrised in every layer in three
# ways: one $G$ of the allowed kind per key-value group, applied to the group's $W_K$
# and to all three of its $W_Q^h$, with a generic $M$; a generic $G$ per group,
# conditioned like it; and allowed $G$ that differ between the heads of a group, the
# key taking the first head's. The first must leave the logits unchanged to rounding.
# The other two are not symmetries, and we show it by how much they change the logits
# next to the rounding bound. The collapsed cell loads the model and the text.

# %% tags=["hide-input"]
from circuitbook.data.corpus import shakespeare_scenes
from circuitbook.models import load_pretrained

smol = load_pretrained("smollm2-135m", dtype=torch.float64)
tok = smol.tokenizer
scenes = shakespeare_scenes()
smol_ids = tok(scenes[390][1], return_tensors="pt",
               add_special_tokens=False).input_ids[:, :16]

# %%
S_L, S_H = smol.cfg.n_layers, smol.cfg.n_heads
KV, D = smol.cfg.n_key_value_heads, smol.cfg.d_head
HALF, GROUP = D // 2, S_H // KV


def plane_scalars():
    """A G that commutes with every rotation: in each plane (m, m + D/2) a
    random rotation times a random scale in [1/e, e], i.e. s e^{i phi}."""
    s = torch.exp(2 * torch.rand(HALF, generator=g) - 1)
    phi = 2 * math.pi * torch.rand(HALF, generator=g)
    a, b = torch.arange(HALF), torch.arange(HALF) + HALF
    G = torch.zeros(D, D)
    G[a, a], G[b, b] = s * phi.cos(), s * phi.cos()
    G[a, b], G[b, a] = s * phi.sin(), -s * phi.sin()
    return G


theta = smol.cfg.rotary_base ** (-torch.arange(HALF, dtype=torch.float64)
                                 * 2 / D)                   # [32]
identity("SmolLM2's 32 rotary frequencies theta_m are distinct and lie in "
         "(0, pi)", f"{theta.min():.1e} to {theta.max():.0f}",
         bool((theta.diff() < 0).all() and (theta > 0).all()
              and (theta < math.pi).all()), chapter="8")
# the smallest singular value of every W_Q^h, W_K, W_V (as stored, and with
# the RMSNorm gain folded in, diag(gamma) W) and W_O^h, over its largest,
# against the float64 rounding of an SVD of a d_model x d_head matrix
def sv_ratio_of(W):
    s = torch.linalg.svdvals(W)
    return (s[-1] / s[0]).item()


sv_ratio = min(sv_ratio_of(W) for b in smol.blocks
               for W_in in (*b.attn.W_Q, *b.attn._W_K, *b.attn._W_V)
               for W in (W_in, b.ln1.w[:, None] * W_in))
sv_ratio = min(sv_ratio, min(sv_ratio_of(W_O) for b in smol.blocks
                             for W_O in b.attn.W_O))
# each group's W_O^h stacked, [3 d_head, d_model]: full row rank 3 d_head
sv_ratio = min(sv_ratio, min(
    sv_ratio_of(b.attn.W_O[kv * GROUP:(kv + 1) * GROUP].reshape(GROUP * D, -1))
    for b in smol.blocks for kv in range(KV)))
sv_floor = rounding_bound(smol.cfg.d_model * GROUP * D, 1.0, torch.float64)
assert sv_ratio > sv_floor   # the "only if" and the shared M need full rank
observation("every W_Q^h, W_K and W_V of SmolLM2, as stored and with the "
            "RMSNorm gain folded in, and every W_O^h, has full rank d_head, "
            "and each group's three W_O^h stacked full rank 3 d_head: "
            "the smallest ratio of smallest to largest singular value, and "
            "float64 rounding", f"{sv_ratio:.1e} > {sv_floor:.0e}",
            chapter="8")
# each layer's nine W_O^h stacked, [n_heads d_head, d_model]: invertible when
# every group changes at once
sv_ratio_all = min(sv_ratio_of(b.attn.W_O.reshape(S_H * D, -1))
                   for b in smol.blocks)
sv_floor_all = rounding_bound(smol.cfg.d_model * S_H * D, 1.0, torch.float64)
assert S_H * D == smol.cfg.d_model and sv_ratio_all > sv_floor_all
observation("each layer's nine W_O^h stacked (square) is invertible: the "
            "smallest ratio of smallest to largest singular value over the "
            "layers, and float64 rounding",
            f"{sv_ratio_all:.1e} > {sv_floor_all:.0e}", chapter="8")
R_all = rotary_rotation(smol, range(smol_ids.shape[1]), dtype=torch.float64)
G_plane = plane_scalars().double()
G_any = random_invertible(D).double()
# float64: each entry of G R and R G sums two products (planes do not mix)
identity_close("a complex scalar per plane commutes with every R_Delta "
               "(offsets 0-15)", G_plane @ R_all, R_all @ G_plane, terms=4,
               scale=math.e, chapter="8")
any_gap = (G_any @ R_all - R_all @ G_any).abs().max()
identity("a generic G does not commute with them: G R - R G exceeds its "
         "float64 rounding", f"{any_gap:.2f}",
         bool(any_gap > rounding_bound(2 * D, math.e, torch.float64)),
         chapter="8")

# %% tags=["hide-input"]
attn_weights = [(b.attn.W_Q.clone(), b.attn._W_K.clone(),
                 b.attn._W_V.clone(), b.attn.W_O.clone())
                for b in smol.blocks]    # stored once per key-value head


def reparametrised_logits(kind):
    """SmolLM2's logits on smol_ids with every layer's weights changed: per
    key-value group a G (kind "plane": one allowed G for the group;
    "generic": one generic G; "per head": a different allowed G per query
    head, the key taking the first head's) and a generic M. The weights are
    put back afterwards."""
    for block, (W_Q, W_K, W_V, W_O) in zip(smol.blocks, attn_weights):
        for kv in range(KV):
            heads = range(kv * GROUP, (kv + 1) * GROUP)
            if kind == "plane":
                Gs = [plane_scalars().double()] * GROUP
            elif kind == "generic":
                Gs = [random_invertible(D).double()] * GROUP
            else:
                Gs = [plane_scalars().double() for _ in heads]
            M = random_invertible(D).double()
            for h, G in zip(heads, Gs):
                block.attn.W_Q[h] = W_Q[h] @ G
                block.attn.W_O[h] = torch.linalg.inv(M) @ W_O[h]
            block.attn._W_K[kv] = W_K[kv] @ torch.linalg.inv(Gs[0]).T
            block.attn._W_V[kv] = W_V[kv] @ M
    logits = smol(smol_ids)
    for block, (W_Q, W_K, W_V, W_O) in zip(smol.blocks, attn_weights):
        block.attn.W_Q.copy_(W_Q)
        block.attn._W_K.copy_(W_K)
        block.attn._W_V.copy_(W_V)
        block.attn.W_O.copy_(W_O)
    return logits


smol_logits = smol(smol_ids)
changed = {kind: reparametrised_logits(kind)
           for kind in ("plane", "generic", "per head")}
SMOL_TERMS = smol_forward_terms(smol.cfg, smol_ids.shape[1])
smol_bound = rounding_bound(SMOL_TERMS, COND * float(smol_logits.abs().max()),
                            torch.float64)
identity_close("SmolLM2 (float64) with one allowed G (a complex scalar per "
               "plane) and one M per key-value group in every layer: the "
               "logits are unchanged", changed["plane"], smol_logits,
               terms=SMOL_TERMS, scale=COND * float(smol_logits.abs().max()),
               chapter="8")
moved = {kind: (changed[kind] - smol_logits).abs().max().item()
         for kind in ("generic", "per head")}
# measured on these weights and this text, not true by construction
assert min(moved.values()) > smol_bound
observation("a generic G per group is not a symmetry: on this passage it moves "
            "the logits by far more than rounding",
            f"{moved['generic']:.2f} > {smol_bound:.1e}", chapter="8")
observation("nor are allowed G that differ between the heads sharing a key "
            "head", f"{moved['per head']:.2f} > {smol_bound:.1e}",
            chapter="8")
top_same = {kind: (changed[kind].argmax(-1) == smol_logits.argmax(-1))
            .float().mean().item() for kind in changed}
glue("smol_bound", smol_bound)
glue("generic_change", moved["generic"])
glue("perhead_change", moved["per head"])
glue("generic_top", top_same["generic"])
glue("perhead_top", top_same["per head"])

# %% [markdown]
# With one allowed $G$ and one $M$ per key-value group in all 30 layers, SmolLM2's
# logits agree with the original ones to within the float64 rounding bound,
# {glue:text}`smol_bound:.0e`. A generic $G$ per group moves them by up to
# {glue:text}`generic_change:.1f`, and allowed $G$ that differ between sibling heads
# by up to {glue:text}`perhead_change:.1f`; the top prediction survives at
# {glue:text}`generic_top:.0%` and {glue:text}`perhead_top:.0%` of the positions. These
# are not findings about training, and no null is needed. For weights of full rank the
# algebra above says only that these changes alter the scores for some input vector $x$;
# that they change what the model computes on real text, and so are not symmetries, is
# what the measured logit changes show: {glue:text}`generic_change:.1f` and
# {glue:text}`perhead_change:.1f`, against a rounding bound of
# {glue:text}`smol_bound:.0e`.
#
# So what does the invariance of the products become for the book's real model? First a
# condition. The RMSNorm's gain $\gamma$ sits between the stream and $W_Q, W_K, W_V$ and
# is not folded in as SmolLM2 is loaded, so scaling $\gamma$ by a diagonal $D$ with
# nonzero entries and the rows of $W_Q, W_K, W_V$ by $D^{-1}$ leaves every query, key,
# value and logit unchanged while it changes the products to
# $D^{-1} W_Q^h R_\Delta (W_K^{\mathrm{kv}(h)})^\top D^{-1}$ and
# $D^{-1} W_V^{\mathrm{kv}(h)} W_O^h$. With the gain folded into $W_Q$, $W_K$ and $W_V$,
# the products $W_Q^h R_\Delta (W_K^{\mathrm{kv}(h)})^\top$ at every offset, and
# $W_V^{\mathrm{kv}(h)} W_O^h$, as forms and maps on the normalised stream, are
# unchanged by every change of the factors allowed above. An orthogonal change of basis $Q$ of the residual stream itself (an
# RMSNorm without its gain commutes with it) still moves every circuit together,
# $W \to Q^\top W Q$. As in `toy-2l`, this is invariance, not uniqueness: other
# changes that keep the function may move the products (relabelling heads, for one).
# The freedom left in the factors is a complex number per rotary plane on the query-key
# side and an invertible $M$ on the value-output side, each shared by the heads of a
# group. The plane amplitudes above are built from $q$ and $k$ themselves, so they
# depend neither on where the gain sits nor on the stream's basis.

# %% [markdown]
# ### `FactoredMatrix`
#
# $W_{QK}$ and $W_{OV}$ are $d_\text{model} \times d_\text{model}$ but carry only
# rank-$d_\text{head}$ information, and in a model with a large vocabulary the full
# circuits of chapter {doc}`09_full_circuits` are far larger than their factors (that
# chapter counts the cost for a GPT-2-shaped head). TransformerLens
# {cite}`nanda2022transformerlens` therefore represents such a product $AB$ by its two
# factors, as a `FactoredMatrix`, and computes what we ask for through them. The book's
# `circuitbook.circuits.qk_circuit` and `ov_circuit` return one, with $A = W_Q$,
# $B = W_K^\top$ and $A = W_V$, $B = W_O$. The parts we use:
#
# | attribute | what it is | computed through |
# |---|---|---|
# | `.A`, `.B` | the factors | (stored) |
# | `.AB` | the dense product | one matrix product |
# | `.svd()` | `U, S, V` with $AB = U \operatorname{diag}(S) V^\top$ (note: `V`, not $V^\top$) | SVDs of the factors and of a $d_\text{head} \times d_\text{head}$ middle |
# | `.S`, `.norm()` | the $d_\text{head}$ singular values; the Frobenius norm $\sqrt{\sum S^2}$ | the same SVD |
# | `.eigenvalues` | the nonzero eigenvalues of $AB$, with their multiplicities, plus as many zeros as make up $d_\text{head}$ (none when $BA$ is invertible) | $\operatorname{eig}(BA)$, $d_\text{head} \times d_\text{head}$ |
# | `X @ fm`, `fm @ Y` | a new `FactoredMatrix` $(XA)B$, $A(BY)$ | no dense product (when the side multiplied is longer than the inner dimension, as for every circuit here; otherwise TransformerLens forms $AB$) |
#
# The eigenvalue row rests on a theorem: for $A$ of shape $n \times k$ and $B$ of shape
# $k \times n$, the characteristic polynomials satisfy
# $\det(\lambda I_n - AB) = \lambda^{n-k} \det(\lambda I_k - BA)$. So the $n$ eigenvalues of
# $AB$, counted with multiplicity, are the $k$ eigenvalues of $BA$ and $n - k$ zeros. It
# does not say that $BA$ has no zero eigenvalue: $BA$ can be singular even when $AB$ has
# rank $k$, and its zeros then stand for no nonzero eigenvalue of $AB$.
#
# We check each row against the dense $64 \times 64$ matrix, in float64 so that rounding
# does not blur the zero singular values. The eigenvalues are checked both ways at once:
# we pair each of the 64 eigenvalues of the dense $AB$ with one of the $d_\text{head}$
# eigenvalues of $BA$ or one of $64 - d_\text{head}$ zeros, each used once, and ask that
# every pair agree to rounding.

# %%
ov = ov_circuit(model, L, H)
print(ov)
dense = ov.A.double() @ ov.B.double()   # float64 product: exact zeros stay
ab_size = float((attn.W_V[H].abs() @ attn.W_O[H].abs()).max())
# two d_head-term products of the same factors
identity_close("ov.AB is W_V W_O", ov.AB, attn.W_V[H] @ attn.W_O[H],
               terms=2 * cfg.d_head, scale=ab_size, chapter="8")
U, S, V = ov.svd()
SVD_TERMS = svd_terms(cfg.d_model, cfg.d_head)
identity_close("FactoredMatrix.svd() returns U, S, V with U diag(S) V^T = AB",
               U @ torch.diag(S) @ V.T, ov.AB, terms=SVD_TERMS,
               scale=float(S.max()), chapter="8")
sv = torch.linalg.svdvals(dense)
# Weyl: a backward error E moves each singular value by at most ||E||_2
identity_close(f"its {cfg.d_head} singular values are the top {cfg.d_head} "
               "of the dense W_OV", S, sv[:cfg.d_head], terms=SVD_TERMS,
               scale=float(sv[0]), chapter="8")
tail = (sv[cfg.d_head:].max() / sv[0])
# float64: the exact-rank product rounds each entry (d_head terms) and the
# SVD is backward stable (d_model^2 roundings), relative to the largest
identity_close(f"the other {cfg.d_model - cfg.d_head} singular values of W_OV "
               "are zero to rounding: rank W_OV = d_head", tail,
               torch.zeros_like(tail), terms=cfg.d_model ** 2 + cfg.d_head,
               scale=1.0, chapter="8")
dense_norm = torch.linalg.matrix_norm(dense).item()
# from the float32 singular values, squared, summed and rooted (d_head + 2)
identity_close("FactoredMatrix.norm() is the Frobenius norm of AB", ov.norm(),
               torch.tensor(dense_norm), terms=SVD_TERMS + cfg.d_head + 2,
               scale=dense_norm, chapter="8")
eig_small = ov.eigenvalues.to(torch.complex128)          # [d_head]
eig_dense = torch.linalg.eigvals(dense)                  # [d_model]
# eig(BA) and d_model - d_head zeros, against eig(AB): a one-to-one pairing,
# the closest remaining pair first (if its worst pair is within the bound,
# a pairing within the bound exists, which is the claim)
padded = torch.cat([eig_small, torch.zeros(cfg.d_model - cfg.d_head,
                                           dtype=eig_small.dtype)])
gaps = (padded[:, None] - eig_dense[None]).abs()
pair_gaps = []
for _ in range(cfg.d_model):
    i, j = divmod(gaps.argmin().item(), cfg.d_model)
    pair_gaps.append(gaps[i, j].item())
    gaps[i, :] = gaps[:, j] = float("inf")
# Bauer-Fike: float32 BA (d_model roundings) and its eig (backward error
# ~d_head^2 roundings) move each eigenvalue by at most cond(eigenvectors)
# times that error, in ||BA||_2; the float64 AB (d_head roundings) and its
# eig (~d_model^2) likewise, with AB's eigenvectors, in float64
BA64 = ov.B.double() @ ov.A.double()
eig_cond = torch.linalg.cond(torch.linalg.eig(BA64).eigenvectors).item()
eig_bound = rounding_bound(cfg.d_model + cfg.d_head ** 2,
                           eig_cond * torch.linalg.matrix_norm(BA64, 2).item())
dense_cond = torch.linalg.cond(torch.linalg.eig(dense).eigenvectors).item()
eig_bound += rounding_bound(cfg.d_head + cfg.d_model ** 2,
                            dense_cond * torch.linalg.matrix_norm(dense, 2)
                            .item(), torch.float64)
identity(f"the {cfg.d_model} eigenvalues of the dense AB are FactoredMatrix."
         f"eigenvalues (eig of the {cfg.d_head} x {cfg.d_head} BA) and "
         f"{cfg.d_model - cfg.d_head} zeros, paired one to one",
         f"worst pair {max(pair_gaps):.1e} <= {eig_bound:.1e}",
         max(pair_gaps) <= eig_bound, chapter="8")
# whether BA is singular is a fact about these weights
eig_min = eig_small.abs().min().item()
observation(f"here BA is invertible, so AB has {cfg.d_head} nonzero "
            "eigenvalues: the smallest |eigenvalue| of BA, the largest, and "
            "the pairing's bound", f"{eig_min:.2f}, "
            f"{eig_small.abs().max().item():.2f}; {eig_bound:.0e}",
            chapter="8")
assert eig_min > eig_bound   # else the statement above would be wrong
full = model.W_E @ ov @ model.W_U
print("W_E @ ov @ W_U ->", full)
identity("multiplying a FactoredMatrix keeps it factored (inner dimension "
         "d_head)", full.mdim, full.mdim == cfg.d_head, chapter="8")

# %% [markdown]
# The last line is a preview: $W_E W_{OV} W_U$ is the *full* OV circuit of chapter
# {doc}`09_full_circuits`, and it stayed a product of a $64 \times 16$ and a
# $16 \times 64$ matrix.
#
# The explorer shows both circuits' singular values for every head of `toy-2l`. Each
# head has exactly $d_\text{head} = 16$ nonzero singular values per circuit, after which
# the spectrum falls off a cliff to float64 rounding (the dashed line marks
# $d_\text{head}$). How the 16 values are spread, and how large they are, differs
# from head to head; the title gives each head's previous-token and induction
# scores, so you can compare the layer-0 previous-token head with the layer-1
# induction heads.

# %%
prev = prev_token_scores(model, seq_len=EVAL["repeat_seq_len"],
                         batch=EVAL["repeat_batch"], seed=EVAL["repeat_seed"])


def dense64(fm):
    """The dense product of a FactoredMatrix, multiplied in float64."""
    return fm.A.double() @ fm.B.double()


all_ranks = [torch.linalg.matrix_rank(M).item()
             for circuit in (qk_circuit, ov_circuit)
             for layer in range(cfg.n_layers)
             for M in dense64(circuit(model, layer))]  # per head
identity(f"all {len(all_ranks)} circuits of toy-2l (QK and OV, 8 heads) "
         f"have rank at most d_head = {cfg.d_head}", max(all_ranks),
         max(all_ranks) <= cfg.d_head, chapter="8")
assert set(all_ranks) == {cfg.d_head}   # the prose says "exactly"
observation("and each has rank exactly d_head (the ranks found)",
            sorted(set(all_ranks)), chapter="8")


def draw_spectra(layer=L, head=H):
    a = model.blocks[layer].attn
    fig, ax = plt.subplots(figsize=(7.5, 3.3))
    for name, circuit, color in [("W_QK", qk_circuit, "tab:blue"),
                                 ("W_OV", ov_circuit, "tab:orange")]:
        M = dense64(circuit(model, layer, head))
        s = torch.linalg.svdvals(M).clamp_min(1e-18)
        ax.semilogy(range(1, len(s) + 1), s, "o-", ms=3, color=color,
                    label=name)
    ax.axvline(cfg.d_head + 0.5, color="gray", ls="--", lw=0.8)
    ax.text(cfg.d_head + 1, 1e-6, f"d_head = {cfg.d_head}", color="gray",
            fontsize=8)
    ax.set(xlabel="index", ylabel="singular value", ylim=(1e-18, 1e3),
           title=f"layer {layer}, head {head}: previous-token score "
                 f"{prev[layer, head]:.2f}, induction score "
                 f"{ind[layer, head]:.2f}")
    ax.legend(loc="upper right")
    fig.tight_layout()
    plt.show()


explore(draw_spectra, layer=(0, cfg.n_layers - 1, 1),
        head=(0, cfg.n_heads - 1, 1))

# %% [markdown]
# ### The paper's convention and ours
#
# Elhage et al. write residual vectors as **columns**. Their weights act on the left:
# $q = W_Q^\text{p} x$ with
# $W_Q^\text{p} \in \mathbb{R}^{d_\text{head} \times d_\text{model}}$
# (likewise $W_K^\text{p}, W_V^\text{p}$), and $W_O^\text{p} \in
# \mathbb{R}^{d_\text{model} \times d_\text{head}}$; the superscript p marks the paper's
# matrices. TransformerLens, Vaswani et al. and this book use **rows**, $q = x W_Q$.
# The same head is described by $W_Q^\text{p} = W_Q^\top$, and the same for the other
# three.
#
# ### Exercise 8.2: into the paper's convention
#
# Before reading on, work out what the change does to each circuit. In the paper's
# column convention the two circuits keep the roles the plain-language section gave
# them: $W_{QK}^\text{p}$ is the matrix of the bilinear form that scores query position
# $i$ on key position $j$, $x_i^\top W_{QK}^\text{p} x_j$, and $W_{OV}^\text{p}$ is the map
# that takes the source's residual vector $x_j$ to the vector the head writes,
# $W_{OV}^\text{p} x_j$. Write `to_paper_convention` (arguments `W_Q, W_K, W_V, W_O`),
# which takes one head's TransformerLens weights and returns the pair
# `(W_QK, W_OV)` in the paper's convention. The check tries your function on random
# weights whose $W_{QK}$ is not symmetric, so it can tell each circuit's orientation.

# %% tags=["exercise"]
def to_paper_convention(W_Q, W_K, W_V, W_O):
    """W_Q, W_K, W_V: [d_model, d_head]; W_O: [d_head, d_model] (row vectors)
    -> (W_QK, W_OV) of the paper (column vectors), each [d_model, d_model]."""
    # BEGIN SOLUTION
    W_Qp, W_Kp, W_Vp, W_Op = W_Q.T, W_K.T, W_V.T, W_O.T   # paper's matrices
    return W_Qp.T @ W_Kp, W_Op @ W_Vp
    # END SOLUTION


checks.ch08_ex2(to_paper_convention)

# %% [markdown]
# The working is folded below: open it once your function passes. The cell after it
# checks your function on `toy-2l`'s head.
#
# <details><summary>Exercise 8.2 worked out</summary>
#
# Follow each circuit through the change.
#
# **QK is a bilinear form.** The paper's score is $q_i^\top k_j = x_i^\top
# (W_Q^\text{p})^\top W_K^\text{p}\, x_j$, so $W_{QK}^\text{p} = (W_Q^\text{p})^\top
# W_K^\text{p}$. Substituting, $W_{QK}^\text{p} = W_Q W_K^\top = W_{QK}$: **the same
# matrix**. That had to happen: both conventions compute the number
# "query vector, matrix, key vector" with the query on the left, and only the
# vectors' orientation differs.
#
# **OV is a linear map.** The paper's head writes $W_O^\text{p} W_V^\text{p} x_j$, so
# $W_{OV}^\text{p} = W_O^\text{p} W_V^\text{p} = W_O^\top W_V^\top = (W_V W_O)^\top =
# W_{OV}^\top$: **transposed**, as every linear map is when rows become columns.
#
# The paper also writes the whole head as $h(x) = (A \otimes W_{OV}^\text{p})\, x$, with
# $x$ all positions' residual vectors stacked into one long vector and $\otimes$ the
# Kronecker product: block $(i, j)$ of $A \otimes W$ is $A_{ij} W$, so position $i$
# receives $\sum_j A_{ij} W x_j$. The cell below takes the paper's matrices for the toy
# model's head from your function and checks all three statements on the real
# activations: the paper's scores $x_i^\top W_{QK}^\text{p} x_j$ (with the
# biases appended as in exercise 8.1) against the model's own scores, and with
# $W_{QK}^\text{p}$ transposed, which misses them (this head's $W_{QK}$ is not symmetric,
# as the next check shows); the two OV forms against the
# head's output (the value bias adds $b_V W_O$ in either convention and we leave it
# aside).
#
# </details>

# %% tags=["hide-cell"]
# your function's two circuits for this head; for the scores, your
# exercise 8.1 matrix with its token block replaced by your W_QKᵖ
W_QK_paper, W_OV_paper = to_paper_convention(attn.W_Q[H], attn.W_K[H],
                                             attn.W_V[H], attn.W_O[H])
W_QK_paper_ext = extended_qk(attn.W_Q[H], attn.b_Q[H], attn.W_K[H],
                             attn.b_K[H]).clone()
W_QK_paper_ext[:cfg.d_model, :cfg.d_model] = W_QK_paper
asym = ((W_QK_paper - W_QK_paper.T).norm() / W_QK_paper.norm()).item()
# The paper's score in its own column form on the real vectors: each
# position a column (x + W_pos, 1), query i on the left; against the hooked
# scores, each at its own size, as for the pattern above
X1_cols = x1.T                                 # [d_model + 1, pos]


def paper_scores(W):
    """score[i, j] = (column i)ᵀ W (column j) / sqrt(d_head)."""
    return (torch.einsum("ai,ab,bj->ij", X1_cols, W, X1_cols)
            / math.sqrt(cfg.d_head))


hooked_scores = cache["attn_scores", L][0, H]  # masked: -inf above
causal = ~future
QK_TERMS = score_terms(cfg.d_model, cfg.d_head, extra=1)
identity_close("the paper's score x_iᵀ W_QKᵖ x_j, with your W_QKᵖ "
               "extended by the biases as your exercise 8.1 matrix extends "
               "it, is hook_attn_scores (each score's error over its size)",
               paper_scores(W_QK_paper_ext)[causal] / S_2l[causal],
               hooked_scores[causal] / S_2l[causal], terms=QK_TERMS,
               scale=1.0, chapter="8")
# the same check with the query on the right must fail
swapped_err = ((paper_scores(W_QK_paper_ext.T) - hooked_scores)[causal]
               / S_2l[causal]).abs().max().item()
assert swapped_err > rounding_bound(QK_TERMS, 1.0)   # the next line's claim
observation("with W_QKᵖ transposed (query and key swapped) the scores miss: "
            "the largest error over its size, and the bound",
            f"{swapped_err:.2f} > {rounding_bound(QK_TERMS, 1.0):.0e}",
            chapter="8")
# a counterexample to symmetry: W - W^T above the rounding of two products
# (scale: your function on the absolute weights)
qk_size = float(to_paper_convention(attn.W_Q[H].abs(), attn.W_K[H].abs(),
                                    attn.W_V[H].abs(), attn.W_O[H].abs())[0].max())
asym_bound = rounding_bound(2 * cfg.d_head, qk_size)
assert (W_QK_paper - W_QK_paper.T).abs().max() > asym_bound   # the next line's claim
observation("and not its transpose: this head's W_QKᵖ differs from its "
            "transpose by more than rounding", f"|W - Wᵀ| / |W| = {asym:.2f}",
            chapter="8")

X_cols = x.T                            # paper: one column per position
bias_part = attn.b_V[H] @ attn.W_O[H]
h_paper = W_OV_paper @ X_cols @ hooked_pattern.T  # [d_model, pos]
# as for the OV messages above
identity_close("the paper's column form W_OVᵖ Xᵀ Aᵀ (X one row per "
               "position), transposed, is the hooked head output "
               "(less b_V W_O)",
               h_paper.T + bias_part,
               hooked, terms=OUT_2L + cfg.d_head + 1, scale=o_2l, chapter="8")
# torch.kron needs a contiguous matrix (an answer may return a transposed view)
kron = torch.kron(hooked_pattern, W_OV_paper.contiguous())   # [pos*d_model, pos*d_model]
h_kron = (kron @ x.reshape(-1)).reshape(n_pos, cfg.d_model)
# the same, except that one product sums over pos * d_model terms
identity_close("A ⊗ W_OVᵖ applied to the stacked residual vectors "
               "gives the same output", h_kron + bias_part, hooked,
               terms=OUT_2L + cfg.d_head + 1 + n_pos * cfg.d_model,
               scale=o_2l, chapter="8")
glue("qk_asym", asym)

# %% [markdown]
# $W_{QK}$ is far from symmetric: $\lVert W_{QK} - W_{QK}^\top\rVert$ is
# {glue:text}`qk_asym:.2f` times $\lVert W_{QK}\rVert$ (0 for a symmetric matrix, 2
# for an antisymmetric one, about $\sqrt 2$ for a random one: nothing about training is
# claimed here). So the orientation of $W_{QK}$ matters: a matrix and its transpose
# score the same pairs with the roles of query and key swapped.
#
# One more place the paper's orientation turns up: PyTorch's `nn.Linear` stores its
# weight as `[out, in]` and computes $x A^\top + b$. The Annotated Transformer's code
# therefore runs in row vectors, but the numbers it *stores* for head $i$ are the
# paper's column-vector matrices. (Chapter {doc}`20_rosetta` lines up all four
# vocabularies, Vaswani et al.'s, the Annotated Transformer's, Elhage et al.'s and
# TransformerLens's, in one table.)

# %%
d_k = mha.d_k
stored_err = []
for h in range(n_heads):
    rows = slice(h * d_k, (h + 1) * d_k)
    for lin, name in zip(mha.linears[:3], "QKV"):     # W_Q^p, W_K^p, W_V^p
        stored_err.append((lin.weight[rows] - w[f"W_{name}"][h].T)
                          .abs().max())
    stored_err.append(                                # W_O^p: columns of W^O
        (mha.linears[3].weight[:, rows] - w["W_O"][h].T).abs().max())
identity("nn.Linear's stored weights, sliced per head, are the paper's "
         "column-convention W_Q^p, W_K^p, W_V^p, W_O^p", max(stored_err),
         bool(max(stored_err) == 0), chapter="8")

# %% [markdown]
# ## Summary
#
# - A head is two circuits: the pattern comes from the bilinear form
#   $W_{QK} = W_Q W_K^\top$ (where to look), and is applied to the messages
#   $x_j W_{OV}$, $W_{OV} = W_V W_O$ (what to move). We recomputed a trained induction
#   head's pattern and output from these two matrices (in `toy-2l` the queries and keys
#   read $x + W_\text{pos}$) and matched TransformerLens's hooks; biases extend $W_{QK}$
#   by one row and column and add $b_V W_O$ to the output.
# - Both circuits have rank at most $d_\text{head}$: every head of `toy-2l` has
#   exactly 16 nonzero singular values in each.
# - In a model with additive positions the factors are not identifiable:
#   $W_Q G, W_K G^{-\top}, W_V M, M^{-1} W_O$ changed `toy-2l`'s $W_Q$ by
#   {glue:text}`q_change:.0%` and left the logits equal to within float32 rounding.
#   The products are unchanged by every such change, so statements about them do not
#   depend on the heads' coordinates. That is invariance, not uniqueness: a key bias
#   moved `toy-2l`'s bias-extended $W_{QK}$, and a change of a last-layer head's $W_O$
#   that shifts all logits alike moved its $W_{OV}$, and both left its predictions as
#   they were. (The second needs no final normalisation and a $u$ with $u W_U$ all ones,
#   which `toy-2l`'s square $W_U$ has and `text-2l`'s does not.)
# - In a rotary model with grouped queries, such as SmolLM2, the freedom is smaller:
#   $G$ must commute with every rotation $R_\Delta$, which leaves a scaled rotation
#   $aI + bJ$ within each rotary plane (64 numbers instead of 4096; $M$ stays any
#   invertible matrix), and the query heads sharing a key-value head share one $G$ and
#   one $M$ (for weights of full rank, and for $M$ a layer's nine $W_O^h$ stacked into
#   an invertible matrix, as SmolLM2's are). Such a $G$ left SmolLM2's logits unchanged
#   to float64 rounding; on one 16-token passage a generic $G$, or allowed ones that
#   differ between sibling heads, moved them by up to {glue:text}`generic_change:.1f` and
#   {glue:text}`perhead_change:.1f`. How a head uses each plane does not depend on these
#   coordinates. Once the RMSNorm gain is folded into $W_Q$, $W_K$ and $W_V$ (otherwise a
#   diagonal rescaling can move between the gain and those matrices), the products
#   themselves are unchanged by the allowed changes; an orthogonal change of basis of
#   the stream moves every circuit together, and other changes that keep the function
#   may move them too.
# - In the paper's column convention $W_{QK}^\text{p} = (W_Q^\text{p})^\top W_K^\text{p}$
#   is the *same* matrix as TransformerLens's $W_{QK}$, while
#   $W_{OV}^\text{p} = W_O^\text{p} W_V^\text{p}$ is the *transpose* of $W_{OV}$: a
#   bilinear form keeps the query on the left, a linear map flips. `nn.Linear` stores
#   the paper's orientation.
# - `FactoredMatrix` keeps $AB$ as $A$ and $B$; its SVD, norm and eigenvalues go through
#   $d_\text{head} \times d_\text{head}$ matrices, which is what makes vocabulary-sized
#   circuits affordable in a model with a large vocabulary (the next chapter counts the
#   cost for a GPT-2-shaped head).
