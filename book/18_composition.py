# %% [markdown]
# # 18. Composition scores
#
# Chapter {doc}`16_two_layer` measured composition by cutting channels, which needs
# inputs, a forward pass per cut, and a task to score. Elhage et al.
# {cite}`elhage2021mathematical` proposed a number read off the weights alone: the
# *composition score* of a writer head and a reader head. This chapter defines it,
# explains why it uses the Frobenius norm and why it never exceeds 1, measures what it
# gives for random heads (checking the often-quoted "about 0.036" for GPT-2's width),
# and then uses it to find the previous-token heads that feed the induction heads of
# `toy-2l` and of SmolLM2-135M, a real model with grouped-query attention and RMSNorm.

# %%
import math
import warnings

import matplotlib.pyplot as plt
import torch
from matplotlib.colors import TwoSlopeNorm

from circuitbook import checks
from circuitbook.book import (claim, glue, identity, identity_close,
                              rounding_bound)
from circuitbook.composition import composition_scores, random_baseline
from circuitbook.models import load
from circuitbook.models.pretrained import load_smollm2
from circuitbook.widgets import explore

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)
_ = torch.set_grad_enabled(False)  # we only read models here
torch.set_num_threads(1)  # the build shares 2 cores: 1 thread is fastest

# %% [markdown]
# ## Plain language
#
# A head in an early layer, the *writer* $A$, adds its output to the residual stream
# through its OV circuit $W_{OV}^A$. A head in a later layer, the *reader* $B$, reads
# the stream through some matrix $W_B$: its $W_{QK}$ for queries, $W_{QK}^\top$ for
# keys, its $W_{OV}$ for values (chapter {doc}`16_two_layer`). The stream is wide, and
# each head writes into, and reads from, only a thin slice of it ($d_\text{head}$
# directions). If $A$ writes into directions that $B$ does not read, $B$ cannot use
# $A$'s output, however large it is.
#
# The composition score asks how well the two slices line up. Push random inputs
# through $A$ and then through $B$, and compare how much gets through the pair with how
# much each passes on its own:
#
# $$\text{score}(A \to B) = \frac{\lVert W_{OV}^A W_B \rVert_F}
# {\lVert W_{OV}^A \rVert_F\, \lVert W_B \rVert_F}.$$
#
# It ignores the size of the weights (scale either matrix and the score is unchanged),
# it lies between 0 and 1, and it is 0 when $B$ reads nothing of what $A$ writes. It is
# not 0 for two heads that have nothing to do with each other: two random slices of a
# $d_\text{model}$-dimensional space overlap a little, by about
# $1/\sqrt{d_\text{model}}$. A score means something only against that baseline.

# %% [markdown]
# ## The Annotated Transformer view
#
# The definition is three matrix norms. We compute K-composition for every pair of
# heads of `toy-2l` (writers in layer 0, readers in layer 1) by brute force, forming
# each $d_\text{model} \times d_\text{model}$ matrix, and compare with the library's
# `composition_scores` and with TransformerLens's own `all_composition_scores`.

# %%
model = load("toy-2l")
cfg = model.cfg
H = cfg.n_heads
fro = torch.linalg.matrix_norm          # Frobenius by default


def brute_force_k_scores():
    """[writer, reader] K-composition scores, layer 0 into layer 1."""
    out = torch.zeros(H, H)
    for w in range(H):
        W_A = model.W_V[0, w] @ model.W_O[0, w]             # W_OV, writer
        for r in range(H):
            W_B = model.W_K[1, r] @ model.W_Q[1, r].T       # W_QK^T, keys
            out[w, r] = fro(W_A @ W_B) / (fro(W_A) * fro(W_B))
    return out


brute = brute_force_k_scores()
ours = composition_scores(model, "K")[0, :, 1, :]
theirs = model.all_composition_scores("K")[0, :, 1, :]
# Brute force: the two factors (d_head each), their product (d_model) and three
# Frobenius norms (sums of N = d_model^2 squares, a square root, a division): a relative
# error of that many roundings. circuitbook sums N products of Gram matrices (each
# d_model + 2 d_head) that can cancel, so relative to ||W_A W_B||^2 its error is at most
# terms eps ||W_A||^2 ||W_B||^2 / ||W_A W_B||^2, and the score's terms eps / (2 score).
# TransformerLens takes singular values, backward stable to p(n) eps ||M||_2 with p a
# modest polynomial, for which we count another N. The bound is per entry and grows as
# the score shrinks, so we compare (brute - library) x library, kept below terms eps.
d_m, d_h = cfg.d_model, cfg.d_head
N = d_m ** 2
score_terms = (2 * d_h + d_m + 3 * (N + 2)) + (2 * (d_m + 2 * d_h) + N + 2)
identity_close("brute-force K-composition = circuitbook's (toy-2l; compared as "
               "(brute - library) x library)", brute * ours, ours ** 2,
               terms=score_terms, scale=1.0, chapter="18")
identity_close("brute-force K-composition = TransformerLens's all_composition_scores "
               "(toy-2l; same comparison)", brute * theirs, theirs ** 2,
               terms=score_terms + N, scale=1.0, chapter="18")

# %% [markdown]
# ### Which product is K-composition? A correction to the syllabus
#
# The syllabus this book follows (its section 16.1) calls $W_{OV}^A W_{QK}^B$ the
# "K-composition circuit", and says that Q-composition uses "the same matrix". In the
# row-vector convention both statements are wrong, and the reason is one line of
# algebra. Head $B$'s score for query position $i$ and key position $j$ is
# $x_i W_{QK}^B x_j^\top$. If $A$'s output $x W_{OV}^A$ is added to the **query** side,
# the part that involves $A$ is $(x_i W_{OV}^A)\, W_{QK}^B\, x_j^\top$: the matrix
# $W_{OV}^A W_{QK}^B$, which is **Q-composition**. If it is added to the **key** side,
# it is $x_i\, W_{QK}^B\, (x_j W_{OV}^A)^\top = x_i\, W_{QK}^B (W_{OV}^A)^\top x_j^\top$,
# and read from the writer's side that is $W_{OV}^A (W_{QK}^B)^\top$: **K-composition**
# uses the transpose, and the two are different matrices. (In the paper's column-vector
# convention the transposes move, which is one way such a slip happens; chapter
# {doc}`20_rosetta` lists the conventions side by side.) We compute the syllabus's
# product for every pair of `toy-2l` heads and compare it with both of TransformerLens's
# scores.

# %%
def brute_force_scores(reader_matrix):
    """[writer, reader] scores of W_OV^A reader_matrix(B), layer 0 into 1."""
    out = torch.zeros(H, H)
    for w in range(H):
        W_A = model.W_V[0, w] @ model.W_O[0, w]
        for r in range(H):
            W_B = reader_matrix(r)
            out[w, r] = fro(W_A @ W_B) / (fro(W_A) * fro(W_B))
    return out


# the syllabus's "K-composition circuit": W_OV^A W_QK^B, no transpose
syllabus = brute_force_scores(lambda r: model.W_Q[1, r] @ model.W_K[1, r].T)
tl_q = model.all_composition_scores("Q")[0, :, 1, :]
tl_k = model.all_composition_scores("K")[0, :, 1, :]
identity_close("W_OV^A W_QK^B (the syllabus's 'K-composition') gives "
               "TransformerLens's *Q*-composition scores (toy-2l)",
               syllabus * tl_q, tl_q ** 2, terms=score_terms + N, scale=1.0,
               chapter="18")
gap_qk = (syllabus - tl_k).abs().max().item()
glue("syllabus_gap", gap_qk)
glue("syllabus_prev", syllabus[2].max().item())
glue("k_prev", tl_k[2].min().item())
# a finding: on these weights the two products give visibly different numbers
claim("...and not its K-composition scores: they differ by more than 0.05, and "
      "for writer L0H2 every K score exceeds every score of the syllabus's product",
      f"largest difference {gap_qk:.3f}; L0H2: {syllabus[2].max():.3f} < "
      f"{tl_k[2].min():.3f}", gap_qk > 0.05 and syllabus[2].max() < tl_k[2].min(),
      chapter="18")
print("syllabus's product      :", syllabus[2].numpy().round(3),
      "(writer L0H2)")
print("TransformerLens K scores:", tl_k[2].numpy().round(3))

# %% [markdown]
# The syllabus's product reproduces the Q-composition scores to rounding and misses the
# K-composition scores by up to {glue:text}`syllabus_gap:.2f`. On the head that matters,
# the previous-token head L0H2, it would report at most
# {glue:text}`syllabus_prev:.2f` into the layer-1 heads, where the K-composition score
# is at least {glue:text}`k_prev:.2f`: with the wrong matrix, the channel chapter
# {doc}`16_two_layer` found essential would look weaker than it is. The rest of the book
# uses $W_{QK}^\top$ for keys, as TransformerLens does.
#
# Forming $d_\text{model} \times d_\text{model}$ products is wasteful: both matrices
# have rank at most $d_\text{head}$. Write $W_A = V O$ and $W_B = P Q^\top$ with thin factors
# ($V, O^\top, P, Q$ all $d_\text{model} \times d_\text{head}$). Using
# $\lVert M \rVert_F^2 = \operatorname{tr}(M^\top M)$ and moving factors around the
# trace,
#
# $$\lVert V O P Q^\top \rVert_F^2 = \operatorname{tr}\big( (V^\top V)\,(O P)\,(Q^\top Q)\,
# (O P)^\top \big),$$
#
# a product of four $d_\text{head} \times d_\text{head}$ matrices. That is how the
# library computes scores for large models (and how we sample random heads below).

# %%
def frob_sq_factored(V, O, P, Q):
    """||V O P Q^T||_F^2 through d_head x d_head matrices (batched)."""
    M = O @ P
    core = (V.mT @ V) @ M @ (Q.mT @ Q) @ M.mT
    return core.diagonal(dim1=-2, dim2=-1).sum(-1)


V, O = model.W_V[0, 2], model.W_O[0, 2]
P, Q = model.W_K[1, 1], model.W_Q[1, 1]
dense = fro(V @ O @ P @ Q.T) ** 2
# Dense: the chain (inner sizes d_head, d_model, d_head) and a sum of N squares. Factored:
# V^T V and O P (d_model each), then four d_head x d_head products and the trace
# (5 d_head). The factored products can cancel, so we bound them normwise (Higham ch. 3:
# ||fl(AB) - AB||_F <= gamma_n ||A||_F ||B||_F, and with spectral norms for the Gram
# factors): both sides are sums of numbers no larger than ||V||_2^2 ||O P||_F^2 ||Q||_2^2.
spec = lambda A: torch.linalg.matrix_norm(A, 2).item()  # noqa: E731
frob_scale = spec(V) ** 2 * fro(O @ P).item() ** 2 * spec(Q) ** 2
identity_close("||V O P Q^T||_F^2 = tr((V^T V)(O P)(Q^T Q)(O P)^T) for L0H2 -> L1H1",
               frob_sq_factored(V, O, P, Q), dense,
               terms=(2 * d_h + d_m + N + 1) + (2 * d_m + 5 * d_h),
               scale=frob_scale, chapter="18")

# %% [markdown]
# ## The circuit view
#
# ### Why the Frobenius norm
#
# The Frobenius norm is the square root of the sum of squared entries. It has a reading
# that explains the choice: for a row vector $g$ of independent standard normal
# entries, $\mathbb{E}\,\lVert g M \rVert^2 = \lVert M \rVert_F^2$. So
# $\lVert M \rVert_F$ is the root-mean-square gain of $M$ over *all* input directions
# at once, not just the best one. The score compares the average gain of the chain
# $W_A W_B$ with the product of the two average gains. (The spectral norm, the gain in
# the single best direction, would answer a different question: is there *any*
# direction that gets through?) And the Frobenius norm is cheap on factors, as we just
# saw. We check the averaging property by sampling.

# %%
g = torch.Generator().manual_seed(0)
M = model.W_V[0, 2] @ model.W_O[0, 2] @ model.W_K[1, 1] @ model.W_Q[1, 1].T
samples = torch.randn(20000, cfg.d_model, generator=g)
mean_gain = (samples @ M).pow(2).sum(-1).mean()
relative = (mean_gain / fro(M) ** 2 - 1).abs()
# sampling, not rounding: ||g M||^2 has variance 2 ||M^T M||_F^2 <= 2 ||M||_F^4, so the
# mean of 20,000 samples has a relative standard deviation of at most sqrt(2 / 20000) =
# 1%; 3% is three standard deviations
claim("E ||g M||^2 = ||M||_F^2 for Gaussian g (20,000 samples, within 3%)",
      f"{relative:.4f}", relative < 0.03, chapter="18")

# %% [markdown]
# **The bound.** The Frobenius norm is submultiplicative:
# $\lVert W_A W_B \rVert_F \le \lVert W_A \rVert_2 \lVert W_B \rVert_F \le
# \lVert W_A \rVert_F \lVert W_B \rVert_F$ (each row of $W_A W_B$ is a row of $W_A$
# times $W_B$, and by Cauchy-Schwarz no vector is stretched by more than the spectral
# norm, which is at most the Frobenius norm). So every score is at most 1. When is it
# 1? Only when both matrices have rank 1 and $A$'s single output direction is exactly
# $B$'s single input direction. If each head passes $r$ directions with equal weight
# and the two sets coincide, the score is only $1/\sqrt{r}$: for $d_\text{head} = 16$, a
# *perfect* hand-off of all 16 directions scores 0.25. We check the bound on random and
# on deliberately aligned pairs, and the two special cases.

# %%
def score(W_A, W_B):
    return (fro(W_A @ W_B) / (fro(W_A) * fro(W_B))).item()


d, r, n_pairs = 64, 16, 300
W_A = torch.randn(n_pairs, d, r, generator=g) @ torch.randn(n_pairs, r, d,
                                                            generator=g)
noise = torch.randn(n_pairs, d, d, generator=g)
level = torch.linspace(0, 1, n_pairs)[:, None, None]
W_B = torch.cat([W_A.mT + level * noise,          # from aligned to random
                 torch.randn(n_pairs, d, d, generator=g)])
W_A = torch.cat([W_A, W_A])
all_scores = fro(W_A @ W_B) / (fro(W_A) * fro(W_B))
worst = all_scores.max().item()
u, v, w = torch.randn(3, d, 1, generator=g)
rank_one = score(u @ v.T, v @ w.T)
basis, _ = torch.linalg.qr(torch.randn(d, d, generator=g))
E1, E2, E3 = basis[:, :r], basis[:, r:2 * r], basis[:, 2 * r:3 * r]
flat = score(E1 @ E2.T, E2 @ E3.T)      # 16 directions handed over exactly
# a score is a product (d) and three Frobenius norms (d^2 + 2 each): a relative error of
# that many roundings of a number at most 1. QR's basis is orthonormal to within a
# modest polynomial in d times eps (Householder: backward stable); we count another d^2.
one_score_terms = d + 3 * (d * d + 2)
identity("over 600 random and aligned pairs, no score exceeds 1 (plus its rounding)", worst,
         worst <= 1.0 + rounding_bound(one_score_terms, 1.0), chapter="18")
identity_close("a rank-1 writer feeding exactly a rank-1 reader scores 1", rank_one, 1.0,
               terms=one_score_terms, scale=1.0, chapter="18")
identity_close("a perfect hand-off of 16 equally weighted directions scores "
               "1/sqrt(16) = 0.25", flat, 0.25, terms=one_score_terms + d * d, scale=1.0,
               chapter="18")
glue("worst", worst)

# %% [markdown]
# ### Exercise 18.1: the composition score
#
# Write `composition_score(W_A, W_B)` for two `[d_model, d_model]` matrices, `W_A` the
# writer's (it acts first on a row vector) and `W_B` the reader's. Return a float.

# %% tags=["exercise"]
def composition_score(W_A, W_B):
    """W_A, W_B: [d_model, d_model], writer then reader -> the composition
    score defined above, a float."""
    # BEGIN SOLUTION
    norm = torch.linalg.matrix_norm           # Frobenius by default
    return float(norm(W_A @ W_B) / (norm(W_A) * norm(W_B)))
    # END SOLUTION


checks.ch18_ex1(composition_score)

# %% [markdown]
# ### The random baseline
#
# Take two heads with independent random weights. Because their orientations are
# uniformly random, averaging over rotations gives
# $\mathbb{E}\, \operatorname{tr}(G_A G_B) = \operatorname{tr} G_A \operatorname{tr} G_B
# / d_\text{model}$ for the Gram matrices $G_A = W_A^\top W_A$ and $G_B = W_B W_B^\top$,
# and since $\lVert W_A W_B \rVert_F^2 = \operatorname{tr}(G_A G_B)$, the *squared*
# score has mean exactly $1/d_\text{model}$, whatever $d_\text{head}$. The mean score is
# then at most $1/\sqrt{d_\text{model}}$ (the mean of a square root is at most the root
# of the mean), and close to it when each head spreads over many directions.
#
# A frequently repeated figure is that random heads of GPT-2 small's width,
# $d_\text{model} = 768$ with $d_\text{head} = 64$, score "about 0.036". We check it, and
# see where it fails: heads with very few directions.


# %%
def random_scores(d_model, d_head, n=200, seed=0, chunk=50):
    """K-composition scores of n pairs of independent Gaussian heads."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(0, n, chunk):
        V, P, Q = torch.randn(3, chunk, d_model, d_head, generator=g)
        O = torch.randn(chunk, d_head, d_model, generator=g)
        num = frob_sq_factored(V, O, P, Q)                  # ||V O P Q^T||
        norm_a = ((V.mT @ V) * (O @ O.mT)).sum((-2, -1))    # ||V O||_F^2
        norm_b = ((P.mT @ P) * (Q.mT @ Q)).sum((-2, -1))    # ||P Q^T||_F^2
        out.append((num / (norm_a * norm_b)).sqrt())
    return torch.cat(out)


widths = [64, 128, 256, 512, 768, 1024]
sampled = {d: random_scores(d, 64, n=100) for d in widths}
mean_64 = [sampled[d].mean().item() for d in widths]
sq_ratio = [sampled[d].pow(2).mean().item() * d for d in widths]
mean_1 = [random_scores(d, 1, n=2000).mean().item() for d in widths]
library_768 = random_baseline(768, 64, n_samples=64)
print(f"d_model 768, d_head 64: library {library_768:.5f}, "
      f"our sampler {mean_64[4]:.5f}")
print(f"1/sqrt(768) = {1 / math.sqrt(768):.5f}")

fig, ax = plt.subplots(figsize=(7, 3.2))
grid = torch.linspace(60, 1100, 100)
ax.plot(grid, 1 / grid.sqrt(), color="gray", label="1 / sqrt(d_model)")
ax.plot(grid, (2 / (math.pi * grid)).sqrt(), color="gray", ls=":",
        label="sqrt(2 / pi) / sqrt(d_model)")
ax.plot(widths, mean_64, "o", color="tab:blue",
        label="measured, d_head = 64")
ax.plot(widths, mean_1, "s", color="tab:orange",
        label="measured, d_head = 1")
ax.plot([768], [0.036], "x", color="black", ms=10, label='"about 0.036"')
ax.set(xscale="log", yscale="log", xlabel="d_model",
       ylabel="mean score of random heads")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %%
claim("E[score^2] = 1/d_model for random heads (100 pairs per width, "
      "within 5%)", " ".join(f"{x:.3f}" for x in sq_ratio),
      all(abs(x - 1) < 0.05 for x in sq_ratio), chapter="18")
# the quoted figure has three decimals, so it stands for anything within 0.0005 of 0.036
claim("d_model 768, d_head 64: the random baseline is 0.036, as quoted",
      f"{library_768:.5f}", abs(library_768 - 0.036) < 0.0005, chapter="18")
claim("with d_head = 64 the mean is within 2% of 1/sqrt(d_model) at every "
      "width tried", " ".join(f"{m * math.sqrt(d):.3f}"
                              for m, d in zip(mean_64, widths)),
      all(abs(m * math.sqrt(d) - 1) < 0.02
          for m, d in zip(mean_64, widths)),
      chapter="18")
rank1 = [m * math.sqrt(d) for m, d in zip(mean_1, widths)]
# sampling: 2000 pairs give each mean a relative standard deviation of about 1.3%, so
# 0.03 is about three standard deviations
claim("with d_head = 1 it is about sqrt(2/pi) = 0.80 times 1/sqrt(d_model)",
      f"{min(rank1):.3f}..{max(rank1):.3f}",
      all(abs(x - math.sqrt(2 / math.pi)) < 0.03 for x in rank1),
      chapter="18")
glue("library_768", library_768)
glue("inv_sqrt_768", 1 / math.sqrt(768))
glue("rank1_ratio", sum(rank1) / len(rank1))

# %% [markdown]
# The quoted figure is right: random heads of GPT-2 small's shape have a mean
# K-composition score of {glue:text}`library_768:.4f`, and $1/\sqrt{768} =$
# {glue:text}`inv_sqrt_768:.4f`. What $1/\sqrt{d_\text{model}}$ is, exactly, is the
# *root-mean-square* score of random heads, for any head width. The mean score is a
# hair below it when heads spread over many directions, and clearly below it when they
# do not: for heads of a single direction ($d_\text{head} = 1$) the score is the
# absolute cosine between two random directions, whose mean is
# $\sqrt{2/\pi}/\sqrt{d_\text{model}}$ (we measured {glue:text}`rank1_ratio:.2f` times
# $1/\sqrt{d_\text{model}}$). So "$1/\sqrt{d_\text{model}}$" is a good baseline for real
# heads, with the width of the heads as a footnote. The explorer shows the whole
# distribution of 200 random pairs. It starts at heads of a single direction in a
# 256-dimensional stream, where the scores (absolute cosines) are spread out and their
# mean sits well below $1/\sqrt{d_\text{model}}$; widen the heads and the distribution
# narrows onto that line.

# %%
def draw_baseline(d_model=256, d_head=1):
    scores = random_scores(d_model, d_head, n=200)
    fig, ax = plt.subplots(figsize=(7, 2.8))
    ax.hist(scores, bins=30, color="tab:blue", alpha=0.7)
    right = max(3 / math.sqrt(d_model), 1.05 * scores.max().item())
    ax.axvline(1 / math.sqrt(d_model), color="black", ls="--",
               label=f"1/sqrt(d_model) = {1 / math.sqrt(d_model):.4f}")
    ax.axvline(scores.mean(), color="tab:red",
               label=f"mean of 200 pairs = {scores.mean():.4f}")
    ax.set(xlabel="K-composition score of two random heads", ylabel="pairs",
           xlim=(0, right))
    ax.set_title(f"d_model = {d_model}, d_head = {d_head}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    plt.show()


explore(draw_baseline, d_model=(16, 1024, 16), d_head=(1, 64, 1))

# %% [markdown]
# ### The previous-token head of `toy-2l` stands out
#
# `toy-2l` has $d_\text{model} = 64$ and $d_\text{head} = 16$, so its baseline is about
# $1/8$. Below, each layer-0 head (rows) against each layer-1 head (columns), for the
# three kinds of composition, as a multiple of the baseline.

# %%
base_toy = random_baseline(cfg.d_model, cfg.d_head)
comp = {k: composition_scores(model, k)[0, :, 1, :] for k in "QKV"}
fig, axes = plt.subplots(1, 3, figsize=(9, 3))
for ax, kind in zip(axes, "QKV"):
    rel = comp[kind] / base_toy
    ax.imshow(rel, cmap="RdBu_r", norm=TwoSlopeNorm(1, 0, 2.5))
    for w in range(H):
        for r in range(H):
            ax.text(r, w, f"{rel[w, r]:.1f}", ha="center", va="center",
                    fontsize=8)
    ax.set(xticks=range(H), yticks=range(H), xlabel="reader: layer-1 head",
           title=f"{kind}-composition / baseline")
    ax.title.set_fontsize(9)
axes[0].set_ylabel("writer: layer-0 head")
fig.tight_layout()
plt.show()

# %%
all_48 = torch.cat([comp[k].flatten() for k in "QKV"])
top4 = set(all_48.topk(4).indices.tolist())
k_prev = comp["K"][2]                 # L0H2 into the four layer-1 heads
claim("for every layer-1 head, the strongest K-composition writer is L0H2",
      comp["K"].argmax(0).tolist(), bool((comp["K"].argmax(0) == 2).all()),
      chapter="18")
claim("L0H2's four K-scores are the four largest of all 48 layer-0 -> "
      "layer-1 scores (Q, K and V)",
      f"{k_prev.min():.3f}..{k_prev.max():.3f}",
      top4 == {4 * H + 2 * H + r for r in range(H)}, chapter="18")
# 1.5x: half as much again as random heads average, a margin no rounding can touch
# (the measured 2.0x had been held to 1.8x, a threshold just under the measurement)
claim("they are at least 1.5 times the random baseline",
      f"{k_prev.min() / base_toy:.2f}x", k_prev.min() > 1.5 * base_toy,
      chapter="18")
claim("L0H2's V-composition scores are below half the baseline",
      f"{comp['V'][2].max() / base_toy:.2f}x",
      comp["V"][2].max() < 0.5 * base_toy, chapter="18")
hand_off = 1 / math.sqrt(cfg.d_head)   # a perfect hand-off of d_head directions
claim("they are at least as large as a perfect hand-off of d_head equally "
      "weighted directions, 1/sqrt(d_head)",
      f"{k_prev.min():.3f} >= {hand_off:.3f}", k_prev.min() >= hand_off,
      chapter="18")
glue("base_toy", base_toy)
glue("k_ratio_lo", (k_prev.min() / base_toy).item())
glue("k_ratio_hi", (k_prev.max() / base_toy).item())
glue("k_prev_min", k_prev.min().item())
glue("k_prev_max", k_prev.max().item())
glue("v_prev_max", comp["V"][2].max().item())

# %% [markdown]
# The previous-token head L0H2 is the strongest key-side writer for every layer-1 head,
# with scores from {glue:text}`k_prev_min:.2f` to {glue:text}`k_prev_max:.2f` against a
# baseline of {glue:text}`base_toy:.3f`. These are as large as a perfect hand-off of 16
# equally weighted directions (0.25), which a real pair can exceed because its
# directions are not equally weighted. Its V-composition, at most
# {glue:text}`v_prev_max:.3f`, is far *below* the baseline: the layer-1 heads' values
# avoid what L0H2 writes, which fits chapter {doc}`16_two_layer`'s finding that the
# virtual heads L0H2 $\to$ layer 1 would only copy the wrong token. A score below the
# baseline is information too.
#
# ### Exercise 18.2: the K-composition matrices
#
# Write `k_composition_matrices(W_V, W_O, W_Q, W_K)` for a writer head (`W_V`
# `[d_model, d_head]`, `W_O` `[d_head, d_model]`) and a reader head (`W_Q`, `W_K`
# `[d_model, d_head]`). Return the pair `(W_A, W_B)` whose composition score measures
# K-composition, in the book's row-vector convention.

# %% tags=["exercise"]
def k_composition_matrices(W_V, W_O, W_Q, W_K):
    """(W_A, W_B), both [d_model, d_model], for K-composition."""
    # BEGIN SOLUTION
    W_OV = W_V @ W_O                 # what the writer puts in the stream
    W_QK_T = W_K @ W_Q.T             # how the reader's keys read the stream
    return W_OV, W_QK_T
    # END SOLUTION


checks.ch18_ex2(k_composition_matrices)

# %%
pair = k_composition_matrices(model.W_V[0, 2], model.W_O[0, 2],
                              model.W_Q[1, 1], model.W_K[1, 1])
yours = composition_score(*pair)
# the brute-force computation against the library's, as in the first check of the chapter
lib_21 = comp["K"][2, 1]
identity_close("your two functions give the library's K-composition score for "
               "L0H2 -> L1H1 (compared as (yours - library) x library)",
               torch.tensor(yours) * lib_21, lib_21 ** 2, terms=score_terms, scale=1.0,
               chapter="18")

# %% [markdown]
# ### A real model: SmolLM2-135M
#
# Chapter {doc}`17_induction_heads` found induction heads in SmolLM2-135M in layers 17
# to 23. Which earlier heads do they read through their keys? Two features of this
# model need care before the scores mean anything.
#
# **Grouped-query attention.** Each layer has 9 query heads but only 3 key heads and 3
# value heads; query heads 0-2 share the first key/value head, 3-5 the second, 6-8 the
# third. TransformerLens exposes `W_K` and `W_V` expanded to 9 heads, each shared
# matrix repeated three times, and `composition_scores` works on the expanded weights.
# So three reader heads of a group have the same keys but different queries, and their
# K-composition scores differ only through $W_Q$.
#
# **RMSNorm.** Before a layer reads the stream, it divides by the vector's root mean
# square and multiplies coordinate $i$ by a learned gain $w_i$ (chapter
# {doc}`11_layernorm`). The division is one number per position and changes no
# direction, but the gains do: the matrices a head really reads through are
# $\operatorname{diag}(w) W_Q$, $\operatorname{diag}(w) W_K$, $\operatorname{diag}(w)
# W_V$. The loader keeps the gains separate, so we fold them into the weights (in place;
# the model computes the same function) before scoring.

# %%
smol, tokenizer = load_smollm2()
S_L, S_H = smol.cfg.n_layers, smol.cfg.n_heads
group = S_H // smol.cfg.n_key_value_heads
W_K, W_V = smol.W_K, smol.W_V        # [layer, 9 heads, d_model, d_head]
leader = [group * (h // group) for h in range(S_H)]   # 0,0,0,3,3,3,6,6,6
shared = (torch.equal(W_K, W_K[:, leader])
          and torch.equal(W_V, W_V[:, leader]))
distinct = all(not torch.equal(W_K[l, 0], W_K[l, group])
               for l in range(S_L))
del W_K, W_V
claim("SmolLM2: 9 query heads per layer share 3 key/value heads, "
      "each repeated 3 times in W_K and W_V", f"groups of {group}",
      shared and distinct, chapter="18")

K_raw = composition_scores(smol, "K")
x = torch.randn(5, smol.cfg.d_model, generator=g)
before_all, after_all, fold_scale = [], [], 0.0
for block in smol.blocks:
    attn, gain = block.attn, block.ln1.w.clone()
    before = [block.ln1(x) @ W for W in (attn.W_Q, attn.W_K, attn.W_V)]
    fold_scale = max([fold_scale] + [(block.ln1(x).abs() @ W.abs()).max().item()
                                     for W in (attn.W_Q, attn.W_K, attn.W_V)])
    attn.W_Q.mul_(gain[:, None])       # [head, d_model, d_head]: scale rows
    attn._W_K.mul_(gain[:, None])      # the 3 shared key heads
    attn._W_V.mul_(gain[:, None])
    block.ln1.w.fill_(1.0)
    after = [block.ln1(x) @ W for W in (attn.W_Q, attn.W_K, attn.W_V)]
    before_all += before
    after_all += after
# each side: RMSNorm (a mean of d_model squares, + eps, sqrt, division: d_model + 3), the
# gain (1, on the input or on the weight) and the product over d_model; scale: the
# largest entry of |RMSNorm(x)| |W|
identity_close("folding the RMSNorm gains into W_Q, W_K, W_V leaves every layer's "
               "queries, keys and values unchanged", torch.stack(after_all).detach(),
               torch.stack(before_all).detach(), terms=2 * (2 * smol.cfg.d_model + 4),
               scale=fold_scale, chapter="18")
K = composition_scores(smol, "K")
fold_shift = (K - K_raw).abs().max().item()
claim("folding the gains moves some K-composition scores by more than 0.01",
      fold_shift, fold_shift > 0.01, chapter="18")

# %% [markdown]
# Now the induction and previous-token scores of every head, from one forward pass on
# two repeated random sequences (as in chapter {doc}`17_induction_heads`), and the
# random baseline for this shape, $d_\text{model} = 576$, $d_\text{head} = 64$.

# %%
half = torch.randint(1000, 40000, (2, 40),
                     generator=torch.Generator().manual_seed(0))
smol_tokens = torch.cat([half, half], dim=1)
_, smol_cache = smol.run_with_cache(
    smol_tokens, names_filter=lambda name: name.endswith("hook_pattern"),
    return_type=None)
patterns = torch.stack([smol_cache["pattern", l] for l in range(S_L)])
del smol_cache
ind = patterns.diagonal(offset=-39, dim1=-2, dim2=-1)[..., 1:].mean((1, 3))
prev = patterns.diagonal(offset=-1, dim1=-2, dim2=-1).mean((1, 3))
del patterns
base_smol = random_baseline(smol.cfg.d_model, smol.cfg.d_head, n_samples=64)
readers = [divmod(int(i), S_H) for i in ind.flatten().topk(5).indices]
print(f"random baseline {base_smol:.4f}")
print("top induction heads:", ", ".join(f"L{l}H{h}" for l, h in readers))
for l, h in readers:
    into = K[:l, :, l, h]                          # earlier writers
    best = into.flatten().topk(2)
    print(f"  into L{l}H{h}: " + ", ".join(
        f"L{i // S_H}H{i % S_H} {v / base_smol:.1f}x "
        f"(prev-token {prev.flatten()[i]:.2f})"
        for v, i in zip(best.values, best.indices.tolist())))

# %%
l0, h0 = readers[0]
rel = K[:l0, :, l0, h0] / base_smol
from IPython.display import display

from circuitbook.viz import heatmap  # hover a cell for its layer, head and value

# white = the random baseline (1) on a scale from 0 to 4.5; boxed: the writers above 3x
heads, layers = [f"H{h}" for h in range(S_H)], [f"L{l}" for l in range(l0)]
boxed = [tuple(c) for c in (rel > 3).nonzero().tolist()]
display(heatmap(rel, heads, layers, title=f"K-composition into L{l0}H{h0} / baseline",
                x_title="writer head", y_title="writer layer", zmin=0, zmax=4.5,
                colorscale=[[0, "#2166ac"], [1 / 4.5, "#f7f7f7"], [1, "#b2182b"]],
                value_format=".2f", outline=boxed))
display(heatmap(prev[:l0], heads, layers, title="previous-token score of the writer",
                x_title="writer head", y_title="writer layer", zmin=0, zmax=1,
                colorscale="Greens", outline=boxed))

# %%
best_writer = {}
for l, h in readers:
    into = K[:l, :, l, h]
    i = int(into.argmax())
    best_writer[l, h] = (divmod(i, S_H), into.max().item() / base_smol,
                         prev[:l].flatten()[i].item(),
                         into.median().item() / base_smol)
# 2.5x: the median earlier head sits within 15% of the baseline and the other
# previous-token heads reach at most 2x (both checked below), so 2.5x is far outside the
# crowd; a previous-token score above 0.25 is far above an ordinary head's (about one
# over the number of positions attended). The thresholds used to be 2.9x and 0.3, just
# under the measured 3.0x and 0.36.
claim("for each of the 5 top induction heads, the strongest K-composition "
      "writer scores at least 2.5x the baseline and has a previous-token "
      "score above 0.25", "; ".join(
          f"L{w[0]}H{w[1]} {r:.1f}x, prev {p:.2f}"
          for w, r, p, _ in best_writer.values()),
      all(r >= 2.5 and p > 0.25 for _, r, p, _ in best_writer.values()),
      chapter="18")
claim("the median earlier head is within 15% of the baseline for each",
      " ".join(f"{m:.2f}" for *_, m in best_writer.values()),
      all(abs(m - 1) < 0.15 for *_, m in best_writer.values()),
      chapter="18")
top_prev = divmod(int(prev.argmax()), S_H)
in_top2 = sum(top_prev[0] < l and K[top_prev[0], top_prev[1], l, h]
              >= K[:l, :, l, h].flatten().topk(2).values[-1]
              for l, h in readers)
claim(f"L{top_prev[0]}H{top_prev[1]}, the strongest previous-token head, "
      "is a top-2 K-writer of at least 4 of the 5", f"{in_top2} of 5",
      in_top2 >= 4, chapter="18")
others = [(l, h) for l, h in (prev[:17] > 0.4).nonzero().tolist()
          if (l, h) != top_prev]
others_max = max(K[l, h, rl, rh].item() / base_smol
                 for l, h in others for rl, rh in readers)
claim("the other previous-token heads before layer 17 (score > 0.4) reach "
      "at most 2x the baseline into any of the 5",
      f"{', '.join(f'L{l}H{h}' for l, h in others)}: {others_max:.2f}x",
      others_max < 2.0, chapter="18")
glue("base_smol", base_smol)
best_ratios = [r for _, r, _, _ in best_writer.values()]
glue("ratio_lo", min(best_ratios))
glue("ratio_hi", max(best_ratios))
glue("top_prev", f"L{top_prev[0]}H{top_prev[1]}")
glue("top_prev_score", prev.max().item())
glue("others", ", ".join(f"L{l}H{h}" for l, h in others))
glue("others_max", others_max)
glue("fold_shift", fold_shift)
assert best_writer[readers[0]][0] != top_prev    # the prose says "another"
for k in (0, 4):
    (rl, rh), ((wl, wh), _, p, _) = readers[k], best_writer[readers[k]]
    glue(f"reader{k}", f"L{rl}H{rh}")
    glue(f"writer{k}", f"L{wl}H{wh}")
    glue(f"writer{k}_prev", p)

# %% [markdown]
# Most earlier heads K-compose with SmolLM2's induction heads at about the random level
# ({glue:text}`base_smol:.3f`). A few stand far out: the strongest writer into each of
# the five top induction heads scores {glue:text}`ratio_lo:.1f` to
# {glue:text}`ratio_hi:.1f` times it, and they are previous-token heads: above all {glue:text}`top_prev`, the model's strongest
# previous-token head (score {glue:text}`top_prev_score:.2f`). The top induction head
# {glue:text}`reader0` reads {glue:text}`writer0` even a little more, a weaker
# previous-token head (score {glue:text}`writer0_prev:.2f`), and the induction head
# {glue:text}`reader4` in a later layer reads a later one, {glue:text}`writer4` (score
# {glue:text}`writer4_prev:.2f`). The weights alone, with no input, recover the circuit
# that chapter {doc}`17_induction_heads` found in the activations. They also show that
# being a previous-token head is not enough: {glue:text}`others`, with clear
# previous-token behaviour, reach at most {glue:text}`others_max:.1f` times the
# baseline; the induction heads do not read them.
#
# Two caveats. Folding the RMSNorm gains mattered: without it some scores move by
# {glue:text}`fold_shift:.2f`. And SmolLM2 uses rotary position embeddings: queries and
# keys are rotated by an angle that depends on their positions before the dot product,
# so the true bilinear form between positions $i$ and $j$ is
# $W_Q R_{j - i} W_K^\top$, not $W_Q W_K^\top$. The score, like TransformerLens's, uses
# the unrotated $W_{QK}$; it describes the pair at relative distance zero. That it still
# picks out the right heads here is an empirical fact about this model, not a theorem.

# %% [markdown]
# ## Summary
#
# - The composition score $\lVert W_{OV}^A W_B \rVert_F / (\lVert W_{OV}^A \rVert_F
#   \lVert W_B \rVert_F)$ measures how much of what head $A$ writes head $B$ reads, with
#   $W_B = W_{QK}^B$, $(W_{QK}^B)^\top$ or $W_{OV}^B$ for Q-, K- or V-composition. The
#   Frobenius norm is the root-mean-square gain over all input directions, and it can be
#   computed through $d_\text{head} \times d_\text{head}$ matrices.
# - The score is at most 1 (submultiplicativity; no sampled pair exceeded
#   {glue:text}`worst:.2f`), reaches 1 only for aligned rank-1 heads, and is
#   $1/\sqrt{r}$ for a perfect hand-off of $r$ equally weighted directions.
# - For random heads the squared score averages exactly $1/d_\text{model}$. The quoted
#   baseline of 0.036 for $d_\text{model} = 768$ is right
#   ({glue:text}`library_768:.4f`); for very thin heads the mean is lower, down to
#   $\sqrt{2/\pi}/\sqrt{d_\text{model}}$ at $d_\text{head} = 1$.
# - In `toy-2l` the previous-token head L0H2 is the top K-writer of every induction head,
#   at {glue:text}`k_ratio_lo:.1f` to {glue:text}`k_ratio_hi:.1f` times the baseline,
#   and its V-composition is far below the baseline.
# - In SmolLM2-135M, after folding the RMSNorm gains and with grouped-query heads
#   expanded, the induction heads' strongest K-writers are previous-token heads at
#   {glue:text}`ratio_lo:.1f` to {glue:text}`ratio_hi:.1f` times the baseline; most
#   other heads sit at the baseline.
