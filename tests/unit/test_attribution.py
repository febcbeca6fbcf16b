"""circuitbook.attribution: direct logit attribution against a float64 reference built by hand
from the cached activations of a tiny model with a final RMSNorm (or LayerNorm)."""

from __future__ import annotations

import warnings

import pytest
import torch

from circuitbook.attribution import direct_logit_attribution


def tiny(norm="RMS", positional="rotary", seed=0):
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(n_layers=2, d_model=12, n_heads=3, d_head=4, d_mlp=20, d_vocab=17,
                                  n_ctx=9, act_fn="silu", gated_mlp=True, normalization_type=norm,
                                  positional_embedding_type=positional, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = HookedTransformer(cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():  # nonzero biases, gains far from 1
            p.copy_(torch.randn(p.shape, generator=g) * 0.5 + (1.0 if p.ndim == 1 else 0.0))
    return model.eval()


def reference(model, cache, answer, wrong, pos):
    """Float64, from the hooks: each head's z W_O, each MLP's output, the embeddings and the
    heads' output biases, divided by the final norm's cached scale (LayerNorm: centred first), times its gain,
    read along W_U[:, answer] - W_U[:, wrong]."""
    cfg = model.cfg
    d = (model.W_U[:, answer] - model.W_U[:, wrong]).double() * model.ln_final.w.double()[:, None]
    s = cache["ln_final.hook_scale"][:, pos].double()  # [batch, 1]

    def read(x):  # x [batch, d_model]
        x = x.double()
        if cfg.normalization_type == "LN":
            x = x - x.mean(-1, keepdim=True)
        return ((x / s) * d.T).sum(-1)

    heads = torch.stack([torch.stack([
        read(cache["z", l][:, pos, h].double() @ model.blocks[l].attn.W_O[h].double())
        for h in range(cfg.n_heads)]) for l in range(cfg.n_layers)])
    mlps = torch.stack([read(cache["mlp_out", l][:, pos]) for l in range(cfg.n_layers)])
    embed = read(cache["hook_embed"][:, pos])
    pos_embed = read(cache["hook_pos_embed"][:, pos]) if cfg.positional_embedding_type == "standard" else 0 * embed
    # b_out is inside each MLP's output (hook_mlp_out); the heads' shared b_O is not in any head
    biases = sum(model.blocks[l].attn.b_O.double() for l in range(cfg.n_layers))
    bias = read(biases.expand(s.shape[0], -1))
    b_U = (model.b_U[answer] - model.b_U[wrong]).double()
    if cfg.normalization_type == "LN":
        b_U = b_U + model.ln_final.b.double() @ (model.W_U[:, answer] - model.W_U[:, wrong]).double()
    return heads, mlps, embed, pos_embed, bias, b_U


@pytest.mark.parametrize("norm, positional", [("RMS", "rotary"), ("LN", "standard")])
@pytest.mark.parametrize("pos", [-1, 4])
def test_parts_match_a_float64_reference_and_sum_to_the_logit_difference(norm, positional, pos):
    model = tiny(norm, positional)
    tokens = torch.randint(0, 17, (3, 9), generator=torch.Generator().manual_seed(1))
    answer, wrong = torch.tensor([1, 5, 9]), torch.tensor([2, 2, 16])
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens)
    dla = direct_logit_attribution(model, cache, answer, wrong, pos=pos)
    heads, mlps, embed, pos_embed, bias, b_U = reference(model, cache, answer, wrong, pos)
    assert dla.heads.shape == (2, 3, 3) and dla.mlps.shape == (2, 3) and dla.by_layer().shape == (2, 2, 3)
    for got, want in [(dla.heads, heads), (dla.mlps, mlps), (dla.embed, embed),
                      (dla.pos_embed, pos_embed), (dla.bias, bias), (dla.unembed_bias, b_U)]:
        assert float((got.double() - want).abs().max()) < 1e-4 * max(1.0, float(want.abs().max()))
    diff = logits[torch.arange(3), pos, answer] - logits[torch.arange(3), pos, wrong]
    assert float((dla.total() - diff).abs().max()) < 1e-4 * max(1.0, float(diff.abs().max()))
    # abs_size: every part's products in absolute value, by hand
    d = ((model.W_U[:, answer] - model.W_U[:, wrong]).double() * model.ln_final.w.double()[:, None]).abs()
    s = cache["ln_final.hook_scale"][:, pos].double()
    raw = [cache["z", l][:, pos, h].double() @ model.blocks[l].attn.W_O[h].double()
           for l in range(2) for h in range(3)]
    raw += [cache["mlp_out", l][:, pos].double() for l in range(2)] + [cache["hook_embed"][:, pos].double()]
    if positional == "standard":
        raw.append(cache["hook_pos_embed"][:, pos].double())
    raw.append(sum(model.blocks[l].attn.b_O.double() for l in range(2)).expand(3, -1))
    if norm == "LN":
        raw = [x - x.mean(-1, keepdim=True) for x in raw]
    want_size = sum(((x.abs() / s) * d.T).sum(-1) for x in raw)
    assert torch.allclose(dla.abs_size.double(), want_size, rtol=1e-5)
    assert bool((dla.abs_size >= dla.total().abs() - dla.unembed_bias.abs()).all())


def test_a_single_logit_without_wrong_token():
    model = tiny()
    tokens = torch.randint(0, 17, (2, 6), generator=torch.Generator().manual_seed(2))
    logits, cache = model.run_with_cache(tokens)
    answer = torch.tensor([3, 7])
    dla = direct_logit_attribution(model, cache, answer)
    want = logits[torch.arange(2), -1, answer]
    assert float((dla.total() - want).abs().max()) < 1e-4 * max(1.0, float(want.abs().max()))


def test_shortformer_is_refused():
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(n_layers=1, d_model=8, n_heads=2, d_head=4, d_vocab=5, n_ctx=4,
                                  attn_only=True, normalization_type=None,
                                  positional_embedding_type="shortformer")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = HookedTransformer(cfg)
    _, cache = model.run_with_cache(torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="shortformer"):
        direct_logit_attribution(model, cache, torch.tensor([0]))
