"""The course site (``make course``, scripts/course.py): the book with no reference solution of
any exercise anywhere in it. Run after ``make course`` (and, for the control, ``make book``).

- every exercise declared in circuitbook.checks has solution lines worth hiding to look for;
- no such line occurs in any file under _build/course (pages, _sources, downloads, the search
  index, every script and JSON file, binaries by their bytes): a byte-level scan of every file,
  which also reads text files as what they say (JSON escapes undone, HTML tags stripped, since a
  highlighted code line is split into spans);
- the same scan finds every exercise's solution in the self-study site, _build/html (so it can
  find them), and finds lines planted in the forms a leak would take;
- the downloads are the student notebooks, and no launch button opens the repository's notebooks;
- the answers to the questions answered in words (the "Model answer" folds) are absent too, and
  found on the self-study site; an exercise that is a choice calls ``checks.<id>.record``.

The browser check of a course page is tests/browser/test_course_page.py.
"""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import course  # noqa: E402
import notebooks  # noqa: E402
import execute_notebooks  # noqa: E402

built = pytest.mark.skipif(not (course.OUT / "index.html").exists(), reason="course site not built: run make course")


@pytest.fixture(scope="module")
def hidden() -> dict[str, list[str]]:
    return course.hidden_lines()


def test_every_declared_exercise_has_solution_lines_to_look_for(hidden):
    from circuitbook.checks import all_exercises

    assert set(hidden) == set(all_exercises())
    assert not [ex_id for ex_id, lines in hidden.items() if not lines], "an exercise with nothing to look for"


def test_the_scan_finds_a_planted_leak_in_every_form(tmp_path, hidden):
    ex_id, line = next((k, v[0]) for k, v in hidden.items() if any(c in v[0] for c in "\"<&"))
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    (tmp_path / "page.html").write_text("<pre>" + highlight(line, PythonLexer(), HtmlFormatter(nowrap=True)))
    (tmp_path / "nb.ipynb").write_text(json.dumps({"source": ["    " + line + "\n"]}))
    (tmp_path / "searchindex.js").write_text("Search.setIndex(" + json.dumps({"t": line}) + ")")
    (tmp_path / "escaped.html").write_text(f"<p>{html.escape(line)}</p>")
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfe\x00" + line.encode() + b"\x00\xff")
    (tmp_path / "clean.html").write_text("<p>nothing here</p>")
    found = {file for file, i, _ in course.leaks(tmp_path, {ex_id: [line]})}
    assert found == {"page.html", "nb.ipynb", "searchindex.js", "escaped.html", "blob.bin"}


@built
def test_no_solution_line_in_any_file_of_the_course_site(hidden):
    found = course.leaks(course.OUT, hidden)
    assert not found, "\n".join(f"{f}: {i}: {line}" for f, i, line in found[:30])


@pytest.mark.skipif(not (ROOT / "_build" / "html" / "index.html").exists(), reason="site not built: run make book")
def test_the_self_study_site_shows_every_solution(hidden):
    found = course.leaks(ROOT / "_build" / "html", hidden)
    assert {ex_id for _, ex_id, _ in found} == set(hidden)


@pytest.fixture(scope="module")
def answer_folds() -> dict[str, list[str]]:
    return course.answer_fold_lines()


def test_every_answer_fold_has_pieces_to_look_for(answer_folds):
    # the problem set answers four questions in words, each in a "Model answer" fold, and
    # chapters 2, 3, 8, 11, 16, 18 and 20 work nine exercises out in "worked out" folds
    pages = {key.split("(")[1].rstrip(")") for key in answer_folds}
    assert len(answer_folds) >= 13 and len(pages) >= 8 and all(answer_folds.values()), answer_folds


@built
def test_no_answer_fold_in_any_file_of_the_course_site(answer_folds):
    found = course.leaks(course.OUT, answer_folds)
    assert not found, "\n".join(f"{f}: {i}: {line}" for f, i, line in found[:30])
    note = notebooks.ANSWER_FOLD_NOTE.strip("*")
    shown = sum(page.read_text().count(note) for page in (course.OUT / "book").rglob("*.html"))
    assert shown == len(answer_folds)


@pytest.mark.skipif(not (ROOT / "_build" / "html" / "index.html").exists(), reason="site not built: run make book")
def test_the_self_study_site_shows_every_answer_fold(answer_folds):
    # the control: the scan finds each fold where it is published
    found = course.leaks(ROOT / "_build" / "html", answer_folds)
    assert {key for _, key, _ in found} == set(answer_folds)


@built
@pytest.mark.parametrize("path", execute_notebooks.toc_notebooks(), ids=lambda p: p.name)
def test_the_download_is_the_student_notebook(path):
    from circuitbook.checks import all_exercises

    rel = path.relative_to(ROOT)
    for where in (course.OUT / "_sources" / rel, course.STUDENT / rel):
        nb = nbformat.read(where, as_version=4)
        assert not [c for c in nb.cells if "solution" in c.metadata.get("tags", [])]
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs
            if "exercise" in cell.metadata.get("tags", []):
                assert "NotImplementedError" in cell.source or "...  # your answer" in cell.source, cell.source
                call = re.search(r"^checks\.(\w+)(\.record)?\(", cell.source, re.M)
                assert call, cell.source
                # a choice is recorded in the notebook and graded by the autograder only
                assert bool(call.group(2)) == getattr(all_exercises()[call.group(1)], "verdict_in_autograder", False)


@built
def test_no_launch_button_opens_the_repositorys_notebooks():
    cfg = yaml.safe_load((course.SRC / "_config.yml").read_text())
    book_repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"].rstrip("/")
    repo = book_repo.removeprefix("https://github.com/")
    pages = [p for p in course.OUT.rglob("*.html")]
    text = "\n".join(p.read_text() for p in pages)
    assert "mybinder.org/v2" not in text and "thebe-launch-button" not in text
    colab = re.findall(r"https://colab\.research\.google\.com/github/([^\"]+)", text)
    if cfg["launch_buttons"]["colab_url"]:  # the instructor's repository, never the book's
        assert colab and cfg["repository"]["url"].rstrip("/") != book_repo
        assert not [c for c in colab if c.startswith(repo + "/")]
    else:
        assert not colab
    chapter = (course.OUT / "book" / "08_qk_ov.html").read_text()
    assert "_sources/book/08_qk_ov.ipynb" in chapter  # the download button: the student notebook


@built
def test_the_exercise_index_lists_every_exercise_and_its_check():
    from circuitbook.checks import all_exercises

    page = (course.OUT / "book" / "exercises.html").read_text()
    ids = set(re.findall(r"in the notebook, by <code[^>]*><span[^>]*>checks\.(\w+)(?:\.record)?\(", page))
    assert ids == set(all_exercises()), sorted(set(all_exercises()) ^ ids)
    assert "passed" not in re.sub(r"<[^>]+>", "", page[page.index("exercise-index"):])
