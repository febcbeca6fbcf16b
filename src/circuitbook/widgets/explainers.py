"""The induction module's two explainers, as anywidget widgets (the induction module).

Both keep their logic in the page (``*.js`` beside this file), so they respond to clicks in
Jupyter, in Colab and on the static site with no kernel. The builder and the language-model
stepper receive what they show as precomputed data in a synced trait; the toy model's stepper
runs the model in the page (``live``, the induction lab's forward pass) on the reader's own
sequence. Either way the attention arcs of the stepper are the model's own attention
patterns, not drawn by hand.

- :func:`induction_stepper` - the induction circuit in five steps, on a sequence and on a
  random-token control with the same repeat. On a toy model the "text" is the sentence's
  words mapped to token ids; on a language model (give its ``tokenizer``) it is the real
  sentence, so the control separates memorised statistics from reading the context.
- :func:`composition_builder` - toggle Q-, K- and V-composition between two heads and see
  which path-expansion terms and virtual heads exist, what each configuration can compute,
  their sizes in a real model, and how the number of terms grows with heads and layers.
  Its mathematics is typeset by :func:`circuitbook.widgets.quiz.rich` (HTML, no CDN).
"""

from __future__ import annotations

import math

import anywidget
import torch
import traitlets

from circuitbook.paths import count_paths, count_score_terms
from circuitbook.widgets import frontend
from circuitbook.widgets.lab import answer_weights
from circuitbook.widgets.quiz import rich

DURSLEY = ("One morning Mr Dursley was the director of a firm called Grunnings , which made drills . "
           "He was a big , beefy man with hardly any neck . His wife said to Mr")
"""A sentence in the style of *Harry Potter*: "Mr" occurs once before the end (not first, since a
language model treats its first position specially), followed by "Dursley"."""


class InductionStepper(anywidget.AnyWidget):
    """Prev / Next through the five steps of the induction circuit; a toggle for the control.

    Precomputed (``data`` holds both sequences' numbers), or live: with ``model_name`` set, the
    page runs that toy model (``attn_only_forward.js``, the induction lab's forward pass) on
    ``tokens[mode]``, which the reader can retype; ``words`` names the text's token ids."""

    _esm = frontend.esm("induction_stepper.js")
    _css = frontend.css("explainers.css")
    data = traitlets.Dict().tag(sync=True)
    step = traitlets.Int(0).tag(sync=True)
    mode = traitlets.Unicode("text").tag(sync=True)
    model_name = traitlets.Unicode("").tag(sync=True)  # live: the zoo model the page runs
    weights = traitlets.Unicode("").tag(sync=True)  # live in Jupyter: the lab_export record, when asked
    tokens = traitlets.Dict().tag(sync=True)  # live: {"text": [ids], "random": [ids]}
    words = traitlets.Dict().tag(sync=True)  # live: {"id": word} for the text's tokens

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.on_msg(answer_weights)


class CompositionBuilder(anywidget.AnyWidget):
    """Three toggles (does H1's Q / K / V read H0?) and presets; the term list follows them."""

    _esm = frontend.esm("composition_builder.js")
    _css = frontend.css("explainers.css")
    data = traitlets.Dict().tag(sync=True)
    q = traitlets.Bool(False).tag(sync=True)
    k = traitlets.Bool(True).tag(sync=True)
    v = traitlets.Bool(False).tag(sync=True)


def _word_ids(words: list[str], d_vocab: int, seed: int) -> dict[str, int]:
    """A fixed, seeded map from the distinct words of the text to token ids of a toy model."""
    distinct = list(dict.fromkeys(words))
    if len(distinct) > d_vocab:
        raise ValueError(f"the text has {len(distinct)} distinct words but the model has only {d_vocab} tokens")
    perm = torch.randperm(d_vocab, generator=torch.Generator().manual_seed(seed)).tolist()
    return {w: perm[i] for i, w in enumerate(distinct)}


def pick_heads(model, tokens: torch.Tensor | None = None) -> tuple[tuple[int, int], tuple[int, int]]:
    """The best induction head outside layer 0 and the best previous-token head before it, by
    the scores of :mod:`circuitbook.heads` on repeated random ``tokens`` (their default if None;
    pass a few short sequences to keep a large model fast)."""
    from circuitbook.heads import induction_scores, prev_token_scores

    ind = induction_scores(model, tokens=tokens)
    ind[0] = -1  # an induction head needs a previous-token head before it
    l1, h1 = divmod(int(ind.argmax()), model.cfg.n_heads)
    prev = prev_token_scores(model, tokens=tokens)[:l1]
    l0, h0 = divmod(int(prev.argmax()), model.cfg.n_heads)
    return (l0, h0), (l1, h1)


def sequence_data(model, tokens: list[int], labels: list[str], prev_head, ind_head, label_of) -> dict:
    """Everything the stepper shows for one sequence, read off one forward pass.

    ``p_first`` is the probability of the target token right after the *first* occurrence of
    the query token, where the context holds nothing to copy: what the weights alone predict.
    ``head_top`` is the induction head's direct effect on the logits at the query, its output
    ``z W_O`` through the final normalisation's scale and weight (if any) and ``W_U``, and
    ``head_rank`` the target's rank in it (1: the head's direct effect favours it most) among
    ``n_vocab`` tokens. ``top_key`` is the key the induction head attends to most from the
    query (by attention, the same order as by score), ``top_attention`` its share, and
    ``target_key_rank`` the target's rank among the keys (1: the head attends to it most).
    Probabilities are kept to three significant digits, so that a small one is not rounded to 0.
    """
    (l0, h0), (l1, h1) = prev_head, ind_head
    query = len(tokens) - 1
    earlier = max(i for i in range(query) if tokens[i] == tokens[query])
    t = torch.tensor([tokens], device=model.W_U.device)
    names = {f"blocks.{l0}.attn.hook_pattern", f"blocks.{l1}.attn.hook_pattern",
             f"blocks.{l1}.attn.hook_attn_scores", f"blocks.{l1}.attn.hook_z", "ln_final.hook_scale"}
    with torch.no_grad():
        logits, cache = model.run_with_cache(t, names_filter=lambda n: n in names)
        prev_pat = cache[f"blocks.{l0}.attn.hook_pattern"][0, h0]      # [q, k]
        ind_pat = cache[f"blocks.{l1}.attn.hook_pattern"][0, h1, query]  # [k]
        ind_scores = cache[f"blocks.{l1}.attn.hook_attn_scores"][0, h1, query, : query + 1]
        z = cache[f"blocks.{l1}.attn.hook_z"][0, query, h1]             # [d_head]
        out = z @ model.W_O[l1, h1]                                      # [d_model]
        if "ln_final.hook_scale" in cache.cache_dict:                   # normalised models
            out = out / cache["ln_final.hook_scale"][0, query] * model.ln_final.w
        head_logits = out @ model.W_U                                   # the head's direct effect
        probs = logits[0].softmax(-1)

    prev_arcs = [[q, int(prev_pat[q].argmax()), round(float(prev_pat[q].max()), 3)] for q in range(1, query + 1)]
    top = ind_pat.topk(min(3, query + 1))
    ind_arcs = [[query, int(k), round(float(w), 3)] for w, k in zip(top.values, top.indices)]

    def top5(values):
        best = values.topk(5)
        return [[label_of(int(i)), round(float(v), 3)] for v, i in zip(best.values, best.indices)]

    return {
        "tokens": labels, "ids": list(tokens), "query": query, "earlier": earlier, "target": earlier + 1,
        "expected": labels[earlier + 1],
        "matching": [k for k in range(1, query + 1) if tokens[k - 1] == tokens[query]],
        "prev_arcs": prev_arcs, "ind_arcs": ind_arcs,
        "ind_scores": [round(float(s), 2) for s in ind_scores],
        "head_top": top5(head_logits), "model_top": top5(probs[query]),
        "attention_on_target": round(float(ind_pat[earlier + 1]), 3),
        "top_key": int(ind_pat[: query + 1].argmax()), "top_attention": round(float(ind_pat[: query + 1].max()), 3),
        "target_key_rank": int((ind_pat[: query + 1] > ind_pat[earlier + 1]).sum()) + 1,
        "p_expected": _significant(float(probs[query, tokens[earlier + 1]])),
        "p_first": _significant(float(probs[earlier, tokens[earlier + 1]])),
        "head_rank": int((head_logits > head_logits[tokens[earlier + 1]]).sum()) + 1,
        "n_vocab": int(head_logits.shape[-1]),
    }


def percent(x: float) -> str:
    """A share as a percentage, as ``induction_stepper.js`` prints ``{key:%}``: whole percent,
    but one decimal from 99.5% (so that 0.996 is not shown as 100%) and "> 99.9%" below 1
    where even that rounds to 100."""
    if x < 0.995 or x >= 1:
        # half up, as JavaScript's Math.round: Python's round() goes to even, and 100 * 0.945
        # is exactly 94.5, which the page would print as 94% and the widget as 95%
        return f"{math.floor(100 * x + 0.5)}%"
    return f"{100 * x:.1f}%" if 100 * x < 99.95 else "> 99.9%"


def _significant(x: float, digits: int = 3) -> float:
    """``x`` to ``digits`` significant digits (``induction_stepper.js`` rounds the same way)."""
    return float(f"{x:.{digits}g}")


def control_tokens(tokens: list[int], low: int, high: int, seed: int) -> list[int]:
    """A random-token control for ``tokens``: ids drawn uniformly from ``[low, high)``, with the
    last token a repeat of the one at its last earlier occurrence in ``tokens``, and no other
    copy of it (so the token to predict is unambiguous)."""
    earlier = max(i for i in range(len(tokens) - 1) if tokens[i] == tokens[-1])
    g = torch.Generator().manual_seed(seed)
    rand = torch.randint(low, high, (len(tokens),), generator=g).tolist()
    rand[-1] = rand[earlier]
    for i in range(len(rand) - 1):
        if i != earlier and rand[i] == rand[-1]:
            rand[i] = low + (rand[i] + 1 - low) % (high - low)
    return rand


def induction_measures(model, sequences: list[list[int]], induction_head: tuple[int, int]) -> torch.Tensor:
    """Three numbers per sequence, from one batched forward pass (sequences of equal length,
    each ending with a token that occurred earlier): the induction head's attention from the
    last position to the token after the last earlier occurrence, the model's probability of
    that token at the last position, and its probability right after the earlier occurrence
    (where there is nothing yet to copy). The same numbers as :func:`sequence_data`'s
    ``attention_on_target``, ``p_expected`` and ``p_first``. Shapes: returns [batch, 3]."""
    l1, h1 = induction_head
    tokens = torch.tensor(sequences, device=model.W_U.device)
    query = tokens.shape[1] - 1
    earlier = [max(i for i in range(query) if row[i] == row[query]) for row in sequences]
    name = f"blocks.{l1}.attn.hook_pattern"
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens, names_filter=lambda n: n == name)
        probs = logits.softmax(-1)                                       # [batch, pos, d_vocab]
    rows = []
    for b, e in enumerate(earlier):
        target = sequences[b][e + 1]
        rows.append([float(cache[name][b, h1, query, e + 1]), float(probs[b, query, target]),
                     float(probs[b, e, target])])
    return torch.tensor(rows)


def stepper_data(model, *, tokenizer=None, text: str = DURSLEY, seed: int = 0, random_ids: tuple[int, int] | None = None,
                 prev_head=None, induction_head=None, route: str = "") -> dict:
    """The stepper's data for ``model``: ``text`` as tokens, and a random-token control with the
    same repeat structure (:func:`control_tokens`, ids from ``random_ids``, default the whole
    vocabulary). ``route``: step 3's sentence on where the book measures the K-composition
    route for this model (the stepper itself does not); none if empty.

    Without a ``tokenizer`` (a toy model that never saw language) the words of ``text`` are
    mapped to token ids by a seeded permutation, so text and control are the same kind of
    experiment. With one, ``text`` (a space is put in front, so that its first word is the
    same token as its last) is tokenised for real, and the control separates what the model
    memorised about the words from what it reads off the context.
    """
    if prev_head is None or induction_head is None:
        prev_head, induction_head = pick_heads(model)
    if tokenizer is None:
        words = text.split()
        ids = _word_ids(words, model.cfg.d_vocab, seed)
        word_of = {i: w for w, i in ids.items()}
        text_tokens, labels = [ids[w] for w in words], words

        def label_of(i):
            return word_of.get(i, f"t{i}")
    else:
        text_tokens = tokenizer(" " + text)["input_ids"]
        labels = [tokenizer.decode([i]) for i in text_tokens]

        def label_of(i):
            return tokenizer.decode([i])
    if len(text_tokens) > model.cfg.n_ctx:
        raise ValueError(f"the text has {len(text_tokens)} tokens but the model's context is {model.cfg.n_ctx}")
    low, high = random_ids or (0, model.cfg.d_vocab)
    rand = control_tokens(text_tokens, low, high, seed + 1)
    text_seq = sequence_data(model, text_tokens, labels, prev_head, induction_head, label_of)
    rand_labels = [label_of(i) for i in rand] if tokenizer is not None else [f"t{i}" for i in rand]
    rand_seq = sequence_data(model, rand, rand_labels, prev_head, induction_head,
                              label_of if tokenizer is not None else (lambda i: f"t{i}"))
    return {"sequences": {"text": text_seq, "random": rand_seq},
            "steps": _steps(prev_head, induction_head, route),
            "prev_head": f"{prev_head[0]}.{prev_head[1]}", "induction_head": f"{induction_head[0]}.{induction_head[1]}"}


def _steps(prev_head, induction_head, route: str = "") -> list[dict]:
    """The five steps' titles and texts. The texts are templates the page fills from the sequence
    it shows (``induction_stepper.js``, ``fill``): ``{key:3}`` is ``key`` of that sequence with 3
    decimals, ``{key:%}`` a percentage, ``{key:p}`` a probability (2 or 3 decimals, or like
    1.6e-6 below 0.001), ``{key:th}`` an ordinal (1st, 2nd, 24,164th), ``{key}`` a number with
    thousands separators, ``{last}`` the last token, ``{expected}`` the one to predict and
    ``{top_token}`` the induction head's strongest key. ``variants`` holds sentences that depend
    on what was measured, per mode, filled in as ``{name}``: ``match`` (step 3) and ``lands``
    (step 4) for a head whose strongest key is the target (``top``), the first position
    (``first``) or another (``low``); ``direct`` (step 5) for a head whose direct effect ranks
    the target first (``top``), in the top 1% of the vocabulary (``high``) or lower (``low``).
    So the numbers are those of the sequence on the screen, precomputed or computed in the
    page. ``route`` ends step 3 (see :func:`stepper_data`)."""
    (l0, h0), (l1, h1) = prev_head, induction_head
    route = f" {route}" if route else ""
    return [
        {"title": "1. The task", "highlight": ["query", "earlier", "target"], "arcs": None, "panel": None,
         "text": 'The sequence ends with "{last}". Earlier, "{last}" was followed by "{expected}". A model '
                 'that reads its context can predict "{expected}" next: that is induction. Right after the first '
                 '"{last}", with nothing to copy yet, the model gave "{expected}" probability '
                 "{p_first:p}: that much it gets without a copy to read, from its weights and the context so far.",
         "random": "The same structure with random tokens: the last token occurred once before. After its "
                   "first occurrence the model gave the token that followed probability "
                   "{p_first:p}: nothing memorised helps here; only the context can."},
        {"title": f"2. The previous-token head {l0}.{h0}", "highlight": [], "arcs": "prev", "panel": None,
         "text": f"Head {l0}.{h0} attends from each position to the one before it (arcs: the model's real "
                 "attention, each position's strongest key; arcs under 0.05 or from a position to itself are "
                 "not drawn); that attention is how it was picked. In the "
                 "induction story its output carries that token's identity into the stream, so that every "
                 'position also says "my left neighbour was X". The arcs show where it looks, not what it '
                 "writes: this stepper does not measure that."},
        {"title": f"3. The induction head {l1}.{h1} matches", "highlight": ["query", "target"],
         "arcs": None, "panel": "scores",
         "variants": {"match": {"text": _match('"{expected}"'), "random": _match("the token after the earlier "
                                                                                 "occurrence")}},
         "text": f'Head {l1}.{h1}\'s query at the last position asks for "a key whose left neighbour was '
                 '{last}". If its keys read the previous-token head\'s output (K-composition), the key '
                 'right after the earlier "{last}" should score highest. {match} The stepper shows the '
                 f"scores, not that route.{route}",
         "random": f"Head {l1}.{h1}'s query asks for a key whose left neighbour equals the last token. If the "
                   "keys read the previous-token head's output (K-composition, not measured here), the key "
                   "right after the earlier occurrence should score highest, for random tokens just as for "
                   f"words. {{match}}{route}"},
        {"title": "4. Where the attention lands", "highlight": ["query", "target"],
         "arcs": "induction", "panel": None, "variants": {"lands": {"text": _lands(), "random": _lands()}},
         "text": f"After the softmax, head {l1}.{h1} puts {{attention_on_target:%}} of its "
                 'attention on "{expected}" (arcs: its three strongest keys from the last position; '
                 "arcs under 0.05 or from the position to itself are not drawn). {lands}",
         "random": f"After the softmax, head {l1}.{h1} puts {{attention_on_target:%}} of its "
                   "attention on the token after the earlier occurrence (arcs: its three strongest "
                   "keys; arcs under 0.05 or from the position to itself are not drawn). {lands}"},
        {"title": "5. What the head writes, and the prediction", "highlight": ["target"], "arcs": "induction",
         "panel": "prediction", "variants": {"direct": {"text": _direct(l1, h1, '"{expected}"'),
                                                        "random": _direct(l1, h1, "the correct next token")}},
         "text": '{direct} The model now predicts "{expected}" with probability '
                 '{p_expected:p}, against {p_first:p} after the first "{last}".',
         "random": "{direct} The model gives the correct next token probability {p_expected:p} (after its "
                   "first occurrence: {p_first:p}), with no statistics to lean on."},
    ]


def _match(name: str) -> dict[str, str]:
    """Step 3's sentence on which key scores highest, as measured: the target (``top``), the first
    position (``first``) or another (``low``)."""
    return {
        "top": f"Here it does: {name} scores highest of all keys.",
        "first": (f"Here it does not: the first position, \"{{top_token}}\", scores highest, and {name} comes "
                  "{target_key_rank:th}."),
        "low": (f"Here it does not: position {{top_key}}, \"{{top_token}}\", scores highest, and {name} comes "
                "{target_key_rank:th}."),
    }


def _lands() -> dict[str, str]:
    """Step 4's clause on where the rest of the attention goes, as measured (see :func:`_match`)."""
    return {
        "top": "No other key gets more.",
        "first": ('The first position, "{top_token}", gets more: {top_attention:%}. Many heads of language models '
                  "put much of their attention on the first position, a pattern known as an attention sink (Xiao et al. 2023); why "
                  "this head does so here, the stepper does not test."),
        "low": 'Position {top_key}, "{top_token}", gets more: {top_attention:%}.',
    }


def _direct(l1: int, h1: int, name: str) -> dict[str, str]:
    """Step 5's first sentence: what the head's own output, read through the unembedding, says
    about the target, as measured (its rank among all tokens): for rank 1 (``top``), within the
    top 1% of the vocabulary (``high``, where "only" would mislead) or lower (``low``)."""
    lower = ("{head_rank:th} of {n_vocab} tokens (its top tokens are below): by this path alone the head does not "
             "make the prediction. The direct path is not all the head does where later layers read its output, "
             "and other components write to the same logits.")
    return {
        "top": (f"Read straight through the unembedding, head {l1}.{h1}'s output at the last position "
                f"ranks {name} first of {{n_vocab}} tokens (its top tokens are below). That is one "
                "position's direct effect; whether the head's OV circuit copies in general, one rank does "
                "not say."),
        "high": f"Read straight through the unembedding, head {l1}.{h1}'s output at the last position ranks {name} "
                + lower,
        "low": f"Read straight through the unembedding, head {l1}.{h1}'s output at the last position ranks {name} "
               "only " + lower,
    }


def induction_stepper(model, *, live: str | None = None, **kwargs) -> InductionStepper:
    """The induction-circuit stepper for ``model``; see :func:`stepper_data` for the options
    (``route`` among them).

    With ``live`` (a zoo name the lab exports, ``toy-1l`` or ``toy-2l``: ``model`` must be that
    model) the page runs the model itself (``attn_only_forward.js``, as the induction lab does)
    on the sequence the reader types; the widget carries only the two starting sequences, the
    words of the text and the step texts, and no precomputed numbers."""
    data = stepper_data(model, **kwargs)
    if live is None:
        return InductionStepper(data=data)
    from circuitbook.widgets.lab_export import MODELS

    if live not in MODELS or kwargs.get("tokenizer") is not None:
        raise ValueError(f"a live stepper runs one of {', '.join(MODELS)} on toy tokens, not {live!r}")
    text = data["sequences"]["text"]
    words = {str(i): w for i, w in zip(text["ids"], text["tokens"])}
    return InductionStepper(data={k: data[k] for k in ("steps", "prev_head", "induction_head")}, model_name=live,
                            tokens={mode: seq["ids"] for mode, seq in data["sequences"].items()}, words=words)


# ----------------------------------------------------------------------------- the builder

TERMS = [
    # id, kind ("logits": a term of the logits; "score": a term of H1's attention score),
    # the toggles it needs, name, formula (TeX, row vectors; X: what queries and keys read of
    # the tokens, set per model by _query_key_input) and what it does
    ("direct", "logits", "", "direct path", r"W_E W_U",
     "bigram statistics: each token's embedding read straight out"),
    ("h0_ov", "logits", "", "H0's OV path", r"A^{H0} \cdot W_E W_{OV}^{H0} W_U",
     "H0 moves token information between positions: a skip-trigram"),
    ("h1_ov", "logits", "", "H1's OV path", r"A^{H1} \cdot W_E W_{OV}^{H1} W_U",
     "H1 moves token information; it reads the embeddings, not H0's output"),
    ("virtual", "logits", "v", "virtual head H1∘H0", r"A^{H1} A^{H0} \cdot W_E W_{OV}^{H0} W_{OV}^{H1} W_U",
     "V-composition: H1 moves what H0 already moved; a head with its own OV circuit and pattern"),
    ("qk_direct", "score", "", "H1 score: tokens · tokens", r"X W_{QK}^{H1} X^\top",
     "H1 attends by comparing raw tokens"),
    ("q_comp", "score", "q", "H1 score: Q-composition", r"(A^{H0} E W_{OV}^{H0}) W_{QK}^{H1} X^\top",
     "H1's query carries what H0 found"),
    ("k_comp", "score", "k", "H1 score: K-composition", r"X W_{QK}^{H1} (A^{H0} E W_{OV}^{H0})^\top",
     "H1's keys carry what H0 found (induction: 'my left neighbour was X')"),
    ("qk_comp", "score", "qk", "H1 score: Q- and K-composition",
     r"(A^{H0} E W_{OV}^{H0}) W_{QK}^{H1} (A^{H0} E W_{OV}^{H0})^\top", "both sides carry H0's output"),
]

CONFIGURATIONS = {
    "": "No composition: two independent one-layer models added together. Every term is a bigram or a "
        "skip-trigram; nothing here can look up a pattern in the context.",
    "q": "Q-composition only: where H1 looks from depends on what H0 found at the query's position (for "
         "example, its previous token). H1 can attend to tokens that relate to the query's neighbour, "
         "but its keys still only say what each token is.",
    "k": "K-composition only: each key advertises what H0 found about its position ('my left neighbour "
         "was X'), so H1 can find the token after an earlier copy of the current one. This is the "
         "induction circuit, and it has no virtual head.",
    "v": "V-composition only: H1 moves what H0 had already moved, a virtual head with pattern "
         "$A^{H1} A^{H0}$ (for example, two steps back). H1 still chooses where to look from raw tokens.",
    "qk": "Q- and K-composition: both sides of H1's score carry H0's output, so H1 can match a feature of "
          "the query's neighbourhood against a feature of each key's: four score terms, no virtual head.",
    "qv": "Q- and V-composition: H1's query is steered by H0, and what it moves is H0's output, a virtual "
          "head whose pattern H1 chooses with help from H0.",
    "kv": "K- and V-composition: H1 finds keys by what H0 wrote there and moves H0's output from them, a "
          "virtual head on top of the induction-style match.",
    "qkv": "All three: the general two-layer case. Every term of the expansion exists; in a trained model "
           "most are small, and the work is to find the few that are not.",
}


def _query_key_input(model, model_name: str) -> tuple[str, str]:
    """What the score terms' X stands for in ``model`` (TeX), and the note's sentence on it."""
    kind = model.cfg.positional_embedding_type
    if kind == "shortformer":
        return "(E + P)", (f" E: the token embeddings; P: the positional embeddings, which {model_name}, a "
                           "shortformer model, adds only where queries and keys are read, so P enters the score "
                           "terms and not what the heads move or the logits.")
    if kind == "standard":
        return "E", f" E: the token plus positional embeddings, which {model_name} adds to its residual stream."
    if kind == "rotary":
        return "E", (f" {model_name} rotates queries and keys by their positions (rotary), which the score terms "
                     r"leave out: each has a rotation between $W_Q$ and $W_K^\top$.")
    return "E", ""


def _scaling_counts(n_layers: int, n_heads: int) -> dict[str, int]:
    """The builder's scaling table for ``L`` layers of ``n`` heads, from the book's path
    counts (:func:`circuitbook.paths.count_paths` and ``count_score_terms``): logit terms
    ``(1 + n)^L``, of which ``(1 + n)^L - 1 - n L`` virtual heads, and the attention-score
    terms ``n sum_l (1 + n)^(2 l)``."""
    paths = count_paths(n_layers, n_heads)
    return {"logits": paths["total"], "virtual": paths["total"] - paths["direct"] - paths["order_1"],
            "scores": count_score_terms(n_layers, n_heads)}


def _readable(count: int) -> str:
    """``count`` as a reader takes it in: with thousands separators below 10^15, else as
    m × 10^e (HTML)."""
    if count < 10**15:
        return f"{count:,}"
    exponent = len(str(count)) - 1
    return f"{count / 10**exponent:.1f} × 10<sup>{exponent}</sup>"


def builder_data(model, *, prev_head=None, induction_head=None, model_name: str = "the model",
                 max_heads: int = 16, max_layers: int = 12) -> dict:
    """Sizes of each path-expansion term for the head pair (H0, H1) of ``model``, the terms and
    configurations as typeset HTML, and the path counts for 1..max_heads heads per layer and
    1..max_layers layers (each as ``[exact digits, readable HTML]``: the counts outgrow
    JavaScript's exact integers)."""
    from circuitbook.circuits import direct_path, full_ov_circuit
    from circuitbook.composition import composition_scores, random_baseline, virtual_ov

    if prev_head is None or induction_head is None:
        prev_head, induction_head = pick_heads(model)
    (l0, h0), (l1, h1) = prev_head, induction_head
    with torch.no_grad():
        comp = {kind: float(composition_scores(model, kind)[l0, h0, l1, h1]) for kind in "QKV"}  # [writer, reader]
        base = float(random_baseline(model.cfg.d_model, model.cfg.d_head, kind="K", seed=0))
        norms = {"direct": float(direct_path(model).norm()), "h0_ov": float(full_ov_circuit(model, l0, h0).norm()),
                 "h1_ov": float(full_ov_circuit(model, l1, h1).norm()),
                 "virtual": float(virtual_ov(model, prev_head, induction_head).norm())}
    sizes = {
        "direct": rich(rf"$\|W_E W_U\|_F$ = {norms['direct']:.1f}"),
        "h0_ov": rich(rf"$\|W_E W_{{OV}} W_U\|_F$ = {norms['h0_ov']:.1f}"),
        "h1_ov": rich(rf"$\|W_E W_{{OV}} W_U\|_F$ = {norms['h1_ov']:.1f}"),
        "virtual": rich(rf"V-comp {comp['V']:.2f}; $\|W_{{OV}}^{{H0}} W_{{OV}}^{{H1}}\|_F$ = {norms['virtual']:.1f}"),
        "qk_direct": "",
        "q_comp": f"Q-comp {comp['Q']:.2f}",
        "k_comp": f"K-comp {comp['K']:.2f}",
        "qk_comp": f"Q {comp['Q']:.2f}, K {comp['K']:.2f}",
    }
    x, x_note = _query_key_input(model, model_name)
    note = rich(f"H0 = head {l0}.{h0} (previous-token head), H1 = head {l1}.{h1} (induction head) of {model_name}. "
                r"Composition scores are $\|W_A W_B\|_F / (\|W_A\|_F \|W_B\|_F)$; between random heads of this "
                f"shape they average {base:.2f}. Only V-composition creates a virtual head; Q- and K-composition "
                "change where H1 attends, not what it moves." + x_note)
    terms = [{"id": i, "kind": kind, "needs": list(needs), "name": name, "formula": rich(f"${tex.replace('X', x)}$"),
              "what": rich(what)} for i, kind, needs, name, tex, what in TERMS]
    counts = {f"{n},{big_l}": {k: [str(v), _readable(v)] for k, v in _scaling_counts(big_l, n).items()}
              for n in range(1, max_heads + 1) for big_l in range(1, max_layers + 1)}
    scaling = {"counts": counts, "max_heads": max_heads, "max_layers": max_layers,
               "formula": rich(r"logit terms $(1 + n)^L$, of which $(1 + n)^L - 1 - nL$ virtual heads; "
                               r"attention-score terms $n \sum_{l=0}^{L-1} (1 + n)^{2l}$")}
    return {"sizes": sizes, "norms": norms, "note": note, "model_name": model_name, "scores": comp, "baseline": base,
            "heads": {"H0": f"{l0}.{h0}", "H1": f"{l1}.{h1}"}, "terms": terms,
            "configurations": {key: rich(text) for key, text in CONFIGURATIONS.items()}, "scaling": scaling}


def composition_builder(model, **kwargs) -> CompositionBuilder:
    """The composition builder for ``model``, initially on the induction preset (K only)."""
    return CompositionBuilder(data=builder_data(model, **kwargs))
