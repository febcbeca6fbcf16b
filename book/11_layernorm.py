# %% [markdown]
# # 11. Layer normalisation
#
# In the pre-norm transformers this book builds and reads (the Annotated Transformer's
# code, SmolLM2), every sublayer reads the residual stream through a normalisation: a
# LayerNorm, or in SmolLM2 an RMSNorm. This chapter writes LayerNorm out in a few lines, measures how the
# Annotated Transformer's version differs from PyTorch's, and meets its simpler cousin
# RMSNorm, which SmolLM2 and the Llama family use. In the circuit view we fold
# LayerNorm's learned scale and shift into the neighbouring weights, exactly as
# TransformerLens does, and are left with one operation that cannot be folded: division
# by the norm of the vector. The last part asks how far from linear that division is in
# a real model, on real text.

# %% [markdown]
# The set-up is folded away: the imports, and the bound for the two LayerNorm conventions'
# epsilons.

# %% tags=["hide-input"]
import copy
import math
import warnings

import gguf
import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn
from transformer_lens import HookedTransformer, HookedTransformerConfig
from transformer_lens.components import BertBlock
from transformer_lens.components import RMSNorm as TLRMSNorm

from circuitbook import checks
from circuitbook.book import (Null, finding, glue, identity, identity_close,
                              observation)
from circuitbook.data.corpus import shakespeare_scenes
from circuitbook.models.encoder_decoder import LayerNorm, SublayerConnection
from circuitbook.models.pretrained import load_smollm2, smollm2_gguf_path
from circuitbook.widgets import explore

warnings.filterwarnings("ignore",
                        message="HookedTransformer is deprecated")
# a finding's record carries NaN for the statistics its test does not have
# (a bootstrap interval for a rank test); the kernel's JSON encoder warns
warnings.filterwarnings("ignore", message="Message serialization failed")
_ = torch.manual_seed(0)
torch.set_num_threads(1)  # the build shares 2 cores: 1 thread is fastest


def epsilon_bound(x, out, d):
    """How far the Annotated LayerNorm (eps 1e-6 added to the unbiased std)
    may sit from sqrt((d-1)/d) x nn.LayerNorm (eps 1e-5 under the square
    root) on inputs x [n, d], outputs `out`, in float64. With the smallest
    std s, the epsilons change the output by a relative 1e-6 / s +
    1e-5 / (2 s^2) at most; float64 rounding adds 2 (2 d + 4) + 1 roundings
    of the output's size, twice."""
    s_min = x.std(-1, unbiased=False).min().item()
    size = out.abs().max().item()
    eps64 = torch.finfo(torch.float64).eps
    return ((1e-6 / s_min + 1e-5 / (2 * s_min ** 2)) * size
            + 2 * (2 * (2 * d + 4) + 1) * eps64 * size)


def forward_terms(cfg, n):
    """Roundings along the longest path of a TransformerLens forward pass
    over n positions: per layer two LayerNorms (2 d_model + 4 each), Q/K/V
    (d_model + 1), scores (d_head + 1), softmax (n + 3), the weighted values
    (n), W_O and the sum over heads (d_head + n_heads + 1), the MLP
    (d_model + 1, ~5 for GELU, d_mlp + 1) and two residual additions; then
    the final LayerNorm and the unembedding (d_model + 1)."""
    ln = 2 * cfg.d_model + 4
    attn = ((cfg.d_model + 1) + (cfg.d_head + 1) + (n + 3) + n
            + (cfg.d_head + cfg.n_heads + 1))
    mlp = (cfg.d_model + 1) + 5 + (cfg.d_mlp + 1)
    return cfg.n_layers * (2 * ln + attn + mlp + 2) + ln + cfg.d_model + 1

# %% [markdown]
# ## Plain language
#
# A residual stream vector is a list of $d_\text{model}$ numbers. Its overall size drifts:
# it grows as layers add to it, and some tokens end up with much larger vectors than
# others. A layer that reads the stream would like to see inputs of a predictable size.
# Layer normalisation {cite}`ba2016layer` provides that, separately for every position:
#
# 1. **centre**: subtract the mean of the $d_\text{model}$ numbers, so they average zero;
# 2. **scale**: divide by their standard deviation, so they have spread one;
# 3. **re-weight**: multiply each coordinate by a learned gain $\gamma_i$ ...
# 4. **... and shift**: add a learned bias $\beta_i$.
#
# $$\operatorname{LN}(x) = \frac{x - \mu(x)}{\sqrt{\sigma^2(x) + \epsilon}} \odot \gamma
# + \beta,$$
#
# $$\mu(x) = \frac{1}{d}\sum_i x_i, \qquad
# \sigma^2(x) = \frac{1}{d}\sum_i \big(x_i - \mu(x)\big)^2,$$
#
# with $d = d_\text{model}$ and a small $\epsilon$ that keeps the division finite. Step 1
# and step 3 are linear maps; step 4 adds a constant, so steps 3 and 4 together are
# affine, which the circuit view absorbs into the next layer's weights and bias. Step 2
# is neither: it divides by a number computed from the vector itself. Doubling $x$
# doubles $x - \mu$ and doubles $\sigma$, so the output does not change, except through
# $\epsilon$ (negligible once $\sigma^2 \gg \epsilon$). That one nonlinearity is what
# this chapter is about.

# %% [markdown]
# ## The Annotated Transformer view
#
# The Annotated Transformer {cite}`rush2018annotated` writes its own `LayerNorm` class
# instead of using `nn.LayerNorm`. Our copy is `LayerNorm` in the book's
# `encoder_decoder` module; in one function it reads:

# %%
def annotated_layer_norm(x, a_2, b_2, eps=1e-6):
    """The Annotated Transformer's LayerNorm:
    a_2 * (x - mean) / (std + eps) + b_2, where torch's .std() is the
    *unbiased* standard deviation (it divides by d - 1)."""
    mean = x.mean(-1, keepdim=True)
    std = x.std(-1, keepdim=True)
    return a_2 * (x - mean) / (std + eps) + b_2


d_model = 512
ln_at = LayerNorm(d_model)     # the module of the encoder-decoder
with torch.no_grad():          # non-trivial gain and bias
    ln_at.a_2.copy_(1 + 0.3 * torch.randn(d_model))
    ln_at.b_2.copy_(0.3 * torch.randn(d_model))
x = 3 * torch.randn(4, 10, d_model) + 1.5     # [batch, pos, d_model]
ours = annotated_layer_norm(x, ln_at.a_2, ln_at.b_2)
# the same formula twice: each is a mean and a std (sums over d_model), a
# division, the gain and the bias, 2 d_model + 5 roundings
identity_close("annotated_layer_norm reproduces encoder_decoder.LayerNorm",
               ours, ln_at(x), terms=2 * (2 * d_model + 5), chapter="11")

# %% [markdown]
# Two details differ from `torch.nn.LayerNorm` (and from TransformerLens, and from the
# formula above): `x.std()` divides by $d - 1$ instead of $d$ (the *unbiased*
# estimate), and $\epsilon$ is added to the standard deviation instead of to the
# variance under the square root. For inputs of ordinary size only the first detail
# matters, and it matters by a predictable amount: the unbiased standard deviation is
# larger by $\sqrt{d/(d-1)}$, so every normalised value is smaller by the factor
# $\sqrt{(d-1)/d}$. We measure the gap for the paper's $d_\text{model} = 512$ and for the
# toy translation model's 64.

# %% tags=["hide-input"]
gap = {}
for d in (64, 512):
    xd = 3 * torch.randn(1000, d, dtype=torch.float64) + 1.5
    torch_ln = nn.LayerNorm(d, elementwise_affine=False,
                            dtype=torch.float64)
    gap[d] = 1 - math.sqrt((d - 1) / d)
    at_ln, std_ln = annotated_layer_norm(xd, 1.0, 0.0), torch_ln(xd)
    # compared as a product, not elementwise ratios (outputs near zero make
    # those noise)
    allowed = epsilon_bound(xd, at_ln, d)
    dev = (at_ln - (1 - gap[d]) * std_ln).abs().max().item()
    print(f"d = {d:3d}: 1 - sqrt((d-1)/d) = {gap[d]:.3e}; largest deviation")
    print(f"  from Annotated = sqrt((d-1)/d) x torch: {dev:.1e} "
          f"(epsilons' bound {allowed:.1e})")
    identity(f"at d = {d}, Annotated LN = nn.LayerNorm x sqrt((d-1)/d), up "
             "to the epsilons' effect", f"{dev:.2g} <= {allowed:.2g}",
             dev <= allowed, chapter="11")
glue("gap_512", gap[512])
glue("gap_64", gap[64])

# %% [markdown]
# The relative gap is {glue:text}`gap_512:.1e` at $d_\text{model} = 512$ and
# {glue:text}`gap_64:.1e` at 64: harmless for training (the learned gain absorbs it), but
# enough that a weight-for-weight port between the two conventions is not exact.
#
# The placement of $\epsilon$ shows only for vectors whose spread is comparable to
# $\sqrt{\epsilon}$ when $\epsilon$ sits under the square root, or to $\epsilon$ itself
# when it is added to $\sigma$. Below we shrink the spread of an input and watch the
# spread of the output. PyTorch's default $\epsilon = 10^{-5}$ under the square root
# scales the output's spread by $\sigma / \sqrt{\sigma^2 + \epsilon}$, which is already
# $1/\sqrt{2}$ at $\sigma = \sqrt{\epsilon} \approx 0.003$ (the damping sets in a few
# times above that); the Annotated Transformer's $\epsilon = 10^{-6}$ added to $\sigma$
# keeps the output's spread close to 1 down to about $\sigma = 10^{-5}$ (where it is
# still {glue:text}`at_1e5:.2f`), amplifying whatever tiny differences the input has.

# %%
sigmas = torch.logspace(-7, 1, 33, dtype=torch.float64)
base = torch.randn(d_model, dtype=torch.float64)
base = (base - base.mean()) / base.std(unbiased=False)
out_torch, out_at = [], []
torch_ln = nn.LayerNorm(d_model, elementwise_affine=False,
                        dtype=torch.float64)
for s in sigmas:
    v = s * base + 2.0
    out_torch.append(torch_ln(v).std(unbiased=False).item())
    out_at.append(
        annotated_layer_norm(v, 1.0, 0.0).std(unbiased=False).item())

fig, ax = plt.subplots(figsize=(7.5, 3))
ax.semilogx(sigmas, out_torch, "o-", ms=3,
            label="nn.LayerNorm (eps=1e-5 in sqrt)")
ax.semilogx(sigmas, out_at, "s-", ms=3,
            label="Annotated Transformer (eps=1e-6 on std)")
ax.axvline(math.sqrt(1e-5), color="gray", ls=":", lw=1)
ax.set_xlabel("standard deviation of the input vector")
ax.set_ylabel("std of the output")
ax.legend(fontsize=8, loc="lower right")
plt.tight_layout()
plt.show()
i_small = int((sigmas - 1e-3).abs().argmin())
glue("damped_torch", out_torch[i_small])
glue("damped_at", out_at[i_small])
glue("at_1e5", out_at[int((sigmas - 1e-5).abs().argmin())])
# the formulas: an input of spread s (biased std) gives nn.LayerNorm an
# output spread s / sqrt(s^2 + 1e-5), and the Annotated one (unbiased std
# s sqrt(d / (d-1)), plus 1e-6) s / (s sqrt(d / (d-1)) + 1e-6); float64,
# so each side rounds ~2 d + 10 times at size 1
s_small = sigmas[i_small].item()
want = torch.tensor([s_small / math.sqrt(s_small ** 2 + 1e-5),
                     s_small / (s_small * math.sqrt(d_model / (d_model - 1))
                                + 1e-6)], dtype=torch.float64)
identity_close("at input spread 1e-3, the two conventions give the output "
               "spreads their epsilons predict (nn.LayerNorm damped, the "
               "Annotated one not)",
               torch.tensor([out_torch[i_small], out_at[i_small]],
                            dtype=torch.float64), want,
               terms=2 * (2 * d_model + 10), scale=1.0, chapter="11")

# %% [markdown]
# At an input spread of $10^{-3}$ PyTorch's version outputs a spread of
# {glue:text}`damped_torch:.2f`, the Annotated Transformer's {glue:text}`damped_at:.3f`.
# The one trained model we measure below is nowhere near that small: on the passage read
# there, the vectors SmolLM2's norms divide (the inputs of both norms of every layer and of
# the final norm) have an rms of at least {glue:text}`rms_min:.2f` at every layer and token
# (one passage, one model). How much SmolLM2's own $\epsilon = 10^{-5}$ changes a norm's
# output depends on the layer. From layer 1 on, and at the final norm, by a relative
# {glue:text}`eps_rel_rest:.0e` at most: negligible. At layer 0, where the vectors are
# smallest (rms {glue:text}`rms_min:.2f` to {glue:text}`rms0_max:.2f`), by
# {glue:text}`eps_rel_l0_min:.1e` to {glue:text}`eps_rel_max:.1e` (median
# {glue:text}`eps_rel_l0_med:.1e`), the same order as the relative gap between the two
# conventions' spreads, $1 - \sqrt{(d-1)/d}$ = {glue:text}`gap_smol:.1e` at SmolLM2's
# $d_\text{model} = 576$. So if SmolLM2's norms were written in the two LayerNorm
# conventions, from layer 1 on the two would differ by that gap and hardly otherwise.
# At layer 0, PyTorch's $\epsilon$ (SmolLM2's $10^{-5}$, under the square root) matters
# about as much as the gap; the Annotated Transformer's $10^{-6}$, added to the
# standard deviation, would change these outputs by a relative
# {glue:text}`eps_at_max:.1e` at most, below the smallest layer-0 effect of PyTorch's.
# (PyTorch's effect here is computed from the rms that SmolLM2's norms divide by, the
# Annotated one from the centred, unbiased standard deviation; a LayerNorm would use the
# centred value for both.)
#
# ### Where the norm sits: post-norm and pre-norm
#
# Chapter 2 covers this choice for the whole architecture; here is the short version. The
# paper normalises *after* adding a sublayer's output (post-norm,
# $\operatorname{LN}(x + f(x))$); the Annotated Transformer's code normalises the sublayer's
# *input* (pre-norm, $x + f(\operatorname{LN}(x))$), like GPT-2, Llama and most decoder
# models TransformerLens loads {cite}`xiong2020layer`. Not every model TransformerLens
# loads is pre-norm: its BERT (`BertBlock`, an encoder) is post-norm, like the paper, and
# the end of the next cell checks it. What the circuit view needs is a stream that is a
# plain running sum, and only a norm of the stream itself, $\operatorname{LN}(x + f(x))$,
# breaks that; a norm inside the branch, before or after the sublayer (as in Gemma-2's
# extra norms on each sublayer's output), keeps it. `SublayerConnection` has both:

# %%
ffn = nn.Sequential(nn.Linear(d_model, 64), nn.ReLU(),
                    nn.Linear(64, d_model))
ln_terms = 2 * d_model + 4   # a mean, a variance, eps, sqrt, divide, affine
pre = SublayerConnection(d_model, 0.0, norm_position="pre").eval()
post = SublayerConnection(d_model, 0.0, norm_position="post").eval()
x = 3 * torch.randn(2, 5, d_model) + 1.0
with torch.no_grad():
    written = pre(x, ffn) - x        # what pre-norm adds to the stream
    expected = ffn(pre.norm(x))
    zero_post = post(x, torch.zeros_like)  # a sublayer that outputs 0
# LayerNorm (2 d_model + 4) and the FFN (d_model + 1, then 64 + 1) on each
# side, and the residual addition and subtraction (2); x + f - x cancels, so
# the scale is |x| + |f|
identity_close("pre-norm: the stream changes by exactly f(LN(x)), a sum of "
               "writes", written, expected,
               terms=2 * (ln_terms + d_model + 1 + 64 + 1) + 2,
               scale=x.abs().max().item() + expected.abs().max().item(),
               chapter="11")
# a sublayer that writes 0: post-norm returns LN(x + 0), pre-norm x + 0
with torch.no_grad():
    ln_x = post.norm(x)
identity_close("post-norm: a sublayer that outputs 0 still replaces the "
               "stream by LN(x)", zero_post, ln_x, terms=2 * ln_terms + 1,
               chapter="11")
moved = (zero_post - x).abs().max().item()

# TransformerLens's BERT block, with every attention and MLP weight and bias
# set to 0: a pre-norm block would return its input unchanged (it adds two
# zeros); a post-norm block returns ln2(ln1(x))
bert_cfg = HookedTransformerConfig(
    n_layers=1, d_model=d_model, n_heads=8, d_head=64, d_mlp=64, d_vocab=10,
    n_ctx=8, act_fn="gelu", normalization_type="LN")
bert = BertBlock(bert_cfg).eval()
with torch.no_grad():
    for name, p in bert.named_parameters():
        if not name.startswith(("ln1", "ln2")):
            p.zero_()
    bert_out, bert_ln = bert(x), bert.ln2(bert.ln1(x))
identity_close("TransformerLens's BertBlock is post-norm: with its "
               "sublayers zeroed it returns ln2(ln1(x)), not x", bert_out,
               bert_ln, terms=2 * (2 * ln_terms + 2), chapter="11")
bert_moved = (bert_out - x).abs().max().item()
glue("moved", moved)
glue("bert_moved", bert_moved)

# %% [markdown]
# (Here $x$ has mean 1 and spread 3, and $\operatorname{LN}(x)$, with its gain 1 and
# bias 0, has mean 0 and spread 1, so the two differ by up to {glue:text}`moved:.1f` in
# a coordinate; the zeroed BERT block moves its input by up to
# {glue:text}`bert_moved:.1f`.)
#
# ### Exercise 11.1: LayerNorm from scratch
#
# Write `layer_norm(x, gamma, beta, eps)` in the convention of `nn.LayerNorm` and of
# TransformerLens, the formula of the Plain language section. It is not the Annotated
# Transformer's version above: the two details measured after it (which spread, and
# where $\epsilon$ goes) are exactly where the conventions part. The check uses inputs
# with a clearly non-zero mean and a large `eps`, so each of the usual slips gives a
# different answer and can be named. Write it from the formula: neither the check nor the
# graded one accepts an answer that calls `nn.functional.layer_norm` (or `nn.LayerNorm`,
# which calls it).

# %% tags=["exercise"]
def layer_norm(x, gamma, beta, eps=1e-5):
    """x: [..., d]; gamma, beta: [d] -> [..., d]: each vector normalised
    over the last axis, in nn.LayerNorm's convention, then given the gain
    and bias."""
    # BEGIN SOLUTION
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * gamma + beta
    # END SOLUTION


checks.ch11_ex1(layer_norm)

# %% [markdown]
# ### RMSNorm
#
# RMSNorm {cite}`zhang2019rmsnorm` drops the centring and the bias. It divides by the
# root mean square of the coordinates and applies a gain:
#
# $$\operatorname{RMSNorm}(x) = \frac{x}{\sqrt{\tfrac{1}{d}\sum_i x_i^2 + \epsilon}}
# \odot w.$$
#
# When $x$ already has mean zero, the root mean square *is* the standard deviation, so
# LayerNorm is RMSNorm applied to the centred vector, plus $\beta$. We check that
# identity, and check our one-line RMSNorm against TransformerLens's `RMSNorm` module,
# the one SmolLM2 uses below.

# %%
def rms_norm(x, w, eps=1e-5):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


gamma, beta = 1 + 0.3 * torch.randn(d_model), 0.3 * torch.randn(d_model)
x = 3 * torch.randn(4, 10, d_model) + 1.5
lhs = nn.functional.layer_norm(x, (d_model,), gamma, beta, eps=1e-5)
rhs = rms_norm(x - x.mean(-1, keepdim=True), gamma) + beta
# each side: a mean (d_model), the centring, a mean of squares (d_model), +
# eps, sqrt, division, gain, bias: 2 d_model + 6. Centring cancels x's mean of
# 1.5, so the numbers rounded are of size |x| / std, times the gain, plus the
# bias
std_min = x.std(-1, unbiased=False).min().item()
identity_close("LayerNorm(x) = RMSNorm(x - mean(x)) + beta", lhs, rhs,
               terms=2 * (2 * d_model + 6),
               scale=x.abs().max().item() / std_min * gamma.abs().max().item()
               + beta.abs().max().item(), chapter="11")
tl_rms = TLRMSNorm({"d_model": d_model, "eps": 1e-5, "d_vocab": 1,
                    "n_layers": 1, "n_ctx": 1, "d_head": 1,
                    "act_fn": "relu"})
with torch.no_grad():
    tl_rms.w.copy_(gamma)
    ours_rms, theirs_rms = rms_norm(x, gamma), tl_rms(x)
# the same formula twice: a mean of squares (d_model), + eps, sqrt, division,
# gain
identity_close("our rms_norm equals TransformerLens's RMSNorm", ours_rms,
               theirs_rms,
               terms=2 * (d_model + 5), chapter="11")

# %% [markdown]
# ## The circuit view
#
# In the row-vector convention a sublayer reads $\operatorname{LN}(x)\,W + b$, where $W$
# is the first matrix of the sublayer: $W_Q^h$, $W_K^h$, $W_V^h$ for a head, $W_\text{in}$
# for an MLP (and $W_\text{gate}$ beside it in a gated MLP such as SmolLM2's), $W_U$ for the
# unembedding, all of shape $[d_\text{model}, \cdot]$. Write
# $\hat{x} = (x - \mu)/\sqrt{\sigma^2 + \epsilon}$ for the normalised vector. The gain
# and the shift act after the division, so they can be moved into $W$ and $b$. Try it
# before reading on.

# %% [markdown]
# ### Exercise 11.2: fold LayerNorm into the next layer
#
# Write `fold_ln(gamma, beta, W, b)` that returns `(W_folded, b_folded)` such that
# $\hat{x}\,W_\text{folded} + b_\text{folded} = (\hat{x} \odot \gamma + \beta)\,W + b$
# for every normalised $\hat{x}$. `W` has TransformerLens's reading shape
# `[d_model, d_out]` (as $W_\text{in}$, $W_U$ or one head's $W_Q^h$), `b` is `[d_out]`.
# In the check `d_out` equals `d_model`, so a transposed or misplaced factor gives a
# wrong value instead of a shape error, and the check can tell you which one it was.

# %% tags=["exercise"]
def fold_ln(gamma, beta, W, b):
    """gamma, beta: [d_model]; W: [d_model, d_out]; b: [d_out]
    -> (W_folded [d_model, d_out], b_folded [d_out])."""
    # BEGIN SOLUTION
    return gamma[:, None] * W, b + beta @ W
    # END SOLUTION


checks.ch11_ex2(fold_ln)

# %% [markdown]
# <details><summary>Exercise 11.2 worked out (open it once your function passes)</summary>
#
# The fold, written out:
#
# $$\operatorname{LN}(x)\,W + b = (\hat{x} \odot \gamma + \beta)\,W + b
# = \hat{x}\,\underbrace{\operatorname{diag}(\gamma)\,W}_{W'}
# + \underbrace{\beta W + b}_{b'}.$$
#
# The gain multiplies **row** $i$ of $W$ by $\gamma_i$ (the row that reads coordinate
# $i$), and the shift becomes a bias.
#
# </details>
#
# Both the gain and the shift can be folded into the reader's weights for good.
# The centring is linear too: $x - \mu(x)\mathbf{1} = x\,P$ with
# $P = I - \tfrac{1}{d}\mathbf{1}\mathbf{1}^\top$, the projection that removes the
# all-ones direction. Rather than applying $P$ when reading, we can apply it when
# *writing*: replace every matrix that writes into the stream ($W_E$, $W_\text{pos}$,
# $W_O$, $W_\text{out}$ and their biases) by its centred version, $W_\text{write} P$.
# Then every vector in the stream already has mean zero and the centring step does
# nothing. TransformerLens calls the two steps `fold_ln` and `center_writing_weights`;
# `center_unembed` also centres $W_U$ over the vocabulary, which shifts every logit of a
# position by the same amount and so changes no probability.
#
# We test this on a small two-layer model with LayerNorm, whose gains and biases we set
# to random values first (at initialisation they are 1 and 0, and folding would be
# trivial). We fold layer 0's $W_Q$ and $b_Q$ (all four heads) with your `fold_ln` and
# compare them with TransformerLens.

# %%
cfg = HookedTransformerConfig(
    n_layers=2, d_model=48, n_heads=4, d_head=12, d_mlp=96, d_vocab=60,
    n_ctx=16, act_fn="gelu", normalization_type="LN",
    positional_embedding_type="standard", seed=2)
model = HookedTransformer(cfg, move_to_device=False)
with torch.no_grad():
    for name, p in model.named_parameters():
        if name.endswith(".w"):        # LayerNorm gains
            p.copy_(1 + 0.5 * torch.randn_like(p))
        elif name.endswith((".b", "b_Q", "b_K", "b_V", "b_O", "b_U")):
            p.copy_(0.3 * torch.randn_like(p))
tokens = torch.randint(0, cfg.d_vocab, (3, 12))
logits_before = model(tokens).detach()

ln1 = model.blocks[0].ln1
gamma1, beta1 = ln1.w.detach(), ln1.b.detach()
W_Q = model.W_Q[0].detach()             # [head, d_model, d_head]
b_Q = model.b_Q[0].detach()             # [head, d_head]
# your fold_ln, applied to each head's W_Q and b_Q
folds = [fold_ln(gamma1, beta1, W_Q[h], b_Q[h]) for h in range(cfg.n_heads)]
W_Q_fold = torch.stack([W for W, _ in folds])
b_Q_fold = torch.stack([b for _, b in folds])

only_fold = copy.deepcopy(model)
only_fold.process_weights_(fold_ln=True, center_writing_weights=False,
                           center_unembed=False)
folded = copy.deepcopy(model)
folded.process_weights_(fold_ln=True, center_writing_weights=True,
                        center_unembed=True)
# TransformerLens also centres the reading weights over d_model, which cannot
# change the output (the normalised vector has mean zero): compare centred
W_Q_ours = W_Q_fold - W_Q_fold.mean(1, keepdim=True)
d_fold = cfg.d_model
# W_Q: one product per entry (1), the mean over d_model (d_model) and the
# subtraction (1), on each side; the mean cancels, so the scale is that of
# the folded W_Q
identity_close("your fold_ln's W_Q (all four heads, centred) equals "
               "TransformerLens's fold_ln", W_Q_ours, folded.W_Q[0].detach(),
               terms=2 * (d_fold + 2), scale=W_Q_fold.abs().max().item(),
               chapter="11")
# b_Q: a sum over d_model plus the bias, d_model + 1 roundings on each side;
# the size of the numbers summed is what the fold gives for the absolute
# values of its inputs
bias_size = max(fold_ln(gamma1.abs(), beta1.abs(), W_Q[h].abs(),
                        b_Q[h].abs())[1].abs().max().item()
                for h in range(cfg.n_heads))
identity_close("your fold_ln's b_Q (all four heads) equals "
               "TransformerLens's fold_ln", b_Q_fold,
               folded.b_Q[0].detach(), terms=2 * (d_fold + 1),
               scale=bias_size, chapter="11")

logits_fold = only_fold(tokens).detach()


# Folding changes the order of the roundings, not the result: the two forward
# passes are each within forward_terms roundings (plus 2 per layer for the
# folded weights' own rounding) of the exact logits, so within twice that of
# each other. Scale: the largest finite number anywhere in the unfolded forward
# pass (masked scores are -inf).
_, cache_before = model.run_with_cache(tokens)
big = max(t[t.isfinite()].abs().max().item() for t in cache_before.values())
fold_terms = 2 * (forward_terms(cfg, tokens.shape[1]) + 2 * cfg.n_layers)
identity_close("fold_ln alone leaves the logits unchanged", logits_fold,
               logits_before, terms=fold_terms, scale=big, chapter="11")
logits_all = folded(tokens).detach()
shift = (logits_all - logits_before)
# centring adds the mean over d_model (d_model roundings) to each written
# weight and the mean over the vocabulary (d_vocab) to the unembedding; the
# difference of two forward passes cancels, so the scale is the forward pass's
centre_terms = fold_terms + 2 * (cfg.d_model + cfg.d_vocab)
identity_close("with centring too, logits move by one constant per position",
               shift - shift.mean(-1, keepdim=True), torch.zeros_like(shift),
               terms=centre_terms, scale=big, chapter="11")
identity_close("...and the log-probabilities are unchanged",
               logits_all.log_softmax(-1), logits_before.log_softmax(-1),
               terms=centre_terms + 2 * (cfg.d_vocab + 3), scale=big,
               chapter="11")
print(type(folded.blocks[0].ln1).__name__, "replaces",
      type(model.blocks[0].ln1).__name__)

# %% [markdown]
# After folding, each LayerNorm has become `LayerNormPre`: no parameters, just centre and
# divide. And with the writing weights centred, the centring finds nothing to remove: we
# check that every vector a norm of the folded model reads (the inputs of both norms in
# each layer, and of the final norm) has mean zero.

# %%
_, cache = folded.run_with_cache(tokens)
# the input of every norm: each layer's ln1 (resid_pre) and ln2 (resid_mid),
# and the final norm (the last resid_post)
streams = [cache[hook, l] for l in range(cfg.n_layers)
           for hook in ("resid_pre", "resid_mid")]
streams.append(cache["resid_post", cfg.n_layers - 1])
stream_means = torch.stack([s.mean(-1) for s in streams])
stream_rms = torch.stack([cache["resid_pre", l].pow(2).mean(-1).sqrt()
                          for l in range(cfg.n_layers)])
# Each write is centred only up to rounding: its weights' mean over d_model is
# a sum of d_model terms, and the write itself a sum over its inner size (at
# most d_mlp), so with the forward pass's roundings and the mean we take
# (d_model) the stream's mean is zero to within that many roundings of the
# stream's size.
stream_big = max(s.abs().max().item() for s in streams)
mean_terms = (forward_terms(cfg, tokens.shape[1]) + 2 * cfg.d_model
              + cfg.d_mlp)
identity_close("after center_writing_weights the residual stream has mean 0 "
               "at every position and layer", stream_means,
               torch.zeros_like(stream_means), terms=mean_terms,
               scale=stream_big, chapter="11")
normed = cache["blocks.1.ln1.hook_normalized"]
unit = normed.pow(2).mean(-1).sqrt()
# x / sqrt(mean(x^2) + eps) has rms exactly sqrt(1 - eps / scale^2), with scale
# the hooked sqrt(mean(x^2) + eps): compare with that, not with a hand-picked
# distance from 1. Roundings: the scale (d_model + 3), the division (1), the
# mean of squares (d_model + 1) and the square root (1), on numbers of size 1.
hooked_ln_scale = cache["blocks.1.ln1.hook_scale"][..., 0]
ln_eps = folded.cfg.eps
identity_close("what is left of LayerNorm maps every vector to rms "
               "sqrt(1 - eps / scale^2), 1 up to its eps", unit,
               (1 - ln_eps / hooked_ln_scale ** 2).sqrt(),
               terms=2 * cfg.d_model + 6, scale=1.0, chapter="11")

# %% [markdown]
# So after folding, LayerNorm is the map $x \mapsto x / \operatorname{rms}(x)$ (with
# $\operatorname{rms}(x) = \sqrt{\tfrac1d\sum_i x_i^2 + \epsilon}$): it projects every
# vector radially onto the sphere of radius $\sqrt{d}$ (in rms terms, radius 1). That is
# a genuine nonlinearity, and no choice of weights removes it.

# %% [markdown]
# ## How far from linear is the normalisation in a real model?
#
# The circuit view wants to treat everything between the residual stream and a head's
# input as a matrix. After folding, the only obstacle is the division by
# $\operatorname{rms}(x)$. Two ways to make it linear are common:
#
# - **freeze the scale**: use the value $s = 1/\operatorname{rms}(x)$ measured on the
#   actual input and treat $y \mapsto s\,y \odot w$ as a fixed linear map. This is exact
#   at the point: the normalised vector is then *exactly* the sum of one term per
#   component that wrote to the stream, which is how direct attributions are computed.
# - **the tangent**: the derivative of $x \mapsto x/\operatorname{rms}(x)$, which is
#   $s$ times the projection that removes the component along $x$
#   (moving *along* $x$ does not change the output; with $\epsilon > 0$ this holds up
#   to a relative $\epsilon / \operatorname{rms}(x)^2$).
#
# The question is how well either predicts what the norm does when the input changes by
# a realistic amount, for example when we remove one head's contribution to the stream.
# We measure it on SmolLM2 (the 4-bit SmolLM2-135M-Instruct of chapter
# {doc}`04_embeddings`, {cite}`allal2025smollm2`: 30 layers, RMSNorm in front of every
# sublayer) reading the opening of *A Midsummer Night's Dream*. Chapter
# {doc}`04_embeddings` estimated how large the 4-bit
# storage's rounding error is against the weights, and explained why its effect on the
# outputs cannot be measured offline, so every number below is a measurement of that
# copy. Before using it, we check that the weights are what the file says. We decode
# the file ourselves, in float64, from the format's specification (blocks of 32 weights,
# each $d\,q + m$ with a 4-bit code $q$ and $d$, $m$ stored in float16), test our decoder
# on a block worked out by hand, and compare it, weight by weight, with the `gguf`
# library's decoding (which `transformers` uses to load the model) for every 4-bit matrix,
# and with the weights the model holds for the MLP matrices (the conversion reorders the
# attention matrices, so those are compared through `gguf` only).

# %%
smol, tok = load_smollm2()


def q4_1_float64(raw):
    """Decode GGUF Q4_1 bytes as the format's specification (ggml's
    block_q4_1) lays them out, in float64: blocks of 32 weights in 20 bytes,
    the step d and the minimum m as little-endian float16, then 16 bytes of
    4-bit codes q, weight j (j < 16) in the low nibble of byte j and weight
    j + 16 in its high nibble; each weight is d q + m. [n_blocks, 32]."""
    blocks = np.asarray(raw, dtype=np.uint8).reshape(-1, 20)
    d = blocks[:, 0:2].copy().view("<f2").astype(np.float64)   # [n, 1]
    m = blocks[:, 2:4].copy().view("<f2").astype(np.float64)
    codes = blocks[:, 4:].astype(np.int64)                       # [n, 16]
    q = np.concatenate([codes & 0x0F, codes >> 4], axis=1)       # [n, 32]
    return d * q + m


# One block worked out by hand: d = 0.5 (float16 bits 0x3800), m = -1.25
# (0xBD00), and byte j holding code j in its low nibble and 15 - j in its high
# one, so weights 0-15 are -1.25 + 0.5 q for q = 0..15 and weights 16-31 the
# same values backwards. Every value is exact in float16 and float32.
hand_bytes = np.array([0x00, 0x38, 0x00, 0xBD,
                       0xF0, 0xE1, 0xD2, 0xC3, 0xB4, 0xA5, 0x96, 0x87,
                       0x78, 0x69, 0x5A, 0x4B, 0x3C, 0x2D, 0x1E, 0x0F],
                      dtype=np.uint8)
hand_up = [-1.25, -0.75, -0.25, 0.25, 0.75, 1.25, 1.75, 2.25,
           2.75, 3.25, 3.75, 4.25, 4.75, 5.25, 5.75, 6.25]
hand_values = np.array(hand_up + hand_up[::-1])
ours_hand = q4_1_float64(hand_bytes)[0]
gguf_hand = gguf.quants.dequantize(hand_bytes, gguf.GGMLQuantizationType.Q4_1)
identity("a Q4_1 block written by hand from the specification decodes to "
         "its hand-computed values, both in our float64 decoder and in "
         "gguf's dequantize (exact: every value is a float16)",
         f"ours {ours_hand[:3]}..., gguf {gguf_hand[-3:]}",
         np.array_equal(ours_hand, hand_values)
         and np.array_equal(gguf_hand.astype(np.float64), hand_values),
         chapter="11")

# Every Q4_1 tensor of the file, decoded twice: by gguf.quants.dequantize
# (what transformers calls to load the model) and by our decoder. In float32,
# d q is exact (an 11-bit d times a 4-bit code) and d q + m rounds once, so a
# right float32 decoding is our float64 value rounded to float32, exactly.
# The MLP matrices are also compared with what the model holds (the
# conversion reorders the attention matrices, so those only through gguf).
reader = gguf.GGUFReader(str(smollm2_gguf_path()))
mlp_weight = {"ffn_gate": "W_gate", "ffn_up": "W_in", "ffn_down": "W_out"}
off_gguf, off_model, n_q4, n_model = 0, 0, 0, 0
for t in reader.tensors:
    if t.tensor_type.name != "Q4_1":
        continue
    want = q4_1_float64(t.data).astype(np.float32).reshape(
        t.data.shape[0], -1)                                     # [out, in]
    got = gguf.quants.dequantize(t.data, t.tensor_type)
    off_gguf += int(np.count_nonzero(got != want))
    n_q4 += want.size
    _, layer, kind, _ = t.name.split(".")
    if kind in mlp_weight:
        held = getattr(smol.blocks[int(layer)].mlp, mlp_weight[kind])
        off_model += int(np.count_nonzero(held.detach().T.numpy() != want))
        n_model += want.size
identity(f"gguf's dequantize gives our float64 decoding, rounded to "
         f"float32, for every one of the {n_q4:,} Q4_1 weights",
         f"{off_gguf} weights differ", off_gguf == 0, chapter="11")
identity(f"the model's MLP matrices ({n_model:,} weights, all 30 layers) "
         "hold exactly that decoding", f"{off_model} weights differ",
         off_model == 0, chapter="11")

# %%
scene_name, scene = shakespeare_scenes()[0]
ids = tok(scene, return_tensors="pt").input_ids[:, :256]
keep = ("hook_resid_pre", "hook_resid_mid", "hook_z", "hook_attn_out",
        "hook_mlp_out", "ln1.hook_scale", "hook_embed")
last_post = f"blocks.{smol.cfg.n_layers - 1}.hook_resid_post"  # ln_final's input
with torch.no_grad():
    _, sc = smol.run_with_cache(
        ids, names_filter=lambda n: n.endswith(keep) or n == last_post)
L, eps = smol.cfg.n_layers, smol.cfg.eps
# [L, pos, d_model]: the input of every layer's first RMSNorm
resid = torch.stack([sc["resid_pre", l][0] for l in range(L)])
print(f"{scene_name}: {ids.shape[1]} tokens; the first six:")
print(tok.convert_ids_to_tokens(ids[0, :6].tolist()))


def rms(v):
    return (v.pow(2).mean(-1, keepdim=True) + eps).sqrt()


hooked_scale = torch.stack([sc[f"blocks.{l}.ln1.hook_scale"][0]
                            for l in range(L)])
# the same formula as TransformerLens's: squares, a mean over d_model, + eps,
# a square root, d_model + 3 roundings on each side. The mean of squares adds
# positive numbers, so each side is within (d_model + 3) eps of the exact
# value *relative to itself*, token by token; their ratio (one more rounding)
# is then 1 to 2 (d_model + 3) + 1 roundings of size 1. A bound relative to
# each entry: the scales run from under 0.1 (layer 0) to ~1000 (token 0), and
# an absolute bound set by the largest would be as large as the smallest.
identity_close("SmolLM2's RMSNorm scale is rms(x) = sqrt(mean(x^2) + eps), "
               "at all 30 layers (every token's ratio to the hooked scale is 1)",
               rms(resid) / hooked_scale, torch.ones_like(hooked_scale),
               terms=2 * (smol.cfg.d_model + 3) + 1, scale=1.0, chapter="11")

# %% [markdown]
# First, how much does the scale vary? The figure shows, for the input of every layer's
# first RMSNorm, the spread of $\operatorname{rms}(x)$ over the tokens of the passage.

# %%
r = rms(resid)[..., 0]                         # [L, pos]
rest = r[:, 1:]                                # every token but the first
q05, q50, q95 = (rest.quantile(q, dim=1) for q in (0.05, 0.5, 0.95))
fig, ax = plt.subplots(figsize=(8, 3.2))
layers = torch.arange(L)
ax.fill_between(layers, q05, q95, alpha=0.3, label="tokens 1..255: 5-95%")
ax.plot(layers, q50, "o-", ms=3, label="tokens 1..255: median")
ax.plot(layers, r[:, 0], "k^--", ms=4, label="token 0")
ax.set_yscale("log")
ax.set_xlabel("layer (input of ln1)")
ax.set_ylabel("rms(x)")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()
within = (rest.max(1).values / rest.min(1).values)
band = q95 / q05                               # the figure's band, a factor
growth = (q50[-1] / q50[1]).item()
first_ratio = (r[:, 0] / q50)
glue("within_max", within.max().item())
glue("within_layer", int(within.argmax()))
glue("within_median", within.median().item())
glue("band_median", band.median().item())
glue("band_max", band.max().item())
glue("band_layer", int(band.argmax()))
glue("growth", growth)
# layer 0 reads the bare embedding: its median scale against layer 1's
glue("embed_smaller", (q50[1] / q50[0]).item())
glue("first_ratio", first_ratio.max().item())
# every vector a norm of SmolLM2 divides: the inputs of ln1 and ln2 at every
# layer and of the final norm, [2 L + 1, pos]; the eps effect on a norm's
# output is x / sqrt(ms + eps) against x / sqrt(ms), with ms = rms^2 - eps: a
# relative 1 - sqrt(1 - eps / rms^2) = a / (1 + sqrt(1 - a)), a = eps / rms^2
r_norms = torch.cat([r, rms(torch.stack([sc["resid_mid", l][0]
                                         for l in range(L)]))[..., 0],
                     rms(sc[last_post][0])[..., 0][None]]).double()
a_eps = eps / r_norms ** 2
eps_effect = a_eps / (1 + (1 - a_eps).sqrt())            # [2 L + 1, pos]
at_layer0 = torch.cat([eps_effect[0], eps_effect[L]])    # ln1 and ln2, layer 0
later_norms = torch.cat([eps_effect[1:L], eps_effect[L + 1:]])
glue("rms_min", r_norms.min().item())
glue("rms0_max", torch.cat([r_norms[0], r_norms[L]]).max().item())
glue("eps_rel_max", eps_effect.max().item())
glue("eps_rel_l0_min", at_layer0.min().item())
glue("eps_rel_l0_med", at_layer0.median().item())
glue("eps_rel_rest", later_norms.max().item())
glue("gap_smol", 1 - math.sqrt((smol.cfg.d_model - 1) / smol.cfg.d_model))
# the Annotated convention's eps: 1e-6 added to the unbiased std s, a
# relative change of 1e-6 / (s + 1e-6), largest where s is smallest
norm_inputs = torch.cat([resid, torch.stack([sc["resid_mid", l][0]
                                             for l in range(L)]),
                         sc[last_post]]).double()
std_min = norm_inputs.std(-1).min().item()
glue("eps_at_max", 1e-6 / (std_min + 1e-6))
observation("one passage: eps's relative effect on the output of layer 0's "
            "two norms, median over tokens (against the conventions' gap "
            "1 - sqrt((d-1)/d) at d = 576)", at_layer0.median(),
            chapter="11")
observation("one passage: eps's largest relative effect on any other norm's "
            "output (layers 1-29 and the final norm)", later_norms.max(),
            chapter="11")
observation("one passage: the median rms from layer 1 to layer 29 (ratio)",
            growth, chapter="11")
observation("one passage: token 0's rms over the median token's, its "
            "largest over the layers", first_ratio.max(), chapter="11")

# %% [markdown]
# Within one layer, most tokens have a similar scale: the 5-95% band of the figure spans a
# factor of {glue:text}`band_median:.2f` in the median layer and at most
# {glue:text}`band_max:.2f` (layer {glue:text}`band_layer`). The extremes reach further:
# the largest and smallest scale over tokens 1-255 differ by a factor of
# {glue:text}`within_median:.1f` in the median layer, but in some layers a few tokens are
# far from the rest, up to a factor of {glue:text}`within_max:.1f` (layer
# {glue:text}`within_layer`). Across depth the median scale grows {glue:text}`growth:.0f`-fold from layer 1 to layer 29; layer 0 reads the
# bare embedding, whose median scale is {glue:text}`embed_smaller:.0f` times smaller
# still. The first token is in a class of its own: its vector reaches
# {glue:text}`first_ratio:.0f` times the median size. Is that the first *position* or the
# token `###`? One more run tells them apart, for one other token: we feed the model the
# same passage from token 100 on (counting from 0), so that a different token comes first:
# {glue:text}`later_first`, a hyphen (from "step-dame"), not a word.

# %%
later = ids[:, 100:164]
glue("later_first", repr(tok.decode(later[0, :1])))
with torch.no_grad():
    _, sc_later = smol.run_with_cache(
        later, names_filter=lambda n: n.endswith(("resid_pre", "pattern")))
r_later = torch.stack([sc_later["resid_pre", l][0].pow(2).mean(-1).sqrt()
                       for l in range(L)])
# every position's rms over the layer's median, its largest over the layers
ratio_all = (r_later / r_later[:, 1:].median(1, keepdim=True).values)
peak = ratio_all.max(0).values                          # [64 positions]
ratio_later = ratio_all[:, 0]                           # position 0, [L]
glue("first_ratio_later", peak[0].item())
glue("other_peak", peak[1:].max().item())
finding("started at token 100, the first position's vector is again far "
        "larger than any other position's (largest ratio to the median "
        "over the layers)", peak[0],
        null=Null.draws("the other 63 positions of the same run", peak[1:]),
        chapter="11")

# %% [markdown]
# It reaches {glue:text}`first_ratio_later:.0f` times the median, where no other
# position of the run exceeds {glue:text}`other_peak:.1f` times. The same token comes
# again at position {glue:text}`again_pos` of the run (in {glue:text}`again_text`), and
# there it reaches only {glue:text}`again_peak:.1f` times the median: in this run, and
# for this start, the size goes with the first position, not with the token.
#
# Does the size go with a use? If the first position is a resting place for attention,
# an "attention sink" {cite}`xiao2023efficient`, layers in which it is large might pay
# it more attention. We measure, in each layer, the attention that queries 8-63 pay to
# position 0, averaged over heads and queries. We leave out the first eight queries,
# since a query that sees only a few keys gives each of them a large share, position 0
# included, whatever position 0 holds. We set this attention beside position
# 0's size with a rank correlation over the layers, which asks whether the attention
# rises steadily (monotonically) with the size. The layers are not exchangeable: in the
# first three layers (0-2) both series are low (position 0 at most
# {glue:text}`early_size:.1f` times the median size, at most {glue:text}`early_att:.0%` of
# the attention, which even dips from layer 0 to layer 1), and by layer 3 both have jumped
# (to {glue:text}`size_3:.1f` times and {glue:text}`att_3:.0%`). Any two quantities that
# are low in the first layers and high after correlate over all 30. We therefore compute
# it on layers 3-29 only, after that jump. This cut is made after seeing the jump, so we
# also report the all-layer value, as a number without a test (the cut lowers the
# correlation here; it need not have).

# %% tags=["hide-input"]
# the run's first token occurs again later in the run: the same token at
# another position (the first such place), and its largest ratio there
again = int((later[0, 1:] == later[0, 0]).nonzero()[0, 0]) + 1
glue("again_pos", again)
glue("again_text", repr(tok.decode(later[0, again - 1:again + 3])))
glue("again_peak", peak[again].item())
observation("started at token 100, the first token again at a later position: "
            "its largest ratio to the median over the layers", peak[again],
            chapter="11")

# attention paid to position 0 by queries 8..63, averaged over heads, per
# layer; does it go with position 0's size? A rank correlation over layers
# 3..29, against the same correlation with those layers shuffled
to_first = torch.stack([sc_later["pattern", l][0, :, 8:, 0].mean()
                        for l in range(L)])


def rank_corr(a, b):
    """Spearman's rank correlation of two 1-d tensors (no ties here)."""
    ra, rb = a.argsort().argsort().double(), b.argsort().argsort().double()
    return torch.corrcoef(torch.stack([ra, rb]))[0, 1].item()


first_tested = 3                                # layers 0-2 left out
size_t, att_t = ratio_later[first_tested:], to_first[first_tested:]
g_perm = torch.Generator().manual_seed(0)
shuffled_corr = [rank_corr(size_t, att_t[torch.randperm(
    len(att_t), generator=g_perm)]) for _ in range(1000)]
sink_corr = rank_corr(size_t, att_t)
# an interval for it: Fisher's z, with the standard error sqrt(1.06 / (n - 3))
# of a rank correlation (Fieller, Hartley and Pearson 1957); like the
# shuffle, it treats the layers as independent draws
z_se = math.sqrt(1.06 / (len(att_t) - 3))
sink_lo, sink_hi = (math.tanh(math.atanh(sink_corr) + k * 1.96 * z_se)
                    for k in (-1, 1))
glue("sink_lo", sink_lo)
glue("sink_hi", sink_hi)
# the shuffle and the interval both take the layers as exchangeable draws,
# which they are not (both series drift with depth, below): the value is
# recorded as a number, with what the shuffle gives beside it, not as a test
crit = sorted(shuffled_corr, reverse=True)[49]
observation(f"over layers {first_tested}-{L - 1}, the rank correlation of "
            "attention to position 0 with position 0's size (a graded link); "
            f"shuffles of those layers reach it: p < 0.05 would need > {crit:.2f}; "
            f"Fisher interval {sink_lo:.2f} to {sink_hi:.2f}; no test, as the "
            "layers drift with depth", sink_corr, chapter="11")
sink_corr_all = rank_corr(ratio_later, to_first)
observation("over all 30 layers, including the first three where both "
            "series are low (no test: the layers are not exchangeable)",
            sink_corr_all, chapter="11")
glue("sink_first", first_tested)
glue("sink_n", len(att_t))
glue("early_size", ratio_later[:first_tested].max().item())
glue("early_att", to_first[:first_tested].max().item())
glue("size_3", ratio_later[first_tested].item())
glue("att_3", to_first[first_tested].item())
glue("sink_corr", sink_corr)
glue("sink_corr_all", sink_corr_all)
# p = (1 + #shuffles >= r) / 1001 < 0.05 needs at most 49 shuffles at or
# above r: r must exceed the 50th largest shuffled value
glue("sink_crit", crit)
glue("sink_shuffle_share", sum(c >= sink_corr for c in shuffled_corr) / 1000)

# the drift with depth: over layers 3-29, position 0's size and the
# attention to it, each against the layer index; then, from the layer where
# position 0 is largest on, its size against the layer index
layer_idx = torch.arange(L, dtype=torch.float64)
peak_layer = int(ratio_later.argmax())
size_depth_t = rank_corr(size_t, layer_idx[first_tested:])
att_depth = rank_corr(att_t, layer_idx[first_tested:])
size_depth = rank_corr(ratio_later[peak_layer:], layer_idx[peak_layer:])
glue("sink_peak_layer", peak_layer)
glue("size_depth_t", size_depth_t)
glue("att_depth", att_depth)
glue("size_depth", size_depth)
observation(f"started at token 100: rank correlation with the layer index of "
            f"position 0's size and of the attention to it (layers "
            f"{first_tested}-{L - 1}), then of position 0's size over layers "
            f"{peak_layer}-{L - 1}",
            f"{size_depth_t:.2f}, {att_depth:.2f}, {size_depth:.2f}",
            chapter="11")

# the on/off reading, split after looking at the sizes: position 0's sizes
# fall into two groups with a gap between them, and 3 times the median lies
# in that gap. The split is read off these data, so it is an observation
ordinary = ratio_later < 3
ord_layers = ordinary.nonzero().flatten().tolist()
mid = [l for l in ord_layers if l >= first_tested]   # ordinary after layer 2
glue("ord_layers", ", ".join(map(str, ord_layers[:-1]))
     + f" and {ord_layers[-1]}")
glue("ord_size_max", ratio_later[ordinary].max().item())
glue("ord_att_max", to_first[ordinary].max().item())
glue("big_n", int((~ordinary).sum()))
glue("big_size_min", ratio_later[~ordinary].min().item())
glue("big_att_min", to_first[~ordinary].min().item())
glue("mid_ordinary", "; ".join(
    f"layer {l}, {ratio_later[l]:.1f} times the median and "
    f"{to_first[l]:.1%} of the attention" for l in mid))
# the same split by another rule, with no number in it: position 0 no larger
# than the largest other position in the same layer
alt = ratio_later <= ratio_all[:, 1:].max(1).values
alt_layers = alt.nonzero().flatten().tolist()
glue("alt_layers", ", ".join(map(str, alt_layers[:-1])) + f" and {alt_layers[-1]}")
glue("alt_att_max", to_first[alt].max().item())
glue("alt_big_min", to_first[~alt].min().item())
observation("started at token 100, ordinary taken as no larger than the "
            "largest other position in the layer: the most attention position "
            f"0 gets in those layers ({alt_layers}), then the least in the others",
            f"{to_first[alt].max():.3f}, {to_first[~alt].min():.3f}",
            chapter="11")
observation("started at token 100, split after seeing the sizes: the most "
            "attention position 0 gets in the layers where it is of ordinary "
            f"size (layers {ord_layers}), then the least in the other layers",
            f"{to_first[ordinary].max():.3f}, {to_first[~ordinary].min():.3f}",
            chapter="11")

# %% [markdown]
# Over layers {glue:text}`sink_first`-29 the rank correlation is
# {glue:text}`sink_corr:.2f`. Shuffling those layers reaches that value in
# {glue:text}`sink_shuffle_share:.0%` of 1000 shuffles: to stand
# out at $p < 0.05$ it would have had to exceed {glue:text}`sink_crit:.2f`, the 50th
# largest of the 1000 shuffled values; its 95% interval (Fisher's $z$, layers taken as
# independent) runs from {glue:text}`sink_lo:.2f` to {glue:text}`sink_hi:.2f`. Over all
# 30 layers it is {glue:text}`sink_corr_all:.2f`, a number that also counts the jump of
# both series after layer 2. So a graded link, attention rising steadily with size, is
# neither shown nor ruled out by these layers. We record these as numbers rather than as
# a test: the layers are not exchangeable draws, and a rank correlation may not be the
# measure that fits these series.
#
# First, depth is tangled with both series. Over layers {glue:text}`sink_first`-29 the
# rank correlations with the layer index are {glue:text}`size_depth_t:.2f` for position
# 0's size and {glue:text}`att_depth:.2f` for the attention to it. Position 0's size does
# not rise steadily with depth: it is largest at layer {glue:text}`sink_peak_layer`, and
# from there to layer 29 it falls with depth (rank correlation with the layer index
# {glue:text}`size_depth:.2f`), so over those layers size and depth cannot be told apart.
# A shuffle ignores all of this, and a value it cannot tell from shuffling says little
# either way.
#
# Second, the two series look on/off rather than graded. Looking at the sizes (so this
# split is drawn after seeing the data), position 0 is of ordinary size in layers
# {glue:text}`ord_layers` (at most {glue:text}`ord_size_max:.1f` times the median), and in
# those layers it gets at most {glue:text}`ord_att_max:.0%` of the attention. In the other
# {glue:text}`big_n` layers it is at least {glue:text}`big_size_min:.1f` times the median,
# and gets at least {glue:text}`big_att_min:.0%`. The ordinary layers after the first three
# sit among large ones ({glue:text}`mid_ordinary`); a trend with depth does not make such a
# dip, so these layers are this run's best hint of a link. How clean the split looks depends on where
# "ordinary" is drawn: counted instead as no larger than the largest other position in the
# same layer, the ordinary layers are {glue:text}`alt_layers`, and the attention in them
# reaches {glue:text}`alt_att_max:.0%` while in the other layers it falls to
# {glue:text}`alt_big_min:.0%`, so the two groups overlap.
#
# So this passage is consistent with an on/off attention sink (position 0 large in the
# layers that attend to it, ordinary in those that do not), which it does not test, and it
# neither shows nor rules out a graded link between the size and the attention: the rank
# correlation is {glue:text}`sink_corr:.2f` and its interval reaches
# {glue:text}`sink_hi:.2f` (one passage, one start, one model). A test would fix a rule
# for "ordinary size" in advance and apply it to other passages and starts. We leave the
# first token out of the statistics below.
#
# Next, the decomposition that freezing the scale makes exact. The input of layer 20's
# norm is the embedding plus every earlier attention and MLP output; dividing each term
# by the frozen scale and adding gives the norm's output exactly.

# %%
ell = 20
parts = [sc["hook_embed"][0]]
for l in range(ell):
    parts += [sc["attn_out", l][0], sc["mlp_out", l][0]]
w20 = smol.blocks[ell].ln1.w.detach()
x20 = resid[ell]
true_out = x20 / rms(x20) * w20
# the frozen scale, applied term by term
summed = sum(p / rms(x20) * w20 for p in parts)
# The model added the same parts one by one into the stream (len(parts)
# roundings) and we add them after dividing (2 + len(parts)); rms(x20) itself
# is d_model + 3. The parts cancel (token 0's are huge), so the scale is sum_k
# |part_k| / rms(x) |w|, the size of the numbers summed.
abs_sum = sum(p.abs() for p in parts) / rms(x20) * w20.abs()
identity_close(f"with the scale frozen, layer {ell}'s normalised input is "
               f"exactly the sum of {len(parts)} per-component terms",
               summed, true_out, terms=2 * len(parts) + smol.cfg.d_model + 5,
               scale=abs_sum.max().item(), chapter="11")

# %% [markdown]
# Now the experiment. For every layer $\ell$ and every token we take the input $x$ of
# layer $\ell+1$'s norm and remove one piece $\delta$ of it: one attention head's output
# (9 per layer), the whole attention layer's output, the MLP layer's output, or, as a
# deliberately large change, the sum of all attention layers up to $\ell$. We compare the
# true change of the normalised vector, $\Delta = f(x - \delta) - f(x)$, with the two
# linear predictions, and report $\lVert \Delta - \Delta_\text{lin} \rVert /
# \lVert \Delta \rVert$.

# %%
W_O = smol.W_O.detach()               # [L, head, d_head, d_model]
kind_names = [
    "one head", "attention layer", "MLP layer", "all attention <= l"]
rows = []
for l in range(L - 1):
    x = resid[l + 1, 1:]              # skip token 0
    w = smol.blocks[l + 1].ln1.w.detach()
    s, y = 1 / rms(x), x / rms(x) * w
    heads = torch.einsum("phe,hem->hpm", sc["z", l][0, 1:], W_O[l])
    attn_upto = sum(sc["attn_out", k][0, 1:] for k in range(l + 1))
    pieces = [heads, sc["attn_out", l][0, 1:][None],
              sc["mlp_out", l][0, 1:][None], attn_upto[None]]
    for kind, delta in enumerate(pieces):
        true = (x - delta) / rms(x - delta) * w - y
        frozen = -delta * s * w
        along = x * (x * delta).sum(-1, keepdim=True) / x.pow(2).sum(
            -1, keepdim=True)
        tangent = -(delta - along) * s * w
        n = true.norm(dim=-1)
        rows.append(torch.stack(torch.broadcast_tensors(
            torch.tensor(float(kind)),
            delta.norm(dim=-1) / x.norm(dim=-1),
            nn.functional.cosine_similarity(x.expand_as(delta), delta,
                                            dim=-1).abs(),
            (true - frozen).norm(dim=-1) / n,
            (true - tangent).norm(dim=-1) / n), -1).reshape(-1, 5))
# columns: kind, size, |cos|, frozen-scale error, tangent error
R = torch.cat(rows)
print(f"{'removed piece':20s} {'n':>6s} {'|delta|/|x|':>11s} "
      f"{'frozen err':>10s} {'tangent err':>11s}   (medians)")
for k, name in enumerate(kind_names):
    S = R[R[:, 0] == k]
    print(f"{name:20s} {len(S):6d} {S[:, 1].median():11.3f} "
          f"{S[:, 3].median():10.3f} {S[:, 4].median():11.3f}")

# %%
H = R[R[:, 0] == 0]
# the medians of the table for the whole-layer pieces, for the section after
for k, key in ((1, "attnlayer"), (2, "mlplayer"), (3, "upto")):
    glue(f"{key}_frozen", R[R[:, 0] == k, 3].median().item())
    glue(f"{key}_tangent", R[R[:, 0] == k, 4].median().item())
glue("head_size", H[:, 1].median().item())
glue("head_frozen", H[:, 3].median().item())
glue("head_frozen_p90", H[:, 3].quantile(0.9).item())
glue("head_tangent", H[:, 4].median().item())
glue("head_tangent_p90", H[:, 4].quantile(0.9).item())
corr = torch.corrcoef(H[:, 2:4].T)[0, 1].item()
glue("corr_cos", corr)
# to first order in |delta| / |x|, with a uniform gain, the frozen scale's
# relative error is |cos| / sqrt(1 - cos^2): compare with that
first_order = H[:, 2] / (1 - H[:, 2] ** 2).sqrt()
glue("first_order_dev", ((H[:, 3] - first_order).abs()
                         / first_order).median().item())
observation("single heads: the correlation of the frozen scale's error "
            "with |cos(x, delta)|", corr, chapter="11")
observation("single heads: median error of the tangent, then of the frozen "
            "scale", f"{H[:, 4].median():.3f}, {H[:, 3].median():.3f}",
            chapter="11")
small, large = R[R[:, 1] < 0.03], R[R[:, 1] > 0.3]
glue("small_tangent", small[:, 4].median().item())
glue("small_frozen", small[:, 3].median().item())
glue("large_tangent", large[:, 4].median().item())
glue("large_frozen", large[:, 3].median().item())
# what the two size bins hold: mostly single heads below 3%, mostly the sums
# of all attention layers above 30%
glue("small_head_share", (small[:, 0] == 0).double().mean().item())
glue("large_upto_share", (large[:, 0] == 3).double().mean().item())
# the tangent's error over the size of the change, median per kind of piece,
# against how far the kinds' median sizes spread
per_size = torch.stack([(R[R[:, 0] == k, 4] / R[R[:, 0] == k, 1]).median()
                        for k in range(len(kind_names))])
kind_size = torch.stack([R[R[:, 0] == k, 1].median()
                         for k in range(len(kind_names))])
glue("tan_per_size_min", per_size.min().item())
glue("tan_per_size_max", per_size.max().item())
glue("kind_size_span", (kind_size.max() / kind_size.min()).item())
observation("the tangent's relative error over |delta| / |x|, median per kind "
            "of piece (one head, attention layer, MLP layer, all attention "
            "<= l)", ", ".join(f"{v:.2f}" for v in per_size.tolist()),
            chapter="11")
observation("median tangent error for changes over 30% of |x|, then under "
            "3%", f"{large[:, 4].median():.3f}, {small[:, 4].median():.3f}",
            chapter="11")

gen = torch.Generator().manual_seed(0)
fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
colors = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
for k in reversed(range(len(kind_names))):   # single heads drawn on top
    name = kind_names[k]
    S = R[R[:, 0] == k]
    S = S[torch.randperm(len(S), generator=gen)[:1500]]
    style = dict(s=2, alpha=0.4, c=colors[k], label=name)
    axes[0].scatter(S[:, 2], S[:, 3], **style)
    axes[1].scatter(S[:, 1], S[:, 4], **style)
axes[0].plot([0, 1], [0, 1], "k:", lw=1)
axes[0].set_xlabel("|cos(x, delta)|")
axes[0].set_ylabel("relative error")
axes[0].set_title("frozen scale", fontsize=10)
axes[0].set_ylim(0, 1.5)
axes[1].set_xscale("log")
axes[1].set_yscale("log")
axes[1].set_xlabel("|delta| / |x|")
axes[1].set_title("tangent", fontsize=10)
handles, names = axes[1].get_legend_handles_labels()
axes[1].legend(handles[::-1], names[::-1], fontsize=7, markerscale=4,
               loc="lower right")
plt.tight_layout()
plt.show()

# %% [markdown]
# Removing one head changes the stream by a median {glue:text}`head_size:.3f` of its
# length. For such a change:
#
# - The **frozen scale** is off by a median {glue:text}`head_frozen:.1%` (90th
#   percentile {glue:text}`head_frozen_p90:.0%`), and the left panel shows why: the error
#   tracks $|\cos(x, \delta)|$ closely (correlation {glue:text}`corr_cos:.2f`). That
#   is no discovery but first-order algebra: the frozen scale counts the part of the
#   change that runs along $x$ as a change of the output, but the division by the norm
#   cancels that part, so for a small $\delta$ and a uniform gain its
#   relative error is $|\cos| / \sqrt{1 - \cos^2}$. The measured errors sit within a median
#   {glue:text}`first_order_dev:.0%` of that formula, which ignores the uneven gain and
#   the size of $\delta$. A frozen scale ignores that removing a component *along* $x$
#   changes the norm, and the norm then rescales everything else. The error is set by the
#   direction of $\delta$ more than by its size: even for changes under 3% of $|x|$ the
#   frozen scale is off by a median {glue:text}`small_frozen:.1%`.
# - The **tangent** accounts for that and is off by a median
#   {glue:text}`head_tangent:.1%` (90th percentile {glue:text}`head_tangent_p90:.1%`).
#   Being the first-order expansion, its absolute error is of second order in the size
#   of the change, so its relative error should grow about in proportion to that size,
#   and it does (right panel): for each of the four kinds of piece, the median of the
#   error divided by $|\delta|/|x|$ lies between {glue:text}`tan_per_size_min:.2f` and
#   {glue:text}`tan_per_size_max:.2f`, while the kinds' median sizes differ by a factor of
#   {glue:text}`kind_size_span:.0f`. In size bins, which also sort the pieces by kind: a
#   median {glue:text}`small_tangent:.1%` for changes under 3% of $|x|$ (of which
#   {glue:text}`small_head_share:.1%` are single heads), but
#   {glue:text}`large_tangent:.0%` for changes over 30% (of which
#   {glue:text}`large_upto_share:.0%` are sums of all attention layers up to $\ell$).
#   There the tangent does worse than the frozen scale, off by
#   {glue:text}`large_frozen:.0%`.
#
# These are measurements on one passage of one model, of SmolLM2's RMSNorm on a stream
# that is not centred. So "the norm is approximately linear" is a statement about small
# changes, and even then it depends on which
# linearisation you mean. For attribution-sized changes (one head) the tangent is off by a
# median {glue:text}`head_tangent:.1%` (90th percentile {glue:text}`head_tangent_p90:.1%`),
# the frozen scale by a median {glue:text}`head_frozen:.1%` (90th percentile
# {glue:text}`head_frozen_p90:.0%`); removing a whole layer, or several, is not a small
# change for the norm.
#
# The widget lets you push one token's input (token 100, the input of layer 21's norm)
# along one direction and compare the true change of the output with the two
# predictions. `amount = -1` removes the piece; choose "rescale x itself" to see the
# scale invariance: for any amount above $-1$ the true output does not move (up to
# $\epsilon$), the tangent correctly predicts no change, and the frozen scale drifts
# linearly. The invariance is to positive factors only: at $-1$ the input is $0$ and so is
# the output, and below $-1$ the output flips sign, since
# $f(c\,x) = \operatorname{sign}(c)\, f(x)$.

# %%
pos, lw = 100, 20
xv = resid[lw + 1, pos]
wv = smol.blocks[lw + 1].ln1.w.detach()
head_out = torch.einsum("he,hem->hm", sc["z", lw][0, pos], W_O[lw])
top_head = int(head_out.norm(dim=-1).argmax())
directions = {
    f"head L{lw}H{top_head}": head_out[top_head],
    f"attention layer {lw}": sc["attn_out", lw][0, pos],
    f"MLP layer {lw}": sc["mlp_out", lw][0, pos],
    "rescale x itself": xv,
}
f0 = xv / rms(xv) * wv
amounts = torch.linspace(-3, 3, 121)


def responses(delta, a):
    true = (xv + a * delta) / rms(xv + a * delta) * wv - f0
    frozen = a * delta / rms(xv) * wv
    along = xv * (xv @ delta) / (xv @ xv)
    tangent = a * (delta - along) / rms(xv) * wv
    return true, frozen, tangent


curves = {}                     # name -> [amount, (frozen, tangent)] errors
for name, delta in directions.items():
    errs = []
    for a in amounts:
        true, frozen, tangent = responses(delta, a)
        errs.append([(frozen - true).norm(), (tangent - true).norm()])
    curves[name] = torch.tensor(errs) / f0.norm()


def draw_linearity(direction=f"head L{lw}H{top_head}", amount=-1.0):
    delta = directions[direction]
    true, frozen, tangent = responses(delta, torch.tensor(amount))
    fig, (a0, a1) = plt.subplots(1, 2, figsize=(9, 3.4))
    a0.scatter(true, frozen, s=4, alpha=0.6, label="frozen scale")
    a0.scatter(true, tangent, s=4, alpha=0.6, label="tangent")
    lim = max(true.abs().max(), frozen.abs().max(),
              tangent.abs().max(), 1e-3)
    a0.plot([-lim, lim], [-lim, lim], "k:", lw=1)
    a0.set_xlabel("true change of each output coordinate")
    a0.set_ylabel("predicted change")
    a0.legend(fontsize=8, markerscale=3)
    a1.plot(amounts, curves[direction][:, 0], label="frozen scale")
    a1.plot(amounts, curves[direction][:, 1], label="tangent")
    a1.axvline(amount, color="gray", ls=":")
    a1.set_xlabel("amount (x + amount * delta)")
    a1.set_ylabel("|error| / |f(x)|")
    norm_ratio = ((xv + amount * delta).norm() / xv.norm()).item()
    a1.set_title(f"|x'| / |x| = {norm_ratio:.2f}", fontsize=10)
    a1.legend(fontsize=8)
    fig.suptitle(f"{direction}, amount {amount:.1f}", fontsize=10)
    plt.tight_layout()
    plt.show()


explore(draw_linearity, direction=list(directions),
        amount=(-3.0, 3.0, 0.1))

# %% [markdown]
# ### Why the framework can leave LayerNorm out
#
# The framework's paper {cite}`elhage2021mathematical` sets layer normalisation aside when
# it simplifies its models: "up to a variable scaling, layer norm can be merged into
# adjacent weights" (we just did the merging). Attribution in practice then treats that
# variable scale as a constant, frozen at its value on the input (TransformerLens's
# `apply_ln_to_stack`, for instance, applies the cached scale to every component).
# The measurements above say when that is reasonable. For the question "what does this
# head write into the normalised vector, here, on this input?", the scale *is* a constant:
# with it frozen, the normalised vector is exactly the sum of one term per component. For
# the question "what changes if this head is removed?", the constant scale is not
# accurate: it counts the part of the change that runs along $x$, which the division by
# the norm cancels, and is off by a median
# {glue:text}`head_frozen:.1%` for one head, and by {glue:text}`small_frozen:.1%` even for
# changes under 3% of $|x|$, because its error is set by the direction of the change more
# than by its size. A linearisation that keeps the norm's dependence on the direction
# along $x$ (the tangent) is accurate to a few percent for such small changes (for one
# head a median {glue:text}`head_tangent:.1%`, 90th percentile
# {glue:text}`head_tangent_p90:.1%`). For larger changes both err more. Removing a whole
# attention layer, the tangent is off by a median {glue:text}`attnlayer_tangent:.0%` and
# the frozen scale by {glue:text}`attnlayer_frozen:.0%`; removing an MLP layer, by
# {glue:text}`mlplayer_tangent:.0%` and {glue:text}`mlplayer_frozen:.0%`; removing all
# attention layers up to $\ell$, by {glue:text}`upto_tangent:.0%` and
# {glue:text}`upto_frozen:.0%`. For changes of that size the division by the norm is
# a real nonlinearity and is better run than approximated. Token 0, whose norm is far
# from the rest, was left out above and not measured. The norm's being approximately linear for
# inputs of roughly constant norm therefore needs its condition checked: in SmolLM2 the norm grows
# {glue:text}`growth:.0f`-fold from layer 1 to layer 29, and within a layer most tokens
# lie within a factor of about {glue:text}`band_median:.2f` of each other (the 5-95% band
# in the median layer), while in some
# layers a few are far from the rest (and token 0 is in a class of its own). Whether the
# approximation is negligible depends on the size and the direction of the change. The attention-only toy
# models of chapters 13-18 have no LayerNorm, which removes the question for them; the
# SmolLM2 sections of chapters 13, 17 and 18 keep it. Chapter 13's direct attributions on
# SmolLM2 hold the final norm's scale frozen, which makes them exact as a decomposition;
# read as what removing a part would do, they carry an error of the kind measured above
# (measured here for the first norm of layers 1-29 on one passage, not for the final
# norm). The toy translation model of chapter 12 has LayerNorm too (pre-norm).

# %% [markdown]
# ## Summary
#
# - LayerNorm centres, divides by the standard deviation, then applies a gain $\gamma$ and
#   bias $\beta$. The Annotated Transformer's version uses the unbiased standard deviation
#   and adds $\epsilon$ to it, so it differs from `nn.LayerNorm` by the factor
#   $\sqrt{(d-1)/d}$ (relative gap {glue:text}`gap_512:.1e` at $d = 512$) and in how it
#   treats nearly constant vectors.
# - RMSNorm skips the centring and the bias; LayerNorm is RMSNorm of the centred vector,
#   plus $\beta$.
# - $\gamma$ and $\beta$ fold into the next weight matrix and its bias;
#   centring folds into the weights that write to the stream. We matched
#   TransformerLens's `fold_ln` with your `fold_ln` and checked that the model's
#   predictions do not change. What remains is $x \mapsto x/\operatorname{rms}(x)$,
#   which no weights can absorb.
# - In SmolLM2 the median token's norm grows {glue:text}`growth:.0f`-fold from layer 1 to
#   layer 29 (one passage), and the first token's vector reaches
#   {glue:text}`first_ratio:.0f` times the median size. For one head's contribution (one
#   passage, one model) a frozen scale is off by {glue:text}`head_frozen:.1%` (median; the
#   error tracks $|\cos(x, \delta)|$) and the tangent by {glue:text}`head_tangent:.1%`;
#   for changes above 30% of the stream the tangent is off by
#   {glue:text}`large_tangent:.0%` and the frozen scale by {glue:text}`large_frozen:.0%`
#   (medians).
