"""The API reference: one page per module of ``circuitbook``, rendered by Sphinx's autodoc from the
package's reST docstrings, as the PyTorch and TransformerLens references are.

- ``book/api/<module>.md`` is a stub per public module (``python scripts/sphinx_api.py write``
  writes them; ``... check``, run by tests/site, fails when one is missing or stale). Each holds
  an ``automodule`` of its module: the module docstring, then every public function and class
  *defined* there, in source order, each class with its own documented methods and properties.
  Inherited members (``nn.Module``'s ``forward`` boilerplate, "Define the computation performed
  at every call...") are left out, and docstrings are not inherited.
- ``{api-index}`` (in ``book/api.md``) lists the modules with the first line of each docstring.
- Each "chapter N" in a docstring ("Taught in chapter 18 (Composition scores)", "chapters 7 and
  20", "ch. 16, 18") becomes a link to that chapter's page when the page is built (the
  docstrings are not edited), and each chapter page ends with links to the API entries that
  name it, so the reference and the chapters point at each other.
- Long signatures are written one parameter a line (``python_maximum_signature_line_length``).

Chapters are numbered by their file names in ``_toc.yml`` (``book/18_composition`` is chapter
18). A link is a ``:doc:`` cross-reference, so Sphinx itself checks that the page exists (a
broken one is a build warning, which fails ``scripts/build_site.py``). The exercise checks
(``circuitbook.checks``) are left out: their modules hold the exercises' reference solutions.

The pure part (which modules and members are public, where the chapter links go) needs no
Sphinx and is tested in ``tests/unit/test_api_reference.py``.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXCLUDED = ("circuitbook.checks",)  # the exercises' reference solutions are not an API

# "chapter 18", "chapters 13 (path expansion) and 16 (two layers)", "ch. 16, 18", "chapters 14-17"
_NUM = r"\d+(?:\s*\([^()]*\))?"
_MENTION = re.compile(rf"\b(?:[Cc]hapters?|ch\.)\s+{_NUM}(?:\s*(?:,\s*and|,|and|or|to|-|–)\s*{_NUM})*")
_PIECE = re.compile(r"\([^()]*\)|\d+")


@dataclass
class Entry:
    """One documented object: ``module.qualname``, its kind, signature and docstring."""

    module: str
    qualname: str
    kind: str  # "function", "class", "method", "property"
    signature: str
    doc: str
    source: str  # the file, relative to the repository root


def chapters(toc: Path = ROOT / "_toc.yml") -> dict[int, str]:
    """Chapter number -> docname, for every ``book/NN_name`` file listed in ``toc``."""
    import yaml

    out: dict[int, str] = {}

    def walk(node):
        if isinstance(node, dict):
            f = node.get("file")
            if isinstance(f, str):
                m = re.fullmatch(r"book/(\d+)_[\w-]+", f.removesuffix(".md").removesuffix(".ipynb"))
                if m:
                    out.setdefault(int(m.group(1)), f)  # a chapter in two parts (17a, 17b): its first
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(yaml.safe_load(toc.read_text()))
    return out


def segments(text: str, chapter_docs: dict[int, str]) -> list[tuple[str, str | None]]:
    """``text`` split into ``(piece, docname or None)``: each chapter number that names a chapter
    in ``chapter_docs`` becomes its own piece with that chapter's docname; numbers of chapters that
    do not exist stay plain text."""
    out: list[tuple[str, str | None]] = []
    done = 0
    for mention in _MENTION.finditer(text):
        first = True  # the first number's link includes the word: "chapter 18", then "20"
        for piece in _PIECE.finditer(mention.group()):
            if piece.group().startswith("("):
                continue
            number = int(piece.group())
            if number not in chapter_docs:
                first = False
                continue
            start, end = mention.start() + (0 if first else piece.start()), mention.start() + piece.end()
            first = False
            out.append((text[done:start], None))
            out.append((text[start:end], chapter_docs[number]))
            done = end
    out.append((text[done:], None))
    return [(t, d) for t, d in out if t]


def public_modules() -> list[str]:
    """Every module of ``circuitbook`` whose dotted name has no ``_`` part, minus ``EXCLUDED``."""
    import circuitbook

    names = ["circuitbook"]
    for info in pkgutil.walk_packages(circuitbook.__path__, "circuitbook."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        if any(info.name == e or info.name.startswith(e + ".") for e in EXCLUDED):
            continue
        names.append(info.name)
    return sorted(names)


def _signature(obj) -> str:
    """The signature as written, annotations unquoted (the package uses postponed annotations)."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    params = [p.replace(annotation=p.annotation if not isinstance(p.annotation, str) else _Raw(p.annotation))
              for p in sig.parameters.values()]
    ret = sig.return_annotation
    return str(sig.replace(parameters=params, return_annotation=_Raw(ret) if isinstance(ret, str) else ret))


class _Raw:
    """An annotation printed as its source text (``inspect`` quotes string annotations)."""

    def __init__(self, text: str):
        quoted = len(text) > 1 and text[0] == text[-1] and text[0] in "'\""
        self.text = text[1:-1] if quoted else text  # a forward reference written as a string

    def __repr__(self) -> str:
        return self.text


def _source(module) -> str:
    path = Path(inspect.getfile(module)).resolve()
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return f"circuitbook/{path.name}"


def _is_documented_here(obj, modname: str) -> bool:
    return (inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", None) == modname


def members(modname: str) -> list[Entry]:
    """The public functions and classes *defined* in ``modname`` (names in ``__all__`` and every
    top-level name without a leading ``_``), in source order, each class followed by its public
    methods and properties. Re-exports are documented where they are defined."""
    module = importlib.import_module(modname)
    source = _source(module)
    names = [n for n in vars(module) if not n.startswith("_")] + list(getattr(module, "__all__", []))
    seen, out = set(), []
    for name in names:
        obj = vars(module).get(name)
        if name in seen or obj is None or not _is_documented_here(obj, modname):
            continue
        seen.add(name)
        kind = "class" if inspect.isclass(obj) else "function"
        out.append(Entry(modname, name, kind, _signature(obj), inspect.getdoc(obj) or "", source))
        if kind == "class":
            for attr, value in vars(obj).items():
                if attr.startswith("_"):
                    continue
                if isinstance(value, property):
                    out.append(Entry(modname, f"{name}.{attr}", "property", "", inspect.getdoc(value) or "", source))
                elif inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod)):
                    fn = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
                    out.append(Entry(modname, f"{name}.{attr}", "method", _signature(fn), inspect.getdoc(fn) or "",
                                     source))

    def line(e: Entry) -> int:
        obj = module
        for part in e.qualname.split("."):
            obj = getattr(obj, part)
        obj = getattr(obj, "fget", obj)
        try:
            return inspect.getsourcelines(obj)[1]
        except (OSError, TypeError):
            return 0

    # source order for top-level objects; a class's members stay right after it
    tops = {e.qualname: line(e) for e in out if "." not in e.qualname}
    return sorted(out, key=lambda e: (tops[e.qualname.split(".")[0]], "." in e.qualname and line(e)))


def reference() -> list[tuple[str, str, list[Entry]]]:
    """(module name, module docstring, entries) for every public module with something to show."""
    out = []
    for modname in public_modules():
        module = importlib.import_module(modname)
        entries = members(modname)
        if entries or (module.__doc__ or "").strip():
            out.append((modname, inspect.getdoc(module) or "", entries))
    return out


# --- the pages --------------------------------------------------------------------------

API_DIR = ROOT / "book" / "api"


def page_modules() -> list[str]:
    """The modules that get a page: every public module that defines a public function or class
    (a package that only re-exports is described on the index instead)."""
    return [m for m in public_modules() if members(m)]


def page_text(modname: str) -> str:
    """The stub page of ``modname``: its title and an ``automodule``; autodoc does the rest."""
    return (f"# {modname}\n\n"
            "<!-- Generated by `python scripts/sphinx_api.py write`; do not edit. -->\n\n"
            "```{eval-rst}\n"
            f".. automodule:: {modname}\n"
            "   :members:\n"
            "```\n")


def pages() -> dict[Path, str]:
    return {API_DIR / f"{m}.md": page_text(m) for m in page_modules()}


def stale_pages() -> list[str]:
    """What ``write`` would change: missing, differing or orphaned stub pages."""
    want = pages()
    out = [f"{p.relative_to(ROOT)} is missing or stale" for p, text in want.items()
           if not p.exists() or p.read_text() != text]
    out += [f"{p.relative_to(ROOT)} documents no public module" for p in API_DIR.glob("*.md") if p not in want]
    return out


def entries_by_chapter(chapter_docs: dict[int, str]) -> dict[str, list[tuple[str, str]]]:
    """Chapter docname -> [(module, qualname)] of every entry whose docstring names that chapter."""
    out: dict[str, list[tuple[str, str]]] = {}
    for modname, _, entries in reference():
        for e in entries:
            for docname in dict.fromkeys(d for _, d in segments(e.doc, chapter_docs) if d):
                out.setdefault(docname, []).append((modname, e.qualname))
    return out


# --- Sphinx ---------------------------------------------------------------------------------

_LITERAL = re.compile(r"``.+?``|:\w+:`[^`]+`|(?<!`)`[^`]+`_?(?!`)", re.S)


def link_chapters(text: str, chapter_docs: dict[int, str]) -> str:
    """reST text with each chapter mention outside inline literals and roles made a ``:doc:``
    role (``Taught in chapter 18`` -> ``Taught in :doc:`chapter 18 </book/18_composition>```).

    Two habits of the package's docstrings that plain reST misreads are mended on the way: a
    ``|x|`` (an absolute value, not a substitution) is escaped, and an inline literal followed
    by a letter (````HookedTransformer````s) gets the escaped space reST needs to end it."""
    out, done = [], 0
    for m in list(_LITERAL.finditer(text)) + [None]:
        plain = text[done:m.start() if m else len(text)]
        if out and plain[:1].isalnum():
            out.append("\\ ")
        for piece, docname in segments(plain, chapter_docs):
            out.append(f"\\ :doc:`{piece} </{docname}>`\\ " if docname else piece.replace("|", "\\|"))
        if m:
            out.append(m.group())
            done = m.end()
    return "".join(out)


_BULLET = re.compile(r"^(\s*)[-*+] ")


def _process_docstring(app, what, name, obj, options, lines):
    """Mend the docstring (see :func:`link_chapters`) and link its chapter mentions. Literal
    blocks (after ``::``) are left as written; the rest is handled a paragraph run at a time,
    so an inline literal may span lines."""
    out: list[str] = []
    bullet = None  # indentation of the bullet list being read
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if not line.strip():
            bullet = None
        elif (m := _BULLET.match(line)) is not None:
            bullet = len(m.group(1))
        elif bullet is not None and indent <= bullet:
            out.append("")  # a paragraph right after a list: reST wants a blank line between
            bullet = None
        out.append(line)
    chapter_docs = app.env.circuitbook_chapters
    runs: list[tuple[bool, list[str]]] = []  # (is literal block, lines)
    in_block = None  # indentation of the paragraph that opened a literal block
    for line in out:
        indent = len(line) - len(line.lstrip())
        if in_block is not None and line.strip() and indent <= in_block:
            in_block = None
        literal = in_block is not None
        if not runs or runs[-1][0] != literal:
            runs.append((literal, []))
        runs[-1][1].append(line)
        if not literal and line.rstrip().endswith("::"):
            in_block = indent
    lines[:] = [line for literal, run in runs
                for line in (run if literal else link_chapters("\n".join(run), chapter_docs).split("\n"))]


def _chapters_for(app) -> dict[int, str]:
    toc = Path(app.srcdir) / "_toc.yml"
    return chapters(toc if toc.exists() else ROOT / "_toc.yml")


def _builder_inited(app):
    if str(ROOT / "src") not in sys.path:
        sys.path.insert(0, str(ROOT / "src"))
    app.env.circuitbook_chapters = _chapters_for(app)


def _api_doc(modname: str) -> str:
    return f"/book/api/{modname}"


def _chapter_api_links(app, doctree):
    """At the end of a chapter page: the API entries whose docstrings name this chapter."""
    from docutils import nodes
    from sphinx import addnodes

    env = app.env
    if not hasattr(env, "circuitbook_taught"):
        env.circuitbook_taught = entries_by_chapter(env.circuitbook_chapters)
    taught = env.circuitbook_taught.get(env.docname)
    if not taught:
        return
    para = nodes.paragraph(classes=["api-taught-here"])
    para += nodes.Text("In the API reference: ")
    for i, (modname, qualname) in enumerate(taught):
        if i:
            para += nodes.Text(", ")
        ref = addnodes.pending_xref("", refdomain="py", reftype="obj", reftarget=f"{modname}.{qualname}",
                                    refexplicit=True, refwarn=True, refdoc=env.docname,
                                    **{"py:module": None, "py:class": None})
        ref += nodes.literal(qualname, qualname, classes=["xref", "py"])
        para += ref
    para += nodes.Text(".")
    section = next(iter(doctree.findall(nodes.section)), None)
    (section if section is not None else doctree).append(para)


def _api_index(directive):
    from docutils import nodes
    from sphinx import addnodes

    env = directive.state.document.settings.env
    table = nodes.bullet_list(classes=["api-index"])
    with_page = set(page_modules())
    for modname in public_modules():
        module = importlib.import_module(modname)
        summary = (inspect.getdoc(module) or "").strip().split("\n\n")[0].replace("\n", " ")
        item = nodes.list_item()
        para = nodes.paragraph()
        if modname in with_page:
            ref = addnodes.pending_xref("", refdomain="std", reftype="doc", reftarget=_api_doc(modname),
                                        refexplicit=True, refwarn=True, refdoc=env.docname)
            ref += nodes.literal(modname, modname)
            para += ref
        else:
            para += nodes.literal(modname, modname)
        if summary:
            para += nodes.Text(": ")
            # the summary is reST (double backticks): parse it inline, with its chapter links
            parsed, _ = directive.state.inline_text(link_chapters(summary, env.circuitbook_chapters),
                                                    directive.lineno)
            para += parsed
        item += para
        table += item
    return [table]


def setup(app):
    from docutils.parsers.rst import Directive

    class ApiIndex(Directive):
        has_content = False

        def run(self):
            if str(ROOT / "src") not in sys.path:
                sys.path.insert(0, str(ROOT / "src"))
            return _api_index(self)

    app.setup_extension("sphinx.ext.autodoc")
    app.setup_extension("sphinx.ext.napoleon")
    app.config.autodoc_inherit_docstrings = False     # no nn.Module boilerplate
    app.config.autodoc_member_order = "bysource"
    app.config.autodoc_typehints = "signature"
    app.config.autodoc_preserve_defaults = True       # defaults as written, not their repr
    app.config.python_maximum_signature_line_length = 72  # then one parameter a line
    app.config.add_module_names = False
    app.config.toc_object_entries = False             # the page toc lists sections, not each name
    app.add_directive("api-index", ApiIndex)
    app.connect("builder-inited", _builder_inited)
    app.connect("autodoc-process-docstring", _process_docstring)
    app.connect("doctree-read", _chapter_api_links)
    # The pages show the package, which lives outside the book's sources: rebuild them every time.
    app.connect("env-get-outdated", lambda app, env, added, changed, removed:
                sorted(d for d in env.found_docs if d.startswith("book/api")))
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "0.2"}


def main(argv: list[str]) -> int:
    if str(ROOT / "src") not in sys.path:
        sys.path.insert(0, str(ROOT / "src"))
    cmd = argv[0] if argv else "check"
    if cmd == "write":
        want = pages()
        API_DIR.mkdir(parents=True, exist_ok=True)
        for path in API_DIR.glob("*.md"):
            if path not in want:
                path.unlink()
                print(f"removed {path.relative_to(ROOT)}")
        for path, text in want.items():
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
                print(f"wrote {path.relative_to(ROOT)}")
        return 0
    problems = stale_pages()
    print("\n".join(problems) or "the API pages match the package")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
