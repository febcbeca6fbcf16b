"""circuitbook: the helper package of *Annotated Transformer Circuits*.

Each submodule holds one concept and names the chapter that teaches it:

- ``circuitbook.circuits``     QK/OV, full and positional circuits (chapters 8-9)
- ``circuitbook.composition``  Q/K/V composition scores, virtual weights (chapters 16, 18)
- ``circuitbook.paths``        path expansion and logit attribution (chapter 13)
- ``circuitbook.attribution``  direct logit attribution through a final norm, SmolLM2 (chapter 13)
- ``circuitbook.neurons``      a trained MLP's neurons: basis statistics, key-value reading (chapter 10)
- ``circuitbook.heads``        induction / previous-token / copying scores, ablation (chapter 17)
- ``circuitbook.patching``     activation patching and path patching (chapter 17)
- ``circuitbook.data``         synthetic tasks and the Shakespeare corpus (chapters 14-17)
- ``circuitbook.masks``        the encoder-decoder's causal and target masks (chapter 6)
- ``circuitbook.train``        Adam, the Noam schedule, label smoothing, the training loops (chapter 19)
- ``circuitbook.models``       attention-only builder, encoder-decoder, zoo, pretrained loaders
- ``circuitbook.devices``      the default device: CUDA when available, as in TransformerLens
- ``circuitbook.cache``        the user's cache directory (converted SmolLM2 weights, tokenizers)
- ``circuitbook.checks``       exercise checks with feedback, one module per chapter
- ``circuitbook.widgets``      chapter explorations, the induction explainers, quiz, progress
- ``circuitbook.viz``          attention patterns with circuitsvis, served from the site
- ``circuitbook.book``         ``glue`` for prose numbers, and the three kinds of statement: ``identity``
                               (``identity_close``), ``finding`` (with a ``Null``) and ``observation``
- ``circuitbook.validate``     input checks with clear errors, shared by every kernel

Submodules are imported lazily (``circuitbook.circuits`` works after ``import circuitbook``)
so that ``import circuitbook`` itself costs almost nothing beyond torch.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_SUBMODULES = {
    "circuits", "composition", "paths", "attribution", "neurons", "heads", "patching", "data", "masks", "train",
    "models",
    "devices", "cache", "viz", "widgets", "checks", "validate", "book",
}


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"circuitbook.{name}")
    raise AttributeError(f"module 'circuitbook' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_SUBMODULES))
