"""Every claim in the chapters can fail: its verdict is a computed comparison, never a literal.

Agreement up to rounding goes through ``identity_close`` (a bound derived from the computation);
see docs/authoring.md. The second numeric configuration in ``make test`` (scripts/numerics.py)
is what catches a bound that holds on this CPU only.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import notebooks  # noqa: E402


def _calls(tree, name):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == name:
            yield node


@pytest.mark.parametrize("source", notebooks.sources(), ids=lambda p: p.name)
def test_no_claim_has_a_literal_verdict(source):
    tree = ast.parse(source.read_text())
    literal = []
    for call in [*_calls(tree, "claim"), *_calls(tree, "identity")]:
        verdict = call.args[2] if len(call.args) > 2 else next(
            (k.value for k in call.keywords if k.arg == "holds"), None)
        assert verdict is not None, f"{source.name}:{call.lineno}: claim without a verdict"
        if isinstance(verdict, ast.Constant):
            literal.append(call.lineno)
    assert not literal, f"{source.name}: claims with a literal verdict at lines {literal}"


@pytest.mark.parametrize("source", notebooks.sources(), ids=lambda p: p.name)
def test_rounding_claims_count_their_roundings(source):
    """``terms`` is derived from the computation, so it is never a bare float tolerance."""
    tree = ast.parse(source.read_text())
    for call in _calls(tree, "identity_close"):
        terms = next((k.value for k in call.keywords if k.arg == "terms"), None)
        assert terms is not None, f"{source.name}:{call.lineno}: identity_close without terms="
        assert not (isinstance(terms, ast.Constant) and isinstance(terms.value, float)), \
            f"{source.name}:{call.lineno}: terms is a count of roundings, not a tolerance"


def test_the_lint_sees_a_literal_verdict(tmp_path, monkeypatch):
    bad = tmp_path / "99_bad.py"
    bad.write_text('claim("x equals y", err, True, chapter="99")\n')
    with pytest.raises(AssertionError, match="literal verdict at lines \\[1\\]"):
        test_no_claim_has_a_literal_verdict(bad)
