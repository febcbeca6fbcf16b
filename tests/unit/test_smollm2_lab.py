"""The SmolLM2 lab's repeat rule and the size it prints.

- ``repeated_spans`` (tests/smollm2_repeats.py, the rule in Python) and ``repeatedSpans``
  (smollm2_lab.js, what the page runs) are one rule:
  on hand-built token lists each gives the positions worked out by hand, and on random
  lists (small vocabularies, so that runs repeat by chance; planted copies; overlapping
  runs) the two agree position for position, lengths included (skipped without Node);
- ``span_losses`` averages the losses at exactly those positions (``losses[i - 1]``);
- ``download_bytes`` is the size of the model files the page loads, as the site's
  manifest lists them (where a site is built).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from circuitbook.widgets import smollm2_lab as sl
from smollm2_repeats import MIN_REPEAT, repeat_lengths, repeated_spans, span_losses  # tests/: the rule in Python

ROOT = Path(__file__).resolve().parents[2]
JS = ROOT / "src" / "circuitbook" / "widgets" / "smollm2_lab.js"

#: (tokens, min_len, repeat positions, first occurrences), worked out by hand
HAND = [
    ([], 4, [], []),
    ([1, 2, 3], 4, [], []),
    ([1, 2, 3, 4, 1, 2, 3], 4, [], []),                        # three shared: not enough
    ([1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 9], 4, [8, 9], [3, 4]),    # a copy: its 4th and 5th tokens
    ([7, 7, 7, 7, 7, 7], 4, [4, 5], [3]),                      # overlapping runs of one token
    ([1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4], 4, [7, 8, 9, 10, 11], [3, 4, 5, 6]),  # three copies
    # period 5 from position 1: runs across a copy's end first occur inside the second copy
    ([5, 1, 2, 3, 4, 8, 1, 2, 3, 4, 8, 1, 2, 3, 4], 4, [9, 10, 11, 12, 13, 14], [4, 5, 6, 7, 8]),
    ([1, 2, 1, 2, 1, 2], 2, [3, 4, 5], [1, 2]),
    ([1, 2, 3, 9, 1, 2, 3, 8], 3, [6], [2]),
]


def _random_lists() -> list[list[int]]:
    rng = random.Random(0)
    lists = []
    for _ in range(60):  # small vocabularies: runs repeat by chance
        lists.append([rng.randrange(rng.choice([2, 3, 5, 20])) for _ in range(rng.randint(0, 60))])
    for _ in range(40):  # planted copies of a stretch, in text-like ids
        base = [rng.randrange(49152) for _ in range(rng.randint(5, 50))]
        a, b = sorted(rng.sample(range(len(base) + 1), 2))
        at = rng.randint(0, len(base))
        lists.append(base[:at] + base[a:b] + base[at:])
    lists.append([3] * 128)
    lists.append(list(range(64)) * 2)
    return lists


@pytest.mark.parametrize("tokens, min_len, repeat, first", HAND)
def test_hand_built(tokens, min_len, repeat, first):
    assert repeated_spans(tokens, min_len) == {"repeat": repeat, "first": first}


def test_first_occurrences_are_not_repeats_and_match():
    for tokens in _random_lists():
        spans, lengths = repeated_spans(tokens), repeat_lengths(tokens)
        assert not set(spans["repeat"]) & set(spans["first"])
        for i in spans["repeat"]:
            assert lengths[i] >= MIN_REPEAT
            assert any(tokens[j - 3: j + 1] == tokens[i - 3: i + 1] for j in spans["first"] if j < i)
        for i, m in enumerate(lengths):  # the longest earlier run, by brute force
            best = max((k for j in range(i) for k in range(1, min(i, j) + 2)
                        if tokens[i - k + 1: i + 1] == tokens[j - k + 1: j + 1] and j - k + 1 >= 0), default=0)
            assert m == best, (tokens, i)


@pytest.mark.skipif(shutil.which("node") is None, reason="no Node.js")
def test_python_and_javascript_agree(tmp_path):
    cases = [(t, m) for t, m, _, _ in HAND] + [(t, m) for t in _random_lists() for m in (2, 4, 6)]
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    script = (f"const m = await import({JS.as_uri()!r});"
              f"const fs = await import('node:fs');"
              f"const cases = JSON.parse(fs.readFileSync({str(tmp_path / 'cases.json')!r}, 'utf8'));"
              "process.stdout.write(JSON.stringify(cases.map(([t, k]) => m.repeatedSpans(t, k))));")
    run = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "NODE_NO_WARNINGS": "1"})
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    for (tokens, k), js in zip(cases, got):
        assert {"repeat": js["repeat"], "first": js["first"]} == repeated_spans(tokens, k), tokens
        assert js["lengths"] == repeat_lengths(tokens), tokens


def test_span_losses_average_those_positions():
    tokens = [5, 1, 2, 3, 4, 8, 1, 2, 3, 4, 8]
    losses = [float(i) for i in range(len(tokens) - 1)]   # losses[p] predicts tokens[p + 1]
    got = span_losses(losses, tokens)
    assert repeated_spans(tokens) == {"repeat": [9, 10], "first": [4, 5]}
    assert got == {"first": (3 + 4) / 2, "repeat": (8 + 9) / 2, "n_first": 2, "n_repeat": 2}
    assert span_losses(losses, list(range(11))) is None


SMOLLM2 = SimpleNamespace(d_model=576, d_head=64, n_heads=9, n_key_value_heads=3, d_mlp=1536, d_vocab=49152,
                          n_layers=30, rotary_dim=64)


def test_download_bytes_are_the_files_the_page_loads():
    site = Path(os.environ.get("SITE_DIR", ROOT / "_build" / "html"))
    manifest = site / "_static" / "smollm2" / "manifest.json"
    if not manifest.exists():
        pytest.skip(f"no SmolLM2 export at {manifest}")
    files = json.loads(manifest.read_text())["files"]
    assert sl.download_bytes(SMOLLM2) == sum(f["bytes"] for f in files if f["name"].endswith(".bin"))


@pytest.mark.skipif(shutil.which("node") is None, reason="no Node.js")
def test_the_widget_module_is_one_module_node_imports(tmp_path):
    """The widget's ``_esm`` is its files joined (frontend.esm): no import of a sibling is left,
    which the page could not resolve from the saved widget state (a ``./dom.js`` import once
    broke the lab on the site), and Node imports it, finding ``render``."""
    import re

    module = tmp_path / "smollm2_lab.mjs"
    module.write_text(sl.SmolLM2Lab._esm)
    assert not re.search(r"""^\s*import\b[^;]*\bfrom\s*["']\.""", sl.SmolLM2Lab._esm, re.M), \
        "a relative import was left in the joined module"
    script = f"const m = await import({str(module)!r}); if (typeof m.default.render !== 'function') process.exit(3);"
    run = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
