# %% [markdown]
# # Check yourself
#
# Seven questions on the ideas of this module, from $W_{QK}$ and $W_{OV}$ to the evidence
# for induction heads. Each wrong option is a misreading that students actually make. Answer
# all seven to submit; each answer then shows why it is right, or what is wrong with it, and
# "Try again" lets you change your answers. Nothing is recorded: this is for you.

# %%
from circuitbook.widgets.quiz import Quiz

QUESTIONS = [
    {"question": "Why does the framework study $W_{QK} = W_Q W_K^\\top$ rather than $W_Q$ and $W_K$ "
                 "one by one?",
     "options": ["$W_K$ is always $W_Q^\\top$, so the product is symmetric and easier to read",
                 "Scores see only the product: $W_Q G$, $W_K G^{-\\top}$ give the same model for any "
                 "invertible $G$",
                 "The product has full rank $d_\\text{model}$, so it holds more than either factor "
                 "alone",
                 "One $d_\\text{model} \\times d_\\text{model}$ product is cheaper to run than two "
                 "separate projections, so it is what the model computes"],
     "correct": 1,
     "explanation": "The score of query $x_i$ against key $x_j$ is $x_i W_Q W_K^\\top x_j^\\top$: only "
                    "the product enters, so the factors are not identifiable and only $W_{QK}$ means "
                    "something.",
     "why_not": ["$W_Q$ and $W_K$ are learned separately and differ; $W_{QK}$ is not symmetric in "
                 "general (a previous-token head's certainly is not).",
                 None,
                 "The product passes through the head's $d_\\text{head}$ dimensions, so its rank is at "
                 "most $d_\\text{head}$, far below $d_\\text{model}$.",
                 "The model runs the two thin projections; the product is the object of analysis "
                 "because the factors are not unique, not because it is cheaper (it is not)."]},
    {"question": "Which kind of composition creates a virtual head: a new term $W_{OV}^{h_1} "
                 "W_{OV}^{h_2}$ in the logits?",
     "options": ["Q-composition: the later head's queries read what the earlier head wrote",
                 "K-composition: the later head's keys read what the earlier head wrote",
                 "V-composition: the later head's values read what the earlier head wrote",
                 "Any of the three, once the model has more heads to compose with in each layer"],
     "correct": 2,
     "explanation": "Only when the later head's values read the earlier head's output does the "
                    "product $W_{OV}^{h_1} W_{OV}^{h_2}$, with pattern $A^{h_2} A^{h_1}$, appear in "
                    "the logits. Q- and K-composition change where the later head attends, not what "
                    "it moves.",
     "why_not": ["Q-composition changes the later head's pattern (where it looks), not the content it "
                 "moves; no product of OV circuits appears.",
                 "K-composition is what induction heads use, but it changes which key the later head "
                 "picks; what it moves does not pass through the earlier head's OV circuit.",
                 None,
                 "More heads add more terms of each kind, but only V-composition multiplies OV "
                 "circuits; the kind of composition, not the head count, decides."]},
    {"question": "Can a one-layer attention-only model complete [A][B] … [A] with [B] when it never "
                 "saw A and B together in training?",
     "options": ["Yes: a copying head attends to the earlier [B] and raises its logit",
                 "Yes, if $d_\\text{model}$ is large enough to store every pair of tokens",
                 "Yes, given enough heads, since more heads mean more composition",
                 "No: each key must know its left neighbour, and only an earlier layer can write that"],
     "correct": 3,
     "explanation": "One layer attends by content and position (skip-trigrams). To find 'the token "
                    "after the earlier [A]', the key at [B] must carry 'my left neighbour was A', "
                    "which a previous-token head in an earlier layer writes: K-composition, so two "
                    "layers.",
     "why_not": ["A copying head raises the logit of what it attends to, but to attend to [B] rather "
                 "than any other earlier token, [B]'s key must say 'I follow an A', which one layer "
                 "cannot arrange.",
                 "Width does not help: a pair never seen in training is not stored anywhere, however "
                 "large $d_\\text{model}$ is. The point is to generalise to unseen pairs.",
                 "Heads in the same layer all read the same stream, the embeddings; they cannot "
                 "compose. Composition needs a second layer.",
                 None]},
    {"question": "What does the previous-token head contribute to an induction circuit?",
     "options": ["It writes each token into the stream of the position after it, where the induction "
                 "head's keys read it",
                 "It predicts the next token: attending to the previous token tells it what usually "
                 "comes after",
                 "It copies the current token into the logits, which is why models repeat what they "
                 "just saw",
                 "It finds the earlier occurrence of the current token, and the induction head then "
                 "copies what the previous-token head found there"],
     "correct": 0,
     "explanation": "Its output is what lets the key at the token after an earlier [A] say 'my left "
                    "neighbour was A', so the induction head's query [A] can match it "
                    "(K-composition).",
     "why_not": [None,
                 "That is the job of the pair, not of this head: it attends one position back and "
                 "writes what it finds there, and does not look at the logits.",
                 "Its output goes into the stream for the next layer's keys; the induction head does "
                 "the copying into the logits.",
                 "It only looks one position back. Finding the earlier occurrence is the induction "
                 "head's query-key match, which the previous-token head's output makes possible."]},
    {"question": "Which summary of the induction-head 'phase change' is most defensible?",
     "options": ["Induction heads appear gradually over training, and in-context learning improves "
                 "smoothly along with them, so calling it a 'phase change' is a misnomer",
                 "In-context learning appears only once a model is large: the bump is a property of "
                 "scale, not of training time",
                 "Induction heads form in a short window early in training while in-context loss "
                 "drops; in small attention-only models, ablations show they cause it",
                 "It shows that in-context learning happens in the MLP layers, which the induction "
                 "heads only feed"],
     "correct": 2,
     "explanation": "That is Olsson et al.'s claim: a sharp, simultaneous change in training, with "
                    "its strongest (causal) evidence in small attention-only models and only "
                    "correlational evidence in large ones.",
     "why_not": ["The change is sharp: Olsson et al. see the heads and the in-context loss drop "
                 "appear together in a short window, visible as a bump in the training loss.",
                 "Small models show it too, down to two-layer attention-only models; the bump is a "
                 "function of training time.",
                 None,
                 "In attention-only models there are no MLPs, and the heads alone produce the effect."]},
    {"question": "A head has $d_\\text{model} = 768$ and $d_\\text{head} = 64$. What does "
                 "$\\operatorname{rank} W_{OV} \\le 64$ imply?",
     "options": ["The head can attend to at most 64 positions at a time",
                 "It writes into at most a 64-dimensional subspace of the stream",
                 "It can raise the logits of at most 64 tokens of the vocabulary",
                 "Its $768 \\times 768$ matrix $W_{OV}$ has at most 64 nonzero rows, and the rest are "
                 "zero"],
     "correct": 1,
     "explanation": "$W_{OV}$ maps the stream through the head's 64 dimensions, so its image, "
                    "everything the head can write, is at most 64-dimensional. Through those "
                    "directions it can still affect every token's logit.",
     "why_not": ["Rank bounds the directions the head writes, not how many positions it attends to: "
                 "attention is the pattern, a different circuit.",
                 None,
                 "The 64 directions can each move many logits: through $W_U$ a 64-dimensional write "
                 "can raise or lower every token.",
                 "Low rank is not sparsity: a rank-64 matrix can have every entry nonzero. It is a "
                 "product of $768 \\times 64$ and $64 \\times 768$ factors."]},
    {"question": "Which combination of evidence makes the strongest case that a head is an induction "
                 "head?",
     "options": ["It sits in the second layer, attends to tokens far back in long natural text, "
                 "and its pattern changes when the text repeats",
                 "Its $W_{OV}$ has mostly positive eigenvalues, its pattern has low entropy, and its "
                 "weights have a large Frobenius norm",
                 "On natural text it attends to the token after an earlier copy of the current token, "
                 "across many documents and several seeds, with a high score every time",
                 "On repeated random tokens it attends to the token after the earlier copy, its OV "
                 "circuit copies, and ablating it removes the in-context loss drop"],
     "correct": 3,
     "explanation": "Random tokens rule out memorised bigrams, a copying OV circuit explains the "
                    "output, and the ablation shows the model relies on the head: behaviour, "
                    "mechanism and cause together.",
     "why_not": ["Layer and distance are weak hints: many later heads attend far back for other "
                 "reasons (the first token, punctuation, names), and repeated text changes many "
                 "heads' patterns.",
                 "Positive eigenvalues say the head copies whatever it attends to, not that it attends "
                 "to the token after an earlier copy; entropy and norms describe many heads.",
                 "However often it holds, on natural text memorised bigrams give the same pattern, and "
                 "nothing here shows that the model relies on the head.",
                 None]},
]

quiz = Quiz(QUESTIONS)
quiz
