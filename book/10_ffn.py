# %% [markdown]
# # 10. Position-wise feed-forward networks
#
# Between its attention sublayers, every layer of the Transformer runs each position
# through the same small two-layer network. This chapter builds that network as the
# Annotated Transformer does, checks that it really treats positions one at a time,
# counts its parameters (most of a layer's), and measures the thing that makes it hard for
# the circuits framework: its ReLU breaks the additivity that attention (with its pattern
# held fixed) enjoys, and it gives the hidden neurons a privileged basis.

# %%
import math
import warnings

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from circuitbook import checks
from circuitbook.book import claim, claim_close, glue
from circuitbook.models.encoder_decoder import (
    MultiHeadedAttention,
    PositionwiseFeedForward,
    make_model,
    tl_weights,
)
from circuitbook.widgets import explore

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)

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
claim_close("the module computes max(0, x W1 + b1) W2 + b2 with W1 = w_1.weight.T", out, formula,
            terms=2 * FFN_TERMS, scale=ffn_size(x), identity=True, chapter="10")

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
claim_close("FFN(sequence) equals FFN applied to each position separately", one_by_one, out,
            terms=2 * FFN_TERMS, scale=ffn_size(x), identity=True, chapter="10")
claim_close("FFN equals two convolutions with kernel size 1", conv, out, terms=2 * FFN_TERMS,
            scale=ffn_size(x), identity=True, chapter="10")

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
claim("in a decoder layer (two attention sublayers) it holds about half",
      f"{dec_share:.4f}", abs(dec_share - 1 / 2) < 0.01, identity=True, chapter="10")
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
claim_close("TransformerLens's MLP with W_in = W1, W_out = W2 gives the same output", tl_out, out,
            terms=2 * FFN_TERMS, scale=ffn_size(x), identity=True, chapter="10")

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
claim_close("FFN(x) is the sum over neurons of relu(x . W_in[:, n] + b_in[n]) W_out[n], plus b_out",
            by_neuron, out[0, 0], terms=2 * FFN_TERMS, scale=ffn_size(x[0, 0]), identity=True, chapter="10")
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
    claim_close(f"changing the neuron basis by {name} leaves the FFN unchanged", new, out,
                terms=2 * FFN_TERMS + 4, scale=ffn_size(x), identity=True, chapter="10")
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
    claim_close("at c, attention with its pattern frozen at c is the real layer", attn_frozen(c), attn_live(c),
                terms=2 * ATTN_TERMS, scale=attn_size(c), identity=True, chapter="10")
    # z * 1 and z * 0 are exact, so the gates act exactly as the ReLU; the two sums may differ
    claim_close("at c, the FFN with its gates frozen at c is the real layer", ffn_gates_frozen(c),
                ffn_module(c), terms=2 * FFN_TERMS, scale=ffn_size(c), identity=True, chapter="10")


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
    claim_close(name, delta, torch.zeros_like(delta), terms=terms, scale=size, identity=True, chapter="10")
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
