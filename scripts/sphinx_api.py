"""A Sphinx extension for the API reference: ``{api-reference}`` renders every public function
and class of ``circuitbook`` (signature, docstring, source module), generated at build time from
the package itself, with each "chapter N" in a docstring ("Taught in chapter 18 (Composition
scores)", "chapters 7 and 20", "ch. 16, 18") turned into a link to that chapter's page, as d2l
links its helpers to the sections that define them.

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
                    out[int(m.group(1))] = f
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


def anchor(name: str) -> str:
    return "api-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


# --- Sphinx ---------------------------------------------------------------------------------


def _doc_link(text: str, docname: str, fromdoc: str):
    from docutils import nodes
    from sphinx import addnodes

    ref = addnodes.pending_xref("", refdomain="std", reftype="doc", reftarget="/" + docname, refexplicit=True,
                                refwarn=True, refdoc=fromdoc)
    ref += nodes.inline(text, text)
    return ref


def _linked_block(text: str, chapter_docs: dict[int, str], fromdoc: str, classes: list[str]):
    """A preformatted block of ``text`` with its chapter mentions as links (a parsed literal)."""
    from docutils import nodes

    # A rawsource unlike the text marks it a parsed literal: Sphinx then neither highlights it
    # (which would flatten the links) nor fills in an empty rawsource; no doctest-flag trimming.
    block = nodes.literal_block("parsed-literal", classes=classes, trim_flags=False)
    for piece, docname in segments(text, chapter_docs):
        block += _doc_link(piece, docname, fromdoc) if docname else nodes.Text(piece)
    return block


def _section(title_node, ident: str):
    from docutils import nodes

    section = nodes.section(ids=[ident], names=[ident])
    section += nodes.title("", "", title_node)
    return section


def build_nodes(fromdoc: str, chapter_docs: dict[int, str], document) -> list:
    from docutils import nodes

    out = []
    for modname, doc, entries in reference():
        section = _section(nodes.literal(modname, modname), anchor(modname))
        if doc:
            section += _linked_block(doc, chapter_docs, fromdoc, ["api-docstring"])
        for e in entries:
            name = f"{e.qualname}{e.signature}" if e.kind != "class" else f"class {e.qualname}{e.signature}"
            sub = _section(nodes.literal(e.qualname, e.qualname), anchor(f"{modname}.{e.qualname}"))
            sub += nodes.literal_block(name, name, language="python", classes=["api-signature"])
            if e.doc:
                sub += _linked_block(e.doc, chapter_docs, fromdoc, ["api-docstring"])
            para = nodes.paragraph()
            para += nodes.Text(f"{e.kind} in ")
            para += nodes.literal(f"{modname}", f"{modname}")
            para += nodes.Text(" (")
            para += nodes.literal(e.source, e.source)
            para += nodes.Text(")")
            sub += para
            section += sub
        out.append(section)
    for section in out:
        document.note_implicit_target(section, section)
    return out


def setup(app):
    from docutils.parsers.rst import Directive

    class ApiReference(Directive):
        has_content = False

        def run(self):
            env = self.state.document.settings.env
            if str(ROOT / "src") not in sys.path:
                sys.path.insert(0, str(ROOT / "src"))
            toc = Path(env.srcdir) / "_toc.yml"
            return build_nodes(env.docname, chapters(toc if toc.exists() else ROOT / "_toc.yml"), self.state.document)

    app.add_directive("api-reference", ApiReference)
    # The page shows the package, which lives outside the book's sources: rebuild it every time.
    app.connect("env-get-outdated", lambda app, env, added, changed, removed:
                sorted(d for d in env.found_docs if Path(env.doc2path(d)).suffix == ".md"
                       and "{api-reference}" in Path(env.doc2path(d)).read_text()))
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "0.1"}
