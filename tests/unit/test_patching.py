"""circuitbook.patching against a hand-computed float64 forward pass and TransformerLens's patching."""

import math

import pytest
import torch

from circuitbook.models import attn_only
from circuitbook.patching import (logit_diff, mean_loss, patch, patch_heads, patch_resid,
                                  patching_run, path_patch)

N_POS = 6


def random_model(n_layers):
    """A float64 attention-only model whose every bias is random (so no term vanishes)."""
    m = attn_only(n_layers, d_model=8, n_heads=2, d_head=4, d_vocab=11, n_ctx=N_POS, dtype=torch.float64,
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
def model():
    return random_model(2)


@pytest.fixture(scope="module")
def model3():
    return random_model(3)


@pytest.fixture(scope="module")
def tokens():
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 11, (3, N_POS), generator=g), torch.randint(0, 11, (3, N_POS), generator=g)


def head_outputs(model, x, layer, inputs=None):
    """Dense products for one layer: each head's z W_O [head, batch, pos, d_model].
    inputs[(kind, head)] is the residual stream that head reads at its q/k/v input instead of x."""
    inputs = inputs or {}
    n = x.shape[1]
    W_pos = model.W_pos[:n]
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    outs = []
    for h in range(model.cfg.n_heads):
        q_in = inputs.get(("q", h), x) + W_pos
        k_in = inputs.get(("k", h), x) + W_pos
        v_in = inputs.get(("v", h), x)
        q = q_in @ model.W_Q[layer, h] + model.b_Q[layer, h]
        k = k_in @ model.W_K[layer, h] + model.b_K[layer, h]
        v = v_in @ model.W_V[layer, h] + model.b_V[layer, h]
        scores = (q @ k.transpose(-1, -2) / math.sqrt(model.cfg.d_head)).masked_fill(~mask, -math.inf)
        outs.append(scores.softmax(-1) @ v @ model.W_O[layer, h])
    return torch.stack(outs)


def forward(model, toks, inputs=None, final_extra=0):
    """The whole model by hand: (logits, each layer's head outputs, each layer's residual input).
    inputs[(layer, kind, head)] replaces what that head reads (see head_outputs)."""
    inputs = inputs or {}
    x = model.W_E[toks]
    outs, resids = [], []
    for layer in range(model.cfg.n_layers):
        resids.append(x)
        out = head_outputs(model, x, layer, {(k, h): r for (lay, k, h), r in inputs.items() if lay == layer})
        outs.append(out)
        x = x + out.sum(0) + model.b_O[layer]
    return (x + final_extra) @ model.W_U + model.b_U, outs, resids


def normalised(model, clean, corrupted, patched_logits):
    m_clean, m_corr = metric(forward(model, clean)[0]), metric(forward(model, corrupted)[0])
    return float((metric(patched_logits) - m_corr) / (m_clean - m_corr))


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
    _, (out0_clean, _), _ = forward(model, clean)
    _, (out0_corr, _), (_, x1_corr) = forward(model, corrupted)
    sender, receiver = 1, 0
    delta = out0_clean[sender] - out0_corr[sender]
    if positions is not None:
        keep = torch.zeros(N_POS, dtype=torch.float64)
        keep[positions] = 1
        delta = delta * keep[None, :, None]
    want = normalised(model, clean, corrupted,
                      forward(model, corrupted, inputs={(1, into, receiver): x1_corr + delta})[0])
    got = path_patch(run, (0, sender), [(1, receiver)], into=into, positions=positions)
    assert got == pytest.approx(want, abs=1e-10)
    assert 0.0 != pytest.approx(want, abs=1e-6)   # the case is not trivial
    assert not model.cfg.use_split_qkv_input           # setting restored


def test_path_patch_direct_equals_hand(model, tokens):
    clean, corrupted = tokens
    run = patching_run(model, clean, corrupted, metric)
    _, (out0_clean, _), _ = forward(model, clean)
    _, (out0_corr, _), _ = forward(model, corrupted)
    delta = (out0_clean - out0_corr)[[0, 1]].sum(0)
    want = normalised(model, clean, corrupted, forward(model, corrupted, final_extra=delta)[0])
    assert path_patch(run, [(0, 0), (0, 1)], into="logits") == pytest.approx(want, abs=1e-10)


# --- three layers: receivers in several layers, senders in several layers ---------------------


def sender_deltas(model, clean, corrupted):
    """Each head's clean-minus-corrupted output z W_O: {(layer, head): [batch, pos, d_model]}."""
    _, outs_clean, _ = forward(model, clean)
    _, outs_corr, _ = forward(model, corrupted)
    return {(layer, h): outs_clean[layer][h] - outs_corr[layer][h]
            for layer in range(model.cfg.n_layers) for h in range(model.cfg.n_heads)}


@pytest.mark.parametrize("into", ["q", "k", "v"])
def test_path_patch_into_receivers_in_two_layers_equals_hand(model3, tokens, into):
    # Sender 0.0 into receivers 1.0 and 2.1: each receiver reads the corrupted stream plus the
    # sender's difference, and nothing of what the other receiver's patched output changed
    # (Wang et al.'s path patching); both receivers' effects reach the logits downstream.
    clean, corrupted = tokens
    run = patching_run(model3, clean, corrupted, metric)
    d = sender_deltas(model3, clean, corrupted)
    _, _, resid_corr = forward(model3, corrupted)
    inputs = {(1, into, 0): resid_corr[1] + d[(0, 0)], (2, into, 1): resid_corr[2] + d[(0, 0)]}
    want = normalised(model3, clean, corrupted, forward(model3, corrupted, inputs=inputs)[0])
    got = path_patch(run, (0, 0), [(1, 0), (2, 1)], into=into)
    assert got == pytest.approx(want, abs=1e-10)
    # The case tells the two wrong readings apart: dropping the layer-1 receiver (starting the
    # run at the last receiver's layer), and letting the layer-2 receiver read the stream as
    # the patched layer-1 receiver left it.
    dropped = forward(model3, corrupted, inputs={(2, into, 1): inputs[(2, into, 1)]})[0]
    _, _, resid_live = forward(model3, corrupted, inputs={(1, into, 0): inputs[(1, into, 0)]})
    live = forward(model3, corrupted, inputs={**inputs, (2, into, 1): resid_live[2] + d[(0, 0)]})[0]
    for wrong in (dropped, live):  # far outside the 1e-10 the comparison above allows
        assert abs(normalised(model3, clean, corrupted, wrong) - want) > 1e-8


def test_path_patch_from_the_adjacent_layer_only(model3, tokens):
    # Senders only in layer 1, receivers in layers 1 and 2: the layer-1 receiver has no sender
    # below it and receives nothing; the layer-2 receiver reads sender 1.0's difference.
    clean, corrupted = tokens
    run = patching_run(model3, clean, corrupted, metric)
    d = sender_deltas(model3, clean, corrupted)
    _, _, resid_corr = forward(model3, corrupted)
    want = normalised(model3, clean, corrupted,
                      forward(model3, corrupted, inputs={(2, "k", 0): resid_corr[2] + d[(1, 0)]})[0])
    assert path_patch(run, [(1, 0)], [(1, 1), (2, 0)], into="k") == pytest.approx(want, abs=1e-10)
    assert path_patch(run, [(1, 0)], [(2, 0)], into="k") == pytest.approx(want, abs=1e-10)
    assert 0.0 != pytest.approx(want, abs=1e-6)


def test_path_patch_senders_in_two_layers_equals_hand(model3, tokens):
    # Senders 0.1 and 1.0 into receiver 2.0's value and into receiver 1.1 (which only 0.1
    # precedes), at two positions.
    clean, corrupted = tokens
    run = patching_run(model3, clean, corrupted, metric)
    d = sender_deltas(model3, clean, corrupted)
    keep = torch.zeros(N_POS, dtype=torch.float64)
    keep[[1, 4]] = 1
    d = {k: v * keep[None, :, None] for k, v in d.items()}
    _, _, resid_corr = forward(model3, corrupted)
    inputs = {(1, "v", 1): resid_corr[1] + d[(0, 1)], (2, "v", 0): resid_corr[2] + d[(0, 1)] + d[(1, 0)]}
    want = normalised(model3, clean, corrupted, forward(model3, corrupted, inputs=inputs)[0])
    got = path_patch(run, [(0, 1), (1, 0)], [(2, 0), (1, 1)], into="v", positions=[1, 4])
    assert got == pytest.approx(want, abs=1e-10)
    # the direct path of both senders, three layers up
    want = normalised(model3, clean, corrupted, forward(model3, corrupted, final_extra=d[(0, 1)] + d[(1, 0)])[0])
    assert path_patch(run, [(0, 1), (1, 0)], into="logits", positions=[1, 4]) == pytest.approx(want, abs=1e-10)


def test_path_patch_accepts_what_ablate_accepts(model3, tokens):
    # One validator (validate.check_heads) for ablate and path_patch: a bare pair, lists,
    # an [n, 2] tensor and torch.unravel_index's output all name the same heads.
    run = patching_run(model3, *tokens, metric)
    want = path_patch(run, [(0, 1)], [(1, 0), (2, 1)], into="k")
    flat = torch.tensor([1 * 2 + 0, 2 * 2 + 1])
    for senders, receivers in [((0, 1), [[1, 0], [2, 1]]), (torch.tensor([0, 1]), torch.tensor([[1, 0], [2, 1]])),
                               ([(torch.tensor(0), 1)], torch.unravel_index(flat, (3, 2)))]:
        assert path_patch(run, senders, receivers, into="k") == pytest.approx(want, abs=1e-12)
    with pytest.raises(TypeError, match="heads must be"):
        path_patch(run, 0, [(1, 0)])
    with pytest.raises(TypeError, match="heads must be"):
        path_patch(run, "0.1", [(1, 0)])


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
    # patching nothing would measure 0 whatever the activation: an empty list is refused
    with pytest.raises(ValueError, match=r"positions is empty: give at least one position in 0\.\.5"):
        patch(run, "z", 1, positions=[], head=0)
    with pytest.raises(ValueError, match="positions is empty"):
        path_patch(run, (0, 0), [(1, 0)], into="k", positions=[])


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
    _, (out0_clean, _), _ = forward(model, clean)
    logits_corr, (out0_corr, _), _ = forward(model, corrupted)
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
    with pytest.raises(ValueError, match=r"lie outside 0..4: position p predicts token p \+ 1"):
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


def test_bad_input_is_named(model, tokens):
    """Each of these once returned NaN, 0.0 or a bare KeyError instead of saying what is wrong."""
    clean, corrupted = tokens
    # an empty loss window: the mean of no loss is NaN on both runs, and NaN == NaN is False
    with pytest.raises(ValueError, match="per_token_loss: positions is empty"):
        patching_run(model, clean, corrupted, lambda lg: mean_loss(lg, clean, []))
    with pytest.raises(ValueError, match="logit_diff positions is empty"):
        logit_diff(model(clean), [], torch.zeros(3, 0, dtype=torch.long), torch.zeros(3, 0, dtype=torch.long))
    # any other metric that is not a finite number on a run
    with pytest.raises(ValueError, match="the metric is nan on the clean run"):
        patching_run(model, clean, corrupted, lambda lg: lg[:, -1, 0].mean() * float("nan"))
    calls = []  # the clean run is measured first: finite there, infinite on the corrupted run

    def finite_once(logits):
        calls.append(1)
        return logits[:, -1, 0].mean() if len(calls) == 1 else torch.tensor(float("inf"))

    with pytest.raises(ValueError, match="the metric is inf on the corrupted run"):
        patching_run(model, clean, corrupted, finite_once)
    run = patching_run(model, clean, corrupted, metric)
    # patching nothing
    with pytest.raises(ValueError, match=r"positions is empty: give at least one position in 0\.\.5"):
        patch(run, "resid_pre", 0, positions=[])
    with pytest.raises(TypeError, match="positions must be integer positions"):
        patch(run, "resid_pre", 0, positions=[1.5])
    # a hook TransformerLens lists for an attention-only model but never runs
    assert "blocks.0.hook_mlp_out" in model.hook_dict
    with pytest.raises(ValueError, match=r"'blocks\.0\.hook_mlp_out' exists but never runs.*attention-only"):
        patch(run, "mlp_out", 0)
    # the head of a full hook name is checked against that layer's heads
    with pytest.raises(ValueError, match=r"head 2 is out of range: layer 1 has 2 heads, valid heads are 0\.\.1"):
        patch(run, "blocks.1.attn.hook_z", head=2)
    # a 0-dim tensor layer and head (what argmax gives) are ints
    assert patch(run, "z", torch.tensor(1), head=torch.tensor(0)) == patch(run, "z", 1, head=0)
