# %% [markdown]
# # The SmolLM2 lab: a real model's induction heads in your browser
#
# The toy lab ran `toy-2l`, a model that never saw language. This page runs the book's
# real model, SmolLM2 (SmolLM2-135M-Instruct: 30 layers of 9 heads, chapter
# {doc}`../04_embeddings`), on text you type, in your browser. Nothing is computed
# on a server: the page fetches the model's weights (4-bit, the embedding 8-bit) from this site once you press
# its button, and then runs all 30 layers in WebAssembly on your machine. You can read
# the attention pattern of any of its 270 heads, see what it expects next at any
# position and how surprised it is by every token, and take heads out to see what
# breaks.

# %% tags=["hide-input"]
import random
import warnings

import torch

from circuitbook.book import (Null, finding, glue, identity, null_test,
                              observation)
from circuitbook.data.corpus import shakespeare_scenes
from circuitbook.heads import ablate, induction_scores
from circuitbook.models.pretrained import load_smollm2
from circuitbook.widgets import smollm2_export as export
from circuitbook.widgets.smollm2_lab import EXAMPLES, lab_tokens, smollm2_lab

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
_ = torch.manual_seed(0)
_ = torch.set_grad_enabled(False)  # we only read the model here
smol, tokenizer = load_smollm2(progress=False)
L, H = smol.cfg.n_layers, smol.cfg.n_heads

# %% [markdown]
# The set-up above loads SmolLM2 in Python as well, for the measurements below. First,
# the passage this page repeats: 32 tokens of a scene from *Much Ado About Nothing*
# (the Shakespeare corpus of chapter {doc}`../19_training`).

# %%
SCENE, START, LENGTH = 40, 300, 32
play, scene = shakespeare_scenes()[SCENE]
passage = tokenizer(scene[:4000])["input_ids"][START:START + LENGTH]
passage_text = tokenizer.decode(passage)
identity("the passage's text tokenises back to the same 32 tokens, so the "
         "page, which tokenises the text, runs the tokens measured here",
         len(passage), tokenizer(passage_text)["input_ids"] == passage)
print(play + ":")
print(passage_text)
n_weights = sum(p.numel() for name, p in smol.named_parameters()
                if not name.split(".")[-1].startswith("b_")
                and name != "unembed.W_U")   # zero biases; W_U is W_E's
glue("n_weights_m", n_weights / 1e6)

# %% [markdown]
# ## The lab
#
# - **Load SmolLM2** fetches its weights and tables from this site
#   ({glue:text}`download_mb:.0f` MB, once; a progress bar shows how far it is). The
#   controls that need the model stay off until then. Nothing leaves the site: the page
#   asks no other server for anything, and the rest of the site never loads any of it.
# - The **text box** holds what the model reads, tokenised in the page by SmolLM2's own
#   tokenizer (at most {glue:text}`max_tokens` tokens). **Run**, Enter, or a pause of
#   {glue:text}`debounce_s:.1f` s in your typing runs it (Shift+Enter starts a new line);
#   until the new results arrive, the old ones are dimmed and marked *stale*.
#   **Repeat its tokens once** puts the same tokens twice in a row: the test of chapter
#   {doc}`../17_induction_heads`, on text. The example buttons fill in the passage above
#   (repeated) and a short story in which a name comes back.
# - **Repeats in your text.** Whatever you type, the lab looks for tokens that repeat an
#   earlier run: a token counts as a *repeat* when it and the
#   {glue:text}`min_repeat_less` tokens before it occurred earlier in the same order, and
#   the earliest such place is its *first occurrence*. Beside the mean loss it prints the
#   loss at the first occurrences and at the repeats, and the loss chart (position across,
#   loss in nats up) shades both. The first {glue:text}`min_repeat_less` tokens of a
#   repeated stretch count in neither: the rule needs that many tokens before a token to
#   call it a repeat (a shorter match is often chance), though an induction head can act
#   after a single matching token.
# - The **tokens** below are tinted by the loss on each one (how surprised the model is
#   by it, given the tokens before); click one to choose the position whose next-token
#   predictions are shown.
# - The **grid** holds all 270 heads, layer 0 at the top, each drawn as its attention
#   pattern on your text (query down, key across, dark: much attention). A head you
#   click is shown large beside it, with the tokens it attends to most from the chosen
#   position. Switch "clicking a head" to *ablates it* and a click replaces the head's
#   output by zero, then by its mean, then gives it back: the substitution of
#   `circuitbook.heads.ablate`, with each head's mean `z` over
#   {glue:text}`ref_passages` Shakespeare passages of {glue:text}`ref_length` tokens
#   (exported with the weights).
# - **The top k induction heads** ablates the k heads with the highest induction scores
#   (chapter {doc}`../17_induction_heads`'s score, which chapter
#   {doc}`../17_induction_evidence` ranks SmolLM2's heads by); **k random
#   heads** ablates k heads drawn at random, one fresh draw on each click. One draw says
#   little: on the repeated passage below, 40 draws of {glue:text}`smol_k` mean-ablated
#   heads left the second copy's loss anywhere from {glue:text}`smol_random_min:.2f` to
#   {glue:text}`smol_random_max:.2f` nats (clean, {glue:text}`smol_second:.2f`);
#   zero-ablation or a larger k can cost more. **Random baseline**
#   runs {glue:text}`baseline_draws` draws of k random heads on your text, a full pass
#   each (a counter shows the progress), and prints their mean, standard
#   deviation and range for every loss the lab shows.
# - While heads are ablated, every loss is printed as *clean → ablated, change*, and the
#   chart marks the clean loss of each token beside the ablated one.

# %% tags=["hide-input"]
examples = {"a passage of Shakespeare, repeated":
            {"text": passage_text, "repeat": True}, **EXAMPLES}
lab = smollm2_lab(passage_text, repeat=True, examples=examples)
# the size the page and the widget print: one number, the files the button loads
glue("download_mb", lab.download_bytes / 1e6)
glue("max_tokens", export.MAX_TOKENS)
glue("debounce_s", lab.debounce_ms / 1000)
glue("min_repeat_less", lab.min_repeat - 1)
glue("baseline_draws", lab.baseline_draws)
lab

# %% [markdown]
# The whole forward pass runs in the page, in float32 like TransformerLens, on the
# weights exactly as the GGUF file stores them (every one of the
# {glue:text}`n_weights_m:.1f` million weights the page reads equals the Python
# model's bit for bit: the export checks them). The browser tests hold the page to
# TransformerLens on random and real texts, layer by layer, within the rounding of
# float32. An ablation reruns only the layers from the first ablated head on.
#
# ## The repeated passage, measured here
#
# The page's numbers can be checked in Python. The heads to ablate are ranked by the
# induction score of chapter {doc}`../17_induction_heads`, as chapter
# {doc}`../17_induction_evidence` ranks them ({glue:text}`ind_batch`
# sequences of {glue:text}`ind_len` random token ids, repeated once), and the means are
# those the page uses.

# %% tags=["hide-input"]
scores = induction_scores(smol, tokens=export.induction_tokens())   # [L, H]
order = [divmod(int(i), H) for i in scores.flatten().argsort(descending=True)]
reference = export.reference_tokens(tokenizer)
every = [(layer, head) for layer in range(L) for head in range(H)]
means = ablate(smol, every, "mean", reference_tokens=reference).means
K = 6                                        # the lab's default k
tokens = torch.tensor([lab_tokens(passage, True)])   # [1, 64]


def copy_losses(runs, hooks=()):
    """(first-copy, second-copy) mean loss of each row of `runs` [batch, 64],
    the second copy from its second token (its first cannot be predicted)."""
    with torch.no_grad(), smol.hooks(fwd_hooks=list(hooks)):
        logp = smol(runs).log_softmax(-1)[:, :-1]
    loss = -logp.gather(-1, runs[:, 1:, None])[..., 0]          # [batch, 63]
    return loss[:, : LENGTH - 1].mean(-1), loss[:, LENGTH:].mean(-1)


def row_ablation(draws):
    """Hooks that mean-ablate the heads draws[b] in row b (the same
    substitution as heads.ablate, with its means), so many draws run as one
    batch."""
    def hook(z, hook):
        z = z.clone()
        for b, heads in enumerate(draws):
            for layer, head in heads:
                if layer == hook.layer():
                    z[b, :, head] = means[layer][head]
        return z
    return [(f"blocks.{layer}.attn.hook_z", hook) for layer in range(L)]


# %%
top = order[:K]
rng = random.Random(0)
draws = [rng.sample(every, K) for _ in range(40)]
# one batch: row 0 clean, row 1 the top K, then the random draws
firsts, seconds = copy_losses(tokens.repeat(2 + len(draws), 1),
                              row_ablation([[], top] + draws))
first, second, second_top = firsts[0], seconds[0], seconds[1]
second_random = seconds[2:]
print(f"top {K} induction heads:", ", ".join(f"L{l}H{h}" for l, h in top))
print(f"second-copy loss: clean {second.item():.2f}, top {K} ablated "
      f"{second_top.item():.2f}, {len(draws)} random sets of {K}: "
      f"{second_random.mean():.2f} +- {second_random.std():.2f}")

# %% tags=["hide-input"]
observation("SmolLM2's mean loss on the passage's first copy, and on its "
            "second (nats)", f"{first.item():.2f}, {second.item():.2f}",
            chapter="induction module")
top_test = null_test(second_top.item(), Null.draws(
    f"{len(draws)} random sets of {K} heads, mean-ablated", second_random),
    alternative="greater")
finding(f"mean-ablating SmolLM2's top {K} induction heads raises the loss on "
        "the second copy of this one repeated passage more than ablating "
        "random heads does", top_test, chapter="induction module")
glue("smol_first", first.item())
glue("smol_second", second.item())
glue("smol_second_top", second_top.item())
glue("smol_random_mean", second_random.mean().item())
glue("smol_random_min", second_random.min().item())
glue("smol_random_max", second_random.max().item())
glue("smol_k", K)
glue("smol_n_draws", len(draws))
glue("smol_top_heads", ", ".join(f"L{l}H{h}" for l, h in top))
glue("smol_best_head", f"L{top[0][0]}H{top[0][1]}")
glue("smol_n_below", int((second_random < second_top).sum()))
glue("smol_top_p", top_test.p)
glue("smol_top_z", top_test.z)
glue("smol_min_p", 1 / (len(draws) + 1))
glue("ind_batch", export.INDUCTION["batch"])
glue("ind_len", export.INDUCTION["seq_len"])
glue("ref_passages", export.REFERENCE["passages"])
glue("ref_length", export.REFERENCE["length"])

# %% [markdown]
# On the first copy the model pays {glue:text}`smol_first:.2f` nats a token; on the
# second, {glue:text}`smol_second:.2f`. Mean-ablate the top {glue:text}`smol_k`
# induction heads ({glue:text}`smol_top_heads`) and the second copy costs
# {glue:text}`smol_second_top:.2f`, while {glue:text}`smol_n_draws` random sets of
# {glue:text}`smol_k` heads cost {glue:text}`smol_random_mean:.2f` on average and at
# most {glue:text}`smol_random_max:.2f`. The top {glue:text}`smol_k` cost more than
# {glue:text}`smol_n_below` of the {glue:text}`smol_n_draws` random sets: a rank-test
# p-value of {glue:text}`smol_top_p:.3f`, where {glue:text}`smol_n_draws` draws can give
# no less than {glue:text}`smol_min_p:.3f`. The plain gap says more: the top set costs
# {glue:text}`smol_second_top:.2f` where the costliest random set cost
# {glue:text}`smol_random_max:.2f` ({glue:text}`smol_top_z:.1f` standard deviations of the
# random sets above their mean: a distance, not a probability). The random sets draw from
# all layers, so they do not rule out that any heads of these layers would cost as much.
# This is one passage: the problem set ({doc}`03_problems`) measures a related effect on
# many, against controls matched in layer and size.
#
# **Rerun it by clicking.** Load the model; the lab starts on this passage, repeated.
# Read the two copies' losses under the token strip. Press *the top k induction heads*
# (k = 6, mean) and read them again, each printed beside its clean value; then press
# *random baseline* for {glue:text}`baseline_draws` draws of 6 random heads on this passage.
# The numbers the page prints are the ones above (the baseline's draws are others than the
# {glue:text}`smol_n_draws` here, so its mean and spread differ by chance): the browser
# tests compute the page's numbers in Python and compare them.
#
# ## A name that recurs
#
# Repeated passages are rare in real text; repeated names are everywhere. In the story
# of the second example, "Mrs. Eleanor Vance" comes back in the last sentence. Once the
# model has read "Mrs." the second time, the rest of the name can be predicted only
# from the context, though the model need not predict it.

# %%
story = EXAMPLES["a name that recurs"]["text"]
ids = tokenizer(story)["input_ids"]
name = tokenizer(" Eleanor Vance")["input_ids"]
starts = [i for i in range(len(ids)) if ids[i:i + len(name)] == name]
identity("the name appears twice in the story's tokens", starts, len(starts) == 2)
again = range(starts[1] + 1, starts[1] + len(name))   # after its first token
story_tokens = torch.tensor([ids])


def name_losses(draws):
    """Mean loss on the second "Eleanor Vance" after its first token, with
    the heads draws[b] mean-ablated in row b."""
    runs = story_tokens.repeat(len(draws), 1)
    with torch.no_grad(), smol.hooks(fwd_hooks=row_ablation(draws)):
        logp = smol(runs).log_softmax(-1)
    return [-sum(logp[b, i - 1, ids[i]] for i in again).item() / len(again)
            for b in range(len(draws))]


clean_name, top_name, *alone = name_losses([[], top] + [[h] for h in top])
one_name = {f"L{l}H{h}": v for (l, h), v in zip(top, alone)}
print("name tokens:", [tokenizer.decode([t]) for t in name])
print(f"loss on the second name: clean {clean_name:.2f}, top {K} ablated "
      f"{top_name:.2f}; one head at a time:")
print("  " + ", ".join(f"{k} {v:.2f}" for k, v in one_name.items()))
observation(f"loss on the recurring name's later tokens (clean, top {K} "
            "induction heads mean-ablated, nats)",
            f"{clean_name:.2f}, {top_name:.2f}", chapter="induction module")
glue("name_clean", clean_name)
glue("name_top", top_name)
glue("name_one_max", max(one_name.values()))
glue("name_n", len(again))

# %% [markdown]
# The {glue:text}`name_n` tokens of the name after its first one cost
# {glue:text}`name_clean:.2f` nats on average the second time; with the top
# {glue:text}`smol_k` induction heads mean-ablated, {glue:text}`name_top:.2f`. One of them
# alone moves it to at most {glue:text}`name_one_max:.2f`. These are observations on one
# short story, with no null beside them: they say what to look at in the lab, not what is
# true of names in general.
#
# ## Things to try
#
# - **How much do heads move a name's probability?** Choose the second example and
#   click the token "␣Eleanor" near the end (the name's first token, the second time):
#   the top 5 say what the model expects next, and the name's next piece need not be
#   first. Switch clicks to *ablates it* and take out induction heads one at a time (the
#   grid's tooltips give each head's score), watching how far that piece's probability
#   moves, and in which direction: some ablations raise it.
# - **What does a random head do?** Press *k random heads* a few times with k = 6, then
#   *random baseline*: the draws above say what to expect. Then try k = 30, a ninth of the
#   model: is a large random set still as cheap on average, and how wide is the spread?
# - **Zero or mean?** Switch the buttons to zero-ablation. Zeroing a head removes also
#   the constant part of its output, which later layers are used to; the mean keeps it.
# - **The induction stripe.** Show {glue:text}`smol_best_head`, the top induction head,
#   on the repeated passage: in the second half its
#   pattern has a stripe one step right of the diagonal of the first copy (the token
#   after the earlier copy of the current one). Now find the heads in the layers below
#   whose pattern sits just left of the diagonal: previous-token heads, the other half
#   of the circuit (chapter {doc}`../18_composition`).
# - **Your own text.** Paste a paragraph with a phrase that recurs (a chorus, a list, a
#   line of code): the lab finds the repeat itself and prints the loss at its first
#   occurrence and at the repeat. Ablate the top induction heads and compare the change
#   with the random baseline's spread.
#
# ## In Jupyter and Colab
#
# Run this notebook and the lab is live: it asks the kernel for the same files (the
# kernel exports them once into your cache, about a minute), the kernel tokenises your
# text, and the text, the ablated heads and the head shown sync back to Python, where a
# cell can read them.

# %%
print("tokens:", len(lab.tokens), "; head shown:", lab.head)
print("ablated:", lab.ablated or "none")
