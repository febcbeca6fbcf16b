# %% [markdown]
# # Check yourself
#
# Eight questions on the ideas of this module, from $W_{QK}$ and $W_{OV}$ to
# the evidence for induction heads and how to read it. Answer all eight to submit; each
# answer then shows why it is right, or what is wrong with it, and "Try again"
# lets you change your answers. Nothing is recorded: this is for you.

# %% tags=["remove-input"]
from circuitbook.widgets.quiz import Quiz
from circuitbook.widgets.quiz_questions import QUESTIONS

Quiz(QUESTIONS)
