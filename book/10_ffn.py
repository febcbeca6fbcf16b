# %% [markdown]
# # 10. Position-wise feed-forward networks
#
# Between its attention sublayers, every layer of the Transformer runs each position
# through the same small two-layer network. This chapter builds that network as the
# Annotated Transformer does, checks that it really treats positions one at a time,
# counts its parameters (most of a layer's), and measures the thing that makes it hard for
# the circuits framework: its ReLU breaks the additivity that attention (with its pattern
# held fixed) enjoys, and it gives the hidden neurons a privileged basis. At the end we
# look at a trained FFN, SmolLM2's: whether its neurons really are a privileged basis,
# what makes a few of them fire, and how far Geva et al.'s reading of neurons as
# key-value memories goes.

# %%
import math
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from circuitbook import checks
from circuitbook.book import claim, glue, identity, identity_close
from circuitbook.models.encoder_decoder import (
    MultiHeadedAttention,
    PositionwiseFeedForward,
    make_model,
    tl_weights,
)
from circuitbook.widgets import explore

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)
_ = torch.set_grad_enabled(False)  # we only read the models here

# %% [markdown]
# ## Plain language
#
# Attention moves information *between* positions. The feed-forward network (FFN) then
# works on each position *alone*: it takes that position's $d_\text{model}$-vector,
# expands it to $d_\text{ff}$ hidden units (2048 in the paper's base model, four times
# $d_\text{model} = 512$), sets every negative hidden unit to zero, and maps the result back
# to $d_\text{model}$. Vaswani et al. {cite}`vaswani2017attention` write it as
#
# $$\operatorname{FFN}(x) = \max(0,\; xW_1 + b_1)\, W_2 + b_2 .$$
#
# The same weights are used at every position of a layer (each layer has its own), and no
# position sees any other inside the FFN. In the language of chapter
# {doc}`03_residual_stream`, an FFN reads the stream through $W_1$, computes a ReLU, and
# writes back through $W_2$.
#
# Three facts about it matter for interpretability. It holds most of a layer's parameters.
# It is *nonlinear*: the $\max(0, \cdot)$ means that the output for a sum of inputs is not
# the sum of the outputs (attention is nonlinear too, but only through its pattern, as we
# will see). And because the ReLU acts on each hidden unit separately, the hidden units
# (the *neurons*) are meaningful one at a time, unlike the coordinates of the residual
# stream.

# %% [markdown]
# ## The Annotated Transformer view
#
# The Annotated Transformer {cite}`rush2018annotated` implements the formula as a module
# with two `nn.Linear` layers, `w_1` ($d_\text{model} \to d_\text{ff}$) and `w_2`
# ($d_\text{ff} \to d_\text{model}$), with dropout on the hidden layer during training. We
# use the book's copy in `circuitbook.models.encoder_decoder`. One detail trips everyone
# once: `nn.Linear` stores its weight as `[out, in]` and computes $x A^\top + b$, so the
# paper's $W_1$ is `w_1.weight.T`.

# %%
d_model, d_ff = 512, 2048
ffn_module = PositionwiseFeedForward(d_model, d_ff, dropout=0.1).eval()
W1, b1 = ffn_module.w_1.weight.T.detach(), ffn_module.w_1.bias.detach()
W2, b2 = ffn_module.w_2.weight.T.detach(), ffn_module.w_2.bias.detach()
print("w_1.weight:", tuple(ffn_module.w_1.weight.shape),
      "  W_1:", tuple(W1.shape))

x = torch.randn(2, 10, d_model)          # [batch, pos, d_model]
with torch.no_grad():
    out = ffn_module(x)
formula = torch.clamp(x @ W1 + b1, min=0) @ W2 + b2


def ffn_size(x):
    """The size of the numbers an FFN output accumulates: its partial sums, which for these
    sums of many terms of both signs stay at the size of the output. (The absolute values'
    sums, |x| |W1| |W2|, would be a worst case ~sqrt(d_model d_ff) = 1000 times larger and
    make the bound vacuous.)"""
    with torch.no_grad():
        return float(ffn_module(x).abs().max())


# each side: the first layer and bias (d_model + 1), the ReLU (exact), the second layer and
# bias (d_ff + 1)
FFN_TERMS = d_model + d_ff + 2
identity_close("the module computes max(0, x W1 + b1) W2 + b2 with W1 = w_1.weight.T", out, formula,
               terms=2 * FFN_TERMS, scale=ffn_size(x), chapter="10")

# %% [markdown]
# In training mode, dropout zeroes a random tenth of the hidden units (and rescales the
# rest), so the module is only a deterministic function after `.eval()`; everything in this
# chapter runs in eval mode.
#
# **Position-wise.** Applying the module to a whole sequence must give the same result as
# applying it to each position on its own. The paper also describes the FFN as "two
# convolutions with kernel size 1": a convolution whose window is one position wide is
# exactly a per-position linear map. We check both.

# %%
with torch.no_grad():
    one_by_one = torch.cat(
        [ffn_module(x[:, i:i + 1]) for i in range(x.shape[1])], dim=1)
    # conv1d wants [batch, channels, length]; a size-1 kernel sees one position
    hidden = F.conv1d(x.transpose(1, 2), ffn_module.w_1.weight[:, :, None],
                      ffn_module.w_1.bias).relu()
    conv = F.conv1d(hidden, ffn_module.w_2.weight[:, :, None],
                    ffn_module.w_2.bias).transpose(1, 2)
# the same FFN computation on each side, perhaps summed in another order (FFN_TERMS each)
identity_close("FFN(sequence) equals FFN applied to each position separately", one_by_one, out,
               terms=2 * FFN_TERMS, scale=ffn_size(x), chapter="10")
identity_close("FFN equals two convolutions with kernel size 1", conv, out, terms=2 * FFN_TERMS,
               scale=ffn_size(x), chapter="10")

# %% [markdown]
# ### Exercise 10.1: the feed-forward network
#
# Write `ffn(x, W1, b1, W2, b2)` where the weights are given **the way `nn.Linear` stores
# them**: `W1` is `w_1.weight` of shape `[d_ff, d_model]` and `W2` is `w_2.weight` of shape
# `[d_model, d_ff]`. `x` has shape `[..., d_model]`. The check uses $d_\text{ff} \ne
# d_\text{model}$, so a transposed weight shows up.

# %% tags=["exercise"]
def ffn(x, W1, b1, W2, b2):
    """Position-wise FFN with nn.Linear-stored weights:
    W1 [d_ff, d_model], b1 [d_ff], W2 [d_model, d_ff], b2 [d_model]."""
    # BEGIN SOLUTION
    hidden = (x @ W1.T + b1).relu()     # [..., d_ff]: the neurons
    return hidden @ W2.T + b2           # [..., d_model]: written to the stream
    # END SOLUTION


checks.ch10_ex1(ffn)

# %% [markdown]
# How many parameters does it have, and what share of a layer is that? Chapter
# {doc}`02_architecture` counted it: two thirds of the weights of an encoder layer of the
# base model (or of a GPT-2 layer). Here we add what that chapter did not count: the
# FFN's share of a *decoder* layer, which has a second, cross-attention sublayer, and of the
# whole base model built by `make_model` with the paper's sizes.

# %%
def n_params(module):
    return sum(p.numel() for p in module.parameters())


ffn_count = n_params(ffn_module)

base = make_model(11, 11)        # N=6, d_model=512, d_ff=2048, h=8; tiny vocab
enc_layer, dec_layer = base.encoder.layers[0], base.decoder.layers[0]
enc_share = n_params(enc_layer.feed_forward) / n_params(enc_layer)
dec_share = n_params(dec_layer.feed_forward) / n_params(dec_layer)
body = [p for n, p in base.named_parameters()
        if not n.startswith(("src_embed", "tgt_embed", "generator"))]
ffn_all = sum(p.numel() for n, p in base.named_parameters()
              if ".feed_forward." in n)
model_share = ffn_all / sum(p.numel() for p in body)
print(f"FFN share of an encoder layer: {enc_share:.3f} (chapter 2)")
print(f"FFN share of a decoder layer:  {dec_share:.3f}")
print(f"FFN share of the whole base model (without embeddings): "
      f"{model_share:.3f}")
# counting: 8 d^2 + 5 d of 16 d^2 + 11 d (weights, biases, three LayerNorms), by construction
identity("in a decoder layer (two attention sublayers) it holds about half",
         f"{dec_share:.4f}", abs(dec_share - 1 / 2) < 0.01, chapter="10")
glue("dec_share", 100 * dec_share)
glue("model_share", 100 * model_share)
glue("ffn_count", f"{ffn_count:,}")

# %% [markdown]
# One FFN of the base model has {glue:text}`ffn_count` parameters. In the Annotated
# Transformer's *decoder* layers, which add a cross-attention sublayer ($4 d_\text{model}^2$
# more weights) to the FFN's $8 d_\text{model}^2$, it holds {glue:text}`dec_share:.1f`%, and
# over the whole encoder-decoder {glue:text}`model_share:.1f`% of the non-embedding
# parameters. "Two thirds" is a statement about the standard decoder-only (or encoder)
# layer. These are counts, true by construction, not findings.

# %% [markdown]
# ## The circuit view
#
# TransformerLens names the FFN's weights `W_in` ($d_\text{model} \times d_\text{mlp}$),
# `b_in`, `W_out` ($d_\text{mlp} \times d_\text{model}$) and `b_out`; in the row-vector
# convention $W_\text{in} = W_1$ and $W_\text{out} = W_2$, so the paper's formula carries
# over unchanged. We load our module's weights into TransformerLens's own MLP component and
# check that it agrees.

# %%
from transformer_lens import HookedTransformerConfig
from transformer_lens.components import MLP

tl_cfg = HookedTransformerConfig(n_layers=1, d_model=d_model, d_mlp=d_ff,
                                 n_heads=8, d_head=64, d_vocab=11, n_ctx=16,
                                 act_fn="relu", normalization_type=None)
tl_mlp = MLP(tl_cfg)
tl_mlp.load_state_dict({"W_in": W1, "b_in": b1, "W_out": W2, "b_out": b2})
with torch.no_grad():
    tl_out = tl_mlp(x)
identity_close("TransformerLens's MLP with W_in = W1, W_out = W2 gives the same output", tl_out, out,
               terms=2 * FFN_TERMS, scale=ffn_size(x), chapter="10")

# %% [markdown]
# ### Exercise 10.2: what each neuron writes
#
# The $d_\text{ff}$ hidden units of the FFN are its *neurons*. Write
# `neuron_writes(x, W_in, b_in, W_out)` that returns, for a stream `x` of shape
# `[pos, d_model]` and the weights in TransformerLens's shapes, what every neuron adds to
# the stream at every position: a tensor `[pos, d_mlp, d_model]` whose sum over neurons,
# plus `b_out`, is the FFN's output. Do not sum the neurons: keep each one's write.

# %% tags=["exercise"]
def neuron_writes(x, W_in, b_in, W_out):
    """x: [pos, d_model]; W_in: [d_model, d_mlp]; b_in: [d_mlp]; W_out: [d_mlp, d_model]
    -> [pos, d_mlp, d_model], the write of each neuron at each position."""
    # BEGIN SOLUTION
    acts = (x @ W_in + b_in).relu()     # [pos, d_mlp]: one number per neuron
    return acts[..., None] * W_out      # each scales its own output direction
    # END SOLUTION


checks.ch10_ex2(neuron_writes)

# %% [markdown]
# ### Neurons read one direction and write one direction
#
# Write $W_\text{in}[:, n]$ for column $n$ of $W_\text{in}$ and $W_\text{out}[n]$ for row
# $n$ of $W_\text{out}$. Multiplying out the matrices gives the FFN as a sum over its
# $d_\text{ff}$ neurons, the writes of exercise 10.2:
#
# $$\operatorname{FFN}(x) = \sum_{n=1}^{d_\text{ff}}
# \max\big(0,\; x \cdot W_\text{in}[:, n] + b_\text{in}[n]\big)\, W_\text{out}[n]
# + b_\text{out}.$$
#
# Neuron $n$ reads a single number from the stream, the projection of $x$ on the direction
# $W_\text{in}[:, n]$; applies the ReLU to it; and writes that amount of the single
# direction $W_\text{out}[n]$. It is a tiny read-compute-write unit, and an FFN is
# $d_\text{ff}$ of them side by side.

# %%
pos_x = x[0, 0]                                  # one position: [d_model]
acts = (pos_x @ W1 + b1).relu()                  # [d_ff]: one per neuron
by_neuron = neuron_writes(pos_x[None], W1, b1, W2)[0].sum(0) + b2
# the same terms, summed over the neurons in another order (FFN_TERMS each side)
identity_close("FFN(x) is the sum over neurons of relu(x . W_in[:, n] + b_in[n]) W_out[n], plus b_out",
               by_neuron, out[0, 0], terms=2 * FFN_TERMS, scale=ffn_size(x[0, 0]), chapter="10")
glue("active", 100 * (acts > 0).float().mean().item())

# %% [markdown]
# For this random input {glue:text}`active:.0f`% of the neurons are active (positive);
# the rest contribute nothing.
#
# ### Neurons are a privileged basis
#
# In chapter {doc}`03_residual_stream` we rotated the residual stream by any orthogonal
# matrix without changing the model. Try the same with the FFN's hidden layer: replace
# $W_\text{in} \to W_\text{in} M$, $b_\text{in} \to b_\text{in} M$ and $W_\text{out} \to
# M^{-1} W_\text{out}$. For a linear hidden layer any invertible $M$ would cancel. With the
# ReLU in between, only matrices that commute with it cancel: permutations (relabelling the
# neurons) and positive diagonal scalings ($\max(0, cz) = c \max(0, z)$ for $c > 0$). A
# rotation does not.

# %%
def ffn_tl(x, W_in, b_in, W_out, b_out):
    return (x @ W_in + b_in).relu() @ W_out + b_out


def change_hidden_basis(M, M_inv):
    return ffn_tl(x, W1 @ M, b1 @ M, M_inv @ W2, b2)


g = torch.Generator().manual_seed(10)
perm = torch.eye(d_ff)[torch.randperm(d_ff, generator=g)]
scales = torch.rand(d_ff, generator=g) * 3 + 0.1
rotation, _ = torch.linalg.qr(torch.randn(d_ff, d_ff, generator=g))

# the inverse of a permutation or a rotation is its transpose
for name, M, M_inv in [("a permutation", perm, perm.T),
                       ("a positive scaling", torch.diag(scales),
                        torch.diag(1 / scales))]:
    new = change_hidden_basis(M, M_inv)
    # A permutation moves entries exactly (one nonzero per sum); a scaling rounds W1 s, b1 s,
    # 1/s and W2 / s once each (4), relative errors that the ReLU and the products carry
    # through unchanged. Then the FFN's own rounding on each side; same size as before.
    identity_close(f"changing the neuron basis by {name} leaves the FFN unchanged", new, out,
                   terms=2 * FFN_TERMS + 4, scale=ffn_size(x), chapter="10")
rot_gap = (change_hidden_basis(rotation, rotation.T) - out).abs().max()
# 30% of the output's largest entry is ~500 times the rounding bound of the checks above
claim("changing it by a rotation changes the output", rot_gap,
      rot_gap > 0.3 * out.abs().max(), chapter="10")
glue("rot_gap", rot_gap.item())
glue("out_max", out.abs().max().item())

# %% [markdown]
# A random rotation of the hidden layer moves the output by up to
# {glue:text}`rot_gap:.2f` (the output's largest entry is {glue:text}`out_max:.2f`). The
# FFN's symmetries are relabellings and rescalings of individual neurons, nothing that mixes
# them. So "neuron 1234" names a real unit of the computation, and looking at what makes a
# single neuron fire is a sensible thing to do, whereas looking at a single coordinate of the
# residual stream is not. (What neurons turn out to represent is another matter: many
# respond to several unrelated things, which Elhage et al. {cite}`elhage2022superposition`
# study under the name superposition.)
#
# ### The ReLU breaks additivity
#
# The circuits framework expands a model into a sum of paths, and that needs each piece to
# be linear in what it reads. Test the FFN with two inputs $a$ and $b$. The naive test,
# $\operatorname{FFN}(a + b) = \operatorname{FFN}(a) + \operatorname{FFN}(b)$, would fail even
# for a purely linear layer because of the biases ($b_2$ is counted twice on the right).
# The fair test is the second difference
#
# $$\Delta = f(a + b) - f(a) - f(b) + f(0),$$
#
# which is exactly zero for every affine map $f(x) = xW + c$. We measure
# $\lVert\Delta\rVert / \lVert f(a+b) - f(0) \rVert$ for the FFN; for the same FFN with the
# ReLU removed; for the FFN with its on/off *gates* frozen (which neurons are active is
# taken from a third input $c$ and held fixed); and for a multi-head attention sublayer,
# once with its pattern recomputed from each input and once with the pattern frozen at
# $c$, which is what the framework does.

# %%
n_pos = 8
a, b, c = torch.randn(3, 1, n_pos, d_model, generator=g).unbind(0)
mha = MultiHeadedAttention(8, d_model, dropout=0.0).eval()
w = tl_weights(mha)
with torch.no_grad():
    mha(c, c, c)
    frozen_pattern = mha.attn                     # [batch, head, q, k]


def attn_frozen(x):
    """The attention sublayer with its pattern held at frozen_pattern."""
    v = torch.einsum("bkd,hde->bhke", x, w["W_V"]) + w["b_V"][None, :, None]
    z = frozen_pattern @ v                        # [batch, head, q, d_head]
    return torch.einsum("bhqe,hem->bqm", z, w["W_O"]) + w["b_O"]


def attn_live(x):
    return mha(x, x, x)


def ffn_no_relu(x):
    return (x @ W1 + b1) @ W2 + b2


frozen_gates = (c @ W1 + b1 > 0).float()          # which neurons are on at c


def ffn_gates_frozen(x):
    """The FFN with each neuron's on/off state held at its state for c."""
    return ((x @ W1 + b1) * frozen_gates) @ W2 + b2


d_head = w["W_V"].shape[-1]


def attn_size(x):
    """The size of the numbers a frozen-pattern attention output accumulates (its own size,
    as for ffn_size)."""
    with torch.no_grad():
        return float(attn_frozen(x).abs().max())


# the frozen attention's rounding: values (d_model + 1), the mix (n_pos), W_O over all heads
# (d_model) and b_O (1)
ATTN_TERMS = 2 * d_model + n_pos + 2
with torch.no_grad():  # at c itself, the frozen versions are the real layers
    # the live layer also computes the pattern, but it is the same pattern (frozen at c)
    identity_close("at c, attention with its pattern frozen at c is the real layer", attn_frozen(c), attn_live(c),
                   terms=2 * ATTN_TERMS, scale=attn_size(c), chapter="10")
    # z * 1 and z * 0 are exact, so the gates act exactly as the ReLU; the two sums may differ
    identity_close("at c, the FFN with its gates frozen at c is the real layer", ffn_gates_frozen(c),
                   ffn_module(c), terms=2 * FFN_TERMS, scale=ffn_size(c), chapter="10")


def second_delta(f):
    """f(a + b) - f(a) - f(b) + f(0): exactly zero for an affine f."""
    with torch.no_grad():
        zero = torch.zeros_like(a)
        return f(a + b) - f(a) - f(b) + f(zero)


def second_difference(f):
    with torch.no_grad():
        zero = torch.zeros_like(a)
        delta = f(a + b) - f(a) - f(b) + f(zero)
        return (delta.norm() / (f(a + b) - f(zero)).norm()).item()


gaps = {"FFN": second_difference(ffn_module),
        "FFN without ReLU": second_difference(ffn_no_relu),
        "FFN, gates frozen": second_difference(ffn_gates_frozen),
        "attention, pattern recomputed": second_difference(attn_live),
        "attention, pattern frozen": second_difference(attn_frozen)}
for name, v in gaps.items():
    print(f"{name:31s} |Delta| / |f(a+b) - f(0)| = {v:.2e}")
# a tenth of the output's change; the affine versions' rounding bound below is ~1e-3 of their size
claim("the FFN is far from additive: relative second difference > 0.1",
      gaps["FFN"], gaps["FFN"] > 0.1, chapter="10")
# For the affine versions the second difference itself is zero up to rounding: four
# evaluations (FFN_TERMS or ATTN_TERMS each, plus 1 for a + b) and three subtractions, at
# the size of the largest of the four evaluations
with torch.no_grad():
    sizes_ffn = max(max(ffn_size(t), float(ffn_no_relu(t).abs().max()), float(ffn_gates_frozen(t).abs().max()))
                    for t in (a + b, a, b))
sizes_attn = max(attn_size(t) for t in (a + b, a, b))
for name, f, terms, size in [("without the ReLU the same layers are additive (affine)", ffn_no_relu,
                              4 * (FFN_TERMS + 1) + 3, sizes_ffn),
                             ("with its gates frozen the FFN is additive (affine)", ffn_gates_frozen,
                              4 * (FFN_TERMS + 1) + 3, sizes_ffn),
                             ("attention with a frozen pattern is additive (affine)", attn_frozen,
                              4 * (ATTN_TERMS + 1) + 3, sizes_attn)]:
    delta = second_delta(f)
    identity_close(name, delta, torch.zeros_like(delta), terms=terms, scale=size, chapter="10")
with torch.no_grad():
    flips = ((a @ W1 + b1 > 0) != (b @ W1 + b1 > 0)).float().mean().item()
glue("gap_ffn", gaps["FFN"])
glue("gap_live", gaps["attention, pattern recomputed"])
glue("flips", 100 * flips)

# %% [markdown]
# The FFN's second difference is {glue:text}`gap_ffn:.2f` of the size of its output: a
# large fraction, not a rounding error. The reason is visible neuron by neuron: a neuron is
# linear only while its input keeps the same sign, and {glue:text}`flips:.0f`% of the
# neurons are on for one of $a$, $b$ and off for the other.
#
# Attention is just as nonlinear when its pattern is recomputed (here
# {glue:text}`gap_live:.2f`), and freezing something makes either layer affine: that
# is true by construction, and the three checks above only show that the code and the
# algebra agree. The measured part is how far from affine the live layers are. The
# difference is in what has to be frozen. For a head it is the pattern: one
# position-by-position table, computed by the QK circuit from the weights, that we can
# print and read, and that often stays recognisable across inputs (a head that attends to
# the previous token does so everywhere). For the FFN it is the on/off state of
# $d_\text{ff}$ neurons at every position, and {glue:text}`flips:.0f`% of them changed
# between two random inputs here: a frozen-gate FFN describes the layer only near the input it was frozen at.
#
# The explorer mixes the two inputs, $t\,a + (1-t)\,b$. Any affine map sends the mixture to
# the same mixture of the outputs, $t f(a) + (1-t) f(b)$. Left: the first 40 output
# coordinates at one position, for the FFN of the mixture (bars) and the mixture of the FFN
# outputs (black). Right: the relative gap as $t$ goes from 0 to 1, for each of the five
# maps. It vanishes at the ends, where the mixture is $a$ or $b$ itself; in between it is
# large for the FFN and for attention with a live pattern, and zero at every $t$ for the
# three affine versions (their lines lie on top of each other).

# %%
ts = torch.linspace(0, 1, 41)
maps = {"FFN": ffn_module, "attention, pattern recomputed": attn_live,
        "FFN without ReLU": ffn_no_relu, "FFN, gates frozen": ffn_gates_frozen,
        "attention, pattern frozen": attn_frozen}
styles = ["-", "-", "--", "-.", ":"]


def mixing_gap(f, t):
    with torch.no_grad():
        mixed = f(t * a + (1 - t) * b)
        gap = mixed - (t * f(a) + (1 - t) * f(b))
        return mixed, gap, (gap.norm() / mixed.norm()).item()


curves = {name: [mixing_gap(f, t.item())[2] for t in ts]
          for name, f in maps.items()}


def draw_mixing(t=0.5):
    mixed, gap, _ = mixing_gap(ffn_module, t)
    mix_of_outputs = mixed - gap
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.9))
    k = torch.arange(40)
    ax[0].bar(k, mixed[0, 0, :40], color="tab:orange", alpha=0.6,
              label="FFN(t a + (1-t) b)")
    ax[0].plot(k, mix_of_outputs[0, 0, :40], "k.-", lw=0.8, ms=3,
               label="t FFN(a) + (1-t) FFN(b)")
    ax[0].set_xlabel("output coordinate")
    ax[0].set_title(f"FFN at one position, t = {t:.2f}", fontsize=10)
    ax[0].legend(fontsize=7, loc="upper center", ncol=2,
                 bbox_to_anchor=(0.5, -0.2))
    for (name, curve), style in zip(curves.items(), styles):
        ax[1].plot(ts, curve, style, label=name, lw=1.5)
    ax[1].axvline(t, color="gray", lw=0.8, ls="--")
    ax[1].set_xlabel("t")
    ax[1].set_ylabel("|gap| / |f(mixture)|")
    ax[1].set_title("distance from affine", fontsize=10)
    ax[1].legend(fontsize=7, loc="upper center", ncol=2,
                 bbox_to_anchor=(0.5, -0.2))
    fig.tight_layout()
    plt.show()


explore(draw_mixing, t=(0.0, 1.0, 0.05))

# %% [markdown]
# ### A trained MLP: the neurons of SmolLM2
#
# Everything so far used random weights, which show what an FFN *can* do, not what a
# trained one does. SmolLM2-135M {cite}`allal2025smollm2` (chapter {doc}`11_layernorm`
# describes the copy the book reads, a 4-bit quantised file, and chapter
# {doc}`17_induction_heads` its heads) has in each of its 30 layers a *gated* FFN,
# SwiGLU {cite}`shazeer2020glu`, instead of the paper's ReLU network. With $x$ the
# normalised stream (TransformerLens names and shapes, row vectors):
#
# $$a = \operatorname{silu}(x W_\text{gate}) \odot (x W_\text{in}) + b_\text{in},
# \qquad \operatorname{FFN}(x) = a\, W_\text{out} + b_\text{out},$$
#
# with $\operatorname{silu}(z) = z / (1 + e^{-z})$, $W_\text{gate}, W_\text{in}$ of shape
# $576 \times 1536$ and $W_\text{out}$ of shape $1536 \times 576$ (the biases are zero in
# this model). TransformerLens hooks $x W_\text{gate}$ as `hook_pre`, $x W_\text{in}$ as
# `hook_pre_linear` and $a$ as `hook_post`. Neuron $n$ still reads the stream and writes
# $a_n W_\text{out}[n]$, but it reads two directions, a gate and a linear one, and $a_n$
# can be negative: the gate is small for negative inputs ($\operatorname{silu}$ never
# goes below $-0.28$), while $x W_\text{in}$ has either sign. The elementwise product is what makes the neuron basis privileged here,
# as the ReLU did above.
#
# We run the model on 8 scenes of the Shakespeare corpus that ships with the book
# (256 tokens each, tokenised with SmolLM2's own tokenizer) and look at layer 13, near
# the middle of the model. We only need the model up to that layer, so we stop there.
# Position 0 of each sequence, which has no context to read, is left out of every
# statistic.

# %%
import time

from circuitbook.data.corpus import shakespeare_scenes
from circuitbook.models.pretrained import load_smollm2
from circuitbook.neurons import (haar_rotation, kurtosis, mlp_activations,
                                 top_activations, top_k_mass, value_logits)

smol, smol_tok = load_smollm2()
N_SEQ, N_POS, LAYER = 8, 256, 13
scene_ids = [smol_tok(text, return_tensors="pt").input_ids[0]
             for _, text in shakespeare_scenes()[:12]]
# N_POS + 1 tokens: the last is only the next token of the last position
corpus_ids = torch.stack([ids[:N_POS + 1] for ids in scene_ids
                          if len(ids) > N_POS][:N_SEQ])          # [8, 257]
start = time.perf_counter()
smol_mlp = mlp_activations(smol, corpus_ids[:, :N_POS], range(LAYER + 1))
forward_s = time.perf_counter() - start
m13 = smol_mlp[LAYER]
block = smol.blocks[LAYER].mlp
silu_up = F.silu(m13["gate"]) * m13["up"]
# silu (an exp, a division, a product), the product with up: about 4
# roundings each side
identity_close("hook_post is silu(hook_pre) * hook_pre_linear + b_in",
               m13["post"], silu_up + block.b_in, terms=8,
               scale=float(silu_up.abs().max()),
               chapter="10")
by_neurons = m13["post"] @ block.W_out + block.b_out
# a sum over d_mlp neurons (+ b_out) on each side; scale: the products' sizes
write_size = float((m13["post"].abs() @ block.W_out.abs()).max())
identity_close("the MLP's output is the sum over its 1536 neurons of "
               "a_n W_out[n] (+ b_out)", by_neurons, m13["out"],
               terms=2 * (smol.cfg.d_mlp + 1),
               scale=write_size, chapter="10")
bias_max = max(float(b.abs().max()) for b in (block.b_in, block.b_out))
claim("SmolLM2's MLP biases b_in and b_out are zero", bias_max, bias_max == 0,
      chapter="10")
n_tokens = N_SEQ * (N_POS - 1)
glue("smol_tokens", n_tokens)
glue("smol_forward_s", forward_s, machine_dependent=True)
glue("smol_layer", LAYER)

# %% [markdown]
# The {glue:text}`smol_tokens` positions took {glue:text}`smol_forward_s:.0f` s to run
# through the first {glue:text}`smol_layer` + 1 layers on the machine that built this
# page (a shared 2-core CPU; a timing, not a result).
#
# **Is the neuron basis privileged in the trained model?** The elementwise product
# *allows* the neurons to be special; whether training made them so is a measurement.
# Take the activation vectors $a$ ([tokens, 1536]) and express them in a random basis
# instead: $a Q$ with $Q$ a random rotation, uniform over all rotations (Haar; the
# layer's output is unchanged if $W_\text{out}$ becomes $Q^\top W_\text{out}$). If
# nothing singled out the neuron coordinates, the two descriptions would look alike. Two
# statistics, each computed in both bases:
#
# - the **top-1% share**: for each token, the fraction of $\lVert a \rVert^2$ held by
#   its 15 largest coordinates (of 1536), averaged over tokens. A vector whose mass sits
#   on a few coordinates scores near 1; a Gaussian-looking one about 0.08;
# - the **kurtosis** of each coordinate over the tokens, $E[(a - \bar a)^4] /
#   \operatorname{Var}(a)^2$ (3 for a Gaussian, large when a coordinate is usually
#   quiet and sometimes very large), its median over the coordinates.
#
# A basis that is not privileged would give ratios near 1. The test, stated before
# looking: in every layer from 0 to {glue:text}`smol_layer`, both statistics are at
# least twice as large in the neuron basis.

# %%
Q = haar_rotation(smol.cfg.d_mlp, torch.Generator().manual_seed(10))
TOP_K = smol.cfg.d_mlp // 100                                      # 15
# per layer: share, share rotated, kurtosis, kurtosis rotated, the same two
# kurtoses of a / |a|, largest / median |a|
basis_stats = []
for layer in range(LAYER + 1):
    acts = smol_mlp[layer]["post"][:, 1:].reshape(-1, smol.cfg.d_mlp)
    rotated = acts @ Q
    norms = acts.norm(dim=1, keepdim=True)
    basis_stats.append([top_k_mass(acts, TOP_K).mean(),
                        top_k_mass(rotated, TOP_K).mean(),
                        kurtosis(acts, 0).median(),
                        kurtosis(rotated, 0).median(),
                        kurtosis(acts / norms, 0).median(),
                        kurtosis(rotated / norms, 0).median(),
                        norms.max() / norms.median()])
basis_stats = torch.tensor(basis_stats)                           # [14, 7]
share_ratio = basis_stats[:, 0] / basis_stats[:, 1]
kurt_ratio = basis_stats[:, 2] / basis_stats[:, 3]
unit_kurt_ratio = basis_stats[:, 4] / basis_stats[:, 5]
kurt_fails = (kurt_ratio < 2).nonzero()[:, 0].tolist()
claim(f"in every layer 0-{LAYER} the neurons' top-1% share is at least twice "
      "that of a random rotated basis", f"ratio >= {share_ratio.min():.1f}",
      bool(share_ratio.min() >= 2), chapter="10")
claim("the kurtosis test fails in some layers, and only in layers where one "
      "token's activation vector is over 10 times the median's norm",
      f"fails in layers {kurt_fails}; norm ratio there "
      f"{basis_stats[kurt_fails, 6].min():.0f}+, elsewhere <= "
      f"{basis_stats[kurt_ratio >= 2, 6].max():.1f}",
      bool(kurt_fails) and bool(basis_stats[kurt_fails, 6].min() > 10)
      and bool(basis_stats[kurt_ratio >= 2, 6].max() < 10), chapter="10")
claim(f"with each token's vector scaled to norm 1, the neurons' median "
      f"kurtosis is at least twice the rotated basis's in every layer "
      f"0-{LAYER}", f"ratio >= {unit_kurt_ratio.min():.1f}",
      bool(unit_kurt_ratio.min() >= 2), chapter="10")
glue("kurt_fail_layers", ", ".join(str(l) for l in kurt_fails))
glue("kurt_fail_ratio", kurt_ratio[kurt_fails].min().item())
glue("kurt_fail_norm", basis_stats[kurt_fails, 6].min().item())
glue("unit_kurt_ratio_min", unit_kurt_ratio.min().item())
glue("unit_kurt_rot_max", basis_stats[:, 5].max().item())
acts13 = m13["post"][:, 1:].reshape(-1, smol.cfg.d_mlp)
negative_share = float(acts13.clamp(max=0).pow(2).sum() / acts13.pow(2).sum())
glue("share13", basis_stats[LAYER, 0].item())
glue("share13_rot", basis_stats[LAYER, 1].item())
glue("kurt13", basis_stats[LAYER, 2].item())
glue("kurt13_rot", basis_stats[LAYER, 3].item())
glue("share_ratio_min", share_ratio.min().item())
glue("neg_frac", 100 * float((acts13 < 0).float().mean()))
glue("neg_share", 100 * negative_share)

fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
for values, label in [(acts13, "neuron basis"), (acts13 @ Q, "rotated basis")]:
    z = (values / values.std(0)).flatten()   # each coordinate in its own units
    ax[0].hist(z.clamp(-20, 20), bins=160, histtype="step", label=label,
               lw=1.2)
ax[0].set_yscale("log")
ax[0].set_xlabel("activation / its coordinate's std (clipped at 20)")
ax[0].set_ylabel("count")
ax[0].set_title(f"layer {LAYER}: activations, all coordinates", fontsize=10)
ax[0].legend(fontsize=8)
layers_axis = torch.arange(LAYER + 1)
ax[1].plot(layers_axis, basis_stats[:, 0], "o-", label="neuron basis")
ax[1].plot(layers_axis, basis_stats[:, 1], "s--", label="rotated basis")
ax[1].set_ylim(0, 1)
ax[1].set_xlabel("layer")
ax[1].set_ylabel("share of |a|^2 in top 1%")
ax[1].set_title("top-1% share, per layer", fontsize=10)
ax[1].legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# The first statistic passes its test. In layer {glue:text}`smol_layer` the top 1% of
# neurons hold {glue:text}`share13:.2f` of a token's squared activation, against
# {glue:text}`share13_rot:.2f` for the top 1% of rotated coordinates (about what a
# Gaussian vector gives), and the smallest ratio over layers 0 to
# {glue:text}`smol_layer` is {glue:text}`share_ratio_min:.1f`. On the left, the neuron
# coordinates have tails that reach many standard deviations, where the rotated ones
# fall off like a Gaussian.
#
# The second test, as stated, **fails**: in layer {glue:text}`kurt_fail_layers` the
# neurons' median kurtosis is only {glue:text}`kurt_fail_ratio:.1f` times the rotated
# coordinates'. The reason is in the data, not the basis. In that layer a few tokens
# have activation vectors far longer than the rest (the longest is
# {glue:text}`kurt_fail_norm:.0f` times the median length), and a coordinate measured
# over tokens inherits that spread of lengths in *any* basis, so the rotated
# coordinates are heavy-tailed too. The top-1% share is computed per token and does not
# see lengths. Scaling every token's vector to length 1 first removes the effect: the
# rotated coordinates then have median kurtosis at most
# {glue:text}`unit_kurt_rot_max:.1f` (Gaussian), and the neurons at least
# {glue:text}`unit_kurt_ratio_min:.1f` times more in every layer. (That repaired test
# was chosen after seeing the failure, so it is weaker evidence than a test fixed in
# advance; the per-token share was fixed in advance and needs no repair.) For a typical
# layer, layer {glue:text}`smol_layer`, the raw median kurtosis is
# {glue:text}`kurt13:.1f` against {glue:text}`kurt13_rot:.1f`. So in the trained model
# a large part of each token's activation sits on a few neurons, and which few changes
# from token to token: the basis is privileged in fact, not only in principle.
#
# The activations are not sparse in the ReLU sense, though. SwiGLU gives no exact zeros,
# and {glue:text}`neg_frac:.0f`% of the activations in this layer are negative, holding
# {glue:text}`neg_share:.0f`% of the squared mass: the sign of a neuron carries as much as
# its size, and "the neuron is off" is not a state this layer has.
#
# **What makes a neuron fire.** We choose neurons by a rule fixed in advance: the three
# with the largest activation anywhere in the sample. For each we print the contexts
# of its eight largest activations (the token where it fires in brackets, then the
# token that comes next in the text).

# %%
post13 = m13["post"][:, 1:]                     # [8, 255]: positions 1..255
next_ids = corpus_ids[:, 2:]                    # the token after each of them
largest = post13.reshape(-1, smol.cfg.d_mlp).max(0).values   # per neuron
chosen = largest.topk(3).indices.tolist()


def show(ids):
    return repr(smol_tok.decode(ids))[1:-1]


for n in chosen:
    values, where = top_activations(post13[..., n], 8)
    print(f"L{LAYER}N{n}: largest activations {values[0]:.1f} .. "
          f"{values[-1]:.1f}")
    for s, p in where.tolist():
        q = p + 1                               # its position in corpus_ids
        context = show(corpus_ids[s, max(q - 5, 0):q])[-30:]
        print(f"  {context:>30} [{show(corpus_ids[s, q:q + 1])}] -> "
              f"{show(corpus_ids[s, q + 1:q + 2])}")

# %% [markdown]
# Read with care, since eight contexts from eight scenes are a small sample, the lists
# suggest something each neuron responds to: the first fires on words of address
# ("good" before a name, "spirit" in "How now, spirit"); the second inside similes
# and comparisons ("like to a silver bow", "As wild geese"); the third on "all",
# "Athens" and "in" around phrases like "a man in all Athens". These are our readings of the printout, not
# measurements, and a neuron's largest activations show only its strongest inputs, not
# everything it responds to more weakly.
#
# **Keys and values.** Geva et al. {cite}`geva2021transformer` read an FFN as a memory:
# the input weights of a neuron are a *key*, matched against the stream, and its output
# row $W_\text{out}[n]$ is a *value*, added to the stream when the key matches. Read
# by the unembedding, a value is a score over the vocabulary. The final RMSNorm sits in
# between, $x \mapsto x / s \cdot w$: its gain $w$ changes which tokens a direction
# favours, so we include it, $V_n = (W_\text{out}[n] \odot w) W_U$; its division by
# $s > 0$ scales every token's score alike, so it changes no ranking. The reading says:
# when the neuron fires, it pushes up the tokens at the top of $V_n$. If that is what the
# neuron is for, the tokens that actually come next after its top contexts should sit
# high in $V_n$.
#
# We measure it with the **rank fraction** of a token under $V_n$: the share of the
# 49,152-token vocabulary that $V_n$ scores higher (0 at the top, about 0.5 for a
# random token). For each chosen neuron we take its 20 largest activations and the
# median rank fraction of the next tokens there, and compare it with the baseline, the
# same median over the next tokens of *all* positions (which is not 0.5: a value vector
# can favour common tokens everywhere). The test, fixed in advance: at the top
# activations the median is below half the baseline's, for each of the three neurons.

# %%
V = value_logits(block.W_out[chosen], smol.ln_final.w, smol.W_U)  # [3, vocab]


def rank_fraction(scores, ids):
    """Share of the vocabulary that `scores` [vocab] ranks above each id."""
    return (scores[None, :] > scores[ids][:, None]).float().mean(1)


kv_rows = []
for i, n in enumerate(chosen):
    _, where = top_activations(post13[..., n], 20)
    _, where_neg = top_activations(-post13[..., n], 20)
    at_top = rank_fraction(V[i], next_ids[where[:, 0], where[:, 1]]).median()
    baseline = rank_fraction(V[i], next_ids.flatten()).median()
    # at the most negative activations the neuron writes -V_n
    at_neg = rank_fraction(-V[i], next_ids[where_neg[:, 0],
                                           where_neg[:, 1]]).median()
    kv_rows.append([at_top, baseline, at_neg,
                    post13[..., n].min() / post13[..., n].max()])
    top_tokens = " | ".join(show(t) for t in V[i].topk(6).indices)
    print(f"L{LAYER}N{n} value top: {top_tokens}")
    print(f"   next-token rank fraction: top 20 {at_top:.3f}, "
          f"baseline {baseline:.3f}")
kv_rows = torch.tensor(kv_rows)
claim("for each chosen neuron the next token after its 20 top activations "
      "has a median rank fraction under V_n below half the baseline's",
      ", ".join(f"{a:.3f} vs {b:.3f}" for a, b in kv_rows[:, :2].tolist()),
      bool((kv_rows[:, 0] < 0.5 * kv_rows[:, 1]).all()), chapter="10")
claim("at each chosen neuron's 20 most negative activations, -V_n does not "
      "predict the next token (median rank fraction above 0.5)",
      ", ".join(f"{v:.2f}" for v in kv_rows[:, 2].tolist()),
      bool((kv_rows[:, 2] > 0.5).all()), chapter="10")
glue("kv_top_max", kv_rows[:, 0].max().item())
glue("kv_pairs", ", ".join(f"{a:.3f} vs {b:.3f}"
                           for a, b in kv_rows[:, :2].tolist()))
glue("kv_neg_min", kv_rows[:, 2].min().item())
glue("kv_minmax", kv_rows[:, 3].abs().max().item())
del smol_mlp, m13

# %% [markdown]
# Both tests pass. The median rank fractions at the top activations against the
# baselines are {glue:text}`kv_pairs` for the three neurons: at its top activations
# the next token sits (in the median) in the top {glue:text}`kv_top_max:.0%` or better
# of the neuron's value vector, several times higher than at an average position. So the key-value reading explains something real: when
# these neurons fire hardest, what they write directly to the logits favours the token
# that follows.
#
# Where it fails, or explains less than it seems:
#
# - **The top of the value vector is mostly noise to the eye.** Next to plausible tokens
#   (" you", "!" for the first neuron, punctuation for the second) stand word pieces
#   with no visible relation to the contexts ("withstanding", "时", "iagnosed"). The vocabulary has
#   49,152 entries, and a direction in a 576-dimensional space cannot favour only a
#   handful of them; the rank test works because it asks about the tokens that occur.
# - **The sign.** A SwiGLU neuron's activation is negative about as often as positive
#   ({glue:text}`neg_frac:.0f`% of this layer's activations). For these three neurons
#   the most negative activation is at most {glue:text}`kv_minmax:.2f` of the largest in
#   size, and there the reading fails: at their 20 most negative activations the neuron
#   writes $-V_n$, and the next token ranks in the *lower* half of $-V_n$ (median rank
#   fraction at least {glue:text}`kv_neg_min:.2f`). A "key matches, value is written"
#   story describes one side of these neurons only.
# - **Direct path only.** $V_n$ is what the neuron's write does to the logits if nothing
#   after layer 13 reads it. Sixteen more layers do read it, and the final norm's
#   division by $s$ depends on everything else in the stream; the value vector is the
#   neuron's direct effect (chapter {doc}`13_path_expansion` computes such direct
#   effects for a whole model), not its effect.
# - **One neuron, one meaning?** The three neurons were chosen for their largest
#   activations. Most neurons fire more weakly on a wider mix of contexts, and Elhage et
#   al. {cite}`elhage2022superposition` argue that models store more features than they
#   have neurons, spread over several neurons each (superposition). The privileged basis
#   measured above says that activity concentrates on few neurons per token; it does not
#   say that each neuron means one thing.

# %% [markdown]
# ### Why the framework sets MLPs aside
#
# Elhage et al. {cite}`elhage2021mathematical` build their framework for attention-only
# transformers: no MLP layers at all (and no LayerNorm or biases). Their reason, in our
# words: with its pattern fixed, an attention head is linear, so an attention-only model
# expands exactly into a sum of paths whose weights can be multiplied out and read (the
# frozen-pattern identity above); MLP layers have no such decomposition, because the ReLU's on/off
# state changes from input to input across thousands of neurons, and the authors treat
# understanding them as a harder problem left for later work. They say plainly that this is
# a real limitation, since MLP layers hold about two thirds of the parameters of a standard
# transformer, the share chapter {doc}`02_architecture` counted (for the decoder-only layer
# they had in mind).
# Chapters 13-18 follow them and work with attention-only models; what they find about
# attention heads holds in models with MLPs too, but it is not the whole story of those
# models.
#
# The trained MLP above does not change that verdict. Looking at SmolLM2's neurons gave
# measurements (a privileged basis; neurons whose strongest activations precede the
# tokens their value vectors favour), but no exact decomposition: the gates change at
# every token, so no weights multiply out into a table that holds for all inputs, as
# the QK and OV circuits do. Top-activating contexts and value vectors are
# descriptions of a few neurons on one corpus, not a reading of the layer, which has
# 1536 neurons in each of 30 layers.

# %% [markdown]
# ## Summary
#
# - The FFN is $\max(0, xW_1 + b_1)W_2 + b_2$, applied to every position with the same
#   weights and no interaction between positions (equivalently, two convolutions of kernel
#   size 1). `nn.Linear` stores $W_1^\top$, not $W_1$.
# - It has $2 d_\text{model} d_\text{ff} + d_\text{ff} + d_\text{model}$ parameters
#   ({glue:text}`ffn_count` in the base model): two thirds of an encoder or decoder-only
#   layer, half of an encoder-decoder's decoder layer.
# - In the circuit view an FFN is $d_\text{ff}$ neurons, each reading one direction of the
#   stream and writing one direction back, gated by a ReLU. Permuting or positively
#   rescaling neurons changes nothing; rotating them changes the output. Neurons are a
#   privileged basis; the residual stream is not.
# - The ReLU makes the FFN non-additive (relative second difference
#   {glue:text}`gap_ffn:.2f`). Attention with a frozen pattern is exactly affine; so is the
#   FFN with frozen gates, but its gates are thousands of neurons per position that change
#   from input to input. That is why Elhage et al. set MLPs aside, at the cost of ignoring two thirds of a
#   standard transformer's parameters.
# - In SmolLM2's trained SwiGLU layers the neuron basis is privileged in fact: the top
#   1% of neurons hold {glue:text}`share13:.2f` of a token's squared activation in layer
#   {glue:text}`smol_layer`, against {glue:text}`share13_rot:.2f` in a random rotated
#   basis (a kurtosis test failed in one layer, for a reason we traced to a few very
#   long activation vectors). Activations are not sparse: about half are negative.
# - Read as key-value memories, the three most strongly firing neurons of layer
#   {glue:text}`smol_layer` favour, through their value vectors, the tokens that follow
#   their top contexts, far more than at random positions; the reading fails on their
#   negative side and says nothing about what the later layers do with the write.
