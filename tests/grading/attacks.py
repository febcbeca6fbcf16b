"""What a hostile submission tries, as code that sets ``_loot`` to what it got ("" for nothing).

Each attack is a piece of Python for a notebook cell (or a probe script), filled in with what a
determined student could know or guess: where the instructor's secret lives, where the other
submissions and the book's solutions are, a port on the grading machine. The same code runs
outside the sandbox in the tests (where it must get its loot: the attack works) and inside it
(where it must get nothing), so a test built on it fails the day the sandbox opens.
"""

from __future__ import annotations

SECRET_NAME = "INSTRUCTOR_SECRET"
FORK_TRIES = 400  # more than grade_job.Limits.processes (256)
CHUNK_GB, CHUNKS = 2, 15  # 30 GB, mapped but never touched: a failed sandbox costs no memory


def read_files(paths: list[str], patterns: list[str]) -> str:
    """Read each path, then whatever the glob patterns find (recursively)."""
    return f"""
import glob as _glob, pathlib as _pathlib
_loot = ""
for _p in {paths!r} + [p for pattern in {patterns!r} for p in _glob.glob(pattern, recursive=True)[:20]]:
    try:
        _loot += _pathlib.Path(_p).read_text()[:2000]
    except (OSError, UnicodeDecodeError):
        pass
"""


def read_environment() -> str:
    """The secret from the environment: its own, and every visible process's (the grader's)."""
    return f"""
import os as _os
_loot = _os.environ.get({SECRET_NAME!r}, "")
for _pid in [p for p in _os.listdir("/proc") if p.isdigit()]:
    try:
        _env = open(f"/proc/{{_pid}}/environ", "rb").read().split(b"\\0")
    except OSError:
        continue
    _loot += "".join(e.decode(errors="replace") for e in _env if e.startswith(b"{SECRET_NAME}="))
"""


def reach_network(port: int, message: str) -> str:
    """Send ``message`` to a listener on the grading machine's loopback; list the network
    interfaces it could use for anything else."""
    return f"""
import socket as _socket
_loot = ""
try:
    with _socket.create_connection(("127.0.0.1", {port}), timeout=3) as _s:
        _s.sendall({message!r}.encode())
        _loot += "reached the grading machine "
except OSError:
    pass
_links = [line.split(":")[0].strip() for line in open("/proc/net/dev").read().splitlines()[2:]]
_loot += " ".join(link for link in _links if link != "lo")
"""


def fork_bomb() -> str:
    """Fork until refused; the children wait on a pipe and leave when it closes."""
    return f"""
import os as _os
_r, _w = _os.pipe()
_children = []
for _ in range({FORK_TRIES}):
    try:
        _pid = _os.fork()
    except OSError:
        break
    if _pid == 0:
        _os.close(_w)
        _os.read(_r, 1)
        _os._exit(0)
    _children.append(_pid)
_os.close(_w)
_os.close(_r)
for _pid in _children:
    _os.waitpid(_pid, 0)
_loot = f"{{len(_children)}} processes" if len(_children) >= {FORK_TRIES} else ""
"""


def allocate() -> str:
    """Map 30 GB in 2 GB pieces, untouched (so that the attack costs nothing where it works)."""
    return f"""
import mmap as _mmap
_maps = []
for _ in range({CHUNKS}):
    try:
        _maps.append(_mmap.mmap(-1, {CHUNK_GB} * 2**30))
    except (OSError, MemoryError, OverflowError):
        break
_got = len(_maps) * {CHUNK_GB}
for _m in _maps:
    _m.close()
del _maps
_loot = f"{{_got}} GB" if _got >= 30 else ""
"""
