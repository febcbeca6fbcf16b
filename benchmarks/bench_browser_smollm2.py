"""How fast does SmolLM2 run in the page (headless Chromium), and against what?

The SmolLM2 lab (``circuitbook/widgets/smollm2_forward.js``) runs SmolLM2-135M-Instruct in
the reader's browser. A blank page served from 127.0.0.1 loads the forward module and the
files the site ships (``circuitbook.widgets.smollm2_export``), then measures, in one run:

1. **the runtime, on every product of a layer**: ``[64, K] x [K, N]`` with layer 0's real
   weights (their Q4_1 blocks: W_Q, W_K, W_V, W_O, W_gate, W_in, W_out), by the lab's
   WebAssembly kernel (``smollm2_kernels.c``), by ONNX Runtime Web's 4-bit ``MatMulNBits``
   (the same blocks, as ``q * scale - zp * scale``: d, and -m / d) and by a plain
   JavaScript loop (float32 arrays, float64 sums, as ``attn_only_forward.js``); W_gate also
   by ONNX Runtime's float32 ``MatMul``. Medians in ms, and ratios to the kernel. ONNX
   Runtime runs with one thread: a page is cross-origin isolated (which WebAssembly threads
   need) only when its server sends COOP/COEP headers, which a plain static host (and
   file://) does not;
2. **one forward pass over 64 tokens**, every head's pattern recorded: measured with the
   lab's kernels (the first pass, and the median of later ones); for ONNX Runtime Web and
   plain JavaScript, the same pass with their measured products (30 layers of the seven,
   and the unembedding at their own rate) in place of the kernel's, the rest (norms,
   RoPE, attention, SwiGLU) as measured. Running the whole model in ONNX Runtime would
   need a graph that outputs all 270 patterns and takes any head's ablation as an input;
   the products are nine tenths of the pass (measured: 0.85 of 0.96 s), so this
   comparison is what the choice rests on;
3. **the first load**: manifest, then every weight file fetched and copied into
   WebAssembly memory, as the lab's button does (from 127.0.0.1, so it measures the page's
   side: a real download of about 96 MB adds the network's time);
4. **a re-run after an ablation**: of a head in layer 18 (layers 18-29 recomputed), of a
   head in layer 0 (all 30), and of the top 6 induction heads (from the lowest of them).

No network: the page is local and any other request is refused. On a shared, loaded
machine the times are upper bounds; the ratios of part 1 are what the runtime choice rests
on. Needs ``npm`` (the registry) for onnxruntime-web, pinned in :data:`ORT_WEB`, and the
``onnx`` package to write its two one-node models. Run:
``python benchmarks/bench_browser_smollm2.py [runs]``.

Measured 2026-12-02 (``7`` runs, 2 cores, load average 6.7, other jobs running): the
kernels 1.4-2.0x as fast as MatMulNBits on every product, 18-33x plain JavaScript; a pass
over 64 tokens with all patterns 1.01 s (ONNX Runtime's products in place: 1.58 s; plain
JavaScript's: 19.6 s); first load 1.49 s from 127.0.0.1; re-run after ablating L18H6
0.53 s, L0H0 1.01 s, the top 6 induction heads 0.56 s. The reasons for the runtime are
at the top of ``smollm2_forward.js``.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from circuitbook.widgets.smollm2_export import cached_files
from circuitbook.widgets.smollm2_lab import forward_module

ORT_WEB = "onnxruntime-web@1.31.1"
ORT_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.wasm", "ort-wasm-simd-threaded.mjs")

PAGE = """<!doctype html><meta charset="utf-8">
<script type="module">
import * as ort from "./ort.wasm.min.mjs";
import { kernels, loadSmolLM2, siteSource, forward } from "./smollm2.js";
ort.env.wasm.numThreads = 1;
const SHAPES = __SHAPES__;  // [name, N outputs, K inputs] of a layer's seven products
const median = (xs) => { xs = xs.slice().sort((a, b) => a - b); return xs[Math.floor(xs.length / 2)]; };
// median ms of `runs` samples, each `reps` calls (the page's clock ticks in 0.1 ms: a page
// that is not cross-origin isolated gets a coarse performance.now)
const time = async (fn, runs, reps = 1) => { const ts = []; for (let i = 0; i < runs; i++) {
  const t = performance.now(); for (let j = 0; j < reps; j++) await fn(); ts.push((performance.now() - t) / reps); }
  return median(ts); };

window.bench = async (runs) => {
  const out = { products: {} };
  // 1. every shape of a layer's products, three ways, on layer 0's weights
  const k = await kernels();
  const P = 64, x = Float32Array.from({ length: P * 1536 }, (_, i) => Math.sin(i));
  let top = (k.__heap_base.value + 15) & ~15;
  const X = top, Y = X + 4 * P * 1536, W = Y + 4 * P * 1536;
  k.memory.grow(Math.ceil((W + 2e6) / 65536));
  new Float32Array(k.memory.buffer, X, P * 1536).set(x);
  for (const [name, N, K] of SHAPES) {
    const r = {};
    const blocks = new Uint8Array(await (await fetch(`${name}.q4_1`)).arrayBuffer());
    new Uint8Array(k.memory.buffer, W, blocks.length).set(blocks);
    const mm = () => k.matmul_q4_1(X, K, P, K / 32, W, (K / 32) * 20, N, Y, N, 0);
    mm();
    r.kernel = await time(mm, runs, 10);
    const ours = new Float32Array(k.memory.buffer, Y, P * N).slice();
    const A = new ort.Tensor("float32", x.subarray(0, P * K), [P, K]);
    for (const kind of name === "W_gate" ? ["matmulnbits", "matmul"] : ["matmulnbits"]) {
      const s = await ort.InferenceSession.create(`./${name}.${kind}.onnx`, { executionProviders: ["wasm"] });
      const first = (await s.run({ A })).Y.data;
      let err = 0; for (let i = 0; i < first.length; i++) err = Math.max(err, Math.abs(first[i] - ours[i]));
      r[`${kind}_max_difference`] = err;
      r[kind] = await time(() => s.run({ A }), runs, 10);
    }
    const deq = new Float32Array(await (await fetch(`${name}.f32`)).arrayBuffer());
    const w = new Float32Array(K * N);  // [K, N], for the plain loop (as attn_only_forward.js)
    for (let n = 0; n < N; n++) for (let i = 0; i < K; i++) w[i * N + n] = deq[n * K + i];
    const plain = () => { const y = new Float64Array(P * N);
      for (let p = 0; p < P; p++) for (let i = 0; i < K; i++) { const xi = x[p * K + i], o = i * N;
        for (let j = 0; j < N; j++) y[p * N + j] += xi * w[o + j]; } return y; };
    r.plain_js = await time(plain, Math.max(3, Math.floor(runs / 3)));
    Object.assign(r, { N, K, flops: 2 * P * K * N });
    out.products[name] = r;
  }
  // 2. the first load
  let t = performance.now();
  const net = await loadSmolLM2(siteSource(new URL("./model/", location.href).href));
  out.load = performance.now() - t;
  out.bytes = net.bytes;
  // 3. forward passes over 64 tokens (a fixed, varied sequence of ids)
  const tokens = Array.from({ length: 64 }, (_, i) => 1000 + ((i * 7919) % 30000));
  const pass = (ablate) => { net.state = null; return forward(net, tokens, ablate).ms; };
  out.first_pass = pass({});
  out.forward = median(Array.from({ length: runs }, () => pass({})));
  // the rest of the pass (norms, RoPE, attention, SwiGLU): the same pass with its products
  // skipped
  const kernelsOnly = net.k;
  net.k = { ...kernelsOnly, matmul_q4_1: () => {}, matmul_q8_0: () => {} };
  out.rest = median(Array.from({ length: runs }, () => pass({})));
  net.k = kernelsOnly;
  // the unembedding alone ([64, 576] x [576, 49152], 8-bit blocks), inside the pass
  const b = net.buf, D = net.cfg.d_model, V = net.cfg.d_vocab;
  out.unembed = await time(() => net.k.matmul_q8_0(b.norm, D, 64, D / 32, net.W_E, (D / 32) * 34, V,
    b.logits, V, 0), Math.max(3, Math.floor(runs / 3)));
  // 4. re-runs after an ablation, from the clean pass
  const rerun = (ablate) => median(Array.from({ length: runs }, () => {
    forward(net, tokens, {}); return forward(net, tokens, ablate).ms; }));
  const s = net.manifest.induction.scores, keys = [];
  s.forEach((row, l) => row.forEach((_, h) => keys.push([l, h])));
  keys.sort((a, b) => s[b[0]][b[1]] - s[a[0]][a[1]]);
  out.rerun_L18 = rerun({ "18.6": "mean" });
  out.rerun_L0 = rerun({ "0.0": "mean" });
  out.rerun_top6 = rerun(Object.fromEntries(keys.slice(0, 6).map(([l, h]) => [`${l}.${h}`, "mean"])));
  out.top6_from = Math.min(...keys.slice(0, 6).map(([l]) => l));
  return out;
};
window.ready = true;
</script>"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the printed numbers alone
        pass


def _ort_web(folder: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(["npm", "pack", "--silent", ORT_WEB], cwd=tmp, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"npm pack {ORT_WEB} failed (is the npm registry reachable?):\n{out.stderr}")
        with tarfile.open(Path(tmp) / out.stdout.strip().splitlines()[-1]) as tar:
            tar.extractall(tmp, filter="data")
        for name in ORT_FILES:
            shutil.copy2(Path(tmp) / "package" / "dist" / name, folder / name)


#: the products of a layer, in the manifest's names, each measured on layer 0's weights
LAYER_PRODUCTS = ("W_Q", "W_K", "W_V", "W_O", "W_gate", "W_in", "W_out")


def _products(folder: Path, model: Path) -> list:
    """Layer 0's seven weight matrices for the page: each one's Q4_1 blocks
    (``NAME.q4_1``), dequantised float32 (``NAME.f32``) and a one-node ONNX model of
    ``x W`` by MatMulNBits (``NAME.matmulnbits.onnx``); W_gate also by float32 MatMul.
    Returns ``[name, N, K]`` for each."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from circuitbook.widgets.smollm2_export import Q4_1, dequantise

    manifest = json.loads((model / "manifest.json").read_text())
    shapes = []
    for name in LAYER_PRODUCTS:
        entry = manifest["tensors"]["layers"][0][name]
        N, K = entry["shape"]
        shapes.append([name, N, K])
        raw = np.frombuffer((model / entry["file"]).read_bytes(), np.uint8)[entry["offset"]: entry["offset"] + entry["bytes"]]
        raw = raw.reshape(N, K // 32, 20)
        (folder / f"{name}.q4_1").write_bytes(raw.tobytes())
        w = dequantise(Q4_1, raw.reshape(N, -1))
        (folder / f"{name}.f32").write_bytes(w.astype("<f4").tobytes())
        d = raw[:, :, 0:2].copy().view(np.float16)[..., 0].astype(np.float32)      # [N, K / 32]
        m = raw[:, :, 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
        nib = raw[:, :, 4:]                                                          # [N, K / 32, 16]
        q = np.concatenate([nib & 0x0F, nib >> 4], axis=-1)                        # gguf: low nibbles first
        packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)             # ORT: pairs in a byte
        zp = np.where(d != 0, -m / np.where(d != 0, d, 1), 0).astype(np.float32)
        inp = [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["P", K])]
        outp = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["P", N])]
        nbits = helper.make_node("MatMulNBits", ["A", "B", "S", "Z"], ["Y"], domain="com.microsoft",
                                 K=K, N=N, bits=4, block_size=32, accuracy_level=0)
        graphs = {"matmulnbits": helper.make_graph([nbits], "g", inp, outp, initializer=[
            numpy_helper.from_array(packed, "B"), numpy_helper.from_array(d.reshape(-1), "S"),
            numpy_helper.from_array(zp.reshape(-1), "Z")])}
        if name == "W_gate":
            graphs["matmul"] = helper.make_graph([helper.make_node("MatMul", ["A", "W"], ["Y"])], "g", inp, outp,
                                                 initializer=[numpy_helper.from_array(np.ascontiguousarray(w.T), "W")])
        for kind, graph in graphs.items():
            onnx.save(helper.make_model(graph, ir_version=10, opset_imports=[
                helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]), folder / f"{name}.{kind}.onnx")
    return shapes


def main() -> None:
    from playwright.sync_api import sync_playwright

    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    model = cached_files()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "model").symlink_to(model, target_is_directory=True)
        (folder / "smollm2.js").write_text(forward_module())
        _ort_web(folder)
        shapes = _products(folder, model)
        (folder / "index.html").write_text(PAGE.replace("__SHAPES__", json.dumps(shapes)))
        handler = functools.partial(_Quiet, directory=tmp)
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
                                        args=["--no-sandbox", "--disable-gpu"], headless=True)
            page = browser.new_page()
            page.route("**/*", lambda r: r.continue_() if urlsplit(r.request.url).hostname == "127.0.0.1"
                       else r.abort())
            page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/index.html")
            page.wait_for_function("() => window.ready === true")
            r = page.evaluate("(runs) => window.bench(runs)", runs)
            browser.close()
        httpd.shutdown()
    load = os.getloadavg()
    print(f"SmolLM2 in headless Chromium, {os.cpu_count()} cores, load average {load[0]:.1f} "
          f"(medians of {runs} runs)")
    report(r)
    print(json.dumps(r))


def report(r: dict) -> None:
    """Print the measurements of one run: the products, then the lab's own numbers."""
    prods = r["products"]
    print("1. a layer's products on [64, d] inputs, layer 0's weights (ms; x: time / the kernel's)")
    print(f"   {'':8s}{'N x K':>12s}{'kernel':>9s}{'ORT 4-bit':>14s}{'plain JS':>14s}")
    for name, p in prods.items():
        n, k = p["N"], p["K"]
        print(f"   {name:8s}{n:>7d} x{k:>5d}{p['kernel']:9.2f}{p['matmulnbits']:8.2f} x{p['matmulnbits'] / p['kernel']:4.1f}"
              f"{p['plain_js']:8.1f} x{p['plain_js'] / p['kernel']:4.0f}")
    g = prods["W_gate"]
    print(f"   W_gate by ONNX Runtime Web's float32 MatMul: {g['matmul']:.2f} ms (x{g['matmul'] / g['kernel']:.1f}); "
          f"largest difference from the kernel: MatMulNBits "
          f"{max(p['matmulnbits_max_difference'] for p in prods.values()):.2g}, MatMul {g['matmul_max_difference']:.2g}")
    # one forward pass's products: 30 layers of these seven, and the unembedding (in the
    # kernel measured; in the others at their own rate on the layer products)
    flops = sum(p["flops"] for p in prods.values())
    unembed_flops = 2 * 64 * 576 * 49152
    est = {}
    for kind in ("kernel", "matmulnbits", "plain_js"):
        t = sum(p[kind] for p in prods.values())
        est[kind] = 30 * t + (r["unembed"] if kind == "kernel" else unembed_flops * t / flops)
    rest = r["rest"]   # norms, RoPE, attention, SwiGLU: the same in any runtime
    print("2. one forward pass over 64 tokens, every pattern recorded (s): measured with the kernels;")
    print("   with the others, their products' measured times put in place of the kernel's")
    print(f"   the lab's kernels {r['forward'] / 1000:6.2f} (first {r['first_pass'] / 1000:.2f}; its products "
          f"one by one {est['kernel'] / 1000:.2f}, the pass without them {rest / 1000:.2f})")
    mine = est["kernel"] + rest   # the same sum for the kernels, so that the ratios compare like with like
    for kind, label in (("matmulnbits", "ONNX Runtime Web"), ("plain_js", "plain JavaScript")):
        print(f"   {label:18s}{(est[kind] + rest) / 1000:6.2f}   x{(est[kind] + rest) / mine:.1f} (of the kernels' "
              f"same sum, {mine / 1000:.2f})")
    print(f"3. first load, {r['bytes'] / 1e6:.1f} MB from 127.0.0.1: {r['load'] / 1000:.2f} s")
    print(f"4. re-run after mean-ablating L18H6 (layers 18-29): {r['rerun_L18'] / 1000:.2f} s; L0H0 (all 30): "
          f"{r['rerun_L0'] / 1000:.2f} s; the top 6 induction heads (from layer {r['top6_from']}): "
          f"{r['rerun_top6'] / 1000:.2f} s")


if __name__ == "__main__":
    main()
