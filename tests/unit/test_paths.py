"""circuitbook.paths: the path expansion against model(tokens), TransformerLens's cache, and
brute-force path enumeration."""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from circuitbook.paths import LogitAttribution, count_paths, count_score_terms, logit_attribution
from conftest import build_model


def tokens_for(model, batch=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.cfg.d_vocab, (batch, model.cfg.n_ctx), generator=g)


@pytest.mark.parametrize("n_layers", [0, 1, 2, 3])
@pytest.mark.parametrize("positional", ["shortformer", "standard"])
@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
def test_parts_sum_to_the_logits(n_layers, positional, dtype, tol):
    model = build_model(n_layers, n_heads=3, positional=positional, dtype=dtype, n_ctx=10)
    tokens = tokens_for(model)
    attribution = logit_attribution(model, tokens)
    with torch.no_grad():
        logits = model(tokens)
    total = attribution.total()
    assert total.dtype == dtype and total.shape == logits.shape
    scale = max(1.0, float(logits.abs().max()))
    assert float((total - logits).abs().max()) <= tol * scale
    torch.testing.assert_close(sum(t for _, t in attribution.parts()), total, rtol=tol, atol=tol * scale)


def test_shapes_and_labels_of_a_two_layer_attribution():
    model = build_model(2, n_heads=2, d_vocab=7, n_ctx=5)
    a = logit_attribution(model, tokens_for(model, batch=4))
    assert isinstance(a, LogitAttribution)
    assert a.direct.shape == (4, 5, 7)
    assert a.heads.shape == (2, 2, 4, 5, 7)
    assert a.bias.shape == (2, 4, 5, 7)
    assert sorted(a.virtual) == [((0, h1), (1, h2)) for h1 in range(2) for h2 in range(2)]
    labels = [label for label, _ in a.parts()]
    assert labels[:5] == ["direct", "L0H0", "L0H1", "L1H0", "L1H1"]
    assert "L0H1->L1H0" in labels and labels[-2:] == ["b_O L0", "b_O L1"]


@pytest.mark.parametrize("positional", ["shortformer", "standard"])
def test_direct_path_is_embedding_to_unembedding_plus_b_U(positional):
    model = build_model(2, positional=positional)
    tokens = tokens_for(model)
    a = logit_attribution(model, tokens)
    e = model.W_E[tokens]
    if positional == "standard":  # a shortformer's residual stream never holds W_pos
        e = e + model.W_pos[: tokens.shape[1]]
    torch.testing.assert_close(a.direct, e @ model.W_U + model.b_U)


def test_one_layer_head_terms_are_the_cached_head_outputs():
    """Independent reference: TransformerLens's own z for each head, through W_O and W_U."""
    model = build_model(1, n_heads=3)
    tokens = tokens_for(model)
    a = logit_attribution(model, tokens)
    _, cache = model.run_with_cache(tokens)
    for h in range(3):
        want = cache["z", 0][:, :, h] @ model.W_O[0, h] @ model.W_U  # z includes the b_V term
        torch.testing.assert_close(a.heads[0, h], want)
    torch.testing.assert_close(a.bias[0], (model.b_O[0] @ model.W_U).expand_as(a.bias[0]))


@pytest.mark.parametrize("n_layers", [2, 3])
def test_paths_ending_at_a_head_sum_to_its_cached_output(n_layers):
    """Every path through head (l, h) as its last head adds up to what TransformerLens says the
    head wrote: z[l, h] W_O W_U. (b_O is zeroed so that no bias-sourced path ends at a head.)"""
    model = build_model(n_layers, n_heads=2)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.b_O.zero_()
    tokens = tokens_for(model)
    a = logit_attribution(model, tokens)
    _, cache = model.run_with_cache(tokens)
    for layer in range(n_layers):
        for head in range(2):
            ending_here = a.heads[layer, head] + sum(
                (t for path, t in a.virtual.items() if path[-1] == (layer, head)), torch.zeros_like(a.direct)
            )
            want = cache["z", layer][:, :, head] @ model.W_O[layer, head] @ model.W_U
            torch.testing.assert_close(ending_here, want)
    assert not a.bias.any()


def test_a_virtual_term_by_hand():
    """L0H1 -> L1H0: head 1.0 reading, through V, what head 0.1 wrote (its b_V part included)."""
    model = build_model(2, n_heads=2)
    tokens = tokens_for(model)
    a = logit_attribution(model, tokens)
    _, cache = model.run_with_cache(tokens)
    written = cache["z", 0][:, :, 1] @ model.W_O[0, 1]  # [batch, pos, d_model]
    A = cache["pattern", 1][:, 0]  # [batch, q, k]
    want = A @ (written @ model.W_V[1, 0]) @ model.W_O[1, 0] @ model.W_U
    torch.testing.assert_close(a.virtual[((0, 1), (1, 0))], want)


def test_number_of_virtual_terms_matches_count_paths():
    for n_layers, n_heads in [(2, 3), (3, 2)]:
        model = build_model(n_layers, n_heads=n_heads, n_ctx=4)
        a = logit_attribution(model, tokens_for(model, batch=1))
        counts = count_paths(n_layers, n_heads)
        assert len(a.virtual) == counts["total"] - 1 - n_layers * n_heads
        by_order = {}
        for path in a.virtual:
            by_order[len(path)] = by_order.get(len(path), 0) + 1
        assert by_order == {k: counts[f"order_{k}"] for k in range(2, n_layers + 1)}


# --- count_paths ------------------------------------------------------------------------------


def brute_force_paths(n_layers, n_heads):
    """Each layer contributes either no head (None) or one of its heads; keep the chosen ones."""
    for choice in itertools.product([None, *range(n_heads)], repeat=n_layers):
        yield tuple((layer, h) for layer, h in enumerate(choice) if h is not None)


@settings(max_examples=40, deadline=None)
@given(n_layers=st.integers(0, 5), n_heads=st.integers(0, 4))
def test_count_paths_matches_brute_enumeration(n_layers, n_heads):
    paths = list(brute_force_paths(n_layers, n_heads))
    counts = count_paths(n_layers, n_heads)
    assert counts["total"] == len(set(paths)) == (1 + n_heads) ** n_layers
    assert counts["direct"] == sum(1 for p in paths if not p) == 1
    for k in range(1, n_layers + 1):
        assert counts[f"order_{k}"] == sum(1 for p in paths if len(p) == k)


@settings(max_examples=30, deadline=None)
@given(n_layers=st.integers(0, 4), n_heads=st.integers(0, 3))
def test_count_score_terms_matches_brute_enumeration(n_layers, n_heads):
    # Each head's score pairs a query-side path with a key-side path, both ending before its
    # layer: enumerate the pairs head by head.
    paths = list(brute_force_paths(n_layers, n_heads))
    want = sum(sum(1 for p in paths if all(lay < layer for lay, _ in p)) ** 2
               for layer in range(n_layers) for _ in range(n_heads))
    assert count_score_terms(n_layers, n_heads) == want


def test_count_score_terms_by_hand():
    # one layer: each head's score is the single term E W_QK E^T; two layers of one head: 1 + 4
    assert count_score_terms(1, 12) == 12
    assert count_score_terms(2, 1) == 1 + 4
    with pytest.raises(ValueError, match="n_heads must be an int >= 0"):
        count_score_terms(2, -1)


def test_count_paths_two_layers():
    assert count_paths(2, 12) == {"direct": 1, "order_1": 24, "order_2": 144, "total": 169}


# --- errors -----------------------------------------------------------------------------------


def _tl_model(**overrides):
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    kw = dict(n_layers=1, d_model=8, n_heads=2, d_head=4, d_vocab=10, n_ctx=6, act_fn="relu", d_mlp=16)
    kw.update(overrides)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return HookedTransformer(HookedTransformerConfig(**kw))


def test_model_with_mlps_is_refused():
    model = _tl_model(attn_only=False, normalization_type=None)
    with pytest.raises(ValueError, match="needs an attention-only model"):
        logit_attribution(model, torch.zeros(1, 3, dtype=torch.long))


def test_model_with_layernorm_is_refused():
    model = _tl_model(attn_only=True, normalization_type="LN")
    with pytest.raises(ValueError, match="without LayerNorm"):
        logit_attribution(model, torch.zeros(1, 3, dtype=torch.long))


def test_bad_tokens_are_named():
    model = build_model(1, n_ctx=6, d_vocab=10)
    with pytest.raises(ValueError, match="longer than the model's n_ctx=6"):
        logit_attribution(model, torch.zeros(1, 7, dtype=torch.long))
    with pytest.raises(ValueError, match="token ids must lie in 0..9"):
        logit_attribution(model, torch.full((1, 3), 10))
    with pytest.raises(TypeError, match="integer token ids"):
        logit_attribution(model, torch.zeros(1, 3))


def test_half_moved_model_is_named():
    model = build_model(1)
    with torch.no_grad():
        model.unembed.W_U = torch.nn.Parameter(model.unembed.W_U.detach().to("meta"))
    with pytest.raises(ValueError, match="logit_attribution needs every weight on one device: unembed.W_U is on meta"):
        logit_attribution(model, torch.zeros(1, 3, dtype=torch.long))


def test_too_many_paths_is_refused_before_computing():
    model = build_model(3, d_model=24, n_heads=12, d_head=2, d_vocab=5000, n_ctx=64)
    with pytest.raises(ValueError, match="GiB"):
        logit_attribution(model, torch.zeros(2, 64, dtype=torch.long))


def test_count_paths_bad_arguments():
    with pytest.raises(ValueError, match="n_layers must be an int >= 0"):
        count_paths(-1, 2)
    with pytest.raises(ValueError, match="n_heads must be an int >= 0"):
        count_paths(2, 1.5)
