# %% [markdown]
# # 9. Full circuits
#
# Chapter {doc}`08_qk_ov` described a head by two $d_\text{model} \times d_\text{model}$
# matrices that act on residual vectors. Residual vectors are not what we can read,
# though; tokens are. This chapter puts the embedding and the unembedding on both sides
# of each circuit, which turns them into tables indexed by tokens: the **full OV
# circuit** $W_E W_{OV} W_U$ says how attending to a token changes every logit, and the
# **full QK circuit** $W_E W_{QK} W_E^\top$ gives the part of a query token's score for
# a key token that comes from the two token embeddings through $W_{QK}$ (the
# token-token term, beside those of positions and biases). We count what these tables would cost at GPT-2's vocabulary size and
# what the factored form costs instead (times measured, sizes counted), and then read them on the toy model:
# the induction heads' full OV circuits copy, and the previous-token head's positional
# QK circuit is a band just below the diagonal.

# %% [markdown]
# The set-up is folded away: the imports, and the rounding bounds of this chapter's
# checks (the size of a chain of products, and Bauer-Fike's bound for eigenvalues
# computed by two routes).

# %% tags=["hide-input"]
import contextlib
import copy
import io
import math
import time
import tracemalloc
import warnings

import matplotlib.pyplot as plt
import plotly.graph_objects as go
import torch

from circuitbook import checks
from circuitbook.book import (Null, finding, glue, identity, identity_close,
                              null_test, observation, rounding_bound)
from circuitbook.circuits import (
    full_ov_circuit,
    full_qk_circuit,
    pos_qk_circuit,
)
from circuitbook.data import repeated_random_tokens
from circuitbook.heads import copying_scores, induction_scores
from circuitbook.models import attn_only, load
from circuitbook.models.encoder_decoder import (
    Embeddings,
    Generator,
    MultiHeadedAttention,
    head_outputs,
    tl_weights,
)
from circuitbook.models.zoo import EVAL, metrics
from circuitbook.train import lm_loss
from circuitbook.viz import heatmap
from circuitbook.widgets import explore

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
# a finding's record carries NaN for the statistics its test does not have
# (a bootstrap interval for a rank test); the kernel's JSON encoder warns
warnings.filterwarnings("ignore", message="Message serialization failed")
_ = torch.manual_seed(0)
_ = torch.set_grad_enabled(False)  # we read weights; one cell turns grad on


def abs_chain(*factors):
    """The largest entry of |F_1| |F_2| ... |F_k|: the size of the numbers a
    chain of products accumulates (they may cancel in the product itself)."""
    out = factors[0].abs()
    for f in factors[1:]:
        out = out @ f.abs()
    return float(out.max())


def score_tolerance(m64, m_abs, inner):
    """How far two routes to a head's copying score may differ, in float64.

    m64: the d_head x d_head matrix whose eigenvalues are the head's nonzero
    full-OV eigenvalues; m_abs: the largest entry of the same product of
    absolute values; inner: the roundings of forming it (the vocabulary sum
    and the d_model sums). Bauer-Fike: each eigenvalue moves by at most
    cond(eigenvectors) times the spectral error (<= d_head times its
    largest entry), plus eig's own (d_head^2 roundings). The score
    Re(sum) / sum |.| moves by at most twice the summed eigenvalue errors
    over sum |lambda|, for each of two routes."""
    ev = torch.linalg.eig(m64)
    d = m64.shape[0]
    lam = torch.linalg.cond(ev.eigenvectors).item() * d * rounding_bound(
        inner + d ** 2, m_abs, torch.float64)
    return 2 * 2 * d * lam / ev.eigenvalues.abs().sum().item()


# %% [markdown]
# ## Plain language
#
# Suppose a head attends entirely to one earlier token, say `cat`. What it writes into
# the stream is `cat`'s embedding sent through the head's OV circuit. If nothing else
# touches that write before the unembedding, it changes every logit by a fixed amount,
# and those amounts are one row of a vocabulary-by-vocabulary table, the full OV
# circuit. A head whose table has large entries on its diagonal *copies*: attending to
# `cat` makes `cat` more likely next. A head whose rows favour other tokens does
# something else, for example turning `cat` into `cats`.
#
# The full QK circuit is the same idea for the pattern. Entry (query token, key token)
# is the token-token term of the attention score: the part that comes from the two
# embeddings through $W_{QK}$, beside the terms from positions and biases. Its rows show
# which tokens each token looks for through that term. Where the model has learned
# positional embeddings, the same construction with $W_\text{pos}$ in place of $W_E$ gives
# the position-position term, which shows which positions each position looks at through
# it.
#
# Two caveats belong here rather than in small print. First, these tables describe the
# *direct* route only: token embedding into this head, head output straight to the
# unembedding. In a deeper model a head also reads what earlier heads wrote and writes
# for later heads to read; those routes are the subject of the composition chapters.
# Second, the tables are enormous for a real vocabulary, which is why we keep them as
# products of thin matrices and compute only what we need from them.

# %% [markdown]
# ### Exercise 9.1: the full OV circuit
#
# Before we build the table from the Annotated Transformer's modules, write it yourself.
# The book follows TransformerLens's row-vector convention (chapter {doc}`08_qk_ov`): a
# vector sits to the left of the matrix it passes through. One head's value and output
# maps are $W_V$ `[d_model, d_head]` and $W_O$ `[d_head, d_model]`, the embedding $W_E$
# is `[d_vocab, d_model]` and the unembedding $W_U$ is `[d_model, d_vocab]`. Write
# `full_ov(W_E, W_V, W_O, W_U)` returning one head's full OV circuit as a dense
# `[d_vocab, d_vocab]` tensor, rows indexed by the source token, columns by the logit.
# The next two sections check the Annotated Transformer's modules and the package
# against your function.

# %% tags=["exercise"]
def full_ov(W_E, W_V, W_O, W_U):
    """W_E: [d_vocab, d_model]; W_V: [d_model, d_head]; W_O: [d_head, d_model];
    W_U: [d_model, d_vocab] -> [d_vocab, d_vocab]."""
    # BEGIN SOLUTION
    A = W_E @ W_V          # [d_vocab, d_head]: token -> value
    B = W_O @ W_U          # [d_head, d_vocab]: head output -> logits
    return A @ B
    # END SOLUTION


checks.ch09_ex1(full_ov)

# %% [markdown]
# ## The Annotated Transformer view
#
# In the Annotated Transformer {cite}`rush2018annotated` a token enters through
# `Embeddings` (a lookup table `lut`, scaled by $\sqrt{d_\text{model}}$) and leaves
# through `Generator` (a linear map `proj`, then a log-softmax). Between the two we
# put one `MultiHeadedAttention` and feed it sequences of a single token, so that every
# head attends fully to that token. Running the modules on every token of a small
# vocabulary and reading head $h$'s share of the output through `proj` (the shares
# add up, with the output bias $b_O$, to the module's output: the first check below)
# gives a
# vocabulary-by-vocabulary table. The claim is that this table is
# $W_E W_{OV}^h W_U$, with $W_{OV}^h = W_V^h W_O^h$ (chapter 8),
# $W_E = \sqrt{d_\text{model}}\,\texttt{lut.weight}$ and
# $W_U = \texttt{proj.weight}^\top$, plus one constant row from the biases
# ($b_V^h W_O^h W_U + b_U$, the same whichever token is attended to). We leave out the
# positional encoding and the final log-softmax: the first is not a token, and the
# second is not linear.

# %%
vocab, d_model, n_heads = 40, 32, 4
embed = Embeddings(d_model, vocab)
mha = MultiHeadedAttention(n_heads, d_model, dropout=0.0).eval()
generator = Generator(d_model, vocab)

every_token = torch.arange(vocab)[:, None]   # [vocab, 1]: one-token inputs
x_tok = embed(every_token)                   # [vocab, 1, d_model]
per_head = head_outputs(mha, x_tok, x_tok, x_tok)  # [vocab, head, 1, d]

w = {k: v.detach() for k, v in tl_weights(mha).items()}
d_k_at = w["W_V"].shape[-1]
# the per-head split itself is checked against the module, not assumed:
# summed over heads, plus b_O, it is what mha returns
whole = mha(x_tok, x_tok, x_tok).detach()              # [vocab, 1, d_model]
# module: values (d_model + 1), W^O on the concatenated heads (d_model + 1);
# split: values (d_model + 1), each head's W_O (d_head), the sum over heads
# and b_O (n_heads + 1)
split_terms = 3 * (d_model + 1) + d_k_at + n_heads + 1
split_size = (sum(abs_chain(x_tok[:, 0], w["W_V"][h], w["W_O"][h])
                  + abs_chain(w["b_V"][h][None], w["W_O"][h])
                  for h in range(n_heads)) + float(w["b_O"].abs().max()))
identity_close("the heads' outputs summed, plus b_O, are the module's output "
               "(head_outputs(...).sum(1) + b_O = mha(x, x, x))",
               per_head.sum(1) + w["b_O"], whole, terms=split_terms,
               scale=split_size, chapter="9")
W_E_at = math.sqrt(d_model) * embed.lut.weight.detach()   # [vocab, d_model]
W_U_at = generator.proj.weight.detach().T                 # [d_model, vocab]
b_U_at = generator.proj.bias.detach()
got, want, consts, sizes = [], [], [], []
for h in range(n_heads):
    got.append(generator.proj(per_head[:, h, 0]).detach())  # [vocab, vocab]
    circuit = full_ov(W_E_at, w["W_V"][h], w["W_O"][h], W_U_at)  # yours
    const = w["b_V"][h] @ w["W_O"][h] @ W_U_at + b_U_at
    want.append(circuit + const)
    consts.append(float(const.abs().max()))
    sizes.append(abs_chain(W_E_at, w["W_V"][h], w["W_O"][h], W_U_at)
                 + abs_chain(w["b_V"][h][None], w["W_O"][h], W_U_at)
                 + float(b_U_at.abs().max()))
# A one-token input attends to itself with weight exactly 1. Modules: the
# embedding's scale (1), values (d_model + 1), W_O (d_head), the generator
# (d_model + 1); the circuit: the chain W_E W_V W_O W_U (2 d_model + d_head)
# and the constant row (d_head + d_model + 2). Both sides.
table_terms = 2 * (2 * d_model + d_k_at + 3) + 2 * (d_model + d_k_at + 1)
identity_close("running Embeddings -> one head -> Generator.proj on every "
               "token gives W_E W_V W_O W_U plus the constant row "
               "b_V W_O W_U + b_U", torch.stack(got), torch.stack(want),
               terms=table_terms, scale=max(sizes), chapter="9")
# a missing bias row would fail the check above only if the row is larger
# than the check's tolerance
table_bound = rounding_bound(table_terms, max(sizes))
identity("the bias row is larger than that check's rounding bound, so the "
         "check would catch its omission",
         f"{min(consts):.2f} vs {table_bound:.1g}",
         min(consts) > table_bound, chapter="9")

# %% [markdown]
# ## The circuit view
#
# In TransformerLens's row-vector convention, with token $s$ embedded as row $s$ of
# $W_E$ and logits read by $W_U$, head $h$ has
#
# $$\text{full OV:}\quad W_E\, W_{OV}^h\, W_U
# \in \mathbb{R}^{d_\text{vocab} \times d_\text{vocab}},$$
#
# $$\text{full QK:}\quad W_E\, W_{QK}^h\, W_E^\top
# \in \mathbb{R}^{d_\text{vocab} \times d_\text{vocab}},$$
#
# with $W_{OV}^h$ and $W_{QK}^h$ the two circuits of chapter {doc}`08_qk_ov`.
#
# Entry $[s, t]$ of the full OV circuit is the change in logit $t$ that source token
# $s$'s embedding makes, through the head's value and output maps straight to the
# unembedding, when the head attends fully to $s$. For a layer-0 head of `toy-2l` (no
# norms, positions added only to queries and keys) the embedding is all its value reads
# besides a bias; for a layer-1 head the table is the token route only, since its value
# also reads what layer 0 wrote at the source position. Entry $[s, t]$ of the full QK
# circuit is the part of the score (before the $1/\sqrt{d_\text{head}}$) that query
# token $s$ gives key token $t$ through the two tokens' embeddings alone. In
# Elhage et al.'s column convention {cite}`elhage2021mathematical` the full OV circuit
# is written $W_U W_{OV}^\text{p} W_E$ (chapter {doc}`08_qk_ov`'s superscript p: the paper's
# convention) with their $[d_\text{model}, d_\text{vocab}]$ embedding; it is the transpose of ours, while the full QK circuit is the same matrix
# in both, for the reason chapter {doc}`08_qk_ov` gave.
#
# **The full QK table is not the score, in `toy-2l` or in a rotary model.** It is the part of the
# score that comes from the two tokens through $W_{QK}$ alone. For a layer-0 head of
# `toy-2l` it is one term beside others that are also fixed matrices: positions are added
# to what the queries and keys read, and the queries and keys carry biases $b_Q$ and
# $b_K$, which add terms that depend on one of the two tokens or on neither (the
# positional section below adds them back). For a layer-1 head the score also holds
# terms from what layer 0 wrote at the query and key positions, which depend on the
# context, not on the two tokens alone (the section on reading the full QK circuit
# returns to this). Even the layer-0 picture
# does not hold for SmolLM2, the book's real model, which rotates queries and keys by
# their positions (RoPE, {doc}`05_positional`): there the score is
# $x_i W_Q^h R_{i-j} W_K^{h\top} x_j^\top$, so the token-token table is one table per
# offset $\Delta = i - j$, $W_E W_Q^h R_\Delta W_K^{h\top} W_E^\top$
# (`circuitbook.circuits.rotary_qk` gives its middle factor), and
# $W_E W_{QK}^h W_E^\top$ is only its $\Delta = 0$ member. In such a model an RMSNorm
# also sits between $W_E$ and $W_Q$ (its gain folds into $W_Q$, its division only at
# layer 0, as below; chapter {doc}`11_layernorm`), and under grouped-query attention $W_K$ and $W_V$ are
# those of the key-value head the query head shares with its group. RoPE leaves the full
# OV circuit alone, since it rotates queries and keys, never values, but the norms do not.
# In SmolLM2 an RMSNorm sits between $W_E$ and $W_V$, and the final RMSNorm between the
# head's output and $W_U$. Their gains fold into $W_V$ and $W_U$ (a diagonal matrix on
# each side); their divisions are another matter. Each source row is divided by
# the RMS of the stream at the source position. For a layer-0 head that stream is the
# token's embedding alone (RoPE adds nothing to the stream), so the scale is
# $1/\mathrm{RMS}(W_E[s])$, a constant for each token that folds into $W_E$'s rows; the
# same holds for the query and key sides of a layer-0 head's full QK table. At later
# layers the source scale depends on the context, and the final norm's always does: each
# row of logit changes is divided by the RMS of the stream at the destination. So for a
# layer-0 head of SmolLM2 the table is $D^{-1} W_E\, \mathrm{diag}(g)\, W_{OV}^h\,
# \mathrm{diag}(g_\text{final})\, W_U$, with $D$ the diagonal matrix of the RMS of each
# row of $W_E$ (so each token's row is divided by its own RMS), and it is the head's
# effect only up to a positive scale for each destination. Above layer 0 the source
# scale depends on the context, so no fixed $D$ exists and the table holds only up to a
# positive scale for each source as well. The two scales are not alike: the
# destination's multiplies the head's whole write there and changes no ranking within a
# row, while a scale on each row changes the table's eigenvalues,
# so a copying score computed without $D^{-1}$ is in general not the layer-0 head's.
# The Annotated Transformer's encoder-decoder, taken whole rather than one module at a
# time as above, differs from `toy-2l` in three ways: a LayerNorm sits before each
# attention sublayer (pre-norm) and a final one before `Generator`, so its tables too
# hold only up to scales set by the context at each position; its sinusoidal positions
# are added to the stream itself, so a head's values read positions as well as tokens
# and the full OV table is only the token part of what it writes; and a cross-attention
# head's queries come from the decoder and its keys from the encoder, so its full QK
# table on the direct route pairs a target token with a source token,
# $W_E^\text{tgt}\, W_{QK}^h\, W_E^{\text{src}\top}$ (chapter {doc}`12_cross_attention`).
# Apart from the one-module table above, the random GPT-2-shaped head below (used to
# count costs and to check the score's routes) and the constructed circle tables, every
# table on this page is `toy-2l`'s (or, for the nulls, that of the same architecture at
# initialisation), which has no norms.
#
# `circuitbook.circuits.full_ov_circuit` and `full_qk_circuit` return these as
# `FactoredMatrix` objects: each table is kept as a product of two factors only
# $d_\text{head}$ wide, a token side and a logit (or key) side. We load `toy-2l`
# (vocabulary 64, so here the tables are small enough to print) and check the factors'
# product against your `full_ov` and against the definition of the full QK circuit.

# %%
with contextlib.redirect_stdout(io.StringIO()):  # loading prints the device
    model = load("toy-2l")
cfg = model.cfg
record = metrics("toy-2l")
IL, IH = record["induction_head"]      # toy-2l's induction head (chapter 8)
PL, PH = record["prev_token_head"]     # and its previous-token head
# the zoo picks the highest induction score; all four layer-1 heads are
# induction heads (chapter 17a), and the pick leads the next by little
ind_scores = induction_scores(model, seq_len=EVAL["repeat_seq_len"],  # the
                             batch=EVAL["repeat_batch"],   # zoo's settings, as
                             seed=EVAL["repeat_seed"])[IL]  # in chapter 8
ind_others = torch.cat([ind_scores[:IH], ind_scores[IH + 1:]])
glue("ind_lead", (ind_scores[IH] - ind_others.max()).item())
glue("ind_l1_min", ind_scores.min().item())

fov = full_ov_circuit(model, IL, IH)
fqk = full_qk_circuit(model, IL, IH)
attn = model.blocks[IL].attn
print("full OV:", fov)
print("full QK:", fqk)
W_E, W_U = model.W_E, model.W_U
ov_ref = full_ov(W_E, attn.W_V[IH], attn.W_O[IH], W_U)  # your exercise 9.1
qk_ref = W_E @ (attn.W_Q[IH] @ (attn.W_K[IH].T @ W_E.T))
# reassociated chains: 2 d_model + d_head roundings on each side, at the
# size of the chains' absolute values
chain_size = max(abs_chain(W_E, attn.W_V[IH], attn.W_O[IH], W_U),
                 abs_chain(W_E, attn.W_Q[IH], attn.W_K[IH].T, W_E.T))
identity_close("full_ov_circuit(...).AB = W_E W_V W_O W_U and "
               "full_qk_circuit(...).AB = W_E W_Q W_K^T W_E^T",
               torch.stack([fov.AB, fqk.AB]), torch.stack([ov_ref, qk_ref]),
               terms=2 * (2 * cfg.d_model + cfg.d_head), scale=chain_size,
               chapter="9")

# %% [markdown]
# Every statement below about what training made of `toy-2l`'s heads is set beside the
# same architecture at initialisation: 40 models with `toy-2l`'s shape and fresh random
# weights (seeds 1 to 40), so 320 heads that have learned nothing. Two of `toy-2l`'s heads
# are singled out below because they were the best of its eight at something (the zoo's
# record picks the induction head and the previous-token head as the highest scores over
# all eight heads). A best-of-eight beats a typical head even with nothing learned, so a
# statement about such a head is set beside the best of each untrained model's eight
# heads on the statistic tested, 40 draws. So is a statement about all four layer-1
# heads (their weakest against each model's best head): the heads of one model share its
# embedding and unembedding, so they are not independent draws, and one draw per model
# is the honest count.

# %%
inits = [attn_only(cfg.n_layers, d_model=cfg.d_model, n_heads=cfg.n_heads,
                   d_head=cfg.d_head, d_vocab=cfg.d_vocab, n_ctx=cfg.n_ctx,
                   seed=s) for s in range(1, 41)]
print(f"{len(inits)} models, {len(inits) * cfg.n_layers * cfg.n_heads} "
      "heads at initialisation")


def best_of_heads(stat, pick=max):
    """The selection-aware null: for each model at initialisation, the
    largest (pick=max) or smallest (pick=min) of stat(model, layer, head)
    over its eight heads -> 40 draws."""
    return [pick(stat(m, l, h) for l in range(cfg.n_layers)
                 for h in range(cfg.n_heads)) for m in inits]


BEST8 = "the best of the 8 heads of each of 40 toy-2l's at initialisation"

# %% [markdown]
# The package's factors are the two halves of the product of exercise 9.1:
# $A = W_E W_V$, from a token to the head's value space, and $B = W_O W_U$, from there
# to the logits (for the full QK circuit, $A = W_E W_Q$ and $B = W_K^\top W_E^\top$).
#
# ### What it costs at GPT-2's size
#
# GPT-2 small {cite}`radford2019language` has a vocabulary of 50,257 tokens,
# $d_\text{model} = 768$ and $d_\text{head} = 64$. We build one attention head of that
# shape with random weights (the costs do not depend on the values) and compare the
# dense table with its factors. Memory is counted as the bytes of the tensors each
# route creates. (Python's `tracemalloc` would be the obvious tool, but it only sees
# Python's own allocator, not PyTorch's; the first lines check that it misses a 40 MB
# tensor.) Times are for this machine when the page was built.

# %%
tracemalloc.start()
probe = torch.ones(10_000_000)                       # 40 MB of float32
seen, _ = tracemalloc.get_traced_memory()
tracemalloc.stop()
# tracemalloc traces Python's own allocator; PyTorch allocates tensors in C++
identity("tracemalloc does not see PyTorch tensor memory (40 MB allocated, "
         "under 1 MB seen)", f"{seen} bytes seen", seen < 1e6, chapter="9")
del probe


def nbytes(*tensors):
    return sum(t.element_size() * t.nelement() for t in tensors)


gpt2 = dict(d_model=768, n_heads=1, d_head=64, d_vocab=50257)
big = attn_only(1, **gpt2, n_ctx=8, seed=0)            # one random head
n_vocab = gpt2["d_vocab"]
dense_bytes = n_vocab ** 2 * big.W_E.element_size()    # float32: 4 bytes
GB, MB, KB = 1e9, 1e6, 1e3

t0 = time.perf_counter()
big_ov = full_ov_circuit(big, 0, 0)
t_factors = time.perf_counter() - t0
factor_bytes = nbytes(big_ov.A, big_ov.B)
embed_bytes = nbytes(big.W_E)          # one matrix: GPT-2 ties W_U = W_E^T
big_qk = full_qk_circuit(big, 0, 0)
print(f"dense full OV: {n_vocab}^2 x 4 bytes = {dense_bytes / GB:.1f} GB")
print(f"factors A {tuple(big_ov.A.shape)}, B {tuple(big_ov.B.shape)}: "
      f"{factor_bytes / MB:.1f} MB")
print(f"(W_E itself: {embed_bytes / MB:.0f} MB)")
# sizes by arithmetic on their definitions: observations, not checks
observation("a dense vocab x vocab float32 table for GPT-2 (GB)",
            dense_bytes / GB, chapter="9")
observation("the factors A and B (MB), and how many times smaller than the "
            "dense table", f"{factor_bytes / MB:.1f} MB, "
            f"{dense_bytes / factor_bytes:.0f}x", chapter="9")
identity("the full QK circuit's factors have the same shapes",
         f"{tuple(big_qk.A.shape)}, {tuple(big_qk.B.shape)}",
         big_qk.A.shape == big_ov.A.shape
         and big_qk.B.shape == big_ov.B.shape, chapter="9")

# %% [markdown]
# Two things we actually want from the table, computed through the factors:
#
# - **One row** (what attending to token $s$ does to every logit) is $A[s]\,B$: a
#   $64$-vector times a $64 \times 50257$ matrix.
# - **The copying score** needs the eigenvalues of the $50257 \times 50257$ matrix
#   $AB$. Its nonzero eigenvalues are those of the $64 \times 64$ matrix $BA$, with the
#   same multiplicities. Both directions are needed. If $BAv = \lambda v$ with
#   $\lambda \ne 0$, then $Av \ne 0$ (otherwise $\lambda v = BAv = 0$) and
#   $AB(Av) = A(BAv) = \lambda\, Av$, so $\lambda$ is an eigenvalue of $AB$.
#   Conversely, if $ABu = \lambda u$ with $\lambda \ne 0$, then $Bu \ne 0$ (otherwise
#   $\lambda u = ABu = 0$) and $BA(Bu) = B(ABu) = \lambda\, Bu$, so $\lambda$ is an
#   eigenvalue of $BA$. For the multiplicities, which the score's sums need, the
#   characteristic polynomials satisfy
#   $\det(\lambda I_n - AB) = \lambda^{n-m} \det(\lambda I_m - BA)$ for $A$ of shape
#   $n \times m$ and $B$ of shape $m \times n$: $AB$ has exactly the 64 eigenvalues of
#   $BA$, counted with multiplicity, and $n - 64$ more zeros, which add nothing to
#   $\sum_i \lambda_i$ or $\sum_i |\lambda_i|$. `FactoredMatrix.eigenvalues` and
#   `circuitbook.heads.copying_scores` both work this way.

# %%
s = 1234                                              # any token
t0 = time.perf_counter()
row = big_ov.A[s] @ big_ov.B                          # [50257]
t_row = time.perf_counter() - t0
W_V0, W_O0 = big.W_V[0, 0], big.W_O[0, 0]
row_ref = ((big.W_E[s] @ W_V0) @ W_O0) @ big.W_U
# the same chain, associated two ways: 2 (2 d_model + d_head) roundings
identity_close("row s of the full OV circuit from the factors, A[s] B, "
               "equals ((W_E[s] W_V) W_O) W_U", row, row_ref,
               terms=2 * (2 * gpt2["d_model"] + gpt2["d_head"]),
               scale=abs_chain(big.W_E[s][None], W_V0, W_O0, big.W_U),
               chapter="9")

t0 = time.perf_counter()
small = big_ov.B @ big_ov.A                           # [64, 64]
eig = torch.linalg.eigvals(small.double())            # BA's eigenvalues
t_score = time.perf_counter() - t0
score = copying_scores(big, 0, 0).item()              # the package's score
# After exercise 9.2 your copying_score on BA's eigenvalues is set beside
# the package, which forms another 64 x 64 matrix, W_O (W_U (W_E W_V)), with
# the same eigenvalues. In float32 the vocabulary sums would swamp the
# bound, so both routes run in float64 (the package on a float64 copy).
big64 = big.double()                  # in place: the float32 route is done
W_E64, W_V64, W_O64, W_U64 = (big64.W_E, big64.W_V[0, 0], big64.W_O[0, 0],
                              big64.W_U)
small64 = (W_O64 @ W_U64) @ (W_E64 @ W_V64)            # B A
package = copying_scores(big64, 0, 0).item()
# a worst-case bound to first order (Bauer-Fike), and a loose one: of the
# order of 1e-3 beside a score of order 1e-2, so that check catches gross
# errors only (a wrong matrix, a dropped term), not small ones
score_tol = score_tolerance(small64, abs_chain(W_O64, W_U64, W_E64, W_V64),
                            n_vocab + 2 * gpt2["d_model"])
observation("a random head at GPT-2's shape: its copying score (a copying "
            "head scores near 1)", score, chapter="9")
# sizes only: the times are glued (marked machine-dependent) for the prose
print(f"one row:       {nbytes(row) / KB:6.0f} KB")
print(f"copying score: {nbytes(small) / KB:6.0f} KB (64 x 64 matrix)")
glue("dense_gb", dense_bytes / GB)
glue("factor_mb", factor_bytes / MB)
glue("embed_mb", embed_bytes / MB)
glue("embed_ratio", embed_bytes / factor_bytes)
glue("row_kb", nbytes(row) / KB)
# timings differ from machine to machine by nature: marked, so the numeric
# check lists them
glue("t_factors", t_factors, machine_dependent=True)
glue("t_row_ms", t_row * 1e3, machine_dependent=True)
glue("t_score_ms", t_score * 1e3, machine_dependent=True)
glue("random_score", score)
glue("score_tol", score_tol)
glue("all_heads_tb", 144 * dense_bytes / 1e12)
del big_ov, big_qk

# %% [markdown]
# The dense table would need {glue:text}`dense_gb:.1f` GB for one head, and GPT-2
# small has 144 heads: {glue:text}`all_heads_tb:.2f` TB for all their full OV circuits,
# as much again for the full QK circuits. The factors take
# {glue:text}`factor_mb:.1f` MB, {glue:text}`embed_ratio:.0f` times less than the
# embedding matrix they are made from ({glue:text}`embed_mb:.0f` MB; GPT-2 uses the
# same matrix, transposed, as its unembedding, while the random model here keeps a
# separate one of the same size), and took
# {glue:text}`t_factors:.2f` s to compute on the machine that built this page. After that, a
# row costs {glue:text}`row_kb:.0f` KB and {glue:text}`t_row_ms:.1f` ms, and the copying
# score a $64 \times 64$ eigenproblem ({glue:text}`t_score_ms:.0f` ms). (The random head
# scores {glue:text}`random_score:.2f`, where a copying head scores near 1. After
# exercise 9.2 we check that your score from $BA$'s eigenvalues gives it alike; the check
# allows a difference of {glue:text}`score_tol:.1e`, a worst-case bound to first order,
# loose beside a score of that size, so it catches only a gross error.) The repository's
# `benchmarks/bench_kernels.py` times `copying_scores` for all 144 heads of a
# GPT-2-shaped model against the head-by-head route.
#
# ### A copying head
#
# Back to `toy-2l`, where $d_\text{vocab} = 64$ and we can look at whole tables. Its
# four layer-1 heads are all induction heads (chapter {doc}`17_induction_heads`; each
# scores at least {glue:text}`ind_l1_min:.2f` here), and head {glue:text}`ind_head`,
# the zoo's pick, has the highest induction score by only {glue:text}`ind_lead:.4f`
# (on the zoo's own repeated-token batch, as in chapter {doc}`08_qk_ov`). An induction head attends to the token that followed an
# earlier copy of the current token, and should then predict *that* token: its full OV
# circuit should copy. We materialise all eight heads' tables with your `full_ov` and
# ask, for each source token, whether its own logit is the largest in its row. A head
# at initialisation tops its own row for {glue:text}`ov_any_mean:.1%` of tokens on
# average (all 320 untrained heads), about 1 in 64. Head
# {glue:text}`ind_head` was picked as the best of eight (by its induction score), so the
# null picks too: for each model at initialisation, the highest share among its eight
# heads.

# %%
tables = torch.stack([
    torch.stack([full_ov(W_E, model.W_V[layer, h], model.W_O[layer, h], W_U)
                 for h in range(cfg.n_heads)])
    for layer in range(cfg.n_layers)])                 # [layer, head, 64, 64]
tables64 = torch.stack([                               # the same in float64,
    torch.stack([full_ov(W_E.double(), model.W_V[layer, h].double(),  # for
                         model.W_O[layer, h].double(), W_U.double())  # eig
                 for h in range(cfg.n_heads)])
    for layer in range(cfg.n_layers)])
tokens_idx = torch.arange(cfg.d_vocab)
self_top = tables.argmax(-1) == tokens_idx             # [layer, head, 64]
frac = self_top.float().mean(-1)
print("fraction of tokens whose top logit is themselves [layer, head]:")
print(frac.numpy().round(2))
layer1_sum = tables[1].sum(0)                          # all four layer-1 heads
frac_sum = (layer1_sum.argmax(-1) == tokens_idx).float().mean().item()
coverage = self_top[1].sum(0)                 # heads copying each token


def top1_self(circuit, m, layer, head):
    """Share of tokens whose own token tops their row of a [d_vocab, d_vocab] circuit
    (full_ov_circuit: the token's own logit; full_qk_circuit: the query's own token as key)."""
    T = circuit(m, layer, head).AB
    return (T.argmax(-1) == tokens_idx).float().mean().item()


# every head at initialisation (all 320), and the best of each model's eight
ov_self_any = [top1_self(full_ov_circuit, m, l, h) for m in inits
               for l in range(cfg.n_layers) for h in range(cfg.n_heads)]
n_per_model = cfg.n_layers * cfg.n_heads
null_self = [max(ov_self_any[i:i + n_per_model])
             for i in range(0, len(ov_self_any), n_per_model)]
finding(f"head {IL}.{IH}'s own logit tops its full-OV row for more tokens "
        "than the best head of a model at initialisation", frac[IL, IH].item(),
        null=Null.draws(BEST8, null_self), chapter="9")
observation("untrained heads (all 320): the mean share of tokens whose own "
            "logit tops their full-OV row", sum(ov_self_any) / len(ov_self_any),
            chapter="9")
observation("the four layer-1 heads summed: the share of tokens whose own "
            "logit tops their row", frac_sum, chapter="9")
observation("the fewest layer-1 heads that copy (top-1) any one token",
            coverage.min().item(), chapter="9")
glue("null_self", sum(null_self) / len(null_self))
glue("ov_any_mean", sum(ov_self_any) / len(ov_self_any))
glue("null_self_max", max(null_self))
glue("ind_head", f"{IL}.{IH}")
glue("frac_ind", frac[IL, IH].item())
glue("frac_sum", frac_sum)
glue("frac_heads", ", ".join(f"{f:.0%}" for f in frac[1].tolist()))
glue("coverage_min", coverage.min().item())

# %%
# a heatmap: hover a cell for its tokens and value
T = tables[IL, IH]
diag = torch.diagonal(tables[1], dim1=-2, dim2=-1)    # [head, 64]
ys, xs = torch.nonzero(self_top[1], as_tuple=True)
n_tok = T.shape[0]
side = [go.Heatmap(z=diag.tolist(), coloraxis="coloraxis2", name="diagonal",
                   hovertemplate="head 1.%{y}, token %{x}: %{z:.2f}"
                                 "<extra></extra>"),
        go.Scatter(x=xs.tolist(), y=ys.tolist(), mode="markers",
                   name="top logit is the token", hoverinfo="skip",
                   marker={"color": "black", "size": 4})]
fig = heatmap(T, range(n_tok), range(n_tok),
              panel_titles=[f"full OV circuit of head {IL}.{IH}"],
              x_title="logit of token t", y_title="source token s", zmid=0,
              colorscale="RdBu_r", value_format=".2f", side=side,
              side_title="diagonal of each layer-1 head's full OV circuit",
              side_width=1.0)
fig.figure.update_xaxes(title_text="token", col=2)
fig.figure.update_yaxes(autorange="reversed", col=2,
                        tickvals=list(range(cfg.n_heads)),
                        ticktext=[f"1.{h}" for h in range(cfg.n_heads)])
fig.figure.update_layout(
    coloraxis2={"colorscale": "Greens", "colorbar": {"thickness": 12}},
    legend={"orientation": "h", "x": 0.6, "y": -0.15}, showlegend=True)
fig

# %% [markdown]
# The diagonal of head {glue:text}`ind_head`'s table stands out for some tokens and
# not others: it is the top entry of its row for {glue:text}`frac_ind:.0%` of the
# tokens, against at most {glue:text}`null_self_max:.0%` for the best of an untrained
# model's eight heads ({glue:text}`null_self:.1%` on average). The right
# panel suggests that copying only part of the vocabulary need not be a failure. Each
# layer-1 head copies its own subset of the vocabulary (dark cells, dots where the token
# wins its row), the subsets overlap, and the sum of the four heads' tables copies
# {glue:text}`frac_sum:.0%` of tokens (whether the model uses that sum is not tested
# here; see below).
#
# Why does one head not copy every token itself? Rank does not forbid it. Its table has rank
# at most $d_\text{head} = 16$, and a rank-16 matrix cannot be close to the $64 \times 64$
# identity, but top-1 copying does not need a table close to the identity: it only needs each
# row's diagonal entry to beat the others in that row. A rank-2 table can do that for any
# number of tokens. Put $n$ unit vectors $u_s = (\cos\phi_s, \sin\phi_s)$ on a circle and take
# $T = U U^\top$, so $T[s, t] = \cos(\phi_s - \phi_t)$: each row is largest where $t = s$.
# The cell below builds it.

# %%
n_circle = 200
phi = 2 * math.pi * torch.arange(n_circle, dtype=torch.float64) / n_circle
U_circle = torch.stack([phi.cos(), phi.sin()], dim=-1)   # [n, 2]: unit
T_circle = U_circle @ U_circle.T            # [n, n] = cos(phi_s - phi_t)
circle_rank = torch.linalg.matrix_rank(T_circle).item()
circle_top = T_circle.argmax(-1) == torch.arange(n_circle)
# the diagonal's lead over each row's runner-up: 1 - cos(2 pi / n), ~5e-4
# here, far above float64 rounding of a 2-term dot product (~1e-16)
off_diag = T_circle - 2 * torch.eye(n_circle, dtype=torch.float64)
circle_lead = (T_circle.diagonal() - off_diag.max(-1).values).min().item()
# cos, sin and the 2-term dot product: a few roundings of numbers of size 1
circle_tol = rounding_bound(6, 1.0, torch.float64)
circle_theory = 1 - math.cos(2 * math.pi / n_circle)
identity(f"a rank-2 Gram matrix of {n_circle} unit vectors on a circle has "
         "its diagonal win every row (top-1 copying of every token), by "
         "1 - cos(2 pi / n) up to rounding",
         f"rank {circle_rank}, {int(circle_top.sum())} of {n_circle} rows, "
         f"smallest lead {circle_lead:.1e} (theory {circle_theory:.1e}), "
         f"rounding {circle_tol:.0e}",
         circle_rank == 2 and bool(circle_top.all())
         and abs(circle_lead - circle_theory) <= circle_tol
         and circle_lead > circle_tol,
         chapter="9")
eye_circle = torch.eye(n_circle, dtype=torch.float64)
# distance to the identity at the best scale c, so that it does not depend on
# T's size: c = <T, I> / <T, T>, which is 2 / n for this T, and the distance
# is then sqrt((n - 2) / n)
c_best = T_circle.trace() / (T_circle * T_circle).sum()
circle_dist = (c_best * T_circle - eye_circle).norm() / n_circle ** 0.5
glue("n_circle", n_circle)
glue("circle_dist", circle_dist.item())

# Can a head of toy-2l realise such a table on its own 64 tokens? Here
# d_model = d_vocab, so if W_E and W_U are invertible, any table T of rank
# <= d_head is W_E (W_E^-1 T W_U^-1) W_U, and the middle factor, of rank
# <= d_head, splits as W_V W_O. We build it for the circle table on 64 tokens.
E64, U64 = model.W_E.double(), model.W_U.double()
rank_E = torch.linalg.matrix_rank(E64).item()
rank_U = torch.linalg.matrix_rank(U64).item()
cond_E = torch.linalg.cond(E64).item()
cond_U = torch.linalg.cond(U64).item()
phi64 = 2 * math.pi * torch.arange(cfg.d_vocab, dtype=torch.float64) / cfg.d_vocab
U64_circle = torch.stack([phi64.cos(), phi64.sin()], dim=-1)   # [64, 2]
pad = torch.zeros(cfg.d_vocab, cfg.d_head - 2, dtype=torch.float64)
W_V_c = torch.linalg.solve(E64, torch.cat([U64_circle, pad], -1))  # [d_model, d_head]
W_O_c = torch.linalg.solve(U64.T, torch.cat([U64_circle, pad], -1)).T  # [d_head, d_model]
T_real = full_ov(E64, W_V_c, W_O_c, U64)
real_lead = (T_real.diagonal()
             - (T_real - 2 * torch.eye(cfg.d_vocab, dtype=torch.float64))
             .max(-1).values).min().item()
lead_theory = 1 - math.cos(2 * math.pi / cfg.d_vocab)
# measured, not built: trained (square) matrices of full numerical rank
observation(f"toy-2l's W_E and W_U ({cfg.d_model} x {cfg.d_vocab}): numerical "
            "ranks and condition numbers",
            f"ranks {rank_E}, {rank_U}; cond {cond_E:.1e}, {cond_U:.1e}",
            chapter="9")
identity("a head with toy-2l's d_head, built from these W_E, W_U as "
         "W_V = W_E^-1 [U, 0], W_O = [U, 0]^T W_U^-1, realises the circle "
         "table on its 64 tokens: every token tops its row",
         f"smallest lead {real_lead:.1e} (circle: {lead_theory:.1e})",
         rank_E == rank_U == cfg.d_vocab == cfg.d_model
         and abs(real_lead - lead_theory) <= lead_theory / 2, chapter="9")
glue("cond_E", cond_E)
glue("cond_U", cond_U)

# %% [markdown]
# The table is far from the identity at any scale (the distance
# $\min_c \lVert cT - I\rVert_F / \lVert I \rVert_F$ is {glue:text}`circle_dist:.3f`, where
# 0 is the identity and 1 is no closer than the zero matrix), yet all
# {glue:text}`n_circle` tokens win their own rows.
# One more step makes this a statement about `toy-2l`'s heads: the head must reach such a
# table through the model's own embedding and unembedding. In `toy-2l`
# $d_\text{model} = d_\text{vocab} = 64$ and both $W_E$ and $W_U$ have full rank 64
# (condition numbers {glue:text}`cond_E:.1e` and {glue:text}`cond_U:.1e`), so any table $T$
# of rank at most $d_\text{head}$ is $W_E\,(W_E^{-1} T W_U^{-1})\,W_U$, and the middle
# factor, of rank at most $d_\text{head}$, splits as $W_V W_O$. The cell builds that head
# for the circle table on the 64 tokens, and every token tops its row. So rank does not
# forbid one head of `toy-2l` from copying the whole vocabulary. What the measurement
# shows is only that in `toy-2l` training did not make one head do so: the layer-1 heads copy
# {glue:text}`frac_heads` of the tokens each, every token is copied by at least
# {glue:text}`coverage_min` of them, and their four tables summed copy
# {glue:text}`frac_sum:.0%` of the tokens. Whether the sum is what the model uses is a
# further question, which this page does not test: the sum acts only when the four heads
# attend to the same source token, and the logits also receive the direct path
# $W_E W_U$ and the layer-0 heads' writes, which these tables leave out (chapter
# {doc}`17_induction_heads` finds each of the four an induction head, with a high
# induction score, so on repeated text they mostly attend to the same key).
#
# ### Reading the full QK circuit
#
# The full QK circuit was computed above and not yet looked at. For an induction head one
# might expect the token-token table to carry the head's choice, but an induction head finds
# its key by what the *previous-token head* wrote there, which is not in $W_E$: this table is
# only the direct route, token embedding to token embedding. The figure shows head
# {glue:text}`ind_head`'s table and, for comparison, its diagonal against the rest of each row.

# %%
qk_table = fqk.AB                           # [vocab, vocab]: query, key
# keys scoring above t = s, per query token
qk_diag_rank = (qk_table > qk_table.diagonal()[:, None]).sum(-1)
qk_self_top = (qk_table.argmax(-1) == tokens_idx).float().mean().item()
qk_spread = qk_table.max(-1).values - qk_table.min(-1).values
qk_row_spread = qk_spread.mean().item()
fig, ax = plt.subplots(1, 2, figsize=(9, 3.8),
                       gridspec_kw={"width_ratios": [1, 1.2]})
lim = qk_table.abs().max().item()
im = ax[0].imshow(qk_table, cmap="RdBu_r", vmin=-lim, vmax=lim)
ax[0].set(xlabel="key token t", ylabel="query token s",
          title=f"full QK circuit of head {IL}.{IH}")
fig.colorbar(im, ax=ax[0], fraction=0.046)
ax[1].hist(qk_diag_rank.numpy(), bins=range(0, cfg.d_vocab + 2, 2),
           color="tab:blue")
ax[1].set(xlabel="keys scoring above the query's own token",
          ylabel="query tokens", title="where t = s ranks in each row")
fig.tight_layout()
plt.show()


null_qk_self = best_of_heads(
    lambda m, l, h: top1_self(full_qk_circuit, m, l, h))
finding(f"head {IL}.{IH}'s full QK circuit: its own token tops a query's row "
        "for more query tokens than the best head of a model at "
        "initialisation (a token-matching head: 1)", qk_self_top,
        null=Null.draws(BEST8, null_qk_self), chapter="9")
# the scores the head really computes, on repeated random tokens, before
# its 1/sqrt(d_head)
rep_tok = repeated_random_tokens(8, 20, cfg.d_vocab, seed=1)
_, rep_cache = model.run_with_cache(
    rep_tok, names_filter=lambda n: n.endswith("attn_scores"))
live = rep_cache["attn_scores", IL][:, IH]
live_std = (live[live.isfinite()] * math.sqrt(cfg.d_head)).std().item()
# the same scores' spread within each query's row (masked keys left out)
live_row = (live * math.sqrt(cfg.d_head)).masked_fill(~live.isfinite(), 0)
n_keys = live.isfinite().sum(-1)
row_mean = live_row.sum(-1) / n_keys
row_var = (((live_row - row_mean[..., None]) * live.isfinite()) ** 2).sum(-1)
live_row_std = (row_var[n_keys > 1] / (n_keys[n_keys > 1] - 1)).sqrt()
live_row_std = live_row_std.mean().item()
observation("the full QK circuit's mean row spread (largest - smallest) "
            "over the sd of the scores the head computes on repeated "
            "random tokens", qk_row_spread / live_std, chapter="9")
# the same share for the other layer-1 heads: is the preference general?
qk_self_others = [top1_self(full_qk_circuit, model, IL, h)
                  for h in range(cfg.n_heads) if h != IH]
observation(f"the other layer-1 heads (not {IL}.{IH}): the share of query "
            "tokens whose own token tops their full-QK row",
            ", ".join(f"{v:.3f}" for v in qk_self_others), chapter="9")
# these three were not picked for anything, so each is compared with one
# head at initialisation (all 320), not with a best of eight
qk_self_any = [top1_self(full_qk_circuit, m, l, h) for m in inits
               for l in range(cfg.n_layers) for h in range(cfg.n_heads)]
qk_any_share = sum(v >= max(qk_self_others) for v in qk_self_any) / len(qk_self_any)
observation("untrained heads (all 320): the mean share of query tokens whose own "
            "token tops their full-QK row, and the share of heads scoring at "
            "least the other three layer-1 heads' best",
            f"{sum(qk_self_any) / len(qk_self_any):.3f}, {qk_any_share:.2f}",
            chapter="9")
# Added after the shares above were seen. The top-1 share counts only how
# often the query's own token comes first, so it cannot tell second place
# from last: it cannot show a head that avoids its own token. A two-sided
# statistic of the same
# rows: the number of keys scoring above the query's own token (qk_diag_rank
# above), averaged over query tokens; (d_vocab - 1) / 2 if t = s ranked at
# random.
def keys_above_self(m, layer, head, embed=None):
    """Mean over query tokens of the keys scoring above the query's own
    token in the full QK circuit (embed: another W_E in place of m's)."""
    if embed is None:
        T = full_qk_circuit(m, layer, head).AB
    else:
        T = embed @ m.W_Q[layer, head] @ m.W_K[layer, head].T @ embed.T
    return (T > T.diagonal()[:, None]).sum(-1).float().mean().item()


above = [[keys_above_self(model, l, h) for h in range(cfg.n_heads)]
         for l in range(cfg.n_layers)]
print("keys above the query's own token, mean over query tokens "
      "[layer, head]:")
print(torch.tensor(above).numpy().round(1))
above_any = [keys_above_self(m, l, h) for m in inits
             for l in range(cfg.n_layers) for h in range(cfg.n_heads)]
null_above = Null.draws("one head of a toy-2l at initialisation, all 320",
                        above_any)
# the cheaper mechanism: untrained W_Q, W_K on toy-2l's own trained W_E
above_trained_E = [keys_above_self(m, l, h, embed=W_E) for m in inits
                   for l in range(cfg.n_layers) for h in range(cfg.n_heads)]
null_above_E = Null.draws("the untrained W_Q, W_K of all 320 heads on "
                          "toy-2l's trained W_E", above_trained_E)
# the three unpicked heads, each against one untrained head, in either
# direction: the level 0.05 is divided by 6 (three heads, two directions;
# 0.008 just below it), and the most extreme head is tested one-sided in
# its direction
others = [h for h in range(cfg.n_heads) if h != IH]
above_z = {h: (above[IL][h] - null_above.mean) / null_above.sd for h in others}
AV = max(others, key=lambda h: abs(above_z[h]))
avoid_test = null_test(above[IL][AV], null_above, alternative="greater")
finding(f"head {IL}.{AV}: more keys score above the query's own token than "
        "for an untrained head, i.e. it avoids its own token (level 0.008, "
        "below 0.05 / 6: three unpicked heads, two directions)", avoid_test,
        alpha=0.008, chapter="9")
finding(f"head {IL}.{AV}, the same statistic, against untrained W_Q, W_K on "
        "toy-2l's own trained embedding (level 0.008)", above[IL][AV],
        null=null_above_E, alpha=0.008, chapter="9")
rest = [h for h in others if h != AV]
observation("the other two unpicked heads "
            f"({', '.join(f'{IL}.{h}' for h in rest)}): the same statistic, "
            "and its z against all 320 untrained heads",
            ", ".join(f"{above[IL][h]:.1f} (z = {above_z[h]:.1f})"
                      for h in rest), chapter="9")
# head IH was picked as the best of eight (by its induction score), so its
# null is the lowest of each untrained model's eight heads on this statistic
null_above_low = best_of_heads(keys_above_self, pick=min)
finding(f"head {IL}.{IH}: fewer keys score above the query's own token than "
        "in the lowest head of a model at initialisation", above[IL][IH],
        null=Null.draws("the lowest of the 8 heads of each of 40 toy-2l's at "
                        "initialisation", null_above_low),
        alternative="less", chapter="9")
# layer 0 was not part of the question: the heads above every untrained one
layer0_avoid = [f"0.{h}" for h in range(cfg.n_heads)
                if above[0][h] > max(above_any)]
observation("layer-0 heads whose statistic lies above every untrained head "
            "(not tested: not part of the question)",
            ", ".join(layer0_avoid) or "none", chapter="9")
# the 320 draws are 8 heads of each of 40 models, which share an embedding:
# their correlation within a model (one-way ANOVA estimate, floored at 0)
by_model = torch.tensor(above_any, dtype=torch.float64).view(len(inits), -1)
within = float(by_model.var(dim=1).mean())
between = max(0.0, float(by_model.mean(1).var()) - within / by_model.shape[1])
above_icc = between / (between + within)
observation("the keys-above statistic: correlation of two heads of the same "
            "untrained model (one-way ANOVA estimate over the 40 models)",
            f"{above_icc:.3f}", chapter="9")
glue("above_icc", above_icc)
glue("above_null_mean", null_above.mean)
glue("above_null_sd", null_above.sd)
glue("above_null_max", max(above_any))
glue("above_E_max", max(above_trained_E))
glue("avoid_head", f"{IL}.{AV}")
glue("above_avoid", above[IL][AV])
glue("above_avoid_z", avoid_test.z)
glue("above_avoid_p", avoid_test.p)
glue("above_rest_heads", " and ".join(f"{IL}.{h}" for h in rest))
glue("above_rest", " and ".join(f"{above[IL][h]:.1f}" for h in rest))
glue("above_rest_z", " and ".join(f"{above_z[h]:.1f}" for h in rest))
glue("above_ind", above[IL][IH])
glue("above_low_min", min(null_above_low))
glue("above_low_mean", sum(null_above_low) / len(null_above_low))
glue("layer0_avoid", " and ".join(layer0_avoid) or "none")
glue("qk_any_mean", sum(qk_self_any) / len(qk_self_any))
glue("qk_any_share", qk_any_share)
glue("qk_self_top_n", round(qk_self_top * cfg.d_vocab))
glue("qk_null_max_n", round(max(null_qk_self) * cfg.d_vocab))
glue("qk_margin_n", round(qk_self_top * cfg.d_vocab) - round(max(null_qk_self) * cfg.d_vocab))
glue("qk_self_others", ", ".join(f"{v:.0%}" for v in qk_self_others))
glue("qk_self_top", qk_self_top)
glue("qk_row_spread", qk_row_spread)
glue("live_std", live_std)
glue("live_row_std", live_row_std)
glue("qk_null_mean", sum(null_qk_self) / len(null_qk_self))
glue("qk_null_max", max(null_qk_self))

# %% [markdown]
# Read the table row by row: row $s$ says how much a query whose token is $s$ prefers each key
# token through the token-token term alone (the biases and positions add their own terms). The key with the query's own token tops its row for
# {glue:text}`qk_self_top:.0%` of query tokens ({glue:text}`qk_self_top_n` of 64). A
# token-matching head would score 100%, but the best of an untrained model's eight heads
# scores {glue:text}`qk_null_mean:.1%` on average and at most {glue:text}`qk_null_max:.0%`
# ({glue:text}`qk_null_max_n` of 64). So training gave this head's token-token term a weak
# preference for its own token, though the margin is thin: its count exceeds the null's maximum by
# {glue:text}`qk_margin_n`,
# and with 40 draws the test cannot give p below 1/41. A second statistic of the same
# rows, which we added after seeing these shares, does not rest on that one-token margin:
# the number of keys that score above the query's own token (the histogram's quantity),
# averaged over query tokens. For head {glue:text}`ind_head` it is
# {glue:text}`above_ind:.1f`, fewer than for any of the eight heads of each untrained
# model: the fewest among each model's eight is at least {glue:text}`above_low_min:.1f`
# ({glue:text}`above_low_mean:.1f` on average; again p = 1/41, the floor of 40 draws).
# And the preference is small beside the scores the head computes. A row of the table
# varies by {glue:text}`qk_row_spread:.1f` on average (largest minus smallest entry), while
# the scores the head computes on repeated random tokens have a standard deviation of
# {glue:text}`live_std:.1f` overall and {glue:text}`live_row_std:.1f` within one query's row
# (all before the $1/\sqrt{d_\text{head}}$): most of the spread among the keys one query
# compares comes from elsewhere. So the direct token-token route does little to tell this head
# where to look: it attends to the token *after* an earlier copy, which it can only find
# through what layer 0 wrote (K-composition, chapter {doc}`18_composition`).
#
# The other three layer-1 heads, which were not picked for anything, score
# {glue:text}`qk_self_others` on the top-1 share; a single head at initialisation averages
# {glue:text}`qk_any_mean:.1%`, and {glue:text}`qk_any_share:.0%` of the 320 untrained
# heads score at least as much as the best of those three. So none of the three can be
# told from an untrained head on the top-1 share, a count with little power against a
# weak preference. Nor can it say more: it counts only how often the query's own token comes first, so it
# cannot tell a head that ranks its own token second from one that ranks it last. The
# count of keys above the query's own token can, in both directions. An untrained head
# averages {glue:text}`above_null_mean:.1f` (sd {glue:text}`above_null_sd:.1f`, at most
# {glue:text}`above_null_max:.1f` among the 320). Head {glue:text}`avoid_head` averages
# {glue:text}`above_avoid:.1f`, above every one of them (z = {glue:text}`above_avoid_z:.1f`,
# p = {glue:text}`above_avoid_p:.4f` against a level of 0.05 / 6, for three heads and two
# directions), and above every untrained head placed on `toy-2l`'s own trained embedding
# (at most {glue:text}`above_E_max:.1f`): on the direct token-token route, head
# {glue:text}`avoid_head` avoids its own token. Two cautions on that p. We wrote this test
# after the statistic, and this head's value of it, had been seen, so the level's
# correction covers the choice of head and direction but not of the statistic; what
# carries the verdict is the margin, beyond every untrained head on both nulls. And
# p = 1/321 counts the 320 heads as independent draws, while the eight heads of one model
# share its embedding; here they barely co-vary (two heads of one model correlate at
# {glue:text}`above_icc:.2f` on this statistic), and the trained-embedding null, whose 320 heads are independent given that
# embedding, gives the same verdict. Heads {glue:text}`above_rest_heads` average
# {glue:text}`above_rest` (z = {glue:text}`above_rest_z`), within the untrained heads'
# spread on this statistic too. (Layer-0 heads {glue:text}`layer0_avoid` also lie above
# every untrained head; they are not part of this question, and we leave them untested.)
# What the avoidance does in the model, if anything, this page does not test: like head
# {glue:text}`ind_head`'s preference, it is one part of the score beside what layer 0
# wrote at the query and key positions.
#
# ### Eigenvalues and the copying score
#
# Elhage et al. summarise "does this head copy?" by the eigenvalues $\lambda_i$ of
# the full OV circuit $T$. Take a left eigenvector, a row $v$ of coefficients over
# tokens with $vT = \lambda v$. It is a combination of tokens, not a pattern of attention
# weights: its coefficients can be negative, or complex. Since $T$ is linear, a source
# whose embedding is that combination of token embeddings, $v W_E$, moves the logits by
# $vT = \lambda v$: the same combination of tokens, scaled by $\lambda$. A positive
# eigenvalue reinforces that combination, a negative one suppresses it. The **copying
# score** is
#
# $$\frac{\operatorname{Re}\sum_i \lambda_i}{\sum_i |\lambda_i|} \in [-1, 1],$$
#
# which is 1 when all eigenvalues are positive reals. We compute the dense eigenvalues
# of head {glue:text}`ind_head`'s $64 \times 64$ table (in float64) and compare them with
# the $16 \times 16$ route.

# %%
dense_eig = torch.linalg.eigvals(fov.A.double() @ fov.B.double())   # [64]
small_eig = fov.eigenvalues.to(torch.complex128)                    # [16]
big_enough = dense_eig.abs() > 1e-8 * dense_eig.abs().max()
nonzero = dense_eig[big_enough]
nearest = (small_eig[:, None] - nonzero[None]).abs().min(-1).values
# Bauer-Fike as above: float32 BA (d_model roundings), A and B themselves
# (d_head, d_model) and float32 eig (d_head^2), at cond(eigenvectors) times
# the spectral size of |B| |A|; the float64 side is 10^9 times more precise.
# The float64 zero eigenvalues are ~d_vocab eps64 of the largest, far below
# the 1e-8 cut.
BA_abs = (fov.B.abs() @ fov.A.abs()).double()
BA64 = fov.B.double() @ fov.A.double()
fov_cond = torch.linalg.cond(torch.linalg.eig(BA64).eigenvectors).item()
fov_bound = rounding_bound(
    2 * cfg.d_model + cfg.d_head + cfg.d_head ** 2,
    fov_cond * torch.linalg.matrix_norm(BA_abs, 2).item())
identity(f"the 64 x 64 full OV circuit of head {IL}.{IH} has exactly "
         f"{cfg.d_head} nonzero eigenvalues, and they are those of the "
         f"{cfg.d_head} x {cfg.d_head} BA",
         f"{len(nonzero)}, {nearest.max():.1e} <= {fov_bound:.1e}",
         len(nonzero) == cfg.d_head and bool(nearest.max() <= fov_bound),
         chapter="9")
n_pos_real = (nonzero.real > 0).sum().item()
n_positive = []                             # the same count for every head
for layer in range(cfg.n_layers):
    for h in range(cfg.n_heads):
        ev = torch.linalg.eigvals(tables64[layer, h])
        ev = ev[ev.abs() > 1e-8 * ev.abs().max()]
        n_positive.append((len(ev), int((ev.real > 0).sum())))
print("(nonzero eigenvalues, of which Re > 0), heads 0.0 ... 1.3:")
print(n_positive)
# the null: the same count for each head at initialisation, from its
# d_head nonzero eigenvalues
null_pos = [int((full_ov_circuit(m, l, h).eigenvalues.real > 0).sum())
            for m in inits for l in range(cfg.n_layers)
            for h in range(cfg.n_heads)]
layer1_min = min(p for _, p in n_positive[cfg.n_heads:])
# the heads of one model share W_E and W_U, so its eight heads are not
# independent draws: the null is one draw per model, its best head (harder
# to beat than the weakest of its four layer-1 heads would be)
null_pos_best = [max(null_pos[i:i + cfg.n_layers * cfg.n_heads])
                 for i in range(0, len(null_pos), cfg.n_layers * cfg.n_heads)]
finding("every layer-1 head has more of its 16 nonzero eigenvalues in the "
        "right half-plane than the best head of a model at initialisation "
        "(the fewest of the four)", layer1_min,
        null=Null.draws(BEST8, null_pos_best), chapter="9")
observation("layer-0 heads: the most of their 16 nonzero eigenvalues in "
            "the right half-plane",
            max(p for _, p in n_positive[:cfg.n_heads]), chapter="9")
glue("n_pos_real", n_pos_real)
glue("max_imag", nonzero.imag.abs().max().item())
glue("min_real", nonzero.real.min().item())
glue("null_pos", sum(null_pos) / len(null_pos))
glue("null_pos_max", max(null_pos))

# %% [markdown]
# ### Exercise 9.2: the copying score
#
# Write `copying_score(eigenvalues)` for a complex tensor of eigenvalues. We then apply
# it to the dense eigenvalues (all 64, zeros included) and compare with
# `circuitbook.heads.copying_scores`, which goes through $d_\text{head} \times
# d_\text{head}$ matrices.

# %% tags=["exercise"]
def copying_score(eigenvalues):
    """eigenvalues: complex [n] -> the copying score defined above,
    a float in [-1, 1]."""
    # BEGIN SOLUTION
    return (eigenvalues.sum().real / eigenvalues.abs().sum()).item()
    # END SOLUTION


checks.ch09_ex2(copying_score)

# %%
# the random GPT-2-shaped head of the cost section: your score from the
# eigenvalues of its 64 x 64 BA, beside the package's (both in float64)
score_BA = copying_score(torch.linalg.eigvals(small64))
identity("the random GPT-2-shaped head: copying_score on the eigenvalues of "
         "the 64 x 64 matrix BA matches circuitbook.heads.copying_scores",
         f"{abs(score_BA - package):.1e} <= {score_tol:.1e}",
         abs(score_BA - package) <= score_tol, chapter="9")
del big, big64, small64
package_scores = copying_scores(model)                 # [layer, head]
dense_scores = torch.tensor([
    [copying_score(torch.linalg.eigvals(tables64[layer, h]))
     for h in range(cfg.n_heads)] for layer in range(cfg.n_layers)],
    dtype=torch.float64)
print("copying scores [layer, head]:\n", package_scores.numpy().round(3))
# As for the random head above, the routes are compared in float64 (the
# package run on a float64 copy of the model), each head's bound from
# Bauer-Fike on its d_head x d_head matrix W_O (W_U W_E) W_V.
model64 = copy.deepcopy(model).double()
package64 = copying_scores(model64)
score_tols = torch.tensor([[
    score_tolerance(model64.W_O[l, h] @ (model64.W_U @ model64.W_E)
                    @ model64.W_V[l, h],
                    abs_chain(model64.W_O[l, h], model64.W_U, model64.W_E,
                              model64.W_V[l, h]),
                    cfg.d_vocab + 2 * cfg.d_model)
    for h in range(cfg.n_heads)] for l in range(cfg.n_layers)],
    dtype=torch.float64)
score_errs = (dense_scores - package64).abs()
identity("copying_score of the dense 64 x 64 eigenvalues matches "
         "copying_scores (d_head x d_head route) for all 8 heads",
         f"{score_errs.max():.1e}, each within its bound "
         f"(largest {score_tols.max():.1e})",
         bool((score_errs <= score_tols).all()), chapter="9")
null_scores = torch.cat([copying_scores(m).flatten() for m in inits])
# one draw per model (its heads share W_E and W_U): its best head's score
null_copy = Null.draws(BEST8, null_scores.view(len(inits), -1).max(-1).values)
finding("every layer-1 head copies more than the best head of a model at "
        "initialisation (the lowest of the four copying scores)",
        package_scores[1].min(), null=null_copy, chapter="9")
# head PL.PH was picked as the best of eight (previous-token score): its
# null is the lowest copying score among each untrained model's eight heads
null_copy_low = null_scores.view(len(inits), -1).min(-1).values
finding(f"the previous-token head {PL}.{PH}'s copying score: below the lowest "
        "head of a model at initialisation", package_scores[PL, PH],
        null=Null.draws("the lowest of the 8 heads of each of 40 toy-2l's at "
                        "initialisation", null_copy_low),
        alternative="less", chapter="9")
# the score is a ratio of sums (Re sum lambda is the trace): read the
# previous-token head's table itself, token by token
prev_T = tables[PL, PH]
prev_neg = (prev_T.diagonal() < 0).float().mean().item()
prev_bottom = (prev_T.argmin(-1) == tokens_idx).float().mean().item()


def diag_negative(m, layer, head):
    """Share of tokens whose own entry in the full OV table is negative."""
    diag = full_ov_circuit(m, layer, head).AB.diagonal()
    return (diag < 0).float().mean().item()


null_neg = best_of_heads(diag_negative)
finding(f"head {PL}.{PH} lowers its own token's logit (a negative diagonal "
        "entry) for more tokens than the best head of a model at "
        "initialisation", prev_neg, null=Null.draws(BEST8, null_neg),
        chapter="9")


def diag_bottom(m, layer, head):
    """Share of tokens whose own logit is the lowest in their full OV row."""
    T = full_ov_circuit(m, layer, head).AB
    return (T.argmin(-1) == tokens_idx).float().mean().item()


null_bottom = best_of_heads(diag_bottom)
finding(f"head {PL}.{PH}: its own token's logit is the lowest in its row "
        "for more tokens than the best head of a model at initialisation",
        prev_bottom, null=Null.draws(BEST8, null_bottom), chapter="9")
glue("prev_neg", prev_neg)
glue("prev_bottom", prev_bottom)
glue("null_bottom_mean", sum(null_bottom) / len(null_bottom))
glue("null_bottom_max", max(null_bottom))
glue("null_pos_best_mean", sum(null_pos_best) / len(null_pos_best))
glue("null_neg_max", max(null_neg))
glue("score_ind", package_scores[IL, IH].item())
glue("score_prev", package_scores[PL, PH].item())
glue("prev_head", f"{PL}.{PH}")
glue("null_score_sd", null_scores.std().item())
glue("null_score_min", null_scores.min().item())

# %% [markdown]
# Head {glue:text}`ind_head` scores {glue:text}`score_ind:.3f`: all
# {glue:text}`n_pos_real` nonzero eigenvalues have a positive real part (the smallest
# is {glue:text}`min_real:.2f`; imaginary parts reach {glue:text}`max_imag:.2f`), where
# a head at initialisation has {glue:text}`null_pos:.1f` of 16 on average (all 320), and
# the best of an untrained model's eight heads, the null the test uses,
# {glue:text}`null_pos_best_mean:.1f` on average and at most {glue:text}`null_pos_max`.
# Heads at initialisation score near 0 (sd
# {glue:text}`null_score_sd:.2f`, lowest {glue:text}`null_score_min:.2f`), so every
# layer-1 head's score is something training made. Read the score together with the
# top-1 fraction. Its numerator, $\operatorname{Re} \sum_i \lambda_i$, is the trace of
# $T$: the sum over tokens of the change in the attended token's own logit. So a positive
# score gets the sign right for that sum, the head raising the attended token's logit on
# balance over the vocabulary; it does not say that every token's own logit rises, nor
# how many tokens the head copies. Head {glue:text}`prev_head`, the
# previous-token head, scores {glue:text}`score_prev:.2f`, far below the lowest of the
# eight heads of each of the 40 untrained models. The score is a ratio of sums, so we
# read the table itself: on the direct path the head lowers the logit of the token it attends to for
# {glue:text}`prev_neg:.0%` of tokens (the highest of an untrained model's eight heads: at
# most {glue:text}`null_neg_max:.0%`), and that logit is the lowest of its row for
# {glue:text}`prev_bottom:.0%` of tokens, where the best of an untrained model's eight
# heads averages {glue:text}`null_bottom_mean:.1%` and reaches at most
# {glue:text}`null_bottom_max:.1%`. We do not test its role: the head's
# job is to write information about the previous token for the layer-1 heads to read, a
# route these tables do not include, and this page does not test what, if anything, the
# anti-copying does for the loss.
#
# The explorer shows any head's full OV table (left) and its eigenvalues in the complex
# plane (right: the 16 nonzero ones in color, the 48 zeros of the dense table as gray
# crosses at the origin). Compare the four layer-1 heads, whose eigenvalues all lie to
# the right of the imaginary axis, with the layer-0 heads.

# %%
head_names = [f"{layer}.{h}" for layer in range(cfg.n_layers)
              for h in range(cfg.n_heads)]


def draw_full_ov(head=f"{IL}.{IH}"):
    layer, h = map(int, head.split("."))
    T = tables[layer, h]
    ev = torch.linalg.eigvals(tables64[layer, h])
    keep = ev.abs() > 1e-8 * ev.abs().max()
    fig, ax = plt.subplots(1, 2, figsize=(8.5, 3.7))
    lim = T.abs().max().item()
    im = ax[0].imshow(T, cmap="RdBu_r", vmin=-lim, vmax=lim)
    ax[0].set(xlabel="logit of token t", ylabel="source token s",
              title=f"full OV, head {head}: top-1 self "
                    f"{frac[layer, h]:.0%}")
    fig.colorbar(im, ax=ax[0], fraction=0.046)
    ax[1].scatter(ev.real[~keep], ev.imag[~keep], marker="x", s=12,
                  color="gray", label=f"{int((~keep).sum())} zeros")
    ax[1].scatter(ev.real[keep], ev.imag[keep], s=16,
                  c=ev.real[keep] > 0, cmap="coolwarm_r", vmin=0, vmax=1,
                  label=f"{int(keep.sum())} nonzero")
    r = 1.1 * ev.abs().max().item()
    ax[1].axhline(0, color="lightgray", lw=0.6)
    ax[1].axvline(0, color="lightgray", lw=0.6)
    ax[1].set(xlim=(-r, r), ylim=(-r, r), aspect="equal",
              xlabel="Re(lambda)", ylabel="Im(lambda)",
              title=f"eigenvalues: copying score "
                    f"{package_scores[layer, h]:.3f}")
    ax[1].legend(loc="lower left", fontsize=7)
    fig.tight_layout()
    plt.show()


explore(draw_full_ov, head=head_names)

# %% [markdown]
# ### The positional QK circuit of the previous-token head
#
# `toy-2l` adds its positional embedding to what queries and keys read. So the score of
# query position $i$ (token $s$) on key position $j$ (token $t$) is
# $((e_s + p_i) W_Q + b_Q)((e_t + p_j) W_K + b_K)^\top$, which splits into a token-token term (the full
# QK circuit), a position-position term $W_\text{pos} W_{QK} W_\text{pos}^\top$ (the
# positional QK circuit, `pos_qk_circuit`), two cross terms, and the bias terms.
# {doc}`Chapter 5 <05_positional>` read the positional term of every layer-0 head, with
# the bias terms (among them $b_Q W_K^\top p_j^\top$, which moves attention), and found
# against a null of shuffled positions the band at $j = i - 1$ that singles out head
# {glue:text}`prev_head`. We recompute the band here from
# $W_\text{pos} W_{QK} W_\text{pos}^\top$ alone, without the bias terms, and against an
# initialisation null; so its margin below (in raw score units) is a different quantity
# from chapter 5's (biases included, after the $1/\sqrt{d_\text{head}}$). Two questions
# are new here: how the positional term compares with the token-token
# term of the full QK circuit, and why one query position breaks the band. We mask the
# entries a causal head never uses ($j > i$).

# %%
pos_table = pos_qk_circuit(model, PL, PH).AB           # [n_ctx, n_ctx]
tok_table = full_qk_circuit(model, PL, PH).AB          # [vocab, vocab]
n_ctx = cfg.n_ctx
allowed = torch.tril(torch.ones(n_ctx, n_ctx, dtype=torch.bool))
best_key = pos_table.masked_fill(~allowed, float("-inf")).argmax(-1)
queries = torch.arange(1, n_ctx)
hits = (best_key[1:] == queries - 1)
missed = queries[~hits].tolist()
print(f"query positions whose best key is the one before: "
      f"{int(hits.sum())} of {len(queries)};")
print(f"  exceptions: {missed}")


def prev_hits(m, layer, head):
    """Share of query positions whose best key, by the positional QK
    circuit alone, is the position just before."""
    table = pos_qk_circuit(m, layer, head).AB
    best = table.masked_fill(~allowed, float("-inf")).argmax(-1)
    return (best[1:] == queries - 1).float().mean().item()


# head PL.PH was picked as the best of eight (previous-token score): the
# null is the best of each untrained model's eight heads (toy-2l adds the
# positions to every layer's queries and keys, so each head has this table)
null_prev = best_of_heads(prev_hits)
finding(f"head {PL}.{PH}'s positional QK circuit picks key i - 1 for more "
        "query positions than the best head of a model at initialisation",
        prev_hits(model, PL, PH), null=Null.draws(BEST8, null_prev),
        chapter="9")
glue("null_prev_max", max(null_prev))
gaps = torch.stack([pos_table[i, i - 1] - torch.cat(
    [pos_table[i, :i - 1], pos_table[i, i:i + 1]]).max()
    for i in range(2, n_ctx - 1)])
tok_spread = (tok_table.max(-1).values - tok_table.min(-1).values).mean()
# The whole score of query (token s, position i) on key (token t, position j)
# is q . k with q = (e_s + p_i) W_Q + b_Q and k = (e_t + p_j) W_K + b_K:
# q . b_K is the same for every key, so the score is a part that depends on
# the key's position, q . p_j W_K, plus a part that depends on its token,
# q . e_t W_K. That second part holds the token-token term and the cross term
# p_i W_QK e_t^T, and b_Q's.
attn0 = model.blocks[PL].attn
q_all = ((W_E[:, None] + model.W_pos[None]) @ attn0.W_Q[PH]
         + attn0.b_Q[PH])                              # [s, i, d_head]
by_pos = q_all @ (model.W_pos @ attn0.W_K[PH]).T       # [s, i, j]
by_tok = q_all @ (W_E @ attn0.W_K[PH]).T               # [s, i, t]
inner = range(2, n_ctx - 1)                            # as for gaps above
full_margin = torch.stack([by_pos[:, i, i - 1] - torch.cat(
    [by_pos[:, i, :i - 1], by_pos[:, i, i:i + 1]], -1).max(-1).values
    for i in inner], 1)                                # [s, i]
key_tok_spread = (by_tok.max(-1).values
                  - by_tok.min(-1).values)[:, list(inner)]
# if key i - 1's positional lead exceeds the whole range of the token part,
# no assignment of tokens to the keys can take the top place from it
robust = full_margin > key_tok_spread
observation("positions 2..62, every query token: the mean margin of key "
            "i - 1 by position, over the mean spread of everything in the "
            "score that depends on the key's token (cross terms included)",
            full_margin.mean() / key_tok_spread.mean(), chapter="9")
observation("(query token, position) pairs, positions 2..62, for which key "
            "i - 1's positional margin exceeds the whole spread of the key-"
            "token part", int(robust.sum()), chapter="9")
glue("pos_gap", gaps.mean().item())
glue("full_margin", full_margin.mean().item())
glue("key_tok_spread", key_tok_spread.mean().item())
glue("robust_n", int(robust.sum()))
glue("robust_total", robust.numel())
glue("inv_sqrt_dhead", 1 / math.sqrt(cfg.d_head))
glue("tok_spread", tok_spread.item())
glue("missed", ", ".join(map(str, missed)))

# %%
# the pattern that positions alone would give, and its weight on key i - 1
pos_pattern = (pos_table / math.sqrt(cfg.d_head)).masked_fill(
    ~allowed, float("-inf")).softmax(-1)
on_prev = pos_pattern.diagonal(-1)             # queries i = 1 .. 63
observation("softmaxed with the head's 1/sqrt(d_head), the positional term "
            "alone: its mean weight on key i - 1 over queries 1..62",
            on_prev[:-1].mean(), chapter="9")
glue("on_prev", on_prev[:-1].mean().item())

# a heatmap: hover a cell for its query, key and weight
n_q = pos_pattern.shape[0]
rows_shown = [go.Scatter(x=list(range(i + 1)),
                         y=pos_table[i, :i + 1].tolist(), mode="lines",
                         name=f"query {i}") for i in (10, 30, 50)]
fig = heatmap(pos_pattern, range(n_q), range(n_q), x_title="key position j",
              y_title="query position i",
              panel_titles=[f"softmax of the positional QK, head {PL}.{PH}"],
              zmin=0, zmax=1, side=rows_shown,
              side_title="raw scores of three rows: peak at j = i - 1",
              side_width=0.9)
for i in (10, 30, 50):
    fig.figure.add_vline(x=i - 1, col=2,
                         line={"color": "gray", "width": 0.5, "dash": "dot"})
fig.figure.update_xaxes(title_text="key position j", col=2)
fig.figure.update_yaxes(title_text="score (before 1/sqrt(d_head))", col=2)
fig.figure.update_layout(legend={"x": 0.62, "y": 0.02, "font": {"size": 10}})
fig

# %% [markdown]
# The band below the diagonal carries the head: by the positional term alone, key $i-1$
# is the best key for almost every query position, where the best of an untrained
# model's eight heads picks it for at most {glue:text}`null_prev_max:.0%` of them. In the
# raw scores (right) it beats the next best position by {glue:text}`pos_gap:.0f` on average (before the
# $1/\sqrt{d_\text{head}} =$ {glue:text}`inv_sqrt_dhead:.2f` scale), and after the
# scale and the softmax (left) the positional term alone puts on average
# {glue:text}`on_prev:.1%` of a query's weight on the previous position (queries 1 to 62).
#
# Does the token at each key change that? The token-token term varies by only
# {glue:text}`tok_spread:.1f` across keys, but it is not the only part of the score that
# depends on the key's token: the cross term $p_i W_{QK} e_t^\top$ (the query's position
# reading the key's token) and the query bias do too, and together they vary far more.
# Taking the whole score of a query with token $s$ at position $i$, the part that depends
# on the key's token varies by {glue:text}`key_tok_spread:.1f` across key tokens on
# average, against an average margin of {glue:text}`full_margin:.1f` for key $i-1$ in
# the part that depends on the key's position. For {glue:text}`robust_n` of the
# {glue:text}`robust_total` (query token, query position) pairs the margin exceeds the
# whole token spread, so no choice of tokens at the keys can take the top place from
# position $i-1$. Which token is where moves this head's scores by a good part of the
# positional margin, then, and could change the key it prefers only for the remaining
# few pairs.
#
# The one exception is query position {glue:text}`missed`, the last position of the
# context. The model was trained on sequences of exactly 64 tokens with the next-token
# loss, and the prediction made at the last position has no target, so the positional
# embedding of that position never affected the loss. We check that the gradient of the
# training loss is exactly zero at the last positional embedding (and observe, on one
# batch, that it reaches every other), and, since `toy-2l`
# was trained with Adam and no weight decay (whose update is zero where every gradient
# was zero), that the last row is still where initialisation put it.

# %%
train_like = repeated_random_tokens(4, n_ctx // 2, cfg.d_vocab,  # [4, 64]
                                    seed=3)
with torch.enable_grad():
    model.zero_grad()
    lm_loss(model, train_like).backward()
pos_grad = model.W_pos.grad.norm(dim=-1)               # [n_ctx]
model.zero_grad(set_to_none=True)
# W_pos[63] reaches only position 63's query and key; with the causal mask
# only query 63 reads key 63, and position 63's prediction has no target
identity(f"the loss gradient is exactly zero at W_pos[{n_ctx - 1}]",
         f"{pos_grad[-1]:.1f}", bool(pos_grad[-1] == 0), chapter="9")
observation("on this one batch (4 sequences), the smallest gradient norm "
            f"at the other {n_ctx - 1} positions, and how many are nonzero",
            f"{pos_grad[:-1].min():.1e}, "
            f"{int((pos_grad[:-1] > 0).sum())} of {n_ctx - 1} nonzero",
            chapter="9")
# toy-2l's recipe: seed 0 at initialisation (circuitbook.models.zoo)
init0 = attn_only(cfg.n_layers, d_model=cfg.d_model, n_heads=cfg.n_heads,
                  d_head=cfg.d_head, d_vocab=cfg.d_vocab, n_ctx=cfg.n_ctx,
                  seed=0)
moved = (model.W_pos - init0.W_pos).abs().max(-1).values   # [n_ctx]
# bit for bit on the machine that trained it; a few roundings of the normal
# sampler (log, sqrt, cos, product) where its vector kernel differs
init_tol = rounding_bound(4, init0.W_pos.abs().max().item())
identity(f"W_pos[{n_ctx - 1}] is its value at initialisation (seed 0), "
         "while every other row moved in training",
         f"{'within rounding' if moved[-1] <= init_tol else moved[-1]}, "
         f"min elsewhere {moved[:-1].min():.2f}",
         bool(moved[-1] <= init_tol) and bool((moved[:-1] > init_tol).all()),
         chapter="9")

# %% [markdown]
# ## Summary
#
# - The full OV circuit $W_E W_{OV} W_U$ and the full QK circuit
#   $W_E W_{QK} W_E^\top$ are the head's two circuits read in tokens on the direct route:
#   how attending to token $s$ moves logit $t$, and the token-token term of how much
#   query token $s$ wants key token $t$ (beside positional, cross and bias terms even for
#   `toy-2l`'s layer-0 heads; for a layer-1 head also beside what layer 0 wrote). Running
#   the Annotated Transformer's own modules on one-token inputs reproduces the full OV
#   table plus a constant bias row.
# - At GPT-2's vocabulary a dense table is {glue:text}`dense_gb:.1f` GB per head; the
#   factors are {glue:text}`factor_mb:.1f` MB. A row costs a vector-matrix product and
#   the copying score a $d_\text{head} \times d_\text{head}$ eigenproblem, because the
#   nonzero eigenvalues of $AB$ are those of $BA$.
# - `toy-2l`'s induction head {glue:text}`ind_head` (one of four; it leads the other
#   layer-1 heads' induction scores by {glue:text}`ind_lead:.4f`) has a copying score of
#   {glue:text}`score_ind:.3f` (every nonzero eigenvalue has a positive real part; heads of
#   the same shape at initialisation score near 0), but
#   its own top logit is the attended token for only {glue:text}`frac_ind:.0%` of
#   tokens. The four layer-1 heads' tables overlap (every token is copied by at least
#   {glue:text}`coverage_min` of them), and summed they copy
#   {glue:text}`frac_sum:.0%` of the vocabulary (the tables alone: whether the heads attend to the
#   same token, and what the direct path and layer 0 add, is not tested here; chapter
#   {doc}`17_induction_heads` takes up the first). Rank
#   does not forbid one head copying all of it: a rank-2 table (unit vectors on a
#   circle) copies every token top-1, and since `toy-2l`'s $W_E$ and $W_U$ are
#   invertible (measured: full rank 64, condition numbers {glue:text}`cond_E:.1e` and
#   {glue:text}`cond_U:.1e`), a head of its shape can realise that table on its 64
#   tokens.
# - Head {glue:text}`ind_head`'s full QK circuit matches a query to its own token more
#   often than the best head of each of 40 models at initialisation, by a thin margin
#   ({glue:text}`qk_self_top_n` of 64 query tokens against at most
#   {glue:text}`qk_null_max_n`), and on average ranks the query's own token higher than
#   any head of those models does (a second statistic, the mean number of keys scoring
#   above the own token, added after looking). None of the other three layer-1 heads
#   can be told from an untrained head on the top-1 share, but on the two-sided
#   count head {glue:text}`avoid_head` lies beyond all 320 untrained heads
#   (z = {glue:text}`above_avoid_z:.1f`): on the direct route it avoids its own token.
#   A row of head {glue:text}`ind_head`'s table varies
#   little beside the scores the head computes on repeated random tokens: most of the
#   spread among the keys one query compares comes from elsewhere, and the direct
#   token-token route does little to tell this head where to look. (In a rotary model
#   such as SmolLM2 the token-token table is one per offset,
#   $W_E W_Q R_\Delta W_K^\top W_E^\top$, and an RMSNorm sits between the embedding and
#   $W_Q$, $W_K$: its gain folds into them; its division by each position's RMS folds
#   into $W_E$'s rows for a layer-0 head (there the stream is the token's embedding) but
#   not above it, where the table holds only up to a scale for each query and each key
#   position.)
# - The previous-token head's positional QK circuit is a band at $j = i - 1$. The margin
#   of the whole position-dependent part of its score at key $i - 1$ exceeds everything in
#   the score that depends on the key's token, cross terms included, for
#   {glue:text}`robust_n` of {glue:text}`robust_total` query (token, position) pairs at
#   positions 2 to 62: for those, no choice of key tokens can take the top score from key
#   $i - 1$ (for the rest, some choice of tokens might). By
#   position alone the band breaks only at the last position, which training never
#   reached.
