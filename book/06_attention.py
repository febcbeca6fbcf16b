# %% [markdown]
# # 6. Scaled dot-product attention
#
# Attention is how one position of a transformer reads from the others. This chapter builds
# it from one equation, explains the $1/\sqrt{d_k}$ that the paper puts in front of the
# scores (and shows what goes wrong without it), adds the causal mask that makes a language
# model predict only from the past, and then rewrites the score in the circuit notation as
# $x_i W_{QK} x_j^\top / \sqrt{d_\text{head}}$, a bilinear form on the residual stream.

# %%
import math
import warnings

import matplotlib.pyplot as plt
import torch

from circuitbook import checks
from circuitbook.book import claim, glue, identity, identity_close
from circuitbook.widgets import explore

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)

# %% [markdown]
# ## Plain language
#
# Think of attention as a soft dictionary lookup. Every position publishes a **key** (what it
# has to offer) and a **value** (what it will hand over), and asks a **query** (what it is
# looking for). A query is compared with every key by a dot product. The comparisons are
# turned into weights that are positive and sum to one (a softmax), and the position
# receives the weighted average of the values. A query that matches one key much better than
# the others gets, in effect, that key's value; a query that matches nothing in particular
# gets a blur of all of them.
#
# Vaswani et al. {cite}`vaswani2017attention` write the whole operation for a batch of queries
# $Q$, keys $K$ and values $V$ (one row per position) as
#
# $$\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V,$$
#
# where $d_k$ is the length of each query and key vector, and the softmax runs along each
# row, over the keys.

# %% [markdown]
# ## The Annotated Transformer view
#
# Here is the function of the Annotated Transformer {cite}`rush2018annotated`, in our own
# lines. It returns both the output and the attention pattern `p_attn`, because the pattern
# is the thing we will want to look at. It differs from the Annotated Transformer's code in
# two places. We fill forbidden scores with $-\infty$ where it uses $-10^9$, and we leave
# out the dropout it applies to `p_attn` (dropout is off at evaluation, which is all this
# book does with this function). The cell after the causal mask below shows what the first
# difference changes.

# %%
def attention(query, key, value, mask=None):
    """Scaled dot-product attention. query: [..., n_q, d_k], key: [..., n_k, d_k],
    value: [..., n_k, d_v]; mask broadcasts to [..., n_q, n_k], 0 where attention is forbidden.
    Returns (output [..., n_q, d_v], pattern [..., n_q, n_k])."""
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    p_attn = scores.softmax(dim=-1)
    return p_attn @ value, p_attn


q, k, v = torch.randn(3, 2, 5, 8).unbind(0)  # batch 2, 5 positions, d_k = d_v = 8
out, pattern = attention(q, k, v)
# PyTorch's fused kernel computes the same thing: an independent reference. Each side: the
# scores (d_k products and the scale: d_k + 1, relative to d_k |q| |k| / sqrt(d_k)), which a
# softmax turns into relative errors of the weights; the softmax itself (n + 4) and the mix
# (n) round relative to |v|. So 2 (d_k + 2n + 6) roundings at |v| times the scores' size.
n_keys = k.shape[-2]
score_size = max(1.0, float(q.abs().max() * k.abs().max()) * math.sqrt(q.shape[-1]))
identity_close("our attention() equals torch's scaled_dot_product_attention", out,
               torch.nn.functional.scaled_dot_product_attention(q, k, v), terms=2 * (q.shape[-1] + 2 * n_keys + 6),
               scale=float(v.abs().max()) * score_size, chapter="6")
# the softmax's sum of n exps and its division (n + 1), then our sum of n weights (n)
identity_close("each query's attention weights sum to 1", pattern.sum(-1), torch.ones(2, 5), terms=2 * n_keys + 2,
               scale=1.0, chapter="6")

# %% [markdown]
# ### Why divide by $\sqrt{d_k}$?
#
# The paper's argument (section 3.2.1): if the entries of $q$ and $k$ are independent with
# mean 0 and variance 1, then $q \cdot k = \sum_{i=1}^{d_k} q_i k_i$ is a sum of $d_k$ terms
# of variance 1, so its variance is $d_k$. Large scores push the softmax into saturation:
# almost all the weight goes to one key, and the gradient through the others vanishes.
# Dividing by $\sqrt{d_k}$ brings the variance back to 1 whatever the width. We check
# both halves of the argument by sampling.

# %%
dims = [4, 16, 64, 256, 1024]
n_samples = 20_000
var_raw, var_scaled, top_raw, top_scaled = [], [], [], []
for d_k in dims:
    qs, ks = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
    dots = (qs * ks).sum(-1)
    var_raw.append(dots.var().item())
    var_scaled.append((dots / math.sqrt(d_k)).var().item())
    # saturation: the largest softmax weight of one query over 32 random keys, averaged
    qq, kk = torch.randn(200, 1, d_k), torch.randn(200, 32, d_k)
    s = (qq @ kk.transpose(-1, -2)).squeeze(1)
    top_raw.append(s.softmax(-1).max(-1).values.mean().item())
    top_scaled.append((s / math.sqrt(d_k)).softmax(-1).max(-1).values.mean().item())

for d_k, vr, vs, tr, ts in zip(dims, var_raw, var_scaled, top_raw, top_scaled):
    print(f"d_k={d_k:5d}  var(q.k)={vr:8.1f}  var(q.k/sqrt(d_k))={vs:5.2f}  "
          f"max weight: unscaled {tr:.2f}, scaled {ts:.2f}")
ratio = max(vr / d for vr, d in zip(var_raw, dims)), min(vr / d for vr, d in zip(var_raw, dims))
# Sampling statements: a sample variance of 20,000 draws has a relative standard error of
# sqrt((kurtosis - 1) / 20000), under 1.5% for every d_k here (kurtosis at most 3 + 6/d_k),
# so 10% is about 7 standard errors; rounding is ~1e-6 of these sums.
claim("Var(q.k) is about d_k for unit-variance q, k (ratio within 10%)", f"{ratio[1]:.3f}..{ratio[0]:.3f}",
      0.9 < ratio[1] and ratio[0] < 1.1, chapter="6")
claim("after scaling, Var(q.k / sqrt(d_k)) is about 1 at every d_k", f"{min(var_scaled):.3f}..{max(var_scaled):.3f}",
      all(0.9 < v < 1.1 for v in var_scaled), chapter="6")
glue("top_raw_1024", top_raw[-1])
glue("top_scaled_1024", top_scaled[-1])

# The outline this book was written from says the dot product of two random *unit* vectors
# has standard deviation sqrt(d_k). It is 1/sqrt(d_k): the sqrt(d_k) belongs to vectors
# whose entries have variance 1, as above. 20,000 samples: the sample std's relative
# standard error is ~1/sqrt(2 * 20000) = 0.5%, so 5% is 10 standard errors.
u1 = torch.nn.functional.normalize(torch.randn(n_samples, 1024), dim=-1)
u2 = torch.nn.functional.normalize(torch.randn(n_samples, 1024), dim=-1)
unit_std = (u1 * u2).sum(-1).std().item()
claim("for random unit vectors in d_k = 1024 dimensions, std(u . v) is about 1/sqrt(d_k), not sqrt(d_k)",
      f"{unit_std:.5f} vs 1/sqrt(d_k) = {1 / math.sqrt(1024):.5f}", abs(unit_std * math.sqrt(1024) - 1) < 0.05,
      chapter="6")
glue("unit_std", unit_std)

# %% [markdown]
# The argument is about vectors whose *entries* have variance 1, whose length grows like
# $\sqrt{d_k}$. The outline this book was written from states it for random *unit* vectors,
# and that is wrong: two random unit vectors in $d_k = 1024$ dimensions have a dot product
# with standard deviation {glue:text}`unit_std:.4f`, about $1/\sqrt{d_k}$, not $\sqrt{d_k}$
# (checked in the cell above).
#
# At $d_k = 1024$ an unscaled query puts on average {glue:text}`top_raw_1024:.2f` of its
# weight on a single key out of 32, while the scaled one puts
# {glue:text}`top_scaled_1024:.2f`. Move the slider below to watch it happen to one query:
# the blue bars are the weights with the scale, the orange ones without.

# %%
probe_q, probe_k = torch.randn(1, 1024), torch.randn(12, 1024)


def draw_saturation(d_k=64):
    s = (probe_q[:, :d_k] @ probe_k[:, :d_k].T).squeeze(0)
    fig, ax = plt.subplots(figsize=(7, 2.6))
    idx = torch.arange(12)
    ax.bar(idx - 0.2, (s / math.sqrt(d_k)).softmax(-1), width=0.4, label="softmax(q.k / sqrt(d_k))")
    ax.bar(idx + 0.2, s.softmax(-1), width=0.4, label="softmax(q.k)")
    ax.set_ylim(0, 1)
    ax.set_xlabel("key")
    ax.set_ylabel("attention weight")
    ax.set_title(f"one query over 12 random keys, d_k = {d_k}")
    ax.legend(loc="upper right", fontsize=8)
    plt.show()


explore(draw_saturation, d_k=(1, 1024, 1))

# %% [markdown]
# ### The causal mask
#
# A language model predicts token $i+1$ from tokens $0..i$, so position $i$ must not read
# later positions. The mask sets the scores of keys $j > i$ to $-\infty$ before the softmax;
# their weights become exactly zero, and the remaining weights still sum to one. The pattern
# is lower triangular.

# %%
n = 6
causal_mask = torch.tril(torch.ones(n, n))
_, causal_pattern = attention(torch.randn(n, 8), torch.randn(n, 8), torch.randn(n, 8), mask=causal_mask)
print(causal_pattern.numpy().round(2))
identity("the causal pattern is zero above the diagonal",
         causal_pattern.triu(1).abs().max(), bool((causal_pattern.triu(1) == 0).all()), chapter="6")
# masked weights are exactly 0 (exp(-inf)); the rest as above: 2n + 2 roundings of size 1
identity_close("each masked row still sums to 1", causal_pattern.sum(-1), torch.ones(n), terms=2 * n + 2,
               scale=1.0, chapter="6")

# %% [markdown]
# The Annotated Transformer masks with $-10^9$ instead of $-\infty$. In float32 the two give
# the same pattern whenever a row keeps at least one allowed key: $e^{-10^9}$ underflows to
# exactly 0. They differ on a row whose keys are *all* forbidden (a query that may read
# nothing, as a padding position can be): $-10^9$ makes every score equal, so the row is
# uniform, while $-\infty$ gives $\infty - \infty$, not a number.

# %%
def pattern_with_fill(scores, mask, fill):
    return scores.masked_fill(mask == 0, fill).softmax(-1)


raw = torch.randn(n, n)
same = (pattern_with_fill(raw, causal_mask, -1e9) == pattern_with_fill(raw, causal_mask, float("-inf"))).all()
claim("in float32, masking with -1e9 (the Annotated Transformer) and with -inf (ours) give the same causal "
      "pattern, bit for bit", bool(same), bool(same), chapter="6")
nothing = torch.zeros(1, n)           # a query that may read no key at all
row_1e9 = pattern_with_fill(raw[:1], nothing, -1e9)
row_inf = pattern_with_fill(raw[:1], nothing, float("-inf"))
claim("on a fully masked row, -1e9 gives a uniform row and -inf gives NaN",
      f"{row_1e9[0, 0]:.4f} (1/n = {1 / n:.4f}), {row_inf[0, 0]}",
      bool((row_1e9 == row_1e9[0, 0]).all() and torch.isnan(row_inf).all()), chapter="6")

# %% [markdown]
# ### Exercise 6.1: the causal attention pattern
#
# Write `attention_pattern(q, k, causal)` returning the attention pattern of this chapter,
# scaled and (when `causal` is true) causally masked, for inputs of shape `[batch, n, d_k]`;
# build the mask yourself. The check runs your function on fresh random inputs and, if it
# disagrees, tells you which common mistake your answer looks like.

# %% tags=["exercise"]
def attention_pattern(q, k, causal=True):
    """q, k: [batch, n, d_k] -> causal attention pattern [batch, n, n] (rows: queries)."""
    # BEGIN SOLUTION
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        n = q.shape[-2]
        scores = scores.masked_fill(torch.ones(n, n).triu(1).bool(), float("-inf"))
    return scores.softmax(dim=-1)
    # END SOLUTION


checks.ch06_ex1(attention_pattern)

# %% [markdown]
# ## The circuit view
#
# In a transformer the queries and keys are not given; each head computes them from the
# residual stream $x$ (one row per position) with its own matrices. In TransformerLens's
# row-vector convention, for head $h$,
#
# $$q_i = x_i W_Q^h, \qquad k_j = x_j W_K^h, \qquad W_Q^h, W_K^h \in \mathbb{R}^{d_\text{model} \times d_\text{head}},$$
#
# so the score of query position $i$ on key position $j$ is
#
# $$\frac{q_i k_j^\top}{\sqrt{d_\text{head}}} = \frac{x_i W_Q^h (W_K^h)^\top x_j^\top}{\sqrt{d_\text{head}}}
# = \frac{x_i\, W_{QK}^h\, x_j^\top}{\sqrt{d_\text{head}}}, \qquad W_{QK}^h = W_Q^h (W_K^h)^\top.$$
#
# The head's "where to look" is a single $d_\text{model} \times d_\text{model}$ matrix, and
# the score is a bilinear form: it is linear in the query's residual vector and linear in the
# key's. (Biases add terms linear in one side only; the model below has none. Chapter 8
# treats $W_{QK}$ as an object in its own right.)
#
# This is an identity, true by construction; we check it against the scores a real
# TransformerLens model computes internally, to see that the code and the algebra agree.
# Its hook `hook_attn_scores` is taken *after* the causal mask: in TransformerLens 3.9
# (`components/abstract_attention.py`) the attention layer scales the scores, calls
# `apply_causal_mask`, which writes $-\infty$ into every entry above the diagonal, and only
# then passes them through the hook, just before the softmax. So the hooked scores equal ours
# on and below the diagonal and are $-\infty$ above it, where ours are ordinary numbers.

# %%
from transformer_lens import HookedTransformer, HookedTransformerConfig

cfg = HookedTransformerConfig(n_layers=1, d_model=32, n_heads=4, d_head=8, d_vocab=50, n_ctx=16,
                              attn_only=True, normalization_type=None, positional_embedding_type="standard",
                              seed=1)
model = HookedTransformer(cfg, move_to_device=False)
tokens = torch.randint(0, cfg.d_vocab, (1, 10))
_, cache = model.run_with_cache(tokens)
x = cache["resid_pre", 0][0]              # [pos, d_model]: the stream the layer reads
hooked = cache["attn_scores", 0][0]       # [head, q, k], scaled, after the causal mask

W_QK = model.W_Q[0] @ model.W_K[0].transpose(-1, -2)   # [head, d_model, d_model]
ours = x @ W_QK @ x.T / math.sqrt(cfg.d_head)          # [head, q, k]
causal = torch.tril(torch.ones(10, 10, dtype=torch.bool))
# Reassociation. Ours: W_Q W_K^T (d_head), x @ (d_model), @ x^T (d_model), the scale (1); the
# model's: q = x W_Q + b_Q and k alike (d_model + 1), q . k (d_head), the scale (1). At the
# size of d_head |x W_Q| |x W_K| / sqrt(d_head), the products' absolute values.
with torch.no_grad():
    q_abs = (x.abs() @ model.W_Q[0].abs()).max()
    k_abs = (x.abs() @ model.W_K[0].abs()).max()
identity_close("score(i, j) = x_i W_QK x_j^T / sqrt(d_head) matches the model's own attention scores on and "
               "below the diagonal", ours[:, causal], hooked[:, causal], terms=3 * cfg.d_model + 2 * cfg.d_head + 4,
               scale=float(q_abs * k_abs) * math.sqrt(cfg.d_head), chapter="6")
above = hooked[:, ~causal]
claim("TransformerLens 3.9's hook_attn_scores is taken after the causal mask: every hooked score above the "
      "diagonal is -inf, where our unmasked scores are finite",
      f"{int(torch.isneginf(above).sum())} of {above.numel()} are -inf; ours there: "
      f"{int(ours[:, ~causal].isfinite().sum())} finite",
      bool(torch.isneginf(above).all() and ours[:, ~causal].isfinite().all()), chapter="6")

# %% [markdown]
# $W_{QK}^h$ is $d_\text{model} \times d_\text{model}$ but it is the product of a
# $d_\text{model} \times d_\text{head}$ and a $d_\text{head} \times d_\text{model}$ matrix, so
# its rank is at most $d_\text{head}$: the head can only compare $d_\text{head}$ directions of
# the query side with $d_\text{head}$ directions of the key side. Here $d_\text{model} = 32$
# and $d_\text{head} = 8$.

# %%
# multiply in float64: rounding in a float32 product would look like tiny extra singular values
W_QK64 = model.W_Q[0].double() @ model.W_K[0].double().transpose(-1, -2)
ranks = torch.linalg.matrix_rank(W_QK64).tolist()
print(f"rank of W_QK per head: {ranks}   (d_model = {cfg.d_model}, d_head = {cfg.d_head})")
claim("rank(W_QK) <= d_head for every head", max(ranks), max(ranks) <= cfg.d_head, chapter="6")
glue("qk_ranks", ", ".join(map(str, ranks)))

# %% [markdown]
# ### Exercise 6.2: scores from the residual stream
#
# Write `qk_scores(x, W_Q, W_K)` that returns every head's scores `[n_heads, pos, pos]` (no mask,
# no softmax) from a residual stream `x` of shape `[pos, d_model]` and TransformerLens-shaped
# weights `[n_heads, d_model, d_head]`.

# %% tags=["exercise"]
def qk_scores(x, W_Q, W_K):
    """x: [pos, d_model]; W_Q, W_K: [n_heads, d_model, d_head] -> scores [n_heads, pos_q, pos_k]."""
    # BEGIN SOLUTION
    q = torch.einsum("pd,hde->hpe", x, W_Q)
    k = torch.einsum("pd,hde->hpe", x, W_K)
    return q @ k.transpose(-1, -2) / W_Q.shape[-1] ** 0.5
    # END SOLUTION


checks.ch06_ex2(qk_scores)

# %% [markdown]
# ### A trained head on real text
#
# Everything so far ran on random vectors and an untrained model. Here is the same
# computation inside a real language model, SmolLM2-135M-Instruct {cite}`allal2025smollm2`
# (30 layers of 9 heads, $d_\text{head} = 64$; chapter {doc}`11_layernorm` says which copy of
# it the book reads: a 4-bit one), on real text: the first 80 tokens of six scenes from six
# Shakespeare plays, cut into tokens by SmolLM2's own tokenizer (no start-of-text token is
# added). Loading the model takes a few seconds once its converted weights are cached, about
# half a minute the first time.
#
# What is one head doing? A question we can put to all 270 heads at once is how much of
# its attention a position gives to the position just before it, its **previous-token
# score**, $\operatorname{mean}_{b,\, p \ge 1} A^h[b, p, p-1]$ (the first position has no
# predecessor). A score only means something next to what a head with no preference would
# get. We use two baselines: the score of the uniform causal pattern, which spreads each
# query's attention evenly over itself and the past ($A[p, k] = 1/(p+1)$,
# `circuitbook.heads.uniform_causal_pattern`), and the mean score over all heads.

# %%
from circuitbook.data.corpus import shakespeare_scenes
from circuitbook.heads import (
    prev_token_pattern_score,
    uniform_causal_pattern,
)
from circuitbook.models.pretrained import load_smollm2
from circuitbook.viz import attention_pattern_view, heatmap

torch.set_grad_enabled(False)  # from here on we only read a trained model
smol, tok = load_smollm2()
scenes = shakespeare_scenes()
PASSAGES = [0, 130, 260, 390, 520, 650]   # six scenes, each from another play
N_TOK = 80
text_ids = torch.stack([tok(scenes[i][1], return_tensors="pt").input_ids[0, :N_TOK]
                        for i in PASSAGES])                      # [6, 80]
print("plays:", ", ".join(scenes[i][0] for i in PASSAGES))
print("passage 0 begins:", repr(tok.decode(text_ids[0, :24])))

# one forward pass, keeping every layer's pattern and rotated queries and keys (about 100 MB)
keep = ("hook_pattern", "hook_rot_q", "hook_rot_k", "hook_v")
_, text_cache = smol.run_with_cache(text_ids, names_filter=lambda name: name.endswith(keep))
S_L, S_H = smol.cfg.n_layers, smol.cfg.n_heads
prev = torch.stack([prev_token_pattern_score(text_cache["pattern", l])
                    for l in range(S_L)])                        # [30 layers, 9 heads]
uniform_prev = prev_token_pattern_score(uniform_causal_pattern(N_TOK)).item()
top = prev.flatten().topk(5)
top_heads = [divmod(int(i), S_H) for i in top.indices]
print("top previous-token heads:",
      ", ".join(f"L{l}H{h} {v:.2f}" for (l, h), v in zip(top_heads, top.values)))
print(f"baselines: uniform causal pattern {uniform_prev:.3f}, "
      f"mean over all heads {prev.mean():.3f}")
PL, PH = top_heads[0]
best_prev = top.values[0].item()
heatmap(prev, [f"H{h}" for h in range(S_H)], [f"L{l}" for l in range(S_L)],
        title="SmolLM2-135M: previous-token score of every head, 6 passages",
        x_title="head", y_title="layer", zmin=0, zmax=1, outline=[(PL, PH)])

# %% [markdown]
# The best head scores far above both baselines. Is it the same on each passage, or the
# average of a few lucky ones? We score each passage alone.

# %%
A_best = text_cache["pattern", PL][:, PH]                        # [6, q, k]
per_passage = torch.stack([prev_token_pattern_score(a) for a in A_best])
print(f"L{PL}H{PH} per passage:", " ".join(f"{v:.2f}" for v in per_passage.tolist()))
# Findings, which could have failed: 0.5 means that most of the attention goes to one
# position; a score 10 times the uniform baseline is not a head with no preference.
claim(f"SmolLM2's best previous-token head on Shakespeare, L{PL}H{PH}, puts over half of its "
      "attention on the previous token, over 10 times the uniform causal pattern's score",
      f"{best_prev:.3f} vs uniform {uniform_prev:.3f}, mean over heads {prev.mean():.3f}",
      best_prev > 0.5 and best_prev > 10 * uniform_prev, chapter="6")
claim(f"L{PL}H{PH} scores above 0.5 on each of the six passages alone",
      f"{per_passage.min():.3f}..{per_passage.max():.3f}", bool((per_passage > 0.5).all()), chapter="6")
glue("prev_head", f"L{PL}H{PH}")
glue("prev_best", best_prev)
glue("prev_lo", per_passage.min().item())
glue("prev_hi", per_passage.max().item())
glue("prev_uniform", uniform_prev)
glue("prev_mean", prev.mean().item())
glue("prev_second", top.values[1].item())

# %% [markdown]
# Head {glue:text}`prev_head` puts {glue:text}`prev_best:.2f` of its attention on the
# previous token (between {glue:text}`prev_lo:.2f` and {glue:text}`prev_hi:.2f` on single
# passages), where the uniform causal pattern would put {glue:text}`prev_uniform:.3f` and
# the average head puts {glue:text}`prev_mean:.3f`; the next best head scores
# {glue:text}`prev_second:.2f`. Nothing told it to: the job was learned.
#
# Now the formula of this chapter, on this head. SmolLM2 uses rotary position embeddings:
# instead of adding a position vector to the stream (chapter {doc}`05_positional`), it
# rotates each query and key by angles that depend on its position, just before the dot
# product, so the hooks `hook_rot_q` and `hook_rot_k` hold the vectors the score is made
# from. It also uses grouped-query attention: its 9 query heads share 3 key-value
# heads, query head $h$ reading key and value head $\lfloor h/3 \rfloor$
# (TransformerLens's `repeat_interleave`). So this head's keys are shared with two other
# heads of its layer; its queries are its own. Our `attention()` from the top of the
# chapter, given these queries and keys, must give the model's pattern.

# %%
kv = PH // (S_H // smol.cfg.n_key_value_heads)                   # its key-value head
q_h = text_cache["rot_q", PL][:, :, PH]                          # [6, pos, d_head]
k_h = text_cache["rot_k", PL][:, :, kv]
v_h = text_cache["v", PL][:, :, kv]
del text_cache
mask = torch.tril(torch.ones(N_TOK, N_TOK))
_, ours_best = attention(q_h, k_h, v_h, mask=mask)
d_h = q_h.shape[-1]
# as in the first cell: the scores (d_head + 1 roundings at the size of d_head |q| |k| /
# sqrt(d_head)), which the softmax turns into relative errors of the weights, and the
# softmax itself (n + 4), on each side; the weights are at most 1
rope_size = float(q_h.abs().max() * k_h.abs().max()) * math.sqrt(d_h)
identity_close(f"softmax(q k^T / sqrt(d_head)), causally masked, from the rotated queries and keys, is "
               f"L{PL}H{PH}'s pattern in SmolLM2", ours_best, A_best, terms=2 * (d_h + N_TOK + 6),
               scale=rope_size, chapter="6")

# What the scale does to this head: the same scores without the 1/sqrt(d_head)
scores = (q_h @ k_h.transpose(-1, -2) / math.sqrt(d_h)).masked_fill(mask == 0, float("-inf"))
unscaled = (scores * math.sqrt(d_h)).softmax(-1)
allowed = scores[:, mask.bool()]                                # every (q, k <= q) pair
score_std = allowed.std().item()
peak, peak_unscaled = A_best.max(-1).values[:, 1:].mean().item(), unscaled.max(-1).values[:, 1:].mean().item()
prev_unscaled = prev_token_pattern_score(unscaled[:, None]).item()
print(f"scaled scores: std {score_std:.2f} over all {allowed.numel()} allowed pairs")
print(f"mean largest weight per query: {peak:.2f} scaled, {peak_unscaled:.2f} unscaled")
print(f"weight on the previous token: {best_prev:.2f} scaled, {prev_unscaled:.2f} unscaled")
glue("score_std", score_std)
glue("peak", peak)
glue("peak_unscaled", peak_unscaled)
glue("prev_unscaled", prev_unscaled)

# %% [markdown]
# The variance argument for $1/\sqrt{d_k}$ assumed query and key entries of variance 1, as
# at initialisation. A trained head is under no such constraint: this head's *scaled*
# scores have a standard deviation of {glue:text}`score_std:.1f` over the allowed pairs,
# far from the unit variance the argument assumed; nothing in training holds them there.
# The scale is still
# part of the function the weights were trained with: take it out and the same head puts on
# average {glue:text}`peak_unscaled:.2f` of each query's attention on a single key (against
# {glue:text}`peak:.2f` with the scale), and {glue:text}`prev_unscaled:.2f` on the previous
# token. Below, the head's pattern on the start of the first passage, with and without the
# scale (CircuitsVis: pick a head on the left, hover a token to see where it looks).
# Chapter {doc}`07_multi_head` looks at the other heads of this model, which do other jobs.

# %%
n_show = 40
shown = torch.stack([A_best[0, :n_show, :n_show], unscaled[0, :n_show, :n_show]])
attention_pattern_view(tok.convert_ids_to_tokens(text_ids[0, :n_show].tolist()), shown,
                       head_names=[f"L{PL}H{PH}", f"L{PL}H{PH} without 1/sqrt(d_head)"])

# %% [markdown]
# ## Summary
#
# - Attention is $\operatorname{softmax}(QK^\top/\sqrt{d_k})V$: queries are compared with keys,
#   the comparisons become weights, and the output is a weighted average of values.
# - Without the scale, the variance of a score grows like $d_k$ and the softmax saturates; we
#   measured both.
# - The causal mask sets future scores to $-\infty$, making the pattern lower triangular while
#   each row still sums to one.
# - In circuit notation the score is $x_i W_{QK} x_j^\top/\sqrt{d_\text{head}}$ with
#   $W_{QK} = W_Q W_K^\top$ of rank at most $d_\text{head}$ (the heads above have ranks
#   {glue:text}`qk_ranks`). That is an identity; the model's own scores agree with it on and
#   below the diagonal, and TransformerLens's `hook_attn_scores` holds $-\infty$ above it,
#   because the hook comes after the causal mask.
# - In SmolLM2-135M, on Shakespeare, head {glue:text}`prev_head` puts
#   {glue:text}`prev_best:.2f` of its attention on the previous token (a uniform causal
#   pattern: {glue:text}`prev_uniform:.3f`); its pattern is this chapter's formula applied
#   to its rotated queries and keys, and its trained scores are far from unit variance.
# - Our `attention()` masks with $-\infty$ where the Annotated Transformer uses $-10^9$: the
#   same pattern in float32, except on a fully masked row (uniform there, NaN here).
