# %% [markdown]
# # 5. Positional encoding
#
# Attention compares every position with every other, but nothing in it knows which position
# is which. This chapter shows that gap, fills it with Vaswani et al.'s sinusoidal encoding,
# and checks the property the paper chose it for: moving $k$ positions is one fixed linear
# map, a rotation, whatever the starting position. Then we turn to the circuit view's
# models, whose positions are a learned table $W_\text{pos}$ that enters only the queries
# and keys (*shortformer* positions), and read a previous-token head straight off the
# positional part of its QK circuit, $W_\text{pos} W_{QK} W_\text{pos}^\top$.

# %%
import contextlib
import io
import math
import warnings

import matplotlib.pyplot as plt
import torch

from circuitbook import checks
from circuitbook.book import (claim, glue, identity, identity_close,
                              rounding_bound)
from circuitbook.circuits import pos_qk_circuit
from circuitbook.heads import prev_token_scores
from circuitbook.models import attn_only, load
from circuitbook.models.encoder_decoder import (
    MultiHeadedAttention,
    PositionalEncoding,
    sinusoidal_table,
)
from circuitbook.models.zoo import metrics
from circuitbook.widgets import explore

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)

# %% [markdown]
# ## Plain language
#
# Self-attention treats its input as a bag. Each position's output is a weighted average of
# values, with weights computed from query-key dot products; shuffle the input positions and
# every output is shuffled the same way, unchanged otherwise. "Dog bites man" and "man bites
# dog" would look alike. (A causal mask, which lets each position see only the ones before
# it, breaks the symmetry in part; the paper's encoder has no such mask.)
#
# The fix is to give every position a vector of its own and mix it into what attention
# reads. There are two ways to get the vectors. Vaswani et al. {cite}`vaswani2017attention`
# compute them from a formula: a set of sines and cosines, one pair per frequency. Think of
# $d_\text{model}/2$ clock hands, each turning at its own speed as the position advances. The
# fast hands tell neighbours apart, the slow ones tell distant stretches apart, and moving
# $k$ steps forward turns every hand by an angle that depends on $k$ and on its speed, never
# on where it started. That last fact makes "$k$ positions later" a single linear map.
# The other way is to *learn* a table $W_\text{pos}$ with one row per position, as the toy
# models of the circuits framework do.
#
# There is also a choice of *where* the vector goes. Vaswani et al. add it to the token's
# embedding, so it becomes part of the residual stream and every later layer carries it. The
# *shortformer* arrangement of Press et al. {cite}`press2021shortformer` adds it only where
# queries and keys are computed. Then the stream carries token information alone, and
# position can influence the output only through where attention looks. That is the
# arrangement of this book's toy models, and we will see why it makes them easier to read.

# %% [markdown]
# ## The Annotated Transformer view
#
# ### Attention alone cannot see order
#
# First the problem, checked. A multi-head attention layer from the Annotated Transformer
# {cite}`rush2018annotated` (no mask, no dropout) applied to a shuffled sequence gives the
# shuffled output. Adding the positional encoding breaks that.

# %%
d_model, n = 16, 7
mha = MultiHeadedAttention(h=2, d_model=d_model, dropout=0.0).eval()
x = torch.randn(1, n, d_model)
perm = torch.randperm(n)
with torch.no_grad():
    shuffled_out = mha(x[:, perm], x[:, perm], x[:, perm])
    out_shuffled = mha(x, x, x)[:, perm]
# Each side: the Q, K, V projections (d_model + 1), the scores (d_k + 1 with the scale), a
# softmax over the n keys (n + 4), the mix (n) and the output projection (d_model + 1); the
# shuffled run may add keys in another order. At the outputs' size.
d_k = d_model // mha.h
identity_close("without positions, attention(shuffled input) = shuffled attention(input)", shuffled_out, out_shuffled,
               terms=2 * (2 * d_model + d_k + 2 * n + 7), chapter="5")

pe = sinusoidal_table(n, d_model)[None]
with torch.no_grad():
    y = x[:, perm] + pe                       # positions follow the new order
    gap = (mha(y, y, y) - mha(x + pe, x + pe, x + pe)[:, perm]).abs().max()
# 0.05 is ~10^4 times the rounding bound of the same computation above (~1e-5)
claim("with the positional encoding added, shuffling changes the outputs",
      gap, bool(gap > 0.05), chapter="5")

# %% [markdown]
# ### The formula
#
# The paper's encoding, for position $pos$ and pair index $i = 0, \dots,
# d_\text{model}/2 - 1$:
#
# $$PE(pos, 2i) = \sin\!\left(\frac{pos}{10000^{2i/d_\text{model}}}\right), \qquad
# PE(pos, 2i+1) = \cos\!\left(\frac{pos}{10000^{2i/d_\text{model}}}\right).$$
#
# Write $\omega_i = 10000^{-2i/d_\text{model}}$ for the frequency of pair $i$: columns $2i$
# and $2i+1$ are the sine and cosine of the same angle $pos \cdot \omega_i$. The frequencies
# fall geometrically from $\omega_0 = 1$ (a wavelength of $2\pi \approx 6.3$ positions) to
# $\omega_{d/2-1} = 10000^{-(1 - 2/d_\text{model})}$, just above $1/10000$. Positions count
# from 0.
#
# ### Exercise 5.1: the sinusoidal table
#
# Write `sinusoidal(n_pos, d_model)` returning the table `[n_pos, d_model]` for positions
# $0, \dots, n_\text{pos} - 1$ (the check uses even `d_model`).

# %% tags=["exercise"]
def sinusoidal(n_pos, d_model):
    """The paper's sinusoidal encoding for positions 0 .. n_pos - 1:
    a [n_pos, d_model] float tensor, one row per position."""
    # BEGIN SOLUTION
    pos = torch.arange(n_pos, dtype=torch.float64)[:, None]
    i2 = torch.arange(0, d_model, 2, dtype=torch.float64)   # 2i
    w = 10000.0 ** (-i2 / d_model)
    pe = torch.zeros(n_pos, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * w)
    pe[:, 1::2] = torch.cos(pos * w)
    return pe.float()
    # END SOLUTION


checks.ch05_ex1(sinusoidal)

# %% [markdown]
# The Annotated Transformer computes the same table differently, as
# $\exp(-2i \ln 10000 / d_\text{model})$ in float32, and its `PositionalEncoding` module adds
# it to the embedded tokens (then applies dropout, which is off in evaluation mode). We check
# our table against both, at the paper's $d_\text{model} = 512$ over 200 positions.

# %%
ours = sinusoidal(200, 512)
theirs = sinusoidal_table(200, 512)
# Theirs is float32: the exponent -2i ln(10000)/d (2 roundings on a number up to ln 10000
# = 9.2) makes exp's result off by a relative 2 * 9.2 + 1 eps, the product with pos 1 more:
# the angle, up to 199 radians, is off by a relative 21 eps; sin/cos add 1 and our float64
# table's rounding to float32 1 more. At the scale of the largest angle.
identity_close("our table equals encoder_decoder.sinusoidal_table (d_model 512, 200 positions)", ours, theirs,
               terms=2 * math.ceil(math.log(10000)) + 3, scale=199.0, chapter="5")
pos_enc = PositionalEncoding(512, dropout=0.1).eval()
emb = torch.randn(2, 200, 512)
with torch.no_grad():
    added = pos_enc(emb)
# against its own table (the difference between the tables is the claim above): one
# addition on each side, at the size of |x| + 1
identity_close("PositionalEncoding (eval mode) returns x + PE[:n]", added, emb + theirs, terms=2,
               scale=float(emb.abs().max()) + 1, chapter="5")
claim("every entry lies in [-1, 1]", f"{ours.min():.3f}..{ours.max():.3f}",
      bool(ours.abs().max() <= 1), chapter="5")
freqs = 10000.0 ** (-torch.arange(0, 512, 2, dtype=torch.float64) / 512)
waves = 2 * math.pi / freqs
claim("wavelengths run from 2 pi up to just under 2 pi * 10000",
      f"{waves[0]:.2f}..{waves[-1]:.0f}",
      # 10000 ** 0 is exactly 1, so the first wavelength is 2 pi exactly
      bool(waves[0] == 2 * math.pi) and bool(waves[-1] < 2 * math.pi * 1e4),
      chapter="5")

# %%
import plotly.graph_objects as go

from circuitbook.viz import heatmap  # hover a cell for its position, column and value

table = sinusoidal(100, 128)
lines = []
for col in (10, 30, 31, 50):
    kind = "sin" if col % 2 == 0 else "cos"
    lines.append(go.Scatter(x=list(range(100)), y=[round(v, 4) for v in table[:, col].tolist()],
                            mode="lines", name=f"column {col} ({kind}, i={col // 2})"))
fig = heatmap(table, range(128), range(100), panel_titles=["PE table, d_model = 128"],
              x_title="column (2i: sine, 2i+1: cosine)", y_title="position", zmin=-1, zmax=1,
              colorscale="RdBu", side=lines, side_title="a few columns", side_width=0.8)
fig.figure.update_xaxes(title_text="position", col=2)
fig.figure.update_yaxes(title_text="value", col=2)
fig.figure.update_layout(showlegend=True, legend={"orientation": "h", "x": 0.5, "y": -0.18})
fig

# %% [markdown]
# The left columns oscillate quickly and the right ones barely move across 100 positions:
# each row is a different reading of the same set of clocks. Columns 30 and 31 are the sine
# and cosine of one frequency, a quarter period apart.
#
# ### A shift by $k$ positions is a rotation
#
# The paper says it picked sinusoids because $PE_{pos+k}$ "can be represented as a linear
# function of" $PE_{pos}$. Here is the function. For one pair $i$ write
# $s = \sin(pos\,\omega_i)$, $c = \cos(pos\,\omega_i)$ and $\theta = k\,\omega_i$. The
# angle-addition formulas give
#
# $$\sin((pos + k)\omega_i) = s\cos\theta + c\sin\theta, \qquad
# \cos((pos + k)\omega_i) = -s\sin\theta + c\cos\theta.$$
#
# In the book's **row-vector convention** the pair is a row $(s, c)$ multiplied on the right:
#
# $$(s,\ c)\begin{pmatrix}\cos\theta & -\sin\theta \\ \sin\theta & \cos\theta\end{pmatrix}
# = \big(\sin((pos+k)\omega_i),\ \cos((pos+k)\omega_i)\big).$$
#
# Stacking one such $2 \times 2$ block per pair along the diagonal gives a
# $d_\text{model} \times d_\text{model}$ matrix $M_k$ with
#
# $$PE(pos + k) = PE(pos)\, M_k \quad \text{for every } pos.$$
#
# $M_k$ contains $k$ and the frequencies, and no $pos$. It is orthogonal (each block is a
# rotation). Each block of $M_k$ is the textbook rotation matrix
# $R(\theta) = \begin{pmatrix}\cos\theta & -\sin\theta \\ \sin\theta & \cos\theta\end{pmatrix}$
# itself, acting on a row from the right. In the column-vector convention the same shift is
# $PE(pos+k)^\top = M_k^\top PE(pos)^\top$, with blocks $R(\theta)^\top = R(-\theta)$: because
# each pair is ordered (sin, cos), moving forward turns the point clockwise. So the textbook
# $R(\theta)$ is right in the row-vector formula, and it is the column-vector formula
# $R(\theta)\,PE(pos)^\top$, the textbook's way of applying it, that shifts $k$ positions
# *back*. The cell below checks both directions on one pair.

# %%
pair_pos, pair_k, pair_w = 7.0, 3.0, 0.3              # one pair: pos, k, frequency


def pair(p):
    """The pair (sin, cos) at position p, in float64."""
    return torch.tensor([math.sin(p * pair_w), math.cos(p * pair_w)], dtype=torch.float64)


th = pair_k * pair_w
R = torch.tensor([[math.cos(th), -math.sin(th)], [math.sin(th), math.cos(th)]],
                 dtype=torch.float64)
row_form = pair(pair_pos) @ R      # a row times R(theta), on the right
col_form = R @ pair(pair_pos)      # R(theta) times a column, on the left
# float64: two angles (3 roundings each), sin/cos, a 2-term product: 10 roundings at size 1
identity_close("row form: (sin, cos)(pos) R(theta) = (sin, cos)(pos + k)", row_form,
               pair(pair_pos + pair_k), terms=10, scale=1.0, chapter="5")
identity_close("column form: R(theta) (sin, cos)(pos)^T = (sin, cos)(pos - k)^T, a shift back",
               col_form, pair(pair_pos - pair_k), terms=10, scale=1.0, chapter="5")
col_vs_forward = (col_form - pair(pair_pos + pair_k)).abs().max()
identity("so the column form with R(theta) is not the forward shift", col_vs_forward,
         bool(col_vs_forward > 0.1), chapter="5")

# %% [markdown]
# ### Exercise 5.2: the offset matrix
#
# Write `offset_matrix(k, d_model)` returning $M_k$ as a `[d_model, d_model]` tensor, so
# that `sinusoidal(n, d)[k:]` equals `sinusoidal(n, d)[:-k] @ offset_matrix(k, d)`.

# %% tags=["exercise"]
def offset_matrix(k, d_model):
    """M_k [d_model, d_model]: PE(pos + k) = PE(pos) @ M_k (row vectors),
    one 2x2 rotation block per frequency on rows/columns (2i, 2i+1)."""
    # BEGIN SOLUTION
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        theta = k * 10000.0 ** (-2 * i / d_model)
        c, s = math.cos(theta), math.sin(theta)
        M[2 * i, 2 * i], M[2 * i, 2 * i + 1] = c, -s
        M[2 * i + 1, 2 * i], M[2 * i + 1, 2 * i + 1] = s, c
    return M.float()
    # END SOLUTION


checks.ch05_ex2(offset_matrix)

# %% [markdown]
# Now the claim itself, in float64 so that rounding does not blur it: the same $M_k$ moves
# every one of the first 5000 positions $k$ steps forward, for several $k$ at the paper's
# width. Then the other half of "does not depend on $pos$": for each frequency, a
# $2 \times 2$ map is pinned down by where it sends two positions, so we recover the block
# from each pair of neighbouring positions $(pos, pos+1)$ separately and compare all 4999
# of them with the block of $M_k$. Finally the group structure: $M_j M_k = M_{j+k}$ and
# $M_k^\top = M_k^{-1} = M_{-k}$.

# %%
def pe64(n_pos, d):
    """The sinusoidal table in float64."""
    ang = (torch.arange(n_pos, dtype=torch.float64)[:, None]
           * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d))
    out = torch.zeros(n_pos, d, dtype=torch.float64)
    out[:, 0::2], out[:, 1::2] = ang.sin(), ang.cos()
    return out


def M64(k, d):
    """M_k in float64 (the reference, for exact checks)."""
    theta = k * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    blocks = [torch.stack([torch.stack([t.cos(), -t.sin()]),
                           torch.stack([t.sin(), t.cos()])]) for t in theta]
    return torch.block_diag(*blocks)


# the exercise's M_k is built in float64 and rounded once to float32 (entries at most 1)
identity_close("offset_matrix(5, 512) is M_5", offset_matrix(5, 512), M64(5, 512), terms=2, scale=1.0,
               chapter="5")
P = pe64(5000, 512)
# float64. An angle pos * 10000^(-2i/d): the exponent's rounding, amplified by ln 10000 = 9.2
# in the power, and the product: a relative 13 eps, on angles up to 5000 radians; sin or cos
# add 1. The shifted row and the rotation each carry one such angle error, and the product
# with M_k adds 2 (two nonzero terms per column; the zeros add exactly).
ANGLE_TERMS = 13
SHIFT_TERMS = 2 * (ANGLE_TERMS + 1) + 2
shift_diffs = torch.cat([(P[:-k] @ M64(k, 512) - P[k:]).flatten() for k in (1, 3, 17, 100, 1000)])
identity_close("PE(pos + k) = PE(pos) M_k for every pos < 5000 - k (k = 1, 3, 17, 100, 1000)",
               shift_diffs, torch.zeros_like(shift_diffs), terms=SHIFT_TERMS, scale=5000.0,
               chapter="5")
shift_bound = rounding_bound(SHIFT_TERMS, 5000.0, torch.float64)

k = 17
U = P[:-k].reshape(5000 - k, 256, 2)     # [pos, pair, (sin, cos)]
V = P[k:].reshape(5000 - k, 256, 2)
A = torch.stack([U[:-1], U[1:]], dim=2)  # rows: positions pos, pos + 1
B = torch.stack([V[:-1], V[1:]], dim=2)
fitted = torch.linalg.solve(A, B)        # [pos, pair, 2, 2]: one block each
true_blocks = torch.stack([M64(k, 512)[2 * i:2 * i + 2, 2 * i:2 * i + 2]
                           for i in range(256)])
# A and B have entry errors d <= (ANGLE_TERMS + 1) eps * 5000 (above). A's rows are unit
# vectors an angle w apart, so ||A^-1|| = sqrt(2) / w for the slowest w; the fitted block X
# (entries <= 1) moves by ||A^-1|| (|dB| + |dA| |X|) <= 6 d / w, and the 2x2 solve itself
# adds a few eps times cond(A) = 2 / w. So 6 (ANGLE_TERMS + 1) + 8 roundings at 5000 / w.
w_slow = float(10000.0 ** (-(512 - 2) / 512))
BLOCK_TERMS = 6 * (ANGLE_TERMS + 1) + 8
identity_close("the block fitted from positions (pos, pos+1) is the same for all 4999 values of pos, "
               "and equals M_k's", fitted, true_blocks.expand_as(fitted), terms=BLOCK_TERMS,
               scale=5000.0 / w_slow, chapter="5")
block_bound = rounding_bound(BLOCK_TERMS, 5000.0 / w_slow, torch.float64)

Ms = {j: M64(j, 512) for j in (-9, 5, 9, 14)}
eye = torch.eye(512, dtype=torch.float64)
group_diffs = torch.cat([(Ms[5] @ Ms[9] - Ms[14]).flatten(), (Ms[9].T - Ms[-9]).flatten(),
                         (Ms[9] @ Ms[9].T - eye).flatten()])
# float64: three angles (up to 14 radians, ANGLE_TERMS each), sin/cos, and 2-term products
identity_close("M_5 M_9 = M_14, and M_9^T = M_-9 = M_9^-1", group_diffs, torch.zeros_like(group_diffs),
               terms=3 * (ANGLE_TERMS + 1) + 3, scale=14.0, chapter="5")
# the bounds, not the measured errors: those are rounding noise and differ between CPUs
glue("shift_bound", shift_bound)
glue("block_bound", block_bound)
glue("slowest", freqs[-1].item())

# %% [markdown]
# The shift identity holds to float64 rounding (the worst-case bound for these angles is
# {glue:text}`shift_bound:.0e`) and the 4999 separately fitted blocks agree to within
# their bound, {glue:text}`block_bound:.0e`. (That is less exact than the shift itself
# because the slowest pair turns by only {glue:text}`slowest:.1e` radians per position, so
# two neighbouring positions nearly coincide in its plane and the fit loses digits: its
# bound divides by that angle.)
#
# Two cautions about what this buys. $M_k$ acts on the encoding alone; in the model the
# stream holds token plus position, and $M_k$ would rotate the token part too. And nothing
# forces a trained model to use the rotation; it is an option the encoding offers. The
# paper reports that learned positional embeddings did about as well (its Table 3, row E).
#
# The explorer moves a position forward by $k$. Left: the first three frequency pairs as
# points on the unit circle, before (hollow) and after (filled) the shift; each turns by its
# own angle $k\omega_i$. Right: the whole vector $PE(pos)M_k$ next to $PE(pos+k)$,
# coordinate by coordinate.

# %%
D_DEMO = 32
demo_table = pe64(200, D_DEMO)


def draw_shift(pos=10, k=5):
    M = offset_matrix(k, D_DEMO).double()
    before, after = demo_table[pos], demo_table[pos] @ M
    target = demo_table[pos + k]                # pos + k < 200 on the sliders
    fig, ax = plt.subplots(1, 2, figsize=(9, 4),
                           gridspec_kw={"width_ratios": [1, 1.6]})
    t = torch.linspace(0, 2 * math.pi, 200)
    ax[0].plot(t.cos(), t.sin(), color="lightgray", lw=0.8)
    for i, color in zip(range(3), ["tab:blue", "tab:orange", "tab:green"]):
        s0, c0 = before[2 * i], before[2 * i + 1]
        s1, c1 = after[2 * i], after[2 * i + 1]
        ax[0].scatter([c0], [s0], s=40, facecolors="none", edgecolors=color)
        turn = k * 10000 ** (-2 * i / D_DEMO)
        ax[0].scatter([c1], [s1], s=40, color=color,
                      label=f"pair {i}: turns {turn:.2f} rad")
    ax[0].set(aspect="equal", xlim=(-1.2, 1.2), ylim=(-1.2, 1.2),
              xlabel="cos (column 2i+1)", ylabel="sin (column 2i)")
    ax[0].legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    cols = torch.arange(D_DEMO)
    ax[1].plot(cols, target, "o", ms=7, mfc="none", label="PE(pos + k)")
    ax[1].plot(cols, after, "x", ms=5, label="PE(pos) @ M_k")
    ax[1].set(xlabel="column", ylim=(-1.15, 1.15),
              title=f"pos = {pos}, k = {k}: max |difference| "
              f"{(after - target).abs().max():.1e}")
    ax[1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    plt.show()


explore(draw_shift, pos=(0, 150, 1), k=(0, 40, 1))

# %% [markdown]
# ### Dot products see only the distance
#
# Because every $M_k$ is orthogonal, the similarity of two positions depends only on how far
# apart they are. Pair by pair,
# $\sin(p\omega)\sin(q\omega) + \cos(p\omega)\cos(q\omega) = \cos((p - q)\omega)$, so
#
# $$PE(p) \cdot PE(q) = \sum_{i} \cos\big((p - q)\,\omega_i\big),$$
#
# a function of $p - q$ that is even in it: the dot product cannot tell "three before"
# from "three after". (An attention head can, because it compares positions through
# $W_{QK}$, which need not be symmetric.) We check both statements on the Gram matrix of 200
# positions.

# %%
G = demo_table @ demo_table.T                       # [200, 200], d = 32
idx = torch.arange(200, dtype=torch.float64)
w = 10000.0 ** (-torch.arange(0, D_DEMO, 2, dtype=torch.float64) / D_DEMO)
formula = torch.cos((idx[:, None, None] - idx[None, :, None]) * w).sum(-1)
# float64. Each G entry sums D_DEMO products of entries with angle errors (ANGLE_TERMS + 1
# each, on angles up to 199 radians); the formula's D_DEMO / 2 cosines carry one angle error
# each: 3 D_DEMO (ANGLE_TERMS + 1) roundings at the largest angle covers both.
GRAM_TERMS = 3 * D_DEMO * (ANGLE_TERMS + 1)
identity_close("PE(p) . PE(q) = sum_i cos((p - q) w_i)", G, formula, terms=GRAM_TERMS, scale=199.0,
               chapter="5")
toeplitz = torch.cat([(G[1:, 1:] - G[:-1, :-1]).flatten(), (G - G.T).flatten()])
identity_close("the Gram matrix is constant along diagonals and symmetric: it depends on |p - q| only", toeplitz,
               torch.zeros_like(toeplitz), terms=2 * GRAM_TERMS, scale=199.0, chapter="5")

import plotly.graph_objects as go

from circuitbook.viz import heatmap  # hover a cell for its two positions and their dot product

# every second position, to 3 significant digits (the hover shows 2 decimals): the full
# 200 x 200 grid would add about 440 KB to the page; the claims above check all of it
shown = list(range(0, 200, 2))
G_shown = [[float(f"{v:.3g}") for v in row] for row in G[shown][:, shown].tolist()]
fig = heatmap(G_shown, shown, shown, panel_titles=["PE(p) . PE(q), d_model = 32, every 2nd position"],
              x_title="position q", y_title="position p", colorscale="Viridis", value_format=".2f",
              side=[go.Scatter(x=list(range(-40, 41)), y=[round(v, 4) for v in G[100, 60:141].tolist()],
                               mode="lines", line={"color": "#1f77b4"}, name="p = 100")],
              side_title="one row (p = 100)", side_width=0.8)
fig.figure.update_xaxes(title_text="offset q - p", tickvals=[-40, 0, 40], col=2)
fig.figure.update_yaxes(title_text="dot product", col=2)
fig

# %% [markdown]
# ## The circuit view
#
# ### Learned positions, $W_\text{pos}$
#
# TransformerLens {cite}`nanda2022transformerlens` stores positions as a learned matrix
# `W_pos` of shape `[n_ctx, d_model]`, one row per position, used like `W_E`: row $i$ for
# position $i$. With `positional_embedding_type="standard"` it is added to the stream, as in
# the paper: $x^{(0)}_i = W_E[t_i] + W_\text{pos}[i]$. We check that on a small standard
# model through its hooks.

# %%
std = attn_only(1, d_model=32, n_heads=2, d_vocab=20, n_ctx=12,
                positional="standard", seed=3)
toks = torch.randint(0, 20, (2, 12))
_, std_cache = std.run_with_cache(toks)
expected = std.W_E[toks] + std.W_pos[:12]
# one addition each side, at the size of |W_E| + |W_pos|
identity_close("standard: resid_pre[0] = W_E[t_i] + W_pos[i]", std_cache["resid_pre", 0], expected, terms=2,
               scale=float((std.W_E[toks].abs() + std.W_pos[:12].abs()).max().detach()), chapter="5")

# %% [markdown]
# ### Shortformer: positions only where queries and keys are read
#
# The zoo's `toy-2l` (two attention-only layers, chapters 16-17) uses shortformer positions.
# In each layer, head $h$ computes
#
# $$q_i = (x_i + W_\text{pos}[i])\,W_Q^h + b_Q^h, \qquad
# k_j = (x_j + W_\text{pos}[j])\,W_K^h + b_K^h,$$
#
# $$v_j = x_j W_V^h + b_V^h,$$
#
# so $W_\text{pos}$ reaches the queries and keys but is never written into the stream and
# never read by the values. We check three consequences with the model's hooks: the stream
# entering layer 0 is the token embedding alone; the attention scores are the formula above
# *with* $W_\text{pos}$ and not without it; and, on a sequence that repeats one token 30
# times, the stream is identical at every position in every layer (every value vector is
# the same, so any average of them is too), even though the attention patterns differ from
# position to position.

# %%
with contextlib.redirect_stdout(io.StringIO()):  # loading reports the device
    model = load("toy-2l")
cfg = model.cfg
g = torch.Generator().manual_seed(0)
tokens = torch.randint(0, cfg.d_vocab, (4, 30), generator=g)
_, cache = model.run_with_cache(tokens)
x0 = cache["resid_pre", 0]
# a lookup, copied through hooks with no arithmetic: bit for bit equal
identity("shortformer: resid_pre[0] = W_E[t_i], with no W_pos term",
         (x0 - model.W_E[tokens]).abs().max(), bool(torch.equal(x0, model.W_E[tokens])),
         chapter="5")

pos_rows = model.W_pos[:30]
causal = torch.tril(torch.ones(30, 30, dtype=torch.bool))


def scores_from(stream, layer, with_pos):
    """Layer's attention scores [batch, head, q, k] from the formula."""
    inp = stream + pos_rows if with_pos else stream
    W_Q, W_K = model.W_Q[layer], model.W_K[layer]
    q = torch.einsum("bpd,hde->bhpe", inp, W_Q) + model.b_Q[layer][:, None]
    k = torch.einsum("bpd,hde->bhpe", inp, W_K) + model.b_K[layer][:, None]
    return q @ k.transpose(-1, -2) / math.sqrt(cfg.d_head)


def qk_sizes(stream, layer):
    """Largest |q| and |k| entries a rounding could be relative to: |x + W_pos| |W| + |b|."""
    inp = (stream + pos_rows).abs()
    q = torch.einsum("bpd,hde->bhpe", inp, model.W_Q[layer].abs()) + model.b_Q[layer].abs()[:, None]
    k = torch.einsum("bpd,hde->bhpe", inp, model.W_K[layer].abs()) + model.b_K[layer].abs()[:, None]
    return float(q.max()), float(k.max())


ours_s, hooked_s, gaps, score_scale = [], [], [], 0.0
with torch.no_grad():
    for layer in range(cfg.n_layers):
        hooked = cache["attn_scores", layer][..., causal]
        stream = cache["resid_pre", layer]
        ours_s.append(scores_from(stream, layer, True)[..., causal].flatten())
        hooked_s.append(hooked.flatten())
        gaps.append((scores_from(stream, layer, False)[..., causal] - hooked).abs().max().item())
        q_max, k_max = qk_sizes(stream, layer)
        score_scale = max(score_scale, q_max * k_max * math.sqrt(cfg.d_head))  # d_head terms / sqrt(d_head)
# Each side: x + W_pos (1), the projection and bias (d_model + 1) for q and for k, their
# d_head-term dot product and the scale (d_head + 1), at the size of d_head |q| |k| / sqrt(d_head)
SCORE_TERMS = 2 * (cfg.d_model + 2) + cfg.d_head + 1
identity_close("scores = ((x + W_pos) W_Q + b_Q)((x + W_pos) W_K + b_K)^T / sqrt(d_head) in both layers",
               torch.cat(ours_s), torch.cat(hooked_s), terms=2 * SCORE_TERMS, scale=score_scale,
               chapter="5")
# 1.0 in score units is 25 times that worst-case rounding bound and changes an attention
# weight e-fold
claim("leaving W_pos out of that formula misses the scores by a lot",
      min(gaps), min(gaps) > 1.0, chapter="5")

same = torch.full((1, 30), 7)
_, c_same = model.run_with_cache(same)
streams_same = torch.stack([c_same["resid_post", l][0] for l in range(cfg.n_layers)])
# Mathematically equal, but a position's value mix sums up to 30 equal vectors weighted by a
# softmax whose weights sum to 1 only to rounding: per layer a softmax (n_pos + 4) and a mix
# (n_pos), W_O (d_head) and the heads' sum (n_heads), at the stream's size; errors from
# layer 0 carry into layer 1, so the layers' counts add.
n_same = same.shape[1]
SAME_TERMS = cfg.n_layers * (2 * n_same + 4 + cfg.d_head + cfg.n_heads + 1)
identity_close("one token repeated: every position's stream is the same, in every layer", streams_same,
               streams_same[:, :1].expand_as(streams_same), terms=2 * SAME_TERMS,
               chapter="5")
spread_bound = rounding_bound(2 * SAME_TERMS, float(streams_same.abs().max()))
pat = c_same["pattern", 0][0, 2]              # head 0.2, [q, k]
pat_gap = (pat[10, :11] - pat[20, :11]).abs().max().item()
# weights lie in [0, 1]; 0.5 is half the range, ~10^6 times rounding
claim("...although the attention patterns differ between positions",
      pat_gap, pat_gap > 0.5, chapter="5")

standard = attn_only(2, positional="standard", seed=None)
standard.load_state_dict(model.state_dict())  # same weights, positions added
_, c_std = standard.run_with_cache(same)
std_spread = (c_std["resid_post", 1][0] - c_std["resid_post", 1][0, :1]) \
    .abs().max().item()
# 0.5 is ~5000 times the rounding bound of the shortformer streams' agreement
claim("the same weights with standard positions: the streams differ by "
      "position", std_spread, std_spread > 0.5, chapter="5")
glue("spread_bound", spread_bound)  # the bound: the measured spread is rounding noise
glue("std_spread", std_spread)

# %% [markdown]
# In the shortformer model the 30 positions' streams agree to within float32 rounding (the
# worst-case bound is {glue:text}`spread_bound:.0e`);
# with the same weights and positions added to the stream they differ by up to
# {glue:text}`std_spread:.1f`. This is why the circuits framework's toy models use
# shortformer positions: every vector in the residual stream is built from token
# embeddings, so every path through the model starts at a token, and position acts in one
# place only, the attention scores.
#
# What has the model learned in $W_\text{pos}$? Its rows are not sinusoids, but their cosine
# similarities have the same broad shape as the sinusoidal Gram matrix: nearby positions
# point in similar directions.

# %%
Wp = model.W_pos.detach()
Wn = Wp / Wp.norm(dim=-1, keepdim=True)
cos_sim = Wn @ Wn.T
pos_idx = torch.arange(cfg.n_ctx)
dist = (pos_idx[:, None] - pos_idx[None, :]).abs()
near, far = cos_sim[dist == 1].mean(), cos_sim[dist >= 10].mean()
# cosine similarities lie in [-1, 1]; a gap of 0.3 is a sixth of that range
claim("toy-2l's W_pos: neighbours are more alike than distant positions",
      f"{near:.2f} vs {far:.2f}", bool(near > far + 0.3), chapter="5")
glue("near", near.item())
glue("far", far.item())

from circuitbook.viz import heatmap  # hover a cell for its two positions and their cosine

heatmap(cos_sim, range(cfg.n_ctx), range(cfg.n_ctx), title="toy-2l: cosine(W_pos[p], W_pos[q])",
        x_title="position q", y_title="position p", zmin=-1, zmax=1, colorscale="RdBu", value_format=".2f")

# %% [markdown]
# Adjacent rows have mean cosine similarity {glue:text}`near:.2f`, rows ten or more apart
# {glue:text}`far:.2f`.
#
# ### The positional QK circuit
#
# With shortformer positions a layer-0 score expands into four terms
# (row-vector convention, leaving out the biases and the $1/\sqrt{d_\text{head}}$):
#
# $$(e_i + p_i)\,W_{QK}\,(e_j + p_j)^\top
# = e_i W_{QK} e_j^\top + e_i W_{QK} p_j^\top + p_i W_{QK} e_j^\top + p_i W_{QK} p_j^\top,$$
#
# with $e_i = W_E[t_i]$ and $p_i = W_\text{pos}[i]$. The last term depends on the two
# positions only. Over all pairs it is the matrix $W_\text{pos} W_{QK} W_\text{pos}^\top$
# (`[n_ctx, n_ctx]`, rows: query position, columns: key position), which
# `circuitbook.circuits.pos_qk_circuit` returns factored. A head that always looks one
# position back should score key $q - 1$ highest in every row $q$. To see it, we divide by
# $\sqrt{d_\text{head}}$ and take each row's softmax over the keys the query may see
# ($j \le q$): the pattern the head would have if the token terms were zero. That band sits
# right next to the diagonal, so we also re-index each row by the offset $q - j$, how far
# back the key is; a previous-token head then shows a vertical stripe at offset 1. The four
# layer-0 heads of `toy-2l` (grey: keys before position 0):

# %%
pqk = pos_qk_circuit(model, 0).AB.detach() / math.sqrt(cfg.d_head)
allowed = torch.tril(torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool))
max_off = 16
q_idx = torch.arange(cfg.n_ctx)[:, None]
key = q_idx - torch.arange(max_off)[None, :]         # [q, offset]: key q - off
pos_pattern = pqk.masked_fill(~allowed, float("-inf")).softmax(-1)
by_offset = pos_pattern[:, q_idx, key.clamp(min=0)]  # [head, q, offset]
by_offset = by_offset.masked_fill(key < 0, float("nan"))
from circuitbook.viz import heatmap  # hover a cell for its query position, offset and weight

fig = heatmap(by_offset, range(max_off), range(cfg.n_ctx),
              panel_titles=[f"L0H{h}" for h in range(by_offset.shape[0])],
              x_title="offset q - j", y_title="query position q", zmin=0, zmax=1)
# NaN cells (keys before position 0) are left blank: the grey background shows through them
fig.figure.update_layout(plot_bgcolor="#d9d9d9", coloraxis_colorbar_title_text="softmax weight")
fig

# %% [markdown]
# One head stands out. To find it without eyeballing, we ask of each head: for how many
# query positions $q \ge 1$ is the largest positional score among the keys it may see
# ($j \le q$) at $j = q - 1$? Then we check the answer against behaviour:
# `circuitbook.heads.prev_token_scores` measures how much attention each head actually puts
# on the previous position when the model runs on random repeated tokens, and the zoo's
# record names the head it found when the model was built.

# %%
qs = torch.arange(1, cfg.n_ctx)
masked = pqk.masked_fill(~allowed, float("-inf"))
band = (masked[:, 1:].argmax(-1) == (qs - 1)).float().mean(-1)  # [head]
runner_up = masked[:, qs, :].clone()
runner_up[:, torch.arange(len(qs)), qs - 1] = float("-inf")
margin = (pqk[:, qs, qs - 1] - runner_up.max(-1).values).mean(-1)  # [head]
for h in range(cfg.n_heads):
    print(f"head 0.{h}: q-1 is the favourite for {band[h]:6.1%} of "
          f"queries, mean margin {margin[h]:+6.1f}")
from_weights = int(band.argmax())

prev = prev_token_scores(model)                # [layer, head]
from_behaviour = [int(i) for i in divmod(int(prev.argmax()), cfg.n_heads)]
recorded = metrics("toy-2l")["prev_token_head"]
print(f"prev_token_scores, layer 0: {prev[0].numpy().round(3)}; "
      f"zoo record: head {recorded}")
claim("the weights alone single out one layer-0 head whose positional "
      "favourite is key q-1 for > 90% of queries",
      f"head 0.{from_weights}: {band[from_weights]:.3f}",
      band[from_weights] > 0.9 and sorted(band)[-2] < 0.1, chapter="5")
claim("it is the head with the highest prev-token score, and the one the "
      "zoo records", f"{from_behaviour} vs {recorded}",
      from_behaviour == [0, from_weights] == recorded, chapter="5")
glue("band", 100 * band[from_weights].item())
glue("margin", margin[from_weights].item())
glue("prev_score", prev[0, from_weights].item())
glue("prev_head", f"0.{from_weights}")

# %% [markdown]
# Head {glue:text}`prev_head` prefers key $q - 1$ on positional grounds alone for
# {glue:text}`band:.1f`% of query positions, by {glue:text}`margin:.1f` in score units on
# average over the next-best key. Run on repeated random tokens, it puts
# {glue:text}`prev_score:.3f` of its attention on the previous position, and it is the
# previous-token head the zoo's record names. Chapter 17 shows what this head is for: it is
# the first half of `toy-2l`'s induction circuit.
#
# The figure shows one more thing we did not go looking for: another head has a stripe
# too, at offset 2, but only for early query positions (the top of the figure). We find it
# the same way, as the head whose positional favourite is key $q - 2$ for the most early
# queries, and check that its positional scores and its behaviour agree:

# %%
fav = masked.argmax(-1)                          # [head, q]: favourite key
early = torch.arange(2, 33)
two_frac = (fav[:, early] == early - 2).float().mean(-1)  # [head]
two_head = int(two_frac.argmax())
claim(f"head 0.{two_head}'s positional favourite is key q-2 for every q from 2 to 32",
      f"{two_frac[two_head]:.3f}", bool(two_frac[two_head] == 1), chapter="5")
att_2 = cache["pattern", 0][:, two_head].diagonal(offset=-2, dim1=-2, dim2=-1)
claim(f"on random 30-token sequences head 0.{two_head} puts > 90% of its attention "
      "two positions back", att_2.mean(), att_2.mean() > 0.9, chapter="5")
glue("att_2", att_2.mean().item())
glue("two_head", f"0.{two_head}")

# %% [markdown]
# On the random sequences of 30 tokens from earlier, head {glue:text}`two_head` puts
# {glue:text}`att_2:.2f` of its attention on the token two back. Its previous-token score
# is low only because it looks two back rather than one. We leave it there; the point for
# this chapter is that a head's positional behaviour can be read from
# $W_\text{pos} W_{QK} W_\text{pos}^\top$ before running the model at all.
#
# ## Summary
#
# - Attention without positional information is permutation-equivariant: shuffling the
#   input shuffles the output, as we checked.
# - The sinusoidal encoding puts $\sin(pos\,\omega_i)$ and $\cos(pos\,\omega_i)$ in columns
#   $2i$ and $2i+1$, with $\omega_i = 10000^{-2i/d_\text{model}}$; our table matches the
#   Annotated Transformer's.
# - Shifting by $k$ is a fixed block-diagonal rotation, $PE(pos+k) = PE(pos)\,M_k$ in the
#   row-vector convention, each block the textbook $R(\theta)$; the column convention needs
#   the transposed blocks $R(-\theta)$, and $R(\theta)$ applied to a column shifts back. It holds to float64 rounding at every position, and the block
#   fitted at each position is the same. Dot products of encodings depend only on $|p-q|$.
# - TransformerLens uses a learned $W_\text{pos}$. Standard models add it to the stream;
#   shortformer models such as `toy-2l` add it only to the inputs of queries and keys, so
#   the stream carries tokens alone and position acts only on attention scores.
# - The positional QK circuit $W_\text{pos} W_{QK} W_\text{pos}^\top$ of `toy-2l`'s layer 0
#   shows a band at key $=$ query $- 1$ in exactly one head, {glue:text}`prev_head`, which
#   `prev_token_scores` and the zoo's record confirm as the previous-token head; it also
#   reveals a head that looks two positions back over the first half of the context.
