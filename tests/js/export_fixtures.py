"""Write the fixtures of the JavaScript tests: toy-2l as the page loads it, and what
TransformerLens computes on a few sequences (``node --test tests/js/`` reads them).

The record is ``circuitbook.widgets.lab_export.export("toy-2l")``, exactly what the site
serves to ``attn_only_forward.js``. For each sequence, TransformerLens's float32 forward pass
gives the reference logits [P, d_vocab] and every layer's attention pattern [n_heads, P, P].
The page computes in float64 from the same float32 weights, so the two differ by the float32
rounding of TransformerLens's pass, which ``circuitbook.book.rounding_bound`` bounds:
``terms = attn_only_forward_terms(cfg, P)`` roundings, each at most float32's eps times the
largest activation of the run (``scale``). The test multiplies them by eps itself.

Usage: python tests/js/export_fixtures.py OUT.json
"""

from __future__ import annotations

import json
import sys
import warnings

import torch

from circuitbook.book import attn_only_forward_terms
from circuitbook.data import repeated_random_tokens
from circuitbook.models import load
from circuitbook.widgets.lab_export import export

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
MODEL = "toy-2l"


def sequences(d_vocab: int, n_ctx: int) -> list[list[int]]:
    """Repeated random tokens (the induction pattern the lab shows), a random sequence at
    the full context, and the shortest input, one token."""
    repeated = repeated_random_tokens(1, 12, d_vocab, seed=3)[0].tolist()
    random = torch.randint(0, d_vocab, (n_ctx,), generator=torch.Generator().manual_seed(5)).tolist()
    return [repeated, random, [7]]


def main(out: str) -> None:
    record = export(MODEL)
    model = load(MODEL, device="cpu")
    cfg = model.cfg
    cases = []
    for tokens in sequences(cfg.d_vocab, cfg.n_ctx):
        with torch.no_grad():
            logits, cache = model.run_with_cache(torch.tensor([tokens]))
        big = max(float(t[t.isfinite()].abs().max()) for t in [logits, *cache.values()] if t.numel())
        cases.append({
            "tokens": tokens,
            "logits": logits[0].tolist(),
            "patterns": [cache["pattern", layer][0].tolist() for layer in range(cfg.n_layers)],
            "terms": attn_only_forward_terms(cfg, len(tokens)),
            "scale": big,
        })
    with open(out, "w") as f:
        json.dump({"model": record, "dtype": str(logits.dtype), "cases": cases}, f)
    print(f"wrote {len(cases)} TransformerLens runs of {MODEL} to {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
