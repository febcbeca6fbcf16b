"""Stand-in for Colab's ``google.colab`` package, for the Colab simulation.

Colab's kernel imports ``google.colab`` before the first cell, and the package imports its
``output`` module; libraries detect Colab by that (``"google.colab" in sys.modules``, or
anywidget's ``"google.colab.output" in sys.modules``). Only what the book and its libraries
touch is here.
"""

from google.colab import output  # noqa: F401  (imported eagerly, as Colab's package does)
