"""An explorer's render function must still work after the rest of its page has run.

``explore(draw, ...)`` draws up to 64 states when its cell runs (the static page shows those);
in a live kernel (Colab, JupyterLab after "Run all") every move of a control calls ``draw``
again, long after the later cells ran. A later cell that rebinds a global name ``draw`` reads
(chapter 7 reused ``kinds`` for a dict of head pairs) breaks every live move with an error the
static page never shows. This test reads each page's source: for every ``explore(f, ...)`` it
collects the module-level names ``f`` reads (and, one level down, those read by the page's
functions it calls), and fails if any later code cell binds one of them again at top level.
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[2] / "book"
PAGES = sorted(p.relative_to(BOOK).as_posix() for p in BOOK.rglob("*.py") if not p.name.startswith("_"))


def code_cells(source: str) -> list[ast.Module]:
    """The page's code cells, parsed (jupytext percent format; IPython magics and shell lines
    blanked, so the rest parses)."""
    cells = []
    for cell in re.split(r"^(?=# %%)", source, flags=re.M):
        if not cell.startswith("# %%") or cell.startswith("# %% [markdown]"):
            continue
        body = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in cell.splitlines()[1:])
        cells.append(ast.parse(textwrap.dedent(body)))
    return cells


def top_level_bindings(tree: ast.Module) -> set[str]:
    """Names a cell binds in the notebook's global namespace (its top-level statements,
    including inside if/for/with/try blocks, which do not open a scope)."""
    names: set[str] = set()

    def targets(node):
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)

    def visit(stmts):
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(s.name)
            elif isinstance(s, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in s.names)
            elif isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                    targets(t)
            elif isinstance(s, (ast.For, ast.AsyncFor)):
                targets(s.target)
                visit(s.body + s.orelse)
            elif isinstance(s, (ast.With, ast.AsyncWith)):
                for item in s.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars)
                visit(s.body)
            elif isinstance(s, (ast.If, ast.While)):
                visit(s.body + s.orelse)
            elif isinstance(s, ast.Try):
                visit(s.body + s.orelse + s.finalbody + [x for h in s.handlers for x in h.body])
            if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                # a walrus binds in the cell's scope, even inside a comprehension (whose own
                # loop variables do not leak)
                names.update(n.target.id for n in ast.walk(s) if isinstance(n, ast.NamedExpr))

    visit(tree.body)
    return names


def free_globals(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names ``fn`` reads that it neither takes as a parameter nor binds itself: the notebook
    globals (and builtins) it depends on when called."""
    a = fn.args
    local = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs} | {x.arg for x in (a.vararg, a.kwarg) if x}
    read = set()
    # the body only: defaults and decorators are evaluated once, when the cell defines fn
    for node in (n for stmt in fn.body for n in ast.walk(stmt)):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else local).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            local.add(node.name)
        elif isinstance(node, ast.arg):
            local.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            local.update((x.asname or x.name).split(".")[0] for x in node.names)
    return read - local - set(dir(builtins))


def explorer_dependencies(cells: list[ast.Module]) -> list[tuple[int, str, set[str]]]:
    """(cell index, render function, globals it and the page functions it calls read) for each
    ``explore(f, ...)`` call at a page's top level."""
    functions: dict[str, ast.FunctionDef] = {}
    found = []
    for i, cell in enumerate(cells):
        for s in cell.body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions[s.name] = s
        for node in ast.walk(cell):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "explore"
                    and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in functions):
                name = node.args[0].id
                needed = free_globals(functions[name])
                for callee in sorted(needed & functions.keys()):
                    needed |= free_globals(functions[callee])
                found.append((i, name, needed))
    return found


def rebound_later(source: str) -> list[str]:
    cells = code_cells(source)
    problems = []
    for i, name, needed in explorer_dependencies(cells):
        for j in range(i + 1, len(cells)):
            clash = sorted(needed & top_level_bindings(cells[j]))
            if clash:
                problems.append(f"explore({name}) in code cell {i + 1} reads {clash}, which code cell {j + 1} binds again")
    return problems


@pytest.mark.parametrize("page", PAGES)
def test_no_later_cell_rebinds_what_an_explorer_reads(page):
    problems = rebound_later((BOOK / page).read_text())
    assert not problems, f"book/{page}: a live explorer would break after the page ran:\n" + "\n".join(problems)


def test_the_guard_sees_chapter_7s_old_clash():
    """The layout that broke chapter 7's explorer in a live kernel, reduced to its three cells;
    and the same page with the later dict renamed passes."""
    page = textwrap.dedent('''\
        # %%
        kinds = {"decoder cross-attention": 1}

        best = 0

        def draw_head(kind="decoder cross-attention", layer=1, head=best):
            return kinds[kind] + layer + head

        explore(draw_head, kind=list(kinds), layer=[0, 1])

        # %% [markdown]
        # prose

        # %%
        kinds = {"later": [], "break": []}
        best = 1  # read by a default, once: rebinding it later is harmless
        for kind in kinds:
            pass
        ''')
    assert rebound_later(page) == ["explore(draw_head) in code cell 1 reads ['kinds'], which code cell 2 binds again"]
    assert rebound_later(page.replace('kinds = {"later"', 'pair_kinds = {"later"').replace("in kinds:", "in pair_kinds:")) == []


def test_the_guard_follows_one_call_into_the_pages_functions():
    page = textwrap.dedent('''\
        # %%
        scale = 2.0

        def helper(x):
            return scale * x

        def draw(x=1):
            return helper(x)

        explore(draw, x=(1, 3))

        # %%
        with open("f") as scale:
            pass
        ''')
    assert rebound_later(page) == ["explore(draw) in code cell 1 reads ['scale'], which code cell 2 binds again"]
