# %% [markdown]
# # Explainers: the induction circuit, step by step
#
# Two interactive explainers. Both run in the page: on this site they respond to clicks with
# no Python behind them, and in Jupyter or Colab they also report your clicks back to the
# kernel. Everything they show was computed from real models when this page was built: the
# attention arcs are the models' own attention patterns, not drawings. The stepper runs on
# SmolLM2, the 4-bit SmolLM2-135M-Instruct of chapter {doc}`../04_embeddings`, a small
# language model that has read English, and then on the book's two-layer `toy-2l`, which
# never has. The first cell imports what the page uses and loads both models.

# %% tags=["hide-input"]
import warnings

import torch

from circuitbook.book import Null, finding, glue, observation
from circuitbook.composition import random_scores
from circuitbook.models import load
from circuitbook.models.pretrained import load_smollm2
from circuitbook.paths import count_paths, count_score_terms
from circuitbook.widgets.explainers import (DURSLEY, composition_builder,
                                            control_tokens,
                                            induction_measures,
                                            induction_stepper,
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
# control**: the same positions, filled with random token ids, with only the last token
# repeating an earlier one.
#
# The control is what makes the experiment informative. On the sentence, a model could
# predict "Dursley" for two reasons: because it read "Mr Dursley" a few words back
# (induction), or because it learned in training what tends to follow "Mr" (memorised
# statistics). Random tokens remove the second reason, so whatever survives on them is read
# off the context. The heads are picked by their scores on repeated random tokens, as in
# chapter 17a ({doc}`../17_induction_heads`): the strongest induction head, and the
# strongest previous-token head in an earlier layer.

# %%
g = torch.Generator().manual_seed(0)
half = torch.randint(1000, 40000, (1, 40), generator=g)  # word pieces
prev_head, ind_head = pick_heads(smol, tokens=torch.cat([half, half], dim=1))
induction_stepper(smol, tokenizer=tokenizer, random_ids=(1000, 40000),
                  prev_head=prev_head, induction_head=ind_head)

# %% [markdown]
# One random sequence is one draw. To say how the two modes differ, we measure the same
# three numbers on 20 random controls (seeds 1 to 20), with the sentence's own numbers beside
# them: the induction head's attention from the last token to the token after the earlier
# copy, the probability of the correct next token there, and the probability of the same
# token right after the *first* occurrence, where there is nothing yet to copy.

# %%
text_ids = tokenizer(" " + DURSLEY)["input_ids"]
controls = [control_tokens(text_ids, 1000, 40000, seed)
            for seed in range(1, 21)]
# [21, 3]: attention on the target, p(correct) at the end, and p(target)
# right after the first copy
measured = induction_measures(smol, [text_ids] + controls, ind_head)
text_m, rand_m = measured[0], measured[1:]
uniform = 1 / len(text_ids)          # attention spread evenly over the context
print(f"heads: previous-token {prev_head}, induction {ind_head}; "
      f"{len(text_ids)} tokens")
print(f"{'':26}{'text':>8}{'random: mean':>14}{'min':>8}{'max':>8}")
for j, name in enumerate(["attention on target", "p(correct), 2nd copy",
                          "p(target), 1st copy"]):
    col = rand_m[:, j]
    print(f"{name:26}{text_m[j]:8.3f}{col.mean():14.3f}{col.min():8.3f}"
          f"{col.max():8.3f}")
for j, key in enumerate(["att", "p", "first"]):
    glue(f"smol_text_{key}", float(text_m[j]))
    glue(f"smol_rand_{key}", float(rand_m[:, j].mean()))
    glue(f"smol_rand_{key}_max", float(rand_m[:, j].max()))
    glue(f"smol_rand_{key}_min", float(rand_m[:, j].min()))
glue("smol_uniform", uniform)
glue("smol_ind", f"L{ind_head[0]}H{ind_head[1]}")
glue("smol_prev", f"L{prev_head[0]}H{prev_head[1]}")
gen = torch.Generator().manual_seed(0)
resample = torch.randint(0, len(rand_m), (2000, len(rand_m)), generator=gen)
finding("on random tokens, SmolLM2's induction head attends to the token "
        "after the earlier copy more than attention spread evenly would "
        "(mean of 20 controls)", rand_m[:, 0].mean(),
        null=Null.point("uniform attention over the context", uniform),
        boot=rand_m[resample, 0].mean(-1), chapter="induction module")
observation("on the sentence, its attention on the token after the earlier "
            "'Mr'", float(text_m[0]), chapter="induction module")
observation("after the first 'Mr', with nothing to copy, SmolLM2's "
            "probability of the next token", float(text_m[2]),
            chapter="induction module")
finding("on the sentence SmolLM2 gives the correct next token more "
        "probability than on every one of the 20 random controls",
        float(text_m[1]),
        null=Null.draws("the 20 random-token controls", rand_m[:, 1]),
        chapter="induction module")

# %% [markdown]
# The measurement splits the circuit in two. The **lookup** works on both: induction head
# {glue:text}`smol_ind` puts {glue:text}`smol_text_att:.2f` of its attention on the token after
# the earlier "Mr" in the sentence, and {glue:text}`smol_rand_att:.2f` on average on random
# tokens, against {glue:text}`smol_uniform:.3f` for attention spread evenly. The random draws
# vary a lot (from {glue:text}`smol_rand_att_min:.3f` to {glue:text}`smol_rand_att_max:.2f`), but
# looking up the context is not something the model needs familiar words for. On the
# sentence the head gives the target less than it does on an average control: other
# positions of real text compete for its attention.
#
# The **prediction** is another matter. After the first "Mr" the model gave the next token
# (" D", the start of "Dursley") probability {glue:text}`smol_text_first:.4f`: it has not
# memorised "Mr Dursley" as a bigram. At the second "Mr" it gives {glue:text}`smol_text_p:.2f`,
# all of it gained from the context. On random tokens the same lookup raises the correct
# token only to {glue:text}`smol_rand_p:.3f` on average (at most
# {glue:text}`smol_rand_p_max:.2f` in 20 draws). So one attention head finding the right
# position is not the whole story in a 30-layer model: on the sentence other components
# agree with it (a name is expected after "Mr", and " D" starts a word the context has
# shown), while among random word pieces a single repeated token is weak evidence and the
# model hedges. What SmolLM2 predicts on the sentence is context read by induction, made
# confident by what the model knows about language; what it predicts on random tokens is
# induction alone. On the toy model below the two cannot be told apart, which is why it is
# the clean case.
#
# ## 2. The same circuit in `toy-2l`, the clean case
#
# `toy-2l` never saw English: it was trained on random sequences that repeat. Here the
# sentence's words are given token ids by a seeded permutation (one id per distinct word),
# so its "text" is itself a random-token sequence and the toggle compares two draws of the
# same experiment. The circuit is as clean as it gets: two heads, one previous-token head
# and one induction head. This stepper runs `toy-2l` itself, in the page, with the forward
# pass of the {doc}`induction lab <02_lab>`: retype the sequence (its words, or token ids `t0`,
# `t1`, ...) and every arc, score and probability is recomputed for yours.

# %%
stepper = induction_stepper(model, live="toy-2l")
stepper

# %%
data = stepper_data(model)  # the same two sequences, in Python, for the prose
text, rand = data["sequences"]["text"], data["sequences"]["random"]
glue("step_text_p", text["p_expected"])
glue("step_rand_p", rand["p_expected"])
glue("step_attn", text["attention_on_target"])
glue("step_rand_attn", rand["attention_on_target"])
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
# On the sentence `toy-2l`'s induction head puts {glue:text}`step_attn:.0%` of its attention
# on "Dursley" and the model predicts it with probability {glue:text}`step_text_p:.2f`; on
# the random control, {glue:text}`step_rand_attn:.0%` and {glue:text}`step_rand_p:.2f`. Unlike
# SmolLM2, this model has nothing but induction to offer, and it offers it with confidence.
#
# ## 3. The composition builder
#
# Head H1 (here `toy-2l`'s induction head) can read head H0's output (here the
# previous-token head) through its queries, its keys or its values. Toggle each and watch
# which terms of the path expansion exist, what the configuration can compute, and how many
# virtual heads there are. The column "size" gives each term's size in `toy-2l`: its
# composition score, or the Frobenius norm of its circuit. The sliders at the bottom leave
# the single pair behind and count the terms of a whole attention-only model with $n$ heads
# per layer and $L$ layers.
#
# The toggles are a cartoon: every head reads the whole residual stream, so "does H1 read
# H0?" is really "how much of H1's query, key or value subspace overlaps what H0 writes", the
# continuous quantity the composition score measures (chapter 18).

# %%
builder = composition_builder(model, model_name="toy-2l")
builder

# %%
scores = builder.data["scores"]
glue("b_k", scores["K"])
glue("b_q", scores["Q"])
glue("b_v", scores["V"])
glue("b_base", builder.data["baseline"])
random_k = random_scores(model.cfg.d_model, model.cfg.d_head, n_samples=200,
                         kind="K")
finding("in toy-2l, the two heads' K-composition score stands out from "
        "pairs of random heads of the same shapes", scores["K"],
        null=Null.draws("200 pairs of random Gaussian heads, d_model 64, "
                        "d_head 16", random_k), chapter="induction module")
observation("their Q- and V-composition scores",
            f"Q {scores['Q']:.2f}, V {scores['V']:.2f}",
            chapter="induction module")
glue("n12_logits", f"{count_paths(12, 12)['total']:,}")
mantissa, exponent = f"{float(count_score_terms(12, 12)):.1e}".split("e")
glue("n12_scores", mantissa + " × 10" + str(int(exponent)).translate(
    str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")))
glue("pair_all", count_paths(2, 1)["total"])

# %% [markdown]
# For `toy-2l`'s pair the K-composition score is {glue:text}`b_k:.2f`, against
# {glue:text}`b_q:.2f` for Q and {glue:text}`b_v:.2f` for V (random heads of this shape average
# about {glue:text}`b_base:.2f`): the circuit is K-composition, as the induction story says.
#
# ## Things to try
#
# Each of these takes a few clicks in the widgets above.
#
# 1. **Switch the stepper to random tokens and step through again.** In `toy-2l` the arcs and
#    the prediction hardly change (the correct token's probability is
#    {glue:text}`step_text_p:.2f` on the sentence, {glue:text}`step_rand_p:.2f` on the
#    control): the mechanism reads the context, not a memorised bigram.
#    In SmolLM2 step 4 still lands the induction head's attention on the token after the
#    earlier occurrence, but step 5's prediction collapses (from
#    {glue:text}`smol_text_p:.2f` to about {glue:text}`smol_rand_p:.3f`): the lookup is the
#    same, the confidence came from the language around it. Compare step 1's number too: the
#    probability after the *first* "Mr" is what the weights alone predict.
# 2. **In the builder, press "induction: K-composition only".** No virtual head appears, and
#    yet this is the configuration of the field's best-understood circuit. Virtual heads are
#    not where all the action is: Q- and K-composition act inside attention patterns, which
#    the term list of the logits does not show.
# 3. **Press "all three" and count the terms**: {glue:text}`pair_all` in the logits and four
#    in H1's attention score, for one pair of heads. Then set the sliders to 12 heads per
#    layer and 12 layers, GPT-2 small's shape: {glue:text}`n12_logits` logit terms and about
#    {glue:text}`n12_scores` attention-score terms. Nobody reads that many terms one by one;
#    finding the few that carry weight is a search problem, which is why circuit discovery
#    is being automated.

# %% [markdown]
# The same two heads of `toy-2l` on a random sequence repeated twice, drawn with CircuitsVis
# (pick a head and hover over a token to see where it attends): on the second copy the
# previous-token head looks one token back and the induction head looks at the token after
# the earlier occurrence.

# %%
from circuitbook.data import repeated_random_tokens
from circuitbook.viz import attention_pattern_view

(l0, h0), (l1, h1) = pick_heads(model)
n = 12
rep = repeated_random_tokens(1, n, model.cfg.d_vocab, seed=0)
with torch.no_grad():
    _, cache = model.run_with_cache(rep)
pats = torch.stack([cache["pattern", l0][0, h0], cache["pattern", l1][0, h1]])
second = torch.arange(n, 2 * n)
back = float(pats[0, second, second - 1].mean())
ahead = float(pats[1, second, second - n + 1].mean())
observation("on this repeated random sequence, the previous-token head's "
            "attention one back and the induction head's to the token after "
            "the earlier occurrence",
            f"{back:.2f}, {ahead:.2f}", chapter="induction module")
attention_pattern_view([f"t{i}" for i in rep[0].tolist()], pats,
                       [f"{l0}.{h0} previous-token", f"{l1}.{h1} induction"])
