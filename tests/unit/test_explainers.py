"""The explainers' data come from the model's real attention, and their widgets carry it."""

from __future__ import annotations

import torch

from circuitbook.widgets.explainers import (
    CompositionBuilder,
    InductionStepper,
    builder_data,
    composition_builder,
    induction_stepper,
    stepper_data,
)
from conftest import build_induction_model


def _model():
    return build_induction_model(d_vocab=64, n_ctx=40)


def test_stepper_arcs_are_the_models_attention():
    model = _model()
    data = stepper_data(model)
    (l0, h0), (l1, h1) = [tuple(map(int, data[k].split("."))) for k in ("prev_head", "induction_head")]
    for mode, seq in data["sequences"].items():
        tokens = torch.tensor([[int(t[1:]) if mode == "random" else 0 for t in seq["tokens"]]])
        if mode == "random":
            _, cache = model.run_with_cache(tokens)
            pattern = cache["pattern", l0][0, h0]
            for q, k, w in seq["prev_arcs"]:
                assert k == int(pattern[q].argmax()) and abs(w - float(pattern[q].max())) < 1e-3
            ind = cache["pattern", l1][0, h1, seq["query"]]
            for q, k, w in seq["ind_arcs"]:
                assert abs(w - float(ind[k])) < 1e-3
        # this hand-built model is a perfect induction circuit: it must find the earlier occurrence
        assert seq["target"] == seq["earlier"] + 1
        assert seq["ind_arcs"][0][1] == seq["target"]
        assert seq["head_top"][0][0] == seq["expected"]
    assert len(data["steps"]) == 5
    assert all(step["title"] and step["text"] for step in data["steps"])


def test_random_control_keeps_exactly_one_earlier_occurrence():
    seq = stepper_data(_model())["sequences"]["random"]
    last = seq["tokens"][-1]
    assert [i for i, t in enumerate(seq["tokens"][:-1]) if t == last] == [seq["earlier"]]


def test_widgets_carry_their_data_and_code():
    model = _model()
    stepper = induction_stepper(model)
    assert isinstance(stepper, InductionStepper) and stepper.step == 0 and stepper.mode == "text"
    assert "export default" in str(stepper._esm) and stepper.data["steps"]
    builder = composition_builder(model, model_name="a hand-built model")
    assert isinstance(builder, CompositionBuilder) and (builder.q, builder.k, builder.v) == (False, True, False)
    assert set(builder.data["sizes"]) >= {"direct", "h0_ov", "h1_ov", "virtual", "q_comp", "k_comp"}


def test_builder_scores_and_sizes_match_dense_float64_products():
    # Independent reference: every matrix multiplied out densely in float64 from the weights.
    model = _model()
    (l0, h0), (l1, h1) = (0, 0), (1, 1)
    data = builder_data(model, prev_head=(l0, h0), induction_head=(l1, h1))
    W_E, W_U = model.W_E.detach().double(), model.W_U.detach().double()
    W_Q, W_K, W_V, W_O = (w.detach().double() for w in (model.W_Q, model.W_K, model.W_V, model.W_O))
    W_A = W_V[l0, h0] @ W_O[l0, h0]  # the writer's OV circuit [d_model, d_model]
    W_QK = W_Q[l1, h1] @ W_K[l1, h1].T
    readers = {"Q": W_QK, "K": W_QK.T, "V": W_V[l1, h1] @ W_O[l1, h1]}
    for kind, W_B in readers.items():
        want = float((W_A @ W_B).norm() / (W_A.norm() * W_B.norm()))
        assert abs(data["scores"][kind] - want) < 1e-5, kind  # float32 model: scores to ~1e-6
    sizes = data["sizes"]

    def shown(label: str) -> float:  # the number a size string ends with, printed to 0.1
        return float(sizes[label].rsplit("= ", 1)[1])

    # Printed with one decimal: within 0.05 of the float64 value (plus float32 rounding).
    assert abs(shown("direct") - float((W_E @ W_U).norm())) <= 0.051
    assert abs(shown("h0_ov") - float((W_E @ W_A @ W_U).norm())) <= 0.051
    assert abs(shown("h1_ov") - float((W_E @ readers["V"] @ W_U).norm())) <= 0.051
    assert abs(shown("virtual") - float((W_A @ readers["V"]).norm())) <= 0.051
    assert data["heads"] == {"H0": "0.0", "H1": "1.1"}
