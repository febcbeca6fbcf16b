"""How fast does SmolLM2 run in the page (headless Chromium), and against what?

The SmolLM2 lab (``circuitbook/widgets/smollm2_forward.js``) runs SmolLM2-135M-Instruct in
the reader's browser. A blank page served from 127.0.0.1 loads the forward module and the
files the site ships (``circuitbook.widgets.smollm2_export``), then measures, in one run:

1. **the runtime, on the model's most common product**: ``[64, 576] x [576, 1536]`` with
   layer 0's real ``W_gate`` (its Q4_1 blocks), by the lab's WebAssembly kernel
   (``smollm2_kernels.c``), by ONNX Runtime Web's 4-bit ``MatMulNBits`` (the same blocks,
   as ``q * scale - zp * scale``: d, and -m / d), by its float32 ``MatMul`` (the weights
   dequantised) and by a plain JavaScript loop (float32 arrays, float64 sums, as
   ``attn_only_forward.js``): median milliseconds and GFLOP/s, and ratios to the kernel.
   ONNX Runtime runs with one thread: a page is cross-origin isolated only when its server
   sends COOP/COEP headers, which a plain static server (and file://) does not;
2. **the first load**: manifest, then every weight file fetched and copied into
   WebAssembly memory, as the lab's button does (from 127.0.0.1, so it measures the page's
   side: a real download of about 96 MB adds the network's time);
3. **one forward pass over 64 tokens**, every head's pattern recorded (the first, and the
   median of later ones);
4. **a re-run after an ablation**: of a head in layer 18 (layers 18-29 recomputed), of a
   head in layer 0 (all 30), and of the top 6 induction heads (from the lowest of them).

No network: the page is local and any other request is refused. On a shared, loaded
machine the times are upper bounds; the ratios of part 1 are what the runtime choice rests
on. Needs ``npm`` (the registry) for onnxruntime-web, pinned in :data:`ORT_WEB`, and the
``onnx`` package to write its two one-node models. Run:
``python benchmarks/bench_browser_smollm2.py [runs]``.
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
const median = (xs) => { xs = xs.slice().sort((a, b) => a - b); return xs[Math.floor(xs.length / 2)]; };
const time = async (fn, runs) => { const ts = []; for (let i = 0; i < runs; i++) {
  const t = performance.now(); await fn(); ts.push(performance.now() - t); } return median(ts); };

window.bench = async (runs) => {
  const out = {};
  // 1. one product four ways, on layer 0's W_gate
  const blocks = new Uint8Array(await (await fetch("gate.q4_1")).arrayBuffer());
  const P = 64, K = 576, N = 1536, flops = 2 * P * K * N;
  const x = Float32Array.from({ length: P * K }, (_, i) => Math.sin(i));
  const k = await kernels();
  let top = (k.__heap_base.value + 15) & ~15;
  const W = top, X = W + blocks.length + 16 - (blocks.length % 16), Y = X + 4 * P * K;
  k.memory.grow(Math.ceil((Y + 4 * P * N) / 65536));
  new Uint8Array(k.memory.buffer, W, blocks.length).set(blocks);
  new Float32Array(k.memory.buffer, X, P * K).set(x);
  k.matmul_q4_1(X, K, P, K / 32, W, (K / 32) * 20, N, Y, N, 0);
  out.kernel = await time(() => k.matmul_q4_1(X, K, P, K / 32, W, (K / 32) * 20, N, Y, N, 0), runs);
  const ours = new Float32Array(k.memory.buffer, Y, P * N).slice();
  const A = new ort.Tensor("float32", x, [P, K]);
  for (const name of ["matmulnbits", "matmul"]) {
    const s = await ort.InferenceSession.create(`./${name}.onnx`, { executionProviders: ["wasm"] });
    const first = (await s.run({ A })).Y.data;
    let err = 0; for (let i = 0; i < first.length; i++) err = Math.max(err, Math.abs(first[i] - ours[i]));
    out[`${name}_max_difference`] = err;
    out[name] = await time(() => s.run({ A }), runs);
  }
  const w = new Float32Array(K * N);  // dequantised, [K, N], for the plain loop
  const deq = new Float32Array(await (await fetch("gate.f32")).arrayBuffer());
  for (let n = 0; n < N; n++) for (let i = 0; i < K; i++) w[i * N + n] = deq[n * K + i];
  const plain = () => { const y = new Float64Array(P * N);
    for (let p = 0; p < P; p++) for (let i = 0; i < K; i++) { const xi = x[p * K + i], o = i * N;
      for (let j = 0; j < N; j++) y[p * N + j] += xi * w[o + j]; } return y; };
  out.plain_js = await time(plain, Math.max(3, Math.floor(runs / 4)));
  out.gflops = Object.fromEntries(["kernel", "matmulnbits", "matmul", "plain_js"].map((n) => [n, flops / out[n] / 1e6]));

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


def _products(folder: Path, model: Path) -> None:
    """Layer 0's W_gate for the page: its Q4_1 blocks, dequantised float32, and the two
    one-node ONNX models that compute x W_gate."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from circuitbook.widgets.smollm2_export import Q4_1, dequantise

    manifest = json.loads((model / "manifest.json").read_text())
    entry = manifest["tensors"]["layers"][0]["W_gate"]
    N, K = entry["shape"]
    raw = np.frombuffer((model / entry["file"]).read_bytes(), np.uint8)[entry["offset"]: entry["offset"] + entry["bytes"]]
    raw = raw.reshape(N, K // 32, 20)
    (folder / "gate.q4_1").write_bytes(raw.tobytes())
    w = dequantise(Q4_1, raw.reshape(N, -1))
    (folder / "gate.f32").write_bytes(w.astype("<f4").tobytes())
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
    graphs = {
        "matmulnbits": helper.make_graph([nbits], "g", inp, outp, initializer=[
            numpy_helper.from_array(packed, "B"), numpy_helper.from_array(d.reshape(-1), "S"),
            numpy_helper.from_array(zp.reshape(-1), "Z")]),
        "matmul": helper.make_graph([helper.make_node("MatMul", ["A", "W"], ["Y"])], "g", inp, outp,
                                    initializer=[numpy_helper.from_array(np.ascontiguousarray(w.T), "W")]),
    }
    for name, graph in graphs.items():
        onnx.save(helper.make_model(graph, ir_version=10, opset_imports=[
            helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]), folder / f"{name}.onnx")


def main() -> None:
    from playwright.sync_api import sync_playwright

    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    model = cached_files()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "model").symlink_to(model, target_is_directory=True)
        (folder / "smollm2.js").write_text(forward_module())
        (folder / "index.html").write_text(PAGE)
        _ort_web(folder)
        _products(folder, model)
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
    print("1. [64, 576] x [576, 1536], layer 0's W_gate       ms   GFLOP/s  x kernel time")
    for name, label in [("kernel", "the lab's WebAssembly kernel (4-bit)"),
                        ("matmulnbits", f"ONNX Runtime Web MatMulNBits (4-bit)"),
                        ("matmul", "ONNX Runtime Web MatMul (float32)"),
                        ("plain_js", "plain JavaScript (float64 sums)")]:
        print(f"   {label:44s}{r[name]:8.1f}{r['gflops'][name]:9.2f}{r[name] / r['kernel']:10.1f}")
    print(f"   (largest difference from the kernel: MatMulNBits {r['matmulnbits_max_difference']:.2g}, "
          f"MatMul {r['matmul_max_difference']:.2g})")
    print(f"2. first load, {r['bytes'] / 1e6:.1f} MB from 127.0.0.1      {r['load'] / 1000:8.2f} s")
    print(f"3. forward pass, 64 tokens, all 270 patterns: first {r['first_pass'] / 1000:.2f} s, "
          f"median {r['forward'] / 1000:.2f} s")
    print(f"4. re-run after mean-ablating L18H6: {r['rerun_L18'] / 1000:.2f} s; L0H0: "
          f"{r['rerun_L0'] / 1000:.2f} s; the top 6 induction heads (from layer {r['top6_from']}): "
          f"{r['rerun_top6'] / 1000:.2f} s")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
