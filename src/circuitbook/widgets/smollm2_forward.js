// SmolLM2-135M-Instruct in the page: the forward pass of the SmolLM2 lab (smollm2_lab.js).
// smollm2_lab.py joins three files into the widget's one module: smollm2_kernels.js (the
// compiled kernels, base64), this file, and the front end. Row vectors and TransformerLens's
// names; every number is float32, as in TransformerLens. The weights stay in the GGUF file's
// 4-bit (Q4_1) and 8-bit (Q8_0) blocks in WebAssembly memory; the kernels dequantise four
// rows at a time, exactly (smollm2_kernels.c). Where it runs, and why:
//
// - the heavy part is 30 layers of seven matrix products plus the unembedding: about
//   0.27 GFLOP a token, 17 GFLOP for 64 tokens;
// - measured in headless Chromium on a 2-core machine shared with other jobs (load average
//   6.7), in one run of benchmarks/bench_browser_smollm2.py (2026-12-02): on each of a
//   layer's seven products over 64 tokens (layer 0's 4-bit blocks) these kernels
//   (WebAssembly SIMD, 26 KB) ran 1.4 to 2.0 times as fast as ONNX Runtime Web 1.31.1's
//   MatMulNBits (its 14.8 MB wasm runtime, one thread: a static site is not cross-origin
//   isolated, so it gets no WebAssembly threads), 2.4 times its float32 MatMul, and 18 to
//   33 times as fast as plain JavaScript (float32 arrays, float64 sums, as
//   attn_only_forward.js). A whole pass over 64 tokens with all 270 patterns: 1.0 s here
//   (products 0.85 s, the rest 0.11 s); with ONNX Runtime's products in their place,
//   1.6 s; with plain JavaScript's, 19.6 s. The first load of the 96.7 MB from the local
//   server took 1.5 s, a re-run after ablating L18H6 0.53 s;
// - the lab also needs what an exported graph hides: every head's pattern and z, ablation
//   of any head, a re-run from the first layer an ablation touches, one layer at a time
//   for the tests. Here each is a few lines.

import { SMOLLM2_KERNELS } from "./smollm2_kernels.js";

const ALIGN = 16;
const align = (n) => Math.ceil(n / ALIGN) * ALIGN;

// The kernels, instantiated from the bytes carried in this module (no request)
export async function kernels() {
  const bin = atob(SMOLLM2_KERNELS);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const { instance } = await WebAssembly.instantiate(bytes, {});
  return instance.exports;
}

// Load the model from `source`: {manifest: () => Promise<manifest>, file: (name, put) =>
// Promise}, where file() calls put(chunk) with each Uint8Array of the file in order (a
// fetch from the site, or the kernel's messages). onProgress(bytes, total) as it goes.
export async function loadSmolLM2(source, onProgress = () => {}) {
  const manifest = await source.manifest();
  const k = await kernels();
  const cfg = manifest.config, T = manifest.max_tokens;
  const { n_layers: L, d_model: D, n_heads: H, n_key_value_heads: KV, d_head: E, d_mlp: F, d_vocab: V } = cfg;
  const bins = manifest.files.filter((f) => f.name.endsWith(".bin"));
  let top = align(k.__heap_base.value);
  const base = {};
  for (const f of bins) { base[f.name] = top; top = align(top + f.bytes); }
  const buf = {};
  const floats = { resid: (L + 1) * T * D, norm: T * D, q: T * H * E, k: T * KV * E, v: T * KV * E,
    z: L * T * H * E, gate: T * F, up: T * F, pattern: L * H * T * T, logits: T * V, head: T * D, tokens: T };
  for (const [name, n] of Object.entries(floats)) { buf[name] = top; top = align(top + 4 * n); }
  const pages = Math.ceil((top - k.memory.buffer.byteLength) / 65536);
  if (pages > 0) k.memory.grow(pages);
  const total = bins.reduce((a, f) => a + f.bytes, 0);
  let done = 0;
  for (const f of bins) {
    let at = base[f.name];
    const end = at + f.bytes;
    await source.file(f.name, (chunk) => {
      if (at + chunk.length > end) throw new Error(`${f.name} is longer than the manifest says`);
      new Uint8Array(k.memory.buffer, at, chunk.length).set(chunk);
      at += chunk.length;
      onProgress(done + at - base[f.name], total);
    });
    if (at !== end) throw new Error(`${f.name}: got ${at - base[f.name]} bytes, the manifest says ${f.bytes}`);
    done += f.bytes;
  }
  const ptr = (entry) => base[entry.file] + entry.offset;
  const t = manifest.tensors;
  const layers = t.layers.map((entries) => Object.fromEntries(Object.entries(entries).map(([n, e]) => [n, ptr(e)])));
  return { name: manifest.name, manifest, cfg, T, k, f32: new Float32Array(k.memory.buffer), buf, layers,
    W_E: ptr(t.W_E), ln_final: ptr(t.ln_final), cos: ptr(t.rotary_cos), sin: ptr(t.rotary_sin),
    z_mean: ptr(t.z_mean), state: null, bytes: total };
}

// The files from a folder of the site (`base` ends in "/"), streamed as they arrive.
// fetch cannot read file:// pages' neighbours, so from file:// this fails: serve the site.
export function siteSource(base) {
  const get = async (name) => {
    let response;
    try { response = await fetch(base + name); } catch (err) {
      throw new Error(location.protocol === "file:"
        ? "the browser does not let a page opened from a file read the model's files: serve the site (python -m http.server) and open it from there"
        : `could not fetch ${base + name}: ${err.message}`, { cause: err });
    }
    if (!response.ok) throw new Error(`${base + name}: HTTP ${response.status}`);
    return response;
  };
  return {
    manifest: async () => (await get("manifest.json")).json(),
    text: async (name) => (await get(name)).text(),
    file: async (name, put) => {
      const reader = (await get(name)).body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        put(value);
      }
    },
  };
}

function checkTokens(net, tokens) {
  const { d_vocab: V } = net.cfg;
  if (!Array.isArray(tokens) && !ArrayBuffer.isView(tokens)) throw new TypeError("tokens must be an array of token ids");
  if (tokens.length < 1 || tokens.length > net.T) throw new RangeError(`the page runs 1 to ${net.T} tokens, got ${tokens.length}`);
  for (const t of tokens) if (!Number.isInteger(t) || t < 0 || t >= V) throw new RangeError(`token id ${t} is not in 0..${V - 1}`);
}

function checkAblate(net, ablate) {
  const { n_layers: L, n_heads: H } = net.cfg;
  for (const [key, how] of Object.entries(ablate)) {
    const [l, h] = key.split(".").map(Number);
    if (!(l >= 0 && l < L && h >= 0 && h < H) || key !== `${l}.${h}`) throw new RangeError(`no head ${key}: heads are "layer.head", 0.0 to ${L - 1}.${H - 1}`);
    if (how !== "zero" && how !== "mean") throw new RangeError(`head ${key}: ablate by "zero" or "mean", not ${JSON.stringify(how)}`);
  }
}

// One layer on the residual stream in slot l (P rows) -> slot l + 1; the patterns and z of
// its heads kept in their slots. ablate: {"l.h": "zero" | "mean"} replaces a head's z
// (TransformerLens's hook_z) by zeros or its exported mean, as circuitbook.heads.ablate does.
function layer(net, l, P, ablate) {
  const { k, f32, buf, T, cfg } = net;
  const { d_model: D, n_heads: H, n_key_value_heads: KV, d_head: E, d_mlp: F, eps } = cfg;
  const w = net.layers[l], HE = H * E, KE = KV * E, group = H / KV;
  const x = buf.resid + 4 * l * T * D, y = x + 4 * T * D, z = buf.z + 4 * l * T * HE;
  const q4 = (X, ld, K, W, N, Y, ldy, add) => k.matmul_q4_1(X, ld, P, K / 32, W, (K / 32) * 20, N, Y, ldy, add);
  // attention: resid_mid = resid_pre + z W_O, with z from the RMSNorm-ed stream
  k.rmsnorm(x, P, D, w.ln1, eps, buf.norm);
  q4(buf.norm, D, D, w.W_Q, HE, buf.q, HE, 0);
  q4(buf.norm, D, D, w.W_K, KE, buf.k, KE, 0);
  q4(buf.norm, D, D, w.W_V, KE, buf.v, KE, 0);
  k.rope(buf.q, HE, P, H, net.cos, net.sin);
  k.rope(buf.k, KE, P, KV, net.cos, net.sin);
  for (let h = 0; h < H; h++) {
    const g = Math.floor(h / group);  // the key-value head this query head shares
    k.attend(buf.q + 4 * E * h, HE, buf.k + 4 * E * g, KE, buf.v + 4 * E * g, KE, P,
      buf.pattern + 4 * (l * H + h) * T * T, z + 4 * E * h, HE);
    const how = ablate[`${l}.${h}`];
    if (how) {
      const mean = f32.subarray((net.z_mean >> 2) + (l * H + h) * E, (net.z_mean >> 2) + (l * H + h + 1) * E);
      for (let p = 0; p < P; p++) {
        const row = (z >> 2) + p * HE + h * E;
        if (how === "zero") f32.fill(0, row, row + E); else f32.set(mean, row);
      }
    }
  }
  f32.copyWithin(y >> 2, x >> 2, (x >> 2) + P * D);
  q4(z, HE, HE, w.W_O, D, y, D, 1);
  // MLP: resid_post = resid_mid + (silu(x W_gate) * x W_in) W_out, x the RMSNorm-ed stream
  k.rmsnorm(y, P, D, w.ln2, eps, buf.norm);
  q4(buf.norm, D, D, w.W_gate, F, buf.gate, F, 0);
  q4(buf.norm, D, D, w.W_in, F, buf.up, F, 0);
  k.swiglu(buf.gate, buf.up, P * F);
  q4(buf.gate, F, F, w.W_out, D, y, D, 1);
}

// logits = RMSNorm(resid_final) W_U, W_U = W_E^T (tied), from the 8-bit blocks
function unembedSlot(net, P) {
  const { k, buf, T, cfg } = net;
  const { n_layers: L, d_model: D, d_vocab: V, eps } = cfg;
  k.rmsnorm(buf.resid + 4 * L * T * D, P, D, net.ln_final, eps, buf.norm);
  k.matmul_q8_0(buf.norm, D, P, D / 32, net.W_E, (D / 32) * 34, V, buf.logits, V, 0);
}

// The first layer whose output an ablation change can move (L: none)
function firstChanged(net, tokens, ablate) {
  const s = net.state, L = net.cfg.n_layers;
  if (!s || s.tokens.length !== tokens.length || s.tokens.some((t, i) => t !== tokens[i])) return 0;
  let first = L;
  for (const key of new Set([...Object.keys(s.ablate), ...Object.keys(ablate)]))
    if (s.ablate[key] !== ablate[key]) first = Math.min(first, Number(key.split(".")[0]));
  return first;
}

// One forward pass on `tokens` (ints), with `ablate` {"l.h": "zero" | "mean"}. The layers
// below the first one an ablation change touches are not recomputed: their inputs are the
// same. Returns views of the page's buffers (valid until the next pass): see run().
export function forward(net, tokens, ablate = {}) {
  checkTokens(net, tokens);
  checkAblate(net, ablate);
  const P = tokens.length, L = net.cfg.n_layers, t0 = performance.now();
  const from = firstChanged(net, tokens, ablate);
  if (from === 0) {
    new Int32Array(net.k.memory.buffer, net.buf.tokens, P).set(tokens);
    net.k.embed_q8_0(net.buf.tokens, P, net.cfg.d_model / 32, net.W_E, net.buf.resid);
  }
  for (let l = from; l < L; l++) layer(net, l, P, ablate);
  if (from < L) unembedSlot(net, P);
  net.state = { tokens: Array.from(tokens), ablate: { ...ablate } };
  return run(net, P, { from, ms: performance.now() - t0 });
}

// What a pass left in the buffers, as views: logits [P, V], pattern(l, h) [P, P] (query
// down, key across), z(l) [P, n_heads * d_head], resid(l) [P, d_model] (resid_pre of layer
// l; l = n_layers: the final stream), and headOutput(l, h) = z_h W_O[h] [P, d_model],
// computed when asked (it shares a buffer: copy it to keep it).
function run(net, P, info = {}) {
  const { f32, buf, T, cfg } = net;
  const { n_heads: H, d_head: E, d_model: D, d_vocab: V } = cfg, HE = H * E;
  return {
    ...info, P, V, tokens: net.state ? net.state.tokens : null,
    logits: f32.subarray(buf.logits >> 2, (buf.logits >> 2) + P * V),
    pattern: (l, h) => f32.subarray((buf.pattern >> 2) + (l * H + h) * T * T, (buf.pattern >> 2) + (l * H + h) * T * T + P * P),
    z: (l) => f32.subarray((buf.z >> 2) + l * T * HE, (buf.z >> 2) + l * T * HE + P * HE),
    resid: (l) => f32.subarray((buf.resid >> 2) + l * T * D, (buf.resid >> 2) + l * T * D + P * D),
    headOutput: (l, h) => {
      // head h's blocks of W_O: 64 of each row's 576 inputs, two blocks from block 2h
      const nb = HE / 32, z = buf.z + 4 * (l * T * HE + h * E);
      net.k.matmul_q4_1(z, HE, P, E / 32, net.layers[l].W_O + (E / 32) * 20 * h, nb * 20, D, buf.head, D, 0);
      return f32.subarray(buf.head >> 2, (buf.head >> 2) + P * D);
    },
  };
}

// For the tests: layer l alone on the stream x [P, d_model] given from outside (ablate as
// in forward), and the unembedding alone. Both invalidate the cached pass.
export function runLayer(net, l, x, P, ablate = {}) {
  checkAblate(net, ablate);
  const { buf, T, cfg } = net;
  net.f32.set(x, (buf.resid >> 2) + l * T * cfg.d_model);
  layer(net, l, P, ablate);
  net.state = null;
  return run(net, P);
}

export function runUnembed(net, x, P) {
  const { buf, T, cfg } = net;
  net.f32.set(x, (buf.resid >> 2) + cfg.n_layers * T * cfg.d_model);
  unembedSlot(net, P);
  net.state = null;
  return run(net, P);
}

// log-softmax of row p of the logits, in float64
export function logProbs(run, p) {
  const row = run.logits.subarray(p * run.V, (p + 1) * run.V);
  let max = -Infinity;
  for (const x of row) if (x > max) max = x;
  let total = 0;
  for (const x of row) total += Math.exp(x - max);
  const lse = max + Math.log(total), out = new Float64Array(run.V);
  for (let i = 0; i < run.V; i++) out[i] = row[i] - lse;
  return out;
}

// the k most likely next tokens after position p: [[id, probability], ...]
export function topTokens(run, p, k = 5) {
  const lp = logProbs(run, p), best = [];
  for (let i = 0; i < lp.length; i++) {
    if (best.length < k || lp[i] > best[best.length - 1][1]) {
      best.push([i, lp[i]]);
      best.sort((a, b) => b[1] - a[1]);
      if (best.length > k) best.pop();
    }
  }
  return best.map(([i, v]) => [i, Math.exp(v)]);
}

// loss at each position p < P - 1 of predicting tokens[p + 1]: -log p(t_{p+1} | t_<=p)
export function losses(run, tokens) {
  const out = [];
  for (let p = 0; p + 1 < run.P; p++) out.push(-logProbs(run, p)[tokens[p + 1]]);
  return out;
}
