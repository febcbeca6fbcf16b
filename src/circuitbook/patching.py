"""Activation patching and path patching with TransformerLens hooks (chapter 17).

Activation patching (Meng et al. 2022; the "Exploratory Analysis Demo" of TransformerLens)
runs a model on a **corrupted** input, replaces one activation by its value on a **clean**
input, and measures how far the output moves back towards the clean one. With a metric
``m(logits)`` the book reports the *normalised* effect

    effect = (m(patched) - m(corrupted)) / (m(clean) - m(corrupted)),

so **0 means "as corrupted" and 1 means "as clean"** (values outside [0, 1] are possible:
a patch can overshoot or hurt). Clean and corrupted tokens must have the same shape, so
that positions correspond.

- :func:`patching_run` makes a :class:`PatchingRun`: the model, both token batches, the
  metric, and the metric's clean and corrupted values.
- :func:`mean_loss` and :func:`logit_diff` are the two metrics (a loss and a logit
  difference at chosen positions); wrap them in a ``lambda logits: ...`` for the run.
- :func:`patch` patches any activation ``utils.get_act_name(name, layer)`` at chosen
  positions (and one head); :func:`patch_heads` patches each head's ``hook_z`` at all
  positions ([layer, head]); :func:`patch_resid` patches the residual stream before each
  layer at each position ([layer, pos]).
- :func:`path_patch` patches a sender head's output only into a receiver head's query, key
  or value input (``hook_q_input`` etc.), or only into the logits: the K-composition path
  of an induction head is ``into="k"``.

``patch_heads`` and ``patch_resid`` compute what ``transformer_lens.patching``'s
``get_act_patch_attn_head_out_all_pos`` and ``get_act_patch_resid_pre`` compute (the unit
tests compare them), without their progress bars, and normalised; path patching and
positions are the book's additions.
"""

from __future__ import annotations

import difflib
import math
import numbers
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

import torch

from circuitbook.loss import per_token_loss
from circuitbook.validate import check_heads, check_layer_head, check_model_device_dtype, check_tokens

if TYPE_CHECKING:  # annotations only (they are postponed): importing TransformerLens costs seconds
    from jaxtyping import Float, Int
    from transformer_lens import HookedTransformer

__all__ = ["PatchingRun", "patching_run", "mean_loss", "logit_diff", "patch", "patch_heads",
           "patch_resid", "path_patch"]

_INPUTS = ("q", "k", "v", "logits")


def mean_loss(logits: Float[torch.Tensor, "batch pos d_vocab"], tokens: Int[torch.Tensor, "batch pos"],
              positions: Sequence[int]) -> Float[torch.Tensor, ""]:
    """Mean next-token loss ``-log softmax(logits[b, p])[tokens[b, p + 1]]`` over the batch and
    the prediction positions ``p`` in ``positions``. Shapes: logits [batch, pos, d_vocab],
    tokens [batch, pos]; returns a 0-dim tensor. Lower is better, so the clean run has the
    lower value; the normalisation of :class:`PatchingRun` still maps it to 1. ``positions``
    must not be empty (the mean of no loss is NaN).

    Taught in chapter 17 (Induction heads).
    """
    return per_token_loss(logits, tokens, positions).mean()


def logit_diff(logits: Float[torch.Tensor, "batch pos d_vocab"], positions: Sequence[int],
               right: Int[torch.Tensor, "batch n_positions"],
               wrong: Int[torch.Tensor, "batch n_positions"]) -> Float[torch.Tensor, ""]:
    """Mean of ``logits[b, p_i, right[b, i]] - logits[b, p_i, wrong[b, i]]`` over the batch
    and the positions ``p_i``. Shapes: logits [batch, pos, d_vocab], right and wrong
    [batch, len(positions)]; returns a 0-dim tensor.

    Taught in chapter 17 (Induction heads).
    """
    if not isinstance(logits, torch.Tensor) or logits.ndim != 3:
        raise ValueError(f"logit_diff needs logits [batch, pos, d_vocab], got {tuple(getattr(logits, 'shape', ()))}")
    pos = _positions(positions, logits.shape[1], "logit_diff positions")
    if right.shape != wrong.shape or right.shape != (logits.shape[0], len(pos)):
        raise ValueError(f"right and wrong must both be [batch, n_positions] = {(logits.shape[0], len(pos))}, "
                         f"got {tuple(right.shape)} and {tuple(wrong.shape)}")
    for name, ids in (("right", right), ("wrong", wrong)):
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise TypeError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    at = logits[:, pos]
    dev = logits.device
    return (at.gather(-1, right[..., None].to(dev)) - at.gather(-1, wrong[..., None].to(dev))).mean()


@dataclass
class PatchingRun:
    """A clean and a corrupted run of one model under one metric (make it with :func:`patching_run`).

    ``clean_value`` and ``corrupted_value`` are the metric on the two unpatched runs;
    :meth:`normalise` maps a metric value to (m - corrupted) / (clean - corrupted).
    Every head's ``hook_z`` and the residual stream are cached by :func:`patching_run`;
    other activations are cached on first use.

    Taught in chapter 17 (Induction heads).
    """

    model: HookedTransformer
    clean_tokens: Int[torch.Tensor, "batch pos"]
    corrupted_tokens: Int[torch.Tensor, "batch pos"]
    metric: Callable[[Float[torch.Tensor, "batch pos d_vocab"]], Float[torch.Tensor, ""]]
    clean_value: float
    corrupted_value: float
    _clean: dict = field(default_factory=dict, repr=False)
    _corrupted: dict = field(default_factory=dict, repr=False)

    def normalise(self, value: float) -> float:
        return (_metric_value(value) - self.corrupted_value) / (self.clean_value - self.corrupted_value)

    def activation(self, name: str, clean: bool = True) -> Float[torch.Tensor, "batch pos ..."]:
        """The activation at hook ``name`` on the clean (or corrupted) tokens."""
        return self.activations([name], clean)[0]

    def activations(self, names: Sequence[str], clean: bool = True) -> list[Float[torch.Tensor, "batch pos ..."]]:
        """The activations at hooks ``names``, all missing ones cached in one forward pass."""
        for name in names:
            _check_hook(self.model, name)
        store, tokens = (self._clean, self.clean_tokens) if clean else (self._corrupted, self.corrupted_tokens)
        missing = [name for name in names if name not in store]
        if missing:
            with torch.no_grad():
                _, cache = self.model.run_with_cache(tokens, names_filter=missing, return_type=None)
            silent = [name for name in missing if name not in cache.cache_dict]
            if silent:
                raise ValueError(f"hook {silent[0]!r} exists but never runs in this model's forward pass "
                                 f"(an attention-only model has no MLP, so its MLP hooks stay silent): "
                                 "there is nothing to patch there")
            store.update({name: cache[name] for name in missing})
        return [store[name] for name in names]

    def measure(self, fwd_hooks, start_at_layer: int | None = None,
                residual: Float[torch.Tensor, "batch pos d_model"] | None = None) -> float:
        """The normalised metric of the corrupted run with ``fwd_hooks`` [(name, fn)].

        ``start_at_layer=l`` starts the run at block ``l`` from the corrupted residual stream
        cached there (or from ``residual`` [batch, pos, d_model]; ``l = n_layers`` runs only
        the final norm and the unembedding): hooks in earlier layers would see the unpatched
        corrupted run anyway, so this saves their cost and changes nothing."""
        kwargs = {}
        if start_at_layer is not None:
            n_layers = self.model.cfg.n_layers
            if residual is None:
                name = f"blocks.{start_at_layer}.hook_resid_pre" if start_at_layer < n_layers \
                    else f"blocks.{n_layers - 1}.hook_resid_post"
                residual = self.activation(name, clean=False)
            kwargs = {"start_at_layer": start_at_layer}
            if self.model.cfg.positional_embedding_type == "shortformer":
                kwargs["shortformer_pos_embed"] = self.activation("hook_pos_embed", clean=False)
        with torch.no_grad():
            logits = self.model.run_with_hooks(self.corrupted_tokens if residual is None else residual,
                                               fwd_hooks=fwd_hooks, **kwargs)
            return self.normalise(self.metric(logits))


def patching_run(model: HookedTransformer, clean_tokens: Int[torch.Tensor, "batch pos"],
                 corrupted_tokens: Int[torch.Tensor, "batch pos"],
                 metric: Callable[[Float[torch.Tensor, "batch pos d_vocab"]], Float[torch.Tensor, ""]]) -> PatchingRun:
    """Run ``model`` on both token batches ([batch, pos], the same shape) and evaluate
    ``metric`` (logits [batch, pos, d_vocab] -> a number) on each. Raises if the shapes
    differ, if the metric is not a finite number on either run (NaN from an empty window of
    positions, say), or if it does not tell the runs apart (the normalisation would divide by 0).

    Taught in chapter 17 (Induction heads).
    """
    check_model_device_dtype(model, "patching_run")
    if not callable(metric):
        raise TypeError(f"metric must be a function of the logits, got {type(metric).__name__}")
    clean, corrupted = check_tokens(model, clean_tokens), check_tokens(model, corrupted_tokens)
    if clean.shape != corrupted.shape:
        raise ValueError(f"clean tokens {tuple(clean.shape)} and corrupted tokens {tuple(corrupted.shape)} "
                         "must have the same shape, so that positions correspond")
    with torch.no_grad():   # cached now for patch_heads and path_patch
        clean_logits, clean_cache = model.run_with_cache(clean, names_filter=_is_cached)
        corrupted_logits, corrupted_cache = model.run_with_cache(corrupted, names_filter=_is_cached)
        clean_value, corrupted_value = _metric_value(metric(clean_logits)), _metric_value(metric(corrupted_logits))
    for which, value in (("clean", clean_value), ("corrupted", corrupted_value)):
        if not math.isfinite(value):
            raise ValueError(f"the metric is {value} on the {which} run: every patch would be {value} too "
                             "(a mean over an empty window of positions is NaN)")
    if clean_value == corrupted_value:
        raise ValueError(f"the metric is {clean_value} on both runs: nothing to patch back")
    return PatchingRun(model, clean, corrupted, metric, clean_value, corrupted_value,
                       dict(clean_cache.items()), dict(corrupted_cache.items()))


def patch(run: PatchingRun, name: str, layer: int | Int[torch.Tensor, ""] | None = None, *,
          positions: Sequence[int] | None = None, head: int | Int[torch.Tensor, ""] | None = None) -> float:
    """Patch the clean activation ``get_act_name(name, layer)`` into the corrupted run at
    ``positions`` (all when None; axis 1 of the activation) and, for per-head activations
    ([batch, pos, head, ...]: ``z``, ``q``, ``k``, ``v``, ``result``, ``q_input``...), only at
    ``head``. Returns the normalised metric. ``patch(run, "z", l, head=h, positions=[...])``
    patches one head's output only at chosen positions. Attention patterns and scores
    ([batch, head, q, k]) are not supported: patch ``z`` or use :func:`path_patch`. ``layer`` and
    ``head`` are ints or 0-dim integer tensors (``validate.check_layer_head``); ``positions``, when
    given, must not be empty (patching nothing would return 0 whatever the activation).

    Taught in chapter 17 (Induction heads).
    """
    from transformer_lens import utils

    if layer is not None:
        layer = check_layer_head(run.model, layer)[0]
    act = utils.get_act_name(name, layer) if layer is not None else name
    _check_hook(run.model, act)
    if act.endswith(("hook_pattern", "hook_attn_scores")):
        raise ValueError(f"{act}: patterns are [batch, head, q, k]; patch 'z' (the head's output) instead")
    clean = run.activation(act)
    pos = _positions(positions, clean.shape[1], "positions")
    if head is not None:
        if clean.ndim < 4:
            raise ValueError(f"{act} has no head axis (shape {tuple(clean.shape)}); leave head=None")
        in_layer = re.match(r"blocks\.(\d+)\.", act)
        head = check_layer_head(run.model, int(in_layer[1]) if in_layer else 0, head)[1]

    def hook(value, hook):
        value = value.clone()
        if head is None:
            value[:, pos] = clean[:, pos]
        else:
            value[:, pos, head] = clean[:, pos, head]
        return value

    return run.measure([(act, hook)])


def patch_heads(run: PatchingRun) -> Float[torch.Tensor, "n_layers n_heads"]:
    """Patch each head's output ``hook_z`` [batch, pos, head, d_head] at all positions, one
    head at a time: the normalised metric, [n_layers, n_heads], on the model's device in its
    dtype.

    Taught in chapter 17 (Induction heads).
    """
    cfg = run.model.cfg
    return _on_model([[patch(run, "z", l, head=h) for h in range(cfg.n_heads)] for l in range(cfg.n_layers)],
                     run.model)


def patch_resid(run: PatchingRun, positions: Sequence[int] | None = None) -> Float[torch.Tensor, "n_layers n_positions"]:
    """Patch the residual stream before each layer (``hook_resid_pre``) at one position at a
    time: the normalised metric, [n_layers, len(positions)] (all positions when None), on the
    model's device in its dtype.

    Taught in chapter 17 (Induction heads).
    """
    n = run.clean_tokens.shape[1]
    pos = _positions(positions, n, "positions")
    return _on_model([[patch(run, "resid_pre", l, positions=[p]) for p in pos] for l in range(run.model.cfg.n_layers)],
                     run.model)


def _on_model(values: list[list[float]], model) -> torch.Tensor:
    """``values`` as a tensor on the model's device, in its floating dtype."""
    W_E = model.W_E
    return torch.tensor(values, device=W_E.device, dtype=W_E.dtype)


def path_patch(run: PatchingRun, senders, receivers=(), into: str = "k", *,
               positions: Sequence[int] | None = None) -> float:
    """Patch the senders' clean outputs only into the receivers' ``into`` input.

    A head's output is o = z W_O ([batch, pos, d_model], without the shared b_O). In the
    corrupted run, each receiver head (layer r, head j) reads at ``into`` = "q", "k" or "v"
    (``hook_{into}_input``, [batch, pos, head, d_model]) the corrupted residual stream plus
    the clean-minus-corrupted output of every sender in a layer below r, at ``positions``
    (all when None)::

        input_{r,j} = resid_pre_r(corrupted) + sum_{senders (l, h), l < r} (o_{l,h}(clean) - o_{l,h}(corrupted)).

    Everything else, including what the senders write into other heads and into the logits,
    stays corrupted. The receivers' patched outputs then flow on through the later layers to
    the logits; with receivers in several layers, a later receiver still reads the corrupted
    stream plus the senders' difference, not what an earlier receiver's patch changed in it
    (Wang et al. 2023's path patching: receivers' inputs are the senders' direct paths
    alone). A receiver with no sender in an earlier layer receives nothing; at least one
    receiver must have one. ``into="logits"`` (no receivers) adds the difference only to the
    final residual stream: the senders' direct path. Returns the normalised metric.
    ``senders`` and ``receivers`` take every form :func:`circuitbook.heads.ablate` takes
    (``validate.check_heads``): one pair, a list of pairs, an [n, 2] tensor, or the output
    of ``torch.unravel_index``.

    The receivers' separate inputs need ``use_split_qkv_input`` (and, for grouped-query
    attention as in SmolLM2, ``ungroup_grouped_query_attention``, so that each query head
    has its own key and value input); both settings are restored afterwards.

    Taught in chapter 17 (Induction heads).
    """
    from transformer_lens import utils

    model, cfg = run.model, run.model.cfg
    if into not in _INPUTS:
        raise ValueError(f"into must be one of {_INPUTS}, got {into!r}")
    senders, receivers = check_heads(model, senders), check_heads(model, receivers)
    if not senders:
        raise ValueError("path_patch needs at least one sender head")
    if (into == "logits") != (not receivers):
        raise ValueError("into='logits' takes no receivers; 'q', 'k' and 'v' need at least one")
    pos = _positions(positions, run.clean_tokens.shape[1], "positions")
    senders = list(dict.fromkeys(senders))  # a sender named twice still sends once
    names = [utils.get_act_name("z", l) for l, _ in senders]
    deltas = {}
    for (l, h), z_clean, z_corr in zip(senders, run.activations(names), run.activations(names, False)):
        out = (z_clean - z_corr)[:, :, h] @ model.W_O[l, h]          # [batch, pos, d_model]
        deltas[(l, h)] = torch.zeros_like(out)
        deltas[(l, h)][:, pos] = out[:, pos]
    if into == "logits":   # only the final norm and the unembedding see the difference
        final = run.activation(utils.get_act_name("resid_post", cfg.n_layers - 1), clean=False)
        return run.measure([], start_at_layer=cfg.n_layers, residual=final + sum(deltas.values()))
    reached = sorted({r for r, _ in receivers if any(l < r for l, _ in deltas)})
    if not reached:
        raise ValueError(f"no receiver has a sender in an earlier layer (senders in layers "
                         f"{sorted({l for l, _ in senders})}, receivers in layers "
                         f"{sorted({r for r, _ in receivers})}): a head reads only earlier layers")
    hooks = []
    for r in reached:
        heads = sorted({h for l, h in receivers if l == r})
        delta = sum(d for (l, _), d in deltas.items() if l < r)
        seen: dict[str, torch.Tensor] = {}

        def keep(resid, hook, seen=seen):
            seen["resid"] = resid

        def add(x, hook, heads=heads, delta=delta, seen=seen,
                corrupted=run.activation(f"blocks.{r}.hook_resid_pre", clean=False)):
            # x[:, :, j] is this layer's residual stream as the run computed it (plus the
            # positional embedding for shortformer q and k); subtracting what earlier
            # receivers changed in it (zero in the first receiver layer) leaves the corrupted
            # stream, to which the senders' difference is added.
            x = x.clone()
            x[:, :, heads] += (delta - (seen["resid"] - corrupted))[:, :, None]
            return x

        hooks += [(f"blocks.{r}.hook_resid_pre", keep), (f"blocks.{r}.hook_{into}_input", add)]
    saved = cfg.use_split_qkv_input, cfg.ungroup_grouped_query_attention
    try:
        model.set_use_split_qkv_input(True)
        cfg.ungroup_grouped_query_attention = cfg.n_key_value_heads is not None
        return run.measure(hooks, start_at_layer=reached[0])
    finally:
        model.set_use_split_qkv_input(saved[0])
        cfg.ungroup_grouped_query_attention = saved[1]


def _is_cached(name: str) -> bool:
    """What the unpatched runs keep: each head's z, the residual stream before each block and
    after the last, and the positional embedding (for runs that start at a later block)."""
    return name.endswith(("attn.hook_z", "hook_resid_pre", "hook_resid_post", "hook_pos_embed"))


def _metric_value(value) -> float:
    """The metric's value as a float: it must be one number (a 0-dim or one-element tensor)."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(f"the metric must return one number, got a tensor of shape {tuple(value.shape)}; "
                             "reduce it over the batch (e.g. .mean())")
        return float(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"the metric must return a number or a one-element tensor, got {type(value).__name__}")


def _positions(positions, n: int, what: str) -> list[int]:
    """``positions`` as a list of ints in [0, n), all of them when None."""
    if positions is None:
        return list(range(n))
    if isinstance(positions, torch.Tensor):
        positions = positions.reshape(-1).tolist()
    bad_type = [p for p in positions if not _is_integer(p)]
    if bad_type:
        raise TypeError(f"{what} must be integer positions, got {bad_type[:3]}")
    pos = [int(p) for p in positions]
    if not pos:
        raise ValueError(f"{what} is empty: give at least one position in 0..{n - 1} (None means all)")
    bad = [p for p in pos if not 0 <= p < n]
    if bad:
        raise ValueError(f"{what} {bad} out of range 0..{n - 1}")
    return pos


def _is_integer(x) -> bool:
    if isinstance(x, torch.Tensor):
        return x.ndim == 0 and not x.dtype.is_floating_point and not x.dtype.is_complex and x.dtype != torch.bool
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _check_hook(model, name: str) -> None:
    if name not in model.hook_dict:
        close = difflib.get_close_matches(name, list(model.hook_dict), n=3)
        raise ValueError(f"unknown hook name {name!r}" + (f"; did you mean {close}?" if close else ""))
