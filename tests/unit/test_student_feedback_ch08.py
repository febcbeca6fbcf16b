"""Exercise 8.2's feedback teaches without telling which circuit to transpose (issue 39).

Before: each of the three wrong orientations of the pair (W_QK, W_OV) had its own name ("a
circuit (a)", "(b)", "both circuits"), so the name alone said how many circuits were wrong, and
with two things to transpose, each message was the answer. Now every wrong orientation gets one
name and one message, which says what to compare and which index is which; and where one half is
wrong in some other way, the other half is not said to be right or transposed.

Reference: the three wrong orientations written here by hand from the paper's definitions (the
right pair is (W_Q W_K^T, (W_V W_O)^T), chapter 8's folded working), not read from the check.
"""

from __future__ import annotations

import pytest
import torch

from circuitbook import checks

SEED = 1234
EX = checks.get("ch08_ex2")

WRONG_ORIENTATIONS = {
    "W_QK transposed": lambda W_Q, W_K, W_V, W_O: (W_K @ W_Q.T, (W_V @ W_O).T),
    "W_OV not transposed": lambda W_Q, W_K, W_V, W_O: (W_Q @ W_K.T, W_V @ W_O),
    "both": lambda W_Q, W_K, W_V, W_O: (W_K @ W_Q.T, W_V @ W_O),
}


def test_the_right_pair_passes():
    assert EX.check(lambda W_Q, W_K, W_V, W_O: (W_Q @ W_K.T, W_O.T @ W_V.T), seed=SEED).passed


def test_every_wrong_orientation_gets_one_name_and_one_message():
    results = {case: EX.check(answer, seed=SEED) for case, answer in WRONG_ORIENTATIONS.items()}
    assert not any(results.values())
    # the same feedback whichever circuits are wrong, and how many: nothing tells the cases apart
    assert len({(r.mistake, r.message, r.hint) for r in results.values()}) == 1, results
    result = results["both"]
    assert result.mistake == "orientation of the circuits"
    text = f"{result.mistake} {result.message}".lower()  # the hint, shown before any answer, says "both are [...]"
    for leak in ("both", "one of", "(a)", "(b)", "each is transposed", "not transposed", "is the transpose"):
        assert leak not in text, (leak, str(result))
    # it teaches: what to compare, and which index is which, on each side
    for taught in ("row index", "column index", "query", "key", "source position", "x_i^T W_QK x_j", "W_OV x_j"):
        assert taught in result.message, (taught, result.message)


@pytest.mark.parametrize("ov", ["right", "transposed"])
def test_a_half_wrong_otherwise_does_not_reveal_the_other_halfs_orientation(ov):
    # W_QK wrong in another way (W_Q W_Q^T): the feedback on W_OV is the same whether its
    # orientation is right or not, and says neither
    answer = {"right": lambda W_Q, W_K, W_V, W_O: (W_Q @ W_Q.T, (W_V @ W_O).T),
              "transposed": lambda W_Q, W_K, W_V, W_O: (W_Q @ W_Q.T, W_V @ W_O)}[ov]
    result = EX.check(answer, seed=SEED)
    assert not result.passed and result.mistake == "wrong values"
    assert "W_QK:" in result.message
    assert "W_OV is the right product up to its orientation, which is judged once both are" in result.message
    assert "transposed" not in result.message, result.message
    other = EX.check({"right": lambda W_Q, W_K, W_V, W_O: (W_Q @ W_Q.T, W_V @ W_O),
                      "transposed": lambda W_Q, W_K, W_V, W_O: (W_Q @ W_Q.T, (W_V @ W_O).T)}[ov], seed=SEED)
    assert other.message.split("; ")[1:] == result.message.split("; ")[1:]


@pytest.mark.parametrize("orientation", ["row", "paper"])
def test_a_pair_in_the_wrong_order_is_named_whatever_its_orientation(orientation):
    swap = {"row": lambda W_Q, W_K, W_V, W_O: (W_V @ W_O, W_Q @ W_K.T),
            "paper": lambda W_Q, W_K, W_V, W_O: ((W_V @ W_O).T, W_Q @ W_K.T)}[orientation]
    result = EX.check(swap, seed=SEED)
    assert result.mistake == "returned the pair in the wrong order", str(result)
    assert "transpose" not in result.message


def test_the_check_can_tell_the_orientations_apart():
    # the statement's promise: random weights whose W_QK is not symmetric (nor W_OV)
    inputs = EX.make_inputs(torch.Generator().manual_seed(SEED))
    qk, ov = EX.reference(**inputs)
    assert not torch.allclose(qk, qk.T) and not torch.allclose(ov, ov.T)


# --- Exercise 8.1: the hint asks the question and stops there ---------------------------------
# Before: the hint named the two-factor construction ("the query is then the [d_model + 1] row times
# one [d_model + 1, d_head] matrix, and the key likewise", "one matrix between the query's and the
# key's extended rows"), which, with the exercise's own [x_i, 1] M [x_j, 1]^T, is the answer. Now it
# asks which row times which matrix gives the query, and leaves the rest to the reader.

EX1 = checks.get("ch08_ex1")


def _reference_ex1(W_Q, b_Q, W_K, b_K):  # written here from the exercise's formula, not read from the check
    return torch.cat([W_Q, b_Q[None]]) @ torch.cat([W_K, b_K[None]]).T


# Before: the transpose was named "key on the left" ("Your matrix gives the pair (query i, key j) the
# score the exercise gives (query j, key i)") and the swapped cross terms "swapped the cross terms"
# ("... are each in the other's place"): each name and message said what to swap. Now both get one
# name and one message, which says which index of M reads which vector.

def _cross_terms_swapped(W_Q, b_Q, W_K, b_K):  # the bias row and column each in the other's place
    top = torch.cat([W_Q @ W_K.T, (b_Q @ W_K.T)[:, None]], dim=1)
    return torch.cat([top, torch.cat([(W_Q @ b_K)[None], (b_Q @ b_K)[None, None]], dim=1)])


def test_ex1_reference_passes_and_the_wrong_sides_get_one_name_and_one_message():
    assert EX1.check(_reference_ex1, seed=SEED).passed
    results = [EX1.check(lambda *a: _reference_ex1(*a).T, seed=SEED), EX1.check(_cross_terms_swapped, seed=SEED)]
    assert not any(r.passed for r in results), results
    assert len({(r.mistake, r.message) for r in results}) == 1, results
    result = results[0]
    assert result.mistake != "key on the left"
    text = f"{result.mistake} {result.message}".lower()
    for leak in ("key on the left", "query j, key i", "transpose", "swap", "other's place", ".t"):
        assert leak not in text, (leak, str(result))
    for taught in ("row index", "column index", "query", "key"):
        assert taught in result.message, (taught, result.message)


def test_ex2_wrong_shape_message_does_not_confirm_the_formulas():
    # before: "W_Q^T W_K and W_O W_V are the paper's formulas ... First form the paper's matrices"
    result = EX.check(lambda W_Q, W_K, W_V, W_O: (W_Q.T @ W_K, W_O @ W_V), seed=SEED)
    assert not result.passed, str(result)
    text = f"{result.mistake} {result.message}".lower()
    for leak in ("paper's formulas", "w_q^t w_k", "w_o w_v", "w_q^p = w_q^t"):
        assert leak not in text, (leak, str(result))


def test_ex1_hint_does_not_give_the_construction():
    result = EX1.check(lambda W_Q, b_Q, W_K, b_K: W_Q @ W_K.T, seed=SEED)  # wrong shape: the hint shows
    assert not result.passed and result.hint, str(result)
    hint = result.hint.lower()
    for leak in ("d_model + 1, d_head", "append", "extended row", "and the key likewise", "one matrix between",
                 "[w_q; b_q]", "cat"):
        assert leak not in hint, (leak, result.hint)
    assert "?" in result.hint  # it asks
