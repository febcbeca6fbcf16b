"""Neurons of a trained MLP: activations, basis statistics, key-value reading (chapter 10).

A gated MLP (SwiGLU, as in Llama and SmolLM2) computes, for the normalised stream ``x``
[.., d_model] of one position (TransformerLens row vectors and hook names),

    gate = x W_gate                     hook_pre         [.., d_mlp]
    up   = x W_in                       hook_pre_linear  [.., d_mlp]
    a    = silu(gate) * up + b_in       hook_post        [.., d_mlp]   (the neurons)
    out  = a W_out + b_out              hook_mlp_out     [.., d_model]

so neuron ``n`` adds ``a[n] W_out[n]`` to the stream. Geva et al. (2021) read ``x W_in[:, n]``
as a *key* matched against the input and ``W_out[n]`` as a *value*; pushed through the final
norm's gain ``w`` and the unembedding, ``(W_out[n] * w) W_U`` is a score over the vocabulary
(:func:`value_logits`). The rest measures whether the neuron basis is *privileged*: whether
activations are heavy-tailed coordinate by coordinate, compared with the same vectors in a
random (Haar) rotated basis (:func:`haar_rotation`, :func:`kurtosis`, :func:`top_k_mass`).

Taught in chapter 10 (Position-wise feed-forward networks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch

from circuitbook.devices import resolve_device
from circuitbook.validate import check_layer_head, check_layers, check_model_device_dtype, check_tokens

if TYPE_CHECKING:  # annotations only (they are postponed): importing TransformerLens costs seconds
    from jaxtyping import Float, Int
    from transformer_lens import HookedTransformer

__all__ = [
    "mlp_activations",
    "haar_rotation",
    "kurtosis",
    "top_k_mass",
    "top_activations",
    "value_logits",
]


def mlp_activations(model: HookedTransformer, tokens: Int[torch.Tensor, "batch pos"],
                    layers: int | Int[torch.Tensor, ""] | Sequence[int]
                    ) -> dict[str, Float[torch.Tensor, "batch pos _"]] | dict[int, dict[str, Float[torch.Tensor, "batch pos _"]]]:
    """The gated MLP of each of ``layers`` on ``tokens`` [batch, pos]: its input and hooks.

    One forward pass, run only up to the last layer asked for (``stop_at_layer``), so later
    layers and the unembedding cost nothing. For each layer, a dict: ``"x"``, the MLP's input,
    ln2's output ``hook_normalized * w`` (TransformerLens hooks the norm before its gain)
    [batch, pos, d_model]; ``"gate"``, ``hook_pre``; ``"up"``, ``hook_pre_linear``; ``"post"``,
    ``hook_post`` [batch, pos, d_mlp]; ``"out"``, ``hook_mlp_out`` [batch, pos, d_model]; with
    ``post = silu(gate) * up + b_in`` and ``out = post W_out + b_out`` (module docstring).
    ``layers``: an int or a 0-dim integer tensor (returns that layer's dict) or a non-empty
    sequence of them (returns ``{layer: dict}``). Token ids must lie in ``0..d_vocab - 1``.

    Taught in chapter 10 (Position-wise feed-forward networks).
    """
    if not model.cfg.gated_mlp:
        raise ValueError("mlp_activations reads a gated (SwiGLU) MLP; this model's MLP is not gated")
    check_model_device_dtype(model, "mlp_activations")
    tokens = check_tokens(model, tokens)
    single = (isinstance(layers, torch.Tensor) and layers.ndim == 0) or not hasattr(layers, "__iter__")
    wanted = [check_layer_head(model, layers)[0]] if single else check_layers(model, layers)
    hooks = {"x": "ln2.hook_normalized", "gate": "mlp.hook_pre", "up": "mlp.hook_pre_linear",
             "post": "mlp.hook_post", "out": "hook_mlp_out"}
    kept: dict[str, torch.Tensor] = {}

    def keep(value: torch.Tensor, hook) -> None:
        kept[hook.name] = value.detach()

    names = [f"blocks.{layer}.{hook}" for layer in wanted for hook in hooks.values()]
    with torch.no_grad(), model.hooks(fwd_hooks=[(name, keep) for name in names]):
        model(tokens, stop_at_layer=max(wanted) + 1)
    out = {}
    for layer in wanted:
        acts = {key: kept[f"blocks.{layer}.{hook}"] for key, hook in hooks.items()}
        norm = model.blocks[layer].ln2
        if hasattr(norm, "w"):
            # TransformerLens normalises half-precision streams in float32 and hooks that, then
            # casts to the model's dtype before the gain: so does the MLP's input here
            acts["x"] = acts["x"].to(norm.w.dtype) * norm.w.detach()
        out[layer] = acts
    return out[wanted[0]] if single else out


def haar_rotation(n: int, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32, *,
                  device: str | torch.device | None = None) -> Float[torch.Tensor, "n n"]:
    """A random orthogonal matrix [n, n], uniform (Haar) over the orthogonal group.

    Equation: ``G`` with i.i.d. standard normal entries, ``G = Q R`` (QR), then
    ``Q diag(sign(diag R))``. Without the sign fix the distribution of ``Q`` is not uniform:
    LAPACK's Householder QR makes ``diag R`` negative where ``G``'s column leads positive,
    so ``Q[0, 0] <= 0`` always (Mezzadri 2007). ``G`` is drawn by ``generator`` on the
    generator's own device (no generator: on ``device``, else the CPU), in float64 (float32
    on MPS, which has no float64), so one seed gives one matrix whatever ``device``; the
    result is returned on ``device`` (None: where it was drawn) in ``dtype``. The book's
    one Haar sampler: chapter 10's rotated neuron basis and chapter 18's
    :func:`circuitbook.composition.rotated_baseline` both draw here.

    Taught in chapter 10 (Position-wise feed-forward networks), used in chapter 18.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch dtype, got {dtype!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    target = None if device is None else resolve_device(device)
    where = generator.device if generator is not None else (target or torch.device("cpu"))
    work = torch.float32 if where.type == "mps" else torch.float64
    q, r = torch.linalg.qr(torch.randn(n, n, generator=generator, dtype=work, device=where))
    signs = torch.sign(torch.diagonal(r))
    signs = torch.where(signs == 0, torch.ones_like(signs), signs)  # a zero pivot: probability 0
    return (q * signs).to(device=target or where, dtype=dtype)


def kurtosis(x: Float[torch.Tensor, "..."], dim: int = 0) -> Float[torch.Tensor, "..."]:
    """Kurtosis ``E[(x - mean)^4] / E[(x - mean)^2]^2`` along ``dim`` (3 for a Gaussian, 1 for
    a fair +-1 coin; large for a heavy-tailed, mostly-quiet coordinate). Population moments,
    computed in float64. Shapes: ``x`` [..], returns ``x`` without ``dim``. A coordinate that is
    constant along ``dim`` has no kurtosis (0 / 0): it is refused, not returned as NaN.

    Taught in chapter 10 (Position-wise feed-forward networks).
    """
    if not isinstance(x, torch.Tensor) or not (x.is_floating_point() or x.dtype in (torch.int64, torch.int32)):
        raise TypeError(f"kurtosis needs a real tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    if x.ndim == 0 or x.shape[dim] < 2:
        raise ValueError(f"kurtosis needs at least 2 values along dim={dim}, got shape {tuple(x.shape)}")
    x = x.to(torch.float64)
    centred = x - x.mean(dim=dim, keepdim=True)
    var = centred.pow(2).mean(dim=dim)
    flat = (var == 0).reshape(-1)
    if flat.any():
        raise ValueError(f"kurtosis is undefined (0 / 0) for a constant coordinate: {int(flat.sum())} of "
                         f"{flat.numel()} coordinate(s) do not vary along dim={dim} (the first at flat "
                         f"index {int(flat.nonzero()[0])}); leave them out")
    return centred.pow(4).mean(dim=dim) / var.pow(2)


def top_k_mass(x: Float[torch.Tensor, "... n"], k: int) -> Float[torch.Tensor, "..."]:
    """Share of each row's squared norm held by its ``k`` largest coordinates (in absolute value).

    Equation: ``sum_{i in top_k |x|} x_i^2 / sum_i x_i^2``; ``k / n`` for a vector spread evenly,
    1 for a vector with at most ``k`` nonzero coordinates. Shapes: ``x`` [.., n] -> [..],
    float64.

    Taught in chapter 10 (Position-wise feed-forward networks).
    """
    n = x.shape[-1]
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= n:
        raise ValueError(f"k must be in [1, {n}], got {k}")
    sq = x.to(torch.float64).pow(2)
    return sq.topk(k, dim=-1).values.sum(-1) / sq.sum(-1)


def top_activations(acts: Float[torch.Tensor, "batch pos"], k: int
                    ) -> tuple[Float[torch.Tensor, "k"], Int[torch.Tensor, "k 2"]]:
    """The ``k`` largest entries of ``acts`` [batch, pos] and where they are.

    Returns ``(values [k], where [k, 2])``, largest first, ``where[i] = (sequence, position)``.
    For "which corpus tokens make this neuron fire most".

    Taught in chapter 10 (Position-wise feed-forward networks).
    """
    if not isinstance(acts, torch.Tensor) or acts.ndim != 2:
        raise ValueError(f"acts must be a [batch, pos] tensor, got shape {tuple(getattr(acts, 'shape', ()))}")
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= acts.numel():
        raise ValueError(f"k must be an int in [1, {acts.numel()}] (acts {tuple(acts.shape)} holds "
                         f"{acts.numel()} entries), got {k!r}")
    values, flat = acts.flatten().topk(k)
    pos = acts.shape[1]
    return values, torch.stack([flat // pos, flat % pos], dim=1)


def value_logits(W_out: Float[torch.Tensor, "n_neurons d_model"], final_norm_w: Float[torch.Tensor, "d_model"] | None,
                 W_U: Float[torch.Tensor, "d_model d_vocab"]) -> Float[torch.Tensor, "n_neurons d_vocab"]:
    """Each neuron's *value* vector read as a score over the vocabulary (Geva et al. 2021).

    Equation: ``V[n] = (W_out[n] * w) W_U``, with ``w`` the final RMSNorm's gain (``None``: no
    gain, as for a model whose norm weights are folded into ``W_U``). The final norm's division
    by ``rms(x)`` is positive and shared by every vocabulary entry at a position, so it changes
    the size of ``V[n]`` but not its ranking; the neuron's activation ``a[n]`` multiplies it, so a
    negative activation writes ``-V[n]``. Shapes: ``W_out`` [n_neurons, d_model], ``w`` [d_model],
    ``W_U`` [d_model, d_vocab] -> [n_neurons, d_vocab].

    Taught in chapter 10 (Position-wise feed-forward networks).
    """
    for name, w in (("W_out", W_out), ("W_U", W_U)):
        if not isinstance(w, torch.Tensor) or w.ndim != 2:
            raise ValueError(f"{name} must be a 2-d tensor, got shape {tuple(getattr(w, 'shape', ()))}")
    d_model = W_out.shape[1]
    if W_U.shape[0] != d_model:
        hint = "; did you pass W_U.T? W_U is [d_model, d_vocab]" if W_U.shape[1] == d_model else ""
        raise ValueError(f"W_U must be [d_model, d_vocab] with d_model = {d_model} (W_out is [n_neurons, d_model] = "
                         f"{tuple(W_out.shape)}), got {tuple(W_U.shape)}{hint}")
    if final_norm_w is not None and tuple(final_norm_w.shape) != (d_model,):
        raise ValueError(f"final_norm_w must be the final norm's gain [d_model] = [{d_model}], "
                         f"got {tuple(final_norm_w.shape)}")
    rows = W_out if final_norm_w is None else W_out * final_norm_w
    return rows @ W_U
