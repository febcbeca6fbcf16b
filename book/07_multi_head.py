# %% [markdown]
# # 7. Multi-head attention
#
# One attention pattern lets a position take one weighted average of the others. A
# transformer layer runs several attention *heads* side by side, each with its own
# pattern. This chapter follows the Annotated Transformer's `MultiHeadedAttention` line by
# line, through the reshaping that cuts four big matrices into heads, and maps its weights
# exactly onto TransformerLens's per-head shapes. Then it proves, on the trained toy
# translation model, the identity at the heart of the circuits framework: the paper's
# "concatenate the heads, then project" is the same computation as "every head writes its
# own term into the residual stream, and the terms add up", with the two bias vectors
# accounted for exactly.

# %%
import warnings

import matplotlib.pyplot as plt
import torch
from transformer_lens import HookedTransformer, HookedTransformerConfig

from circuitbook import checks
from circuitbook.book import claim, glue, identity, identity_close
from circuitbook.data import translation as T
from circuitbook.models import load
from circuitbook.models.encoder_decoder import (
    attention,
    cross_attention_alignment,
    tl_weights,
)
from circuitbook.models.zoo import info
from circuitbook.widgets import explore

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)

# %% [markdown]
# ## Plain language
#
# {doc}`Chapter 6 <06_attention>` built one head: compare a query with every key, turn the
# scores into weights, average the values. A single head gives each position a single
# weighted average, so it can follow one relationship at a time. Translating
# `big dog sees small red cat` into our toy language, where adjectives follow their noun
# and the verb goes last, a position may need to know at once which noun it belongs to,
# where the verb is, and where the sentence ends. Several questions need several patterns.
#
# Vaswani et al. {cite}`vaswani2017attention` therefore split the model's width among
# $h$ heads. Each head projects the stream down to $d_\text{head} = d_\text{model}/h$
# dimensions for its queries, keys and values, computes its own pattern, and returns a
# $d_\text{head}$-vector per position. The paper then **concatenates** the $h$ outputs back
# into one $d_\text{model}$-vector and applies a last projection $W^O$:
#
# $$\operatorname{MultiHead}(Q, K, V) = \operatorname{Concat}(\text{head}_1, \dots, \text{head}_h)\, W^O,$$
#
# $$\text{head}_i = \operatorname{Attention}(Q W_i^Q, K W_i^K, V W_i^V).$$
#
# The paper writes these with row vectors (one row per position), as TransformerLens and
# this book do: $W_i^Q, W_i^K, W_i^V \in \mathbb{R}^{d_\text{model} \times d_\text{head}}$ and
# $W^O \in \mathbb{R}^{h d_\text{head} \times d_\text{model}}$. In self-attention $Q$, $K$ and
# $V$ are all the (normalised) residual stream; in the decoder's cross-attention $Q$ comes
# from the decoder and $K = V$ is the encoder's memory.
#
# Elhage et al. {cite}`elhage2021mathematical` read the same formula differently.
# Multiplying a concatenation by a matrix is the same as multiplying each piece by its own
# block of rows and adding. So each head owns a $d_\text{head} \times d_\text{model}$ block
# $W_O^h$ of $W^O$, writes $\text{head}_h W_O^h$ into the residual stream, and the layer's
# output is the **sum** of those writes. Heads are independent, additive writers; nothing
# about them is "concatenated" except in the way the code stores their weights.

# %% [markdown]
# ## The Annotated Transformer view
#
# We load the book's trained toy translation model (an Annotated Transformer
# encoder-decoder, two layers, $d_\text{model} = 64$, $h = 4$; chapter 19 shows how it was
# trained) and take the self-attention of its first encoder layer. `MultiHeadedAttention`
# keeps all heads' weights in four `nn.Linear(d_model, d_model)` maps, `linears`: $W^Q$,
# $W^K$, $W^V$ for all heads at once, then $W^O$.

# %%
model = load("toy-translation")
config = info("toy-translation")["config"]
_, held_out = T.make_split(config["n_train"], config["n_test"],
                           seed=config["seed"])

mha = model.encoder.layers[0].self_attn
h, d_k = mha.h, mha.d_k
d_model = h * d_k
print(f"h = {h} heads, d_k = d_head = {d_k}, d_model = {d_model}")
for name, lin in zip(["W^Q", "W^K", "W^V", "W^O"], mha.linears):
    print(f"{name}: {type(lin).__name__}, weight {tuple(lin.weight.shape)}, "
          f"bias {tuple(lin.bias.shape)}")

# %% [markdown]
# To look at real inputs we run one held-out sentence (never seen in training) through the
# model and catch what the module receives with a forward *pre*-hook. In this pre-norm
# model that is the LayerNormed residual stream, one row per source token.

# %%
words = held_out[0]
src, tgt = T.to_tensors([words])
batch = T.Batch(src, tgt, pad=T.PAD)
caught = {}
hook = mha.register_forward_pre_hook(
    lambda mod, args: caught.update(args=args))
with torch.no_grad():
    model(batch.src, batch.tgt, batch.src_mask, batch.tgt_mask)
hook.remove()
x, _, _, src_mask = caught["args"]  # query = key = value = x in self-attention
print("source:", " ".join(words))
print("target:", T.exact_translation(" ".join(words)))
print("x:", tuple(x.shape), " mask:", tuple(src_mask.shape))

# %% [markdown]
# Here is the module's forward pass written out, with the shape after every step. The one
# subtle line is the reshaping: `lin(x)` is `[batch, pos, d_model]`, `.view(batch, pos, h,
# d_k)` cuts the last axis into $h$ consecutive blocks of $d_k$, and `.transpose(1, 2)` puts
# the head axis in front, so each head becomes a separate "batch" for `attention`. After
# attention the same two steps run backwards: heads back behind positions, and `.view` glues
# the $h$ blocks into one $d_\text{model}$-vector: that is the concatenation.

# %%
def mha_forward(mha, query, key, value, mask):
    b = query.size(0)
    # [b, pos, d_model] -> [b, pos, h, d_k] -> [b, h, pos, d_k]
    q, k, v = [lin(t).view(b, -1, mha.h, mha.d_k).transpose(1, 2)
               for lin, t in zip(mha.linears, (query, key, value))]
    z, pattern = attention(q, k, v, mask=mask.unsqueeze(1))  # [b, h, q, d_k]
    # [b, h, q, d_k] -> [b, q, h, d_k] -> [b, q, h * d_k]: the concatenation
    concat = z.transpose(1, 2).contiguous().view(b, -1, mha.h * mha.d_k)
    return mha.linears[3](concat), q, pattern, concat   # out: [b, q, d_model]


with torch.no_grad():
    out, q, pattern, concat = mha_forward(mha, x, x, x, src_mask)
    out_module = mha(x, x, x, src_mask)
for name, t in [("q (per head)", q), ("pattern", pattern),
                ("concat", concat), ("output", out)]:
    print(f"{name:>13}: {tuple(t.shape)}")
# One attention layer's rounding, on each side: the Q, K, V projections (d_model + 1), the
# scores (d_k + 1), a softmax over n keys (n + 4), the mix (n) and the output projection
# (d_model + 1), at the outputs' size.
n = x.shape[1]
MHA_TERMS = 2 * d_model + d_k + 2 * n + 7
identity_close("the written-out forward pass reproduces MultiHeadedAttention", out, out_module,
               terms=2 * MHA_TERMS, chapter="7")

# %% [markdown]
# Which numbers does head $i$ get? `.view` splits the last axis in order, so head $i$'s
# query is entries $i d_k$ to $(i+1) d_k$ of `linears[0](x)`. Since `nn.Linear` computes
# $x A^\top + b$ with `A = weight` stored as `[out, in]`, those entries are
# $x\,(A^\top)_{[:,\; i d_k:(i+1) d_k]} + b_{[i d_k:(i+1) d_k]}$: head $i$ owns a
# contiguous block of *columns* of $A^\top$, which is a block of *rows* of `weight`.

# %%
A, bias = mha.linears[0].weight, mha.linears[0].bias
by_hand = []
with torch.no_grad():
    for i in range(h):
        cols = slice(i * d_k, (i + 1) * d_k)
        by_hand.append(x @ A.T[:, cols] + bias[cols])  # [batch, pos, d_k]
    q_abs = x.abs() @ A.T.abs() + bias.abs()
# each side: a d_model-term dot product and the bias, at the size of |x| |A^T| + |b|
identity_close("head i's queries are x A^T[:, i d_k:(i+1) d_k] + b[i d_k:(i+1) d_k]",
               torch.stack(by_hand, 1), q, terms=2 * (d_model + 1), scale=float(q_abs.max()),
               chapter="7")

# %% [markdown]
# ## The circuit view
#
# ### Per-head weights, TransformerLens's shapes
#
# TransformerLens {cite}`nanda2022transformerlens` stores the same weights per head, in
# the row-vector orientation: `W_Q`, `W_K`, `W_V` of shape `[n_heads, d_model, d_head]`,
# `W_O` of shape `[n_heads, d_head, d_model]`, biases `b_Q`, `b_K`, `b_V` of shape
# `[n_heads, d_head]` and one `b_O` of shape `[d_model]`. From the previous paragraph the
# translation is
#
# $$W_Q^h = (\texttt{linears[0].weight}^\top)_{[:,\; h d_k:(h+1) d_k]},$$
#
# $$W_O^h = (\texttt{linears[3].weight}^\top)_{[h d_k:(h+1) d_k,\; :]},$$
#
# and alike for $W_K$ and $W_V$ with `linears[1]` and `linears[2]`. Head $h$ reads with a
# block of *columns* of the paper's $W^Q$, $W^K$, $W^V$ and writes with a block of *rows* of
# its $W^O$. The package function `tl_weights` does this conversion; we check it slice by
# slice against the formulas.

# %%
w = tl_weights(mha)
for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"):
    print(f"{name}: {tuple(w[name].shape)}")

errors = []
for i in range(h):
    blk = slice(i * d_k, (i + 1) * d_k)
    for name, lin in zip("QKV", mha.linears[:3]):
        errors.append((w[f"W_{name}"][i] - lin.weight.T[:, blk]).abs().max())
        errors.append((w[f"b_{name}"][i] - lin.bias[blk]).abs().max())
    W_O_slice = mha.linears[3].weight.T[blk, :]
    errors.append((w["W_O"][i] - W_O_slice).abs().max())
errors.append((w["b_O"] - mha.linears[3].bias).abs().max())
claim("tl_weights gives W_Q^h = linears[0].weight.T[:, h d_k:(h+1) d_k] (K, V "
      "alike) and W_O^h = linears[3].weight.T[h d_k:(h+1) d_k, :]",
      max(errors), max(errors) == 0, chapter="7")

# %% [markdown]
# The slices match exactly, but that only shows that `tl_weights` does what its docstring
# says. The stronger test is whether TransformerLens itself, given these weights, computes
# the same layer. We build a one-layer TransformerLens model with bidirectional attention
# (an encoder has no causal mask), copy the weights into its attention block, and feed
# both the same input. (This sentence has no padding, so the mask plays no part.)

# %%
tl_cfg = HookedTransformerConfig(
    n_layers=1, d_model=d_model, n_heads=h, d_head=d_k,
    d_vocab=len(T.SRC_VOCAB), n_ctx=T.MAX_LEN, attn_only=True,
    normalization_type=None,
    attention_dir="bidirectional", seed=0)
tl_attn = HookedTransformer(tl_cfg, move_to_device=False).blocks[0].attn
with torch.no_grad():
    for name, value in w.items():
        getattr(tl_attn, name).copy_(value)
    out_tl = tl_attn(x, x, x)
assert bool(src_mask.all())
# the same layer computed by two libraries: one attention layer's rounding on each side
identity_close("TransformerLens's attention, loaded with tl_weights(mha), computes the Annotated Transformer's layer",
               out_tl, out_module, terms=2 * MHA_TERMS, chapter="7")

# %% [markdown]
# ### Exercise 7.1: split a linear map into heads
#
# Write `split_heads(weight, n_heads)` that takes the `weight` of a query, key or value
# `nn.Linear(d_model, d_model)` and returns TransformerLens's `[n_heads, d_model, d_head]`
# tensor. The usual traps are the transpose and the order of the reshape.

# %% tags=["exercise"]
def split_heads(weight, n_heads):
    """nn.Linear weight [n_heads*d_head, d_model]
    -> W [n_heads, d_model, d_head]."""
    # BEGIN SOLUTION
    W = weight.T  # acts on row vectors: [d_model, n_heads * d_head]
    return W.reshape(W.shape[0], n_heads, -1).permute(1, 0, 2)
    # END SOLUTION


checks.ch07_ex1(split_heads)

# %% [markdown]
# ### Concatenate-then-project is a sum over heads
#
# Write $z^h$ for head $h$'s output, a `[pos, d_head]` block. Concatenating the blocks side
# by side and multiplying by $W^O$ multiplies each block by the matching block of rows of
# $W^O$:
#
# $$\operatorname{Concat}(z^1, \dots, z^h)\, W^O =
# \begin{bmatrix} z^1 & \cdots & z^h \end{bmatrix}
# \begin{bmatrix} W_O^1 \\ \vdots \\ W_O^h \end{bmatrix}
# = \sum_h z^h W_O^h .$$
#
# Each head's output is its pattern $A^h$ (rows: queries, columns: keys) applied to its
# values, $z^h = A^h (X W_V^h + \mathbf{1} b_V^h)$, where $X$ is the stream the values are
# read from and $\mathbf{1}$ a column of ones. Every row of $A^h$ sums to 1, so
# $A^h \mathbf{1} = \mathbf{1}$ and the value bias passes through the pattern unchanged.
# Adding the output bias once, the whole layer is
#
# $$\begin{aligned}
# \operatorname{MultiHead}(X) &= \sum_h A^h X W_V^h W_O^h \;+\;
# \mathbf{1}\Big(b_O + \sum_h b_V^h W_O^h\Big) \\
# &= \sum_h A^h X W_{OV}^h + \mathbf{1}\, b_\text{eff}.
# \end{aligned}$$
#
# So $b_V$ and $b_O$ end up in the same place: a single constant vector, the same at every
# position, added after the heads. (TransformerLens can fold $b_V$ into $b_O$ this way when
# it loads a model.) What is left per head is one matrix, $W_{OV}^h = W_V^h W_O^h$, applied to
# the stream and mixed across positions by the pattern. In Elhage et al.'s column-vector
# convention the same matrix is written $W_O^h W_V^h$, the transpose of ours.
#
# Both are identities, true by construction for any weights: checking them shows that the
# code and the algebra agree, and that `tl_weights` reads the right slices, not anything
# about training. We check the block identity and the full identity on every attention
# module of the trained model (two encoder self-attentions, two decoder self-attentions and two decoder
# cross-attentions), on a padded batch of held-out sentences, reading each module's inputs
# and pattern with hooks.

# %%
sentences = held_out[:16]
src_b, tgt_b = T.to_tensors(sentences)
batch_b = T.Batch(src_b, tgt_b, pad=T.PAD)
modules = {}
for i, layer in enumerate(model.encoder.layers):
    modules[f"encoder {i} self"] = layer.self_attn
for i, layer in enumerate(model.decoder.layers):
    modules[f"decoder {i} self"] = layer.self_attn
    modules[f"decoder {i} cross"] = layer.src_attn

inputs, outputs, concats = {}, {}, {}


def recorder(name):
    """Forward hook: keep the module's inputs and output (returns None, so the
    output is left as it is)."""
    def hook(mod, args, out):
        inputs[name], outputs[name] = args, out
    return hook


hooks = []
for name, m in modules.items():
    hooks.append(m.register_forward_hook(recorder(name)))
    hooks.append(m.linears[3].register_forward_pre_hook(   # the concatenation
        lambda mod, args, name=name: concats.update({name: args[0]})))
with torch.no_grad():
    model(batch_b.src, batch_b.tgt, batch_b.src_mask, batch_b.tgt_mask)
    patterns = {name: m.attn.clone() for name, m in modules.items()}
for hk in hooks:
    hk.remove()

got_blocks, got_sum, want, b_eff = [], [], [], {}
block_scale = sum_scale = 0.0
n_k_max = 0
for name, m in modules.items():
    w = tl_weights(m)
    value_in = inputs[name][2]            # X: [batch, pos_k, d_model]
    A = patterns[name]                    # [batch, h, pos_q, pos_k]
    with torch.no_grad():
        b, q_len = concats[name].shape[:2]
        z = concats[name].view(b, q_len, h, d_k)        # [b, q, h, d_k]
        blocks = torch.einsum("bqhe,hem->bqm", z, w["W_O"]) + w["b_O"]
        W_OV = w["W_V"] @ w["W_O"]                      # [h, d_model, d_model]
        per_head = torch.einsum("bhqk,bkd,hdm->bhqm", A, value_in, W_OV)
        folded = torch.einsum("he,hem->m", w["b_V"], w["W_O"])
        b_eff[name] = w["b_O"] + folded
        rebuilt = per_head.sum(1) + b_eff[name]
        # the sizes the roundings are relative to: the products' absolute values
        block_scale = max(block_scale, float((torch.einsum("bqhe,hem->bqm", z.abs(), w["W_O"].abs())
                                              + w["b_O"].abs()).max()))
        abs_OV = w["W_V"].abs() @ w["W_O"].abs()
        sum_scale = max(sum_scale, float((torch.einsum("bhqk,bkd,hdm->bqm", A, value_in.abs(), abs_OV)
                                          + torch.einsum("he,hem->m", w["b_V"].abs(), w["W_O"].abs())
                                          + w["b_O"].abs()).max()))
    n_k_max = max(n_k_max, value_in.shape[1])
    got_blocks.append(blocks.flatten())
    got_sum.append(rebuilt.flatten())
    want.append(outputs[name].flatten())
    print(f"{name:>16}: max error, blocks {(blocks - outputs[name]).abs().max():.1e}, "
          f"sum over heads {(rebuilt - outputs[name]).abs().max():.1e}")
# Blocks: the same d_model-term product (z W_O, by blocks or concatenated) and the bias, on
# each side.
identity_close("Concat(z^1..z^h) W^O + b_O = sum_h z^h W_O^h + b_O, in all 6 attention modules",
               torch.cat(got_blocks), torch.cat(want), terms=2 * (d_model + 1), scale=block_scale,
               chapter="7")
# Sum over heads, a reassociation. Ours: W_V W_O (d_k), X @ (d_model), A @ (n_k), the folded
# bias (d_k + h + 1) and the sum over heads (h). The module's: X W_V + b_V (d_model + 1), A @ (n_k),
# the output projection and b_O (d_model + 1). Both use the module's own pattern A.
SUM_TERMS = 3 * d_model + 2 * d_k + 2 * n_k_max + 2 * h + 3
identity_close("MultiHead(X) = sum_h A^h X W_V^h W_O^h + (b_O + sum_h b_V^h W_O^h), "
               "in all 6 attention modules of the trained model", torch.cat(got_sum), torch.cat(want),
               terms=SUM_TERMS, scale=sum_scale, chapter="7")

# %% [markdown]
# How big is the folded bias $b_\text{eff}$, next to what the heads write?

# %%
ratios = []
for name, m in modules.items():
    # average over real (non-padding) query positions only
    queries = batch_b.src if name.startswith("encoder") else batch_b.tgt
    heads_only = (outputs[name] - b_eff[name]).norm(dim=-1)
    typical = heads_only[queries != T.PAD].mean()
    ratios.append((b_eff[name].norm() / typical).item())
    print(f"{name:>16}: |b_eff| = {b_eff[name].norm():.2f}, "
          f"mean |sum of head terms| = {typical:.2f}")
glue("beff_ratio_max", max(ratios))
glue("beff_ratio_min", min(ratios))
# the value bias alone really is constant across positions once mixed by A
A = patterns["decoder 1 cross"]
w = tl_weights(modules["decoder 1 cross"])
ones_b_V = w["b_V"][None, :, None, :].expand(A.shape[0], h, A.shape[-1], d_k)
mixed = A @ ones_b_V  # every key position holds the same vector b_V^h
# a weighted sum of n_k copies of b_V (n_k roundings) with weights that sum to 1 only to the
# softmax's rounding (n_k + 1), at the size of b_V
identity_close("A^h (1 b_V^h) = 1 b_V^h: the value bias passes through the pattern unchanged", mixed,
               w["b_V"][None, :, None, :].expand_as(mixed), terms=2 * A.shape[-1] + 1,
               scale=float(w["b_V"].abs().max()), chapter="7")
glue("bO_cross", modules["decoder 1 cross"].linears[3].bias.norm().item())

# %% [markdown]
# The constant is between {glue:text}`beff_ratio_min:.0%` and
# {glue:text}`beff_ratio_max:.0%` of the length of the heads' combined write: small next
# to the heads, but a fixed vector added at every position whatever the input, and
# nothing a single head is responsible for. When we attribute a layer's output to its
# heads, it has to be booked separately.
#
# ### Exercise 7.2: the layer as a sum over heads
#
# Write `mha_as_sum(x, pattern, W_V, W_O, b_V, b_O)` returning the attention layer's
# output `[pos, d_model]` from a given pattern, as a sum of per-head terms. Shapes are
# TransformerLens's: `x [pos, d_model]`, `pattern [n_heads, pos_q, pos_k]`,
# `W_V [n_heads, d_model, d_head]`, `W_O [n_heads, d_head, d_model]`,
# `b_V [n_heads, d_head]`, `b_O [d_model]`. Mind where each bias goes.

# %% tags=["exercise"]
def mha_as_sum(x, pattern, W_V, W_O, b_V, b_O):
    """x [pos, d_model], pattern [n_heads, pos_q, pos_k], TransformerLens weights
    -> the attention layer's output [pos_q, d_model], built head by head."""
    # BEGIN SOLUTION
    v = torch.einsum("kd,hde->hke", x, W_V) + b_V[:, None, :]  # [h, k, d_head]
    z = pattern @ v                                            # [h, q, d_head]
    return torch.einsum("hqe,hem->qm", z, W_O) + b_O
    # END SOLUTION


checks.ch07_ex2(mha_as_sum)

# %% [markdown]
# ### Heads as independent writers
#
# In the paper's picture the heads are glued together before $W^O$ sees them, so it is
# tempting to think $W^O$ "mixes" the heads. The sum shows it does not: head $h$'s block of
# $W^O$ multiplies only head $h$'s output. One consequence is that removing a head is
# exact and local. Zero head $h$'s rows of $W^O$ (in `nn.Linear`'s storage, its *columns*
# of `linears[3].weight`) and the layer's output drops by exactly that head's term, at every
# position, while the other heads' terms stay as they were.

# %%
name = "decoder 1 cross"
m = modules[name]
query_in, kv_in, _, mask_in = inputs[name]
w = tl_weights(m)
with torch.no_grad():
    full = m(query_in, kv_in, kv_in, mask_in)
    A = m.attn.clone()
    W_OV = w["W_V"] @ w["W_O"]
    per_head = torch.einsum("bhqk,bkd,hdm->bhqm", A, kv_in, W_OV)
    per_head += (w["b_V"][:, None, :] @ w["W_O"])[None]  # b_V^h W_O^h
    removed = []
    for i in range(h):
        saved = m.linears[3].weight[:, i * d_k:(i + 1) * d_k].clone()
        m.linears[3].weight[:, i * d_k:(i + 1) * d_k] = 0
        ablated = m(query_in, kv_in, kv_in, mask_in)
        m.linears[3].weight[:, i * d_k:(i + 1) * d_k] = saved
        removed.append(full - ablated)
    restored = m(query_in, kv_in, kv_in, mask_in)
    abs_OV = w["W_V"].abs() @ w["W_O"].abs()
    head_scale = float((torch.einsum("bhqk,bkd,hdm->bqm", A, kv_in.abs(), abs_OV)
                        + torch.einsum("he,hem->m", w["b_V"].abs(), w["W_O"].abs())
                        + m.linears[3].bias.abs()).max())
# full - ablated: two output projections (d_model + 1 each) and their difference (1); the
# head's term, reassociated as above (SUM_TERMS covers its path and the module's)
identity_close("zeroing head h's block of W^O removes exactly head h's term A^h (X W_V^h + 1 b_V^h) W_O^h, "
               "for every head", torch.stack(removed, 1), per_head, terms=SUM_TERMS + 2 * d_model + 3,
               scale=head_scale, chapter="7")
# the same forward pass with the same weights again (BLAS may still sum in another order)
identity_close("restoring the block restores the layer", restored, full,
               terms=2 * (2 * d_model + d_k + 2 * kv_in.shape[1] + 7), chapter="7")

# %% [markdown]
# The figure shows both readings of the same weights. On the left is the paper's $W^O$
# in the row-vector orientation, `linears[3].weight.T`, of shape
# `[h * d_head, d_model]`, with the dashed lines marking the four row blocks
# $W_O^0, \dots, W_O^3$. On the right is what each block writes: the size of each head's
# term at each position of one held-out sentence, for the decoder's last cross-attention.
# Each term includes the head's share $b_V^h W_O^h$ of the value bias, so the layer's
# output is the sum of these four terms and $b_O$ (of length {glue:text}`bO_cross:.2f`).

# %%
first = 0
n_tgt = int((batch_b.tgt_y[first] != T.PAD).sum())
tgt_words = T.decode(batch_b.tgt_y[first, :n_tgt].tolist(), T.TGT_VOCAB)
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9, 3.6),
                               gridspec_kw={"width_ratios": [1, 1.3]})
W_O_full = m.linears[3].weight.detach().T
lim = W_O_full.abs().max()
ax0.imshow(W_O_full, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
for i in range(1, h):
    ax0.axhline(i * d_k - 0.5, color="k", ls="--", lw=1)
ax0.set_yticks([i * d_k + d_k / 2 - 0.5 for i in range(h)],
               [f"$W_O^{{{i}}}$" for i in range(h)])
ax0.set_xlabel("d_model (output)")
ax0.set_title("$W^O$ = linears[3].weight.T", fontsize=9)
norms = per_head[first, :, :n_tgt].norm(dim=-1)  # [h, pos]
for i in range(h):
    ax1.bar(torch.arange(n_tgt) + (i - 1.5) * 0.2, norms[i], width=0.2,
            label=f"head {i}")
ax1.set_xticks(range(n_tgt), tgt_words, rotation=45, fontsize=8)
ax1.set_xlabel("decoder position (labelled by the word it predicts)")
ax1.set_ylabel("length of the head's term")
ax1.set_title("each head's write, decoder 1 cross-attention", fontsize=9)
ax1.set_ylim(0, 1.25 * norms.max())
ax1.legend(fontsize=7, ncol=4, loc="upper center")
fig.tight_layout()
plt.show()

# %% [markdown]
# ### What the heads attend to
#
# Because each head has its own pattern, we can ask what each one looks at. The
# cross-attention heads are the easiest to read, because the task has a right answer: the
# decoder position that predicts a target word should look at the source word it
# translates, and in this language the word order changes (the verb moves to the end,
# adjectives move behind their noun). Below are the four cross-attention heads of the last
# decoder layer on one held-out sentence; the black dots mark that true alignment.

# %%
def labels(words_row, vocab, n):
    return T.decode(words_row[:n].tolist(), vocab)


def alignment_dots(k):
    """(decoder position, source position) of the true alignment of
    sentence k (source positions count <s>)."""
    return [(j, s + 1) for j, s in enumerate(T.alignment(sentences[k]))]


k = 0
n_src = int((batch_b.src[k] != T.PAD).sum())
src_labels = labels(batch_b.src[k], T.SRC_VOCAB, n_src)
cross = patterns["decoder 1 cross"][k]
fig, axes = plt.subplots(1, h, figsize=(9, 2.9), sharey=True)
for i, ax in enumerate(axes):
    ax.imshow(cross[i, :n_tgt, :n_src], cmap="Blues", vmin=0, vmax=1)
    ys, xs = zip(*alignment_dots(k))
    ax.scatter(xs, ys, s=6, color="k")
    ax.set_xticks(range(n_src), src_labels, rotation=90, fontsize=7)
    ax.set_title(f"head {i}", fontsize=9)
axes[0].set_yticks(range(n_tgt), tgt_words, fontsize=7)
axes[0].set_ylabel("predicts")
fig.suptitle("decoder layer 1 cross-attention on a held-out sentence "
             "(dots: true alignment)", fontsize=10)
fig.tight_layout()
plt.show()

# %% [markdown]
# Over 200 held-out sentences we count, for every head, how often its strongest weight
# falls on the aligned source word (the package function `cross_attention_alignment`;
# chapter 12 studies these heads in depth).

# %%
hits = cross_attention_alignment(model, held_out[:200])  # [layer, head]
for layer in range(hits.shape[0]):
    print(f"decoder {layer} cross-attention, fraction aligned per head: "
          + ", ".join(f"{v:.2f}" for v in hits[layer].tolist()))
best = int(hits[-1].argmax())
claim("in the last decoder layer, some cross-attention head puts its "
      "largest weight on the aligned source word for over 90% of held-out "
      "target words",
      hits[-1].max(), hits[-1].max() > 0.9, chapter="7")
glue("best_head", best)
glue("best_hits", hits[-1].max().item())
glue("worst_hits", hits[-1].min().item())
n_aligned = int((hits[-1] > 0.5).sum())
# a finding about training: one aligning head would have been enough for the loss
claim("more than one head of the last decoder layer finds the aligned word for over half of the target "
      "words", f"{n_aligned} of {h} heads", n_aligned >= 2, chapter="7")
glue("n_aligned", n_aligned)

# %% [markdown]
# Head {glue:text}`best_head` of the last layer finds the aligned word
# {glue:text}`best_hits:.0%` of the time, and even the weakest head of that layer
# {glue:text}`worst_hits:.0%`; {glue:text}`n_aligned` of its heads find it for more than
# half of the target words. So more than one head has learned a version of the same
# lookup. The explorer shows any head of any attention module on six held-out
# sentences. The encoder's heads and the decoder's self-attention heads are less tidy
# than the cross-attention ones, and no single picture says what they compute; reading
# them needs the QK and OV circuits of chapter 8.

# %%
kinds = {"encoder self-attention": "encoder {} self",
         "decoder self-attention": "decoder {} self",
         "decoder cross-attention": "decoder {} cross"}


def draw_head(kind="decoder cross-attention", layer=1, head=best,
              sentence=0):
    A = patterns[kinds[kind].format(layer)][sentence, head]
    n_s = int((batch_b.src[sentence] != T.PAD).sum())
    n_t = int((batch_b.tgt_y[sentence] != T.PAD).sum())
    src_l = labels(batch_b.src[sentence], T.SRC_VOCAB, n_s)
    tgt_in = labels(batch_b.tgt[sentence], T.TGT_VOCAB, n_t)
    tgt_out = labels(batch_b.tgt_y[sentence], T.TGT_VOCAB, n_t)
    rows, cols = {"encoder self-attention": (src_l, src_l),
                  "decoder self-attention": (tgt_out, tgt_in),
                  "decoder cross-attention": (tgt_out, src_l)}[kind]
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    im = ax.imshow(A[:len(rows), :len(cols)], cmap="Blues", vmin=0, vmax=1)
    if kind == "decoder cross-attention":
        ys, xs = zip(*alignment_dots(sentence))
        ax.scatter(xs, ys, s=10, color="k")
    ax.set_xticks(range(len(cols)), cols, rotation=90, fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    key_side = "source" if cols is src_l else "decoder input"
    query_side = ("source" if rows is src_l
                  else "labelled by the word it predicts")
    ax.set_xlabel(f"key position ({key_side})")
    ax.set_ylabel(f"query position ({query_side})", fontsize=8)
    is_cross = kind == "decoder cross-attention"
    dots = " (dots: true alignment)" if is_cross else ""
    ax.set_title(f"{kind}, layer {layer}, head {head}, sentence {sentence}{dots}",
                 fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.04)
    fig.tight_layout()
    plt.show()


explore(draw_head, kind=list(kinds), layer=[0, 1], head=list(range(h)),
        sentence=(0, 5, 1))

# %% [markdown]
# ### Many heads, many jobs: a real model on real text
#
# The toy model has 24 heads and a task with a known answer. A real language model has no
# answer key, but the same reading applies: every head computes its own pattern and writes
# its own term. SmolLM2-135M-Instruct {cite}`allal2025smollm2` (the 4-bit copy described in
# chapter {doc}`11_layernorm`) has 30 layers of 9 heads. Chapter {doc}`06_attention` found
# one of them attending to the previous token. Here we look for a second job, and then at
# several heads side by side on the same text.
#
# A **duplicate-token head** attends from a token to the earlier occurrences of the same
# token, so that the position learns "I have been seen before" (Wang et al.
# {cite}`wang2023interpretability` found such heads in GPT-2). Its score,
# `circuitbook.heads.duplicate_token_pattern_score`, is the share of attention that a repeated
# token puts on its earlier copies, averaged over the repeated tokens. We count only tokens
# that begin a word or continue one (a letter, possibly after a space), since repeated
# commas and line breaks are everywhere and would reward a head that just likes
# punctuation. The text is the first 96 tokens of eight scenes from eight plays, other
# scenes than chapter 6 read, tokenised by SmolLM2's tokenizer. The baseline is again the
# uniform causal pattern: a head that spreads its attention evenly over the past gives
# each earlier copy $1/(q+1)$.

# %%
import re

from circuitbook.data.corpus import shakespeare_scenes
from circuitbook.heads import (
    duplicate_token_pattern_score,
    prev_token_pattern_score,
    uniform_causal_pattern,
)
from circuitbook.models.pretrained import load_smollm2
from circuitbook.viz import attention_pattern_view, heatmap

torch.set_grad_enabled(False)  # from here on we only read a trained model
smol, tok = load_smollm2()
S_L, S_H = smol.cfg.n_layers, smol.cfg.n_heads
scenes = shakespeare_scenes()
PASSAGES = [40 + 90 * i for i in range(8)]  # eight scenes, each from another play
N_TOK = 96
text_ids = torch.stack([tok(scenes[i][1], return_tensors="pt").input_ids[0, :N_TOK]
                        for i in PASSAGES])                      # [8, 96]
pieces = [tok.convert_ids_to_tokens(row.tolist()) for row in text_ids]
is_word = torch.tensor([[re.match(r"^Ġ?[A-Za-z]", t) is not None for t in row]
                        for row in pieces])                      # "Ġ" marks a space
earlier = (text_ids[:, :, None] == text_ids[:, None, :]).tril(-1).any(-1)
n_rep = (earlier & is_word).sum(-1)                              # repeated words per passage
print("plays:", ", ".join(scenes[i][0] for i in PASSAGES))
print("repeated word tokens per passage:", n_rep.tolist())

# one forward pass; every layer's pattern [8, 9, 96, 96] is kept (80 MB in all)
_, cache = smol.run_with_cache(text_ids, names_filter=lambda name: name.endswith("hook_pattern"))
A_all = torch.stack([cache["pattern", l] for l in range(S_L)], 1)  # [8, 30, 9, q, k]
del cache
# scored one passage at a time, so that we also see how much the score varies
def dup_scores(b):
    """[30, 9]: every head's duplicate-token score on passage b alone."""
    return torch.stack([duplicate_token_pattern_score(A_all[b, l][None], text_ids[b:b + 1],
                                                      queries=is_word[b:b + 1]) for l in range(S_L)])


per_passage = torch.stack([dup_scores(b) for b in range(len(PASSAGES))])  # [8, 30, 9]
weights = n_rep / n_rep.sum()
dup = (weights[:, None, None] * per_passage).sum(0)   # the score over all repeated tokens
uniform = uniform_causal_pattern(N_TOK)[None, None].expand(len(PASSAGES), 1, N_TOK, N_TOK)
uniform_dup = duplicate_token_pattern_score(uniform, text_ids, queries=is_word).item()
top = dup.flatten().topk(5)
top_heads = [divmod(int(i), S_H) for i in top.indices]
DL, DH = top_heads[0]
print("top duplicate-token heads:",
      ", ".join(f"L{l}H{h} {v:.2f}" for (l, h), v in zip(top_heads, top.values)))
print(f"baselines: uniform causal pattern {uniform_dup:.3f}, "
      f"mean over all heads {dup.mean():.3f}")
heatmap(dup, [f"H{h}" for h in range(S_H)], [f"L{l}" for l in range(S_L)],
        title="SmolLM2-135M: duplicate-token score of every head, 8 passages",
        x_title="head", y_title="layer", zmin=0, zmax=1, outline=[(DL, DH)])

# %%
best = per_passage[:, DL, DH]
ranks = (per_passage.flatten(1) > best[:, None]).sum(-1)         # 0: the best head there
print(f"L{DL}H{DH} per passage:", " ".join(f"{v:.2f}" for v in best.tolist()))
print("its rank among the 270 heads, per passage (0 = first):", ranks.tolist())
best_dup = top.values[0].item()
# Findings, which could have failed: a score 10 times the uniform pattern's is a head with
# a preference; a head in the top 5 of 270 on every passage is not one passage's accident.
claim(f"SmolLM2's best duplicate-token head on Shakespeare, L{DL}H{DH}, gives repeated words over 10 "
      "times the attention to their earlier copies that the uniform causal pattern gives",
      f"{best_dup:.3f} vs uniform {uniform_dup:.3f}, mean over heads {dup.mean():.3f}",
      best_dup > 10 * uniform_dup, chapter="7")
claim(f"L{DL}H{DH} is among the top 5 of the 270 heads on each of the eight passages",
      f"ranks {ranks.tolist()}", bool((ranks < 5).all()), chapter="7")
glue("dup_head", f"L{DL}H{DH}")
glue("dup_best", best_dup)
glue("dup_lo", best.min().item())
glue("dup_hi", best.max().item())
glue("dup_uniform", uniform_dup)
glue("dup_mean", dup.mean().item())
glue("dup_n", int(n_rep.sum()))
glue("dup_runner_up", f"L{top_heads[1][0]}H{top_heads[1][1]}")
glue("dup_runner_up_score", top.values[1].item())

# %% [markdown]
# Over the {glue:text}`dup_n` repeated word tokens, head {glue:text}`dup_head` puts
# {glue:text}`dup_best:.2f` of a repeated word's attention on its earlier copies, where the
# uniform causal pattern puts {glue:text}`dup_uniform:.3f` and the average head
# {glue:text}`dup_mean:.3f`. The score moves a lot from passage to passage (from
# {glue:text}`dup_lo:.2f` to {glue:text}`dup_hi:.2f`: each passage has only a few repeated
# words), and the job is not this head's alone: the runner-up, {glue:text}`dup_runner_up`,
# scores {glue:text}`dup_runner_up_score:.2f`. This is not an induction head (chapter
# {doc}`17_induction_heads`): that one looks at the token *after* the earlier copy, this
# one at the copy itself.
#
# **Grouped-query attention.** SmolLM2's 9 query heads per layer share 3 key-value heads:
# query heads 0-2 read key and value head 0, heads 3-5 head 1, heads 6-8 head 2. So the
# best duplicate-token head shares its keys and its values with two other heads, and only
# its queries are its own. Does it share its job?

# %%
group = S_H // smol.cfg.n_key_value_heads
siblings = list(range(DH // group * group, DH // group * group + group))
same_kv = all(torch.equal(smol.W_K[DL, s], smol.W_K[DL, DH])
              and torch.equal(smol.W_V[DL, s], smol.W_V[DL, DH]) for s in siblings)
identity(f"in TransformerLens, heads {siblings} of layer {DL} have the same W_K and W_V (one key-value head)",
         same_kv, same_kv, chapter="7")
sib_scores = dup[DL, siblings]
print(f"duplicate-token scores of layer {DL}'s heads {siblings}:",
      " ".join(f"{v:.2f}" for v in sib_scores.tolist()))
low = sib_scores.min().item()
# a finding: sharing keys could have meant sharing the pattern
claim(f"a head sharing L{DL}H{DH}'s keys and values has under half its duplicate-token score",
      f"{low:.3f} vs {best_dup:.3f}", low < best_dup / 2, chapter="7")
for i, v in enumerate(sib_scores.tolist()):
    glue(f"sib_{i}", v)
glue("sib_low", low)
glue("siblings", ", ".join(f"L{DL}H{s}" for s in siblings))

# %% [markdown]
# Heads {glue:text}`siblings` score {glue:text}`sib_0:.2f`, {glue:text}`sib_1:.2f` and
# {glue:text}`sib_2:.2f`: the same keys, read with
# different queries, give different patterns. Grouped-query attention shares the "what I
# offer" side of the lookup between heads, not the "what I look for" side.
#
# Finally, several jobs side by side. On the passage with the most repeated words we pick
# out, besides the two heads found so far, the heads that are most extreme at two more
# simple things: attending to the *first* token, and attending to the *current* token.

# %%
show = int(n_rep.argmax())                 # the passage with the most repeated words
A_all = A_all[show]                        # [30, 9, q, k]
first_share = A_all[:, :, 1:, 0].mean(-1)                        # [30, 9]
self_share = A_all.diagonal(dim1=-2, dim2=-1)[..., 1:].mean(-1)
prev_here = torch.stack([prev_token_pattern_score(A_all[l][None]) for l in range(S_L)])
jobs = {"duplicate token": (DL, DH),
        "previous token": divmod(int(prev_here.argmax()), S_H),
        "first token": divmod(int(first_share.argmax()), S_H),
        "current token": divmod(int(self_share.argmax()), S_H)}
for job, (l, hd) in jobs.items():
    print(f"{job:>16}: L{l}H{hd}  first {first_share[l, hd]:.2f}, current "
          f"{self_share[l, hd]:.2f}, previous {prev_here[l, hd]:.2f}")
resting = (first_share > 0.5).float().mean().item()
uniform_first = uniform_causal_pattern(N_TOK)[1:, 0].mean().item()
# a finding: the uniform pattern gives the first token only uniform_first on average
claim("on this passage over a quarter of SmolLM2's heads give more than half of their attention "
      "(averaged over queries after the first) to the first token", f"{resting:.0%} of 270 heads",
      resting > 0.25, chapter="7")
glue("resting", resting)
firsts = {row[0] for row in pieces}
claim("all eight passages start with the same token, the opening of a scene heading",
      firsts, len(firsts) == 1, chapter="7")
glue("first_tokens", repr(firsts.pop()))
glue("uniform_first", uniform_first)
n_show = 48
glue("n_show_tok", n_show)
names = [f"L{l}H{hd} ({job})" for job, (l, hd) in jobs.items()]
attention_pattern_view(pieces[show][:n_show],
                       torch.stack([A_all[l, hd, :n_show, :n_show] for l, hd in jobs.values()]),
                       head_names=names)

# %% [markdown]
# Four heads, four jobs, on the same {glue:text}`n_show_tok` tokens (pick a head, hover a
# token; `Ġ` marks a space and `Ċ` a line break in SmolLM2's tokens). The first-token
# head is the most extreme case of something common: {glue:text}`resting:.0%` of all
# heads put more than half their attention on the first token, where the uniform causal
# pattern would put {glue:text}`uniform_first:.3f`. Here the first token is
# {glue:text}`first_tokens` in all eight passages, the mark that opens a scene heading,
# with nothing to say about the text; attention must sum to one, and a head with nothing to do
# seems to park its weight there. (Such "attention sinks" are reported in many trained models
# {cite}`xiao2023efficient`.) Reading what any of these heads *writes*, rather than where
# it looks, needs the OV circuit of chapter {doc}`08_qk_ov`.

# %% [markdown]
# ## Summary
#
# - `MultiHeadedAttention` stores all heads in four `nn.Linear(d_model, d_model)` maps; the
#   `.view(batch, pos, h, d_k).transpose(1, 2)` reshaping gives head $i$ the $i$-th block
#   of $d_k$ output features, i.e. a block of columns of $W = $ `weight.T`.
# - In TransformerLens's shapes, $W_Q^h$ = `linears[0].weight.T[:, h d_k:(h+1) d_k]` (and
#   $W_K$, $W_V$ alike) and $W_O^h$ = `linears[3].weight.T[h d_k:(h+1) d_k, :]`; a
#   TransformerLens attention layer loaded this way computes the same outputs.
# - $\operatorname{Concat}(\text{heads})\,W^O = \sum_h z^h W_O^h$, so the layer is
#   $\sum_h A^h X W_V^h W_O^h$ plus one constant vector $b_O + \sum_h b_V^h W_O^h$: the value
#   bias passes through the pattern unchanged. We checked this on all six attention modules
#   of the trained model, and that zeroing one head's block of $W^O$ removes exactly that
#   head's term.
# - The heads of the trained model attend to different things; in the last decoder layer's
#   cross-attention the best head looks at the source word being translated
#   {glue:text}`best_hits:.0%` of the time.
# - In SmolLM2-135M on Shakespeare, head {glue:text}`dup_head` attends from a repeated
#   word to its earlier copies ({glue:text}`dup_best:.2f` of its attention; a uniform
#   causal pattern: {glue:text}`dup_uniform:.3f`), while a head sharing its keys and values
#   (grouped-query attention) scores {glue:text}`sib_low:.2f`; other heads attend to the
#   previous, the current or the first token.
