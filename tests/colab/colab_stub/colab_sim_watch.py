"""Test instrumentation of the Colab simulation (not part of Colab): an audit hook that records
each file opened under a folder listed in ``COLAB_SIM_FORBIDDEN`` (separated by os.pathsep)."""

import os
import sys

FORBIDDEN = tuple(os.path.realpath(p) + os.sep for p in os.environ.get("COLAB_SIM_FORBIDDEN", "").split(os.pathsep) if p)
opened = []


def _hook(event, args):
    if event == "open" and FORBIDDEN and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.realpath(os.fsdecode(args[0]))
        if path.startswith(FORBIDDEN):
            opened.append(path)


sys.addaudithook(_hook)
