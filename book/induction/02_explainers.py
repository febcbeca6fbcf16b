# %% [markdown]
# # Explainers: the induction circuit, step by step
#
# Two interactive explainers. Both run in the page: on this site they respond to clicks with
# no Python behind them, and in Jupyter or Colab they also report your clicks back to the
# kernel. Everything they show was computed from a real model, the book's two-layer `toy-2l`:
# the attention arcs are its actual attention patterns, not drawings.

# %%
import warnings

import torch

from circuitbook.book import claim, glue
from circuitbook.models import load
from circuitbook.widgets.explainers import builder_data, composition_builder, induction_stepper, stepper_data

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
model = load("toy-2l")

# %% [markdown]
# ## 1. The induction circuit, one step at a time
#
# The text below is a sentence in the style of *Harry Potter*, turned into tokens of
# `toy-2l` by giving each distinct word its own token id (the model never saw English: it was
# trained on random sequences that repeat). The sentence ends with "Mr", which appeared once
# before, followed by "Dursley". Use **Next** to walk through the five steps, and the toggle to
# switch to a **random-token control** with the same structure: the circuit does not care what
# the tokens are.

# %%
stepper = induction_stepper(model)
stepper

# %%
data = stepper.data
text, rand = data["sequences"]["text"], data["sequences"]["random"]
glue("step_text_p", text["p_expected"])
glue("step_rand_p", rand["p_expected"])
glue("step_attn", text["attention_on_target"])
claim("on the Dursley sentence, toy-2l's induction head attends mostly to the token after the earlier 'Mr'",
      text["attention_on_target"], text["attention_on_target"] > 0.5, chapter="induction module")
claim("on the text, the model's top prediction is 'Dursley'", text["model_top"][0][0],
      text["model_top"][0][0] == text["expected"], chapter="induction module")
claim("on the random-token control, the model also predicts the token that followed the earlier occurrence",
      rand["model_top"][0][0], rand["model_top"][0][0] == rand["expected"], chapter="induction module")

# %% [markdown]
# On the sentence the induction head puts {glue:text}`step_attn:.0%` of its attention on
# "Dursley" and the model predicts it with probability {glue:text}`step_text_p:.2f`; on the
# random control the correct token gets {glue:text}`step_rand_p:.2f`.
#
# ## 2. The composition builder
#
# Head H1 (here the induction head) can read head H0's output (here the previous-token head)
# through its queries, its keys or its values. Toggle each and watch which terms of the path
# expansion exist, and how many virtual heads there are. The last column gives each term's
# size in `toy-2l`: its composition score, or the Frobenius norm of its circuit. The presets
# show the two cases that matter: "induction: K-composition only" is how `toy-2l` works, and
# "all three" is the general two-layer case.

# %%
builder = composition_builder(model, model_name="toy-2l")
builder

# %%
scores = builder.data["scores"]
glue("b_k", scores["K"])
glue("b_q", scores["Q"])
glue("b_v", scores["V"])
glue("b_base", builder.data["baseline"])
claim("in toy-2l, K-composition between the two heads is stronger than Q- or V-composition",
      f"K {scores['K']:.2f}, Q {scores['Q']:.2f}, V {scores['V']:.2f}",
      scores["K"] > max(scores["Q"], scores["V"]), chapter="induction module")

# %% [markdown]
# For `toy-2l`'s pair the K-composition score is {glue:text}`b_k:.2f`, against
# {glue:text}`b_q:.2f` for Q and {glue:text}`b_v:.2f` for V (random heads of this shape average
# about {glue:text}`b_base:.2f`): the circuit is K-composition, as the induction story says.

# %% [markdown]
# The same two heads on a random sequence repeated twice, drawn with CircuitsVis (pick a head
# and hover over a token to see where it attends): on the second copy the previous-token head
# looks one token back and the induction head looks at the token after the earlier occurrence.

# %%
from circuitbook.data import repeated_random_tokens
from circuitbook.viz import attention_pattern_view
from circuitbook.widgets.explainers import pick_heads

(l0, h0), (l1, h1) = pick_heads(model)
n = 12
rep = repeated_random_tokens(1, n, model.cfg.d_vocab, seed=0)
with torch.no_grad():
    _, cache = model.run_with_cache(rep)
pats = torch.stack([cache["pattern", l0][0, h0], cache["pattern", l1][0, h1]])
second = torch.arange(n, 2 * n)
back = float(pats[0, second, second - 1].mean())
ahead = float(pats[1, second, second - n + 1].mean())
claim("on a repeated random sequence, the previous-token head attends one back "
      "and the induction head to the token after the earlier occurrence",
      f"{back:.2f}, {ahead:.2f}", back > 0.5 and ahead > 0.5,
      chapter="induction module")
attention_pattern_view([f"t{i}" for i in rep[0].tolist()], pats,
                       [f"{l0}.{h0} previous-token", f"{l1}.{h1} induction"])
