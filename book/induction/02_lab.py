# %% [markdown]
# # The induction lab: toy-2l in your browser
#
# The explainers walked through the induction circuit one step and one pair of heads at a
# time. Here you drive the whole model: `toy-2l`, the book's two-layer attention-only model
# on random tokens (chapters 16 and {doc}`17a <../17_induction_heads>`),
# computed in your browser by a few matrix products in JavaScript, with no Python behind it
# on this site. Type a sequence, or draw **random tokens, repeated**, and read off both
# layers' attention patterns, the model's top predictions, the loss at every position, and
# the path expansion of the logit it predicts. Click a head to ablate it and see what breaks.
# The first cell imports what the page uses and loads `toy-2l`.

# %% tags=["hide-input"]
import warnings

import torch

from circuitbook.book import (Null, attn_only_forward_terms, bootstrap_means,
                              finding, glue, identity_close, null_test,
                              observation)
from circuitbook.data import repeated_random_tokens
from circuitbook.heads import ablate, induction_scores
from circuitbook.models import load
from circuitbook.paths import logit_attribution
from circuitbook.widgets.explainers import pick_heads
from circuitbook.widgets.lab import induction_lab
from circuitbook.widgets.lab_export import reference_tokens

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)
model = load("toy-2l")

# %% [markdown]
# ## The lab
#
# - The **token box** holds the sequence as token ids (`t0` to `t63`); edit it, open "click
#   tokens to add them", or press **random tokens, repeated** for a fresh random segment of
#   16 to 32 tokens followed by a copy of itself. That is close to, not the same as, the data
#   `toy-2l` was trained on: there a segment of 16 to 32 tokens is tiled across all 64
#   positions from a random starting phase, so a training sequence holds one to four full
#   copies, with a partial copy at one or both ends unless the segment's length divides 64 and the
#   phase is zero (a 32-token segment gives one full copy between two partial ones at most
#   phases).
#   Tokens are model inputs only: `toy-2l` never saw language, so they are shown as ids.
# - The **tokens below the box** choose the position whose predictions are shown: click one.
# - Each **pattern** is one head: row $q$ shows where the query at position $q$ attends
#   (strong colour: much attention); the chosen position's row is tinted.
# - **Clicking a head** ablates it, by zero, then by its mean, then not at all: the same
#   substitution as `circuitbook.heads.ablate`, whose mean is the head's average `z` on a
#   clean run over repeated random tokens (exported with the page).
# - The **path expansion** (chapter 13) splits the top prediction's logit into the direct
#   path, each head's path, the virtual heads of two heads in a row, and the output biases,
#   with the patterns held as they are; the caption prints their sum beside the logit.

# %%
lab = induction_lab("toy-2l")
lab

# %% [markdown]
# ## What breaks when the previous-token head goes
#
# The lab starts on a random segment of 24 tokens, repeated. On the second copy the
# layer-1 induction heads (`toy-2l` has four) look at the token after the earlier copy of the
# current one, and the loss falls near zero. They find that token through K-composition with
# the previous-token head (chapter 16 cuts the channel; chapter 18 scores it): so ablating the
# previous-token head should blind them. We measure it here, in Python, on the same model,
# with `circuitbook.heads.ablate` and the same means the page uses, on 32 fresh random
# segments of 24 tokens, repeated.

# %%
(l0, h0), (l1, h1) = pick_heads(model)
ind_scores = induction_scores(model)[l1]      # the scores pick_heads ranks layer 1 by
helper = 1   # L0H1, chapter 17b's partial helper: named there, on its own batch
n = 24
tokens = repeated_random_tokens(32, n, model.cfg.d_vocab, seed=1)  # [32, 48]
second = torch.arange(n, 2 * n)                        # second-copy queries
ref = reference_tokens(model)


def measure(heads=(), how="mean"):
    """Per sequence: (each layer-1 head's attention to the token after the
    earlier copy [32, 4], loss on the first copy [32], loss on the second copy
    from its second token [32]: its first cannot be predicted), with ``heads``
    ablated."""
    hooks = []
    if heads:
        reference = ref if how == "mean" else None
        hooks = ablate(model, list(heads), how,
                       reference_tokens=reference).fwd_hooks
    with torch.no_grad(), model.hooks(fwd_hooks=hooks):
        logits, cache = model.run_with_cache(tokens)
    attn = cache["pattern", l1][:, :, second, second - n + 1].mean(-1)  # [32, 4]
    logp = logits.log_softmax(-1)[:, :-1]
    loss = -logp.gather(-1, tokens[:, 1:, None])[..., 0]          # [32, 47]
    return attn, loss[:, : n - 1].mean(-1), loss[:, n:].mean(-1)


clean = measure()
broken = measure([(l0, h0)])
zeroed = measure([(l0, h0)], "zero")
others = {h: measure([(l0, h)]) for h in range(model.cfg.n_heads) if h != h0}
print(f"{'':28}{'attention to the target':^28}")
print(f"{'':28}" + "".join(f"{f'L{l1}H{h}':>7}" for h in range(model.cfg.n_heads))
      + f"{'loss 1st':>10}{'loss 2nd':>10}")
for name, row in [("clean", clean), (f"mean-ablate L{l0}H{h0}", broken),
                  (f"zero-ablate L{l0}H{h0}", zeroed)] + \
        [(f"mean-ablate L{l0}H{h}", r) for h, r in others.items()]:
    print(f"{name:28}" + "".join(f"{a:7.3f}" for a in row[0].mean(0).tolist())
          + f"{row[1].mean():10.2f}{row[2].mean():10.2f}")
chance = float(torch.log(torch.tensor(float(model.cfg.d_vocab))))
for key, row in [("clean", clean), ("broken", broken), ("zeroed", zeroed)]:
    glue(f"lab_{key}_attn", float(row[0][:, h1].mean()))
    glue(f"lab_{key}_loss2", float(row[2].mean()))
for key, row in [("clean", clean), ("broken", broken)]:     # all four heads
    glue(f"lab_l1_{key}_lo", float(row[0].mean(0).min()))
    glue(f"lab_l1_{key}_hi", float(row[0].mean(0).max()))
glue("lab_ind_lo", float(ind_scores.min()))
glue("lab_ind_hi", float(ind_scores.max()))
top2 = ind_scores.sort(descending=True).values[:2]
glue("lab_ind_lead", float(top2[0] - top2[1]))
# even attention: 1 / (q + 1) over the keys of second-copy query q
glue("lab_even", float((1 / (second + 1).float()).mean()))
glue("lab_chance", chance)
glue("lab_broken_loss1", float(broken[1].mean()))
glue("lab_kept", float(broken[1].mean() - broken[2].mean()))
glue("lab_prev", f"L{l0}H{h0}")
glue("lab_ind", f"L{l1}H{h1}")
glue("lab_other", f"L{l0}H{helper}")
glue("lab_other_loss2", float(others[helper][2].mean()))
worst_head = max(others, key=lambda h: float(others[h][2].mean()))
drop = clean[0] - broken[0]                                  # [32, 4]
finding(f"mean-ablating toy-2l's previous-token head lowers L{l1}H{h1}'s "
        "attention to the token after the earlier copy (clean minus "
        "ablated, per sequence)", drop[:, h1].mean(),
        null=Null.point("no change", 0.0), boot=bootstrap_means(drop[:, h1]),
        chapter="induction module")
finding("...and every layer-1 head's (the smallest of the four heads' drops, "
        "per sequence)", drop.min(-1).values.mean(),
        null=Null.point("no change", 0.0),
        boot=bootstrap_means(drop.min(-1).values),
        chapter="induction module")
rise = broken[2] - clean[2]
finding("...and raises the second-copy loss", rise.mean(),
        null=Null.point("no change", 0.0), boot=bootstrap_means(rise),
        chapter="induction module")
observation("the largest second-copy loss with any other layer-0 head "
            "mean-ablated", float(others[worst_head][2].mean()),
            chapter="induction module")
rise_other = others[helper][2] - clean[2]
finding(f"mean-ablating L{l0}H{helper}, chapter 17b's partial helper (named "
        "before measuring), raises the second-copy loss too", rise_other.mean(),
        null=Null.point("no change", 0.0), boot=bootstrap_means(rise_other),
        chapter="induction module")
finding(f"...but less than mean-ablating L{l0}H{h0} (the difference of the "
        "two rises, per sequence)", (rise - rise_other).mean(),
        null=Null.point("no difference", 0.0),
        boot=bootstrap_means(rise - rise_other), chapter="induction module")

# %% tags=["hide-input"]
# the prose calls the helper chapter 17b's L0H1, and the most harmful of the
# other layer-0 heads here
assert (l0, helper) == (0, 1) and worst_head == helper, (l0, helper, worst_head)

# %% [markdown]
# With nothing ablated, {glue:text}`lab_ind`, the layer-1 induction head that `pick_heads`
# returns, puts {glue:text}`lab_clean_attn:.2f` of its attention on
# the token after the earlier copy, and the second copy costs
# {glue:text}`lab_clean_loss2:.2f` nats a token. It is first by a hair: on the batch
# `pick_heads` ranks by (`induction_scores`' default, 8 random segments of 32 tokens,
# repeated; chapter 17a's batch of 16 gives slightly different scores) the four heads score
# {glue:text}`lab_ind_lo:.3f` to {glue:text}`lab_ind_hi:.3f`, and it leads the next by
# {glue:text}`lab_ind_lead:.4f`, so three of them nearly tie. It stands in for all four below; the table shows the other three
# beside it. Mean-ablate the previous-token head {glue:text}`lab_prev` and its attention drops to
# {glue:text}`lab_broken_attn:.2f`, while the second-copy loss climbs to
# {glue:text}`lab_broken_loss2:.2f`, most of the way back to the loss on the first copy of
# the same ablated run ({glue:text}`lab_broken_loss1:.2f` nats, where nothing can be copied;
# chance is {glue:text}`lab_chance:.2f`): the model has lost most of its copying. The
# second copy is still {glue:text}`lab_kept:.2f` nats cheaper than the first (an
# observation; this page does not trace where that remainder comes from). All four
# layer-1 heads lose the target together: clean they put {glue:text}`lab_l1_clean_lo:.2f` to
# {glue:text}`lab_l1_clean_hi:.2f` of their attention on that token, with
# {glue:text}`lab_prev` mean-ablated {glue:text}`lab_l1_broken_lo:.2f` to
# {glue:text}`lab_l1_broken_hi:.2f` (even attention over each query's keys would give
# {glue:text}`lab_even:.2f`). Zero-ablation gives the same picture
# ({glue:text}`lab_zeroed_attn:.2f` and {glue:text}`lab_zeroed_loss2:.2f` for
# {glue:text}`lab_ind`), as it must nearly do here: the head's mean output, which
# mean-ablation keeps, is small.
# The other heads of layer 0 matter much less, though not all equally little:
# {glue:text}`lab_other`, the partial helper that chapter
# {doc}`17b <../17_induction_evidence>` named before this measurement, and the most harmful
# of the three here, raises the second-copy loss to {glue:text}`lab_other_loss2:.2f` nats,
# against {glue:text}`lab_clean_loss2:.2f` clean and {glue:text}`lab_broken_loss2:.2f`
# without the previous-token head. Early in the context it attends two tokens back (later
# it does not, as chapter 17a plots), which, chapter {doc}`17a <../17_induction_heads>`'s
# controls suggest, lets the induction heads check a second token of agreement; removing
# all of {glue:text}`lab_other`'s output, as here, does not single that role out. In the
# lab: click the previous-token head's pattern and watch the layer-1 heads' stripes vanish
# and the loss chart's second half jump up.
#
# More breaks without any ablation: short repeats copied back to back, and repeats that
# start late in the context. `toy-2l` was trained on segments of 16 to 32 tokens, tiled
# across the whole sequence. In the lab, type a short segment twice (or delete the same
# tokens from both copies), or type random tokens before a repeat; or measure it here. The
# cell puts segments of 8 and 16 tokens, repeated, after 0 to 48 random tokens (as far as
# the 64-token context allows). Each sequence's 8-token segment is the start of its
# 16-token one, and both get the same random prefix, so at one prefix the two differ in
# length, in the distance between the copies (8 against 16; training's were 16 to 32),
# and in where the second copy sits. The lab's loss caption splits first and second copy only when the sequence is two
# equal halves; with a prefix, read the per-position bars.

# %% tags=["hide-input"]
def second_copy_loss(seg, prefix=0):
    """Loss per sequence [32] on the second copy (from its second token) of 32
    random segments of ``seg`` tokens, repeated, after ``prefix`` random tokens.
    Sequence i's segment is the first ``seg`` tokens of one 32-token draw, and its
    prefix depends only on ``prefix``: two lengths at one prefix are paired."""
    half = repeated_random_tokens(32, 32, model.cfg.d_vocab, seed=2)[:, :seg]
    t = torch.cat([half, half], dim=1)
    if prefix:
        g = torch.Generator().manual_seed(3)
        t = torch.cat([torch.randint(model.cfg.d_vocab, (32, prefix), generator=g),
                       t], dim=1)
    with torch.no_grad():
        logp = model(t).log_softmax(-1)[:, :-1]
    return -logp.gather(-1, t[:, 1:, None])[:, prefix + seg:, 0].mean(-1)


by_length = {seg: second_copy_loss(seg) for seg in (8, 12, 16, 24)}
prefixes = (0, 8, 16, 24, 28, 32, 40, 48)
by_prefix = {seg: {p: second_copy_loss(seg, p) for p in prefixes
                   if p + 2 * seg <= model.cfg.n_ctx} for seg in (8, 16)}
print("second-copy loss by segment length, at the start:",
      ", ".join(f"{k}: {v.mean():.2f}" for k, v in by_length.items()))
print(f"second-copy loss after a random prefix (chance {chance:.2f})")
print(f"{'prefix':>18}" + "".join(f"{p:>6}" for p in prefixes))
for seg, row in by_prefix.items():
    print(f"{f'{seg}-token segments':>18}" + "".join(
        f"{row[p].mean():6.2f}" if p in row else f"{'':>6}" for p in prefixes))
glue("lab_short8", float(by_length[8].mean()))
glue("lab_short24", float(by_length[24].mean()))
for seg, p in [(8, 8), (8, 24), (8, 32), (8, 40), (16, 0), (16, 24), (16, 32)]:
    glue(f"lab_pre{seg}_{p}", float(by_prefix[seg][p].mean()))
observation("second-copy loss on 8-token and on 24-token segments at the start",
            f"{by_length[8].mean():.2f} vs {by_length[24].mean():.2f}",
            chapter="induction module")
for seg, row in by_prefix.items():
    observation(f"second-copy loss on {seg}-token segments after "
                f"{', '.join(map(str, row))} random tokens",
                ", ".join(f"{v.mean():.2f}" for v in row.values()),
                chapter="induction module")
for key, what, gap in [
        ("pos", "8 random tokens before the same 8-token segments lower their "
         "second-copy loss (difference per sequence)",
         by_prefix[8][0] - by_prefix[8][8]),
        ("len0", "at the start, 8-token segments cost more on the second copy "
         "than the 16-token segments they begin (difference per sequence)",
         by_prefix[8][0] - by_prefix[16][0]),
        ("len8", "after the same 8 random tokens, 8-token segments cost more on "
         "the second copy than the 16-token segments they begin (difference per "
         "sequence)", by_prefix[8][8] - by_prefix[16][8])]:
    test = null_test(float(gap.mean()), Null.point("no difference", 0.0),
                     boot=bootstrap_means(gap))
    finding(what, test, chapter="induction module")
    glue(f"lab_{key}_gap", test.value)
    glue(f"lab_{key}_lo", test.lo)
    glue(f"lab_{key}_hi", test.hi)

# %% [markdown]
# On 8-token segments at the start of a sequence the second copy costs
# {glue:text}`lab_short8:.2f` nats a token, against {glue:text}`lab_short24:.2f` on
# 24-token ones (a different draw of 32 segments from the one above, seed 2 against seed
# 1, hence not quite its {glue:text}`lab_clean_loss2:.2f`). After the same 8 random
# tokens, 8-token segments cost {glue:text}`lab_len8_gap:.2f` nats more than the 16-token
# segments they begin ([{glue:text}`lab_len8_lo:.2f`, {glue:text}`lab_len8_hi:.2f`]; one
# model, one draw of segments and of prefixes, each mean over its own copy's tokens, so a
# costly first scored token, the copy's second, weighs more in the shorter copy's mean):
# after this prefix, on this draw, shorter back-to-back copies cost more. At one prefix the two also differ in the distance between the copies and in
# where the second copy sits, and moving a copy by a few positions changes its loss (the
# 8-token row of the table), so these data do not split the gap among length, distance and
# position. At the start of the sequence the gap is
# {glue:text}`lab_len0_gap:.2f` ([{glue:text}`lab_len0_lo:.2f`,
# {glue:text}`lab_len0_hi:.2f`]), but there the short second copy also sits at positions
# 8 to 15, earlier than any repeated token in training.
# A random prefix does not act in one direction. A few random tokens help an 8-token
# repeat: 8 of them
# lower the 8-token segments' loss by {glue:text}`lab_pos_gap:.2f` nats
# ([{glue:text}`lab_pos_lo:.2f`, {glue:text}`lab_pos_hi:.2f`]), to
# {glue:text}`lab_pre8_8:.2f`, and after 24 it is {glue:text}`lab_pre8_24:.2f`. Further on, the
# loss climbs for both lengths (an observation, read from the table): after 32
# random tokens the 8-token segments cost {glue:text}`lab_pre8_32:.2f` and the 16-token
# ones {glue:text}`lab_pre16_32:.2f` (against {glue:text}`lab_pre16_0:.2f` at the start and
# {glue:text}`lab_pre16_24:.2f` after 24), near chance ({glue:text}`lab_chance:.2f`), and
# after 40 the 8-token ones cost {glue:text}`lab_pre8_40:.2f`, worse than chance (one
# model, one draw of prefixes, means over each copy: the lab's per-position bars show how
# the loss runs within one). Why is not tested here. A circuit found on a training distribution is,
# until tested, a statement about that distribution only.
#
# ## The path expansion adds up
#
# The lab's path terms are computed in the page, in JavaScript; here is the same expansion
# in Python for the lab's starting sequence (`circuitbook.paths.logit_attribution`), with
# the check that its parts sum to the model's logits. That check is of the Python
# expansion; the JavaScript one is checked by the book's test
# `tests/js/attn_only_forward.test.js`, which compares each of its path terms with the
# Python ones and their sum with the logits.

# %%
start = torch.tensor([lab.tokens])
with torch.no_grad():
    logits = model(start)
    parts = logit_attribution(model, start)
n_parts = len(parts.parts())
abs_sum = sum(t.abs() for _, t in parts.parts())
# rounding: the model's own forward pass, the expansion's longest chain (two
# heads' V and O products and two pattern sums), and one addition per part;
# scale: the parts' total size
terms = (attn_only_forward_terms(model.cfg, start.shape[1])
         + 2 * (model.cfg.d_model + model.cfg.d_head + start.shape[1])
         + model.cfg.d_model + n_parts)
identity_close("the Python path expansion the lab mirrors (direct, 8 heads, 16 "
               "virtual heads, 2 biases) sums to toy-2l's logits", parts.total(), logits,
               terms=terms, scale=float(abs_sum.max()),
               chapter="induction module")
glue("lab_parts", n_parts)

# %% [markdown]
# The {glue:text}`lab_parts` terms are the page's too, with nothing ablated in layer 1: the direct path, the 4 + 4 heads of
# the two layers, the 16 virtual heads (a layer-0 head read through V by a layer-1 head)
# and each layer's output bias.
#
# ## In Jupyter and Colab
#
# Run this notebook and the lab is live: the same JavaScript runs the model, and your
# sequence and ablations sync back to Python, where a cell can read them.

# %%
print("tokens:", lab.tokens[:8], "...", len(lab.tokens), "in all")
print("ablated:", lab.ablated or "none")
