"""Per-student variants of an assignment: which inputs each student's notebook uses.

A variant is a choice of values for the cell tagged ``parameters`` in a chapter source (the
problem set's problem 1 model ``P1_MODEL`` and problem 3 context length ``P3_CTX``). The values
are inputs the book already ships (a model's dimensions, the scaffold's context length); the
checks take them from the notebook, so every variant's reference solution is the same code and
only the answers (values) differ. What each parameter may take is in ``CHOICES``.

Which variant a student gets: HMAC-SHA256 keyed with the instructor's secret, of
``"<assignment>\\0<student id>"``; its first 8 bytes as an integer, modulo the number of variants,
index the variants in a fixed order (the product of the choices). Without the secret, a student
cannot tell which id gets which variant, nor pick one. The grader recomputes the variant from the
submission's file name (the student id) and the secret, never from the notebook.

The secret: the environment variable ``INSTRUCTOR_SECRET`` if set, else the file named by
``INSTRUCTOR_SECRET_FILE``, else ``~/.config/circuitbook/instructor_secret`` (outside the book and
outside every student folder), created with 32 random bytes (mode 600) the first time it is needed.
Keep it for the whole course: another secret gives every student another variant.

A roster is a CSV file with a header row and a column ``id`` (or ``student_id``); other columns
are ignored. Ids may hold letters, digits and ``. _ @ + -``: each becomes a file name.

On Gradescope (:func:`gradescope`): a bundle built with a roster holds this module, the variants
of the assignment and a table ``{SHA-256("<assignment>\\0<id>"): variant index}`` for the roster's
ids only (``variants.json``, :func:`table`), never the secret. Its ``run_otter.py`` reads the
student's id from ``/autograder/submission_metadata.json`` (:func:`metadata_id`: the user's
``sid`` where Gradescope gives one, else the ``email``), writes that student's variant on the
``_variant`` lines of the hidden tests, then runs otter.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import hmac
import itertools
import json
import os
import pprint
import re
import secrets
import sys
import zipfile
from pathlib import Path

import nbformat

from circuitbook.checks.ps import P1_MODELS, P3_CONTEXTS, P3_CTX


def _book_first(values, book) -> list:
    return [book, *(v for v in values if v != book)]


# assignment -> {parameter: the values it may take}; the first value of each is the book's (the
# source's parameter cell: tests/grading/test_variants.py checks that they agree)
CHOICES = {
    "induction-03_problems": {"P1_MODEL": _book_first(P1_MODELS, "gpt2-small"),
                              "P3_CTX": _book_first(P3_CONTEXTS, P3_CTX)},
}
SECRET_FILE = Path.home() / ".config" / "circuitbook" / "instructor_secret"
ID = re.compile(r"^[A-Za-z0-9._@+-]+$")
TABLE = "variants.json"  # in a bundle built with a roster (bundle.add_variants)
VARIANT_LINE = re.compile(r"^(>>> )?_variant = \{[^}\n]*\}$", re.M)


def secret_path() -> Path:
    return Path(os.environ.get("INSTRUCTOR_SECRET_FILE") or SECRET_FILE).expanduser()


def secret() -> bytes:
    """The instructor's key: INSTRUCTOR_SECRET, or the secret file (created once if absent)."""
    if os.environ.get("INSTRUCTOR_SECRET"):
        return os.environ["INSTRUCTOR_SECRET"].encode()
    path = secret_path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
        print(f"created the instructor secret {path}: keep it (and out of student folders) for the whole "
              "course; another secret gives every student another variant", file=sys.stderr)
    else:
        print(f"instructor secret: {path}", file=sys.stderr)
    return path.read_text().strip().encode()


def all_variants(assignment: str) -> list[dict]:
    """Every variant of ``assignment``, in the fixed order that variant() indexes ([{}] if it has none)."""
    choices = CHOICES.get(assignment, {})
    return [dict(zip(choices, values)) for values in itertools.product(*choices.values())]


def default(assignment: str) -> dict:
    """The book's own values: the notebook that `make assignments` writes without a roster."""
    return {name: values[0] for name, values in CHOICES.get(assignment, {}).items()}


def variant(assignment: str, student: str, key: bytes) -> dict:
    """The parameter values of ``student``'s notebook of ``assignment``."""
    options = all_variants(assignment)
    digest = hmac.new(key, f"{assignment}\0{student}".encode(), hashlib.sha256).digest()
    return options[int.from_bytes(digest[:8], "big") % len(options)]


def read_roster(path: Path) -> list[str]:
    """The student ids of a roster CSV (column ``id`` or ``student_id``), in order, checked."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    column = next((c for c in ("id", "student_id") if rows and c in rows[0]), None)
    if column is None:
        raise ValueError(f"{path}: the roster needs a header row with a column 'id' (or 'student_id')")
    ids = [row[column].strip() for row in rows if row[column] and row[column].strip()]
    bad = [i for i in ids if not ID.match(i)]
    if bad:
        raise ValueError(f"{path}: ids must be letters, digits and . _ @ + - (they name files): {bad[:5]}")
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"{path}: ids listed twice: {dup[:5]}")
    return ids


def parameter_cell(nb):
    """The notebook's code cell tagged ``parameters`` (None if it has none)."""
    return next((c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])), None)


def parameters_of(nb) -> dict | None:
    """The literal values the parameter cell assigns (None without the cell or if it is not literal)."""
    cell = parameter_cell(nb)
    if cell is None:
        return None
    try:
        tree = ast.parse(cell.source)
        return {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name)}
    except (SyntaxError, ValueError):
        return None


def set_parameters(nb, values: dict) -> None:
    """Rewrite the values of the parameter cell in place, keeping its lines and comments."""
    cell = parameter_cell(nb)
    lines = cell.source.splitlines()
    for name, value in values.items():
        pattern = re.compile(rf"^{name} = [^#]*?(\s*#.*)?$")
        hits = [i for i, line in enumerate(lines) if pattern.match(line)]
        if len(hits) != 1:
            raise ValueError(f"the parameter cell assigns {name} {len(hits)} times, not once")
        comment = pattern.match(lines[hits[0]]).group(1) or ""
        lines[hits[0]] = f"{name} = {value!r}{comment}"
    cell.source = "\n".join(lines)


def variant_line(values: dict) -> str:
    """The line of a hidden test that holds the grader's values (assignments.hidden_test writes it;
    otter keeps no comments, so the line is found by its form: ``_variant = {...}``)."""
    return f"_variant = {values!r}"


def flag(path: Path, values: dict) -> str | None:
    """Why the submitted notebook's parameter cell is not its student's ``values`` (None when it is)."""
    try:
        found = parameters_of(nbformat.read(path, as_version=4))
    except Exception:  # noqa: BLE001 - a broken file is graded (and fails) elsewhere
        found = None
    if found == values:
        return None
    return (f"FLAG: the notebook's parameter cell holds {found} instead of this student's {values}: "
            "graded with this student's; was it another student's notebook?")


def id_digest(assignment: str, student: str) -> str:
    """The table's key for ``student``: SHA-256 of ``"<assignment>\\0<id>"`` (no secret, so the
    autograder can compute it; the table then does not list the ids in clear)."""
    return hashlib.sha256(f"{assignment}\0{student}".encode()).hexdigest()


def table(assignment: str, roster: list[str], key: bytes) -> dict:
    """What a Gradescope bundle needs to find each roster student's variant without the key."""
    options = all_variants(assignment)
    return {"assignment": assignment, "variants": options,
            "students": {id_digest(assignment, s): options.index(variant(assignment, s, key)) for s in roster}}


def metadata_id(user: dict) -> str:
    """A Gradescope user's id as the roster must hold it: ``sid`` if given, else ``email``."""
    return str(user.get("sid") or user.get("email") or "").strip()


def gradescope(autograder_dir: str, run) -> None:
    """The bundle's run_otter.py: grade ``<autograder_dir>/submission`` with its student's variant.

    The student (the first user of a group submission whose id is in the table) comes from
    ``submission_metadata.json``; ``run`` is otter's ``run_autograder``. A submission of no roster
    student scores zero with the reason; a parameter cell that is not the student's (see
    :func:`flag`), or a group whose members have different variants, adds a test ``variant``
    (0 of 0 points) saying so, shown to the student once grades are published."""
    root = Path(autograder_dir)
    spec = json.loads((root / "source" / TABLE).read_text())
    meta_path = root / "submission_metadata.json"
    users = json.loads(meta_path.read_text()).get("users", []) if meta_path.exists() else []
    ids = [metadata_id(u) for u in users]
    known = [(i, spec["students"][id_digest(spec["assignment"], i)]) for i in ids
             if id_digest(spec["assignment"], i) in spec["students"]]
    results = root / "results" / "results.json"
    if not known:
        why = (f"not on the roster: no variant for {ids or 'this submission (no users in submission_metadata.json)'}; "
               "the roster's ids must be the students' Gradescope 'sid' (Student ID), or their email where the "
               "course has none")
        problems = sorted(p.stem for p in (root / "source" / "tests").glob("*.py"))
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(json.dumps({"score": 0, "output": why, "tests": [
            {"name": p, "score": 0.0, "max_score": 1.0, "output": why} for p in problems]}, indent=4))
        print(why, file=sys.stderr)
        return
    values = spec["variants"][known[0][1]]
    for path in sorted((root / "source" / "tests").glob("*.py")):
        if "_variant = {" in path.read_text():
            path.write_text(_with_variant(path.read_text(), values))
    run(autograder_dir)
    notes = []
    if len({n for _, n in known}) > 1:
        notes.append(f"FLAG: the group's members have different variants; graded with {known[0][0]}'s {values}")
    notebook = next(iter(sorted((root / "submission").glob("*.ipynb"))), None)
    if notebook is not None and (why := flag(notebook, values)):
        notes.append(why)
    if notes and results.exists():
        out = json.loads(results.read_text())
        out.setdefault("tests", []).append({"name": "variant", "score": 0.0, "max_score": 0.0,
                                            "output": " ".join(notes), "visibility": "after_published"})
        results.write_text(json.dumps(out, indent=4))


def variant_bundle(bundle: Path, values: dict, out: Path) -> Path:
    """A copy of ``bundle`` (an autograder.zip) whose hidden tests use ``values``."""
    with zipfile.ZipFile(bundle) as z:
        entries = [(info, z.read(info.filename)) for info in z.infolist()]
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for info, payload in entries:
            if info.filename.startswith("tests/") and b"_variant = {" in payload:
                payload = _with_variant(payload.decode(), values).encode()
            z.writestr(info, payload)
    return out


def _with_variant(test_file: str, values: dict) -> str:
    """An otter test file (``OK_FORMAT = True`` then ``test = {...}``) whose ``_variant`` lines hold ``values``."""
    scope: dict = {}
    exec(compile(test_file, "<otter test>", "exec"), scope)  # noqa: S102 - our own bundle's test file
    n = 0
    for suite in scope["test"]["suites"]:
        for case in suite["cases"]:
            case["code"], k = VARIANT_LINE.subn(lambda m: (m.group(1) or "") + variant_line(values), case["code"])
            n += k
    if n == 0:
        raise ValueError("no _variant line in the test file")
    return f"OK_FORMAT = {scope['OK_FORMAT']!r}\n\ntest = {pprint.pformat(scope['test'], indent=4, width=120)}\n"
