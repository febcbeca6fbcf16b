"""Test instrumentation of the Colab simulation (not part of Colab): an audit hook that records
each file opened under a folder listed in ``COLAB_SIM_FORBIDDEN`` (separated by os.pathsep),
except the runtime's own venv (which the test keeps under the repository's _build/ cache)."""

import os
import sys

FORBIDDEN = tuple(os.path.realpath(p) + os.sep for p in os.environ.get("COLAB_SIM_FORBIDDEN", "").split(os.pathsep) if p)
RUNTIME = os.path.realpath(sys.prefix) + os.sep
opened = []


def _hook(event, args):
    if event == "open" and FORBIDDEN and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.realpath(os.fsdecode(args[0]))
        if path.startswith(FORBIDDEN) and not path.startswith(RUNTIME):
            opened.append(path)


sys.addaudithook(_hook)
