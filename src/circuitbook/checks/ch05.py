"""Chapter 5 (positional encoding): exercise checks and reference solutions.

Exercise 5.1 builds Vaswani et al.'s sinusoidal table,
``PE[pos, 2i] = sin(pos * w_i)``, ``PE[pos, 2i + 1] = cos(pos * w_i)`` with
``w_i = 10000^(-2i / d_model)``. Exercise 5.2 builds the matrix ``M_k`` that shifts it by
``k`` positions in the row-vector convention, ``PE[pos + k] = PE[pos] @ M_k``: block
diagonal, one 2x2 block per frequency, block ``i`` = ``[[cos(k w_i), -sin(k w_i)],
[sin(k w_i), cos(k w_i)]]`` on rows and columns ``2i, 2i + 1``. Exercise 5.3 applies the
rotary position embedding (RoPE) as SmolLM2 and TransformerLens do: the row at position
``p`` has each plane ``(m, m + d/2)`` (split halves) turned by ``p * base^(-2m/d)``, the
plane read as the complex number ``a + ib`` and multiplied by ``e^{i p theta_m}``; its
check runs random 2-D rows, then a batch of them (3-D), as the statement's
``[..., n_pos, d_head]`` allows.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
from functools import partial

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, Result, random_int


def _angles(n_pos: int, d_model: int, *, base: float = 10000.0, exponent=None, first: int = 0) -> torch.Tensor:
    """[n_pos, d_model // 2] angles pos * w_i, float64; ``exponent(i, d)`` defaults to 2i/d."""
    i = torch.arange(d_model // 2, dtype=torch.float64)
    e = 2 * i / d_model if exponent is None else exponent(i, d_model)
    pos = torch.arange(first, first + n_pos, dtype=torch.float64)[:, None]
    return pos / base ** e


def _interleave(even: torch.Tensor, odd: torch.Tensor) -> torch.Tensor:
    out = torch.empty(even.shape[0], 2 * even.shape[1], dtype=even.dtype)
    out[:, 0::2], out[:, 1::2] = even, odd
    return out


def sinusoidal(n_pos, d_model):
    """The paper's sinusoidal encoding for positions 0 .. n_pos - 1:
    a [n_pos, d_model] float tensor, one row per position."""
    pos = torch.arange(n_pos, dtype=torch.float64)[:, None]
    i2 = torch.arange(0, d_model, 2, dtype=torch.float64)   # 2i
    w = 10000.0 ** (-i2 / d_model)
    pe = torch.zeros(n_pos, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * w)
    pe[:, 1::2] = torch.cos(pos * w)
    return pe.float()


def _odd_own_index(n_pos: int, d_model: int) -> torch.Tensor:
    j = torch.arange(d_model, dtype=torch.float64)
    a = torch.arange(n_pos, dtype=torch.float64)[:, None] / 10000.0 ** (j / d_model)
    return _interleave(a[:, 0::2].sin(), a[:, 1::2].cos()).float()


def _column_index_2j(n_pos: int, d_model: int) -> torch.Tensor:
    j = torch.arange(d_model, dtype=torch.float64)
    a = torch.arange(n_pos, dtype=torch.float64)[:, None] / 10000.0 ** (2 * j / d_model)
    return _interleave(a[:, 0::2].sin(), a[:, 1::2].cos()).float()


def _sin_inputs(g: torch.Generator) -> dict:
    # n_pos odd and d_model even: a transposed table always has the wrong shape
    return {"n_pos": 7 + 2 * int(torch.randint(0, 17, (1,), generator=g)),
            "d_model": 2 * (3 + int(torch.randint(0, 14, (1,), generator=g)))}


EX1 = FunctionExercise(
    id="ch05_ex1",
    title="the sinusoidal positional encoding",
    reference=sinusoidal,
    library_answers=("circuitbook.models.encoder_decoder.sinusoidal_table",
                     "circuitbook.models.encoder_decoder.PositionalEncoding.forward"),
    make_inputs=_sin_inputs,
    mistakes=[
        Mistake("row 0 wrong", "Your row 0 is not what pos = 0 gives. Compute PE(1, 0) and PE(1, 1) by"
                " hand from the paper's formula and print them next to the first two entries of row 1 of"
                " your table: does each entry match?",
                lambda n_pos, d_model: _interleave(_angles(n_pos, d_model).cos(),
                                                   _angles(n_pos, d_model).sin()).float()),
        Mistake("frequencies fall too slowly", "Your frequencies fall too slowly from column to "
                "column. In the paper's 2i/d_model, what does i count, and does your exponent match it?",
                lambda n_pos, d_model: (lambda a: _interleave(a.sin(), a.cos()).float())(
                    _angles(n_pos, d_model, exponent=lambda i, d: i / d))),
        Mistake("odd columns at the wrong frequencies", "Your odd columns turn at other frequencies than the "
                "formula gives them. Take column 7: which i does the paper's PE(pos, 2i+1) give it, and so "
                "what exponent 2i/d_model? Compare that with the exponent your code uses for column 7.",
                _odd_own_index),
        Mistake("frequencies fall too fast", "Your frequencies fall too fast from column to column. Take "
                "column 6: which i does the paper's PE(pos, 2i) give it, and so what exponent 2i/d_model? "
                "Compare that with the exponent your code uses for column 6.",
                _column_index_2j),
        Mistake("wrong base", "Your wavelengths stop growing too early. Which base does the "
                "paper's formula use?",
                lambda n_pos, d_model: (lambda a: _interleave(a.sin(), a.cos()).float())(
                    _angles(n_pos, d_model, base=1000.0))),
        Mistake("columns in the wrong layout", "Your sines and cosines are in the wrong columns. List the "
                "columns PE(pos, 2i) names for i = 0, 1, 2 and those PE(pos, 2i+1) names, then print row 1 "
                "of your table: is each of those columns the function the formula puts there?",
                lambda n_pos, d_model: (lambda a: torch.cat([a.sin(), a.cos()], -1).float())(
                    _angles(n_pos, d_model))),
        Mistake("shifted by one position", "Your table is shifted by one position. Which pos does the first row "
                "stand for?",
                lambda n_pos, d_model: (lambda a: _interleave(a.sin(), a.cos()).float())(
                    _angles(n_pos, d_model, first=1))),
    ],
    hint="Build the table from two axes: positions as a column [n_pos, 1] and the frequencies as a "
         "row. How many different frequencies does the formula give d_model columns, and what does "
         "broadcasting the product of the two axes give you? Then read PE(pos, 2i) and PE(pos, 2i+1) "
         "again: which function, of which angle, goes in each column? Compute in float64 for accuracy.",
)


def _block_matrix(angles: torch.Tensor, *, transpose: bool = False, halves: bool = False) -> torch.Tensor:
    """Block-diagonal [d, d] from angles [d/2]: block i = [[c, -s], [s, c]] on (2i, 2i+1)."""
    half = angles.shape[0]
    M = torch.zeros(2 * half, 2 * half, dtype=torch.float64)
    for i, t in enumerate(angles.tolist()):
        c, s = torch.tensor(t, dtype=torch.float64).cos(), torch.tensor(t, dtype=torch.float64).sin()
        a, b = (i, i + half) if halves else (2 * i, 2 * i + 1)
        if transpose:
            s = -s
        M[a, a], M[a, b], M[b, a], M[b, b] = c, -s, s, c
    return M.float()


def _freqs(d_model: int, base: float = 10000.0, two: bool = True) -> torch.Tensor:
    i = torch.arange(d_model // 2, dtype=torch.float64)
    return 1.0 / base ** ((2 * i if two else i) / d_model)


def offset_matrix(k, d_model):
    """M_k [d_model, d_model]: PE(pos + k) = PE(pos) @ M_k (row vectors),
    one 2x2 rotation block per frequency on rows/columns (2i, 2i+1)."""
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        theta = k * 10000.0 ** (-2 * i / d_model)
        c, s = math.cos(theta), math.sin(theta)
        M[2 * i, 2 * i], M[2 * i, 2 * i + 1] = c, -s
        M[2 * i + 1, 2 * i], M[2 * i + 1, 2 * i + 1] = s, c
    return M.float()


def _offset_inputs(g: torch.Generator) -> dict:
    return {"k": 2 + int(torch.randint(0, 29, (1,), generator=g)),
            "d_model": 2 * (3 + int(torch.randint(0, 10, (1,), generator=g)))}


EX2 = FunctionExercise(
    id="ch05_ex2",
    title="the offset matrix M_k",
    reference=offset_matrix,
    library_answers=("circuitbook.circuits.rotary_rotation",),
    make_inputs=_offset_inputs,
    mistakes=[
        Mistake("blocks do not shift the table by k", "Your blocks have the right angles, but "
                "PE[pos] @ M_k does not give PE[pos + k]. Take one row's (sin, cos) pair, multiply it "
                "by your block with the row vector on the left, and expand sin(a + b) and cos(a + b): "
                "which position's pair comes out?",
                lambda k, d_model: _block_matrix(k * _freqs(d_model), transpose=True)),
        Mistake("matrix does not depend on k", "Your matrix does not change with k. How does the angle of a"
                " shift by k relate to that of a shift by one?",
                lambda k, d_model: _block_matrix(_freqs(d_model))),
        Mistake("one angle for every block", "All your blocks turn by the same angle. In the table of "
                "exercise 5.1, how far does the angle of pair 0 move between row 0 and row k, and how far "
                "does that of the last pair move? Compare those with your blocks' angles.",
                lambda k, d_model: _block_matrix(torch.full((d_model // 2,), float(k), dtype=torch.float64))),
        Mistake("frequencies in reverse order", "Your frequencies are in the wrong order along the diagonal. "
                "Which pair of columns turns fastest in the paper's table?",
                lambda k, d_model: _block_matrix(k * _freqs(d_model).flip(0))),
        Mistake("frequencies fall too slowly", "Your frequencies fall too slowly from block to "
                "block. In the paper's 2i/d_model, what does i count?",
                lambda k, d_model: _block_matrix(k * _freqs(d_model, two=False))),
        Mistake("wrong base", "Your slowest frequencies are not slow enough. Which base does "
                "the paper's formula use?",
                lambda k, d_model: _block_matrix(k * _freqs(d_model, base=1000.0))),
        Mistake("blocks on the wrong pairs", "Your blocks sit on the wrong pairs of columns. In the table of "
                "exercise 5.1, which columns hold the sine and the cosine of one frequency?",
                lambda k, d_model: _block_matrix(k * _freqs(d_model), halves=True)),
    ],
    hint="Shifting by k turns each frequency's (sin, cos) pair by its own angle, k times that frequency, "
         "so M_k is block-diagonal: one 2 x 2 rotation per pair of dimensions (2i, 2i+1), zeros elsewhere. "
         "Work out one block from the angle-addition formulas, with the row vector on the left, and test "
         "it on the table of exercise 5.1 shifted by k.",
)

def _rope(x: torch.Tensor, base: float, *, adjacent: bool = False, sign: float = 1.0,
          two: bool = True, first: int = 0, reverse: bool = False, power: float = -1.0) -> torch.Tensor:
    """RoPE on rows x [..., n_pos, d] at positions first.. (float64 angles), with switches
    for the mistakes: adjacent pairs, the angle's sign, the exponent's 2, the frequencies'
    order, the exponent's sign."""
    n_pos, d = x.shape[-2:]
    half = d // 2
    m = torch.arange(half, dtype=torch.float64)
    theta = float(base) ** (power * (2 * m if two else m) / d)
    if reverse:
        theta = theta.flip(0)
    angle = sign * torch.arange(first, first + n_pos, dtype=torch.float64)[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    a_idx = torch.arange(half) * 2 if adjacent else torch.arange(half)
    b_idx = a_idx + 1 if adjacent else a_idx + half
    a, b = x[..., a_idx].double(), x[..., b_idx].double()
    out = x.double().clone()
    out[..., a_idx], out[..., b_idx] = a * cos - b * sin, a * sin + b * cos
    return out.to(x.dtype)


def rope(x, base):
    """x: [..., n_pos, d_head], row p at position p; returns the rows rotated
    as RoPE does, the same shape: plane m (coordinates m and m + d_head / 2)
    turned by the angle p * base^(-2m / d_head)."""
    n_pos, d = x.shape[-2:]
    half = d // 2
    theta = base ** (-2 * torch.arange(half, dtype=torch.float64) / d)
    angle = torch.arange(n_pos, dtype=torch.float64)[:, None] * theta
    cos, sin = angle.cos(), angle.sin()                   # [n_pos, half]
    a, b = x[..., :half].double(), x[..., half:].double()
    turned = torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    return turned.to(x.dtype)


_BASES = (500.0, 2000.0, 50000.0, 100000.0, 500000.0)  # never 10000: "used 10000" must show


def _rope_inputs(g: torch.Generator, *, batch: bool = False) -> dict:
    n_pos = random_int(5, 24, g)
    d = 4 * random_int(2, 6, g)          # at least two planes per half: halves != pairs
    lead = (random_int(2, 4, g),) if batch else ()
    return {"x": torch.randn(*lead, n_pos, d, generator=g),
            "base": _BASES[random_int(0, len(_BASES) - 1, g)]}


class BatchExercise(FunctionExercise):
    """Like FunctionExercise, then one more trial on a batch: rows [b, n_pos, d_head] instead
    of [n_pos, d_head]. The statement asks for ``[..., n_pos, d_head]`` and the page's next
    cell passes one block of rows per head, so an answer that only handles 2-D input (it
    unpacks ``x.shape`` into two names, or indexes ``x[:, ...]``) must fail here rather than
    there. The batch comes last, so a wrong 2-D answer keeps its diagnosis."""

    def check(self, answer, *, seed=None) -> Result:
        seed = secrets.randbits(31) if seed is None else seed
        result = super().check(answer, seed=seed)
        if not result.passed:
            return result
        batched = dataclasses.replace(self, make_inputs=partial(self.make_inputs, batch=True), n_trials=1)
        on_batch = FunctionExercise.check(batched, answer, seed=seed + self.n_trials)
        if not on_batch.passed:
            return self._fail(
                f"your function is right on rows [n_pos, d_head], but not on a batch of them, "
                f"[b, n_pos, d_head], which the statement allows and the next cell passes (one block "
                f"of rows per head). Which axes does your code take by counting from the front, and "
                f"are they still the position and coordinate axes when another axis comes first? On "
                f"the batch, {on_batch.message}", "only 2-D input", detail=on_batch.detail)
        return Result(self.id, True, f"correct on {self.n_trials} random inputs and on a batch of them "
                      f"({self.title})")


EX3 = BatchExercise(
    id="ch05_ex3",
    title="the rotary position embedding",
    reference=rope,
    library_answers=("circuitbook.circuits.rotary_rotation",),
    make_inputs=_rope_inputs,
    mistakes=[
        Mistake("planes pair the wrong coordinates", "Your planes pair the wrong coordinates for this "
                "model. Give your function two rows, each 1 at coordinate 0 and 0 elsewhere (positions 0 "
                "and 1), and read which other coordinate of row 1 is no longer 0. Which two coordinates "
                "does the exercise's statement say make plane 0?",
                lambda x, base: _rope(x, base, adjacent=True)),
        Mistake("the planes are not turned as RoPE turns them", "Your planes turn by the right amounts but"
                " do not land where RoPE puts them. Check by hand where the point (1, 0) of plane 0 goes at"
                " position 1, reading the plane as a complex number: what does multiplying it by the"
                " chapter's unit complex number give?",
                lambda x, base: _rope(x, base, sign=-1.0)),
        Mistake("frequencies fall too slowly", "Your frequencies fall too slowly from plane to plane. "
                "In base^(-2m/d_head), what does the 2 account for?",
                lambda x, base: _rope(x, base, two=False)),
        Mistake("shifted by one position", "Your first row is rotated. Which position is the first row, and what "
                "should a rotation by angle 0 do to it?",
                lambda x, base: _rope(x, base, first=1)),
        Mistake("frequencies in reverse order", "Your frequencies are in the wrong order over the planes. Which "
                "plane turns fastest?",
                lambda x, base: _rope(x, base, reverse=True)),
        Mistake("ignored an argument", "Your rotation ignores one of the arguments. Which base "
                "does your code use?",
                lambda x, base: _rope(x, 10000.0)),
        Mistake("later planes turn faster", "Your later planes turn faster and faster. Compute theta_0 and "
                "theta_1 from the statement's formula by hand, for base 10000 and d_head 64, and compare "
                "them with the angles your code turns planes 0 and 1 by at position 1.",
                lambda x, base: _rope(x, base, power=1.0)),
    ],
    hint="Work plane by plane: which two coordinates of the row make plane m in the layout the "
         "exercise asks for? Read the pair as the complex number a + ib: what does turning it by an "
         "angle do to that number? Build every angle at once by broadcasting positions [n_pos, 1] "
         "against the d_head / 2 frequencies, as in exercise 5.1, and compute in float64.",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2, EX3)}
