"""The grading sandbox (scripts/grade_job.py) holds: every attack of tests/grading/attacks.py
gets its loot when run on this machine as the grader runs (the control: the attack works) and
nothing when run in a job's sandbox. Then the same attacks, planted in submissions whose answers
are otherwise right, are graded by scripts/grade.py: each earns what its honest answers earn,
and the secret appears in no output.

The probes take about a second each. The graded class (six submissions of a tiny assignment of
two problem-set checks, built here) took 130-200 s, two at a time, on a loaded 2-core machine.
"""

from __future__ import annotations

import csv
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import nbformat
import pytest

import attacks
from submissions import ROOT, assignments

import grade
import grade_job

PROBLEM = grade_job.problem()
pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=f"the grading sandbox cannot run here: {PROBLEM}")
SECRET = f"course-secret-{secrets.token_hex(12)}"
CANARY = f"canary-{secrets.token_hex(8)}"
PROBE = """
import json, sys
if sys.argv[1:]:  # in the sandbox: the job's own limits, set as grade_job.py sets them
    sys.path.insert(0, "/job")
    import grade_job
    grade_job.set_limits(sys.argv[1:])
{attack}
print(json.dumps({{"loot": _loot}}))
"""


class Listener:
    """A TCP server on this machine's loopback that records what reaches it."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.received: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                self.received.append(conn.recv(4096))


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    """An instructor's machine: the secret in a mode-600 file in the home folder and in the
    environment, a classmate's submission, another job's scratch folder, a listener."""
    home = tmp_path_factory.mktemp("instructor")
    secret_file = home / ".config" / "circuitbook" / "instructor_secret"
    secret_file.parent.mkdir(parents=True)
    secret_file.write_text(SECRET + "\n")
    secret_file.chmod(0o600)
    classmates = tmp_path_factory.mktemp("submissions")
    (classmates / "ada.ipynb").write_text(f"ada's answers {CANARY}")
    scratch = Path(f"/tmp/grade-{secrets.token_hex(4)}")
    scratch.mkdir()
    (scratch / "submission.ipynb").write_text(f"another job's submission {CANARY}")
    canary = tmp_path_factory.mktemp("canary")
    listener = Listener()
    os.environ["INSTRUCTOR_SECRET"] = SECRET  # the grader's own environment holds it
    yield {"home": home, "secret_file": secret_file, "classmates": classmates, "scratch": scratch,
           "canary": canary, "listener": listener}
    os.environ.pop("INSTRUCTOR_SECRET", None)
    listener.server.close()
    for p in scratch.iterdir():
        p.unlink()
    scratch.rmdir()


def attack_code(scene) -> dict[str, str]:
    return {
        "the secret file": attacks.read_files([str(scene["secret_file"]), "/root/.config/circuitbook/instructor_secret"],
                                              ["/home/*/.config/circuitbook/instructor_secret"]),
        "the secret in the environment": attacks.read_environment(),
        "a classmate's submission": attacks.read_files([str(scene["classmates"] / "ada.ipynb")],
                                                       ["/tmp/grade-*/**/*.ipynb"]),
        "the solutions": attacks.read_files([str(ROOT / "book" / "induction" / "03_problems.py")],
                                            [str(ROOT / "book" / "**" / "*.py"), str(ROOT / "_build" / "**" / "*.ipynb")]),
        "the network": attacks.reach_network(scene["listener"].port, CANARY),
        "a fork bomb": attacks.fork_bomb(),
        "30 GB of memory": attacks.allocate(),
        "writing outside": f"""
_loot = ""
for _p in [{str(scene['canary'] / 'planted')!r}]:
    try:
        open(_p, "w").write("planted")
        _loot += _p
    except OSError:
        pass
""",
        "root or a capability": """
import os as _os
_status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
_loot = "uid 0" if _os.getuid() == 0 else ""
_loot += " ".join(f"{k} {v.strip()}" for k, v in _status.items() if k.startswith("Cap") and int(v, 16))
""",
        "the grader's processes": f"""
import os as _os
try:
    _os.kill({os.getpid()}, 0)
    _loot = "could signal the grader"
except OSError:
    _loot = ""
""",
    }


def probe(tmp_path: Path, code: str, sandboxed: bool) -> str:
    script = tmp_path / "probe.py"
    script.write_text(PROBE.format(attack=code))
    if not sandboxed:  # the control: as the grader itself runs
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    else:
        limits = grade_job.Limits()
        program = [str(Path(sys.prefix).resolve() / "bin" / "python"), "/job/probe.py", *grade_job.limit_args(limits)]
        with grade_job.sandbox({"probe.py": script, "grade_job.py": grade.JOB}, slot=7, limits=limits,
                               package=grade.package_dir(), program=program) as (argv, fds):
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120, pass_fds=fds,
                                  env=grade_job.HOST_ENV)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])["loot"]


ATTACKS = ["the secret file", "the secret in the environment", "a classmate's submission", "the solutions",
           "the network", "a fork bomb", "30 GB of memory", "writing outside", "root or a capability",
           "the grader's processes"]


@pytest.mark.parametrize("attack", ATTACKS)
def test_each_attack_works_on_the_grading_machine_and_fails_in_the_sandbox(scene, tmp_path, attack):
    code = attack_code(scene)[attack]
    assert probe(tmp_path, code, sandboxed=False), f"the control: {attack} should succeed outside the sandbox"
    scene["listener"].received.clear()
    (scene["canary"] / "planted").unlink(missing_ok=True)
    loot = probe(tmp_path, code, sandboxed=True)
    assert loot == "", f"{attack} got through the sandbox: {loot[:300]}"
    assert not scene["listener"].received and not (scene["canary"] / "planted").exists()


def test_the_job_environment_is_the_allowlist(tmp_path):
    env = json.loads(probe(tmp_path, "import os, json\n_loot = json.dumps(dict(os.environ))", sandboxed=True))
    # bwrap's --chdir sets PWD; nothing else is added to the allowlist
    assert env == {**grade_job.ENV, "PATH": env["PATH"], "PWD": "/job"}, env
    assert not any("SECRET" in k for k in env)


def test_a_job_past_its_memory_or_time_is_stopped():
    hog = ("import time\nchunks = []\nfor _ in range(40):\n    chunks.append(bytearray(50 * 2**20))\n"
           "    time.sleep(0.05)\ntime.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, "-c", hog], start_new_session=True)
    try:
        why = grade._watch(proc, timeout=60, memory=400 * 2**20)
    finally:
        grade._kill_group(proc)
    assert why and "memory" in why, why
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        why = grade._watch(proc, timeout=1, memory=2**40)
    finally:
        grade._kill_group(proc)
    assert why and "stopped after 1 s" in why, why
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    assert grade._watch(proc, timeout=60, memory=2**40) is None
    grade._kill_group(proc)
    # 20 forks of a process that holds 200 MiB share its pages: 200 MiB in all, not 4 GiB
    forks = ("import os, time\nheld = bytearray(200 * 2**20)\nkids = []\nfor _ in range(20):\n"
             "    pid = os.fork()\n    if pid == 0:\n        time.sleep(3)\n        os._exit(0)\n"
             "    kids.append(pid)\nfor pid in kids:\n    os.waitpid(pid, 0)\n")
    proc = subprocess.Popen([sys.executable, "-c", forks], start_new_session=True)
    try:
        assert grade._watch(proc, timeout=60, memory=2**30) is None
    finally:
        grade._kill_group(proc)


def test_feedback_keeps_only_the_checks_own_line():
    check = "[NOT YET] ps_p2: this looks like: forgot the direct path. The path through no head counts too."
    output = f"""ps_p2 results:
    ps_p2 - 1 result:
        Trying:
            print("[NOT YET] ps_p2: {CANARY}")
        Expecting nothing
        Got:
            [NOT YET] ps_p2: {CANARY}
        Exception raised:
            Traceback (most recent call last):
            AssertionError: {check}
              Hint: Count all the paths first.
"""
    kept = grade.feedback(output, False, "ps_p2")
    assert kept == f"{check} Hint: Count all the paths first.", kept
    raised = f"Exception raised:\n    Traceback (most recent call last):\n    ValueError: {CANARY}\n"
    kept = grade.feedback(raised, False, "ps_p2")
    assert CANARY not in kept and kept.startswith("ValueError:"), kept
    custom = f"Exception raised:\n    {CANARY.replace('-', '_')}Error: boo\n"
    assert CANARY.replace("-", "_") not in grade.feedback(custom, False, "ps_p2")
    assert grade.feedback("whatever", True, "ps_p2") == "passed"
    # another problem's line is not this problem's feedback
    assert "ps_p2" not in grade.feedback(f"AssertionError: {check}", False, "ps_p1b")


def test_make_grade_says_how_to_install_bubblewrap_where_it_is_missing(tmp_path):
    (tmp_path / "x.ipynb").write_text("{}")
    env = {**os.environ, "PATH": str(tmp_path)}  # no bwrap on this PATH
    done = subprocess.run([sys.executable, str(grade.__file__), str(tmp_path), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "apt-get install -y bubblewrap" in done.stderr and "nothing was graded" in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


# --- a class of hostile submissions, graded -----------------------------------------------------

# Two checks of the problem set that need no model: the hostile cells answer both correctly
# unless they got their loot, in which case they spend problem 1b to carry it out in its feedback.
TINY = "tiny-hostile"
P2 = ("def path_counts(n_layers, n_heads):\n    total = (1 + n_heads) ** n_layers\n"
      "    return {'direct': 1, 'single': n_layers * n_heads, 'virtual': total - 1 - n_layers * n_heads, "
      "'total': total}\n")
P1B = ("import torch\n\ndef reparametrize(W_Q, W_K, G):\n    if _loot:\n        raise ValueError(_loot)\n"
       "    return W_Q @ G, W_K @ torch.linalg.inv(G).T\n")


def tiny_bundle(folder: Path) -> Path:
    """An otter autograder.zip with the hidden tests assignments.py writes for ps_p2 and ps_p1b."""
    bundle = folder / TINY / "autograder" / "autograder.zip"
    bundle.parent.mkdir(parents=True)
    with zipfile.ZipFile(bundle, "w") as z:
        z.writestr("otter_config.json", "{}")
        for ex_id, answer in (("ps_p2", "path_counts"), ("ps_p1b", "reparametrize")):
            lines = assignments.hidden_test(ex_id, answer, {}, {}).splitlines()
            code = "".join(("... " if line[:1].isspace() else ">>> ") + line + "\n" for line in lines)
            cases = [{"code": code, "hidden": True, "locked": False}]
            test = {"name": ex_id, "points": 1, "suites": [{"cases": cases, "scored": True, "setup": "",
                                                            "teardown": "", "type": "doctest"}]}
            z.writestr(f"tests/{ex_id}.py", f"OK_FORMAT = True\n\ntest = {test!r}\n")
    return bundle


def notebook(attack: str, p1b: str = P1B):
    cells = ["from circuitbook import checks", attack or "_loot = ''", P2, p1b]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                   "circuitbook": {"assignment": TINY}}
    return nb


@pytest.fixture(scope="module")
def hostile_class(scene, tmp_path_factory):
    code = attack_code(scene)
    built = tmp_path_factory.mktemp("assignments")
    tiny_bundle(built)
    subs = scene["classmates"]
    thief = "\n".join(code[a].replace("_loot", "_part") + "\n_all += _part"
                      for a in ("the secret file", "the secret in the environment", "a classmate's submission",
                                "the solutions", "the network", "writing outside", "the grader's processes"))
    planted = {
        "bea_honest": "",
        "cal_thief": "_all = ''\n" + thief + "\n_loot = _all\nprint(_loot)",
        "dov_fork_bomb": code["a fork bomb"],
        "eli_allocates": code["30 GB of memory"],
    }
    for student, attack in planted.items():
        nbformat.write(notebook(attack), subs / f"{student}.ipynb")
    # the feedback channel itself: an exception's message and printed lines stay out of the feedback
    leak = f"_loot = {CANARY!r}\nprint('[NOT YET] ps_p1b: ' + _loot)"
    nbformat.write(notebook(leak), subs / "fay_leaks_by_feedback.ipynb")
    (subs / "ada.ipynb").unlink()  # the classmate file above is not a notebook: graded, it is "unknown"
    nbformat.write(notebook(""), subs / "ada.ipynb")
    out = tmp_path_factory.mktemp("grades")
    env = {**os.environ, "HOME": str(scene["home"]), "INSTRUCTOR_SECRET": SECRET}
    start = time.monotonic()
    done = subprocess.run([sys.executable, str(grade.__file__), str(subs), "--out", str(out), "--jobs", "2",
                           "--timeout", "300", "--assignments", str(built)],
                          capture_output=True, text=True, env=env, timeout=1800)
    print(f"graded {len(planted) + 2} hostile-class submissions in {time.monotonic() - start:.0f} s")
    assert done.returncode == 0, done.stdout + done.stderr
    with open(out / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    scores = {(r["student"], r["problem"]): (float(r["score"]), r["feedback"]) for r in rows}
    texts = [done.stdout, done.stderr] + [p.read_text() for p in out.rglob("*") if p.is_file()]
    return scores, texts


@pytest.mark.parametrize("student", ["ada", "bea_honest", "cal_thief", "dov_fork_bomb", "eli_allocates"])
def test_a_hostile_submission_earns_what_its_honest_answers_earn(hostile_class, student):
    scores, _ = hostile_class
    # full marks here means the attack got nothing: with loot, problem 1b would have raised it
    assert scores[student, "ps_p2"] == (1.0, "passed"), scores
    assert scores[student, "ps_p1b"] == (1.0, "passed"), scores


def test_no_output_of_the_grading_holds_the_secret_or_what_a_submission_tried_to_leak(hostile_class, scene):
    scores, texts = hostile_class
    assert scores["fay_leaks_by_feedback", "ps_p1b"][0] == 0.0
    assert scores["fay_leaks_by_feedback", "ps_p1b"][1].startswith("[NOT YET] ps_p1b: your function raised")
    for text in texts:
        assert SECRET not in text and CANARY not in text
    assert not scene["listener"].received and not (scene["canary"] / "planted").exists()
