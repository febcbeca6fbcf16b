"""circuitbook.heads against explicit computations on cached patterns, dense eigenvalues, the
path expansion, and hand-built heads with known answers."""

from __future__ import annotations


import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from circuitbook.data import repeated_random_tokens
from circuitbook.heads import (
    Ablation,
    ablate,
    copying_scores,
    duplicate_token_pattern_score,
    induction_scores,
    prev_token_pattern_score,
    prev_token_scores,
    uniform_causal_pattern,
)
from circuitbook.icl import icl_score
from circuitbook.paths import logit_attribution
from conftest import build_copying_model, build_model, no_repeat_tokens


def reference_diagonal_scores(model, tokens):
    """Induction and previous-token scores by explicit loops over run_with_cache's patterns."""
    _, cache = model.run_with_cache(tokens)
    L, H = model.cfg.n_layers, model.cfg.n_heads
    n = tokens.shape[1] // 2
    ind, prev = torch.zeros(L, H, dtype=torch.float64), torch.zeros(L, H, dtype=torch.float64)
    for layer in range(L):
        A = cache["pattern", layer].double()  # [batch, head, q, k]
        ind[layer] = torch.stack([A[:, :, n + i, i + 1] for i in range(n)], -1).mean((0, 2))
        prev[layer] = torch.stack([A[:, :, p, p - 1] for p in range(1, 2 * n)], -1).mean((0, 2))
    return ind, prev


@pytest.mark.parametrize("positional", ["shortformer", "standard"])
def test_scores_match_explicit_loops_over_cached_patterns(positional):
    model = build_model(3, n_heads=3, n_ctx=20, positional=positional)
    tokens = repeated_random_tokens(5, 9, model.cfg.d_vocab, seed=1)
    ind, prev = reference_diagonal_scores(model, tokens)
    torch.testing.assert_close(induction_scores(model, tokens=tokens), ind.to(model.W_E.dtype))
    torch.testing.assert_close(prev_token_scores(model, tokens=tokens), prev.to(model.W_E.dtype))


@settings(max_examples=10, deadline=None)
@given(seq_len=st.integers(2, 10), batch=st.integers(1, 4), seed=st.integers(0, 1000))
def test_default_tokens_are_repeated_random_tokens(seq_len, batch, seed):
    model = build_model(2, n_ctx=20, seed=seed % 7)
    tokens = repeated_random_tokens(batch, seq_len, model.cfg.d_vocab, seed=seed)
    ind, prev = reference_diagonal_scores(model, tokens)
    torch.testing.assert_close(induction_scores(model, seq_len=seq_len, batch=batch, seed=seed), ind)
    torch.testing.assert_close(prev_token_scores(model, seq_len=seq_len, batch=batch, seed=seed), prev)


def test_default_seq_len_fits_the_context():
    model = build_model(1, n_ctx=24)
    tokens = repeated_random_tokens(8, 12, model.cfg.d_vocab, seed=0)  # min(24 // 2, 50) = 12
    torch.testing.assert_close(induction_scores(model), induction_scores(model, tokens=tokens))


def test_scores_leave_no_hooks_behind():
    model = build_model(2)
    induction_scores(model)
    prev_token_scores(model)
    assert all(not hp.fwd_hooks for hp in model.hook_dict.values())


def test_hand_built_previous_token_and_induction_heads(induction_model):
    model = induction_model
    prev = prev_token_scores(model)
    assert prev[0, 0] > 0.999  # head 0.0 attends from p to p - 1
    assert prev[0, 0] == prev.max()
    tokens = no_repeat_tokens(8, 12, model.cfg.d_vocab)
    ind = induction_scores(model, tokens=tokens)
    assert ind[1, 0] > 0.999  # head 1.0 attends to the token after the earlier occurrence
    assert ind[1, 0] == ind.max() and ind[0, 0] < 1e-6
    # On the default random tokens, repeats inside a copy add decoys (the score is still clear).
    assert induction_scores(model)[1, 0] > 0.75


# --- copying ----------------------------------------------------------------------------------


def dense_copying_score(model, layer, head):
    """Eigenvalues of the materialised vocab x vocab full OV circuit, in float64."""
    full = (model.W_E @ model.W_V[layer, head] @ model.W_O[layer, head] @ model.W_U).detach().double()
    eig = torch.linalg.eigvals(full)
    return float(eig.sum().real / eig.abs().sum())


@pytest.mark.parametrize("d_model, d_vocab", [(12, 30), (40, 25)])  # vocab above and below d_model
def test_copying_scores_match_dense_eigenvalues(d_model, d_vocab):
    model = build_model(2, d_model=d_model, n_heads=3, d_head=4, d_vocab=d_vocab)
    every = copying_scores(model)
    assert every.shape == (2, 3)
    for layer in range(2):
        torch.testing.assert_close(copying_scores(model, layer), every[layer])
        for head in range(3):
            want = dense_copying_score(model, layer, head)
            assert float(every[layer, head]) == pytest.approx(want, abs=1e-9)
            one = copying_scores(model, layer, head)  # single head: the route through d_head
            assert one.shape == () and float(one) == pytest.approx(want, abs=1e-9)


def test_copying_scores_match_transformer_lens_eigenvalues():
    model = build_model(1, d_model=16, n_heads=4, d_head=4, d_vocab=50, dtype=torch.float32, scale=0.0)
    eig = (model.W_E @ model.OV[0] @ model.W_U).eigenvalues  # FactoredMatrix route, [4, d_head]
    want = eig.sum(-1).real / eig.abs().sum(-1)
    torch.testing.assert_close(copying_scores(model, 0), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_hand_built_copying_head_scores_plus_or_minus_one(sign):
    model = build_copying_model(sign)
    assert float(copying_scores(model, 0, 0)) == pytest.approx(sign, abs=1e-10)
    assert float(copying_scores(model)[0, 0]) == pytest.approx(sign, abs=1e-10)


def test_head_with_zero_ov_circuit_scores_zero():
    model = build_model(1)
    with torch.no_grad():
        model.blocks[0].attn.W_O[1].zero_()
    assert float(copying_scores(model, 0, 1)) == 0.0


def test_zero_layer_model_has_empty_scores():
    model = build_model(0, n_heads=2)
    for scores in (copying_scores(model), induction_scores(model), prev_token_scores(model)):
        assert scores.shape == (0, 2)


def test_copying_scores_bad_layer_or_head():
    model = build_model(2)
    with pytest.raises(ValueError, match="layer 3 is out of range"):
        copying_scores(model, 3)
    with pytest.raises(ValueError, match="head 9 is out of range"):
        copying_scores(model, 0, 9)
    with pytest.raises(ValueError, match="give layer together with head"):
        copying_scores(model, None, 1)


# --- ablation ---------------------------------------------------------------------------------


def test_zero_ablation_removes_exactly_the_heads_path_terms():
    """In a 1-layer model, zero-ablating head h removes its first-order term (b_V included)."""
    model = build_model(1, n_heads=3)
    tokens = repeated_random_tokens(3, 5, model.cfg.d_vocab)
    terms = logit_attribution(model, tokens)
    with ablate(model, [(0, 1)], how="zero"):
        ablated = model(tokens)
    torch.testing.assert_close(ablated, terms.total() - terms.heads[0, 1])


def test_mean_ablation_with_reference_tokens_by_hand():
    model = build_model(1, n_heads=2)
    tokens = repeated_random_tokens(3, 5, model.cfg.d_vocab, seed=1)
    reference = repeated_random_tokens(6, 4, model.cfg.d_vocab, seed=2)
    _, ref_cache = model.run_with_cache(reference)
    _, cache = model.run_with_cache(tokens)
    z, mean_z = cache["z", 0][:, :, 0], ref_cache["z", 0][:, :, 0].mean((0, 1))
    want = model(tokens) - (z - mean_z) @ model.W_O[0, 0] @ model.W_U
    got = model.run_with_hooks(tokens, fwd_hooks=ablate(model, (0, 0), reference_tokens=reference).fwd_hooks)
    torch.testing.assert_close(got, want)


def test_mean_ablation_without_reference_uses_the_batch_it_runs_on():
    model = build_model(1, n_heads=2)
    tokens = repeated_random_tokens(3, 5, model.cfg.d_vocab, seed=1)
    _, cache = model.run_with_cache(tokens)
    z = cache["z", 0][:, :, 1]
    want = model(tokens) - (z - z.mean((0, 1))) @ model.W_O[0, 1] @ model.W_U
    with ablate(model, [(0, 1)]) as m:
        torch.testing.assert_close(m(tokens), want)


def test_context_manager_removes_only_its_own_hooks():
    model = build_model(2)
    tokens = repeated_random_tokens(2, 4, model.cfg.d_vocab)
    clean = model(tokens)
    calls = []
    model.blocks[0].attn.hook_z.add_hook(lambda z, hook: calls.append(1))  # a user's own hook
    with ablate(model, [(0, 0), (1, 1)], how="zero"):
        assert model.blocks[1].attn.hook_z.fwd_hooks
        ablated = model(tokens)
    assert not model.blocks[1].attn.hook_z.fwd_hooks and len(model.blocks[0].attn.hook_z.fwd_hooks) == 1
    torch.testing.assert_close(model(tokens), clean)
    assert not torch.allclose(ablated, clean) and len(calls) == 2  # ablated run + clean rerun
    model.reset_hooks()


def test_ablation_object_and_bad_arguments():
    model = build_model(2)
    assert isinstance(ablate(model, [(0, 0)]), Ablation)
    assert [name for name, _ in ablate(model, [(1, 0), (0, 1), (1, 1)]).fwd_hooks] == [
        "blocks.0.attn.hook_z", "blocks.1.attn.hook_z"]
    with pytest.raises(ValueError, match="unknown ablation how='resample'"):
        ablate(model, [(0, 0)], how="resample")
    with pytest.raises(ValueError, match="layer 2 is out of range"):
        ablate(model, [(2, 0)])
    with pytest.raises(TypeError, match=r"\(layer, head\) pairs"):
        ablate(model, [0, 1, 2])
    with pytest.raises(ValueError, match="at least one"):
        ablate(model, [])
    with pytest.raises(ValueError, match="longer than the model's n_ctx"):
        ablate(model, [(0, 0)], reference_tokens=torch.zeros(1, 99, dtype=torch.long))


# --- errors of the pattern scores -------------------------------------------------------------


def test_pattern_score_errors_are_named():
    model = build_model(1, n_ctx=16)
    with pytest.raises(ValueError, match="longer than the model's n_ctx=16"):
        induction_scores(model, seq_len=9)
    with pytest.raises(ValueError, match="seq_len must be >= 2"):
        induction_scores(model, seq_len=1)
    with pytest.raises(ValueError, match="repeated once"):
        induction_scores(model, tokens=torch.arange(10)[None])
    with pytest.raises(ValueError, match="seq_len=4 disagrees"):
        induction_scores(model, seq_len=4, tokens=repeated_random_tokens(1, 5, 20))
    with pytest.raises(ValueError, match="longer than the model's n_ctx=16"):
        prev_token_scores(model, tokens=torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="at least 2 tokens"):
        prev_token_scores(model, tokens=torch.zeros(1, 1, dtype=torch.long))


@pytest.mark.parametrize(
    "name, call",
    [
        ("induction_scores", lambda m: induction_scores(m)),
        ("prev_token_scores", lambda m: prev_token_scores(m)),
        ("copying_scores", lambda m: copying_scores(m)),
        ("ablate", lambda m: ablate(m, [(0, 0)])),
        ("icl_score", lambda m: icl_score(m, torch.zeros(1, 16, dtype=torch.long), early=2, late=5)),
    ],
)
def test_half_cast_or_half_moved_model_is_named(name, call):
    model = build_model(1, n_ctx=16, dtype=torch.float32)
    with torch.no_grad():
        model.blocks[0].attn.W_V.data = model.blocks[0].attn.W_V.data.double()
    with pytest.raises(TypeError, match=f"{name} needs every weight in one dtype: blocks.0.attn.W_V has torch.float64"):
        call(model)
    model = build_model(1, n_ctx=16, dtype=torch.float32)
    with torch.no_grad():
        model.blocks[0].attn.W_V = torch.nn.Parameter(model.blocks[0].attn.W_V.detach().to("meta"))
    with pytest.raises(ValueError, match=f"{name} needs every weight on one device: blocks.0.attn.W_V is on meta"):
        call(model)


# --- what TransformerLens users pass: BOS prefixes, heads as lists or tensors ----------------


@pytest.mark.parametrize("prefix_tokens", [[0], [3, 7]])
def test_prefixed_tokens_score_by_explicit_loops(prefix_tokens):
    model = build_model(2, n_heads=3, n_ctx=24)
    p, n = len(prefix_tokens), 9
    tokens = repeated_random_tokens(4, n, model.cfg.d_vocab, seed=2, prefix=torch.tensor(prefix_tokens))
    _, cache = model.run_with_cache(tokens)
    for layer in range(2):
        A = cache["pattern", layer].double()  # [batch, head, q, k]
        ind = torch.stack([A[:, :, p + n + i, p + i + 1] for i in range(n)], -1).mean((0, 2))
        prev = torch.stack([A[:, :, q, q - 1] for q in range(p + 1, p + 2 * n)], -1).mean((0, 2))
        torch.testing.assert_close(induction_scores(model, tokens=tokens, prefix=p)[layer], ind.to(model.W_E.dtype))
        torch.testing.assert_close(prev_token_scores(model, tokens=tokens, prefix=p)[layer], prev.to(model.W_E.dtype))


def test_prefix_errors_are_named():
    model = build_model(1, n_ctx=24)
    bos_tokens = repeated_random_tokens(2, 6, model.cfg.d_vocab, prefix=torch.tensor([0]))
    with pytest.raises(ValueError, match="pass prefix=1"):
        induction_scores(model, tokens=bos_tokens)
    with pytest.raises(ValueError, match="give tokens too"):
        induction_scores(model, prefix=1)
    with pytest.raises(ValueError, match="non-negative int"):
        prev_token_scores(model, tokens=bos_tokens, prefix=-1)
    with pytest.raises(ValueError, match="at least 2 tokens after the prefix of 12"):
        prev_token_scores(model, tokens=bos_tokens[:, :13], prefix=12)


@pytest.mark.parametrize(
    "heads",
    [
        [(0, 0), (0, 2)],
        [[0, 0], [0, 2]],
        torch.tensor([[0, 0], [0, 2]]),
        [torch.tensor([0, 0]), torch.tensor([0, 2])],
        torch.unravel_index(torch.tensor([0, 2]), (1, 3)),  # flat indices of heads 0.0 and 0.2
    ],
    ids=["tuples", "lists", "tensor", "row tensors", "unravel_index"],
)
def test_heads_given_as_lists_or_tensors(heads):
    # In one layer, zero-ablating heads removes exactly their path terms (the patterns of the
    # other heads do not change): the reference is the path expansion.
    model = build_model(1, n_heads=3)
    tokens = repeated_random_tokens(2, 5, model.cfg.d_vocab)
    terms = logit_attribution(model, tokens)
    with ablate(model, heads, how="zero"):
        ablated = model(tokens)
    torch.testing.assert_close(ablated, terms.total() - terms.heads[0, 0] - terms.heads[0, 2])


def test_one_pair_given_bare_in_any_form():
    model = build_model(2, n_heads=3)
    for pair in [(1, 2), [1, 2], torch.tensor([1, 2]), (torch.tensor(1), torch.tensor(2))]:
        assert ablate(model, pair).by_layer == {1: [2]}
    with pytest.raises(TypeError, match="layer must be an integer"):
        ablate(model, [(0.0, 1)])
    with pytest.raises(ValueError, match=r"shape \[2\] or \[n, 2\]"):
        ablate(model, torch.zeros(2, 3, dtype=torch.long))


# --- scores on real text: hand-built patterns with known answers ------------------------------

def test_uniform_causal_pattern_by_hand():
    want = torch.tensor([[1, 0, 0], [1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3]])
    torch.testing.assert_close(uniform_causal_pattern(3), want)
    with pytest.raises(ValueError):
        uniform_causal_pattern(0)
    with pytest.raises(TypeError, match="floating"):
        uniform_causal_pattern(3, dtype=torch.long)
    # on the device it is asked for (that of the patterns it is compared with), not an ambient one
    on_meta = uniform_causal_pattern(3, dtype=torch.float64, device="meta")
    assert on_meta.device == torch.device("meta") and on_meta.dtype == torch.float64
    with torch.device("meta"):
        assert uniform_causal_pattern(3).device == torch.device("cpu")


def test_duplicate_token_score_computes_on_the_patterns_device():
    # CPU tokens with patterns elsewhere (meta stands in for CUDA): the score follows the patterns
    tokens = torch.tensor([[1, 2, 1, 3, 2]])
    pattern = uniform_causal_pattern(5, device="meta")[None, None]
    assert duplicate_token_pattern_score(pattern, tokens).device == torch.device("meta")


def test_prev_token_pattern_score_by_hand():
    n = 6
    shift = torch.zeros(n, n)
    shift[0, 0] = 1.0
    shift[torch.arange(1, n), torch.arange(n - 1)] = 1.0  # every row on the position before
    assert prev_token_pattern_score(shift) == 1.0
    assert prev_token_pattern_score(torch.eye(n)) == 0.0  # attends to itself
    # uniform: mean over p = 1..n-1 of 1 / (p + 1)
    want = sum(1 / (p + 1) for p in range(1, n)) / (n - 1)
    assert abs(float(prev_token_pattern_score(uniform_causal_pattern(n, dtype=torch.float64))) - want) < 1e-12
    # [batch, head, q, k] -> [head], batch averaged
    stacked = torch.stack([torch.stack([shift, torch.eye(n)]), torch.stack([shift, shift])])  # [2, 2, n, n]
    torch.testing.assert_close(prev_token_pattern_score(stacked), torch.tensor([1.0, 0.5]))
    with pytest.raises(ValueError):
        prev_token_pattern_score(torch.ones(2, n, n))


TOKENS = torch.tensor([[5, 6, 5, 7, 6, 5]])
# repeated queries: q = 2 (5 seen at 0), q = 4 (6 seen at 1), q = 5 (5 seen at 0 and 2)


def test_duplicate_token_pattern_score_by_hand():
    n = TOKENS.shape[1]
    to_copy = torch.zeros(n, n)  # each repeated token on its latest earlier copy, others on 0
    to_copy[:, 0] = 1.0
    for q, k in [(2, 0), (4, 1), (5, 2)]:
        to_copy[q] = 0.0
        to_copy[q, k] = 1.0
    pattern = torch.stack([to_copy, torch.eye(n)])[None]  # [1, 2 heads, q, k]
    torch.testing.assert_close(duplicate_token_pattern_score(pattern, TOKENS), torch.tensor([1.0, 0.0]))
    # the uniform baseline: copies / (q + 1) averaged over the three repeated queries
    want = (1 / 3 + 1 / 5 + 2 / 6) / 3
    got = duplicate_token_pattern_score(uniform_causal_pattern(n, dtype=torch.float64)[None, None], TOKENS)
    assert abs(float(got) - want) < 1e-12
    # a head splitting q = 5's attention between both copies of 5 still scores 1 there
    split = to_copy.clone()
    split[5] = 0.0
    split[5, 0] = split[5, 2] = 0.5
    assert float(duplicate_token_pattern_score(split[None, None], TOKENS)) == 1.0
    # queries restricts the average: only q = 4 (token 6), where the uniform head puts 1/5
    only_6 = TOKENS == 6
    got6 = duplicate_token_pattern_score(uniform_causal_pattern(n, dtype=torch.float64)[None, None], TOKENS,
                                         queries=only_6)
    assert abs(float(got6) - 1 / 5) < 1e-12


def test_duplicate_token_score_rejects_text_without_repeats():
    tokens = torch.tensor([[1, 2, 3, 4]])
    with pytest.raises(ValueError, match="no query token occurs earlier"):
        duplicate_token_pattern_score(uniform_causal_pattern(4)[None, None], tokens)
    with pytest.raises(ValueError, match="shaped like tokens"):
        duplicate_token_pattern_score(uniform_causal_pattern(6)[None, None], TOKENS, queries=torch.ones(6).bool())


def test_duplicate_token_score_matches_explicit_loops_over_cached_patterns():
    model = build_model(2, n_heads=3, n_ctx=20)
    g = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, 6, (3, 16), generator=g)  # 6 token ids in 16 places: many repeats
    queries = torch.rand(3, 16, generator=g) < 0.7
    _, cache = model.run_with_cache(tokens)
    want = torch.zeros(model.cfg.n_layers, model.cfg.n_heads, dtype=torch.float64)
    count = 0
    for b in range(3):
        for q in range(16):
            copies = [k for k in range(q) if tokens[b, k] == tokens[b, q]]
            if not copies or not queries[b, q]:
                continue
            count += 1
            for layer in range(model.cfg.n_layers):
                want[layer] += cache["pattern", layer][b, :, q, copies].double().sum(-1)
    want /= count
    got = torch.stack([duplicate_token_pattern_score(cache["pattern", layer], tokens, queries=queries)
                       for layer in range(model.cfg.n_layers)])
    torch.testing.assert_close(got, want.to(got.dtype))
    # the prev-token score of the same patterns agrees with the model-level function
    prev = torch.stack([prev_token_pattern_score(cache["pattern", layer]) for layer in range(2)])
    torch.testing.assert_close(prev, prev_token_scores(model, tokens=tokens))
