"""circuitbook.viz: a circuitsvis attention view that loads the bundle instead of pasting it,
with the same output for the same inputs."""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

import pytest
import torch

from circuitbook import viz


def _pattern(heads=2, n=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(heads, n, n, generator=g).masked_fill(torch.ones(n, n).triu(1).bool(), float("-inf"))
    return scores.softmax(-1)


def _props(html: str) -> dict:
    start = html.index('cv["AttentionHeads"], ') + len('cv["AttentionHeads"], ')
    return json.JSONDecoder().raw_decode(html, start)[0]


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


# --------------------------------------------------------------------------- heatmap (plotly)

def _figure_json(html: str) -> dict:
    return json.loads(re.search(r"var f = (\{.*\}); P\.newPlot", html).group(1))


def test_heatmap_holds_the_values_labels_and_a_hover_naming_row_column_value():
    z = torch.arange(2 * 3 * 4, dtype=torch.float64).reshape(2, 3, 4) / 7
    z[1, 2, 3] = float("nan")
    fig = viz.heatmap(z, ["a", "b", "a", "c"], [0, 1, 2], panel_titles=["p", "q"],
                      x_title="key", y_title="query", zmin=0, zmax=4)
    data = fig.to_dict()["data"]
    assert len(data) == 2
    for p, trace in enumerate(data):
        assert list(trace["x"]) == ["a [0]", "b", "a [2]", "c"]  # a repeated token keeps its own column
        assert list(trace["y"]) == ["0", "1", "2"]
        for i in range(3):
            for j in range(4):
                want = (p * 12 + i * 4 + j) / 7
                got = trace["z"][i][j]
                if (p, i, j) == (1, 2, 3):
                    assert got is None
                else:
                    assert abs(got - want) <= 5e-4 * abs(want)  # 4 significant digits
        assert "query: %{y}" in trace["hovertemplate"] and "key: %{x}" in trace["hovertemplate"]
        assert "%{z:.3f}" in trace["hovertemplate"]
    layout = fig.to_dict()["layout"]
    assert layout["coloraxis"]["cmin"] == 0 and layout["coloraxis"]["cmax"] == 4
    assert layout["yaxis"]["autorange"] == "reversed"  # row 0 on top, as plt.imshow draws it


def test_heatmap_zmid_centres_the_scale_and_outline_boxes_cells():
    z = torch.tensor([[-1.0, 3.0], [0.5, 2.0]])
    fig = viz.heatmap(z, ["x", "y"], ["r", "s"], zmid=1.0, outline=[(1, 0)]).to_dict()
    assert fig["layout"]["coloraxis"]["cmin"] == -1.0 and fig["layout"]["coloraxis"]["cmax"] == 3.0
    (box,) = fig["layout"]["shapes"]
    assert (box["x0"], box["x1"], box["y0"], box["y1"]) == (-0.5, 0.5, 0.5, 1.5)


def test_heatmap_displays_as_plotly_json_and_as_html_loading_the_site_or_cdn_bundle():
    import plotly

    fig = viz.heatmap(torch.rand(20, 20), range(20), range(20), title="t")
    bundle = fig._repr_mimebundle_()
    assert bundle["application/vnd.plotly.v1+json"]["data"][0]["z"] == fig.to_dict()["data"][0]["z"]
    html = bundle["text/html"]
    assert len(html) < 30_000 and "newPlot" in html
    assert _figure_json(html) == bundle["application/vnd.plotly.v1+json"]
    assert viz.PLOTLY_SITE_BUNDLE in html
    bundled = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()[:200]
    version_in_file = re.search(r"plotly\.js v(\d+\.\d+\.\d+)", bundled).group(1)
    assert viz.plotly_cdn_bundle() == f"https://cdn.plot.ly/plotly-{version_in_file}.min.js"
    assert viz.plotly_cdn_bundle() in html


@pytest.mark.parametrize("z, xs, ys, match", [
    (torch.rand(4), range(4), range(1), r"\[row, col\]"),
    (torch.rand(2, 3), range(2), range(2), "2 column labels for 3 columns"),
    (torch.rand(2, 3), range(3), range(3), "3 row labels for 2 rows"),
    (torch.full((2, 2), float("inf")), range(2), range(2), "infinite"),
    (torch.full((2, 2), float("nan")), range(2), range(2), "no finite"),
])
def test_heatmap_rejects_bad_inputs_clearly(z, xs, ys, match):
    with pytest.raises(ValueError, match=match):
        viz.heatmap(z, xs, ys)


def test_heatmap_side_panel_has_its_own_axes_and_the_colour_bar_stays_by_the_heatmap():
    import plotly.graph_objects as go

    fig = viz.heatmap(torch.rand(2, 5, 5), range(5), range(5), side=[go.Bar(x=[0, 1], y=[2.0, 3.0])],
                      side_title="bars").to_dict()
    heat, heat2, bar = fig["data"]
    assert (heat["xaxis"], heat2["xaxis"], bar["xaxis"]) == ("x", "x2", "x3")
    assert bar["yaxis"] == "y3" and fig["layout"]["yaxis2"]["matches"] == "y"
    assert "matches" not in fig["layout"]["yaxis3"] and "autorange" not in fig["layout"]["yaxis3"]
    colorbar_x = fig["layout"]["coloraxis"]["colorbar"]["x"]
    assert fig["layout"]["xaxis2"]["domain"][1] < colorbar_x < fig["layout"]["xaxis3"]["domain"][0]


def test_heatmap_bundle_honours_include_and_exclude():
    fig = viz.heatmap(torch.rand(3, 3), range(3), range(3))
    assert set(fig._repr_mimebundle_(include=["text/html"])) == {"text/html"}
    assert "text/html" not in fig._repr_mimebundle_(exclude=["text/html"])


# --------------------------------------------------------------------------- readable tokens

def _gpt2_bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table as its paper's code writes it (an independent copy of what viz inverts)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def test_byte_level_pieces_are_shown_as_text():
    table = _gpt2_bytes_to_unicode()
    text = [" SC", "\n", "Hello", " wörld", "é"]
    pieces = ["".join(table[b] for b in t.encode("utf-8")) for t in text]
    assert pieces[0] == "\u0120SC" and pieces[1] == "\u010a"
    assert viz.readable_tokens(pieces) == [" SC", "\u21b5", "Hello", " wörld", "é"]
    # a piece holding half of a two-byte character shows the replacement character
    half = "".join(table[b] for b in "é".encode("utf-8")[:1])
    assert viz.readable_tokens(["\u0120a", half]) == [" a", "\ufffd"]


def test_plain_tokens_and_sentencepiece_markers():
    assert viz.readable_tokens(["t1", "łódź", "Ā"]) == ["t1", "łódź", "Ā"]  # no Ġ/Ċ: left alone
    assert viz.readable_tokens(["\u2581the", "\u2581cat", "s"]) == [" the", " cat", "s"]


def test_the_attention_view_shows_readable_tokens():
    html = viz.attention_pattern_view(["\u0120SC", "\u010a", "b", "c", "d"], _pattern()).data
    assert _props(html)["tokens"] == [" SC", "\u21b5", "b", "c", "d"]


def test_views_load_their_bundle_only_near_the_viewport():
    html = viz.attention_pattern_view(list("abcde"), _pattern()).data
    assert "IntersectionObserver" in html and "rootMargin" in html
    fig = viz.heatmap(torch.rand(3, 3), range(3), range(3))._repr_mimebundle_()["text/html"]
    assert "IntersectionObserver" in fig
    # the figure follows the theme and the width at run time; its JSON stays as written
    assert "data-theme" in fig and "jpThemeLight" in fig and "NARROW = 640" in fig


def test_every_heatmap_has_a_name_a_screen_reader_reads():
    """The figure's element is named (aria-label) by its title, else its panels' titles and its
    axes; a heatmap with no title at all was named by an empty label (issue 40)."""
    def label(fig):
        return re.search(r'role="figure" aria-label="([^"]*)"', fig._repr_mimebundle_()["text/html"]).group(1)

    assert label(viz.heatmap(torch.rand(3, 3), range(3), range(3), title="a <b>bold</b><br>title")) == "a bold title"
    assert label(viz.heatmap(torch.rand(2, 3, 3), range(3), range(3), panel_titles=["p", "q"],
                             x_title="key", y_title="query")) == "p; q: query by key"
    assert label(viz.heatmap(torch.rand(3, 3), range(3), range(3))) == "plotly figure"
    # plotly's own SVGs are hidden from screen readers once drawn: the element is the one image
    html = viz.heatmap(torch.rand(3, 3), range(3), range(3))._repr_mimebundle_()["text/html"]
    assert 'setAttribute("aria-hidden", "true")' in html


def test_heatmap_axes_make_room_for_their_labels():
    """Every axis grows the margins to fit its tick labels and title (automargin), in the JSON
    JupyterLab draws and, for any figure, in the page's layout; the page's figure says which
    layout it was drawn with (data-layout), which the browser tests wait for."""
    fig = viz.heatmap(torch.rand(2, 3, 3), range(3), ["a long row label", "b", "c"])
    layout = fig.to_dict()["layout"]
    assert layout["xaxis"]["automargin"] and layout["yaxis"]["automargin"] and layout["xaxis2"]["automargin"]
    html = fig._repr_mimebundle_()["text/html"]
    assert "automargin: true" in html and '"data-layout"' in html
