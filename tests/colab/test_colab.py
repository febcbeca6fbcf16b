"""The chapters in a simulated Colab runtime.

What is simulated, and how (see ``colab_env.py`` and ``colab_stub/``):

- Colab's preinstalls: a venv with ``colab-preinstalls.txt`` (torch 2.13, numpy 2.0,
  ipywidgets 7.7.1, ...), built once and cached; each notebook gets a fresh hard-linked copy
  of it, as each Colab notebook gets a fresh runtime.
- Colab's kernel: ``colab_kernel_launcher`` imports the stand-in ``google.colab`` (with
  ``google.colab.output._widgets``, what anywidget probes) and then starts ipykernel, so
  ``google.colab`` is imported before the first cell, as on Colab.
- A reader opening the notebook from GitHub: the notebook alone in an empty folder; its
  set-up cell installs circuitbook from a ``git clone`` of this repository at the pinned
  commit, through the one override ``CIRCUITBOOK_REPO``; other packages come from PyPI.

Each notebook must run without an error, its set-up cell must print its one line, it must
change none of the preinstalled packages Colab users depend on, and the kernel must never
open a file of this repository or of the clone (circuitbook comes from site-packages).

Run: ``.venv/bin/python -m pytest tests/colab -m colab`` (first run builds the venv).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
import colab_env  # noqa: E402

ROOT = colab_env.ROOT
sys.path.insert(0, str(ROOT / "scripts"))
import notebooks  # noqa: E402

pytestmark = pytest.mark.colab

# One notebook for each distinct set of extras and data packages a set-up cell can install
# (``notebooks.needs``): what differs between Colab runs is that install, so a second notebook
# with the same needs would test the same path again. ``test_every_install_is_simulated``
# keeps this list complete as chapters change their imports. The problem set is the notebook
# students run on Colab most, so it stands for its set.
NOTEBOOKS = [
    "book/induction/02_lab.ipynb",            # no extras (the live induction lab widget)
    "book/15_one_layer.ipynb",                # the corpus
    "book/induction/02_explainers.ipynb",     # SmolLM2 (its stepper)
    "book/induction/03_problems.ipynb",       # the corpus and SmolLM2
]
CELL_TIMEOUT = 600  # seconds for any one cell (the set-up cell installs from PyPI)
NOTEBOOK_LIMIT = 900  # seconds for a whole notebook, set-up included
ALWAYS_HELD = ("torch", "numpy", "ipywidgets")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
IPYWIDGETS_8 = "8.1.5"

# Run in the runtime's Python: {name: [version, has compiled code]} of every distribution.
SNAPSHOT = """
import importlib.metadata as md, json
out = {}
for d in md.distributions():
    name = (d.metadata["Name"] or "").lower()
    out.setdefault(name, [d.version, any(str(f).endswith((".so", ".pyd")) for f in d.files or ())])
print(json.dumps(out))
"""

# Appended to the notebook (in memory only), run in the same kernel after the chapter.
PROBE = """
import importlib.metadata, json, sys
import circuitbook, colab_sim_watch
from google.colab.output import _widgets
dist = importlib.metadata.distribution("circuitbook")
print("COLAB-SIM-PROBE " + json.dumps({
    "circuitbook": circuitbook.__file__,
    "direct_url": json.loads(dist.read_text("direct_url.json") or "null"),
    "modules": sorted({m.__file__ for m in list(sys.modules.values()) if getattr(m, "__file__", None)}),
    "opened": colab_sim_watch.opened,
    "manager_enabled": _widgets._installed_url is not None,
    "anywidget_loaded": "anywidget" in sys.modules,
}))
"""


def _snapshot(venv: Path) -> dict[str, list]:
    out = subprocess.run([str(venv / "bin" / "python"), "-c", SNAPSHOT], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


@pytest.fixture(scope="session")
def base_venv():
    return colab_env.base_venv()


@pytest.fixture(scope="session")
def clone(tmp_path_factory):
    """A git clone of the repository this test runs in: the pinned commit exists there."""
    dest = tmp_path_factory.mktemp("clone") / "annotated-transformer-circuits"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(dest)], check=True)
    return dest


@pytest.fixture
def new_runtime():
    """new_runtime(base) -> a fresh runtime copied from the cached venv ``base``, removed afterwards."""
    made = []

    def make(base: Path) -> Path:
        where = base.parent / "runtimes"
        where.mkdir(exist_ok=True)
        made.append(colab_env.runtime(base, where / f"rt-{time.time_ns()}"))
        return made[-1]

    yield make
    # Deleting a runtime (100k hard links) takes up to a minute on a busy disk: leave it to a
    # background rm, which nothing waits for, rather than to the next notebook's time.
    for dest in made:
        subprocess.Popen(["rm", "-rf", str(dest)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)


def _kernel_manager(venv: Path, spec_dir: Path) -> KernelManager:
    """A kernel named python3 (the notebooks' kernelspec) that is Colab's launcher in ``venv``."""
    (spec_dir / "python3").mkdir(parents=True)
    argv = [str(venv / "bin" / "python"), "-m", "colab_kernel_launcher", "-f", "{connection_file}"]
    (spec_dir / "python3" / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "Python 3 (simulated Colab)", "language": "python"}))
    return KernelManager(kernel_name="python3", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec_dir)]))


def _cell_seconds(cell) -> float:
    """How long a cell ran, from the timestamps nbclient records in its metadata."""
    from datetime import datetime

    times = cell.metadata.get("execution", {})
    start, end = (datetime.fromisoformat(times[k].replace("Z", "+00:00"))
                  for k in ("iopub.execute_input", "shell.execute_reply"))
    return (end - start).total_seconds()


def _stream_text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")


def run_on_colab(notebook: str, runtime: Path, clone: Path, tmp_path: Path, after: str = ""):
    """Execute ``notebook`` alone in ``runtime``; check everything that holds on any Colab.
    ``after``: a cell run in the same kernel once the chapter has run (before the probe).
    Returns the executed notebook and the probe's findings."""
    source = ROOT / notebook
    pin = notebooks.existing_pin(source)
    assert pin, f"{notebook} has no pinned set-up cell: run `make notebooks`"
    extras, data = notebooks.source_needs(source.with_suffix(".py"))

    content = tmp_path / "content"  # Colab's working folder: the notebook alone
    content.mkdir()
    shutil.copy(source, content / source.name)
    assert [p.name for p in content.iterdir()] == [source.name]
    nb = nbformat.read(content / source.name, as_version=4)
    if after:
        nb.cells.append(nbformat.v4.new_code_cell(after))
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))

    before = _snapshot(runtime)
    home = tmp_path / "home"
    home.mkdir()
    env = colab_env.kernel_env(
        runtime, home,
        CIRCUITBOOK_REPO=f"file://{clone}",
        COLAB_SIM_FORBIDDEN=f"{ROOT}:{clone}",
        PIP_CACHE_DIR=str(ROOT / "_build" / "colab-pip-cache"),  # wheels cached between runs
        HF_HUB_OFFLINE="1",  # no hub downloads here, ever (Colab would be online)
        PYDEVD_DISABLE_FILE_VALIDATION="1",  # ipykernel 6's debugger warns about frozen modules
    )
    km = _kernel_manager(runtime, tmp_path / "kernels")
    client = NotebookClient(nb, km=km, timeout=CELL_TIMEOUT, resources={"metadata": {"path": str(content)}})
    start = time.monotonic()
    try:
        client.execute(env=env)  # raises CellExecutionError, naming the cell, on any error
        seconds = time.monotonic() - start
    finally:  # nbclient leaves a kernel it did not start running: it would outlive the test
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    print(f"\n{notebook}: {seconds:.0f} s, of which the set-up cell {_cell_seconds(nb.cells[0]):.0f} s")
    assert seconds < NOTEBOOK_LIMIT, f"{notebook} took {seconds:.0f} s on simulated Colab (limit {NOTEBOOK_LIMIT})"

    # the set-up cell's one line says what it did
    after = _snapshot(runtime)
    line = _stream_text(nb.cells[0]).strip()
    versions = {name: after[name][0] for name in ALWAYS_HELD}
    assert line == (f"circuitbook {pin[:12]} installed with extras {extras} and data {data}; kept torch "
                    f"{versions['torch']}, numpy {versions['numpy']}, ipywidgets {versions['ipywidgets']}; models on cpu"), line

    # nothing Colab users rely on was changed: torch, numpy, ipywidgets, anything compiled
    held = set(ALWAYS_HELD) | {name for name, (_, compiled) in before.items() if compiled}
    changed = {name: (before[name][0], after.get(name, ["removed"])[0]) for name in sorted(held)
               if after.get(name, [None])[0] != before[name][0]}
    assert not changed, f"the set-up cell changed preinstalled packages (before, after): {changed}"
    assert "circuitbook" not in before and "circuitbook" in after

    # circuitbook came from the runtime's site-packages, installed from the clone at the pin
    probe = json.loads(_stream_text(nb.cells[-1]).split("COLAB-SIM-PROBE ", 1)[1])
    site = str(colab_env.site_packages(runtime))
    assert probe["circuitbook"].startswith(site + "/"), probe["circuitbook"]
    url = probe["direct_url"]
    assert url and url.get("vcs_info", {}).get("commit_id") == pin, f"circuitbook not installed from git at {pin}: {url}"
    assert url["url"] == f"file://{clone}" and not url.get("dir_info", {}).get("editable"), url
    # the kernel never read a file of this repository or of the clone (pip, a subprocess, may)
    inside = [f for f in probe["modules"] if f.startswith((str(ROOT) + "/", str(clone) + "/"))
              and not f.startswith(str(runtime) + "/")]
    assert not inside, f"modules imported from the working tree or the clone: {inside[:5]}"
    assert not probe["opened"], f"files read from the working tree or the clone: {probe['opened'][:5]}"

    # anywidget switches Colab's custom widget manager on (it probes google.colab.output), and
    # its widgets' displays then carry the manager's URL, which is what Colab's front end reads
    if probe["anywidget_loaded"]:
        assert probe["manager_enabled"], "anywidget was imported but did not enable Colab's custom widget manager"
        assert any(map(_for_custom_manager, _widget_displays(nb))), \
            "no widget display carries Colab's custom widget manager URL"
    return nb, probe


def _widget_displays(nb) -> list[dict]:
    return [o for cell in nb.cells for o in cell.get("outputs", []) if WIDGET_MIME in o.get("data", {})]


def _for_custom_manager(output: dict) -> bool:
    return "custom_widget_manager" in output.get("metadata", {}).get(WIDGET_MIME, {}).get("colab", {})


def _needs(notebook: str) -> tuple:
    extras, data = notebooks.source_needs((ROOT / notebook).with_suffix(".py"))
    return tuple(extras), tuple(data)


def test_every_install_is_simulated():
    """Every set of needs some chapter's set-up cell installs is run by one notebook below."""
    chapters = [str(p.relative_to(ROOT).with_suffix(".ipynb")) for p in notebooks.sources()]
    wanted = {_needs(c): c for c in chapters}
    covered = {_needs(n) for n in NOTEBOOKS}
    missing = {needs: chapter for needs, chapter in wanted.items() if needs not in covered}
    assert not missing, f"set-up cells no Colab test runs (needs: an example chapter): {missing}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: Path(p).stem)
def test_notebook_runs_on_simulated_colab(notebook, base_venv, new_runtime, clone, tmp_path):
    nb, probe = run_on_colab(notebook, new_runtime(base_venv), clone, tmp_path)
    # every notebook tested here shows a widget, and every widget of the book is an anywidget,
    # so run_on_colab has checked that Colab's custom widget manager was switched on for it
    assert probe["anywidget_loaded"] and _widget_displays(nb), f"{notebook} displayed no widget"


# A runtime where the reader upgraded ipywidgets to 8 (or a Colab image that ships it): the
# set-up cell must keep it, and the widgets must still reach Colab's custom widget manager.
# The induction lab is an anywidget, like every widget of the book, so one page shows the
# switch; the ipywidgets 7.7 runs above cover the other set-up cells.
@pytest.mark.parametrize("notebook", ["book/induction/02_lab.ipynb"], ids=lambda p: Path(p).stem)
def test_ipywidgets_8_runtime(notebook, new_runtime, clone, tmp_path):
    base = colab_env.base_venv(ipywidgets=IPYWIDGETS_8)
    nb, probe = run_on_colab(notebook, new_runtime(base), clone, tmp_path)
    assert "ipywidgets 8." in _stream_text(nb.cells[0])
    assert probe["manager_enabled"], "with ipywidgets 8 the set-up cell must enable Colab's custom widget manager"
    displays = _widget_displays(nb)
    assert displays and all(map(_for_custom_manager, displays)), "a widget display lacks the custom manager's URL"


# The SmolLM2 lab live on Colab. Colab has no site to load the model's files from, so the front
# end asks the kernel (smollm2_lab.js's kernelSource): {"ask": "manifest"}, then {"ask": "file"}
# per file, answered by custom messages whose bytes ride as binary buffers. Here the front end's
# requests arrive as comm messages do, through the widget's message handler, and what the kernel
# puts on the comm is recorded instead of sent. The files must come out of circuitbook as
# installed in Colab's runtime (not this checkout), whole and in order, with the manifest's
# sizes and SHA-256; and the kernel must tokenise a text the reader types. What this cannot
# test is Colab's own front end (colab-cdn-widget-manager), which passes buffers on to the
# widget in its ClassicComm.on_msg; the JupyterLab test drives a real front end through the
# same messages.
SMOLLM2_FRONT_END = """
import hashlib, json
from circuitbook.widgets.smollm2_lab import SmolLM2Lab, lab_tokens, _tokenizer, CHUNK
lab_widget = next(v for v in list(globals().values()) if isinstance(v, SmolLM2Lab))
wire = []
lab_widget.comm.send = lambda data=None, metadata=None, buffers=None: wire.append(
    (data, [bytes(b) for b in buffers or []]))

def front_end_asks(content):
    lab_widget._handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})

front_end_asks({"ask": "manifest"})
(data, _), = wire
manifest = data["content"]["manifest"]
files = {}
for entry in manifest["files"]:
    wire.clear()
    front_end_asks({"ask": "file", "name": entry["name"]})
    parts = [(d["content"], b) for d, b in wire]
    whole = b"".join(b"".join(b) for _, b in parts)
    files[entry["name"]] = {
        "bytes": len(whole), "sha256": hashlib.sha256(whole).hexdigest(),
        "offsets_in_order": [c["offset"] for c, _ in parts] == list(range(0, max(1, len(whole)), CHUNK)),
        "last_only_at_end": [c["last"] for c, _ in parts] == [False] * (len(parts) - 1) + [True],
        "largest_message": max(sum(map(len, b)) for _, b in parts)}
wire.clear()
front_end_asks({"ask": "file", "name": "../manifest.json"})
refused = wire[0][0]["content"]
text = "The cat sat on the mat. The cat sat on the mat."
lab_widget.text = text
print("SMOLLM2-FRONT-END " + json.dumps({
    "manifest_files": manifest["files"], "files": files, "refused": refused, "chunk": CHUNK,
    "tokens_typed": lab_widget.tokens, "tokens_expected": lab_tokens(_tokenizer()(text)["input_ids"], lab_widget.repeat)}))
"""


def test_smollm2_lab_gets_its_files_from_the_colab_kernel(base_venv, new_runtime, clone, tmp_path):
    """The SmolLM2 lab's live path on Colab: the kernel answers the front end's requests."""
    nb, probe = run_on_colab("book/induction/02_smollm2_lab.ipynb", new_runtime(base_venv), clone, tmp_path,
                             after=SMOLLM2_FRONT_END)
    assert probe["anywidget_loaded"] and _widget_displays(nb)
    seen = json.loads(_stream_text(nb.cells[-2]).split("SMOLLM2-FRONT-END ", 1)[1])
    names = [f["name"] for f in seen["manifest_files"]]
    assert "tokenizer.json" in names and any(n.endswith(".bin") for n in names), names
    for entry in seen["manifest_files"]:
        got = seen["files"][entry["name"]]
        assert (got["bytes"], got["sha256"]) == (entry["bytes"], entry["sha256"]), \
            f"{entry['name']}: the kernel sent {got['bytes']} bytes (sha256 {got['sha256'][:12]}), the manifest " \
            f"says {entry['bytes']} ({entry['sha256'][:12]})"
        assert got["offsets_in_order"] and got["last_only_at_end"], (entry["name"], got)
        assert got["largest_message"] <= seen["chunk"], (entry["name"], got["largest_message"])
    total = sum(f["bytes"] for f in seen["manifest_files"])
    assert total > 50e6, f"{total} bytes: not the model's weights"
    assert "error" in seen["refused"] and "no file" in seen["refused"]["error"], seen["refused"]
    assert seen["tokens_typed"] == seen["tokens_expected"] and len(seen["tokens_typed"]) > 5, seen
