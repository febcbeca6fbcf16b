"""One implementation of each kernel: the exercises' reference solutions agree with the package.

The reference solutions in ``circuitbook/checks/chNN.py`` and ``checks/ps/`` are written the way a
reader writes them (dense, explicit), so they re-implement kernels the package already has
(``composition_scores``, the QK/OV circuits, induction and previous-token scores, the path
expansion, the Annotated Transformer's modules, the schedule and the label smoothing). Each
test below calls the reference and the package kernel on the same random float64 inputs and
compares them within a rounding bound derived from the computation
(``circuitbook.book.rounding_bound``: terms * eps * scale, with scale the size of what is
summed), or exactly for integers. ``test_a_perturbed_reference_fails`` shows that every one of
these comparisons fails when its reference is off by one part in a thousand.

References with no package counterpart (ch03's rotations, ch05's offset matrix, ch11's fold,
ch14's correlation, ch15's skip-trigram, ch16's virtual pattern, the problem set's designs, its
matched controls and the design decisions of problems 4, 5 and 7, which
tests/unit/test_student_feedback.py judges by their consequences)
are not listed: there is nothing to be the same as. The problem set's ablation (problem 5) is
compared with a forward pass written out by hand (tests/unit/hand_forward.py), and
tests/unit/test_ps_references.py checks its other references the same way (problem 7's
``patching_shares`` against patches written out by hand in float64). ``ch11.layer_norm`` is compared with
``torch.nn.functional.layer_norm``, since the package's ``LayerNorm`` is the Annotated
Transformer's (unbiased std, eps outside the root), which chapter 11 contrasts with it.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections import Counter

import pytest
import torch

from circuitbook import checks, circuits, composition, heads, paths
from circuitbook.book import attn_only_forward_terms, rounding_bound
from circuitbook.checks import ch01, ch02, ch04, ch05, ch06, ch07, ch08, ch09, ch10, ch11, ch12, ch13, ch14, ch15
from circuitbook.checks import ch16, ch17, ch18, ch19, ch20, ps
from circuitbook.data import repeated_random_tokens
from circuitbook.train.lm import phase_change_step
from circuitbook.masks import subsequent_mask
from circuitbook.models import encoder_decoder as ed
from circuitbook.train.vaswani import LabelSmoothing, noam_lr
from conftest import build_model
import hand_forward as hand

F64 = torch.float64
SEEDS = (0, 1, 2)


def bound(terms: int, scale: float) -> float:
    return rounding_bound(terms, scale, F64)


def abs_chain(*mats: torch.Tensor) -> float:
    """max of |A| |B| |C| ...: the size of the sums a product chain rounds (Higham's bound)."""
    out = mats[0].abs()
    for m in mats[1:]:
        out = out @ m.abs()
    return float(out.max())


def assert_match(what: str, ref, kernel, tol: float = 0.0) -> None:
    """Integers (and integer tensors) exactly; floats within ``tol`` (max abs difference)."""
    if isinstance(ref, dict):
        assert set(ref) == set(kernel), f"{what}: keys {sorted(ref)} vs {sorted(kernel)}"
        for k in ref:
            assert_match(f"{what}[{k!r}]", ref[k], kernel[k], tol)
        return
    if isinstance(ref, (tuple, list)):
        assert len(ref) == len(kernel), what
        for i, (r, k) in enumerate(zip(ref, kernel)):
            assert_match(f"{what}[{i}]", r, k, tol)
        return
    if isinstance(ref, int) and not isinstance(ref, bool):
        assert ref == kernel, f"{what}: reference {ref} vs kernel {kernel}"
        return
    r, k = torch.as_tensor(ref).detach(), torch.as_tensor(kernel).detach()
    assert r.shape == k.shape, f"{what}: reference shape {tuple(r.shape)} vs kernel {tuple(k.shape)}"
    if not (r.is_floating_point() or r.is_complex()):
        assert torch.equal(r, k.to(r.dtype)), f"{what}: integer results differ"
        return
    err = float((r.to(F64) - k.to(F64)).abs().max()) if r.numel() else 0.0
    assert err <= tol, f"{what}: reference and kernel differ by {err:.3g} > bound {tol:.3g}"


def mha(d_model: int, h: int, g: torch.Generator) -> ed.MultiHeadedAttention:
    """An Annotated-Transformer attention module in float64, eval mode, random weights and biases."""
    m = ed.MultiHeadedAttention(h, d_model, dropout=0.0).double().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=F64))
    return m


def model_and_tokens(seed: int, n_layers: int = 2, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(n_layers, seed=seed, **kw)
    return model, repeated_random_tokens(3, 6, model.cfg.d_vocab, seed=seed)


def patterns_of(model, tokens) -> list[torch.Tensor]:
    _, cache = model.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_pattern"))
    return [cache["pattern", layer] for layer in range(model.cfg.n_layers)]


# Each pair returns [(what, reference result, kernel result, tolerance)] for one seed. PAIRS maps
# its name to (function, the references it calls: (module, attribute)).
PAIRS: dict = {}


def pair(*refs):
    def register(fn):
        PAIRS[fn.__name__] = (fn, refs)
        return fn
    return register


@pair((ch01, "stream_before"))
def stream_before(seed):
    # A model that adds its positions to the stream (standard positional embeddings), so that
    # TransformerLens's resid_pre is the whole sum the reference rebuilds.
    model, tokens = model_and_tokens(seed, 3, d_model=8, n_heads=2, d_head=3, positional="standard")
    _, cache = model.run_with_cache(tokens[0])
    writes = torch.stack([cache["attn_out", l][0] for l in range(3)])
    no_mlp = torch.zeros_like(writes)  # an attention-only model: its MLPs write nothing
    scale = float(cache["resid_post", 2].abs().max())
    return [(f"resid_pre {l}", ch01.stream_before(cache["embed"][0], cache["pos_embed"][0], writes, no_mlp, l),
             cache["resid_pre", l][0], bound(2 * 3 + 2, scale)) for l in range(3)]


@pair((ch02, "encoder_layer_params"))
def encoder_layer_params(seed):
    h, d_head, d_ff = 2 + seed, 3 + seed, 7 + 2 * seed
    d_model = h * d_head
    layer = ed.EncoderLayer(d_model, ed.MultiHeadedAttention(h, d_model), ed.PositionwiseFeedForward(d_model, d_ff), 0.1)
    return [("params", ch02.encoder_layer_params(d_model, h, d_ff, bias=True), sum(p.numel() for p in layer.parameters()), 0)]


@pair((ch02, "sublayer_connection"))
def sublayer_connection(seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for position in ("pre", "post"):
        block = ed.SublayerConnection(8, 0.0, position).double().eval()
        with torch.no_grad():
            for p in block.parameters():
                p.copy_(torch.randn(p.shape, generator=g, dtype=F64))
        W = torch.randn(8, 8, generator=g, dtype=F64)
        x = torch.randn(2, 5, 8, generator=g, dtype=F64)
        sub = lambda y: y @ W  # noqa: E731
        # The same operations in the same order: LayerNorm (8 terms twice, a root) and one product.
        tol = bound(4 * 8 + 8, 1 + abs_chain(x.reshape(-1, 8), W) * float(block.norm.a_2.abs().max()))
        out.append((position, ch02.sublayer_connection(x, sub, block.norm, position), block(x, sub), tol))
    return out


@pair((ch04, "embed"))
def embed(seed):
    g = torch.Generator().manual_seed(seed)
    vocab, d_model = 11 + seed, 6 + 2 * seed
    module = ed.Embeddings(d_model, vocab).double()
    with torch.no_grad():
        module.lut.weight.copy_(torch.randn(vocab, d_model, generator=g, dtype=F64))
    tokens = torch.randint(0, vocab, (3, 7), generator=g)
    lut = module.lut.weight.detach()
    return [("embedding", ch04.embed(tokens, lut), module(tokens), bound(2, math.sqrt(d_model) * float(lut.abs().max())))]


@pair((ch05, "sinusoidal"))
def sinusoidal(seed):
    n_pos, d_model = 20 + 10 * seed, 8 + 4 * seed
    # Both are float32 tables; the angle pos / 10000^(2i/d) carries a relative error of a few
    # eps32 from the exponential, i.e. an absolute error up to about n_pos * 4 eps32 (sin and
    # cos are 1-Lipschitz), plus the rounding of sin/cos themselves.
    tol = rounding_bound(4 * n_pos + 2, 1.0, torch.float32)
    return [("table", ch05.sinusoidal(n_pos, d_model), ed.sinusoidal_table(n_pos, d_model), tol)]


@pair((ch06, "attention_pattern"))
def attention_pattern(seed):
    g = torch.Generator().manual_seed(seed)
    n, d_k = 5 + seed, 8
    q, k = 2 * torch.randn(3, n, d_k, generator=g, dtype=F64), 2 * torch.randn(3, n, d_k, generator=g, dtype=F64)
    v = torch.randn(3, n, 3, generator=g, dtype=F64)
    pos = torch.arange(n)
    key_mask = torch.stack([pos < n - 2, pos >= 1 + seed, torch.rand(n, generator=g) < 0.6])
    key_mask[2, seed] = True
    # the Annotated Transformer's kernel with the causal mask, the padding keys' mask and the padding
    # queries' mask; its -1e9 fill leaves a row with no allowed key uniform, which the exercise sets to 0
    allowed = subsequent_mask(n) & key_mask[:, None, :] & key_mask[:, :, None]
    _, p_attn = ed.attention(q, k, v, mask=allowed)
    p_attn = p_attn * allowed.any(-1, keepdim=True)
    # Scores reduce over d_k; the softmax's exp and sum over n keys scale the error by 1 + |score|.
    s = float((q @ k.mT).abs().max()) / math.sqrt(d_k)
    return [("pattern", ch06.attention_pattern(q, k, key_mask), p_attn, bound(d_k + n + 4, 1 + s))]


@pair((ch06, "qk_scores"))
def qk_scores(seed):
    model, _ = model_and_tokens(seed, 1, d_model=10, n_heads=3, d_head=4)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 10, generator=g, dtype=F64)
    W_Q, W_K = model.W_Q[0].detach(), model.W_K[0].detach()
    kernel = x @ circuits.qk_circuit(model, 0).AB @ x.T / math.sqrt(4)
    tol = bound(2 * 10 + 4, max(abs_chain(x, W_Q[h], W_K[h].T, x.T) for h in range(3)))
    return [("scores", ch06.qk_scores(x, W_Q, W_K), kernel, tol)]


@pair((ch07, "split_heads"), (ch20, "linear_to_tl"))
def split_heads(seed):
    g = torch.Generator().manual_seed(seed)
    h = 2 + seed
    m = mha(4 * h, h, g)
    w = ed.tl_weights(m)
    out = [("split_heads(W_Q)", ch07.split_heads(m.linears[0].weight.detach(), h), w["W_Q"], 0.0)]
    for i, which in enumerate("qkvo"):
        out.append((f"linear_to_tl({which})", ch20.linear_to_tl(m.linears[i].weight.detach(), h, which),
                    w[f"W_{which.upper()}"], 0.0))
    return out


@pair((ch20, "ov_from_linears"))
def ov_from_linears(seed):
    g = torch.Generator().manual_seed(seed)
    m = mha(12, 3, g)
    w = ed.tl_weights(m)
    tol = bound(4, max(abs_chain(w["W_V"][h], w["W_O"][h]) for h in range(3)))
    return [("W_OV", ch20.ov_from_linears(m.linears[2].weight.detach(), m.linears[3].weight.detach(), 3),
             w["W_V"] @ w["W_O"], tol)]


@pair((ch07, "mha_as_sum"))
def multi_head_attention(seed):
    g = torch.Generator().manual_seed(seed)
    d_model, h, pos = 12, 3, 5
    m = mha(d_model, h, g)
    x = torch.randn(1, pos, d_model, generator=g, dtype=F64)
    with torch.no_grad():
        y = m(x, x, x)
        per_head = ed.head_outputs(m, x, x, x)
    w = ed.tl_weights(m)
    pattern = m.attn[0]
    # Values reduce over d_model, the pattern over pos, W_O over d_head, then the h heads sum.
    scale = 1 + max(abs_chain(x[0], w["W_V"][i], w["W_O"][i]) + abs_chain(w["b_V"][i][None], w["W_O"][i])
                    for i in range(h)) + float(w["b_O"].abs().max())
    tol = bound(d_model + pos + d_model // h + h + 4, scale)
    # the module's own per-head outputs (ed.head_outputs) sum, with b_O, to its output
    return [("mha_as_sum", ch07.mha_as_sum(x[0], pattern, w["W_V"], w["W_O"], w["b_V"], w["b_O"]), y[0], tol),
            ("heads sum", per_head[0].sum(0) + w["b_O"], y[0], tol)]


@pair((ch08, "extended_qk"))
def extended_qk(seed):
    # TransformerLens's attention scores, biases included: [x_i, 1] M [x_j, 1]^T for i >= j
    # must equal hook_attn_scores times the attention scale, x the stream the layer reads.
    model, tokens = model_and_tokens(seed, 2, d_model=8, n_heads=2, d_head=3, positional="standard")
    _, cache = model.run_with_cache(tokens[0])
    out = []
    for l, h in ((0, 1), (1, 0)):
        attn = model.blocks[l].attn
        M = ch08.extended_qk(attn.W_Q[h], attn.b_Q[h], attn.W_K[h], attn.b_K[h])
        x1 = torch.cat([cache["resid_pre", l][0], torch.ones(tokens.shape[1], 1, dtype=F64)], dim=1)
        lower = torch.ones(tokens.shape[1], tokens.shape[1], dtype=torch.bool).tril()
        want = cache["attn_scores", l][0, h] * attn.attn_scale
        tol = bound(2 * (8 + 1) + 3, abs_chain(x1, M, x1.T))
        out.append((f"extended_qk L{l}H{h}", (x1 @ M @ x1.T)[lower], want[lower], tol))
    return out


@pair((ch08, "to_paper_convention"), (ch18, "k_composition_matrices"))
def qk_ov_matrices(seed):
    model, _ = model_and_tokens(seed, 2, d_model=10, n_heads=2, d_head=3)
    out = []
    for l, h in ((0, 1), (1, 0)):
        W_Q, W_K, W_V, W_O = (model.blocks[l].attn.__getattr__(n)[h].detach() for n in ("W_Q", "W_K", "W_V", "W_O"))
        tol = bound(3, max(abs_chain(W_Q, W_K.T), abs_chain(W_V, W_O)))
        qk, ov = circuits.qk_circuit(model, l, h).AB, circuits.ov_circuit(model, l, h).AB
        out.append((f"to_paper_convention L{l}H{h}", ch08.to_paper_convention(W_Q, W_K, W_V, W_O), (qk, ov.T), tol))
        out.append((f"k_composition_matrices L{l}H{h}", ch18.k_composition_matrices(W_V, W_O, W_Q, W_K), (ov, qk.T), tol))
    return out


@pair((ch09, "full_ov"), (ch12, "ov_readout"))
def full_ov(seed):
    model, _ = model_and_tokens(seed, 1, d_model=8, n_heads=3, d_head=2, d_vocab=15)
    W_E, W_U = model.W_E.detach(), model.W_U.detach()
    W_V, W_O = model.W_V[0].detach(), model.W_O[0].detach()
    full = circuits.full_ov_circuit(model, 0).AB  # [h, vocab, vocab]
    out = []
    for h in range(3):
        out.append((f"full_ov H{h}", ch09.full_ov(W_E, W_V[h], W_O[h], W_U), full[h],
                    bound(2 * 8 + 2, abs_chain(W_E, W_V[h], W_O[h], W_U))))
    # ov_readout is an argmax: compare it exactly where the top two differ by more than the bound.
    summed = full.sum(0)
    top2 = summed.topk(2, dim=-1).values
    clear = (top2[:, 0] - top2[:, 1]) > 2 * bound(2 * 8 + 5, 3 * max(abs_chain(W_E, W_V[h], W_O[h], W_U) for h in range(3)))
    readout = ch12.ov_readout(W_E, W_V, W_O, W_U)
    out.append(("ov_readout", readout[clear], summed.argmax(-1)[clear], 0))
    assert clear.any()
    return out


@pair((ch09, "copying_score"))
def copying_score(seed):
    model, _ = model_and_tokens(seed, 1, d_model=8, n_heads=2, d_head=3, d_vocab=12)
    full = circuits.full_ov_circuit(model, 0).AB
    kernel = heads.copying_scores(model, 0)
    # Eigenvalues of the vocab x vocab matrix carry errors of about vocab * eps * ||M|| each
    # (backward-stable eig; the zero eigenvalues are semisimple), summed over vocab of them.
    out = []
    for h in range(2):
        lam = torch.linalg.eigvals(full[h])
        tol = bound(12 * 12 + 2 * 8, float(torch.linalg.matrix_norm(full[h], 2)) / float(lam.abs().sum()) * 12 + 1)
        out.append((f"copying H{h}", ch09.copying_score(lam), float(kernel[h]), tol))
    return out


@pair((ch10, "ffn"), (ch10, "neuron_writes"))
def ffn(seed):
    g = torch.Generator().manual_seed(seed)
    d_model, d_ff = 6 + seed, 11 + seed
    module = ed.PositionwiseFeedForward(d_model, d_ff, dropout=0.0).double().eval()
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=F64))
    x = torch.randn(2, 4, d_model, generator=g, dtype=F64)
    W1, b1, W2, b2 = (t.detach() for t in (module.w_1.weight, module.w_1.bias, module.w_2.weight, module.w_2.bias))
    hidden = abs_chain(x.reshape(-1, d_model), W1.T) + float(b1.abs().max())
    tol = bound(d_model + d_ff + 2, hidden * float(W2.abs().sum(1).max()) + float(b2.abs().max()))
    return [("ffn", ch10.ffn(x, W1, b1, W2, b2), module(x), tol),
            # each neuron's write, summed over neurons, plus the output bias, is the module's output
            ("neuron writes", ch10.neuron_writes(x, W1.T, b1, W2.T).sum(-2) + b2, module(x), tol)]


@pair((ch11, "layer_norm"))
def layer_norm(seed):
    g = torch.Generator().manual_seed(seed)
    d = 7 + seed
    x = 3 * torch.randn(4, d, generator=g, dtype=F64) + 1
    gamma, beta = torch.randn(d, generator=g, dtype=F64), torch.randn(d, generator=g, dtype=F64)
    want = torch.nn.functional.layer_norm(x, (d,), gamma, beta, eps=1e-5)
    # Mean and variance reduce over d twice; the normalised entries are at most sqrt(d).
    return [("layer_norm", ch11.layer_norm(x, gamma, beta), want,
             bound(3 * d + 4, math.sqrt(d) * float(gamma.abs().max()) + float(beta.abs().max())))]


@pair((ch12, "cross_attention"))
def cross_attention(seed):
    g = torch.Generator().manual_seed(seed)
    d_model, h, tgt, src = 12, 3, 4, 6
    m = mha(d_model, h, g)
    with torch.no_grad():
        for lin in m.linears:
            lin.bias.zero_()  # the exercise's cross-attention has no biases
    x_dec = torch.randn(1, tgt, d_model, generator=g, dtype=F64)
    memory = torch.randn(1, src, d_model, generator=g, dtype=F64)
    src_mask = torch.ones(src, dtype=torch.bool)
    src_mask[-2:] = False  # two padding positions
    with torch.no_grad():
        y = m(x_dec, memory, memory, src_mask[None, None, :])
    w = ed.tl_weights(m)
    scores = max(float((x_dec[0] @ w["W_Q"][i] @ (memory[0] @ w["W_K"][i]).T).abs().max()) for i in range(h))
    scale = (1 + scores) * max(abs_chain(memory[0], w["W_V"][i], w["W_O"][i]) for i in range(h)) * h
    tol = bound(2 * d_model + src + d_model // h + h + 4, scale)
    return [("cross_attention", ch12.cross_attention(x_dec[0], memory[0], w["W_Q"], w["W_K"], w["W_V"], w["W_O"], src_mask),
             y[0], tol)]


@pair((ch13, "direct_logit_attribution"))
def direct_logit_attribution(seed):
    model, tokens = model_and_tokens(seed, 1, d_model=10, n_heads=3, d_head=4)
    attribution = paths.logit_attribution(model, tokens)
    _, cache = model.run_with_cache(tokens)
    z = cache["z", 0]  # [batch, pos, head, d_head]: A (x W_V + b_V), per head
    head_out = torch.einsum("bphe,hem->bhpm", z, model.W_O[0])
    W_U, b_U = model.W_U.detach(), model.b_U.detach()
    out = []
    for b in range(tokens.shape[0]):
        # logit_attribution's head part at position p is head_out[p] W_U: read the next token.
        kernel = attribution.heads[0, :, b, :-1].gather(-1, tokens[b, 1:].expand(3, -1)[..., None]).squeeze(-1)
        tol = bound(10 + 4 + tokens.shape[1], 1 + float(head_out[b].abs().max()) * float(W_U.abs().sum(0).max()))
        out.append((f"batch {b}", ch13.direct_logit_attribution(head_out[b], W_U, b_U, tokens[b]), kernel, tol))
    return out


@pair((ch13, "n_paths"), (ps, "path_counts"))
def path_counts(seed):
    """Against an enumeration: every path picks, in each layer, no head or one of its n heads."""
    out = []
    for L, n in ((1, 3), (2, 4 + seed), (3 + seed, 2)):
        by_order = Counter(sum(c is not None for c in choice)
                           for choice in itertools.product([None, *range(n)], repeat=L))
        total = sum(by_order.values())
        out.append((f"n_paths({L}, {n})", ch13.n_paths(L, n), total, 0))
        out.append((f"path_counts({L}, {n})", ps.path_counts(L, n),
                    {"direct": by_order[0], "single": by_order[1], "virtual": total - by_order[0] - by_order[1],
                     "total": total}, 0))
    return out


@pair((ch14, "zero_layer_logits"))
def zero_layer_logits(seed):
    model, tokens = model_and_tokens(seed, 0, d_model=10)
    W_E, W_U, b_U = model.W_E.detach(), model.W_U.detach(), model.b_U.detach()
    with torch.no_grad():
        logits = model(tokens)
    tol = bound(10 + 1, abs_chain(W_E, W_U) + float(b_U.abs().max()))
    return [("model(tokens)", ch14.zero_layer_logits(tokens, W_E, W_U, b_U), logits, tol),
            ("direct_path", ch14.zero_layer_logits(tokens, W_E, W_U, b_U), circuits.direct_path(model).AB[tokens] + b_U, tol)]


@pair((ch15, "one_layer_logits"))
def one_layer_logits(seed):
    model, tokens = model_and_tokens(seed, 1, d_model=10, n_heads=3, d_head=4)
    (pattern,) = patterns_of(model, tokens)
    with torch.no_grad():
        logits = model(tokens)
    w = {n: getattr(model, n).detach() for n in ("W_E", "W_U", "b_U", "b_O")}
    W_V, W_O, b_V = model.W_V[0].detach(), model.W_O[0].detach(), model.b_V[0].detach()
    out = []
    for b in range(tokens.shape[0]):
        ref = ch15.one_layer_logits(tokens[b], pattern[b], w["W_E"], W_V, W_O, b_V, w["b_O"][0], w["W_U"], w["b_U"])
        stream = float(w["W_E"].abs().max()) + 3 * max(abs_chain(w["W_E"], W_V[h], W_O[h]) + abs_chain(b_V[h][None], W_O[h])
                                                       for h in range(3))
        tol = bound(3 * 10 + 4 + tokens.shape[1] + 3 + 6, 1 + stream * float(w["W_U"].abs().sum(0).max()))
        out.append((f"batch {b}", ref, logits[b], tol))
    return out


@pair((ch16, "virtual_ov"))
def virtual_ov(seed):
    model, _ = model_and_tokens(seed, 3, d_model=9, n_heads=2, d_head=3)
    W_V, W_O = model.W_V.detach(), model.W_O.detach()
    out = []
    for first, second in (((0, 1), (1, 0)), ((0, 0), (2, 1)), ((1, 1), (2, 0))):
        (l1, h1), (l2, h2) = first, second
        tol = bound(2 * 9 + 2 * 3, abs_chain(W_V[l1, h1], W_O[l1, h1], W_V[l2, h2], W_O[l2, h2]))
        out.append((f"{first}->{second}", ch16.virtual_ov(W_V, W_O, first, second),
                    composition.virtual_ov(model, first, second).AB, tol))
    return out


@pair((ch17, "mean_ablate"))
def mean_ablate(seed):
    # heads.ablate's hook on layer 0 (means from the batch being run) against the reference on
    # the clean hook_z of the same layer: the same mean of batch * pos rows of z
    model, tokens = model_and_tokens(seed, 2, d_model=12, n_heads=3, d_head=4)
    head = seed % 3
    _, cache = model.run_with_cache(tokens, names_filter="blocks.0.attn.hook_z")
    seen = {}
    hooks = heads.ablate(model, [(0, head)]).fwd_hooks + [
        ("blocks.0.attn.hook_z", lambda z, hook: seen.setdefault("z", z.clone()))]
    model.run_with_hooks(tokens, fwd_hooks=hooks)
    z = cache["blocks.0.attn.hook_z"]
    return [("ablated z", ch17.mean_ablate(z, head), seen["z"], bound(tokens.numel(), float(z.abs().max())))]


@pair((ch17, "phase_change"))
def phase_change(seed):
    g = torch.Generator().manual_seed(seed)
    chance = math.log(64)
    steps = list(range(0, 2000, 50))
    # a falling second-copy loss with noise: the step where it crosses the midpoint
    curve = [chance - 3.0 / (1 + math.exp(-(s - 800 - 100 * seed) / 60)) + 0.05 * float(torch.randn(1, generator=g))
             for s in steps]
    history = {"step": steps, "loss_second_copy": curve}
    return [("step", ch17.phase_change(steps, curve, chance), phase_change_step(history, chance=chance), 0)]


@pair((ch05, "rope"))
def rope(seed):
    # the reader's split-halves RoPE against R(p) = rotary_rotation(cfg, p) (row vectors: x R(p))
    from transformer_lens import HookedTransformerConfig

    d_head, n_pos, base = 8 + 4 * seed, 7, 500.0 * (1 + seed)
    cfg = HookedTransformerConfig(n_layers=1, d_model=d_head, n_heads=1, d_head=d_head, n_ctx=n_pos, d_vocab=5,
                                  act_fn="relu", attn_only=True, positional_embedding_type="rotary",
                                  rotary_dim=d_head, rotary_base=base, dtype=F64)
    x = torch.randn(n_pos, d_head, generator=torch.Generator().manual_seed(seed), dtype=F64)
    R = circuits.rotary_rotation(cfg, list(range(n_pos)), dtype=F64)
    want = torch.einsum("pd,pde->pe", x, R)
    return [("rotated rows", ch05.rope(x, base), want, bound(d_head, float(x.abs().max())))]


@pair((ch17, "induction_score"), (ch17, "prev_token_score"), (ps, "head_scores"))
def induction_and_prev_token(seed):
    model, tokens = model_and_tokens(seed, 2, d_model=12, n_heads=3, d_head=4)
    n = tokens.shape[1] // 2
    patterns = patterns_of(model, tokens)
    ind, prev = heads.induction_scores(model, tokens=tokens), heads.prev_token_scores(model, tokens=tokens)
    # Means of at most batch * pos entries of [0, 1] (the patterns are the same forward pass).
    tol = bound(tokens.numel() + 2, 1.0)
    out = []
    for layer, pattern in enumerate(patterns):
        out.append((f"induction L{layer}", ch17.induction_score(pattern, n), ind[layer], tol))
        out.append((f"prev_token L{layer}", ch17.prev_token_score(pattern), prev[layer], tol))
    out.append(("ps.head_scores", ps.head_scores(model, tokens), (ind, prev), tol))
    return out


@pair((ch18, "composition_score"), (ps, "k_composition"))
def composition_score(seed):
    model, _ = model_and_tokens(seed, 3, d_model=20, n_heads=2, d_head=4)
    out = []
    for kind in "QKV":
        scores = composition.composition_scores(model, kind)
        for (l1, h1), (l2, h2) in (((0, 0), (1, 1)), ((0, 1), (2, 0)), ((1, 0), (2, 1))):
            W_A = circuits.ov_circuit(model, l1, h1).AB
            W_B = {"Q": circuits.qk_circuit(model, l2, h2).AB, "K": circuits.qk_circuit(model, l2, h2).AB.T,
                   "V": circuits.ov_circuit(model, l2, h2).AB}[kind]
            # A score in [0, 1] from Frobenius norms of products over d_model: 2 d_model + a root.
            tol = bound(4 * 20 + 8, 1.0)
            out.append((f"{kind} L{l1}H{h1}->L{l2}H{h2}", ch18.composition_score(W_A, W_B), float(scores[l1, h1, l2, h2]), tol))
            if kind == "K":
                out.append((f"ps.k_composition L{l1}H{h1}->L{l2}H{h2}", ps.k_composition(model, (l1, h1), (l2, h2)),
                            float(scores[l1, h1, l2, h2]), tol))
    return out


@pair((ch19, "noam"))
def noam(seed):
    d_model, warmup = 16 * (1 + seed), 50 + 25 * seed
    steps = torch.arange(0, 4 * warmup, 7)
    kernel = torch.tensor([noam_lr(int(s), d_model, warmup) for s in steps], dtype=F64)
    return [("noam", ch19.noam(steps, d_model, warmup), kernel, bound(6, d_model ** -0.5))]


@pair((ch19, "smoothed_targets"))
def smoothed_targets(seed):
    g = torch.Generator().manual_seed(seed)
    size, pad, eps = 9 + seed, seed, 0.1 + 0.1 * seed
    target = torch.randint(0, size, (12,), generator=g)
    target[3] = pad  # a padding row
    kernel = LabelSmoothing(size, padding_idx=pad, smoothing=eps).target_distribution(target)
    # float32 tables: eps / (size - 2) and 1 - eps, each one rounding.
    return [("smoothed", ch19.smoothed_targets(target, size, pad, eps), kernel, rounding_bound(2, 1.0, torch.float32))]


@pair((ps, "icl_scores"))
def icl_scores(seed):
    model, _ = model_and_tokens(seed, 2, d_model=12, n_heads=2, d_head=4, n_ctx=24)
    tokens = repeated_random_tokens(4, 12, model.cfg.d_vocab, seed=seed)
    with torch.no_grad():
        logits = model(tokens)
    early, late = 3, 20
    # One-token windows, averaged over the documents, are Olsson et al.'s single tokens.
    # Two log-softmaxes over d_vocab, averaged over the batch; logits of size up to max |logit|.
    tol = bound(2 * (model.cfg.d_vocab + 4) + 4, 1 + float(logits.abs().max()))
    per_doc = ps.icl_scores(logits, tokens, range(early, early + 1), range(late, late + 1))
    # TransformerLens's own per-token loss: entry t - 1 is the loss on token t
    with torch.no_grad():
        per_token = model(tokens, return_type="loss", loss_per_token=True)
    want = float((per_token[:, late - 1] - per_token[:, early - 1]).mean())
    return [("icl", float(per_doc.mean()), want, tol)]


@pair((ps, "ablation_effect"))
def ablation_effect(seed):
    # No package kernel computes problem 5's pair: the kernel here is the forward pass written out
    # by hand (tests/unit/hand_forward.py), with the head's z replaced by its mean, and the two
    # measurements as loops over their entries.
    model, tokens = model_and_tokens(seed, 2, d_model=12, n_heads=3, d_head=4)
    n = tokens.shape[1] // 2
    out = []
    for head, reader in (((0, 1), (1, 2)), ((0, 0), (1, 0)), ((1, 1), (1, 1))):
        logits, patterns, scale = hand.forward(model, tokens, mean_ablate=head)
        want = (float(hand.induction_score(patterns[reader[0]], n)[reader[1]]), hand.second_copy_loss(logits, tokens))
        # the forward pass's roundings, twice (the softmax and the log-softmax pass them on doubled)
        tol = 2 * bound(attn_only_forward_terms(model.cfg, tokens.shape[1]), scale)
        out.append((f"ablate {head}, read {reader}", ps.ablation_effect(model, head, reader, tokens), want, tol))
    return out


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_reference_matches_the_package_kernel(name):
    fn, _ = PAIRS[name]
    for seed in SEEDS:
        with torch.no_grad():
            for what, ref, kernel, tol in fn(seed):
                assert_match(f"{name} (seed {seed}) {what}", ref, kernel, tol)


def _bump(out):
    """The same result, off by one part in a thousand (or by one, for integers)."""
    if isinstance(out, dict):
        first = next(iter(out))
        return {**out, first: _bump(out[first])}
    if isinstance(out, tuple):
        return (_bump(out[0]),) + out[1:]
    if isinstance(out, torch.Tensor):
        if out.is_floating_point():
            return out + 1e-3 * (1 + float(out.abs().max()))
        return out + 1
    if isinstance(out, int):
        return out + 1
    return out + 1e-3 * (1 + abs(out))


@pytest.mark.parametrize("name, ref", sorted(
    (name, f"{module.__name__.rsplit('.', 1)[1]}.{attr}") for name, (_, refs) in PAIRS.items() for module, attr in refs))
def test_a_perturbed_reference_fails(name, ref, monkeypatch):
    fn, _ = PAIRS[name]
    module, attr = getattr(checks, ref.split(".")[0]), ref.split(".")[1]
    original = getattr(module, attr)
    monkeypatch.setattr(module, attr, lambda *a, **k: _bump(original(*a, **k)))
    with pytest.raises(AssertionError, match="differ|vs kernel"):
        with torch.no_grad():
            for what, ref, kernel, tol in fn(0):
                assert_match(f"{name} {what}", ref, kernel, tol)


def test_every_reference_with_a_kernel_is_listed():
    # The references named in the module docstring as having no package counterpart are the
    # only exercise references left out (ps.ablation_effect is compared with a forward pass
    # written out by hand).
    listed = {f"{m.__name__.rsplit('.', 1)[1]}.{a}" for _, refs in PAIRS.values() for m, a in refs}
    references = set()
    for ex in checks.all_exercises().values():
        ref = getattr(ex, "reference", None)
        if callable(ref) and getattr(ref, "__module__", "").startswith("circuitbook.checks"):
            # the checks' module: chNN, or ps for every problem's module (circuitbook.checks.ps.pN)
            references.add(f"{ref.__module__.split('.')[2]}.{ref.__name__}")
    without_kernel = {"ps.design_induction_head", "ch03.rotate_model_weights", "ch03.plane_rotation",
                      "ch04.tied_logits", "ch05.offset_matrix", "ch11.fold_ln", "ch14.row_centred_correlation",
                      "ch15.top_skip_trigram", "ch16.virtual_pattern", "ps.reparametrize",
                      "ps.matched_controls", "ps.patching_shares", "ps.plan_documents",
                      "ps.unrepeated_tokens", "ps.comparison_heads", "ps.spoiled_positions"}
    missing = references - listed - without_kernel
    assert not missing, f"exercise references not compared with a kernel: {sorted(missing)}"
    assert listed <= references | {"ch20.linear_to_tl", "ch13.n_paths"}, sorted(listed - references)
