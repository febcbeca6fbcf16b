"""Chapter 17 (induction heads, pages 17a and 17b): exercise checks and reference solutions.

17a, the circuit: 17.1 the induction score of every head from attention patterns on a
repeated sequence; 17.2 the previous-token score of every head.
17b, the evidence: 17.3 mean-ablation of one head as a hook on ``hook_z``; 17.4 the
phase-change step of a training history.
"""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake


def induction_score(pattern, seq_len):
    """pattern: [batch, head, 2n, 2n] on repeated tokens, n = seq_len.
    Mean attention from query n + i to key i + 1 -> [head]."""
    stripe = pattern.diagonal(offset=-(seq_len - 1), dim1=-2, dim2=-1)
    return stripe[..., 1:].mean(dim=(0, 2))      # queries n .. 2n - 1


def _stripe(pattern, offset, first_query):
    """Mean of pattern[..., q, q - offset] over the batch and q >= first_query: [head]."""
    d = pattern.diagonal(offset=-offset, dim1=-2, dim2=-1)
    return d[..., first_query - offset:].mean(dim=(0, 2))


def _repeat_pattern_inputs(g: torch.Generator) -> dict:
    n = 5 + int(torch.randint(0, 5, (1,), generator=g))
    batch, heads, size = 2, 3, 2 * n
    scores = torch.randn(batch, heads, size, size, generator=g)
    # heads that partly attend to the induction target, to the previous token and to the
    # same token: every stripe carries a different, nonzero weight
    q = torch.arange(size)[:, None]
    k = torch.arange(size)[None, :]
    strength = 3 * torch.rand(3, heads, 1, 1, generator=g)
    scores = scores + strength[0] * ((q - k == n - 1) & (q >= n)) + strength[1] * (q - k == 1) \
        + strength[2] * (q - k == n)
    scores = scores.masked_fill(k > q, float("-inf"))
    return {"pattern": scores.softmax(-1), "seq_len": n}


EX1 = FunctionExercise(
    id="ch17_ex1",
    title="the induction score",
    reference=induction_score,
    make_inputs=_repeat_pattern_inputs,
    mistakes=[
        Mistake("off by one: attended to the earlier copy of the same token", "Your stripe measures "
                "attention to the earlier occurrence of the query's own token: that is what a duplicate-token "
                "head does. Which token does an induction head want to find, and where does it sit relative "
                "to that earlier occurrence?",
                lambda pattern, seq_len: _stripe(pattern, seq_len, seq_len)),
        Mistake("off by one the other way", "Your stripe is one diagonal off the induction stripe. "
                "For a query in the second copy, where is the earlier occurrence of its token, which key "
                "comes right after it, and how far below the main diagonal does that key lie?",
                lambda pattern, seq_len: _stripe(pattern, seq_len - 2, seq_len)),
        Mistake("included the query at position n - 1", "Your mean counts one query too many. At which "
                "query does your diagonal start, and is that query in the first copy or the second? Which "
                "queries have an earlier occurrence of their token to look back to?",
                lambda pattern, seq_len: _stripe(pattern, seq_len - 1, seq_len - 1)),
        Mistake("averaged over the whole pattern", "Your score averages every entry of the pattern, so a "
                "head that never looks back scores the same as one that does. Which entries of the pattern "
                "would an induction head fill, and how are they arranged?",
                lambda pattern, seq_len: pattern.mean(dim=(0, 2, 3))),
        Mistake("transposed", "Your stripe lies where a causal pattern is zero. Rows are queries and "
                "columns keys: on which side of the main diagonal are the keys a query can see?",
                lambda pattern, seq_len: _stripe(pattern.transpose(-1, -2), seq_len - 1, seq_len)),
        Mistake("summed instead of averaged", "Your scores can exceed 1. Attention weights sum to 1 over "
                "the keys: what should a head that puts all its weight on the induction target score, and "
                "what operation over the queries and the batch gives that?",
                lambda pattern, seq_len: _stripe(pattern, seq_len - 1, seq_len) * pattern.shape[0] * seq_len),
        Mistake("kept the batch axis", "Your result has an axis too many. The score is one number per "
                "head, [head]: which axis of yours is not the head axis, and what should happen to it?",
                lambda pattern, seq_len: pattern.diagonal(offset=-(seq_len - 1), dim1=-2, dim2=-1)[..., 1:]
                .mean(-1)),
    ],
    hint="Which key does query n + i attend to if the head does induction? How far below the main "
         "diagonal of a [2n, 2n] pattern does that put the pair, and is the distance the same for every i? "
         "Which queries have an earlier copy of their token to look back to? Over which axes must you "
         "average to be left with one score per head, [head]?",
)


def prev_token_score(pattern):
    """pattern: [batch, head, pos, pos] -> mean of pattern[..., p, p - 1]
    over the batch and p >= 1: [head]."""
    return pattern.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, 2))


def _prev_inputs(g: torch.Generator) -> dict:
    size = 6 + int(torch.randint(0, 6, (1,), generator=g))
    batch, heads = 2, 3
    scores = torch.randn(batch, heads, size, size, generator=g)
    q = torch.arange(size)[:, None]
    k = torch.arange(size)[None, :]
    strength = 3 * torch.rand(3, heads, 1, 1, generator=g)
    scores = scores + strength[0] * (q - k == 1) + strength[1] * (q == k) + strength[2] * (q - k == 2)
    scores = scores.masked_fill(k > q, float("-inf"))
    return {"pattern": scores.softmax(-1)}


def _diag(pattern, offset):
    return pattern.diagonal(offset=offset, dim1=-2, dim2=-1)


EX2 = FunctionExercise(
    id="ch17_ex2",
    title="the previous-token score",
    reference=prev_token_score,
    library_answers=("circuitbook.heads.prev_token_pattern_score",),
    make_inputs=_prev_inputs,
    mistakes=[
        Mistake("read the main diagonal", "Which key does pattern[p, p] hold for query p, and which "
                "key does the task ask for?",
                lambda pattern: _diag(pattern, 0).mean(dim=(0, 2))),
        Mistake("read the main diagonal", "Which key does pattern[p, p] hold for query p, and which "
                "key does the task ask for?",
                lambda pattern: _diag(pattern, 0)[..., 1:].mean(dim=(0, 2))),
        Mistake("looked at the next token (offset +1) or transposed", "Your scores are 0 for every head. "
                "Under the causal mask, which keys can query p see, and which entries of a pattern does "
                "the mask leave at 0? In pattern[..., q, k], which index is the query and which the key, "
                "and which of those entries does your stripe read?",
                lambda pattern: _diag(pattern, 1).mean(dim=(0, 2))),
        Mistake("counted position 0", "Your scores are too small, by the same factor for every head, as "
                "if your mean ran over one query too many. Which key is the previous token of query 0, and if you "
                "shifted the pattern with torch.roll, which key did query 0 get instead? Over which "
                "queries should the mean run?",
                lambda pattern: _diag(pattern, -1).sum(-1).mean(0) / pattern.shape[-1]),
        Mistake("two tokens back", "How many tokens back from query p is the key your stripe reads?",
                lambda pattern: _diag(pattern, -2).mean(dim=(0, 2))),
        Mistake("summed instead of averaged", "Your scores can exceed 1. What should a head that always "
                "attends to the previous token score, and what operation over the positions and the batch "
                "gives that?",
                lambda pattern: _diag(pattern, -1).sum(dim=(0, 2))),
        Mistake("kept the batch axis", "Your result has an axis too many. The score is one number per "
                "head, [head]: which axis of yours is not the head axis, and what should happen to it?",
                lambda pattern: _diag(pattern, -1).mean(-1)),
    ],
    hint="In a [pos, pos] pattern with queries as rows and keys as columns, where do the entries "
         "(query p, key p - 1) lie, and how could you read them all at once? Which positions p have such an "
         "entry? Over which axes must you average to be left with one score per head, [head]?",
)


def mean_ablate(z, head):
    """z: [batch, pos, head, d_head], one layer's head outputs (hook_z);
    head: an index -> z with that head replaced by its mean over batch and
    positions, same shape."""
    out = z.clone()
    out[:, :, head] = z[:, :, head].mean(dim=(0, 1))
    return out


def _z_inputs(g: torch.Generator) -> dict:
    batch, pos = 2 + int(torch.randint(0, 3, (1,), generator=g)), 5 + int(torch.randint(0, 6, (1,), generator=g))
    heads, d_head = 3 + int(torch.randint(0, 3, (1,), generator=g)), 4
    # an offset per (batch, position, head), so that every mean differs from the others
    z = torch.randn(batch, pos, heads, d_head, generator=g, dtype=torch.float64) \
        + 2 * torch.randn(batch, 1, 1, 1, generator=g, dtype=torch.float64) \
        + 2 * torch.randn(1, pos, 1, 1, generator=g, dtype=torch.float64)
    return {"z": z, "head": int(torch.randint(0, heads, (1,), generator=g))}


def _replace(z, head, value):
    out = z.clone()
    out[:, :, head] = value
    return out


EX3 = FunctionExercise(
    id="ch17_ex3",
    title="mean-ablation as a hook",
    reference=mean_ablate,
    library_answers=("circuitbook.heads.Ablation._hook",),
    make_inputs=_z_inputs,
    mistakes=[
        Mistake("output set to a constant of your choosing", "Your replacement does not depend on z at "
                "all. What does the rest of the model see from this head on an ordinary input, on "
                "average, and should an ablation take that away too?",
                lambda z, head: _replace(z, head, 0.0)),
        Mistake("replacement varies with the position", "Your replacement differs from one position "
                "to the next. What information does a value that depends on the position still carry?",
                lambda z, head: _replace(z, head, z[:, :, head].mean(0, keepdim=True))),
        Mistake("replacement varies with the sequence", "Your replacement differs from one sequence of "
                "the batch to the next. What does a value that depends on the sequence still tell the "
                "layers above?",
                lambda z, head: _replace(z, head, z[:, :, head].mean(1, keepdim=True))),
        Mistake("averaged over d_head too", "Your replacement is the same number in every dimension of "
                "the head's output. Does the head's average output point in one direction of its d_head "
                "dimensions, and which axes did your mean run over?",
                lambda z, head: _replace(z, head, z[:, :, head].mean())),
        Mistake("ablated every head", "Your function changed heads other than `head`. Which heads of "
                "the layer should the rest of the model still see as they were?",
                lambda z, head: z.mean(dim=(0, 1), keepdim=True).expand_as(z).clone()),
        Mistake("returned only the ablated head", "Your tensor has lost an axis. What shape does the "
                "model expect back from a hook on hook_z, and what happens to the other heads if it gets "
                "less?",
                lambda z, head: z[:, :, head].mean(dim=(0, 1)).expand_as(z[:, :, head]).clone()),
    ],
    hint="A hook receives one layer's outputs of every head and must return a tensor of the same "
         "shape. Which index of z picks out one head? Over which dimensions must an average run "
         "so that what remains no longer depends on the sequence or the position, and which "
         "dimension must it keep?",
)


def phase_change(steps, second_copy, chance):
    """steps: recorded training steps; second_copy: the loss on the second
    copy at each; chance: ln d_vocab -> the first step below the midpoint of
    chance and the curve's minimum."""
    midpoint = (chance + min(second_copy)) / 2
    return next(s for s, v in zip(steps, second_copy) if v < midpoint)


def _history_inputs(g: torch.Generator) -> dict:
    """A noisy training curve: it starts above chance, collapses over some records at a random
    step and rises again at the end (so its final value is not its lowest), recorded every
    few steps. The levels the known mistakes use (chance, halfway to the final value, halfway
    from the first value) each lie several records away from the right one."""
    every = 5 + int(torch.randint(0, 20, (1,), generator=g))
    count = 80 + int(torch.randint(0, 60, (1,), generator=g))
    steps = [every * i for i in range(count)]
    chance = 2.0 + 3.0 * float(torch.rand(1, generator=g))
    low = 0.05 + 0.3 * float(torch.rand(1, generator=g))
    drop = chance - low
    at = int(count * (0.3 + 0.3 * float(torch.rand(1, generator=g))))
    t = torch.arange(count, dtype=torch.float64)
    curve = low + 1.8 * drop * (1 - torch.sigmoid((t - at) / 8))
    curve = curve + 0.3 * drop * (t > 0.9 * count) + 0.01 * torch.randn(count, generator=g, dtype=torch.float64)
    return {"steps": steps, "second_copy": [float(v) for v in curve], "chance": chance}


def _first_below(steps, curve, level):
    return next(s for s, v in zip(steps, curve) if v < level)


EX4 = FunctionExercise(
    id="ch17_ex4",
    title="the phase-change step",
    reference=phase_change,
    library_answers=("circuitbook.train.lm.phase_change_step",),
    make_inputs=_history_inputs,
    compare=lambda a, b: isinstance(a, (int, float)) and not isinstance(a, bool) and a == b,
    mistakes=[
        Mistake("midpoint from another end value", "Your midpoint moves when the curve's last value "
                "changes and its lowest does not. Which two values does the definition put the midpoint "
                "between?",
                lambda steps, second_copy, chance: _first_below(
                    steps, second_copy, (chance + second_copy[-1]) / 2)),
        Mistake("returned the index, not the step", "Steps are recorded every few training steps. Is "
                "what you return a training step, one of the values in `steps`, or something else?",
                lambda steps, second_copy, chance: steps.index(phase_change(steps, second_copy, chance))),
        Mistake("one record early", "Your step is one record before the one asked for. At your step, "
                "is the loss already past the midpoint?",
                lambda steps, second_copy, chance: steps[steps.index(phase_change(steps, second_copy,
                                                                                  chance)) - 1]),
        Mistake("another threshold", "Your step is where the loss first falls below a different level "
                "than the one the definition names. Which level is it, and why is it not yet the collapse?",
                lambda steps, second_copy, chance: _first_below(steps, second_copy, chance)),
        Mistake("midpoint from the first record", "Your midpoint moves when the curve's first recorded "
                "value changes. A model can start above chance: which value does the definition start "
                "from?",
                lambda steps, second_copy, chance: _first_below(
                    steps, second_copy, (second_copy[0] + min(second_copy)) / 2)),
    ],
    hint="What level does the definition compare each record with, and which two numbers fix it? "
         "In which order must the records be read for the first one below it to be found? And is "
         "the answer a step or a position in the list?",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2, EX3, EX4)}
