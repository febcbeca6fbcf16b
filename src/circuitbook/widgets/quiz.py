"""A graded multiple-choice quiz widget (the induction module's "Check yourself").

Questions and options are written with inline TeX between dollar signs (``$W_{QK}$``).
Python turns each piece of math into HTML that reads correctly on its own (subscripts,
superscripts, ⊤, ≤); on a page where MathJax is loaded, the widget typesets the TeX
instead. Everything the widget needs travels in its state, so it works on the static site
with no kernel.
"""

from __future__ import annotations

import html
import re

import anywidget
import traitlets

from circuitbook.widgets import frontend


_SYMBOLS = {
    "top": "⊤", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "ne": "≠", "neq": "≠", "times": "×", "to": "→",
    "approx": "≈", "cdot": "·", "ldots": "…", "dots": "…", "in": "∈", "sum": "∑", "lambda": "λ", "mu": "μ",
    "sigma": "σ", "epsilon": "ε", "infty": "∞", "|": "‖", ",": "\u2009", ";": "\u2005", "quad": "\u2003",
    "{": "{", "}": "}", "%": "%",
}
_UPRIGHT = {"text", "mathrm", "operatorname", "textrm", "mathit"}


def _group(tex: str, i: int) -> tuple[str, int]:
    """The argument starting at ``tex[i]``: a braced group or one character (or command)."""
    if i >= len(tex):
        return "", i
    if tex[i] == "{":
        depth, j = 1, i + 1
        while j < len(tex) and depth:
            depth += {"{": 1, "}": -1}.get(tex[j], 0)
            j += 1
        return tex[i + 1 : j - 1], j
    if tex[i] == "\\":
        m = re.match(r"\\([A-Za-z]+|.)", tex[i:])
        end = i + len(m.group(0))
        if m.group(1) in _UPRIGHT:  # \text{model} as one argument, braces included
            _, end = _group(tex, end)
        return tex[i:end], end
    return tex[i], i + 1


def tex_to_html(tex: str) -> str:
    """A small TeX subset as HTML: sub/superscripts, \\top, \\le, \\times, \\text{...} and
    friends. Letters are set in italics, as in typeset maths; digits and symbols upright."""
    out, i = [], 0
    while i < len(tex):
        ch = tex[i]
        if ch in "_^":
            arg, i = _group(tex, i + 1)
            tag = "sub" if ch == "_" else "sup"
            out.append(f"<{tag}>{tex_to_html(arg)}</{tag}>")
        elif ch == "\\":
            m = re.match(r"\\([A-Za-z]+|.)", tex[i:])
            name, i = m.group(1), i + len(m.group(0))
            if name in _UPRIGHT:
                arg, i = _group(tex, i)
                out.append(html.escape(arg))
            elif name in _SYMBOLS:
                out.append(_SYMBOLS[name])
            else:
                out.append(html.escape(name))
        elif ch in "{}":
            i += 1
        elif ch == "-":
            out.append("\u2212")
            i += 1
        elif ch.isalpha():
            j = i
            while j < len(tex) and tex[j].isalpha():
                j += 1
            out.append(f"<i>{html.escape(tex[i:j])}</i>")
            i = j
        else:
            out.append(html.escape(ch))
            i += 1
    return "".join(out)


def rich(text: str) -> str:
    """Text with inline ``$TeX$`` -> HTML: each piece of math is a ``span.cb-math`` holding
    the readable HTML, with its TeX in ``data-tex`` for MathJax."""
    parts = re.split(r"\$([^$]+)\$", text)
    out = []
    for k, part in enumerate(parts):
        if k % 2:
            out.append(f'<span class="cb-math" data-tex="{html.escape(part, quote=True)}">{tex_to_html(part)}</span>')
        else:
            out.append(html.escape(part))
    return "".join(out)


def plain(text: str) -> str:
    """What a reader sees of ``text``, as characters (for measuring option lengths)."""
    return html.unescape(re.sub(r"<[^>]+>", "", rich(text)))


class Quiz(anywidget.AnyWidget):
    """``Quiz(questions=[{"question", "options", "correct", "explanation", "why_not"}, ...])``.

    ``why_not[i]`` says what is wrong with option ``i`` (the misconception it stands for);
    the entry for the correct option is ignored. Every question must be answered before
    the quiz can be submitted; after submission each question says whether the answer was
    right and why, without revealing the right option of a question answered wrongly, and
    "Try again" reopens the quiz with the answers kept. ``score`` is available in Python.
    """

    _esm = frontend.esm("quiz.js")
    _css = frontend.css("quiz.css")
    questions = traitlets.List(traitlets.Dict()).tag(sync=True)
    answers = traitlets.List().tag(sync=True)
    submitted = traitlets.Bool(False).tag(sync=True)
    attempts = traitlets.Int(0).tag(sync=True)

    def __init__(self, questions: list[dict], **kwargs):
        rendered = []
        for i, q in enumerate(questions):
            missing = {"question", "options", "correct", "explanation", "why_not"} - set(q)
            if missing:
                raise ValueError(f"question {i + 1} is missing {sorted(missing)}")
            if not 0 <= q["correct"] < len(q["options"]):
                raise ValueError(f"question {i + 1}: correct={q['correct']} is not an option index")
            if len(q["why_not"]) != len(q["options"]):
                raise ValueError(f"question {i + 1}: why_not needs one entry per option")
            rendered.append({
                "question": rich(q["question"]),
                "options": [rich(o) for o in q["options"]],
                "correct": q["correct"],
                "explanation": rich(q["explanation"]),
                "why_not": [None if k == q["correct"] else rich(w) for k, w in enumerate(q["why_not"])],
            })
        super().__init__(questions=rendered, answers=[None] * len(questions), **kwargs)

    @property
    def score(self) -> int | None:
        if not self.submitted:
            return None
        return sum(a == q["correct"] for a, q in zip(self.answers, self.questions))
