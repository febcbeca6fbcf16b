"""The Annotated Transformer's encoder-decoder (chapters 2-12, 19)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from circuitbook.data import translation as T
from circuitbook.models.encoder_decoder import (
    EncoderDecoder,
    LayerNorm,
    MultiHeadedAttention,
    SublayerConnection,
    attention,
    beam_search,
    cross_attention_alignment,
    greedy_decode,
    head_outputs,
    make_model,
    tl_weights,
    truncate_at,
)
from circuitbook.masks import subsequent_mask
from circuitbook.train.translation import calibration, model_from_config, train_translation


def small_model(norm_position="pre", seed=0, dropout=0.0):
    torch.manual_seed(seed)
    return make_model(11, 13, N=2, d_model=32, d_ff=64, h=4, dropout=dropout, norm_position=norm_position, max_len=50).eval()


def random_batch(seed=0, batch=3, n_src=7, n_tgt=5):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(1, 11, (batch, n_src), generator=g)
    tgt = torch.randint(1, 13, (batch, n_tgt), generator=g)
    src[0, -2:] = 0  # some padding
    return src, tgt, (src != 0).unsqueeze(-2), subsequent_mask(n_tgt).expand(batch, -1, -1)


# ------------------------------------------------------------------ shapes and masks


def test_forward_shapes_and_generator():
    model = small_model()
    src, tgt, src_mask, tgt_mask = random_batch()
    memory = model.encode(src, src_mask)
    out = model(src, tgt, src_mask, tgt_mask)
    logp = model.generator(out)
    assert memory.shape == (3, 7, 32)
    assert out.shape == (3, 5, 32)
    assert logp.shape == (3, 5, 13)
    torch.testing.assert_close(logp.exp().sum(-1), torch.ones(3, 5))
    for layer in model.decoder.layers:
        assert layer.self_attn.attn.shape == (3, 4, 5, 5)
        assert layer.src_attn.attn.shape == (3, 4, 5, 7)  # cross-attention [tgt, src]
    # padded source keys get no attention
    assert model.decoder.layers[0].src_attn.attn[0, :, :, -2:].abs().max() < 1e-6


def test_subsequent_mask_values():
    m = subsequent_mask(4)
    assert m.shape == (1, 4, 4) and m.dtype == torch.bool
    expected = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(m[0], expected)
    with pytest.raises(ValueError, match="positive int"):
        subsequent_mask(0)


def test_decoder_is_causal():
    """Changing a later target token never changes earlier decoder outputs."""
    model = small_model()
    src, tgt, src_mask, tgt_mask = random_batch()
    out = model(src, tgt, src_mask, tgt_mask)
    tgt2 = tgt.clone()
    tgt2[:, -1] = (tgt2[:, -1] % 12) + 1
    out2 = model(src, tgt2, src_mask, tgt_mask)
    torch.testing.assert_close(out[:, :-1], out2[:, :-1])
    assert not torch.allclose(out[:, -1], out2[:, -1])


def test_attention_function():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 5, 8, generator=g) for _ in range(3))
    out, p = attention(q, k, v, mask=subsequent_mask(5))
    torch.testing.assert_close(p.sum(-1), torch.ones(2, 5))
    assert torch.all(p[:, 0, 1:] == 0)
    torch.testing.assert_close(out, torch.softmax((q @ k.transpose(-1, -2) / math.sqrt(8)).masked_fill(~subsequent_mask(5), -1e9), -1) @ v)


# ------------------------------------------------------------------ pre- vs post-norm, LayerNorm


def test_layernorm_is_the_annotated_transformers():
    x = torch.randn(4, 6, 10, dtype=torch.float64)
    ln = LayerNorm(10).double()
    mean, std = x.mean(-1, keepdim=True), x.std(-1, keepdim=True)  # unbiased std
    torch.testing.assert_close(ln(x), (x - mean) / (std + 1e-6))
    # ... which is not torch.nn.LayerNorm (biased variance, eps inside the root)
    assert not torch.allclose(ln(x), nn.LayerNorm(10).double()(x), atol=1e-3)


def test_pre_and_post_norm_differ_as_documented():
    x = torch.randn(2, 5, 16) * 3 + 1
    zero = lambda y: torch.zeros_like(y)  # noqa: E731
    pre, post = SublayerConnection(16, 0.0, "pre"), SublayerConnection(16, 0.0, "post")
    # pre-norm: x + Sublayer(LN(x)), so a silent sublayer leaves the stream untouched
    torch.testing.assert_close(pre(x, zero), x)
    # post-norm: LN(x + Sublayer(x)), so even a silent sublayer re-normalises the stream
    torch.testing.assert_close(post(x, zero), post.norm(x))
    lin = nn.Linear(16, 16)
    out = post(x, lin)
    torch.testing.assert_close(out.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.std(-1), torch.ones(2, 5), atol=1e-4, rtol=0)
    torch.testing.assert_close(pre(x, lin), x + lin(pre.norm(x)))
    # the stacks end with a LayerNorm only in pre-norm
    assert isinstance(small_model("pre").encoder.norm, LayerNorm)
    assert isinstance(small_model("post").decoder.norm, nn.Identity)
    # same weights, different wiring, different outputs
    a, b = small_model("pre"), small_model("post")
    b.load_state_dict(a.state_dict(), strict=False)
    src, tgt, src_mask, tgt_mask = random_batch()
    assert not torch.allclose(a(src, tgt, src_mask, tgt_mask), b(src, tgt, src_mask, tgt_mask), atol=1e-3)


def test_bad_arguments_have_clear_errors():
    with pytest.raises(ValueError, match="divisible"):
        make_model(5, 5, N=1, d_model=30, h=4)
    with pytest.raises(ValueError, match="norm_position"):
        make_model(5, 5, N=1, d_model=32, d_ff=8, h=4, norm_position="sandwich")
    model = small_model()
    src, _, _, _ = random_batch()
    with pytest.raises(ValueError, match="src_mask"):
        greedy_decode(model, src, (src != 0), 5, 1)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, src, (src != 0).unsqueeze(-2), 5, 1, 2, beam_size=0)
    with pytest.raises(TypeError, match="MultiHeadedAttention"):
        tl_weights(nn.Linear(3, 3))
    with pytest.raises(ValueError, match="missing"):
        model_from_config({"N": 1})


# ------------------------------------------------------------------ embeddings and positions


def test_embeddings_and_positional_encoding():
    model = small_model()
    emb, pos = model.src_embed
    ids = torch.tensor([[3, 4]])
    torch.testing.assert_close(emb(ids), emb.lut.weight[ids] * math.sqrt(32))
    pe = pos.pe[0]
    torch.testing.assert_close(pe[:, 0], torch.sin(torch.arange(50.0)))
    torch.testing.assert_close(pe[:, 1], torch.cos(torch.arange(50.0)))
    torch.testing.assert_close(pe[7, 2], torch.sin(torch.tensor(7 / 10000 ** (2 / 32))))
    assert not any("pe" in k.split(".")[-1] for k in model.state_dict())  # not saved
    with pytest.raises(ValueError, match="max_len"):
        pos(torch.zeros(1, 51, 32))


# ------------------------------------------------------------------ per-head weights (chapters 7, 20)


def test_tl_weights_reconstruct_multihead_output_exactly():
    torch.manual_seed(3)
    mha = MultiHeadedAttention(4, 24, dropout=0.0).double().eval()
    xq = torch.randn(2, 5, 24, dtype=torch.float64)
    xkv = torch.randn(2, 7, 24, dtype=torch.float64)
    mask = torch.ones(2, 1, 7, dtype=torch.bool)
    mask[1, 0, -3:] = False
    out = mha(xq, xkv, xkv, mask)
    w = tl_weights(mha)
    assert w["W_Q"].shape == (4, 24, 6) and w["W_O"].shape == (4, 6, 24)
    assert w["b_V"].shape == (4, 6) and w["b_O"].shape == (24,)
    torch.testing.assert_close(w["W_Q"][2], mha.linears[0].weight.T[:, 12:18])
    torch.testing.assert_close(w["W_O"][2], mha.linears[3].weight.T[12:18, :])
    total = w["b_O"].clone()
    for h in range(4):
        q = xq @ w["W_Q"][h] + w["b_Q"][h]
        k = xkv @ w["W_K"][h] + w["b_K"][h]
        scores = (q @ k.transpose(-1, -2) / math.sqrt(6)).masked_fill(~mask, -1e9)
        a = scores.softmax(-1)
        torch.testing.assert_close(a, mha.attn[:, h])
        total = total + a @ xkv @ w["W_V"][h] @ w["W_O"][h] + w["b_V"][h] @ w["W_O"][h]
    torch.testing.assert_close(total, out)
    torch.testing.assert_close(head_outputs(mha, xq, xkv, xkv, mask).sum(1) + w["b_O"], out)


# ------------------------------------------------------------------ training and decoding (chapters 12, 19)


def _zoo_translation_model():
    """The zoo's trained model when its checkpoint is already shipped, else None."""
    try:
        from circuitbook.models import zoo
    except ImportError:
        return None
    root = Path(zoo.__file__).resolve().parents[1] / "zoo"
    if not any(root.glob("toy-translation*")):
        return None
    try:
        model = zoo.load("toy-translation")
    except Exception:  # noqa: BLE001 - the zoo is another module's business; fall back
        return None
    model = model[0] if isinstance(model, tuple) else model
    return model.eval() if isinstance(model, EncoderDecoder) else None


@pytest.fixture(scope="module")
def trained():
    """The zoo model if shipped, else a quick one-layer model (~10 s on one thread)."""
    model = _zoo_translation_model()
    if model is None:
        model, _, _ = train_translation(0, steps=300, N=1, evaluate=False)
    _, test = T.make_split(20000, 500, seed=0)  # the zoo recipe's held-out set
    return model, test[:100]


def test_greedy_decode_translates_held_out_sentences(trained):
    model, test = trained
    src, _ = T.to_tensors(test)
    ys = greedy_decode(model, src, (src != T.PAD).unsqueeze(-2), T.MAX_LEN, T.BOS)
    assert ys.shape == (len(test), T.MAX_LEN) and torch.all(ys[:, 0] == T.BOS)
    got = truncate_at(ys, T.EOS)
    want = [T.encode(T.exact_translation(s), T.TGT_VOCAB) for s in test]
    accuracy = sum(g == w for g, w in zip(got, want)) / len(want)
    assert accuracy >= 0.9, f"greedy exact match {accuracy:.2f} on held-out sentences"
    # and the cross-attention finds the (non-diagonal) alignment somewhere
    assert cross_attention_alignment(model, test).max() > 0.7


def test_beam_size_one_equals_greedy_and_beam_translates(trained):
    model, test = trained
    src, _ = T.to_tensors(test[:30])
    src_mask = (src != T.PAD).unsqueeze(-2)
    greedy = truncate_at(greedy_decode(model, src, src_mask, T.MAX_LEN, T.BOS), T.EOS)
    beam1 = beam_search(model, src, src_mask, T.MAX_LEN, T.BOS, T.EOS, beam_size=1)
    assert beam1.shape == (30, T.MAX_LEN)
    assert truncate_at(beam1, T.EOS) == greedy
    beam4 = truncate_at(beam_search(model, src, src_mask, T.MAX_LEN, T.BOS, T.EOS, beam_size=4), T.EOS)
    want = [T.encode(T.exact_translation(s), T.TGT_VOCAB) for s in test[:30]]
    assert sum(b == w for b, w in zip(beam4, want)) / 30 >= 0.9


def test_training_is_deterministic_and_config_round_trips():
    kw = dict(steps=3, evaluate=False, n_train=200, n_test=10)
    m1, met1, cfg = train_translation(5, **kw)
    m2, _, _ = train_translation(5, **kw)
    m3, _, _ = train_translation(6, **kw)
    s1, s2, s3 = m1.state_dict(), m2.state_dict(), m3.state_dict()
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    assert not all(torch.equal(s1[k], s3[k]) for k in s1)
    fresh = model_from_config(cfg)
    fresh.load_state_dict(s1)  # strict: same shape
    assert cfg["src_vocab"] == len(T.SRC_VOCAB) and cfg["smoothing"] == 0.1
    assert len(met1["loss_history"]) >= 1
    n_bytes = sum(t.numel() * t.element_size() for t in model_from_config(cfg).state_dict().values())
    assert n_bytes < 2_000_000
    with pytest.raises(ValueError, match="unknown training options"):
        train_translation(0, steps=1, bogus=3)


def test_calibration():
    conf = torch.tensor([0.95, 0.95, 0.55, 0.55])
    correct = torch.tensor([1, 1, 1, 0])
    cal = calibration(conf, correct)
    # bins: 0.9 bin (acc 1, conf .95), 0.5 bin (acc .5, conf .55): ECE = .5*.05 + .5*.05
    assert cal["ece"] == pytest.approx(0.05)
    assert cal["mean_confidence"] == pytest.approx(0.75)
    assert cal["accuracy"] == pytest.approx(0.75)
    with pytest.raises(ValueError):
        calibration(torch.tensor([]), torch.tensor([]))
