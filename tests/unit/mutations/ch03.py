"""Planted wrong answers for chapter 3's exercises, each with the diagnosis it must get."""



from circuitbook.checks.ch03 import plane_rotation

_WRITES = ("W_E", "W_pos", "W_O", "b_O")
_READS = ("W_Q", "W_K", "W_V", "W_U")


def _rot(weights, R, write, read):
    out = {}
    for name, W in weights.items():
        out[name] = write(W) if name in _WRITES else read(W) if name in _READS else W
    return out


def R_on_reads(weights, R):
    return _rot(weights, R, lambda W: W @ R, lambda W: R @ W)


def drops_biases(weights, R):  # returns only the matrices
    return {k: v for k, v in R_on_reads(weights, R).items() if k.startswith("W")} | {
        k: weights[k] for k in ("b_Q", "b_K", "b_V")}


def rotates_b_U_by_scaling(weights, R):  # unrecognised: the logits drift
    out = _rot(weights, R, lambda W: W @ R, lambda W: R.T @ W)
    out["b_U"] = 2 * weights["b_U"]
    return out


def double_angle(d, i, j, theta):
    return plane_rotation(d, i, j, 2 * theta)


MUTATIONS = {
    "ch03_ex1": [
        (drops_biases, "wrong keys"),
        (rotates_b_U_by_scaling, "wrong values"),
    ],
    "ch03_ex2": [
        (double_angle, "wrong values"),
    ],
}
