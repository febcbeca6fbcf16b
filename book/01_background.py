# %% [markdown]
# # 1. Background: why transformers, why circuits
#
# A transformer is the most successful sequence model we have, and also one of the least
# understood. This chapter explains where the architecture came from, why a second community
# set out to reverse-engineer it, and the one structural fact that makes reverse-engineering
# possible: **the residual stream is a sum**. By the end you will have checked that fact on a
# small GPT-2-style model, to float32 rounding.

# %% [markdown]
# ## Plain language
#
# **Why transformers.** Before 2017 the best translation systems read a sentence one word at a
# time with a recurrent network. They already used **attention**: since Bahdanau et al.
# {cite}`bahdanau2015neural` the decoder could look back at every source word rather than
# at one summary vector. But within each sentence the recurrence remained, and it has two
# costs. Training cannot be parallelised across positions, because step $t$ needs the result
# of step $t-1$. And inside the encoder and the decoder, information about an early word must
# survive many updates of a hidden vector before a late word can use it. Vaswani et al.
# {cite}`vaswani2017attention` removed the recurrence and kept the attention. In their
# *Transformer* every position looks at every other position directly through attention,
# and all positions are processed at once. The model got better and
# training got much faster, which is why almost every large language model since is a
# transformer.
#
# **Why circuits.** A trained transformer computes something useful, but its weights are
# millions of numbers with no labels. *Mechanistic interpretability* tries to read those
# weights as an algorithm: to say which parts of the network do what, and to check the claim
# by changing the parts. Elhage et al. {cite}`elhage2021mathematical` showed that for
# attention-only transformers this can be done exactly once the attention patterns are
# given, by rewriting the model as a sum of simple terms. The same paper found, in two-layer models, the **induction head**, a circuit
# of two heads that lets a model continue patterns it has seen earlier in the same text.
# Olsson et al. {cite}`olsson2022context` then studied how induction heads form during
# training and argued that they drive much of in-context learning in large models. We build
# up to them in chapters 16-18.

# %% [markdown]
# ## Two traditions, one set of matrices
#
# The two papers describe the same object in different ways, because they want different
# things from it.
#
# | | the engineering tradition | the circuits tradition |
# |---|---|---|
# | sources | Vaswani et al. 2017; the Annotated Transformer {cite}`rush2018annotated` | Elhage et al. 2021; Olsson et al. 2022 |
# | question | how do we build and train it? | what algorithm has it learned? |
# | unit of thought | the layer: a block that maps a sequence to a sequence | the path: a product of weight matrices from input to output |
# | typical object | `MultiHeadedAttention` with four `nn.Linear`s | $W_{QK}^h = W_Q^h W_K^{h\top}$ and $W_{OV}^h = W_V^h W_O^h$, one pair per head |
# | success looks like | lower loss, higher BLEU | a prediction about the model that an intervention confirms |
#
# Neither view is more correct. The engineering view is the one you need to *write* a
# transformer; the circuit view is the one you need to *read* a trained one. Each chapter of
# this book shows both, and then checks in code that they agree.

# %% [markdown]
# ## The key observation: the residual stream is a sum
#
# First a caveat, because it decides where the observation applies. The transformer of
# Vaswani et al. is *post-norm*: after each sublayer it normalises the sum,
# $\operatorname{LayerNorm}(x + \operatorname{Sublayer}(x))$, and every later LayerNorm
# rescales what was written before. What follows is not true of that model, and chapters 2
# and 3 measure how far from it the paper's arrangement is. It is true of *pre-norm*
# transformers (GPT-2 and almost every language model since, and the Annotated Transformer's
# own code), and of models with no LayerNorm at all, like the toy models this book trains.
# (Elhage et al. analyse their toy models as if they had no LayerNorm, setting it aside;
# apart from its data-dependent division, the rest of a LayerNorm folds into the
# neighbouring weights.)
#
# In such a transformer every sublayer (an attention layer, or an MLP) **reads** from a
# shared vector per position, the *residual stream*, computes something, and **adds** its
# result back:
#
# $$x^{(\ell+1)} = x^{(\ell)} + \operatorname{Sublayer}_\ell\big(x^{(\ell)}\big).$$
#
# Nothing overwrites the stream; contributions only accumulate. Unrolling the recursion,
# the final stream is the embedding plus the output of every sublayer:
#
# $$x^{\text{final}} = \underbrace{x^{(0)}}_{\text{embedding}} + \sum_{\ell} \operatorname{Sublayer}_\ell\big(x^{(\ell)}\big).$$
#
# And because an attention layer's output is itself the sum of its heads' outputs plus one
# bias vector (chapter 7), the stream is a sum of *per-head* terms too. The sublayers are
# nonlinear functions of their input, but the way their results combine is plain addition.
# That is what lets us ask "how much did head 1.3 write *directly* into this logit?" and get
# an exact answer (exact up to the final LayerNorm's division, which we come back to below).
# "Directly" matters: head 1.3's output is also read by every later layer, and that indirect
# effect is not one term of the sum; measuring it takes an intervention.
#
# This is an identity, true by construction: there is nothing to discover by checking it,
# but checking it shows that the code computes what the algebra says (chapter 2 checks it
# again on the Annotated Transformer's encoder; later chapters refer back here). We build a small GPT-2-style
# model in TransformerLens {cite}`nanda2022transformerlens`, with attention, MLPs and
# LayerNorm, and random weights: the identity is structural, so it must hold for any
# weights, trained or not.

# %% [markdown]
# The set-up (imports, and one helper that checks a sum to its rounding bound) is
# folded away.

# %% tags=["hide-input"]
import math
import warnings

import matplotlib.pyplot as plt
import torch
from transformer_lens import HookedTransformer, HookedTransformerConfig

from circuitbook import checks
from circuitbook.book import glue, identity, identity_close, rounding_bound
from circuitbook.models import attn_only

# This chapter only reads models, never trains them: no autograd graph.
torch.set_grad_enabled(False)
# TransformerLens 3.9 marks HookedTransformer as deprecated in favour of 4.x;
# the book stays on 3.9 on purpose (4.x cannot build the framework's
# shortformer attention-only models).
warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)


def sum_is(statement, got, want, terms):
    """Check that `got` (a sum we rebuilt) equals `want` (the model's own
    tensor) to rounding. `terms` are the tensors added: each side adds them
    in its own order, at most len(terms) roundings per side, each of the
    size of the running sum, which is at most the terms' absolute sum."""
    scale = float(sum(t.abs() for t in terms).max())
    identity_close(statement, got, want, terms=2 * len(terms), scale=scale,
                   chapter="1")


# %%
cfg = HookedTransformerConfig(
    n_layers=3, d_model=64, n_heads=4, d_head=16, d_mlp=256, d_vocab=100,
    n_ctx=32, act_fn="gelu", normalization_type="LN",
    positional_embedding_type="standard", seed=0,
)
model = HookedTransformer(cfg, move_to_device=False)
tokens = torch.randint(0, cfg.d_vocab, (2, 16))
logits, cache = model.run_with_cache(tokens)

# The stream after the last layer, straight from the model's hooks:
final = cache["resid_post", cfg.n_layers - 1]

# The same stream rebuilt as a sum: embedding + positional embedding + every
# sublayer's output.
parts = {"embed": cache["hook_embed"], "pos_embed": cache["hook_pos_embed"]}
for layer in range(cfg.n_layers):
    parts[f"attn {layer}"] = cache["attn_out", layer]
    parts[f"mlp {layer}"] = cache["mlp_out", layer]
# added in the model's own order (embed, pos_embed, attn 0, mlp 0, ...), so
# this sum repeats the model's roundings exactly: it tests that nothing else
# enters the stream, not the size of rounding
rebuilt = sum(parts.values())
# kept for the per-head check below: each attention layer's output as this
# default run computes it (one product of all heads' z with W_O, plus b_O),
# and the z that went into it: [layer, batch, pos, head, d_head]
attn_default = torch.stack([cache["attn_out", layer]
                            for layer in range(cfg.n_layers)])
z_default = torch.stack([cache["z", layer] for layer in range(cfg.n_layers)])
sum_is(f"the final residual stream equals the sum of its {len(parts)} parts "
       "(embeddings and sublayer outputs)", rebuilt, final,
       list(parts.values()))

# %% [markdown]
# The difference is exactly zero, not merely within the rounding bound: our sum adds the
# same float32 tensors in the same order as the model does (embedding, positions, then each
# layer's attention and MLP output), so it repeats the model's own roundings. What the
# check shows is that nothing else enters the stream: no write is rescaled, replaced or
# left out. Notice that this model has LayerNorm, a nonlinear operation, and the identity
# still holds: in a pre-norm model like GPT-2, LayerNorm is applied to what a sublayer
# *reads*, never to the stream itself.
#
# One level down, each attention layer's output is the sum of its heads' outputs plus one
# bias vector. TransformerLens can record each head's output separately (`hook_result`), so we
# can split the stream into per-head terms as well. With that switch on, TransformerLens
# *computes* the layer's output by adding up the per-head results, so comparing the two in
# the same run would compare a sum with itself. We compare the per-head sum with the layer
# output of the first run instead, where the switch was off and the output came from one
# product of all heads' values with $W_O$: the same numbers added in another order, so the
# two agree to float32 rounding and no better.

# %%
model.set_use_attn_result(True)
_, cache = model.run_with_cache(tokens)
per_head = {}
for layer in range(cfg.n_layers):
    result = cache["result", layer]  # [batch, pos, head, d_model]
    for head in range(cfg.n_heads):
        per_head[f"{layer}.{head}"] = result[:, :, head]
b_O = [model.b_O[layer] for layer in range(cfg.n_layers)]
mlps = [cache["mlp_out", layer] for layer in range(cfg.n_layers)]

# every layer at once: [layer, batch, pos, d_model] stacks
heads = [torch.stack([cache["result", layer][:, :, h]
                      for layer in range(cfg.n_layers)])
         for h in range(cfg.n_heads)]
biases = torch.stack(b_O)[:, None, None].expand_as(heads[0])
# Both sides add the same n_heads * d_head products z W_O and b_O. The first
# run: one dot product of that length plus the bias. Ours: d_head per head,
# then the heads and the bias, in TransformerLens and again in our sum. Each
# rounding is at most eps times the products' absolute sum.
n_prod = cfg.n_heads * cfg.d_head
abs_sum = (torch.einsum("lbphe,lhed->lbpd", z_default.abs(),
                        torch.stack([model.W_O[layer].abs()
                                     for layer in range(cfg.n_layers)]))
           + biases.abs())
identity_close("each attention layer's output (first run, computed in one "
               "product) is the sum of its heads' outputs plus its output "
               "bias b_O", sum(heads) + biases, attn_default,
               terms=(n_prod + 1) + (cfg.d_head + 2 * (cfg.n_heads + 1)),
               scale=float(abs_sum.max()), chapter="1")

fine_terms = ([cache["hook_embed"], cache["hook_pos_embed"]]
              + list(per_head.values()) + b_O + mlps)
sum_is(f"split finer, {len(per_head)} per-head terms + embeddings + output "
       "biases + MLPs sum to the final stream", sum(fine_terms),
       cache["resid_post", cfg.n_layers - 1], fine_terms)

# %% [markdown]
# Because the stream is a sum, so is anything *linear* we compute from it. The picture below
# splits the final residual vector at one position into its parts and shows how large each one
# is. Bigger parts are not automatically more important (what matters is the direction a part
# writes in, and what later layers read), but this bookkeeping is the starting point for every
# attribution in the book. (A logit is not quite linear in the stream here: the model's final
# LayerNorm divides by the stream's size first. Holding that divisor fixed makes it affine,
# a linear map plus the LayerNorm's and unembedding's biases; chapter 2 writes that split out.
# Chapter 11 measures how far a frozen divisor is from the real norm, in SmolLM2, whose norm
# is an RMSNorm rather than this page's LayerNorm.)

# %%
pos = tokens.shape[1] - 1
# the terms of the per-head split, one bar each
names = (["embed", "pos_embed"] + list(per_head)
         + [f"b_O {layer}" for layer in range(cfg.n_layers)]
         + [f"mlp {layer}" for layer in range(cfg.n_layers)])
vectors = ([cache["hook_embed"][0, pos], cache["hook_pos_embed"][0, pos]]
           + [t[0, pos] for t in per_head.values()] + b_O
           + [t[0, pos] for t in mlps])
norms = [v.norm().item() for v in vectors]
colors = (["tab:gray"] * 2 + ["tab:blue"] * len(per_head)
          + ["tab:green"] * cfg.n_layers + ["tab:orange"] * cfg.n_layers)
glue("ch1_bO_norm", max(b.norm().item() for b in b_O))

fig, ax = plt.subplots(figsize=(9, 3))
ax.bar(range(len(names)), norms, color=colors)
ax.set_xticks(range(len(names)), names, rotation=90, fontsize=8)
ax.set_ylabel("norm of the part")
ax.set_title(f"The final residual stream at position {pos}, split into its "
             "parts\n(gray: embeddings, blue: heads, green: output "
             "biases b_O, orange: MLPs)",
             fontsize=10)
fig.tight_layout()
plt.show()

# %% [markdown]
# The green bars are there but empty: the output biases are terms of the sum like any
# other, and in this untrained model their largest norm is {glue:text}`ch1_bO_norm:.1g`,
# because TransformerLens initialises biases at zero. In a trained model they are not zero,
# and they count in the sum whatever their size.

# %% [markdown]
# ## What is *not* linear, and what the framework does about it
#
# The sum hides three nonlinear steps, and the rest of the book is partly about how to live
# with them.
#
# 1. **The attention pattern.** Which positions a head looks at depends on the input through
#    a softmax. The framework's trick (chapter 13) is to treat the pattern as given: *once the
#    pattern is fixed*, a head is an affine map of what it reads, and a linear one when its
#    value and output biases are zero. In a pre-norm model what it reads is
#    $\operatorname{LN}(x)$, not the stream $x$; in a model with no LayerNorm and no biases
#    the head is linear in the stream, and an attention-only model's logits become an exact
#    sum of paths.
# 2. **MLPs.** Their elementwise nonlinearity breaks additivity inside the layer (chapter 10).
#    Elhage et al. set them aside and study attention-only models first; so do the models the
#    book trains for chapters 13-18 (the SmolLM2 sections of chapters 13, 17 and 18 keep its
#    MLPs and account for them separately). Attention-only models are the framework's
#    simplification, not the real thing: GPT-2, Pythia, Llama and SmolLM2 all have an MLP in
#    every layer.
# 3. **LayerNorm.** It divides by a data-dependent scale (chapter 11). Its learned gain and
#    bias fold into the next weights; the division does not. Chapter 11 measures how far
#    from linear the division is, for the RMSNorm of SmolLM2 (the pretrained model the book
#    uses), in two ways. Its first-order expansion (the tangent) is close for small changes
#    of the stream and drifts for large ones. Holding the divisor frozen is another matter:
#    its error is set more by the direction of the change (how much of it runs along the
#    stream) than by its size, so it can be off even for small changes.
#
# The cell below makes the first point concrete on an attention-only model. A map $f$ is
# linear when it is *additive*, $f(x + y) = f(x) + f(y)$, and *homogeneous*,
# $f(cx) = c f(x)$. The test that matters for a sum of paths is additivity: it is what
# lets the contributions of two parts of the input be computed apart and added.
# Homogeneity alone would not do, because a map can be homogeneous without being additive
# ($(x_1, x_2) \mapsto (x_1^3 + x_2^3)^{1/3}$ is one). So we take two inputs $x$ and $y$
# and check three things. Our three-einsum formula is the layer. With the pattern frozen
# (we use the pattern the layer computes on $x$), the head is additive, and since the
# fresh model's value and output biases are zero, nothing is added to it: the frozen head
# is $x \mapsto A\,x\,W_V W_O$, a product of matrices, linear by construction. These are
# identities, true by construction, and the cell shows that the code and the algebra
# agree. And with the pattern recomputed the head is not additive: the input $x + y$ gives
# scores $(x + y) W_{QK} (x + y)^\top$, which are not the scores of $x$ plus those of $y$,
# and after the softmax its pattern is in general neither $x$'s nor $y$'s, so generically
# $f(x + y) \ne f(x) + f(y)$. How *far* from additive the layer is depends on its weights
# and inputs. That it is not additive is the generic case; additivity survives only for
# special weights or inputs (a layer with $W_{QK} = 0$ and no query bias, $b_Q = 0$, for
# one, gives every key the same score whatever its input, so it attends uniformly, and
# with zero value and output biases it is linear). So the last check asks only that the
# deviation exceed what rounding could produce.

# %%
toy = attn_only(1, d_model=32, n_heads=2, d_vocab=50, n_ctx=16, seed=1)
attn = toy.blocks[0].attn
identity("the fresh layer's value and output biases are zero, so with its "
         "pattern frozen it is linear, not merely affine",
         f"max |b_V| {attn.b_V.abs().max():.1g}, max |b_O| "
         f"{attn.b_O.abs().max():.1g}",
         bool((attn.b_V == 0).all() and (attn.b_O == 0).all()), chapter="1")
# two residual streams: [batch, pos, d_model]
x = toy.W_E[torch.randint(0, 50, (1, 8))].detach()
y = toy.W_E[torch.randint(0, 50, (1, 8))].detach()


def with_pattern(x, pattern, W_V=attn.W_V, W_O=attn.W_O):
    """The layer's output for input x with a *given* pattern
    [batch, head, q, k]."""
    v = torch.einsum("bpd,hde->bphe", x, W_V)        # values, per head
    z = torch.einsum("bhqk,bkhe->bqhe", pattern, v)  # mix positions
    return torch.einsum("bqhe,hed->bqd", z, W_O)     # write back


def run(x):
    """The real layer: returns its output, the pattern it computed and the
    largest |finite score|."""
    seen = {}
    attn.hook_attn_scores.add_hook(
        lambda s, hook: seen.__setitem__("scores", s))
    attn.hook_pattern.add_hook(lambda p, hook: seen.__setitem__("pattern", p))
    out = attn(x, x, x)
    attn.hook_attn_scores.remove_hooks()
    attn.hook_pattern.remove_hooks()
    scores = seen["scores"]
    return out, seen["pattern"], float(scores[scores.isfinite()].abs().max())


out_x, pattern_x, score_x = run(x)
out_y, pattern_y, score_y = run(y)
out_xy, pattern_xy, score_xy = run(x + y)
free = out_xy - (out_x + out_y)
frozen = with_pattern(x + y, pattern_x) - (with_pattern(x, pattern_x)
                                           + with_pattern(y, pattern_x))
# The chain x @ W_V, pattern @ v, z @ W_O sums over d_model, the positions and
# n_heads * d_head, on each side (the layer also adds its zero biases). Every
# product in the chain is accumulated in absolute value at most the same chain
# run on absolute values: that is the scale of its roundings.
chain = toy.cfg.d_model + x.shape[1] + toy.cfg.n_heads * toy.cfg.d_head
W_V_abs, W_O_abs = attn.W_V.abs(), attn.W_O.abs()
identity_close("our three-einsum formula with the layer's own pattern is the "
               "attention layer", with_pattern(x, pattern_x), out_x,
               terms=2 * chain + 2,
               scale=float(with_pattern(x.abs(), pattern_x, W_V_abs,
                                        W_O_abs).max()), chapter="1")
chain_size = float(with_pattern(x.abs() + y.abs(), pattern_x,
                                W_V_abs, W_O_abs).max())
# x + y (1 rounding) and the chain on one side; the chain twice and one
# addition on the other
identity_close("with its pattern frozen, the layer is additive: "
               "f(x + y) = f(x) + f(y)", frozen, torch.zeros_like(frozen),
               terms=2 * chain + 2, scale=chain_size, chapter="1")


def abs_scores(x_abs):
    """The scores' products accumulated in absolute value: q and k computed
    from |x|, |W_Q|, |W_K|, then |q| . |k| / sqrt(d_head) (b_Q = b_K = 0)."""
    q = torch.einsum("bpd,hde->bphe", x_abs, attn.W_Q.abs())
    k = torch.einsum("bpd,hde->bphe", x_abs, attn.W_K.abs())
    return float((torch.einsum("bqhe,bkhe->bhqk", q, k).tril()
                  / toy.cfg.attn_scale).max())


# The live layer: each run rounds its chain (as above, with its own pattern)
# and, before it, its scores (d_model + d_head, at the size of the scores'
# products in absolute value, not of the scores, which cancel) and softmax
# (positions + 3). A score error delta moves a pattern entry p by at most
# 2 p delta, so it moves the output by at most 2 delta times the chain run on
# absolute values with the run's own pattern. Three runs, two subtractions.
score_terms = toy.cfg.d_model + toy.cfg.d_head + x.shape[1] + 3
live_bound = 0.0
for inp_abs, p in ((x.abs(), pattern_x), (y.abs(), pattern_y),
                   (x.abs() + y.abs(), pattern_xy)):
    size = float(with_pattern(inp_abs, p, W_V_abs, W_O_abs).max())
    live_bound += (rounding_bound(chain + 2, size)
                   + rounding_bound(score_terms,
                                    2 * abs_scores(inp_abs) * size))
identity("with its pattern recomputed, the layer is not additive: "
         "|f(x + y) - f(x) - f(y)| exceeds the rounding bound",
         f"max |f(x + y) - f(x) - f(y)| = {free.abs().max():.2g}, "
         f"bound {live_bound:.1g}",
         bool(free.abs().max() > live_bound), chapter="1")
glue("ch1_free_gap", float(free.abs().max()))
glue("ch1_out_size", float(out_xy.abs().max()))
glue("ch1_live_bound", live_bound)
glue("ch1_max_score", max(score_x, score_y, score_xy))
# scores within [-s, s] put a softmax entry within a factor e^(2 s) of 1/n
glue("ch1_uniform_factor", math.exp(2 * max(score_x, score_y, score_xy)))
# two patterns, each within e^(2 s) of 1/n (above or below): within e^(4 s)
# of each other
glue("ch1_pair_factor", math.exp(4 * max(score_x, score_y, score_xy)))

# %% [markdown]
# With its pattern recomputed, the layer's output on $x + y$ differs from the sum of its
# outputs on $x$ and on $y$ by up to {glue:text}`ch1_free_gap:.1e`, where the outputs
# themselves reach {glue:text}`ch1_out_size:.2f` and rounding could explain at most
# {glue:text}`ch1_live_bound:.0e`. The deviation is small, and the three patterns it
# compares are close to one another: this layer's attention scores are at most {glue:text}`ch1_max_score:.2f`
# in size, and scores within $\pm s$ put every entry of a softmax over $n$ keys within a
# factor $e^{2s}$ of the uniform $1/n$: here a factor of at most
# {glue:text}`ch1_uniform_factor:.2f`. Each of the three patterns is that close to uniform,
# so an entry of one pattern and the same entry of another can differ by a factor of at
# most $e^{2s} \cdot e^{2s} = e^{4s}$, here {glue:text}`ch1_pair_factor:.2f`.
# (Why the scores are this small in this random layer, and how large they are in a trained
# one, we do not measure here.) The deviation is still beyond the worst-case rounding
# bound, and with the pattern frozen the difference is rounding.

# %% [markdown]
# ### Exercise 1.1: the stream entering a block
#
# TransformerLens calls the stream that enters block $\ell$ `resid_pre`. Write
# `stream_before(embed, pos_embed, attn_out, mlp_out, layer)` that rebuilds it from the
# pieces: the token and positional embeddings `[pos, d_model]`, and every block's attention
# and MLP writes, stacked as `[n_layers, pos, d_model]`. The check uses random pieces, so
# it tests the bookkeeping, not a particular model.

# %% tags=["exercise"]
def stream_before(embed, pos_embed, attn_out, mlp_out, layer):
    """embed, pos_embed: [pos, d_model];
    attn_out, mlp_out: [n_layers, pos, d_model]; 0 <= layer < n_layers
    -> the stream entering block `layer`, [pos, d_model]."""
    # BEGIN SOLUTION
    before = attn_out[:layer].sum(0) + mlp_out[:layer].sum(0)
    return embed + pos_embed + before
    # END SOLUTION


checks.ch01_ex1(stream_before)

# %% [markdown]
# We try it on the model above: block 2's `resid_pre`, rebuilt from the cache.

# %%
attn_stack = torch.stack([cache["attn_out", layer][0]
                          for layer in range(cfg.n_layers)])
mlp_stack = torch.stack([cache["mlp_out", layer][0]
                         for layer in range(cfg.n_layers)])
embed0, pos0 = cache["hook_embed"][0], cache["hook_pos_embed"][0]
mine = stream_before(embed0, pos0, attn_stack, mlp_stack, 2)
sum_is("stream_before(..., 2) is the model's resid_pre of block 2", mine,
       cache["resid_pre", 2][0],
       [embed0, pos0] + list(attn_stack[:2]) + list(mlp_stack[:2]))

# %% [markdown]
# ### Exercise 1.2: how many terms?
#
# GPT-2 medium has 24 layers, each with 16 attention heads and an MLP, and a bias on each
# attention layer's output. Split its final residual stream as finely as the per-head cell of
# this chapter split our small model's. How many terms does the sum have? Set `n_terms`.

# %% tags=["exercise"]
# BEGIN SOLUTION
# two embeddings, the heads, the output biases, the MLPs
n_terms = 2 + 24 * 16 + 24 + 24
# END SOLUTION

checks.ch01_ex2(n_terms)

# %% [markdown]
# ## The road ahead
#
# - Chapters 2-12 take the Annotated Transformer apart, piece by piece, and at each piece show
#   what the circuit view sees: the residual stream (3), embeddings (4), positions (5),
#   attention (6-7), the QK and OV circuits (8), full circuits (9), the feed-forward network
#   (10), LayerNorm (11) and encoder-decoder attention (12).
# - Chapters 13-18 follow Elhage et al.: the path expansion, zero-, one- and two-layer models,
#   induction heads and composition scores, on small models the book trains itself and on a
#   real pretrained model, SmolLM2 (chapter 4 says which copy of it exactly).
# - Chapter 19 covers the training recipe, and chapter 20 collects every piece of notation in
#   one Rosetta stone.
#
# ## Summary
#
# - Transformers replaced recurrence with attention, which made training parallel and let
#   every position read every other directly.
# - The circuits tradition reads trained weights as algorithms, and checks its readings by
#   intervening on the model.
# - In a pre-norm transformer (not the paper's post-norm one) the residual stream is a sum
#   of the embedding and every sublayer's (indeed every head's) output. That is an identity;
#   we checked on a model with LayerNorm and MLPs that the code agrees with it to float
#   rounding.
# - The nonlinear parts are the attention pattern, MLPs and LayerNorm. Freezing the pattern
#   makes a head affine in what it reads (linear when its value and output biases are zero;
#   in a pre-norm model it reads $\operatorname{LN}(x)$); with no LayerNorm and no biases it
#   is linear in the stream, which is the foundation of the path expansion.
