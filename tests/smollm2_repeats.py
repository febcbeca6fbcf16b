"""The lab's rule for repeats, in Python: the reference the tests hold the page's JavaScript
(``repeatLengths``, ``repeatedSpans``, ``spanLosses`` in src/circuitbook/widgets/smollm2_lab.js)
to, in Node (tests/unit/test_smollm2_lab.py) and in Chromium against SmolLM2's own losses
(tests/browser/test_smollm2_lab.py)."""

from __future__ import annotations

from circuitbook.widgets.smollm2_lab import MIN_REPEAT


def repeat_lengths(tokens: list[int]) -> list[int]:
    """``m[i]``: the length of the longest run of tokens ending at position ``i`` that also
    ends at an earlier position: the largest m with ``tokens[i-m+1 : i+1] ==
    tokens[j-m+1 : j+1]`` for some ``j < i`` (the two runs may overlap); 0 where
    ``tokens[i]`` has not occurred before. ``repeatLengths`` in smollm2_lab.js must agree."""
    P = len(tokens)
    lengths, before = [0] * P, [0] * P  # before[j]: the common run ending at (i - 1, j)
    for i in range(P):
        now = [0] * P
        for j in range(i):
            if tokens[i] == tokens[j]:
                now[j] = (before[j - 1] if j > 0 else 0) + 1
        lengths[i] = max(now[:i], default=0)
        before = now
    return lengths


def repeated_spans(tokens: list[int], min_len: int = MIN_REPEAT) -> dict[str, list[int]]:
    """The positions of ``tokens`` that repeat an earlier run, and where that run first was.

    Position ``i`` is a **repeat** when the ``min_len`` tokens ending at it,
    ``tokens[i-min_len+1 : i+1]``, occurred earlier as a run ending at some ``j < i``
    (``repeat_lengths(tokens)[i] >= min_len``). Its **first occurrence** is the earliest
    such ``j``; that position is never itself a repeat (an earlier one would have been the
    earliest), so the two sets are disjoint. With ``min_len = 4`` the first three tokens of
    a repeated span count in neither set: the loss at a repeat is that of predicting a
    token whose three predecessors, and itself, came in the same order before, which is
    what an induction head can use; at its first occurrence the same token was predicted
    with the same three predecessors, seen for the first time.

    Returns ``{"repeat": [i, ...], "first": [j, ...]}``, both sorted, positions into
    ``tokens``; ``repeatedSpans`` in smollm2_lab.js returns the same."""
    m = min_len
    repeat, first = [], set()
    for i, length in enumerate(repeat_lengths(tokens)):
        if length >= m and i >= m - 1:
            repeat.append(i)
            first.add(next(j for j in range(m - 1, i) if tokens[j - m + 1: j + 1] == tokens[i - m + 1: i + 1]))
    return {"repeat": repeat, "first": sorted(first)}


def span_losses(losses: list[float], tokens: list[int], min_len: int | None = None) -> dict | None:
    """The mean loss on the first occurrences and on the repeats of :func:`repeated_spans`
    (``losses[p]``: the loss of predicting ``tokens[p + 1]``, so position ``i``'s is
    ``losses[i - 1]``), with their counts; None when nothing repeats. The page's
    ``spanLosses`` (smollm2_lab.js) must print the same: this is the test's Python reference."""
    spans = repeated_spans(tokens, MIN_REPEAT if min_len is None else min_len)
    if not spans["repeat"]:
        return None
    mean = lambda ps: sum(losses[p - 1] for p in ps) / len(ps)  # noqa: E731
    return {"first": mean(spans["first"]), "repeat": mean(spans["repeat"]),
            "n_first": len(spans["first"]), "n_repeat": len(spans["repeat"])}
