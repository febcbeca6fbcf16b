# %% [markdown]
# # 17a. Induction heads: the circuit
#
# An induction head completes a pattern it has seen earlier in its own context: after
# "... A B ... A" it predicts "B". It is a circuit of two heads in different layers,
# joined by K-composition (chapter {doc}`16_two_layer`). This chapter builds the circuit
# by hand, then finds both of its heads in the book's model `toy-2l`, first from what
# they do and then from their weights, and takes the induction head's attention score
# apart term by term. Four findings are set beside the same architecture at
# initialisation, so that a reader can see what training put there; the others beside
# sequences with a fresh second half (nothing to copy), a bootstrap over the sequences,
# or sequences paired with the wrong query side. The next chapter,
# {doc}`17_induction_evidence`, tests the circuit: it breaks it, patches it, checks
# that what it does is in-context learning, replays its formation in training, and
# looks for it in a real language model.
#
# The first cell imports what the chapter uses.

# %% tags=["hide-input"]
import math
import warnings

import matplotlib.pyplot as plt
import torch
from IPython.display import display

from circuitbook import checks
from circuitbook.book import (Null, attn_only_forward_terms, finding, glue,
                              identity, identity_close, observation)
from circuitbook.circuits import full_ov_circuit, pos_qk_circuit
from circuitbook.data import repeated_random_tokens
from circuitbook.heads import (copying_scores, induction_scores,
                               prev_token_scores)
from circuitbook.models import load, zoo
from circuitbook.models.attn_only import attn_only
from circuitbook.viz import heatmap  # hover a cell for its labels and value

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
# drops on the second copy, it is reading the first copy. Chapter
# {doc}`17_induction_evidence` runs that test and its controls.

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
right, n_hand = [], 20
for _ in range(n_hand):
    half = torch.randperm(vocab, generator=g)[:n_half]   # no repeats inside
    seq = torch.cat([half, half])
    logits_hand, _ = induction_by_hand(seq, vocab)
    right.append(logits_hand[n_half:-1].argmax(-1) == seq[n_half + 1:])
accuracy = torch.cat(right).float().mean()
identity("the hand-built two-head circuit predicts every token of the "
         f"second copy after its first ({n_hand} sequences): it is built to",
         accuracy,
         accuracy == 1.0, chapter="17")
glue("n_hand", n_hand)

# %% [markdown]
# That is a construction, not a discovery: the weights were chosen to do it. In the
# first copy the layer-1 query finds no position whose previous token matches, so the
# circuit's guess there is arbitrary. That is the behaviour to look for in a trained
# model. Nobody set `toy-2l`'s weights; it was trained on random segments repeated
# across its context (chapter {doc}`03_residual_stream` met it). Does it contain this
# circuit?

# %% [markdown]
# ## The circuit view
#
# ### Finding the heads from what they do
#
# We run `toy-2l` on {glue:text}`n_batch` sequences of $n$ random tokens repeated once
# ($n =$ {glue:text}`n_copy` below), and read two numbers off every head's attention
# pattern $A$ (rows are queries, columns keys):
#
# - the **previous-token score**, the mean of $A_{p,\,p-1}$ over positions $p \ge 1$;
# - the **induction score**, the mean of $A_{n+i,\,i+1}$ over the second copy: from the
#   second occurrence of token $r_i$ to the token that followed its first occurrence.
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

# %% [markdown]
# Your two functions on `toy-2l`, beside `circuitbook.heads`, which runs the model
# again and computes the same stripes.

# %%
model = load("toy-2l")
cfg = model.cfg
L, H, n = cfg.n_layers, cfg.n_heads, 32
tokens = repeated_random_tokens(16, n, cfg.d_vocab, seed=2)   # [16, 64]
glue("n_copy", n)
glue("n_batch", len(tokens))
logits, cache = model.run_with_cache(tokens)


def stripes(cache):
    """(induction, previous-token) scores [layer, head] from a cache."""
    return (torch.stack([induction_score(cache["pattern", l], n)
                         for l in range(L)]),
            torch.stack([prev_token_score(cache["pattern", l])
                         for l in range(L)]))


ind, prev = stripes(cache)
# rounding: two forward passes over 2n positions, then a mean over at most
# batch x 2n entries; scale 1: both sides are means of attention weights,
# which lie in [0, 1]. This bounds the two means' own roundings; it holds for
# the whole computation only because both sides run the same forward pass on
# the same batch (so their patterns agree exactly, and the error is 0). The
# pre-softmax maximum, about 100, would give a bound as large as the mistake
# of one query too many in the mean.
score_terms = (2 * attn_only_forward_terms(cfg, 2 * n)
               + tokens.shape[0] * 2 * n)
identity_close("our induction scores equal circuitbook.heads' on toy-2l",
               ind, induction_scores(model, tokens=tokens),
               terms=score_terms, scale=1.0, chapter="17")
identity_close("our previous-token scores equal circuitbook.heads'",
               prev, prev_token_scores(model, tokens=tokens),
               terms=score_terms, scale=1.0, chapter="17")

fig, axes = plt.subplots(1, 2, figsize=(8, 2.6))
for ax, scores, title in [(axes[0], prev, "previous-token score"),
                          (axes[1], ind, "induction score")]:
    ax.imshow(scores, cmap="Blues", vmin=0, vmax=1)
    for l in range(L):
        for h in range(H):
            v = scores[l, h].item()
            ax.text(h, l, f"{v:.2f}", ha="center", va="center", fontsize=9,
                    color="white" if v > 0.5 else "black")
    ax.set(xticks=range(H), yticks=range(L), xlabel="head", ylabel="layer",
           title=title)
fig.tight_layout()
plt.show()

# %% [markdown]
# What would these numbers be if training had put nothing there? The null for four
# findings in this chapter (the others are set beside sequences with a fresh second
# half, a bootstrap, or sequences paired with the wrong query side) is the same
# architecture at initialisation: 40 copies of
# `toy-2l`'s recipe with fresh random weights (seeds 1 to 40), measured exactly as the
# trained model is. A trained value beyond all 40 has a permutation $p = 1/41 \approx
# 0.024$, below the level 0.05 we use throughout. That null says what training added,
# not what the head does: a trained head can stand out from untrained ones for other
# reasons than induction. For the two attention scores it says even less, as the
# numbers will show: untrained heads spread their attention almost evenly, so any
# head with even a slight preference for the stripe itself would beat them, and for
# such a head a test against them could not fail. So we quote the untrained scores for
# scale only, and the induction score gets a behavioural null instead, the same stripe
# when the second half of each sequence is fresh random tokens, where there is nothing
# to copy. The next cell builds the
# untrained models and computes, for each, the two attention scores, and runs the
# trained model on the fresh halves; later cells compute the weight statistics for them.

# %% tags=["hide-input"]
N_NULL = 40
recipe = dict(zoo.info("toy-2l")["config"])
n_layers = recipe.pop("n_layers")
untrained = [attn_only(n_layers, **dict(recipe, seed=s))
             for s in range(1, N_NULL + 1)]
null_runs = [m.run_with_cache(tokens)[1] for m in untrained]
null_stripes = [stripes(c) for c in null_runs]
null_prev = torch.stack([p for _, p in null_stripes])     # [40, layer, head]
null_ind = torch.stack([i for i, _ in null_stripes])
del null_runs
# the same model on sequences whose second half is fresh: nothing to copy
g = torch.Generator().manual_seed(7)
fresh = torch.cat([tokens[:, :n],
                   torch.randint(0, cfg.d_vocab, (16, n), generator=g)], 1)
fresh_cache = model.run_with_cache(fresh)[1]
fresh_ind = fresh_cache["pattern", 1].diagonal(
    offset=-(n - 1), dim1=-2, dim2=-1)[..., 1:].mean(-1)      # [batch, head]

# %% tags=["hide-input"]
prev_head = divmod(int(prev.argmax()), H)
# the cells below name L0H2 and index head 2 of layer 0: fail here if a
# retrained toy-2l moves the previous-token head
identity("the best previous-token head is L0H2, the head the cells below read",
         f"L{prev_head[0]}H{prev_head[1]}", prev_head == (0, 2), chapter="17")
# an observation, not a finding: untrained heads spread their attention almost
# evenly, so a comparison with them could not fail (see the text below)
observation(f"L{prev_head[0]}H{prev_head[1]}'s previous-token score, the "
            "largest of the 8 heads", prev.max(), chapter="17")
observation("for scale, not as a test: the largest previous-token score of any "
            "head of the 40 untrained toy-2l's", null_prev.max(), chapter="17")
finding("every layer-1 head of toy-2l is an induction head on these 16 "
        "sequences: the weakest of the four against the same stripe on "
        "sequences whose second half is fresh, with nothing to copy",
        ind[1].min(),
        null=Null.draws("the 4 layer-1 heads on each of 16 single sequences "
                        "with a fresh second half (one sequence per draw, "
                        "more spread than a 16-sequence mean: conservative)",
                        fresh_ind.flatten()), chapter="17")
observation("for scale, not as a test: the largest induction score of any "
            "layer-1 head of the 40 untrained toy-2l's (near-even attention: "
            "a comparison with it could not fail)", null_ind[:, 1].max(),
            chapter="17")
observation("the layer-0 heads' largest induction score (a layer-0 head reads "
            "only tokens and positions: it cannot find the target by content, "
            "only by attending a fixed n - 1 tokens back)",
            ind[0].max(),
            chapter="17")
glue("prev_best", prev.max().item())
glue("prev_null_max", null_prev.max().item())
best_null = null_prev.flatten(1).max(1).values
glue("prev_null_range", (best_null.max() - best_null.min()).item())
glue("ind_min", ind[1].min().item())
glue("ind_max", ind[1].max().item())
glue("ind_null_max", null_ind[:, 1].max().item())
glue("ind_fresh_max", fresh_ind.max().item())
glue("ind_l0_max", ind[0].max().item())
glue("stripe_offset", n - 1)
zoo_ind = zoo.metrics("toy-2l")["induction_head"]       # [layer, head]
glue("zoo_ind", f"L{zoo_ind[0]}H{zoo_ind[1]}")

# %% [markdown]
# Head 2 of layer 0 puts {glue:text}`prev_best:.2f` of its attention on the previous
# token. That is an observation, not a test: what makes L0H2 a previous-token head is
# the number itself, that share of attention weights which sum to 1. For scale, no head
# of any untrained model exceeds {glue:text}`prev_null_max:.2f`, and the best heads of
# the 40 models differ by only {glue:text}`prev_null_range:.0e`: untrained heads spread
# their attention almost evenly, so any head with even a slight preference for the
# previous token would beat them, and we do not count that comparison as evidence. In
# layer 1 there is not one induction head but four, with scores from
# {glue:text}`ind_min:.2f` to {glue:text}`ind_max:.2f`. The test is behavioural: the
# trained heads themselves reach at most {glue:text}`ind_fresh_max:.2f` on any one
# sequence whose second half is fresh, so the score needs the repeat. (Each of those
# null draws is one sequence, compared with a mean over 16; a single sequence varies
# more than such a mean, so this null is wider than one at the same sample size would
# be, and the test errs on the side of caution.) Untrained layer-1 heads score at most
# {glue:text}`ind_null_max:.3f` (about one over the number of keys a query sees:
# attention spread evenly), again for scale and not as a test.
# The zoo's metrics name {glue:text}`zoo_ind` only because it is the largest. No layer-0
# head scores above {glue:text}`ind_l0_max:.2f`. That is expected, not forced: a layer-0 head reads
# nothing but the tokens and their positions, so it cannot know which key follows an
# earlier copy of its token, but it could still land on the stripe by position alone,
# by attending a fixed {glue:text}`stripe_offset` tokens back; none of these heads does.
#
# ### Finding them from the weights
#
# Scores from activations say what the heads do on these inputs. The weights say why,
# without choosing a batch; each circuit below isolates one path and ignores the rest of
# the model (the K-composition circuit, for example, takes L0H2's output to be the
# previous token's embedding through its OV circuit, as if it attended only there).
# Three circuits, one per step of the mechanism:
#
# 1. **Where L0H2 looks.** `toy-2l` adds positions only to what queries and keys read,
#    so the positional QK circuit $W_\text{pos} W_{QK}^{0.2} W_\text{pos}^\top$
#    (chapter {doc}`09_full_circuits`) scores every query position against every key
#    position. It leaves out the bias terms, which chapter {doc}`05_positional`'s
#    positional score keeps: $b_Q W_K^\top p_j^\top$ scores the key's position on its
#    own and can move attention. We compute both.
# 2. **How the induction head's keys read it.** L0H2 moves the previous token's
#    embedding through its OV circuit into each key position. The layer-1 head compares
#    its query token (read through $W_E$) with that. The token-level K-composition
#    circuit, writer first as in chapter {doc}`16_two_layer`, is
#
#    $$W_E\, W_{OV}^{0.2}\, (W_{QK}^{1.h})^\top W_E^\top,$$
#
#    with rows indexed by the key's previous token and columns by the query's token. An
#    induction head needs a diagonal that wins: a key matches when its previous token
#    *is* the query's token.
# 3. **What the induction head writes.** Its full OV circuit $W_E W_{OV}^{1.h} W_U$
#    (chapter {doc}`09_full_circuits`) should copy: attending to token $t$ should raise
#    the logit of $t$.
#
# The functions below take the model as an argument, so that the same code measures the
# untrained models.

# %%
def favourite_keys(m, head, biases=False):
    """For each query position p >= 1, the key (0..p) with the highest
    positional QK score, for layer-0 head `head`. biases=False: the
    positional QK circuit W_pos W_QK W_pos^T; biases=True: chapter 5's
    (W_pos W_Q + b_Q)(W_pos W_K + b_K)^T."""
    pos_qk = pos_qk_circuit(m, 0, head).AB                # [n_ctx, n_ctx]
    if biases:
        q = m.W_pos @ m.W_Q[0, head] + m.b_Q[0, head]     # [n_ctx, d_head]
        k = m.W_pos @ m.W_K[0, head] + m.b_K[0, head]
        pos_qk = q @ k.T
    return torch.stack([pos_qk[p, : p + 1].argmax()
                        for p in range(1, m.cfg.n_ctx)])


def looks_back(m, head, biases=False):
    """Fraction of query positions p >= 1 whose favourite key is p - 1."""
    picks = favourite_keys(m, head, biases)
    return (picks == torch.arange(len(picks))).float().mean()


def k_circuit(m, writer, reader):
    """W_E W_OV^{0.writer} (W_QK^{1.reader})^T W_E^T: [key's previous token,
    query token]."""
    W_OV = m.W_V[0, writer] @ m.W_O[0, writer]
    W_QK = m.W_Q[1, reader] @ m.W_K[1, reader].T
    return m.W_E @ W_OV @ W_QK.T @ m.W_E.T


def diagonal_wins(M):
    """Fraction of columns (query tokens) whose largest entry is on the
    diagonal."""
    return (M.argmax(0) == torch.arange(M.shape[0])).float().mean().item()


def k_wins(m):
    """diagonal_wins of every (writer in layer 0, reader in layer 1)."""
    return torch.tensor([[diagonal_wins(k_circuit(m, w, r)) for r in range(H)]
                         for w in range(H)])


back = looks_back(model, 2)
back_bias = looks_back(model, 2, biases=True)         # chapter 5's score
# the positions, not only the counts: where both versions pick key p - 1
back_both = ((favourite_keys(model, 2) == torch.arange(cfg.n_ctx - 1))
             & (favourite_keys(model, 2, biases=True)
                == torch.arange(cfg.n_ctx - 1))).sum().item()
n_pos_q = cfg.n_ctx - 1                               # query positions p >= 1
wins = k_wins(model)                                   # [writer, reader]
copying = copying_scores(model)[1]

pos_ids, token_ids = range(cfg.n_ctx), range(cfg.d_vocab)
pos_qk = pos_qk_circuit(model, 0, 2).AB
future = torch.ones_like(pos_qk, dtype=torch.bool).triu(1)
display(heatmap(pos_qk.masked_fill(future, float("nan")), pos_ids, pos_ids,
                title="L0H2: positional QK", x_title="key position",
                y_title="query position", colorscale="RdBu_r",
                value_format=".2f"))
M = k_circuit(model, 2, 1)
lim = M.abs().max().item()
display(heatmap(M, token_ids, token_ids, title="K-composition L0H2 -> L1H1",
                x_title="query token", y_title="key's previous token",
                zmin=-lim, zmax=lim, colorscale="RdBu_r", value_format=".2f"))

# %% [markdown]
# The same three statistics on the untrained models (hidden cell: the loops of the
# previous cell over the 40 models).

# %% tags=["hide-input"]
null_back = torch.tensor([looks_back(m, h) for m in untrained
                          for h in range(H)])
null_wins = torch.stack([k_wins(m) for m in untrained])  # [40, w, r]
null_copying = torch.stack([copying_scores(m)[1] for m in untrained])

# %% tags=["hide-input"]
# L0H2 was picked as the best previous-token head, so its values are set
# beside the best layer-0 head of each untrained model
finding("L0H2's positional QK circuit scores key p - 1 highest for nearly "
        "every query position p (fraction of positions)", back,
        null=Null.draws("the best of the 4 layer-0 heads of each of 40 "
                        "untrained toy-2l's", null_back.view(N_NULL, H).max(1)
                        .values), chapter="17")
finding("through L0H2, every layer-1 head's keys match the query's token: "
        "the diagonal of the K-composition circuit wins in every column "
        "(the weakest of the four readers)", wins[2].min(),
        null=Null.draws("the best layer-0 writer of each of 40 untrained "
                        "toy-2l's, by its weakest reader",
                        null_wins.min(2).values.max(1).values), chapter="17")
observation("L0H2's positional favourite is key p - 1 for this many of the "
            f"{n_pos_q} query positions: without chapter 5's bias terms, with "
            "them, and with both at the same positions",
            f"{round(back.item() * n_pos_q)}, "
            f"{round(back_bias.item() * n_pos_q)}, {back_both}", chapter="17")
observation("the fraction of query tokens that find their match through any "
            "other layer-0 head, at most", wins[[0, 1, 3]].max(),
            chapter="17")
# the heads of one model share W_E and W_U, so they are not independent
# draws: one draw per model, its best layer-1 head (harder to beat than
# the weakest of its four)
finding("every layer-1 head copies: the smallest copying score of the four, "
        "against the best untrained layer-1 head of each model", copying.min(),
        null=Null.draws("the best of the 4 layer-1 heads of each of 40 "
                        "untrained toy-2l's", null_copying.max(1).values),
        chapter="17")
glue("looks_back", back.item())
glue("looks_back_n", round(back.item() * n_pos_q))
glue("looks_back_bias_n", round(back_bias.item() * n_pos_q))
glue("looks_back_both_n", back_both)
glue("n_pos_q", n_pos_q)
glue("back_null", null_back.max().item())
glue("wins_null", null_wins.max().item())
glue("other_wins", wins[[0, 1, 3]].max().item())
glue("copy_min", copying.min().item())
glue("copy_null", null_copying.max().item())

# %% [markdown]
# All three steps are in the weights. The positional circuit of L0H2 has its largest
# entry just below the diagonal for {glue:text}`looks_back:.0%` of query positions
# (untrained heads: at most {glue:text}`back_null:.0%`). With chapter 5's bias terms added
# back, key $p - 1$ is the favourite at {glue:text}`looks_back_bias_n` of the
# {glue:text}`n_pos_q` query positions, against {glue:text}`looks_back_n` without them,
# and at {glue:text}`looks_back_both_n` positions in both.
# The K-composition circuit
# through L0H2 has a diagonal that wins in every column, for every layer-1 head:
# whatever the query token, the key it prefers is the one preceded by the same token
# (untrained pairs: at most {glue:text}`wins_null:.0%` of columns). Through the other
# layer-0 heads the diagonal wins for at most {glue:text}`other_wins:.0%` of query
# tokens. And every layer-1 head's OV circuit copies: copying scores of at least
# {glue:text}`copy_min:.3f`, from the eigenvalues of the full OV circuit (untrained:
# at most {glue:text}`copy_null:.2f`; the test takes one draw per untrained model, its
# best layer-1 head, since the heads of one model share its embedding and unembedding).
#
# ### Copying accuracy: one head, or four
#
# The copying score is a statement about eigenvalues. A more direct one: in each head's
# full OV circuit $W_E W_V W_O W_U$ (row: attended token, column: output logit), is the
# diagonal entry the largest of its row (top-1), or at least among the five largest
# (top-5)? The four layer-1 heads attend mostly to the same key (their induction scores
# above), so their outputs add, approximately, and we ask the same of their sum. Only
# approximately, for two reasons: each head puts {glue:text}`ind_min:.2f` to
# {glue:text}`ind_max:.2f` of its attention on that key, not all of it, and the rest goes
# elsewhere, head by head; and the full OV circuit reads only the attended token's
# embedding, while a value also reads what the layer-0 heads wrote at that position (the
# positional embedding goes only into queries and keys).

# %%
def top_k_accuracy(M, k):
    """Fraction of rows of the square M whose diagonal entry is among the
    row's k largest."""
    top = M.topk(k, dim=-1).indices
    hit = top == torch.arange(M.shape[0])[:, None]
    return hit.any(-1).float().mean().item()


def full_ovs(m):
    """The layer-1 heads' full OV circuits [head, vocab, vocab]."""
    return torch.stack([full_ov_circuit(m, 1, h).AB for h in range(H)])


full_ov = full_ovs(model)
ov_top1 = [top_k_accuracy(F_h, 1) for F_h in full_ov]       # per head
ov_top5 = [top_k_accuracy(F_h, 5) for F_h in full_ov]
sum_top1 = top_k_accuracy(full_ov.sum(0), 1)
null_sum_top1 = [top_k_accuracy(full_ovs(m).sum(0), 1) for m in untrained]

F = full_ov.sum(0)
lim = F.abs().max().item()
display(heatmap(F, token_ids, token_ids,
                title="full OV, layer-1 heads summed", x_title="output logit",
                y_title="attended token", zmin=-lim, zmax=lim,
                colorscale="RdBu_r", value_format=".2f"))
observation("one layer-1 head alone: top-1 copying accuracy per head",
            " ".join(f"{a:.2f}" for a in ov_top1), chapter="17")
observation("one layer-1 head alone: top-5 copying accuracy per head",
            " ".join(f"{a:.2f}" for a in ov_top5), chapter="17")
finding("the four layer-1 OV circuits summed make every attended token its "
        "own top logit (top-1 accuracy of the sum)", sum_top1,
        null=Null.draws("the summed layer-1 OV circuits of 40 untrained "
                        "toy-2l's", null_sum_top1), chapter="17")
glue("ov_top1_lo", min(ov_top1))
glue("ov_top1_hi", max(ov_top1))
glue("ov_top5_max", max(ov_top5))
glue("sum_top1", sum_top1)
glue("sum_top1_null", max(null_sum_top1))

# %% [markdown]
# One head alone makes the attended token its top logit for only
# {glue:text}`ov_top1_lo:.0%` to {glue:text}`ov_top1_hi:.0%` of tokens, and no head
# ranks it among its five largest for more than {glue:text}`ov_top5_max:.0%`: the tokens
# a head misses are mostly not near misses. The four heads' sum copies
# {glue:text}`sum_top1:.0%` of tokens exactly (untrained sums: at most
# {glue:text}`sum_top1_null:.0%`). The copying is shared out between the heads; chapter
# {doc}`17_induction_evidence` meets the same sharing when it patches one head at a
# time.
#
# ### The attention score, split by where its inputs come from
#
# In `toy-2l` the input of layer 1 at each position is a sum: the token embedding, the
# positional embedding (added to queries and keys only), the output of the
# previous-token head L0H2, the outputs of the other layer-0 heads, and layer 0's output
# bias $b_O$. The query is that sum times $W_Q$ plus $b_Q$, the key the same with $W_K$
# and $b_K$, so the score $q \cdot k / \sqrt{d_\text{head}}$ is a sum of $6 \times 6$
# terms, one per (query part, key part). They must add up to the score the model
# computes: an identity. Which term makes the induction head pick its target is a
# finding: for every query of the second copy we take each term at the induction target
# minus its mean over the other keys the query may attend to. We split the head with the
# highest induction score on this batch, {glue:text}`ind_name`; its lead over the next
# layer-1 head is only {glue:text}`ind_lead:.3f`.

# %%
ind_head = int(ind[1].argmax())              # the best layer-1 head
ind_name = f"L1H{ind_head}"
glue("ind_name", ind_name)
glue("ind_lead", (ind[1].max() - ind[1].topk(2).values[1]).item())
# layer 1's input, split by where it comes from: [part, batch, pos, d_model]
outs0 = torch.einsum("bphd,hdm->hbpm", cache["z", 0], model.W_O[0])
part_names = ["embedding", "position", "L0H2", "other L0 heads", "b_O",
              "bias b_Q / b_K"]
parts = torch.stack([cache["hook_embed"],
                     cache["hook_pos_embed"].expand_as(outs0[2]), outs0[2],
                     outs0[[h for h in range(H) if h != 2]].sum(0),
                     model.b_O[0].expand_as(outs0[2])])
q_parts = torch.cat([parts @ model.W_Q[1, ind_head],
                     model.b_Q[1, ind_head].expand(1, *parts.shape[1:3], -1)])
k_parts = torch.cat([parts @ model.W_K[1, ind_head],
                     model.b_K[1, ind_head].expand(1, *parts.shape[1:3], -1)])
score_parts = torch.einsum("ibqd,jbkd->ijbqk", q_parts,
                           k_parts) / math.sqrt(cfg.d_head)
causal = torch.ones(2 * n, 2 * n, dtype=torch.bool).tril()
model_scores = cache["attn_scores", 1][:, ind_head]          # [batch, q, k]

# each term at the induction target minus its mean over the query's other keys
queries = torch.arange(n, 2 * n)
targets = queries - n + 1
allowed = causal[queries].clone()
allowed[torch.arange(n), targets] = False                     # the other keys
at_target = score_parts[..., queries, targets]                # [6, 6, b, n]
others = (score_parts[..., queries, :] * allowed).sum(-1) / allowed.sum(-1)
pull_seq = (at_target - others).mean(-1)                      # [6, 6, batch]
pull = pull_seq.mean(-1)                                      # [6, 6]

term_labels = [f"key {p}" for p in part_names]
lim = pull.abs().max().item()
display(heatmap(pull, term_labels, [f"query {p}" for p in part_names],
                title=f"{ind_name}: score at the induction target minus the other "
                      "keys' mean", x_title="key part", y_title="query part",
                zmid=0, zmin=-lim, zmax=lim, colorscale="RdBu_r",
                value_format=".2f"))

# %% [markdown]
# The identity, with its rounding bound (hidden: the bound counts layer 0's output, the
# five parts' sum, the projection, the dot product and the 36 terms, each on numbers no
# larger than the products of the parts' absolute values).

# %% tags=["hide-input"]
abs_q, abs_k = q_parts.abs().sum(0), k_parts.abs().sum(0)
split_scale = ((abs_q @ abs_k.transpose(-1, -2)).max().item()
               / math.sqrt(cfg.d_head))
split_terms = ((cfg.d_head * H + H + 1) + 5 + (cfg.d_model + 1)
               + (cfg.d_head + 1) + len(part_names) ** 2)
identity_close("the 36 (query part, key part) terms add up to "
               f"{ind_name}'s attention score", score_parts.sum((0, 1))[:, causal],
               model_scores[:, causal], terms=split_terms, scale=split_scale,
               chapter="17")

# %% [markdown]
# Two findings on this split, each tested across the 16 sequences by a bootstrap (the
# sequences resampled 2,000 times): that the K-composition term (query embedding, key
# L0H2) pulls harder than any other, and that on its own it picks the induction target
# far more often than a term that knew nothing about the target would (one over the
# number of keys a query may attend to, averaged over the queries).

# %% tags=["hide-input"]
def masked(s):
    """Scores [batch, q, k] of the second-copy queries, future keys -inf."""
    return s[:, queries].masked_fill(~causal[queries], -math.inf)


k_term = score_parts[0, 2]                    # query embedding x key L0H2
match_k_seq = (masked(k_term).argmax(-1) == targets).float().mean(-1)
match_full = (masked(model_scores).argmax(-1) == targets).float().mean()
base_rate = (1 / (queries + 1).float()).mean().item()
flat = pull_seq.flatten(0, 1)                                 # [36, batch]
is_k = torch.arange(36) == part_names.index("L0H2")    # (embedding, L0H2)
gen = torch.Generator().manual_seed(0)
resample = torch.randint(0, len(tokens), (2000, len(tokens)), generator=gen)
means = flat[:, resample].mean(-1)                            # [36, 2000]
margin_boot = means[is_k][0] - means[~is_k].max(0).values
margin = pull.flatten()[is_k][0] - pull.flatten()[~is_k].max()
second = divmod(int(pull.flatten().masked_fill(is_k, -math.inf).argmax()),
                len(part_names))
finding(f"the term that most separates {ind_name}'s induction target from "
        "the other keys is (query embedding, key L0H2 output): its margin over "
        "the next term", margin, null=Null.point("no margin", 0.0),
        boot=margin_boot, chapter="17")
finding("the K-composition term alone puts its largest value on the "
        "induction target (fraction of second-copy queries)",
        match_k_seq.mean(), null=Null.point("a term blind to the target: "
                                            "one over the keys", base_rate),
        boot=match_k_seq[resample].mean(-1), chapter="17")
observation("the full score picks the induction target (fraction of "
            "second-copy queries)", match_full, chapter="17")
# the (query L0H2, key other L0 heads) term, its key part split by head:
# linear in the key part, so the three pulls add up to that term's pull
def pull_of(q, k, others=allowed):
    """One term's score q . k at the induction target minus its mean over
    the query's other keys (`others`, [query, key]), mean over the second
    copy. q, k: [..., batch, pos, d_head] -> [..., batch]."""
    s = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(cfg.d_head)
    at = s[..., queries, targets]
    rest = (s[..., queries, :] * others).sum(-1) / others.sum(-1)
    return (at - rest).mean(-1)


key_pull_by_head = {h: pull_of(q_parts[2], outs0[h] @ model.W_K[1, ind_head])
                    .mean().item() for h in range(H) if h != 2}
observation("the (query L0H2, key other layer-0 heads) term, split by the key "
            "part's head", ", ".join(f"L0H{h} {v:.2f}" for h, v in
                                     key_pull_by_head.items()), chapter="17")
glue("l0h1_key_pull", key_pull_by_head[1])
glue("l0h03_key_pull", key_pull_by_head[0] + key_pull_by_head[3])
glue("k_term_pull", pull[0, 2].item())
glue("second_pull", pull[second].item())
glue("second_q", part_names[second[0]])
glue("second_k", part_names[second[1]])
glue("pos_term_pull", pull[1, 1].item())
glue("total_pull", pull.sum().item())
glue("k_share", (pull[0, 2] / pull.sum()).item())
glue("match_k_term", match_k_seq.mean().item())
glue("match_base", base_rate)
glue("match_score", match_full.item())
# Ties: tokens are drawn with replacement from d_vocab, so a second-copy
# query's token may precede more than one earlier key. valid[b, q, k]: key
# k (1 <= k <= query) is preceded by the query's token, the induction rule
# with one token of agreement; the true target is one of them.
tok_q = tokens[:, queries]                                    # [batch, n]
prev_tok = torch.cat([torch.full_like(tokens[:, :1], -1), tokens[:, :-1]], 1)
valid = ((prev_tok[:, None, :] == tok_q[..., None])
         & causal[queries][None])                             # [b, n, key]
ambiguous = valid.sum(-1) > 1                                 # [batch, n]
pick_k = masked(k_term).argmax(-1)                            # [batch, n]
pick_full = masked(model_scores).argmax(-1)
k_valid = valid.gather(-1, pick_k[..., None])[..., 0]
k_true, full_true = pick_k == targets, pick_full == targets
tie_rates = {"k_valid": k_valid.float().mean().item(),
             "k_true_unique": k_true[~ambiguous].float().mean().item(),
             "k_true_ambiguous": k_true[ambiguous].float().mean().item(),
             "full_true_ambiguous": full_true[ambiguous].float().mean().item(),
             "full_true_unique": full_true[~ambiguous].float().mean().item()}
observation("second-copy queries with more than one key preceded by their "
            "token (of all second-copy queries)",
            f"{int(ambiguous.sum())} of {ambiguous.numel()}", chapter="17")
observation("the K-composition term alone: picks some key preceded by the "
            "query's token; picks the true target where that key is unique, "
            "and where it is not; the full score on the same two groups",
            ", ".join(f"{k} {v:.3f}" for k, v in tie_rates.items()),
            chapter="17")
# which terms break the ties: the true target's win rate on the ambiguous
# queries for the K-composition term plus one other term, and for the full
# score less one term (second: the (query L0H2, key other L0 heads) term)
pos_term = score_parts[1, 1]                  # query position x key position


def true_on_ambiguous(s):
    """Fraction of ambiguous second-copy queries whose top key under the
    scores s [batch, q, k] is the true target."""
    return (masked(s).argmax(-1) == targets)[ambiguous].float().mean().item()


tie_terms = {"k_plus_second": true_on_ambiguous(k_term + score_parts[second]),
             "k_plus_pos": true_on_ambiguous(k_term + pos_term),
             "full_less_second": true_on_ambiguous(model_scores
                                                   - score_parts[second]),
             "full_less_pos": true_on_ambiguous(model_scores - pos_term)}
observation("the true target's share of the ambiguous queries: the "
            "K-composition term plus the second term, plus the positional term; "
            "the full score less the second term, less the positional term",
            ", ".join(f"{k} {v:.3f}" for k, v in tie_terms.items()),
            chapter="17")
for key, value in tie_terms.items():
    glue(key, value)
glue("n_ambiguous", int(ambiguous.sum()))
glue("d_vocab", cfg.d_vocab)
glue("n_queries_all", ambiguous.numel())
glue("share_ambiguous", ambiguous.float().mean().item())
for key, value in tie_rates.items():
    glue(key, value)

# %% [markdown]
# The induction target's score exceeds the mean of the other keys by
# {glue:text}`total_pull:.1f` in total. The largest term, {glue:text}`k_term_pull:.1f`
# ({glue:text}`k_share:.0%` of it), is (query embedding, key L0H2 output): the key says
# "my previous token was A" and the query says "I am A". The second,
# {glue:text}`second_pull:.1f`, is ({glue:text}`second_q`, {glue:text}`second_k`): the
# query's own previous token, written there by L0H2, against what the other layer-0
# heads wrote at the key. Split by head, its key part is almost all L0H1's: L0H1 alone
# gives {glue:text}`l0h1_key_pull:.2f`, L0H0 and L0H3 together
# {glue:text}`l0h03_key_pull:.2f`. L0H1 attends two tokens back early in the context
# (below: up to about position {glue:text}`two_back_last`), and the induction targets of
# these sequences lie at positions 1 to {glue:text}`n_copy`, so the term could check a second token of
# agreement: the token before the query against the token two before the key. It could
# also be positional, for the same reason: the targets are early keys, and L0H1 writes
# differently early in the context, so a query might prefer early keys whatever their
# tokens. The controls below tell the two apart. The positional term (query position,
# key position) adds
# {glue:text}`pos_term_pull:.1f`; it depends on positions alone, and here every target
# lies $n - 1$ positions before its query. Alone, the K-composition term picks the
# induction target for {glue:text}`match_k_term:.0%` of second-copy queries (a blind
# term would for {glue:text}`match_base:.1%`); the full score picks it for
# {glue:text}`match_score:.0%`.
#
# Much of that gap is ties. The tokens are drawn with replacement from a vocabulary of
# {glue:text}`d_vocab`, so a query's token often precedes more than one earlier key: for
# {glue:text}`n_ambiguous` of the {glue:text}`n_queries_all` second-copy queries
# ({glue:text}`share_ambiguous:.1%`), more than one key is preceded by the query's token,
# and a term that checks only that one token cannot tell them apart. The K-composition
# term picks *some* such key for {glue:text}`k_valid:.1%` of queries; it picks the true
# target for {glue:text}`k_true_unique:.1%` of the queries where that key is unique, and
# for only {glue:text}`k_true_ambiguous:.0%` of the ambiguous ones. The full score picks
# the true target for {glue:text}`full_true_ambiguous:.0%` of the ambiguous queries
# ({glue:text}`full_true_unique:.1%` of the unique ones): something in it beyond the
# one-token match breaks the ties. Two terms could: the second term, as a second token
# of agreement would, and the positional one, since every target lies $n - 1$ positions
# before its query and no other key does. Added to the K-composition term, the
# second term finds the true target for {glue:text}`k_plus_second:.0%` of the ambiguous
# queries, the positional term for {glue:text}`k_plus_pos:.0%`; taken out of the full
# score, the second term leaves {glue:text}`full_less_second:.0%`, the positional term
# {glue:text}`full_less_pos:.0%`. Both break ties, the second term more. These are
# observations on this batch, with no null.
#
# **Agreement or position?** Two controls on the (query L0H2, key L0H1) piece. We chose
# L0H1 after seeing the split above, as the largest of the three heads' key parts, so the
# piece tested is picked post hoc; the controls do not correct for that choice. First, we
# take the query side from another of the 16 sequences: every position stays where it
# was, so anything positional survives, but the query's previous token no longer has
# anything to do with the key's context. The null is that pull over 1,000 random
# pairings of the sequences, none paired with itself. Second, we compare the target only
# with the other keys of the first copy, which lie as early in the context as the
# target does, with the same null.

# %% tags=["hide-input"]
q_prev = q_parts[2]                          # query part: L0H2 [batch, pos, d]
k_two = outs0[1] @ model.W_K[1, ind_head]    # key part: L0H1 alone
first_copy = allowed.clone()
first_copy[:, n:] = False                    # the other keys, first copy only
gen = torch.Generator().manual_seed(1)
pairings = []
while len(pairings) < 1000:                  # no sequence paired with itself
    perm = torch.randperm(len(tokens), generator=gen)
    if bool((perm != torch.arange(len(tokens))).all()):
        pairings.append(perm)
pairings = torch.stack(pairings)             # [1000, batch]
q_other = q_prev[pairings]                   # [1000, batch, pos, d]
pull_same = pull_of(q_prev, k_two).mean()
pull_mis = pull_of(q_other, k_two).mean(-1)                  # [1000]
pull_first = pull_of(q_prev, k_two, first_copy).mean()
pull_first_mis = pull_of(q_other, k_two, first_copy).mean(-1)
finding("the (query L0H2, key L0H1) piece's pull towards the induction "
        "target needs query and key from the same sequence (its pull, against "
        "the query side taken from another sequence)", pull_same,
        null=Null.draws("the query side from another of the 16 sequences, "
                        "same positions: 1,000 random pairings",
                        pull_mis), chapter="17")
finding("the same with the target compared only with the other first-copy "
        "keys, as early as the target", pull_first,
        null=Null.draws("the query side from another of the 16 sequences, "
                        "other keys in the first copy only: 1,000 random "
                        "pairings", pull_first_mis), chapter="17")
glue("pull_same", pull_same.item())
glue("pull_mis_mean", pull_mis.mean().item())
glue("pull_mis_max", pull_mis.max().item())
glue("pull_first", pull_first.item())
glue("pull_first_mis_mean", pull_first_mis.mean().item())
glue("pull_first_mis_max", pull_first_mis.max().item())

# %% [markdown]
# With the query side from another sequence the piece's pull of
# {glue:text}`pull_same:.2f` falls to {glue:text}`pull_mis_mean:.2f` on average over the
# pairings (at most {glue:text}`pull_mis_max:.2f`). Compared only with the other
# first-copy keys, it pulls {glue:text}`pull_first:.2f`, and with the query side from
# another sequence {glue:text}`pull_first_mis_mean:.2f` on average (at most
# {glue:text}`pull_first_mis_max:.2f`). So the pull is not a preference for early keys,
# nor anything else that positions alone would give: it needs the query's L0H2 output
# and the key's L0H1 output to come from the same sequence, as a check of a second token
# of agreement would. That the tokens compared are the one before the query and the one
# two before the key is read from the two heads' attention (L0H2's here, L0H1's below),
# not tested by these controls. The ties above point the same way: where several keys
# are preceded by the query's token, the K-composition term with the second term finds
# the true target for {glue:text}`k_plus_second:.0%` of queries, against
# {glue:text}`k_true_ambiguous:.0%` for the K-composition term alone (an observation,
# not a test of which tokens are compared).
#
# ### L0H1 looks two back, but only early in the context
#
# How much L0H1 attends two tokens back depends on where one measures it, and the book
# gives two numbers for it. A layer-0 head sees only tokens and positions, so we can
# read its attention to $p - 2$ as a function of the query position $p$.

# %%
def two_back_by_position(c):
    """L0H1's attention to p - 2, mean over the batch: [p = 2 .. 2n - 1]."""
    return c["pattern", 0][:, 1].diagonal(offset=-2, dim1=-2,
                                          dim2=-1).mean(0)


two_back = two_back_by_position(cache)
p_axis = torch.arange(2, 2 * n)
ch13 = (p_axis >= 2) & (p_axis <= 39)        # chapter 13: p = 2..39 of 40
last_high = int(p_axis[two_back > 0.5].max())
# the same on sequences whose second half is fresh: no repeat at all
last_high_fresh = int(p_axis[two_back_by_position(fresh_cache) > 0.5].max())
# chapter 13's own number: its one sequence of 20 tokens repeated (seed 1),
# positions p = 2..39 (no interval over positions: they are not
# exchangeable draws, the batch's mean collapses after p = last_high)
ch13_tokens = repeated_random_tokens(1, 20, cfg.d_vocab, seed=1)
ch13_weights = model.run_with_cache(ch13_tokens)[1]["pattern", 0][
    0, 1].diagonal(offset=-2)                                # p = 2..39
ch13_own = ch13_weights.mean().item()
ch13_own_late = ch13_weights[p_axis[:len(ch13_weights)] > last_high].mean()
fig, ax = plt.subplots(figsize=(8, 2.4))
ax.plot(p_axis, two_back, color="tab:blue", lw=1.5)
ax.axvspan(2, 39, color="tab:orange", alpha=0.15,
           label="chapter 13's query positions (40 tokens)")
ax.axvline(n, color="gray", ls=":", lw=1, label="start of the second copy")
ax.set(xlabel="query position p", ylabel="attention to p - 2", ylim=(0, 1.05),
       title="L0H1, mean over the 16 sequences")
ax.legend(fontsize=8, loc="center left")
fig.tight_layout()
plt.show()
for name, value, what in [
        ("two_back_all", two_back.mean(), "over this batch's p = 2..63"),
        ("two_back_ch13", two_back[ch13].mean(), "over p = 2..39"),
        ("two_back_early", two_back[p_axis <= last_high].mean(),
         f"over p = 2..{last_high}"),
        ("two_back_late", two_back[p_axis > last_high].mean(),
         f"over p = {last_high + 1}..63")]:
    observation(f"L0H1's mean attention to p - 2, {what}", value,
                chapter="17")
    glue(name, float(value))
# per sequence: the late mean of each, and a bootstrap over the 16
# sequences (the exchangeable draws here) for the two averages quoted
per_seq = cache["pattern", 0][:, 1].diagonal(offset=-2, dim1=-2, dim2=-1)
late_seq_max = per_seq[:, p_axis > last_high].mean(-1).max().item()
gen = torch.Generator().manual_seed(2)
by_seq = torch.randint(0, len(tokens), (2000, len(tokens)), generator=gen)
for name, cols, what in [("two_back_all", p_axis >= 2, "p = 2..63"),
                         ("two_back_ch13", ch13, "p = 2..39")]:
    boot = per_seq[:, cols].mean(-1)[by_seq].mean(-1)            # [2000]
    lo, hi = boot.quantile(0.025).item(), boot.quantile(0.975).item()
    observation(f"L0H1's mean attention to p - 2 over {what}: 95% bootstrap "
                "interval over the 16 sequences", f"[{lo:.3f}, {hi:.3f}]",
                chapter="17")
    glue(f"{name}_lo", lo)
    glue(f"{name}_hi", hi)
observation(f"the largest of the 16 sequences' means after p = {last_high}",
            late_seq_max, chapter="17")
glue("two_back_late_seq_max", late_seq_max)
observation("chapter 13's sequence (40 tokens, seed 1): L0H1's mean attention "
            "to p - 2 over p = 2..39, and over the positions after the last "
            "one where this batch's curve exceeds 0.5",
            f"{ch13_own:.3f}, {ch13_own_late:.3f}", chapter="17")
observation("the last query position where L0H1's mean attention to p - 2 "
            "exceeds 0.5, on repeats and on sequences with a fresh second "
            "half", f"{last_high}, {last_high_fresh}", chapter="17")
glue("two_back_last", last_high)
glue("two_back_last_fresh", last_high_fresh)
glue("ch13_own", ch13_own)
glue("ch13_own_late", float(ch13_own_late))

# %% [markdown]
# Every number here is an average, over the 16 sequences and over a range of query
# positions. Up to position {glue:text}`two_back_last`, the last at which the curve
# exceeds 0.5, L0H1 puts {glue:text}`two_back_early:.2f` of its attention two tokens back
# on average; beyond it, {glue:text}`two_back_late:.2f`. The second copy starts at
# position {glue:text}`n_copy`,
# and on sequences whose second half is fresh the curve last exceeds 0.5 at
# {glue:text}`two_back_last_fresh`: the break is a matter of absolute position, not of
# the repeat. Averaged over all query positions of this chapter's 64-token sequences
# the attention two back is {glue:text}`two_back_all:.2f`, the number chapter
# {doc}`17_induction_evidence` quotes. Over the query positions 2 to 39, the ones
# chapter {doc}`13_path_expansion` averages on its single 40-token sequence, the same
# batch gives {glue:text}`two_back_ch13:.2f`; chapter 13's own sequence gives
# {glue:text}`ch13_own:.2f`. A bootstrap over positions would treat them as
# exchangeable draws, and they are not (on chapter 13's sequence, too, the attention
# two back falls to {glue:text}`ch13_own_late:.2f` after position
# {glue:text}`two_back_last`). The 16 sequences are exchangeable, and a bootstrap over
# them is narrow: [{glue:text}`two_back_all_lo:.3f`, {glue:text}`two_back_all_hi:.3f`]
# over all query positions, [{glue:text}`two_back_ch13_lo:.3f`,
# {glue:text}`two_back_ch13_hi:.3f`] over positions 2 to 39; after position
# {glue:text}`two_back_last` no single sequence's mean exceeds
# {glue:text}`two_back_late_seq_max:.3f`. What moves the number is which positions the
# mean takes, not which sequences. The two chapters measure the same head on different
# positions.
#
# ### The same split in a model with rotary positions
#
# The 36-term split is written for `toy-2l`, which adds a positional embedding to what
# queries and keys read (shortformer). Rotary position embeddings (chapter
# {doc}`05_positional`), which SmolLM2 uses (the 4-bit SmolLM2-135M-Instruct of chapter
# {doc}`04_embeddings`), change it in two ways. (SmolLM2 also differs in a way that has
# nothing to do with positions: it is not attention-only, so a layer's input holds the
# outputs of every earlier layer's MLP and of every head in every earlier layer, and the
# split would need a part for each of them, not six.) There is no
# positional part: nothing positional is added to the stream. Instead the query at $i$
# and the key at $j$ are rotated by their positions before the dot product, so each
# (query part $a$, key part $b$) term becomes
#
# $$x^a_i\, W_Q R_{i-j} W_K^\top\, (x^b_j)^\top / \sqrt{d_\text{head}},$$
#
# with a bilinear form $W_{QK}(\Delta) = W_Q R_\Delta W_K^\top$ for every offset
# $\Delta = i - j$ (`circuitbook.circuits.rotary_qk(model, layer, head, offsets)`). The
# split still adds up exactly, term by term, but position now acts inside every term
# rather than as a row and a column of its own, and a term's pull towards a key depends
# on how far back the key is. In SmolLM2 the parts are also divided by the RMSNorm
# scale of their position and multiplied by its gain, which is linear once that scale
# is held, as chapter {doc}`13_path_expansion` holds the final norm's; Llama-style
# models have no $b_Q$, $b_K$ terms. Two more features of SmolLM2 matter here. Its
# attention is grouped-query: the 9 query heads of a layer share 3 key heads, so each
# term's key side goes through the $W_K$ of the head's group, and the three query heads
# of a group differ only on the query side. And its attention and MLP weights are stored
# in 4 bits (its embedding in 8 bits, its norm gains in float32; chapter
# {doc}`04_embeddings`) and turned back into floating point before use: the split adds up exactly for those
# dequantised weights, which are the model as it runs, not for the full-precision model
# they were rounded from.

# %% [markdown]
# ## Summary
#
# - An induction head predicts "B" after "A B ... A". It needs two heads: a
#   previous-token head that writes "my previous token was A" at B's position, and an
#   induction head whose keys read that (K-composition), whose query asks for its own
#   token, and whose OV circuit copies what it finds. Two hand-set attention layers
#   predict every token of the second copy after its first, on {glue:text}`n_hand`
#   sequences whose halves have no repeated token.
# - In `toy-2l`, on one batch of 16 repeated random sequences, the previous-token head
#   is L0H2 (score {glue:text}`prev_best:.2f`), and all four layer-1 heads are induction
#   heads (scores {glue:text}`ind_min:.2f` to {glue:text}`ind_max:.2f`), each beyond
#   what the trained heads reach on any one sequence whose second half is fresh.
# - The weights show each step: L0H2's positional QK band, a diagonal K-composition
#   circuit from L0H2 into every layer-1 head, and copying OV circuits. One layer-1
#   head's full OV circuit makes the attended token its top logit for
#   {glue:text}`ov_top1_lo:.0%` to {glue:text}`ov_top1_hi:.0%` of the vocabulary; the
#   four together, for {glue:text}`sum_top1:.0%`.
# - {glue:text}`ind_name`'s attention score splits into 36 (query part, key part) terms
#   that add up
#   exactly; on this batch the largest term, {glue:text}`k_share:.0%` of the total
#   pull towards the induction target ({glue:text}`total_pull:.1f`), is the query's
#   token against L0H2's output at the key, and the second is L0H2's output at the
#   query against what the other layer-0 heads wrote at the key, almost all of it L0H1's.
#   That
#   second pull needs query and key from the same sequence: L0H1's piece of it,
#   {glue:text}`pull_same:.2f`, falls to {glue:text}`pull_mis_mean:.2f` on average when
#   the query side comes from another sequence.
#   Under rotary embeddings the split keeps its terms, each with an offset-dependent
#   bilinear form, and loses its positional part.
# - L0H1 attends two back, on average over the batch, only up to query position
#   {glue:text}`two_back_last`: that is why its mean over positions is
#   {glue:text}`two_back_all:.2f` on this chapter's 64 tokens and
#   {glue:text}`ch13_own:.2f` on chapter 13's 40.
