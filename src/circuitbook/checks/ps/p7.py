"""Problem 7: patching, which path carries induction.

Part of the induction module's problem set (``circuitbook.checks.ps``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import torch

from circuitbook.checks.core import NO_HINT_YET, FunctionExercise, Mistake, Result, ValueExercise, as_number
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
        Mistake("the runs' roles exchanged", "Your effects are those of patches between the two runs in the other "
                "direction than the one the problem describes. Which run is patched, and which supplies the "
                "activation? Reread the problem's first paragraph.", _p7_wrong(noising=True)),
        Mistake("one minus the effect", "The normalisation already maps the corrupted run to 0 and the clean "
                "run to 1; subtracting from 1 turns 'restored' into 'still missing'.", _p7_wrong(invert=True)),
        Mistake("patched the path into one reader only", "The sender's output reaches every layer-1 head; "
                "patching it into the keys (or queries, values) of only one of them measures that head's "
                "share, not the path's.", _p7_wrong(one_reader=True)),
        Mistake("read the loss on the whole second copy", "Your metric is read at every prediction of the second "
                "copy, most of which the corruption leaves alone. Where does the docstring say to read it?",
                _p7_wrong(everywhere=True)),
        Mistake("scored against the corrupted tokens", "The metric asks how well each run predicts the "
                "clean sequence; where the corruption changed a target, the corrupted tokens are not what "
                "a restored circuit should predict.", _p7_wrong(corrupted_targets=True)),
    ],
    hint="Which run is patched, and which supplies the activations? Where is the metric read, and against "
         "which tokens? Then: which of the sender's routes into layer 1 does each of your patches open?",
)


# --- the positions: where a corruption spoils the match and nothing else (issue 39) --------------


def spoiled_positions(n, side):
    """n: the length of one copy (even); side: "key" (the first copy's even
    positions 0, 2, ..., n - 2 corrupted) or "query" (the second copy's, n,
    n + 2, ..., 2n - 2) -> the prediction positions p (the logits at p
    predict token p + 1) where the corruption spoils the induction match
    while the query's own token and the token the match copies stay clean."""
    if side == "key":
        # the query at n + i (token i) should find key i + 1, whose previous
        # token i is corrupted when i is even; the token copied, i + 1, is odd
        return [n + i for i in range(0, n - 1, 2)]
    # the query at n + j holds a clean token (j odd) after a corrupted one;
    # p = 2n - 1 predicts nothing
    return [n + j for j in range(1, n - 1, 2)]


def _p7c_inputs(g: torch.Generator) -> dict:
    n = 8 + 2 * int(torch.randint(0, 12, (1,), generator=g))
    return {"n": n, "side": "key" if int(torch.randint(0, 2, (1,), generator=g)) == 0 else "query"}


def _p7c_variant(n, side, *, token_index=False, whole=False, copied=False, last=False):
    # (the other side's positions are the positions spoiled another way: the copied variant names them)
    if whole:
        return list(range(n, 2 * n - 1))
    if copied:  # key side: the match holds but the token it copies (i + 1 even) was corrupted;
        # query side: the query's own token (n + j, j even) was corrupted
        return [n + i for i in range(1, n - 1, 2)] if side == "key" else [n + j for j in range(0, n - 1, 2)]
    at = spoiled_positions(n, side)
    if token_index:
        at = [p + 1 for p in at]
    if last:
        at = at + [2 * n - 1]
    return at


def _same_positions(got, expected) -> bool:
    """The same positions, in any order, each once, as ints (a list, tuple, range or 1-d tensor)."""
    try:
        values = got.tolist() if hasattr(got, "tolist") else list(got)
        ints = [int(v) for v in values]
    except (TypeError, ValueError):
        return False
    return all(float(a) == b for a, b in zip(values, ints)) and len(ints) == len(set(ints)) \
        and sorted(ints) == sorted(expected)


P7C = FunctionExercise(
    id="ps_p7c", title="the positions a corruption spoils", reference=spoiled_positions, make_inputs=_p7c_inputs,
    compare=_same_positions,
    mistakes=[
        Mistake("token positions instead of prediction positions", "A position here is where the loss is "
                "read (`mean_loss`). Take one of your positions: which token do the logits there predict, and is "
                "it one whose prediction the corruption spoils?",
                lambda n, side: _p7c_variant(n, side, token_index=True)),
        Mistake("the whole second copy", "Most of the second copy's predictions are not spoiled by this "
                "corruption: averaging over them dilutes the gap with predictions that patching cannot "
                "restore because nothing took them away.", lambda n, side: _p7c_variant(n, side, whole=True)),
        Mistake("positions spoiled another way", "At these positions the corruption changes a token that the "
                "prediction needs directly (the token the match copies, or the query's own token), not the "
                "previous-token information the sender writes: a patch of the sender cannot restore them, "
                "and reading them mixes another path into the one you want to measure.",
                lambda n, side: _p7c_variant(n, side, copied=True)),
        Mistake("included the last position", "Take your largest position: which token of "
                "the sequence do the logits there predict?", lambda n, side: _p7c_variant(n, side, last=True)),
    ],
    hint="Take one corrupted token and follow it: which query, in the second copy, would have needed it "
         "(as the previous token of the key it looks for, or as its own previous token), and which token "
         "does that query predict? Keep only the predictions where the token copied and the query's own "
         "token are both clean, and give each as the position whose logits predict it.",
)


# --- the reading: a statement and the measured number that decides it (issues 37, 39) -----------

P7B_OPTIONS = "ABCD"
P7B_TOLERANCE = 1e-4
"""The deciding number is computed from the page's table (``key_share["heads"]``), not read off the
figure: the figure and the prose print two decimals (within 0.005 of the value), far coarser than
this. The effects are ratios of float32 mean losses of a few nats, rounded to about 1e-6; 1e-4 is
far above that rounding (and any numeric configuration's) and far below the printed precision."""


def _reading(answer):
    """The letter an answer chooses: "A", "a", "A.", "(A)", "A) No layer-1 head ..." all read A;
    anything else is returned as it is (and matches no option)."""
    if not isinstance(answer, str):
        return answer
    match = re.match(r"\s*\(?\s*([A-Za-z])(?![A-Za-z])", answer)
    return match.group(1).upper() if match else answer.strip()


def key_side_layer1_effects(effects=None):
    """The key side's four layer-1 effects as the page measures them ([n_heads]); ``effects`` is
    the page's own table when the page passes it, else the same experiment is run here: toy-2l,
    16 repeated sequences of 32 tokens (seed 2), the first copy's even positions replaced
    (generator seed 11), the reference solution at the reference positions."""
    if effects is not None:
        return torch.as_tensor(effects.detach().cpu() if isinstance(effects, torch.Tensor) else effects,
                               dtype=torch.float64).flatten()
    return _page_effects().clone()


@lru_cache(maxsize=1)
def _page_effects():
    from circuitbook.data import repeated_random_tokens
    from circuitbook.models import load

    model, n = load("toy-2l"), 32
    clean = repeated_random_tokens(16, n, model.cfg.d_vocab, seed=2)
    bad = clean.clone()
    bad[:, 0:n:2] = torch.randint(0, model.cfg.d_vocab, (16, n // 2), generator=torch.Generator().manual_seed(11))
    heads = patching_shares(model, clean, bad, spoiled_positions(n, "key"))["heads"]
    return torch.as_tensor(heads[1], dtype=torch.float64)


def _p7b_expected(effects=None):
    return ("A", float(key_side_layer1_effects(effects).max()))


def _p7b_pair(answer):
    """(letter, number) from an answer, or None when it is not a pair of a string and a number."""
    if not (isinstance(answer, (tuple, list)) and len(answer) == 2 and isinstance(answer[0], str)):
        return None
    number = as_number(answer[1])
    return None if number is None else (_reading(answer[0]), number)


@dataclass
class ReadingExercise(ValueExercise):
    """Problem 7b: the answer is a pair, (the letter of the statement the measurement supports, the
    measured number that decides it, computed from the page's table). Both must be right. Every
    pair that is not the answer gets the same words, whichever of the letter and the number is
    wrong, so that no message tells which letter is right or which number decides it; the reasons
    for and against each statement are in the page's model answer, a closed fold below the
    exercise. On the self-study page any reader can open it, before answering or after; the
    course's pages and graded notebooks leave it out (``notebooks.ANSWER_FOLD`` in scripts/)."""

    def form_problem(self, answer, **inputs) -> Result | None:
        if answer is None or answer is Ellipsis:
            return Result(self.id, False, f"not attempted yet: set p7_reading to a pair, (the letter of a "
                          f"statement, the measured number that decides it) ({self.title}). {NO_HINT_YET}", None,
                          self.hint)
        pair = _p7b_pair(answer)
        if pair is None:
            return Result(self.id, False, "not quite: answer with a pair, (letter, number): the option's letter "
                          f"as a string and a number; yours is {type(answer).__name__} {str(answer)[:40]!r}",
                          "wrong form", self.hint)
        if pair[0] not in tuple(P7B_OPTIONS):
            return Result(self.id, False, f"not quite: answer with one of the letters {', '.join(P7B_OPTIONS)}; "
                          f"yours ({str(answer[0]).strip()[:40]!r}) names none of them", "wrong form", self.hint)
        return None

    def check(self, answer, **inputs) -> Result:
        problem = self.form_problem(answer, **inputs)
        if problem is not None:
            return problem
        letter, number = self.expected(**inputs)
        pair = _p7b_pair(answer)
        if pair[0] == letter and abs(pair[1] - number) <= P7B_TOLERANCE:
            return Result(self.id, True, f"correct ({self.title})")
        return Result(self.id, False, "not quite: this pair is not a statement the measurement supports "
                      "together with the number that decides it, computed from the table (the letter, the "
                      "number or both)", "wrong pair", self.hint)


P7B = ReadingExercise(
    id="ps_p7b", title="reading the layer-1 heads' patching result", expected=_p7b_expected,
    mistakes=[], verdict_in_autograder=True,
    hint="First write down, for one of these numbers, which activations of the run that measured it came "
         "from the clean input and which from the corrupted one, and ask of each statement which kind of run "
         "it is about and whether such a run was made here. Then, for the statement you keep, ask which one "
         "of the measured numbers would have made it false had it come out differently: that is the number "
         "to give, computed from the table key_share[\"heads\"] (the figure rounds it too coarsely).",
)
