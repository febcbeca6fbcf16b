"""Problem 4: find the induction and previous-token heads of a model from its patterns.

Part of the induction module's problem set (``circuitbook.checks.ps``)."""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake
from circuitbook.checks.ps.inputs import zoo_model_and_tokens


def head_scores(model, tokens):
    """tokens: [batch, 2n], the second half repeating the first
    -> (induction, prev), [L, H] each."""
    n = tokens.shape[1] // 2
    _, cache = model.run_with_cache(
        tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    ind, prev = [], []
    for layer in range(model.cfg.n_layers):
        pattern = cache["pattern", layer]  # [batch, head, q, k]
        # query n + i looks at key i + 1: the diagonal n - 1 below the main one
        ind.append(pattern.diagonal(offset=-(n - 1), dim1=-2, dim2=-1)
                   [..., 1:].mean((0, 2)))
        prev.append(pattern.diagonal(offset=-1, dim1=-2, dim2=-1)
                    .mean((0, 2)))
    return torch.stack(ind), torch.stack(prev)


def _p4_inputs(g: torch.Generator) -> dict:
    n = int(torch.randint(12, 30, (1,), generator=g))
    return zoo_model_and_tokens(g, 4, n)


def _p4_variant(tokens, model, ind_offset=None, ind_from=1, ind_first_half=False, prev_offset=-1, swap=False,
               transposed=False):
    n = tokens.shape[1] // 2
    _, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    ind, prev = [], []
    for layer in range(model.cfg.n_layers):
        pattern = cache["pattern", layer]
        pattern = pattern.transpose(-1, -2) if transposed else pattern
        off = -(n - 1) if ind_offset is None else ind_offset
        stripe = pattern.diagonal(offset=off, dim1=-2, dim2=-1)
        stripe = stripe[..., : n - 1] if ind_first_half else stripe[..., ind_from:]
        ind.append(stripe.mean(dim=(0, 2)))
        prev.append(pattern.diagonal(offset=prev_offset, dim1=-2, dim2=-1).mean(dim=(0, 2)))
    return (torch.stack(prev), torch.stack(ind)) if swap else (torch.stack(ind), torch.stack(prev))


INDUCTION_KEY = ("The induction head attends to the token *after* the earlier occurrence: query n + i looks at key "
          "i + 1. Yours reads key i, the earlier occurrence itself (the diagonal n below the main one instead of "
          "n - 1).")

P4 = FunctionExercise(
    id="ps_p4", title="induction and previous-token scores", reference=head_scores, make_inputs=_p4_inputs,
    n_trials=2,
    mistakes=[
        # key i for every query of the second copy: the whole diagonal n below the main one
        Mistake("off-by-one diagonal", INDUCTION_KEY,
                lambda model, tokens: _p4_variant(tokens, model, ind_offset=-(tokens.shape[1] // 2), ind_from=0)),
        Mistake("off-by-one diagonal", INDUCTION_KEY,
                lambda model, tokens: _p4_variant(tokens, model, ind_offset=-(tokens.shape[1] // 2))),
        Mistake("scores from the first half of the sequence", "Only queries in the second copy can look back at "
                "an earlier occurrence; average over those.",
                lambda model, tokens: _p4_variant(tokens, model, ind_first_half=True)),
        Mistake("previous-token score on the main diagonal", "The previous token is key p - 1: offset -1.",
                lambda model, tokens: _p4_variant(tokens, model, prev_offset=0)),
        Mistake("previous-token score above the diagonal", "Key p + 1 lies in the future, where the causal mask "
                "puts no attention: the previous token is key p - 1, below the diagonal.",
                lambda model, tokens: _p4_variant(tokens, model, prev_offset=1)),
        Mistake("included a query of the first copy", "The diagonal n - 1 below the main one starts at query "
                "n - 1, the last token of the first copy, which has no earlier occurrence to look back at. Average "
                "over the second copy's queries only, n .. 2n - 1.",
                lambda model, tokens: _p4_variant(tokens, model, ind_from=0)),
        Mistake("pattern read as [key, query]", "Every score you return is 0: the entries you read lie above the "
                "diagonal, where the causal mask leaves no attention. Check the order of the pattern's last two "
                "dimensions in TransformerLens's cache.",
                lambda model, tokens: _p4_variant(tokens, model, transposed=True)),
        Mistake("the two scores swapped", "Return (induction, previous-token), in that order.",
                lambda model, tokens: _p4_variant(tokens, model, swap=True)),
    ],
    hint="Each layer's cached pattern is [batch, head, q, k]. The previous-token score averages the "
         "attention from p to p - 1; the induction score averages the attention from query n + i to key i "
         "+ 1 over every query of the second copy (i = 0 .. n - 1), and over nothing else. Each lies on "
         "one diagonal of the pattern. Stack the layers: two [L, H] tensors.",
)
