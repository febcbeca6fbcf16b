# %% [markdown]
# # Problem set: induction heads
#
# Six problems, from pencil-and-paper to measurements on a real pretrained model. Each one
# ends with a check that runs your answer and tells you what kind of mistake it looks like,
# and a **Mark done** button; the counter beside it keeps track of how many of the six you
# have finished (it is saved with the notebook, in a small file beside it, and in your
# browser).
#
# Problems 1-3 need only this page. Problems 4-6 use the book's two-layer model `toy-2l` and
# SmolLM2-135M, a real pretrained language model that ships inside a Python package, so
# everything runs offline. On Colab you can also point problem 4 at GPT-2 small.

# %%
import math
import warnings

import matplotlib.pyplot as plt
import torch

from circuitbook import checks
from circuitbook.book import claim, claim_close, glue
from circuitbook.models import load
from circuitbook.widgets.progress import ProblemSet

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)
progress = ProblemSet("induction-problems", ["1", "2", "3", "4", "5", "6"])

# %% [markdown]
# ## Problem 1: shapes and ranks (pencil)
#
# GPT-2 small has $d_\text{model} = 768$, 12 heads per layer with $d_\text{head} = 64$, and a
# vocabulary of 50,257 tokens. For one head, give the shapes and the largest possible ranks of
# $W_{QK} = W_Q W_K^\top$ and $W_{OV} = W_V W_O$, and of the two vocabulary-level matrices
# $W_E W_{QK} W_E^\top$ (full QK: which token attends to which) and $W_E W_{OV} W_U$ (full OV:
# what attending to a token does to each logit). Shapes are tuples, ranks integers.

# %% tags=["exercise"]
# BEGIN SOLUTION
p1_answers = {
    "W_QK_shape": (768, 768), "W_QK_rank": 64,
    "W_OV_shape": (768, 768), "W_OV_rank": 64,
    "full_QK_shape": (50257, 50257), "full_OV_shape": (50257, 50257), "full_rank": 64,
}
# END SOLUTION

checks.ps_p1a(p1_answers)

# %% [markdown]
# Why do we always talk about $W_{QK}$ and never about $W_Q$ and $W_K$ on their own? Because the
# model only ever uses their product: any invertible $G \in \mathbb{R}^{d_\text{head} \times
# d_\text{head}}$ gives another pair $(W_Q G,\; W_K G^{-\top})$ with the same product, the same
# scores and so the same model. Write that reparametrisation; the check accepts any pair that
# changes $W_Q$ but keeps $W_Q W_K^\top$.

# %% tags=["exercise"]
def reparametrize(W_Q, W_K, G):
    """W_Q, W_K: [d_model, d_head]; G: invertible [d_head, d_head] -> a new (W_Q, W_K)."""
    # BEGIN SOLUTION
    return W_Q @ G, W_K @ torch.linalg.inv(G).T
    # END SOLUTION


checks.ps_p1b(reparametrize)

# %% [markdown]
# The demonstration on a trained model: reparametrise every head of `toy-2l` with a random $G$
# and the logits do not move, although $W_Q$ has changed completely.

# %%
model = load("toy-2l")
tokens = torch.randint(0, model.cfg.d_vocab, (2, 40))
twin = load("toy-2l")
g = torch.Generator().manual_seed(1)
kappa_G = 1.0
with torch.no_grad():
    for layer in range(twin.cfg.n_layers):
        for head in range(twin.cfg.n_heads):
            attn = twin.blocks[layer].attn
            G = torch.randn(16, 16, generator=g) + 4 * torch.eye(16)
            kappa_G = max(kappa_G, torch.linalg.cond(G.double()).item())
            W_Q, W_K = reparametrize(attn.W_Q[head], attn.W_K[head], G)
            attn.W_Q[head], attn.W_K[head] = W_Q, W_K
            attn.b_Q[head] = attn.b_Q[head] @ G
            attn.b_K[head] = attn.b_K[head] @ torch.linalg.inv(G).T
    moved = (twin.W_Q - model.W_Q).abs().max().item()
    logits_twin, (logits_orig, run_cache) = twin(tokens), model.run_with_cache(tokens)
# Rounding, not a hand-picked tolerance. Each model is within the rounding bound of its
# attention-only forward pass (per layer: Q/K d_model + 2, scores d_head + 1, softmax
# n + 3, values d_model + 1, the weighted sum n, W_O and the heads' sum d_head + n_heads +
# 1, the residual 1; then W_U, d_model + 1). The twin's scores also carry the rounding of
# W_Q G and of W_K G^-T (2 d_head, and inverting G: kappa(G) d_head), on summands up to
# kappa(G) times larger than the original's. Scale: the largest value of the forward pass
# times kappa(G). W_Q moving by more than 0.1 (a sizeable fraction of its entries) shows
# the twin is a different parametrisation.
cfg, n = model.cfg, tokens.shape[1]
fwd_terms = (cfg.n_layers * ((cfg.d_model + 2) + (cfg.d_head + 1) + (n + 3) + (cfg.d_model + 1) + n
                             + (cfg.d_head + cfg.n_heads + 1) + 1) + cfg.d_model + 1)
largest = max(t[t.isfinite()].abs().max().item() for t in run_cache.values())
claim("reparametrising W_Q, W_K by (G, G^-T) changes W_Q", f"W_Q moved {moved:.2f}", moved > 0.1,
      chapter="induction problems")
# The reparametrisation acts on the scores, so check them first, where the bound is
# tight: each score is q.k of the projections (d_model + 2 roundings each) and d_head
# products, plus, for the twin, W_Q G and W_K G^-T (2 d_head, inverting G: kappa(G)
# d_head); the twin's summands are up to kappa(G) times the original's, |q| |k| / sqrt(d_head).
_, twin_cache = twin.run_with_cache(tokens)
finite = run_cache["attn_scores", 1].isfinite()
score_size = max(((run_cache["q", l].abs().transpose(1, 2) @ run_cache["k", l].abs().permute(0, 2, 3, 1))
                  .max().item()) for l in range(cfg.n_layers)) / math.sqrt(cfg.d_head)
for l in range(cfg.n_layers):
    claim_close(f"...it leaves layer {l}'s attention scores unchanged",
                twin_cache["attn_scores", l][finite], run_cache["attn_scores", l][finite],
                terms=2 * (cfg.d_model + 2 + cfg.d_head + 1) + 2 * cfg.d_head
                + math.ceil(kappa_G * cfg.d_head),
                scale=score_size * kappa_G, identity=True, chapter="induction problems")
claim_close("...and so not the logits", logits_twin, logits_orig,
            terms=2 * fwd_terms + cfg.n_layers * (2 * cfg.d_head + math.ceil(kappa_G * cfg.d_head)),
            scale=largest * kappa_G, identity=True, chapter="induction problems")
progress.tracker("1")

# %% [markdown]
# ## Problem 2: counting paths (pencil)
#
# Expand an attention-only transformer with $L$ layers of $n$ heads into paths from the
# embedding to the unembedding: a path passes through at most one head per layer, in
# increasing layer order. Write the counts as formulas in `n_layers` and `n_heads`: the
# direct path, the paths through exactly one head, the paths through two or more heads
# ("virtual heads"), and the total. The check evaluates your formulas at many $L$ and $n$.

# %% tags=["exercise"]
def path_counts(n_layers, n_heads):
    """-> {"direct": ..., "single": ..., "virtual": ..., "total": ...}"""
    # BEGIN SOLUTION
    total = (1 + n_heads) ** n_layers
    single = n_layers * n_heads
    return {"direct": 1, "single": single, "virtual": total - 1 - single, "total": total}
    # END SOLUTION


checks.ps_p2(path_counts)

# %%
from circuitbook.paths import count_paths

for L, n in [(1, 12), (2, 12), (12, 12)]:
    print(f"L={L:2d}, n={n}: {path_counts(L, n)['total']:,} paths; circuitbook.paths.count_paths: "
          f"{count_paths(L, n)}")
two = path_counts(2, 12)
claim("two layers of n heads: 1 direct + 2n single-head + n^2 virtual terms",
      two, two == {"direct": 1, "single": 24, "virtual": 144, "total": 169}, chapter="induction problems")
progress.tracker("2")

# %% [markdown]
# ## Problem 3: design the induction head (pencil, then code)
#
# Here is a two-layer model whose residual stream has three orthogonal blocks: `S_tok` holds the
# current token (one-hot), `S_pos` the position (seen only by queries and keys), and `S_prev`
# the previous token, which a fixed previous-token head in layer 0 writes there. The
# unembedding reads `S_tok`. Your job is layer 1's head, given as two
# $d_\text{model} \times d_\text{model}$ matrices used exactly as written: the score of query
# $x_q$ on key $x_k$ is $x_q W_{QK} x_k^\top$, and attending to $x_k$ writes $x_k W_{OV}$.
#
# Make it an induction head: the query should look for a key *whose previous token is the
# current token*, and the OV circuit should copy the token it finds. `S_tok` and `S_prev` are
# given as row bases ([V, d_model]), so `S_tok.T @ S_prev` maps "the token" on one side to
# "the previous token" on the other. Mind the scale: the softmax needs big score gaps, and the
# copied token must outvote the direct path, which also writes the current token into `S_tok`.

# %% tags=["exercise"]
def design_induction_head(S_tok, S_prev):
    """S_tok, S_prev: [V, d_model] row bases -> (W_QK, W_OV), each [d_model, d_model]."""
    # BEGIN SOLUTION
    W_QK = 30 * S_tok.T @ S_prev  # query's token against key's previous token
    W_OV = 10 * S_tok.T @ S_tok   # copy the attended token where W_U reads
    return W_QK, W_OV
    # END SOLUTION


checks.ps_p3(design_induction_head)

# %% [markdown]
# Now break it. If the previous-token head wrote into `S_tok` instead of its own subspace, the
# two pieces of information would share directions. Measure the induction score of your head
# in that broken model (`prev_into="S_tok"`), and look at what its attention does.

# %%
from circuitbook.checks.ps import scaffold_behaviour
from circuitbook.models.handbuilt import subspaces

space = subspaces(32, 40)
W_QK, W_OV = design_induction_head(space["S_tok"], space["S_prev"])
working = scaffold_behaviour(W_QK, W_OV)
print("separate subspaces:", working)

# %% tags=["exercise"]
# BEGIN SOLUTION
broken_score = scaffold_behaviour(W_QK, W_OV, prev_into="S_tok")["induction_score"]
# END SOLUTION

checks.ps_p3b(broken_score)

# %%
glue("p3_working", working["induction_score"])
glue("p3_broken", broken_score)
claim("the designed head does induction in the scaffold (score > 0.9)", working["induction_score"],
      working["induction_score"] > 0.9, chapter="induction problems")
claim("with the previous token written into S_tok, induction fails (score < 0.2)", broken_score,
      broken_score < 0.2, chapter="induction problems")
progress.tracker("3")

# %% [markdown]
# With separate subspaces the head's induction score is {glue:text}`p3_working:.2f`; when the
# previous token lands in `S_tok` it falls to {glue:text}`p3_broken:.2f`. The key side now
# finds nothing in `S_prev` to match, and `S_tok` holds two tokens at once, so queries cannot
# tell "this token" from "the token before it". Residual-stream bandwidth matters: circuits
# work because different information lives in different directions.
#
# ## Problem 4: find the induction heads (code)
#
# Write a function that takes a model and repeated random tokens `[batch, 2n]` and returns two
# `[n_layers, n_heads]` tensors: each head's **induction score** (mean attention from each
# query in the second copy to the token *after* the earlier occurrence of its token) and its
# **previous-token score** (mean attention to the position just before). Use any method you
# like; the check compares numbers on the zoo model. Then run it on SmolLM2.

# %% tags=["exercise"]
def head_scores(model, tokens):
    """tokens: [batch, 2n], the second half repeating the first -> (induction, prev), [L, H] each."""
    # BEGIN SOLUTION
    n = tokens.shape[1] // 2
    _, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    ind, prev = [], []
    for layer in range(model.cfg.n_layers):
        pattern = cache["pattern", layer]  # [batch, head, q, k]
        # query n + i looks at key i + 1: the diagonal n - 1 below the main one
        ind.append(pattern.diagonal(offset=-(n - 1), dim1=-2, dim2=-1)[..., 1:].mean((0, 2)))
        prev.append(pattern.diagonal(offset=-1, dim1=-2, dim2=-1).mean((0, 2)))
    return torch.stack(ind), torch.stack(prev)
    # END SOLUTION


checks.ps_p4(head_scores)

# %%
from circuitbook.data import repeated_random_tokens
from circuitbook.models.pretrained import load_smollm2

smol, tokenizer = load_smollm2()
rep = repeated_random_tokens(2, 40, 40_000, seed=0) + 1000  # ids 1000..40999, as in the README
with torch.no_grad():
    smol_ind, smol_prev = head_scores(smol, rep)
top = smol_ind.flatten().topk(5)
top_heads = [divmod(int(i), smol.cfg.n_heads) for i in top.indices]
print("SmolLM2's top induction heads:",
      ", ".join(f"L{l}H{h} {v:.2f}" for (l, h), v in zip(top_heads, top.values)))

from IPython.display import display

from circuitbook.viz import heatmap  # hover a cell for its layer, head and score

display(heatmap(torch.stack([smol_ind, smol_prev]), [f"H{h}" for h in range(smol.cfg.n_heads)],
                [f"L{l}" for l in range(smol.cfg.n_layers)], title="SmolLM2-135M, per head",
                panel_titles=["SmolLM2 induction scores", "SmolLM2 previous-token scores"],
                x_title="head", y_title="layer", zmin=0, zmax=1))
claim("SmolLM2-135M has induction heads: its best induction score exceeds 0.5", float(top.values[0]),
      float(top.values[0]) > 0.5, chapter="induction problems")
glue("smol_top", f"L{top_heads[0][0]}H{top_heads[0][1]}")

# %% [markdown]
# On Colab, with internet access, the same function runs on GPT-2 small, where induction
# heads have been reported at 5.5, 6.9 and 4.11 (layer.head). Treat that list as something to
# check, not as the answer. Offline, the cell says so and moves on.

# %%
from circuitbook.models import load_pretrained

try:
    gpt2 = load_pretrained("gpt2-small")
except RuntimeError as err:
    print(err)
else:
    ids = repeated_random_tokens(4, 40, gpt2.cfg.d_vocab, seed=0)
    g_ind, _ = head_scores(gpt2, ids)
    best = g_ind.flatten().topk(5)
    print("GPT-2 small:", ", ".join(f"{int(i) // 12}.{int(i) % 12} {v:.2f}" for v, i in zip(best.values, best.indices)))
progress.tracker("4")

# %% [markdown]
# ## Problem 5: verify K-composition, then break it (code)
#
# In `toy-2l` the previous-token head and the induction head should be connected by
# K-composition: the induction head's keys read what the previous-token head wrote. First
# write the K-composition score $\|W_{OV}^{w} (W_{QK}^{r})^\top\|_F / (\|W_{OV}^{w}\|_F
# \|W_{QK}^{r}\|_F)$ for a writer head $w$ and a reader head $r$, and compare the real pair with
# every other (layer 0, layer 1) pair.

# %% tags=["exercise"]
def k_composition(model, writer, reader):
    """writer, reader: (layer, head) pairs, writer in an earlier layer -> score (a float)."""
    # BEGIN SOLUTION
    (l0, h0), (l1, h1) = writer, reader
    with torch.no_grad():
        W_OV = model.W_V[l0, h0] @ model.W_O[l0, h0]
        W_QK = model.W_Q[l1, h1] @ model.W_K[l1, h1].T
        return float((W_OV @ W_QK.T).norm() / (W_OV.norm() * W_QK.norm()))
    # END SOLUTION


checks.ps_p5b(k_composition)

# %%
from circuitbook.heads import induction_scores, prev_token_scores
from circuitbook.composition import random_baseline

ind, prev = induction_scores(model), prev_token_scores(model)
reader = divmod(int(ind[1:].argmax()) + model.cfg.n_heads, model.cfg.n_heads)
writer = divmod(int(prev[:1].argmax()), model.cfg.n_heads)
pairs = {(w, r): k_composition(model, (0, w), (1, r)) for w in range(4) for r in range(4)}
best = pairs[(writer[1], reader[1])]
others = [v for k, v in pairs.items() if k != (writer[1], reader[1])]
baseline = float(random_baseline(model.cfg.d_model, model.cfg.d_head, kind="K", n_samples=20, seed=0))
print(f"previous-token head {writer}, induction head {reader}: K-composition {best:.3f}")
print(f"the other 15 pairs: mean {sum(others) / len(others):.3f}, max {max(others):.3f}; "
      f"20 random heads of this shape: {baseline:.3f}")
claim("the previous-token -> induction pair has the largest K-composition score of all 16 layer-0/1 pairs",
      f"{best:.3f} vs max other {max(others):.3f}", best > max(others), chapter="induction problems")

# %% [markdown]
# Now break the circuit. Mean-ablate a head (replace its output by its average over the batch
# and positions) and measure the best induction score and the loss on the second copy of a
# repeated sequence. Compare ablating the previous-token head with ablating another head of
# the same layer.

# %% tags=["exercise"]
def ablation_effect(model, head, tokens):
    """-> (best induction score, mean loss on the second copy) with `head` mean-ablated."""
    # BEGIN SOLUTION
    from circuitbook.heads import ablate

    n = tokens.shape[1] // 2
    with torch.no_grad(), ablate(model, [head], how="mean"):
        logits, cache = model.run_with_cache(
            tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    ind = torch.stack([
        cache["pattern", layer].diagonal(offset=-(n - 1), dim1=-2, dim2=-1)[..., 1:].mean((0, 2))
        for layer in range(model.cfg.n_layers)])
    logp = logits.log_softmax(-1)[:, :-1].gather(-1, tokens[:, 1:, None])[..., 0]
    return float(ind.max()), float(-logp[:, n:].mean())
    # END SOLUTION


checks.ps_p5(ablation_effect)

# %%
rep2 = repeated_random_tokens(16, 24, model.cfg.d_vocab, seed=3)
rows = []
for head in range(model.cfg.n_heads):
    score, loss = ablation_effect(model, (0, head), rep2)
    rows.append((head, score, loss))
    tag = "  <- previous-token head" if head == writer[1] else ""
    print(f"ablate L0H{head}: best induction score {score:.2f}, loss on second copy {loss:.2f}{tag}")
prev_row = rows[writer[1]]
other_rows = [r for r in rows if r[0] != writer[1]]
claim("mean-ablating the previous-token head raises the second-copy loss more than ablating any other "
      "layer-0 head", f"{prev_row[2]:.2f} vs max other {max(r[2] for r in other_rows):.2f}",
      prev_row[2] > max(r[2] for r in other_rows), chapter="induction problems")
progress.tracker("5")

# %% [markdown]
# ## Problem 6: measure in-context learning directly (code)
#
# Olsson et al. define a model's **in-context-learning score** as its loss on the 500th token
# of a document minus its loss on the 50th, averaged over documents of at least 600 tokens. A
# negative score means that later tokens are easier to predict: the model uses its context.
# Write it from the logits (the logits at position $t-1$ predict token $t$).

# %% tags=["exercise"]
def icl_from_logits(logits, tokens, early=50, late=500):
    """logits: [batch, pos, vocab]; tokens: [batch, pos] -> loss(late) - loss(early), a float."""
    # BEGIN SOLUTION
    logp = logits.log_softmax(-1)

    def loss(t):
        return -logp[:, t - 1].gather(-1, tokens[:, t, None]).mean()

    return float(loss(late) - loss(early))
    # END SOLUTION


checks.ps_p6(icl_from_logits)

# %% [markdown]
# Now on SmolLM2 and Shakespeare: three scenes of at least 600 tokens, cut to 510, scored as they
# are, with SmolLM2's top three induction heads mean-ablated, and with three random heads
# (from the same layers) ablated instead.

# %%
from circuitbook.data.corpus import shakespeare_scenes
from circuitbook.heads import ablate

docs = []
for play, text in shakespeare_scenes():
    ids = tokenizer(text)["input_ids"]
    if len(ids) >= 600:
        docs.append(ids[:510])
    if len(docs) == 3:
        break
doc_tokens = torch.tensor(docs)
g = torch.Generator().manual_seed(0)
top3 = top_heads[:3]
random3 = [(layer, int(torch.randint(0, smol.cfg.n_heads, (1,), generator=g))) for layer, _ in top3]
results = {}
with torch.no_grad():
    results["no ablation"] = icl_from_logits(smol(doc_tokens), doc_tokens)
    with ablate(smol, top3, how="mean"):
        results["top-3 induction heads ablated"] = icl_from_logits(smol(doc_tokens), doc_tokens)
    with ablate(smol, random3, how="mean"):
        results["3 random heads ablated"] = icl_from_logits(smol(doc_tokens), doc_tokens)
for name, value in results.items():
    print(f"{name:32s} ICL score {value:+.2f} nats")
claim("SmolLM2 learns in context on Shakespeare (ICL score < 0)", results["no ablation"],
      results["no ablation"] < 0, chapter="induction problems")
glue("icl_base", results["no ablation"])
glue("icl_top", results["top-3 induction heads ablated"])
glue("icl_random", results["3 random heads ablated"])
progress.tracker("6")

# %% [markdown]
# SmolLM2's ICL score on these scenes is {glue:text}`icl_base:+.2f` nats. With its top three
# induction heads ablated it is {glue:text}`icl_top:+.2f`, and with three random heads
# ablated {glue:text}`icl_random:+.2f`. Three scenes make a small sample; before you draw a
# conclusion, rerun with more documents and with several random choices of heads, and ask how
# much of the in-context learning three heads out of 270 could be expected to carry. That is
# the kind of care Olsson et al.'s ablation arguments need, too.
