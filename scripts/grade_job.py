"""The sandbox one submission is graded in, and the job that runs inside it.

scripts/grade.py starts one job per submission with :func:`sandbox`, which wraps this script in
bubblewrap (``bwrap``, the sandbox Flatpak runs its apps in: a small tool that builds Linux
namespaces from a command line). We use it rather than nsjail because it is packaged by every
major distribution (``apt-get install bubblewrap``, ``dnf install bubblewrap``), needs no
configuration file, and does all we need without cgroups, which an unprivileged grader (or a
container's root) often cannot create: the memory limit over the whole job is kept by
grade.py instead (below). Measured on the machine this was written on (a container's root,
kernel 6.18, bubblewrap 0.8.0): bwrap as root with ``--unshare-user --uid`` keeps the kernel's
uid 0, which still reads root's mode-600 files; bwrap run unprivileged (after ``setpriv``)
cannot open a venv under ``/root`` to bind it. Hence the two modes below.

What a job gets, before any submitted code runs:

- **its own unprivileged uid**: grading as root, bwrap runs privileged (it sets up the mounts
  and reads what it binds) and the job drops, before anything else runs, to uid ``UID_BASE +
  slot`` (one uid per concurrent job, no account, no groups, no capabilities, ``no_new_privs``)
  with util-linux's ``setpriv``. Grading as another user, bwrap runs unprivileged in a new user
  namespace, so the job keeps that user's uid, has no capability outside its namespaces and may
  not make new user namespaces (``--disable-userns``). (As root, a job could still make user
  namespaces of its own; they give it nothing outside its sandbox.)
- **a new root file system that holds only**: ``/usr`` and the system's library folders
  (read-only), the Python installation and the grading environment's venv (read-only, at
  their own paths), the book's package ``circuitbook`` (read-only, ``/job/lib``), the
  converted SmolLM2 weights when this machine's cache holds them (read-only), and, copied in
  from file descriptors that grade.py opened, this script, the submission and the bundle. No
  home folder, no other submission, no other job's scratch, no book source or solution
  notebook, no ``_build``, no secret file. ``/tmp`` and ``/job`` are private tmpfs of a fixed
  size; everything else is read-only.
- **an environment allowlist** (``--clearenv``, then :data:`ENV`: PATH, HOME, the thread counts,
  offline switches for Hugging Face): never the grader's environment, so never
  ``INSTRUCTOR_SECRET``.
- **no network**: a new network namespace with only its own loopback (the kernel and otter talk
  over it); nothing outside the job can be reached.
- **its own PID, IPC, UTS and cgroup namespaces**: it sees and signals only its own processes; they
  all die with the job (``--die-with-parent``, and the namespace's init).
- **limits** (:class:`Limits`), set by this script inside the sandbox before otter starts, on
  every process of the job: at most ``processes`` processes and threads (counted for the job's
  own uid, or in its own user namespace, so a fork bomb stops there and other jobs are not
  counted), at most
  ``address_space`` of virtual memory per process (a 30 GB allocation fails at once), files of
  at most ``file_size``, ``cpu_seconds`` of CPU per process, no core dumps. grade.py adds the
  two limits that span processes: the time limit (wall clock) and ``memory``, the memory of
  all the job's processes together (the sum of their proportional set sizes), sampled every
  :data:`POLL` s (its two tmpfs come on top); past either, the job is killed and the
  submission scores zero with the reason.

What the sandbox does not do: otter runs the submission's notebook and then its tests in the same
Python kernel, so the submission can change its own results (as on Gradescope). The sandbox keeps
it from reading or changing anything else; scripts/grade.py keeps only check messages from its
output, never raw exception text or the log (see ``grade.feedback``).

Inside the sandbox: ``python /job/grade_job.py /job`` runs ``otter run`` on ``/job/submission.ipynb``
with ``/job/autograder.zip`` and prints one JSON line, ``{"results": <otter's results.json or
null>, "failure": <why there are none, in words of this script, or null>}``; otter and the
notebook's kernel write to ``/job/log.txt``, never to that stdout, and the log stays inside.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

INSTALL = ("bubblewrap (bwrap) is needed to sandbox the grading jobs: install it with "
           "`sudo apt-get install -y bubblewrap` (Debian, Ubuntu), `sudo dnf install bubblewrap` "
           "(Fedora) or your distribution's package, then run `make grade` again")
UID_BASE = 62000  # root mode: job slot k runs as uid UID_BASE + k (no account has these uids)
JOB = Path("/job")
LIB = JOB / "lib"  # where the book's package is bound (PYTHONPATH)
POLL = 0.25  # seconds between grade.py's samples of the job's memory
ENV = {  # the whole environment of a job
    "HOME": str(JOB / "home"), "TMPDIR": "/tmp", "USER": "student", "LOGNAME": "student",
    "LANG": "C.UTF-8", "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONPATH": str(LIB), "CIRCUITBOOK_CACHE": str(JOB / "cache"), "CIRCUITBOOK_DEVICE": "cpu",
    # one thread per job: jobs run side by side, one per core
    "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
    "WANDB_MODE": "disabled", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
}
SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache", "/etc/alternatives",
          "/etc/localtime", "/sys/devices/system/cpu")  # read-only; what exists of them
ETC = {"hosts": "127.0.0.1 localhost\n::1 localhost\n", "nsswitch.conf": "hosts: files\n"}
GiB = 2**30
HOST_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}  # bwrap's own: not the grader's
LOG_TAIL = 20_000
FAILURES = ((b"DeadKernelError", "the notebook's kernel died (os._exit, a crash, or out of memory)"),
            (b"Kernel died", "the notebook's kernel died (os._exit, a crash, or out of memory)"),
            (b"MemoryError", "the notebook ran out of memory"))
NO_RESULTS = "otter could not run the notebook to the end"
REASONS = {why for _, why in FAILURES} | {NO_RESULTS}  # all a job may say about a failure


@dataclass(frozen=True)
class Limits:
    """What one job may use. ``memory`` and the time limit are kept by grade.py over all the
    job's processes; the rest are rlimits on each process, set inside the sandbox."""

    memory: int = 6 * GiB  # proportional set sizes, all processes together (a problem-set job: about 2.5 GiB)
    address_space: int = 12 * GiB  # virtual, per process (torch and SmolLM2 map about 4 GiB)
    processes: int = 256  # processes and threads of the job's uid in its user namespace
    file_size: int = 1 * GiB  # largest file written (the converted SmolLM2 is 0.55 GiB)
    cpu_seconds: int = 1800  # per process; the wall-clock limit normally ends a job first
    tmp_size: int = 2 * GiB  # each of /tmp and /job
    open_files: int = 1024


def problem(root: bool | None = None) -> str | None:
    """Why jobs cannot be sandboxed on this machine (None when they can): bwrap missing, root
    without setpriv, or namespaces refused (bwrap's own message, and what to change)."""
    root = os.geteuid() == 0 if root is None else root
    if shutil.which("bwrap") is None:
        return INSTALL
    if root and shutil.which("setpriv") is None:
        return "grading as root needs util-linux's setpriv to drop to an unprivileged uid (apt-get install util-linux)"
    with sandbox({}, slot=0, limits=Limits(), package=None, root=root, python=(),
                 program=["/bin/true"] if Path("/bin/true").exists() else ["/usr/bin/true"]) as (argv, fds):
        done = subprocess.run(argv, capture_output=True, text=True, pass_fds=fds, env=HOST_ENV)
    if done.returncode:
        return ("bubblewrap is installed but cannot make its sandbox here: "
                f"{done.stderr.strip()[-300:]}. "
                + ("As root it needs mount, PID and network namespaces (in a container: run it privileged, or "
                   "with CAP_SYS_ADMIN)." if root else
                   "It needs unprivileged user namespaces (sysctl user.max_user_namespaces > 0; on Ubuntu 24.04 "
                   "also kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for bwrap); or "
                   "grade as root."))
    return None


def _drop(slot: int) -> list[str]:
    uid = str(UID_BASE + slot)
    return [shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


@contextlib.contextmanager
def sandbox(files: dict[str, Path], *, slot: int, limits: Limits, package: Path | None, cache: Path | None = None,
            root: bool | None = None, program: list[str] | None = None, python: tuple[Path, ...] | None = None):
    """``(argv, fds)`` of one job, for ``subprocess.Popen(argv, pass_fds=fds)`` inside this context.

    ``files`` maps a name under /job (``grade_job.py``, ``submission.ipynb``, ``autograder.zip``)
    to a file, copied in from a descriptor opened here, by the caller (the job's uid could not
    open the submissions); ``package`` is the folder of ``circuitbook``; ``cache`` a folder holding
    the converted SmolLM2 (``<cache>/smollm2-135m``) to bind read-only, or None; ``python`` the
    folders of the Python that runs the job (default: this venv and the installation it was made
    from); ``program`` the job's command (default: this script on /job, with the limits).

    As root, bwrap runs privileged (it can read a venv under ``/root``) in new mount, PID,
    network, IPC, UTS and cgroup namespaces, and the job drops to uid ``UID_BASE + slot`` with
    ``setpriv`` before it starts (run as root with ``--uid``, bwrap would keep the kernel's uid 0
    behind a user namespace, which still reads root's mode-600 files). As another user, bwrap
    runs unprivileged in a new user namespace as well, and forbids the job to make more."""
    root = os.geteuid() == 0 if root is None else root
    venv = Path(sys.prefix).resolve()
    python = tuple(dict.fromkeys((Path(sys.base_prefix).resolve(), venv))) if python is None else python
    bwrap = shutil.which("bwrap") or "bwrap"
    with contextlib.ExitStack() as stack:
        fds: list[int] = []

        def fd(path: Path | None = None, text: str = "") -> str:
            if path is None:  # a file of our own, in memory
                opened = os.memfd_create("job-file", os.MFD_CLOEXEC)
                os.write(opened, text.encode())
                os.lseek(opened, 0, os.SEEK_SET)
            else:
                opened = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            stack.callback(os.close, opened)
            fds.append(opened)
            return str(opened)

        if root:
            argv = [bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                    *(a for cap in ("SETUID", "SETGID", "SETPCAP") for a in ("--cap-add", f"CAP_{cap}"))]
        else:
            argv = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns"]
        argv += ["--die-with-parent", "--new-session", "--clearenv"]
        for name, value in ENV.items():
            argv += ["--setenv", name, value]
        argv += ["--setenv", "PATH", f"{venv}/bin:/usr/local/bin:/usr/bin:/bin"]
        made: set[Path] = set()

        def bind(source: Path, dest: Path) -> None:
            # bwrap makes missing parents mode 0700 and root's, which the job's uid could not
            # cross; inside /job they are the job's to write in (its cache)
            for parent in reversed(dest.parents[:-1]):
                if parent not in made and not any(parent.is_relative_to(s) for s in SYSTEM):
                    mode = "1777" if parent.is_relative_to(JOB) else "0755"
                    argv.extend(["--perms", mode, "--dir", str(parent)])
                    made.add(parent)
            argv.extend(["--ro-bind", str(source), str(dest)])

        for folder in ("/etc", "/sys", "/sys/devices", "/sys/devices/system"):
            argv += ["--perms", "0755", "--dir", folder]
        for path in SYSTEM:
            argv += ["--ro-bind-try", path, path]
        for path in python:
            bind(path, path)
        argv += ["--proc", "/proc", "--dev", "/dev",
                 "--perms", "1777", "--size", str(limits.tmp_size), "--tmpfs", "/tmp",
                 "--perms", "1777", "--size", str(limits.tmp_size), "--tmpfs", str(JOB)]
        made.add(JOB)
        if package is not None:
            bind(package, LIB / "circuitbook")
        if cache is not None:
            bind(cache / "smollm2-135m", JOB / "cache" / "smollm2-135m")
        for name, path in files.items():
            argv += ["--perms", "0444", "--file", fd(path), str(JOB / name)]
        for name, text in ETC.items():  # the kernel and otter talk over localhost
            argv += ["--perms", "0444", "--ro-bind-data", fd(text=text), f"/etc/{name}"]
        argv += ["--remount-ro", "/", "--chdir", str(JOB), "--"]
        if root:
            argv += _drop(slot)
        argv += program or [str(venv / "bin" / "python"), str(JOB / "grade_job.py"), str(JOB), *limit_args(limits)]
        yield argv, tuple(fds)


def limit_args(limits: Limits) -> list[str]:
    """The per-process limits as this script's arguments (``--processes=256`` ...)."""
    return [f"--{k.replace('_', '-')}={v}" for k, v in vars(limits).items() if k not in ("memory", "tmp_size")]


def set_limits(argv: list[str]) -> None:
    """Inside the sandbox, the limits given as :func:`limit_args`, for this process and all it
    starts (soft and hard: none of them can raise them again)."""
    args = {a.split("=")[0][2:].replace("-", "_"): int(a.split("=")[1]) for a in argv}
    for name, value in (("NPROC", args["processes"]), ("AS", args["address_space"]), ("FSIZE", args["file_size"]),
                        ("CPU", args["cpu_seconds"]), ("CORE", 0), ("NOFILE", args["open_files"])):
        limit = getattr(resource, f"RLIMIT_{name}")
        resource.setrlimit(limit, (value, value))


def main(argv: list[str]) -> int:
    work = Path(argv[0])
    set_limits(argv[1:])
    for sub in ("home", "out", "cache"):
        (work / sub).mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "otter", "run", "-a", str(work / "autograder.zip"), "-o", str(work / "out"),
           str(work / "submission.ipynb")]
    with open(work / "log.txt", "wb") as log:
        subprocess.run(cmd, cwd=work, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        data = json.loads((work / "out" / "results.json").read_text())
    except (OSError, ValueError):
        data = None
    log = (work / "log.txt").read_bytes()[-LOG_TAIL:]
    # why there are no results, in our words: the log is the submission's own output
    failure = None if data is not None else next(
        (why for pattern, why in FAILURES if pattern in log), NO_RESULTS)
    sys.stdout.write(json.dumps({"results": data, "failure": failure}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
