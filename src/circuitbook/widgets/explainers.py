"""The induction module's two explainers, as anywidget widgets (the induction module).

Both keep their logic in the page (``*.js`` beside this file) and receive everything they
show as precomputed data in a synced trait, so they respond to clicks in Jupyter, in Colab
and on the static site with no kernel. The data come from a real model: the attention arcs
of the stepper are the model's own attention patterns, not drawn by hand.

- :func:`induction_stepper` - the induction circuit in five steps, on a text-like sequence and
  on a random-token control.
- :func:`composition_builder` - toggle Q-, K- and V-composition between two heads and see
  which path-expansion terms and virtual heads exist, with their sizes in a real model.
"""

from __future__ import annotations

from pathlib import Path

import anywidget
import torch
import traitlets

HERE = Path(__file__).parent

DURSLEY = ("Mr Dursley was the director of a firm called Grunnings , which made drills . "
           "He was a big , beefy man with hardly any neck . One morning his wife said Mr")


class InductionStepper(anywidget.AnyWidget):
    """Prev / Next through the five steps of the induction circuit; a toggle for the control."""

    _esm = HERE / "induction_stepper.js"
    _css = HERE / "explainers.css"
    data = traitlets.Dict().tag(sync=True)
    step = traitlets.Int(0).tag(sync=True)
    mode = traitlets.Unicode("text").tag(sync=True)


class CompositionBuilder(anywidget.AnyWidget):
    """Three toggles (does H1's Q / K / V read H0?) and presets; the term list follows them."""

    _esm = HERE / "composition_builder.js"
    _css = HERE / "explainers.css"
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


def pick_heads(model) -> tuple[tuple[int, int], tuple[int, int]]:
    """The best previous-token head and the best induction head in a later layer, by score."""
    from circuitbook.heads import induction_scores, prev_token_scores

    ind = induction_scores(model)
    ind[0] = -1  # an induction head needs a previous-token head before it
    l1, h1 = divmod(int(ind.argmax()), model.cfg.n_heads)
    prev = prev_token_scores(model)[:l1]
    l0, h0 = divmod(int(prev.argmax()), model.cfg.n_heads)
    return (l0, h0), (l1, h1)


def _sequence_data(model, tokens: list[int], labels: list[str], prev_head, ind_head, label_of) -> dict:
    """Everything the stepper shows for one sequence, read off one forward pass."""
    (l0, h0), (l1, h1) = prev_head, ind_head
    query = len(tokens) - 1
    earlier = max(i for i in range(query) if tokens[i] == tokens[query])
    t = torch.tensor([tokens])
    names = {f"blocks.{l0}.attn.hook_pattern", f"blocks.{l1}.attn.hook_pattern",
             f"blocks.{l1}.attn.hook_attn_scores", f"blocks.{l1}.attn.hook_z"}
    with torch.no_grad():
        logits, cache = model.run_with_cache(t, names_filter=lambda n: n in names)
        prev_pat = cache[f"blocks.{l0}.attn.hook_pattern"][0, h0]      # [q, k]
        ind_pat = cache[f"blocks.{l1}.attn.hook_pattern"][0, h1, query]  # [k]
        ind_scores = cache[f"blocks.{l1}.attn.hook_attn_scores"][0, h1, query, : query + 1]
        z = cache[f"blocks.{l1}.attn.hook_z"][0, query, h1]             # [d_head]
        head_logits = z @ model.W_O[l1, h1] @ model.W_U                 # the head's direct effect
        probs = logits[0, query].softmax(-1)

    prev_arcs = [[q, int(prev_pat[q].argmax()), round(float(prev_pat[q].max()), 3)] for q in range(1, query + 1)]
    top = ind_pat.topk(min(3, query + 1))
    ind_arcs = [[query, int(k), round(float(w), 3)] for w, k in zip(top.values, top.indices)]

    def top5(values):
        best = values.topk(5)
        return [[label_of(int(i)), round(float(v), 3)] for v, i in zip(best.values, best.indices)]

    return {
        "tokens": labels, "query": query, "earlier": earlier, "target": earlier + 1,
        "expected": labels[earlier + 1],
        "matching": [k for k in range(1, query + 1) if tokens[k - 1] == tokens[query]],
        "prev_arcs": prev_arcs, "ind_arcs": ind_arcs,
        "ind_scores": [round(float(s), 2) for s in ind_scores],
        "head_top": top5(head_logits), "model_top": top5(probs),
        "attention_on_target": round(float(ind_pat[earlier + 1]), 3),
        "p_expected": round(float(probs[tokens[earlier + 1]]), 3),
    }


def stepper_data(model, *, text: str = DURSLEY, seed: int = 0, prev_head=None, induction_head=None) -> dict:
    """The stepper's data for ``model`` (a toy HookedTransformer): the text, mapped word by word
    to token ids, and a random-token control with the same repeat structure."""
    if prev_head is None or induction_head is None:
        prev_head, induction_head = pick_heads(model)
    words = text.split()
    if len(words) > model.cfg.n_ctx:
        raise ValueError(f"the text has {len(words)} words but the model's context is {model.cfg.n_ctx}")
    ids = _word_ids(words, model.cfg.d_vocab, seed)
    word_of = {i: w for w, i in ids.items()}
    text_tokens = [ids[w] for w in words]
    g = torch.Generator().manual_seed(seed + 1)
    rand = torch.randint(0, model.cfg.d_vocab, (len(words),), generator=g).tolist()
    earlier = max(i for i in range(len(words) - 1) if words[i] == words[-1])
    rand[-1] = rand[earlier]  # the control keeps one repeat: the last token occurred before
    for i in range(len(rand) - 1):  # ... and only one, so the answer is unambiguous
        if i != earlier and rand[i] == rand[-1]:
            rand[i] = (rand[i] + 1) % model.cfg.d_vocab
    text_seq = _sequence_data(model, text_tokens, words, prev_head, induction_head,
                              lambda i: word_of.get(i, f"t{i}"))
    rand_seq = _sequence_data(model, rand, [f"t{i}" for i in rand], prev_head, induction_head, lambda i: f"t{i}")
    (l0, h0), (l1, h1) = prev_head, induction_head
    last, nxt = words[-1], words[earlier + 1]
    steps = [
        {"title": "1. The task", "highlight": ["query", "earlier", "target"], "arcs": None, "panel": None,
         "text": f'The sequence ends with "{last}". Earlier, "{last}" was followed by "{nxt}". A model '
                 f'that has seen this pattern once in its context can predict "{nxt}" next: that is induction.',
         "random": "The same structure with random tokens: the last token occurred once before. No bigram "
                   "statistics can help here; only the context can."},
        {"title": f"2. The previous-token head {l0}.{h0}", "highlight": [], "arcs": "prev", "panel": None,
         "text": f"Head {l0}.{h0} attends from each position to the one before it (arcs: the model's real "
                 "attention). Its OV circuit copies that token's identity into the stream, so every position "
                 'now also says "my left neighbour was X".'},
        {"title": f"3. K-composition: the induction head {l1}.{h1} matches", "highlight": ["query", "target"],
         "arcs": None, "panel": "scores",
         "text": f'Head {l1}.{h1}\'s query at the last position asks for "a key whose left neighbour was '
                 f'{last}". Its keys read the previous-token head\'s output (K-composition), so the key '
                 f'right after the earlier "{last}" scores highest.',
         "random": f"Head {l1}.{h1}'s query asks for a key whose left neighbour equals the last token. The "
                   "keys read the previous-token head's output, so the key right after the earlier "
                   "occurrence scores highest, for random tokens just as for words."},
        {"title": "4. Attention lands on the token after the earlier occurrence", "highlight": ["query", "target"],
         "arcs": "induction", "panel": None,
         "text": f'After the softmax, head {l1}.{h1} puts {text_seq["attention_on_target"]:.0%} of its '
                 f'attention on "{nxt}" (arcs: its real pattern from the last position).',
         "random": f'After the softmax, head {l1}.{h1} puts {rand_seq["attention_on_target"]:.0%} of its '
                   "attention on the token after the earlier occurrence."},
        {"title": "5. The copying OV circuit writes it", "highlight": ["target"], "arcs": "induction",
         "panel": "prediction",
         "text": f'Head {l1}.{h1}\'s OV circuit copies the token it attends to: read through the unembedding, '
                 f'its output favours "{nxt}". The model predicts "{nxt}" with probability '
                 f'{text_seq["p_expected"]:.2f}.',
         "random": f"The OV circuit copies the attended token here too: the model gives the correct next "
                   f"token probability {rand_seq['p_expected']:.2f}, with no statistics to lean on."},
    ]
    return {"sequences": {"text": text_seq, "random": rand_seq}, "steps": steps,
            "prev_head": f"{l0}.{h0}", "induction_head": f"{l1}.{h1}"}


def induction_stepper(model, **kwargs) -> InductionStepper:
    """The induction-circuit stepper for ``model``; see :func:`stepper_data` for the options."""
    return InductionStepper(data=stepper_data(model, **kwargs))


def builder_data(model, *, prev_head=None, induction_head=None, model_name: str = "the model") -> dict:
    """Sizes of each path-expansion term for the head pair (H0, H1) of ``model``."""
    from circuitbook.circuits import direct_path, full_ov_circuit
    from circuitbook.composition import composition_scores, random_baseline, virtual_ov

    if prev_head is None or induction_head is None:
        prev_head, induction_head = pick_heads(model)
    (l0, h0), (l1, h1) = prev_head, induction_head
    with torch.no_grad():
        comp = {kind: float(composition_scores(model, kind)[l0, h0, l1, h1]) for kind in "QKV"}  # [writer, reader]
        base = float(random_baseline(model.cfg.d_model, model.cfg.d_head, kind="K", seed=0))
        virt = virtual_ov(model, prev_head, induction_head)
        sizes = {
            "direct": f"||W_E W_U||_F = {float(direct_path(model).norm()):.1f}",
            "h0_ov": f"||full OV||_F = {float(full_ov_circuit(model, l0, h0).norm()):.1f}",
            "h1_ov": f"||full OV||_F = {float(full_ov_circuit(model, l1, h1).norm()):.1f}",
            "virtual": f"V-comp {comp['V']:.2f}; ||W_OV^H0 W_OV^H1||_F = {float(virt.norm()):.1f}",
            "qk_direct": "",
            "q_comp": f"Q-comp {comp['Q']:.2f}",
            "k_comp": f"K-comp {comp['K']:.2f}",
            "qk_comp": f"Q {comp['Q']:.2f}, K {comp['K']:.2f}",
        }
    note = (f"H0 = head {l0}.{h0} (previous-token head), H1 = head {l1}.{h1} (induction head) of {model_name}. "
            f"Composition scores are ||W_A W_B||_F / (||W_A||_F ||W_B||_F); between random heads of this shape "
            f"they average {base:.2f}. Only V-composition creates a virtual head; Q- and K-composition change "
            "where H1 attends, not what it moves.")
    return {"sizes": sizes, "note": note, "model_name": model_name, "scores": comp, "baseline": base,
            "heads": {"H0": f"{l0}.{h0}", "H1": f"{l1}.{h1}"}}


def composition_builder(model, **kwargs) -> CompositionBuilder:
    """The composition builder for ``model``, initially on the induction preset (K only)."""
    return CompositionBuilder(data=builder_data(model, **kwargs))
