"""Speed and memory of the circuit kernels at GPT-2-small shapes, against the obvious routes.

One run measures, on random weights of a 12-layer, 12-head, d_model 768, d_head 64,
vocab 50,257 attention-only ``HookedTransformer`` (chapters 17-18):

- ``composition_scores(model, kind)`` for Q, K, V against TransformerLens's
  ``all_composition_scores`` (time, peak memory, max relative difference, speed-up);
- ``copying_scores`` for all 144 heads and for one head against the head-by-head
  ``FactoredMatrix(W_E W_V, W_O W_U).eigenvalues`` route;
- ``induction_scores`` / ``prev_token_scores`` against a plain forward pass and against
  ``run_with_cache`` followed by reading the diagonals.

Peak memory is the rise of the process's peak resident set size during the call on CPU
(``/proc/self/clear_refs`` resets it; ``malloc_trim`` first returns freed heap pages, so that
reusing them counts), or ``torch.cuda.max_memory_allocated`` on a GPU.
TransformerLens's composition route broadcasts to [L, H, L, H, d_head, d_model] and needs
many GB (8.3 GB measured here on CPU; about 18 GB has been reported): when less than 21 GB is
available it is run on fewer layers, and the output says so. Times are the best of a few runs after a warm-up on a
tiny model; both wall time and this process's CPU time are shown, since other processes may
share the CPU (the load average is printed), and the CPU-time ratio is the steadier one (on a
GPU the "cpu" column is host time only).

Usage::

    python benchmarks/bench_kernels.py [--quick] [--threads N] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import threading
import time
import warnings

GB = 1024**3
MB = 1024**2
TL_FULL_NEEDS_GB = 21.0  # free memory required to run TransformerLens's route at full size
TL_PEAK_GB_12_LAYERS = 18.0  # its peak at GPT-2 shapes, scaling with (n_layers / 12)^2


def mem_available_bytes(device) -> int:
    import torch

    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


class PeakMemory:
    """Peak memory above the starting level while the ``with`` body runs, in ``self.bytes``."""

    def __init__(self, device):
        self.device, self.bytes = device, 0

    def __enter__(self):
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
            return self
        try:  # hand freed heap pages back to the OS, so that reusing them shows up as a rise
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except OSError:
            pass
        self.base = _status_kb("VmRSS") * 1024
        try:  # "5" resets VmHWM, the kernel's own peak-RSS counter, to the current RSS
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.sampler = None
        except OSError:  # fall back to sampling the RSS every millisecond
            self.peak, self.stop = self.base, threading.Event()

            def sample():
                while not self.stop.is_set():
                    self.peak = max(self.peak, _status_kb("VmRSS") * 1024)
                    time.sleep(0.001)

            self.sampler = threading.Thread(target=sample, daemon=True)
            self.sampler.start()
        return self

    def __exit__(self, *exc):
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.bytes = torch.cuda.max_memory_allocated(self.device) - self.base
        elif self.sampler is None:
            self.bytes = _status_kb("VmHWM") * 1024 - self.base
        else:
            self.stop.set()
            self.sampler.join()
            self.bytes = self.peak - self.base
        self.bytes = max(self.bytes, 0)


class Measured:
    """One kernel's ``result``, best ``wall`` and ``cpu`` seconds, and ``peak`` bytes (first run)."""

    def __init__(self, result, wall, cpu, peak):
        self.result, self.wall, self.cpu, self.peak = result, wall, cpu, peak


def measure(fn, device, repeat: int = 1) -> Measured:
    """Run ``fn`` ``repeat`` times: best wall and CPU (process) time, peak memory of the first run.

    CPU time counts only this process's work, so on a CPU shared with other busy processes it
    is the steadier measure of cost; wall time is what a reader waits.
    """
    import gc

    import torch

    walls, cpus, result, peak = [], [], None, 0
    for i in range(repeat):
        gc.collect()
        with PeakMemory(device) as pm:
            c0, t0 = time.process_time(), time.perf_counter()
            result = fn()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        if i == 0:
            peak = pm.bytes
    return Measured(result, min(walls), min(cpus), peak)


def build(n_layers, d_model, n_heads, d_head, d_vocab, n_ctx, device, seed=0):
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(
        n_layers=n_layers, d_model=d_model, n_heads=n_heads, d_head=d_head, d_vocab=d_vocab,
        n_ctx=n_ctx, attn_only=True, normalization_type=None, positional_embedding_type="shortformer",
        act_fn=None, seed=seed, device=str(device), default_prepend_bos=False,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return HookedTransformer(cfg, move_to_device=True)


def truncated(model, n_layers: int):
    """The same weights, first ``n_layers`` blocks only (for TransformerLens's route when memory is short)."""
    cfg = model.cfg
    small = build(n_layers, cfg.d_model, cfg.n_heads, cfg.d_head, 16, 16, model.W_E.device)
    for i in range(n_layers):
        small.blocks[i].load_state_dict(model.blocks[i].state_dict())
    return small


class Table:
    def __init__(self):
        self.rows = []

    def add(self, *cells):
        self.rows.append([str(c) for c in cells])

    def print(self, header):
        widths = [max(len(r[i]) for r in [header] + self.rows) for i in range(len(header))]
        line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
        print(line(header))
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for r in self.rows:
            print(line(r))


def fmt_s(t):
    return f"{t * 1e3:.1f} ms" if t < 1 else f"{t:.2f} s"


def fmt_mb(b):
    return f"{b / MB:.0f} MB" if b < GB else f"{b / GB:.2f} GB"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small shapes (2 layers, d_model 64), seconds")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    args = ap.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from importlib.metadata import version

        from transformer_lens import FactoredMatrix

    from circuitbook.composition import composition_scores
    from circuitbook.data import repeated_random_tokens
    from circuitbook.heads import copying_scores, induction_scores, prev_token_scores

    if args.quick:
        shape = dict(n_layers=2, d_model=64, n_heads=4, d_head=16, d_vocab=1000, n_ctx=128)
    else:
        shape = dict(n_layers=12, d_model=768, n_heads=12, d_head=64, d_vocab=50257, n_ctx=1024)
    L, H = shape["n_layers"], shape["n_heads"]
    gpu_name = f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""
    print(f"device: {device}{gpu_name}; torch threads: {torch.get_num_threads()} of {os.cpu_count()} CPUs")
    print(f"torch {torch.__version__}, transformer-lens {version('transformer-lens')}, "
          f"Python {platform.python_version()}; load average {os.getloadavg()[0]:.2f}")
    print("shapes: " + ", ".join(f"{k}={v}" for k, v in shape.items()) + " (random weights, float32)")
    model = build(**shape, device=device)

    # Warm-up on a tiny model: first calls of linalg kernels and hooks carry one-off costs.
    tiny = build(2, 16, 2, 8, 10, 8, device)
    for kind in "QKV":
        composition_scores(tiny, kind)
        tiny.all_composition_scores(kind)
    copying_scores(tiny)
    copying_scores(tiny, 0, 0)
    FactoredMatrix(tiny.W_E @ tiny.W_V[0, 0], tiny.W_O[0, 0] @ tiny.W_U).eigenvalues
    induction_scores(tiny)
    del tiny

    # --- composition scores ---------------------------------------------------------------
    avail = mem_available_bytes(device)
    tl_layers = L
    if avail < TL_FULL_NEEDS_GB * GB and not args.quick:
        # Largest layer count whose (n_layers/12)^2-scaled peak leaves 3 GB spare.
        budget = max(avail / GB - 3.0, 0.0)
        tl_layers = max(2, min(L, int(L * (budget / TL_PEAK_GB_12_LAYERS) ** 0.5)))
    tl_model = model if tl_layers == L else truncated(model, tl_layers)
    print(f"\navailable memory: {avail / GB:.1f} GB")
    if tl_layers != L:
        print(f"NOTE: under {TL_FULL_NEEDS_GB:.0f} GB available, so TransformerLens's all_composition_scores is "
              f"measured on the first {tl_layers} of {L} layers, and ours is compared with it on that same "
              f"truncated model; ours is also timed on all {L} layers.")
    comp = Table()
    for kind in "QKV":
        ours = measure(lambda: composition_scores(model, kind), device, repeat=3)
        there = ours if tl_model is model else measure(lambda: composition_scores(tl_model, kind), device, repeat=3)
        with torch.no_grad():
            ref = measure(lambda: tl_model.all_composition_scores(kind), device)
        nz = ref.result > 0
        rel = float(((there.result - ref.result).abs()[nz] / ref.result[nz]).max())
        if there is not ours:
            comp.add(kind, "ours", L, fmt_s(ours.wall), fmt_s(ours.cpu), fmt_mb(ours.peak), "", "", "")
        comp.add(kind, "ours", tl_layers, fmt_s(there.wall), fmt_s(there.cpu), fmt_mb(there.peak), "", "", "")
        comp.add(kind, "TransformerLens", tl_layers, fmt_s(ref.wall), fmt_s(ref.cpu), fmt_mb(ref.peak),
                 f"{ref.wall / there.wall:.0f}x", f"{ref.cpu / there.cpu:.0f}x", f"{rel:.1e}")
        del ref
    print("\ncomposition_scores(model, kind) vs TransformerLens all_composition_scores(kind)")
    comp.print(["kind", "route", "layers", "wall", "cpu", "peak", "speed-up wall", "speed-up cpu", "max rel diff"])

    # --- copying scores -------------------------------------------------------------------
    layer, head = L // 2, H // 4

    def fm_route(heads):
        with torch.no_grad():
            W_E, W_U, W_V, W_O = model.W_E, model.W_U, model.W_V, model.W_O
            out = []
            for l, h in heads:
                eig = FactoredMatrix(W_E @ W_V[l, h], W_O[l, h] @ W_U).eigenvalues
                out.append(eig.sum().real / eig.abs().sum())
            return torch.stack(out)

    every = [(l, h) for l in range(L) for h in range(H)]
    ours_all = measure(lambda: copying_scores(model), device, repeat=3)
    ours_one = measure(lambda: copying_scores(model, layer, head), device, repeat=5)
    ref_all = measure(lambda: fm_route(every), device)
    ref_one = measure(lambda: fm_route([(layer, head)]), device, repeat=3)
    copy = Table()
    diff_all = float((ours_all.result.flatten() - ref_all.result).abs().max())
    diff_one = float((ours_one.result - ref_one.result[0]).abs())
    for label, ours, ref, diff in [(f"all {L * H} heads", ours_all, ref_all, diff_all),
                                   (f"one head ({layer}.{head})", ours_one, ref_one, diff_one)]:
        copy.add(label, "ours", fmt_s(ours.wall), fmt_s(ours.cpu), fmt_mb(ours.peak), "", "", "")
        copy.add(label, "FactoredMatrix", fmt_s(ref.wall), fmt_s(ref.cpu), fmt_mb(ref.peak),
                 f"{ref.wall / ours.wall:.1f}x", f"{ref.cpu / ours.cpu:.1f}x", f"{diff:.1e}")
    print("\ncopying_scores vs head-by-head FactoredMatrix(W_E W_V, W_O W_U).eigenvalues")
    copy.print(["heads", "route", "wall", "cpu", "peak", "speed-up wall", "speed-up cpu", "max abs diff"])

    # --- induction / previous-token scores -----------------------------------------------
    seq_len = min(shape["n_ctx"] // 2, 50)
    batch = 8
    tokens = repeated_random_tokens(batch, seq_len, shape["d_vocab"], device=device)

    def forward():
        with torch.no_grad():
            return model(tokens)

    def with_cache():
        with torch.no_grad():
            _, cache = model.run_with_cache(tokens)
            n = seq_len
            ind = torch.stack([cache["pattern", l].diagonal(offset=1 - n, dim1=-2, dim2=-1)[..., 1:].mean((0, 2))
                               for l in range(L)])
            prev = torch.stack([cache["pattern", l].diagonal(offset=-1, dim1=-2, dim2=-1).mean((0, 2))
                                for l in range(L)])
            return ind, prev

    fwd = measure(forward, device, repeat=3)
    ind = measure(lambda: induction_scores(model), device, repeat=3)
    prev = measure(lambda: prev_token_scores(model), device, repeat=3)
    cache = measure(with_cache, device, repeat=3)
    ind_ref, prev_ref = cache.result
    heads_t = Table()
    for label, m, diff in [
        ("plain forward model(tokens)", fwd, ""),
        ("induction_scores", ind, f"{float((ind.result - ind_ref).abs().max()):.1e}"),
        ("prev_token_scores", prev, f"{float((prev.result - prev_ref).abs().max()):.1e}"),
        ("run_with_cache + diagonals (both)", cache, ""),
    ]:
        heads_t.add(label, fmt_s(m.wall), fmt_s(m.cpu), f"{m.wall / fwd.wall:.2f}x", f"{m.cpu / fwd.cpu:.2f}x",
                    fmt_mb(m.peak), diff)
    print(f"\ninduction / previous-token scores on repeated random tokens [{batch}, {2 * seq_len}]")
    heads_t.print(["route", "wall", "cpu", "wall vs forward", "cpu vs forward", "peak", "max abs diff vs cache"])
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
