"""The book's one next-token loss (circuitbook.loss) against TransformerLens's own
``lm_cross_entropy_loss`` and a float64 loop, at every position, at chosen positions, a few
positions at a time, in half precision, with gradients; and its errors."""

from __future__ import annotations

import math

import pytest
import torch

from circuitbook.loss import per_token_loss
from circuitbook.patching import mean_loss

try:  # TransformerLens 3 moved its helpers to `utilities`, keeping `utils` as a deprecated alias
    from transformer_lens.utilities import lm_cross_entropy_loss
except ImportError:  # pragma: no cover - older TransformerLens
    from transformer_lens.utils import lm_cross_entropy_loss


def _inputs(seed=0, batch=3, pos=9, vocab=11, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return 4 * torch.randn(batch, pos, vocab, generator=g, dtype=dtype), torch.randint(0, vocab, (batch, pos), generator=g)


def _by_hand(logits, tokens, positions):
    """-log softmax(logits[b, p])[tokens[b, p + 1]] in Python floats (float64)."""
    out = []
    for row, toks in zip(logits.double().tolist(), tokens.tolist()):
        def loss(p):
            z = row[p]
            top = max(z)
            return math.log(sum(math.exp(v - top) for v in z)) + top - z[toks[p + 1]]
        out.append([loss(p) for p in positions])
    return torch.tensor(out, dtype=torch.float64)


# float32: a log-sum-exp over 11 logits of size ~12, rounded in a few steps; 1e-5 is ~100 ulps of 12
ATOL_F32 = 1e-5


def test_every_position_equals_transformer_lens():
    logits, tokens = _inputs()
    want = lm_cross_entropy_loss(logits, tokens, per_token=True)
    torch.testing.assert_close(per_token_loss(logits, tokens), want, rtol=0, atol=ATOL_F32)


@pytest.mark.parametrize("chunk", [2**22, 11, 1])  # one log-softmax, one position at a time, below one row
def test_chosen_positions_by_hand(monkeypatch, chunk):
    import circuitbook.loss as L

    monkeypatch.setattr(L, "_LOG_SOFTMAX_ENTRIES", chunk)
    logits, tokens = _inputs(1, dtype=torch.float64)
    for positions in ([0], [7, 2, 5], range(8), torch.tensor([3, 3])):
        want = _by_hand(logits, tokens, list(positions if not isinstance(positions, torch.Tensor) else positions.tolist()))
        torch.testing.assert_close(per_token_loss(logits, tokens, positions), want, rtol=0, atol=1e-12)


def test_half_precision_is_computed_in_float32_and_gradients_flow():
    logits, tokens = _inputs(2)
    half = logits.bfloat16()
    got = per_token_loss(half, tokens)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), _by_hand(half, tokens, range(8)), rtol=0, atol=ATOL_F32)
    leaf = logits.clone().requires_grad_(True)
    per_token_loss(leaf, tokens, [4]).sum().backward()
    # d/dz of -log softmax(z)[y] is softmax(z) - onehot(y), at the one position read, zero elsewhere
    want = torch.zeros_like(logits)
    want[:, 4] = logits[:, 4].softmax(-1) - torch.nn.functional.one_hot(tokens[:, 5], logits.shape[-1])
    torch.testing.assert_close(leaf.grad, want, rtol=0, atol=1e-6)


def test_the_patching_metric_is_its_mean():
    logits, tokens = _inputs(3)
    want = lm_cross_entropy_loss(logits, tokens, per_token=True)[:, [1, 6]].mean()
    torch.testing.assert_close(mean_loss(logits, tokens, [1, 6]), want, rtol=0, atol=ATOL_F32)


def test_bad_input_is_named():
    logits, tokens = _inputs()
    cases = [
        (lambda: per_token_loss(logits[0], tokens), ValueError, r"floating \[batch, pos, d_vocab\]"),
        (lambda: per_token_loss(logits, tokens[:, :-1]), ValueError, r"tokens must be \[batch, pos\] = \(3, 9\)"),
        (lambda: per_token_loss(logits, tokens.float()), TypeError, "integer token ids"),
        (lambda: per_token_loss(logits, tokens + 11), ValueError, r"token ids must lie in 0..10"),
        (lambda: per_token_loss(logits, tokens, []), ValueError, "positions is empty"),
        (lambda: per_token_loss(logits, tokens, [8]), ValueError, r"positions \[8\] lie outside 0..7"),
        (lambda: per_token_loss(logits, tokens, ["a"]), TypeError, "positions must be integers"),
        (lambda: per_token_loss(logits[:, :1], tokens[:, :1]), ValueError, "no next token"),
        (lambda: mean_loss(logits, tokens, []), ValueError, "positions is empty"),
    ]
    for call, kind, match in cases:
        with pytest.raises(kind, match=match):
            call()
