"""The course site (``make course``): the book an instructor publishes, with no reference solution
of any exercise anywhere in it, built into ``_build/course`` (``make book``'s ``_build/html``, the
self-study site with its folded solutions, is left as it is).

Nothing is executed again. Each chapter's executed notebook comes from the execution cache
(``scripts/execute_notebooks.py``, which ``make course`` runs first and which executes only
what the cache lacks), and is cut:

- every ``solution`` cell (the reference solution, its outputs and its passing check) is removed;
  what remains of an exercise is the student's template (``raise NotImplementedError`` or
  ``answer = ...`` in place of the solution's body), and the page says where its check runs;
- a later cell's outputs are kept when it only *calls* an exercise's function (they show what a
  correct implementation gives, as the prose does, not how), and dropped when it reads a value
  exercise's answer variable, which its output would print (none does today; the build lists any);
- the template's own output ("not attempted yet") gives way to the note, as on the self-study site;
- a question answered in words loses its model answer (the "Model answer" fold), an exercise its
  working (the "Exercise N worked out" fold; both are ``notebooks.ANSWER_FOLD``), and an exercise
  that is a choice among a few options (``verdict_in_autograder``) calls ``checks.<id>.record``,
  which records the answer with no verdict, so that trying each option in the notebook tells
  nothing: the autograder grades it (scripts/assignments.py writes its notebooks so too).

The cut notebooks, without outputs, are the chapters' sources in a separate source tree
(``_build/course-src``), so Sphinx's ``_sources/`` and the download button give the student
notebook; their outputs go into that tree's own jupyter-cache, which the build reads. So the
solutions are not hidden in the HTML but absent from everything the build reads, and after the
build every file of ``_build/course`` is scanned for every solution line worth hiding
(:func:`hidden_lines`, :func:`leaks`): one found fails the build.

Launch buttons: the self-study site's Colab, Binder and live-code buttons open the repository's
notebooks, which hold the solutions, so the course site has none unless ``--repo URL`` (``make
course COURSE_REPO=URL [COURSE_BRANCH=main]``) names the instructor's repository, into which
the student notebooks of ``_build/course-notebooks/`` are pushed as they lie (``book/...``);
the Colab buttons then open those. The download button always gives the student notebook.

What this does not hide: ``circuitbook.checks``, which the set-up cell installs on Colab and
which the checks need, holds the reference functions (otter's hidden tests guard against
calling them, see scripts/assignments.py).

Usage: python scripts/course.py [--repo URL] [--branch B] [--stale-ok]
  --stale-ok   take a chapter's newest cached execution whose code cells are the chapter's
               (the set-up cell apart) even when its package fingerprint or set-up pin is older
               (for working on the course build while the cache lags; never for a release)
"""

from __future__ import annotations

import argparse
import ast
import copy
import html
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import nbformat
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_site  # noqa: E402
import execute_notebooks  # noqa: E402
import notebooks  # noqa: E402
import solutions  # noqa: E402

ROOT = notebooks.ROOT
SRC = ROOT / "_build" / "course-src"
OUT = ROOT / "_build" / "course"
STUDENT = ROOT / "_build" / "course-notebooks"
MIN_LEN = 12  # a shorter solution line ("return out", "x = a @ b") gives nothing away


# --------------------------------------------------------------------------------------
# The solution lines worth hiding
# --------------------------------------------------------------------------------------

def _marked(lines: list[str]) -> tuple[list[str], list[str]]:
    """(lines between solution markers, the other lines) of a cell or a function."""
    inside, outside, on = [], [], False
    for line in lines:
        if line.strip() == solutions.BEGIN:
            on = True
        elif line.strip() == solutions.END:
            on = False
        else:
            (inside if on else outside).append(line)
    return inside, outside


def solution_texts() -> tuple[dict[str, list[str]], set[str]]:
    """(exercise id -> the lines of its solution, the lines the book shows anyway).

    A solution is what stands between the markers of its exercise cell in the chapter's source,
    and, for an exercise with a reference function, between the markers of its declaration in
    circuitbook.checks (scripts/solutions.py). The lines shown anyway: every other line of every
    chapter and every Markdown page (a solution line the chapter also shows elsewhere hides
    nothing)."""
    from circuitbook import checks

    found: dict[str, list[str]] = {}
    shown: set[str] = set()
    for src in notebooks.sources():
        nb = jupytext.read(src, fmt="py:percent")
        for cell in nb.cells:
            inside, outside = _marked(cell.source.splitlines())
            shown |= {line.strip() for line in outside}
            if cell.cell_type == "code" and "exercise" in cell.metadata.get("tags", []):
                for ex_id in solutions.CHECK_CALL.findall(cell.source):
                    found.setdefault(ex_id, []).extend(inside)
    for page in (ROOT / "book").rglob("*.md"):
        shown |= {line.strip() for line in page.read_text().splitlines()}
    for ex_id, exercise in checks.all_exercises().items():
        reference = getattr(exercise, "reference", None)
        if reference is not None:
            inside, _ = _marked(solutions.declared_solution(reference).splitlines())
            found.setdefault(ex_id, []).extend(inside)
    return found, shown


def hidden_lines() -> dict[str, list[str]]:
    """Exercise id -> the lines of its solution worth hiding: at least MIN_LEN characters once
    stripped, and not shown anyway elsewhere in the book (not even as part of a line there). Every declared exercise has an entry
    (perhaps empty, when its solution is one short line)."""
    from circuitbook import checks

    found, shown = solution_texts()
    shown_text = "\n".join(sorted(shown))
    out = {}
    for ex_id in checks.all_exercises():
        lines = {line.strip() for line in found.get(ex_id, [])}
        out[ex_id] = sorted(line for line in lines if len(line) >= MIN_LEN and line not in shown_text)
    return out


_JSON_ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|["\\/bfnrt])')
_JSON_CHARS = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", '"': '"', "\\": "\\", "/": "/"}


def _views(data: bytes) -> list[str]:
    """What a file says, as text: its bytes decoded, and the same with JSON string escapes
    undone (notebooks, searchindex.js, widget state), HTML tags stripped (a highlighted code
    line is split into spans) and entities unescaped."""
    text = data.decode("utf-8", errors="replace")
    plain = _JSON_ESCAPE.sub(lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "u"
                             else _JSON_CHARS[m.group(1)], text)
    plain = html.unescape(re.sub(r"<[^>]*>", "", plain))
    return [text, plain]


def leaks(folder: Path, hidden: dict[str, list[str]] | None = None) -> list[tuple[str, str, str]]:
    """(file, exercise id, solution line) for every solution line worth hiding that occurs in any
    file under ``folder`` (every file, whatever its kind)."""
    hidden = hidden_lines() if hidden is None else hidden
    needles = [(ex_id, line) for ex_id, lines in hidden.items() for line in lines]
    raw = [(ex_id, line, line.encode()) for ex_id, line in needles]
    out = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        try:  # a text file, also read as what it says (escapes undone, tags stripped)
            data.decode("utf-8")
            views = _views(data)
        except UnicodeDecodeError:  # a binary file (images, fonts, weights): its bytes alone
            views = []
        for ex_id, line, as_bytes in raw:
            if as_bytes in data or any(line in view for view in views):
                out.append((path.relative_to(folder).as_posix(), ex_id, line))
    return out


# An answer in a fold (notebooks.ANSWER_FOLD: a question's model answer, an exercise's working):
# on the course site the fold is replaced by notebooks.ANSWER_FOLD_NOTE, and its text is looked
# for as a solution is.
# what splits an answer fold's line into pieces that the built page shows verbatim: a glued
# number, a role, inline markup and the characters Sphinx or MathJax may render otherwise
_NOT_VERBATIM = re.compile(r"\{[^}]*\}`[^`]*`|[`*$\"'{}\\]|--|\.\.\.")
MIN_PIECE = 24  # a shorter piece of a sentence ("the previous token") is no answer


def answer_fold_lines() -> dict[str, list[str]]:
    """"answer fold <n> (<page>)" -> the pieces of that page's n-th answer fold worth hiding: each line with
    HTML tags taken out, split where the page does not show the source verbatim (:data:`_NOT_VERBATIM`),
    pieces of at least MIN_PIECE characters that the book does not also show outside every fold."""
    out, notebooks_read = {}, [(src, jupytext.read(src, fmt="py:percent")) for src in notebooks.sources()]
    # what the book shows outside every fold (a formula a fold repeats from the prose gives nothing away)
    shown = "\n".join(notebooks.ANSWER_FOLD.sub("", cell.source) for _, nb in notebooks_read for cell in nb.cells)
    for src, nb in notebooks_read:
        blocks = [m.group(0) for cell in nb.cells if cell.cell_type == "markdown"
                  for m in notebooks.ANSWER_FOLD.finditer(cell.source)]
        for n, block in enumerate(blocks, 1):
            body = block[block.index("</summary>") + len("</summary>"):]
            pieces = {piece.strip() for line in body.splitlines()
                      for piece in _NOT_VERBATIM.split(html.unescape(re.sub(r"<[^>]*>", "", line)))}
            out[f"answer fold {n} ({src.relative_to(ROOT / 'book').with_suffix('')})"] = sorted(
                piece for piece in pieces if len(piece) >= MIN_PIECE and piece not in shown)
    return out


# --------------------------------------------------------------------------------------
# The course's notebooks, cut from the executed ones
# --------------------------------------------------------------------------------------

def executed(path: Path, cache, stale_ok: bool):
    """The cached execution of ``path``: its exact match, or with ``stale_ok`` the newest record of
    the same notebook whose code cells, the set-up cell apart, are the chapter's."""
    nb = nbformat.read(path, as_version=4)
    try:
        return cache.merge_match_into_notebook(nb)[1], "exact"
    except KeyError:
        if not stale_ok:
            return None, "missing"
    code = [c.source for c in nb.cells[1:] if c.cell_type == "code"]
    records = sorted((r for r in cache.list_cache_records() if r.uri == str(path)), key=lambda r: r.created)
    for record in reversed(records):
        old = cache.get_cache_bundle(record.pk).nb
        if [c.source for c in old.cells[1:] if c.cell_type == "code"] == code:
            old_code = [c for c in old.cells if c.cell_type == "code"]
            merged = copy.deepcopy(nb)
            for key in ("kernelspec", "language_info", "widgets"):
                if key in old.metadata:
                    merged.metadata[key] = old.metadata[key]
            for cell in merged.cells:
                if cell.cell_type == "code":
                    was = old_code.pop(0)
                    cell.outputs, cell.execution_count = was.get("outputs", []), was.get("execution_count")
            return merged, f"stale (record {record.pk}, {record.created:%Y-%m-%d %H:%M})"
    return None, "missing"


def _answer_variables(source: str) -> set[str]:
    """The top-level names a solution cell assigns (a value exercise's answers)."""
    names = set()
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for target in targets:
            for name in ast.walk(target) if target is not None else ():
                if isinstance(name, ast.Name):
                    names.add(name.id)
    return names


GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`([^`:]+)(?::[^`]*)?`")
#: what the course page says where the prose glued a number that is an exercise's answer
YOURS = "[your measurement]"


def _names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _glued(output) -> str | None:
    return output.get("metadata", {}).get("scrapbook", {}).get("name")


def cut(nb) -> tuple[object, list[str]]:
    """The executed notebook without its solutions; returns it and what was cut besides.

    A later cell that reads a value exercise's answer (a top-level name its solution assigns)
    would print it: its outputs are dropped, but for the numbers it glues from other values,
    and the prose's ``{glue:text}`` roles of the numbers it glued from the answer say
    :data:`YOURS` instead."""
    nb = copy.deepcopy(nb)
    answers: set[str] = set()
    hidden_keys: set[str] = set()
    cells, notes = [], []
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "code" and "solution" in tags:
            answers |= _answer_variables(cell.source)
            continue
        if cell.cell_type == "code" and "exercise" not in tags and answers and cell.get("outputs"):
            try:
                tree = ast.parse(cell.source)
                used = _names(tree) & answers
            except SyntaxError:  # IPython syntax: read it as words
                tree, used = None, set(re.findall(r"\w+", cell.source)) & answers
            if used:
                glues = {} if tree is None else {
                    call.args[0].value: bool(_names(call) & answers) for call in ast.walk(tree)
                    if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "glue" and call.args
                    and isinstance(call.args[0], ast.Constant)}
                cell.outputs = [o for o in cell.outputs if _glued(o) in glues and not glues[_glued(o)]]
                hidden = sorted(k for k, reads in glues.items() if reads)
                hidden_keys |= set(hidden)
                notes.append(f"outputs of a cell reading the answer {sorted(used)} dropped"
                             + (f" (the prose's {', '.join(hidden)} say {YOURS!r})" if hidden else ""))
        if cell.cell_type == "code" and "exercise" in tags:
            if solutions.BEGIN in cell.source:
                raise ValueError("an exercise cell still holds its solution markers")
            cell.source = notebooks.course_calls(cell.source)
        cells.append(cell)
    for cell in cells:
        if cell.cell_type == "markdown":
            cell.source = notebooks.ANSWER_FOLD.sub(notebooks.ANSWER_FOLD_NOTE, cell.source)
        if cell.cell_type == "markdown" and hidden_keys:
            cell.source = GLUE_ROLE.sub(lambda m: YOURS if m.group(1) in hidden_keys else m.group(0), cell.source)
    nb.cells = cells
    return nb, notes


def _without_outputs(nb):
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("widgets", None)
    return nb


def _write(path: Path, text: str) -> None:
    """Write only what changed, so Sphinx's incremental build rereads only that."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def config(repo: str | None, branch: str) -> dict:
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    cfg["title"] = cfg["title"] + " (course)"
    cfg["execute"]["cache"] = str(SRC / "_build" / ".jupyter_cache")
    cfg["execute"]["execute_notebooks"] = "cache"
    ext = cfg["sphinx"]["local_extensions"]
    for name, where in ext.items():
        ext[name] = str(ROOT / where)
    buttons = cfg["launch_buttons"]
    buttons["thebe"] = False  # live code runs the repository's notebook on Binder
    buttons["binderhub_url"] = ""  # Binder opens the repository's notebooks
    if repo:
        cfg["repository"] = {"url": repo.rstrip("/"), "branch": branch, "path_to_book": ""}
    else:
        buttons["colab_url"] = ""
    cfg["html"]["use_repository_button"] = bool(repo)
    cfg["sphinx"]["config"]["circuitbook_course"] = "colab" if repo else "download"
    return cfg


def source_tree(repo: str | None, branch: str, stale_ok: bool) -> list[str]:
    """Write the course's source tree and cache; returns the problems (chapters not executed)."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    book_cache = get_cache(str(execute_notebooks.cache_path(ROOT)))
    (SRC / "_build").mkdir(parents=True, exist_ok=True)
    course_cache = get_cache(str(SRC / "_build" / ".jupyter_cache"))
    _write(SRC / "_config.yml", yaml.safe_dump(config(repo, branch), sort_keys=False))
    shutil.copy2(ROOT / "_toc.yml", SRC / "_toc.yml")
    vendor = SRC / "_vendor"
    if not vendor.is_symlink():
        vendor.unlink(missing_ok=True)
        vendor.symlink_to(ROOT / "_vendor")
    # the book's pages that are not notebooks (Markdown, the bibliography), never its .py sources
    for path in (ROOT / "book").rglob("*"):
        rel = path.relative_to(ROOT)
        if path.is_file() and path.suffix in (".md", ".bib", ".png", ".svg", ".jpg", ".ico") \
                and "__pycache__" not in rel.parts and not any(p.startswith(".") for p in rel.parts):
            if path.suffix in (".md", ".bib", ".svg"):
                _write(SRC / rel, path.read_text())
            else:
                (SRC / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, SRC / rel)
    problems = []
    for path in execute_notebooks.toc_notebooks(ROOT):
        rel = path.relative_to(ROOT)
        nb, how = executed(path, book_cache, stale_ok)
        if nb is None:
            problems.append(str(rel))
            continue
        course, notes = cut(nb)
        student = notebooks.text(_without_outputs(course))
        _write(SRC / rel, student)
        _write(STUDENT / rel, student)
        # the cache keys a notebook by its code cells: the record matches the source just written
        course_cache.cache_notebook_bundle(CacheBundleIn(course, str(SRC / rel)), check_validity=False,
                                           overwrite=True)
        removed = sum("solution" in c.metadata.get("tags", []) for c in nb.cells)
        print(f"{rel}: {removed} solution cell(s) cut; outputs from the cache ({how})"
              + "".join(f"; {n}" for n in notes), flush=True)
    return problems


def build(repo: str | None, branch: str, stale_ok: bool) -> int:
    start = time.perf_counter()
    problems = source_tree(repo, branch, stale_ok)
    if problems:
        print("no executed copy in the cache for " + ", ".join(problems)
              + ": run `make course` (it executes them first) or scripts/execute_notebooks.py", file=sys.stderr)
        return 1
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(SRC), "--keep-going"]
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=SRC, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    (ROOT / "_build" / "course-build.log").write_text(log)
    bad = [w for w in log.splitlines() if re.search(r"\b(WARNING|ERROR|CRITICAL)\b", w)
           and not any(re.search(p, w) for p, _ in build_site.ALLOWED)]
    executed_here = [line for line in log.splitlines() if "Executing notebook" in line]
    if proc.returncode != 0 or bad or executed_here:
        print(log[-6000:])
        print(f"\ncourse build FAILED: exit {proc.returncode}, {len(bad)} warning(s), "
              f"{len(executed_here)} notebook(s) executed by the build (a cut notebook missed its cache)")
        for w in bad:
            print("  ", w)
        return 1
    if OUT.exists():
        shutil.rmtree(OUT)
    shutil.copytree(SRC / "_build" / "html", OUT, copy_function=os.link)
    found = leaks(OUT, {**hidden_lines(), **answer_fold_lines()})
    if found:
        for file, ex_id, line in found[:40]:
            print(f"LEAK {file}: {ex_id}: {line}")
        print(f"course build FAILED: {len(found)} solution line(s) in {OUT.relative_to(ROOT)}")
        shutil.rmtree(OUT)
        return 1
    size = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"course site built in {time.perf_counter() - start:.0f} s, {size / 1e6:.0f} MB, no solution line "
          f"in any file: {OUT / 'index.html'}")
    print(f"student notebooks (what the download{' and Colab' if repo else ''} buttons give): "
          f"{STUDENT.relative_to(ROOT)}/"
          + (f"; push its book/ folder to {repo} ({branch})" if repo else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    import vendor_assets

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=os.environ.get("COURSE_REPO") or None,
                    help="the instructor's repository holding the student notebooks (Colab buttons open them)")
    ap.add_argument("--branch", default=os.environ.get("COURSE_BRANCH") or "main")
    ap.add_argument("--stale-ok", action="store_true", help="accept cached executions with older set-up cells")
    args = ap.parse_args(argv)
    vendor_assets.main()
    return build(args.repo, args.branch, args.stale_ok)


if __name__ == "__main__":
    sys.exit(main())
