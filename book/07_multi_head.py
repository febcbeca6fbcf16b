# %% [markdown]
# # 7. Multi-head attention
#
# One attention pattern lets a position take one weighted average of the others. A
# transformer layer runs several attention *heads* side by side, each with its own
# pattern. This chapter follows the Annotated Transformer's `MultiHeadedAttention` line by
# line, through the reshaping that cuts four big matrices into heads, and maps its weights
# exactly onto TransformerLens's per-head shapes. Then it derives the identity at the
# heart of the circuits framework, and checks it on the trained toy translation model:
# the paper's "concatenate the heads, then project" is the same computation as "every
# head writes its own term into the residual stream, and the terms add up", with the two
# bias vectors accounted for exactly. Last, it reads several heads of SmolLM2 (chapter
# {doc}`04_embeddings`), whose heads share keys and values in groups
# (grouped-query attention), shows that the sum over heads survives the sharing, and
# asks whether heads that share keys and values share a job.
#
# The first cell imports what the chapter uses; the collapsed cell after it counts the
# roundings of one attention layer, for the chapter's checks. (A second collapsed cell,
# after the layer has been written as a sum over heads, counts the roundings of that sum.)

# %% tags=["hide-input"]
import warnings

import matplotlib.pyplot as plt
import torch
from transformer_lens import HookedTransformer, HookedTransformerConfig

from circuitbook import checks
from circuitbook.book import (Null, finding, glue, identity, identity_close,
                              null_test, observation, student_t_quantile)
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


# %% tags=["hide-input"]
# Rounding bookkeeping. A check "equal to rounding" passes when the largest
# difference is at most terms * eps * scale, terms counting the roundings of
# the longer computation (see the introduction). This function counts them
# for one attention layer.
def attention_terms(d_model, d_k, n):
    """One attention layer, each side: the Q, K, V projections (d_model + 1),
    the scores (d_k + 1), a softmax over n keys (n + 4), the mix (n) and the
    output projection (d_model + 1); at the outputs' size."""
    return 2 * (2 * d_model + d_k + 2 * n + 7)

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
# $W^O \in \mathbb{R}^{h d_\text{head} \times d_\text{model}}$. In the encoder-decoder's
# self-attention $Q$, $K$ and $V$ are all the (normalised) residual stream; in the
# decoder's cross-attention $Q$ comes from the decoder and $K = V$ is the encoder's
# memory. (In the book's shortformer toys, chapter {doc}`06_attention`, $Q$ and $K$
# read the stream plus the position's embedding and $V$ the stream alone.)
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
MHA_TERMS = attention_terms(d_model, d_k, x.shape[1])
identity_close("the written-out forward pass reproduces MultiHeadedAttention",
               out, out_module, terms=MHA_TERMS, chapter="7")

# %% [markdown]
# ### Exercise 7.1: split a linear map into heads
#
# Write `split_heads(weight, n_heads)` that takes the `weight` of a query, key or value
# `nn.Linear(d_model, d_model)` and returns TransformerLens's `[n_heads, d_model, d_head]`
# tensor. Work it out from the forward pass above (how `.view` splits the last axis, and what
# `nn.Linear` stores) before the next cells spell it out.

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
# each side: a d_model-term dot product and the bias, at |x| |A^T| + |b|
identity_close("head i's queries are x A^T[:, i d_k:(i+1) d_k] "
               "+ b[i d_k:(i+1) d_k]", torch.stack(by_hand, 1), q,
               terms=2 * (d_model + 1), scale=float(q_abs.max()), chapter="7")

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
identity("tl_weights gives W_Q^h = linears[0].weight.T[:, h d_k:(h+1) d_k] "
         "(K, V alike) and W_O^h = linears[3].weight.T[h d_k:(h+1) d_k, :]",
         max(errors), bool(max(errors) == 0), chapter="7")

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
# the same layer computed by two libraries
identity_close("TransformerLens's attention, loaded with tl_weights(mha), "
               "computes the Annotated Transformer's layer", out_tl,
               out_module, terms=MHA_TERMS, chapter="7")

# %% [markdown]
# ### Exercise 7.2: the layer as a sum over heads
#
# Before the next section derives it, write it yourself. Write `mha_as_sum` (arguments
# `x, pattern, W_V, W_O, b_V, b_O`) returning the attention layer's output `[pos, d_model]`
# from a given pattern, as a sum of per-head terms, one for each head's write into the
# stream. Shapes are TransformerLens's: `x [pos, d_model]`, `pattern [n_heads, pos_q, pos_k]`,
# `W_V [n_heads, d_model, d_head]`, `W_O [n_heads, d_head, d_model]`,
# `b_V [n_heads, d_head]`, `b_O [d_model]`. Mind where each bias goes.

# %% tags=["exercise"]
def mha_as_sum(x, pattern, W_V, W_O, b_V, b_O):
    """x [pos, d_model], pattern [n_heads, pos_q, pos_k], TransformerLens
    weights -> the attention layer's output [pos_q, d_model], head by head."""
    # BEGIN SOLUTION
    v = torch.einsum("kd,hde->hke", x, W_V) + b_V[:, None, :]  # [h, k, d_head]
    z = pattern @ v                                            # [h, q, d_head]
    return torch.einsum("hqe,hem->qm", z, W_O) + b_O
    # END SOLUTION


checks.ch07_ex2(mha_as_sum)

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
# $X$ and mixed across positions by the pattern. In this pre-norm model $X$ is not the
# residual stream itself but a LayerNorm's output, its gain and bias included. In Elhage
# et al.'s column-vector convention the same matrix is written $W_O^h W_V^h$, the
# transpose of ours.
#
# Both are identities, true by construction for any weights: checking them shows that the
# code and the algebra agree, and that `tl_weights` reads the right slices, not anything
# about training. We check the block identity and the full identity on every attention
# module of the trained model (two encoder self-attentions, two decoder self-attentions and two decoder
# cross-attentions), on a padded batch of held-out sentences, reading each module's inputs
# and pattern with hooks.

# %% tags=["hide-input"]
# Rounding bookkeeping for the sum over heads, as for attention_terms in the
# first cells: the roundings on each side, and the sizes they are relative to.
def head_sum_terms(d_model, d_k, n_k, h):
    """sum_h A^h X W_V^h W_O^h + b_eff, reassociated. Ours: W_V W_O (d_k),
    X @ (d_model), A @ (n_k), the folded bias (d_k + h + 1), the sum over
    heads (h). The module's: X W_V + b_V (d_model + 1), A @ (n_k), the output
    projection and b_O (d_model + 1)."""
    return 3 * d_model + 2 * d_k + 2 * n_k + 2 * h + 3


def block_size(z, W_O, b_O):
    """|z| |W_O| + |b_O| at its largest: z [b, q, h, d_k], W_O [h, d_k, m]."""
    return float((torch.einsum("bqhe,hem->bqm", z.abs(), W_O.abs())
                  + b_O.abs()).max())


def head_sum_size(A, X, w):
    """The products' sizes in sum_h A^h (X W_V^h + b_V^h) W_O^h + b_O, for a
    pattern A [b, h, q, k], values' input X [b, k, d] and tl_weights w."""
    abs_OV = w["W_V"].abs() @ w["W_O"].abs()
    return float((torch.einsum("bhqk,bkd,hdm->bqm", A, X.abs(), abs_OV)
                  + torch.einsum("he,hem->m", w["b_V"].abs(), w["W_O"].abs())
                  + w["b_O"].abs()).max())


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
        block_scale = max(block_scale, block_size(z, w["W_O"], w["b_O"]))
        sum_scale = max(sum_scale, head_sum_size(A, value_in, w))
    n_k_max = max(n_k_max, value_in.shape[1])
    got_blocks.append(blocks.flatten())
    got_sum.append(rebuilt.flatten())
    want.append(outputs[name].flatten())
# Blocks: the same d_model-term product (z W_O, by blocks or concatenated)
# and the bias, on each side.
identity_close("Concat(z^1..z^h) W^O + b_O = sum_h z^h W_O^h + b_O, in all 6 "
               "attention modules", torch.cat(got_blocks), torch.cat(want),
               terms=2 * (d_model + 1), scale=block_scale, chapter="7")
SUM_TERMS = head_sum_terms(d_model, d_k, n_k_max, h)
identity_close("MultiHead(X) = sum_h A^h X W_V^h W_O^h + (b_O + sum_h b_V^h "
               "W_O^h), in all 6 attention modules of the trained model",
               torch.cat(got_sum), torch.cat(want), terms=SUM_TERMS,
               scale=sum_scale, chapter="7")

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
# n_k copies of b_V summed (n_k roundings) with weights that sum to 1 only
# to the softmax's rounding (n_k + 1), at the size of b_V
identity_close("A^h (1 b_V^h) = 1 b_V^h: the value bias passes through the "
               "pattern unchanged", mixed,
               w["b_V"][None, :, None, :].expand_as(mixed),
               terms=2 * A.shape[-1] + 1, scale=float(w["b_V"].abs().max()),
               chapter="7")
glue("bO_cross", modules["decoder 1 cross"].linears[3].bias.norm().item())

# %% [markdown]
# The constant is between {glue:text}`beff_ratio_min:.0%` and
# {glue:text}`beff_ratio_max:.0%` of the mean length of the heads' combined write (on these
# 16 sentences): shorter than the heads' write in every module, small in some and a
# sizeable part of it in others (the printout shows where it is largest), and in all of them a fixed
# vector added at every position whatever the input. Only $b_O$ in it belongs to no head:
# each head's share of the value bias, $b_V^h W_O^h$, comes from that head's own weights
# (zeroing the head removes it, as the check below shows). Here the constant, and so the
# ratio above, holds both; the heads' combined write is taken without them. When we
# attribute a layer's output to its heads, $b_O$ has to be booked separately, and each
# head's constant share can go with the head (as the figure below does) or with $b_O$.

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
# full - ablated: two output projections (d_model + 1 each) and their
# difference; the head's term, reassociated as above
identity_close("zeroing head h's block of W^O removes exactly head h's term "
               "A^h (X W_V^h + 1 b_V^h) W_O^h, for every head",
               torch.stack(removed, 1), per_head,
               terms=SUM_TERMS + 2 * d_model + 3,
               scale=head_sum_size(A, kv_in, w), chapter="7")
# the same forward pass with the same weights again (BLAS may add in
# another order)
identity_close("restoring the block restores the layer", restored, full,
               terms=attention_terms(d_model, d_k, kv_in.shape[1]),
               chapter="7")

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
# chapter 12 studies these heads in depth). A head that looked at a source position
# chosen at random would score about one over the sentence's length; the null is the
# best of four such heads, simulated on the same sentences (199 draws), since we report
# the best of four.

# %%
eval_sentences = held_out[:200]
hits = cross_attention_alignment(model, eval_sentences)  # [layer, head]
for layer in range(hits.shape[0]):
    print(f"decoder {layer} cross-attention, fraction aligned per head: "
          + ", ".join(f"{v:.2f}" for v in hits[layer].tolist()))
best = int(hits[-1].argmax())
src_eval, _ = T.to_tensors(eval_sentences)
n_src = (src_eval != T.PAD).sum(-1)                     # positions to pick
n_targets = torch.tensor([len(T.alignment(s)) for s in eval_sentences])
chance = n_src.repeat_interleave(n_targets).double().reciprocal()  # per word
g_chance = torch.Generator().manual_seed(70)
picks = torch.rand(199, h, len(chance), generator=g_chance,
                   dtype=torch.float64)
best_of_random = (picks < chance).double().mean(-1).max(-1).values  # [199]
finding("in the last decoder layer, the best cross-attention head puts its "
        "largest weight on the aligned source word far more often than a "
        "head looking at random", hits[-1].max(),
        null=Null.draws("the best of 4 heads picking a source position at "
                        "random, 199 draws", best_of_random), chapter="7")
# the same null for the weakest head: the best of four random heads is a
# stricter bar than one random head
finding("so does its weakest cross-attention head", hits[-1].min(),
        null=Null.draws("the best of 4 heads picking a source position at "
                        "random, 199 draws", best_of_random), chapter="7")
glue("best_head", best)
glue("best_hits", hits[-1].max().item())
glue("worst_hits", hits[-1].min().item())
glue("chance_hits", chance.mean().item())
# a head that ignores the words and looks a fixed distance d from its own
# position (source position j + d for decoder position j), best d
aligned = torch.cat([torch.tensor(T.alignment(ws)) + 1 for ws in eval_sentences])
dec_pos = torch.cat([torch.arange(len(T.alignment(ws)))
                     for ws in eval_sentences])
offset_hits = max((aligned == dec_pos + d).double().mean().item()
                  for d in range(-T.MAX_LEN, T.MAX_LEN))
observation("the best fixed-distance head (source position j + d for "
            "decoder position j, the best d): share of target words whose "
            "aligned source word it looks at", f"{offset_hits:.3f}",
            chapter="7")
glue("offset_hits", offset_hits)
n_aligned = int((hits[-1] > 0.5).sum())
observation("heads of the last decoder layer that find the aligned word for "
            "over half of the target words", f"{n_aligned} of {h}",
            chapter="7")
glue("n_aligned", n_aligned)

# %% [markdown]
# Head {glue:text}`best_head` of the last layer finds the aligned word
# {glue:text}`best_hits:.0%` of the time, where a head looking at random would find it
# {glue:text}`chance_hits:.0%` of the time, and even the weakest head of that layer
# finds it {glue:text}`worst_hits:.0%` of the time; {glue:text}`n_aligned` of its heads
# find it for more than half of the target words. Set beside the best of four heads
# looking at random, the weakest head is far above it too (the second check above). A
# head could beat chance without reading any word, by looking a fixed distance from its
# own position, since the word order changes only in places; the best such distance
# finds the aligned word {glue:text}`offset_hits:.0%` of the time, well below the weakest
# head. A fixed distance is not the best rule that reads no word, though: a rule that
# picks a source position from the source length and the target position does much
# better, and on chapter {doc}`12_cross_attention`'s held-out sentences it comes close
# to the weakest head. So these numbers alone do not show that a head reads the words.
# Chapter 12 sets the heads beside that rule, and a shuffle test there, which keeps
# what each head does by position, shows that each of them reads the sentence. Here we
# conclude only that every head of that layer lands on the aligned word more often than
# chance and any fixed distance (one model, one seed, 200 sentences of one toy
# language). The explorer shows any head of any attention module on six held-out
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
    ax.set_title(f"{kind}, layer {layer}, head {head}, "
                 f"sentence {sentence}{dots}", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.04)
    fig.tight_layout()
    plt.show()


explore(draw_head, kind=list(kinds), layer=[0, 1], head=list(range(h)),
        sentence=(0, 5, 1))

# %% [markdown]
# ### Many heads, many jobs: a real model on real text
#
# The toy model has 24 heads and a task with a known answer. A real language model has
# no answer key, but the same reading applies: every head computes its own pattern and
# writes its own term. SmolLM2 (SmolLM2-135M-Instruct read from 4-bit weights, chapter
# {doc}`04_embeddings`) has 30 layers of 9 heads.
# Chapter {doc}`06_attention` found one of them attending to the previous token. Here we
# look for a second job, and then at several heads side by side on the same text.
#
# A **duplicate-token head** attends from a token to the earlier occurrences of the same
# token, so that the position learns "I have been seen before" (Wang et al.
# {cite}`wang2023interpretability` found such heads in GPT-2 small). Its score
# (`duplicate_token_pattern_score`, in `circuitbook.heads`) is the share of attention
# that a repeated token puts on its earlier copies, averaged over the repeated tokens.
# We count only tokens that begin a word or continue one (a letter, possibly after a
# space), since repeated commas and line breaks are everywhere and would reward a head
# that just likes punctuation. The text is the first 96 tokens of eight scenes from
# eight plays, none of them a play chapter 6 read, tokenised by SmolLM2's tokenizer.
#
# Two references. The uniform causal pattern, which gives each earlier copy
# $1/(q+1)$. And a null for the *best* of 270 heads: the same 270 patterns scored
# against the same text with its tokens shuffled within each passage (99 draws). A
# shuffled copy is a random earlier position, so the null is the best score a head
# would get for where it looks anyway, at the first token, the previous one, or
# anywhere, with the repeats in the wrong places. The collapsed cell loads the model
# and the text, and runs the model once, keeping every layer's patterns and, for the
# grouped-query checks below, its scores, inputs, rotated keys and outputs; it also
# defines the sizes the rounding bounds of those checks are relative to.

# %% tags=["hide-input"]
import itertools
import math
import re
import textwrap
from collections import Counter

from circuitbook.data.corpus import shakespeare_scenes
from circuitbook.heads import (
    duplicate_token_pattern_score,
    prev_token_pattern_score,
    uniform_causal_pattern,
)
from circuitbook.models import load_pretrained
from circuitbook.models.pretrained import smollm2_gguf_tensors
from circuitbook.viz import attention_pattern_view, heatmap

torch.set_grad_enabled(False)  # from here on we only read a trained model
smol = load_pretrained("smollm2-135m")
tok = smol.tokenizer
S_L, S_H = smol.cfg.n_layers, smol.cfg.n_heads
scenes = shakespeare_scenes()
# every 90th scene from the 40th, eight scenes of eight plays, except that
# the 130th is chapter 6's Edward III scene: the first scene of the next
# play, Henry IV part 1, takes its place, so no play is one chapter 6 read
PASSAGES = [40, 148, 220, 310, 400, 490, 580, 670]
N_TOK = 96
text_ids = torch.stack([tok(scenes[i][1], return_tensors="pt",
                            add_special_tokens=False)
                        .input_ids[0, :N_TOK] for i in PASSAGES])  # [8, 96]
pieces = [tok.convert_ids_to_tokens(row.tolist()) for row in text_ids]
is_word = torch.tensor([[re.match(r"^Ġ?[A-Za-z]", t) is not None for t in row]
                        for row in pieces])              # "Ġ" marks a space
print(textwrap.fill("plays: " + ", ".join(scenes[i][0] for i in PASSAGES),
                    79))
# every layer's pattern and scores [8, 9, 96, 96] (80 MB each), the
# attention's input (RMSNorm before its weight), rotated keys and output
keep = ("hook_pattern", "hook_attn_scores", "ln1.hook_normalized",
        "hook_rot_k", "hook_attn_out")
_, cache = smol.run_with_cache(text_ids,
                               names_filter=lambda n: n.endswith(keep))
A_all = torch.stack([cache["pattern", l] for l in range(S_L)], 1)
# [8 passages, 30 layers, 9 heads, q, k]


# Rounding, entry by entry: a product's error is at most terms * eps times
# the same product of absolute values (Higham, ch. 3). The two checks below
# divide each entry's error by that size, so one large entry (SmolLM2's
# first token is far larger than the rest) does not loosen the others.
def gqa_sum_sizes(A, X, W_V_per_head, W_O):
    """[b, q, d_model]: the products' sizes in sum_h A^h X W_V^kv(h) W_O^h,
    for A [b, h, q, k], X [b, k, d_model], W_V_per_head [h, d_model,
    d_head], W_O [h, d_head, d_model]."""
    return (A @ (X.abs()[:, None] @ W_V_per_head.abs())
            @ W_O.abs()).sum(1)


def rotary_score_sizes(X, W_Q, k_rot, d_head):
    """[b, q, k]: the size each rotary score's rounding is relative to,
    |X| |W_Q| with each plane's two coordinates added (the rotation mixes
    them), dotted with |k_rot| [b, k, d_head], over sqrt(d_head)."""
    q_abs = X.abs() @ W_Q.abs()
    q_abs = q_abs + q_abs.roll(d_head // 2, -1)   # plane (m, m + d_head/2)
    return q_abs @ k_rot.abs().mT / math.sqrt(d_head)

# %%
def copies(ids, words):
    """[passage, q, k] weights: 1 / (number of repeated word tokens) where key
    k holds an earlier copy of query q's token and q is a word token."""
    same = (ids[:, :, None] == ids[:, None, :]).tril(-1)   # earlier copies
    repeated = same.any(-1) & words                        # scored queries
    return (same & repeated[:, :, None]).double() / repeated.sum()


A_64 = A_all.double()


def dup_all(weights, patterns=A_64):
    """Every head's duplicate-token score over all repeated word tokens."""
    return torch.einsum("blhqk,bqk->lh", patterns, weights.to(patterns.dtype))


n_rep = ((text_ids[:, :, None] == text_ids[:, None, :]).tril(-1).any(-1)
         & is_word).sum(-1)                            # repeated words
dup = dup_all(copies(text_ids, is_word))               # [30, 9]
per_passage = torch.stack([
    torch.stack([duplicate_token_pattern_score(
        A_all[b, l][None], text_ids[b:b + 1], queries=is_word[b:b + 1])
        for l in range(S_L)]) for b in range(len(PASSAGES))])  # [8, 30, 9]
# the same score, passage by passage with the package, then pooled
pooled = (n_rep[:, None, None] / n_rep.sum() * per_passage).sum(0)
identity_close("the pooled score is the package's per-passage score, "
               "weighted by each passage's repeated words", dup, pooled,
               terms=2 * N_TOK + 2 * len(PASSAGES), scale=1.0, chapter="7")
uniform = uniform_causal_pattern(N_TOK)[None, None].expand(
    len(PASSAGES), 1, N_TOK, N_TOK)
uniform_dup = duplicate_token_pattern_score(uniform, text_ids,
                                            queries=is_word).item()
top = dup.flatten().topk(5)
top_heads = [divmod(int(i), S_H) for i in top.indices]
DL, DH = top_heads[0]
best_dup = top.values[0].item()
g_tokens = torch.Generator().manual_seed(71)
dup_null = []
for draw in range(99):
    order = torch.rand(text_ids.shape, generator=g_tokens).argsort(-1)
    dup_null.append(dup_all(copies(text_ids.gather(1, order),
                                   is_word.gather(1, order)),
                            A_all).max().item())  # float32 is enough here
print("repeated word tokens per passage:", n_rep.tolist())
print("top five heads:", ", ".join(
    f"L{l}H{h} {v:.2f}" for (l, h), v in zip(top_heads, top.values)))
print(f"uniform causal pattern {uniform_dup:.3f}, mean over all heads "
      f"{dup.mean():.3f},\nbest head on shuffled text {max(dup_null):.3f}")
finding(f"SmolLM2's best duplicate-token head on Shakespeare, L{DL}H{DH}, "
        "attends to earlier copies of a repeated word far more than the best "
        "head does on the same text shuffled", best_dup,
        null=Null.draws("the best of the 270 heads' patterns, text shuffled "
                        "within passages, 99 draws", dup_null), chapter="7")
heatmap(dup, [f"H{h}" for h in range(S_H)], [f"L{l}" for l in range(S_L)],
        title="SmolLM2: duplicate-token score of every head, 8 passages",
        x_title="head", y_title="layer", zmin=0, zmax=1, outline=[(DL, DH)])

# %% tags=["hide-input"]
best = per_passage[:, DL, DH]
ranks = (per_passage.flatten(1) > best[:, None]).sum(-1) + 1  # 1 = first
print(f"L{DL}H{DH} per passage:", " ".join(f"{v:.2f}" for v in best.tolist()))
print("its rank among the 270 heads, per passage (1 = first):",
      ranks.tolist())
observation(f"L{DL}H{DH}'s rank among the 270 heads on each passage alone",
            ranks.tolist(), chapter="7")
glue("dup_head", f"L{DL}H{DH}")
glue("dup_best", best_dup)
glue("dup_lo", best.min().item())
glue("dup_hi", best.max().item())
glue("dup_uniform", uniform_dup)
glue("dup_mean", dup.mean().item())
glue("dup_null", max(dup_null))
glue("dup_n", int(n_rep.sum()))
glue("dup_worst_rank", int(ranks.max()))
glue("dup_runner_up", f"L{top_heads[1][0]}H{top_heads[1][1]}")
glue("dup_runner_up_score", top.values[1].item())
# Which repeated tokens? Split them by whether an earlier copy also follows
# the same token as the query does (the query is then the second or later
# piece of a repeated multi-token word, mostly a speaker's name): there a
# head that matches the previous token would find the copy as well.
same_tok = (text_ids[:, :, None] == text_ids[:, None, :]).tril(-1)
scored = same_tok.any(-1) & is_word                # the repeated word tokens
pair = torch.zeros_like(same_tok)
pair[:, 1:, 1:] = same_tok[:, 1:, 1:] & (text_ids[:, :-1, None]
                                         == text_ids[:, None, :-1])
in_pair = pair.any(-1) & scored                    # [8, 96]
on_copy = torch.einsum("blhqk,bqk->bqlh", A_64, same_tok.double())
pair_share = on_copy[in_pair].mean(0)              # [30, 9]
alone_share = on_copy[scored & ~in_pair].mean(0)
print(f"repeated word tokens whose earlier copy follows the same token: "
      f"{int(in_pair.sum())} of {int(scored.sum())}, e.g. "
      + ", ".join(sorted({pieces[b_][q_ - 1] + "|" + pieces[b_][q_]
                          for b_, q_ in in_pair.nonzero().tolist()})[:8]))
print(f"L{DL}H{DH} on those {pair_share[DL, DH]:.2f}, on the others "
      f"{alone_share[DL, DH]:.2f}; the other 269 heads on the others: mean "
      f"{(alone_share.sum() - alone_share[DL, DH]) / 269:.3f}")
observation(f"L{DL}H{DH}'s weight on earlier copies for repeated word tokens "
            "whose copy follows the same token, and for the others",
            f"{pair_share[DL, DH]:.2f}, {alone_share[DL, DH]:.2f}",
            chapter="7")
glue("dup_n_pair", int(in_pair.sum()))
# the speakers' names: upper-case pieces (the tokenizer's "Ġ" marks a space)
bare = [[p_.lstrip("Ġ") for p_ in row] for row in pieces]
name_piece = torch.tensor([[p_.isalpha() and p_.isupper() for p_ in row]
                           for row in bare])
observation("repeated word tokens whose copy follows the same token that are "
            "upper-case pieces (nearly all characters' names), of all such tokens and of "
            "all scored tokens", f"{int((in_pair & name_piece).sum())} of "
            f"{int(in_pair.sum())}, of {int(scored.sum())}", chapter="7")
glue("dup_n_name", int((in_pair & name_piece).sum()))
# what kind of token each of them is, read off its piece and the one before:
# a later piece of a word (no leading space, after a letter piece), a piece
# right after a line break ("Ċ"), or anything else (a word after a comma)
# (private names: the explorer above reads the global `kinds` on every move)
_pair_kinds = {"later": [], "break": [], "other": []}
for b_, q_ in in_pair.nonzero().tolist():
    before, piece = pieces[b_][q_ - 1], pieces[b_][q_]
    _kind = ("break" if "Ċ" in before else "later"
             if not piece.startswith("Ġ") and before.lstrip("Ġ").isalpha()
             else "other")
    _pair_kinds[_kind].append(before + "|" + piece)
observation("repeated word tokens whose copy follows the same token: later "
            "pieces of a word, pieces after a line break, others (examples)",
            "; ".join(f"{len(v)} ({', '.join(sorted(set(v))[:4])})"
                      for v in _pair_kinds.values()), chapter="7")
for k_, v in _pair_kinds.items():
    glue(f"dup_n_{k_}", len(v))
glue("dup_n_alone", int((scored & ~in_pair).sum()))
# the others, where the copy follows a different token, split by the same
# upper-case rule: upper-case pieces, and the rest (ordinary words)
alone_name = scored & ~in_pair & name_piece
plain = scored & ~in_pair & ~name_piece
plain_share = on_copy[plain].mean(0)               # [30, 9]
# upper-case pieces whose token before differs from the one before an
# earlier copy only by a leading space ("K" against "ĠK")
space_only = [f"{pieces[b_][q_ - 1]}|{pieces[b_][q_]} (copy after {c_})"
              for b_, q_ in alone_name.nonzero().tolist()
              for c_ in sorted({pieces[b_][k_ - 1] for k_ in range(1, q_)
                                if text_ids[b_, k_] == text_ids[b_, q_]})
              if c_ != pieces[b_][q_ - 1]
              and c_.lstrip("Ġ") == pieces[b_][q_ - 1].lstrip("Ġ")]
observation("repeated word tokens whose copy follows a different token: "
            "upper-case pieces (examples), and the others",
            f"{int(alone_name.sum())} ("
            + ", ".join(sorted({pieces[b_][q_ - 1] + "|" + pieces[b_][q_]
                                for b_, q_ in alone_name.nonzero().tolist()}
                               )[:6])
            + f"), {int(plain.sum())}", chapter="7")
observation("of those upper-case pieces, the ones whose token before differs "
            "from the one before an earlier copy only by a leading space",
            f"{len(space_only)} ({', '.join(space_only[:3])})", chapter="7")
name_share = on_copy[alone_name].mean(0)          # [30, 9]
observation(f"weight on earlier copies for those {int(alone_name.sum())} "
            f"upper-case pieces: L{DL}H{DH}, the runner-up "
            f"L{top_heads[1][0]}H{top_heads[1][1]}, the mean of the other 269 "
            "heads", f"{name_share[DL, DH]:.2f}, {name_share[top_heads[1]]:.2f}, "
            f"{(name_share.sum() - name_share[DL, DH]) / 269:.3f}",
            chapter="7")
observation(f"weight on earlier copies for those {int(plain.sum())} others: "
            f"L{DL}H{DH}, the runner-up L{top_heads[1][0]}H{top_heads[1][1]},"
            " the mean of the other 269 heads",
            f"{plain_share[DL, DH]:.2f}, {plain_share[top_heads[1]]:.2f}, "
            f"{(plain_share.sum() - plain_share[DL, DH]) / 269:.3f}",
            chapter="7")
plain_pieces = Counter(pieces[b_][q_] for b_, q_ in plain.nonzero().tolist())
observation(f"the 8 most frequent tokens among those {int(plain.sum())} others "
            "(token: times)",
            ", ".join(f"{p_}: {n_}" for p_, n_ in plain_pieces.most_common(8)),
            chapter="7")
glue("dup_n_alone_name", int(alone_name.sum()))
glue("dup_name_alone_best", name_share[DL, DH].item())
glue("dup_name_alone_mean",
     ((name_share.sum() - name_share[DL, DH]) / 269).item())
glue("dup_n_plain", int(plain.sum()))
glue("dup_n_space", len(space_only))
glue("dup_n_upper", int((scored & name_piece).sum()))
glue("dup_plain_best", plain_share[DL, DH].item())
glue("dup_plain_runner_up", plain_share[top_heads[1]].item())
glue("dup_plain_mean",
     ((plain_share.sum() - plain_share[DL, DH]) / 269).item())
glue("dup_pair_best", pair_share[DL, DH].item())
glue("dup_alone_best", alone_share[DL, DH].item())
glue("dup_alone_runner_up", alone_share[top_heads[1]].item())
glue("dup_alone_mean",
     ((alone_share.sum() - alone_share[DL, DH]) / 269).item())

# %% [markdown]
# Over the {glue:text}`dup_n` repeated word tokens, head {glue:text}`dup_head` puts
# {glue:text}`dup_best:.2f` of a repeated word's attention on its earlier copies, where
# the uniform causal pattern puts {glue:text}`dup_uniform:.3f`, the average head
# {glue:text}`dup_mean:.3f`, and the best head on shuffled text at most
# {glue:text}`dup_null:.2f`. The score moves a lot from passage to passage (from
# {glue:text}`dup_lo:.2f` to {glue:text}`dup_hi:.2f`: each passage has only a few
# repeated words; the head ranks no lower than {glue:text}`dup_worst_rank` of 270 on any
# one of them), and the job is not this head's alone: the runner-up,
# {glue:text}`dup_runner_up`, scores {glue:text}`dup_runner_up_score:.2f`. This is not
# an induction head (chapter {doc}`17_induction_heads`): that one looks at the token
# *after* the earlier copy, this one at the copy itself.
#
# What are these repeated "words"? In a play's opening lines many of them are the
# speakers' names, which SmolLM2's tokenizer cuts into pieces (LE·O·NA·TO,
# CLE·OP·AT·RA at the start of a line). For {glue:text}`dup_n_pair` of the
# {glue:text}`dup_n` scored tokens an earlier copy follows the same token as the query does: {glue:text}`dup_n_later` are
# a later piece of a repeated word, {glue:text}`dup_n_break` the first piece of a line
# (a name after a line break), and {glue:text}`dup_n_other` other tokens, each the start
# of a word after the same token as its copy (", and", ", that", pieces of names). {glue:text}`dup_n_name` of the {glue:text}`dup_n_pair`
# are upper-case pieces, nearly all characters' names (as speaker labels or in stage
# directions): about half of all scored tokens. On these {glue:text}`dup_n_pair` a head
# that matches the *previous* token, rather than the token itself, would find the copy
# too.
# {glue:text}`dup_head` puts {glue:text}`dup_pair_best:.2f` on the copies there, and
# {glue:text}`dup_alone_best:.2f` on the other {glue:text}`dup_n_alone`, where the
# preceding tokens differ (the runner-up {glue:text}`dup_alone_runner_up:.2f`, the
# other heads {glue:text}`dup_alone_mean:.3f` on average). Those
# {glue:text}`dup_n_alone` are not all ordinary words: {glue:text}`dup_n_alone_name` of
# them are upper-case pieces as well, mostly of names again, and for
# {glue:text}`dup_n_space` of these the token before differs from the one before the
# copy only by a leading space (the printout shows examples); on those
# {glue:text}`dup_n_alone_name` upper-case pieces {glue:text}`dup_head` puts
# {glue:text}`dup_name_alone_best:.2f` on the copies (the other heads
# {glue:text}`dup_name_alone_mean:.3f` on average). In all,
# {glue:text}`dup_n_upper` of the {glue:text}`dup_n` scored tokens are upper-case
# pieces. On the {glue:text}`dup_n_plain` ordinary words among the
# {glue:text}`dup_n_alone` whose predecessor differs, {glue:text}`dup_head` puts
# {glue:text}`dup_plain_best:.2f` on the copies (the
# runner-up {glue:text}`dup_plain_runner_up:.2f`, the other heads
# {glue:text}`dup_plain_mean:.3f` on average; an observation on few tokens). So the
# head's share on the copies is highest, {glue:text}`dup_pair_best:.2f`, where the token
# before matches too, and lower where it differs, though still far above the other
# heads' average. The ordinary words do not isolate matching the token alone: some
# differ from the copy's predecessor only by a leading space or are pieces inside a
# word, and common words such as "the" are among them (the printout counts them), which a
# head may attend to from many queries, so their share mixes token matching with a
# preference for the key (observations on one model and eight passages).
#
# ### Grouped-query attention keeps the sum
#
# SmolLM2's 9 query heads per layer share 3 key-value heads
# {cite}`ainslie2023gqa`: query heads 0-2 read key and value head 0, heads 3-5 head 1,
# heads 6-8 head 2. Write $\mathrm{kv}(h) = \lfloor h/3 \rfloor$ for the key-value head
# of query head $h$. Sharing changes which weights are distinct, not the algebra of this
# chapter: every query head still has its own pattern $A^h$ (its queries are its own)
# and its own block $W_O^h$ of the output matrix, and the layer is still a sum of one
# term per query head,
#
# $$\operatorname{Attn}(X) = \sum_{h} A^h X\, W_V^{\mathrm{kv}(h)} W_O^h,
# \qquad W_{OV}^h = W_V^{\mathrm{kv}(h)}\, W_O^h .$$
#
# (SmolLM2's attention has no biases: its checkpoint stores none, as the cell below
# counts, and TransformerLens's conversion fills the bias slots with zeros.) The three
# heads of a group share $W_V$, so their OV circuits
# differ only through $W_O^h$; they share $W_K$, so their QK circuits differ only
# through $W_Q^h$. TransformerLens stores the shared matrices once (`_W_K`, `_W_V`,
# one per key-value head) and repeats them for each query head. We check the sum on
# the duplicate-token head's layer: each head's term built from $W_{OV}^h$, with
# $W_V$ taken from the stored key-value head $\mathrm{kv}(h)$, the model's own
# patterns and the layer's input $X$ (the RMS-normalised stream multiplied by RMSNorm's
# learned gain), against the layer's hooked output.

# %%
group = S_H // smol.cfg.n_key_value_heads          # 3 query heads per kv head
attn_DL = smol.blocks[DL].attn
X = cache["normalized", DL, "ln1"] * smol.blocks[DL].ln1.w   # [8, pos, d_m]
kv = torch.arange(S_H) // group                    # kv(h) for h = 0..8
W_V_kv = attn_DL._W_V[kv]                          # [9, d_model, d_head]
W_OV = W_V_kv @ attn_DL.W_O                        # [9, d_model, d_model]
A_DL = cache["pattern", DL]                        # [8, 9, q, k]
terms_per_head = A_DL @ (X[:, None] @ W_OV)        # [8, 9, q, d_model]
# the checkpoint's own tensors: the converted model's zero biases are the
# conversion's, whatever the file holds
stored = smollm2_gguf_tensors()
observation(f"bias tensors among the {len(stored)} tensors of SmolLM2's GGUF "
            "checkpoint", sum(name.endswith(".bias") for name in stored),
            chapter="7")
# ours: W_V W_O (d_head), X W_OV (d_model), the mix (n), the heads' sum
# (n_heads); the model's: RMSNorm's weight (1), X W_V (d_model), the mix
# (n), W_O summed over heads and d_head (n_heads d_head); the division by
# each entry's size (1 per side)
size = gqa_sum_sizes(A_DL, X, W_V_kv, attn_DL.W_O)
identity_close(f"layer {DL}'s output is the sum over query heads h of "
               "A[h] X _W_V[kv(h)] W_O[h], each query head reading the "
               "stored value head of its group (each entry's error over "
               "its size)",
               terms_per_head.sum(1) / size, cache["attn_out", DL] / size,
               terms=(2 * smol.cfg.d_model + 2 * N_TOK + 3
                      + (S_H + 1) * smol.cfg.d_head + S_H),
               scale=1.0, chapter="7")
siblings = list(range(DH // group * group, DH // group * group + group))
# TransformerLens's per-query-head W_K, W_V repeat the stored _W_K, _W_V, so
# this reads the view's layout, not the model: an observation, not a check
# (the sum above is the check that each head reads its group's value head).
same_kv = all(torch.equal(smol.W_K[DL, s], smol.W_K[DL, DH])
              and torch.equal(smol.W_V[DL, s], smol.W_V[DL, DH])
              for s in siblings)
observation(f"TransformerLens's expanded W_K and W_V of heads {siblings} of "
            f"layer {DL} are copies of one stored key-value head",
            f"all equal: {same_kv}", chapter="7")

# %% [markdown]
# The three heads of {glue:text}`dup_head`'s group share their keys and their values,
# and differ in what they look for ($W_Q^h$) and in how they write out what they read
# ($W_O^h$). Do its two siblings do its job? We read
# their duplicate-token scores three ways, with one-sided tests at level 0.05 throughout: their ranks
# among all 270 heads; against **random query heads reading the same keys** (99 random
# $W_Q$ of the same shape, each scaled so that its queries on these passages are as
# long on average as the group's real ones, scored on the same streams against the
# group's real rotated keys), which is what sharing the key head gives by itself; and
# against the **six heads of the same layer outside the group**, in case the whole layer
# leans to the job. A score is an average over the repeated word tokens, so we give
# each head of the layer a bootstrap interval over those tokens (1000 resamples, the
# same resamples for every head), and compare each sibling with the best of the six,
# resample by resample. The tokens come from eight passages and are not independent
# draws (a passage repeats some of its words several times), so we make the last
# comparison a second time with whole passages as the unit (an exact sign-flip test over
# the eight passages' gaps), and count the passages on which
# each sibling beats the best of the six on that passage. The first lines check that the
# code that scores a random head gives back the model's own scores when handed a real
# $W_Q$; the same causal softmax then makes them a pattern.

# %%
others_sib = [s_ for s_ in siblings if s_ != DH]
k_rot = cache["rot_k", DL][:, :, kv[DH]]           # [8, pos, d_head]
causal = torch.ones(N_TOK, N_TOK, dtype=torch.bool).tril()
dup_weights = copies(text_ids, is_word)


def scores_from_queries(W_Q):
    """The scores [8, q, k] of a query head W_Q [d_model, d_head] of layer
    DL reading the shared key head: rotated queries dotted with the rotated
    keys, -inf above the diagonal."""
    q = attn_DL.apply_rotary((X @ W_Q)[:, :, None])[:, :, 0]
    scores = q @ k_rot.mT / math.sqrt(smol.cfg.d_head)
    return scores.masked_fill(~causal, float("-inf"))


def dup_score(scores):
    """Duplicate-token score of one head, from its [8, q, k] scores."""
    pattern = scores.softmax(-1).double()
    return torch.einsum("bqk,bqk->", pattern, dup_weights).item()


s1 = others_sib[0]
size = rotary_score_sizes(X, attn_DL.W_Q[s1], k_rot, smol.cfg.d_head)
# each side: the queries (d_model), the rotation (2), the score (d_head),
# the scale (1), the division by each entry's size (1)
identity_close(f"scoring a query head against the shared keys gives back "
               f"L{DL}H{s1}'s own scores from its W_Q (each entry's error "
               "over its size)",
               (scores_from_queries(attn_DL.W_Q[s1]) / size)[:, causal],
               (cache["attn_scores", DL][:, s1] / size)[:, causal],
               terms=2 * (smol.cfg.d_model + smol.cfg.d_head + 4),
               scale=1.0, chapter="7")
q_length = (X[:, None] @ attn_DL.W_Q[siblings]).norm(dim=-1).mean()
g_queries = torch.Generator().manual_seed(73)
random_q = []
for draw in range(99):
    W_rand = torch.randn(smol.cfg.d_model, smol.cfg.d_head,
                         generator=g_queries)
    W_rand *= q_length / (X @ W_rand).norm(dim=-1).mean()
    random_q.append(dup_score(scores_from_queries(W_rand)))
all_ranks = (dup.flatten().argsort(descending=True).argsort() + 1
             ).view(S_L, S_H)                      # 1 = the highest score
for s_ in siblings:
    print(f"L{DL}H{s_}: duplicate-token score {dup[DL, s_]:.2f}, rank "
          f"{all_ranks[DL, s_]} of 270")
rest = [h_ for h_ in range(S_H) if h_ not in siblings]
print(f"the other heads of layer {DL}: "
      + ", ".join(f"{dup[DL, h_]:.2f}" for h_ in rest))
print(f"random queries on the same keys: mean {sum(random_q) / 99:.2f}, "
      f"highest {max(random_q):.2f} (99 draws)")
observation(f"ranks among the 270 heads of the two heads sharing L{DL}H{DH}'s"
            " key-value head", ", ".join(f"L{DL}H{s_} {all_ranks[DL, s_]}"
                                         for s_ in others_sib), chapter="7")
q_null = Null.draws("random W_Q of the same shape and query length, reading "
                    "the same rotated keys on the same streams, 99 draws",
                    random_q)
for s_ in others_sib:
    finding(f"L{DL}H{s_}, reading the key head it shares with L{DL}H{DH}, "
            "attends to earlier copies more than random query heads "
            "reading the same keys", dup[DL, s_].item(), null=q_null,
            chapter="7")
# each repeated word token's weight on its earlier copies, for every head
# of layer DL: the score is their mean
per_token = torch.einsum("bhqk,bqk->bqh", A_64[:, DL],
                         same_tok.double())[scored]  # [tokens, 9]
# float64: dup sums 8 x 96 x 96 products, of total size at most 1; here a
# mean of the tokens' sums of up to N_TOK weights
identity_close(f"layer {DL}'s scores are the mean over the repeated word "
               "tokens of each token's weight on its earlier copies",
               per_token.mean(0), dup[DL],
               terms=len(PASSAGES) * N_TOK ** 2 + N_TOK + per_token.shape[0],
               scale=1.0, chapter="7")
g_boot = torch.Generator().manual_seed(74)
resamples = torch.randint(0, per_token.shape[0], (1000, per_token.shape[0]),
                          generator=g_boot)
boot = per_token[resamples].mean(1)                # [1000, 9]
lo, hi = boot.quantile(0.025, dim=0), boot.quantile(0.975, dim=0)
for h_ in range(S_H):
    mark = ("(the best head)" if h_ == DH else "(its sibling)"
            if h_ in others_sib else "")
    print(f"L{DL}H{h_}: {dup[DL, h_]:.3f}, 95% interval [{lo[h_]:.3f}, "
          f"{hi[h_]:.3f}] {mark}")
rest_best = boot[:, rest].max(-1).values           # per resample
sib_tests = []
for s_ in others_sib:
    sib_tests.append(null_test(
        dup[DL, s_].item() - dup[DL, rest].max().item(),
        Null.point(f"no difference from the best of layer {DL}'s six heads "
                   "outside the group", 0.0),
        boot=boot[:, s_] - rest_best))
    finding(f"L{DL}H{s_} attends to earlier copies more than the best of "
            f"layer {DL}'s six heads outside its group (paired bootstrap "
            f"over the {per_token.shape[0]} repeated word tokens, 1000 "
            "resamples)", sib_tests[-1], chapter="7")
# The tokens come in passages, and a passage repeats some of its words
# several times. Eight passages are too few for a bootstrap over passages
# (it understates the spread), so the passage-level test is exact: under
# "no difference" each passage's gap (sibling minus the best of the six on
# that passage) is as likely to have either sign, and the 2^8 = 256 sign
# flips of the eight gaps, weighted by their repeated word tokens, are the
# null's equally likely values (the observed signs are one of them).
on_copies = torch.einsum("bhqk,bqk->bh", A_64[:, DL],
                         same_tok.double() * scored[:, :, None])  # [8, 9]
n_scored = scored.sum(-1).double()                                 # [8]
flips = torch.tensor(list(itertools.product((1.0, -1.0),
                                            repeat=len(PASSAGES))),
                     dtype=torch.float64)[1:]       # the 255 other signs
t_975 = student_t_quantile(0.975, len(PASSAGES) - 1)   # for the 95% t-interval
passage_tests, passage_wins, passage_t = [], [], []
for s_ in others_sib:
    gaps = on_copies[:, s_] - on_copies[:, rest].max(-1).values  # [8]
    passage_tests.append(null_test(
        (gaps.sum() / n_scored.sum()).item(),
        Null.draws("the same gaps with their signs flipped, all 255 other "
                   "sign patterns of the 8 passages", flips @ gaps
                   / n_scored.sum())))
    finding(f"L{DL}H{s_} attends to earlier copies more than the best of "
            f"layer {DL}'s six heads outside its group on the same passage "
            f"(exact sign-flip test over the {len(PASSAGES)} passages)",
            passage_tests[-1], chapter="7")
    per_gap = gaps / n_scored                  # each passage's own gap
    half = t_975 * per_gap.std() / len(PASSAGES) ** 0.5
    passage_t.append(((per_gap.mean() - half).item(),
                      (per_gap.mean() + half).item(), per_gap.mean().item()))
    passage_wins.append(int((gaps > 0).sum()))
observation(f"passages on which each sibling of L{DL}H{DH} beats the best of "
            "the six heads outside the group on that passage",
            ", ".join(f"L{DL}H{s_} {w_} of {len(PASSAGES)}"
                      for s_, w_ in zip(others_sib, passage_wins)),
            chapter="7")
for i, s_ in enumerate(others_sib):
    glue(f"sib_{i}_name", f"L{DL}H{s_}")
    glue(f"sib_{i}", dup[DL, s_].item())
    glue(f"sib_{i}_rank", int(all_ranks[DL, s_]))
glue("rest_lo", min(dup[DL, h_].item() for h_ in rest))
glue("rest_hi", max(dup[DL, h_].item() for h_ in rest))
glue("rand_q_mean", sum(random_q) / len(random_q))
glue("rand_q_max", max(random_q))
glue("rand_q_p", null_test(min(dup[DL, s_].item() for s_ in others_sib),
                           q_null).p)
for i, (s_, test) in enumerate(zip(others_sib, sib_tests)):
    glue(f"sib_{i}_lo", lo[s_].item())
    glue(f"sib_{i}_hi", hi[s_].item())
    glue(f"sib_{i}_gap", test.value)
    glue(f"sib_{i}_gap_lo", test.lo)
    glue(f"sib_{i}_gap_hi", test.hi)
for i, (test, wins, (t_lo, t_hi, t_mean)) in enumerate(
        zip(passage_tests, passage_wins, passage_t)):
    glue(f"sib_{i}_pgap", test.value)
    glue(f"sib_{i}_pgap_p", test.p)
    glue(f"sib_{i}_pgap_lo", t_lo)
    glue(f"sib_{i}_pgap_hi", t_hi)
    glue(f"sib_{i}_pgap_mean", t_mean)
    glue(f"sib_{i}_wins", wins)
# "w of 8" alone, as a sign test: how often 8 fair coins give w or more
glue("sib_1_sign_p", sum(math.comb(8, k) for k in range(passage_wins[1], 9))
     / 2 ** 8)
glue("rest_best_name", f"L{DL}H{rest[int(dup[DL, rest].argmax())]}")
glue("rest_best_lo", lo[rest[int(dup[DL, rest].argmax())]].item())
glue("rest_best_hi", hi[rest[int(dup[DL, rest].argmax())]].item())
glue("rand_q_below", sum(v_ < min(dup[DL, s_].item() for s_ in others_sib)
                         for v_ in random_q))

# %% [markdown]
# One sibling does the job and the other barely does. {glue:text}`sib_0_name` scores
# {glue:text}`sib_0:.2f` (95% interval over the repeated word tokens
# {glue:text}`sib_0_lo:.2f` to {glue:text}`sib_0_hi:.2f`; rank {glue:text}`sib_0_rank`
# of 270), where the average head scores {glue:text}`dup_mean:.3f`, and it exceeds the
# best of the six heads of its layer outside the group by {glue:text}`sib_0_gap:.2f`
# ({glue:text}`sib_0_gap_lo:.2f` to {glue:text}`sib_0_gap_hi:.2f`).
# {glue:text}`sib_1_name` scores {glue:text}`sib_1:.3f` ({glue:text}`sib_1_lo:.3f` to
# {glue:text}`sib_1_hi:.3f`; rank {glue:text}`sib_1_rank`), among layer-mates outside
# the group that score {glue:text}`rest_lo:.3f` to {glue:text}`rest_hi:.3f`: its
# interval overlaps that of the best of them, {glue:text}`rest_best_name`
# ({glue:text}`rest_best_lo:.3f` to {glue:text}`rest_best_hi:.3f`). Compared on the
# same resampled tokens it stays above the best of them, by {glue:text}`sib_1_gap:.3f`
# ({glue:text}`sib_1_gap_lo:.3f` to {glue:text}`sib_1_gap_hi:.3f`; the best of six is
# picked again in every resample, which favours the six): a small gap next to
# {glue:text}`dup_best:.2f` for {glue:text}`dup_head`. That interval treats the
# {glue:text}`dup_n` tokens as independent, and they come in eight passages. Taken
# passage by passage, against the best of the six on each passage, the gap is
# {glue:text}`sib_1_pgap:.3f` when each passage counts by its number of scored tokens;
# flipping the signs of the eight passages' gaps in all 256 ways, with the same weights,
# gives an exact p = {glue:text}`sib_1_pgap_p:.3f`. Counting each passage once instead
# (its own mean gap, unweighted), the mean gap is {glue:text}`sib_1_pgap_mean:.3f` and a
# t-interval over the eight passages runs from {glue:text}`sib_1_pgap_lo:.4f` to
# {glue:text}`sib_1_pgap_hi:.3f`. The difference is only just resolved. (That it wins
# on {glue:text}`sib_1_wins` of the eight passages would not show it by itself: a sign
# test on that count gives p = {glue:text}`sib_1_sign_p:.2f`.) Random queries reading
# the same keys score
# {glue:text}`rand_q_mean:.2f` on average and at most {glue:text}`rand_q_max:.2f`; the
# weaker sibling scores above {glue:text}`rand_q_below` of the 99 (p =
# {glue:text}`rand_q_p:.2f`, the smallest 99 draws can give). The shared keys do not
# produce the job by themselves: it takes the right queries, which
# {glue:text}`sib_0_name` has and {glue:text}`sib_1_name` has only a little of. In
# this layer the job sits mostly in one key-value group: one head does most of it, a
# second a good part, the third barely more than the heads outside the group. That is
# one group of one model on one text; whether grouped heads share jobs more often than
# chance would need the same comparison on many groups and many jobs. The same keys,
# read with different queries, give different patterns (here the three heads'
# duplicate-token scores are {glue:text}`dup_best:.2f`, {glue:text}`sib_0:.2f` and
# {glue:text}`sib_1:.2f`), and the same values, written out through different blocks
# $W_O^h$, can carry different messages: grouped-query attention shares the "what I
# offer" side of the lookup between heads, not the "what I look for" side.
#
# Finally, several jobs side by side. On the passage with the most repeated words we
# show the duplicate-token head found above, and pick out, on this passage alone, the
# heads that are most extreme at three simple things: attending to the *previous* token
# (chapter {doc}`06_attention`'s job: the pick here is {glue:text}`prev_here`,
# {glue:text}`prev_here_vs_ch6`), to the *first* token, and to the *current* token.

# %%
show = int(n_rep.argmax())          # the passage with most repeated words
A_show = A_all[show]                       # [30, 9, q, k]
first_share = A_show[:, :, 1:, 0].mean(-1)                       # [30, 9]
self_share = A_show.diagonal(dim1=-2, dim2=-1)[..., 1:].mean(-1)
prev_here = torch.stack([prev_token_pattern_score(A_show[l][None])
                         for l in range(S_L)])
jobs = {"duplicate token": (DL, DH),
        "previous token": divmod(int(prev_here.argmax()), S_H),
        "first token": divmod(int(first_share.argmax()), S_H),
        "current token": divmod(int(self_share.argmax()), S_H)}
for job, (l, hd) in jobs.items():
    print(f"{job:>16}: L{l}H{hd}  first {first_share[l, hd]:.2f}, current "
          f"{self_share[l, hd]:.2f}, previous {prev_here[l, hd]:.2f}")
# chapter 6 picked its previous-token head, L16H0, on other plays' text
prev_pick = "L{}H{}".format(*jobs["previous token"])
glue("prev_here", prev_pick)
glue("prev_here_vs_ch6", "the head chapter 6 found on other plays"
     if prev_pick == "L16H0" else "not L16H0, the head chapter 6 found")
resting = (first_share > 0.5).float().mean().item()
uniform_first = uniform_causal_pattern(N_TOK)[1:, 0].mean().item()
observation("on this passage, the share of SmolLM2's heads that give more "
            "than half of their attention (averaged over queries after the "
            "first) to the first token", f"{resting:.0%} of 270 heads",
            chapter="7")
glue("resting", resting)
firsts = {row[0] for row in pieces}
identity("all eight passages start with the same token, the opening of a "
         "scene heading", firsts, len(firsts) == 1, chapter="7")
glue("first_tokens", repr(firsts.pop()))
glue("uniform_first", uniform_first)
n_show = 48
glue("n_show_tok", n_show)
names = [f"L{l}H{hd} ({job})" for job, (l, hd) in jobs.items()]
attention_pattern_view(
    pieces[show][:n_show],
    torch.stack([A_show[l, hd, :n_show, :n_show] for l, hd in jobs.values()]),
    head_names=names)

# %% [markdown]
# Four heads, four jobs, on the same {glue:text}`n_show_tok` tokens (the duplicate-token
# head found on all eight passages, and the three heads most extreme on this one
# passage, the previous-token head among them, so the picture illustrates and does not
# test; pick
# a head, hover a token; `Ġ` marks a space and `Ċ` a line break in SmolLM2's tokens).
# The first-token head is the most extreme case of something common: on this passage
# {glue:text}`resting:.0%` of all 270 heads put more than half their attention (averaged
# over the queries after the first) on the first token, where the uniform causal
# pattern would put {glue:text}`uniform_first:.3f`. Here the first token is
# {glue:text}`first_tokens` in all eight passages, the mark that opens a scene heading,
# with nothing to say about the text; attention must sum to one, and a head with
# nothing to do seems to park its weight there. (Such "attention sinks" are reported in
# many trained models {cite}`xiao2023efficient`; we have not tested here that these
# heads have nothing to do.) Reading what any of these heads *writes*, rather than where
# it looks, needs the OV circuit of chapter {doc}`08_qk_ov`.

# %% [markdown]
# ## Summary
#
# - `MultiHeadedAttention` stores all heads in four `nn.Linear(d_model, d_model)` maps;
#   the `.view(batch, pos, h, d_k)` and `.transpose(1, 2)` reshaping gives head $i$ the $i$-th
#   block of $d_k$ output features, i.e. a block of columns of $W = $ `weight.T`.
# - In TransformerLens's shapes, $W_Q^h$ is the block of columns $h d_k$ to
#   $(h+1) d_k$ of `linears[0].weight.T` ($W_K$, $W_V$ alike) and $W_O^h$ the same
#   block of rows of `linears[3].weight.T`; a TransformerLens attention layer loaded this
#   way computes the same outputs.
# - $\operatorname{Concat}(\text{heads})\,W^O = \sum_h z^h W_O^h$, so the layer is
#   $\sum_h A^h X W_V^h W_O^h$ plus one constant vector $b_O + \sum_h b_V^h W_O^h$: the
#   value bias passes through the pattern unchanged ($X$ is the normalised stream the
#   values are read from, a LayerNorm's output). We checked this on all six attention
#   modules of the trained model, and, on the last cross-attention, that zeroing one
#   head's block of $W^O$ removes exactly that head's term.
# - Several heads need not mean several jobs. In the last decoder layer's
#   cross-attention of the trained toy model all four heads land on the source word
#   being translated more often than chance and any fixed distance: the best finds it
#   {glue:text}`best_hits:.0%` of the time and the weakest {glue:text}`worst_hits:.0%`,
#   where a head looking at random finds it
#   {glue:text}`chance_hits:.0%` of the time and the best fixed-distance head
#   {glue:text}`offset_hits:.0%` (one model, one seed, one toy language). On chapter 12's
#   held-out sentences a rule that reads only positions (the source length and the target
#   position) comes close to the weakest head; chapter 12's shuffle test shows
#   that each head reads the sentence.
# - Grouped-query attention keeps the sum over query heads, with
#   $W_{OV}^h = W_V^{\mathrm{kv}(h)} W_O^h$; we checked it on one layer of SmolLM2
#   against the layer's hooked output.
# - In SmolLM2 on Shakespeare, head {glue:text}`dup_head` attends from a repeated word to
#   its earlier copies ({glue:text}`dup_best:.2f` of its attention; the best head on
#   shuffled text: {glue:text}`dup_null:.2f`). {glue:text}`dup_n_name` of the
#   {glue:text}`dup_n` scored tokens are name pieces whose predecessor also matches,
#   and {glue:text}`dup_n_upper` in all are upper-case pieces, nearly all names; on the
#   {glue:text}`dup_n_plain` ordinary words among those whose predecessor differs from
#   the copy's, it puts {glue:text}`dup_plain_best:.2f` on the copies, a share that
#   mixes matching the token with a preference for common keys such as "the".
#   Of the two heads that share its key-value
#   head, {glue:text}`sib_0_name` does the job too ({glue:text}`sib_0:.2f`, rank
#   {glue:text}`sib_0_rank` of 270) and {glue:text}`sib_1_name` barely
#   ({glue:text}`sib_1:.3f`, rank {glue:text}`sib_1_rank`; above the best of the six
#   heads outside the group by {glue:text}`sib_1_gap:.3f` pooled over tokens and
#   {glue:text}`sib_1_pgap:.3f` passage by passage, a difference only just resolved over
#   the eight passages); the shared keys read with random queries do not produce
#   it, and in this layer it sits mostly in one group (one group of one model, one
#   text). Other heads attend to the previous, the current
#   or the first token.
