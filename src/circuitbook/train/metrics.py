"""The metrics recorded in each zoo checkpoint's json, recomputable from the weights (chapters 14-19).

``evaluate(name, model)`` measures what ``circuitbook.train.build`` recorded when it built
``name``, with the fixed seeds and sizes of ``circuitbook.models.zoo.EVAL``, so a loaded
checkpoint reproduces its json up to float rounding:

- :func:`induction_metrics`: loss on the first and second copy of repeated random tokens,
  the best induction and previous-token heads (chapter 17);
- :func:`bigram_metrics`: held-out loss against the chain's entropy, and for a zero-layer
  model how closely ``W_E W_U`` follows ``log P`` (chapter 14);
- :func:`skip_trigram_metrics`: accuracy on the skip-trigrams and the skip-trigram bug
  (chapter 15);
- :func:`text_metrics`: a text model's held-out loss and ICL score (chapter 19);
- :func:`toy_translation_metrics`: the translation model's held-out metrics (chapter 19).
"""

from __future__ import annotations

import math

import torch

from circuitbook.data import translation as T
from circuitbook.data.synthetic import skip_trigram_task
from circuitbook.heads import induction_and_prev_token_scores
from circuitbook.models.zoo import EVAL, RECIPES, TEXT_MODELS, Recipe, check_name, info
from circuitbook.train.lm import lm_loss, repeat_losses
from circuitbook.train.phases import icl_score_from_positions
from circuitbook.train.streams import recipe_chain, text_heldout
from circuitbook.train.text import icl_bands, position_loss
from circuitbook.train.translation import translation_metrics


def evaluate(name: str, model) -> dict:
    """Recompute ``name``'s recorded metrics from ``model`` (fixed seeds, so a loaded
    checkpoint reproduces its json up to float rounding)."""
    check_name(name)
    if name == "toy-translation":
        return toy_translation_metrics(model, info(name)["config"])
    recipe = RECIPES[name]
    out = {}
    if name in TEXT_MODELS:
        out.update(text_metrics(recipe, model))
    if recipe.model["n_layers"] >= 1 and 2 * EVAL["repeat_seq_len"] <= recipe.model["n_ctx"]:
        out.update(induction_metrics(model))
    kind = recipe.data["kind"]
    if kind in ("bigram", "mixture", "induction") and (kind != "induction" or recipe.data["background_fraction"] > 0):
        out.update(bigram_metrics(model, recipe_chain(recipe)))
    if kind in ("skip_trigram", "mixture"):
        out.update(skip_trigram_metrics(model))
    return out


def induction_metrics(model) -> dict:
    """Loss on the first / second copy of repeated random tokens, and the best induction and
    previous-token heads with their scores (chapter 17)."""
    n, b, s = EVAL["repeat_seq_len"], EVAL["repeat_batch"], EVAL["repeat_seed"]
    first, second = repeat_losses(model, seq_len=n, batch=b, seed=s)
    ind, prev = induction_and_prev_token_scores(model, seq_len=n, batch=b, seed=s)
    best_ind, best_prev = _argmax2d(ind), _argmax2d(prev)
    return {
        "loss_first_copy": first,
        "loss_second_copy": second,
        "chance": math.log(model.cfg.d_vocab),
        "induction_best": float(ind.max()),
        "induction_head": best_ind,
        "prev_token_best": float(prev.max()),
        "prev_token_head": best_prev,
    }


def text_metrics(recipe: Recipe, model) -> dict:
    """Held-out loss and in-context-learning score of a text model (chapter 19): the mean loss
    over every position of ``text_heldout(recipe)`` and ``icl_score_from_positions`` with the
    recipe's bands."""
    curve = position_loss(model, text_heldout(recipe))
    return {"heldout_loss": float(curve.mean()),
            "icl": icl_score_from_positions(curve.tolist(), **icl_bands(recipe.data))}


def _argmax2d(scores: torch.Tensor) -> list[int]:
    i = int(scores.argmax())
    return [i // scores.shape[1], i % scores.shape[1]]


def bigram_metrics(model, chain) -> dict:
    """Held-out loss on the bigram chain vs its entropy (the floor), and for a zero-layer
    model the correlation of ``W_E W_U`` with ``log P`` and the mean KL divergence
    ``sum_a pi[a] KL(P[a] || softmax(W_E W_U + b_U)[a])`` (chapter 14).

    Both matrices are centred per row before correlating, since softmax ignores a
    constant added to a row of logits: ``corr(W_E W_U - rowmean, log P - rowmean)``.
    """
    device = next(model.parameters()).device
    tokens = chain.sample(EVAL["n_rows"], model.cfg.n_ctx, seed=EVAL["eval_seed"]).to(device)
    with torch.no_grad():
        loss = float(lm_loss(model, tokens))
    out = {"loss_bigram": loss, "bigram_entropy": chain.entropy(), "loss_minus_entropy": loss - chain.entropy()}
    if model.cfg.n_layers == 0:
        with torch.no_grad():
            wewu = model.W_E @ model.W_U
            log_p = chain.log_transition().to(device)
            transition = chain.transition.to(device)
            out["corr_WEWU_logP"] = _row_centred_corr(wewu, log_p)
            out["corr_logits_logP"] = _row_centred_corr(wewu + model.b_U, log_p)
            log_q = (wewu + model.b_U).log_softmax(-1)
            kl_rows = (transition * (log_p - log_q)).sum(-1)
            out["kl_chain_model"] = float((chain.stationary().to(device) * kl_rows).sum())
    return out


def _row_centred_corr(a: torch.Tensor, b: torch.Tensor) -> float:
    a = a - a.mean(-1, keepdim=True)
    b = b - b.mean(-1, keepdim=True)
    return float((a * b).sum() / (a.norm() * b.norm()))


def skip_trigram_metrics(model) -> dict:
    """Accuracy on the known skip-trigrams and the size of the skip-trigram bug (chapter 15).

    ``triple_accuracy``: fraction of held-out rows whose argmax prediction after ``B`` is
    ``C``; ``triple_prob``: mean p(C). For each row ``(A, B, wrong C, control A')`` of
    ``SKIP_TRIGRAM_BUGS``, ``bugs`` holds p(wrong C | A ... B) and p(wrong C | A' ... B),
    measured on the same rows with only the source token swapped; ``bug_ratio_min`` is
    the smallest ratio of the two (> 1 everywhere means the bug is present everywhere).
    """
    task = skip_trigram_task(model.cfg.d_vocab)
    seq_len = min(32, model.cfg.n_ctx)
    tokens, which, b = task.sample(EVAL["n_rows"], seq_len, seed=EVAL["eval_seed"], return_positions=True)
    keep = which >= 0
    device = next(model.parameters()).device
    tokens, which, b = tokens[keep].to(device), which[keep].to(device), b[keep].to(device)
    triples = task.triples.to(device)
    rows = torch.arange(len(b), device=device)
    with torch.no_grad():
        probs = model(tokens).softmax(-1)[rows, b]  # [rows, d_vocab]: the prediction after B
    target = triples[which, 2]
    out = {
        "triple_accuracy": float((probs.argmax(-1) == target).float().mean()),
        "triple_prob": float(probs[rows, target].mean()),
    }
    source_pos = (tokens == triples[which, 0][:, None]).float().argmax(-1)
    bugs = []
    for a, dest, wrong, control in task.bugs.tolist():
        sel = triples[which, 1] == dest
        p = {}
        for label, src in (("p_bug", a), ("p_control", control)):
            t = tokens[sel].clone()
            r = torch.arange(int(sel.sum()), device=device)
            t[r, source_pos[sel]] = src
            with torch.no_grad():
                p[label] = float(model(t).softmax(-1)[r, b[sel], wrong].mean())
        bugs.append({"A": task.vocab[a], "B": task.vocab[dest], "wrong_C": task.vocab[wrong],
                     "control_A": task.vocab[control], **p, "ratio": p["p_bug"] / p["p_control"]})
    out["bugs"] = bugs
    out["bug_ratio_min"] = min(x["ratio"] for x in bugs)
    return out


def toy_translation_metrics(model, config: dict) -> dict:
    """Teacher-forced and greedy held-out metrics of the ``toy-translation`` model (no beam
    search) on the held-out split that ``config`` (its recorded config) names (chapter 19)."""
    _, test = T.make_split(config["n_train"], config["n_test"], seed=config["seed"])
    m = translation_metrics(model, test, beam_size=config.get("beam_size", 4), n_beam=0)
    return {k: m[k] for k in ("n_test", "exact_match_greedy", "token_accuracy", "mean_confidence", "ece", "nll")}
