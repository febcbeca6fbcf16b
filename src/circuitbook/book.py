"""Helpers for the chapters themselves: numbers that prose quotes, and checked claims.

``glue(name, value)`` hands a computed number to the page, where the prose writes
``{glue:text}`name:.3f``` so the number in the sentence is the number the cell computed.

``claim(statement, measured, holds)`` records one claim the book checks in code. It raises
if the claim does not hold (so a false claim fails the build), prints one line, and attaches
a machine-readable copy to the cell's output, from which the appendix's claims ledger is
generated. Both work without jupyter-book (on Colab, or in a plain Python session).

``claim_close(statement, got, want, terms=...)`` is the claim that two computations agree up
to floating-point rounding. Its tolerance is not a number tuned until it passed on one CPU
(another CPU, thread count or BLAS path rounds differently): it is the worst-case rounding
bound of the computation, ``terms * eps(dtype) * scale`` (see ``rounding_bound``), so it holds
wherever IEEE arithmetic does. Claims say whether they are an ``identity`` (true by
construction, checked to show the algebra and the code agree) or a finding (could have
come out otherwise); the ledger keeps the two apart.
"""

from __future__ import annotations

from typing import Any

CLAIM_MIME = "application/vnd.circuitbook.claim+json"
MACHINE_MIME = "application/vnd.circuitbook.machine-dependent+json"


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


def rounding_bound(terms: int, scale: float, dtype=None) -> float:
    """The worst-case rounding error of a computation with ``terms`` accumulated roundings.

    A sum or dot product of n floating-point numbers, each of size at most ``scale``,
    is computed with an error of at most about n * eps * scale (Higham, *Accuracy and
    Stability of Numerical Algorithms*, ch. 3: |fl(sum) - sum| <= gamma_n sum |x_i|), in
    whatever order a CPU or BLAS adds them. A chain of products adds the inner sizes:
    x @ W_Q @ W_K^T has terms = d_model + d_head. Elementwise functions (exp, sqrt,
    division) add one or two each. ``dtype`` defaults to float32, the book's precision.
    The bound is worst case, so it is loose (typical errors are near sqrt(n) * eps * scale)
    but it does not depend on the machine.
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


def claim_close(statement: str, got: Any, want: Any, *, terms: int, scale: float | None = None,
                identity: bool = False, chapter: str | None = None) -> float:
    """Claim ``got == want`` up to rounding: max |got - want| <= rounding_bound(terms, scale).

    ``got`` and ``want``: tensors (or numbers) of the same shape. ``scale`` is the size of
    the numbers that were accumulated; it defaults to the largest |value| of ``want`` and
    ``got``, and must be given where the result is small because terms cancel (a
    difference that should be zero has ``want = 0`` but inputs of ordinary size). The
    precision is the lower of the two dtypes. Returns the measured error.
    """
    import torch

    got_t, want_t = torch.as_tensor(got), torch.as_tensor(want)
    if got_t.shape != want_t.shape:
        raise ValueError(f"claim_close: {statement!r}: shapes differ, {tuple(got_t.shape)} vs {tuple(want_t.shape)}")
    low = min((t.dtype for t in (got_t, want_t) if t.is_floating_point()),
              key=lambda d: torch.finfo(d).bits, default=torch.float32)
    g, w = got_t.detach().double().cpu(), want_t.detach().double().cpu()
    err = float((g - w).abs().max()) if g.numel() else 0.0
    if scale is None:
        scale = float(torch.maximum(g.abs().max(), w.abs().max())) if g.numel() else 0.0
    bound = rounding_bound(terms, max(scale, torch.finfo(low).tiny), low)
    claim(statement, f"max error {err:.2g} <= {bound:.2g} ({terms} roundings x {str(low)[6:]} eps x scale {scale:.3g})",
          err <= bound, chapter=chapter, identity=identity)
    return err


def claim(statement: str, measured: Any, holds: bool, *, chapter: str | None = None,
          identity: bool = False) -> None:
    """Record a checked claim: fail loudly if ``holds`` is false, else print and log it.

    ``measured`` is the number (or short text) the check produced, shown in the ledger.
    ``holds`` is the comparison itself, never a literal: a claim must be able to fail.
    ``identity=True`` marks a claim that is true by construction (an algebraic identity
    checked numerically), as opposed to a finding about a model or data.
    """
    if not holds:
        raise AssertionError(f"claim failed: {statement} (measured {_show(measured)})")
    kind = "identity" if identity else "finding"
    line = f"checked {kind}: {statement}  [measured: {_show(measured)}]"
    try:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is not None:
            import html

            display({"text/plain": line,
                     "text/html": (f'<div class="circuitbook-claim" style="color:#1a7f37">&#10004; checked {kind}: '
                                   f"{html.escape(statement)} <small>[measured: {html.escape(_show(measured))}]"
                                   "</small></div>"),
                     CLAIM_MIME: {"statement": statement, "measured": _show(measured), "chapter": chapter,
                                 "kind": kind}},
                    raw=True)
            return
    except ImportError:
        pass
    print(line)
