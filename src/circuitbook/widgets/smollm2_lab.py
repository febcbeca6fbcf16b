"""The SmolLM2 lab: a real language model's heads, run and ablated in the reader's browser.

:class:`SmolLM2Lab` runs SmolLM2-135M-Instruct (the book's real model, chapter 17) on the
reader's own text, in the page, and shows the attention pattern of any of its 270 heads,
the five most likely next tokens at any position and the loss at every position.
Clicking a head ablates it (zero, then mean, then not), the substitution of
:func:`circuitbook.heads.ablate` with the means of
:func:`circuitbook.widgets.smollm2_export.z_means`; two buttons ablate the k heads with the
highest induction scores, or k random heads (one fresh draw each click), and a third runs
:data:`BASELINE_DRAWS` draws of k random heads and reports their mean and spread. Every loss
shown while heads are ablated is printed beside the clean one ("0.91 \u2192 2.69, +1.78").

**Running.** The text runs when the reader presses Run or Enter (Shift+Enter starts a new
line), or pauses typing for :data:`DEBOUNCE_MS`; until the new results land the old ones
are dimmed and marked stale. **Repeats.** In any text the lab finds the tokens that repeat
an earlier run of tokens (``repeatedSpans`` in ``smollm2_lab.js``; tests/smollm2_repeats.py
states the rule in Python, and the tests hold the page to it) and prints the loss on their
first occurrence and on the repeat, beside the mean; the loss chart marks them.

**Where the model runs.** In the page: ``smollm2_forward.js`` calls WebAssembly kernels
(``smollm2_kernels.c``), which read the weights in the GGUF file's own 4-bit blocks; the
reasons and measurements are at the top of ``smollm2_forward.js`` and in
``benchmarks/bench_browser_smollm2.py``. ``smollm2_lab.js`` imports the forward pass and the
shared DOM helpers (``dom.js``); :func:`circuitbook.widgets.frontend.esm` joins them into the
widget's one module.

**Where the weights come from.** Nothing loads until the reader presses the button. On the
static site the files lie in ``_static/smollm2/`` (written at build time by
``scripts/vendor_assets.py`` with :func:`circuitbook.widgets.smollm2_export.write_site_files`)
and the page tokenises the text itself, with tokenizers.js reading the model's own
``tokenizer.json``. Live in Jupyter or Colab there is no site: the front end asks the kernel,
which exports the same files once into the user's cache
(:func:`~circuitbook.widgets.smollm2_export.cached_files`) and sends them in chunks, and the
kernel tokenises (the ``text`` trait's observer sets ``tokens``). The reader's text, the
ablated heads (``{"18.6": "mean"}``), the head shown and the position sync back to Python.
"""

from __future__ import annotations

from pathlib import Path

import anywidget
import traitlets

from circuitbook.widgets import frontend

HERE = Path(__file__).parent
CHUNK = 4 << 20  # bytes per message when the kernel sends the weights
MIN_REPEAT = 4  # tokens a run must share with an earlier one to count as a repeat
DEBOUNCE_MS = 600  # a pause in typing this long runs the text (smollm2_lab.js reads the trait)
BASELINE_DRAWS = 10  # draws of k random heads behind the random baseline

#: Texts the lab offers with one click, ``{label: {"text", "repeat"}}`` (the book's own
#: words; the page adds its Shakespeare passage).
EXAMPLES = {
    "a name that recurs": {"repeat": False, "text": (
        "Mrs. Eleanor Vance kept the lighthouse on the northern cape for thirty years. "
        "Every winter the supply boat brought her coal, flour and letters. When the "
        "storm of 1921 wrecked the boat on the rocks, the crew swam for the light, and "
        "it was Mrs. Eleanor Vance who pulled them out of the surf.")},
}


def lab_tokens(ids: list[int], repeat: bool) -> list[int]:
    """What the lab runs for a text's token ids: at most MAX_TOKENS of them, or with
    ``repeat`` its first MAX_TOKENS // 2 twice (smollm2_lab.js does the same)."""
    from circuitbook.widgets.smollm2_export import MAX_TOKENS

    return ids[: MAX_TOKENS // 2] * 2 if repeat else ids[:MAX_TOKENS]


def download_bytes(cfg) -> int:
    """The bytes of the model's files the lab loads when the reader presses its button
    (what its progress bar counts): the weights (``smollm2_export.weight_bytes``) and
    ``tables.bin`` (the final RMSNorm gain, the rotary tables for MAX_TOKENS positions and
    every head's mean z, float32, each padded to 16 bytes). The tokenizer (about 1.6 MB)
    comes on top. The page's text and the widget both print this one number."""
    from circuitbook.widgets.smollm2_export import MAX_TOKENS, weight_bytes

    pad = lambda n: -(-n // 16) * 16  # noqa: E731
    rotary = getattr(cfg, "rotary_dim", None) or cfg.d_head
    tables = pad(4 * cfg.d_model) + 2 * pad(4 * MAX_TOKENS * rotary) + pad(4 * cfg.n_layers * cfg.n_heads * cfg.d_head)
    return weight_bytes(cfg) + tables


def forward_module() -> str:
    """The kernels' bytes and the forward pass, as one ES module (``forward``, ``loadSmolLM2``,
    ... exported), for pages that run the model without the widget (the browser benchmark)."""
    return frontend.esm("smollm2_forward.js")


_TOKENIZER = []


def _loaded():
    if not _TOKENIZER:
        from circuitbook.models.pretrained import load_smollm2

        _TOKENIZER.append(load_smollm2("cpu", progress=False))
    return _TOKENIZER[0]


def _tokenizer():
    return _loaded()[1]


def answer(widget, content, _buffers) -> None:
    """The front end found no site to load from (live in Jupyter or Colab): send it the
    exported files, each in messages of :data:`CHUNK` bytes (``{"file", "offset", "last"}``
    with the bytes as a buffer), or the manifest (``{"manifest"}``)."""
    import json

    from circuitbook.widgets.smollm2_export import cached_files

    ask = content.get("ask")
    if ask not in ("manifest", "file"):
        return
    folder = cached_files()
    manifest = json.loads((folder / "manifest.json").read_text())
    if ask == "manifest":
        widget.send({"manifest": manifest})
        return
    name = content.get("name")
    if name not in {f["name"] for f in manifest["files"]}:
        widget.send({"file": name, "error": f"no file {name!r} in the export"})
        return
    data = (folder / name).read_bytes()
    for offset in range(0, max(1, len(data)), CHUNK):
        part = data[offset: offset + CHUNK]
        widget.send({"file": name, "offset": offset, "last": offset + CHUNK >= len(data)}, [part])


class SmolLM2Lab(anywidget.AnyWidget):
    """SmolLM2 in the page: type a text, read any head, click heads to ablate them."""

    _esm = frontend.esm("smollm2_lab.js")
    _css = HERE / "smollm2_lab.css"
    text = traitlets.Unicode("").tag(sync=True)
    repeat = traitlets.Bool(False).tag(sync=True)  # the text's tokens, then the same again
    tokens = traitlets.List(traitlets.Int()).tag(sync=True)  # what the model reads
    ablated = traitlets.Dict().tag(sync=True)  # {"layer.head": "zero" | "mean"}
    head = traitlets.Unicode("18.6").tag(sync=True)  # the head whose pattern is shown
    position = traitlets.Int(-1).tag(sync=True)  # -1: the last position
    k = traitlets.Int(6).tag(sync=True)  # heads the two buttons ablate
    how = traitlets.Unicode("mean").tag(sync=True)  # ... and how
    seed = traitlets.Int(0).tag(sync=True)  # of the next random heads
    examples = traitlets.Dict().tag(sync=True)  # {label: {"text", "repeat"}}
    download_bytes = traitlets.Int(0).tag(sync=True)  # download_bytes(cfg): what the button loads
    min_repeat = traitlets.Int(MIN_REPEAT).tag(sync=True)  # repeatedSpans's run length
    debounce_ms = traitlets.Int(DEBOUNCE_MS).tag(sync=True)
    baseline_draws = traitlets.Int(BASELINE_DRAWS).tag(sync=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.on_msg(answer)
        if not self.download_bytes:
            self.download_bytes = download_bytes(_loaded()[0].cfg)
        if self.text and not self.tokens:
            self._retokenise()

    @traitlets.observe("text", "repeat")
    def _on_text(self, _change):
        self._retokenise()

    def _retokenise(self):
        ids = _tokenizer()(self.text)["input_ids"] if self.text else []
        self.tokens = lab_tokens(ids, self.repeat)


def smollm2_lab(text: str = "", *, repeat: bool = False, examples: dict | None = None,
                **kwargs) -> SmolLM2Lab:
    """The lab on ``text`` (SmolLM2's tokenizer; with ``repeat``, its tokens twice: see
    :func:`lab_tokens`), with ``examples`` (``{label: {"text", "repeat"}}``, default
    :data:`EXAMPLES`) one click away."""
    return SmolLM2Lab(text=text, repeat=repeat, examples=dict(EXAMPLES if examples is None else examples),
                      **kwargs)
