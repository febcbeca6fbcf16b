"""Planted wrong answers for the induction module's problem set."""

import torch

from circuitbook.checks import ps

P1 = ps.p1_reference()


def _p1(**changes):
    return {**P1, **changes}


def _p4(**kw):
    return lambda model, tokens: ps.p4._p4_variant(tokens, model, **kw)


def _kc(**kw):
    return lambda model, writer, reader: ps.p5._kc_variant(model, writer, reader, **kw)


def _icl(**kw):
    return lambda logits, tokens, early, late: ps.p6._icl_variant(logits, tokens, early, late, **kw)


def _p6b(**kw):
    return lambda targets, norms, excluded: ps.p6._p6b_variant(targets, norms, excluded, **kw)


def _p6c(**kw):
    return lambda sigma, effect, alpha, power: ps.p6._p6c_variant(sigma, effect, alpha, power, **kw)


def _p7(**kw):
    return lambda model, clean, corrupted, positions: ps.p7._p7_variant(model, clean, corrupted, positions, **kw)


def _p7_all_senders(model, clean, corrupted, positions):
    """The sender's paths replaced by every layer-0 head's at once."""
    from circuitbook.patching import mean_loss, path_patch, patching_run

    out = ps.patching_shares(model, clean, corrupted, positions)
    run = patching_run(model, clean, corrupted, lambda lg: mean_loss(lg, clean, positions))
    layer0 = [(0, h) for h in range(model.cfg.n_heads)]
    readers = [(1, h) for h in range(model.cfg.n_heads)]
    out["paths"] = {x.upper(): path_patch(run, layer0, readers, into=x) for x in "kqv"} | {
        "direct": path_patch(run, layer0, into="logits")}
    return out


MUTATIONS = {
    "ps_p1a": [
        (_p1(W_QK_shape=(64, 64), W_OV_shape=(64, 64)), "head-space shapes"),
        (_p1(W_QK_rank=768, W_OV_rank=768, full_rank=768), "full rank"),
        (_p1(full_rank=768), "rank of the full circuits"),
        (_p1(full_QK_shape=(768, 768), full_OV_shape=(768, 768)), "full circuits in residual space"),
        (_p1(full_OV_shape=(50257, 768)), "wrong values"),
        ({k: v for k, v in P1.items() if k != "full_rank"}, "wrong keys"),
    ],
    "ps_p1b": [
        (lambda W_Q, W_K, G: (W_Q, W_K), "returned the original weights"),
        (lambda W_Q, W_K, G: (W_Q @ G, W_K @ G.T), "W_K times G^T"),
        (lambda W_Q, W_K, G: (W_Q @ G, W_K @ torch.linalg.inv(G)), "W_K times G^-1"),
        (lambda W_Q, W_K, G: (W_Q @ G, W_K), "transformed only W_Q"),
        (lambda W_Q, W_K, G: W_Q @ G @ (W_K @ torch.linalg.inv(G).T).T, None),  # the product, not the pair
        (lambda W_Q, W_K, G: (G @ W_Q.T, W_K), None),
    ],
    "ps_p2": [
        (lambda n_layers, n_heads: {"direct": 1, "single": n_layers * n_heads, "virtual": n_heads ** n_layers,
                                    "total": 1 + n_layers * n_heads + n_heads ** n_layers}, "virtual paths that use every layer"),
        (lambda n_layers, n_heads: {"direct": 0, "single": n_layers * n_heads,
                                    "virtual": (1 + n_heads) ** n_layers - 1 - n_layers * n_heads,
                                    "total": (1 + n_heads) ** n_layers - 1}, "forgot the direct path"),
        (lambda n_layers, n_heads: {"direct": 1, "single": n_layers * n_heads,
                                    "virtual": 2 ** n_layers - 1 - n_layers * n_heads, "total": 2 ** n_layers},
         "2^L paths"),
        (lambda n_layers, n_heads: {"direct": 1, "single": n_heads,
                                    "virtual": (1 + n_heads) ** n_layers - 1 - n_heads,
                                    "total": (1 + n_heads) ** n_layers}, "one head per layer counted once"),
        (lambda n_layers, n_heads: {"direct": 1, "single": 2 * n_heads, "virtual": n_heads ** 2,
                                    "total": (1 + n_heads) ** 2}, "wrong values"),  # right only for two layers
        (lambda n_layers, n_heads: (1 + n_heads) ** n_layers, "wrong type"),
    ],
    "ps_p3": [
        (lambda t, p: (30 * p.T @ t, 10 * t.T @ t), "attends two positions early"),
        (lambda t, p: (30 * t.T @ p, 10 * p.T @ t), "copies another token"),
        (lambda t, p: (t.T @ p, t.T @ t), "too weak"),
        (lambda t, p: (30 * t.T @ p, -10 * t.T @ t), "anti-copying OV"),
        (lambda t, p: (30 * t.T @ t, 10 * t.T @ t), "wrong values"),  # matches the token itself
        (lambda t, p: (30 * t @ p.T, 10 * t.T @ t), "wrong shape"),  # [V, V], not [d_model, d_model]
    ],
    "ps_p3b": [
        (1.0, "the unbroken scaffold's score"),
        (0.5, "wrong values"),
        (ps.p3b_reference() + 0.5, "wrong values"),
        (-ps.p3b_reference(), "wrong values"),  # a "wrong sign" would name the value
        ("low", "wrong type"),
    ],
    "ps_p4": [
        (lambda model, tokens: ps.p4._p4_variant(tokens, model, ind_offset=-(tokens.shape[1] // 2)),
         "off-by-one diagonal"),
        (_p4(ind_first_half=True), "scores from the first half of the sequence"),
        (_p4(prev_offset=0), "previous-token score on the main diagonal"),
        (_p4(ind_from=0), "included a query of the first copy"),
        (lambda model, tokens: tuple(t.mT for t in ps.head_scores(model, tokens)), None),  # [H, L]: toy-2l is square
        (lambda model, tokens: ps.head_scores(model, tokens)[::-1], None),  # swapped outputs
    ],
    "ps_p5": [
        (ps.p5._p5_no_ablation, "ablation not applied"),
        (ps.p5._p5_zero, "zero- instead of mean-ablation"),
        (ps.p5._p5_best_head, "best induction score over all heads"),
        (ps.p5._p5_all_positions, "loss over the whole sequence"),
        # the wrong layer: the reader's own layer ablated instead of the writer's
        (lambda model, head, reader, tokens: ps.ablation_effect(model, (1, head[1]), reader, tokens), "wrong values"),
        (lambda model, head, reader, tokens: ps.ablation_effect(model, head, reader, tokens)[::-1], "wrong values"),
    ],
    "ps_p5b": [
        (_kc(kind="Q"), "Q-composition instead"),
        (_kc(kind="V"), "V-composition instead"),
        (_kc(normalise=False), "unnormalised"),
        (_kc(swap=True), "writer and reader swapped"),
        (lambda model, writer, reader: -ps.k_composition(model, writer, reader), "wrong sign"),
    ],
    "ps_p6": [
        (_icl(shift=0), "off by one position"),
        (_icl(sign=-1), "wrong sign"),
        (_icl(log=False), "used raw logits"),
        (_icl(single=True), "single tokens instead of windows"),
        (_icl(docs=True), "averaged over documents"),
        # Olsson et al.'s fixed tokens 50 and 500 whatever the windows: out of range here, it raises
        (lambda logits, tokens, early, late: ps.icl_scores(logits, tokens, range(50, 51), range(500, 501)), None),
        (lambda logits, tokens, early, late: ps.icl_scores(logits, tokens, late, early), "wrong sign"),
        # the windows shifted by one token (the last token of each window left out, one before it added)
        (lambda logits, tokens, early, late: ps.icl_scores(logits, tokens, range(early.start - 1, early.stop - 1),
                                                           range(late.start - 1, late.stop - 1)), "wrong values"),
    ],
    "ps_p6b": [
        (_p6b(ignore=True), "ignored the exclusions"),
        (_p6b(only_targets=True), "excluded only the targets"),
        (_p6b(any_layer=True), "matched across layers"),
        (_p6b(repeat=True), "chose the same control twice"),
        (_p6b(first=True), "took the first free head of the layer"),
        # the controls of the targets in reverse order
        (lambda targets, norms, excluded: ps.matched_controls(targets[::-1], norms, excluded)[::-1], None),
        (lambda targets, norms, excluded: list(targets), None),
    ],
    "ps_p6c": [
        (_p6c(which=0), "planned with the pilot's point estimate"),
        (_p6c(rounding=ps.p6.math.floor), "rounded down"),
        (_p6c(tails=1), "one-sided critical value"),
        (_p6c(power_term=False), "no power term"),
        (_p6c(square=False), "forgot the square root of N"),
        (_p6c(worst=True), "chose the estimand that needs the most documents"),
        # the cheapest estimand, but twice the documents it needs
        (lambda sigma, effect, alpha, power: (ps.plan_documents(sigma, effect, alpha, power)[0],
                                              2 * ps.plan_documents(sigma, effect, alpha, power)[1] + 3),
         "wasteful"),
        # the cheapest estimand, one document short of its power
        (lambda sigma, effect, alpha, power: (ps.plan_documents(sigma, effect, alpha, power)[0],
                                              ps.plan_documents(sigma, effect, alpha, power)[1] - 1),
         "rounded down"),
        (lambda sigma, effect, alpha, power: ps.plan_documents(sigma, effect, alpha, power)[1], "wrong type"),
        (lambda sigma, effect, alpha, power: ("paired", 30), "unknown estimand"),
    ],
    "ps_p7": [
        (_p7(noising=True), "the runs' roles exchanged"),
        (_p7(invert=True), "one minus the effect"),
        (_p7(one_reader=True), "patched the path into one reader only"),
        (_p7(everywhere=True), "read the loss on the whole second copy"),
        (_p7(corrupted_targets=True), "scored against the corrupted tokens"),
        (_p7_all_senders, None),
        # the sender's effect and paths, but no per-head table
        (lambda model, clean, corrupted, positions: {
            k: v for k, v in ps.patching_shares(model, clean, corrupted, positions).items() if k != "heads"}, None),
    ],
    "ps_p7b": [
        # every pair that is not the answer gets the same words, whichever part is wrong: no message
        # names a statement, so the letters cannot be eliminated one by one
        (("B", 0.47), "wrong pair"),
        ((" b ", 0.0), "wrong pair"),
        (("C", 1.5), "wrong pair"),
        (("D", 0.47), "wrong pair"),
        (("A", 0.0), "wrong pair"),
        (("A", 1.0), "wrong pair"),
        (("E", 0.47), "wrong form"),
        ("A", "wrong form"),  # the letter alone: trying the four letters does not finish the problem
        (1, "wrong form"),
    ],
    "ps_p4b": [
        # the test batch itself, and its first half drawn again and repeated
        (lambda tokens, lo, hi, seed: tokens.clone(), "kept the repeat"),
        (lambda tokens, lo, hi, seed: tokens[torch.randperm(tokens.shape[0])], "kept the repeat"),
        (lambda tokens, lo, hi, seed: torch.randint(lo, hi, (tokens.shape[0], tokens.shape[1] // 2)).repeat(1, 2),
         "kept the repeat"),
        # the second copy reversed: no token at the repeat's place, every token twice
        (lambda tokens, lo, hi, seed: torch.cat([tokens[:, :tokens.shape[1] // 2],
                                                 tokens[:, tokens.shape[1] // 2:].flip(1)], 1), "every token twice"),
        (lambda tokens, lo, hi, seed: torch.randint(lo, hi, tokens.shape).float(), "wrong type"),
        (lambda tokens, lo, hi, seed: torch.randint(lo, hi, (tokens.shape[0], tokens.shape[1] // 2)), "wrong type"),
        (lambda tokens, lo, hi, seed: torch.randint(hi, hi + 100, tokens.shape), "drew from another range"),
        # no repeat and no token twice, but a rule, not a draw: a run of ids in every row, or one row copied
        (lambda tokens, lo, hi, seed: (lo + torch.arange(tokens.shape[1])).repeat(tokens.shape[0], 1),
         "a fixed pattern"),
        (lambda tokens, lo, hi, seed: torch.randint(lo, hi, (1, tokens.shape[1])).repeat(tokens.shape[0], 1),
         "a fixed pattern"),
    ],
    "ps_p5c": [
        # the heads next to the writer, and the pair in the wrong order
        (lambda rows, writer: ((writer + 1) % len(rows), (writer + 1) % len(rows)), None),
        (lambda rows, writer: ps.comparison_heads(rows, writer)[::-1], None),
        (lambda rows, writer: [float(h) + 0.5 for h in ps.comparison_heads(rows, writer)], None),
        (lambda rows, writer: ps.comparison_heads(rows, writer)[0], None),
    ],
    "ps_p7c": [
        (lambda n, side: list(range(n, 2 * n)), None),  # the whole second copy and its last position
        (lambda n, side: ps.spoiled_positions(n, side) * 2, None),  # each position twice
        (lambda n, side: [p - 1 for p in ps.spoiled_positions(n, side)], None),
        (lambda n, side: [p - n for p in ps.spoiled_positions(n, side)], None),  # in the first copy
        (lambda n, side: torch.tensor(ps.spoiled_positions(n, side), dtype=torch.float32) + 0.5, None),
    ],
}
