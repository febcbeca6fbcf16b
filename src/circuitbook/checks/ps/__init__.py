"""The induction module's problem set: checks and reference solutions for problems 1-7.

Ids ``ps_p1a`` ... ``ps_p7c``, one module a problem (``p1`` ... ``p7``). Pencil problems take
values or formulas; code problems take a function that the check runs on fresh inputs (any
correct method passes: the check compares results, never code). The reference solutions here
are the ones the book shows. Every input a check makes for a model lives on that model's
device (tokens, indices), so the checks run wherever the model does
(tests/unit/test_check_devices.py, tests/gpu/test_checks_cuda.py).

This module gathers the problems: ``EXERCISES`` (by id, read by ``circuitbook.checks.get``),
``PROBLEMS`` (the checks each problem needs) and ``progress``.
"""

from __future__ import annotations

from dataclasses import dataclass

from circuitbook.checks.core import SESSION
from circuitbook.checks.ps.p1 import P1_KEYS, P1_MODELS, P1_SPLIT, P1A, P1B, p1_reference, reparametrize
from circuitbook.checks.ps.p2 import P2, path_counts
from circuitbook.checks.ps.p3 import (P3, P3_CONTEXTS, P3_CTX, P3B, design_induction_head, p3b_reference,
                                      scaffold_behaviour, scaffold_tokens)
from circuitbook.checks.ps.p4 import P4, P4B, head_scores, unrepeated_tokens
from circuitbook.checks.ps.p5 import P5, P5B, P5C, ablation_effect, comparison_heads, k_composition
from circuitbook.checks.ps.p6 import P6, P6B, P6C, icl_scores, matched_controls, plan_documents
from circuitbook.checks.ps.p7 import P7, P7B, P7C, patching_shares, spoiled_positions

__all__ = ["EXERCISES", "PROBLEMS", "Progress", "progress",
           "P1_KEYS", "P1_MODELS", "P1_SPLIT", "P3_CONTEXTS", "P3_CTX",
           "P1A", "P1B", "P2", "P3", "P3B", "P4", "P4B", "P5", "P5B", "P5C", "P6", "P6B", "P6C", "P7", "P7B",
           "P7C",
           "p1_reference", "reparametrize", "path_counts", "design_induction_head", "p3b_reference",
           "scaffold_behaviour", "scaffold_tokens", "head_scores", "unrepeated_tokens", "ablation_effect",
           "comparison_heads", "k_composition", "icl_scores", "matched_controls", "plan_documents",
           "patching_shares", "spoiled_positions"]

EXERCISES = {ex.id: ex for ex in (P1A, P1B, P2, P3, P3B, P4, P4B, P5, P5B, P5C, P6, P6C, P6B, P7C, P7, P7B)}

# The checks of each problem: a problem is done when every one of them has passed.
PROBLEMS = {"1": ["ps_p1a", "ps_p1b"], "2": ["ps_p2"], "3": ["ps_p3", "ps_p3b"], "4": ["ps_p4", "ps_p4b"],
            "5": ["ps_p5b", "ps_p5", "ps_p5c"], "6": ["ps_p6", "ps_p6c", "ps_p6b"],
            "7": ["ps_p7c", "ps_p7", "ps_p7b"]}


@dataclass
class Progress:
    """The problem set's progress in this notebook, from the checks that have passed (not
    from clicks): ``done`` lists the problems whose checks all passed, ``open`` maps every
    other problem to its checks that have not passed yet."""

    done: list[str]
    open: dict[str, list[str]]

    def __str__(self) -> str:
        text = f"{len(self.done)} of {len(PROBLEMS)} done"
        if self.open:
            text += "; still open: " + "; ".join(f"problem {p} ({', '.join(ids)})" for p, ids in self.open.items())
        return text

    __repr__ = __str__

    def _repr_html_(self) -> str:
        import html

        return f'<div class="circuitbook-progress-report">{html.escape(str(self))}</div>'


def progress(session=SESSION) -> Progress:
    """Which problems of the set are done in this notebook (every check passed, or recorded for the
    autograder in a course: ``ValueExercise.record``), and which checks are still open."""
    still_open = session.still_open(PROBLEMS)
    return Progress([p for p in PROBLEMS if p not in still_open], still_open)
