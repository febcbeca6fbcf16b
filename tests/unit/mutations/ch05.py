"""Planted wrong answers for chapter 5's exercises, each with the diagnosis it must get."""

import math

import torch


def _table(n_pos, d_model, *, base=10000.0, two=True, first=0, swap=False, halves=False, times=False):
    pos = torch.arange(first, first + n_pos).float()[:, None]
    i = torch.arange(0, d_model // 2).float()
    e = (2 * i if two else i) / d_model
    ang = pos * base ** e if times else pos / base ** e
    s, c = (ang.cos(), ang.sin()) if swap else (ang.sin(), ang.cos())
    if halves:
        return torch.cat([s, c], -1)
    pe = torch.zeros(n_pos, d_model)
    pe[:, 0::2], pe[:, 1::2] = s, c
    return pe


def swapped(n_pos, d_model):
    return _table(n_pos, d_model, swap=True)


def no_two(n_pos, d_model):
    return _table(n_pos, d_model, two=False)


def base_1000(n_pos, d_model):
    return _table(n_pos, d_model, base=1000.0)


def halves(n_pos, d_model):
    return _table(n_pos, d_model, halves=True)


def from_one(n_pos, d_model):
    return _table(n_pos, d_model, first=1)


def times(n_pos, d_model):
    return _table(n_pos, d_model, times=True)


def own_index(n_pos, d_model):
    # the common one-liner: one exponent per column, sin on even and cos on odd columns
    div = 10000 ** (torch.arange(d_model).float() / d_model)
    ang = torch.arange(n_pos).float()[:, None] / div
    pe = ang.clone()
    pe[:, 0::2], pe[:, 1::2] = ang[:, 0::2].sin(), ang[:, 1::2].cos()
    return pe


def column_2j(n_pos, d_model):
    div = 10000 ** (2 * torch.arange(d_model).float() / d_model)
    ang = torch.arange(n_pos).float()[:, None] / div
    pe = ang.clone()
    pe[:, 0::2], pe[:, 1::2] = ang[:, 0::2].sin(), ang[:, 1::2].cos()
    return pe


def sin_only(n_pos, d_model):
    pe = _table(n_pos, d_model)
    pe[:, 1::2] = pe[:, 0::2]
    return pe


def transposed_table(n_pos, d_model):
    return _table(n_pos, d_model).T


def _M(k, d_model, *, sign=1.0, col=False, freq=None, halves=False):
    half = d_model // 2
    i = torch.arange(half).float()
    w = 1.0 / 10000 ** (2 * i / d_model) if freq is None else freq
    t = sign * k * w
    M = torch.zeros(d_model, d_model)
    for j in range(half):
        a, b = (j, j + half) if halves else (2 * j, 2 * j + 1)
        c, s = math.cos(t[j]), math.sin(t[j])
        M[a, a], M[b, b] = c, c
        M[a, b], M[b, a] = (s, -s) if col else (-s, s)
    return M


def column_convention(k, d_model):
    return _M(k, d_model, col=True)


def negative_angle(k, d_model):  # the same map as the column convention
    return _M(k, d_model, sign=-1.0)


def no_k(k, d_model):
    return _M(1, d_model)


def same_angle(k, d_model):
    return _M(k, d_model, freq=torch.ones(d_model // 2))


def reversed_freqs(k, d_model):
    i = torch.arange(d_model // 2).float()
    return _M(k, d_model, freq=(1.0 / 10000 ** (2 * i / d_model)).flip(0))


def no_two_M(k, d_model):
    i = torch.arange(d_model // 2).float()
    return _M(k, d_model, freq=1.0 / 10000 ** (i / d_model))


def base_1000_M(k, d_model):
    i = torch.arange(d_model // 2).float()
    return _M(k, d_model, freq=1.0 / 1000 ** (2 * i / d_model))


def halves_M(k, d_model):
    return _M(k, d_model, halves=True)


def identity(k, d_model):
    return torch.eye(d_model)


def dense_lstsq(k, d_model):  # fit M from a few positions: not the exact block matrix
    pe = _table(3, d_model)
    return torch.linalg.pinv(pe) @ _table(3 + k, d_model)[k:]


def _rot(x, base, *, pairs=False, sign=1.0, two=True, start=0, rev=False, up=False, only_first=False):
    n, d = x.shape
    h = d // 2
    m = torch.arange(h).to(x.dtype)
    w = base ** ((2 * m if two else m) / d) if up else 1.0 / base ** ((2 * m if two else m) / d)
    if rev:
        w = w.flip(0)
    ang = sign * (torch.arange(n).to(x.dtype)[:, None] + start) * w
    c, s = ang.cos(), ang.sin()
    if pairs:
        a, b = x[:, 0::2], x[:, 1::2]
        out = torch.empty_like(x)
        out[:, 0::2], out[:, 1::2] = a * c - b * s, a * s + b * c
        return out
    a, b = x[:, :h], x[:, h:]
    if only_first:
        return torch.cat([a * c - b * s, b], -1)
    return torch.cat([a * c - b * s, a * s + b * c], -1)


def rope_pairs(x, base):
    return _rot(x, base, pairs=True)


def rope_clockwise(x, base):
    return _rot(x, base, sign=-1.0)


def rope_no_two(x, base):
    return _rot(x, base, two=False)


def rope_from_one(x, base):
    return _rot(x, base, start=1)


def rope_reversed(x, base):
    return _rot(x, base, rev=True)


def rope_base_10000(x, base):
    return _rot(x, 10000.0)


def rope_up(x, base):  # in float64, as the hint says: the angles round alike
    return _rot(x.double(), base, up=True).float()


def rope_up_float32(x, base):  # huge float32 angles round differently: unnamed
    return _rot(x, base, up=True)


def rope_half_only(x, base):  # forgot to write the second coordinate of each plane
    return _rot(x, base, only_first=True)


def rope_unchanged(x, base):
    return x.clone()


MUTATIONS = {
    "ch05_ex1": [
        (swapped, "sin and cos swapped"),
        (no_two, "exponent i/d_model instead of 2i/d_model"),
        (own_index, "odd columns use their own index"),
        (column_2j, "exponent 2j/d_model with j the column index"),
        (base_1000, "base 1000 instead of 10000"),
        (halves, "sines and cosines in two halves"),
        (from_one, "positions start at 1"),
        (times, "wrong values"),  # huge angles: float32 rounding differs, so not named
        (sin_only, "wrong values"),
        (transposed_table, "wrong shape"),
    ],
    "ch05_ex2": [
        (column_convention, "column-vector convention (transposed blocks)"),
        (negative_angle, "column-vector convention (transposed blocks)"),
        (no_k, "forgot to multiply the angle by k"),
        (same_angle, "same angle k in every block"),
        (reversed_freqs, "frequencies in reverse order"),
        (no_two_M, "exponent i/d_model instead of 2i/d_model"),
        (base_1000_M, "base 1000 instead of 10000"),
        (halves_M, "blocks on (i, i + d_model/2)"),
        (identity, "wrong values"),
        (dense_lstsq, "wrong values"),
    ],
    "ch05_ex3": [
        (rope_pairs, "adjacent pairs instead of the two halves"),
        (rope_clockwise, "the planes turn the wrong way"),
        (rope_no_two, "exponent m/d_head instead of 2m/d_head"),
        (rope_from_one, "positions start at 1"),
        (rope_reversed, "frequencies in reverse order"),
        (rope_base_10000, "base 10000 instead of the base given"),
        (rope_up, "frequencies above 1"),
        (rope_up_float32, "wrong values"),
        (rope_half_only, "wrong values"),
        (rope_unchanged, "wrong values"),
    ],
}
