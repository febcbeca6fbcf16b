# %% [markdown]
# # Explainers: the induction circuit, step by step
#
# Two interactive explainers. Both run in the page: on this site they respond to clicks with
# no Python behind them, and in Jupyter or Colab they also report your clicks back to the
# kernel. What they show comes from real models, precomputed when this page was built or,
# for the `toy-2l` stepper, computed in the page itself (the composition builder's term
# counts are combinatorial, not measured): the attention arcs are the models' own
# attention patterns, not drawings. The stepper runs on
# SmolLM2, the 4-bit SmolLM2-135M-Instruct of chapter {doc}`../04_embeddings`, a small
# language model that has read English, and then on the book's two-layer `toy-2l`, which
# never has. The first cell imports what the page uses and loads both models.

# %% tags=["hide-input"]
import warnings
from itertools import combinations
from math import comb

import torch

from circuitbook.book import Null, finding, glue, null_test, observation
from circuitbook.composition import (composition_scores, random_scores,
                                     rotated_baseline)
from circuitbook.heads import induction_scores, prev_token_scores
from circuitbook.models import load
from circuitbook.models.pretrained import load_smollm2
from circuitbook.paths import count_paths, count_score_terms
from circuitbook.widgets.explainers import (DURSLEY, composition_builder,
                                            control_tokens,
                                            induction_measures,
                                            induction_stepper, percent,
                                            pick_heads, stepper_data)

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
model = load("toy-2l")
smol, tokenizer = load_smollm2(progress=False)

# %% [markdown]
# ## 1. The induction circuit, one step at a time
#
# The text is a sentence in the style of *Harry Potter* that ends with "Mr"; "Mr" appeared
# once before, followed by "Dursley". SmolLM2 reads it through its own tokenizer. Use
# **Next** to walk through the five steps, and the toggle to switch to the **random-token
# control**: the same positions, filled with random token ids, in which the last token
# occurs exactly once earlier (other ids may repeat by chance).
#
# The control is what makes the experiment informative. On the sentence, a model could
# predict "Dursley" for two reasons: because it read "Mr Dursley" a few words back
# (induction), or because it learned in training what tends to follow "Mr" (memorised
# statistics). Random tokens remove the second reason, so whatever survives on them is read
# off the context. The heads are picked by their scores on repeated random tokens, as in
# chapter 17a ({doc}`../17_induction_heads`): the strongest induction head, and the
# strongest previous-token head in an earlier layer. Here the scores come from one random
# sequence of 40 word pieces repeated once, so the pick is one draw's.

# %%
g = torch.Generator().manual_seed(0)
half = torch.randint(1000, 40000, (1, 40), generator=g)  # word pieces
prev_head, ind_head = pick_heads(smol, tokens=torch.cat([half, half], dim=1))
smol_stepper = induction_stepper(
    smol, tokenizer=tokenizer, random_ids=(1000, 40000), prev_head=prev_head,
    induction_head=ind_head,
    route="For SmolLM2 the book measures it elsewhere, and less firmly. Chapter 18 "
          "scores, from the weights, how strongly this head's keys read each earlier "
          "head, against the same heads with their outputs rotated (RMSNorm gains "
          "folded in; the score is the rotary form's at offset 0, which that chapter "
          "finds almost flat over offsets for the two writer-reader pairs it follows, "
          "both into a reader other than this head). Its rule fixed in advance "
          "failed, passing far too many heads; by a rule chosen after that failure "
          "and applied to "
          "these same readers, a consistency check and not a test, the previous-token "
          "head is among the few writers that stand out, and it stands out into the "
          "key head this head shares with others, not into this head alone. Chapter "
          "17b patches the outputs of the heads so found into the keys of the "
          "model's induction heads (those with induction score above 0.4) at once, "
          "on repeated Shakespeare passages, and restores part of the loss gap. "
          "Because SmolLM2's query heads share key heads, that patch gives each "
          "query head its own copy of the keys, a change the model itself cannot "
          "make, so it measures what the receivers' copies of the keys carry, not "
          "what the shared key head does.")
smol_stepper

# %% [markdown]
# One random sequence is one draw. To say how the two modes differ, we measure the same
# three numbers on 20 random controls (seeds 1 to 20; seed 1 is the stepper's control), with
# the sentence's own numbers beside them: the induction head's attention from the last token
# to the token after the earlier copy (the *target*), the probability of the correct next
# token there, and the probability of the same token right after the *first* occurrence,
# where there is nothing yet to copy.
#
# A level alone proves little: a head that attends to an early position by position alone,
# or a model that likes the target token anyway, would give high levels without reading the
# repeat. So each number is set beside a paired "before" from the same draw, and the tests
# are fixed here, before the cell that measures (each at p < 0.05):
#
# - **the lookup**: the head's attention on the target, minus its attention on the same
#   position in a *twin* of the control whose last token is replaced by an id that does not
#   occur in it (same positions, nothing to find). Tested over the 20 controls: the bootstrap
#   interval of the mean paired gain against 0;
# - **the prediction**: the correct token's probability at the second copy minus its
#   probability right after the first. On the controls, the mean paired gain against 0 in
#   the same way; the sentence's gain is then ranked among the 20 controls' gains. If the
#   words added nothing beyond the repeat, the sentence would be one more draw among them,
#   and 20 controls can show at best p = 1/21, about 0.048.

# %% tags=["hide-input"]
text_ids = tokenizer(" " + DURSLEY)["input_ids"]
controls = [control_tokens(text_ids, 1000, 40000, seed)
            for seed in range(1, 21)]
# [21, 3]: attention on the target, p(correct) at the end, and p(target)
# right after the first copy
measured = induction_measures(smol, [text_ids] + controls, ind_head)
text_m, rand_m = measured[0], measured[1:]
query = len(text_ids) - 1
target = max(i for i in range(query) if text_ids[i] == text_ids[query]) + 1


def twin(tokens):
    """The control with its last token replaced by an id it does not contain."""
    fresh = tokens[-1]
    while fresh in tokens:
        fresh = 1000 + (fresh - 1000 + 7919) % 39000
    return tokens[:-1] + [fresh]


hook = f"blocks.{ind_head[0]}.attn.hook_pattern"
with torch.no_grad():   # the sentence, the 20 controls and their 20 twins
    logits, cache = smol.run_with_cache(
        torch.tensor([text_ids] + controls + [twin(c) for c in controls],
                     device=smol.W_U.device),
        names_filter=lambda name: name == hook)
last_row = cache[hook][:, ind_head[1], query].float().cpu()  # [41, pos]
att_twin = last_row[21:, target]                             # [20]
att_first = last_row[:21, 0]      # on the first position: sentence, controls
att_gain = rand_m[:, 0] - att_twin                 # paired, per control
p_gain = measured[:, 1] - measured[:, 2]           # 2nd copy - 1st copy
# the same gain in log-odds, where a softmax adds evidence: a push to the target's
# logit adds to its log-odds whatever its start (a gain in ln p is capped at
# -ln p_first, since p <= 1)
assert bool((measured[:, 1:] > 0).all() and (measured[:, 1:] < 1).all())
m64 = measured.double()
log_gain = (m64[:, 1].logit() - m64[:, 2].logit()).float()  # [21], nats of odds
# the correct token at the last position, with the repeat (control) and in its
# twin (target in the context, last token not matching), from the same pass
correct = torch.tensor([c[target] for c in controls])
logp_last = logits[:, query].float().log_softmax(-1).cpu()   # [41, d_vocab]
del logits
logp_rep = logp_last[1:21].gather(1, correct[:, None])[:, 0]    # [20]
logp_twin = logp_last[21:].gather(1, correct[:, None])[:, 0]    # [20]
twin_gain = logp_rep - logp_twin                   # paired, per control, nats
twin_first = logp_twin - measured[1:, 2].log()     # twin against the first copy


def median(x):
    """The median (for an even count, the mean of the middle two)."""
    return float(x.float().quantile(0.5))


def about(x):
    """A large factor to two significant figures, as 28,000."""
    return f"{float(f'{float(x):.2g}'):,.0f}"


print(f"heads: previous-token {prev_head}, induction {ind_head}; "
      f"{len(text_ids)} tokens")
print(f"{'':26}{'text':>9}{'random: median':>16}{'mean':>9}{'min':>9}"
      f"{'max':>9}")
nan = torch.tensor([float("nan")])
rows = [("attention on target", measured[:, 0], ".3f"),
        ("  same, twin (no repeat)", torch.cat([nan, att_twin]), ".3f"),
        ("p(correct), 2nd copy", measured[:, 1], ".2g"),
        ("  same, twin (no repeat)", torch.cat([nan, logp_twin.exp()]), ".2g"),
        ("p(target), 1st copy", measured[:, 2], ".2g"),
        ("gain in p, 2nd - 1st", p_gain, ".2g"),
        ("gain in log-odds, 2nd - 1st", log_gain, ".2f")]
for name, col, f in rows:
    first = "" if col[0].isnan() else f"{col[0]:{f}}"
    print(f"{name:26}{first:>9}{median(col[1:]):16{f}}{col[1:].mean():9{f}}"
          f"{col[1:].min():9{f}}{col[1:].max():9{f}}")
for j, key in enumerate(["att", "p", "first"]):
    glue(f"smol_text_{key}", float(text_m[j]))
    glue(f"smol_rand_{key}", float(rand_m[:, j].mean()))
    glue(f"smol_rand_{key}_max", float(rand_m[:, j].max()))
    glue(f"smol_rand_{key}_min", float(rand_m[:, j].min()))
glue("smol_earlier", target - 1)                 # the same in every control
glue("smol_target", target)
glue("smol_query", query)
glue("smol_step_att", float(rand_m[0, 0]))     # seed 1: the stepper's control
glue("smol_step_p", float(rand_m[0, 1]))
glue("smol_step_first", float(rand_m[0, 2]))
glue("smol_step_factor", about(rand_m[0, 1] / rand_m[0, 2]))
glue("smol_text_factor", about(text_m[1] / text_m[2]))
glue("smol_text_cap", about(1 / text_m[2]))
glue("smol_twin_max", float(att_twin.max()))
glue("smol_twin_mean", float(att_twin.mean()))
glue("smol_att_below", int((rand_m[:, 0] < text_m[0]).sum()))
glue("smol_gain_text", float(p_gain[0]))
glue("smol_gain_rand", float(p_gain[1:].mean()))
glue("smol_gain_small", int((p_gain[1:] < 0.01).sum()))
glue("smol_gain_median", median(p_gain[1:]))
glue("smol_gain_pos", int((p_gain[1:] > 0).sum()))
glue("smol_gain_neg", int((p_gain[1:] < 0).sum()))
glue("smol_gain_top_share", float(p_gain[1:].max() / p_gain[1:].sum()))
glue("smol_gain_top", float(p_gain[1:].max()))
glue("smol_rand_first_median", median(rand_m[:, 2]))
glue("smol_prior_ratio", about(text_m[2] / median(rand_m[:, 2])))
glue("smol_text_first_pos", float(att_first[0]))
glue("smol_text_rest", float(1 - att_first[0] - text_m[0]))
glue("smol_rand_first_pos", float(att_first[1:].mean()))
glue("smol_rand_first_pos_max", float(att_first[1:].max()))
observation("SmolLM2's induction head, from the last position: attention on the "
            "first position on the sentence; mean and largest over the 20 controls",
            f"{float(att_first[0]):.3f}; {float(att_first[1:].mean()):.3f}, "
            f"{float(att_first[1:].max()):.3f}", chapter="induction module")
observation("after the first copy, SmolLM2's probability of the target: on the "
            "sentence; median of the 20 controls; their ratio",
            f"{float(text_m[2]):.2g}; {median(rand_m[:, 2]):.2g}; "
            f"{float(text_m[2]) / median(rand_m[:, 2]):,.0f}",
            chapter="induction module")
# the sign test beside the bootstrap, added after the bootstrap interval was
# seen to rest on one draw: under "no change", each control's gain is as likely
# up as down (exact two-sided binomial; ties, if any, dropped)
n_up, n_down = int((p_gain[1:] > 0).sum()), int((p_gain[1:] < 0).sum())
n_sign = n_up + n_down
sign_p = min(1.0, 2 * sum(comb(n_sign, k) for k in range(max(n_up, n_down), n_sign + 1))
             / 2**n_sign)
glue("smol_sign_p", sign_p)
patterns = torch.arange(2**n_sign)                  # every sign pattern, once
ups = sum((patterns >> b) & 1 for b in range(n_sign)).float()
finding("on random tokens, the count of controls whose gain in p is positive "
        "(sign test, added after the bootstrap was seen)", n_up, null=Null.draws(
            f"the count of positive signs over all 2^{n_sign} equally likely sign "
            "patterns", ups), alternative="two-sided", chapter="induction module")
observation("on random tokens, the paired gain in p (second copy minus first): "
            "median, draws above and below 0, and the largest draw's share of "
            "the sum", f"{median(p_gain[1:]):.2g}; "
            f"{int((p_gain[1:] > 0).sum())} up, {int((p_gain[1:] < 0).sum())} "
            f"down; {float(p_gain[1:].max() / p_gain[1:].sum()):.0%}",
            chapter="induction module")
glue("smol_ind", f"L{ind_head[0]}H{ind_head[1]}")
glue("smol_prev", f"L{prev_head[0]}H{prev_head[1]}")


def ordinal(n):
    """1st, 2nd, 3rd, 4th, 11th, 21st, ..."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(
        n % 10, "th")
    return f"{n:,}{suffix}"


# step 5: the target's rank in the induction head's direct effect (its output
# through ln_final's scale and weight and W_U) at the last position
smol_seqs = smol_stepper.data["sequences"]
smol_ranks = [smol_seqs[k]["head_rank"] for k in ("text", "random")]
n_vocab = smol_seqs["text"]["n_vocab"]
glue("smol_text_rank", ordinal(smol_ranks[0]))
glue("smol_rand_rank_share", smol_ranks[1] / n_vocab)
glue("smol_vocab", f"{n_vocab:,}")
glue("smol_layers", smol.cfg.n_layers)
glue("smol_ind_layer", ind_head[0])
glue("smol_above", smol.cfg.n_layers - 1 - ind_head[0])
observation(f"rank of the target among SmolLM2's {n_vocab} tokens in the direct "
            f"effect of L{ind_head[0]}H{ind_head[1]} at the last position, on the "
            "sentence, and on the stepper's control (seed 1) as a share of the "
            "vocabulary (a rank near chance moves with rounding)",
            f"{smol_ranks[0]}; {smol_ranks[1] / n_vocab:.0%}",
            chapter="induction module")
gen = torch.Generator().manual_seed(0)
resample = torch.randint(0, len(rand_m), (2000, len(rand_m)), generator=gen)
boot_p = p_gain[1:][resample].mean(-1)
glue("smol_gain_lo", float(boot_p.quantile(0.025)))
glue("smol_gain_hi", float(boot_p.quantile(0.975)))
finding(f"on random tokens, with the first copy at position {target - 1} and "
        f"the query at {query}, the repeat moves SmolLM2's induction head's "
        "attention onto the target: attention there minus the same head's "
        "attention there in a twin with no repeat (mean of 20 paired "
        "controls)", att_gain.mean(),
        null=Null.point("no change from the twin", 0.0),
        boot=att_gain[resample].mean(-1), chapter="induction module")
observation("on the sentence, its attention on the token after the earlier "
            "'Mr'", float(text_m[0]), chapter="induction module")
observation("after the first 'Mr', with nothing to copy, SmolLM2's "
            "probability of the next token", float(text_m[2]),
            chapter="induction module")
finding("on random tokens, SmolLM2's probability of the target is higher at "
        "the second copy than at the first: second minus first (mean of 20 "
        "paired controls)",
        p_gain[1:].mean(), null=Null.point("no change from the first copy", 0.0),
        boot=boot_p, chapter="induction module")
finding("on this one sentence that gain is larger than on the random "
        "controls (rank among the 20 controls' gains)", float(p_gain[0]),
        null=Null.draws("the paired gains of the 20 random-token controls",
                        p_gain[1:]), chapter="induction module")
# added after the tests above had been seen: the same comparison in log-odds,
# which the target's starting probability does not cap, and each control
# against its twin
boot_log = log_gain[1:][resample].mean(-1)
glue("smol_lgain_text", float(log_gain[0]))
glue("smol_lgain_rand", float(log_gain[1:].mean()))
glue("smol_lgain_median", median(log_gain[1:]))
glue("smol_lgain_lo", float(boot_log.quantile(0.025)))
glue("smol_lgain_hi", float(boot_log.quantile(0.975)))
glue("smol_lgain_above", int((log_gain[1:] > log_gain[0]).sum()))
glue("smol_lgain_min", float(log_gain[1:].min()))
glue("smol_lgain_max", float(log_gain[1:].max()))
finding("on random tokens, SmolLM2's log-odds of the target are higher at "
        "the second copy than at the first: second minus first (mean of 20 "
        "paired controls)", log_gain[1:].mean(),
        null=Null.point("no change from the first copy", 0.0), boot=boot_log,
        chapter="induction module")
rank_log = null_test(float(log_gain[0]), Null.draws(
    "the paired gains in log-odds of the 20 random-token controls", log_gain[1:]))
glue("smol_lgain_p", rank_log.p)
finding("on this one sentence the gain in log-odds cannot be told from the "
        "random controls' gains (its rank among the 20 controls' gains)", rank_log,
        expect="no effect", chapter="induction module")
boot_twin = twin_gain[resample].mean(-1)
glue("smol_tgain", float(twin_gain.mean()))
glue("smol_tgain_lo", float(boot_twin.quantile(0.025)))
glue("smol_tgain_hi", float(boot_twin.quantile(0.975)))
glue("smol_tgain_up", int((twin_gain > 0).sum()))
tgain_factor = median(twin_gain.exp())            # median factor in p
tfirst_factor = median(twin_first.exp())
glue("smol_tgain_factor", about(tgain_factor))
glue("smol_tfirst_up", int((twin_first > 0).sum()))
glue("smol_tfirst_factor", tfirst_factor)
finding("on random tokens, the repeat raises SmolLM2's log-probability of the "
        "correct token above its twin's (target in the context, last token not "
        "matching): ln p minus the twin's ln p at the last position (mean of 20 "
        "paired controls, nats)", twin_gain.mean(),
        null=Null.point("no change from the twin", 0.0), boot=boot_twin,
        chapter="induction module")
observation("on random tokens, p of the correct token at the last position: "
            "controls above their twin, and the median factor; twins above the "
            "first copy, and the median factor",
            f"{int((twin_gain > 0).sum())} of 20, x{tgain_factor:.0f}; "
            f"{int((twin_first > 0).sum())} of 20, "
            f"x{tfirst_factor:.1f}", chapter="induction module")

# %% [markdown]
# The measurement splits the circuit in two. The **lookup** happens on random tokens, at
# least where these controls put it: in every one of them the first copy sits at position
# {glue:text}`smol_earlier`, the target at {glue:text}`smol_target`, near the start, and
# the query at {glue:text}`smol_query`, so the test speaks for this head at
# these positions. There induction head {glue:text}`smol_ind` puts
# {glue:text}`smol_rand_att:.2f` of its attention on the target on average, and in the twins
# with no repeat {glue:text}`smol_twin_mean:.3f` on the same position (at most
# {glue:text}`smol_twin_max:.2f`), so it is the repeat, not the position, that draws it
# there. (The bootstrap tests in the cell above print p = 0.0005: that is 1/2001, the
# smallest p that 2,000 resamples can give, so read it as p < 0.001.) It is not the same
# strength in every draw, though: the controls run
# from {glue:text}`smol_rand_att_min:.3f` to {glue:text}`smol_rand_att_max:.2f`, and on the
# sentence the head puts only {glue:text}`smol_text_att:.2f` on the token after the earlier
# "Mr", less than on an average control and more than on
# {glue:text}`smol_att_below` of the 20. Where the rest goes is measured: on the sentence the
# head puts {glue:text}`smol_text_first_pos:.2f` on the first position, the token " One", and
# {glue:text}`smol_text_rest:.2f` on all the other positions together; on the controls the
# first position gets {glue:text}`smol_rand_first_pos:.2f` on average, and in one of them as
# much as {glue:text}`smol_rand_first_pos_max:.2f`. Heavy attention on the first position is a
# known pattern in language models (an *attention sink* {cite}`xiao2023efficient`: a head
# with no strong match parks its attention there); why this head parks more of it there on
# the sentence than on an average control, we have not tested.
#
# The **prediction** needs more care, because the scale it is read on matters. After the
# first "Mr" the model gave the next token (" D", the start of "Dursley") probability
# {glue:text}`smol_text_first:.1e`: from the words alone it does not expect the name. Yet
# the controls' median at the same place is {glue:text}`smol_rand_first_median:.1e`, so the
# sentence starts about {glue:text}`smol_prior_ratio` times higher. At the second "Mr" it
# gives {glue:text}`smol_text_p:.2f`, a gain of {glue:text}`smol_gain_text:.2f` over the
# first copy. In absolute probability the random tokens gain far less: the mean gain is
# {glue:text}`smol_gain_rand:.3f` (95% interval {glue:text}`smol_gain_lo:.4f` to
# {glue:text}`smol_gain_hi:.3f`), a single draw, with a gain of
# {glue:text}`smol_gain_top:.2f`, supplies {glue:text}`smol_gain_top_share:.0%` of it, the
# median gain is {glue:text}`smol_gain_median:.1e`, the gain is below 0.01 in
# {glue:text}`smol_gain_small` of the 20 draws, and it is negative in
# {glue:text}`smol_gain_neg` ({glue:text}`smol_gain_pos` are positive). The signs alone point
# the same way as the bootstrap: if each draw's gain were as likely to fall as to rise,
# {glue:text}`smol_gain_pos` or more of 20 on one side would have two-sided probability
# {glue:text}`smol_sign_p:.1e` (an exact sign test, which we added after seeing that the
# bootstrap interval rests on one draw). The sentence's gain in probability is larger than
# every control's, which is as far as 20 controls can go (p = 1/21): the test stated before
# the cell passes. The z printed beside it is not used, because one control holds
# {glue:text}`smol_gain_top_share:.0%` of the controls' summed gain, so their standard
# deviation describes that one draw, not the spread of a typical control.
#
# What that rank shows is narrower than it looks. Through the softmax, evidence adds to
# the logits: the same push to the target's logit multiplies its odds (and, while it is
# small, its probability) by the same factor, which leaves a tiny probability small and can
# carry one that starts higher to most of the mass. So on the probability scale the
# sentence's gain comes out largest mainly because its start is the highest. The repeat's
# own effect is better compared in log-odds, which we add here, after the tests above had
# been seen (not in $\ln p$: since $p \le 1$, a gain in $\ln p$ can be at most
# $-\ln p$ at the start, a cap the sentence, starting high, nearly reaches). In log-odds
# the controls gain {glue:text}`smol_lgain_rand:.1f` on average (95% interval {glue:text}`smol_lgain_lo:.1f` to
# {glue:text}`smol_lgain_hi:.1f`; median {glue:text}`smol_lgain_median:.1f`), and the
# sentence's {glue:text}`smol_lgain_text:.1f` is no outlier: {glue:text}`smol_lgain_above` of
# the 20 controls gain more (rank p = {glue:text}`smol_lgain_p:.2f`). On this scale these
# data show no larger effect of the repeat on the sentence than on random tokens; what
# sets the sentence apart is its higher start. The test is blunt: the controls' own gains
# in log-odds run from {glue:text}`smol_lgain_min:.1f` to {glue:text}`smol_lgain_max:.1f`,
# so against 20 controls the sentence would rank first only with a gain above the largest
# of them, many nats beyond their mean.
#
# One more check of the "before". After the first copy the target is not yet in the
# context, so the gain could include a boost that a model gives to any token it has seen in
# the context, which needs no match. Each control's twin has the target in its context at
# the same position and differs only in its last token, which matches nothing: the clean
# comparison (also added after the tests above). With the repeat, the correct token's
# probability is higher than in the twin in {glue:text}`smol_tgain_up` of the 20 controls,
# by a median factor of about {glue:text}`smol_tgain_factor` (mean gain in ln p
# {glue:text}`smol_tgain:.1f` nats, 95% interval {glue:text}`smol_tgain_lo:.1f` to
# {glue:text}`smol_tgain_hi:.1f`), while the twin is above the first copy in
# {glue:text}`smol_tfirst_up` of 20, by a median factor of
# {glue:text}`smol_tfirst_factor:.1f`. So in most controls the gain needs the match. What
# the target's mere presence in the context adds, the twin against the first copy (which
# also moves the position and the last token), is left wide open by these 20 controls: it
# could be nothing or a sizeable part of the gain.
#
# The scope is narrow: one sentence, set against random tokens at one geometry, so these
# tests cannot say which of the sentence's features (its words, its grammar, the name) sets
# its higher start; a natural sentence whose repeated pair is replaced by random tokens would
# be the sharper control, and we have not run it. Nor is one attention head finding the
# right position the whole story in a {glue:text}`smol_layers`-layer model. Step 5 reads one
# more thing off the same forward pass: what the head writes at the last position, straight
# through the final normalisation and the unembedding (its *direct effect*). On the sentence
# that ranks " D" {glue:text}`smol_text_rank` of {glue:text}`smol_vocab` tokens; on the
# stepper's control the correct token sits {glue:text}`smol_rand_rank_share:.0%` of the way
# down the list, about where a token picked at random would. Neither rank is the head's whole
# effect: a head in layer {glue:text}`smol_ind_layer` writes into a stream that
# {glue:text}`smol_above` more layers read and transform, and the direct path leaves all of
# that out. So the ranks say only that the head's direct effect does not carry the prediction
# by itself; what the rest of the model does with its output, we have not measured. On the
# toy model below, which never saw language, the sentence's words get arbitrary token ids,
# so they bring no statistics the model could have learned about them, which is why it is
# the clean case.
#
# ## 2. The same circuit in `toy-2l`, the clean case
#
# `toy-2l` never saw English: it was trained on random sequences that repeat. Here the
# sentence's words are given token ids by a seeded permutation (one id per distinct word),
# so its ids are as arbitrary as random tokens, though which of them repeat is the
# sentence's (several words occur more than once), and the toggle compares two draws of the
# same kind of experiment (the control's ids, from only {glue:text}`toy_vocab`, repeat by
# chance too). The circuit is about as clean as it gets: one previous-token head in
# layer 0, with a partial helper beside it (L0H1, which early in the context attends two
# tokens back: ablating it also raises the loss on the repeat, chapter
# {doc}`../17_induction_evidence`) and, in
# layer 1, four induction heads (chapter {doc}`../17_induction_heads` studies all four).
# The stepper follows one pair, picked by the same scores as for SmolLM2: the
# previous-token head and the induction head with the highest score, which leads the next
# by only {glue:text}`toy_ind_gap_next:.4f` and the lowest of the other three by
# {glue:text}`toy_ind_gap_low:.3f` (the cell after the stepper prints the scores). This
# stepper runs `toy-2l`
# itself, in the page, with the forward pass of the {doc}`induction lab <02_lab>`: retype
# the sequence (its words, or token ids `t0`, `t1`, ...) and every arc, score and
# probability is recomputed for yours.

# %%
stepper = induction_stepper(
    model, live="toy-2l",
    route="For toy-2l, chapter 18 measures it from the weights (composition scores "
          "against rotated heads; section 3 below scores this pair), and chapter 17b "
          "by patching the previous-token head's output into the layer-1 heads' keys.")
stepper

# %% tags=["hide-input"]
data = stepper_data(model)  # the same two sequences, in Python, for the prose
text, rand = data["sequences"]["text"], data["sequences"]["random"]
(L0, H0), (L1, H1) = pick_heads(model)   # the stepper's pair
ind_toy, prev_toy = induction_scores(model), prev_token_scores(model)
print(f"previous-token scores, layer 0: {prev_toy[0].numpy().round(3)}")
print(f"induction scores, layer 0:      {ind_toy[0].numpy().round(3)}")
print(f"induction scores, layer 1:      {ind_toy[1].numpy().round(4)}")
glue("toy_prev", f"L{L0}H{H0}")
glue("toy_ind", f"L{L1}H{H1}")
glue("toy_prev_score", float(prev_toy[L0, H0]))
glue("toy_ind_score", float(ind_toy[L1, H1]))
glue("toy_ind_min", float(ind_toy[1].min()))
glue("toy_ind_second", float(ind_toy[1].sort(descending=True).values[1]))
glue("toy_ind_l0_max", float(ind_toy[0].max()))
glue("toy_ind_gap_next", float(ind_toy[L1, H1] - ind_toy[1].sort(descending=True).values[1]))
glue("toy_ind_gap_low", float(ind_toy[L1, H1] - ind_toy[1].min()))
observation("toy-2l's induction scores of its four layer-1 heads (min, max), "
            "and the largest in layer 0",
            f"{ind_toy[1].min():.3f}, {ind_toy[1].max():.3f}; "
            f"{ind_toy[0].max():.3f}", chapter="induction module")
glue("step_text_p", text["p_expected"])
glue("step_rand_p", rand["p_expected"])
with torch.no_grad():   # the unrounded share (the stepper's data keep 3 decimals)
    _, text_cache = model.run_with_cache(torch.tensor([text["ids"]]))
glue("step_attn", float(text_cache["pattern", L1][0, H1, text["query"],
                                                  text["target"]]))
glue("step_rand_attn", rand["attention_on_target"])
glue("step_attn_pct", percent(text["attention_on_target"]))    # as the stepper
glue("step_rand_attn_pct", percent(rand["attention_on_target"]))  # prints them
glue("step_text_first", text["p_first"])
glue("step_rand_first", rand["p_first"])
glue("toy_text_rank", ordinal(text["head_rank"]))
glue("toy_rand_rank", ordinal(rand["head_rank"]))
glue("toy_vocab", text["n_vocab"])
observation(f"rank of the target among toy-2l's {text['n_vocab']} tokens in the "
            f"direct effect of L{L1}H{H1} at the last position, on the sentence "
            "and on the control", f"{text['head_rank']}, {rand['head_rank']}",
            chapter="induction module")
observation("toy-2l's probability of the token that follows, after its first "
            "and after its second occurrence, on the sentence and on the control",
            f"{text['p_first']:.3g} -> {text['p_expected']:.3g}; "
            f"{rand['p_first']:.3g} -> {rand['p_expected']:.3g}",
            chapter="induction module")
observation("on the Dursley sentence, toy-2l's induction head's attention on "
            "the token after the earlier 'Mr'", text["attention_on_target"],
            chapter="induction module")
observation("toy-2l's top prediction on the text, and the expected next word",
            f"{text['model_top'][0][0]!r}, expected {text['expected']!r}",
            chapter="induction module")
observation("toy-2l's top prediction on the random-token control, and the "
            "token that followed the earlier occurrence",
            f"{rand['model_top'][0][0]!r}, expected {rand['expected']!r}",
            chapter="induction module")

# %% [markdown]
# The pair is {glue:text}`toy_prev` (previous-token score {glue:text}`toy_prev_score:.2f`) and
# {glue:text}`toy_ind` (induction score {glue:text}`toy_ind_score:.4f`); the other layer-1
# heads score from {glue:text}`toy_ind_min:.4f` to {glue:text}`toy_ind_second:.4f`, and no
# layer-0 head above {glue:text}`toy_ind_l0_max:.3f`. So "the induction head" below means
# {glue:text}`toy_ind`, one of four that do the same job. On the sentence it puts
# {glue:text}`step_attn_pct` of its attention on "Dursley" and the model predicts it with
# probability {glue:text}`step_text_p:.2f`; on the random control,
# {glue:text}`step_rand_attn_pct` and {glue:text}`step_rand_p:.2f`. Unlike SmolLM2, this
# model has nothing but induction to offer, and on these two draws it offers it with
# confidence. One head does not carry it alone, though: read through the unembedding,
# {glue:text}`toy_ind`'s output ranks "Dursley" {glue:text}`toy_text_rank` of
# {glue:text}`toy_vocab` tokens on the sentence and {glue:text}`toy_rand_rank` on the
# control. Here, in a two-layer model with no MLPs and no final normalisation, a layer-1
# head's direct effect *is* everything it adds to the logits, so on the sentence the
# prediction rests on other terms too: the logits are the sum of the direct path, each
# head's path, the virtual heads and each layer's output bias (the {doc}`lab <02_lab>` adds
# them up), and which of them carry "Dursley" this page does not measure.
#
# ## 3. The composition builder
#
# Head H1 (here the stepper's induction head {glue:text}`toy_ind`) can read head H0's output
# (here the previous-token head {glue:text}`toy_prev`) through its queries, its keys or its
# values: Q-, K- and V-composition, in the terms of Elhage et al.
# {cite}`elhage2021mathematical`, who also named the *virtual heads* below. Toggle each and
# watch which terms of the path expansion exist, what the configuration can compute, and how many
# virtual heads there are. The column "size" gives each term's size in `toy-2l`: its
# composition score, or a Frobenius norm, of the full circuit $W_E W_{OV} W_U$ for a single
# head but of the product of the two OV circuits alone for the virtual head, so those two
# norms are not on one scale. The sliders at the bottom leave
# the single pair behind and count the terms of a whole attention-only model with $n$ heads
# per layer and $L$ layers.
#
# The toggles are a cartoon: every head reads the whole residual stream, so "does H1 read
# H0?" is really "how much of H1's query, key or value subspace overlaps what H0 writes", the
# continuous quantity the composition score measures (chapter 18).
#
# Is the pair's K-composition score large? Random Gaussian heads of the same shapes give a
# scale, and it is not an easy one to beat: some trained pairs score below it (the cell
# below counts them). But it is not the right null. A Gaussian head's singular values are
# those of a random matrix, while a trained head's are whatever training made them, and a
# head's spectrum alone, with no alignment between writer and reader, changes how far its
# scores spread by chance (the more of a head's norm sits in a few directions, the more its
# scores spread). The null must keep each head's spectrum and randomise only the
# alignment. First,
# a description: the model's own heads. `toy-2l` has 4 heads in layer 0 and 4 in layer 1,
# so 16 writer-reader
# pairs. The previous-token head, picked by its attention and not by its weights, writes
# into all four induction heads. Where do its four pairs rank among all {glue:text}`k_n_sets` sets of four
# pairs? That ranking is only a description: the pairs are not exchangeable (the four share
# one writer, so if one writer's pairs stand out together, the ranking only asks which of
# the four writers it is, a 1-in-4 event), and it cannot serve as a test. The test is
# chapter {doc}`../18_composition`'s, in a stricter form: keep every head's weights but turn
# the layer-0 heads' outputs
# by a random rotation of the residual stream, which keeps each head's spectrum and
# randomises only the alignment between what one head writes and what another reads. We
# draw {glue:text}`n_rot` rotations and ask whether the *weakest* of the previous-token head's four
# K-composition scores exceeds the *largest* score that any layer-0 head reaches into any
# layer-1 head under each rotation (a stricter version of chapter 18's test, which takes
# each reader separately).

# %%
builder = composition_builder(model, model_name="toy-2l")
builder

# %% tags=["hide-input"]
scores = builder.data["scores"]
glue("b_k", scores["K"])
glue("b_q", scores["Q"])
glue("b_v", scores["V"])
glue("b_base", builder.data["baseline"])
# [writer: layer-0 head, reader: layer-1 head], flattened to the 16 pairs
k_pairs = composition_scores(model, "K")[0, :, 1, :]
flat = k_pairs.flatten()
row = tuple(H0 * k_pairs.shape[1] + r for r in range(k_pairs.shape[1]))
sets = list(combinations(range(len(flat)), len(row)))    # all C(16, 4) sets
assert len(sets) == comb(16, 4)
means = {c: float(flat[list(c)].mean()) for c in sets}
k_others = torch.cat([k_pairs[:H0], k_pairs[H0 + 1:]])
glue("k_pair_rank", int((flat > k_pairs[H0, H1]).sum()) + 1)
glue("k_row_min", float(k_pairs[H0].min()))
glue("k_row_max", float(k_pairs[H0].max()))
glue("k_others_max", float(k_others.max()))
glue("k_n_sets", len(sets))
glue("k_row_rank", sum(m >= means[row] for m in means.values()))
observation(f"in toy-2l, rank of the mean K-composition of the previous-token "
            f"head L{L0}H{H0}'s four pairs among the means of all "
            f"{len(sets)} sets of four of the 16 layer-0 -> layer-1 pairs (not a "
            "test: the pairs share one writer)",
            sum(m >= means[row] for m in means.values()),
            chapter="induction module")
n_rot = 100
null_k = rotated_baseline(model, "K", n_samples=n_rot)[:, 0, :, 1, :]
null_k_max = null_k.flatten(1).max(1).values     # [rotation]: largest pair
glue("n_rot", n_rot)
glue("k_null_max", float(null_k_max.max()))
# the Gaussian scale beside the rotations: each pair's scores under rotation,
# pooled over the 16 pairs, against the builder's 512 random Gaussian pairs
gauss = random_scores(model.cfg.d_model, model.cfg.d_head, kind="K", seed=0)
glue("k_below_gauss", int((flat < gauss.mean()).sum()))
glue("gauss_sd", float(gauss.std()))
glue("rot_mean", float(null_k.mean()))
glue("rot_sd", float(null_k.std(0).mean()))
observation("in toy-2l, K-composition: the 16 pairs' scores below the mean of "
            "random Gaussian heads; Gaussian heads' mean and sd, and the rotated "
            "heads' mean and per-pair sd (averaged over pairs)",
            f"{int((flat < gauss.mean()).sum())} of 16; {float(gauss.mean()):.3f} "
            f"(sd {float(gauss.std()):.4f}); {float(null_k.mean()):.3f} "
            f"(sd {float(null_k.std(0).mean()):.4f})", chapter="induction module")
# the other writers' pairs that also exceed the rotations' largest score
above = (k_others > null_k_max.max()).sum(1)          # [3]: per other writer
writers = [h for h in range(k_pairs.shape[0]) if h != H0]
helper = writers[int(above.argmax())]
glue("k_helper", f"L{L0}H{helper}")
glue("k_helper_n", int(above.max()))
glue("k_helper_max", float(k_pairs[helper].max()))
glue("k_rest_above", int(above.sum() - above.max()))
observation("pairs of the other layer-0 heads whose K-composition score exceeds "
            "the rotations' largest, per writer",
            ", ".join(f"L{L0}H{h}: {int(n)}" for h, n in zip(writers, above)),
            chapter="induction module")
finding(f"in toy-2l, the weakest of L{L0}H{H0}'s four K-composition scores "
        "into layer 1 exceeds the largest score of any layer-0 head into any "
        "layer-1 head with the outputs randomly rotated",
        k_pairs[H0].min(), null=Null.draws(
            f"largest of the 16 pairs' scores, outputs rotated, {n_rot} "
            "rotations", null_k_max), chapter="induction module")
observation("the studied pair's Q- and V-composition scores",
            f"Q {scores['Q']:.2f}, V {scores['V']:.2f}",
            chapter="induction module")
glue("n12_logits", f"{count_paths(12, 12)['total']:,}")
mantissa, exponent = f"{float(count_score_terms(12, 12)):.1e}".split("e")
glue("n12_scores", mantissa + " × 10" + str(int(exponent)).translate(
    str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")))
glue("pair_all", count_paths(2, 1)["total"])
glue("pair_scores", sum(t["kind"] == "score" for t in builder.data["terms"]))

# %% [markdown]
# For the pair {glue:text}`toy_prev` → {glue:text}`toy_ind` the K-composition score is
# {glue:text}`b_k:.2f`, the largest of the 16 pairs (rank {glue:text}`k_pair_rank`), against
# {glue:text}`b_q:.2f` for Q and {glue:text}`b_v:.2f` for V (random heads of this shape average
# about {glue:text}`b_base:.2f`, for scale). And it is not this pair alone:
# {glue:text}`toy_prev`'s four pairs, from {glue:text}`k_row_min:.3f` to
# {glue:text}`k_row_max:.3f`, all lie above every pair of the other three writers (at most
# {glue:text}`k_others_max:.3f`): rank {glue:text}`k_row_rank` of the
# {glue:text}`k_n_sets` sets of four, which describes the ordering but tests nothing, for
# the reason given above. The test is the rotation: over {glue:text}`n_rot` rotations the
# largest score any layer-0 head reaches into any layer-1 head is at most
# {glue:text}`k_null_max:.3f`, below the weakest of the four real pairs
# ({glue:text}`k_row_min:.3f`), so the alignment between what the previous-token head
# writes and what the four induction heads' keys read is not what random alignment of
# these same heads gives. The previous-token head feeds the keys of all four induction
# heads, as the induction story says. No other writer passes the test (its weakest pair
# would have to beat the rotations), but pair by pair
# {glue:text}`k_helper_n` of {glue:text}`k_helper`'s four also exceed the rotations'
# largest score (up to {glue:text}`k_helper_max:.2f`), which fits its role as the partial
# helper of section 2 (the other two writers have {glue:text}`k_rest_above` such pairs). The
# Gaussian scale, for comparison: {glue:text}`k_below_gauss` of the 16 pairs score below the
# Gaussian heads' mean of {glue:text}`b_base:.3f` (sd {glue:text}`gauss_sd:.4f`), and the
# rotated heads average {glue:text}`rot_mean:.3f` with a spread per pair of
# {glue:text}`rot_sd:.4f`. In `toy-2l` the two nulls are close, so the choice matters
# little here; in a model whose heads' spectra are further from flat they need not be. This
# is one model and one seed.
#
# ## Things to try
#
# Each of these takes a few clicks in the widgets above.
#
# 1. **Switch the stepper to random tokens and step through again.** In `toy-2l` the arcs and
#    the prediction hardly change (the correct token's probability is
#    {glue:text}`step_text_p:.2f` on the sentence, {glue:text}`step_rand_p:.2f` on the
#    control). Both are random-token draws for this model, so that agreement cannot show
#    what the prediction rests on. Steps 1 and 5 can: after the *first* occurrence of the
#    last token, with nothing to copy, `toy-2l` gives the token that followed it probability
#    {glue:text}`step_text_first:.3f` on the sentence and {glue:text}`step_rand_first:.3f` on
#    the control; after the second occurrence, {glue:text}`step_text_p:.2f` and
#    {glue:text}`step_rand_p:.2f`. The pair of tokens is the same both times, so a memorised
#    bigram would have raised it both times: the jump comes from the context.
#    In SmolLM2 step 4 still lands the induction head's attention on the token after the
#    earlier occurrence, and more firmly than on the sentence
#    ({glue:text}`smol_step_att:.2f` against {glue:text}`smol_text_att:.2f`), while step
#    5's probability is far lower in absolute terms ({glue:text}`smol_step_p:.3f` here,
#    against {glue:text}`smol_text_p:.2f` on the sentence). Neither the lookup nor the step
#    from the first copy to the second is what falls short: from step 1's
#    {glue:text}`smol_step_first:.1e` the repeat multiplied this control's probability by
#    about {glue:text}`smol_step_factor`, against about {glue:text}`smol_text_factor` on the
#    sentence (from {glue:text}`smol_text_first:.1e`, where a probability can grow at most
#    about {glue:text}`smol_text_cap` times). What differs is where the prediction
#    started. Step 5's top tokens show what the head writes, straight through the
#    unembedding: the target ranks {glue:text}`smol_text_rank` of
#    {glue:text}`smol_vocab` on the sentence, and on this control
#    {glue:text}`smol_rand_rank_share:.0%` of the way down, where a random token would sit.
#    That is the head's direct effect only; the {glue:text}`smol_above` layers above it read
#    its output too, and what they do with it we have not measured. Compare step 1's number
#    too: the probability after the *first* "Mr" is the
#    model's guess with no copy to read, from its weights and the context before that point.
# 2. **In the builder, press "induction: K-composition only".** No virtual head appears, and
#    yet this is the configuration of the field's best-understood circuit. Virtual heads are
#    not where all the action is: Q- and K-composition act inside attention patterns, which
#    the term list of the logits does not show.
# 3. **Press "all three" and count the terms**: {glue:text}`pair_all` in the logits and
#    {glue:text}`pair_scores` in H1's attention score, for one pair of heads. Then set the
#    sliders to 12 heads per layer and 12 layers, the heads and layers of GPT-2 small: an attention-only model of
#    that shape (GPT-2 small also has MLPs, which the count leaves out) has
#    {glue:text}`n12_logits` logit terms and about {glue:text}`n12_scores` attention-score
#    terms. Nobody reads that many terms one by one;
#    finding the few that carry weight is a search problem, which is why circuit discovery
#    is being automated.

# %% [markdown]
# The stepper's two heads of `toy-2l`, {glue:text}`toy_prev` and {glue:text}`toy_ind`, on a
# random sequence repeated twice, drawn with CircuitsVis
# (pick a head and hover over a token to see where it attends): on the second copy the
# previous-token head looks one token back and the induction head looks at the token after
# the earlier occurrence.

# %%
from circuitbook.data import repeated_random_tokens
from circuitbook.viz import attention_pattern_view

(l0, h0), (l1, h1) = (L0, H0), (L1, H1)
n = 12
rep = repeated_random_tokens(1, n, model.cfg.d_vocab, seed=0)
with torch.no_grad():
    _, cache = model.run_with_cache(rep)
pats = torch.stack([cache["pattern", l0][0, h0], cache["pattern", l1][0, h1]])
second = torch.arange(n, 2 * n)
back = float(pats[0, second, second - 1].mean())
per_query = pats[1, second, second - n + 1]        # [n]: each second-copy query
ahead = float(per_query.mean())
observation("on this repeated random sequence, the previous-token head's "
            "attention one back and the induction head's to the token after "
            "the earlier occurrence (means over the second copy)",
            f"{back:.2f}, {ahead:.2f}", chapter="induction module")
observation("the induction head's attention to the token after the earlier "
            "occurrence, per query of the second copy",
            " ".join(f"{float(a):.2f}" for a in per_query),
            chapter="induction module")
segment = rep[0, :n].tolist()
twice = [q for q in range(n) if segment.count(segment[q]) > 1]   # offsets
assert len({segment[q] for q in twice}) == 1      # one token, held twice
assert int(per_query[2:].argmin()) + 2 in twice   # the lowest of the rest is on it
glue("pv_back", back)
glue("pv_ahead", ahead)
glue("pv_median", float(per_query.quantile(0.5)))
glue("pv_n", n)
glue("pv_q0", int(second[0]))
glue("pv_q1", int(second[1]))
glue("pv_q01_max", float(per_query[:2].max()))
glue("pv_rest_mean", float(per_query[2:].mean()))
glue("pv_rest_min", float(per_query[2:].min()))
glue("pv_twice", f"t{segment[twice[0]]}")
glue("pv_twice_att", ", ".join(f"{float(per_query[q]):.2f}" for q in twice))
attention_pattern_view([f"t{i}" for i in rep[0].tolist()], pats,
                       [f"{l0}.{h0} previous-token", f"{l1}.{h1} induction"])

# %% [markdown]
# On this sequence's second copy the previous-token head puts {glue:text}`pv_back:.2f` of
# its attention one token back, and the induction head {glue:text}`pv_ahead:.2f` on the
# token after the earlier occurrence, on average. The average hides a split. The first two
# queries of the second copy, at positions {glue:text}`pv_q0` and {glue:text}`pv_q1`, put at
# most {glue:text}`pv_q01_max:.2f` there; the other ten average
# {glue:text}`pv_rest_mean:.2f` (the median of all twelve is {glue:text}`pv_median:.2f`).
# The lowest of those ten, {glue:text}`pv_rest_min:.2f`, is a query on
# {glue:text}`pv_twice`, a token the segment holds twice, so more than one earlier
# occurrence competes (its two queries get {glue:text}`pv_twice_att`). The segment is
# {glue:text}`pv_n` tokens long, shorter than any segment `toy-2l` was trained on (16 to 32
# tokens), so this is a little outside its training range: in training every induction
# query sat 16 to 32 tokens after the copy one segment back, and so at position 16 or later, while
# here each sits {glue:text}`pv_n` after it, and the first few sit earlier in the context
# than any did. Neither alone explains the split: every query here has the short distance,
# and the ten that work include early ones. What singles out the first two (their targets
# are the first keys of the sequence, for one) we have not tested. The stepper's
# {glue:text}`step_attn:.2f` on the sentence is one query's, at its last position.
