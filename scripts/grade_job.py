"""Grade one submission with ``otter run``, sealed off from every other submission: scripts/grade.py
starts one of these per submission.

Usage: python scripts/grade_job.py INPUT_DIR [--sandbox]

INPUT_DIR holds ``submission.ipynb`` and ``autograder.zip``. The job prints one JSON line to its
stdout, ``{"results": <otter's results.json or null>, "log": <the end of otter's output>}``; otter
and the notebook's kernel write to a log file, never to that stdout.

With ``--sandbox`` (scripts/grade.py passes it when it runs as root and ``unshare`` and ``setpriv``
exist; it starts this script in new mount and PID namespaces), before any submitted code runs:
  - a fresh tmpfs is mounted on /tmp: the job's files are copied into it, and the other jobs'
    scratch folders (all under the host's /tmp) are out of sight;
    the book and its environment, when they live under /tmp themselves, are bound back in;
  - every other file system is remounted read-only, so a submission can delete or rewrite nothing
    outside its own /tmp (not the grades, not the autograders, not the book);
  - otter runs with every capability dropped (``setpriv``), so the submission cannot undo the
    mounts, and in the job's own PID namespace, so it sees and signals no other process, and every
    process it starts dies with the job.
Without ``--sandbox``, the job still has its own process group, scratch folder and time limit, but
a hostile submission can touch the same files as the user who grades.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the book
INPUTS = ("submission.ipynb", "autograder.zip")
LOG_TAIL = 4000
KEEP_WRITABLE = ("/proc", "/sys", "/dev/pts")  # virtual: not files a submission could damage
DROP_CAPS = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--"]


def seal(inputs: Path) -> Path:
    """Inside fresh namespaces: private /tmp holding the inputs, everything else read-only."""
    folder = os.open(inputs, os.O_RDONLY | os.O_DIRECTORY)  # still readable once /tmp is covered
    # The book and its Python environment may themselves live under /tmp (a CI clone does): the
    # tmpfs would hide them, so they are bound back at the same paths (read-only, like the rest).
    keep = [p for p in dict.fromkeys((ROOT, Path(sys.prefix).resolve())) if p.is_relative_to("/tmp")]
    keep = [p for p in keep if not any(p != q and p.is_relative_to(q) for q in keep)]
    held = [os.open(p, os.O_RDONLY | os.O_DIRECTORY) for p in keep]
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4g,mode=1777", "tmpfs", "/tmp"], check=True)
    for path, fd in zip(keep, held):
        path.mkdir(parents=True)
        # --no-canonicalize: mount(8) would otherwise resolve the fd back to the covered path
        subprocess.run(["mount", "--no-canonicalize", "--bind", f"/proc/self/fd/{fd}", str(path)], check=True,
                       pass_fds=(fd,))
        os.close(fd)
    work = Path("/tmp/job")
    work.mkdir()
    for name in INPUTS:
        with open(os.open(name, os.O_RDONLY, dir_fd=folder), "rb") as src, open(work / name, "wb") as dst:
            shutil.copyfileobj(src, dst)
    os.close(folder)
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for point in dict.fromkeys(mounts):
        if point == "/tmp" or point.startswith(KEEP_WRITABLE):
            continue
        done = subprocess.run(["mount", "-o", "remount,bind,ro", point], capture_output=True, text=True)
        if done.returncode and point == "/":
            raise RuntimeError(f"could not make / read-only: {done.stderr}")
    return work


def main(argv: list[str]) -> int:
    inputs, sandbox = Path(argv[0]), "--sandbox" in argv[1:]
    work = seal(inputs) if sandbox else inputs
    for sub in ("home", "tmp", "out"):
        (work / sub).mkdir(exist_ok=True)
    env = dict(os.environ, HOME=str(work / "home"), TMPDIR=str(work / "tmp"), MPLBACKEND="Agg",
               # one thread per job: jobs run side by side, one per core
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    otter = Path(sys.executable).parent / "otter"
    cmd = [str(otter), "run", "-a", str(work / "autograder.zip"), "-o", str(work / "out"),
           str(work / "submission.ipynb")]
    with open(work / "log.txt", "wb") as log:
        subprocess.run((DROP_CAPS if sandbox else []) + cmd, cwd=work, env=env, stdin=subprocess.DEVNULL,
                       stdout=log, stderr=subprocess.STDOUT)
    results = work / "out" / "results.json"
    try:
        data = json.loads(results.read_text())
    except (OSError, ValueError):
        data = None
    tail = (work / "log.txt").read_bytes()[-LOG_TAIL:].decode(errors="replace")
    sys.stdout.write(json.dumps({"results": data, "log": tail}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
