"""circuitbook.widgets.frontend: the widgets' ES modules joined into the one module anywidget
takes, and their stylesheets after the shared theme.

- every widget's joined module is valid JavaScript that Node imports, with no page, and
  whose default export has ``render`` (skipped where there is no Node);
- a shared module is joined in once, even when two modules import it;
- the grammar the joiner accepts is enforced with errors that name the file: an import
  cycle, a missing sibling, ``export default`` in a dependency;
- every widget's stylesheet starts with the shared theme.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from circuitbook.widgets import frontend

FRONT_ENDS = ["lab.js", "induction_stepper.js", "composition_builder.js", "explore.js", "quiz.js", "progress.js"]


@pytest.mark.skipif(shutil.which("node") is None, reason="no Node.js")
@pytest.mark.parametrize("name", FRONT_ENDS)
def test_joined_module_imports_in_node(tmp_path, name):
    path = tmp_path / (name.removesuffix(".js") + ".mjs")
    path.write_text(frontend.esm(name))
    script = f"const m = await import({str(path)!r}); if (typeof m.default.render !== 'function') process.exit(3);"
    run = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "import {" not in path.read_text(), "a sibling import was left in the joined module"


def test_each_dependency_is_joined_once():
    joined = frontend.esm("lab.js")  # lab.js imports dom.js, attn_only_forward.js, token_input.js
    assert joined.count("const __cb_dom_js = ") == 1
    assert joined.count("export function el(") == 0 and "function el(" in joined
    assert joined.count("export default") == 1


def test_grammar_errors_name_the_file(tmp_path):
    (tmp_path / "a.js").write_text('import { b } from "./b.js";\nexport default {};\n')
    (tmp_path / "b.js").write_text('import { a } from "./a.js";\nexport const b = 1;\n')
    with pytest.raises(ValueError, match="import cycle.*a.js -> b.js -> a.js"):
        frontend.esm("a.js", tmp_path)
    (tmp_path / "c.js").write_text('import { x } from "./missing.js";\n')
    with pytest.raises(FileNotFoundError, match="c.js imports ./missing.js"):
        frontend.esm("c.js", tmp_path)
    (tmp_path / "d.js").write_text('import { e } from "./e.js";\nexport default {};\n')
    (tmp_path / "e.js").write_text("export const e = 1;\nexport default e;\n")
    with pytest.raises(ValueError, match="e.js: a module that widgets import exports only"):
        frontend.esm("d.js", tmp_path)


@pytest.mark.parametrize("sheet", ["lab.css", "explainers.css", "quiz.css", "progress.css", "explore.css"])
def test_stylesheets_start_with_the_theme(sheet):
    css = frontend.css(sheet)
    theme = (frontend.HERE / "theme.css").read_text()
    assert css.startswith(theme) and css.endswith((frontend.HERE / sheet).read_text())
