"""The exercise index (book/exercises.md, rendered by scripts/sphinx_exercises.py): every
exercise of every chapter in the build is listed with its title, a link to its chapter, and the
status of its reference solution's check in this build; its title links to the exercise itself
(the exercise's own section, or its cell where a section holds several); plus the directive's
parsing logic."""

from __future__ import annotations

import html
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("SITE_DIR", ROOT / "_build" / "html")).resolve()
sys.path.insert(0, str(ROOT / "scripts"))

import execute_notebooks  # noqa: E402
import sphinx_exercises  # noqa: E402
import sphinx_ledger  # noqa: E402

built = pytest.mark.skipif(not (SITE / "book" / "exercises.html").exists(),
                           reason=f"site not built at {SITE}: run make book (or set SITE_DIR)")


def _cell(source: str, tags: list[str], text: str | None):
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": tags})
    if text is not None:
        cell.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": text}, execution_count=1)]
    return cell


def test_exercises_of_reads_the_reference_solution_checks():
    nb = nbformat.v4.new_notebook(cells=[
        _cell("import x", [], None),
        _cell("def f():\n    raise NotImplementedError\n\nchecks.ch06_ex1(f)", ["exercise"],
              "[NOT YET] ch06_ex1: not attempted yet"),
        _cell("# @title Solution\ndef f():\n    return 1\n\nchecks.ch06_ex1(f)", ["solution", "hide-input"],
              "[PASSED] ch06_ex1: correct on 3 random inputs"),
        nbformat.v4.new_markdown_cell("text"),
        _cell("# @title Solution\nchecks.ch06_ex2(g)", ["solution"], "[NOT YET] ch06_ex2: transposed\n  Hint: h"),
        _cell("# @title Solution\nchecks.ch06_ex3(h)", ["solution"], None),
    ])
    found = sphinx_exercises.exercises_of(nb)
    assert [e["id"] for e in found] == ["ch06_ex1", "ch06_ex2", "ch06_ex3"]
    assert [e["passed"] for e in found] == [True, False, None]
    assert [e["cell"] for e in found] == [3, 4, 5]
    assert found[1]["message"] == "[NOT YET] ch06_ex2: transposed"


def _rows(page: str) -> list[list[str]]:
    body = page[page.index("exercise-index"):]
    rows = []
    for tr in re.findall(r"<tr.*?</tr>", body, re.S):
        cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr, re.S)
        rows.append(cells)
    return rows


@built
def test_the_index_lists_every_exercise_of_the_build_as_passed():
    from circuitbook.checks import all_exercises

    cache = str(execute_notebooks.cache_path(ROOT))
    expected = {}
    for path in execute_notebooks.toc_notebooks():
        nb = sphinx_ledger.executed(path, cache)
        assert nb is not None, f"{path.name} has no executed copy in the cache"
        for ex in sphinx_exercises.exercises_of(nb):
            expected[ex["id"]] = (path.relative_to(ROOT).with_suffix(".html").as_posix(), ex)
    assert len(expected) >= 10
    page = (SITE / "book" / "exercises.html").read_text()
    rows = _rows(page)
    assert len(rows) == len(expected) + 1, "one header row, then one row per exercise"
    known = all_exercises()
    listed = {}
    for cells in rows[1:]:
        chapter, ex_id, what, status = cells
        ex_id = re.sub(r"<[^>]+>", "", ex_id).strip()
        href = re.search(r'href="([^"]+)"', chapter).group(1)
        listed[ex_id] = (href, html.unescape(re.sub(r"<[^>]+>", "", what)).strip(),
                         html.unescape(re.sub(r"<[^>]+>", "", status)).strip())
    assert set(listed) == set(expected)
    for ex_id, (href, what, status) in listed.items():
        assert "#" not in href, f"{ex_id}: the chapter column links to the chapter itself, not {href}"
        target = (SITE / "book" / href.split("#")[0]).resolve()
        assert target == (SITE / expected[ex_id][0]).resolve(), (ex_id, href)
        assert what.replace("\u2019", "'") == known[ex_id].title.replace("\u2019", "'")  # Sphinx smart quotes
        assert status == "\u2714 passed", (ex_id, status)
    chapters = len({page for page, _ in expected.values()})
    assert f"{len(expected)} exercises in {chapters} chapters" in page
    assert f"the reference solutions of {len(expected)} passed" in page


def test_the_index_is_in_the_toc_appendix():
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    appendix = next(p for p in toc["parts"] if p["caption"] == "Appendix")
    assert {"file": "book/exercises"} in appendix["chapters"]
    assert "{exercise-index}" in (ROOT / "book" / "exercises.md").read_text()


def _exercise_id(cell) -> str | None:
    """The id an exercise cell of a built page checks on its template's last line."""
    pre = cell.select_one(".cell_input pre")
    calls = re.findall(r"^checks\.(\w+)(?:\.record)?\(", pre.get_text() if pre else "", re.M)
    return calls[-1] if calls else None


@built
def test_each_exercise_title_links_to_the_exercise_itself():
    """The title's link goes to the chapter page, to an element there that is the exercise's
    cell, or the section that holds that exercise alone (its heading, "Exercise 8.1: ...")."""
    from bs4 import BeautifulSoup

    page = BeautifulSoup((SITE / "book" / "exercises.html").read_text(), "html.parser")
    rows = page.select(".exercise-index table tbody tr")
    assert len(rows) >= 10
    pages, problems, kinds = {}, [], {"section": 0, "cell": 0}
    for row in rows:
        chapter, ex_id, what, _ = row.find_all("td")
        ex_id = ex_id.get_text().strip()
        link = what.find("a")
        if link is None or "#" not in link.get("href", ""):
            problems.append(f"{ex_id}: its title has no link to the exercise ({what})")
            continue
        href, fragment = link["href"].split("#", 1)
        if href != chapter.find("a")["href"]:
            problems.append(f"{ex_id}: links to {href}, its chapter is {chapter.find('a')['href']}")
            continue
        path = (SITE / "book" / href).resolve()
        if path not in pages:
            pages[path] = BeautifulSoup(path.read_text(), "html.parser")
        target = pages[path].find(id=fragment)
        if target is None:
            problems.append(f"{ex_id}: no id {fragment!r} on {href}")
            continue
        if target.name == "span" and not target.get_text():  # a second id: an empty span before its element
            target = target.find_next_sibling()
        if "cb-exercise" in (target.get("class") or []):
            found, kind = [target], "cell"
        else:
            found, kind = target.select("div.cell.cb-exercise"), "section"
            if target.name != "section" or len(found) != 1:
                problems.append(f"{ex_id}: #{fragment} on {href} is a <{target.name}> holding {len(found)} "
                                "exercises, not the exercise's cell or its own section")
                continue
        kinds[kind] += 1
        if _exercise_id(found[0]) != ex_id:
            problems.append(f"{ex_id}: #{fragment} on {href} holds exercise {_exercise_id(found[0])}")
    assert not problems, "\n".join(problems)
    assert kinds["section"] > 0, kinds  # the chapters' exercises each have their own section
