"""Problem 7: patching, which path carries induction.

Part of the induction module's problem set (``circuitbook.checks.ps``)."""

from __future__ import annotations

import re

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, ValueExercise, as_number
from circuitbook.checks.ps.inputs import zoo_model_and_tokens


def patching_shares(model, clean, corrupted, positions):
    """clean, corrupted: [batch, pos] tokens; positions: prediction positions
    -> {"heads": [n_layers, n_heads] effects, "sender": (0, head), "paths":
    {"K", "Q", "V", "direct": the sender's effect through each}}, all
    normalised (0: as corrupted, 1: as clean)."""
    from circuitbook.patching import (mean_loss, patch_heads, path_patch,
                                      patching_run)

    run = patching_run(model, clean, corrupted,
                       lambda lg: mean_loss(lg, clean, positions))
    heads = patch_heads(run)
    sender = (0, int(heads[0].argmax()))
    readers = [(1, h) for h in range(model.cfg.n_heads)]
    paths = {x.upper(): path_patch(run, sender, readers, into=x)
             for x in "kqv"}
    paths["direct"] = path_patch(run, sender, into="logits")
    return {"heads": heads, "sender": sender, "paths": paths}


def _p7_inputs(g: torch.Generator) -> dict:
    """toy-2l on fresh repeated random tokens (on the model's device), corrupted on the key side
    (even positions of the first copy) or the query side (even positions of the second copy):
    consecutive trials alternate, so that an answer must get both right."""
    n = 16 + 2 * int(torch.randint(0, 5, (1,), generator=g))
    inputs = zoo_model_and_tokens(g, 4, n)
    clean, model = inputs["tokens"], inputs["model"]
    corrupted = clean.clone()
    key_side = g.initial_seed() % 2 == 0
    start = 0 if key_side else n
    fresh = torch.randint(0, model.cfg.d_vocab, (4, (n + 1) // 2), generator=g)
    corrupted[:, start:start + n:2] = fresh.to(clean.device)
    positions = [n + j - 1 for j in range(1, n, 2)] if key_side else [n + j for j in range(1, n - 1, 2)]
    return {"model": model, "clean": clean, "corrupted": corrupted, "positions": positions}


def _p7_variant(model, clean, corrupted, positions, *, noising=False, invert=False, one_reader=False,
                everywhere=False, corrupted_targets=False):
    from circuitbook.patching import mean_loss, patch_heads, path_patch, patching_run

    n = clean.shape[1] // 2
    at = list(range(n, 2 * n - 1)) if everywhere else positions
    target = corrupted if corrupted_targets else clean
    first, second = (corrupted, clean) if noising else (clean, corrupted)
    run = patching_run(model, first, second, lambda lg: mean_loss(lg, target, at))
    flip = (lambda x: 1 - x) if invert else (lambda x: x)
    heads = flip(patch_heads(run))
    sender = (0, int(heads[0].argmax()))
    readers = ([(1, int(heads[1].argmax()))] if one_reader else [(1, h) for h in range(model.cfg.n_heads)])
    paths = {x.upper(): flip(path_patch(run, sender, readers, into=x)) for x in "kqv"}
    paths["direct"] = flip(path_patch(run, sender, into="logits"))
    return {"heads": heads, "sender": sender, "paths": paths}


def _p7_same(got, expected) -> bool:
    """The answer in any numeric form (heads as a tensor, an array or nested lists; the sender
    as a tuple, list or tensor; each path's effect as a number or a one-element tensor or
    array) against ``expected``, to the tolerance of the default comparison."""
    from circuitbook.checks.core import allclose

    if not isinstance(got, dict) or set(got) != {"heads", "sender", "paths"}:
        return False
    try:
        heads = torch.as_tensor(got["heads"].detach().cpu() if isinstance(got["heads"], torch.Tensor)
                                else got["heads"], dtype=torch.float64)
        sender = tuple(int(x) for x in (got["sender"].tolist() if hasattr(got["sender"], "tolist")
                                        else got["sender"]))
    except (TypeError, ValueError, RuntimeError):
        return False
    paths = got["paths"]
    if not isinstance(paths, dict):
        return False
    paths = {k: as_number(v) for k, v in paths.items()}
    return allclose()({"heads": heads, "sender": sender, "paths": paths}, expected)


def _p7_wrong(**flags):
    return lambda model, clean, corrupted, positions: _p7_variant(model, clean, corrupted, positions, **flags)


P7 = FunctionExercise(
    id="ps_p7", title="patching: the head, then the path", reference=patching_shares, make_inputs=_p7_inputs,
    n_trials=2, compare=_p7_same,
    mistakes=[
        Mistake("patched the wrong direction (noising)", "You put the corrupted run's activations into the "
                "clean run. That asks what the behaviour cannot do without (necessity); this problem asks "
                "what restores it (sufficiency): clean activations into the corrupted run. The two differ "
                "where heads share the work.", _p7_wrong(noising=True)),
        Mistake("one minus the effect", "The normalisation already maps the corrupted run to 0 and the clean "
                "run to 1; subtracting from 1 turns 'restored' into 'still missing'.", _p7_wrong(invert=True)),
        Mistake("patched the path into one reader only", "The sender's output reaches every layer-1 head; "
                "patching it into the keys (or queries, values) of only one of them measures that head's "
                "share, not the path's.", _p7_wrong(one_reader=True)),
        Mistake("read the loss on the whole second copy", "The corruption spoils some predictions and leaves "
                "the others; averaging over all of them dilutes the gap. Read the metric at `positions`.",
                _p7_wrong(everywhere=True)),
        Mistake("scored against the corrupted tokens", "The metric asks how well each run predicts the "
                "clean sequence; where the corruption changed a target, the corrupted tokens are not what "
                "a restored circuit should predict.", _p7_wrong(corrupted_targets=True)),
    ],
    hint="Make one PatchingRun with the clean tokens first and the metric read at `positions` against the "
         "clean tokens. Patch every head's output to find the layer-0 head that matters, then patch only "
         "that head's output into each input of all the layer-1 heads, and into the logits. Return the "
         "dict the docstring describes; each effect is already normalised.",
)


P7B_OPTIONS = "ABCD"


def _reading(answer):
    """The letter an answer chooses: "A", "a", "A.", "(A)", "A) No layer-1 head ..." all read A;
    anything else is returned as it is (and matches no option)."""
    if not isinstance(answer, str):
        return answer
    match = re.match(r"\s*\(?\s*([A-Za-z])(?![A-Za-z])", answer)
    return match.group(1).upper() if match else answer.strip()


def _p7b_explain(answer, expected) -> str | None:
    """What is wrong with the answer's form, or None when it names one of the options."""
    letter = _reading(answer)
    if not isinstance(answer, str):
        return f"answer with the option's letter as a string, e.g. \"B\"; yours is a {type(answer).__name__}"
    if letter not in tuple(P7B_OPTIONS):
        return f"answer with one of the letters {', '.join(P7B_OPTIONS)}; yours ({answer.strip()[:40]!r}) names none of them"
    return None


P7B = ValueExercise(
    id="ps_p7b", title="reading the layer-1 heads' patching result", expected=lambda: "A",
    compare=lambda got, want: _reading(got) == want, explain=_p7b_explain,
    mistakes=[
        ("B", "reading a denoising result as a noising one", "Your measurement put one clean head into an "
         "otherwise corrupted run; B is a claim about the model running without a head. Whether a head is "
         "necessary is a different experiment (noising, or ablation), and with heads that share the work "
         "the two experiments can disagree."),
        ("C", "adding effects as if they were shares", "Effects of separate patches are not parts of one "
         "total: each is measured with everything else corrupted, and heads that do the same job each "
         "restore part of the gap on their own. Their sum can exceed 1 without anything being wrong."),
        ("D", "reading a partial effect as no effect", "Each layer-1 head restores a sizeable part of the gap, "
         "and a head that hardly mattered would restore almost none of it."),
    ],
    hint="Before choosing, write down for one of these numbers which activations of the run that measured "
         "it came from the clean input and which from the corrupted one. Then read each statement and ask "
         "which run it is about, and whether a run of that kind was made here.",
)
