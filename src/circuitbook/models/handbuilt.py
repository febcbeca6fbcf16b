"""A two-layer attention-only model with a hand-built previous-token head, into which a reader
plugs their own induction head (the induction module, problem 3).

The residual stream [d_model = 2 V + N] has three orthogonal blocks:

- ``S_tok``  dims [0, V):        the current token, one-hot (the embedding writes it);
- ``S_pos``  dims [V, V + N):    the position, one-hot (shortformer: seen only by Q and K);
- ``S_prev`` dims [V + N, 2V+N): the previous token, one-hot (head 0.0 writes it).

Head 0.0 is fixed: its query at position p looks for key position p - 1 (positional QK
circuit) and its OV circuit copies the attended token from ``S_tok`` into ``S_prev``. The
reader supplies layer 1's head as two d_model x d_model matrices, used exactly as written:
the score of query x_q on key x_k is ``x_q W_QK x_k^T`` (the 1/sqrt(d_head) is absorbed), and
attending to x_k writes ``x_k W_OV``. The unembedding reads ``S_tok``.
"""

from __future__ import annotations

import math
import warnings

import torch

from circuitbook.devices import resolve_device


def subspaces(d_vocab: int, n_ctx: int, *, device: str | torch.device | None = None) -> dict[str, torch.Tensor]:
    """Orthonormal bases as row matrices [V or N, d_model]: ``S_tok``, ``S_pos``, ``S_prev``,
    float64, on ``device`` (None: the CPU)."""
    for name, value in (("d_vocab", d_vocab), ("n_ctx", n_ctx)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    V, N = d_vocab, n_ctx
    eye = torch.eye(2 * V + N, dtype=torch.float64, device=torch.device("cpu") if device is None else resolve_device(device))
    return {"S_tok": eye[:V], "S_pos": eye[V:V + N], "S_prev": eye[V + N:]}


def induction_scaffold(W_QK: torch.Tensor, W_OV: torch.Tensor, *, d_vocab: int = 24, n_ctx: int = 40,
                       prev_into: str = "S_prev", strength: float = 30.0,
                       device: str | torch.device | None = None):
    """The two-layer model with head 1.0 given by the reader's ``W_QK`` and ``W_OV``.

    ``prev_into="S_tok"`` makes head 0.0 write the previous token into ``S_tok`` instead of its
    own subspace, to show what breaks when the two kinds of information share directions.
    Returns a float64 ``HookedTransformer`` (2 layers, 1 head each) on ``device``; None
    means the device of ``W_QK`` and ``W_OV`` (the CPU when they are not tensors), so the
    model sits where the reader's matrices do.
    """
    from circuitbook.models.attn_only import attn_only

    V, N = d_vocab, n_ctx
    d_model = 2 * V + N
    given = [W.device for W in (W_QK, W_OV) if isinstance(W, torch.Tensor)]
    if len(set(given)) > 1:
        raise ValueError(f"W_QK is on {W_QK.device} but W_OV on {W_OV.device}: put both on one device")
    device = resolve_device(device) if device is not None else (given[0] if given else torch.device("cpu"))
    matrices = {}
    for name, W in (("W_QK", W_QK), ("W_OV", W_OV)):
        try:
            W = torch.as_tensor(W, dtype=torch.float64, device=device)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"{name} must be a [d_model, d_model] matrix of numbers, got {type(W).__name__}: "
                            f"{err}") from None
        if W.shape != (d_model, d_model):
            raise ValueError(f"{name} must be [d_model, d_model] = [{d_model}, {d_model}], got {tuple(W.shape)}")
        matrices[name] = W
    W_QK, W_OV = matrices["W_QK"], matrices["W_OV"]
    if prev_into not in ("S_prev", "S_tok"):
        raise ValueError(f"prev_into must be 'S_prev' or 'S_tok', got {prev_into!r}")
    d_head = d_model + 1  # layer 1 needs full rank plus one dimension for the key-0 guard below
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = attn_only(2, d_model=d_model, n_heads=1, d_head=d_head, d_vocab=V, n_ctx=N,
                          seed=0, dtype=torch.float64, device=device)
    s = strength * math.sqrt(d_head)  # TransformerLens divides scores by sqrt(d_head)
    space = subspaces(V, N, device=device)
    target = space[prev_into]
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.embed.W_E.copy_(space["S_tok"])
        model.pos_embed.W_pos.copy_(space["S_pos"])
        model.unembed.W_U.copy_(space["S_tok"].T)
        a0 = model.blocks[0].attn
        for p in range(1, N):
            a0.W_Q[0, V + p, p - 1] = s  # query at position p looks for key position p - 1
        for k in range(N):
            a0.W_K[0, V + k, k] = 1.0
        a0.W_V[0, :V, :V] = torch.eye(V, dtype=torch.float64, device=device)  # read the attended token ...
        a0.W_O[0, :V, :] = target  # ... and write it where prev_into says
        a1 = model.blocks[1].attn
        a1.W_Q[0, :, :d_model] = W_QK * math.sqrt(d_head)  # x_q W_Q W_K^T x_k^T / sqrt(d_head) = x_q W_QK x_k^T
        a1.W_K[0, :, :d_model] = torch.eye(d_model, dtype=torch.float64, device=device)
        # Position 0 has no previous token; head 0.0 can only attend to itself there and
        # writes token 0 into the previous-token slot. One extra QK dimension, driven by the
        # query bias, keeps every query off key 0 (not part of the reader's W_QK).
        a1.b_Q[0, d_model] = s
        a1.W_K[0, V, d_model] = -1.0
        a1.W_V[0, :, :d_model] = W_OV
        a1.W_O[0, :d_model, :] = torch.eye(d_model, dtype=torch.float64, device=device)
    return model
