"""The API reference page (scripts/sphinx_api.py): every public function and class is on it, and
every "Taught in chapter N" in a docstring links to a chapter file that ``_toc.yml`` lists.

The public names are found independently of the generator, by parsing the package's source
files (``ast``: top-level ``def`` and ``class`` without a leading underscore, and their public
methods), and the chapters by reading ``_toc.yml`` and the files on disk. One small Sphinx build
(MyST, the extension, stub chapter pages) checks that the links come out as links in HTML.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import sphinx_api  # noqa: E402

SRC = ROOT / "src" / "circuitbook"
TAUGHT = re.compile(r"[Tt]aught in (?:chapters?) (\d+)((?:[^.]*?(?:,|and) (\d+))*)")


def source_public_names() -> set[str]:
    """``module.name`` (and ``module.Class.method``) for every public top-level def/class, by ast."""
    out = set()
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(p.startswith("_") for p in parts) or parts[:2] == ["circuitbook", "checks"]:
            continue
        module = ".".join(parts)
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                out.add(f"{module}.{node.name}")
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
                            out.add(f"{module}.{node.name}.{item.name}")
    return out


def toc_files() -> set[str]:
    found = set()

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("file"), str):
                found.add(node["file"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(yaml.safe_load((ROOT / "_toc.yml").read_text()))
    return found


@pytest.fixture(scope="module")
def reference():
    return sphinx_api.reference()


def test_every_public_function_and_class_is_listed(reference):
    listed = {f"{modname}.{e.qualname}" for modname, _, entries in reference for e in entries}
    expected = source_public_names()
    assert len(expected) > 100
    missing = expected - listed
    assert not missing, f"public names missing from the API page: {sorted(missing)}"
    # and nothing private or from the exercise checks (their reference solutions)
    assert not any("._" in name or ".checks" in name for name in listed), sorted(listed)


def test_every_entry_has_a_signature_docstring_and_source_module(reference):
    for modname, _, entries in reference:
        for e in entries:
            assert e.kind == "property" or e.signature.startswith("("), (modname, e.qualname, e.signature)
            assert (ROOT / e.source).is_file() and e.source.endswith(".py"), e.source
            # an annotation printed as a quoted string (a forward reference); quotes inside one are
            # jaxtyping's shape strings, Float[torch.Tensor, 'batch pos']
            assert not re.search(r"(?:\w: |-> )['\"]", e.signature), f"quoted annotation in {e.qualname}{e.signature}"


def test_taught_in_chapter_links_resolve_to_chapter_files_in_the_toc(reference):
    chapter_docs = sphinx_api.chapters()
    files = toc_files()
    taught = 0
    for modname, doc, entries in reference:
        for text in [doc] + [e.doc for e in entries]:
            for match in TAUGHT.finditer(text):
                numbers = [int(n) for n in re.findall(r"\d+", re.sub(r"\([^()]*\)", "", match.group(0)))]
                linked = {d for piece, d in sphinx_api.segments(match.group(0), chapter_docs) if d}
                for n in numbers:
                    taught += 1
                    assert n in chapter_docs, f"{modname}: 'Taught in chapter {n}' names no chapter in _toc.yml"
                    doc_file = chapter_docs[n]
                    assert doc_file in files and re.match(rf"book/{n:02d}_", doc_file)
                    assert (ROOT / f"{doc_file}.py").is_file() or (ROOT / f"{doc_file}.md").is_file()
                    assert doc_file in linked, (modname, match.group(0))
    assert taught >= 40  # every "Taught in" of the package (about 45 when this test was written)


def test_segments_link_each_chapter_number_and_nothing_else():
    docs = {13: "book/13_path_expansion", 16: "book/16_two_layer", 18: "book/18_composition"}
    got = sphinx_api.segments("Taught in chapters 13 (path expansion) and 16 (two layers); ch. 16, 18; "
                              "chapter 99 and chapter13x.", docs)
    assert got == [("Taught in ", None), ("chapters 13", docs[13]), (" (path expansion) and ", None),
                   ("16", docs[16]), (" (two layers); ", None), ("ch. 16", docs[16]), (", ", None),
                   ("18", docs[18]), ("; chapter 99 and chapter13x.", None)]
    assert "".join(t for t, _ in got).startswith("Taught in chapters 13 (path")  # the text is kept whole


def test_sphinx_renders_the_links(tmp_path):
    """A small Sphinx build of the real API pages (autodoc on the package) with stub chapters:
    chapter mentions come out as links, entries get their ids, no warnings (``-W``)."""
    (tmp_path / "conf.py").write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'scripts')!r})\n"
                                      f"sys.path.insert(0, {str(ROOT / 'src')!r})\n"
                                      "extensions = ['myst_parser', 'sphinx_api']\n")
    (tmp_path / "_toc.yml").write_text((ROOT / "_toc.yml").read_text())
    (tmp_path / "book" / "api").mkdir(parents=True)
    (tmp_path / "book" / "api.md").write_text((ROOT / "book" / "api.md").read_text())
    for page in (ROOT / "book" / "api").glob("*.md"):
        (tmp_path / "book" / "api" / page.name).write_text(page.read_text())
    (tmp_path / "book" / "intro.md").write_text("# Introduction\n")
    for n, docname in sphinx_api.chapters().items():
        (tmp_path / f"{docname}.md").write_text(f"# Chapter {n}\n")
    (tmp_path / "index.md").write_text("# Index\n\n```{toctree}\n:glob:\nbook/*\nbook/api/*\n```\n")
    run = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", str(tmp_path), str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    links = set()
    for page in (tmp_path / "out" / "book" / "api").glob("*.html"):
        links |= set(re.findall(r'<a class="reference internal" href="\.\./(\d\d_[\w]+)\.html"><span[^>]*>'
                                r'((?:chapters? |ch\. )?\d+)</span>', page.read_text()))
    assert ("18_composition", "chapter 18") in links and ("13_path_expansion", "chapters 13") in links
    assert {href for href, _ in links} >= {Path(d).name for d in ["book/02_architecture", "book/17_induction_heads"]}
    html = (tmp_path / "out" / "book" / "api" / "circuitbook.composition.html").read_text()
    assert 'id="circuitbook.composition.random_baseline"' in html
    index = (tmp_path / "out" / "book" / "api.html").read_text()
    assert 'href="api/circuitbook.composition.html"' in index
    # each stub chapter ends with links to the entries that name it
    chapter = (tmp_path / "out" / "book" / "18_composition.html").read_text()
    assert 'class="api-taught-here"' in chapter and "api/circuitbook.composition.html#circuitbook.composition" in chapter
