"""``explore`` panels display on Colab with ipywidgets 8 too: they are anywidgets, and anywidget
points Colab's front end at its custom widget manager, which ipywidgets 8 needs there."""

from __future__ import annotations

import sys
import types

from circuitbook.widgets import explore

MIME = "application/vnd.jupyter.widget-view+json"


def _panel():
    import matplotlib.pyplot as plt

    def draw(d):
        plt.plot(range(d))
        plt.title(f"d = {d}")
        plt.show()

    return explore(draw, d=(1, 4, 1))


def test_explore_off_colab_displays_as_a_widget():
    data = _panel()._repr_mimebundle_()
    data = data[0] if isinstance(data, tuple) else data
    assert MIME in data


def test_explore_on_colab_names_the_custom_widget_manager(monkeypatch):
    # as Colab's kernel has it: google.colab.output with the manager's URL in _widgets
    enabled = []
    widgets_mod = types.SimpleNamespace(_installed_url="https://colab.example/manager.min.js")
    output = types.SimpleNamespace(_widgets=widgets_mod, enable_custom_widget_manager=lambda: enabled.append(1))
    monkeypatch.setitem(sys.modules, "google.colab.output", output)
    data, metadata = _panel()._repr_mimebundle_()
    assert MIME in data
    assert metadata == {MIME: {"colab": {"custom_widget_manager": {"url": widgets_mod._installed_url}}}}


def test_an_explorer_leaves_the_pages_random_numbers_as_they_were():
    # a frame that draws random weights must not shift what the page draws after it: otherwise
    # a number later on the page depends on how many frames were drawn (CIRCUITBOOK_EXPLORE_STATES)
    import random

    import numpy as np
    import torch
    import matplotlib.pyplot as plt

    def noisy(d):
        torch.randn(d)
        np.random.rand(d)
        random.random()
        plt.plot(range(d))
        plt.show()

    def next_draws():
        return torch.randn(3), np.random.rand(3), random.random()

    torch.manual_seed(5), np.random.seed(5), random.seed(5)
    want = next_draws()
    torch.manual_seed(5), np.random.seed(5), random.seed(5)
    explore(noisy, d=(1, 4, 1))  # draws every frame of its static grid
    got = next_draws()
    assert torch.equal(got[0], want[0]) and np.array_equal(got[1], want[1]) and got[2] == want[2]
