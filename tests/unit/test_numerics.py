"""scripts/numerics.py: what counts as the same printed number in two numeric configurations."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import numerics  # noqa: E402


@pytest.mark.parametrize("fmt, a, b, same", [
    (".3f", "0.12349", "0.12351", True),     # prints 0.123 vs 0.124, but 2e-5 apart: rounding luck
    (".3f", "0.1230", "0.1245", False),      # 1.5 printed units apart
    (".0%", "0.414", "0.419", True),
    (".0%", "0.41", "0.43", False),
    (".1e", "3.21e-07", "3.26e-07", True),
    (".0e", "1e-06", "3e-06", False),        # rounding noise printed as if it were a finding
    (",d", "15360", "15360", True),
    (",d", "15360", "15361", False),         # integers agree exactly
    ("", "0.5", "0.5000001", False),         # no format: the text itself is printed
])
def test_glue_agreement(fmt, a, b, same):
    assert (numerics.compare_glue("x", fmt, a, b) is None) == same


def _nb(glue_value: str, verdict: str):
    md = nbformat.v4.new_markdown_cell("The gap is {glue:text}`gap:.2f` here.")
    code = nbformat.v4.new_code_cell("...")
    code.outputs = [
        nbformat.v4.new_output("display_data", data={"application/papermill.record/text/plain": glue_value},
                               metadata={"scrapbook": {"name": "gap", "mime_prefix": "application/papermill.record/"}}),
        nbformat.v4.new_output("execute_result", data={"text/plain": f"[{verdict}] ch06_ex1: message"},
                               execution_count=1),
    ]
    return nbformat.v4.new_notebook(cells=[md, code])


def test_compare_names_each_difference():
    assert numerics.compare(_nb("0.7657", "PASSED"), _nb("0.7661", "PASSED"))[0] == []
    problems, counts = numerics.compare(_nb("0.7657", "PASSED"), _nb("0.7857", "NOT YET"))
    assert counts == {"claims": 0, "checks": 1, "glued": 1, "machine-dependent": 0}
    assert any("exercise checks changed" in p and "NOT YET" in p for p in problems)
    assert any("glued 'gap'" in p and "0.77 vs 0.79" in p for p in problems)


def test_machine_dependent_numbers_are_counted_not_compared():
    a, b = _nb("0.7657", "PASSED"), _nb("0.9", "PASSED")
    for nb in (a, b):
        nb.cells[1].outputs.append(nbformat.v4.new_output(
            "display_data", data={numerics.MACHINE_MIME: {"name": "gap"}}))
    problems, counts = numerics.compare(a, b)
    assert problems == [] and counts["machine-dependent"] == 1 and counts["glued"] == 0
