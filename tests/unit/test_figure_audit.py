"""The figure audit (scripts/figure_audit.py): its rules on drawn parts, on matplotlib figures
planted with each kind of collision, and in a kernel started by the book's executor."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import execute_notebooks  # noqa: E402
import figure_audit as fa  # noqa: E402
from test_execution_cache import copy_fingerprinted  # noqa: E402


def part(role, x0, y0, x1, y1, owner="a", name="", axis=""):
    return {"role": role, "quad": fa.box(x0, y0, x1, y1), "owner": owner, "name": name, "axis": axis}


def test_overlap_is_the_depth_along_the_best_separating_axis():
    assert fa.overlap(fa.box(0, 0, 10, 10), fa.box(8, 5, 20, 20)) == pytest.approx(2)
    assert fa.overlap(fa.box(0, 0, 10, 10), fa.box(10, 0, 20, 10)) == 0  # touching
    # two labels turned by 45 degrees side by side: their boxes around overlap, they do not
    turned = [[0, 0], [10, 10], [7, 13], [-3, 3]]
    beside = [[x + 6, y] for x, y in turned]
    assert fa.overlap(fa.box(-3, 0, 10, 13), fa.box(3, 0, 16, 13)) > 5
    assert fa.overlap(turned, beside) == 0
    assert fa.outside(fa.box(-2, 0, 10, 10), (0, 0, 100, 100)) == 2


def test_the_rules():
    parts = [part("area", 0, 0, 100, 100, "p1"), part("area", 0, 0, 100, 100, "twin"),   # exempt
             part("title", 10, 101, 60, 115, "p1", "left"), part("title", 55, 101, 120, 115, "p2", "right"),
             part("ticks", 0, -12, 8, -2, "p1", "0", "x"), part("ticks", 7.5, -12, 16, -2, "p1", "1", "x"),  # 0.5 px
             part("ticks", 20, -12, 30, -2, "p1", "2", "x"), part("ticks", 27, -12, 40, -2, "p1", "3", "x"),
             part("axis-title", 30, -14, 60, -4, "p1", "position", "x"),
             part("colorbar", 95, 0, 120, 100, "bar"), part("ticks", 110, 0, 120, 10, "bar", "1.0", "bar"),
             part("legend", 50, 50, 70, 70, "p1"), part("text", 0, 0, 300, 300, "p1", "note")]
    found = fa.collisions(parts)
    assert "title 'left' (p1) overlaps title 'right' (p2), by 5.0 px" in found
    assert "tick labels of x overlap each other ('2', '3'), by 3.0 px" in found     # not '0' and '1'
    assert any(f.startswith("tick labels of x overlaps axis title 'position' (axis x)") for f in found)
    assert "plot area (p1) overlaps colour bar (bar), by 5.0 px" in found
    assert "plot area (p1) overlaps legend (p1), by 20.0 px" in found
    assert not any("overlaps plot area" in f or "note" in f or "'1.0'" in f for f in found), found
    inside_ok = fa.collisions(parts, legend_inside_ok=True)
    assert "plot area (p1) overlaps legend (p1), by 20.0 px" not in inside_ok    # its own subplot's
    assert "plot area (twin) overlaps legend (p1), by 20.0 px" in inside_ok      # another's
    parts = parts[:-1]  # the note is cut too, below
    assert fa.cut(parts, (0, -20, 130, 130)) == []
    assert fa.cut(parts, (0, -20, 100, 130)) == [
        "title 'right' (p2) cut at the figure's edge, 20.0 px outside",
        "colour bar (bar) cut at the figure's edge, 20.0 px outside",
        "tick labels of bar ('1.0') cut at the figure's edge, 20.0 px outside"]


@pytest.fixture
def plt():
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def audit(fig, bbox_inches="tight"):
    fig.canvas.draw()
    return fa.audit_figure(fig, bbox_inches)["findings"]


def test_a_clean_figure_has_no_finding(plt):
    fig, ax = plt.subplots(1, 2, figsize=(9, 3), layout="constrained")
    ax[0].plot([0, 1], [0, 1], label="a line")
    ax[0].legend()
    ax[0].set(title="left", xlabel="position", ylabel="value")
    im = ax[1].imshow([[0, 1], [2, 3]])
    fig.colorbar(im, ax=ax[1], label="score")
    ax[1].set_xticks(range(2), ["a long label", "another one"], rotation=30, ha="right")
    fig.suptitle("a figure")
    assert audit(fig) == []


def test_planted_collisions_are_found(plt):
    fig, ax = plt.subplots(1, 2, figsize=(4, 2))
    ax[0].set_title("a long title on the left subplot")
    ax[1].set_title("a long title on the right")
    ax[1].set_ylabel("a y label")
    ax[1].set_xticks(range(6), [f"label {i}" for i in range(6)])
    found = audit(fig)
    assert any("title 'a long title on the left subplot' (subplot 1) overlaps title" in f for f in found), found
    assert any("tick labels of subplot 2 x overlap each other" in f for f in found), found
    assert any("overlaps axis title 'a y label' (axis subplot 2 y)" in f for f in found), found


def test_a_label_cut_at_the_edge_is_found(plt):
    fig, ax = plt.subplots(figsize=(3, 2), layout="constrained")
    ax.set_ylabel("value")
    assert audit(fig, bbox_inches=None) == []  # saved as the figure, not its tight box
    fig.set_layout_engine("none")
    ax.set_position([0.1, 0.2, 0.85, 0.75])    # too little room on the left
    found = audit(fig, bbox_inches=None)
    assert any("axis title 'value'" in f and "cut" in f for f in found), found


@pytest.fixture
def tree(tmp_path):
    copy_fingerprinted(tmp_path)
    code = ["import matplotlib.pyplot as plt",
            "fig, ax = plt.subplots(1, 2, figsize=(4, 2))\nax[0].set_title('a long title on the left subplot')\n"
            "ax[1].set_title('a long title on the right')\nplt.show()",
            "fig, ax = plt.subplots(figsize=(4, 3))\nax.plot([0, 1])\nax.set_title('clean')\nplt.show()",
            "print(sorted(k for k in globals() if 'audit' in k or 'runpy' in k))"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in code])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (tmp_path / "book").mkdir()
    nbformat.write(nb, tmp_path / "book" / "figs.ipynb")
    return tmp_path


def test_the_executor_audits_every_figure_shown_and_keeps_the_audit_with_the_cache(tree, capsys):
    nb, cache, out = [tree / "book" / "figs.ipynb"], tree / "_build" / "cache", tree / "_build" / "audit"
    assert execute_notebooks.execute_all(nb, cache, root=tree, figure_audit_dir=out) == []
    assert "ok in" in capsys.readouterr().out
    target = out / "book--figs.json"
    record = json.loads(target.read_text())
    assert [(f["cell"], f["name"]) for f in record["figures"]] == [(2, "a long title on the left subplot"), (3, "clean")]
    assert record["figures"][0]["findings"] and not record["figures"][1]["findings"]
    assert record["version"] == execute_notebooks.audit_version()
    target.unlink()
    assert execute_notebooks.execute_all(nb, cache, root=tree, figure_audit_dir=out) == []
    assert "cached    book/figs.ipynb" in capsys.readouterr().out
    assert json.loads(target.read_text()) == record       # written again from the cache
    # a cached execution from before the audit is executed again when the audit is asked for
    execute_notebooks.execute_all(nb, tree / "_build" / "cache2", root=tree)
    capsys.readouterr()
    assert execute_notebooks.execute_all(nb, tree / "_build" / "cache2", root=tree, figure_audit_dir=out) == []
    assert "its figures were not audited" in capsys.readouterr().out


def test_the_audit_leaves_the_notebook_as_it_was(tree, tmp_path):
    """Outputs and the kernel's namespace are the notebook's own: the audit shows nothing and
    leaves no name behind."""
    path = tree / "book" / "figs.ipynb"
    audited, _, err = execute_notebooks.execute(path, figure_audit=tmp_path / "audit.json")
    assert err is None
    plain, _, err = execute_notebooks.execute(path)
    assert err is None
    kinds = [[o["output_type"] for o in c.outputs] for c in audited.cells]
    assert kinds == [[o["output_type"] for o in c.outputs] for c in plain.cells]
    assert audited.cells[-1].outputs[0]["text"] == "[]\n"
    assert [c.execution_count for c in audited.cells] == [1, 2, 3, 4]
