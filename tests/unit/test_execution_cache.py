"""The execution cache re-runs a chapter whenever anything its outputs depend on changes:
its code, the package's source, the zoo's weights or the pinned requirements."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import execute_notebooks  # noqa: E402


def copy_fingerprinted(dest: Path) -> None:
    """Copy into ``dest`` everything the execution cache's fingerprint reads."""
    for name in execute_notebooks.FINGERPRINTED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, dest / name)


@pytest.fixture
def tree(tmp_path):
    """A copy of what the fingerprint reads, plus one tiny notebook."""
    copy_fingerprinted(tmp_path)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (tmp_path / "book").mkdir()
    nbformat.write(nb, tmp_path / "book" / "tiny.ipynb")
    return tmp_path


@pytest.mark.parametrize("changed", ["src/circuitbook/heads.py", "src/circuitbook/zoo/toy-2l.safetensors",
                                     "requirements.txt", "pyproject.toml"])
def test_any_input_changes_the_fingerprint(tree, changed):
    before = execute_notebooks.inputs_fingerprint(tree)
    path = tree / changed
    if path.suffix == ".safetensors":
        data = bytearray(path.read_bytes())
        data[-1] ^= 1  # one bit of one weight
        path.write_bytes(bytes(data))
    else:
        path.write_text(path.read_text() + "\n# one more line\n")
    assert execute_notebooks.inputs_fingerprint(tree) != before


def test_bytecode_and_configuration(tree):
    before = execute_notebooks.inputs_fingerprint(tree)
    cache = tree / "src" / "circuitbook" / "__pycache__"
    cache.mkdir()
    (cache / "heads.cpython-311.pyc").write_bytes(b"not source")
    assert execute_notebooks.inputs_fingerprint(tree) == before  # compiled files are not inputs
    assert execute_notebooks.inputs_fingerprint(tree, {"OMP_NUM_THREADS": "1"}) != before


def test_a_package_change_re_executes(tree, capsys):
    nb = [tree / "book" / "tiny.ipynb"]
    cache = tree / "_build" / "cache"
    assert execute_notebooks.execute_all(nb, cache, root=tree) == []
    assert "ok in" in capsys.readouterr().out
    assert execute_notebooks.execute_all(nb, cache, root=tree) == []
    assert "cached    book/tiny.ipynb" in capsys.readouterr().out
    heads = tree / "src" / "circuitbook" / "heads.py"
    heads.write_text(heads.read_text().replace('"""', '""" ', 1))  # one line of the package
    assert execute_notebooks.execute_all(nb, cache, root=tree) == []
    out = capsys.readouterr().out
    assert "stale     book/tiny.ipynb" in out and "ok in" in out


def _notebook(tree: Path, name: str, code: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tree / "book" / f"{name}.ipynb")
    return tree / "book" / f"{name}.ipynb"


def test_a_chapter_over_its_budget_is_reported_not_failed(tree, capsys):
    # every execution takes over a second (a kernel starts), so a 1 s budget is always exceeded
    slow = _notebook(tree, "slow", "import time; time.sleep(1.2)")
    report = tree / "_build" / "report.json"
    assert execute_notebooks.execute_all([slow], tree / "_build" / "cache", root=tree, budget=1,
                                         report_path=report) == []
    out = capsys.readouterr().out
    assert "ok in" in out and "slow (over the 1 s budget; not a failure): book/slow.ipynb" in out
    assert "executed" in report.read_text()


def test_the_tight_cell_limit_of_make_test_full_fails_a_slow_cell(tree, capsys):
    stuck = _notebook(tree, "stuck", "import time; time.sleep(120)")
    failures = execute_notebooks.execute_all([stuck], tree / "_build" / "cache", root=tree, cell_timeout=2)
    assert failures == ["book/stuck.ipynb"]
    assert "FAILED after" in capsys.readouterr().out


def _executed(*cells: tuple[str, str]):
    """A notebook whose code cells (tag, printed text) are as if executed."""
    nb = nbformat.v4.new_notebook()
    for tag, text in cells:
        cell = nbformat.v4.new_code_cell("checks.chNN_ex1(answer)", metadata={"tags": [tag]})
        cell.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": text}, execution_count=1)]
        nb.cells.append(cell)
    return nb


def test_exercise_problems_need_passing_references_and_failing_templates():
    good = _executed(("exercise", "[NOT YET] ch06_ex1: your function raised NotImplementedError"),
                     ("solution", "[PASSED] ch06_ex1: matches the reference on 3 random inputs"))
    assert execute_notebooks.exercise_problems(good) == []
    wrong_reference = _executed(("exercise", "[NOT YET] ch06_ex1: ..."), ("solution", "[NOT YET] ch06_ex1: off"))
    assert execute_notebooks.exercise_problems(wrong_reference) == [
        "code cell 1: the reference solution of ch06_ex1 is [NOT YET]"]
    lenient = _executed(("exercise", "[PASSED] ch06_ex1: ..."), ("solution", "[PASSED] ch06_ex1: ..."))
    assert execute_notebooks.exercise_problems(lenient) == ["code cell 0: the untouched template of ch06_ex1 is [PASSED]"]
    silent = _executed(("exercise", "[NOT YET] ch06_ex1: ..."), ("solution", "42"))
    assert execute_notebooks.exercise_problems(silent) == ["code cell 1: a reference solution printed no check result"]


def test_two_notebooks_run_at_once_each_on_its_share_of_the_cores(tree, monkeypatch):
    """With jobs=2 the two kernels are alive together (each waits, up to a minute, for the
    other to start) and each gets one of the two cores' threads."""
    monkeypatch.setattr(execute_notebooks.os, "cpu_count", lambda: 2)
    flags = tree / "flags"
    flags.mkdir()

    def meeting(me: str, other: str) -> str:
        return (f"import os, pathlib, time\n"
                f"assert os.environ['OMP_NUM_THREADS'] == '1', os.environ.get('OMP_NUM_THREADS')\n"
                f"pathlib.Path({str(flags / me)!r}).touch()\n"
                f"end = time.time() + 60\n"
                f"while not pathlib.Path({str(flags / other)!r}).exists():\n"
                f"    assert time.time() < end, 'the other notebook never started: run one at a time?'\n"
                f"    time.sleep(0.1)\n")

    a, b = _notebook(tree, "a", meeting("a", "b")), _notebook(tree, "b", meeting("b", "a"))
    assert execute_notebooks.execute_all([a, b], tree / "_build" / "cache", root=tree, jobs=2) == []


def test_one_job_leaves_the_threads_alone_and_a_fixed_configuration_keeps_its_own():
    assert execute_notebooks.thread_env(1) == {}
    assert execute_notebooks.thread_env(2, {"OMP_NUM_THREADS": "1"}) == {}


def test_a_name_glued_twice_fails_the_page(tree, capsys):
    # myst-nb keeps one of two values glued under one name and warns, which fails the site build
    # (stop 43's CI: chapter 19 glued c_every twice); the executor names it at once
    twice = _notebook(tree, "twice", "from myst_nb import glue\nglue('a', 1, display=False)\n"
                                     "glue('b', 2, display=False)\nglue('a', 3, display=False)")
    assert execute_notebooks.execute_all([twice], tree / "_build" / "cache", root=tree) == ["book/twice.ipynb"]
    assert "GLUE      book/twice.ipynb: glued more than once (the site build fails on it): a" in capsys.readouterr().out
