"""The package has no import cycle and keeps the layer map of ``.importlinter``.

Both checks read the import graph that grimp (import-linter's engine) builds from every
``import`` statement in ``src/circuitbook``, function-level imports included, so an import
hidden inside a function cannot close a cycle or cross a layer unnoticed. ``.importlinter``
holds the map (every top-level module in one layer) and the reason for each layer's place;
the planted imports below show that the contract fails when a module reaches above its layer.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parents[2]


def runtime_edges(graph) -> dict[str, set[str]]:
    """Module -> modules its imports execute.

    Importing ``a.b.c`` runs ``a/__init__``, ``a.b/__init__`` and then ``a.b.c``, so an import
    of ``a.b.c`` is an edge to each of them, except the packages that contain the importer
    (those are already being imported when the importer runs).
    """
    edges: dict[str, set[str]] = {m: set() for m in graph.modules}
    for importer in graph.modules:
        own = {importer.rsplit(".", k)[0] for k in range(1, importer.count(".") + 1)}
        for imported in graph.find_modules_directly_imported_by(importer):
            parts = imported.split(".")
            for k in range(1, len(parts) + 1):
                target = ".".join(parts[:k])
                if target != importer and target not in own:
                    edges[importer].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("circuitbook", cache_dir=None)


def test_no_import_cycle_inside_the_package(graph):
    found = cycles(runtime_edges(graph))
    assert not found, f"import cycles in circuitbook (each list imports itself in a circle): {found}"


def test_the_cycle_check_sees_a_function_level_import(graph):
    # The cycle the package once had: heads -> data -> data.translation -> models.encoder_decoder
    # -> train -> heads, closed by a function-level import. Adding one such edge back must fail.
    assert not cycles(runtime_edges(graph))
    graph.add_import(importer="circuitbook.data.translation", imported="circuitbook.train.translation")
    found = cycles(runtime_edges(graph))
    assert any({"circuitbook.data.translation", "circuitbook.train.translation"} <= set(c) for c in found), found


def test_cycles_finds_a_hand_made_cycle_and_not_a_chain():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_import_contracts_hold():
    # .importlinter: every module in its layer, importing only from its own and lower ones
    assert lint_imports(config_filename=str(ROOT / ".importlinter"), no_cache=True) == 0


def lint_planted(tmp_path: Path, plants: dict[str, str]) -> subprocess.CompletedProcess:
    """``lint-imports`` on a copy of the package with ``plants`` (file relative to the package
    -> lines appended, or the whole text of a new file), in a fresh interpreter whose
    ``circuitbook`` is the copy."""
    pkg = tmp_path / "circuitbook"
    shutil.copytree(ROOT / "src" / "circuitbook", pkg,
                    ignore=shutil.ignore_patterns("__pycache__", "zoo", "*.js", "*.css"))
    for rel, text in plants.items():
        f = pkg / rel
        f.write_text((f.read_text() + "\n" if f.exists() else "") + text + "\n")
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(ROOT / '.importlinter')!r}, no_cache=True))")
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": ""},
                          capture_output=True, text=True, timeout=120)


PLANTS = {
    # the two imports that once left the old contracts at "2 kept, 0 broken"
    "patching imports the widgets": ({"patching.py": "import circuitbook.widgets"},
                                     "circuitbook.patching -> circuitbook.widgets"),
    "a model builder imports the checks, inside a function": (
        {"models/attn_only.py": "def _planted():\n    import circuitbook.checks.core"},
        "circuitbook.models.attn_only -> circuitbook.checks.core"),
    "the zoo's loader imports training": ({"models/zoo.py": "from circuitbook.train import lm"},
                                         "circuitbook.models.zoo -> circuitbook.train"),
    "data imports the algebra": ({"data/synthetic.py": "from circuitbook import heads"},
                                 "circuitbook.data.synthetic -> circuitbook.heads"),
    "the plumbing imports data": ({"devices.py": "import circuitbook.masks"}, "circuitbook.devices -> circuitbook.masks"),
    "two independent siblings import each other": ({"viz.py": "import circuitbook.checks"},
                                                   "circuitbook.viz -> circuitbook.checks"),
    "the book's records import a check": ({"book.py": "from circuitbook import checks"},
                                          "circuitbook.book -> circuitbook.checks"),
    "a new module no layer names": ({"orphan.py": '"""A module added without a place in the map."""'}, "- circuitbook.orphan"),
}


@pytest.mark.parametrize("case", PLANTS)
def test_a_planted_import_breaks_the_contract(case, tmp_path):
    plants, named = PLANTS[case]
    run = lint_planted(tmp_path, plants)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "0 kept, 1 broken" in run.stdout and named in run.stdout, run.stdout


def test_an_unplanted_copy_and_an_allowed_import_keep_the_contract(tmp_path):
    # the copy is faithful, and an import downwards (the algebra reading data) is allowed:
    # the cases above fail for their planted import, not because the package was copied
    run = lint_planted(tmp_path, {"circuits.py": "import circuitbook.data.repeats"})
    assert run.returncode == 0 and "1 kept, 0 broken" in run.stdout, run.stdout + run.stderr
