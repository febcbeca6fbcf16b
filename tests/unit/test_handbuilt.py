"""circuitbook.models.handbuilt: the scaffold implements what its docstring says, checked on its
cached activations against hand-derived values, and it sits where the reader's matrices are."""

from __future__ import annotations

import math

import pytest
import torch

from circuitbook.models.handbuilt import induction_scaffold, subspaces

V, N = 6, 8
D = 2 * V + N


def ideal(strength=30.0, gain=10.0):
    """A query's token matched against a key's previous token; the key's token copied out."""
    S = subspaces(V, N)
    return strength * S["S_tok"].T @ S["S_prev"], gain * S["S_tok"].T @ S["S_tok"]


def repeated(seed=0):
    g = torch.Generator().manual_seed(seed)
    half = torch.stack([torch.randperm(V, generator=g)[:N // 2] for _ in range(3)])
    return torch.cat([half, half], dim=1)


def test_subspaces_are_orthonormal_blocks():
    S = subspaces(V, N)
    basis = torch.cat([S["S_tok"], S["S_pos"], S["S_prev"]])
    assert torch.equal(basis, torch.eye(D, dtype=torch.float64))


def test_scaffold_heads_do_what_the_docstring_says():
    W_QK, W_OV = ideal()
    model = induction_scaffold(W_QK, W_OV, d_vocab=V, n_ctx=N)
    tokens = repeated()
    _, cache = model.run_with_cache(tokens)
    S = subspaces(V, N)
    # head 0.0 attends from p to p - 1 (score strength 30 against 0 elsewhere) ...
    pattern0 = cache["pattern", 0][:, 0]
    prev = pattern0[:, torch.arange(1, N), torch.arange(0, N - 1)]
    assert float(prev.min()) > 1 - N * math.exp(-30)
    # ... and writes the attended token into S_prev
    written = cache["resid_pre", 1] @ S["S_prev"].T  # [batch, pos, V]
    want = torch.nn.functional.one_hot(tokens[:, :-1], V).double()
    torch.testing.assert_close(written[:, 1:], want, rtol=0, atol=N * math.exp(-30))
    # head 1.0's score of query q on key k >= 1 is x_q W_QK x_k^T, exactly as given
    x = cache["resid_pre", 1]
    scores = cache["attn_scores", 1][:, 0]
    hand = x @ W_QK @ x.transpose(-1, -2)
    causal = torch.ones(N, N, dtype=torch.bool).tril()
    causal[:, 0] = False
    torch.testing.assert_close(scores[:, causal], hand[:, causal], rtol=1e-12, atol=1e-9)
    # and, with these matrices, it is an induction head
    from circuitbook.heads import induction_scores

    assert float(induction_scores(model, tokens=tokens)[1, 0]) > 0.99


def test_scaffold_sits_where_the_matrices_are():
    W_QK, W_OV = ideal()
    assert {p.device for p in induction_scaffold(W_QK, W_OV, d_vocab=V, n_ctx=N).parameters()} == {
        torch.device("cpu")}
    assert {p.device for p in induction_scaffold(W_QK.numpy(), W_OV.numpy(), d_vocab=V, n_ctx=N).parameters()} == {
        torch.device("cpu")}
    on_meta = induction_scaffold(W_QK.to("meta"), W_OV.to("meta"), d_vocab=V, n_ctx=N)
    assert {p.device for p in on_meta.parameters()} == {torch.device("meta")}
    assert {p.device for p in induction_scaffold(W_QK, W_OV, d_vocab=V, n_ctx=N, device="meta").parameters()} == {
        torch.device("meta")}
    with torch.device("meta"):  # an ambient default device is not where the matrices are
        model = induction_scaffold(W_QK, W_OV, d_vocab=V, n_ctx=N)
    assert {p.device for p in model.parameters()} == {torch.device("cpu")}
    torch.testing.assert_close(model.blocks[1].attn.W_V[0, :, :D], W_OV)


def test_scaffold_errors_are_named():
    W_QK, W_OV = ideal()
    with pytest.raises(ValueError, match=r"W_QK must be \[d_model, d_model\] = \[20, 20\], got \(19, 20\)"):
        induction_scaffold(W_QK[1:], W_OV, d_vocab=V, n_ctx=N)
    with pytest.raises(ValueError, match="W_QK is on cpu but W_OV on meta"):
        induction_scaffold(W_QK, W_OV.to("meta"), d_vocab=V, n_ctx=N)
    with pytest.raises(TypeError, match="W_OV must be a"):
        induction_scaffold(W_QK, "identity", d_vocab=V, n_ctx=N)
    with pytest.raises(ValueError, match="prev_into"):
        induction_scaffold(W_QK, W_OV, d_vocab=V, n_ctx=N, prev_into="S_pos")
    with pytest.raises(ValueError, match="d_vocab must be an int >= 1"):
        subspaces(0, N)
