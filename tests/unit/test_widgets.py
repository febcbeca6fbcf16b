"""``explore`` panels display on Colab with ipywidgets 8 too (the book's venv has ipywidgets 8)."""

from __future__ import annotations

import sys
import types

import ipywidgets

from circuitbook.widgets import explore

MIME = "application/vnd.jupyter.widget-view+json"


def _panel():
    return explore(lambda d: None, d=(1, 8, 1))


def test_explore_is_an_interactive_box():
    ui = _panel()
    assert isinstance(ui, ipywidgets.interactive) and "circuitbook-explore" in ui._dom_classes


def test_explore_off_colab_displays_as_any_widget():
    data = _panel()._repr_mimebundle_()
    assert isinstance(data, dict) and MIME in data


def test_explore_on_colab_names_the_custom_widget_manager(monkeypatch):
    # as Colab's kernel has it after enable_custom_widget_manager(): the URL in _widgets
    widgets_mod = types.SimpleNamespace(_installed_url="https://colab.example/manager.min.js")
    monkeypatch.setitem(sys.modules, "google.colab.output", types.SimpleNamespace(_widgets=widgets_mod))
    data, metadata = _panel()._repr_mimebundle_()
    assert MIME in data
    assert metadata == {MIME: {"colab": {"custom_widget_manager": {"url": widgets_mod._installed_url}}}}
    widgets_mod._installed_url = None  # the manager not enabled: nothing added
    assert isinstance(_panel()._repr_mimebundle_(), dict)
