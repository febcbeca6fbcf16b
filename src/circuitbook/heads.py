"""Scores that name what a head does, and head ablation (chapters 6, 7, 9 and 17).

- :func:`induction_scores` and :func:`prev_token_scores` read one diagonal of each attention
  pattern on repeated random tokens. They hook ``hook_pattern``, reduce the pattern to one
  number per head at once and skip the unembedding, so they cost less than a plain forward
  pass and keep nothing of size [batch, pos, pos] alive.
- :func:`duplicate_token_pattern_score` reads, on any text, the attention from a repeated token
  to its earlier occurrences (chapter 7), and :func:`prev_token_pattern_score` the attention to
  the previous token (chapter 6), from patterns you hold (``run_with_cache``), including
  :func:`uniform_causal_pattern`, the baseline a head without preferences would score.
- :func:`copying_scores` reads the eigenvalues of the full OV circuit through a d_head x d_head
  matrix, never vocab x vocab.
- :func:`ablate` zero- or mean-ablates heads, as a context manager or as hooks.

The in-context-learning score, which is about a model's losses rather than its heads, is in
:mod:`circuitbook.icl`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from circuitbook.data.repeats import repeated_random_tokens
from circuitbook.devices import resolve_device
from circuitbook.validate import (
    check_heads,
    check_layer_head,
    check_model_device_dtype,
    check_tokens,
    model_device,
)

if TYPE_CHECKING:  # annotations only (they are postponed): importing TransformerLens costs seconds
    from jaxtyping import Bool, Float, Int
    from transformer_lens import HookedTransformer

__all__ = [
    "induction_scores",
    "prev_token_scores",
    "induction_and_prev_token_scores",
    "duplicate_token_pattern_score", "prev_token_pattern_score",
    "uniform_causal_pattern",
    "copying_scores", "ablate", "Ablation"]


# --- attention-pattern scores ------------------------------------------------------------------


def _mean_attention_at_offset(model, tokens: torch.Tensor, offset: int, first_query: int) -> torch.Tensor:
    """Mean attention from query ``q`` to key ``q - offset``, over the batch and ``q >= first_query``.

    Returns [n_layers, n_heads]. Each layer's ``hook_pattern`` [batch, head, q, k] is reduced
    to [head] inside the hook, so no pattern outlives its layer.
    """
    L, n = model.cfg.n_layers, model.cfg.n_heads
    scores = torch.zeros(L, n, device=tokens.device, dtype=model.W_E.dtype)

    def reduce_pattern(pattern: torch.Tensor, hook) -> None:
        # diagonal(offset=-offset) holds the entries (q, q - offset) for q = offset, offset+1, ...
        stripe = pattern.diagonal(offset=-offset, dim1=-2, dim2=-1)[..., first_query - offset :]
        scores[hook.layer()] = stripe.mean(dim=(0, 2)).to(scores.dtype)

    hooks = [(f"blocks.{layer}.attn.hook_pattern", reduce_pattern) for layer in range(L)]
    with torch.no_grad(), model.hooks(fwd_hooks=hooks):
        # return_type=None runs every block but skips the unembedding, the costliest part of
        # a large-vocabulary forward pass; the patterns are all we need.
        model(tokens, return_type=None)
    return scores


def _check_prefix(prefix, tokens: torch.Tensor | None) -> int:
    if not isinstance(prefix, int) or isinstance(prefix, bool) or prefix < 0:
        raise ValueError(f"prefix must be a non-negative int (the number of leading tokens such as BOS), got {prefix!r}")
    if prefix and tokens is None:
        raise ValueError(f"prefix={prefix} describes tokens you pass: give tokens too (e.g. "
                         "repeated_random_tokens(..., prefix=bos)), or leave prefix at 0")
    return prefix


def _repeated_tokens(model, seq_len: int | None, batch: int, seed: int, tokens: torch.Tensor | None, prefix: int = 0):
    """Validated [batch, prefix + 2 * seq_len] repeated tokens and their ``seq_len``."""
    if tokens is not None:
        tokens = check_tokens(model, tokens)
        body = tokens[:, prefix:]
        total = body.shape[1]
        half = total // 2
        if total % 2 or half < 2 or not torch.equal(body[:, :half], body[:, half:]):
            raise ValueError(
                f"tokens after the first prefix={prefix} must be a random sequence repeated once, "
                "[r_0..r_{n-1}, r_0..r_{n-1}] with n >= 2 (see circuitbook.data.repeated_random_tokens); "
                f"got shape {tuple(tokens.shape)} whose repeated part's two halves differ or are too short"
                + ("" if prefix else "; if the tokens start with BOS, pass prefix=1")
            )
        if seq_len is not None and seq_len != half:
            raise ValueError(f"seq_len={seq_len} disagrees with the tokens given, which repeat {half} tokens")
        return tokens, half
    n_ctx = model.cfg.n_ctx
    if seq_len is None:
        seq_len = min(n_ctx // 2, 50)
    if seq_len < 2:
        raise ValueError(f"seq_len must be >= 2 for an induction pattern to exist, got {seq_len}")
    if 2 * seq_len > n_ctx:
        raise ValueError(
            f"seq_len={seq_len} repeated twice is {2 * seq_len} tokens, longer than the model's n_ctx={n_ctx}"
        )
    tokens = repeated_random_tokens(batch, seq_len, model.cfg.d_vocab, seed=seed, device=model_device(model))
    return tokens, seq_len


def induction_scores(model: HookedTransformer, *, seq_len: int | None = None, batch: int = 8, seed: int = 0,
                     tokens: Int[torch.Tensor, "batch pos"] | None = None,
                     prefix: int = 0) -> Float[torch.Tensor, "n_layers n_heads"]:
    """Induction score of every head: attention from each repeated token to its earlier successor.

    Equation: on ``[r_0..r_{n-1}, r_0..r_{n-1}]``, ``score = mean_{b, i} A[b, n + i, i + 1]`` for
    ``i = 0..n-1``: the query at position ``n + i`` (second copy of ``r_i``) attends to position
    ``i + 1``, the token that followed ``r_i`` last time. 1 is a perfect induction head; a head
    that attends uniformly scores about 1/(2n). Tokens come from
    ``circuitbook.data.repeated_random_tokens(batch, seq_len, d_vocab, seed=seed)`` (no BOS), with
    ``seq_len`` defaulting to ``min(n_ctx // 2, 50)``, or pass your own repeated ``tokens``.
    ``prefix`` counts leading tokens of ``tokens`` outside the repeat, such as a BOS token
    (``repeated_random_tokens(..., prefix=bos)`` gives ``prefix=1``): positions shift by
    ``prefix`` and the score reads ``A[b, prefix + n + i, prefix + i + 1]``.
    Patterns are those of the real forward pass, reduced to a diagonal inside a hook.
    Shapes: ``tokens`` [batch, prefix + 2 * seq_len]; returns [n_layers, n_heads].

    Taught in chapter 17 (Induction heads).
    """
    check_model_device_dtype(model, "induction_scores")
    prefix = _check_prefix(prefix, tokens)
    tokens, n = _repeated_tokens(model, seq_len, batch, seed, tokens, prefix)
    return _mean_attention_at_offset(model, tokens, offset=n - 1, first_query=prefix + n)


def prev_token_scores(model: HookedTransformer, *, seq_len: int | None = None, batch: int = 8, seed: int = 0,
                      tokens: Int[torch.Tensor, "batch pos"] | None = None,
                      prefix: int = 0) -> Float[torch.Tensor, "n_layers n_heads"]:
    """Previous-token score of every head: mean attention from each position to the one before.

    Equation: ``score = mean_{b, p} A[b, p, p - 1]`` over every position ``p >= prefix + 1``
    (the first token has no predecessor, and with ``prefix`` leading tokens such as BOS the
    first real token's predecessor would be the prefix: both are left out). Same tokens and
    arguments as :func:`induction_scores`; ``tokens`` may be any [batch, pos] sequence here.
    Shapes: ``tokens`` [batch, pos]; returns [n_layers, n_heads].

    Taught in chapter 17 (Induction heads).
    """
    check_model_device_dtype(model, "prev_token_scores")
    prefix = _check_prefix(prefix, tokens)
    if tokens is None:
        tokens, _ = _repeated_tokens(model, seq_len, batch, seed, None)
    else:
        tokens = check_tokens(model, tokens)
        if tokens.shape[1] < prefix + 2:
            raise ValueError(f"prev_token_scores needs at least 2 tokens after the prefix of {prefix}, got "
                             f"{tokens.shape[1] - prefix}")
    return _mean_attention_at_offset(model, tokens, offset=1, first_query=prefix + 1)


def induction_and_prev_token_scores(model: HookedTransformer, *, seq_len: int, batch: int, seed: int
                                    ) -> tuple[Float[torch.Tensor, "n_layers n_heads"],
                                               Float[torch.Tensor, "n_layers n_heads"]]:
    """``(induction_scores, prev_token_scores)`` of every head on the same repeated random tokens.

    Both are read from ``repeated_random_tokens(batch, seq_len, d_vocab, seed=seed)`` (see
    :func:`induction_scores` and :func:`prev_token_scores` for the equations); the training
    metrics (``circuitbook.train.InductionMetrics``, chapter 19) and the zoo's metrics record
    the pair. Shapes: returns two [n_layers, n_heads] tensors.

    Taught in chapter 17 (Induction heads).
    """
    return (
        induction_scores(model, seq_len=seq_len, batch=batch, seed=seed),
        prev_token_scores(model, seq_len=seq_len, batch=batch, seed=seed),
    )


# --- scores on real text --------------------------------------------------------------------


def uniform_causal_pattern(n_pos: int, *, dtype: torch.dtype = torch.float32,
                           device: str | torch.device | None = None) -> Float[torch.Tensor, "n_pos n_pos"]:
    """The pattern of a head that spreads its attention evenly over the past: the baseline.

    Equation: ``A[q, k] = 1 / (q + 1)`` for ``k <= q`` and 0 above the diagonal. A score computed
    on this pattern is what a head that ignores content and position (but obeys the causal mask)
    would get, so a head's score means something only well above it.
    Shapes: returns [n_pos, n_pos] on ``device`` (None: the CPU; pass the device of the patterns
    it is compared with, e.g. ``pattern.device``) in ``dtype``.

    Taught in chapter 6 (Scaled dot-product attention).
    """
    if not isinstance(n_pos, int) or isinstance(n_pos, bool) or n_pos < 1:
        raise ValueError(f"n_pos must be an int >= 1, got {n_pos!r}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch dtype, got {dtype!r}")
    device = torch.device("cpu") if device is None else resolve_device(device)
    allowed = torch.ones(n_pos, n_pos, dtype=dtype, device=device).tril()
    return allowed / allowed.sum(-1, keepdim=True)


def prev_token_pattern_score(pattern: Float[torch.Tensor, "batch head pos pos"] | Float[torch.Tensor, "pos pos"]
                             ) -> Float[torch.Tensor, "head"] | Float[torch.Tensor, ""]:
    """Previous-token score of a pattern you hold: mean attention from each position to the one before.

    Equation: ``score = mean_{..., p >= 1} A[..., p, p - 1]``, the same number
    :func:`prev_token_scores` reads inside a forward pass (the first position has no
    predecessor and is left out). On :func:`uniform_causal_pattern` ``(n)`` it is
    ``mean_{p=1}^{n-1} 1 / (p + 1)``, the baseline.
    Shapes: ``pattern`` [batch, head, q, k] -> [head], or one pattern [q, k] -> a 0-dim tensor.

    Taught in chapter 6 (Scaled dot-product attention).
    """
    if pattern.ndim not in (2, 4) or pattern.shape[-1] != pattern.shape[-2] or pattern.shape[-1] < 2:
        raise ValueError(f"pattern must be [batch, head, pos, pos] or [pos, pos] with pos >= 2, "
                         f"got {tuple(pattern.shape)}")
    stripe = pattern.diagonal(offset=-1, dim1=-2, dim2=-1)  # [..., pos - 1]
    return stripe.mean() if pattern.ndim == 2 else stripe.mean(dim=(0, 2))


def _earlier_same_token(tokens: torch.Tensor) -> torch.Tensor:
    """[batch, q, k] bool: key ``k`` lies before query ``q`` and holds the same token."""
    pos = tokens.shape[-1]
    before = torch.ones(pos, pos, dtype=torch.bool, device=tokens.device).tril(-1)
    return (tokens[:, :, None] == tokens[:, None, :]) & before


def _duplicate_queries(tokens: torch.Tensor, queries: torch.Tensor | None) -> torch.Tensor:
    """[batch, q] bool: queries whose token occurred earlier (and that ``queries`` admits)."""
    has_earlier = _earlier_same_token(tokens).any(-1)
    if queries is not None:
        if queries.shape != tokens.shape or queries.dtype != torch.bool:
            raise ValueError(f"queries must be a bool tensor shaped like tokens {tuple(tokens.shape)}, "
                             f"got {queries.dtype} {tuple(queries.shape)}")
        has_earlier = has_earlier & queries.to(tokens.device)
    if not has_earlier.any():
        raise ValueError("no query token occurs earlier in its sequence: the duplicate-token score "
                         "is undefined on these tokens (use longer text, or admit more queries)")
    return has_earlier


def duplicate_token_pattern_score(
    pattern: Float[torch.Tensor, "batch head pos pos"], tokens: Int[torch.Tensor, "batch pos"], *,
    queries: Bool[torch.Tensor, "batch pos"] | None = None
) -> Float[torch.Tensor, "head"]:
    """Duplicate-token score of patterns you hold: attention from a repeated token to its earlier copies.

    Equation: with ``D_b`` the query positions ``q`` of sequence ``b`` whose token ``t_q`` occurred
    at some ``k < q`` (and, if given, with ``queries[b, q]`` true),
    ``score_h = sum_b sum_{q in D_b} sum_{k < q, t_k = t_q} A[b, h, q, k] / sum_b |D_b|``: the share
    of its attention that a repeated token puts on the earlier occurrences of itself, averaged over
    the repeated tokens. 1 is a perfect duplicate-token head; :func:`uniform_causal_pattern` gives
    the mean of (number of earlier copies) / (q + 1), the baseline. Unlike an induction head (which
    attends to the token *after* the earlier copy, chapter 17), this head looks at the copy itself.
    Shapes: ``pattern`` [batch, head, q, k] (a [q, k] pattern broadcasts over batch and head when
    given as ``pattern[None, None]``), ``tokens`` [batch, pos], ``queries`` [batch, pos] bool;
    returns [head].

    Taught in chapter 7 (Multi-head attention).
    """
    if pattern.ndim != 4 or pattern.shape[-1] != pattern.shape[-2]:
        raise ValueError(f"pattern must be [batch, head, q, k], got {tuple(pattern.shape)}")
    if tokens.ndim != 2 or tokens.shape[-1] != pattern.shape[-1]:
        raise ValueError(f"tokens {tuple(tokens.shape)} do not match pattern {tuple(pattern.shape)}")
    counted = _duplicate_queries(tokens, queries)  # [batch, q]
    # the masks are read on the tokens' device, the score computed on the patterns'
    counted, same = counted.to(pattern.device), _earlier_same_token(tokens).to(pattern.device)  # [batch, q, k]
    mass = (pattern * same[:, None].to(pattern.dtype)).sum(-1)  # [batch, head, q]
    return (mass * counted[:, None].to(mass.dtype)).sum(dim=(0, 2)) / counted.sum()


# --- copying ----------------------------------------------------------------------------------


def copying_scores(model: HookedTransformer, layer: int | Int[torch.Tensor, ""] | None = None, head: int | Int[torch.Tensor, ""] | None = None
                   ) -> Float[torch.Tensor, "n_layers n_heads"] | Float[torch.Tensor, "n_heads"] | Float[torch.Tensor, ""]:
    """Copying score of heads from the eigenvalues of their full OV circuit ``W_E W_OV W_U``.

    Equation: ``score = Re(sum_i lambda_i) / sum_i |lambda_i|`` over the eigenvalues of
    ``W_E W_V W_O W_U`` [d_vocab, d_vocab] (Elhage et al. 2021): 1 when every nonzero eigenvalue
    is positive, -1 when all are negative (the table has rank at most d_head, so most are 0). The numerator is the table's trace, so a positive score
    says the head raises the attended token's own logit on balance over the vocabulary, not that
    every token's own logit rises (single diagonal entries can have either sign; chapter 9). The nonzero
    eigenvalues of ``W_E W_V W_O W_U`` equal those of the d_head x d_head matrix
    ``W_O (W_U W_E) W_V`` (``eig(AB) = eig(BA)`` apart from zeros), and ``W_U W_E``
    [d_model, d_model] is shared by every head, so nothing of size vocab x vocab is formed. For
    a single head (or a few) it is cheaper still to contract the vocabulary through d_head:
    ``W_O (W_U (W_E W_V))``.
    Shapes: returns [n_layers, n_heads] (``layer=None``), [n_heads] (``layer`` given) or a
    0-dim tensor (``layer`` and ``head`` given). A head whose full OV circuit is zero scores 0.

    Taught in chapter 9 (Full circuits), used in chapter 17.
    """
    if head is not None and layer is None:
        raise ValueError("copying_scores: give layer together with head")
    check_model_device_dtype(model, "copying_scores")
    if layer is not None:
        layer, head = check_layer_head(model, layer, head)
    if layer is None and model.cfg.n_layers == 0:
        return torch.zeros(0, model.cfg.n_heads, device=model.W_E.device, dtype=model.W_E.dtype)
    with torch.no_grad():
        W_E, W_U = model.W_E, model.W_U
        if layer is None:
            W_V, W_O = model.W_V, model.W_O  # [L, H, d_model, d_head], [L, H, d_head, d_model]
        else:
            W_V, W_O = model.blocks[layer].attn.W_V, model.blocks[layer].attn.W_O
            if head is not None:
                W_V, W_O = W_V[head], W_O[head]
        n_heads = W_V[..., 0, 0].numel()
        d_model, d_head = W_V.shape[-2], W_V.shape[-1]
        # Cost in multiply-adds per vocabulary entry: one shared d_model^2 product, or 2 d_head
        # d_model per head through the vocabulary. Pick the cheaper route.
        if 2 * n_heads * d_head < d_model:
            small = W_O @ (W_U @ (W_E @ W_V))  # [..., d_head, d_head]
        else:
            small = W_O @ (W_U @ W_E) @ W_V
        if small.dtype in (torch.float16, torch.bfloat16):
            small = small.float()  # eig has no half-precision kernels
        eig = torch.linalg.eigvals(small)  # [..., d_head], complex
        total, size = eig.sum(-1).real, eig.abs().sum(-1)
        # A head whose full OV circuit is zero copies nothing: score 0 rather than 0/0.
        score = torch.where(size > 0, total / size.clamp_min(torch.finfo(size.dtype).tiny), torch.zeros_like(size))
        return score.to(W_E.dtype)


# --- ablation ---------------------------------------------------------------------------------


class Ablation:
    """Zero- or mean-ablation of some heads; see :func:`ablate`.

    ``with Ablation(...):`` adds the hooks to the model and removes exactly them on exit;
    ``.fwd_hooks`` is the same list of ``(hook_name, fn)`` pairs for ``model.run_with_hooks``.

    Taught in chapter 17 (Induction heads).
    """

    def __init__(self, model: HookedTransformer, heads, how: str = "mean", *,
                 reference_tokens: Int[torch.Tensor, "batch pos"] | None = None):
        if how not in ("mean", "zero"):
            raise ValueError(f"unknown ablation how={how!r}: use 'mean' or 'zero'")
        check_model_device_dtype(model, "ablate")
        heads = check_heads(model, heads)
        if not heads:
            raise ValueError("ablate needs at least one (layer, head) pair")
        if how == "zero" and reference_tokens is not None:
            raise ValueError("reference_tokens only apply to how='mean'")
        self.model, self.how = model, how
        self.by_layer: dict[int, list[int]] = {}
        for layer, head in heads:
            self.by_layer.setdefault(layer, [])
            if head not in self.by_layer[layer]:
                self.by_layer[layer].append(head)
        # Mean of each ablated head's z over batch and positions of a clean reference run.
        self.means: dict[int, torch.Tensor] | None = None
        if how == "mean" and reference_tokens is not None:
            self.means = self._reference_means(check_tokens(model, reference_tokens))
        self.fwd_hooks = [(f"blocks.{layer}.attn.hook_z", self._hook) for layer in sorted(self.by_layer)]
        self._context = None

    def _reference_means(self, tokens: torch.Tensor) -> dict[int, torch.Tensor]:
        means: dict[int, torch.Tensor] = {}

        def record(z: torch.Tensor, hook) -> None:
            layer = hook.layer()
            means[layer] = z[:, :, self.by_layer[layer]].mean(dim=(0, 1))  # [heads, d_head]

        hooks = [(f"blocks.{layer}.attn.hook_z", record) for layer in self.by_layer]
        with torch.no_grad(), self.model.hooks(fwd_hooks=hooks):
            self.model(tokens, return_type=None)
        return means

    def _hook(self, z: torch.Tensor, hook) -> torch.Tensor:
        # z [batch, pos, head, d_head]; replacing z (not the head's result) also removes the
        # head's b_V W_O term, since b_V sits inside z. The layer's b_O stays: it is no head's.
        layer = hook.layer()
        idx = self.by_layer[layer]
        z = z.clone()  # leave the tensor autograd saw untouched
        if self.how == "zero":
            z[:, :, idx] = 0.0
        elif self.means is not None:
            z[:, :, idx] = self.means[layer].to(z.dtype)
        else:
            z[:, :, idx] = z[:, :, idx].mean(dim=(0, 1), keepdim=True)
        return z

    def __enter__(self):
        self._context = self.model.hooks(fwd_hooks=self.fwd_hooks)
        return self._context.__enter__()

    def __exit__(self, *exc):
        context, self._context = self._context, None
        return context.__exit__(*exc)


def ablate(model: HookedTransformer, heads, how: str = "mean", *,
           reference_tokens: Int[torch.Tensor, "batch pos"] | None = None) -> Ablation:
    """Ablate attention heads: replace their output by its mean (or by zero).

    Equation: for an ablated head, ``z = A (x W_V + b_V)`` [batch, pos, d_head] is replaced by
    ``mean_{batch, pos} z`` (``how="mean"``) or 0 (``how="zero"``), so the head writes the constant
    ``mean(z) W_O`` (or nothing). The layer's shared ``b_O`` is not touched. Means come from a
    clean (unablated) run on ``reference_tokens`` when given; otherwise from the batch being run,
    inside the same forward pass (so they include the effect of ablations in earlier layers).
    Use as ``with ablate(model, [(0, 1)]): model(tokens)`` or
    ``model.run_with_hooks(tokens, fwd_hooks=ablate(model, [(0, 1)]).fwd_hooks)``.
    Shapes: ``heads`` is a list of ``(layer, head)`` pairs (or one pair), a [n, 2] integer tensor,
    or the ``(layers, heads)`` index tensors of ``torch.unravel_index``; ``reference_tokens``
    [batch, pos].

    Taught in chapter 17 (Induction heads).
    """
    return Ablation(model, heads, how, reference_tokens=reference_tokens)
