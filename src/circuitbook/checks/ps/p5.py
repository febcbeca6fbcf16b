"""Problem 5: verify K-composition, then break it by ablating the writer.

Part of the induction module's problem set (``circuitbook.checks.ps``)."""

from __future__ import annotations

import contextlib

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, as_number
from circuitbook.checks.ps.inputs import zoo_model_and_tokens
from circuitbook.checks.ps.p4 import INDUCTION_KEY
from circuitbook.loss import per_token_loss


def _score_and_loss(model, reader: tuple[int, int], tokens: torch.Tensor, context, *, best=False, ind_offset=None,
                    loss_from=None, shift=1):
    """(the reader's induction score, mean loss on the second copy) of one run inside
    ``context`` (an ablation, or nothing). Loss on the second copy: predictions of tokens
    n+1 .. 2n-1. The keywords make the mistakes: ``best=True`` takes the best score over all
    heads; ``ind_offset`` reads another diagonal (all of it); ``loss_from`` starts the loss's
    window at another prediction; ``shift=0`` scores each position's own token."""
    n = tokens.shape[1] // 2
    with torch.no_grad(), context:
        logits, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    diagonals = [cache["pattern", layer].diagonal(offset=-(n - 1) if ind_offset is None else ind_offset,
                                                  dim1=-2, dim2=-1) for layer in range(model.cfg.n_layers)]
    ind = torch.stack([d[..., 1:] if ind_offset is None else d for d in diagonals]).mean(dim=(1, 3))
    logp = logits.log_softmax(-1)
    if shift:
        logp = logp[:, :-1].gather(-1, tokens[:, 1:, None])[..., 0]  # [batch, pos-1]: token t read at t - 1
    else:
        logp = logp.gather(-1, tokens[..., None])[..., 0][:, 1:]  # token t read at t itself
    score = ind.max() if best else ind[reader]
    return float(score), float(-logp[:, n if loss_from is None else loss_from:].mean())


def ablation_effect(model, head, reader, tokens):
    """head, reader: (layer, head) pairs; tokens [batch, 2n] repeated
    -> (reader's induction score, mean loss on the second copy) with
    `head` mean-ablated."""
    from circuitbook.heads import ablate

    n = tokens.shape[1] // 2
    with torch.no_grad(), ablate(model, [head], how="mean"):
        logits, cache = model.run_with_cache(
            tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    ind = torch.stack([
        cache["pattern", layer].diagonal(offset=-(n - 1), dim1=-2, dim2=-1)
        [..., 1:].mean((0, 2))
        for layer in range(model.cfg.n_layers)])
    logp = (logits.log_softmax(-1)[:, :-1]
            .gather(-1, tokens[:, 1:, None])[..., 0])
    return float(ind[reader]), float(-logp[:, n:].mean())


def _p5_inputs(g: torch.Generator) -> dict:
    inputs = zoo_model_and_tokens(g, 8, 24)
    head = (0, int(torch.randint(0, 4, (1,), generator=g)))
    reader = (1, int(torch.randint(0, 4, (1,), generator=g)))
    return {"model": inputs["model"], "head": head, "reader": reader, "tokens": inputs["tokens"]}


def _p5_ablated(model, head, reader, tokens, how="mean", **mistake):
    from circuitbook.heads import ablate

    return _score_and_loss(model, reader, tokens, ablate(model, [head], how=how), **mistake)


def _p5_per_position(model, head, reader, tokens):
    """The head's output replaced by its mean over the batch at each position separately."""
    layer, h = head

    def per_position(z, hook):  # z [batch, pos, head, d_head]
        z = z.clone()
        z[:, :, h] = z[:, :, h].mean(0, keepdim=True)
        return z

    return _score_and_loss(model, reader, tokens, model.hooks(fwd_hooks=[(f"blocks.{layer}.attn.hook_z",
                                                                          per_position)]))


def _p5_zero(model, head, reader, tokens):
    return _p5_ablated(model, head, reader, tokens, how="zero")


def _p5_best_head(model, head, reader, tokens):
    return _p5_ablated(model, head, reader, tokens, best=True)


def _p5_no_ablation(model, head, reader, tokens):
    return _score_and_loss(model, reader, tokens, contextlib.nullcontext())


def _p5_all_positions(model, head, reader, tokens):
    from circuitbook.heads import ablate

    score, _ = ablation_effect(model, head, reader, tokens)
    with torch.no_grad(), ablate(model, [head], how="mean"):
        logits = model(tokens)
    return score, float(per_token_loss(logits, tokens).mean())


def _p5_compare(a, b) -> bool:
    """Two numbers in any form (floats, NumPy numbers, one-element tensors), each within 1e-4."""
    if not (isinstance(a, (tuple, list)) and len(a) == 2):
        return False
    x = [as_number(v) for v in a]
    return None not in x and abs(x[0] - b[0]) < 1e-4 and abs(x[1] - b[1]) < 1e-4


P5 = FunctionExercise(
    id="ps_p5", title="mean-ablate a head and re-measure", reference=ablation_effect, make_inputs=_p5_inputs,
    n_trials=3, compare=_p5_compare, names=("the reader's induction score", "the loss on the second copy"),
    mistakes=[
        Mistake("ablation not applied", "Your numbers are those of the intact model: was the ablation "
                "active when the model ran?",
                _p5_no_ablation),
        Mistake("zero- instead of mean-ablation", "Your numbers are those of a head whose output is set to 0. "
                "What does the statement replace the output with, and what does 0 remove that it keeps?",
                _p5_zero),
        Mistake("a mean per position", "The mean the statement asks for is one vector, over every position "
                "of every sequence in the batch; a mean over the sequences at each position keeps what the head "
                "does at that position: the part of its output that depends on where it is.", _p5_per_position),
        Mistake("best induction score over all heads", "The question is what happens to *this* reader: report "
                "the induction score of the head `reader`, not the best one in the model (another induction head "
                "may not depend on the ablated head).", _p5_best_head),
        Mistake("off-by-one diagonal", INDUCTION_KEY, lambda model, head, reader, tokens: _p5_ablated(
            model, head, reader, tokens, ind_offset=-(tokens.shape[1] // 2))),
        Mistake("loss over the whole sequence", "Your loss averages over the whole sequence. Which tokens "
                "does the statement ask about, and why those?", _p5_all_positions),
        Mistake("loss window includes token n", "Your loss includes token n, the first of the second copy. "
                "What in the context could predict it?", lambda model, head, reader, tokens: _p5_ablated(
                    model, head, reader, tokens, loss_from=tokens.shape[1] // 2 - 1)),
        Mistake("predicted the current token", "Your loss scores the logits at each position against the "
                "token at that same position. Which token do the logits at a position predict?",
                lambda model, head, reader, tokens: _p5_ablated(
                    model, head, reader, tokens, shift=0)),
    ],
    hint="Run the model once inside the ablation (see help(circuitbook.heads.ablate)), caching the "
         "patterns. From the patterns take the reader's induction score, measured as in problem 4; from "
         "the logits, the mean loss on the second copy's tokens that induction can predict (n + 1 .. "
         "2n - 1). Two floats.",
)


def k_composition(model, writer, reader):
    """writer, reader: (layer, head) pairs, writer in an earlier layer
    -> score (a float)."""
    (l0, h0), (l1, h1) = writer, reader
    with torch.no_grad():
        W_OV = model.W_V[l0, h0] @ model.W_O[l0, h0]
        W_QK = model.W_Q[l1, h1] @ model.W_K[l1, h1].T
        return float((W_OV @ W_QK.T).norm() / (W_OV.norm() * W_QK.norm()))


def _p5b_inputs(g: torch.Generator) -> dict:
    from circuitbook.models import load

    return {"model": load("toy-2l"), "writer": (0, int(torch.randint(0, 4, (1,), generator=g))),
            "reader": (1, int(torch.randint(0, 4, (1,), generator=g)))}


@torch.no_grad()
def _kc_variant(model, writer, reader, *, kind="K", normalise=True, swap=False):
    (l0, h0), (l1, h1) = (reader, writer) if swap else (writer, reader)
    W_OV = model.W_V[l0, h0] @ model.W_O[l0, h0]
    W_QK = model.W_Q[l1, h1] @ model.W_K[l1, h1].T
    right = {"K": W_QK.T, "Q": W_QK, "V": model.W_V[l1, h1] @ model.W_O[l1, h1]}[kind]
    value = (W_OV @ right).norm()
    return float(value / (W_OV.norm() * right.norm())) if normalise else float(value)


P5B = FunctionExercise(
    id="ps_p5b", title="the K-composition score", reference=k_composition, make_inputs=_p5b_inputs, n_trials=3,
    library_answers=("circuitbook.composition.composition_scores",
                     "circuitbook.composition.rotated_key_scores",
                     "circuitbook.composition._pairwise_scores",
                     "circuitbook.composition._factor_scores"),
    mistakes=[
        Mistake("Q-composition instead", "Your score is the Q-composition: it measures what the reader's "
                "queries read of the writer. Which side of the reader's W_QK multiplies the key?",
                lambda model, writer, reader: _kc_variant(model, writer, reader, kind="Q")),
        Mistake("V-composition instead", "Your score uses the reader's OV circuit: it measures what the "
                "reader's values read of the writer. Which of the reader's circuits reads the keys?",
                lambda model, writer, reader: _kc_variant(model, writer, reader, kind="V")),
        Mistake("unnormalised", "Your score grows with the size of the two heads' weights: scale "
                "either head by 2 and it doubles. What makes a score comparable across heads of different sizes?",
                lambda model, writer, reader: _kc_variant(model, writer, reader, normalise=False)),
        Mistake("writer and reader swapped", "Your score takes the OV circuit of the reader and the QK circuit "
                "of the writer. Which of the two heads writes what the other reads?",
                lambda model, writer, reader: _kc_variant(model, writer, reader, swap=True)),
    ],
    hint="Build the writer's OV circuit and the reader's QK circuit from the model's per-head weights, "
         "each [d_model, d_model]. K-composition asks how much of what the writer writes the reader's keys "
         "read: multiply the writer's circuit by the reader's, oriented so that the key side faces the "
         "writer, and normalise by the product of the two Frobenius norms.",
)


# --- the comparison: which other head the claim must beat (issue 39) ------------------------------


def comparison_heads(rows, writer):
    """rows: {head: (reader's induction score, second-copy loss)} with that
    layer-0 head mean-ablated; writer: the previous-token head's index ->
    (head, head): the other head to compare the writer with on the score,
    and the one on the loss."""
    others = {h: v for h, v in rows.items() if h != writer}
    by_score = min(others, key=lambda h: others[h][0])  # lowers the score most
    by_loss = max(others, key=lambda h: others[h][1])  # raises the loss most
    return by_score, by_loss


def _p5c_inputs(g: torch.Generator) -> dict:
    """Four to eight heads; the writer damages most; among the others the most damaging head by the
    score differs from the most damaging by the loss, and both differ from the least damaging ones
    and from the heads next to the writer, so that each named mistake gives another pair."""
    while True:
        n = 4 + int(torch.randint(0, 5, (1,), generator=g))
        writer = int(torch.randint(0, n, (1,), generator=g))
        scores = (0.5 + 0.4 * torch.rand(n, generator=g, dtype=torch.float64)).tolist()
        losses = (0.1 + 1.0 * torch.rand(n, generator=g, dtype=torch.float64)).tolist()
        scores[writer], losses[writer] = 0.05, 3.5
        rows = {h: (scores[h], losses[h]) for h in range(n)}
        inputs = {"rows": rows, "writer": writer}
        pairs = [comparison_heads(**inputs)] + [m.wrong(**inputs) for m in P5C.mistakes]
        if len({tuple(p) for p in pairs}) == len(pairs):
            return inputs


def _p5c_variant(rows, writer, *, keep_writer=False, least=False, one=None):
    others = {h: v for h, v in rows.items() if keep_writer or h != writer}
    pick = max if least else min
    by_score = pick(others, key=lambda h: others[h][0])
    by_loss = (min if least else max)(others, key=lambda h: others[h][1])
    if one == "score":
        return by_score, by_score
    if one == "loss":
        return by_loss, by_loss
    return by_score, by_loss


def _same_pair(got, expected) -> bool:
    try:
        return len(got) == 2 and tuple(int(x) for x in got) == tuple(expected) \
            and all(float(x) == int(x) for x in got)
    except (TypeError, ValueError):
        return False


P5C = FunctionExercise(
    id="ps_p5c", title="the head the previous-token head must beat", reference=comparison_heads,
    make_inputs=_p5c_inputs, compare=_same_pair,
    mistakes=[
        Mistake("compared the writer with itself", "The previous-token head is the one on trial: among the "
                "heads it is compared with, it would beat nothing (and the difference would be 0).",
                lambda rows, writer: _p5c_variant(rows, writer, keep_writer=True)),
        Mistake("a head whose defeat implies nothing", "Beating this head shows only that the writer beats "
                "that one head, and says nothing of the others of its layer, which the claim is about.",
                lambda rows, writer: _p5c_variant(rows, writer, least=True)),
        Mistake("one head for both measures", "The score and the loss can rank the other heads differently: "
                "choose the comparison for each measure by that measure.",
                lambda rows, writer: _p5c_variant(rows, writer, one="score")),
        Mistake("one head for both measures", "The score and the loss can rank the other heads differently: "
                "choose the comparison for each measure by that measure.",
                lambda rows, writer: _p5c_variant(rows, writer, one="loss")),
    ],
    hint="The finding says the previous-token head's ablation does more damage than *any* other layer-0 "
         "head's. Ask which single comparison, if the writer wins it, implies that it wins all the others, "
         "for the score and for the loss separately. For each measure, which direction of change is damage?",
)
