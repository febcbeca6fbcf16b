"""The widgets' front ends as anywidget loads them: one ES module and one stylesheet each.

Each front end (``lab.js``, ``induction_stepper.js``, ...) is an ES module that imports its
siblings (``import { el, bars } from "./dom.js";``), so the files are ordinary modules that
Node tests and eslint reads. anywidget, though, takes a widget's ``_esm`` as one module's
source and evaluates it from a blob URL (JupyterLab, Colab) or from the saved widget state
(the static site): there is no folder beside it to import from. :func:`esm` therefore joins
a front end and the sibling modules it imports, recursively, into one module: each
dependency runs once, inside its own function scope (so two modules may use the same private
names), and its named exports are bound to the names the importer asks for.

We join them here rather than with a JavaScript bundler (esbuild, rollup) because the join
must happen wherever the Python package runs, Colab included, where there is no Node, and
committing bundled copies would let them drift from their sources. The price is a small,
strict grammar, checked with a clear error: a sibling is imported only as
``import { a, b as c } from "./name.js";`` and exports only with ``export function``,
``export const``, ``export let`` or ``export class``; ``export default`` only in the front end
itself. Any other import in a front end (a URL) is left as it is.

:func:`css` joins the shared ``theme.css`` (colours for the light and dark themes, buttons,
bars) with a widget's own stylesheet.
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).parent

_SIBLING = re.compile(r'^import\s*\{([^}]*)\}\s*from\s*["\']\./([\w.-]+\.js)["\'];?[ \t]*$', re.M)
_ANY_IMPORT = re.compile(r"^\s*import\b", re.M)
_EXPORT = re.compile(r"^export\s+((?:async\s+)?function\*?\s+|const\s+|let\s+|class\s+)([A-Za-z_$][\w$]*)", re.M)


def _bindings(spec: str, source: str) -> str:
    """``a, b as c`` -> ``a, b: c``, the destructuring of the exporter's record."""
    names = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        m = re.fullmatch(r"([A-Za-z_$][\w$]*)(?:\s+as\s+([A-Za-z_$][\w$]*))?", part)
        if not m:
            raise ValueError(f"{source}: cannot read the import {part!r}")
        names.append(m[1] if not m[2] else f"{m[1]}: {m[2]}")
    return ", ".join(names)


def _var(name: str) -> str:
    return "__cb_" + re.sub(r"\W", "_", name)


def esm(front_end: str, directory: Path | str = HERE) -> str:
    """The front end ``directory/front_end`` with the sibling modules it imports joined in,
    as one ES module's source (see the module docstring for the grammar it accepts)."""
    directory = Path(directory)
    order: list[str] = []  # dependencies, each after the modules it imports
    visiting: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        if name in visiting:
            raise ValueError(f"import cycle among the widget modules: {' -> '.join(visiting + [name])}")
        path = directory / name
        if not path.is_file():
            raise FileNotFoundError(f"{visiting[-1] if visiting else front_end} imports ./{name}, "
                                    f"which is not in {directory}")
        visiting.append(name)
        for m in _SIBLING.finditer(path.read_text()):
            visit(m[2])
        visiting.pop()
        order.append(name)

    visit(front_end)
    parts = [f"// {front_end} as one module: its sibling modules are joined in by "
             "circuitbook.widgets.frontend.esm"]
    for name in order:
        text = (directory / name).read_text()
        imports = "\n".join(f"const {{ {_bindings(m[1], name)} }} = {_var(m[2])};"
                            for m in _SIBLING.finditer(text))
        body = _SIBLING.sub("", text)
        if name == front_end:
            parts.append(imports + "\n" + body)
            continue
        if _ANY_IMPORT.search(body):
            raise ValueError(f"{name}: a module that widgets import may import only its siblings, "
                             'as import { a, b } from "./x.js";')
        exported = [m[2] for m in _EXPORT.finditer(body)]
        body = _EXPORT.sub(lambda m: m[1] + m[2], body)
        if re.search(r"^export\b", body, re.M):
            raise ValueError(f"{name}: a module that widgets import exports only with export function, "
                             "export const, export let or export class of one name (no export default, "
                             "no export { })")
        parts.append(f"const {_var(name)} = (() => {{\n{imports}\n{body}\n"
                     f"return {{ {', '.join(exported)} }};\n}})();")
    return "\n".join(parts)


def css(own: str, directory: Path | str = HERE) -> str:
    """The shared ``theme.css`` followed by the widget's own stylesheet ``own``."""
    directory = Path(directory)
    return (directory / "theme.css").read_text() + "\n" + (directory / own).read_text()
