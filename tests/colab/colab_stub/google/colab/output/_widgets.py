"""Stand-in for ``google.colab.output._widgets``, behaving as Colab's does for the kernel side.

``enable_custom_widget_manager()`` records the manager's URL in ``_installed_url`` (anywidget
reads it) and registers a display hook that tags every widget display with that URL, which is
how Colab's front end knows to render the widget with the custom manager. The simulation
counts the calls in ``calls`` so a test can see who enabled it.
"""

import IPython

SUPPORTED_VERSIONS = {"5.0.0a": "simulated"}
_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
_installed_url = None
calls = []


def enable_custom_widget_manager(version="5.0.0a"):
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"Unknown widgets version: {version}")
    calls.append(version)
    _install(f"https://colab.invalid/widgets/colab-cdn-widget-manager/{SUPPORTED_VERSIONS[version]}/manager.min.js")


def disable_custom_widget_manager():
    _install(None)


def _install(url):
    global _installed_url
    shell = IPython.get_ipython()
    if url and not _installed_url:
        shell.display_pub.register_hook(_hook)
    elif not url and _installed_url:
        shell.display_pub.unregister_hook(_hook)
    _installed_url = url


def _hook(msg):
    content = msg.get("content") or {}
    if _installed_url and _WIDGET_MIME in content.get("data", {}):
        meta = content.setdefault("metadata", {}).setdefault(_WIDGET_MIME, {})
        meta["colab"] = {"custom_widget_manager": {"url": _installed_url}}
    return msg
