"""Helpers for the chapters themselves: numbers the prose quotes, and the three kinds of statement.

A chapter states three kinds of thing, and the book keeps them apart (the claims ledger
groups them, and a reader sees the kind beside every check):

- an **identity** is true by construction (an algebraic identity, a theorem, a count). It is
  checked numerically only to show that the code and the algebra agree:
  ``identity(statement, measured, holds)`` for an exact check, ``identity_close(statement,
  got, want, terms=...)`` for agreement up to floating-point rounding. An identity is not
  evidence about a model.
- a **finding** is a measured effect that could have come out otherwise, set beside the null
  that could have produced it: the same architecture at initialisation, random or matched
  heads, shuffled positions, rotated weights, the criterion's base rate over all windows.
  ``finding(statement, value, null=Null.draws(...))`` computes a statistic a reader can weigh
  (a rank among the null's draws with its permutation p, a z-score, or a bootstrap
  interval) and raises if the data do not say what the statement says. A finding without a
  null is refused.
- an **observation** is a number reported with no test: ``observation(statement, value)``.

``glue(name, value)`` hands a computed number to the page, where the prose writes
``{glue:text}`name:.3f``` so the number in the sentence is the number the cell computed.

Every recorder prints one line for a reader (the statement, with the numbers behind it one
click away) and attaches a machine-readable copy to the cell's output, from which the
appendix's ledger is generated. All of this works without jupyter-book (on Colab, or in a
plain Python session). Nothing here returns a value, so a recorder as a cell's last line
prints nothing more. Taught in the introduction (:doc:`../intro`) and used in every chapter.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any, Sequence

CLAIM_MIME = "application/vnd.circuitbook.claim+json"
MACHINE_MIME = "application/vnd.circuitbook.machine-dependent+json"

KINDS = ("identity", "finding", "observation")
ALTERNATIVES = ("greater", "less", "two-sided")


def glue(name: str, value: Any, display: bool = False, *, machine_dependent: bool = False) -> None:
    """Make ``value`` available to the page's prose as ``{glue:text}`name```.

    ``machine_dependent=True`` marks a number that is meant to differ between machines (a
    timing, a memory peak): the prose must say it was measured on the machine that built
    the page, and the second-configuration check (scripts/numerics.py) reports it instead
    of requiring the two runs to agree. Every other glued number must not depend on the CPU
    in the digits it is printed with. Returns None, so a glue call as a cell's last line
    prints nothing.
    """
    try:
        from myst_nb import glue as _glue
    except ImportError:  # Colab: no jupyter-book, and the page's prose is not rendered anyway
        return
    _glue(name, value, display=display)
    if machine_dependent:
        from IPython.display import display as _display

        _display({MACHINE_MIME: {"name": name}}, raw=True)


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if hasattr(value, "item") and getattr(value, "numel", lambda: 2)() == 1:
        return _show(value.item())
    return str(value)


# ---------------------------------------------------------------------------------------
# Identities: true by construction, checked to rounding


def rounding_bound(terms: int, scale: float, dtype=None) -> float:
    """A first-order rounding budget, terms * eps * scale, for ``terms`` accumulated roundings.

    Higham (*Accuracy and Stability of Numerical Algorithms*, ch. 3) bounds a sum of n
    floating-point numbers, in whatever order a CPU or BLAS adds them, by
    |fl(sum) - sum| <= gamma_n sum |x_i|, with gamma_n ~ n * eps. So the budget is a bound
    where ``scale`` bounds sum |x_i|; where a page passes the largest value in the
    computation instead, it is a first-order estimate, not a proven worst case (it ignores
    how later weights and divisions amplify earlier errors). A chain of products adds the
    inner sizes: x @ W_Q @ W_K^T has terms = d_model + d_head. Elementwise functions (exp,
    sqrt, division) add one or two each. ``dtype`` defaults to float32, the book's
    precision. Typical errors are near sqrt(n) * eps * scale, so the budget is loose, but
    it does not depend on the machine.
    """
    import torch

    if terms < 1:
        raise ValueError(f"rounding_bound: terms must be a positive count of roundings, got {terms}")
    return float(terms * torch.finfo(dtype or torch.float32).eps * scale)


def attn_only_forward_terms(cfg, n: int) -> int:
    """``terms`` for ``rounding_bound`` along the longest path of an attention-only forward
    pass (the zoo's toy models; TransformerLens config ``cfg``) over ``n`` positions.

    Per layer: the query/key input (1, adding W_pos), the projection (d_model + 1), the score
    (d_head + 1), the softmax (n + 3), the values (d_model + 1), the weighted sum (n), W_O and
    the sum over heads (d_head + n_heads + 1) and the residual addition (1); then the
    unembedding (d_model + 1). Taught in chapters 13 (path expansion) and 16 (two layers).
    """
    layer = (1 + (cfg.d_model + 1) + (cfg.d_head + 1) + (n + 3) + (cfg.d_model + 1) + n
             + (cfg.d_head + cfg.n_heads + 1) + 1)
    return cfg.n_layers * layer + cfg.d_model + 1


def identity(statement: str, measured: Any, holds: bool, *, chapter: str | None = None) -> None:
    """Record an identity checked exactly (a theorem, a count, a rank bound): raise if not ``holds``.

    ``measured`` is what the check computed (shown one click away); ``holds`` is the
    comparison itself, never a literal.
    """
    _record("identity", statement, _show(measured), holds, chapter)


def identity_close(statement: str, got: Any, want: Any, *, terms: int, scale: float | None = None,
                   chapter: str | None = None) -> None:
    """Record an identity checked to rounding: max |got - want| <= rounding_bound(terms, scale).

    ``got`` and ``want``: tensors (or numbers) of the same shape. ``terms`` counts the
    roundings of the longer computation (say how in a comment beside the call). ``scale``
    is the size of the numbers that were accumulated; it defaults to the largest |value| of
    ``want`` and ``got``, and must be given where the result is small because terms cancel
    (a difference that should be zero has ``want = 0`` but inputs of ordinary size). The
    precision is the lower of the two dtypes.
    """
    import torch

    got_t, want_t = torch.as_tensor(got), torch.as_tensor(want)
    if got_t.shape != want_t.shape:
        raise ValueError(f"identity_close: {statement!r}: shapes differ, "
                         f"{tuple(got_t.shape)} vs {tuple(want_t.shape)}")
    low = min((t.dtype for t in (got_t, want_t) if t.is_floating_point()),
              key=lambda d: torch.finfo(d).bits, default=torch.float32)
    g, w = got_t.detach().double().cpu(), want_t.detach().double().cpu()
    err = float((g - w).abs().max()) if g.numel() else 0.0
    if scale is None:
        scale = float(torch.maximum(g.abs().max(), w.abs().max())) if g.numel() else 0.0
    bound = rounding_bound(terms, max(scale, torch.finfo(low).tiny), low)
    detail = (f"max error {err:.2g}, within the rounding bound {bound:.2g} "
              f"({terms} roundings x {str(low)[6:]} eps x scale {scale:.3g})")
    _record("identity", statement, detail, err <= bound, chapter,
            failure=f"max error {err:.3g} exceeds the rounding bound {bound:.3g}")


# ---------------------------------------------------------------------------------------
# Observations: a number, no test


def observation(statement: str, value: Any, *, chapter: str | None = None) -> None:
    """Record a number reported with no test (``value`` is shown beside ``statement``).

    Use it for what a page measures but does not test against anything: a loss, a
    timing, a score quoted for scale. It cannot fail, so it must not be worded as evidence.
    """
    _record("observation", statement, _show(value), True, chapter)


# ---------------------------------------------------------------------------------------
# Findings: an effect beside its null


@dataclass(frozen=True)
class Null:
    """The null a finding is set beside: what the value would be if the effect were absent.

    Build one with a constructor, never directly:

    - ``Null.draws(what, samples)``: draws from the null distribution (the statistic on
      models at initialisation, on random or matched heads, on shuffled data, over all
      windows). The test is the value's rank among them (a permutation p).
    - ``Null.point(what, value)``: a single null value (0 for "no change") with the effect's
      bootstrap replicates passed to ``finding(..., boot=...)`` (for a mean over exchangeable
      units, :func:`bootstrap_means`). The test is the interval.

    ``what`` says in words which null it is, with its size ("the same SwiGLU at
    initialisation, 20 seeds"): the ledger prints it.
    """

    what: str
    kind: str
    samples: tuple[float, ...] = ()
    mean: float = math.nan
    sd: float = math.nan

    @classmethod
    def draws(cls, what: str, samples: Sequence[float] | Any) -> "Null":
        values = tuple(float(v) for v in _flat(samples))
        if len(values) < 2:
            raise ValueError(f"Null.draws({what!r}): need at least 2 draws, got {len(values)}")
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"Null.draws({what!r}): the draws must be finite numbers")
        mean = sum(values) / len(values)
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
        return cls(what, "draws", values, mean, sd)

    @classmethod
    def point(cls, what: str, value: float) -> "Null":
        if not math.isfinite(value):
            raise ValueError(f"Null.point({what!r}): the null value must be finite, got {value}")
        return cls(what, "point", (), float(value), math.nan)


@dataclass(frozen=True)
class NullTest:
    """A value set beside its null: the statistic, its p-value and (for a bootstrap) the interval.

    ``rank`` is the value's place among the null's draws and itself (1 = the most extreme
    in the direction of ``alternative``), out of ``n + 1``; ``p`` the one-sided (or
    two-sided) p-value; ``z`` (value - null mean) / null sd; ``lo, hi`` the bootstrap
    interval at level 1 - alpha.
    """

    value: float
    null: Null
    alternative: str
    p: float
    z: float = math.nan
    rank: int | None = None
    n: int | None = None
    lo: float = math.nan
    hi: float = math.nan
    level: float = math.nan

    def summary(self) -> str:
        """The test in one line, for the page and the ledger."""
        if self.null.kind == "draws":
            # draws that do not vary give no scale: a z of inf (or 0 / 0) would read as a strength
            z = f"z = {self.z:.1f}" if math.isfinite(self.z) else "no z (the draws do not vary)"
            return (f"{self.value:.4g} against {self.null.mean:.4g} \u00b1 {self.null.sd:.2g} "
                    f"({self.null.what}); rank {self.rank} of {self.n + 1}, p {_p(self.p)}, {z}")
        # ":g", not ":.0f": a Bonferroni level such as 98.75% must not print as 99%
        return (f"{self.value:.4g}, {100 * self.level:g}% bootstrap interval "
                f"[{self.lo:.4g}, {self.hi:.4g}], against {self.null.mean:.4g} ({self.null.what}); "
                f"p {_p(self.p)}")


def _p(p: float) -> str:
    """``p = 0.031`` or ``p < 0.0001``: the sign included, so no caller writes "p = < ..."."""
    return f"= {p:.2g}" if p >= 1e-4 else "< 0.0001"


def _flat(values) -> list:
    if hasattr(values, "detach"):
        values = values.detach().cpu().double().reshape(-1).tolist()
    elif hasattr(values, "ravel"):
        values = values.ravel().tolist()
    return list(values)


def null_test(value: float, null: Null, *, alternative: str = "greater", boot: Any = None,
              alpha: float = 0.05) -> NullTest:
    """Set ``value`` beside ``null`` and compute the statistic (see ``Null`` for the two tests).

    ``alternative``: "greater" (the effect makes the value larger than the null), "less",
    or "two-sided". ``boot``: the effect's bootstrap replicates, for a ``Null.point``.
    ``alpha`` sets the bootstrap interval's level (1 - alpha, two-sided). For draws the p-value
    is the permutation p, (1 + #draws at least as extreme) / (N + 1), so N draws can show
    at best p = 1 / (N + 1).
    """
    if alternative not in ALTERNATIVES:
        raise ValueError(f"null_test: alternative must be one of {ALTERNATIVES}, got {alternative!r}")
    if not isinstance(null, Null):
        raise TypeError(f"null_test: null must be a circuitbook.book.Null, got {type(null).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"null_test: the value must be finite, got {value}")
    if null.kind == "draws":
        n = len(null.samples)
        above = 1 + sum(s >= value for s in null.samples)
        below = 1 + sum(s <= value for s in null.samples)
        p_one = {"greater": above, "less": below}.get(alternative, min(above, below)) / (n + 1)
        p = min(1.0, 2 * p_one) if alternative == "two-sided" else p_one
        rank = above if alternative == "greater" else below if alternative == "less" else min(above, below)
        # draws that are all equal: z is infinite beside them, and undefined (0 / 0) at them
        z = ((value - null.mean) / null.sd if null.sd > 0
             else math.copysign(math.inf, value - null.mean) if value != null.mean else math.nan)
        return NullTest(value, null, alternative, p, z=z, rank=rank, n=n)
    if boot is None:
        raise ValueError(f"null_test: a Null.point ({null.what!r}) needs the effect's bootstrap "
                         "replicates, boot=...")
    reps = sorted(float(b) for b in _flat(boot))
    if len(reps) < 100:
        raise ValueError(f"null_test: {len(reps)} bootstrap replicates are too few for an interval; use 1000 or more")
    lo, hi = _quantile(reps, alpha / 2), _quantile(reps, 1 - alpha / 2)
    # the bootstrap p: how often a replicate falls on the null's side of the null value
    at_or_below = (1 + sum(r <= null.mean for r in reps)) / (len(reps) + 1)
    at_or_above = (1 + sum(r >= null.mean for r in reps)) / (len(reps) + 1)
    p = {"greater": at_or_below, "less": at_or_above}.get(alternative,
                                                          min(1.0, 2 * min(at_or_below, at_or_above)))
    return NullTest(value, null, alternative, p, lo=lo, hi=hi, level=1 - alpha)


def bootstrap_means(values: Any, n_boot: int = 2000, seed: int = 0) -> Any:
    """Bootstrap replicates of the mean of ``values`` over its first axis: [n_boot, ...].

    For ``N = len(values)`` units (sequences, windows, name pairs: whatever the first axis
    holds, which must be exchangeable), replicate ``b`` is ``mean_j values[i_bj]``, ``j = 1..N``,
    with every index ``i_bj`` drawn uniformly from ``0..N-1`` with replacement. The other axes
    are kept, so ``values`` of shape [N, ...] give replicates of shape [n_boot, ...]. The
    indices come from ``torch.randint(0, N, (n_boot, N), generator=g)`` with
    ``g = torch.Generator().manual_seed(seed)``, so a seed gives the same replicates on every
    run. Pass them to ``null_test`` / ``finding`` as ``boot=`` for a percentile interval.

    ``values``: a floating-point (or complex) tensor with at least one unit; ``n_boot`` >= 1
    (``null_test`` wants 1000 or more). The bootstrap interval first appears in chapter 7 (Multi-head
    attention); this function serves chapters 13, 15, 16, 17 and 19 and the induction module's
    framework page and toy lab.
    """
    import torch

    if not isinstance(values, torch.Tensor):
        raise TypeError(f"bootstrap_means: values must be a torch.Tensor, got {type(values).__name__}")
    if values.ndim == 0 or len(values) == 0:
        raise ValueError(f"bootstrap_means: values need at least one unit along the first axis, "
                         f"got shape {tuple(values.shape)}")
    if not (values.is_floating_point() or values.is_complex()):
        raise TypeError(f"bootstrap_means: values must be floating point, got {values.dtype}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"bootstrap_means: n_boot must be an int >= 1, got {n_boot!r}")
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, len(values), (n_boot, len(values)), generator=g)
    return values[idx].mean(1)


def student_t_cdf(x: float, df: int, steps: int = 2000) -> float:
    """P(T <= x) for Student's t with ``df`` degrees of freedom, for t-intervals of small
    samples (the problem set's 16 documents, chapter 7's eight passages).

    Simpson's rule on the density c (1 + u^2 / df)^(-(df + 1) / 2) from 0 to |x|, in
    float64, with c = Gamma((df + 1) / 2) / (Gamma(df / 2) sqrt(df pi)). Written here
    because the book's stack has no t distribution: torch's StudentT has neither cdf nor
    icdf, and scipy is not a dependency."""
    import torch

    if df < 1:
        raise ValueError(f"student_t_cdf: df must be a positive count, got {df}")
    u = torch.linspace(0, abs(x), 2 * steps + 1, dtype=torch.float64)
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - math.log(df * math.pi) / 2
    w = torch.ones_like(u)
    w[1:-1:2], w[2:-1:2] = 4, 2
    area = float((w * torch.exp(log_c - (df + 1) / 2 * torch.log1p(u ** 2 / df))).sum())
    return 0.5 + math.copysign(area * abs(x) / (6 * steps), x)


def student_t_quantile(q: float, df: int) -> float:
    """The q-quantile of Student's t with ``df`` degrees of freedom: bisection on
    :func:`student_t_cdf` over [-50, 50] (enough for q in [0.001, 0.999] from df = 2)."""
    if not 0 < q < 1:
        raise ValueError(f"student_t_quantile: q must lie in (0, 1), got {q}")
    lo, hi = -50.0, 50.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if student_t_cdf(mid, df) < q else (lo, mid)
    return (lo + hi) / 2


def _quantile(sorted_values: list[float], q: float) -> float:
    pos = q * (len(sorted_values) - 1)
    i = int(math.floor(pos))
    j = min(i + 1, len(sorted_values) - 1)
    return sorted_values[i] + (pos - i) * (sorted_values[j] - sorted_values[i])


def finding(statement: str, value: Any, *, null: Null | None = None, alternative: str = "greater",
            alpha: float = 0.05, expect: str = "effect", boot: Any = None,
            chapter: str | None = None) -> None:
    """Record a finding: ``value`` set beside ``null``; raise if the test does not say ``expect``.

    ``value`` is the measured effect (a number), or a ``NullTest`` already computed with
    ``null_test`` (to glue its statistic into the prose). ``expect="effect"`` states that
    the value differs from the null in the direction of ``alternative`` at level ``alpha``
    (p < alpha); ``expect="no effect"`` states that these data cannot tell it from the null
    (p >= alpha), which is weaker than "there is no effect": give its interval or its
    power in the prose. ``alpha`` is stated before the measurement (0.05 unless the page
    says otherwise), never chosen after it.

    A finding without a null is refused, and so is a null too small to reach p < alpha.
    """
    if expect not in ("effect", "no effect"):
        raise ValueError(f"finding: expect must be 'effect' or 'no effect', got {expect!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"finding: alpha must lie in (0, 1), got {alpha}")
    if isinstance(value, NullTest):
        test = value
        if null is not None or boot is not None:
            raise ValueError("finding: pass either a NullTest or value with null=, not both")
    else:
        if null is None:
            raise ValueError(f"finding {statement!r} has no null: a finding is an effect set beside the "
                             "null that could have produced it (Null.draws or Null.point); "
                             "a number reported with no test is an observation()")
        test = null_test(_as_float(value), null, alternative=alternative, boot=boot, alpha=alpha)
    # a two-sided permutation p is twice the one-sided one: its floor is 2/(n + 1). Below the
    # level it could never reach, "no effect" would pass whatever the data
    sides = 2 if test.alternative == "two-sided" else 1
    if test.null.kind == "draws" and sides / (test.n + 1) >= alpha:
        need = math.floor(sides / alpha)
        raise ValueError(f"finding {statement!r}: a null of {test.n} draws cannot show p < {alpha} "
                         f"(the smallest {test.alternative} permutation p is {sides}/{test.n + 1}); "
                         f"draw at least {need} times")
    significant = test.p < alpha
    verdict = (f"differs from the null (p < {alpha:.3g})" if significant
               else f"cannot be told from the null at p < {alpha:.3g}")
    holds = significant if expect == "effect" else not significant
    record = {"effect": test.value, "null": test.null.what, "null_kind": test.null.kind,
              "null_mean": test.null.mean, "null_sd": test.null.sd, "p": test.p, "alpha": alpha,
              "alternative": test.alternative, "expect": expect, "z": test.z, "rank": test.rank,
              "n": test.n, "lo": test.lo, "hi": test.hi}
    _record("finding", statement, f"{test.summary()}: {verdict}", holds, chapter, extra=record,
            failure=f"expected {expect!r}, but the value {verdict}: {test.summary()}")


def _as_float(value: Any) -> float:
    if hasattr(value, "item"):
        if getattr(value, "numel", lambda: 1)() != 1:
            raise ValueError(f"finding: the value must be one number, got shape {tuple(value.shape)}")
        return float(value.item())
    return float(value)


# ---------------------------------------------------------------------------------------
# The record every kind shares


def _record(kind: str, statement: str, measured: str, holds: bool, chapter: str | None,
            extra: dict | None = None, failure: str | None = None) -> None:
    if not isinstance(holds, bool) and not hasattr(holds, "item"):
        raise TypeError(f"{kind} {statement!r}: the verdict must be a comparison's bool, "
                        f"got {type(holds).__name__}")
    size = holds.numel() if callable(getattr(holds, "numel", None)) else getattr(holds, "size", 1)
    if size != 1:
        shape = tuple(getattr(holds, "shape", ()))
        raise ValueError(f"{kind} {statement!r}: the verdict must be one bool, got {size} of them (shape {shape}); "
                         "reduce the comparison to one, e.g. (a == b).all(), or use identity_close for "
                         "agreement up to rounding")
    if not bool(holds):
        raise AssertionError(f"{kind} failed: {statement} ({failure or 'measured ' + measured})")
    mark = {"identity": "\u2261", "finding": "\u2714", "observation": "\u00b7"}[kind]
    line = f"{mark} {kind}: {statement}  [{measured}]"
    # JSON has no NaN: a field a test does not have (a z for a bootstrap) is null
    payload = {"statement": statement, "measured": measured, "chapter": chapter, "kind": kind,
               **{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                  for k, v in (extra or {}).items()}}
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        print(line)
        return
    if get_ipython() is None:
        print(line)
        return
    # The reader sees the statement and its kind; the numbers behind it are one click away.
    # Inline styles, so it reads the same on the site, in JupyterLab and on Colab.
    colour = {"identity": "#0550ae", "finding": "#1a7f37"}.get(kind, "#57606a")
    body = (f'<details class="circuitbook-claim circuitbook-{kind}" style="margin:0.2em 0">'
            f'<summary style="cursor:pointer"><span class="circuitbook-kind" style="color:{colour};'
            f'font-weight:600">{mark} {kind}</span> {html.escape(statement)}</summary>'
            f'<div class="circuitbook-measured" style="margin-left:1.5em;font-size:0.9em;color:#57606a">'
            f'{html.escape(measured)}</div></details>')
    display({"text/plain": line, "text/html": body, CLAIM_MIME: payload}, raw=True)
