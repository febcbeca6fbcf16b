"""circuitbook.viz: a circuitsvis attention view that loads the bundle instead of pasting it,
with the same output for the same inputs."""

from __future__ import annotations

import json
import re
from importlib.metadata import version

import pytest
import torch

from circuitbook import viz


def _pattern(heads=2, n=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(heads, n, n, generator=g).masked_fill(torch.ones(n, n).triu(1).bool(), float("-inf"))
    return scores.softmax(-1)


def _props(html: str) -> dict:
    return json.loads(re.search(r'cv\["AttentionHeads"\], (\{.*\})\);', html).group(1))


def test_the_view_is_small_and_loads_the_bundle_from_the_site_or_the_cdn():
    html = viz.attention_pattern_view(list("abcde"), _pattern(), ["prev", "ind"]).data
    assert len(html) < 10_000  # the 1.3 MB bundle is loaded, not pasted
    assert "var CircuitsVis=" not in html
    assert viz.SITE_BUNDLE in html and viz.CDN_BUNDLE in html
    assert f"circuitsvis@{version('circuitsvis')}/" in viz.CDN_BUNDLE, "CDN fallback names another version"
    props = _props(html)
    assert props["tokens"] == list("abcde") and props["attentionHeadNames"] == ["prev", "ind"]
    assert torch.allclose(torch.tensor(props["attention"], dtype=torch.float64), _pattern().double(), atol=5e-4)
    assert props["maskUpperTri"] is True


def test_same_inputs_same_output():
    viz._ids.clear()
    a = viz.attention_pattern_view(list("abcde"), _pattern()).data
    viz._ids.clear()
    b = viz.attention_pattern_view(list("abcde"), _pattern()).data
    assert a == b
    c = viz.attention_pattern_view(list("abcde"), _pattern()).data  # shown twice: a distinct element id
    ids = [re.search(r'id="([^"]+)"', h).group(1) for h in (a, c)]
    assert ids[0] != ids[1]
    d = viz.attention_pattern_view(list("abcde"), _pattern(seed=1)).data
    assert re.search(r'id="([^"]+)"', d).group(1) not in ids


def test_tokens_cannot_close_the_script():
    html = viz.attention_pattern_view(["</script>", "<b>", "b", "c", "d"], _pattern()).data
    assert html.count("</script>") == 1
    assert _props(html)["tokens"][0] == "</script>"


@pytest.mark.parametrize("tokens, pattern, names, match", [
    (list("abcde"), torch.rand(5, 5), None, r"\[head, query, key\]"),
    (list("abcd"), torch.rand(2, 5, 5), None, "does not match 4 tokens"),
    (list("abcde"), torch.rand(2, 5, 4), None, "does not match"),
    (list("abcde"), torch.rand(2, 5, 5), ["only one"], "1 head names for 2 heads"),
    (list("abcde"), torch.full((2, 5, 5), float("nan")), None, "non-finite"),
])
def test_bad_inputs_are_rejected_clearly(tokens, pattern, names, match):
    with pytest.raises(ValueError, match=match):
        viz.attention_pattern_view(tokens, pattern, names)
