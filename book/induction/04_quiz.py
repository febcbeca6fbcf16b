# %% [markdown]
# # Check yourself
#
# Seven questions on the ideas of this module. Answer all seven to submit; each answer then
# shows why it is right or wrong. Nothing is recorded: this is for you.

# %%
from circuitbook.widgets.quiz import Quiz

QUESTIONS = [
    {"question": "Why do we study W_QK = W_Q W_K^T rather than W_Q and W_K separately?",
     "options": ["W_Q and W_K are too large to store",
                 "The model only uses their product; W_Q G and W_K G^-T give the same model for any invertible G",
                 "W_K is always the transpose of W_Q",
                 "TransformerLens does not expose W_Q"],
     "correct": 1,
     "explanation": "Scores depend on x_i W_Q W_K^T x_j^T only, so the factors are not identifiable; the product is."},
    {"question": "Which kind of composition creates a virtual head (a new term in the logits)?",
     "options": ["Q-composition", "K-composition", "V-composition", "All three"],
     "correct": 2,
     "explanation": "Only when the later head's values read the earlier head's output does a product W_OV^h1 W_OV^h2 "
                    "with pattern A^h2 A^h1 appear. Q and K composition change where the later head attends."},
    {"question": "Can a one-layer attention-only model predict [B] from [A][B] ... [A] when [A] and [B] never "
                 "appeared together in training?",
     "options": ["Yes, with a copying head",
                 "No: a single head cannot find 'the token after the earlier [A]', which needs information "
                 "about a key's previous token that only an earlier layer can put there",
                 "Yes, if d_model is large enough",
                 "Only with LayerNorm"],
     "correct": 1,
     "explanation": "One layer can attend to earlier [A] or [B] tokens by content (skip-trigrams) but cannot key on "
                    "'my left neighbour was A'; that takes a previous-token head in an earlier layer (K-composition)."},
    {"question": "What does the previous-token head contribute to an induction circuit?",
     "options": ["It predicts the next token directly",
                 "It writes each position's left neighbour into that position's stream, which the induction head's "
                 "keys read",
                 "It normalises the attention pattern",
                 "It copies the current token to the output"],
     "correct": 1,
     "explanation": "Its output is what makes the key after an earlier [A] say 'my left neighbour was A'."},
    {"question": "Which summary of the induction 'phase change' is most defensible?",
     "options": ["Large models suddenly become intelligent",
                 "Early in training, induction heads form in a short window, and in-context learning improves "
                 "abruptly at the same time; in small attention-only models ablations show the heads cause it",
                 "The loss always decreases smoothly, so there is no phase change",
                 "Induction heads form only in models with MLPs"],
     "correct": 1,
     "explanation": "That is Olsson et al.'s claim, with its strongest (causal) evidence in small attention-only models."},
    {"question": "A head has d_model = 768 and d_head = 64. What does rank(W_OV) <= 64 imply?",
     "options": ["The head can move information in at most 64 directions of the residual stream",
                 "The head attends to at most 64 positions",
                 "The head's output is always zero",
                 "The head can only copy 64 tokens of the vocabulary"],
     "correct": 0,
     "explanation": "W_OV maps the stream through the head's 64 dimensions: its image is at most 64-dimensional. It can "
                    "still affect every token's logit, through those directions."},
    {"question": "What is the strongest single piece of evidence that a head is an induction head?",
     "options": ["It has a high attention entropy",
                 "It sits in layer 1",
                 "On repeated random tokens it attends to the token after the earlier occurrence and its OV circuit "
                 "copies, and ablating it (or its previous-token partner) destroys the in-context loss drop",
                 "Its weights are large"],
     "correct": 2,
     "explanation": "Behaviour on random tokens rules out memorised bigrams, copying OV explains the output, and an "
                    "ablation shows the model relies on it."},
]

quiz = Quiz(QUESTIONS)
quiz
