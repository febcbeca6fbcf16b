"""The reference guard also catches the library's one-liners (``FunctionExercise.library_answers``).

Under ``checks.core.guarded`` (the hidden tests of ``make assignments``), an answer that calls a
function of the ``circuitbook`` package which its exercise declares as computing its whole
answer fails, as one that calls a reference does. For every declared function this file holds
the attack: an answer that calls it, adapted to the exercise's signature and output (a fake
model object where the library function takes a model and the exercise raw weights). Each
attack passes the check once its exercise's declaration is removed, which proves that it would
succeed, and fails with the declaration, unguarded (the notebook's check) and under the
guard with the library message naming that function. An honest answer (the chapter's solution
as a reader types it into the notebook: the reference's source compiled here, so that its code
is not the reference's) passes under the guard. A function declared by one exercise stays
allowed in another.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import sys
import textwrap
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from circuitbook import checks, circuits, composition, heads, icl, paths
from circuitbook.checks import core
from circuitbook.loss import per_token_loss
from circuitbook.models import encoder_decoder as ed
from circuitbook.train import phases, text
from circuitbook.train.lm import phase_change_step
from circuitbook.train.vaswani import LabelSmoothing, noam_lr

ROOT = Path(__file__).resolve().parents[2]
SEED = 1234
EXERCISES = checks.all_exercises()
DECLARED = {k: v.library_answers for k, v in EXERCISES.items() if getattr(v, "library_answers", ())}


def _no_parameters():
    return iter(())


def _fake_model(n_layers: int, n_heads: int, **weights) -> SimpleNamespace:
    """What the library's model-taking kernels read of a model (its sizes, its weights, no
    parameters to validate), built around an exercise's raw weights: the wrapping a reader would
    write to call them."""
    blocks = [SimpleNamespace(attn=SimpleNamespace(**{k: v[layer] for k, v in weights.items()
                                                       if k in ("W_Q", "W_K", "W_V", "W_O")}))
              for layer in range(n_layers)]
    return SimpleNamespace(cfg=SimpleNamespace(n_layers=n_layers, n_heads=n_heads),
                           named_parameters=_no_parameters, blocks=blocks, **weights)


def _rotary_cfg(d: int, base: float, adjacent: bool) -> SimpleNamespace:
    return SimpleNamespace(positional_embedding_type="rotary", rotary_dim=d, d_head=d, rotary_base=base,
                           rotary_adjacent_pairs=adjacent, dtype=torch.float64)


# --- the attacks, one (or more) per declared function ------------------------------------------------


def _sublayer(x, sublayer, norm, position):
    block = ed.SublayerConnection(x.shape[-1], 0.0, position)
    block.norm = norm
    return block(x, sublayer)


def _embeddings(tokens, lut):
    module = ed.Embeddings(lut.shape[1], lut.shape[0])
    module.lut.weight.data = lut
    return module(tokens)


# built before the check, for every width the exercise draws: the answer only calls forward
_ENCODINGS = {d: ed.PositionalEncoding(d, 0.0, max_len=64) for d in range(2, 40, 2)}


def _offset_from_rope(k, d_model):
    # the chapter's bridge: RoPE's R(k) with adjacent pairs and base 10000 is M_k transposed
    return circuits.rotary_rotation(_rotary_cfg(d_model, 10000.0, True), k, dtype=torch.float64).T.float()


def _rope_from_rotation(x, base):
    R = circuits.rotary_rotation(_rotary_cfg(x.shape[-1], base, False), list(range(x.shape[-2])),
                                 dtype=torch.float64)
    return torch.einsum("...pd,pde->...pe", x.double(), R).to(x.dtype)


def _split_heads(weight, n_heads):
    module = ed.MultiHeadedAttention(n_heads, weight.shape[1])
    module.linears[0].weight.data = weight
    return ed.tl_weights(module)["W_Q"]


def _full_ov(W_E, W_V, W_O, W_U):
    model = _fake_model(1, 1, W_V=W_V[None, None], W_O=W_O[None, None], W_E=W_E, W_U=W_U)
    return circuits.full_ov_circuit(model, 0, 0).AB


def _ffn(x, W1, b1, W2, b2):
    module = ed.PositionwiseFeedForward(W1.shape[1], W1.shape[0], 0.0)
    for lin, W, b in ((module.w_1, W1, b1), (module.w_2, W2, b2)):
        lin.weight.data, lin.bias.data = W, b
    return module(x)


def _path_counts(n_layers, n_heads):
    c = paths.count_paths(n_layers, n_heads)
    return {"direct": c["direct"], "single": c["order_1"], "virtual": c["total"] - 1 - c["order_1"],
            "total": c["total"]}


def _virtual_ov(W_V, W_O, first, second):
    model = _fake_model(W_V.shape[0], W_V.shape[1], W_V=W_V, W_O=W_O)
    return composition.virtual_ov(model, first, second).AB


def _mean_ablate(z, head):
    model = SimpleNamespace(cfg=SimpleNamespace(n_layers=1, n_heads=z.shape[2]), named_parameters=_no_parameters)
    hook = heads.ablate(model, [(0, head)]).fwd_hooks[0][1]
    return hook(z, SimpleNamespace(layer=lambda: 0))


def _two_heads(writer, reader_left, reader_right):
    """Weights [2 layers, 1 head, d, d] whose head 0.0 writes ``W_V W_O = writer`` and whose
    head 1.0 reads through ``W_Q W_K^T = reader_left reader_right^T`` (identities elsewhere)."""
    eye = torch.eye(writer.shape[0], dtype=writer.dtype)
    stack = lambda a, b: torch.stack([a, b])[:, None]  # noqa: E731
    return SimpleNamespace(W_V=stack(eye, eye), W_O=stack(writer, eye), W_Q=stack(eye, reader_left),
                           W_K=stack(eye, reader_right), named_parameters=_no_parameters)


def _composition_by_scores(W_A, W_B):
    eye = torch.eye(W_A.shape[0])
    # V-composition of head 0.0 into head 1.0: W_V W_O of layer 1 is W_B
    weights = _two_heads(W_A, eye, eye)
    weights.W_V = torch.stack([eye, W_B])[:, None]
    return float(composition.composition_scores(weights, "V")[0, 0, 1, 0])


def _composition_by_rotations(W_A, W_B):
    # K-composition reads W_K W_Q^T: the last draw is unrotated
    weights = _two_heads(W_A, torch.eye(W_A.shape[0]), W_B)
    return float(composition.rotated_key_scores(weights, [(1, 0)], n_draws=1)[1, 0][-1, 0])


def _composition_by_kernel(W_A, W_B):
    eye = torch.eye(W_A.shape[0])[None]
    return float(composition._pairwise_scores(W_A[None], eye, W_B[None], eye)[0, 0])


def _composition_by_factors(W_A, W_B):
    eye = torch.eye(W_A.shape[0])[None]
    return float(composition._factor_scores(W_A[None], eye, W_B[None], eye)[0])


def _linear_to_tl(weight, n_heads, which):
    module = ed.MultiHeadedAttention(n_heads, weight.shape[1])
    module.linears["qkvo".index(which)].weight.data = weight
    return ed.tl_weights(module)[f"W_{which.upper()}"]


def _head_scores_by_kernel(model, tokens):
    n = tokens.shape[1] // 2
    return (heads._mean_attention_at_offset(model, tokens, offset=n - 1, first_query=n),
            heads._mean_attention_at_offset(model, tokens, offset=1, first_query=1))


def _k_composition_by_kernel(model, writer, reader):
    (l0, h0), (l1, h1) = writer, reader
    V, O_T = model.W_V[l0, h0][None], model.W_O[l0, h0].T[None]
    with torch.no_grad():
        return float(composition._pairwise_scores(V, O_T, model.W_K[l1, h1][None], model.W_Q[l1, h1][None])[0, 0])


def _head_scores_by_pattern_score(model, tokens):
    n = tokens.shape[1] // 2
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    patterns = [cache["pattern", layer] for layer in range(model.cfg.n_layers)]
    induction = torch.stack([p.diagonal(offset=-(n - 1), dim1=-2, dim2=-1)[..., 1:].mean((0, 2))
                             for p in patterns])
    return induction, torch.stack([heads.prev_token_pattern_score(p) for p in patterns])


def _k_composition_by_factors(model, writer, reader):
    (l0, h0), (l1, h1) = writer, reader
    with torch.no_grad():
        W_OV = model.W_V[l0, h0] @ model.W_O[l0, h0]
        W_QK = model.W_Q[l1, h1] @ model.W_K[l1, h1].T
    return _composition_by_factors(W_OV, W_QK.T)


def _k_composition_by_rotations(model, writer, reader):
    scores = composition.rotated_key_scores(model, [reader], n_draws=1)[tuple(reader)]
    return float(scores[-1, writer[0] * model.cfg.n_heads + writer[1]])


def _icl_by_losses(logits, tokens, early, late):
    losses = per_token_loss(logits, tokens)  # entry t - 1: the loss of token t
    return losses[:, [t - 1 for t in late]].mean(-1) - losses[:, [t - 1 for t in early]].mean(-1)


def _own_losses(logits, tokens):
    """Problem 6's first half as a reader writes it: entry t - 1 is the loss of token t."""
    return -logits.log_softmax(-1)[:, :-1].gather(-1, tokens[:, 1:, None])[..., 0]


def _icl_by_kernel(logits, tokens, early, late):
    return icl.icl_score_from_losses(_own_losses(logits, tokens), early, late)


def _icl_by_rows(logits, tokens, early, late):
    bands = {"early": (early.start, early.stop), "late": (late.start, late.stop)}
    return text.row_icl_scores(_own_losses(logits, tokens), **bands).to(logits.dtype)


def _icl_by_positions(logits, tokens, early, late):
    bands = {"early": (early.start, early.stop), "late": (late.start, late.stop)}
    return torch.tensor([phases.icl_score_from_positions(row, **bands)
                         for row in _own_losses(logits, tokens).tolist()], dtype=logits.dtype)


# (exercise, the declared name its answer calls first) -> the answer
ATTACKS = {
    ("ch02_ex2", "circuitbook.models.encoder_decoder.SublayerConnection.forward"): _sublayer,
    ("ch04_ex1", "circuitbook.models.encoder_decoder.Embeddings.forward"): _embeddings,
    ("ch05_ex1", "circuitbook.models.encoder_decoder.sinusoidal_table"):
        lambda n_pos, d_model: ed.sinusoidal_table(n_pos, d_model),
    ("ch05_ex1", "circuitbook.models.encoder_decoder.PositionalEncoding.forward"):
        lambda n_pos, d_model: _ENCODINGS[d_model](torch.zeros(1, n_pos, d_model))[0],
    ("ch05_ex2", "circuitbook.circuits.rotary_rotation"): _offset_from_rope,
    ("ch05_ex3", "circuitbook.circuits.rotary_rotation"): _rope_from_rotation,
    ("ch07_ex1", "circuitbook.models.encoder_decoder.tl_weights"): _split_heads,
    ("ch09_ex1", "circuitbook.circuits.full_ov_circuit"): _full_ov,
    ("ch10_ex1", "circuitbook.models.encoder_decoder.PositionwiseFeedForward.forward"): _ffn,
    ("ch11_ex1", "torch.nn.functional.layer_norm"):
        lambda x, gamma, beta, eps=1e-5: torch.nn.functional.layer_norm(x, x.shape[-1:], gamma, beta, eps),
    ("ch13_ex1", "circuitbook.paths.count_paths"):
        lambda n_layers, n_heads: paths.count_paths(n_layers, n_heads)["total"],
    ("ch16_ex1", "circuitbook.composition.virtual_ov"): _virtual_ov,
    ("ch17_ex2", "circuitbook.heads.prev_token_pattern_score"): lambda pattern: heads.prev_token_pattern_score(pattern),
    ("ch17_ex3", "circuitbook.heads.Ablation._hook"): _mean_ablate,
    ("ch17_ex4", "circuitbook.train.lm.phase_change_step"):
        lambda steps, second_copy, chance: phase_change_step({"step": steps, "loss_second_copy": second_copy},
                                                             chance=chance),
    ("ch18_ex1", "circuitbook.composition.composition_scores"): _composition_by_scores,
    ("ch18_ex1", "circuitbook.composition.rotated_key_scores"): _composition_by_rotations,
    ("ch18_ex1", "circuitbook.composition._pairwise_scores"): _composition_by_kernel,
    ("ch18_ex1", "circuitbook.composition._factor_scores"): _composition_by_factors,
    ("ch19_ex1", "circuitbook.train.vaswani.noam_lr"):
        lambda step, d_model, warmup: torch.tensor([noam_lr(int(s), d_model, warmup) for s in step],
                                                   dtype=torch.float64),
    ("ch19_ex2", "circuitbook.train.vaswani.LabelSmoothing.target_distribution"):
        lambda target, size, padding_idx, eps: LabelSmoothing(size, padding_idx, eps).target_distribution(target),
    ("ch20_ex1", "circuitbook.models.encoder_decoder.tl_weights"): _linear_to_tl,
    ("ps_p2", "circuitbook.paths.count_paths"): _path_counts,
    ("ps_p4", "circuitbook.heads.induction_scores"):
        lambda model, tokens: (heads.induction_scores(model, tokens=tokens),
                               heads.prev_token_scores(model, tokens=tokens)),
    ("ps_p4", "circuitbook.heads.prev_token_scores"):
        lambda model, tokens: tuple(reversed((heads.prev_token_scores(model, tokens=tokens),
                                              heads.induction_scores(model, tokens=tokens)))),
    ("ps_p4", "circuitbook.heads._mean_attention_at_offset"): _head_scores_by_kernel,
    ("ps_p4", "circuitbook.heads.prev_token_pattern_score"): _head_scores_by_pattern_score,
    ("ps_p5b", "circuitbook.composition.composition_scores"):
        lambda model, writer, reader: float(composition.composition_scores(model, "K")[(*writer, *reader)]),
    ("ps_p5b", "circuitbook.composition.rotated_key_scores"): _k_composition_by_rotations,
    ("ps_p5b", "circuitbook.composition._pairwise_scores"): _k_composition_by_kernel,
    ("ps_p5b", "circuitbook.composition._factor_scores"): _k_composition_by_factors,
    ("ps_p6", "circuitbook.icl.icl_scores"):
        lambda logits, tokens, early, late: icl.icl_scores(logits, tokens, early, late),
    ("ps_p6", "circuitbook.loss.per_token_loss"): _icl_by_losses,
    ("ps_p6", "circuitbook.icl.icl_score_from_losses"): _icl_by_kernel,
    ("ps_p6", "circuitbook.train.text.row_icl_scores"): _icl_by_rows,
    ("ps_p6", "circuitbook.train.phases.icl_score_from_positions"): _icl_by_positions,
}


def test_every_declared_function_has_its_attack():
    declared = {(ex_id, name) for ex_id, names in DECLARED.items() for name in names}
    assert declared == set(ATTACKS), (f"declared without an attack: {sorted(declared - set(ATTACKS))}; "
                                      f"attacked but not declared: {sorted(set(ATTACKS) - declared)}")


@pytest.mark.parametrize("ex_id, name", sorted(ATTACKS), ids=lambda v: v.rsplit(".", 1)[-1])
def test_a_library_answer_would_pass_and_fails_in_the_notebook_and_guarded(ex_id, name):
    ex = EXERCISES[ex_id]
    attack = ATTACKS[ex_id, name]
    undeclared = dataclasses.replace(ex, library_answers=()).check(attack, seed=SEED)
    assert undeclared.passed, f"the attack through {name} would not succeed: {undeclared}"
    # the notebook's check (unguarded) and the graded one (guarded) agree
    for result in (ex.check(attack, seed=SEED), core.guarded(ex.check, attack, seed=SEED)):
        assert not result.passed and result.mistake == "library solution", str(result)
        assert result.message == core.LIBRARY_MESSAGE.format(name=name), result.message
        assert name in result.message and "your own code" in result.message
        assert result.category() == "library solution"


def _honest(ex) -> types.FunctionType:
    """The chapter's solution as a reader types it into a notebook cell: the reference's source,
    compiled here (its code is then not the reference's, so only what it calls can trip the
    guard), with the names a notebook would have imported."""
    namespace = {"torch": torch, "math": math}
    exec(compile(textwrap.dedent(inspect.getsource(ex.reference)), "<notebook cell>", "exec"), namespace)  # noqa: S102
    return namespace[ex.reference.__name__]


@pytest.mark.parametrize("ex_id", sorted(DECLARED))
def test_an_honest_answer_passes_under_the_guard(ex_id):
    ex = EXERCISES[ex_id]
    answer = _honest(ex)
    assert answer.__code__ is not ex.reference.__code__
    result = core.guarded(ex.check, answer, seed=SEED)
    assert result.passed, str(result)


def test_another_exercises_library_answer_is_allowed():
    """The guard watches only the functions of the exercise being checked: tl_weights answers
    ch07_ex1 and ch20_ex1 (declared there) but is a building block of ch20_ex2, whose statement
    builds on 20.1; count_paths, declared by ch13_ex1 and ps_p2, is nothing to ch01_ex1."""
    assert "circuitbook.models.encoder_decoder.tl_weights" in EXERCISES["ch20_ex1"].library_answers
    assert not EXERCISES["ch20_ex2"].library_answers

    def ov_from_linears(w_v, w_o, n_heads):
        module = ed.MultiHeadedAttention(n_heads, w_v.shape[1])
        module.linears[2].weight.data, module.linears[3].weight.data = w_v, w_o
        w = ed.tl_weights(module)
        return w["W_V"] @ w["W_O"]

    assert core.guarded(EXERCISES["ch20_ex2"].check, ov_from_linears, seed=SEED).passed
    assert not core.guarded(EXERCISES["ch20_ex1"].check, _linear_to_tl, seed=SEED).passed

    # count_paths is ps_p2's and ch13_ex1's, not ch01_ex1's: an answer that calls it on the way passes
    def stream_before(embed, pos_embed, attn_out, mlp_out, layer):
        assert paths.count_paths(1, 1)["total"] == 2
        return embed + pos_embed + attn_out[:layer].sum(0) + mlp_out[:layer].sum(0)

    assert core.guarded(EXERCISES["ch01_ex1"].check, stream_before, seed=SEED).passed


def test_ablate_stays_a_building_block_of_problem_5():
    """ablate's hook is chapter 17's mean-ablation exercise (ch17_ex3 declares it), and problem
    5 asks for the effect of an ablation, measured with ablate: its honest answer, which calls
    ablate, passes under the guard."""
    assert "circuitbook.heads.Ablation._hook" in EXERCISES["ch17_ex3"].library_answers
    ex = EXERCISES["ps_p5"]
    assert not ex.library_answers and "ablate" in inspect.getsource(ex.reference)
    assert core.guarded(ex.check, _honest(ex), seed=SEED).passed


def test_every_declared_name_is_a_library_function():
    for ex_id, names in DECLARED.items():
        assert isinstance(EXERCISES[ex_id], checks.FunctionExercise), ex_id
        assert isinstance(names, tuple) and len(set(names)) == len(names), ex_id
        for name in names:
            # the package's own (never a reference of circuitbook.checks), or torch's where the
            # exercise asks for it from scratch
            assert name.startswith(("circuitbook.", "torch.")) and not name.startswith("circuitbook.checks"), name
            functions = core._library_functions(name)
            assert functions and all(isinstance(f, types.FunctionType) for f in functions), name
    with pytest.raises(ValueError):
        core._library_functions("nowhere.at.all")
    with pytest.raises(TypeError):
        core._library_functions("circuitbook.composition.KINDS")


def test_unguarded_only_the_library_is_watched():
    """In the reader's notebook the declared names are watched (the check agrees with the graded
    one), the references are not: the guard alone watches those."""
    seen = []
    assert core.call_answer(lambda a, b: seen.append((a, b)) or a + b, (1, 2), {}) == 3
    assert seen == [(1, 2)]
    with pytest.raises(ValueError):
        core.call_answer(lambda: None, library=("no.such.module.function",))
    with pytest.raises(core.LibraryAnswerCalled):
        core.call_answer(lambda: paths.count_paths(2, 2), library=("circuitbook.paths.count_paths",))
    assert core.call_answer(lambda: checks.ps.path_counts(2, 2), library=("circuitbook.paths.count_paths",)) \
        == checks.ps.path_counts(2, 2)


def test_a_caught_tripwire_still_fails_and_a_reference_keeps_its_message():
    ex = EXERCISES["ps_p2"]

    def hides_it(n_layers, n_heads):
        try:
            return _path_counts(n_layers, n_heads)
        except BaseException:  # noqa: BLE001 - a submission hiding the tripwire
            total = (1 + n_heads) ** n_layers
            return {"direct": 1, "single": n_layers * n_heads, "virtual": total - 1 - n_layers * n_heads,
                    "total": total}

    result = core.guarded(ex.check, hides_it, seed=SEED)
    assert result.mistake == "library solution" and "circuitbook.paths.count_paths" in result.message
    result = core.guarded(ex.check, lambda *a, **k: checks.ps.path_counts(*a, **k), seed=SEED)
    assert result.mistake == "reference solution" and result.message == core.REFERENCE_MESSAGE


def test_the_hidden_test_catches_a_library_answer():
    sys.path.insert(0, str(ROOT / "scripts"))
    import assignments

    code = assignments.hidden_test("ps_p2", "path_counts", {}, {})
    with pytest.raises(AssertionError, match="library solution"):
        exec(code, {"path_counts": _path_counts})  # noqa: S102 - our own generated test
    # the public test (the notebook's own check) runs unguarded and refuses it too
    assert EXERCISES["ps_p2"].check(_path_counts, seed=SEED).mistake == "library solution"
