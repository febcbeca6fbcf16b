"""The questions of the induction module's quiz ("Check yourself", book/induction/04_quiz).

They live here, not on the page, so that the page does not print its own answer key: the
page cell only builds ``Quiz(QUESTIONS)``. Each question has four options, the index of the
right one (``correct``), an ``explanation`` shown after a right answer, and ``why_not[i]``,
what is wrong with option ``i``, shown after a wrong answer; a ``why_not`` says what is wrong
with the chosen option without naming the right one, so that "Try again" means something.
"""

from __future__ import annotations

QUESTIONS = [
    {"question": "Why does the framework study $W_{QK} = W_Q W_K^\\top$ "
                 "rather than $W_Q$ and $W_K$ one by one?",
     "options": [
                 "$W_K$ is always $W_Q$, so the product $W_Q W_Q^\\top$ is "
                 "symmetric and easier to read",
                 "Scores see only the product: $W_Q G$, $W_K G^{-\\top}$ "
                 "give the same model for any invertible $G$ (no rotary)",
                 "The product has full rank $d_\\text{model}$, so it holds "
                 "more than either factor alone",
                 "One $d_\\text{model} \\times d_\\text{model}$ product is "
                 "cheaper to run than two separate projections, so it is "
                 "what the model computes"],
     "correct": 1,
     "explanation": "The score of query $x_i$ against key $x_j$ is $x_i W_Q "
                    "W_K^\\top x_j^\\top$: only the product enters, so the "
                    "factors are not identifiable and only $W_{QK}$ means "
                    "something. (With rotary embeddings the score is $x_i "
                    "W_Q R_{i-j} W_K^\\top x_j^\\top$, and, when $W_Q$ and $W_K$ have "
                    "full column rank (with any norm's gain folded in), only a $G$ that commutes with every "
                    "rotation $R$ leaves it unchanged; "
                    "the factors are still not identifiable. Where the model has "
                    "query and key biases they transform too, $b_Q G$ and "
                    "$b_K G^{-\\top}$; with grouped-query attention one $G$ "
                    "must serve every query head that shares a key head.)",
     "why_not": [
                 "$W_Q$ and $W_K$ are learned separately and differ; "
                 "nothing makes $W_{QK}$ symmetric, and $W_Q W_Q^\\top$ would "
                 "be more: positive semidefinite, so a query would score a "
                 "key above its own position only when that key's projection "
                 "$x W_Q$ is longer.",
                 None,
                 "The product passes through the head's $d_\\text{head}$ "
                 "dimensions, so its rank is at most $d_\\text{head}$, far "
                 "below $d_\\text{model}$.",
                 "The model runs the two thin projections, and one $d_\\text{model} "
                 "\\times d_\\text{model}$ product would cost more, not less: "
                 "cost gives no reason to study the product."]},
    {"question": "In an attention-only model without norms (like toy-2l), "
                 "which kind of composition creates a virtual head: a new "
                 "term $W_{OV}^{h_1} W_{OV}^{h_2}$ in the logits?",
     "options": [
                 "Q-composition: the later head's queries read what the "
                 "earlier head wrote",
                 "K-composition: the later head's keys read what the "
                 "earlier head wrote",
                 "V-composition: the later head's values read what the "
                 "earlier head wrote",
                 "Any of the three, once the model has more heads to "
                 "compose with in each layer"],
     "correct": 2,
     "explanation": "Only when the later head's values read the earlier "
                    "head's output does the product $W_{OV}^{h_1} "
                    "W_{OV}^{h_2}$, with pattern $A^{h_2} A^{h_1}$, appear "
                    "in the logits. Q- and K-composition change where the "
                    "later head attends, not what it moves.",
     "why_not": [
                 "Write the later head's term of the logits with the "
                 "earlier head's output in its query, and look for "
                 "$W_{OV}^{h_1}$ in it: the query enters only the "
                 "attention score, which becomes one softmax weight per "
                 "key, and a weight is a number, not a factor "
                 "$W_{OV}^{h_1}$.",
                 "Induction heads use K-composition, but follow the "
                 "earlier head's output from the keys into the logits: the "
                 "keys enter only the attention score, which becomes one "
                 "softmax weight per key, and a weight is a number, not a "
                 "factor $W_{OV}^{h_1}$.",
                 None,
                 "More heads add more terms, but each kind of composition "
                 "still does what it did with fewer heads: the head count "
                 "does not change which kinds put a product of OV circuits "
                 "in the logits."]},
    {"question": "Can a one-layer attention-only model complete [A][B] … "
                 "[A] with [B] when it never saw A and B together in "
                 "training, with the earlier [A][B] at a position, and so a "
                 "distance, that varies from sequence to sequence?",
     "options": [
                 "Yes: a copying head attends to the earlier [B] and raises "
                 "its logit",
                 "No: $d_\\text{model}$ is too small to store every pair of "
                 "tokens, though a much wider model could",
                 "Yes, given enough heads, since more heads mean more "
                 "composition",
                 "No: by content, a key must know its left neighbour, "
                 "which only an earlier layer can write"],
     "correct": 3,
     "explanation": "One layer attends by content and position "
                    "(skip-trigrams). With the earlier pair anywhere in the "
                    "context, position alone (absolute or relative) cannot find 'the token after the earlier [A]'; "
                    "by content the key at [B] must carry 'my left neighbour "
                    "was A', which a previous-token head in an earlier layer "
                    "writes: K-composition, so two layers (other routes, such "
                    "as Q-composition, also need an earlier layer). At a "
                    "fixed distance one layer could find [B] by position "
                    "alone (chapter 15). (An architecture change can lift "
                    "this: chapter 19's smeared keys mix each key with its "
                    "left neighbour's, so one layer could suffice.)",
     "why_not": [
                 "A copying head raises the logit of what it attends to, "
                 "but this option takes the hard part for granted: that the "
                 "head attends to the earlier [B] rather than to any other "
                 "earlier token. Ask how one layer's head would make that "
                 "choice for a pair it never saw in training.",
                 "Width is not the obstacle: a pair never seen in training is "
                 "not stored anywhere, however large $d_\\text{model}$ is. "
                 "The question is about generalising to unseen pairs.",
                 "Adding heads to one layer adds more lookups of the kind "
                 "a single head of that layer can already do; none of them "
                 "can do a kind of lookup that one such head could not.",
                 None]},
    {"question": "What does the previous-token head contribute to an "
                 "induction circuit?",
     "options": [
                 "It writes each token into the stream of the position "
                 "after it, where the induction head's keys read it",
                 "It predicts the next token: attending to the previous "
                 "token tells it what usually comes after",
                 "It copies the current token into the logits, which is why "
                 "models repeat what they just saw",
                 "It finds the earlier occurrence of the current token, and "
                 "the induction head then copies what the previous-token "
                 "head found there"],
     "correct": 0,
     "explanation": "Its output is what lets the key at the token after an "
                    "earlier [A] say 'my left neighbour was A', so the "
                    "induction head's query [A] can match it "
                    "(K-composition).",
     "why_not": [
                 None,
                 "What usually comes next is a statistic of the training "
                 "data, and an induction circuit is the part of the model "
                 "that does without such statistics: it predicts from the "
                 "context. This option describes a bigram, not a "
                 "contribution to induction.",
                 "A head that copied the current token into the logits "
                 "would predict [A] again after [A], not the token that "
                 "followed [A] earlier: it could not explain continuing an "
                 "earlier passage.",
                 "Finding the earlier occurrence of the current token is a "
                 "lookup by content across the whole context, and a head "
                 "named for a fixed offset from its own position does not "
                 "search by content."]},
    {"question": "Which summary of the induction-head 'phase change' is "
                 "most defensible?",
     "options": [
                 "Induction heads appear gradually over training, and "
                 "in-context learning improves smoothly along with them, so "
                 "calling it a 'phase change' is a misnomer",
                 "In-context learning appears only once a model is large: "
                 "the bump is a property of scale, not of training time",
                 "Induction heads form in a short window early in training "
                 "while in-context loss drops; in small attention-only "
                 "models, ablations show they cause it",
                 "It shows that in-context learning happens in the MLP "
                 "layers, which the induction heads only feed"],
     "correct": 2,
     "explanation": "That is Olsson et al.'s claim: a sharp, simultaneous "
                    "change in training, with its strongest (causal) "
                    "evidence in small attention-only models and mostly "
                    "correlational evidence in large ones.",
     "why_not": [
                 "Olsson et al.'s training curves do not show a gradual "
                 "change: this option leaves out the bump in the training "
                 "loss, one sign of the abrupt change they call the phase "
                 "change.",
                 "Olsson et al. see the bump in small models too, so scale "
                 "is not what produces it.",
                 None,
                 "Olsson et al. see the same change in models with no MLP "
                 "layers at all, so it does not need MLPs; and in the models "
                 "that have them, nothing in their evidence places "
                 "in-context learning in the MLP layers."]},
    {"question": "A head has $d_\\text{model} = 768$ and $d_\\text{head} = "
                 "64$. What does $\\operatorname{rank} W_{OV} \\le 64$ "
                 "imply?",
     "options": [
                 "The head can attend to at most 64 positions at a time",
                 "It writes into at most a 64-dimensional subspace of the "
                 "stream",
                 "It can raise the logits of at most 64 tokens of the "
                 "vocabulary",
                 "Its $768 \\times 768$ matrix $W_{OV}$ has at most 64 "
                 "nonzero rows, and the rest are zero"],
     "correct": 1,
     "explanation": "$W_{OV}$ maps the stream through the head's 64 "
                    "dimensions, so its image, everything the head can "
                    "write, is at most 64-dimensional. Through those "
                    "directions it can still affect every token's logit.",
     "why_not": [
                 "How many positions the head attends to is set by its "
                 "pattern, a different circuit; the rank of $W_{OV}$, which "
                 "acts on each attended vector, puts no bound on it.",
                 None,
                 "The 64 directions can each move many logits: through "
                 "$W_U$ a 64-dimensional write can raise or lower every "
                 "token.",
                 "Low rank is not sparsity: a rank-64 matrix can have every "
                 "entry nonzero. It is a product of $768 \\times 64$ and "
                 "$64 \\times 768$ factors."]},
    {"question": "Which combination of evidence makes the strongest case "
                 "that a head is an induction head?",
     "options": [
                 "It sits in the second half of the network, attends to "
                 "tokens far back in long natural text, and its pattern "
                 "changes when the text repeats",
                 "On repeated random tokens it attends to the token after "
                 "the earlier copy, and ablating it alone removes the "
                 "in-context loss drop",
                 "On natural text it attends to the token after an earlier "
                 "copy of the current token, across many documents and "
                 "several seeds, with a high score every time",
                 "On random repeats it attends to the token after the "
                 "earlier copy, its OV circuit copies, and ablating its "
                 "group cuts the drop more than controls do"],
     "correct": 3,
     "explanation": "Random tokens rule out memorised bigrams, a copying OV "
                    "circuit explains what the head writes, and ablating "
                    "every head that does the same job, against controls, "
                    "tests whether the model relies on them in a way that "
                    "redundancy among those heads cannot hide: behaviour, "
                    "mechanism and cause together. The ablation need not "
                    "remove the whole drop (problem 6 measures how much of it "
                    "remains in SmolLM2 on repeated text): "
                    "a cut well beyond the controls' is the evidence, and "
                    "other heads may carry the rest.",
     "why_not": [
                 "Layer and distance are weak hints: many later heads "
                 "attend far back for other reasons (the first token, "
                 "punctuation, names), and repeated text changes many "
                 "heads' patterns.",
                 "A drop that goes when one head is removed shows that the "
                 "model needs the head, not what the head does. A head the "
                 "circuit merely "
                 "depends on passes the ablation half too (in the toy-2l lab, "
                 "removing the previous-token head also removes most of the "
                 "drop). And with redundant heads a real induction head can "
                 "fail it.",
                 "A pattern, however consistent across documents and "
                 "seeds, says only where the head looks: on natural text a "
                 "head can look at the token after an earlier copy for other "
                 "reasons (a learned pair: its weights may tie the current "
                 "token to the one that usually follows it in training, 'Potter' "
                 "after 'Harry'), so the pattern "
                 "alone does not tell an induction head from a look-alike.",
                 None]},
    {"question": "A corruption raises the loss on the predictions an "
                 "induction head makes from 0.2 to 4.0 nats. Patching the "
                 "previous-token head's clean output into only the "
                 "induction heads' keys brings it back to 0.35: a "
                 "normalised effect of 0.96. What does this show?",
     "options": [
                 "That path alone brings back what the corruption took: "
                 "with everything else left corrupted, it restores almost "
                 "all of the gap",
                 "That the previous-token head is necessary: its corrupted "
                 "output in a clean run would lose 96% of the behaviour",
                 "That this path carries 96% of the induction, so all the "
                 "other paths together can carry at most 4%",
                 "That the induction heads' keys read 96% of what the "
                 "previous-token head writes into the stream"],
     "correct": 0,
     "explanation": "This is denoising: one clean path in an otherwise "
                    "corrupted run restores (0.35 - 4.0) / (0.2 - 4.0), "
                    "about 0.96, of the gap between the corrupted and the "
                    "clean loss. The path is sufficient here; whether it is "
                    "necessary is another experiment.",
     "why_not": [
                 None,
                 "'Necessary' is a claim about what a working model loses "
                 "without the head's clean output, and this experiment "
                 "takes nothing away from a working run: it measures "
                 "something else, and with redundant paths the two can "
                 "disagree.",
                 "Effects of different patches need not add up to 1: two "
                 "redundant paths can each restore nearly everything when "
                 "patched one at a time, and paths interact, so one path's "
                 "large effect puts no ceiling on the others'.",
                 "The 0.96 is computed from losses of the whole model and "
                 "contains no measurement of the head's output or of what "
                 "the keys take from it. How much of that output the keys "
                 "read is a question about the weights (the K-composition "
                 "score), and a small share of it could restore the loss "
                 "just as well."]},
]
