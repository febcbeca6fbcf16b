"""circuitbook.patching against a hand-computed float64 forward pass and TransformerLens's patching."""

import math

import pytest
import torch

from circuitbook.models import attn_only
from circuitbook.patching import (logit_diff, mean_loss, patch, patch_heads, patch_resid,
                                  patching_run, path_patch)

N_POS = 6


@pytest.fixture(scope="module")
def model():
    m = attn_only(2, d_model=8, n_heads=2, d_head=4, d_vocab=11, n_ctx=N_POS, dtype=torch.float64,
                  seed=3, device="cpu")
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for name in ("b_Q", "b_K", "b_V"):
            for block in m.blocks:
                p = getattr(block.attn, name)
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
        for block in m.blocks:
            block.attn.b_O.copy_(torch.randn(block.attn.b_O.shape, generator=g, dtype=torch.float64))
        m.unembed.b_U.copy_(torch.randn(m.unembed.b_U.shape, generator=g, dtype=torch.float64))
    m.requires_grad_(False)
    return m


@pytest.fixture(scope="module")
def tokens():
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 11, (3, N_POS), generator=g), torch.randint(0, 11, (3, N_POS), generator=g)


def head_outputs(model, x, layer, extra=None):
    """Dense products for one layer: each head's z W_O [head, batch, pos, d_model].
    extra[(kind, head)] is added to that head's q/k/v input."""
    extra = extra or {}
    n = x.shape[1]
    W_pos = model.W_pos[:n]
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    outs = []
    for h in range(model.cfg.n_heads):
        q_in = x + W_pos + extra.get(("q", h), 0)
        k_in = x + W_pos + extra.get(("k", h), 0)
        v_in = x + extra.get(("v", h), 0)
        q = q_in @ model.W_Q[layer, h] + model.b_Q[layer, h]
        k = k_in @ model.W_K[layer, h] + model.b_K[layer, h]
        v = v_in @ model.W_V[layer, h] + model.b_V[layer, h]
        scores = (q @ k.transpose(-1, -2) / math.sqrt(model.cfg.d_head)).masked_fill(~mask, -math.inf)
        outs.append(scores.softmax(-1) @ v @ model.W_O[layer, h])
    return torch.stack(outs)


def forward(model, toks, extra1=None, final_extra=0):
    x0 = model.W_E[toks]
    out0 = head_outputs(model, x0, 0)
    x1 = x0 + out0.sum(0) + model.b_O[0]
    out1 = head_outputs(model, x1, 1, extra1)
    x2 = x1 + out1.sum(0) + model.b_O[1] + final_extra
    return x2 @ model.W_U + model.b_U, out0, out1


def metric(logits):
    return logits[:, -1, 3].sum() - logits[:, 2, 7].sum()


def test_hand_forward_is_the_model(model, tokens):
    clean, _ = tokens
    torch.testing.assert_close(forward(model, clean)[0], model(clean), rtol=0, atol=1e-12)


@pytest.mark.parametrize("into", ["q", "k", "v"])
@pytest.mark.parametrize("positions", [None, [2, 5]])
def test_path_patch_equals_hand(model, tokens, into, positions):
    clean, corrupted = tokens
    run = patching_run(model, clean, corrupted, metric)
    _, out0_clean, _ = forward(model, clean)
    m_clean = metric(forward(model, clean)[0])
    logits_corr, out0_corr, _ = forward(model, corrupted)
    m_corr = metric(logits_corr)
    sender, receiver = 1, 0
    delta = out0_clean[sender] - out0_corr[sender]
    if positions is not None:
        keep = torch.zeros(N_POS, dtype=torch.float64)
        keep[positions] = 1
        delta = delta * keep[None, :, None]
    patched = metric(forward(model, corrupted, extra1={(into, receiver): delta})[0])
    want = (patched - m_corr) / (m_clean - m_corr)
    got = path_patch(run, (0, sender), [(1, receiver)], into=into, positions=positions)
    assert got == pytest.approx(float(want), abs=1e-10)
    assert 0.0 != pytest.approx(float(want), abs=1e-6)   # the case is not trivial
    assert not model.cfg.use_split_qkv_input           # setting restored


def test_path_patch_direct_equals_hand(model, tokens):
    clean, corrupted = tokens
    run = patching_run(model, clean, corrupted, metric)
    _, out0_clean, _ = forward(model, clean)
    logits_corr, out0_corr, _ = forward(model, corrupted)
    delta = (out0_clean - out0_corr)[[0, 1]].sum(0)
    patched = metric(forward(model, corrupted, final_extra=delta)[0])
    want = (patched - metric(logits_corr)) / (metric(forward(model, clean)[0]) - metric(logits_corr))
    assert path_patch(run, [(0, 0), (0, 1)], into="logits") == pytest.approx(float(want), abs=1e-10)


def layer1_z_after_key_patch(model, run, receiver):
    """(layer 1's z in the path-patched run, layer 1's z in the corrupted run), when head 0.0
    is patched into ``receiver``'s key input: [batch, pos, head, d_head] each."""
    seen = []
    model.add_hook("blocks.1.attn.hook_z", lambda z, hook: seen.append(z.clone()), is_permanent=True)
    try:
        path_patch(run, (0, 0), [receiver], into="k")
    finally:
        model.reset_hooks(including_permanent=True)
    return seen[-1], run.activation("blocks.1.attn.hook_z", clean=False)


def test_path_patch_into_keys_leaves_other_heads_alone(model, tokens):
    run = patching_run(model, *tokens, metric)
    z_patched, z_corr = layer1_z_after_key_patch(model, run, (1, 1))
    # the split-input forward rounds differently: equal up to float64 rounding, far below the change
    torch.testing.assert_close(z_patched[:, :, 0], z_corr[:, :, 0], rtol=0, atol=1e-12)
    assert (z_patched[:, :, 1] - z_corr[:, :, 1]).abs().max() > 1e-3


def test_all_or_nothing(model, tokens):
    run = patching_run(model, *tokens, metric)
    assert patch(run, "resid_pre", 0) == pytest.approx(1.0, abs=1e-10)
    assert patch(run, "z", 1, positions=[], head=0) == pytest.approx(0.0, abs=1e-10)
    assert path_patch(run, (0, 0), [(1, 0)], into="k", positions=[]) == pytest.approx(0.0, abs=1e-10)


def test_patch_heads_and_resid_equal_transformer_lens(model, tokens):
    from transformer_lens import patching as tl_patching

    clean, corrupted = tokens
    run = patching_run(model, clean, corrupted, metric)
    _, cache = model.run_with_cache(clean)
    m_clean, m_corr = float(metric(model(clean))), float(metric(model(corrupted)))
    for ours, theirs in [(patch_heads(run), tl_patching.get_act_patch_attn_head_out_all_pos),
                         (patch_resid(run), tl_patching.get_act_patch_resid_pre)]:
        raw = theirs(model, corrupted, cache, metric).double()
        # TransformerLens stores its results in a float32 tensor: one float32 rounding of raw
        tol = 2 * torch.finfo(torch.float32).eps * (raw.abs().max() + abs(m_corr)) / abs(m_clean - m_corr)
        torch.testing.assert_close(ours.double(), (raw - m_corr) / (m_clean - m_corr), rtol=0, atol=float(tol))


def test_patch_one_head_at_positions_equals_hand(model, tokens):
    clean, corrupted = tokens
    run = patching_run(model, clean, corrupted, metric)
    _, out0_clean, _ = forward(model, clean)
    logits_corr, out0_corr, _ = forward(model, corrupted)
    # layer 0, head 1 patched at positions 2 and 5: its output there is the clean one
    delta = torch.zeros_like(out0_clean[1])
    delta[:, [2, 5]] = (out0_clean[1] - out0_corr[1])[:, [2, 5]]
    x0 = model.W_E[corrupted]
    x1 = x0 + out0_corr.sum(0) + delta + model.b_O[0]
    x2 = x1 + head_outputs(model, x1, 1).sum(0) + model.b_O[1]
    want = (metric(x2 @ model.W_U + model.b_U) - metric(logits_corr)) / (
        metric(forward(model, clean)[0]) - metric(logits_corr))
    assert patch(run, "z", 0, head=1, positions=[2, 5]) == pytest.approx(float(want), abs=1e-10)


def test_metrics_by_hand():
    logits = torch.tensor([[[0.0, 1.0, 2.0], [3.0, 0.0, -1.0], [0.5, 0.5, 0.0]]])
    toks = torch.tensor([[0, 2, 1]])
    lse = [math.log(sum(math.exp(v) for v in row)) for row in logits[0].tolist()]
    want = ((lse[0] - 2.0) + (lse[1] - 0.0)) / 2
    assert float(mean_loss(logits, toks, [0, 1])) == pytest.approx(want)
    diff = logit_diff(logits, [1, 2], torch.tensor([[0, 1]]), torch.tensor([[2, 2]]))
    assert float(diff) == pytest.approx(((3.0 + 1.0) + (0.5 - 0.0)) / 2)


def test_errors(model, tokens):
    clean, corrupted = tokens
    with pytest.raises(ValueError, match="same shape"):
        patching_run(model, clean, corrupted[:, :4], metric)
    with pytest.raises(ValueError, match="nothing to patch"):
        patching_run(model, clean, clean, metric)
    run = patching_run(model, clean, corrupted, metric)
    with pytest.raises(ValueError, match="unknown hook name"):
        patch(run, "blocks.0.attn.hook_zz")
    with pytest.raises(ValueError, match="out of range"):
        patch(run, "z", 0, positions=[N_POS])
    with pytest.raises(ValueError, match="out of range"):
        path_patch(run, (0, 0), [(1, 0)], positions=[-1])
    with pytest.raises(ValueError, match="into must be"):
        path_patch(run, (0, 0), [(1, 0)], into="o")
    with pytest.raises(ValueError, match="earlier layer"):
        path_patch(run, (1, 0), [(1, 1)], into="k")
    with pytest.raises(ValueError, match="out of range"):
        path_patch(run, (0, 5), [(1, 1)], into="k")
    with pytest.raises(ValueError, match="no receivers"):
        path_patch(run, (0, 0), [(1, 1)], into="logits")
    with pytest.raises(ValueError, match="patterns"):
        patch(run, "pattern", 0)
    with pytest.raises(ValueError, match="out of range"):
        mean_loss(model(clean), clean, [N_POS - 1])


def test_path_patch_with_grouped_query_attention_reaches_one_query_head_only(tokens):
    """Heads 0 and 1 share a key head; patching head 0's key input must leave head 1 alone."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(n_layers=2, d_model=8, n_heads=4, n_key_value_heads=2, d_head=2,
                                  d_vocab=11, n_ctx=N_POS, attn_only=True, normalization_type=None,
                                  act_fn=None, seed=4, dtype=torch.float64, device="cpu",
                                  default_prepend_bos=False)
    gqa = HookedTransformer(cfg)
    gqa.requires_grad_(False)
    run = patching_run(gqa, *tokens, metric)
    z_patched, z_corr = layer1_z_after_key_patch(gqa, run, (1, 0))
    torch.testing.assert_close(z_patched[:, :, 1:], z_corr[:, :, 1:], rtol=0, atol=1e-12)
    assert (z_patched[:, :, 0] - z_corr[:, :, 0]).abs().max() > 1e-6
    assert not gqa.cfg.use_split_qkv_input and not gqa.cfg.ungroup_grouped_query_attention
