"""The explainers' data come from the model's real attention, and their widgets carry it.

References are independent of the code under test: the model's own forward pass
(TransformerLens's cache), dense float64 products of the weights, path counts enumerated one
chain at a time, and term sets derived by hand from the path expansion.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from circuitbook.widgets import explainers
from circuitbook.widgets.explainers import (
    CONFIGURATIONS,
    CompositionBuilder,
    InductionStepper,
    builder_data,
    composition_builder,
    control_tokens,
    induction_measures,
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
    seq = data["sequences"]["random"]
    tokens = torch.tensor([[int(t[1:]) for t in seq["tokens"]]])
    _, cache = model.run_with_cache(tokens)
    pattern = cache["pattern", l0][0, h0]
    for q, k, w in seq["prev_arcs"]:
        assert k == int(pattern[q].argmax()) and abs(w - float(pattern[q].max())) < 1e-3
    ind = cache["pattern", l1][0, h1, seq["query"]]
    for q, k, w in seq["ind_arcs"]:
        assert abs(w - float(ind[k])) < 1e-3
    for seq in data["sequences"].values():
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
    tokens = [5, 9, 7, 9, 3, 9]                     # the last token's last earlier copy is at 3
    for seed in range(20):
        rand = control_tokens(tokens, 100, 110, seed)
        assert len(rand) == len(tokens) and all(100 <= t < 110 for t in rand)
        assert [i for i, t in enumerate(rand[:-1]) if t == rand[-1]] == [3]


class WordTokenizer:
    """A stand-in tokenizer: one id per word (ids 1..), a leading space kept on each word."""

    def __init__(self):
        self.vocab: dict[str, int] = {}

    def __call__(self, text: str) -> dict:
        pieces = re.findall(r" ?\S+", text)
        return {"input_ids": [self.vocab.setdefault(p, len(self.vocab) + 1) for p in pieces]}

    def decode(self, ids: list[int]) -> str:
        names = {i: p for p, i in self.vocab.items()}
        return "".join(names.get(i, f"<{i}>") for i in ids)


def test_stepper_with_a_tokenizer_reads_the_real_text():
    model, tok = _model(), WordTokenizer()
    text = "a b c d e a"
    data = stepper_data(model, tokenizer=tok, text=text, random_ids=(20, 60))
    seq = data["sequences"]["text"]
    assert seq["tokens"] == [" a", " b", " c", " d", " e", " a"]   # a space in front: first == last
    assert (seq["earlier"], seq["target"], seq["expected"]) == (0, 1, " b")
    assert seq["head_top"][0][0] == " b"
    rand = data["sequences"]["random"]
    assert rand["earlier"] == 0 and rand["tokens"][-1] == rand["tokens"][0]


def test_induction_measures_are_the_forward_pass():
    model = _model()
    seqs = [[3, 8, 5, 12, 9, 3], [4, 2, 11, 7, 6, 7]]   # one earlier copy each: at 0, at 3
    got = induction_measures(model, seqs, (1, 0))
    with torch.no_grad():
        logits, cache = model.run_with_cache(torch.tensor(seqs))
    probs = logits.double().softmax(-1)
    for b, (e, row) in enumerate(zip([0, 3], seqs)):
        want = [float(cache["pattern", 1][b, 0, 5, e + 1]), float(probs[b, 5, row[e + 1]]),
                float(probs[b, e, row[e + 1]])]
        assert torch.allclose(got[b].double(), torch.tensor(want, dtype=torch.float64), atol=1e-5)
    assert got[:, 0].min() > 0.9  # the hand-built circuit finds the token after the copy


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
    norms = data["norms"]
    want = {"direct": (W_E @ W_U).norm(), "h0_ov": (W_E @ W_A @ W_U).norm(),
            "h1_ov": (W_E @ readers["V"] @ W_U).norm(), "virtual": (W_A @ readers["V"]).norm()}
    for key, value in want.items():
        assert abs(norms[key] - float(value)) <= 1e-4 * float(value), key
        shown = re.findall(r"= (\d+\.\d)", data["sizes"][key])[-1]  # printed to 0.1
        assert abs(float(shown) - float(value)) <= 0.051, key
    assert data["heads"] == {"H0": "0.0", "H1": "1.1"}


# Which terms of the two-head expansion exist, derived by hand: the logits always hold the
# direct path and each head's own OV path, and the virtual head H1∘H0 exactly when H1's values
# read H0; H1's score always has the token-token term, and one term for each side (query,
# key) that reads H0, plus the cross term when both do.
HAND_TERMS = {
    "": {"direct", "h0_ov", "h1_ov", "qk_direct"},
    "q": {"direct", "h0_ov", "h1_ov", "qk_direct", "q_comp"},
    "k": {"direct", "h0_ov", "h1_ov", "qk_direct", "k_comp"},
    "v": {"direct", "h0_ov", "h1_ov", "virtual", "qk_direct"},
    "qk": {"direct", "h0_ov", "h1_ov", "qk_direct", "q_comp", "k_comp", "qk_comp"},
    "qv": {"direct", "h0_ov", "h1_ov", "virtual", "qk_direct", "q_comp"},
    "kv": {"direct", "h0_ov", "h1_ov", "virtual", "qk_direct", "k_comp"},
    "qkv": {"direct", "h0_ov", "h1_ov", "virtual", "qk_direct", "q_comp", "k_comp", "qk_comp"},
}


def _visible(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


def test_builder_terms_per_configuration_are_the_hand_derived_ones():
    data = builder_data(_model(), prev_head=(0, 0), induction_head=(1, 1))
    assert set(data["configurations"]) == set(HAND_TERMS) == set(CONFIGURATIONS)
    for config, want in HAND_TERMS.items():
        got = {t["id"] for t in data["terms"] if set(t["needs"]) <= set(config)}
        assert got == want, config
        assert data["configurations"][config], config
    # every configuration gets its own sentence
    assert len(set(data["configurations"].values())) == len(HAND_TERMS)
    # the mathematics is typeset: no raw TeX in what a reader sees
    shown = [t["formula"] for t in data["terms"]] + [data["note"], data["scaling"]["formula"]]
    shown += list(data["sizes"].values()) + list(data["configurations"].values())
    for html in shown:
        assert not re.search(r"[_^]\{|\\[A-Za-z]", _visible(html)), html


def _enumerated_counts(n: int, big_l: int) -> dict[str, int]:
    """Path counts by listing every chain of heads (one per layer at most, layers increasing)."""
    heads = [(layer, h) for layer in range(big_l) for h in range(n)]
    chains = [c for r in range(big_l + 1) for c in itertools.combinations(heads, r)
              if len({layer for layer, _ in c}) == r]
    scores = 0
    for layer, _ in heads:  # each head's score: (query chain, key chain) pairs ending before it
        before = [c for c in chains if all(lay < layer for lay, _ in c)]
        scores += len(before) ** 2
    return {"logits": len(chains), "virtual": sum(len(c) >= 2 for c in chains), "scores": scores}


def test_scaling_counts_match_enumeration_and_hand_counts():
    # The builder's table comes from circuitbook.paths' counts; check it against chains listed
    # one by one, and two layers by hand (direct + 2n heads + n^2 virtual heads).
    counts = builder_data(_model(), prev_head=(0, 0), induction_head=(1, 1))["scaling"]["counts"]
    for n, big_l in [(1, 1), (1, 2), (2, 2), (3, 2), (2, 3), (1, 4)]:
        got = {k: int(v[0]) for k, v in counts[f"{n},{big_l}"].items()}
        assert got == _enumerated_counts(n, big_l), (n, big_l)
    for n in range(1, 13):
        assert int(counts[f"{n},2"]["logits"][0]) == 1 + 2 * n + n * n
        assert int(counts[f"{n},2"]["virtual"][0]) == n * n
    assert {k: int(v[0]) for k, v in counts["1,2"].items()} == {"logits": 4, "virtual": 1, "scores": 5}
    assert counts["12,12"]["logits"] == [str(13**12), "23,298,085,122,481"]


@pytest.mark.skipif(shutil.which("node") is None, reason="no Node.js")
def test_the_page_and_the_stepper_print_a_share_alike():
    """explainers.percent (what the page glues) against induction_stepper.js's percent (what the
    live widget prints), run in Node, on every value the stored 3-decimal attention can take and
    on the boundaries of the one-decimal band; 0.945 is the tie (100 * 0.945 is exactly 94.5)
    that Python's round() sends to 94 and Math.round to 95."""
    values = [i / 1000 for i in range(1001)] + [0.9949, 0.995, 0.9995, 0.99949, 0.99951, 0.999999]
    js = Path(explainers.__file__).with_name("induction_stepper.js")
    script = (f"const m = await import({js.as_uri()!r});"
              f"process.stdout.write(JSON.stringify({json.dumps(values)}.map(m.percent)));")
    run = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "NODE_NO_WARNINGS": "1"})
    assert run.returncode == 0, run.stderr
    differ = [(v, p, j) for v, j in zip(values, json.loads(run.stdout)) if (p := explainers.percent(v)) != j]
    assert not differ, f"the page and the widget print different shares (value, page, widget): {differ[:10]}"
