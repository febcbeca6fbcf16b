"""The package has no import cycle and keeps STYLE.md's direction of imports.

Both checks read the import graph that grimp (import-linter's engine) builds from every
``import`` statement in ``src/circuitbook``, function-level imports included, so an import
hidden inside a function cannot close a cycle unnoticed.
"""

from __future__ import annotations

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
    # .importlinter: the algebra imports nothing above it; data imports no model or algebra.
    assert lint_imports(config_filename=str(ROOT / ".importlinter"), no_cache=True) == 0
