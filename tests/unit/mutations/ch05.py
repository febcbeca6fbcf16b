"""Planted wrong answers for chapter 5's exercises, each with the diagnosis it must get."""


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


def halves(n_pos, d_model):
    return _table(n_pos, d_model, halves=True)


def times(n_pos, d_model):
    return _table(n_pos, d_model, times=True)


def sin_only(n_pos, d_model):
    pe = _table(n_pos, d_model)
    pe[:, 1::2] = pe[:, 0::2]
    return pe


def cos_first(n_pos, d_model):  # cos in the even columns, sin in the odd ones
    return _table(n_pos, d_model, swap=True)


def transposed_table(n_pos, d_model):
    return _table(n_pos, d_model).T


def odd_column_own_exponent(n_pos, d_model):  # column c at exponent c/d: cos columns off by one step
    pos = torch.arange(n_pos).double()[:, None]
    col = torch.arange(d_model).double()
    ang = pos / 10000.0 ** (col / d_model)
    pe = ang.sin()
    pe[:, 1::2] = ang[:, 1::2].cos()
    return pe.float()


def column_as_i(n_pos, d_model):  # the column index c used as the paper's i: exponent 2c/d
    pos = torch.arange(n_pos).double()[:, None]
    col = torch.arange(d_model).double()
    ang = pos / 10000.0 ** (2 * col / d_model)
    pe = ang.sin()
    pe[:, 1::2] = ang[:, 1::2].cos()
    return pe.float()


def identity(k, d_model):
    return torch.eye(d_model)


def same_angle_blocks(k, d_model):  # every block turned by k radians
    c, s = torch.tensor(float(k)).cos(), torch.tensor(float(k)).sin()
    return torch.block_diag(*[torch.stack([torch.stack([c, -s]), torch.stack([s, c])])] * (d_model // 2))


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


def rope_up_float32(x, base):  # huge float32 angles round differently: unnamed
    return _rot(x, base, up=True)


def rope_half_only(x, base):  # forgot to write the second coordinate of each plane
    return _rot(x, base, only_first=True)


def rope_neighbour_pairs(x, base):  # planes (2m, 2m + 1), the sinusoidal table's layout
    return _rot(x.double(), base, pairs=True).to(x.dtype)


def rope_exponent_up(x, base):  # base^(+2m/d) in float64
    return _rot(x.double(), base, up=True).to(x.dtype)


def rope_unchanged(x, base):
    return x.clone()


def rope_unpacks_two_axes(x, base):  # right on [n_pos, d_head]; raises on a batch
    n, d = x.shape
    return _rot(x, base)


def rope_slices_from_the_front(x, base):  # right on [n_pos, d_head]; x[:, :h] cuts the wrong axis of a batch
    n, d = x.shape[-2:]
    h = d // 2
    ang = torch.arange(n).double()[:, None] / base ** (2 * torch.arange(h).double() / d)
    a, b = x[:, :h].double(), x[:, h:].double()
    return torch.cat([a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()], 1).to(x.dtype)


MUTATIONS = {
    "ch05_ex1": [
        (times, "wrong values"),  # huge angles: float32 rounding differs, so not named
        (sin_only, "wrong values"),
        (transposed_table, "wrong shape"),
        (cos_first, "row 0 wrong"),
        (halves, "columns in the wrong layout"),
        (odd_column_own_exponent, "odd columns at the wrong frequencies"),
        (column_as_i, "frequencies fall too fast"),
    ],
    "ch05_ex2": [
        (identity, "wrong values"),
        (dense_lstsq, "wrong values"),
        (same_angle_blocks, "one angle for every block"),
    ],
    "ch05_ex3": [
        (rope_up_float32, "wrong values"),
        (rope_half_only, "wrong values"),
        (rope_unchanged, "wrong values"),
        (rope_unpacks_two_axes, "only 2-D input"),
        (rope_slices_from_the_front, "only 2-D input"),
        (rope_neighbour_pairs, "planes pair the wrong coordinates"),
        (rope_exponent_up, "later planes turn faster"),
    ],
}
