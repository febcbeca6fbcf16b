"""Names vulture cannot see being used: each is called by a framework, never by our code.

Read by tests/unit/test_dead_code.py (``vulture ... tests/unit/vulture_whitelist.py``); pytest
does not collect it. Add a name here only when a framework calls it by convention.
"""

# ruff: noqa
# fmt: off
__getattr__  # PEP 562 module hook: lazy submodules in circuitbook, .checks, .data, .models
__dir__      # PEP 562 module hook: circuitbook's lazy submodules in dir() and tab completion
_._repr_html_  # IPython's rich display of checks.core.Result
_._ipython_display_  # IPython's display() and displayhook: checks.core.Result, shown once per cell
_.autograded  # checks.core.Result: called by the tests scripts/assignments.py writes (ASSERT)
_._repr_mimebundle_  # IPython's rich display of viz.Heatmap
_.pre_tokenizer  # tokenizers.Tokenizer property, set in data.corpus and read by the tokenizer
_.layout     # ipywidgets property, set in widgets.explore and read by the front end
mode         # anywidget trait in widgets.explainers, synced to and read by the JavaScript
attempts     # anywidget trait in widgets.quiz, counted and read by the JavaScript
live         # anywidget trait in widgets.explorer: the figure drawn live, read by the JavaScript
_._on_text  # traitlets observer in widgets.smollm2_lab (@observe), called by traitlets
