# %% [markdown]
# # 3. The residual stream
#
# Every layer of a transformer talks to every other layer through one shared vector per
# position, the *residual stream*. This chapter looks at that channel: how each layer reads
# from it with a linear map, computes, and adds its result back; how many dimensions it
# has and how many writers compete for them; and why the forward computation gives its
# coordinates, taken one at a time, no meaning. We prove the last point by algebra (exercise
# 3.1's worked answer) and check it by rotating a whole model into a random basis and
# getting the same predictions, to float32 rounding; we then
# measure, in one pretrained model (SmolLM2's 4-bit copy), that its weights make a few
# coordinates of its stream special all the same, and show the kind of operation in the
# forward pass that would break the symmetry: a nonlinearity applied coordinate by
# coordinate (LayerNorm's centring also singles out a direction).

# %% [markdown]
# The set-up is folded away: the imports, and the rounding counts of this chapter's checks
# (how many roundings a QR decomposition and a forward pass of the toy model make).

# %% tags=["hide-input"]
import contextlib
import copy
import io
import math
import warnings

import matplotlib.pyplot as plt
import torch

from circuitbook import checks
from circuitbook.book import (Null, finding, glue, identity, identity_close,
                              observation, rounding_bound)
from circuitbook.models import load
from circuitbook.models.encoder_decoder import (
    EncoderLayer,
    MultiHeadedAttention,
    PositionwiseFeedForward,
)
from circuitbook.widgets import explore

# This chapter only reads models, never trains them: no autograd graph.
torch.set_grad_enabled(False)
warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)


def qr_terms(d):
    """Householder QR of a d x d matrix applies d reflectors, each a d-term
    dot product per entry: d * d roundings (Higham, Thm 19.4)."""
    return d * d


def forward_terms(cfg, n_pos):
    """Roundings of one forward pass of an attention-only model whose weights
    were rotated first. Per layer: a read x @ W (d_model) from a weight that
    was itself rotated (R^T W, d_model more), the scores (d_head), a softmax
    over the positions (n_pos + 4), the mix (n_pos), W_O (d_head) rotated
    (d_model) and the sum over heads (n_heads); then the embedding (W_E R:
    d_model) and the unembedding (R^T W_U, then x @ W_U: 2 d_model)."""
    d = cfg.d_model
    layer = 3 * d + 2 * cfg.d_head + 2 * n_pos + 4 + cfg.n_heads
    return cfg.n_layers * layer + 3 * d


def post_norm_stack_terms(d_model, n_stack):
    """Roundings of a stack of n_stack post-norm encoder layers (two sublayers
    each, attention of 4 heads and an FFN of 4 d_model) and of its writes'
    sum: per sublayer a LayerNorm (2 d + 8), the sublayer's products (at most
    d + 4 d for the FFN) and the residual addition (1); then 2 n_stack
    writes summed."""
    per_sublayer = 2 * d_model + 8 + 5 * d_model + 1
    return 2 * n_stack * (per_sublayer + 1)

# %% [markdown]
# ## Plain language
#
# Picture the residual stream as a shared whiteboard with $d_\text{model}$ slots, one board
# per position. The embedding writes the first entries. Then every layer does the same
# three things: it **reads** the board through a linear map (each attention head through
# its query, key and value matrices, each MLP through its input matrix), it **computes**
# something from what it read, and it **writes** the result back by *adding* it to the
# board through another linear map. Nothing is erased; later layers see the sum of
# everything written before them, and the unembedding reads the final board to make the
# prediction. Chapter {doc}`01_background` checked that the final stream is exactly this
# sum.
#
# Two consequences shape the rest of the book.
#
# **Bandwidth.** The board has only $d_\text{model}$ slots, and every layer shares them.
# In a big model the heads and MLP neurons together write from far more dimensions than
# the stream has, so the stream is a crowded channel. Layers can still pass information
# to one another only where one writes and another reads.
#
# **No privileged basis.** In a model without LayerNorm, everything that touches the
# stream is linear at the point of contact: writes are $x \mapsto x + yW$, reads are
# $x \mapsto xW$. If we rotate the board, writing $xR$ instead of $x$ for an orthogonal
# $R$, and rotate every read and write to match, the model computes exactly the same
# function. So the forward pass alone gives "slot 17 of the residual stream" no meaning:
# for every model there is another, with the same outputs, whose slot 17 holds something
# else. Training may give it one. Adam {cite}`kingma2015adam` steps each coordinate by its
# own amount, and a per-coordinate gain, in a model that has one, is trained coordinate by
# coordinate too, so a trained model's coordinates can mean something; whether they do is a
# question about that model, to be measured, not one the symmetry settles (we come back to
# this below). An elementwise function of the stream is a different matter: it would break
# the symmetry of the forward pass itself, and the toy model has none (we show what one does
# at the end of this chapter). The objects the forward pass does
# not tie to a basis are *directions*, and which directions matter has to be found from the
# weights that read and write them. (LayerNorm, which the toy model below does not have,
# singles out the all-ones direction by centring, and its gain acts per coordinate until it
# is folded into the next weights; we come back to that too.)
# Inside an MLP it is different: its nonlinearity acts on each hidden neuron separately,
# so the neuron basis is special there (chapter {doc}`10_ffn`).

# %% [markdown]
# ## The Annotated Transformer view
#
# In the Annotated Transformer {cite}`rush2018annotated` the residual stream has no name
# of its own; it is the tensor `x` passed from sublayer to sublayer. Every sublayer sits
# inside a `SublayerConnection`, whose forward pass is one line:
#
# ```python
# return x + self.dropout(sublayer(self.norm(x)))
# ```
#
# Read it as read, compute, write. `self.norm(x)` and the first linear maps inside the
# sublayer read the stream; the sublayer computes; its last linear map (`W^O` for
# attention, `w_2` for the feed-forward network) produces a $d_\text{model}$-vector, and
# `x + ...` writes it. (This is the *pre-norm* arrangement that the Annotated
# Transformer's code uses; the paper itself normalises after the addition. We come back to
# the difference below.)
#
# That the pre-norm stream is the input plus the writes is an identity, which
# chapters {doc}`1 <01_background>` and {doc}`2 <02_architecture>` checked; we do not
# check it again. What we measure
# here is the other arrangement. We stack three encoder layers (six sublayers), record what
# each sublayer adds, and compare the top of the stream with the input plus the six writes
# when the same layers are arranged post-norm.

# %%
d_model, n_stack, n_pos = 32, 3, 7


def encoder_layer(norm_position="pre"):
    attn = MultiHeadedAttention(4, d_model, dropout=0.0)
    ffn = PositionwiseFeedForward(d_model, 4 * d_model, dropout=0.0)
    return EncoderLayer(d_model, attn, ffn, 0.0, norm_position).eval()


def run_stack(layers, x):
    """Run encoder layers; return the top of the stream and each write."""
    writes = []
    subs = [m for ly in layers for m in (ly.self_attn, ly.feed_forward)]
    hooks = [m.register_forward_hook(lambda mod, inp, out: writes.append(out))
             for m in subs]
    mask = torch.ones(1, 1, x.shape[1])
    with torch.no_grad():
        for layer in layers:
            x = layer(x, mask)
    for h in hooks:
        h.remove()
    return x, writes


x0 = torch.randn(1, n_pos, d_model)
stack = [encoder_layer("pre") for _ in range(n_stack)]

# %% [markdown]
# With the paper's post-norm arrangement, `LayerNorm(x + Sublayer(x))`, the stream itself
# is renormalised after every write, so earlier writes are rescaled and shifted by every
# later LayerNorm and the top of the stream is no longer a plain sum. The same weights,
# arranged post-norm:

# %%
post = [encoder_layer("post") for _ in range(n_stack)]
for p_layer, pre_layer in zip(post, stack):
    p_layer.load_state_dict(pre_layer.state_dict())
top_post, writes_post = run_stack(post, x0)
gap = (top_post - x0 - sum(writes_post)).abs().max()
# what a sum would leave: the rounding of the stack and of our sum, at the
# size of the numbers summed
terms_abs = x0.abs() + sum(w.abs() for w in writes_post)
sum_bound = rounding_bound(post_norm_stack_terms(d_model, n_stack),
                           float(terms_abs.max()))
identity("post-norm: the top of the stream is NOT the input plus the writes "
         "(the gap exceeds the rounding bound of a sum)",
         f"gap {gap:.2f}, bound {sum_bound:.1g}", bool(gap > sum_bound),
         chapter="3")
glue("post_gap", gap.item())
# the same gap against the size of the stream it is measured in
post_rel = ((top_post - x0 - sum(writes_post)).norm(dim=-1)
            / top_post.norm(dim=-1)).mean()
observation("post-norm, one untrained three-layer stack, 7 positions: mean "
            "|top - (input + writes)| / |top| per position", post_rel,
            chapter="3")
glue("post_rel", post_rel.item())

# %% [markdown]
# The largest gap in one coordinate is {glue:text}`post_gap:.2f`, far beyond rounding; per
# position, the difference is {glue:text}`post_rel:.0%` of the top stream's length on
# average. Any LayerNorm that changes its input rescales and shifts the earlier writes with
# it, so a post-norm stream equals the plain sum only by coincidence. The size of the gap is
# one untrained stack's, on one random input. The circuits framework, like
# GPT-2 and every model after it in this book, assumes the pre-norm arrangement (or, in
# the book's toy models, no LayerNorm at all), because then the stream is a running sum
# (as it is whenever no norm acts on the stream itself).
#
# **Bandwidth, counted.** How many dimensions write into the stream of the paper's base
# model? Each attention sublayer's output map $W^O$ takes the concatenated heads
# ($h \cdot d_k$ numbers) to $d_\text{model}$, and each feed-forward sublayer's `w_2` takes
# $d_\text{ff}$ hidden neurons to $d_\text{model}$. We read the sizes off real modules.

# %%
base = EncoderLayer(512, MultiHeadedAttention(8, 512),
                    PositionwiseFeedForward(512, 2048), 0.1)
stream_dims = base.size
head_dims = base.self_attn.linears[3].in_features    # h * d_k, into W^O
neurons = base.feed_forward.w_2.in_features           # d_ff, into w_2
writer_dims = 6 * (head_dims + neurons)               # six encoder layers
print(f"stream: {stream_dims} dims; per layer {head_dims} head dims "
      f"+ {neurons} neurons write into it")
print(f"encoder total: {writer_dims} writing dims "
      f"= {writer_dims / stream_dims:.0f} x d_model")
glue("writer_dims", writer_dims)
glue("writer_ratio", writer_dims / stream_dims)

# %% [markdown]
# Six encoder layers write from {glue:text}`writer_dims` dimensions into a 512-dimensional
# stream, {glue:text}`writer_ratio:.0f` times its width. At most 512 of those directions can
# be independent, so most of what is written cannot have a private slot: writers must share
# directions. How much a trained model's writers actually interfere is a question about its
# weights, which this count does not answer.

# %% [markdown]
# ## The circuit view
#
# Elhage et al. {cite}`elhage2021mathematical` make the read-compute-write structure the
# centre of their picture. We look at it in the book's trained two-layer, attention-only
# model `toy-2l` from the zoo, which chapters 16 and 17 take apart: it has learned to
# continue sequences that repeat, with an induction head. It has no LayerNorm (Elhage et
# al. analyse their toy models as if they had none), and it uses *shortformer* positions
# {cite}`press2021shortformer`:
# the positional embedding is added to what the queries and keys read, not to the stream.
# In TransformerLens's row-vector convention (row $x_i$ is the stream at position $i$), the
# stream starts as $x^{(0)}_i = W_E[t_i]$, and head $h$ of a layer reads it as
#
# $$q_i = (x_i + W_\text{pos}[i])\, W_Q^h + b_Q^h,\qquad
# k_j = (x_j + W_\text{pos}[j])\, W_K^h + b_K^h,$$
#
# $$v_j = x_j W_V^h + b_V^h,$$
#
# with $W_Q^h, W_K^h, W_V^h$ of shape $d_\text{model} \times d_\text{head}$. It writes
# through $W_O^h$ ($d_\text{head} \times d_\text{model}$), the layer adds its output bias,
# and the unembedding reads the final stream:
#
# $$x^{(\ell+1)}_i = x^{(\ell)}_i + \sum_h \sum_j A^h_{ij}\, v_j W_O^h + b_O,
# \qquad \text{logits}_i = x^{(L)}_i W_U + b_U.$$
#
# So every weight matrix is either a **write** (its output side is $d_\text{model}$) or a
# **read** (its input side is $d_\text{model}$). $W_\text{pos}$ counts as a write: here it
# is added to the queries' and keys' input, and in Vaswani et al.'s
# arrangement it is added to the stream itself; either way it lives in the stream's space.
#
# | writes: $d_\text{model}$ on the right | reads: $d_\text{model}$ on the left | neither |
# |---|---|---|
# | $W_E$, $W_\text{pos}$, $W_O$, $b_O$ | $W_Q$, $W_K$, $W_V$, $W_U$ | $b_Q$, $b_K$, $b_V$, $b_U$ |
#
# We feed it sequences of 20 random tokens, each repeated once. The first copy is
# unpredictable; the second can be copied from the first, and the model does. (On the
# first copy its loss is a little above uniform chance. One guess, not tested here: in its
# training sequences every token after the first 16 to 32 is a copy, so it may bet on a
# copy even where there is none.)

# %%
with contextlib.redirect_stdout(io.StringIO()):  # loading reports the device
    model = load("toy-2l")
cfg = model.cfg
g = torch.Generator().manual_seed(3)
segment = torch.randint(0, cfg.d_vocab, (8, 20), generator=g)
tokens = torch.cat([segment, segment], dim=1)         # [8, 40]
logits, cache = model.run_with_cache(tokens)


def copy_losses(lg):
    """Mean loss predicting tokens of the first and of the second copy."""
    logp = lg[:, :-1].log_softmax(-1)
    nll = -logp.gather(-1, tokens[:, 1:, None])[..., 0]
    return nll[:, :19].mean().item(), nll[:, 20:].mean().item()


first, second = copy_losses(logits)
print(f"loss on the first copy {first:.2f} (chance: ln 64 = "
      f"{math.log(cfg.d_vocab):.2f}); on the second copy {second:.3f}")

# %% [markdown]
# Its final stream is a sum of writes, by the identity of chapter 1: the token embedding,
# one term per head (8 here) and one output bias per layer. One thing differs from chapter
# 1's model: with shortformer positions there is no $W_\text{pos}$ term. The stream that
# enters layer 0 is the token embedding alone, bit for bit:

# %%
# shortformer: no W_pos term in the stream; resid_pre 0 is W_E[t] itself
n_pos = tokens.shape[1]
final = cache["resid_post", cfg.n_layers - 1]   # [batch, pos, d_model]
identity("toy-2l (shortformer): the stream entering layer 0 is exactly "
         "W_E[t], with no positional term",
         (cache["resid_pre", 0] - model.W_E[tokens]).abs().max(),
         bool((cache["resid_pre", 0] == model.W_E[tokens]).all()),
         chapter="3")

# %% [markdown]
# **Bandwidth again.** Each head writes into a subspace of dimension at most
# $d_\text{head}$, the row space of its $W_O^h$. This model has
# $2 \times 4 = 8$ heads with $d_\text{head} = 16$, so 128 writing dimensions, into a
# 64-dimensional stream. Together they span the row space of all the $W_O$ matrices
# stacked, whose dimension is that matrix's rank, at most 64 because the matrix has 64
# columns. So if the eight heads' ranks add up to more than 64, their write subspaces
# cannot be independent: some combination of heads writes in directions that other heads
# also write in. The ranks are measured, not given: only if the eight ranks summed to 64
# or less (8 each on average) could every head have room of its own. This does not say
# that any *two* heads share a direction (two 16-dimensional subspaces of a 64-dimensional
# space need not meet), only that the eight cannot all have room of their own. The cell
# reports the measured ranks (numerical ranks, from the singular values); the conclusion
# holds for these numbers.

# %%
W_O_all = model.W_O.reshape(-1, cfg.d_model).double()  # [8*16, 64]
rank_each = [torch.linalg.matrix_rank(W.double()).item()
             for W in model.W_O.reshape(-1, cfg.d_head, cfg.d_model)]
rank_all = torch.linalg.matrix_rank(W_O_all).item()
print(f"ranks of the 8 heads' W_O: {rank_each}; sum {sum(rank_each)}")
print(f"rank of all of them together: {rank_all} (d_model = {cfg.d_model})")
# the dimension of the heads' joint write space (rank_all) is below the sum
# of their dimensions exactly when the subspaces are not independent; the
# ranks are numerical (measured from singular values), so this is reported
observation("numerical rank of all eight W_O stacked (their joint write "
            "space) and the sum of the heads' own ranks",
            f"span {rank_all} vs sum {sum(rank_each)}", chapter="3")

# %% [markdown]
# ### No privileged basis
#
# Take any orthogonal $R$ ($R R^\top = I$) and imagine the stream stored as $\tilde x = xR$
# instead of $x$. For the model to compute the same function in the new basis, it suffices
# that every write puts into the stream the rotated version of what it wrote before, and
# every read of the rotated stream gives exactly what it gave from the old one. Done that
# way, each entry of the table above changes in a way fixed by its side of the
# stream. Working out how is exercise
# 3.1.
#
# ### Exercise 3.1: rotate a model
#
# Write `rotate_model_weights(weights, R)`. `weights` is a dict with the twelve entries of
# the table above, in TransformerLens's stacked shapes (`W_Q` is
# `[n_layers, n_heads, d_model, d_head]`, `W_O` is `[n_layers, n_heads, d_head, d_model]`,
# `b_O` is `[n_layers, d_model]`, ...). Return a new dict with every entry, rotated where it
# should be. The check runs your function on small random models (with positions added
# to the stream, Vaswani et al.'s way); if the answer is wrong it names the mistake, or
# runs your weights to tell you whether the logits survived.

# %% tags=["exercise"]
def rotate_model_weights(weights, R):
    """weights: dict of TransformerLens-shaped tensors; R: [d_model, d_model]
    orthogonal. Returns the weights of the same model with stream x -> x R."""
    # BEGIN SOLUTION
    writes = ("W_E", "W_pos", "W_O", "b_O")
    reads = ("W_Q", "W_K", "W_V", "W_U")
    out = {}
    for name, W in weights.items():
        if name in writes:
            out[name] = W @ R          # [..., d_model] @ [d_model, d_model]
        elif name in reads:
            out[name] = R.T @ W        # broadcasts over layers and heads
        else:
            out[name] = W.clone()
    return out
    # END SOLUTION


checks.ch03_ex1(rotate_model_weights)

# %% [markdown]
# <details><summary>Exercise 3.1 worked out (open it once your function passes)</summary>
#
# A write $yW$ must become $yWR$, so that the new stream is the old one
# rotated. A read $xW$ must give the same result from the rotated stream, and
# $\tilde x\,(R^\top W) = x R R^\top W = x W$, so each read matrix becomes $R^\top W$:
#
# $$\text{writes:}\quad W_E \to W_E R,\quad W_\text{pos} \to W_\text{pos} R,\quad
# W_O^h \to W_O^h R,\quad b_O \to b_O R,$$
#
# $$\text{reads:}\quad W_Q^h \to R^\top W_Q^h,\quad W_K^h \to R^\top W_K^h,\quad
# W_V^h \to R^\top W_V^h,\quad W_U \to R^\top W_U.$$
#
# Every head then sees exactly the queries, keys and values it saw before, so its pattern
# and its output are unchanged; its output is written in the rotated basis; and the
# unembedding undoes the rotation. The logits are identical.
#
# </details>
#
# Nothing in the argument
# depends on what the weights are, so it holds for every model of this shape, trained or
# random; we now apply it to `toy-2l`.
#
# Now rotate the real model. A random orthogonal matrix comes from the QR decomposition of
# a Gaussian matrix (multiplying each column of $Q$ by the sign of the matching diagonal
# entry of the triangular factor makes the draw uniform over all orthogonal matrices,
# half of which are reflections; the argument above holds for any of them).

# %%
A = torch.randn(cfg.d_model, cfg.d_model, generator=g)
Q, tri = torch.linalg.qr(A)
R = Q * torch.sign(torch.diagonal(tri))
eye = torch.eye(cfg.d_model)
D = cfg.d_model
QR_TERMS = qr_terms(D)
# the QR, then the product R R^T (d more); the entries are at most 1
identity_close("R R^T = I for the random rotation", R @ R.T, eye,
               terms=QR_TERMS + D, scale=1.0, chapter="3")
observation("the random rotation's largest |entry| (a coordinate "
            "permutation's is 1)", R.abs().max(), chapter="3")
glue("R_max", R.abs().max().item())

# %%
NAMES = ["W_E", "W_pos", "W_Q", "W_K", "W_V", "W_O",
         "b_Q", "b_K", "b_V", "b_O", "W_U", "b_U"]


def get_weights(m):
    """The model's weights as a dict of stacked TransformerLens tensors."""
    return {n: getattr(m, n).detach().clone() for n in NAMES}


def with_weights(m, weights):
    """A copy of model m carrying the given weights."""
    new = copy.deepcopy(m)
    sd = {"embed.W_E": weights["W_E"], "pos_embed.W_pos": weights["W_pos"],
          "unembed.W_U": weights["W_U"], "unembed.b_U": weights["b_U"]}
    for layer in range(m.cfg.n_layers):
        for n in NAMES[2:10]:
            sd[f"blocks.{layer}.attn.{n}"] = weights[n][layer]
    new.load_state_dict(sd, strict=False)  # strict=False: the mask buffers
    return new


rotated = with_weights(model, rotate_model_weights(get_weights(model), R))
rot_logits, rot_cache = rotated.run_with_cache(tokens)
# both models round: twice a forward pass. Each rounding is relative to the
# absolute values accumulated, not to the result: at the unembedding that is
# |stream| @ |W_U| + |b_U|, which is at least |logits| (terms may cancel)
MODEL_TERMS = forward_terms(cfg, n_pos)
logit_scale = float((final.abs() @ model.W_U.abs() + model.b_U.abs()).max())
identity_close("the rotated model gives the same logits", rot_logits,
               logits, terms=2 * MODEL_TERMS, scale=logit_scale, chapter="3")
logit_bound = rounding_bound(2 * MODEL_TERMS, logit_scale)
print(f"second-copy loss: original {copy_losses(logits)[1]:.4f}, "
      f"rotated {copy_losses(rot_logits)[1]:.4f}")
# A softmax moves an entry p by at most 2 p times its scores' largest error
# delta (dp_i = p_i (ds_i - sum_j p_j ds_j)), and a forward pass bounds delta
# at the size of the largest finite score. So each entry gets its own bound,
# 2 p delta, plus the softmax's own rounding (an exp, a sum over the
# positions and a divide, relative to p) on each side.
layers = range(cfg.n_layers)
scores = torch.cat([cache["attn_scores", l].flatten() for l in layers])
delta = rounding_bound(2 * MODEL_TERMS,
                       float(scores[scores.isfinite()].abs().max()))
pat = torch.stack([cache["pattern", l] for l in layers])
rot_pat = torch.stack([rot_cache["pattern", l] for l in layers])
p_max = torch.maximum(pat, rot_pat)
allowed = p_max * (2 * delta + 2 * rounding_bound(n_pos + 2, 1.0))
pat_gap = (rot_pat - pat).abs()
identity("every attention pattern is unchanged: each entry p within "
         "2 p delta of the original (delta: the scores' rounding bound)",
         f"largest |difference| {pat_gap.max():.1e}, largest "
         f"|difference| / allowance {(pat_gap / allowed.clamp_min(1e-30)).max():.2g}",
         bool((pat_gap <= allowed).all()), chapter="3")
stream, rot_stream = final, rot_cache["resid_post", cfg.n_layers - 1]
# the forward passes up to the last stream, then @ R (d_model)
identity_close("the rotated model's stream is the original stream times R",
               rot_stream, stream @ R, terms=2 * MODEL_TERMS + D,
               chapter="3")

# %% [markdown]
# The predictions are the same to float32 rounding, and yet the individual coordinates of
# the stream are unrecognisable. For each coordinate $k$ we correlate its value in the
# original model with its value in the rotated model, across all positions of the batch:

# %%
flat = stream.reshape(-1, cfg.d_model)
rot_flat = rot_stream.reshape(-1, cfg.d_model)
corr = torch.stack([torch.corrcoef(torch.stack([flat[:, k], rot_flat[:, k]]))
                    [0, 1] for k in range(cfg.d_model)])
# with R = I every coordinate would correlate perfectly with itself
observation("mean |correlation| between coordinate k of the original and of "
            "the rotated stream, over the 64 coordinates (1 for R = I)",
            corr.abs().mean(), chapter="3")
glue("mean_corr", corr.abs().mean().item())


def mean_abs_corr(a, b):
    """Mean over coordinates k of |corr(a[:, k], b[:, k])|."""
    a, b = a - a.mean(0), b - b.mean(0)
    return ((a * b).sum(0) / (a.norm(dim=0) * b.norm(dim=0))).abs().mean()


# what any random orthogonal matrix gives: the same statistic for 100 more
# uniform draws (the rotated stream is the stream times R, checked above),
# from a generator of their own so that the page's later draws do not move
g_null = torch.Generator().manual_seed(4)
null_draws = []
for _ in range(100):
    Q_i, tri_i = torch.linalg.qr(torch.randn(cfg.d_model, cfg.d_model,
                                             generator=g_null))
    null_draws.append(mean_abs_corr(flat, flat @ (Q_i * torch.sign(
        torch.diagonal(tri_i)))))
null_draws = torch.stack(null_draws)
# and two *different* coordinates of the original stream, for comparison
c_orig = torch.corrcoef(flat.T)
off_diag = c_orig[~torch.eye(cfg.d_model, dtype=torch.bool)].abs().mean()
observation("mean |correlation| of matching coordinates over 100 other "
            "uniform random orthogonal matrices (mean, sd)",
            f"{null_draws.mean():.3f} +- {null_draws.std():.3f}", chapter="3")
observation("mean |correlation| between two different coordinates of the "
            "original stream", off_diag, chapter="3")
glue("corr_null_mean", null_draws.mean().item())
glue("corr_null_sd", null_draws.std().item())
glue("corr_off_diag", off_diag.item())
# the bound, not the measured difference (which is rounding noise)
glue("logit_bound", logit_bound)

fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.4))
axes[0].scatter(flat[:, :8], rot_flat[:, :8], s=4, alpha=0.5)
axes[0].set_xlabel("coordinate k, original model")
axes[0].set_ylabel("coordinate k, rotated model")
axes[0].set_title("residual stream (k = 0..7)")
lo, hi = logits.min().item(), logits.max().item()
axes[1].scatter(logits.detach().flatten(), rot_logits.detach().flatten(), s=2)
axes[1].plot([lo, hi], [lo, hi], color="gray", lw=0.8)
axes[1].set_xlabel("logit, original model")
axes[1].set_ylabel("logit, rotated model")
axes[1].set_title("logits (every token, every position)")
fig.tight_layout()
plt.show()

# %% [markdown]
# The logits agree to within float32 rounding (the rounding estimate for this computation is
# {glue:text}`logit_bound:.0e`) while the mean absolute
# correlation between matching coordinates of the two streams is
# {glue:text}`mean_corr:.2f` (with $R = I$ it would be 1; this $R$'s largest entry is
# {glue:text}`R_max:.2f`, where a coordinate permutation's is 1). That is what a random
# rotation typically gives: over 100 more uniform draws the same statistic is
# {glue:text}`corr_null_mean:.3f` $\pm$ {glue:text}`corr_null_sd:.3f` (mean and standard
# deviation). For comparison, two *different* coordinates of the original stream
# correlate by {glue:text}`corr_off_diag:.2f` on average. So coordinate $k$ of the rotated
# model is related to coordinate $k$ of the original by a little more than two different
# coordinates of one model are to each other, and by no more than a random rotation gives.
# Both models compute the same function, and they disagree
# about what coordinate $k$ holds, so the forward computation cannot be what gives
# coordinate $k$ a meaning. Statements about directions (read off the weights that write
# and read them) survive the change of basis.
#
# The symmetry belongs to the function the model computes, not to how it was trained.
# Adam {cite}`kingma2015adam` scales each coordinate's update separately, which is not
# rotation-invariant, and any other per-coordinate operation (a LayerNorm gain not folded
# away, an elementwise function of the stream) breaks the symmetry too; so a trained model
# may line some directions up with coordinates, and then its coordinates do mean
# something. The rotated model computes the same function, but it need not be a model that
# such training would produce. The
# argument above shows only that nothing in the forward computation gives a coordinate a
# meaning; whether training did is a question about a particular model, to be measured,
# as chapter {doc}`10_ffn` does for neurons. We measure it once here.
#
# ### Did training pick coordinates? One measurement in SmolLM2
#
# The model is the pretrained one the book uses from chapter 4 on, SmolLM2 (a 4-bit copy
# of SmolLM2-135M-Instruct; chapter {doc}`04_embeddings` says exactly which). Its forward
# computation has the symmetry too: its norm is an RMSNorm, which once its gain is folded
# into the next weights divides by the length alone (see below), its MLP nonlinearities
# act on neurons and its rotary positions on query and key dimensions, none on the stream.
# So if its stream favours some coordinates, its weights put that there (trained, then
# rounded to 4 bits), not its architecture. We run it on
# chapter {doc}`11_layernorm`'s passage, the first scene of the book's Shakespeare corpus
# cut to {glue:text}`rs_n_tok` tokens, and take the stream entering each layer. The
# statistic is chapter {doc}`10_ffn`'s: the share of a vector's squared length held by its
# top 1% of coordinates, here its {glue:text}`rs_top` largest of
# {glue:text}`rs_d_model`. Three versions of it: for the first token; averaged over the
# other tokens; and, for the median other token, the share held by the first token's top
# coordinates. The null is the same vectors in a uniformly random basis,
# {glue:text}`rs_n_null` random rotations applied at three layers spread over the depth
# ({glue:text}`rs_layers`); the test is at the middle one, and the figure shows every
# layer.

# %%
from circuitbook.data.corpus import shakespeare_scenes
from circuitbook.models.pretrained import load_smollm2
from circuitbook.neurons import haar_rotation, top_k_mass

smol, smol_tok = load_smollm2()
_, passage = shakespeare_scenes()[0]                  # chapter 11's passage
smol_ids = smol_tok(passage, return_tensors="pt").input_ids[:, :256]
_, smol_cache = smol.run_with_cache(
    smol_ids, names_filter=lambda n: n.endswith("hook_resid_pre"))
# the stream entering every layer: [n_layers, pos, d_model]
streams = torch.stack([smol_cache["resid_pre", l][0]
                       for l in range(smol.cfg.n_layers)])
TOP = smol.cfg.d_model // 100                     # chapter 10's top 1%: 5
TESTED = (5, 15, 25)                              # spread over the 30 layers
MID = smol.cfg.n_layers // 2                      # the tested one: 15


def coordinate_shares(v):
    """For streams v [layers, pos, d_model]: the share of token 0's squared
    length in its TOP largest coordinates; the same share averaged over the
    other tokens; and the median, over the other tokens, of the share of
    their squared length in token 0's TOP coordinates. [layers, 3]"""
    token0, others = v[:, 0], v[:, 1:].double()
    top0 = token0.abs().topk(TOP, dim=-1).indices              # [layers, TOP]
    at_top0 = others.gather(-1, top0[:, None].expand(-1, others.shape[1], -1))
    shared = at_top0.pow(2).sum(-1) / others.pow(2).sum(-1)   # [layers, pos]
    return torch.stack([top_k_mass(token0, TOP),
                        top_k_mass(others, TOP).mean(-1),
                        shared.median(-1).values], -1)


measured = coordinate_shares(streams)                          # [30, 3]
# the null: the same vectors in a uniformly random basis (a rotation leaves
# the model's function unchanged, as shown above), at the three layers
g_basis = torch.Generator().manual_seed(11)
at_tested = streams[list(TESTED)]
rotated_shares = torch.stack([
    coordinate_shares(at_tested @ haar_rotation(smol.cfg.d_model, g_basis))
    for _ in range(40)])                                   # [40, 3 layers, 3]
mid = TESTED.index(MID)
for k, what in enumerate(["the first token's squared length in its "
                          f"{TOP} largest coordinates",
                          f"the other tokens' squared length in their {TOP} "
                          "largest coordinates (mean over tokens)",
                          "the median other token's squared length in the "
                          f"first token's {TOP} largest coordinates"]):
    finding(f"SmolLM2, one passage, the stream entering layer {MID}: the "
            f"share of {what} is larger than in a random basis",
            measured[MID, k].item(),
            null=Null.draws(f"the same vectors in {len(rotated_shares)} "
                            "uniformly random bases",
                            rotated_shares[:, mid, k].tolist()),
            chapter="3")
lengths = streams.norm(dim=-1)                             # [30, pos]
others_median = lengths[:, 1:].median(-1).values
below_half = (measured[:, 0] < 0.5).nonzero()[:, 0].tolist()
observation("layers where the first token's top coordinates hold less than "
            "half of its squared length; its length there / the others' "
            "median", f"{below_half}; at most "
            f"{(lengths[below_half, 0] / others_median[below_half]).max():.2f}",
            chapter="3")
rest_null_max = rotated_shares[:, :, 1].max().item()
n_above = int((measured[:, 1] > rest_null_max).sum())
observation("layers (of 30) where the other tokens' mean top-share is above "
            "every random-basis value at the three tested layers",
            n_above, chapter="3")
top0_mid = streams[MID, 0].abs().topk(TOP).indices.tolist()
glue("rs_n_tok", smol_ids.shape[1])
glue("rs_top", TOP)
glue("rs_d_model", smol.cfg.d_model)
glue("rs_n_null", rotated_shares.shape[0])
glue("rs_layers", f"{TESTED[0]}, {TESTED[1]} and {TESTED[2]}")
glue("rs_mid", MID)
glue("rs_first_layer", TESTED[0])
glue("rs_last_layer", TESTED[2])
glue("rs_x0_mid", lengths[MID, 0].item())
glue("rs_med_mid", others_median[MID].item())
glue("rs_x0_5", lengths[TESTED[0], 0].item())
glue("rs_med_5", others_median[TESTED[0]].item())
glue("rs_coords_mid", ", ".join(map(str, top0_mid)))
glue("rs_s0_mid", measured[MID, 0].item())
glue("rs_s0_5", measured[TESTED[0], 0].item())
glue("rs_s0_25", measured[TESTED[2], 0].item())
glue("rs_null0_mean", rotated_shares[:, :, 0].mean().item())
glue("rs_null0_max", rotated_shares[:, :, 0].max().item())
glue("rs_rest_mid", measured[MID, 1].item())
glue("rs_rest_null", rotated_shares[:, :, 1].mean().item())
glue("rs_shared_mid", measured[MID, 2].item())
glue("rs_shared_null_max", rotated_shares[:, :, 2].max().item())
glue("rs_rest_min", measured[:, 1].min().item())
glue("rs_rest_max", measured[:, 1].max().item())
glue("rs_n_above", n_above)
glue("rs_n_layers", smol.cfg.n_layers)
glue("rs_below_half", ", ".join(map(str, below_half[:-1]))
     + f" and {below_half[-1]}" if len(below_half) > 1 else str(below_half[0]))
glue("rs_low_ratio", (lengths[below_half, 0]
                      / others_median[below_half]).max().item())

fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
depth = torch.arange(smol.cfg.n_layers)
ax[0].plot(depth, measured[:, 0], "k^-", ms=4, label="first token")
ax[0].plot(depth, measured[:, 1], "o-", ms=3, label="others (mean)")
ax[0].plot(depth, measured[:, 2], "s--", ms=3,
           label=f"others, in the first's top {TOP} (median)")
ax[0].axhspan(rotated_shares.min().item(), rotated_shares.max().item(),
              color="gray", alpha=0.3,
              label="random basis (layers " + ", ".join(map(str, TESTED)) + ")")
ax[0].set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
ax[0].set_ylim(0, 1.5)                 # room above the data for the legend
ax[0].set_xlabel("layer (the stream entering it)")
ax[0].set_ylabel(f"share of squared length, top {TOP}")
ax[0].legend(fontsize=7, loc="upper center", ncol=2)
ax[1].plot(depth, lengths[:, 0], "k^-", ms=4, label="first token")
ax[1].plot(depth, others_median, "o-", ms=3, label="other tokens (median)")
ax[1].set_yscale("log")
ax[1].set_xlabel("layer (the stream entering it)")
ax[1].set_ylabel("length of the stream vector")
ax[1].legend(fontsize=7, loc="lower right")
fig.tight_layout()
plt.show()

# %% [markdown]
# SmolLM2's weights (the 4-bit copy) do line its stream up with coordinates, and strongly. Take first the
# first token, which chapter {doc}`11_layernorm` finds far larger than the others. Entering
# layer {glue:text}`rs_mid` it has length {glue:text}`rs_x0_mid:,.0f`, against a median of
# {glue:text}`rs_med_mid:.0f` for the other tokens, and its
# {glue:text}`rs_top` largest coordinates (numbers {glue:text}`rs_coords_mid`) hold
# {glue:text}`rs_s0_mid:.1%` of its squared length; in a random basis the top
# {glue:text}`rs_top` hold {glue:text}`rs_null0_mean:.1%` on average and never more than
# {glue:text}`rs_null0_max:.1%` (the random bases were drawn at the three tested layers,
# {glue:text}`rs_layers`). Entering layer {glue:text}`rs_first_layer` it is
# {glue:text}`rs_x0_5:.0f` long (median of the others {glue:text}`rs_med_5:.0f`), with
# {glue:text}`rs_s0_5:.1%` in its top {glue:text}`rs_top`; entering layer
# {glue:text}`rs_last_layer`, {glue:text}`rs_s0_25:.1%`. So the first token is not just a
# token of unusual size: its size sits in a handful of coordinates. Not at every layer:
# the top {glue:text}`rs_top` hold less than half of its squared length at layers
# {glue:text}`rs_below_half` only, and there its vector is not outsized either (at most
# {glue:text}`rs_low_ratio:.1f` times the others' median length).
#
# The other tokens are aligned too, less extremely. At layer {glue:text}`rs_mid` their top
# {glue:text}`rs_top` coordinates hold {glue:text}`rs_rest_mid:.0%` of their squared
# length on average (a random basis: {glue:text}`rs_rest_null:.1%`), and the median token
# has {glue:text}`rs_shared_mid:.0%` of its squared length in the first token's
# {glue:text}`rs_top` coordinates (a random basis: at most
# {glue:text}`rs_shared_null_max:.1%`). Over all {glue:text}`rs_n_layers` layers their
# mean share runs from {glue:text}`rs_rest_min:.0%` to {glue:text}`rs_rest_max:.0%`, above
# the largest random-basis value seen at the three tested layers at {glue:text}`rs_n_above`
# of them.
#
# This is one model, the 4-bit copy, on one passage. It shows that SmolLM2's weights make
# a few coordinates of its stream special; it does not say which part of training did it
# (Adam's per-coordinate steps and the norms' per-coordinate gains, before folding, are
# both candidates), nor what the coordinates carry; nor does it rule out the 4-bit rounding
# itself, whose blocks of 32 consecutive weights follow the coordinates, as a contributor.

# %% [markdown]
# ### What would break it: a nonlinearity per coordinate
#
# The argument used only that every operation touching the stream is linear. Suppose the
# architecture applied an elementwise function to the stream between the layers, say a
# ReLU. The original model computes $\operatorname{ReLU}(x)$, the rotated one
# $\operatorname{ReLU}(xR)$, and $\operatorname{ReLU}(xR) \ne \operatorname{ReLU}(x)R$: a
# ReLU zeroes the negative coordinates, and *which* coordinates are negative depends on the
# basis. A nonlinearity that rescales the vector by a function of its length, such as
# dividing by the norm, commutes with every rotation and keeps the symmetry. We insert both between layer 0
# and layer 1 with a hook.

# %%
def relu_hook(act, hook):
    return act.relu()


def norm_hook(act, hook):
    return act / act.norm(dim=-1, keepdim=True) * math.sqrt(act.shape[-1])


def run_with(m, fn):
    """Run m on the tokens with fn applied to the stream after layer 0."""
    return m.run_with_hooks(tokens,
                            fwd_hooks=[("blocks.0.hook_resid_post", fn)])


relu_gap = (run_with(rotated, relu_hook)
            - run_with(model, relu_hook)).abs().max()
norm_orig, norm_rot = run_with(model, norm_hook), run_with(rotated, norm_hook)
# the rotated model's rounding (as above) plus the hook's norm: d_model
# squares summed, a sqrt, a divide and a multiply (d_model + 3), in both
hook_terms = 2 * (MODEL_TERMS + D + 3)
relu_bound = rounding_bound(hook_terms, logit_scale)
identity("with a ReLU on the stream, the rotated model's logits differ "
         "(beyond the rounding bound)",
         f"max |difference| {relu_gap:.2f}, bound {relu_bound:.1g}",
         bool(relu_gap > relu_bound), chapter="3")
identity_close("with a nonlinearity on the stream that rescales it by a "
               "function of its length, they still agree", norm_rot, norm_orig, terms=hook_terms, chapter="3")
glue("relu_gap", relu_gap.item())
glue("logit_std", logits.std().item())

# %% [markdown]
# With the ReLU the logits move by up to {glue:text}`relu_gap:.2f` (their standard
# deviation is {glue:text}`logit_std:.2f`). The book's transformers never apply an
# elementwise nonlinearity to the stream itself, which is why their forward computation gives it no
# privileged basis (LayerNorm aside: see below). They do apply
# one inside every MLP, to the $d_\text{ff}$ hidden neurons, and there the forward
# computation itself privileges the basis: a neuron is a unit of the computation in a way
# that a residual coordinate is not (chapter {doc}`10_ffn` checks it).
#
# **LayerNorm needs care.** LayerNorm is not elementwise, but it is not purely a function
# of the length either. It subtracts each vector's mean over coordinates, which removes the
# vector's component along the all-ones direction $(1, \dots, 1)$: a direction defined by the
# basis. And its learned gain multiplies each coordinate by its own number. A model with
# LayerNorm is therefore symmetric only under rotations that map the all-ones line to itself,
# and only once the gain has been folded into the next layer's weights (which
# TransformerLens does when loading models). RMSNorm, the norm of SmolLM2, does not centre:
# once its gain is folded, it divides by the length alone and keeps the full symmetry. We
# check both for gain-free norms; chapter 11 treats LayerNorm and RMSNorm in full.

# %%
def layer_norm(x):      # no gain, no bias
    c = x - x.mean(-1, keepdim=True)
    return c / c.pow(2).mean(-1, keepdim=True).sqrt()


def rms_norm(x):        # no centring, no gain: rescales x by a function of its length
    return x / x.pow(2).mean(-1, keepdim=True).sqrt()


d = cfg.d_model
x = torch.randn(6, d, generator=g) + 0.7         # vectors with a nonzero mean
# a rotation that fixes the all-ones direction (it turns only its complement)
u = torch.ones(d, 1) / math.sqrt(d)
B, _ = torch.linalg.qr(torch.cat([u, torch.randn(d, d - 1, generator=g)], 1))
R0, _ = torch.linalg.qr(torch.randn(d - 1, d - 1, generator=g))
R_fix = B @ torch.block_diag(torch.ones(1, 1), R0) @ B.T
# R_fix: two QRs and two products (2d); its entries are at most 1, and
# (1, ..., 1) @ R_fix sums d of them (d more), of size at most sqrt(d).
FIX_TERMS = 2 * qr_terms(d) + 2 * d
identity_close("R_fix fixes the all-ones vector", torch.ones(d) @ R_fix,
               torch.ones(d), terms=FIX_TERMS + d, scale=math.sqrt(d),
               chapter="3")

# layer_norm: a mean over d, subtract, a mean of d squares, sqrt, divide
# (2d + 4), and a product with the rotation (d), on each side; plus the
# rotation's own error, at the size of the normalised outputs
ln_gap = (layer_norm(x @ R) - layer_norm(x) @ R).abs().max()
ln_size = float(layer_norm(x).abs().max())
ln_bound = rounding_bound(QR_TERMS + 2 * (3 * d + 4), ln_size)
identity("LayerNorm does not commute with a random rotation (beyond the "
         "rounding bound)", f"max |difference| {ln_gap:.2f}, "
         f"bound {ln_bound:.1g}", bool(ln_gap > ln_bound), chapter="3")
identity_close("it does commute with a rotation that fixes (1, ..., 1)",
               layer_norm(x @ R_fix), layer_norm(x) @ R_fix,
               terms=FIX_TERMS + 2 * (3 * d + 4), chapter="3")
identity_close("RMS normalisation without a gain commutes with every "
               "rotation", rms_norm(x @ R), rms_norm(x) @ R,
               terms=QR_TERMS + 2 * (2 * d + 3), chapter="3")

# %% [markdown]
# ### Exercise 3.2: a rotation in one plane
#
# A random rotation moves every coordinate at once. To watch the symmetry at work, rotate
# just two coordinates $i$ and $j$ by an angle $\theta$ and leave the rest alone. Write
# `plane_rotation(d, i, j, theta)` returning the $d \times d$ matrix $R$ for which
# $x \mapsto xR$ turns the plane of coordinates $i$ and $j$ by the angle $\theta$ (in
# radians), in the direction that takes $e_i$ (the $i$-th basis vector) towards $e_j$, and
# leaves every other coordinate as it is. Mind the convention: we multiply row vectors on
# the right, and most textbooks write this matrix for column vectors.

# %% tags=["exercise"]
def plane_rotation(d, i, j, theta):
    """[d, d] rotation by theta (radians) in the plane of coordinates i, j,
    for row vectors: x -> x @ R."""
    # BEGIN SOLUTION
    R = torch.eye(d)
    c, s = math.cos(theta), math.sin(theta)
    R[i, i], R[i, j] = c, s      # row i is the image of e_i
    R[j, i], R[j, j] = -s, c     # row j is the image of e_j
    return R
    # END SOLUTION


checks.ch03_ex2(plane_rotation)

# %% [markdown]
# The explorer rotates the plane of coordinates 0 and 1 of the stream by the angle on the
# slider, using your two functions. Left: those two coordinates of the final stream at every
# position of one sequence, before (gray) and after (blue) the rotation; they swing around
# the origin. Middle: the rotated model's logits against the original's; they stay on the
# diagonal at every angle. Right: the same with a ReLU applied to the stream after layer 0;
# the points leave the diagonal as soon as the angle moves away from 0, and come back to it
# only at 360 degrees, a full turn.

# %%
w0 = get_weights(model)
seq = tokens[:1]
base_logits = model(seq).detach()
base_relu = run_with(model, relu_hook)[:1].detach()
xy0 = cache["resid_post", cfg.n_layers - 1][0, :, :2].detach()
lim = 1.15 * xy0.norm(dim=-1).max().item()


def draw_plane(angle=60):
    Rp = plane_rotation(cfg.d_model, 0, 1, math.radians(angle))
    m = with_weights(model, rotate_model_weights(w0, Rp))
    logits_rot, c = m.run_with_cache(seq)
    relu_rot = m.run_with_hooks(
        seq, fwd_hooks=[("blocks.0.hook_resid_post", relu_hook)])
    xy = c["resid_post", cfg.n_layers - 1][0, :, :2].detach()
    fig, ax = plt.subplots(1, 3, figsize=(9, 3.4))
    ax[0].scatter(xy0[:, 0], xy0[:, 1], s=10, color="gray", label="original")
    ax[0].scatter(xy[:, 0], xy[:, 1], s=10, color="tab:blue", label="rotated")
    for a, b in zip(xy0, xy):
        ax[0].plot([a[0], b[0]], [a[1], b[1]], color="lightgray", lw=0.6)
    ax[0].set(xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal",
              xlabel="coordinate 0", ylabel="coordinate 1")
    ax[0].set_title(f"final stream\nangle {angle} deg", fontsize=9)
    ax[0].legend(fontsize=7, loc="lower right")
    for k, (new, old, name) in enumerate(
            [(logits_rot, base_logits, "no nonlinearity"),
             (relu_rot, base_relu, "ReLU on the stream")], start=1):
        new, old = new.detach().flatten(), old.flatten()
        ax[k].scatter(old, new, s=2)
        lo, hi = old.min().item(), old.max().item()
        ax[k].plot([lo, hi], [lo, hi], color="gray", lw=0.8)
        ax[k].set_xlabel("logit, original")
        ax[k].set_title(f"{name}\nmax |difference| "
                        f"{(new - old).abs().max():.1e}", fontsize=9)
    ax[1].set_ylabel("logit, rotated")
    fig.tight_layout()
    plt.show()


explore(draw_plane, angle=(0, 360, 10))

# %% [markdown]
# ## Summary
#
# - Every layer reads the residual stream with a linear map, computes, and adds its result
#   back; with pre-norm (or no norm) the stream is a running sum of writes (the identity
#   chapter 1 checked; in `toy-2l` it has no positional term). With the paper's post-norm
#   arrangement it is not: in one untrained stack the top differs from the sum by
#   {glue:text}`post_rel:.0%` of its length.
# - The stream is a shared channel of $d_\text{model}$ dimensions. The base Transformer's
#   encoder writes into its 512 dimensions from {glue:text}`writer_dims` head dimensions and
#   neurons; in our toy model 8 heads write 128 dimensions into a stream of 64, so their
#   write subspaces cannot be independent.
# - The forward pass gives the stream no privileged basis: rotating every write by $R$ and
#   every read by $R^\top$ leaves the logits and attention patterns unchanged while the
#   individual coordinates become unrecognisable. Whether training lines some directions
#   up with coordinates anyway is a question about a particular model. In SmolLM2 (the
#   4-bit copy), on one passage, its weights do: entering layer {glue:text}`rs_mid`, the first token's
#   {glue:text}`rs_top` largest coordinates hold {glue:text}`rs_s0_mid:.1%` of its squared
#   length and the other tokens' hold {glue:text}`rs_rest_mid:.0%` on average, against
#   about {glue:text}`rs_rest_null:.0%` in a random basis.
# - An elementwise nonlinearity on the stream would break the symmetry; one that rescales
#   the vector by a function of its length would not. Transformers apply elementwise nonlinearities only to MLP neurons, which is
#   why neurons, unlike residual coordinates, are a privileged basis. LayerNorm's centring
#   and gain single out directions too, so with LayerNorm the rotation argument needs the
#   care described above; RMSNorm with its gain folded keeps the full symmetry.
