"""The induction lab: the book's toy models run in the reader's browser (the induction module).

:class:`InductionLab` shows, for a token sequence the reader types, clicks or draws at
random (a random segment, repeated), every head's attention pattern, the top predictions
at a chosen position with their probabilities, the loss at every position, and the path
expansion of the chosen logits (chapter 13): the direct path, each head's path, the virtual
heads and the output biases, which sum to the logit shown. Clicking a head ablates it (by
zero, then by mean, then not): the same substitution as :func:`circuitbook.heads.ablate`,
with its means exported from a clean reference run (:mod:`circuitbook.widgets.lab_export`).

**Where the model runs.** The forward pass is ``attn_only_forward.js``: a few matrix products
in plain JavaScript, float64 accumulation, about 200 lines; every front end that runs the
model imports it (:func:`circuitbook.widgets.frontend.esm` joins the modules into the one
``_esm`` anywidget takes), so it exists once. We chose it over ONNX Runtime Web for three
measured reasons:

- *size*: onnxruntime-web 1.30.0's smallest WebAssembly runtime,
  ``dist/ort-wasm-simd-threaded.wasm``, is 14.2 MB (measured from its npm package; the package
  is 33 MB packed), against about 8 KB of JavaScript, for a model whose weights are 184 KB;
- *exactness*: ORT computes in float32 with its own kernel order; the float64 JavaScript
  port differs from TransformerLens only by TransformerLens's own float32 rounding (measured
  in ``tests/js/attn_only_forward.test.js`` and ``tests/browser/test_lab.py``, within the
  derived bound ``terms * eps32 * scale``);
- *transparency*: the lab also needs what an exported ONNX graph hides: every head's
  pattern and z, ablation of any head, and the path expansion with patterns frozen. With
  ORT each would be another graph output or another graph; here each is a line.

A 64-token forward pass takes a few milliseconds in headless Chromium
(``benchmarks/bench_browser_forward.py``), so the page recomputes on every click.

**Where the weights come from.** On the static site the build writes each model's record
to ``_static/lab/<model>.js`` (``scripts/vendor_assets.py``) and the widget loads it from
there, so the page does not carry the weights in its widget state. Live in Jupyter or Colab
there is no site: the front end asks the kernel, which puts the same record in the
``weights`` trait; a site whose file is missing, or a notebook whose kernel does not answer,
gets a message in the widget rather than an endless "loading". The reader's sequence
(``tokens``), the ablated heads (``ablated``, e.g. ``{"0.2": "mean"}``) and the chosen
position sync back to Python. "random tokens, repeated" draws a fresh sequence on every
click (the page's own random numbers, not a seed that repeats across page loads).
"""

from __future__ import annotations

import json

import anywidget
import traitlets

from circuitbook.widgets import frontend

#: The forward pass as a module of its own (``benchmarks/bench_browser_forward.py`` serves it).
#: Its value, a path on the machine that built the docs, is not shown in them.
#:
#: :meta hide-value:
FORWARD_JS = frontend.HERE / "attn_only_forward.js"


def answer_weights(widget, content, _buffers) -> None:
    """A widget's front end found no site to load its model's weights from (live in Jupyter or
    Colab): put the :mod:`~circuitbook.widgets.lab_export` record of ``widget.model_name`` in
    its ``weights`` trait. Any widget with those two traits can register it with ``on_msg``."""
    if content.get("ask") == "weights" and not widget.weights:
        from circuitbook.widgets.lab_export import export

        widget.weights = json.dumps(export(widget.model_name), separators=(",", ":"))


class InductionLab(anywidget.AnyWidget):
    """A live toy model in the page: type, click or draw tokens; click heads to ablate them."""

    _esm = frontend.esm("lab.js")
    _css = frontend.css("lab.css")
    model_name = traitlets.Unicode("toy-2l").tag(sync=True)
    weights = traitlets.Unicode("").tag(sync=True)  # the lab_export record, sent when asked
    tokens = traitlets.List(traitlets.Int()).tag(sync=True)
    ablated = traitlets.Dict().tag(sync=True)  # {"layer.head": "zero" | "mean"}
    position = traitlets.Int(-1).tag(sync=True)  # -1: the last position

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.on_msg(answer_weights)


def induction_lab(model_name: str = "toy-2l", tokens: list[int] | None = None, **kwargs) -> InductionLab:
    """The lab on zoo model ``model_name`` (``toy-1l`` or ``toy-2l``), starting from
    ``tokens`` (default: a random segment of 24 tokens, repeated; toy-2l was trained on
    segments of 16 to 32)."""
    from circuitbook.data import repeated_random_tokens
    from circuitbook.widgets.lab_export import MODELS

    if model_name not in MODELS:
        raise ValueError(f"the lab runs {', '.join(MODELS)}, not {model_name!r}")
    if tokens is None:
        tokens = repeated_random_tokens(1, 24, 64, seed=0)[0].tolist()
    return InductionLab(model_name=model_name, tokens=list(tokens), **kwargs)
