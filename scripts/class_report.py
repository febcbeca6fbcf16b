"""The class report after grading: one HTML page an instructor opens in a browser, and a CSV
with the same numbers.

Reads ``results/<student>.json`` that scripts/grade.py writes into its output folder (default
``_build/grades``) and writes there:
  report.html   self-contained and offline (no script, no font, no link to fetch): per
                assignment, the distribution of total scores (an inline SVG histogram with a
                text alternative, and the same numbers as a table), each problem's outcomes and
                pass rate, the named mistakes of each problem with how many students made each
                (the checks' own categories, ``Result.mistake``, as recorded while grading), and
                the errors; not attempted and errors are counted apart from mistakes
  report.csv    assignment, section, problem, category, students, of, share; one row per number
                of the page. Sections:
                  score      category: a total score; students: how many scored it
                  outcome    per problem, category one of passed, named mistake, not attempted,
                             error, failed (no category); share of ``passed`` is the pass rate
                  mistake    per problem, category: the check's name of the mistake
                  error      per problem, category: what raised, or why the job gave no result
                  ungraded   problem "*": submissions not graded (not on the roster, not a
                             notebook of a known assignment), counted apart from every class
``of`` is the number of students graded for the assignment; ``share`` is students / of.

Usage: python scripts/class_report.py [GRADES_DIR]   (default: _build/grades; make grade runs it)
"""

from __future__ import annotations

import csv
import html
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTCOMES = ("passed", "named mistake", "not attempted", "error", "failed (no category)")
_OUTCOME = {"passed": "passed", "mistake": "named mistake", "not attempted": "not attempted", "error": "error",
            "failed": "failed (no category)"}
FIELDS = ("assignment", "section", "problem", "category", "students", "of", "share")


def load(grades: Path) -> list[dict]:
    """The per-student records grade.py wrote, by file name."""
    return [json.loads(p.read_text()) for p in sorted((grades / "results").glob("*.json"))]


def _score(x: float) -> str:
    return f"{x:g}"


def summarise(records: list[dict]) -> dict[str, dict]:
    """{assignment: {"n", "max", "scores": Counter, "problems": {p: {"outcome", "mistake", "error"}},
    "ungraded": Counter, "flagged"}} from grade.py's records."""
    out: dict[str, dict] = {}

    def of(assignment: str) -> dict:
        return out.setdefault(assignment, {"n": 0, "max": 0.0, "scores": Counter(), "ungraded": Counter(),
                                           "flagged": 0, "problems": defaultdict(lambda: {
                                               "outcome": Counter(), "mistake": Counter(), "error": Counter()})})

    for r in records:
        entry = of(r.get("assignment") or "?")
        if "ungraded" in r:
            entry["ungraded"][r["ungraded"]] += 1
            continue
        entry["n"] += 1
        entry["max"] = max(entry["max"], float(r["max"]))
        entry["scores"][float(r["score"])] += 1
        entry["flagged"] += bool(r.get("flagged"))
        for problem, p in r["problems"].items():
            counts = entry["problems"][problem]
            counts["outcome"][_OUTCOME.get(p["status"], "failed (no category)")] += 1
            if p["status"] == "mistake":
                counts["mistake"][p["mistake"]] += 1
            elif p["status"] == "error":
                counts["error"][p.get("error") or "unknown"] += 1
    return out


def bins(entry: dict) -> list[tuple[float, int]]:
    """(total score, students) for every score from 0 to the maximum in steps of one point (each
    problem is worth one, all or nothing), and any other score that occurred."""
    scores = set(entry["scores"]) | {float(x) for x in range(int(entry["max"]) + 1)}
    return [(s, entry["scores"].get(s, 0)) for s in sorted(scores)]


def rows(summary: dict[str, dict]) -> list[dict]:
    """The report's numbers, one row each (the columns of :data:`FIELDS`)."""
    out = []

    def add(assignment, section, problem, category, students, n):
        share = f"{students / n:.3f}" if n else ""
        out.append(dict(zip(FIELDS, (assignment, section, problem, category, students, n, share))))

    for assignment, e in sorted(summary.items()):
        n = e["n"]
        for score, count in bins(e) if n else []:
            add(assignment, "score", "total", _score(score), count, n)
        for problem, c in sorted(e["problems"].items()):
            for name in OUTCOMES:
                add(assignment, "outcome", problem, name, c["outcome"].get(name, 0), n)
            for name, count in sorted(c["mistake"].items(), key=lambda kv: (-kv[1], kv[0])):
                add(assignment, "mistake", problem, name, count, n)
            for name, count in sorted(c["error"].items(), key=lambda kv: (-kv[1], kv[0])):
                add(assignment, "error", problem, name, count, n)
        for why, count in sorted(e["ungraded"].items()):
            add(assignment, "ungraded", "*", why, count, n)
    return out


def histogram_svg(entry: dict, assignment: str, ident: str) -> str:
    """The score distribution as an inline SVG bar chart, its title and description the text
    alternative (the table below it holds the same numbers)."""
    data = bins(entry)
    width, height, left, bottom, top = 560, 240, 48, 40, 16
    plot_w, plot_h = width - left - 16, height - bottom - top
    peak = max((c for _, c in data), default=0) or 1
    step = plot_w / max(len(data), 1)
    desc = "; ".join(f"{c} student{'s' if c != 1 else ''} scored {_score(s)}" for s, c in data)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" aria-labelledby="{ident}-title {ident}-desc">',
             f'<title id="{ident}-title">Histogram of total scores, {html.escape(assignment)} '
             f'({entry["n"]} students, out of {_score(entry["max"])})</title>',
             f'<desc id="{ident}-desc">{html.escape(desc)}.</desc>',
             f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#333"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#333"/>']
    for tick in sorted({0, peak, *range(0, peak + 1, max(1, peak // 4))}):
        y = top + plot_h - plot_h * tick / peak
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="12">{tick}</text>')
    for i, (score, count) in enumerate(data):
        x, h = left + i * step, plot_h * count / peak
        parts.append(f'<rect class="bar" x="{x + step * 0.1:.1f}" y="{top + plot_h - h:.1f}" width="{step * 0.8:.1f}" '
                     f'height="{h:.1f}" fill="#3b6ea5" data-score="{_score(score)}" data-students="{count}"/>')
        parts.append(f'<text x="{x + step / 2:.1f}" y="{top + plot_h + 16}" text-anchor="middle" '
                     f'font-size="12">{_score(score)}</text>')
    parts += [f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle" font-size="12">'
              'total score</text>',
              f'<text x="14" y="{top + plot_h / 2:.1f}" text-anchor="middle" font-size="12" '
              f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">students</text>', "</svg>"]
    return "\n".join(parts)


def _table(caption: str, head: list[str], body: list[list], row_header: bool = True) -> str:
    out = [f"<table>\n<caption>{html.escape(caption)}</caption>\n<thead><tr>"
           + "".join(f'<th scope="col">{html.escape(h)}</th>' for h in head) + "</tr></thead>\n<tbody>"]
    for row in body:
        cells = [f'<th scope="row">{html.escape(str(row[0]))}</th>' if row_header else f"<td>{html.escape(str(row[0]))}</td>"]
        cells += [f"<td>{html.escape(str(v))}</td>" for v in row[1:]]
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(out) + "\n</tbody>\n</table>"


def _percent(k: int, n: int) -> str:
    return f"{100 * k / n:.0f}%" if n else "-"


STYLE = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1a1a1a}
table{border-collapse:collapse;margin:1rem 0}caption{text-align:left;font-weight:600;margin-bottom:.3rem}
th,td{border:1px solid #bbb;padding:.25rem .6rem;text-align:left}td{font-variant-numeric:tabular-nums}
thead th{background:#eef2f7}figure{margin:1rem 0}figcaption{font-size:.9rem;color:#444}"""


def render(summary: dict[str, dict]) -> str:
    body = ["<h1>Class report</h1>",
            "<p>From the graded results of <code>make grade</code>. Each problem is worth one point, all or "
            "nothing. A <em>named mistake</em> is the category the problem's own check gave the answer (the "
            "feedback the student read); <em>not attempted</em> is an answer left as handed out; an <em>error</em> "
            "is an answer that raised, a test that could not run (a name it needs undefined, the notebook cut "
            "short) or a job stopped at a limit; <em>failed (no category)</em> is a wrong answer that no category "
            "fits. Submissions that were not graded are counted apart.</p>"]
    for k, (assignment, e) in enumerate(sorted(summary.items())):
        n = e["n"]
        body.append(f"<h2>{html.escape(assignment)}</h2>")
        body.append(f"<p>{n} student{'s' if n != 1 else ''} graded"
                    + (f"; {e['flagged']} flagged (a notebook with another student's variant)" if e["flagged"] else "")
                    + "".join(f"; {c} not graded ({html.escape(why)})" for why, c in sorted(e["ungraded"].items()))
                    + ".</p>")
        if not n:
            continue
        ident = f"hist{k}"
        body.append(f'<h3>Score distribution</h3>\n<figure>\n{histogram_svg(e, assignment, ident)}\n'
                    f'<figcaption>Total scores out of {_score(e["max"])}; the table below gives the same '
                    'numbers.</figcaption>\n</figure>')
        body.append(_table(f"Total scores, {assignment}", ["total score", "students", "share"],
                           [[_score(s), c, _percent(c, n)] for s, c in bins(e)]))
        problems = sorted(e["problems"].items())
        body.append("<h3>Pass rate per problem</h3>")
        body.append(_table(f"Outcomes per problem, {assignment} ({n} students)",
                           ["problem", *OUTCOMES, "pass rate"],
                           [[p, *(c["outcome"].get(o, 0) for o in OUTCOMES), _percent(c["outcome"].get("passed", 0), n)]
                            for p, c in problems]))
        named = [[p, name, count, _percent(count, n)] for p, c in problems
                 for name, count in sorted(c["mistake"].items(), key=lambda kv: (-kv[1], kv[0]))]
        body.append("<h3>Named mistakes</h3>")
        body.append(_table(f"Named mistakes per problem, {assignment}", ["problem", "mistake", "students", "share"],
                           named) if named else "<p>No named mistake.</p>")
        errors = [[p, name, count, _percent(count, n)] for p, c in problems
                  for name, count in sorted(c["error"].items(), key=lambda kv: (-kv[1], kv[0]))]
        body.append("<h3>Errors</h3>")
        body.append(_table(f"Errors per problem, {assignment}", ["problem", "error", "students", "share"], errors)
                    if errors else "<p>No errors.</p>")
    if not summary:
        body.append("<p>No graded results.</p>")
    return ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>Class report</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n"
            + "\n".join(body) + "\n</main>\n</body>\n</html>\n")


def write_report(grades: Path) -> tuple[Path, Path]:
    """Write ``report.html`` and ``report.csv`` into ``grades`` from its ``results/``; returns their paths."""
    summary = summarise(load(grades))
    html_path, csv_path = grades / "report.html", grades / "report.csv"
    html_path.write_text(render(summary))
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows(summary))
    return html_path, csv_path


def main(argv: list[str]) -> int:
    grades = Path(argv[0]) if argv else ROOT / "_build" / "grades"
    if not (grades / "results").is_dir():
        print(f"no {grades / 'results'}: run make grade first", file=sys.stderr)
        return 1
    for path in write_report(grades):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
