"""Problem 4: find the induction and previous-token heads of a model from its patterns.

Part of the induction module's problem set (``circuitbook.checks.ps``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, Result, recognised, shape_of
from circuitbook.checks.ps.inputs import zoo_model_and_tokens


def head_scores(model, tokens):
    """tokens: [batch, 2n], the second half repeating the first
    -> (induction, prev), [L, H] each."""
    n = tokens.shape[1] // 2
    _, cache = model.run_with_cache(
        tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    ind, prev = [], []
    for layer in range(model.cfg.n_layers):
        pattern = cache["pattern", layer]  # [batch, head, q, k]
        # query n + i looks at key i + 1: the diagonal n - 1 below the main one
        ind.append(pattern.diagonal(offset=-(n - 1), dim1=-2, dim2=-1)
                   [..., 1:].mean((0, 2)))
        prev.append(pattern.diagonal(offset=-1, dim1=-2, dim2=-1)
                    .mean((0, 2)))
    return torch.stack(ind), torch.stack(prev)


def _p4_inputs(g: torch.Generator) -> dict:
    n = int(torch.randint(12, 30, (1,), generator=g))
    return zoo_model_and_tokens(g, 4, n)


def _p4_variant(tokens, model, ind_offset=None, ind_from=1, ind_first_half=False, prev_offset=-1, swap=False,
               transposed=False):
    n = tokens.shape[1] // 2
    _, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    ind, prev = [], []
    for layer in range(model.cfg.n_layers):
        pattern = cache["pattern", layer]
        pattern = pattern.transpose(-1, -2) if transposed else pattern
        off = -(n - 1) if ind_offset is None else ind_offset
        stripe = pattern.diagonal(offset=off, dim1=-2, dim2=-1)
        stripe = stripe[..., : n - 1] if ind_first_half else stripe[..., ind_from:]
        ind.append(stripe.mean(dim=(0, 2)))
        prev.append(pattern.diagonal(offset=prev_offset, dim1=-2, dim2=-1).mean(dim=(0, 2)))
    return (torch.stack(prev), torch.stack(ind)) if swap else (torch.stack(ind), torch.stack(prev))


INDUCTION_KEY = ("Your induction score reads, for the query n + i, the attention to key i: the earlier occurrence "
                 "itself. Which key does the statement ask for, and on which diagonal of the pattern does it lie?")

P4 = FunctionExercise(
    id="ps_p4", title="induction and previous-token scores", reference=head_scores, make_inputs=_p4_inputs,
    library_answers=("circuitbook.heads.induction_scores",
                     "circuitbook.heads.prev_token_scores",
                     "circuitbook.heads._mean_attention_at_offset",
                     "circuitbook.heads.prev_token_pattern_score"),
    n_trials=2,
    mistakes=[
        # key i for every query of the second copy: the whole diagonal n below the main one
        Mistake("off-by-one diagonal", INDUCTION_KEY,
                lambda model, tokens: _p4_variant(tokens, model, ind_offset=-(tokens.shape[1] // 2), ind_from=0)),
        Mistake("off-by-one diagonal", INDUCTION_KEY,
                lambda model, tokens: _p4_variant(tokens, model, ind_offset=-(tokens.shape[1] // 2))),
        Mistake("scores from the first half of the sequence", "Your induction score averages over "
                "queries of the first copy. Which queries can look back at an earlier occurrence of their token?",
                lambda model, tokens: _p4_variant(tokens, model, ind_first_half=True)),
        Mistake("previous-token score on the main diagonal", "Your previous-token score reads each "
                "position's attention to itself. Which key holds the previous token, and on which diagonal of the "
                "pattern does it lie?",
                lambda model, tokens: _p4_variant(tokens, model, prev_offset=0)),
        Mistake("previous-token score above the diagonal", "Your previous-token score reads the "
                "attention from p to key p + 1, a future position where the causal mask leaves no attention. Where "
                "is the previous token?",
                lambda model, tokens: _p4_variant(tokens, model, prev_offset=1)),
        Mistake("included a query of the first copy", "Your average includes query n - 1, the last token of "
                "the first copy, which has no earlier occurrence to look back at. Which queries does the statement "
                "average over?",
                lambda model, tokens: _p4_variant(tokens, model, ind_from=0)),
        Mistake("pattern read as [key, query]", "Every score you return is 0: the entries you read lie above the "
                "diagonal, where the causal mask leaves no attention. Check the order of the pattern's last two "
                "dimensions in TransformerLens's cache.",
                lambda model, tokens: _p4_variant(tokens, model, transposed=True)),
        Mistake("the two scores swapped", "Check the order of the pair against the "
                "docstring.",
                lambda model, tokens: _p4_variant(tokens, model, swap=True)),
    ],
    hint="Each layer's cached pattern is [batch, head, q, k]. The previous-token score averages the "
         "attention from p to p - 1; the induction score averages the attention from query n + i to key i "
         "+ 1 over every query of the second copy (i = 0 .. n - 1), and over nothing else. Each lies on "
         "one diagonal of the pattern. Stack the layers: two [L, H] tensors.",
)


# --- the null: what a head scores by chance (issue 39) --------------------------------------------


def unrepeated_tokens(tokens, lo, hi, seed):
    """tokens: [batch, 2n], the repeated test sequences, drawn from lo .. hi - 1;
    seed: an int -> [batch, 2n], the control batch."""
    # every token drawn afresh, uniformly from lo .. hi - 1, independently of
    # `tokens`: the same shape and range, no repeat
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi, tokens.shape, generator=g).to(tokens.device)


P4B_AT_MOST = 0.1
"""The control's bar, stated in problem 4: at most one position in ten may hold the token n positions
before it (the repeat), and at most one token in ten may occur twice in its sequence. A uniform draw
from the problem's ranges (at least 5,000 tokens, sequences of at most 80) puts about 2n / (hi - lo),
at most 1.6%, of its tokens twice in a sequence and about 1 / (hi - lo) at the repeat's place; a batch
that keeps the repeat, or shuffles repeated tokens, puts all of them there."""


def _p4b_inputs(g: torch.Generator) -> dict:
    from circuitbook.data import repeated_random_tokens

    lo = int(torch.randint(0, 2000, (1,), generator=g))
    hi = lo + 5000 + int(torch.randint(0, 35_000, (1,), generator=g))
    n = int(torch.randint(12, 41, (1,), generator=g))
    seed = int(torch.randint(0, 10_000, (1,), generator=g))
    tokens = repeated_random_tokens(4, n, hi - lo, seed=seed) + lo
    return {"tokens": tokens, "lo": lo, "hi": hi, "seed": int(torch.randint(0, 10_000, (1,), generator=g))}


def _repeat_share(x: torch.Tensor) -> float:
    """The share of positions in the second half that hold the token n positions before."""
    n = x.shape[1] // 2
    return float((x[:, n:2 * n] == x[:, :n]).double().mean())


def _twice_share(x: torch.Tensor) -> float:
    """The share of tokens that occur more than once in their own sequence."""
    same = x[:, :, None] == x[:, None, :]
    return float(((same.sum(-1) > 1)).double().mean())


P4B_PARTS = 4
"""The control's spread, stated in problem 4: each of the 4 equal parts of lo .. hi - 1 must hold some of its
tokens, and no two of its sequences may be the same. A uniform draw of the check's at least 96 tokens
leaves a part empty with probability at most 4 (3/4)^96, about 4e-12."""


def _empty_parts(x: torch.Tensor, lo: int, hi: int) -> int:
    """How many of the P4B_PARTS equal parts of lo .. hi - 1 hold no token of ``x``."""
    part = ((x - lo) * P4B_PARTS // (hi - lo)).clamp(0, P4B_PARTS - 1)
    return P4B_PARTS - int(part.unique().numel())


def _same_rows(x: torch.Tensor) -> bool:
    """Whether two sequences of ``x`` are the same."""
    return x.shape[0] > 1 and int(x.unique(dim=0).shape[0]) < x.shape[0]


def _p4b_run(tokens, lo, hi, seed):
    return (lo + torch.arange(tokens.shape[1])).repeat(tokens.shape[0], 1)


def _p4b_kept_repeat(tokens, lo, hi, seed):
    from circuitbook.data import repeated_random_tokens

    return repeated_random_tokens(tokens.shape[0], tokens.shape[1] // 2, hi - lo, seed=seed) + lo


def _rearranged(x: torch.Tensor, tokens: torch.Tensor) -> bool:
    """Every sequence of ``x`` holds the same tokens as the test's, in some order."""
    return bool((x.sort(-1).values == tokens.sort(-1).values).all())


def _p4b_shuffled(tokens, lo, hi, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.stack([row[torch.randperm(len(row), generator=g)] for row in tokens])


def _p4b_vocabulary(tokens, lo, hi, seed):
    return torch.randint(0, hi + lo + 1000, tokens.shape, generator=torch.Generator().manual_seed(seed))


@dataclass
class NullExercise(FunctionExercise):
    """Problem 4's control batch, judged by what it must be (the bar stated in the problem), not by
    equality with the reference's draw: any fresh uniform draw passes. A named mistake is
    recognised by the property it breaks, since its draw is random too."""

    def _compare(self, got, expected, inputs) -> Result | None:
        tokens, lo, hi = inputs["tokens"], inputs["lo"], inputs["hi"]
        if not isinstance(got, torch.Tensor) or got.is_floating_point() or got.is_complex() \
                or tuple(got.shape) != tuple(tokens.shape):
            return self._fail(f"return a tensor of token ids shaped like `tokens`, {tuple(tokens.shape)}, "
                              f"of an integer dtype; got {shape_of(got)}", "wrong type")
        got = got.detach().cpu()
        if bool(((got < lo) | (got >= hi)).any()):
            return self._fail(recognised(self._explain_range),
                              "drew from another range")
        if _repeat_share(got) > P4B_AT_MOST or bool((got == tokens.cpu()).all()):
            return self._fail(f"{recognised(self._explain_repeat)} In yours "
                              f"{_repeat_share(got):.1%} of the second half repeats the first; the bar is "
                              f"{P4B_AT_MOST:.0%}.", "kept the repeat")
        if _twice_share(got) > P4B_AT_MOST:
            share = (f"In yours {_twice_share(got):.1%} of the tokens occur more than once in their sequence; "
                     f"the bar is {P4B_AT_MOST:.0%}.")
            if _rearranged(got, tokens.cpu()):
                return self._fail(f"{recognised(self._explain_twice)} {share}",
                                  "every token twice")
            used = int(got.unique().numel())
            return self._fail(
                recognised(f"{share} Your batch uses {used} distinct ids, where "
                f"lo .. hi - 1 offers {hi - lo}. How often does a draw like yours put the same token twice in a "
                f"sequence of {tokens.shape[1]}, and how many ids does it draw from?"), "tokens repeat by chance")
        empty = _empty_parts(got, lo, hi)
        if empty or _same_rows(got):
            where = []
            if empty:
                where.append(f"{empty} of the {P4B_PARTS} equal parts of lo .. hi - 1 hold none of its tokens")
            if _same_rows(got):
                where.append("two of its sequences are the same")
            return self._fail(recognised(f"in yours {' and '.join(where)}. {self._explain_pattern}"),
                              "a fixed pattern")
        return None

    _explain_range = ("The control must differ from the test in the repeat only: tokens outside lo .. hi - 1 "
                      "(special tokens, another part of the vocabulary) are another input, and a head may "
                      "treat them differently for reasons that have nothing to do with induction.")
    _explain_repeat = ("On a batch whose second half repeats its first, an induction head scores as high as on "
                       "the test: the control would measure the effect, not what a head scores by chance.")
    _explain_pattern = ("The control stands for tokens a head has no reason to expect, drawn the way the test's "
                        "were: its score on them is what chance gives. A batch built by a rule (a run of ids, the "
                        "same sequence in every row) is one particular input, and a head may do something "
                        "particular on it. What in the test batch's making does yours leave out?")
    _explain_twice = ("Your sequences are the test's own tokens rearranged: that breaks the repeat's order "
                      "but leaves every token in its sequence twice, so an induction head still finds an earlier "
                      "occurrence of each and attends to what followed it. What way of making a batch cannot "
                      "keep that second occurrence?")


P4B = NullExercise(
    id="ps_p4b", title="the control batch: tokens without a repeat", reference=unrepeated_tokens,
    make_inputs=_p4b_inputs,
    mistakes=[
        Mistake("kept the repeat", NullExercise._explain_repeat, _p4b_kept_repeat),
        Mistake("every token twice", NullExercise._explain_twice, _p4b_shuffled),
        Mistake("drew from another range", NullExercise._explain_range, _p4b_vocabulary),
        Mistake("a fixed pattern", NullExercise._explain_pattern, _p4b_run),
    ],
    hint="Ask what the control must share with the test batch (its shape, the range its tokens come from) "
         "and the one thing it must not share. Which way of making a batch keeps the first two and cannot, "
         "by its construction, keep the third? And what else would a head see in a batch made from the "
         "test tokens themselves?",
)
