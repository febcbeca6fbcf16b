"""The zoo's attention-only models as the page reads them: weights and ablation means.

:func:`export` turns one zoo checkpoint into the JSON that ``attn_only_forward.js`` loads:
the config, every weight as base64 float32 (little-endian, TransformerLens's names and
shapes), and ``z_mean`` [n_layers, n_heads, d_head], each head's mean ``z`` over a clean run
on :data:`REFERENCE` tokens, exactly what ``circuitbook.heads.ablate(model, heads, "mean",
reference_tokens=reference_tokens())`` substitutes. The site build writes one script per
model under ``_static/lab/`` (``python -m circuitbook.widgets.lab_export DIR``, called by
``scripts/vendor_assets.py``); a script tag loads it even from ``file://``, where ``fetch``
cannot. Live in Jupyter the same JSON travels in the widget's ``weights`` trait.

Taught in the induction module (the lab page).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import torch

#: The models the page can run (attention-only, no LayerNorm).
MODELS = ("toy-1l", "toy-2l")

#: Reference data of the mean ablation: repeated random tokens as ``heads.induction_scores``
#: reads them (``repeated_random_tokens(batch, seq_len, d_vocab, seed)``).
REFERENCE = dict(batch=16, seq_len=32, seed=0)

TENSORS = ("W_E", "W_pos", "W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O", "W_U", "b_U")


def reference_tokens(model) -> torch.Tensor:
    """The clean run the exported means come from. Shapes: [batch, 2 * seq_len]."""
    from circuitbook.data import repeated_random_tokens

    r = REFERENCE
    return repeated_random_tokens(r["batch"], r["seq_len"], model.cfg.d_vocab, seed=r["seed"])


def z_means(model) -> torch.Tensor:
    """Every head's mean ablation value, from :func:`circuitbook.heads.ablate` itself.
    Shapes: returns [n_layers, n_heads, d_head]."""
    from circuitbook.heads import ablate

    L, H = model.cfg.n_layers, model.cfg.n_heads
    every = [(layer, head) for layer in range(L) for head in range(H)]
    means = ablate(model, every, "mean", reference_tokens=reference_tokens(model)).means
    return torch.stack([means[layer] for layer in range(L)])


def _b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.detach().cpu().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()).decode()


def export(name: str) -> dict:
    """The page's record of zoo model ``name``: ``{name, config, reference, tensors: {name:
    [shape, base64 float32]}}``, with ``z_mean`` among the tensors."""
    from circuitbook.models import load

    if name not in MODELS:
        raise ValueError(f"the page runs {', '.join(MODELS)}, not {name!r}")
    model = load(name, device="cpu")
    cfg = model.cfg
    tensors = {key: getattr(model, key) for key in TENSORS}
    with torch.no_grad():
        tensors["z_mean"] = z_means(model)
    return {"name": name, "reference": REFERENCE,
            "config": {"n_layers": cfg.n_layers, "d_model": cfg.d_model, "n_heads": cfg.n_heads,
                       "d_head": cfg.d_head, "d_vocab": cfg.d_vocab, "n_ctx": cfg.n_ctx,
                       "positional": cfg.positional_embedding_type},
            "tensors": {key: [list(t.shape), _b64(t)] for key, t in tensors.items()}}


def site_script(record: dict) -> str:
    """The record as a script that registers it in ``window.cbLabModels`` (no ``define``)."""
    return ("(window.cbLabModels = window.cbLabModels || {})[" + json.dumps(record["name"]) + "] = "
            + json.dumps(record, separators=(",", ":")) + ";\n")


def write_site_files(directory: Path | str) -> list[Path]:
    """``<directory>/<model>.js`` for every model of :data:`MODELS`; rewritten only if changed."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name in MODELS:
        path, text = directory / f"{name}.js", site_script(export(name))
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written


if __name__ == "__main__":
    for p in write_site_files(sys.argv[1]):
        print(f"exported {p.name} ({p.stat().st_size // 1024} KB)")
