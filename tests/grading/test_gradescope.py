"""The autograder bundles run the way Gradescope runs them, with nothing but what they declare.

For one chapter assignment and for the induction problem set: unpack ``autograder.zip`` into an
``/autograder``-like folder (``source/``, ``submission/``, ``results/``) in a temporary directory,
create a fresh environment and install into it what the bundle declares (the pip part of
``environment.yml``, then the ``pip install`` lines of ``setup.sh``), then run the bundle's
``run_otter.py``, in two such folders side by side, on the reference solution (full marks) and on
the untouched student notebook (zero). Nothing comes from the project's .venv or checkout: no PYTHONPATH, the working directory
is the temporary one, and the test checks that ``circuitbook`` is imported from the fresh venv.

Substitutions, because this machine reaches neither conda nor PyTorch's index:
  - a venv of this Python 3.11 instead of ``mamba env create`` (the bundle asks for python=3.11);
  - torch==2.13.0+cpu from this machine's local wheel instead of PyTorch's CPU index (the bundle's
    ``--extra-index-url`` line is dropped from a copy of its requirements.txt);
  - the folder is a temporary one, so ``/autograder`` in ``run_otter.py`` and ``setup.sh`` is
    replaced by its path;
  - otter's PDF tooling (apt packages, playwright's Chromium) is not installed: the bundles set
    ``pdf: false``.
With per-student variants (a bundle built with a roster, scripts/bundle.py's add_variants), a
``submission_metadata.json`` names the student, as Gradescope's does, and the problem set's cut
notebooks (problems 1-3) are graded with the variant the bundle's table gives that student.

The wheels those installs need are cached under ``_build/grading-wheels/<hash of what the bundle
declares>`` (downloaded once with the same pip commands); each session still creates the venv
afresh and installs every package into it, with ``--no-index`` so that nothing else can enter.
Bundles that declare the same installs (the same hash) are graded in one such venv.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
import yaml

from submissions import (CH06, PROBLEMS, ROOT, answer_cells, assignments, cut_after_problem_3, reference, solutions,
                         submission, variant_ids, with_answers)

import bundle
import variants
from circuitbook.checks import ps

AG = bundle.AUTOGRADER_DIR
CACHE = ROOT / "_build" / "grading-wheels"
PIP_LINE = re.compile(rf"^mamba run -n otter-env pip install (.*)$", re.M)


def unpack(zip_path: Path, root: Path) -> Path:
    for sub in ("source", "submission", "results"):
        (root / sub).mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(root / "source")
    return root


def declared_installs(root: Path) -> list[list[str]]:
    """The pip commands the bundle's set-up runs, as arguments to ``pip install``, with the
    substitutions of this module's docstring."""
    src = root / "source"
    env = yaml.safe_load((src / "environment.yml").read_text())
    assert f"python={bundle.PYTHON}" in env["dependencies"], env["dependencies"]
    (pip_section,) = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    (root / "local").mkdir()
    env_reqs = root / "local" / "environment-pip.txt"
    env_reqs.write_text("\n".join(pip_section) + "\n")
    setup = (src / "setup.sh").read_text()
    assert f"mamba env create -f {AG}/source/environment.yml" in setup
    commands = [["-r", str(env_reqs)]]
    for line in PIP_LINE.findall(setup):
        args = [a.replace(f"{AG}/", f"{root}/") for a in shlex.split(line)]
        if "-r" in args:
            i = args.index("-r") + 1
            reqs = Path(args[i])
            local = root / "local" / reqs.name
            kept = [ln for ln in reqs.read_text().splitlines()
                    if ln.strip() != f"--extra-index-url {bundle.TORCH_CPU_INDEX}"]
            local.write_text("\n".join(kept) + "\n")
            args[i] = str(local)
        commands.append(args)
    assert len(commands) >= 3, setup  # otter, the requirements, the wheel
    return commands


def clean_env(root: Path, venv: Path | None = None) -> dict[str, str]:
    """No PYTHONPATH, no project paths: PATH, HOME in the temp folder, this machine's pip settings."""
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k in ("LANG", "LC_ALL", "TERM")}
    env["PATH"] = (f"{venv / 'bin'}:" if venv else "") + "/usr/local/bin:/usr/bin:/bin"
    env["HOME"] = str(root / "home")
    (root / "home").mkdir(exist_ok=True)
    return env


def install_key(commands: list[list[str]], root: Path) -> str:
    """What the commands install, as a hash: their arguments less this layout's paths, the
    requirements files less their comments (which name the commit), the wheels' names, and the
    book's wheel's declared dependencies. Two bundles with one key install the same packages."""
    key = hashlib.sha256()
    for args in commands:
        key.update(" ".join(a for a in args if not a.startswith(str(root))).encode())
        for a in args:
            path = Path(a.split("[")[0])
            if path.is_file():
                if path.suffix == ".whl":
                    key.update(path.name.encode())
                else:
                    key.update(b"".join(ln for ln in path.read_bytes().splitlines(True) if not ln.startswith(b"#")))
    with zipfile.ZipFile(next(root.glob("source/circuitbook-*.whl"))) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        key.update(b"".join(ln for ln in z.read(meta).splitlines(True) if ln.startswith(b"Requires-Dist")))
    return key.hexdigest()[:16]


def wheel_cache(commands: list[list[str]], root: Path) -> Path:
    """The wheels the commands need, downloaded (or built, for an sdist) once per distinct set of requirements."""
    folder = CACHE / install_key(commands, root)
    if not (folder / ".complete").exists():
        folder.mkdir(parents=True, exist_ok=True)
        for args in commands:
            # the book's wheel is in the bundle; its dependencies must come from the pinned
            # requirements installed before it (the --no-index install below fails otherwise)
            wheel = any(".whl" in a for a in args)
            subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(folder),
                            *(["--no-deps"] if wheel else []), *args],
                           check=True, cwd=root, env=clean_env(root), timeout=1200)
        (folder / ".complete").touch()
    return folder


def fresh_venv(commands: list[list[str]], root: Path, venv: Path) -> Path:
    """A new venv at ``venv`` with exactly what ``commands`` install, from the wheel cache only."""
    cache = wheel_cache(commands, root)
    base = Path(sys.base_prefix) / "bin" / f"python{bundle.PYTHON}"
    subprocess.run([str(base), "-m", "venv", str(venv)], check=True, cwd=root, env=clean_env(root))
    for args in commands:
        done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index",
                               "--find-links", str(cache), *args], cwd=root, env=clean_env(root, venv),
                              capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, f"pip install {' '.join(args)}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    return venv


@pytest.fixture(scope="module")
def venvs(tmp_path_factory):
    """``venvs(root)``: a fresh venv with what the bundle unpacked at ``root`` declares, one per
    distinct set of declared installs (:func:`install_key`). A second bundle that declares the
    same installs is graded in the venv the first one's declarations built: building it again
    (about five minutes) would install the same packages from the same wheels."""
    made: dict[str, Path] = {}

    def get(root: Path) -> Path:
        commands = declared_installs(root)
        key = install_key(commands, root)
        if key not in made:
            made[key] = fresh_venv(commands, root, tmp_path_factory.mktemp(f"venv-{key}") / "venv")
        return made[key]

    yield get
    for venv in made.values():  # 2 GB each: not kept in pytest's temporary folders
        shutil.rmtree(venv, ignore_errors=True)


def run_otter(root: Path, venv: Path, notebook: nbformat.NotebookNode) -> subprocess.Popen:
    """Start grading ``notebook`` as Gradescope would: run_autograder's python on source/run_otter.py."""
    nbformat.write(notebook, root / "submission" / "submission.ipynb")
    runner = (root / "source" / "run_autograder").read_text()
    assert f"python {AG}/source/run_otter.py" in runner, runner
    script = root / "source" / "run_otter.py"
    script.write_text(script.read_text().replace(f'"{AG}"', f'"{root}"'))
    return subprocess.Popen([str(venv / "bin" / "python"), str(script)], cwd=root, env=clean_env(root, venv),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def results_of(root: Path, run: subprocess.Popen) -> dict:
    output, _ = run.communicate(timeout=1200)
    results = root / "results" / "results.json"
    assert results.exists(), output[-3000:]
    return json.loads(results.read_text())


def scores(results: dict) -> dict[str, tuple[float, float]]:
    return {t["name"]: (float(t.get("score") or 0), float(t["max_score"])) for t in results["tests"]
            if "max_score" in t}


@pytest.fixture(scope="module")
def problem_set_venv(built, venvs, tmp_path_factory):
    """The fresh venv of what the problem set's bundle declares."""
    return venvs(unpack(built[PROBLEMS] / "autograder" / "autograder.zip", tmp_path_factory.mktemp("ps-venv") / "layout"))


@pytest.mark.parametrize("src", [CH06, PROBLEMS], ids=["chapter-06", "problem-set"])
def test_bundle_grades_in_a_fresh_gradescope_layout(built, src, venvs, tmp_path):
    folder = built[src]
    bundle_zip = folder / "autograder" / "autograder.zip"
    # two /autograder layouts, graded side by side from one fresh venv: the reference and the template
    root, other = unpack(bundle_zip, tmp_path / "reference"), unpack(bundle_zip, tmp_path / "template")
    check_bundle(src, folder, root, other, venvs(root))


def check_bundle(src: Path, folder: Path, root: Path, other: Path, venv: Path) -> None:
    probe = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import circuitbook, torch, otter; print(circuitbook.__file__); print(torch.__version__)"],
                           cwd=root, env=clean_env(root, venv), capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr
    where, torch_version = probe.stdout.split()
    assert Path(where).is_relative_to(venv), where  # the bundle's wheel, not the checkout
    assert torch_version.endswith("+cpu"), torch_version
    with zipfile.ZipFile(folder / "autograder" / "autograder.zip") as z:
        questions = {Path(n).stem for n in z.namelist() if n.startswith("tests/") and n.endswith(".py")}
    assert questions

    # the template, and for the chapter one answer with a named mistake (its test must say which)
    template = submission(folder, assignments.assignment_name(src))
    named = NAMED_MISTAKE.get(src)
    if named is not None:
        question = answer_cells(template)[0].metadata["otter"]["tests"][0]
        edit, mistake, hidden = named
        wrong = edit(solutions(src)[0])
        assert wrong != solutions(src)[0]
        with_answers(template, {question: wrong})
    runs = [run_otter(root, venv, reference(src, folder)), run_otter(other, venv, template)]
    failed = results_of(other, runs[1])
    full, empty = scores(results_of(root, runs[0])), scores(failed)
    assert set(full) == questions, full
    assert all(score == top > 0 for score, top in full.values()), full
    assert set(empty) == questions, empty
    assert all(score == 0 for score, _ in empty.values()), empty
    # each failing test's result in results.json names its own check's category on a [CHECK] line
    outputs = {t["name"]: t.get("output", "") for t in failed["tests"] if t["name"] in questions}
    lines = {q: re.findall(r"^\s*\[CHECK\] (\S+): (.*)$", out, re.M) for q, out in outputs.items()}
    assert all(ex == q for q, found in lines.items() for ex, _ in found), lines
    untouched = [q for q in questions if (named is None or q != question) and lines[q]]
    assert untouched and all({c for _, c in lines[q]} == {"not attempted"} for q in untouched), lines
    if named is not None:
        assert {c for _, c in lines[question]} == {mistake}, (question, outputs[question])
        assert hidden not in outputs[question]  # the category names the mistake, never the solution


# A chapter answer with a named mistake: (how the reference solution is edited into it, the
# mistake's name in the check, the solution's text its test's result must not show)
NAMED_MISTAKE = {CH06: (lambda code: code.replace(" / q.shape[-1] ** 0.5", ""), "pattern sharper than the paper's",
                        "q.shape[-1] ** 0.5")}

KEY = b"a test secret, not an instructor's"
VALUE_PROBLEMS = ("ps_p1a", "ps_p3b")
GRADED = ("ps_p1a", "ps_p1b", "ps_p2", "ps_p3", "ps_p3b")  # problems 1-3: what the cut notebooks reach


def test_a_roster_bundle_grades_each_gradescope_student_with_their_variant(built, problem_set_venv, tmp_path):
    folder, name = built[PROBLEMS], assignments.assignment_name(PROBLEMS)
    ada, ben = variant_ids(2, KEY)
    roster_zip = tmp_path / "autograder.zip"
    shutil.copy(folder / "autograder" / "autograder.zip", roster_zip)
    bundle.add_variants(roster_zip, variants.table(name, [ada, ben], KEY))
    with zipfile.ZipFile(roster_zip) as z:
        shipped = z.read("variants.py").decode() + z.read(variants.TABLE).decode()
    assert KEY.decode() not in shipped and ada not in shipped and ben not in shipped
    notebooks = assignments.student_notebooks(folder, [ada, ben], KEY, out=tmp_path / "students")
    right = dict(zip([c.metadata["otter"]["tests"][0] for c in answer_cells(
        nbformat.read(notebooks / f"{ada}.ipynb", as_version=4))], solutions(PROBLEMS)))
    vb = variants.variant(name, ben, KEY)
    ben_values = {"ps_p1a": f"p1_answers = {ps.p1_reference(vb['P1_MODEL'])!r}",
                  "ps_p3b": f"broken_score = {ps.p3b_reference(vb['P3_CTX'])!r}"}

    def ada_notebook(answers):
        nb = with_answers(nbformat.read(notebooks / f"{ada}.ipynb", as_version=4), answers)
        cut_after_problem_3(nb)
        return nb

    def layout(case, user):
        root = unpack(roster_zip, tmp_path / case)
        (root / "submission_metadata.json").write_text(json.dumps(
            {"id": 1, "assignment": {"title": name}, "users": [{"id": 7, "name": "A Student", **user}]}))
        return root

    own = layout("own", {"sid": ada, "email": "ada@example.edu"})
    copied = layout("copied", {"email": ada})  # no sid: the email is the id
    stranger = layout("stranger", {"sid": "not-enrolled", "email": "zed@example.edu"})
    runs = [run_otter(own, problem_set_venv, ada_notebook(right)),
            run_otter(copied, problem_set_venv, ada_notebook({**right, **ben_values})),
            run_otter(stranger, problem_set_venv, ada_notebook(right))]
    mine, pasted, unknown = (results_of(r, run) for r, run in zip((own, copied, stranger), runs))
    print({k: scores(v) for k, v in (("own", mine), ("copied", pasted))})
    # ada's reference solution with her variant: full marks on every problem it reaches, no flag
    assert all(scores(mine)[p] == (1.0, 1.0) for p in GRADED), mine
    assert "variant" not in scores(mine)
    # ben's values pasted into ada's notebook: the value problems fail, the functions pass
    assert all(scores(pasted)[p][0] == 0.0 for p in VALUE_PROBLEMS), pasted
    assert all(scores(pasted)[p][0] == 1.0 for p in set(GRADED) - set(VALUE_PROBLEMS)), pasted
    # not on the roster: zero on every problem, with the reason
    assert unknown["score"] == 0 and "not on the roster" in unknown["output"]
    assert set(scores(unknown)) == set(scores(mine)) - {"variant"} and not any(s for s, _ in scores(unknown).values())
