# %% [markdown]
# # 17. Induction heads
#
# An induction head completes a pattern it has seen earlier in its own context: after
# "... A B ... A" it predicts "B". It is a circuit of two heads in different layers,
# joined by K-composition (chapter {doc}`16_two_layer`). This chapter finds both heads
# in the book's model `toy-2l`, first from what they do and then from their weights;
# breaks the circuit by ablation; shows with random tokens that what the model does is
# in-context learning; replays the moment in training when the circuit forms; and then
# finds induction heads in a real pretrained language model, SmolLM2-135M, offline
# (and in GPT-2 small when the notebook runs online, on Colab).

# %%
import math
import textwrap
import warnings

import matplotlib.pyplot as plt
import torch

from circuitbook import checks
from circuitbook.book import claim, glue, identity_close
from circuitbook.circuits import full_ov_circuit, pos_qk_circuit
from circuitbook.data import repeated_random_tokens
from circuitbook.heads import (ablate, copying_scores, icl_score,
                               induction_scores, prev_token_scores)
from circuitbook.models import load, load_pretrained, zoo
from circuitbook.models.pretrained import load_smollm2
from circuitbook.train import per_token_loss, phase_change_step
from circuitbook.widgets import explore

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)
_ = torch.set_grad_enabled(False)  # we only read models here

# %% [markdown]
# ## Plain language
#
# Suppose a text contains "Mr Dursley" once, and later the word "Mr" appears again. A
# good guess for the next word is "Dursley": whatever followed this token last time.
# No statistics about English are needed for that guess, only the context. The heads
# that make it are called **induction heads**. Elhage et al.
# {cite}`elhage2021mathematical` introduced them, in two-layer attention-only models;
# Olsson et al. {cite}`olsson2022context` then studied how they form during training
# and argued that they are a large part of how transformers learn in context.
#
# One attention head cannot do it alone. At the second "Mr" the head must attend to
# "Dursley", but nothing about the token "Dursley" says "I come after Mr". The
# information is split across two positions. Two heads solve it together:
#
# 1. A **previous-token head** in an early layer attends from each position to the one
#    before and copies that token's identity into the stream. Now the position of
#    "Dursley" also carries "my previous token was Mr".
# 2. An **induction head** in a later layer, at the second "Mr", sends a query that
#    means "a position whose previous token is Mr". The keys read what the
#    previous-token head wrote (K-composition), so the position of "Dursley" matches.
#    The head attends there, and its OV circuit **copies** the token it finds:
#    "Dursley" becomes the prediction.
#
# The clean test is a sequence of random tokens repeated once. A model cannot predict
# the first copy at all, since there is nothing to learn from random tokens; if its loss
# drops on the second copy, the only explanation is that it is reading the first copy.

# %% [markdown]
# ## The Annotated Transformer view
#
# The whole mechanism fits into two calls of the attention function from chapter
# {doc}`06_attention`, with weights we set by hand. The residual stream has two blocks:
# one for "this token" and one, empty at first, for "the previous token". Layer 0's
# query and key are one-hot *positions*, arranged so that position $p$ matches position
# $p - 1$; its value is the token, which it writes into the second block. Layer 1's
# query reads the first block and its key the second: it looks for "a position whose
# previous token is my token", and its value copies the token found there.

# %%
def attention(query, key, value, mask=None):
    """Scaled dot-product attention, as in chapter 6."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    p_attn = scores.softmax(dim=-1)
    return p_attn @ value, p_attn


def induction_by_hand(tokens, vocab, sharp=60.0):
    """Two hand-set attention layers. tokens: [pos]. Returns logits
    [pos, vocab] (row p predicts token p + 1) and the layer-1 pattern."""
    n = len(tokens)
    causal = torch.tril(torch.ones(n, n))
    one_hot = torch.eye(vocab)[tokens]                   # [pos, vocab]
    stream = torch.cat([one_hot, torch.zeros(n, vocab)], -1)  # this|prev
    eye, zero = torch.eye(vocab), torch.zeros(vocab, vocab)
    read_this = torch.cat([eye, zero])                    # [2V, V]: block 1
    read_prev = torch.cat([zero, eye])                    # block 2
    # layer 0: query p is one-hot(p), key j one-hot(j + 1): p matches p-1
    place = torch.eye(n)
    moved, _ = attention(sharp * place, place.roll(1, dims=1),
                         stream @ read_this, causal)
    moved[0] = 0.0               # position 0 has no previous token to write
    stream = stream + moved @ read_prev.T                 # write "previous"
    # layer 1: query "my token" against key "your previous token"
    copied, pattern = attention(sharp * stream @ read_this,
                                stream @ read_prev, stream @ read_this,
                                causal)
    return sharp * copied, pattern


vocab, n_half = 16, 12
g = torch.Generator().manual_seed(0)
right = []
for _ in range(20):
    half = torch.randperm(vocab, generator=g)[:n_half]   # no repeats inside
    seq = torch.cat([half, half])
    logits_hand, _ = induction_by_hand(seq, vocab)
    right.append(logits_hand[n_half:-1].argmax(-1) == seq[n_half + 1:])
accuracy = torch.cat(right).float().mean()
claim("the hand-built two-head circuit predicts every token of the second "
      "copy (20 sequences)", accuracy, accuracy == 1.0, chapter="17")

# %% [markdown]
# In the first copy the layer-1 query finds no position whose previous token matches,
# so the circuit's guess there is arbitrary. That is the behaviour to look for in a
# trained model. Nobody set `toy-2l`'s weights; it was trained on random segments
# repeated across its context (chapter {doc}`03_residual_stream` met it). Does it contain
# this circuit?

# %% [markdown]
# ## The circuit view
#
# ### Finding the heads from what they do
#
# We run `toy-2l` on 16 sequences of 32 random tokens repeated once, and read two
# numbers off every head's attention pattern $A$ (rows are queries, columns keys):
#
# - the **previous-token score**, the mean of $A_{p,\,p-1}$ over positions $p \ge 1$;
# - the **induction score**, the mean of $A_{n+i,\,i+1}$ over the second copy
#   ($n = 32$): from the second occurrence of token $r_i$ to the token that followed its
#   first occurrence.
#
# Both are one diagonal stripe of the pattern. You write them in the two exercises.
#
# ### Exercise 17.1: the induction score
#
# Write `induction_score(pattern, seq_len)` for a pattern of shape
# `[batch, head, 2 * seq_len, 2 * seq_len]` on repeated sequences. Return one number per
# head, `[head]`, averaged over the batch and over the `seq_len` queries of the second
# copy. Mind the offset.

# %% tags=["exercise"]
def induction_score(pattern, seq_len):
    """pattern: [batch, head, 2n, 2n] on repeated tokens, n = seq_len.
    Mean attention from query n + i to key i + 1 -> [head]."""
    # BEGIN SOLUTION
    stripe = pattern.diagonal(offset=-(seq_len - 1), dim1=-2, dim2=-1)
    return stripe[..., 1:].mean(dim=(0, 2))      # queries n .. 2n - 1
    # END SOLUTION


checks.ch17_ex1(induction_score)

# %% [markdown]
# ### Exercise 17.2: the previous-token score
#
# Write `prev_token_score(pattern)` for a pattern `[batch, head, pos, pos]`: the mean
# attention from each position to the one before it, over the batch and all positions
# that have one. Return `[head]`.

# %% tags=["exercise"]
def prev_token_score(pattern):
    """pattern: [batch, head, pos, pos] -> mean of pattern[..., p, p - 1]
    over the batch and p >= 1: [head]."""
    # BEGIN SOLUTION
    return pattern.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, 2))
    # END SOLUTION


checks.ch17_ex2(prev_token_score)

# %%
model = load("toy-2l")
cfg = model.cfg
L, H, n = cfg.n_layers, cfg.n_heads, 32
tokens = repeated_random_tokens(16, n, cfg.d_vocab, seed=2)   # [16, 64]
logits, cache = model.run_with_cache(tokens)
ind = torch.stack([induction_score(cache["pattern", l], n)
                   for l in range(L)])                  # [layer, head]
prev = torch.stack([prev_token_score(cache["pattern", l])
                    for l in range(L)])
# The library runs the model again. Each pattern is within the rounding bound of the
# attention-only forward pass over 2n positions (per layer: the query/key input and
# projection, d_model + 2; the score, d_head + 1; the softmax, 2n + 3), twice, on numbers
# the size of the largest finite score or stream value; then each score is a mean over
# the batch and the diagonal (at most batch x 2n terms), twice.
pattern_terms = 2 * L * ((cfg.d_model + 2) + (cfg.d_head + 1) + (2 * n + 3))
big = max(t[t.isfinite()].abs().max().item() for t in cache.values())
mean_terms = 2 * tokens.shape[0] * 2 * n
identity_close("our induction scores equal circuitbook.heads' on toy-2l", ind,
               induction_scores(model, tokens=tokens), terms=pattern_terms + mean_terms,
               scale=big, chapter="17")
identity_close("our previous-token scores equal circuitbook.heads' on toy-2l", prev,
               prev_token_scores(model, tokens=tokens), terms=pattern_terms + mean_terms,
               scale=big, chapter="17")

fig, axes = plt.subplots(1, 2, figsize=(8, 2.6))
for ax, scores, title in [(axes[0], prev, "previous-token score"),
                          (axes[1], ind, "induction score")]:
    ax.imshow(scores, cmap="Blues", vmin=0, vmax=1)
    for (l, h), v in zip([(l, h) for l in range(L) for h in range(H)],
                         scores.flatten()):
        ax.text(h, l, f"{v:.2f}", ha="center", va="center", fontsize=9,
                color="white" if v > 0.5 else "black")
    ax.set(xticks=range(H), yticks=range(L), xlabel="head", ylabel="layer",
           title=title)
fig.tight_layout()
plt.show()

# %%
metrics = zoo.metrics("toy-2l")
best_prev = divmod(int(prev.argmax()), H)
best_ind = divmod(int(ind.argmax()), H)
claim("the previous-token head is L0H2, as the zoo's metrics record",
      f"L{best_prev[0]}H{best_prev[1]}: {prev.max():.3f}",
      list(best_prev) == metrics["prev_token_head"] and prev.max() > 0.9,
      chapter="17")
claim("the best induction head is L1H1, as recorded, but all four layer-1 "
      "heads score above 0.8", " ".join(f"{s:.3f}" for s in ind[1]),
      list(best_ind) == metrics["induction_head"] and ind[1].min() > 0.8,
      chapter="17")
claim("no layer-0 head scores above 0.1 on induction", ind[0].max(),
      ind[0].max() < 0.1, chapter="17")
glue("prev_best", prev.max().item())
glue("ind_min", ind[1].min().item())
glue("ind_max", ind[1].max().item())

# %% [markdown]
# Head 2 of layer 0 puts {glue:text}`prev_best:.2f` of its attention on the previous
# token. In layer 1 there is not one induction head but four, with scores from
# {glue:text}`ind_min:.2f` to {glue:text}`ind_max:.2f`; the zoo's metrics name L1H1 only
# because it is the largest. (Only a head in layer 1 can be an induction head here: a
# layer-0 head reads nothing but the tokens and their positions.)
#
# ### Finding them from the weights
#
# Scores from activations say what the heads do on these inputs. The weights say why,
# for all inputs. Three circuits, one per step of the mechanism:
#
# 1. **Where L0H2 looks.** `toy-2l` adds positions only to what queries and keys read,
#    so the positional QK circuit $W_\text{pos} W_{QK}^{0.2} W_\text{pos}^\top$
#    (chapter {doc}`09_full_circuits`) scores every query position against every key
#    position.
# 2. **How the induction head's keys read it.** L0H2 moves the previous token's
#    embedding through its OV circuit into each key position. The layer-1 head compares
#    its query token (read through $W_E$) with that. The token-level K-composition
#    circuit, writer first as in chapter {doc}`16_two_layer`, is
#
#    $$W_E\, W_{OV}^{0.2}\, (W_{QK}^{1.h})^\top W_E^\top,$$
#
#    with rows indexed by the key's previous token and columns by the query's token. An
#    induction head needs a large diagonal: a key matches when its previous token *is*
#    the query's token.
# 3. **What the induction head writes.** Its full OV circuit $W_E W_{OV}^{1.h} W_U$
#    (chapter {doc}`09_full_circuits`) should copy: attending to token $t$ should raise
#    the logit of $t$.

# %%
W_E, W_U = model.W_E, model.W_U
pos_qk = pos_qk_circuit(model, 0, 2).AB                 # [n_ctx, n_ctx]
future = torch.ones_like(pos_qk, dtype=torch.bool).triu(1)
pos_qk_masked = pos_qk.masked_fill(future, float("nan"))
looks_back = torch.stack([pos_qk[p, : p + 1].argmax() == p - 1
                          for p in range(1, cfg.n_ctx)]).float().mean()


def k_circuit(writer, reader):
    """W_E W_OV^{0.writer} (W_QK^{1.reader})^T W_E^T: [key's previous token,
    query token]."""
    W_OV = model.W_V[0, writer] @ model.W_O[0, writer]
    W_QK = model.W_Q[1, reader] @ model.W_K[1, reader].T
    return W_E @ W_OV @ W_QK.T @ W_E.T


def diagonal_wins(M):
    """Fraction of columns (query tokens) whose largest entry is on the
    diagonal."""
    return (M.argmax(0) == torch.arange(M.shape[0])).float().mean().item()


wins = torch.tensor([[diagonal_wins(k_circuit(w, r)) for r in range(H)]
                     for w in range(H)])                  # [writer, reader]
full_ov = torch.stack([full_ov_circuit(model, 1, h).AB for h in range(H)])
copying = copying_scores(model)[1]
own_wins = [diagonal_wins(F.T) for F in full_ov]
sum_wins = diagonal_wins(full_ov.sum(0).T)

from IPython.display import display

from circuitbook.viz import heatmap  # hover a cell for its positions or tokens and value

pos_ids, token_ids = range(pos_qk_masked.shape[0]), range(W_E.shape[0])
display(heatmap(pos_qk_masked, pos_ids, pos_ids, title="L0H2: positional QK", x_title="key position",
                y_title="query position", colorscale="RdBu_r", value_format=".2f"))
M = k_circuit(2, 1)
lim = M.abs().max().item()
display(heatmap(M, token_ids, token_ids, title="K-composition L0H2 -> L1H1", x_title="query token",
                y_title="key's previous token", zmin=-lim, zmax=lim, colorscale="RdBu_r",
                value_format=".2f"))
F = full_ov.sum(0)
lim = F.abs().max().item()
display(heatmap(F, token_ids, token_ids, title="full OV, layer-1 heads summed", x_title="output logit",
                y_title="attended token", zmin=-lim, zmax=lim, colorscale="RdBu_r", value_format=".2f"))

# %%
claim("L0H2's positional QK circuit: each query position scores key p - 1 "
      "highest (fraction of positions)", looks_back, looks_back > 0.95,
      chapter="17")
claim("K-composition from L0H2: for every layer-1 head, each query token's "
      "best key is the one whose previous token equals it",
      f"{wins[2].min():.3f}", bool(wins[2].min() == 1.0), chapter="17")
claim("through any other layer-0 head, at most 10% of query tokens find "
      "their match", f"{wins[[0, 1, 3]].max():.3f}",
      bool(wins[[0, 1, 3]].max() <= 0.1), chapter="17")
claim("every layer-1 head copies: copying score > 0.95",
      " ".join(f"{c:.3f}" for c in copying), bool(copying.min() > 0.95),
      chapter="17")
claim("the four layer-1 OV circuits together make every token its own top "
      "logit; one head alone, for under 80% of tokens", f"{sum_wins:.2f} together, "
      f"{min(own_wins):.2f}..{max(own_wins):.2f} alone",
      sum_wins == 1.0 and max(own_wins) < 0.8, chapter="17")
glue("looks_back", looks_back.item())
glue("own_wins", sum(own_wins) / len(own_wins))
glue("other_wins", wins[[0, 1, 3]].max().item())
glue("copy_min", copying.min().item())

# %% [markdown]
# All three steps are in the weights. The positional circuit of L0H2 has its largest
# entry just below the diagonal for {glue:text}`looks_back:.0%` of query positions. The
# K-composition circuit has a diagonal that wins in every column: whatever the query
# token, the key it prefers is the one preceded by the same token. For the other
# layer-0 heads the diagonal wins for at most {glue:text}`other_wins:.0%` of query
# tokens. And every layer-1 head's OV circuit
# copies (copying scores of at least {glue:text}`copy_min:.3f`, from the eigenvalues of
# the full OV circuit). One head alone makes the attended token the top logit for only
# {glue:text}`own_wins:.0%` of tokens on average; the four heads attend to the same
# place, their outputs add, and together they get every token right.

# %% [markdown]
# ### Reading the circuit further
#
# Three more readings of the same weights and activations, each a number that could have
# come out otherwise.
#
# - **Copying accuracy.** The copying score above is a statement about eigenvalues. A
#   more direct one: in each head's full OV circuit $W_E W_V W_O W_U$ (row: attended
#   token, column: output logit), is the diagonal entry the largest of its row (top-1), or
#   at least among the five largest (top-5)?
# - **The attention score, split by where its inputs come from.** In `toy-2l` the input
#   of layer 1 at each position is a sum: the token embedding, the positional embedding
#   (added to queries and keys only), the output of the previous-token head L0H2, the
#   outputs of the other layer-0 heads, and layer 0's output bias $b_O$. The query is
#   that sum times $W_Q$ plus $b_Q$, the key the same with $W_K$ and $b_K$, so the score
#   $q \cdot k / \sqrt{d_\text{head}}$ is a sum of $6 \times 6$ terms, one per (query part,
#   key part). They must add up to the score the model computes: an identity. Which term
#   makes the induction head pick its target is a finding: for every query of the second
#   copy we take each term at the induction target minus its mean over the other keys the
#   query may attend to.
# - **Which key each query matches.** The K-composition circuit above is read on weights;
#   here we read it on the data: does the (query embedding, key L0H2) term *alone* put
#   its largest value on the induction target, and how often?

# %%
def top_k_accuracy(M, k):
    """Fraction of rows of the square M whose diagonal entry is among the row's k
    largest."""
    top = M.topk(k, dim=-1).indices
    return (top == torch.arange(M.shape[0])[:, None]).any(-1).float().mean().item()


ov_top1 = [top_k_accuracy(F_h, 1) for F_h in full_ov]       # per layer-1 head
ov_top5 = [top_k_accuracy(F_h, 5) for F_h in full_ov]
ind_head = best_ind[1]                                       # L1H1

# layer 1's input, split by where it comes from: [part, batch, pos, d_model]
outs0 = torch.einsum("bphd,hdm->hbpm", cache["z", 0], model.W_O[0])
part_names = ["embedding", "position", "L0H2", "other L0 heads", "b_O", "bias b_Q / b_K"]
parts = torch.stack([cache["hook_embed"], cache["hook_pos_embed"].expand_as(outs0[2]), outs0[2],
                     outs0[[h for h in range(H) if h != 2]].sum(0),
                     model.b_O[0].expand_as(outs0[2])])
q_parts = torch.cat([parts @ model.W_Q[1, ind_head],
                     model.b_Q[1, ind_head].expand(1, *parts.shape[1:3], -1)])
k_parts = torch.cat([parts @ model.W_K[1, ind_head],
                     model.b_K[1, ind_head].expand(1, *parts.shape[1:3], -1)])
score_terms = torch.einsum("ibqd,jbkd->ijbqk", q_parts, k_parts) / math.sqrt(cfg.d_head)
causal = torch.ones(2 * n, 2 * n, dtype=torch.bool).tril()
model_scores = cache["attn_scores", 1][:, ind_head]          # [batch, q, k]
# Rounding: layer 0's output (d_head x n_heads products and the sum over heads), the five
# parts added (5), the projection (d_model + 1), the score (d_head + 1) and the 36 terms
# (36); each on numbers no larger than the products of the absolute values of all parts.
abs_q, abs_k = q_parts.abs().sum(0), k_parts.abs().sum(0)
score_scale = (abs_q @ abs_k.transpose(-1, -2)).max().item() / math.sqrt(cfg.d_head)
score_rounding = ((cfg.d_head * H + H + 1) + 5 + (cfg.d_model + 1) + (cfg.d_head + 1)
                  + len(part_names) ** 2)
identity_close("the 36 (query part, key part) terms add up to L1H1's attention score",
               score_terms.sum((0, 1))[:, causal], model_scores[:, causal],
               terms=score_rounding, scale=score_scale, chapter="17")

# each term at the induction target minus its mean over the query's other keys
queries = torch.arange(n, 2 * n)
targets = queries - n + 1
allowed = causal[queries].clone()
allowed[torch.arange(n), targets] = False                     # the other keys
at_target = score_terms[..., queries, targets]                # [6, 6, batch, n]
others = (score_terms[..., queries, :] * allowed).sum(-1) / allowed.sum(-1)
pull = (at_target - others).mean((-2, -1))                    # [6, 6]
k_term = score_terms[0, 2]                                    # query embedding x key L0H2


def masked(s):
    """Scores [batch, q, k] of the second-copy queries, future keys at -inf."""
    return s[:, queries].masked_fill(~causal[queries], -math.inf)


match_k_term = (masked(k_term).argmax(-1) == targets).float().mean().item()
match_score = (masked(model_scores).argmax(-1) == targets).float().mean().item()

term_labels = [f"key {p}" for p in part_names]
lim = pull.abs().max().item()
display(heatmap(pull, term_labels, [f"query {p}" for p in part_names],
                title="L1H1: score at the induction target minus the other keys' mean",
                x_title="key part", y_title="query part", zmid=0, zmin=-lim, zmax=lim,
                colorscale="RdBu_r", value_format=".2f"))

# %%
ranked = pull.flatten().argsort(descending=True)
best_term, second = (divmod(int(i), len(part_names)) for i in ranked[:2])
sum_top1 = top_k_accuracy(full_ov.sum(0), 1)
claim("one layer-1 head alone ranks the attended token among its 5 largest logits for "
      "under 70% of tokens; the four heads summed make it the largest for all",
      " ".join(f"{a:.2f}" for a in ov_top5) + f"; summed {sum_top1:.2f}",
      max(ov_top5) < 0.7 and sum_top1 == 1.0, chapter="17")
claim("the term that most separates L1H1's induction target from the other keys is "
      "(query embedding, key L0H2 output): K-composition",
      f"{part_names[best_term[0]]} x {part_names[best_term[1]]}: {pull.max():.2f}",
      best_term == (0, 2) and pull.max() == pull.abs().max(), chapter="17")
claim("the second is (query L0H2 output, key other layer-0 heads): the query's previous "
      "token against what the other layer-0 heads wrote at the key",
      f"{part_names[second[0]]} x {part_names[second[1]]}: {pull[second]:.2f}",
      second == (2, 3), chapter="17")
claim("the K-composition term alone picks the induction target for 50-90% of "
      "second-copy queries, the full score for over 95%",
      f"{match_k_term:.3f} vs {match_score:.3f}",
      0.5 < match_k_term < 0.9 and match_score > 0.95, chapter="17")
glue("ov_top1_ind", ov_top1[ind_head])
glue("ov_top5_ind", ov_top5[ind_head])
glue("ov_top5_max", max(ov_top5))
glue("k_term_pull", pull[0, 2].item())
glue("q_term_pull", pull[2, 3].item())
glue("pos_term_pull", pull[1, 1].item())
glue("total_pull", pull.sum().item())
glue("k_share", (pull[0, 2] / pull.sum()).item())
glue("match_k_term", match_k_term)
glue("match_score", match_score)

# %% [markdown]
# L1H1 alone makes the attended token its top logit for {glue:text}`ov_top1_ind:.0%` of
# tokens and ranks it among its five largest for {glue:text}`ov_top5_ind:.0%`; no
# layer-1 head exceeds {glue:text}`ov_top5_max:.0%` at top-5. A single head does not copy
# every token, even roughly: the tokens it misses are not near misses. The four heads
# attend to the same key, their OV circuits add, and the sum copies every token exactly.
#
# The score split says why L1H1 attends where it does. The induction target's score
# exceeds the mean of the other keys by {glue:text}`total_pull:.1f` in total. The largest
# term, {glue:text}`k_term_pull:.1f` ({glue:text}`k_share:.0%` of it), is (query
# embedding, key L0H2 output): the key says "my previous token was A" and the query says
# "I am A". The second, {glue:text}`q_term_pull:.1f`, is the query's own previous token
# (written there by L0H2) against what the other layer-0 heads wrote at the key, among
# them L0H1, which attends two tokens back: a second token of agreement, the same one
# that the ablation below finds. The positional term (query position, key position)
# adds {glue:text}`pos_term_pull:.1f`; it depends on positions alone, and here every target lies $n - 1$ positions before its query.
# Alone, the K-composition term picks the induction target for
# {glue:text}`match_k_term:.0%` of second-copy queries; the full score picks it for
# {glue:text}`match_score:.0%`.

# %% [markdown]
# ### Breaking the circuit
#
# If the story is right, removing the previous-token head must break induction. We
# mean-ablate one layer-0 head at a time (its output replaced by its average over the
# batch and positions, so it carries no information about the sequence) and measure
# the best layer-1 induction score and the loss on the second copy.

# %%
def copy_losses(lg, toks):
    """(first-copy loss, second-copy loss) for repeated toks [batch, 2n]."""
    nll = per_token_loss(lg, toks)
    return nll[:, : n - 1].mean().item(), nll[:, n:].mean().item()


clean_loss = copy_losses(logits, tokens)
ablated = {}
for h in range(H):
    with ablate(model, [(0, h)], how="mean"):
        ablated[h] = (
            copy_losses(model(tokens), tokens)[1],
            induction_scores(model, tokens=tokens)[1].max().item())

fig, axes = plt.subplots(1, 2, figsize=(8, 2.6))
labels = ["none"] + [f"L0H{h}" for h in range(H)]
losses = [clean_loss[1]] + [ablated[h][0] for h in range(H)]
scores = [ind[1].max().item()] + [ablated[h][1] for h in range(H)]
colors = ["gray"] + ["tab:red" if h == 2 else "tab:blue" for h in range(H)]
axes[0].bar(labels, losses, color=colors)
axes[0].set(ylabel="second-copy loss", xlabel="mean-ablated head")
axes[1].bar(labels, scores, color=colors)
axes[1].set(ylabel="best induction score", xlabel="mean-ablated head",
            ylim=(0, 1))
fig.tight_layout()
plt.show()

# %%
two_back = cache["pattern", 0][:, 1].diagonal(offset=-2, dim1=-2,
                                               dim2=-1).mean()
claim("mean-ablating L0H2 collapses induction: loss > 3 nats, best "
      "induction score < 0.15", f"loss {ablated[2][0]:.2f}, score "
      f"{ablated[2][1]:.3f}", ablated[2][0] > 3 and ablated[2][1] < 0.15,
      chapter="17")
claim("mean-ablating L0H0 or L0H3 changes the second-copy loss by under "
      "0.05", max(abs(ablated[h][0] - clean_loss[1]) for h in (0, 3)),
      all(abs(ablated[h][0] - clean_loss[1]) < 0.05 for h in (0, 3)),
      chapter="17")
claim("L0H1, which hurts in between, attends two tokens back",
      f"loss {ablated[1][0]:.2f}; attention to p - 2: {two_back:.2f}",
      clean_loss[1] + 0.1 < ablated[1][0] < 1.0 and two_back > 0.4,
      chapter="17")
for name, value in [("clean_second", clean_loss[1]),
                    ("abl2_loss", ablated[2][0]),
                    ("abl2_score", ablated[2][1]),
                    ("abl1_loss", ablated[1][0]), ("two_back", two_back)]:
    glue(name, float(value))

# %% [markdown]
# Without L0H2 the second-copy loss goes from {glue:text}`clean_second:.3f` to
# {glue:text}`abl2_loss:.2f` nats and the best induction score falls to
# {glue:text}`abl2_score:.2f`: the layer-1 heads no longer find the target. Ablating L0H0
# or L0H3 changes almost nothing. L0H1 is a partial helper: it attends two tokens back
# ({glue:text}`two_back:.2f` of its attention), which lets the induction heads check a
# second token of agreement (chapter {doc}`13_path_expansion` finds the matching score
# term), and without it the loss rises to {glue:text}`abl1_loss:.2f`.

# %% [markdown]
# ### Patching: which path carries induction
#
# Ablation removes a head and watches what breaks. **Activation patching** (Meng et al.
# {cite}`meng2022locating`; the exploratory-analysis demo of TransformerLens
# {cite}`nanda2022transformerlens`) asks the converse: run the model on a *corrupted*
# input, copy one activation in from a *clean* run, and measure how much of the clean
# behaviour comes back. With a metric $m$ we report
#
# $$\text{effect} = \frac{m(\text{patched}) - m(\text{corrupted})}{m(\text{clean}) - m(\text{corrupted})},$$
#
# so **0 is "as corrupted" and 1 is "as clean"**. **Path patching** (Wang et al.
# {cite}`wang2023interpretability`) goes one step further: it copies a sender head's clean
# output into only *one input* of a receiver head (its query, its key or its value)
# and leaves everything else corrupted, including what the sender writes into the other
# heads and into the logits. That separates the four ways the previous-token head's
# output can matter for the induction heads: through their keys (K-composition), their
# queries (Q-composition), their values (V-composition), or directly through the logits.
# `circuitbook.patching` implements both with TransformerLens hooks; for the separate
# inputs it turns on `use_split_qkv_input`, which gives every head its own
# `hook_k_input` and so on, and restores the setting afterwards.
#
# The clean run is the repeated random sequence from above. We corrupt it in two ways,
# each aimed at one side of the induction head, and measure the loss on the predictions
# that corruption spoils (heuristics on how to choose both: {cite}`heimersheim2024patching`):
#
# - **key side**: the tokens at the even positions of the *first* copy are replaced by
#   fresh random ones. A second-copy query with token $r_{j-1}$ ($j$ odd) still finds
#   $r_j$ at position $j$ to copy, but the key there no longer says "my previous token was
#   $r_{j-1}$". The metric is the loss on those predictions;
# - **query side**: the even positions of the *second* copy are replaced. A query at an odd
#   position of the second copy keeps its own token but not its previous one. The metric
#   is the loss at those queries.

# %%
from circuitbook.patching import mean_loss, patch, patch_heads, path_patch, patching_run

g = torch.Generator().manual_seed(11)
even = torch.arange(0, n, 2)
key_side, query_side = tokens.clone(), tokens.clone()
key_side[:, even] = torch.randint(0, cfg.d_vocab, (len(tokens), len(even)), generator=g)
query_side[:, n + even] = torch.randint(0, cfg.d_vocab, (len(tokens), len(even)), generator=g)
at_key_side = [n + j - 1 for j in range(1, n, 2)]      # predicting r_j, j odd
at_query_side = [n + j for j in range(1, n - 1, 2)]    # odd queries of the second copy
runs = {"key side (first copy)": patching_run(
            model, tokens, key_side, lambda lg: mean_loss(lg, tokens, at_key_side)),
        "query side (second copy)": patching_run(
            model, tokens, query_side, lambda lg: mean_loss(lg, tokens, at_query_side))}
layer1 = [(1, h) for h in range(H)]
path_names = ["K", "Q", "V", "direct"]
paths = torch.tensor([[path_patch(run, (0, 2), layer1, into=x) for x in "kqv"]
                      + [path_patch(run, (0, 2), into="logits")] for run in runs.values()])
key_run = runs["key side (first copy)"]
per_head = patch_heads(key_run)                            # [layer, head]
k_at_keys = path_patch(key_run, (0, 2), layer1, into="k", positions=range(n))
l0h2_at_keys = patch(key_run, "z", 0, head=2, positions=range(n))

display(heatmap(paths, path_names, list(runs), title="toy-2l: path patching L0H2 -> layer 1",
                x_title="path from L0H2", y_title="corruption", zmin=-1, zmax=1,
                colorscale="RdBu_r", value_format=".3f"))
display(heatmap(per_head, [f"H{h}" for h in range(H)], [f"L{l}" for l in range(L)],
                title="toy-2l, key side: patching one head's output", x_title="head",
                y_title="layer", zmin=-1, zmax=1, colorscale="RdBu_r", value_format=".3f"))

# %% [markdown]
# Thresholds: a path "carries" the signal if it restores more than 0.9 of the gap, and
# "carries nothing" below 0.05 in absolute value; the measured values lie far from both
# cuts, so the verdicts do not hang on them.

# %%
others_k = paths[0, 1:].abs().max().item()
others_q = paths[1, [0, 2, 3]].abs().max().item()
claim("key side: L0H2's output patched into the layer-1 keys, at the first copy's "
      "positions only, restores over 0.9; the Q, V and direct paths under 0.05 each",
      f"K at key positions {k_at_keys:.3f}; others max |{others_k:.3f}|",
      k_at_keys > 0.9 and others_k < 0.05, chapter="17")
claim("query side: the Q path restores over 0.9; the K, V and direct paths under 0.05",
      f"Q {paths[1, 1]:.3f}; others max |{others_q:.3f}|",
      paths[1, 1] > 0.9 and others_q < 0.05, chapter="17")
others_l0 = per_head[0, [0, 1, 3]].abs().max().item()
claim("key side, one head at a time: L0H2's output restores over 0.9 (at the first "
      "copy's positions alone too), the other layer-0 heads under 0.05; each layer-1 "
      "head alone restores between 0.2 and 0.6",
      f"L0H2 {per_head[0, 2]:.3f} (key positions {l0h2_at_keys:.3f}), other L0 "
      f"|{others_l0:.3f}|, L1 {per_head[1].min():.2f}-{per_head[1].max():.2f}",
      per_head[0, 2] > 0.9 and l0h2_at_keys > 0.9 and others_l0 < 0.05
      and 0.2 < per_head[1].min() and per_head[1].max() < 0.6, chapter="17")
for name, value in [("clean_key_loss", key_run.clean_value),
                    ("corr_key_loss", key_run.corrupted_value),
                    ("corr_query_loss", runs["query side (second copy)"].corrupted_value),
                    ("k_at_keys", k_at_keys), ("q_path_toy", paths[1, 1]),
                    ("others_k", others_k), ("l0h2_patch", per_head[0, 2]),
                    ("l1_patch_min", per_head[1].min()), ("l1_patch_max", per_head[1].max())]:
    glue(name, float(value))

# %% [markdown]
# On the key side the corruption raises the loss on the affected predictions from
# {glue:text}`clean_key_loss:.3f` to {glue:text}`corr_key_loss:.2f` nats. Patching L0H2's
# clean output into the layer-1 heads' keys, and only at the first copy's positions,
# restores {glue:text}`k_at_keys:.1%` of the gap; through the queries, the values or
# directly into the logits the same output restores at most
# {glue:text}`others_k:.1%`. The induction signal travels by K-composition, as the
# weights said. The query-side corruption (loss {glue:text}`corr_query_loss:.2f` nats)
# finds a second path: L0H2's output at the *query* restores
# {glue:text}`q_path_toy:.1%` through the layer-1 queries. That is the second term of the
# score split above, the query's previous token checked against what the other layer-0
# heads (L0H1 among them) wrote at the key. Patching whole heads tells the same story: L0H2 alone restores
# {glue:text}`l0h2_patch:.1%` of the key-side gap, while each layer-1 head alone restores
# only {glue:text}`l1_patch_min:.0%` to {glue:text}`l1_patch_max:.0%`, because the four
# share the work.

# %% [markdown]
# ### The random-token control
#
# On repeated random tokens there is nothing to learn about which token follows which:
# every token is equally likely everywhere. A model that predicts the second copy well
# must be reading the first. As a control we keep the first half and replace the second
# half with *fresh* random tokens. We also compute an in-context-learning score, the
# loss at token 50 minus the loss at token 10, averaged over the batch: negative when
# later tokens, with more context, are predicted better. It is our adaptation of Olsson
# et al.'s score {cite}`olsson2022context`, which takes the loss at token 500 minus the
# loss at token 50 of 512-token texts: `toy-2l`'s context is far shorter, so we scale
# both indices down, and the number is not comparable with theirs.

# %%
g = torch.Generator().manual_seed(7)
fresh = torch.cat([tokens[:, :n],
                   torch.randint(0, cfg.d_vocab, (16, n), generator=g)], 1)
fresh_loss = copy_losses(model(fresh), fresh)
icl_repeat = icl_score(model, tokens, early=10, late=50)
icl_fresh = icl_score(model, fresh, early=10, late=50)
chance = math.log(cfg.d_vocab)
print(f"chance: ln {cfg.d_vocab} = {chance:.2f} nats")
print(f"repeated: first copy {clean_loss[0]:.2f}, second copy "
      f"{clean_loss[1]:.3f}; ICL score {icl_repeat:+.2f}")
print(f"fresh   : first half {fresh_loss[0]:.2f}, second half "
      f"{fresh_loss[1]:.2f}; ICL score {icl_fresh:+.2f}")
claim("first copy at or above chance, second copy near zero",
      f"{clean_loss[0]:.2f} vs {clean_loss[1]:.3f}",
      clean_loss[0] > chance - 0.1 and clean_loss[1] < 0.2, chapter="17")
claim("with a fresh second half the loss stays above chance",
      fresh_loss[1], fresh_loss[1] > chance, chapter="17")
claim("ICL score: strongly negative on repeats, positive on the control",
      f"{icl_repeat:+.2f} vs {icl_fresh:+.2f}",
      icl_repeat < -3 and icl_fresh > 0, chapter="17")
glue("first_copy", clean_loss[0])
glue("n_ctx", cfg.n_ctx)
glue("chance_nats", chance)
glue("d_vocab", cfg.d_vocab)
glue("fresh_second", fresh_loss[1])
glue("icl_repeat", icl_repeat)

# %% [markdown]
# On the first copy the model's loss, {glue:text}`first_copy:.2f` nats, is no better than
# chance ($\ln$ {glue:text}`d_vocab` = {glue:text}`chance_nats:.2f`); it is slightly worse, because the model bets on tokens it has
# already seen. On the second copy it is nearly certain. Replace the second copy with
# fresh tokens and the loss there is {glue:text}`fresh_second:.2f`, again worse than
# chance: the model keeps betting that the past will repeat. The low loss is therefore
# not knowledge stored in the weights about these tokens; it is in-context learning, and
# the ICL score, adapted to a {glue:text}`n_ctx`-token context, measures it:
# {glue:text}`icl_repeat:.1f` nats.
#
# ### When the circuit forms: the phase change
#
# Olsson et al. found that induction heads appear abruptly during training, in a *phase
# change* visible in the loss curve. `toy-2l` was trained with its scores recorded every
# 10 steps (`zoo.history`). We plot the training loss, the loss on both copies of a
# fixed batch of repeated random tokens, and the best induction and previous-token
# scores, and mark the step where the second-copy loss falls below halfway between
# chance and its final low (`train.phase_change_step`).

# %%
hist = zoo.history("toy-2l")
steps = torch.tensor(hist["step"])
change = phase_change_step(hist, d_vocab=cfg.d_vocab)
recorded = zoo.info("toy-2l")["training"]["phase_change_step"]
best_ind_curve = torch.tensor(hist["induction_best"])
first_curve = torch.tensor(hist["loss_first_copy"])
second_curve = torch.tensor(hist["loss_second_copy"])
prev_curve = torch.tensor(hist["prev_token_best"])
train_curve = [v if v is not None else math.nan for v in hist["loss"]]


def draw_history(ax_loss, ax_score, step=None):
    ax_loss.plot(steps, train_curve, color="gray", lw=1,
                 label="training loss")
    ax_loss.plot(steps, first_curve, color="tab:orange", lw=1,
                 label="first copy")
    ax_loss.plot(steps, second_curve, color="tab:blue", lw=1.2,
                 label="second copy")
    ax_loss.axhline(chance, color="gray", ls=":", lw=0.8)
    ax_loss.set(ylabel="loss (nats)", xlim=(0, 1500), ylim=(0, 5.2))
    ax_loss.legend(fontsize=7, loc="lower left")
    ax_score.plot(steps, best_ind_curve, color="tab:red", label="induction")
    ax_score.plot(steps, prev_curve, color="tab:green",
                  label="previous token")
    ax_score.set(ylabel="best score", xlabel="training step",
                 xlim=(0, 1500), ylim=(0, 1))
    ax_score.legend(fontsize=7, loc="lower right")
    for ax in (ax_loss, ax_score):
        ax.axvline(change, color="black", ls="--", lw=0.8)
        if step is not None:
            ax.axvline(step, color="tab:purple", lw=1.5)


fig, (ax_loss, ax_score) = plt.subplots(2, 1, figsize=(8, 4.2), sharex=True)
draw_history(ax_loss, ax_score)
ax_loss.set_title(f"toy-2l in training; dashed line: phase change at step "
                  f"{change}", fontsize=9)
fig.tight_layout()
plt.show()

# %%
before = steps < change - 40
around = (steps >= change - 40) & (steps <= change + 40)
first_peak = first_curve[around].max()
claim("the phase-change step computed from the history is the recorded one",
      change, change == recorded, chapter="17")
claim("the best induction score is below 0.15 until 40 steps before it and "
      "above 0.5 within 40 steps after",
      f"{best_ind_curve[before].max():.3f} -> "
      f"{best_ind_curve[steps <= change + 40][-1]:.3f}",
      best_ind_curve[before].max() < 0.15
      and best_ind_curve[steps <= change + 40][-1] > 0.5, chapter="17")
claim("during the change the first-copy loss rises above chance",
      f"{first_peak:.2f} vs ln 64 = {chance:.2f}", first_peak > chance + 0.5,
      chapter="17")
prev_1500 = prev_curve[steps == 1500].item()
claim("the previous-token score is below 0.7 at step 1,500 and above 0.95 "
      "at the end", f"{prev_1500:.2f} -> {prev_curve[-1]:.2f}",
      prev_1500 < 0.7 and prev_curve[-1] > 0.95, chapter="17")
glue("change", change)
glue("first_peak", first_peak.item())
glue("prev_1500", prev_1500)
glue("prev_final", prev_curve[-1].item())

# %% [markdown]
# For most of the first {glue:text}`change` steps the second-copy loss drifts down
# slowly and the induction score stays near zero. Then, within a few dozen steps, the
# second-copy loss collapses and the best induction score shoots up. In the same steps
# the loss on the first copy **rises above chance**, to {glue:text}`first_peak:.2f`.
# That overshoot is particular to this toy data, and it is not what Olsson et al. call
# the induction bump: `toy-2l` sees nothing but repeated segments, so its loss falls off a
# cliff. The bump of a model trained on text, a short window in which the training loss
# falls faster than before and after, is built and measured in chapter
# {doc}`19_training`. Here the newly formed circuit
# bets that tokens seen earlier will come again, also where they do not (the
# fresh-half control above showed the same overconfidence in the finished model). The
# previous-token score rises together with the induction score, since neither head is useful without the
# other, but it keeps sharpening long after: {glue:text}`prev_1500:.2f` at step 1,500,
# {glue:text}`prev_final:.2f` at the end of training.
#
# The slider shows every head's two scores at any recorded step.

# %%
ind_hist = torch.tensor(hist["induction"])        # [record, layer, head]
prev_hist = torch.tensor(hist["prev_token"])


def draw_step(step=450):
    i = int((steps - step).abs().argmin())
    fig = plt.figure(figsize=(8.5, 4.2))
    grid = fig.add_gridspec(2, 2, width_ratios=[1.5, 1])
    ax_loss = fig.add_subplot(grid[0, 0])
    ax_score = fig.add_subplot(grid[1, 0])
    draw_history(ax_loss, ax_score, step=int(steps[i]))
    ax_loss.legend().remove()
    for row, (scores, title) in enumerate([(prev_hist[i], "previous token"),
                                           (ind_hist[i], "induction")]):
        ax = fig.add_subplot(grid[row, 1])
        ax.imshow(scores, cmap="Blues", vmin=0, vmax=1)
        for l in range(L):
            for h in range(H):
                v = scores[l, h].item()
                ax.text(h, l, f"{v:.2f}", ha="center", va="center",
                        fontsize=8, color="white" if v > 0.5 else "black")
        ax.set(xticks=range(H), yticks=range(L), ylabel="layer",
               title=f"{title}, step {int(steps[i])}",
               xlabel="head" if row else "")
        ax.title.set_fontsize(9)
    fig.tight_layout()
    plt.show()


explore(draw_step, step=(0, 3000, 10))

# %% [markdown]
# ### Induction heads in a real model: SmolLM2-135M
#
# The same test works on any language model. SmolLM2-135M-Instruct is a 30-layer
# Llama-style model with 9 attention heads per layer (chapter {doc}`11_layernorm`
# met its RMSNorm); the book reads it offline from a locally installed package. We feed it
# 4 sequences of 40 random token ids (from 1000 to 39,999, so mostly ordinary word
# pieces) repeated once, keep every layer's attention pattern from one forward pass, and
# apply the two functions of the exercises. Loading takes about half a minute.

# %%
smol, tokenizer = load_smollm2()
g = torch.Generator().manual_seed(0)
half = torch.randint(1000, 40000, (4, 40), generator=g)
smol_tokens = torch.cat([half, half], dim=1)                 # [4, 80]
smol_logits, smol_cache = smol.run_with_cache(
    smol_tokens, names_filter=lambda name: name.endswith("hook_pattern"))
S_L, S_H = smol.cfg.n_layers, smol.cfg.n_heads
smol_ind = torch.stack([induction_score(smol_cache["pattern", l], 40)
                        for l in range(S_L)])               # [30, 9]
smol_prev = torch.stack([prev_token_score(smol_cache["pattern", l])
                         for l in range(S_L)])
del smol_cache
smol_nll = per_token_loss(smol_logits, smol_tokens)        # [4, 79]
smol_first = smol_nll[:, :39].mean().item()
smol_second = smol_nll[:, 40:].mean().item()

from circuitbook.viz import heatmap  # hover a cell for its layer, head and score

heatmap(torch.stack([smol_prev, smol_ind]), [f"H{h}" for h in range(S_H)],
        [f"L{l}" for l in range(S_L)], title="SmolLM2-135M, per head",
        panel_titles=["previous-token score", "induction score"],
        x_title="head", y_title="layer", zmin=0, zmax=1)

# %%
top = smol_ind.flatten().topk(5)
top_heads = [divmod(int(i), S_H) for i in top.indices]
print("top induction heads:")
print(", ".join(f"L{l}H{h} {v:.2f}" for (l, h), v in zip(top_heads,
                                                          top.values)))
reported = {(18, 6), (17, 3), (17, 4), (18, 7), (23, 2)}   # shared notes
overlap = len(reported & set(top_heads))
claim("SmolLM2's top induction head is L18H6, scoring above 0.8",
      f"L{top_heads[0][0]}H{top_heads[0][1]}: {top.values[0]:.3f}",
      top_heads[0] == (18, 6) and top.values[0] > 0.8, chapter="17")
claim("at least 4 of its top 5 are the 5 heads measured before "
      "(L18H6, L17H3, L17H4, L18H7, L23H2)", f"{overlap} of 5",
      overlap >= 4, chapter="17")
claim("SmolLM2's loss drops by over 5 nats from the first copy to the "
      "second",
      f"{smol_first:.1f} -> {smol_second:.1f}",
      smol_first - smol_second > 5, chapter="17")
strong = (smol_ind > 0.4).nonzero()
claim("every head with an induction score above 0.4 is in layers 17-23",
      f"{len(strong)} heads, layers "
      f"{strong[:, 0].min()}-{strong[:, 0].max()}",
      bool(strong[:, 0].min() >= 17 and strong[:, 0].max() <= 23),
      chapter="17")
prev_layers = (smol_prev > 0.4).nonzero()[:, 0]
# The counts quoted below are of scores above 0.4: they are only the same on every CPU if
# no score sits within rounding distance of the cut. A score is a mean of attention
# weights, which differ between numeric configurations by far less than 1e-3.
cut_margin = min((smol_ind - 0.4).abs().min().item(), (smol_prev - 0.4).abs().min().item())
claim("no SmolLM2 head scores within 1e-3 of the 0.4 cut, so the counts below do not "
      "depend on rounding", cut_margin, cut_margin > 1e-3, chapter="17")
glue("prev_lo", int(prev_layers.min()))
glue("prev_hi", int(prev_layers.max()))
glue("smol_top", top.values[0].item())
glue("smol_first", smol_first)
glue("smol_vocab", smol.cfg.d_vocab)
glue("smol_chance", math.log(smol.cfg.d_vocab))
glue("smol_second", smol_second)
glue("smol_n_ind", int((smol_ind > 0.4).sum()))
glue("smol_n_prev", int((smol_prev > 0.4).sum()))

# %% [markdown]
# SmolLM2 has {glue:text}`smol_n_ind` heads with an induction score above 0.4, all in
# layers 17 to 23, and the best, L18H6, puts {glue:text}`smol_top:.2f` of its attention
# on the induction target. The list agrees with the heads recorded in the project's
# notes when the model was first examined (there on other random tokens): a check that
# the measurement is stable, not the source of the answer. Its loss falls from
# {glue:text}`smol_first:.1f` nats on the first copy to {glue:text}`smol_second:.1f` on
# the second. (The first number is far above $\ln$ {glue:text}`smol_vocab` =
# {glue:text}`smol_chance:.1f`, a uniform guess: random word pieces are
# very unlike text, and the model confidently expects something else.) It also has
# {glue:text}`smol_n_prev` heads with a previous-token score above 0.4, spread from layer
# {glue:text}`prev_lo` to layer {glue:text}`prev_hi`; chapter {doc}`18_composition` asks
# which of them the induction heads read, from the weights.

# %% [markdown]
# ### Path patching in SmolLM2
#
# Does a real model's induction run on the same path? We take 3 passages of 32 tokens
# from the shipped Shakespeare corpus (`circuitbook.data.corpus`, tokenised by SmolLM2's
# tokenizer), repeat each once, and corrupt them on the key side as for `toy-2l`: the
# even positions of the first copy are replaced by the tokens at the same positions of
# other passages. (One SmolLM2 forward pass costs seconds on a CPU, so we measure the key
# side only, with four patched runs.) The senders are the previous-token heads found above (score over 0.4) in the layers below the first
# induction head; the receivers are all heads with an induction score over 0.4. For the
# key path only the first copy's positions are patched. SmolLM2 uses grouped-query
# attention (three query heads share one key and value head), so `path_patch` also
# ungroups the keys and values for the run, giving every query head its own key input;
# the paths measured are direct, sender to receiver, and routes through MLPs or other
# heads between them stay corrupted.

# %%
from circuitbook.data.corpus import shakespeare_scenes

m = 32
passages = [ids for ids in (tokenizer.encode(text[:3000])
                            for _, text in shakespeare_scenes()[::61]) if len(ids) >= 300]
smol_clean = torch.tensor([ids[100:100 + m] for ids in passages[:3]]).repeat(1, 2)  # [3, 64]
fill = torch.tensor([ids[200:200 + m] for ids in passages[3:6]])
smol_key_side = smol_clean.clone()
smol_key_side[:, 0:m:2] = fill[:, 0:m:2]
first_ind_layer = int(strong[:, 0].min())
senders = [tuple(map(int, lh)) for lh in (smol_prev > 0.4).nonzero() if lh[0] < first_ind_layer]
receivers = [tuple(map(int, lh)) for lh in strong]
smol_run = patching_run(smol, smol_clean, smol_key_side,
                        lambda lg: mean_loss(lg, smol_clean, [m + j - 1 for j in range(1, m, 2)]))
smol_paths = torch.tensor([path_patch(smol_run, senders, receivers, into="k", positions=range(m)),
                           path_patch(smol_run, senders, receivers, into="q"),
                           path_patch(smol_run, senders, receivers, into="v"),
                           path_patch(smol_run, senders, into="logits")])
print("passage 1:", repr(tokenizer.decode(smol_clean[0, :m])))
print("senders:", " ".join(f"L{l}H{h}" for l, h in senders))
print("receivers:", " ".join(f"L{l}H{h}" for l, h in receivers))
heatmap(torch.stack([paths[0], smol_paths]), path_names, ["toy-2l", "SmolLM2"],
        title="key-side corruption: path patching previous-token heads -> induction heads",
        x_title="path", y_title="model", zmin=-1, zmax=1, colorscale="RdBu_r", value_format=".3f")

# %% [markdown]
# Thresholds: "carries" here is comparative (more than the other three paths together),
# since a real model has many routes and no single one need restore most of the gap;
# "under half" is the line between a path that carries most of the signal and one that
# does not.

# %%
k_smol, rest_smol = smol_paths[0].item(), smol_paths[1:].abs().sum().item()
claim("SmolLM2, key side: the K path (previous-token heads into the induction heads' keys, "
      "first-copy positions only) restores more than the Q, V and direct paths together, "
      "but under half of the gap",
      f"K {k_smol:.3f}; |Q| + |V| + |direct| = {rest_smol:.3f}",
      k_smol > rest_smol and k_smol < 0.5, chapter="17")
for name, value in [("smol_clean_key", smol_run.clean_value),
                    ("smol_corr_key", smol_run.corrupted_value),
                    ("smol_k_path", k_smol), ("smol_rest", rest_smol),
                    ("smol_n_senders", len(senders)), ("smol_n_passages", len(smol_clean)),
                    ("smol_m", m)]:
    glue(name, float(value))

# %% [markdown]
# On the key side the corruption raises SmolLM2's loss on the spoiled predictions from
# {glue:text}`smol_clean_key:.2f` to {glue:text}`smol_corr_key:.2f` nats. Patching the
# {glue:text}`smol_n_senders:.0f` previous-token heads' clean outputs into the induction
# heads' keys, only at the first copy, restores {glue:text}`smol_k_path:.0%` of the gap;
# the Q, V and direct paths together restore {glue:text}`smol_rest:.1%` (in absolute
# value). These are {glue:text}`smol_n_passages:.0f` passages, so the numbers are
# indicative rather than precise; the ordering is what the claim checks. So the
# K-composition path carries the induction signal here too, but less than half of it: in a
# 30-layer model with MLPs, previous-token information also reaches the keys through
# routes this direct path leaves corrupted (other heads, MLPs, heads in later layers
# than the first induction head), and real text gives the model more than one token
# to match on.

# %% [markdown]
# ### GPT-2 small, online
#
# Much interpretability work after Olsson et al. studied GPT-2 small
# {cite}`radford2019language`, whose weights come from the Hugging Face Hub. Wang et al.
# {cite}`wang2023interpretability` report 5.5 and 6.9 among its induction heads and
# 4.11 as a previous-token head. This cell loads GPT-2 small when the notebook runs
# online (on Colab), computes both scores for every head, and looks for those three
# among the top-scoring heads, as a check. Offline, where this book is built, loading
# fails with a clear message and the cell moves on.

# %%
try:
    gpt2 = load_pretrained("gpt2-small")
except RuntimeError as err:
    print(textwrap.fill(str(err), 79))
else:
    g_ind = induction_scores(gpt2, seq_len=50, batch=8)
    g_prev = prev_token_scores(gpt2, seq_len=50, batch=8)
    n_heads = gpt2.cfg.n_heads
    top_ind = [divmod(int(i), n_heads)
               for i in g_ind.flatten().topk(8).indices]
    top_prev = [divmod(int(i), n_heads)
                for i in g_prev.flatten().topk(5).indices]
    print("GPT-2 top induction heads:", [f"{l}.{h}" for l, h in top_ind])
    print("GPT-2 top previous-token heads:",
          [f"{l}.{h}" for l, h in top_prev])
    for head, where, kind in [((5, 5), top_ind, "induction"),
                              ((6, 9), top_ind, "induction"),
                              ((4, 11), top_prev, "previous-token")]:
        found = "found" if head in where else "NOT found"
        print(f"reported {kind} head {head[0]}.{head[1]}: {found} "
              "among ours")

# %% [markdown]
# ## Summary
#
# - An induction head predicts "B" after "A B ... A". It needs two heads: a
#   previous-token head that writes "my previous token was A" at B's position, and an
#   induction head whose keys read that (K-composition), whose query asks for its own
#   token, and whose OV circuit copies what it finds. Two hand-set attention layers do
#   it exactly.
# - In `toy-2l` the previous-token head is L0H2 (score {glue:text}`prev_best:.2f`), and
#   all four layer-1 heads are induction heads (scores {glue:text}`ind_min:.2f` to
#   {glue:text}`ind_max:.2f`). The weights show each step: L0H2's positional QK band,
#   a diagonal K-composition circuit from L0H2 into every layer-1 head, and copying OV
#   circuits.
# - Mean-ablating L0H2 sends the second-copy loss from {glue:text}`clean_second:.3f`
#   to {glue:text}`abl2_loss:.2f` nats; ablating the other layer-0 heads does much less.
# - Reading further: L1H1's attention score splits into 36 (query part, key part) terms
#   that add up exactly; the largest pull towards the induction target,
#   {glue:text}`k_share:.0%` of it, is the query's token against L0H2's output at the key.
# - Path patching L0H2's output into only the layer-1 keys, at the first copy's positions,
#   restores {glue:text}`k_at_keys:.1%` of a key-side corruption; the Q, V and direct paths
#   nothing. In SmolLM2 the same K path from its previous-token heads restores
#   {glue:text}`smol_k_path:.0%`: the largest measured path, but under half.
# - On random tokens no statistics can help, and a fresh second half stays above
#   chance, so the drop on repeats is in-context learning (ICL score, adapted to a
#   {glue:text}`n_ctx`-token context, {glue:text}`icl_repeat:.1f`).
# - The circuit forms abruptly, around step {glue:text}`change` of training, while the
#   first-copy loss rises above chance.
# - SmolLM2-135M has induction heads in layers 17-23 (best L18H6,
#   {glue:text}`smol_top:.2f`); GPT-2 small can be checked the same way online.
