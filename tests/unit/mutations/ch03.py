"""Planted wrong answers for chapter 3's exercises, each with the diagnosis it must get."""

import math

import torch

from circuitbook.checks.ch03 import plane_rotation

_WRITES = ("W_E", "W_pos", "W_O", "b_O")
_READS = ("W_Q", "W_K", "W_V", "W_U")


def _rot(weights, R, write, read):
    out = {}
    for name, W in weights.items():
        out[name] = write(W) if name in _WRITES else read(W) if name in _READS else W
    return out


def writes_only(weights, R):
    return _rot(weights, R, lambda W: W @ R, lambda W: W)


def reads_only(weights, R):
    return _rot(weights, R, lambda W: W, lambda W: R.T @ W)


def R_on_reads(weights, R):
    return _rot(weights, R, lambda W: W @ R, lambda W: R @ W)


def inverse_rotation(weights, R):  # consistent, but the stream becomes x R^T
    Rinv = torch.linalg.inv(R)
    return _rot(weights, R, lambda W: W @ Rinv, lambda W: R @ W)


def no_unembed(weights, R):
    out = _rot(weights, R, lambda W: W @ R, lambda W: R.T @ W)
    out["W_U"] = weights["W_U"]
    return out


def no_pos(weights, R):
    out = _rot(weights, R, lambda W: W @ R, lambda W: R.T @ W)
    out["W_pos"] = weights["W_pos"]
    return out


def no_b_O(weights, R):
    out = _rot(weights, R, lambda W: W @ R, lambda W: R.T @ W)
    out["b_O"] = weights["b_O"]
    return out


def einsum_version_no_values(weights, R):  # a per-head loop that forgets W_V
    out = dict(weights)
    out["W_E"], out["W_pos"], out["b_O"] = weights["W_E"] @ R, weights["W_pos"] @ R, weights["b_O"] @ R
    out["W_O"] = torch.einsum("lhem,mn->lhen", weights["W_O"], R)
    out["W_Q"] = torch.einsum("nm,lhne->lhme", R, weights["W_Q"])
    out["W_K"] = torch.einsum("nm,lhne->lhme", R, weights["W_K"])
    out["W_U"] = R.T @ weights["W_U"]
    return out


def drops_biases(weights, R):  # returns only the matrices
    return {k: v for k, v in R_on_reads(weights, R).items() if k.startswith("W")} | {
        k: weights[k] for k in ("b_Q", "b_K", "b_V")}


def rotates_b_U_by_scaling(weights, R):  # unrecognised: the logits drift
    out = _rot(weights, R, lambda W: W @ R, lambda W: R.T @ W)
    out["b_U"] = 2 * weights["b_U"]
    return out


def column_convention(d, i, j, theta):
    return plane_rotation(d, i, j, theta).T


def minus_theta(d, i, j, theta):  # the same map as the column-vector convention
    return plane_rotation(d, i, j, -theta)


def swapped_cos_sin(d, i, j, theta):
    return plane_rotation(d, i, j, math.pi / 2 - theta).T


def from_zeros(d, i, j, theta):
    R = torch.zeros(d, d)
    c, s = math.cos(theta), math.sin(theta)
    R[i, i], R[i, j], R[j, i], R[j, j] = c, s, -s, c
    return R


def ones_on_diagonal(d, i, j, theta):
    R = torch.eye(d)
    R[i, j], R[j, i] = math.sin(theta), -math.sin(theta)
    return R


def reflection(d, i, j, theta):
    R = torch.eye(d)
    c, s = math.cos(theta), math.sin(theta)
    R[i, i], R[i, j], R[j, i], R[j, j] = c, s, s, -c
    return R


def degrees(d, i, j, theta):
    return plane_rotation(d, i, j, theta * math.pi / 180)


def double_angle(d, i, j, theta):
    return plane_rotation(d, i, j, 2 * theta)


MUTATIONS = {
    "ch03_ex1": [
        (writes_only, "rotated the writes but not the reads"),
        (reads_only, "rotated the reads but not the writes"),
        (R_on_reads, "same rotation on reads and writes"),
        (inverse_rotation, "rotated by R^T instead of R"),
        (no_unembed, "forgot W_U"),
        (no_pos, "forgot W_pos"),
        (no_b_O, "forgot b_O"),
        (einsum_version_no_values, "forgot W_V"),
        (drops_biases, "wrong keys"),
        (rotates_b_U_by_scaling, "wrong values"),
    ],
    "ch03_ex2": [
        (column_convention, "column-vector convention"),
        (minus_theta, "column-vector convention"),
        (swapped_cos_sin, "cos and sin swapped"),
        (from_zeros, "zeros off the plane"),
        (ones_on_diagonal, "left ones on the diagonal"),
        (reflection, "a reflection, not a rotation"),
        (degrees, "theta read as degrees"),
        (double_angle, "wrong values"),
    ],
}
