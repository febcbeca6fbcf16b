"""attn_only(smeared_keys=True): Olsson et al.'s smeared keys, checked against a float64 hand computation."""

from __future__ import annotations

import math

import torch

from circuitbook.models.attn_only import attn_only


def _layer0_pattern_by_hand(model, tokens: torch.Tensor) -> torch.Tensor:
    """Layer 0's attention pattern from the weights, in float64, with the smearing written out."""
    W = {k: v.detach().double() for k, v in model.state_dict().items()}
    x = W["embed.W_E"][tokens] + W["pos_embed.W_pos"][: tokens.shape[1]]  # shortformer: Q/K read resid + pos
    q = torch.einsum("bpd,hde->bphe", x, W["blocks.0.attn.W_Q"]) + W["blocks.0.attn.b_Q"]
    k = torch.einsum("bpd,hde->bphe", x, W["blocks.0.attn.W_K"]) + W["blocks.0.attn.b_K"]
    s = 1 / (1 + torch.exp(-W["blocks.0.attn.hook_k.alpha"]))  # [heads]
    smeared = k.clone()
    for j in range(1, tokens.shape[1]):
        smeared[:, j] = s[:, None] * k[:, j] + (1 - s[:, None]) * k[:, j - 1]
    scores = torch.einsum("bqhe,bkhe->bhqk", q, smeared) / math.sqrt(model.cfg.d_head)
    n = tokens.shape[1]
    scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    return scores.softmax(-1)


def test_smeared_pattern_matches_the_hand_computation():
    model = attn_only(2, d_model=16, n_heads=2, d_head=8, d_vocab=20, n_ctx=12, smeared_keys=True, seed=3)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.hook_k.alpha.copy_(torch.tensor([-1.5, 0.7]))
    tokens = torch.randint(0, 20, (3, 10), generator=torch.Generator().manual_seed(0))
    _, cache = model.run_with_cache(tokens)
    want = _layer0_pattern_by_hand(model, tokens)
    # float32 forward of a 16-wide model vs float64: a few dozen roundings of O(1) numbers
    assert torch.allclose(cache["blocks.0.attn.hook_pattern"].double(), want, atol=1e-5)
    names = [n for n, _ in model.named_parameters()]
    assert "blocks.0.attn.hook_k.alpha" in names and "blocks.1.attn.hook_k.alpha" in names


def test_unsmeared_limit_is_the_default_model():
    """With sigmoid(alpha) = 1 every key is its own: the smeared model computes the default one."""
    plain = attn_only(2, d_model=16, n_heads=2, d_head=8, d_vocab=20, n_ctx=12, seed=3)
    smeared = attn_only(2, d_model=16, n_heads=2, d_head=8, d_vocab=20, n_ctx=12, seed=3, smeared_keys=True)
    assert not any("alpha" in n for n, _ in plain.named_parameters())
    state = dict(plain.state_dict())
    for layer in range(2):
        state[f"blocks.{layer}.attn.hook_k.alpha"] = torch.full((2,), 100.0)  # sigmoid(100) = 1 in float32
    smeared.load_state_dict(state, strict=True)
    tokens = torch.randint(0, 20, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.equal(smeared(tokens), plain(tokens))
