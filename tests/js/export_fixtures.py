"""Write the fixtures of the JavaScript tests: toy-2l as the page loads it, and what
TransformerLens and the book's Python kernels compute on a few sequences (``node --test
tests/js/`` reads them).

The record is ``circuitbook.widgets.lab_export.export("toy-2l")``, exactly what the site
serves to ``attn_only_forward.js``. For each sequence:

- TransformerLens's float32 forward pass gives the logits [P, d_vocab], every layer's
  attention pattern [n_heads, P, P], and its per-token loss [P - 1]
  (``return_type="loss", loss_per_token=True``);
- ``circuitbook.heads.ablate`` (zero, and mean with the export's reference tokens) gives the
  logits with heads ablated, for a few sets of heads;
- ``circuitbook.paths.logit_attribution`` gives the path expansion of the last position's
  logits, one [d_vocab] vector per path label.

The page computes in float64 from the same float32 weights, so each comparison differs by
the float32 rounding of the Python side, which ``circuitbook.book.rounding_bound`` bounds:
``terms`` roundings (counted here, for each kind of output), each at most float32's eps
times the largest activation of the run (``scale``). The test multiplies them by eps itself.

Usage: python tests/js/export_fixtures.py OUT.json
"""

from __future__ import annotations

import json
import sys
import warnings

import torch

from circuitbook.book import attn_only_forward_terms
from circuitbook.data import repeated_random_tokens
from circuitbook.heads import ablate
from circuitbook.models import load
from circuitbook.paths import logit_attribution
from circuitbook.widgets.lab_export import export, reference_tokens

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
MODEL = "toy-2l"
#: Sets of heads the ablation fixtures knock out: layer 0's previous-token head, one of
#: layer 1's heads, and three at once across both layers.
ABLATED = ([(0, 2)], [(1, 1)], [(0, 2), (1, 1), (1, 3)])


def sequences(d_vocab: int, n_ctx: int) -> list[list[int]]:
    """Repeated random tokens (the induction pattern the lab shows), a random sequence at
    the full context, and the shortest input, one token."""
    repeated = repeated_random_tokens(1, 12, d_vocab, seed=3)[0].tolist()
    random = torch.randint(0, d_vocab, (n_ctx,), generator=torch.Generator().manual_seed(5)).tolist()
    return [repeated, random, [7]]


def _largest(*tensors) -> float:
    return max(float(t[t.isfinite()].abs().max()) for t in tensors if t.numel())


def case(model, tokens: list[int], reference: torch.Tensor) -> dict:
    cfg = model.cfg
    t = torch.tensor([tokens])
    forward_terms = attn_only_forward_terms(cfg, len(tokens))
    with torch.no_grad():
        logits, cache = model.run_with_cache(t)
        out = {
            "tokens": tokens,
            "logits": logits[0].tolist(),
            "patterns": [cache["pattern", layer][0].tolist() for layer in range(cfg.n_layers)],
            "terms": forward_terms,
            "scale": _largest(logits, *cache.values()),
        }
        if len(tokens) > 1:
            # loss = logsumexp(logits) - logit[target]: twice the logits' error, plus the
            # log-softmax's own roundings (a sum over the vocabulary, an exp, a log, a subtraction)
            out["losses"] = model(t, return_type="loss", loss_per_token=True)[0].tolist()
            out["loss_terms"] = 2 * forward_terms + cfg.d_vocab + 3
        out["ablations"] = []
        for heads in ABLATED:
            for how in ("zero", "mean"):
                hooks = ablate(model, heads, how, reference_tokens=reference if how == "mean" else None).fwd_hooks
                with model.hooks(fwd_hooks=hooks):
                    ablated = model(t)
                out["ablations"].append({"ablate": {f"{layer}.{head}": how for layer, head in heads},
                                         "logits": ablated[0].tolist(), "scale": _largest(ablated, logits)})
        parts = logit_attribution(model, t).parts()
        out["paths"] = {label.replace("->", "\u2192"): p[0, -1].tolist() for label, p in parts}
        # each path: the forward pass (for its patterns), then up to two heads' V and O
        # products and their sums over positions
        out["path_terms"] = forward_terms + 2 * (cfg.d_model + cfg.d_head + len(tokens))
        out["path_scale"] = max(out["scale"], _largest(*(p[0, -1] for _, p in parts)))
    return out


def main(path: str) -> None:
    record = export(MODEL)
    model = load(MODEL, device="cpu")
    reference = reference_tokens(model)
    cases = [case(model, tokens, reference) for tokens in sequences(model.cfg.d_vocab, model.cfg.n_ctx)]
    with open(path, "w") as f:
        json.dump({"model": record, "dtype": str(model.W_E.dtype), "cases": cases}, f)
    print(f"wrote {len(cases)} TransformerLens runs of {MODEL} to {path}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
