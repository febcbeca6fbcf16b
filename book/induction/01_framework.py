# %% [markdown]
# # A mathematical framework & induction heads
#
# This module is for readers who want to *do* interpretability, not only read about it. This
# page gathers the ideas you need in one place. The next page lets you step through the
# induction circuit and build compositions by hand, the problem set has you design, find and
# break induction heads, and a short quiz checks what stuck. Every claim below is computed on
# the book's two-layer model `toy-2l`, which learned induction from scratch (chapter 17 shows
# its training).

# %%
import warnings

import matplotlib.pyplot as plt
import torch

from circuitbook.book import claim, claim_close, glue
from circuitbook.circuits import full_ov_circuit, ov_circuit, qk_circuit
from circuitbook.composition import composition_scores, random_baseline
from circuitbook.heads import copying_scores, induction_scores, prev_token_scores
from circuitbook.models import load
from circuitbook.paths import logit_attribution

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)
model = load("toy-2l")

# %% [markdown]
# ## A transformer is a sum, not a stack
#
# Diagrams draw transformers as a tower of layers, but the residual stream makes the tower a
# sum. Each head reads the stream, and what it writes is *added* to it. Once the attention
# patterns are fixed, every head is a linear map, so the logits of an attention-only model
# split exactly into terms, one for each *path* from the embedding to the unembedding:
#
# $$\text{logits} = \underbrace{x W_U}_{\text{direct}} + \sum_{h} A^h x W_{OV}^h W_U
# + \sum_{h_1 \to h_2} A^{h_2} A^{h_1} x W_{OV}^{h_1} W_{OV}^{h_2} W_U + \dots$$
#
# (row-vector convention; $x = $ the token embeddings, one row per position, and $A^h$ the
# head's attention pattern). We check that the terms add up to the model's logits on a
# repeated random sequence.

# %%
from circuitbook.data import repeated_random_tokens

tokens = repeated_random_tokens(1, 24, model.cfg.d_vocab, seed=0)
parts = logit_attribution(model, tokens)
logits = model(tokens)
# Rounding, not a hand-picked tolerance. Each path is a chain of products: at most two
# patterns (2 n), two heads' W_V W_O (2 (d_model + d_head)) and W_U (d_model); the parts
# are then added (one rounding each). The model computes the same logits along its own
# path: per layer Q/K (d_model + 2), scores (d_head + 1), softmax (n + 3), values
# (d_model + 1), the weighted sum (n), W_O and the heads' sum (d_head + n_heads + 1),
# the residual (1); then W_U (d_model + 1). The parts cancel, so the scale is the sum of
# their sizes (or the largest value in the forward pass, if larger).
cfg = model.cfg
n = tokens.shape[1]
fwd_terms = (cfg.n_layers * ((cfg.d_model + 2) + (cfg.d_head + 1) + (n + 3) + (cfg.d_model + 1) + n
                             + (cfg.d_head + cfg.n_heads + 1) + 1) + cfg.d_model + 1)
all_parts = parts.parts()
path_terms = 2 * n + 2 * (cfg.d_model + cfg.d_head) + cfg.d_model + len(all_parts) + fwd_terms
_, run_cache = model.run_with_cache(tokens)
largest = max(t[t.isfinite()].abs().max().item() for t in run_cache.values())
claim_close("toy-2l's logits equal the sum of its path terms (direct + heads + virtual heads)",
            parts.total(), logits, terms=path_terms,
            scale=max(sum(t.abs() for _, t in all_parts).max().item(), largest),
            identity=True, chapter="induction module")

# %% [markdown]
# ## QK and OV: where to look, what to bring
#
# Each head is two independent circuits. The **QK circuit** $W_{QK} = W_Q W_K^\top$ decides
# where the head looks: the score of query $x_i$ on key $x_j$ is $x_i W_{QK} x_j^\top /
# \sqrt{d_\text{head}}$. The **OV circuit** $W_{OV} = W_V W_O$ decides what the head brings
# back: attending fully to $x_j$ adds $x_j W_{OV}$ to the query's stream. Both are
# $d_\text{model} \times d_\text{model}$ matrices of rank at most $d_\text{head}$.
#
# Putting the embeddings on both sides turns the OV circuit into a vocabulary-by-vocabulary
# table, $W_E W_{OV} W_U$: row $a$ says how attending to token $a$ changes each logit. A head
# **copies** if attending to a token raises that same token's logit. Elhage et al. test this
# through the eigenvalues $\lambda_i$ of the full OV circuit: a copying head has mostly
# positive eigenvalues, and the summary $\sum_i \lambda_i / \sum_i |\lambda_i|$ is close to 1.
# The eigenvalues can be computed without ever forming the vocabulary-sized matrix, because
# the nonzero eigenvalues of $W_E W_V W_O W_U$ equal those of the small matrix
# $W_O W_U W_E W_V$ ($d_\text{head} \times d_\text{head}$). We check that on the induction
# head, and compare the score with a dense eigendecomposition.

# %%
ind, prev = induction_scores(model), prev_token_scores(model)
L1, H1 = divmod(int(ind[1:].argmax()) + model.cfg.n_heads, model.cfg.n_heads)
L0, H0 = divmod(int(prev[:1].argmax()), model.cfg.n_heads)
glue("ind_head", f"{L1}.{H1}")
glue("prev_head", f"{L0}.{H0}")
copy = copying_scores(model)
with torch.no_grad():
    dense = full_ov_circuit(model, L1, H1).AB.double()   # 64 x 64 here, so we can afford it
    lam = torch.linalg.eigvals(dense)
    dense_score = (lam.sum().real / lam.abs().sum()).item()
print(f"induction head {L1}.{H1}: copying score {copy[L1, H1]:.3f} (dense eigendecomposition: {dense_score:.3f})")
print("copying scores of all heads:\n", copy.numpy().round(2))
# The identity itself, in float64: the score from the d_head x d_head matrix
# W_O W_U W_E W_V equals the dense one. By Bauer-Fike each eigenvalue moves by at most
# kappa(V) times the matrix's rounding error, with kappa(V) the condition number of its
# eigenvectors: the chain (d_model + d_vocab + d_model roundings of its absolute values)
# and the eigensolver's own backward error (counted as d_head^2, or d_vocab^2 for the
# dense one); the score by at most
# 2 d_head kappa that / sum |lambda|.
W_O1, W_V1 = model.W_O[L1, H1].double(), model.W_V[L1, H1].double()
W_U64, W_E64 = model.W_U.double(), model.W_E.double()
small = W_O1 @ W_U64 @ W_E64 @ W_V1
lam_small, vecs = torch.linalg.eig(small)
small_score = (lam_small.sum().real / lam_small.abs().sum()).item()
kappa = torch.linalg.cond(vecs).item()
chain_norm = torch.linalg.matrix_norm(W_O1.abs() @ W_U64.abs() @ W_E64.abs() @ W_V1.abs()).item()
d_head = model.cfg.d_head
eig_terms = 2 * (2 * model.cfg.d_model + model.cfg.d_vocab + d_head ** 2)
eig_scale = 2 * d_head * kappa * chain_norm / lam_small.abs().sum().item()
lam_dense = torch.linalg.eigvals(W_E64 @ W_V1 @ W_O1 @ W_U64)    # the dense matrix in float64
dense64_score = (lam_dense.sum().real / lam_dense.abs().sum()).item()
claim_close("the factored copying score equals the dense eigenvalue computation (float64)",
            torch.tensor(small_score, dtype=torch.float64),
            torch.tensor(dense64_score, dtype=torch.float64), terms=eig_terms + model.cfg.d_vocab ** 2,
            scale=eig_scale, identity=True, chapter="induction module")
# circuitbook's copying_scores does the same in float32: the same bound in float32's eps
claim_close("circuitbook's float32 copying score agrees with it", copy[L1, H1],
            torch.tensor(small_score), terms=eig_terms, scale=eig_scale, identity=True,
            chapter="induction module")
claim("the induction head's OV circuit copies (copying score > 0.7)", copy[L1, H1], copy[L1, H1] > 0.7,
      chapter="induction module")

# %% [markdown]
# ## Composition and virtual heads
#
# A head in layer 1 can read what a head in layer 0 wrote, in three ways, according to which
# of its inputs carries the earlier head's output:
#
# - **Q-composition**: its *queries* do, so the earlier head changes what it looks for;
# - **K-composition**: its *keys* do, so the earlier head changes what it finds;
# - **V-composition**: its *values* do, so it moves information the earlier head had already
#   moved.
#
# Only V-composition creates a new term in the logits: a **virtual head** with OV circuit
# $W_{OV}^{h_1} W_{OV}^{h_2}$ and pattern $A^{h_2} A^{h_1}$. Q- and K-composition change
# *where* the later head attends, which shows up inside its attention pattern rather than as an
# extra path. The strength of each kind is measured by a **composition score**,
# $\|W_A W_B\|_F / (\|W_A\|_F \|W_B\|_F)$, with $W_A = W_{OV}$ of the writer and $W_B$ the reader's
# $W_{QK}$, $W_{QK}^\top$ or $W_{OV}$; chapter 18 derives it. In `toy-2l` the pair that matters
# stands out in K-composition.

# %%
K = composition_scores(model, "K")[0, :, 1, :]  # [writer head in layer 0, reader head in layer 1]
baseline = float(random_baseline(model.cfg.d_model, model.cfg.d_head, kind="K", seed=0))
fig, ax = plt.subplots(figsize=(4.2, 3.4))
im = ax.imshow(K, cmap="Blues")
ax.set_xlabel("reader: layer-1 head")
ax.set_ylabel("writer: layer-0 head")
ax.set_title("K-composition scores in toy-2l")
for w in range(K.shape[0]):
    for r in range(K.shape[1]):
        ax.text(r, w, f"{K[w, r]:.2f}", ha="center", va="center", fontsize=8)
fig.colorbar(im)
plt.show()
glue("k_pair", float(K[H0, H1]))
glue("k_baseline", baseline)
claim("the previous-token -> induction pair has toy-2l's largest K-composition score", float(K[H0, H1]),
      float(K[H0, H1]) == float(K.max()), chapter="induction module")

# %% [markdown]
# The previous-token head {glue:text}`prev_head` feeds the induction head
# {glue:text}`ind_head` with a K-composition score of {glue:text}`k_pair:.2f`, against about
# {glue:text}`k_baseline:.2f` for random heads of this shape.
#
# ## Induction heads: the circuit worth memorising
#
# An induction head completes patterns of the form $[A][B] \dots [A] \to [B]$: having seen
# "Mr Dursley" once, on the next "Mr" it predicts "Dursley". It takes two heads in two layers:
#
# 1. a **previous-token head** in an early layer copies each token's left neighbour into its
#    position's stream ("my left neighbour was $A$");
# 2. the **induction head**'s query at the current $[A]$ looks for keys whose stored left
#    neighbour is $A$, which is K-composition with the first head. It finds the position of the
#    earlier $[B]$;
# 3. its copying OV circuit writes $[B]$ into the logits.
#
# Because nothing in the circuit depends on what $A$ and $B$ are, it works on tokens the model
# has never seen together, even on random tokens. That is why the standard test uses a
# repeated random sequence: the second copy becomes predictable only through the context.

# %%
from circuitbook.train import repeat_losses

first, second = repeat_losses(model, seq_len=24, batch=16, seed=1)
glue("loss_first", first)
glue("loss_second", second)
claim("toy-2l predicts the second copy of a random sequence far better than the first", f"{first:.2f} vs {second:.2f}",
      second < 0.5 * first, chapter="induction module")

# %% [markdown]
# On the first copy the model's loss is {glue:text}`loss_first:.2f` nats (chance is
# $\ln 64 \approx 4.16$); on the second it is {glue:text}`loss_second:.2f`.
#
# ### The induction bump, the evidence and its limits
#
# Olsson et al. {cite}`olsson2022context` argue that induction heads are behind most of the
# in-context learning of small transformers, and plausibly of large ones. Their case rests on
# six arguments, which we paraphrase:
#
# 1. **Co-occurrence.** Induction heads form during a short window early in training, a *phase
#    change*, exactly when in-context learning improves abruptly; the loss curve shows it as a
#    bump.
# 2. **Co-perturbation.** Changing the architecture so that induction heads can form earlier
#    (letting keys see the previous token directly) moves the improvement in in-context learning
#    earlier with it.
# 3. **Ablation.** Removing induction heads at test time removes most in-context learning in
#    small attention-only models.
# 4. **Generality.** The same heads also do fuzzier copying, such as completing a pattern
#    across languages.
# 5. **Mechanistic plausibility.** In small models the circuit can be reverse-engineered from the
#    weights, as above.
# 6. **Continuity.** The phase change and the heads look alike from small to large models,
#    suggesting the same mechanism throughout.
#
# What they do *not* claim matters as much. For large models with MLPs the evidence is mostly
# correlational (arguments 1, 4 and 6); the ablation and mechanistic evidence is strongest for
# small attention-only models. They do not claim that induction heads are the only mechanism of
# in-context learning, nor that every head with a high induction score does only induction.
# Chapter 17 plots the phase change from `toy-2l`'s own training history.
#
# ## In-context learning as fast weights
#
# An induction head turns the context into a lookup table that exists only for this input:
# "after $A$ comes $B$" is written into the residual streams by the previous-token head and read
# back by the induction head. In effect the context acts as a set of *fast weights* updated at
# every token, on top of the slow weights learned in training. That view explains why a model
# can use a fact it saw once in its prompt, and why its behaviour can change without any change
# to its parameters.
#
# ## Why this matters for safety
#
# Learning from context is powerful and hard to audit. A model's behaviour depends on what it
# reads, so instructions or patterns placed in its input (by a user, a document or an attacker)
# can redirect it. Capabilities can also appear abruptly in training, as the phase change does,
# so a model can gain a skill between two checkpoints with little warning in the average loss.
# Understanding the circuits that implement in-context learning is one way to predict such
# changes rather than discover them.
#
# ## Summary
#
# - Attention-only transformers are sums of paths; we checked that the terms add up.
# - QK decides where a head looks, OV what it brings; eigenvalues of the full OV circuit test
#   for copying, computed without vocabulary-sized matrices.
# - Q- and K-composition steer attention; only V-composition creates virtual heads.
# - An induction head is a K-composition of a previous-token head and a copying head, and
#   predicts repeated random sequences almost perfectly.
