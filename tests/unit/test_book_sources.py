"""The book's sources are consistent: toc, notebooks, set-up cell, no placeholders."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import execute_notebooks  # noqa: E402
import notebooks  # noqa: E402


def test_toc_lists_only_existing_files():
    files = execute_notebooks.toc_files()
    assert files[0].name.startswith("intro")
    assert len(files) == len(set(files)), "a file is listed twice in _toc.yml"


def test_every_chapter_source_is_in_the_toc():
    listed = {p.with_suffix("") for p in execute_notebooks.toc_files()}
    missing = [str(src.relative_to(ROOT)) for src in notebooks.sources() if src.with_suffix("") not in listed]
    assert not missing, f"chapters not listed in _toc.yml: {missing}"


def test_notebooks_are_generated_from_their_sources():
    assert notebooks.main(["check"]) == 0


@pytest.mark.parametrize("path", execute_notebooks.toc_notebooks(), ids=lambda p: p.name)
def test_notebook_starts_with_the_colab_setup_cell(path):
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    url, branch = notebooks.repository()
    assert first.cell_type == "code"
    assert notebooks.SETUP_TAG in first.metadata.get("tags", [])
    assert f"git+{url}@{branch}" in first.source, "set-up cell must install from _config.yml's repository url"
    assert 'if "google.colab" in sys.modules' in first.source
    # only the first cell may install anything
    for cell in nb.cells[1:]:
        assert "pip install" not in cell.source and "_pip(" not in cell.source, cell.source[:80]


@pytest.mark.parametrize("path", execute_notebooks.toc_notebooks(), ids=lambda p: p.name)
def test_committed_notebooks_have_no_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, "outputs are made by the build"


def test_setup_cell_does_nothing_off_colab():
    # executing it here (not on Colab) must not install or import anything
    before = set(sys.modules)
    exec(notebooks.setup_cell().source, {})
    assert "subprocess" in before or "subprocess" not in set(sys.modules) - before


def test_no_placeholder_text_in_the_book():
    pattern = re.compile(r"\b(TODO|TBD|FIXME|lorem ipsum|coming soon)\b", re.I)
    hits = []
    for path in list((ROOT / "book").rglob("*.py")) + list((ROOT / "book").rglob("*.md")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not hits, "\n".join(hits)


def test_config_names_the_cache_the_executor_fills():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cfg["execute"]["execute_notebooks"] == "cache"
    assert cfg["execute"]["raise_on_error"] is True
    assert execute_notebooks.cache_path() == ROOT / cfg["execute"]["cache"]


def test_every_exercise_cell_calls_a_known_check():
    from circuitbook import checks

    known = checks.all_exercises()
    for src in notebooks.sources():
        nb = notebooks.generate(src)
        for cell in nb.cells:
            if "exercise" in cell.metadata.get("tags", []):
                ids = re.findall(r"checks\.((?:ch\d\d|ps)_\w+)\(", cell.source)
                assert ids, f"{src.name}: exercise cell without a check call:\n{cell.source[:200]}"
                for ex_id in ids:
                    assert ex_id in known, f"{src.name} calls unknown check {ex_id}"


def test_exercise_cells_split_into_template_and_solution():
    template, solution = notebooks.split_exercise(
        "def f(x):\n    '''doc'''\n    # BEGIN SOLUTION\n    return x + 1\n    # END SOLUTION\n\ncheck(f)")
    assert "return x + 1" not in template and "raise NotImplementedError" in template
    assert template.endswith("check(f)") and solution.endswith("check(f)")
    assert "BEGIN SOLUTION" not in solution and "return x + 1" in solution
    with pytest.raises(ValueError, match="matching"):
        notebooks.split_exercise("def f():\n    # BEGIN SOLUTION\n    pass\n")
