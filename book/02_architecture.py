# %% [markdown]
# # 2. Architecture at a glance
#
# Before taking the transformer apart piece by piece, this chapter looks at the whole
# machine. We build the encoder-decoder of Vaswani et al. with the Annotated Transformer's
# `make_model`, print its module tree and draw how data flows through it. Then we count
# every parameter of the paper's base model from real modules, settle the most
# consequential place where the paper and the Annotated Transformer's code disagree
# (where the LayerNorm sits), and
# finish with forward hooks that split the encoder's output into one term per sublayer.

# %% [markdown]
# The set-up is folded away: the imports, and the rounding bounds of this chapter's
# checks (each helper derives its tolerance from the computation it checks).

# %% tags=["hide-input"]
import textwrap
import warnings

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import FancyBboxPatch
from torch import nn

from circuitbook import checks
from circuitbook.book import glue, identity, identity_close, observation
from circuitbook.data import translation as T
from circuitbook.models.encoder_decoder import (
    EncoderLayer,
    MultiHeadedAttention,
    PositionwiseFeedForward,
    SublayerConnection,
    make_model,
)
from circuitbook.train import ZOO_CONFIG
from circuitbook.widgets import explore

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)


def n_params(module):
    return sum(p.numel() for p in module.parameters())


def check_distribution(statement, logp):
    """exp(log_softmax) sums to 1 at every position. log_softmax over V is a
    sum of V exps, a log and a subtraction (V + 4 roundings relative to the
    log-probs' size); exp turns those into relative errors of each
    probability, and the sum of V of them adds V more."""
    total = logp.exp().sum(-1)
    identity_close(statement, total, torch.ones_like(total),
                   terms=2 * logp.shape[-1] + 4,
                   scale=max(1.0, float(logp.abs().max())), chapter="2")


def check_lengths(statement, lengths, d):
    """Post-norm streams of length sqrt(d - 1): one LayerNorm (2 d + 8), then
    a length (d squares summed, a square root: d + 1). LayerNorm's eps = 1e-6,
    added to the input's std s, shortens the length by a relative 1e-6 / s:
    8.39 float32 eps (2^-23) at s = 1, so 9 more eps, enough for any s of at
    least 0.94. In all 3 d + 17."""
    identity_close(statement, lengths,
                   torch.full_like(lengths, (d - 1) ** 0.5),
                   terms=3 * d + 17, chapter="2")


def check_frozen_divisor(statement, contribs, bias, want):
    """The frozen-divisor sum against the model's LayerNorm. Ours: each term
    takes a mean over d, subtracts, multiplies and divides (d + 3), then the
    terms and the bias are summed. The model sums the same parts into the
    stream, then runs its LayerNorm (2 d + 8). Scale: the terms' absolute
    sum, as the centred terms partly cancel."""
    d, n = want.shape[-1], len(contribs)
    scale = float((sum(c.abs() for c in contribs) + bias.abs()).max())
    identity_close(statement, sum(contribs) + bias, want,
                   terms=3 * d + 2 * n + 12, scale=scale, chapter="2")


# %% [markdown]
# ## Plain language
#
# The transformer of *Attention Is All You Need* {cite}`vaswani2017attention` was built to
# translate. It has two halves. The **encoder** reads the whole source sentence at once and
# turns it into one vector per source token, called the *memory*. The **decoder** writes the
# translation one token at a time: to choose the next word it looks at the words it has
# already written and, through the memory, at the source sentence. A final linear map and a
# softmax (the *generator*) turn the decoder's last vector into a probability for every
# word of the target vocabulary.
#
# Each half is a stack of $N$ identical layers, and each layer is a short list of
# **sublayers** of only two kinds:
#
# - **attention** moves information *between* positions (chapters 6 and 7). Encoder layers
#   have one attention sublayer, over the source. Decoder layers have two: a masked one over
#   the target words written so far, and a *cross-attention* one whose keys and values come
#   from the memory.
# - a **feed-forward network** (FFN) transforms each position *on its own*, with the same
#   weights at every position (chapter 10).
#
# Every sublayer is wrapped the same way: its output is *added* to its input (a residual
# connection), and a LayerNorm rescales the vectors. Where exactly the LayerNorm goes is the
# most consequential of the details on which the paper and the most-read implementation of
# it disagree (another is how that implementation's LayerNorm computes its divisor, below),
# and it decides how much must be held fixed before the stream splits into the sum of parts
# that the circuit view of chapter 3 onwards reads: one LayerNorm divisor per stack, or one
# per sublayer. We settle it below.

# %% [markdown]
# ## The Annotated Transformer view
#
# ### The module tree
#
# `make_model` assembles the pieces exactly as the Annotated Transformer
# {cite}`rush2018annotated` does. We build a small instance with the shape of the book's toy
# translation model (two layers, $d_\text{model} = 64$, four heads; chapter 12 reads its
# heads, and chapter 19 describes its training and continues it) and print its tree,
# folding the identical copies of each layer. The numbers in brackets are parameter counts,
# summed from the modules themselves.

# %%
toy_shape = {k: ZOO_CONFIG[k] for k in ("N", "d_model", "d_ff", "h")}
vocab_sizes = (len(T.SRC_VOCAB), len(T.TGT_VOCAB))
model = make_model(*vocab_sizes, **toy_shape).eval()

def show_tree(module, name="model", depth=0, max_depth=3):
    """Print the tree, one line per module, folding identical copies."""
    kind = type(module).__name__
    print(f"{'  ' * depth}{name}: {kind} [{n_params(module):,}]")
    if depth == max_depth:
        return
    children = list(module.named_children())
    same = len({type(c).__name__ for _, c in children}) == 1
    if isinstance(module, nn.ModuleList) and len(children) > 1 and same:
        show_tree(children[0][1], "0", depth + 1, max_depth)
        rest = "1" if len(children) == 2 else f"1..{len(children) - 1}"
        print(f"{'  ' * (depth + 1)}{rest}: same as 0")
        return
    for child_name, child in children:
        if not isinstance(child, nn.Dropout):
            show_tree(child, child_name, depth + 1, max_depth)


show_tree(model, max_depth=4)
print("shape:", toy_shape)

# %% [markdown]
# Reading from the top: `src_embed` and `tgt_embed` map token ids to vectors (chapters 4
# and 5); `encoder` and `decoder` hold $N$ layers each plus one final `norm`; `generator` is
# the output map. An encoder layer has `self_attn`, `feed_forward` and two
# `SublayerConnection`s (the residual-plus-LayerNorm wrapper, one per sublayer). A decoder
# layer has `self_attn`, `src_attn` (cross-attention), `feed_forward` and three wrappers.
# Every attention module is the same class, `MultiHeadedAttention`, with its four
# `nn.Linear` maps in `linears` (chapter 7). The sizes of the embeddings and of the generator
# depend on the vocabularies; everything else depends only on the shape.

# %%
def count_wrappers(stack):
    return sum(isinstance(m, SublayerConnection) for m in stack.modules())


enc_wrappers = count_wrappers(model.encoder)
dec_wrappers = count_wrappers(model.decoder)
N = toy_shape["N"]
identity(f"the encoder wraps 2N = {2 * N} sublayers, the decoder "
         f"3N = {3 * N}", f"{enc_wrappers}, {dec_wrappers}",
         enc_wrappers == 2 * N and dec_wrappers == 3 * N, chapter="2")

# %% [markdown]
# ### How data flows
#
# The figure follows one translation step. Source tokens go up the encoder column; the
# memory at its top feeds every decoder layer's cross-attention; target tokens (the words
# written so far, starting with `<s>`) go up the decoder column, and the generator turns the
# top vector at each target position into a distribution over the next word. Each sublayer
# is drawn beside the vertical line it reads from, with a $\oplus$ where its output is added
# back. The boxes say "LN, then attention" because that is the order in the Annotated
# Transformer's code; the section "Where the LayerNorm goes" below explains why the paper
# draws it differently. (The
# drawing code is folded away; click to show it.)

# %% tags=["hide-input"]
def box(ax, xy, text, color, w=2.2, h=0.46):
    x, y = xy
    ax.add_patch(FancyBboxPatch(
        (x - w / 2, y - h / 2), w, h, fc=color, ec="0.3", zorder=2,
        boxstyle="round,pad=0.02,rounding_size=0.08"))
    ax.text(x, y, text, ha="center", va="center", fontsize=8.5, zorder=3)


def arrow(ax, start, end, color="0.25", rad=0.0):
    ax.annotate("", xy=end, xytext=start, zorder=2,
                arrowprops=dict(arrowstyle="-|>", color=color, lw=1.2,
                                shrinkA=0, shrinkB=0,
                                connectionstyle=f"arc3,rad={rad}"))


def plus(ax, x, y):
    ax.add_patch(plt.Circle((x, y), 0.14, fc="white", ec="0.25", zorder=3))
    ax.text(x, y, "+", ha="center", va="center", fontsize=9, zorder=4)


def stack(ax, x, side, sublayers, label, tokens):
    """One stack: tokens, embedding, the stream and its sublayers, final LN.
    side: +1 puts the sublayer boxes right of the stream, -1 left of it."""
    box(ax, (x, -0.8), tokens, "0.92")
    box(ax, (x, 0.0), "embed x sqrt(d) + PE", "#fde7c8")
    arrow(ax, (x, -0.57), (x, -0.23))
    n = len(sublayers)
    ax.plot([x, x], [0.23, n + 0.67], color="tab:red", lw=3, alpha=0.45,
            zorder=1)
    bx, w = x + side * 2.0, 2.2
    near = bx - side * w / 2
    for i, (text, color) in enumerate(sublayers, start=1):
        box(ax, (bx, i), text, color, w=w)
        arrow(ax, (x, i - 0.35), (near, i - 0.1))   # read
        arrow(ax, (near, i + 0.1), (x + side * 0.14, i + 0.33))  # write
        plus(ax, x, i + 0.38)
    lo, hi = sorted([x - side * 0.45, bx + side * (w / 2 + 0.2)])
    ax.add_patch(FancyBboxPatch(
        (lo, 0.5), hi - lo, n, fill=False, ec="0.6", ls="--",
        boxstyle="round,pad=0.02,rounding_size=0.1"))
    ax.text(hi - 0.08 if side < 0 else lo + 0.08, 0.58, "x N", fontsize=8,
            color="0.4", ha="right" if side < 0 else "left")
    box(ax, (x, n + 0.9), "final LayerNorm", "#e8e8e8", w=1.8, h=0.42)
    ax.text(x, -1.45, label, ha="center", fontsize=10, weight="bold")
    return n + 0.9


fig, ax = plt.subplots(figsize=(8.5, 6.4))
attn_c, cross_c, ffn_c = "#cfe2f3", "#ead1dc", "#d9ead3"
enc_top = stack(ax, 0.0, +1, [("LN, self-attention", attn_c),
                              ("LN, feed-forward", ffn_c)],
                "encoder", "source tokens")
dec_top = stack(ax, 7.0, -1, [("LN, masked self-attn", attn_c),
                              ("LN, cross-attention", cross_c),
                              ("LN, feed-forward", ffn_c)],
                "decoder", "target tokens so far")
box(ax, (0.0, enc_top + 0.75), "memory", cross_c, w=1.4, h=0.42)
arrow(ax, (0.0, enc_top + 0.21), (0.0, enc_top + 0.54))
arrow(ax, (0.7, enc_top + 0.75), (5.0 - 1.1, 2.0), color="#a64d79", rad=-0.25)
ax.text(2.9, 3.55, "keys and values\nfrom the memory", fontsize=8,
        color="#a64d79", ha="center")
box(ax, (7.0, dec_top + 0.75), "generator: linear, log-softmax", "#fff2cc",
    w=2.9, h=0.42)
arrow(ax, (7.0, dec_top + 0.21), (7.0, dec_top + 0.54))
ax.text(7.0, dec_top + 1.2, "log p(next target token)", ha="center",
        fontsize=9)
ax.text(-0.55, 1.5, "residual stream", color="tab:red", fontsize=8,
        rotation=90, ha="right", va="center")
ax.set_xlim(-1.3, 8.5)
ax.set_ylim(-1.7, dec_top + 1.45)
ax.set_aspect("equal")
ax.axis("off")
ax.set_title("The encoder-decoder, pre-norm as in the Annotated "
             "Transformer's code", fontsize=10)
fig.tight_layout()
plt.show()

# %% [markdown]
# ### One forward pass
#
# `model(src, tgt, src_mask, tgt_mask)` returns the decoder's top vectors; as in the
# Annotated Transformer the generator is applied separately. We run one sentence of the toy
# translation task through the untrained model and follow the shapes: the memory has one
# row per source position, the decoder output one row per target position, and the
# generator one log-probability per target word.

# %%
sentence = "big dog sees small red cat".split()
src, tgt = T.to_tensors([sentence])
batch = T.Batch(src, tgt, pad=T.PAD)
with torch.no_grad():
    memory = model.encode(batch.src, batch.src_mask)
    out = model.decode(memory, batch.src_mask, batch.tgt, batch.tgt_mask)
    logp = model.generator(out)
print(" ".join(sentence), "->", T.exact_translation(" ".join(sentence)))
for name, t in [("src", batch.src), ("tgt (decoder input)", batch.tgt),
                ("memory", memory), ("decoder output", out),
                ("generator log-probs", logp)]:
    print(f"{name:>20}: {tuple(t.shape)}")
check_distribution("the generator's output is a log-distribution over the "
                   "target vocabulary at every position", logp)

# %% [markdown]
# ### Exercise 2.1: count a layer
#
# Write `encoder_layer_params(d_model, h, d_ff, bias)` returning the number of parameters in
# one encoder layer: the attention sublayer, the FFN, and the two LayerNorms. With
# `bias=False` the linear maps have no biases (LayerNorms keep their gain and bias). The
# check tries three random shapes, each with $d_\text{ff} \neq 4\,d_\text{model}$, and
# alternates `bias` from one shape to the next, so that both settings are tried.

# %% tags=["exercise"]
def encoder_layer_params(d_model, h, d_ff, bias=True):
    """Parameters of one encoder layer: attention + FFN + two LayerNorms."""
    # BEGIN SOLUTION
    b = 1 if bias else 0
    attention = 4 * d_model * d_model + 4 * d_model * b
    ffn = 2 * d_model * d_ff + (d_ff + d_model) * b
    return attention + ffn + 2 * 2 * d_model
    # END SOLUTION


checks.ch02_ex1(encoder_layer_params)

# %% [markdown]
# ### Where the parameters are
#
# The tree above counted the toy shape, and exercise 2.1 any shape. Now the paper's base
# model: $N = 6$,
# $d_\text{model} = 512$, $h = 8$ heads of $d_\text{head} = d_\text{model}/h = 64$, and
# $d_\text{ff} = 2048 = 4\,d_\text{model}$. Counting by hand, with weights only:
#
# - each **head** owns a $d_\text{model} \times d_\text{head}$ slice of each of $W^Q$,
#   $W^K$, $W^V$ and a $d_\text{head} \times d_\text{model}$ slice of $W^O$:
#   $4\,d_\text{model}\,d_\text{head} = 4\,d_\text{model}^2/h$ weights;
# - an **attention sublayer** has $h$ heads, so $4\,d_\text{model}^2$, whatever $h$ is;
# - a **feed-forward sublayer** has $W_1$ ($d_\text{model} \times d_\text{ff}$) and $W_2$
#   ($d_\text{ff} \times d_\text{model}$): $2\,d_\text{model}\,d_\text{ff} = 8\,d_\text{model}^2$;
# - so an encoder layer has $12\,d_\text{model}^2$ weights, two thirds of them in the FFN.
#
# Biases add $d_\text{model}$ to each of the four attention maps and $d_\text{ff} + d_\text{model}$
# to the FFN, and each LayerNorm has a gain and a bias of $d_\text{model}$ entries each. We
# build real base-sized modules and count them with `sum(p.numel() ...)`. These are counts:
# the checks below are identities, true by construction, that show the modules have the
# sizes these formulas give.

# %%
d_model, h, d_ff, N_base = 512, 8, 2048, 6
d_head = d_model // h
enc_layer = EncoderLayer(d_model, MultiHeadedAttention(h, d_model),
                         PositionwiseFeedForward(d_model, d_ff), 0.1)
attn, ffn = enc_layer.self_attn, enc_layer.feed_forward


def head_weights(mha, i):
    """Weights of head i: its columns of W^Q, W^K, W^V and its rows of W^O.
    nn.Linear stores W transposed, so in .weight these are rows of the first
    three maps and columns of the last."""
    blk = slice(i * mha.d_k, (i + 1) * mha.d_k)
    reads = sum(lin.weight[blk].numel() for lin in mha.linears[:3])
    return reads + mha.linears[3].weight[:, blk].numel()


per_head = [head_weights(attn, i) for i in range(h)]
attn_w = sum(p.numel() for p in attn.parameters() if p.dim() == 2)
attn_b = n_params(attn) - attn_w
ffn_w = sum(p.numel() for p in ffn.parameters() if p.dim() == 2)
ffn_b = n_params(ffn) - ffn_w
ln = sum(n_params(s) for s in enc_layer.sublayer)
layer_total = n_params(enc_layer)
rows = [("one head (W_Q, W_K, W_V, W_O slices)", per_head[0], "4 d d_head"),
        (f"attention weights, {h} heads", attn_w, "4 d^2"),
        ("attention biases", attn_b, "4 d"),
        ("FFN weights W_1, W_2", ffn_w, "8 d^2"),
        ("FFN biases", ffn_b, "d_ff + d"),
        ("two LayerNorms (gain, bias)", ln, "4 d"),
        ("encoder layer", layer_total, "")]
for name, count, formula in rows:
    print(f"{name:>38}: {count:>10,}   {formula}")

identity("each head has 4 d_model d_head = 4 d_model^2 / h weights, and the "
         "heads make up the attention weights", per_head[0],
         all(c == 4 * d_model**2 // h for c in per_head)
         and sum(per_head) == attn_w, chapter="2")
identity("attention: 4 d_model^2 weights + 4 d_model biases; FFN: "
         "2 d_model d_ff = 8 d_model^2 weights + d_ff + d_model biases",
         f"{attn_w:,} + {attn_b:,}; {ffn_w:,} + {ffn_b:,}",
         (attn_w, attn_b, ffn_w, ffn_b)
         == (4 * d_model**2, 4 * d_model, 8 * d_model**2, d_ff + d_model),
         chapter="2")
ffn_share = n_params(ffn) / layer_total
identity("the FFN holds exactly two thirds of an encoder layer's weights "
         "(8 d_model^2 of 12 d_model^2)", f"{ffn_w:,} of {attn_w + ffn_w:,}",
         3 * ffn_w == 2 * (attn_w + ffn_w), chapter="2")
glue("base_head", per_head[0])
glue("base_layer", layer_total)
glue("ffn_share", ffn_share)
glue("bias_share", (attn_b + ffn_b) / layer_total)

# %% [markdown]
# One head has {glue:text}`base_head:,d` weights; an encoder layer has
# {glue:text}`base_layer:,d` parameters, of which the FFN holds {glue:text}`ffn_share:.2%`
# and the biases only {glue:text}`bias_share:.2%`. A decoder layer adds a second attention
# sublayer and a third LayerNorm. We build the whole base model and check that its count
# is the sum of its parts.

# %%
V = 1000  # a stand-in vocabulary: only embeddings and generator depend on it
base = make_model(V, V, N=N_base, d_model=d_model, d_ff=d_ff, h=h)
dec_layer = base.decoder.layers[0]
embeds = n_params(base.src_embed) + n_params(base.tgt_embed)
gen = n_params(base.generator)
stacks = n_params(base.encoder) + n_params(base.decoder)
predicted_dec = 2 * n_params(attn) + n_params(ffn) + 3 * 2 * d_model
predicted_stacks = N_base * (layer_total + predicted_dec) + 2 * 2 * d_model
identity("decoder layer = 2 attention + FFN + 3 LayerNorms; both stacks = "
         "N (encoder + decoder layer) + 2 final LayerNorms",
         f"{n_params(dec_layer):,}; {stacks:,}",
         n_params(dec_layer) == predicted_dec and stacks == predicted_stacks,
         chapter="2")
identity("the whole model = stacks + embeddings (V d each) + generator "
         "(d V + V)", f"{n_params(base):,}",
         n_params(base) == stacks + 2 * V * d_model + d_model * V + V
         and embeds == 2 * V * d_model and gen == d_model * V + V,
         chapter="2")
glue("stacks_m", stacks / 1e6)

# %% [markdown]
# Without embeddings or generator, the Annotated Transformer's base model has {glue:text}`stacks_m:.1f`
# million parameters. The paper's post-norm model has the same layers but not the two final
# LayerNorms (encoder and decoder, $2 \times 2\,d_\text{model}$ parameters), so its stacks
# hold {glue:text}`paper_stacks_m:.3f` million. The paper's Table 3 lists 65 million for the
# whole model. The rest is the vocabulary: the paper uses a
# shared source-target vocabulary of "about 37000" byte-pair tokens for English-German
# and ties the two embeddings and the pre-softmax matrix into one
# $V \times d_\text{model}$ matrix (its section 3.4). The pre-softmax map may also have a
# bias of $V$; the paper does not say, and it hardly matters. With $V = 37000$:

# %% tags=["hide-input"]
V_paper = 37000
# the paper is post-norm: no final LayerNorm on either stack (gain and bias)
paper_stacks = stacks - 2 * 2 * d_model
glue("paper_stacks_m", paper_stacks / 1e6)
tied_total = paper_stacks + V_paper * d_model + V_paper
implied_V = (65e6 - paper_stacks) / (d_model + 1)
# the paper's figures are rounded: "about 37000" tokens, and 65 M at the
# nearest million. The largest count its description allows:
V_high, paper_low = 37500, 64.5e6
tied_high = paper_stacks + V_high * (d_model + 1)
print(f"post-norm stacks {paper_stacks:,} + tied embedding "
      f"{V_paper * d_model:,} + generator bias {V_paper:,}")
print(f"= {tied_total:,} parameters; 65 M would need V = {implied_V:,.0f}")
print(f"with V = {V_high:,}: {tied_high:,}, still under {paper_low:,.0f}")
observation("the base model counted from the paper's description, with a "
            "tied 37000-token vocabulary (millions)", tied_total / 1e6,
            chapter="2")
glue("tied_m", tied_total / 1e6)
glue("implied_v", implied_V)
glue("tied_high_m", tied_high / 1e6)
glue("gap_m", (65e6 - tied_total) / 1e6)
glue("gap_share", (65e6 - tied_total) / 65e6)
# the Annotated Transformer's Q, K, V and output projections carry biases;
# the paper writes Q W^Q with none (its FFN does have b_1 and b_2)
attn_bias = sum(p.numel() for name, p in base.named_parameters()
                if "attn" in name and name.endswith("bias"))
identity("attention biases: 3N attention sublayers x 4 d_model",
         f"{attn_bias:,}", attn_bias == 3 * N_base * 4 * d_model, chapter="2")
glue("attn_bias", attn_bias)
glue("tied_nb_m", (tied_total - attn_bias) / 1e6)

# %% [markdown]
# That gives {glue:text}`tied_m:.1f` million, {glue:text}`gap_m:.1f` million
# ({glue:text}`gap_share:.0%`) under
# the paper's 65 million. The paper's roundings do not close the gap: even a vocabulary
# of 37,500 tokens gives {glue:text}`tied_high_m:.1f` million, below the 64.5 million that
# would round to 65. To match exactly, the vocabulary would need about
# {glue:text}`implied_v:,.0f` tokens. The count errs, if anything, on the high side: it
# includes the biases of the attention projections ({glue:text}`attn_bias:,d` parameters),
# which the Annotated Transformer has and the paper's $QW^Q_i$ does not write; without them
# it is {glue:text}`tied_nb_m:.2f` million, a little further from 65. The paper gives no
# detail that would account for the rest, so we record the difference rather than explain
# it away: counted from the architecture the paper describes, the base model has about
# {glue:text}`tied_m:.0f` million parameters.

# %% [markdown]
# The explorer below builds a real encoder layer for each shape you pick (with
# $d_\text{ff} = 4\,d_\text{model}$) and splits its parameter count into pieces, one
# segment per head. Change $h$ and watch the attention bar: the heads get thinner, but the
# total does not move.

# %%
def draw_breakdown(d_model=512, h=8):
    layer = EncoderLayer(
        d_model, MultiHeadedAttention(h, d_model, 0.0),
        PositionwiseFeedForward(d_model, 4 * d_model, 0.0), 0.0)
    mha, ff = layer.self_attn, layer.feed_forward
    heads = [head_weights(mha, i) for i in range(h)]
    biases = (sum(lin.bias.numel() for lin in mha.linears)
              + ff.w_1.bias.numel() + ff.w_2.bias.numel())
    norms = sum(n_params(s) for s in layer.sublayer)
    pieces = ([(f"{i}", c, plt.cm.Blues(0.3 + 0.55 * i / max(h - 1, 1)))
               for i, c in enumerate(heads)]
              + [("W_1", ff.w_1.weight.numel(), "#93c47d"),
                 ("W_2", ff.w_2.weight.numel(), "#6aa84f"),
                 ("", biases + norms, "0.3")])
    total = n_params(layer)
    fig, ax = plt.subplots(figsize=(8, 2.3))
    left = 0
    for name, count, color in pieces:
        ax.barh(0, count, left=left, height=0.6, color=color,
                edgecolor="white", lw=0.5)
        if count / total > 0.02:
            ax.text(left + count / 2, 0, name, ha="center", va="center",
                    fontsize=8)
        left += count
    attn_w = sum(heads)
    ax.annotate("", xy=(0, 0.42), xytext=(attn_w, 0.42),
                arrowprops=dict(arrowstyle="<->", color="tab:blue"))
    ax.text(attn_w / 2, 0.5, f"attention: {h} heads x {heads[0]:,}",
            ha="center", fontsize=8.5, color="tab:blue")
    ffn_w = ff.w_1.weight.numel() + ff.w_2.weight.numel()
    ax.annotate("", xy=(attn_w, 0.42), xytext=(attn_w + ffn_w, 0.42),
                arrowprops=dict(arrowstyle="<->", color="tab:green"))
    ax.text(attn_w + ffn_w / 2, 0.5, f"feed-forward: {ffn_w:,}", ha="center",
            fontsize=8.5, color="tab:green")
    ax.set_xlim(0, total)
    ax.set_ylim(-0.45, 0.75)
    ax.set_yticks([])
    ax.ticklabel_format(axis="x", style="plain")
    ax.xaxis.set_major_formatter(lambda v, _: f"{v / 1e6:.1f} M")
    ax.set_title(f"one encoder layer, d_model={d_model}, h={h}, "
                 f"d_head={d_model // h}: {total:,} parameters (biases "
                 f"{biases:,}, LayerNorms {norms:,}, dark grey)", fontsize=9)
    fig.tight_layout()
    plt.show()


explore(draw_breakdown, d_model=[64, 128, 256, 512, 768, 1024],
        h=[1, 2, 4, 8, 16])

# %% [markdown]
# ### Where the LayerNorm goes: post-norm and pre-norm
#
# Section 3.1 of the paper puts the LayerNorm *after* the residual connection: each
# sublayer's output is added to its input first, and the result is normalised. This is
# called **post-norm**. The Annotated Transformer's text repeats the paper's formula, but its
# `SublayerConnection` computes something else: the LayerNorm moves to the other side of
# the addition, and what is added to the stream is no longer normalised afterwards. This is
# **pre-norm**. Exercise 2.2 asks you to write both. A comment in the Annotated
# Transformer's code says the norm was put first for
# simplicity of code. Pre-norm is also what GPT-2 uses {cite}`radford2019language`, and
# what almost every language model since does. Because pre-norm never normalises the stream
# itself, the stack needs one LayerNorm at its very top; that is the `norm` at the end of
# the Annotated Transformer's `Encoder` and `Decoder`, which the paper does not have.
#
# Our `SublayerConnection` has a switch, `norm_position`, that selects one arrangement or
# the other. The two arrangements use exactly
# the same parameters except the two final LayerNorms, so we can load the pre-norm model's
# weights into a post-norm model and compare.

# %%
post_model = make_model(*vocab_sizes, **toy_shape,
                        norm_position="post").eval()
missing, unexpected = post_model.load_state_dict(model.state_dict(),
                                                 strict=False)
print(textwrap.fill("only in the pre-norm model: " + ", ".join(unexpected),
                    79))
print("only in the post-norm model:", ", ".join(missing) or "nothing")
final_norms = sorted(f"{s}.norm.{p}" for s in ("encoder", "decoder")
                     for p in ("a_2", "b_2"))
identity("pre-norm and post-norm share every parameter except the stacks' "
         "final LayerNorms", len(unexpected),
         missing == [] and sorted(unexpected) == final_norms, chapter="2")

with torch.no_grad():
    memory_post = post_model.encode(batch.src, batch.src_mask)
    out_post = post_model.decode(memory_post, batch.src_mask, batch.tgt,
                                 batch.tgt_mask)
rel = ((out_post - out).norm(dim=-1) / out.norm(dim=-1)).mean()
observation("on the same untrained weights and one sentence, the mean "
            "relative difference between post-norm's and pre-norm's decoder "
            "outputs", rel, chapter="2")
glue("prepost_rel", rel.item())

# %% [markdown]
# With identical weights, the decoder outputs differ by {glue:text}`prepost_rel:.0%` of
# their size on average (one untrained model, one sentence): these are two different
# networks, not two ways of writing one. We have not trained either arrangement here, but
# with the same weights this far apart there is no reason to expect a model trained one
# way to work when run the other way.
#
# The difference shows up clearly in the size of the stream. Post-norm renormalises the
# stream after every sublayer, so (with LayerNorm's gain at 1 and bias at 0, as at
# initialisation) every position has mean 0 and standard deviation 1 after every sublayer,
# and its length is pinned at $\sqrt{d_\text{model} - 1}$ (the Annotated Transformer's
# LayerNorm divides by the *unbiased* standard deviation, chapter 11). In pre-norm the
# stream only accumulates, and nothing stops it from growing. We record the stream after
# each sublayer of a six-layer encoder, built both ways with the same weights, using a
# forward hook on every `SublayerConnection`.

# %%
def stream_norms(m, src, src_mask):
    """Mean length of the encoder stream after the embedding and after each
    sublayer, and the streams themselves."""
    seen = []
    hooks = [w.register_forward_hook(lambda mod, inp, out: seen.append(out))
             for w in m.encoder.modules()
             if isinstance(w, SublayerConnection)]
    hooks.append(m.src_embed.register_forward_hook(
        lambda mod, inp, out: seen.insert(0, out)))
    with torch.no_grad():
        m.encode(src, src_mask)
    for h in hooks:
        h.remove()
    return torch.stack([s[0].norm(dim=-1).mean() for s in seen]), seen


deep = dict(toy_shape, N=6)
deep_pre = make_model(*vocab_sizes, **deep).eval()
deep_post = make_model(*vocab_sizes, **deep, norm_position="post").eval()
deep_post.load_state_dict(deep_pre.state_dict(), strict=False)
norms_pre, _ = stream_norms(deep_pre, batch.src, batch.src_mask)
norms_post, streams_post = stream_norms(deep_post, batch.src,
                                        batch.src_mask)

d = deep["d_model"]
# every position after every sublayer
after = torch.cat([s[0] for s in streams_post[1:]])
check_lengths("post-norm (gain 1, bias 0): after every sublayer each "
              "position has length sqrt(d_model - 1)",
              after.norm(dim=-1), d)
observation("pre-norm, one untrained six-layer encoder and one sentence: "
            "the stream's last length over its first",
            norms_pre[-1] / norms_pre[0], chapter="2")
glue("pre_growth", (norms_pre[-1] / norms_pre[0]).item())

fig, ax = plt.subplots(figsize=(7.5, 3))
steps = range(len(norms_pre))
ax.plot(steps, norms_pre, "o-", label="pre-norm")
ax.plot(steps, norms_post, "s-", label="post-norm")
ax.axhline((d - 1) ** 0.5, color="0.6", ls=":", lw=1)
ax.text(len(norms_pre) - 1, (d - 1) ** 0.5 + 0.5, "sqrt(d_model - 1)",
        ha="right", fontsize=8, color="0.4")
labels = ["embed"] + [f"{i // 2}.{'attn' if i % 2 == 0 else 'ffn'}"
                      for i in range(len(norms_pre) - 1)]
ax.set_xticks(list(steps), labels, rotation=60, fontsize=8)
ax.set_ylabel("mean length of x")
ax.set_title("The encoder stream after each sublayer, same weights, "
             "six layers", fontsize=10)
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# In pre-norm the stream ends {glue:text}`pre_growth:.1f` times longer than it started
# (in this untrained encoder: how much a trained one grows depends on its weights). Nothing
# in pre-norm bounds the stream's size, so the final LayerNorm is there to hand whatever
# reads the top of the stack a normalised vector, as post-norm's last LayerNorm does. In
# post-norm the stream's length is pinned from the first sublayer on (the embedding itself
# is longer), but nothing written into it survives unchanged either: each LayerNorm
# recentres and rescales everything that came before.
#
# ### Exercise 2.2: the residual connection
#
# Write `sublayer_connection(x, sublayer, norm, position)` returning the pre-norm
# (`position == "pre"`) or post-norm (`"post"`) residual connection around `sublayer`, where
# `sublayer` and `norm` are functions (PyTorch modules) from `[..., d_model]` to
# `[..., d_model]`. Ignore dropout.

# %% tags=["exercise"]
def sublayer_connection(x, sublayer, norm, position):
    """x: [..., d_model]; sublayer, norm: [..., d_model] -> [..., d_model];
    position: "pre" or "post", where the LayerNorm sits.
    Returns [..., d_model]."""
    # BEGIN SOLUTION
    if position == "pre":
        return x + sublayer(norm(x))
    return norm(x + sublayer(x))
    # END SOLUTION


checks.ch02_ex2(sublayer_connection)

# %% [markdown]
# <details><summary>Exercise 2.2 worked out (open it once your function passes)</summary>
#
# In formulas, post-norm (the paper) is
# $\operatorname{LayerNorm}(x + \operatorname{Sublayer}(x))$: add first, then normalise.
# Pre-norm (the Annotated Transformer's code) is
# $x + \operatorname{Sublayer}(\operatorname{LayerNorm}(x))$: normalise what the sublayer
# *reads*, and add its output to the un-normalised stream.
#
# </details>

# %% [markdown]
# ## The circuit view
#
# Elhage et al. {cite}`elhage2021mathematical` draw the same machine as one line, the
# residual stream, with every sublayer reading from it and adding its result back. In the
# pre-norm arrangement this is literally what the code does: write $x_0$ for the embedding
# and $f_\ell$ for the $\ell$-th sublayer (its LayerNorm included) in order (a decoder's
# cross-attention sublayer also reads the memory, so its $f_\ell$ depends on the memory as
# well as on $x_\ell$); then
#
# $$x_{\ell+1} = x_\ell + f_\ell(x_\ell), \qquad\text{so}\qquad
# x_\text{top} = x_0 + \sum_\ell f_\ell(x_\ell),$$
#
# and the encoder's output, the memory, is $\operatorname{LN}(x_\text{top})$. This is an
# identity, which {doc}`chapter 1 <01_background>` checked on a GPT-2-style
# TransformerLens model; below it is checked again, directly, on the Annotated
# Transformer's encoder, before the frozen-divisor identity uses it (that identity compares
# centred sums, so on its own it would confirm the writes only up to a constant per
# position). We collect the parts from the
# Annotated Transformer's own encoder and decoder, with forward hooks on the
# embedding, on every attention and feed-forward module (their outputs are the writes;
# dropout is off in eval mode) and on the final `norm` (its input is $x_\text{top}$), to use
# them for something new: the final LayerNorm.

# %%
def decompose(m, src, tgt, src_mask, tgt_mask):
    """Hook a forward pass. Returns, per stack, the embedding and the sublayer
    writes in order, and the stream entering the final LayerNorm (and its
    output)."""
    rec = {"encoder": [], "decoder": []}
    top = {}
    hooks = []
    for stack, embed in (("encoder", m.src_embed), ("decoder", m.tgt_embed)):
        parts = rec[stack]
        hooks.append(embed.register_forward_hook(
            lambda mod, inp, out, parts=parts: parts.append(("embed", out))))
        for i, layer in enumerate(getattr(m, stack).layers):
            names = ["self_attn", "src_attn", "feed_forward"]
            for name in [n for n in names if hasattr(layer, n)]:
                hooks.append(getattr(layer, name).register_forward_hook(
                    lambda mod, inp, out, parts=parts, tag=f"{i}.{name}":
                    parts.append((tag, out))))
        hooks.append(getattr(m, stack).norm.register_forward_hook(
            lambda mod, inp, out, stack=stack:
            top.update({stack: (inp[0], out)})))
    with torch.no_grad():
        m(src, tgt, src_mask, tgt_mask)
    for hk in hooks:
        hk.remove()
    return rec, top


rec, top = decompose(model, batch.src, batch.tgt, batch.src_mask,
                     batch.tgt_mask)
for stack in ("encoder", "decoder"):
    terms = " + ".join(tag for tag, _ in rec[stack])
    print(textwrap.fill(f"{stack}: {terms}", 79, subsequent_indent="  "))

# %% [markdown]
# The final LayerNorm is not a write: it acts on the finished sum, and LayerNorm is not
# linear, so the memory is not a sum of per-sublayer terms. It is *almost* one. For each
# position, LayerNorm subtracts the mean, divides by one number $\sigma$ (the standard
# deviation of the whole vector, plus a small $\epsilon$), then applies a gain $a$ and a
# bias $b$. If we compute $\sigma$ from the full stream and then hold it fixed, the rest is
# linear and distributes over the parts $p \in \{x_0, f_0(x_0), f_1(x_1), \dots\}$:
#
# $$\operatorname{LN}(x_\text{top}) = \sum_{p} a \odot \frac{p - \operatorname{mean}(p)}{\sigma(x_\text{top})} + b .$$
#
# That is how attribution methods split a logit into per-sublayer contributions in a
# pre-norm model (TransformerLens calls it applying the LayerNorm to a stack of
# components; chapter 11 looks at what the frozen divisor hides).

# %%
norm = model.encoder.norm
x_top = top["encoder"][0]
writes = [t for _, t in rec["encoder"]]
# The model adds the same writes into its stream one at a time, in this order:
# len(writes) - 1 additions, each rounding relative to the running sum's size.
identity_close("the embedding and the sublayer writes add up to the stream "
               "entering the final LayerNorm", sum(writes), x_top,
               terms=len(writes),
               scale=float(sum(t.abs() for t in writes).max()), chapter="2")
sigma = x_top.std(-1, keepdim=True) + norm.eps  # from the full stream
contribs = [norm.a_2 * (t - t.mean(-1, keepdim=True)) / sigma
            for _, t in rec["encoder"]]
check_frozen_divisor("with the LayerNorm's divisor frozen, the memory is a "
                     "sum of one term per sublayer plus the LayerNorm's "
                     "bias", [c.detach() for c in contribs],
                     norm.b_2.detach(), memory)

# %% [markdown]
# In the post-norm arrangement the same bookkeeping needs far more freezing. The stream is
# no longer a sum of the writes ({doc}`chapter 3 <03_residual_stream>` measures how far from
# one it is): every LayerNorm after a write recentres it and divides it by the size of the
# whole stream at that point, which depends on the write itself and on everything written
# before and after it up to there. Freezing every divisor of a stack ($2N$ in the encoder,
# $3N$ in the decoder) would still give a sum, but each write's term would then be scaled by every later
# LayerNorm's gain and divisor, the divisors measured on this input. Pre-norm needs one frozen divisor per stack;
# that is the reason this book, like the circuits literature, works with pre-norm models
# from here on.
#
# The parameter count looks different in this view, too. The framework does not see "an
# attention layer with four $d_\text{model} \times d_\text{model}$ matrices"; it sees $h$
# separate heads, each with its own $W_Q, W_K, W_V \in \mathbb{R}^{d_\text{model} \times
# d_\text{head}}$ and $W_O \in \mathbb{R}^{d_\text{head} \times d_\text{model}}$ (the
# {glue:text}`base_head:,d` weights per head we counted above), which combine into two
# $d_\text{model} \times d_\text{model}$ matrices of rank at most $d_\text{head}$,
# $W_{QK} = W_Q W_K^\top$ and $W_{OV} = W_V W_O$. This describes the weights only: the
# encoder-decoder's $Q$, $K$ and $V$ projections also have biases, and in pre-norm a
# self-attention head reads the LayerNorm of the stream, not the stream itself, so its
# scores are a bilinear form in the normalised stream plus bias terms ({doc}`11_layernorm`
# treats the norm). A cross-attention head in the decoder is different: its queries read
# the normalised decoder stream, but its keys and values read the encoder's memory, so its
# scores are a bilinear form between two different streams ({doc}`12_cross_attention`). {doc}`Chapter 7 <07_multi_head>` shows
# that the four big matrices are exactly these heads side by side.
#
# ## Summary
#
# - The encoder-decoder is two stacks of identical layers built from two kinds of sublayer:
#   attention (between positions) and a feed-forward network (each position alone), each
#   wrapped in a residual connection and a LayerNorm.
# - The paper is post-norm, $\operatorname{LN}(x + \operatorname{Sublayer}(x))$; the
#   Annotated Transformer's code and GPT-2 are pre-norm,
#   $x + \operatorname{Sublayer}(\operatorname{LN}(x))$, with one final LayerNorm per stack.
#   The book's other models keep the pre-norm shape: the toy translation model of chapter 19
#   and the small TransformerLens models of chapters 1, 11 and 20 with LayerNorm (apart
#   from chapter 11's one-block BERT check, which is post-norm), SmolLM2 with RMSNorm in
#   place of LayerNorm; only the attention-only toy models have no norm at all.
#   On the same weights the two give different outputs (here {glue:text}`prepost_rel:.0%`
#   apart).
# - In the base model a head has $4\,d_\text{model}^2/h$ weights, an attention sublayer
#   $4\,d_\text{model}^2$ whatever $h$ is, and the FFN two thirds of each encoder layer
#   ({glue:text}`ffn_share:.1%` with biases). The stacks hold {glue:text}`stacks_m:.1f` M
#   parameters; with the paper's tied vocabulary the total is about
#   {glue:text}`tied_m:.0f` M against the paper's 65 M, a gap the paper's rounded figures
#   do not explain.
# - In pre-norm, each stack's top stream is its embedding plus every sublayer's write (an
#   identity, checked above on the encoder as chapter 1 checked it on GPT-2's shape); the
#   final LayerNorm distributes over the parts once its
#   divisor is frozen.
