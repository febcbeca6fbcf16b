# %% [markdown]
# # 20. Summary: the notation Rosetta stone
#
# This book has read one architecture in four vocabularies: the equations of Vaswani et
# al. {cite}`vaswani2017attention`, the PyTorch of the Annotated Transformer
# {cite}`rush2018annotated`, the circuit notation of Elhage et al.
# {cite}`elhage2021mathematical`, and the tensors of TransformerLens
# {cite}`nanda2022transformerlens`. This last chapter puts the four side by side in one
# table, one row per quantity, and then checks the table. We take the encoder of the
# trained toy translation model, load its weights into a TransformerLens
# `HookedTransformer`, run both on the same sentences, and compare every row that can be
# compared in code: the two models must agree to float rounding, except in one place where
# the Annotated Transformer's LayerNorm is not the LayerNorm everyone else uses.
#
# Set-up: imports, and one thread (the build shares two cores).

# %% tags=["hide-input"]
import contextlib
import html
import io
import math
import warnings

import matplotlib.pyplot as plt
import torch
from IPython.display import HTML
from transformer_lens import HookedTransformer, HookedTransformerConfig

from circuitbook import checks
from circuitbook.book import (glue, identity, identity_close, observation,
                              rounding_bound)
from circuitbook.data import translation as T
from circuitbook.models import load
from circuitbook.models.encoder_decoder import head_outputs
from circuitbook.widgets import explore

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
torch.set_num_threads(1)  # tiny models: one thread is fastest on a shared CPU
_ = torch.manual_seed(0)

# %% [markdown]
# ## Plain language
#
# The four sources describe slightly different models, and they write them down
# differently. The models first: the paper normalises after each sub-layer and the
# Annotated Transformer's code before it, with a LayerNorm of its own that divides by the
# unbiased standard deviation; the paper ties the unembedding to the embedding
# and the Annotated Transformer's `make_model` does not; the paper and the Annotated
# Transformer multiply the embedding by $\sqrt{d_\text{model}}$, which TransformerLens
# has to fold into `W_E`; the positional encoding is a fixed sinusoid in the paper and the
# Annotated Transformer, a
# table `W_pos` in TransformerLens, and absent from Elhage et al.'s equations, which also
# leave out biases and LayerNorm. The table records each of these, and the sections below
# check the ones that can be checked in code. The notation differs mainly in two ways:
# whether a vector is a row or a column, and whether the heads of a layer are stored
# together or apart. Two smaller ones: `nn.Linear` stores its weight as `[out, in]`,
# and Elhage et al. leave the $1/\sqrt{d_\text{head}}$ of the scores out of their
# equations.
#
# - **Vaswani et al.** multiply row vectors on the right ($x W$), and give each head its
#   own matrices $W_i^Q, W_i^K \in \mathbb{R}^{d_\text{model}\times d_k}$ and
#   $W_i^V \in \mathbb{R}^{d_\text{model}\times d_v}$ (here $d_v = d_k$); the
#   heads' outputs are concatenated and multiplied by one
#   $W^O \in \mathbb{R}^{h d_v \times d_\text{model}}$.
# - **The Annotated Transformer** stores all heads of a layer in one `nn.Linear`. PyTorch's
#   `nn.Linear` keeps its weight as `[out, in]` and computes `x @ weight.T + bias`, so the
#   stored tensor is the *transpose* of the paper's matrix.
# - **Elhage et al.** multiply column vectors on the left ($W x$), one head at a time:
#   $W_Q^h \in \mathbb{R}^{d_\text{head}\times d_\text{model}}$, and they drop biases and
#   LayerNorm from the analysis.
# - **TransformerLens** multiplies row vectors on the right, like the paper, and splits
#   the heads onto a leading axis: `W_Q[layer, head]` is $d_\text{model}\times
#   d_\text{head}$.
#
# A rule that covers most of the table: **a TransformerLens matrix is Vaswani's matrix
# for one head, and a slice of an `nn.Linear` weight is Elhage's matrix for one head.**
# Everything else is slicing and transposing, and the transposes matter for composites.
# The QK circuit $W_{QK}$, a bilinear form, is the same matrix in both conventions. A
# chain of maps, like the direct path $W_E W_U$, is transposed, with its factors in
# reverse order; a product with the same factor on both sides of $W_{QK}$
# ($W_E W_{QK} W_E^\top$, $W_\text{pos} W_{QK} W_\text{pos}^\top$) is again a bilinear
# form and the same matrix (see below).

# %% [markdown]
# ## The table
#
# Shapes are for one layer; $h$ indexes heads and `hs` stands for the slice
# `h*d_k:(h+1)*d_k`. In the code columns, `mha` is a `MultiHeadedAttention`, `ff` a
# `PositionwiseFeedForward`, `ln` a `LayerNorm`, and `l` a layer index. Every row that
# can be computed is checked in the sections below (the Vaswani column's formulas are
# quoted, not run). A few cells are blank for now: how the Annotated
# Transformer's `nn.Linear` weights become each head's matrices is exercise 20.1, and the
# OV circuit is exercise 20.2. The completed rows follow exercise 20.2.

# %% tags=["hide-input", "full-width"]
def m(text):
    """Light math markup: _{..} subscripts, ^{..} superscripts."""
    out = html.escape(text)
    for mark, tag in (("_", "sub"), ("^", "sup")):
        while mark + "{" in out:
            a = out.index(mark + "{")
            b = out.index("}", a)
            out = out[:a] + f"<{tag}>{out[a + 2:b]}</{tag}>" + out[b + 1:]
    return out


def c(text):
    return f"<code>{html.escape(text)}</code>"


def later(where):
    """A cell left blank until the exercise that answers it is done."""
    return f"<em>({where})</em>"


ROWS = [
    ("token embedding",
     m("learned embedding, times √d_{model}"),
     c("lut.weight * sqrt(d_model)") + " [vocab, d_model]",
     m("W_{E}") + " [d_model, n_vocab]; " + m("x_{0} = W_{E} t"),
     c("W_E") + " [d_vocab, d_model]; " + c("hook_embed")),
    ("positional encoding",
     m("PE_{(pos, 2i)} = sin(pos / 10000^{2i/d_model}), cos for 2i+1"),
     c("PositionalEncoding.pe[0, :n]") + " (fixed buffer)",
     "left out of the equations",
     c("W_pos") + " [n_ctx, d_model]; " + c("hook_pos_embed")),
    ("residual stream",
     m("x, the input of each sub-layer"),
     c("x") + " in " + c("SublayerConnection") + ": "
     + c("x + sublayer(norm(x))"),
     m("x_{0}, x_{1}, …, x_{-1}") + " (one per layer), one column per position",
     c("blocks.l.hook_resid_pre / _mid / _post")),
    ("query, key, value of head h",
     m("W_{i}^{Q}, W_{i}^{K}") + " [d_model, d_k], " + m("W_{i}^{V}")
     + " [d_model, d_v]",
     later("exercise 20.1"),
     m("W_{Q}^{h}, W_{K}^{h}, W_{V}^{h}") + " [d_head, d_model]",
     c("W_Q[l, h]") + ", " + c("W_K[l, h]") + ", " + c("W_V[l, h]")
     + " [d_model, d_head]"),
    ("output of head h",
     "rows hs of " + m("W^{O}") + " [h·d_v, d_model]",
     later("exercise 20.1"),
     m("W_{O}^{h}") + " [d_model, d_head]",
     c("W_O[l, h]") + " [d_head, d_model]"),
    ("attention pattern",
     m("softmax(QK^{T} / √d_{k})"),
     c("mha.attn[b, h]") + " [q, k]",
     m("A^{h} = softmax(x^{T} W_{Q}^{hT} W_{K}^{h} x)"),
     c("blocks.l.attn.hook_pattern") + " [batch, head, q, k]"),
    ("QK circuit",
     "(no name)",
     later("after exercise 20.1"),
     m("W_{QK}^{h} = W_{Q}^{hT} W_{K}^{h}") + " (same matrix)",
     c("W_Q[l, h] @ W_K[l, h].T") + ", " + c("model.QK[l, h]")),
    ("OV circuit",
     "(no name)",
     later("exercise 20.2"), later("exercise 20.2"), later("exercise 20.2")),
    ("full circuits",
     "(no name)",
     "(no name)",
     m("W_{E}^{T} W_{QK}^{h} W_{E}") + ", " + m("W_{U} W_{OV}^{h} W_{E}"),
     c("W_E @ QK @ W_E.T") + ", " + c("W_E @ OV @ W_U")),
    ("direct path",
     "(no name)",
     c("proj.weight @ (lut.weight * sqrt(d_model)).T") + " (transposed; "
     + c("lut") + " of " + c("src_embed") + ", the encoder's)",
     m("W_{U} W_{E}") + " [n_vocab_out, n_vocab] (transposed)",
     c("W_E @ W_U") + " [d_vocab, d_vocab_out]"),
    ("positional circuit (QK)",
     "(no name)",
     later("after exercise 20.1"),
     "not in the paper; " + m("W_{pos}^{T} W_{QK}^{h} W_{pos}")
     + " (same table)",
     c("W_pos @ QK[l, h] @ W_pos.T") + " [n_ctx, n_ctx]"),
    ("Q-composition, A into B",
     "(no name)", "(no name)",
     m("W_{QK}^{BT} W_{OV}^{A}") + " (transposed, factors reversed)",
     c("OV[0, a] @ QK[1, b]") + "; " + c("all_composition_scores('Q')")),
    ("K-composition, A into B",
     "(no name)", "(no name)",
     m("W_{QK}^{B} W_{OV}^{A}") + " (transposed, factors reversed)",
     c("OV[0, a] @ QK[1, b].T") + "; " + c("all_composition_scores('K')")),
    ("V-composition, A into B",
     "(no name)", "(no name)",
     m("W_{OV}^{B} W_{OV}^{A}") + " (transposed, factors reversed)",
     c("OV[0, a] @ OV[1, b]") + "; " + c("all_composition_scores('V')")),
    ("virtual head A then B",
     "(no name)", "(no name)",
     m("(A^{B} A^{A}) ⊗ (W_{OV}^{B} W_{OV}^{A})") + " (OV part transposed)",
     "pattern " + c("A_B @ A_A") + ", OV " + c("OV[0, a] @ OV[1, b]")
     + "; writes " + c("A_B @ A_A @ x @ OV_a @ OV_b")),
    ("feed-forward network",
     m("max(0, x W_{1} + b_{1}) W_{2} + b_{2}"),
     c("ff.w_1.weight") + " [d_ff, d_model], " + c("ff.w_2.weight"),
     "MLP layer " + m("m(x)") + "; left out of attention-only models",
     c("W_in") + " [d_model, d_mlp], " + c("W_out") + " [d_mlp, d_model]"),
    ("LayerNorm",
     "LayerNorm(x + Sublayer(x)), after each sub-layer",
     c("ln.a_2") + ", " + c("ln.b_2") + "; unbiased std, eps added to std",
     "left out (its centring, gain and bias fold into the weights and biases "
     "around it; the division by the norm does not)",
     c("ln1.w") + ", " + c("ln1.b") + "; " + c("hook_scale")),
    ("unembedding",
     "linear map + softmax, tied to the embedding",
     c("Generator.proj.weight") + " [vocab, d_model], log_softmax",
     m("W_{U}") + " [n_vocab, d_model]; " + m("T(t) = W_{U} x_{-1}"),
     c("W_U") + " [d_model, d_vocab], " + c("b_U")),
]
HEAD = ["quantity", "Vaswani et al. 2017", "Annotated Transformer (code)",
        "Elhage et al. 2021 (columns)", "TransformerLens (rows)"]
def rosetta_table(rows):
    cell = "padding:4px 6px;border-bottom:1px solid #ddd;vertical-align:top"
    head = "".join(f'<th style="{cell};text-align:left">{h}</th>'
                   for h in HEAD)
    body = "".join(
        "<tr>" + "".join(f'<td style="{cell}">{x}</td>' for x in r) + "</tr>"
        for r in rows)
    return HTML('<div style="overflow-x:auto"><table style="font-size:0.8em;'
                f'border-collapse:collapse"><tr>{head}</tr>{body}</table>'
                "</div>")


rosetta_table(ROWS)

# %% [markdown]
# The table is the encoder-decoder's, and the toys' where they have the rows. The toys of
# chapters 14 to 17 are "shortformer" models: `W_pos` is added only where queries and keys
# are read, so in them the positional-encoding and residual-stream rows do not hold as
# written (no `hook_pos_embed` enters `hook_resid_pre`), and values see no positions. The
# rows for full circuits, the direct path and the positional circuit name paths or terms
# of the attention-only toys; in the encoder-decoder they are products of its matrices and
# not paths as they stand, its QK circuit is a form on the normalised stream, not on the
# stream, and its composition and virtual-head rows hold for it only with a LayerNorm's
# division frozen and its centring and gain put between the factors (all explained
# below). SmolLM2, the book's real model, changes several of them. It has no `W_pos`:
# rotary embeddings (RoPE) rotate queries and keys by their positions, so its score is,
# up to the scale $1/\sqrt{d_\text{head}}$, $x_i W_Q R_{i-j} W_K^\top x_j^\top$ (chapter
# {doc}`05_positional`) and "the" QK circuit $W_Q W_K^\top$ is only its offset-0 slice,
# with no positional circuit to build. Its heads share keys and values in groups (GQA), so
# `W_K[l, h]` and `W_V[l, h]` are one matrix for several heads.
# RMSNorm has a gain and no centring or bias, and it sits between the stream and $W_Q$, so
# the bilinear forms are forms on the normalised stream. Its feed-forward network is gated
# (SwiGLU: $(\mathrm{silu}(x W_\text{gate}) \odot x W_\text{in}) W_\text{out}$), and, like the
# paper and unlike the Annotated Transformer, it ties the unembedding to the embedding.
# Nothing on this page is checked on SmolLM2.
#
# Of the differences between the models, three are choices of the Annotated
# Transformer's code, and we check them too: it (and `circuitbook`'s copy of it) puts
# LayerNorm *before* each sub-layer, not after as the paper does; its LayerNorm differs
# numerically from the standard one; and, unlike the paper, its `make_model` does not
# tie the unembedding to the embedding. Its $\sqrt{d_\text{model}}$ scale and its
# positional table move into TransformerLens's `W_E` and `W_pos` below, and the two
# models' agreement checks them with the rest of the encoder.

# %% [markdown]
# ## The Annotated Transformer view: one encoder, two libraries
#
# The zoo's `toy-translation` model is the Annotated Transformer's encoder-decoder with
# {glue:text}`cfg_layers` layers, $d_\text{model}$ = {glue:text}`cfg_d_model`,
# {glue:text}`cfg_heads` heads and $d_\text{ff}$ = {glue:text}`cfg_d_ff` (read from the
# loaded model below), trained on the book's toy translation task. Its encoder is a
# stack of pre-norm layers with attention, a feed-forward network and LayerNorm, which
# is exactly the shape of a TransformerLens block (with bidirectional attention, since
# an encoder sees the whole sentence). So we can move its weights into a
# `HookedTransformer`. The first step is the conversion of the `nn.Linear` weights of
# attention into per-head tensors.
#
# ### Exercise 20.1: from `nn.Linear` to per-head weights
#
# Write `linear_to_tl(weight, n_heads, which)`. `weight` is one of
# `MultiHeadedAttention.linears[i].weight` (shape `[d_model, d_model]`, stored
# `[out, in]`). For `which` in `"q"`, `"k"`, `"v"` return TransformerLens's
# `[n_heads, d_model, d_head]` tensor; for `which == "o"` return the
# `[n_heads, d_head, d_model]` output tensor. Head $h$ owns the block
# `h*d_head:(h+1)*d_head` of the concatenated heads.

# %% tags=["exercise"]
def linear_to_tl(weight, n_heads, which):
    """nn.Linear weight [out, in] -> per-head TransformerLens tensor."""
    # BEGIN SOLUTION
    W = weight.T                                   # the row-vector matrix
    d_in, d_out = W.shape
    if which == "o":                               # heads are blocks of rows
        return W.reshape(n_heads, d_in // n_heads, d_out)
    # heads are blocks of columns: [d_model, h, d_head] -> [h, d_model, d_head]
    return W.reshape(d_in, n_heads, d_out // n_heads).permute(1, 0, 2)
    # END SOLUTION


checks.ch20_ex1(linear_to_tl)

# %% [markdown]
# With it, the whole encoder moves over. The token embedding is `lut.weight` times
# $\sqrt{d_\text{model}}$ (the Annotated Transformer scales in the forward pass;
# TransformerLens has no scale, so we fold it into `W_E`). The fixed sinusoidal table
# becomes `W_pos`. The feed-forward weights are transposed. LayerNorm needs a correction
# that we explain below; for now it is the factor `ln_fix`.

# %%
with contextlib.redirect_stdout(io.StringIO()):
    at_model = load("toy-translation")
enc = at_model.encoder
d_model, n_heads = enc.layers[0].size, enc.layers[0].self_attn.h
d_head = d_model // n_heads
ln_fix = math.sqrt((d_model - 1) / d_model)
glue("cfg_layers", len(enc.layers))
glue("cfg_d_model", d_model)
glue("cfg_heads", n_heads)
glue("cfg_d_ff", enc.layers[0].feed_forward.w_1.out_features)


def encoder_to_tl(model, ln_scale=ln_fix, eps=1e-12):
    """A HookedTransformer computing model.encode; its W_U is the decoder's
    generator (used only for the unembedding check)."""
    enc = model.encoder
    cfg = HookedTransformerConfig(
        n_layers=len(enc.layers), d_model=d_model, n_heads=n_heads,
        d_head=d_head, d_mlp=enc.layers[0].feed_forward.w_1.out_features,
        d_vocab=len(T.SRC_VOCAB), d_vocab_out=len(T.TGT_VOCAB), n_ctx=32,
        act_fn="relu", normalization_type="LN", eps=eps,
        attention_dir="bidirectional", positional_embedding_type="standard")
    tl = HookedTransformer(cfg, move_to_device=False)
    emb, pos = model.src_embed
    sd = {"embed.W_E": emb.lut.weight * math.sqrt(d_model),
          "pos_embed.W_pos": pos.pe[0, :cfg.n_ctx],
          "unembed.W_U": model.generator.proj.weight.T,
          "unembed.b_U": model.generator.proj.bias}

    def norm(prefix, ln):
        sd[f"{prefix}.w"], sd[f"{prefix}.b"] = ln.a_2 * ln_scale, ln.b_2

    for i, layer in enumerate(enc.layers):
        p = f"blocks.{i}"
        lin = layer.self_attn.linears
        for which, k in zip("qkvo", range(4)):
            sd[f"{p}.attn.W_{which.upper()}"] = linear_to_tl(
                lin[k].weight, n_heads, which)
        for which, k in zip("QKV", range(3)):
            sd[f"{p}.attn.b_{which}"] = lin[k].bias.reshape(n_heads, d_head)
        sd[f"{p}.attn.b_O"] = lin[3].bias
        ff = layer.feed_forward
        sd[f"{p}.mlp.W_in"], sd[f"{p}.mlp.b_in"] = ff.w_1.weight.T, ff.w_1.bias
        sd[f"{p}.mlp.W_out"] = ff.w_2.weight.T
        sd[f"{p}.mlp.b_out"] = ff.w_2.bias
        norm(f"{p}.ln1", layer.sublayer[0].norm)
        norm(f"{p}.ln2", layer.sublayer[1].norm)
    norm("ln_final", enc.norm)
    sd = {k: v.detach().clone() for k, v in sd.items()}
    missing, unexpected = tl.load_state_dict(sd, strict=False)
    assert not unexpected and all(k.endswith(("mask", "IGNORE"))
                                  for k in missing), (missing, unexpected)
    return tl.eval()


tl_model = encoder_to_tl(at_model)

# %% [markdown]
# We run both on {glue:text}`n_sent` sentences of seven words (no padding, so no padding
# mask is needed), recording in the Annotated Transformer the stream after every
# sub-layer, the feed-forward outputs and the attention patterns, and in TransformerLens
# its cache.

# %%
sentences = [s for s in T.sample_sentences(400, seed=5) if len(s) == 7][:8]
src, tgt = T.to_tensors(sentences)
src_mask = (src != T.PAD).unsqueeze(-2)
glue("n_sent", len(sentences))

at_stream, at_ffn = [], []
hooks = [sub.register_forward_hook(lambda mod, inp, out: at_stream.append(out))
         for layer in enc.layers for sub in layer.sublayer]
hooks += [layer.feed_forward.register_forward_hook(
    lambda mod, inp, out: at_ffn.append(out)) for layer in enc.layers]
with torch.no_grad():
    at_embed = at_model.src_embed(src)
    memory = at_model.encode(src, src_mask)
    _, cache = tl_model.run_with_cache(src)
for hk in hooks:
    hk.remove()
at_pattern = [layer.self_attn.attn for layer in enc.layers]
stream_in = {0: at_embed, 1: at_stream[1]}     # the stream entering each layer
tl_memory = tl_model.ln_final(cache["resid_post", 1])


# %% [markdown]
# The folded cell compares every intermediate of the two runs within a first-order
# rounding budget of two float32 forward passes, and counts that budget.

# %% tags=["hide-input"]
# A first-order rounding budget for each run, twice: roundings along the
# longest path, each of eps, times the largest value anywhere. It is not a
# proven worst case (it ignores how later weights and LayerNorm's division
# amplify earlier errors); the per-LayerNorm identity below, not this budget,
# is the decisive check of the port. Roundings along the longest
# path, per layer: two LayerNorms (mean and variance sums over d_model, sqrt,
# division, gain: 2 d_model + 4 each), the Q/K/V projections (d_model), the
# scores (d_head + 1 for the scale), the softmax over n positions (n + 3),
# the weighted sum of values (n), W_O over the concatenated heads (d_model),
# the FFN (d_model + 1 for the ReLU + d_ff) and two residual additions; then
# the final LayerNorm.
n_pos = src.shape[1]
d_ff = enc.layers[0].feed_forward.w_1.out_features
ln_terms = 2 * d_model + 4
layer_terms = (2 * ln_terms + d_model + (d_head + 1) + (n_pos + 3) + n_pos
               + d_model + (d_model + 1 + d_ff) + 2)
# The two LayerNorms also differ by their epsilons: the Annotated one adds
# 1e-6 to the std, the converted one 1e-12 inside the square root. That is
# not rounding but a modelled bias, known in advance: it changes the output
# by a relative 1e-6 / std at most (std: the smallest any LayerNorm sees), for
# each of the 2 n_layers + 1 LayerNorms. identity_close takes its bound in
# units of eps x scale, so the bias enters it as 1e-6 / (std * eps) such units.
eps32 = torch.finfo(torch.float32).eps
ln_inputs = [at_embed] + at_stream
min_std = min(t.std(-1, unbiased=False).min().item() for t in ln_inputs)
eps_terms = math.ceil(1e-6 / (min_std * eps32))
fwd_bias_terms = 2 * (2 * len(enc.layers) + 1) * eps_terms
fwd_terms = 2 * (len(enc.layers) * layer_terms + ln_terms) + fwd_bias_terms
# the size of the accumulated numbers: the largest value anywhere in the two
# passes (stream, scores, FFN hidden layer, output); patterns are at most 1
big = max([t.abs().max().item() for t in ln_inputs + at_ffn + [memory]]
          + [cache["attn_scores", i].abs().max().item() for i in range(2)]
          + [cache["mlp_pre", i].abs().max().item() for i in range(2)])
got_want = {
    "embedding + positions": (cache["hook_embed"] + cache["hook_pos_embed"],
                              at_embed),
    "attention patterns": (torch.stack([cache["pattern", i]
                                        for i in range(2)]),
                           torch.stack(at_pattern)),
    "stream after each sub-layer": (
        torch.stack([cache[name, i] for i in range(2)
                     for name in ["resid_mid", "resid_post"]]),
        torch.stack(at_stream)),
    "feed-forward outputs": (torch.stack([cache["mlp_out", i]
                                          for i in range(2)]),
                             torch.stack(at_ffn)),
    "encoder output (memory)": (tl_memory, memory),
}
for name, (got, want) in got_want.items():
    identity_close(f"TransformerLens reproduces the Annotated Transformer: "
                   f"{name}", got, want, terms=fwd_terms, scale=big,
                   chapter="20")
glue("fwd_terms", fwd_terms)
glue("fwd_round_terms", fwd_terms - fwd_bias_terms)
glue("fwd_bias_terms", fwd_bias_terms)
glue("fwd_bound", rounding_bound(fwd_terms, big))

# %% [markdown]
# Every intermediate agrees within a bound of two parts: a first-order budget for the
# float32 rounding of the two forward passes ({glue:text}`fwd_round_terms` roundings of
# float32's $\epsilon \approx 1.2 \times 10^{-7}$ along the longest path, each counted at
# the size of the largest number anywhere; a budget, not a proven worst case, since it
# leaves out how later weights and LayerNorm's division amplify earlier errors), and a modelled bias, known before the run: the
# two LayerNorms' different epsilons, which move each output by a relative $10^{-6}/\sigma$
# at most ($\sigma$ the smallest standard deviation a LayerNorm sees), worth
# {glue:text}`fwd_bias_terms` more units of $\epsilon$. Times the size of the largest number
# involved, that is {glue:text}`fwd_bound:.0e`.
# The measured differences (one click away under each check) are far smaller and change
# from one CPU to the next; the budget does not.
# The attention patterns match with TransformerLens's default scale
# $1/\sqrt{d_\text{head}}$, which is the paper's $1/\sqrt{d_k}$.
#
# **The one real difference: LayerNorm.** The Annotated Transformer's `LayerNorm`
# divides by the *unbiased* standard deviation (dividing the sum of squares by
# $d_\text{model} - 1$) and adds its $\epsilon = 10^{-6}$ to the standard deviation;
# TransformerLens, like `torch.nn.LayerNorm`, divides by the biased one
# (by $d_\text{model}$) with $\epsilon$ inside the square root. Ignoring the two
# epsilons, the unbiased standard deviation is the biased one times
# $\sqrt{d_\text{model}/(d_\text{model}-1)}$, so the Annotated Transformer's output is
# TransformerLens's times $\sqrt{(d_\text{model}-1)/d_\text{model}}$ before the bias is
# added. That constant is `ln_fix` above: folded into the gain $w$, it makes the two
# agree. Copying `a_2` into `w` as it is, with TransformerLens's default
# $\epsilon = 10^{-5}$, gives a model that is close but not equal.

# %%
naive = encoder_to_tl(at_model, ln_scale=1.0, eps=1e-5)
with torch.no_grad():
    _, naive_cache = naive.run_with_cache(src)
naive_memory = naive.ln_final(naive_cache["resid_post", 1])
naive_gap = (naive_memory - memory).abs().max()
rel_gap = ((naive_memory - memory).norm() / memory.norm()).item()
# the gap against the forward pass's rounding budget; the identity below says
# where it comes from
observation("copying a_2, b_2 into w, b unchanged: the largest gap in the "
            "encoder's output, and the forward pass's rounding bound",
            f"{naive_gap:.2f} vs {rounding_bound(fwd_terms, big):.2g}",
            chapter="20")

# all five LayerNorms (two per layer and the final one), each on the stream
# that enters it in the Annotated run, against its naive copy
ln_pairs = [(sub.norm, getattr(naive.blocks[i], f"ln{k + 1}"))
            for i, layer in enumerate(enc.layers)
            for k, sub in enumerate(layer.sublayer)] + [(enc.norm,
                                                         naive.ln_final)]
ln_in = [at_embed] + at_stream        # the input of each, in the same order
with torch.no_grad():
    at_ln = torch.stack([a(x) for (a, _), x in zip(ln_pairs, ln_in)])
    tl_ln = torch.stack([b(x) for (_, b), x in zip(ln_pairs, ln_in)])
    bias = torch.stack([a.b_2 for a, _ in ln_pairs])[:, None, None]
at_out, tl_out = at_ln - bias, tl_ln - bias
# Compared as a product, not a ratio: where x is near its mean both outputs are
# near zero and their ratio is rounding noise. Roundings: each LayerNorm 2
# d_model + 4, the bias added and subtracted again (2), the product with ln_fix
# (1). The epsilons are the one difference beyond rounding, a modelled bias:
# with std s, 1e-6 added to s and 1e-5 inside the square root change the ratio
# by a relative 1e-6 / s + 1e-5 / (2 s^2) at most (s: the smallest std any of
# the five sees), added to the bound in units of eps. Scale: the LayerNorm outputs before the
# bias is subtracted.
s_min = min(t.std(-1, unbiased=False).min().item() for t in ln_in)
ln_eps = math.ceil((1e-6 / s_min + 1e-5 / (2 * s_min ** 2)) / eps32)
ln_scale = max(at_ln.abs().max().item(), tl_ln.abs().max().item())
identity_close(f"each of the {len(ln_pairs)} Annotated LayerNorms = "
               "sqrt((d-1)/d) x its TransformerLens copy (gain copied), "
               "elementwise before the bias",
               at_out, ln_fix * tl_out, terms=2 * ln_terms + 3 + ln_eps,
               scale=ln_scale, chapter="20")
# What the gap is measured against. The forward bound is a budget; the
# differences the corrected port actually shows (largest over the forward
# identities above) are the rounding that happens, and they differ from CPU
# to CPU. The per-LayerNorm identity's bound is the decisive one: how far the
# naive copies' LayerNorms are from the Annotated ones, against it
fwd_measured = max((got - want).abs().max().item()
                   for got, want in got_want.values())
ln_bound = rounding_bound(2 * ln_terms + 3 + ln_eps, ln_scale)
ln_naive_diff = (at_out - tl_out).abs().max().item()
observation("the naive gap against the corrected port's largest measured "
            "difference over the forward identities (this CPU); the naive "
            "copies' largest per-LayerNorm difference (before the bias) "
            "against the per-LayerNorm identity's bound",
            f"{naive_gap:.3f} vs {fwd_measured:.1e}; "
            f"{ln_naive_diff:.3f} vs {ln_bound:.1e}", chapter="20")
glue("naive_gap", naive_gap.item())
glue("naive_vs_bound", naive_gap.item() / rounding_bound(fwd_terms, big))
glue("fwd_measured", fwd_measured, machine_dependent=True)
glue("naive_vs_measured", round(naive_gap.item() / fwd_measured, -2),
     machine_dependent=True)
glue("ln_bound", ln_bound)
glue("ln_naive_diff", ln_naive_diff)
glue("ln_naive_vs_bound", ln_naive_diff / ln_bound)
glue("rel_gap", 100 * rel_gap)
glue("ln_fix", ln_fix)
glue("n_ln", len(ln_pairs))

# %% [markdown]
# Copied naively, the encoder's output is off by up to {glue:text}`naive_gap:.2f` (a
# relative error of {glue:text}`rel_gap:.2f`% over the whole output): each of the
# {glue:text}`n_ln` Annotated LayerNorms gives {glue:text}`ln_fix:.5f` times what its
# naive copy gives (before the bias; the identity above, whose bound again adds the
# epsilons' modelled bias to rounding). The gap is that factor at work, not rounding: the
# corrected port differs from the Annotated Transformer by at most
# {glue:text}`fwd_measured:.1e` anywhere in the forward pass (measured on the machine
# that built this page), so the gap is about {glue:text}`naive_vs_measured:.0f` times the
# rounding that actually happens. The forward identities alone would not catch it by
# much: their rounding budget, {glue:text}`fwd_bound:.0e`, is only
# {glue:text}`naive_vs_bound:.1f` times smaller than the gap. The decisive check is the
# per-LayerNorm identity: without the factor, the naive copies' LayerNorms differ from
# the Annotated ones by up to {glue:text}`ln_naive_diff:.3f`, {glue:text}`ln_naive_vs_bound:.0f`
# times its bound of {glue:text}`ln_bound:.1e`. A relative error under one percent is
# small, but enough to mislead anyone who checks a port of the Annotated Transformer
# against a standard implementation. Chapter {doc}`11_layernorm`
# treats LayerNorm itself.

# %% [markdown]
# ## The circuit view: the table, row by row
#
# ### Per-head weights and the two conventions
#
# With TransformerLens holding the weights, we can test the rule from the beginning of the
# chapter: a slice of an `nn.Linear` weight is Elhage et al.'s column-convention matrix,
# and its transpose is TransformerLens's. (`model.W_Q` stacks all layers:
# `[n_layers, n_heads, d_model, d_head]`.) Comparing the slices with TransformerLens's
# matrices only checks that our loader copied what it meant to copy, since it used the
# same slicing rule; the check that can fail independently compares what the two
# libraries *compute* for each head: the Annotated Transformer's forward splits its
# projections into heads with a `.view`, TransformerLens with its per-head weights.

# %%
worst = 0.0
for i, layer in enumerate(enc.layers):
    lin = layer.self_attn.linears
    for h in range(n_heads):
        hs = slice(h * d_head, (h + 1) * d_head)
        pairs = [(lin[0].weight[hs], tl_model.W_Q[i, h].T),   # Elhage W_Q^h
                 (lin[1].weight[hs], tl_model.W_K[i, h].T),
                 (lin[2].weight[hs], tl_model.W_V[i, h].T),
                 (lin[3].weight[:, hs], tl_model.W_O[i, h].T)]  # W_O^h
        for stored, tl_T in pairs:
            worst = max(worst, (stored - tl_T).abs().max().item())
# copies, not computations: exactly equal. This checks our loader against
# the slicing rule it was written with, nothing more
identity("the loader copies each head's nn.Linear slice into TransformerLens "
         "as its transpose (W_Q, W_K, W_V, W_O)", worst, worst == 0.0,
         chapter="20")

# the independent check: the heads as the Annotated Transformer's own forward
# splits them (its .view into [batch, pos, h, d_k]) against the heads
# TransformerLens computes from the converted weights (hook_q, hook_k, hook_v)
at_qkv, tl_qkv, qkv_scale = [], [], 0.0
with torch.no_grad():
    for i, layer in enumerate(enc.layers):
        x_in = layer.sublayer[0].norm(stream_in[i])
        for lin, name in zip(layer.self_attn.linears[:3], "qkv"):
            at_qkv.append(lin(x_in).view(*x_in.shape[:2], n_heads, d_head))
            tl_qkv.append(cache[name, i])        # [batch, pos, head, d_head]
            qkv_scale = max(qkv_scale, (x_in.abs() @ lin.weight.abs().T
                                        + lin.bias.abs()).max().item())
# LayerNorm (with its eps difference) and the projection, twice; scale:
# |x| |W|^T + |b|
identity_close("every head's queries, keys and values as the Annotated "
               "Transformer's forward splits them (its .view into heads) "
               "equal TransformerLens's hook_q, hook_k, hook_v",
               torch.stack(tl_qkv), torch.stack(at_qkv),
               terms=2 * (ln_terms + d_model + 1) + eps_terms,
               scale=qkv_scale, chapter="20")

# %% [markdown]
# ### The QK circuit
#
# In TransformerLens's row-vector convention the score of query position $i$ on key
# position $j$ is $(x_i W_Q + b_Q)(x_j W_K + b_K)^\top / \sqrt{d_\text{head}}$, where $x$
# is the stream after the layer's first LayerNorm. Expanding the product gives the
# framework's bilinear form plus three bias terms, which the framework leaves out:
#
# $$x_i W_{QK} x_j^\top + x_i W_Q b_K^\top + b_Q W_K^\top x_j^\top + b_Q b_K^\top,
# \qquad W_{QK} = W_Q W_K^\top.$$
#
# The three bias terms do not count alike. The pattern is a softmax over the keys $j$ of
# one query's row, and a softmax does not change when the same number is added to every
# entry of the row: $e^{s_j + c} / \sum_{j'} e^{s_{j'} + c} = e^{s_j} / \sum_{j'}
# e^{s_{j'}}$ (masked entries, at $-\infty$, stay there). The second term,
# $x_i W_Q b_K^\top$, depends on the query $i$ only, and the fourth, $b_Q b_K^\top$, on
# nothing; both are constant along a row and cancel. The third, $b_Q W_K^\top x_j^\top$,
# depends on the key $j$: it is a fixed preference of the head for some keys, whatever
# the query, and it changes the pattern. So the pattern is
# $\mathrm{softmax}_j\big((x_i W_{QK} x_j^\top + b_Q W_K^\top x_j^\top)/\sqrt{d_\text{head}}\big)$
# exactly: the key bias $b_K$ never changes the pattern, and the query bias changes it
# only through the keys.
#
# In Elhage et al.'s column convention the score is $x_i^\top W_Q^\top W_K x_j$ with
# $W_Q$ now $d_\text{head} \times d_\text{model}$, so their $W_{QK} = W_Q^\top W_K$ is
# the *same* $d_\text{model}\times d_\text{model}$ matrix as ours: a bilinear form has one
# matrix, whichever side we write the vectors on. We build Elhage et al.'s $W_{QK}$ from
# the Annotated Transformer's own modules (as exercise 20.1 showed, their $W_Q^h$ is the
# slice `linears[0].weight[hs]`) and compare it with TransformerLens's `model.QK`; then we
# check the expansion against TransformerLens's scores and illustrate the cancellation.

# %%
layer_i, head = 1, 2
lin = enc.layers[layer_i].self_attn.linears
hs = slice(head * d_head, (head + 1) * d_head)
# Elhage's matrices, from the Annotated Transformer's nn.Linear slices
W_Q_paper, W_K_paper = lin[0].weight[hs], lin[1].weight[hs]  # [d_head, d_model]
qk_paper = W_Q_paper.T @ W_K_paper                       # Elhage: W_Q^T W_K
qk_tl = tl_model.QK[layer_i, head].AB                    # FactoredMatrix
# each side is a sum of d_head products (the same weights, perhaps summed in
# another order), so two d_head-term sums; scale: the entries of |W_Q| |W_K|^T
qk_scale = (W_Q_paper.abs().T @ W_K_paper.abs()).max().item()
identity_close("Elhage et al.'s W_Qᵀ W_K, built from the Annotated "
               "Transformer's nn.Linear slices, is TransformerLens's model.QK "
               "(the same matrix, not transposed)",
               qk_paper, qk_tl, terms=2 * d_head, scale=qk_scale, chapter="20")
qk_asym = (qk_tl - qk_tl.T).abs().max().item()
# were W_QK symmetric, "the same, not transposed" would check nothing
observation(f"head {layer_i}.{head}'s W_QK: max |W - Wᵀ|, in units of the "
            "comparison's rounding bound",
            f"{qk_asym / rounding_bound(2 * d_head, qk_scale):.0f}",
            chapter="20")

xn = cache[f"blocks.{layer_i}.ln1.hook_normalized"][0] \
    * tl_model.blocks[layer_i].ln1.w + tl_model.blocks[layer_i].ln1.b
bQ, bK = tl_model.b_Q[layer_i, head], tl_model.b_K[layer_i, head]
WQ, WK = tl_model.W_Q[layer_i, head], tl_model.W_K[layer_i, head]
rt = math.sqrt(d_head)
s_qk = xn @ qk_tl @ xn.T / rt                  # the bilinear form
s_q = (xn @ WQ @ bK)[:, None] / rt             # x_i W_Q b_K: the query only
s_k = (bQ @ WK.T @ xn.T)[None, :] / rt         # b_Q W_K x_j: the key only
s_c = bQ @ bK / rt                             # b_Q b_K: a constant
scores = s_qk + s_q + s_k + s_c
hooked = cache["attn_scores", layer_i][0, head]
# ours: W_QK (d_head), x W_QK x^T (2 d_model), the bias terms and their sum
# (d_model + 4), the scale (1); TransformerLens's: the projections (d_model +
# 1), q.k (d_head), scale (1). The terms cancel (the scores are smaller than
# the products summed), so the scale is that of the summands: |x| |W_Q| |W_K|^T
# |x|^T plus the bias products
score_terms = (d_head + 3 * d_model + 5) + (d_model + d_head + 2)
score_scale = ((xn.abs() @ WQ.abs() + bQ.abs())
               @ (xn.abs() @ WK.abs() + bK.abs()).T).max().item()
identity_close("bilinear form + three bias terms = TransformerLens's scores",
               scores, hooked, terms=score_terms, scale=score_scale,
               chapter="20")
# the cancellation, an illustration and not a test: s_q and s_c are row
# constants by construction, so this can only exercise the softmax's shift
# invariance (the row-constancy itself rests on the score identity above).
# In float64 so that rounding is far below the effect of the key term: the
# pattern from all four terms against the pattern from the bilinear form and
# the key term alone. The two score arrays differ only by the two row
# constants' additions (2 roundings) on numbers of size score_scale; a score
# error d moves a softmax entry by at most 2 max|d| (its derivative is
# p (d - p.d)), and each softmax adds n + 3 roundings of numbers at most 1
t_qk, t_q, t_k, t_c = (t.double() for t in (s_qk, s_q, s_k, s_c))
p_all = torch.softmax(t_qk + t_q + t_k + t_c, -1)
p_kept = torch.softmax(t_qk + t_k, -1)
cancel_terms = 2 * 2 + 2 * (n_pos + 3)
identity_close("illustration (the softmax's shift invariance): the "
               "row-constant bias terms (x_i W_Q b_K and b_Q b_K) cancel "
               "in the softmax: the pattern from the bilinear form + b_Q W_K x_j "
               "equals the pattern from all four terms (float64)",
               p_kept, p_all, terms=cancel_terms, scale=score_scale,
               chapter="20")
# what each part weighs: the mean size of the key term and of the two
# row-constant terms, against the mean size of the scores; and how far the
# pattern moves (largest change of one attention weight) when the key term is
# dropped, against the cancellation check's bound
mean_size = hooked.abs().mean()
key_share = ((s_k.expand_as(hooked)).abs().mean() / mean_size).item()
const_share = ((s_q + s_c).expand_as(hooked).abs().mean() / mean_size).item()
key_shift = (torch.softmax(t_qk, -1) - p_kept).abs().max().item()
pattern_bound = rounding_bound(cancel_terms, score_scale, torch.float64)
observation(f"head {layer_i}.{head}, sentence 0: mean |b_Q W_K x_j| and mean "
            "|x_i W_Q b_K + b_Q b_K| as shares of the mean |score|; largest "
            "change of an attention weight when b_Q W_K x_j is dropped, and the "
            "cancellation check's bound",
            f"{100 * key_share:.1f}%, {100 * const_share:.1f}%; "
            f"{key_shift:.3f} vs {pattern_bound:.1g}", chapter="20")
glue("key_share", 100 * key_share)
glue("const_share", 100 * const_share)
glue("key_shift", key_shift)

# %% [markdown]
# In this head, on this sentence, the key term $b_Q W_K^\top x_j^\top$ is
# {glue:text}`key_share:.1f`% of the scores' average size, and leaving it out moves one
# attention weight by up to {glue:text}`key_shift:.3f`; the two row-constant terms are
# {glue:text}`const_share:.1f`% of the scores' size and change nothing, because they
# cancel. The framework leaves biases out of its equations, so for it $W_{QK}$ is the
# whole story; for a model with biases it is the story up to one key-dependent term per
# head, whose weight has to be measured head by head, as here. (Elhage et al.'s form can
# hold it too: append a constant coordinate 1 to $x$ and the key term becomes one more
# row of $W_{QK}$.)
#
# ### The OV circuit
#
# A head that attends to position $j$ with weight $A_{ij}$ writes into position $i$ the
# weighted sum, over $j$, of what its value and output maps make of $x_j$, plus a
# constant from the value bias (the rows of $A$ sum to one). The part that depends on
# $x_j$ is one linear map per head, from the residual stream to the residual stream:
# the head's OV circuit $W_{OV}$, which says what the head writes when it attends to a
# given stream vector. Exercise 20.2 builds it from the Annotated Transformer's weights;
# after it we compare it with Elhage et al.'s.
#
# ### Exercise 20.2: OV circuits from `nn.Linear` weights
#
# Write `ov_from_linears(w_v, w_o, n_heads)` returning TransformerLens's $W_{OV}$ of
# every head, `[n_heads, d_model, d_model]`: the matrix that maps a row vector $x$ of the
# attended stream to what the head writes from it (the bias aside). The inputs are
# `w_v = linears[2].weight` and `w_o = linears[3].weight`. You may use your
# `linear_to_tl`.

# %% tags=["exercise"]
def ov_from_linears(w_v, w_o, n_heads):
    """nn.Linear weights of W^V and W^O -> W_OV per head [n_heads, d, d]."""
    # BEGIN SOLUTION
    return linear_to_tl(w_v, n_heads, "v") @ linear_to_tl(w_o, n_heads, "o")
    # END SOLUTION


checks.ch20_ex2(ov_from_linears)

# %% [markdown]
# <details><summary>Exercise 20.2 worked out (open it once your function passes)</summary>
#
# In rows, the head writes
# $\sum_j A_{ij}(x_j W_V + b_V) W_O = \sum_j A_{ij}\, x_j W_{OV} + b_V W_O$ into position
# $i$, with $W_{OV} = W_V W_O$: the value map acts first, so it stands on the left. In
# Elhage et al.'s convention the same head writes $W_O W_V x_j$, so their
# $W_{OV} = W_O W_V$ is the transpose of ours.
#
# </details>
#
# The cell below checks `ov_from_linears` and Elhage et al.'s form against
# TransformerLens's `model.OV`. That is a check of notation: `model.OV` holds tensors
# our loader built with the same slicing rule, so only the order and transposes of the
# factors can fail there. The independent check is of what the head computes. We take
# `circuitbook`'s per-head decomposition `head_outputs` (each head's
# $A (x W_V + b_V) W_O$, with the module's own pattern), check that its sum over heads
# plus the output bias is the attention module's own forward (its `.view` into heads,
# concatenation and one $W^O$), and compare head 1.2's write, computed three ways, with
# it.

# %% tags=["hide-input"]
ov_at = ov_from_linears(lin[2].weight, lin[3].weight, n_heads).detach()
ov_tl = tl_model.OV[layer_i].AB                       # [n_heads, d, d]
# two sums of d_head products each; scale: the entries of |W_V| |W_O|
ov_scale = (tl_model.W_V[layer_i].abs()
            @ tl_model.W_O[layer_i].abs()).max().item()
identity_close("ov_from_linears equals TransformerLens's model.OV for every "
               "head", ov_at, ov_tl, terms=2 * d_head, scale=ov_scale,
               chapter="20")
ov_paper = lin[3].weight[:, hs] @ lin[2].weight[hs]   # Elhage: W_O W_V
identity_close("Elhage et al.'s W_O W_V is the transpose of "
               "TransformerLens's W_V W_O",
               ov_paper, ov_tl[head].T, terms=2 * d_head, scale=ov_scale,
               chapter="20")
# were W_OV symmetric, "transposed" would check nothing
ov_head_asym = (ov_tl[head] - ov_tl[head].T).abs().max().item()
ov_head_asym_units = ov_head_asym / rounding_bound(2 * d_head, ov_scale)
observation(f"head {layer_i}.{head}'s W_OV: max |W - Wᵀ|, in units of the "
            "comparison's rounding bound", f"{ov_head_asym_units:.0f}",
            chapter="20")

# the per-head decomposition against the module's own forward: head_outputs
# slices W_V and W_O per head (the rule linear_to_tl implements) and takes only
# the pattern from the module, so its sum over heads + b_O must equal what the
# module computes with its .view into heads, concatenation and one W^O
ln1 = enc.layers[layer_i].sublayer[0].norm
mha = enc.layers[layer_i].self_attn
with torch.no_grad():
    x_in = ln1(stream_in[layer_i])
    all_heads = head_outputs(mha, x_in, x_in, x_in, src_mask)  # [b, h, q, d]
    mha_out = mha(x_in, x_in, x_in, src_mask)
    # scale: the same computation in absolute values, from the module's weights
    v_abs = (x_in.abs() @ mha.linears[2].weight.abs().T
             + mha.linears[2].bias.abs())
    v_abs = v_abs.view(*x_in.shape[:2], n_heads, d_head).transpose(1, 2)
    z_abs = (mha.attn @ v_abs).transpose(1, 2).reshape(*x_in.shape[:2], d_model)
    mha_scale = (z_abs @ mha.linears[3].weight.abs().T
                 + mha.linears[3].bias.abs()).max().item()
# both sides use the module's pattern; roundings on the longer side: the value
# projection (d_model + 1), A v (n), W_O (d_model over the concatenated heads),
# the sum over heads and b_O (n_heads + 1); twice
identity_close(f"layer {layer_i}: circuitbook's per-head decomposition "
               "(head_outputs), summed over heads, plus b_O, equals the "
               "Annotated attention module's own forward (all sentences)",
               all_heads.sum(1) + mha.linears[3].bias, mha_out,
               terms=2 * (d_model + 1 + n_pos + d_model + n_heads + 1),
               scale=mha_scale, chapter="20")
# the head's write, three ways: TransformerLens's cached values, and the OV
# circuit applied to the normalised stream, in rows and in columns; against
# the decomposition checked above
at_heads = all_heads[0, head]
z = cache["z", layer_i][0, :, head]                 # [pos, d_head]
tl_head = z @ tl_model.W_O[layer_i, head]
A = cache["pattern", layer_i][0, head]
via_ov = A @ xn @ ov_tl[head] + tl_model.b_V[layer_i, head] @ tl_model.W_O[
    layer_i, head]
via_paper = (ov_paper @ (A @ xn).T).T + tl_model.b_V[layer_i, head] \
    @ tl_model.W_O[layer_i, head]
# Annotated head_outputs: LayerNorm (2 d_model + 4), the projections (d_model +
# 1), the scores (d_head + 1), the softmax over n positions (n + 3), A v (n),
# W_O (d_head + 1); the other side at most as many again (the OV chain: d_head
# + n + d_model + 2). The LayerNorms differ by their epsilons, a modelled bias
# added to the bound in units of eps (eps_terms, as above). Scale: the entries of A (|x| |W_V| + |b_V|) |W_O| and of the
# normalised stream, the largest numbers summed.
head_terms = 2 * ((2 * d_model + 4) + (d_model + 1) + (d_head + 1)
                  + (n_pos + 3) + n_pos + (d_head + 1)) + eps_terms
WV, WO = tl_model.W_V[layer_i, head], tl_model.W_O[layer_i, head]
head_scale = max((A @ (xn.abs() @ WV.abs() + tl_model.b_V[layer_i, head].abs())
                  @ WO.abs()).max().item(), xn.abs().max().item())
for name, out in (("TransformerLens z @ W_O", tl_head),
                  ("A x W_OV + b_V W_O", via_ov),
                  ("column form (W_O W_V)(A x)^T", via_paper)):
    identity_close(f"head {layer_i}.{head}'s write: {name} = its term in "
                   "the per-head decomposition (head_outputs)",
                   out, at_heads, terms=head_terms, scale=head_scale,
                   chapter="20")

# %% [markdown]
# With both exercises done, here are the table's rows for the heads with the cells that
# were blank filled in. The independent evidence for them is what the two libraries
# compute: every head's queries, keys and values in both layers against the Annotated
# forward's own split into heads (`hook_q`, `hook_k`, `hook_v`); the two models'
# agreement after every sub-layer, which also covers the output slices; the score
# expansion and the pattern of head 1.2; and head 1.2's write against a per-head
# decomposition whose sum is the module's forward. The comparisons of $W_{QK}$ with
# `model.QK` and of $W_{OV}$ with `model.OV` check notation only, since those hold the
# tensors our loader built. The positional circuit is checked below.

# %% tags=["hide-input", "full-width"]
# the cells left blank in the table above (column 2: the Annotated
# Transformer's code; 3 and 4: Elhage's and TransformerLens's forms)
FILLED = {
    "query, key, value of head h": {
        2: c("mha.linears[0].weight[hs]") + " [d_k, d_model] (and [1], [2])"},
    "output of head h": {2: c("mha.linears[3].weight[:, hs]") + " [d_model, d_k]"},
    "QK circuit": {2: c("linears[0].weight[hs].T @ linears[1].weight[hs]")},
    "OV circuit": {
        2: c("linears[2].weight[hs].T @ linears[3].weight[:, hs].T"),
        3: m("W_{OV}^{h} = W_{O}^{h} W_{V}^{h}") + " (transposed)",
        4: c("W_V[l, h] @ W_O[l, h]") + ", " + c("model.OV[l, h]")},
    "positional circuit (QK)": {
        2: c("pe[0, :n] @ (linears[0].weight[hs].T @ linears[1].weight[hs]) "
             "@ pe[0, :n].T")},
}
rosetta_table([tuple(FILLED[r[0]].get(k, x) for k, x in enumerate(r))
               for r in ROWS if r[0] in FILLED])

# %% [markdown]
# ### Full circuits and the unembedding
#
# Putting the embedding and unembedding around a circuit gives a vocabulary-by-vocabulary
# table: the full QK circuit $W_E W_{QK} W_E^\top$ and the full OV circuit
# $W_E W_{OV} W_U$ (rows: the attended token). In Elhage et al.'s convention they are
# $W_E^\top W_{QK} W_E$ and $W_U W_{OV} W_E$, with $W_E$ of shape
# $d_\text{model} \times n_\text{vocab}$ and $W_U$ of shape $n_\text{vocab} \times
# d_\text{model}$: the QK table is again the same, the OV table transposed.
#
# In the attention-only toys of chapters 14 to 17 these tables are terms of the model:
# for a first-layer head, the token-token part of its score (up to the scale
# $1/\sqrt{d_\text{head}}$) and the change its write
# makes to the logits through the residual stream (chapter {doc}`09_full_circuits`). The
# positions add terms of their own to the score; they add none to the write, since in
# these shortformer toys values see no positions. In this encoder-decoder the two tables
# are not terms of the model, and they mean different things:
#
# - **Full QK.** Head 1.2 reads the normalised stream after layer 0, which holds the
#   token embeddings, the positions and everything layer 0 wrote. If we freeze each
#   LayerNorm's division (treat $1/\sigma$ of each position as a constant), the score
#   of head 1.2 expands into terms, and the token-token one is
#   $\frac{1}{\sqrt{d_\text{head}}\,\sigma_i \sigma_j} e_i P G\, W_{QK}\, G P e_j^\top$
#   (with $e$ a row of $W_E$, $P$ the centring, $G$ the gain, and $\sigma$ what the
#   Annotated LayerNorm divides by: the unbiased standard deviation plus $\epsilon$),
#   plus terms with the bias $b$ of the LayerNorm. $W_E W_{QK} W_E^\top$ is not that
#   term, even with the divisions frozen: it leaves out the centring and the gain that
#   stand between its factors ($W_E P G W_{QK} G P W_E^\top$), as well as the division
#   and the $1/\sqrt{d_\text{head}}$, and every term from positions and layer 0. It is
#   at best an approximation to that term, and this page does not measure how close.
# - **Full OV.** The encoder never writes into the logits. Its output, after a final
#   LayerNorm, is the `memory` that the decoder reads through cross-attention, and the
#   logits are the decoder's. Every path from an encoder head to a logit therefore passes
#   through at least one cross-attention head (through its values, or through its keys
#   and so its pattern) and two LayerNorms, so $W_E W_{OV} W_U$, with no cross-attention
#   in it, is not a term of this model at all: it does not say how attending to a token
#   changes the logits. The nearest term, with the LayerNorm divisions and the
#   cross-attention pattern frozen, is
#   $W_E W_{OV}^{\text{enc}} W_{OV}^{\text{cross}} W_U$, with centrings and gains
#   between the factors.
#
# So here the two tables are only products of the model's matrices, and we use them
# for one thing: to check that the two conventions write the same products. We build
# Elhage et al.'s side from the Annotated Transformer's modules (its `lut.weight` times
# $\sqrt{d_\text{model}}$ as $W_E$, its generator's `proj.weight` as $W_U$, the head's
# `nn.Linear` slices) and the other from TransformerLens's `FactoredMatrix`.

# %%
lut = at_model.src_embed[0].lut.weight * math.sqrt(d_model)
W_U_at = at_model.generator.proj.weight              # [vocab, d_model]
W_E_paper, W_U_paper = lut.T, W_U_at    # Elhage: [d_model, vocab], [vocab, d]
full_qk_paper = W_E_paper.T @ qk_paper @ W_E_paper
full_ov_paper = W_U_paper @ ov_paper @ W_E_paper
full_qk_tl = (tl_model.W_E @ tl_model.QK[layer_i, head] @ tl_model.W_E.T).AB
full_ov_tl = (tl_model.W_E @ tl_model.OV[layer_i, head] @ tl_model.W_U).AB
# each table is a chain of products with inner sizes d_head, d_model, d_model
# (in some order), computed twice: 2 (2 d_model + d_head) roundings. The chains
# cancel, so the scale is the largest entry of the same chain of absolute
# values.
E_abs = tl_model.W_E.abs()
qk_chain = (E_abs @ WQ.abs() @ WK.abs().T @ E_abs.T).max().item()
ov_chain = (E_abs @ WV.abs() @ WO.abs() @ tl_model.W_U.abs()).max().item()
full_terms = 2 * (2 * d_model + d_head)
for name, a, b, sc in (
        ("full QK: Elhage's W_E^T W_QK W_E, from the Annotated Transformer's "
         "lut and nn.Linear slices, is TransformerLens's table (the same)",
         full_qk_paper, full_qk_tl, qk_chain),
        ("full OV: Elhage's W_U W_OV W_E, from the Annotated Transformer's "
         "proj, nn.Linear slices and lut, is TransformerLens's table "
         "transposed", full_ov_paper, full_ov_tl.T, ov_chain)):
    identity_close(name, a, b, terms=full_terms, scale=sc, chapter="20")
ov_asym = (full_ov_tl - full_ov_tl.T).abs().max().item()
full_qk_asym = (full_qk_tl - full_qk_tl.T).abs().max().item()
# the full QK table is compared "the same, not transposed": were it symmetric,
# that would check nothing
observation(f"head {layer_i}.{head}'s full QK table: max |M - Mᵀ|, in units "
            "of the comparison's rounding bound",
            f"{full_qk_asym / rounding_bound(full_terms, qk_chain):.0f}",
            chapter="20")
# the two vocabularies have the same size here, so the shapes would not catch a
# missing transpose; the table's asymmetry does
observation(f"head {layer_i}.{head}'s full OV table: max |M - Mᵀ|, in units "
            "of the comparison's rounding bound",
            f"{ov_asym / rounding_bound(full_terms, ov_chain):.0f}",
            chapter="20")

# the unembedding on the decoder's real output
tgt_in = tgt[:, :-1]
tgt_mask = T.make_std_mask(tgt_in, T.PAD)
with torch.no_grad():
    dec = at_model.decode(memory, src_mask, tgt_in, tgt_mask)
    logp_at = at_model.generator(dec)
    logp_tl = tl_model.unembed(dec).log_softmax(-1)
# the same computation twice: logits (d_model products + bias) and log_softmax
# over the target vocabulary (its log-sum-exp: n_vocab + 3); scale: the logits
# and log-probs
logits_tl = tl_model.unembed(dec)
n_vocab_out = logits_tl.shape[-1]
identity_close("W_U = proj.weight.T: TransformerLens's unembed + log_softmax "
               "equals the Generator", logp_tl, logp_at,
               terms=2 * (d_model + 1 + n_vocab_out + 3),
               scale=max(logits_tl.abs().max().item(),
                         logp_at.abs().max().item()), chapter="20")
tgt_lut = at_model.tgt_embed[0].lut.weight
tied = (tgt_lut - W_U_at).abs().max()
# tied weights would be one tensor (the same storage): separate storage is
# by construction (make_model does not tie them); how far apart they are is
# what training made of them
identity("unlike the paper, the target embedding and the unembedding are "
         "two separate parameters here (separate storage)",
         f"{tgt_lut.data_ptr() != W_U_at.data_ptr()}",
         tgt_lut.data_ptr() != W_U_at.data_ptr(), chapter="20")
observation("after training, the largest difference between the target "
            "embedding and the unembedding", f"{tied:.2f}", chapter="20")

# %% [markdown]
# ### Direct path, positional circuit, composition and virtual heads
#
# The last rows of the table are where the two conventions part most visibly, because
# they chain several matrices. The rule is the one for $W_{QK}$ and $W_{OV}$, applied
# to a product: a chain of row-vector maps $x \mapsto x M_1 M_2$ is the chain of
# column-vector maps $x \mapsto M_2^\top M_1^\top x$, so the order of the factors
# reverses and each factor that is transposed between the conventions ($W_{OV}$, the
# embeddings) stays transposed. Bilinear forms ($W_{QK}$ and the tables built from it,
# like the **positional circuit** $W_\text{pos} W_{QK} W_\text{pos}^\top$) are the same
# matrix either way. The **direct path** $W_E W_U$ is transposed.
# The three **composition** matrices (chapter {doc}`18_composition`) are transposed with
# their factors reversed, and with one consequence that is easy to get wrong: in rows,
# Q-composition is $W_{OV}^A W_{QK}^B$ and K-composition carries the transpose,
# $W_{OV}^A (W_{QK}^B)^\top$; in Elhage et al.'s columns it is the other way round,
# $W_{QK}^{B\top} W_{OV}^A$ for Q and $W_{QK}^B W_{OV}^A$ for K. Reverse the factors but
# keep each transpose where it stood, and Q and K swap places: the columns' Q form
# becomes $W_{OV}^A W_{QK}^{B\top}$, the rows' K form. Copy a formula across without
# reversing it at all, and the score is neither: the columns' Q form read with the
# rows' matrices, $W_{QK}^{B\top} W_{OV}^A$, has the norm of $W_{OV}^{A\top} W_{QK}^B$,
# which is neither $\|W_{OV}^A W_{QK}^B\|$ (Q) nor $\|W_{OV}^A W_{QK}^{B\top}\|$ (K). A
# **virtual head**, head $A$ in layer 0 followed by head $B$ in layer 1, has pattern
# $A^B A^A$ and OV matrix $W_{OV}^A W_{OV}^B$ in rows; Elhage et al. write it
# $(A^B A^A) \otimes (W_{OV}^B W_{OV}^A)$. We check every one of these rows on the
# encoder's weights, for each writer head of layer 0 into head 1.2, from
# TransformerLens's matrices on one side and, on Elhage et al.'s side, from the
# Annotated Transformer's own modules: the `nn.Linear` slices, `lut.weight`, the
# generator's `proj.weight` and the positional encoding's fixed buffer `pe`. (The virtual
# head's two patterns and its input stream are activations, not weights; both sides
# take them from the same run.)
#
# As with the full circuits, in this encoder-decoder these are products of the model's
# matrices, checked here for their notation, and not paths of the model as they stand.
# The source embedding reaches the logits only through the decoder's cross-attention,
# so $W_E W_U$ with this $W_E$ is no path; the model's direct path starts at the
# decoder's target embedding (`tgt_embed[0].lut`) and passes the decoder's final
# LayerNorm. Between the two encoder layers stands layer 1's LayerNorm, so a
# composition or a virtual head is a term of the model only with that LayerNorm's
# division frozen and its centring and gain put between the factors.

# %%
lin0 = enc.layers[0].self_attn.linears
slices = [slice(a * d_head, (a + 1) * d_head) for a in range(n_heads)]
ov_A_tl = tl_model.OV[0].AB                               # [head, d, d], rows
ov_A_paper = torch.stack([lin0[3].weight[:, sl] @ lin0[2].weight[sl]
                          for sl in slices])              # W_O W_V, columns
qk_B, ov_B = qk_tl, ov_tl[head]                           # reader: head 1.2
rows_form = {"Q": ov_A_tl @ qk_B, "K": ov_A_tl @ qk_B.T, "V": ov_A_tl @ ov_B}
cols_form = {"Q": qk_paper.T @ ov_A_paper, "K": qk_paper @ ov_A_paper,
             "V": ov_paper @ ov_A_paper}
# each side: the writer's W_OV (d_head), the reader's matrix (d_head) and their
# product (d_model), twice; scale: the same chain of absolute values
WV0, WO0 = tl_model.W_V[0].abs(), tl_model.W_O[0].abs()
reader_abs = {"Q": WQ.abs() @ WK.abs().T, "K": WK.abs() @ WQ.abs().T,
              "V": WV.abs() @ WO.abs()}
comp_asym_units = []
for kind in "QKV":
    chain = (WV0 @ WO0 @ reader_abs[kind]).max().item()
    # were these matrices symmetric, "transposed" would check nothing: the
    # weakest of the four writers' asymmetries, in units of the bound
    comp_asym_units.append(
        ((rows_form[kind] - rows_form[kind].mT).abs().amax((-2, -1)).min()
         / rounding_bound(2 * (2 * d_head + d_model), chain)).item())
    identity_close(f"{kind}-composition matrix: Elhage's column form is the "
                   "transpose of TransformerLens's row form, factors reversed "
                   "(all 4 writers)",
                   cols_form[kind], rows_form[kind].mT,
                   terms=2 * (2 * d_head + d_model), scale=chain,
                   chapter="20")

# the scores: Frobenius norms of the column forms against TransformerLens's
N_fro = d_model ** 2
fro = torch.linalg.matrix_norm
col_B = {"Q": qk_paper.T, "K": qk_paper, "V": ov_paper}
tl_scores = {}
for kind in "QKV":
    col_score = fro(cols_form[kind]) / (fro(ov_A_paper) * fro(col_B[kind]))
    tl_score = tl_model.all_composition_scores(kind)[0, :, layer_i, head]
    tl_score = tl_score.detach()
    tl_scores[kind] = tl_score
    # as in chapter 18: the chain (2 d_head + d_model), three Frobenius norms
    # of N squares each (3 (N + 2)), and TransformerLens's singular values
    # (another N), compared as (ours - theirs) x theirs, relative to the
    # squared score
    identity_close(f"{kind}-composition scores from Elhage's column formula "
                   f"equal TransformerLens's all_composition_scores('{kind}') "
                   f"into head {layer_i}.{head}", col_score * tl_score,
                   tl_score ** 2,
                   terms=(2 * d_head + d_model + 3 * (N_fro + 2)) + N_fro,
                   scale=1.0, chapter="20")
observation(f"Q-, K- and V-composition matrices (rows form) into head "
            f"{layer_i}.{head}: the smallest over the writers of max "
            "|M - Mᵀ|, in units of the comparison's rounding bound",
            ", ".join(f"{u:.0f}" for u in comp_asym_units), chapter="20")
swap_gap = (tl_scores["K"] - tl_scores["Q"]).abs().max().item()
glue("swap_gap", swap_gap)
# the other mistake: the columns' Q form copied verbatim with the rows'
# matrices, W_QK^T W_OV^A, scored the same way, against both scores
miscopied = fro(qk_B.T @ ov_A_tl) / (fro(ov_A_tl) * fro(qk_B))
mis_gap = {kind: (miscopied - tl_scores[kind]).abs().max().item()
           for kind in "QK"}
observation("for these heads, the largest difference between the score of "
            "the column Q form copied verbatim into rows and the Q-, resp. "
            "K-composition score", f"{mis_gap['Q']:.3f}, {mis_gap['K']:.3f}",
            chapter="20")
glue("mis_gap_q", mis_gap["Q"])
glue("mis_gap_k", mis_gap["K"])
# were the Q and K scores equal here, a swap of the two formulas would go
# unnoticed
observation("for these heads, the largest difference between the Q- and "
            "K-composition scores", f"{swap_gap:.3f}", chapter="20")

# the virtual head: layer-0 head a, then head 1.2, on sentence 0's real
# patterns
ln0 = tl_model.blocks[0].ln1
xn0 = cache["blocks.0.ln1.hook_normalized"][0] * ln0.w + ln0.b
A_A, A_B = cache["pattern", 0][0], cache["pattern", layer_i][0, head]
virtual_rows = (A_B @ A_A) @ xn0 @ ov_A_tl @ ov_B    # [head a, pos, d_model]
virtual_cols = ((ov_paper @ ov_A_paper) @ ((A_B @ A_A) @ xn0).mT).mT
# two patterns (n_pos each), x (n_pos), then W_OV^A (d_head) and W_OV^B
# (d_model, then d_head): 3 n_pos + 2 d_head + 2 d_model, twice; scale: the
# same chain in |.|
virt_scale = ((A_B @ A_A) @ xn0.abs() @ WV0 @ WO0 @ WV.abs()
              @ WO.abs()).max().item()
identity_close("virtual head a -> 1.2: the row form (pattern, stream, then "
               "the OV circuits earlier first) equals Elhage's column form "
               "(OV circuits later first), transposed",
               virtual_cols, virtual_rows,
               terms=2 * (3 * n_pos + 2 * d_head + 2 * d_model),
               scale=virt_scale, chapter="20")

# the direct path and the positional circuit
direct_tl = tl_model.W_E @ tl_model.W_U              # [d_vocab, d_vocab_out]
direct_paper = W_U_paper @ W_E_paper     # Elhage: W_U W_E (proj, lut)
direct_scale = (E_abs @ tl_model.W_U.abs()).max().item()
identity_close("direct path: Elhage's W_U W_E is the transpose of "
               "TransformerLens's W_E W_U", direct_paper, direct_tl.T,
               terms=2 * d_model,
               scale=direct_scale, chapter="20")
W_pos = tl_model.W_pos                                   # [n_ctx, d_model]
pos_tl = W_pos @ qk_B @ W_pos.T
# Elhage's side: the Annotated Transformer's fixed sinusoid, as columns
W_pos_paper = at_model.src_embed[1].pe[0, :W_pos.shape[0]].T  # [d, n_ctx]
pos_paper = W_pos_paper.T @ qk_paper @ W_pos_paper       # W_pos^T W_QK W_pos
pos_scale = (W_pos.abs() @ WQ.abs() @ WK.abs().T @ W_pos.abs().T).max().item()
pos_terms = 2 * (2 * d_model + d_head)
identity_close("positional circuit: Elhage's W_posᵀ W_QK W_pos is the same "
               "table as TransformerLens's W_pos W_QK W_posᵀ (not "
               "transposed)", pos_paper, pos_tl, terms=pos_terms,
               scale=pos_scale, chapter="20")
asym = (pos_tl - pos_tl.T).abs().max().item()
# the direct path is compared "transposed"; the vocabularies have the same
# size, so only its asymmetry makes that comparison bite
direct_asym = (direct_tl - direct_tl.T).abs().max().item()
observation("the direct-path table W_E W_U: max |M - Mᵀ|, in units of the "
            "comparison's rounding bound",
            f"{direct_asym / rounding_bound(2 * d_model, direct_scale):.0f}",
            chapter="20")
# were the table symmetric, "same, not transposed" would check nothing
observation(f"head {layer_i}.{head}'s positional table: max |P - Pᵀ|, in "
            "units of the comparison's rounding bound",
            f"{asym / rounding_bound(pos_terms, pos_scale):.0f}",
            chapter="20")
glue("qk_asym_units", qk_asym / rounding_bound(2 * d_head, qk_scale))
glue("ov_asym_units", ov_asym / rounding_bound(full_terms, ov_chain))
glue("pos_asym_units", asym / rounding_bound(pos_terms, pos_scale))
glue("full_qk_asym_units", full_qk_asym / rounding_bound(full_terms, qk_chain))
glue("direct_asym_units", direct_asym / rounding_bound(2 * d_model, direct_scale))
glue("ov_head_asym_units", ov_head_asym_units)
glue("comp_asym_min_units", min(comp_asym_units))

# %% [markdown]
# Every row holds to rounding. The checks have teeth: for these heads the Q- and
# K-composition scores differ by up to {glue:text}`swap_gap:.2f`, so a formula whose Q
# and K have swapped places gives visibly different scores; and the columns' Q form
# copied verbatim into rows scores up to {glue:text}`mis_gap_q:.2f` away from the Q score
# and {glue:text}`mis_gap_k:.2f` from the K score. Every matrix compared "the same" or
# "transposed" is far from symmetric. The largest asymmetries of $W_{QK}$ and $W_{OV}$ of
# head 1.2 are {glue:text}`qk_asym_units:.1e` and {glue:text}`ov_head_asym_units:.1e`
# times the rounding bounds of their comparisons; those of the full QK and OV tables,
# the direct path and the positional table are {glue:text}`full_qk_asym_units:.0f`,
# {glue:text}`ov_asym_units:.0f`, {glue:text}`direct_asym_units:.0f` and
# {glue:text}`pos_asym_units:.0f` times theirs. Of the composition matrices (each kind,
# each writer head of layer 0; the V-composition matrix is also the virtual head's OV
# matrix) the least asymmetric is {glue:text}`comp_asym_min_units:.0f` times its bound. So a transpose put in or left
# out would show. And since
# Elhage et al.'s side is built from the Annotated Transformer's modules, not from
# TransformerLens's tensors, a wrong mapping in any of these rows would fail its check.
#
# ### Exploring the table
#
# Pick a quantity, a layer and a head. The left panel is the quantity computed from the
# Annotated Transformer's modules, the middle one from the TransformerLens model, and the
# right one their difference. Everything agrees to rounding except one entry, "LayerNorm,
# gain copied": the two libraries' LayerNorm outputs with `a_2` copied into the gain as
# it is. The entry after it, with the gain corrected by `ln_fix`, agrees again.

# %%
at_blocks = enc.layers


def pair(name, layer, h):
    """(Annotated value, TransformerLens value, heading) for one table row."""
    lin = at_blocks[layer].self_attn.linears
    hs = slice(h * d_head, (h + 1) * d_head)
    blk = tl_model.blocks[layer]
    if name == "W_Q per head":
        return lin[0].weight[hs].T, tl_model.W_Q[layer, h], \
            "linears[0].weight[hs].T  vs  W_Q[l, h]"
    if name == "W_O per head":
        return lin[3].weight[:, hs].T, tl_model.W_O[layer, h], \
            "linears[3].weight[:, hs].T  vs  W_O[l, h]"
    if name == "W_QK":
        return lin[0].weight[hs].T @ lin[1].weight[hs], \
            tl_model.QK[layer, h].AB, "Wq[hs].T @ Wk[hs]  vs  model.QK"
    if name == "W_OV":
        return lin[2].weight[hs].T @ lin[3].weight[:, hs].T, \
            tl_model.OV[layer, h].AB, "Wv[hs].T @ Wo[:, hs].T  vs  model.OV"
    if name == "attention pattern":
        return at_pattern[layer][0, h], cache["pattern", layer][0, h], \
            "mha.attn  vs  hook_pattern (sentence 0)"
    if name == "FFN W_in":
        return at_blocks[layer].feed_forward.w_1.weight.T, \
            tl_model.W_in[layer], "ff.w_1.weight.T  vs  W_in[l]"
    if name == "token embedding":
        return lut, tl_model.W_E, "lut.weight * sqrt(d_model)  vs  W_E"
    ln_at = at_blocks[layer].sublayer[0].norm
    x = stream_in[layer][0]
    if name == "LayerNorm, gain copied":
        return ln_at(x), naive.blocks[layer].ln1(x), \
            "Annotated LayerNorm  vs  TL LayerNorm, w = a_2"
    return ln_at(x), blk.ln1(x), \
        "Annotated LayerNorm  vs  TL LayerNorm, w = a_2 * sqrt((d-1)/d)"


QUANTITIES = ["W_QK", "W_OV", "W_Q per head", "W_O per head",
              "attention pattern", "FFN W_in", "token embedding",
              "LayerNorm, gain copied", "LayerNorm, gain corrected"]


def draw_row(quantity="W_OV", layer=1, head=2):
    with torch.no_grad():
        a, b, heading = pair(quantity, layer, head)
    a, b = a.detach(), b.detach()
    diff = (a - b).abs()
    fig, ax = plt.subplots(1, 3, figsize=(9, 3.3))
    lim = a.abs().max().item()
    for k, (mat, title) in enumerate(((a, "Annotated Transformer"),
                                      (b, "TransformerLens"))):
        ax[k].imshow(mat, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
        ax[k].set_title(f"{title}\n{tuple(mat.shape)}", fontsize=9)
    im = ax[2].imshow(diff, cmap="Greys", aspect="auto",
                      vmin=0, vmax=max(diff.max().item(), 1e-6))
    ax[2].set_title(f"|difference|, max {diff.max():.1e}", fontsize=9)
    fig.colorbar(im, ax=ax[2], fraction=0.05)
    for x in ax:
        x.set_xticks([])
        x.set_yticks([])
    fig.suptitle(f"{quantity}, layer {layer}, head {head}:  {heading}",
                 fontsize=9)
    fig.tight_layout()
    plt.show()


explore(draw_row, quantity=QUANTITIES, layer=(0, 1, 1), head=(0, 3, 1))

# %% [markdown]
# ## Summary
#
# - Four vocabularies, two conventions. Vaswani et al. and TransformerLens multiply row
#   vectors on the right; Elhage et al. multiply column vectors on the left; PyTorch's
#   `nn.Linear` stores `[out, in]`, so a slice of an Annotated Transformer weight is
#   Elhage et al.'s matrix for one head and its transpose is TransformerLens's.
# - Converting heads is slicing: $W_Q, W_K, W_V$ heads are blocks of *columns* of
#   `weight.T`, $W_O$ heads are blocks of its *rows*. We loaded the trained toy
#   translation encoder into a `HookedTransformer` and reproduced its embeddings,
#   attention patterns, residual stream, feed-forward outputs and final output to
#   rounding.
# - $W_{QK}$ is the same matrix in both conventions; $W_{OV}$ is transposed
#   ($W_{OV}^\text{Elhage} = (W_{OV}^\text{TL})^\top$), and so is the full OV table.
#   Biases add three terms to the attention score that the framework leaves out. Two of
#   them, $x_i W_Q b_K^\top$ and $b_Q b_K^\top$, are constant along a query's row and
#   cancel in the softmax; only $b_Q W_K^\top x_j^\top$, which depends on the key,
#   changes the pattern. In head 1.2 on one sentence it is
#   {glue:text}`key_share:.1f`% of the score's size and moves an attention weight by up to
#   {glue:text}`key_shift:.3f`.
# - In the encoder-decoder, the full-circuit and direct-path tables are products of its
#   matrices, not paths: an encoder head reaches the logits only through cross-attention,
#   and LayerNorms stand between the factors. Here they check notation; the full QK
#   table is not a term even with the divisions frozen: that term has the centring and
#   the gain between the factors ($W_E P G W_{QK} G P W_E^\top$).
# - Chains of matrices follow the same rule: in the other convention the factors come in
#   reverse order, and whatever was transposed stays transposed. The positional circuit
#   is the same table in both; the direct path, the three composition matrices and a
#   virtual head's OV matrix are transposed. In rows K-composition carries
#   $W_{QK}^\top$; in columns Q-composition does. The composition scores, norms of
#   these matrices, are the same in both conventions.
# - The Annotated Transformer's LayerNorm uses the unbiased standard deviation with
#   $\epsilon$ added to it. Copied naively into a standard LayerNorm, the encoder's output
#   is off by up to {glue:text}`naive_gap:.2f`; folding the factor
#   $\sqrt{(d_\text{model}-1)/d_\text{model}}$ into the gain removes the difference, up
#   to the small, modelled effect of the two epsilons.
# - The paper ties the unembedding to the embedding; the Annotated Transformer's
#   `make_model` (and ours) does not.
