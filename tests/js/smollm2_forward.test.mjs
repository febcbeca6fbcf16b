// The SmolLM2 lab's WebAssembly kernels and forward pass (src/circuitbook/widgets/
// smollm2_kernels.c, smollm2_forward.js) against a float64 reference written here, on
// random blocks and on a tiny random model of SmolLM2's shape (RMSNorm, RoPE on 64
// dimensions, grouped-query attention, SwiGLU, tied 8-bit embedding). Run:
//   node --test tests/js/
// Tolerances are worst-case float32 rounding (Higham: a sum of n products is off by at
// most n u sum |x_i y_i|, u = 2^-24 the unit roundoff); we allow eps = 2^-23 per rounding,
// as circuitbook.book.rounding_bound does, and count the roundings at each use.
import assert from "node:assert/strict";
import { test } from "node:test";

// the modules as files (smollm2_forward.js imports the kernels' bytes from its neighbour)
const m = await import(new URL("../../src/circuitbook/widgets/smollm2_forward.js", import.meta.url));

const EPS = 2 ** -23;

function rng(seed) {  // mulberry32
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// float16 bits <-> numbers, exactly (every float16 is a float64)
function f16(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
  if (e === 0) return s * f * 2 ** -24;
  if (e === 31) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * 2 ** (e - 15);
}
function toF16(x) {  // round to nearest float16 (for drawing test scales), by search
  let best = 0, err = Infinity;
  for (let h = 0; h < 0x7c00; h++) {
    const v = f16(h), d = Math.abs(Math.abs(x) - v);
    if (d < err) { err = d; best = h; }
  }
  return x < 0 ? best | 0x8000 : best;
}
const F16_TABLE = Array.from({ length: 64 }, (_, i) => toF16((i % 2 ? -1 : 1) * 2 ** (-9 + (i % 16) / 3)));

// N rows of K / 32 random Q4_1 blocks, and their weights as the GGUF format defines them:
// fl(fl(d q) + m), computed here in float64 with explicit float32 rounding
function q4Blocks(N, K, next) {
  const nb = K / 32, bytes = new Uint8Array(N * nb * 20), w = new Float64Array(N * K);
  for (let n = 0; n < N; n++) for (let j = 0; j < nb; j++) {
    const o = (n * nb + j) * 20, dh = F16_TABLE[Math.floor(next() * 64)] & 0x7fff, mh = F16_TABLE[Math.floor(next() * 64)];
    bytes[o] = dh & 255; bytes[o + 1] = dh >> 8; bytes[o + 2] = mh & 255; bytes[o + 3] = mh >> 8;
    for (let i = 0; i < 16; i++) bytes[o + 4 + i] = Math.floor(next() * 256);
    for (let i = 0; i < 32; i++) {
      const byte = bytes[o + 4 + (i % 16)], q = i < 16 ? byte & 15 : byte >> 4;
      w[n * K + 32 * j + i] = Math.fround(Math.fround(f16(dh) * q) + f16(mh));
    }
  }
  return { bytes, w };
}

function q8Blocks(N, K, next) {
  const nb = K / 32, bytes = new Uint8Array(N * nb * 34), w = new Float64Array(N * K);
  for (let n = 0; n < N; n++) for (let j = 0; j < nb; j++) {
    const o = (n * nb + j) * 34, dh = F16_TABLE[Math.floor(next() * 64)] & 0x7fff;
    bytes[o] = dh & 255; bytes[o + 1] = dh >> 8;
    for (let i = 0; i < 32; i++) {
      const q = Math.floor(next() * 256) - 128;
      bytes[o + 2 + i] = q & 255;
      w[n * K + 32 * j + i] = Math.fround(f16(dh) * q);
    }
  }
  return { bytes, w };
}

// kernels with a bump allocator over their memory
async function withKernels() {
  const k = await m.kernels();
  let top = (k.__heap_base.value + 15) & ~15;
  k.memory.grow(256);  // 16 MiB
  const alloc = (bytes) => { const p = top; top = (top + bytes + 15) & ~15; return p; };
  const f32 = (p, n) => new Float32Array(k.memory.buffer, p, n);
  const put = (arr) => {
    const isBytes = arr instanceof Uint8Array, p = alloc(isBytes ? arr.length : 4 * arr.length);
    if (isBytes) new Uint8Array(k.memory.buffer, p, arr.length).set(arr); else f32(p, arr.length).set(arr);
    return p;
  };
  return { k, alloc, f32, put };
}

const randn = (n, next, s = 1) => Float32Array.from({ length: n }, () => s * (next() + next() + next() - 1.5));

test("dequantised Q4_1 and Q8_0 weights are fl(fl(d q) + m) and fl(d q), bit for bit", async () => {
  const { k, alloc, f32, put } = await withKernels(), next = rng(1);
  for (const [blocks, q8] of [[q4Blocks(7, 96, next), 0], [q8Blocks(7, 96, next), 1]]) {
    const W = put(blocks.bytes), out = alloc(4 * 7 * 96);
    k.dequant_rows(W, 3, 7, q8, out);
    assert.deepEqual(Array.from(f32(out, 7 * 96)), Array.from(blocks.w));
  }
});

test("the block products agree with float64 within n eps sum |x w|, whole or one head's slice", async () => {
  const { k, alloc, f32, put } = await withKernels(), next = rng(2);
  for (const [P, K, N, q8] of [[1, 64, 5, 0], [3, 576, 33, 0], [64, 192, 19, 0], [5, 96, 13, 1], [2, 64, 4, 1]]) {
    const { bytes, w } = q8 ? q8Blocks(N, K, next) : q4Blocks(N, K, next);
    const x = randn(P * K, next), X = put(x), W = put(bytes), Y = alloc(4 * P * N);
    (q8 ? k.matmul_q8_0 : k.matmul_q4_1)(X, K, P, K / 32, W, (K / 32) * (q8 ? 34 : 20), N, Y, N, 0);
    const y = f32(Y, P * N);
    // a head's slice: inputs 32..95 of each row (blocks 1 and 2), X read from column 0
    const S = alloc(4 * P * N);
    if (K >= 96) (q8 ? k.matmul_q8_0 : k.matmul_q4_1)(X, K, P, 2, W + (q8 ? 34 : 20), (K / 32) * (q8 ? 34 : 20), N, S, N, 0);
    const ys = f32(S, P * N);
    for (let p = 0; p < P; p++) for (let n = 0; n < N; n++) {
      let exact = 0, size = 0, sliceExact = 0, sliceSize = 0;
      for (let i = 0; i < K; i++) {
        exact += x[p * K + i] * w[n * K + i];
        size += Math.abs(x[p * K + i] * w[n * K + i]);
      }
      assert.ok(Math.abs(y[p * N + n] - exact) <= (K + 1) * EPS * size, `P=${P} K=${K} N=${N}: ${y[p * N + n]} vs ${exact}`);
      if (K >= 96) {
        for (let i = 0; i < 64; i++) {
          sliceExact += x[p * K + i] * w[n * K + 32 + i];
          sliceSize += Math.abs(x[p * K + i] * w[n * K + 32 + i]);
        }
        assert.ok(Math.abs(ys[p * N + n] - sliceExact) <= 65 * EPS * sliceSize, "one head's slice");
      }
    }
  }
});

test("adding into the output adds the product once: y + x W^T", async () => {
  const { k, alloc, f32, put } = await withKernels(), next = rng(3);
  const { bytes } = q4Blocks(6, 64, next), x = randn(2 * 64, next), X = put(x), W = put(bytes);
  const A = alloc(4 * 12), B = put(randn(12, next));
  const before = Array.from(f32(B, 12));
  k.matmul_q4_1(X, 64, 2, 2, W, 40, 6, A, 6, 0);
  k.matmul_q4_1(X, 64, 2, 2, W, 40, 6, B, 6, 1);
  const a = f32(A, 12), b = f32(B, 12);
  for (let i = 0; i < 12; i++) assert.equal(b[i], Math.fround(before[i] + a[i]));
});

test("RMSNorm, RoPE, attention and SwiGLU agree with float64", async () => {
  const { k, alloc, f32, put } = await withKernels(), next = rng(4);
  const P = 9, D = 128, eps = 1e-5;
  // RMSNorm: D + 4 roundings (mean of squares, eps, sqrt, division, gain)
  const x = randn(P * D, next, 3), g = randn(D, next), X = put(x), G = put(g), Y = alloc(4 * P * D);
  k.rmsnorm(X, P, D, G, eps, Y);
  const y = f32(Y, P * D);
  for (let p = 0; p < P; p++) {
    let ss = 0;
    for (let i = 0; i < D; i++) ss += x[p * D + i] ** 2;
    const r = Math.sqrt(ss / D + eps);
    for (let i = 0; i < D; i++) {
      const want = (x[p * D + i] / r) * g[i];
      assert.ok(Math.abs(y[p * D + i] - want) <= (D + 4) * EPS * Math.abs(want) + 1e-30, "rmsnorm");
    }
  }
  // RoPE on two heads of 64 per row: x cos + rot(x) sin, three roundings
  const H = 2, cos = randn(P * 64, next), sin = randn(P * 64, next), q = randn(P * H * 64, next);
  const Q = put(q);
  k.rope(Q, H * 64, P, H, put(cos), put(sin));
  const qr = f32(Q, P * H * 64).slice();
  for (let p = 0; p < P; p++) for (let h = 0; h < H; h++) for (let i = 0; i < 64; i++) {
    const o = p * H * 64 + h * 64, j = i < 32 ? i + 32 : i - 32, sign = i < 32 ? -1 : 1;
    const want = q[o + i] * cos[p * 64 + i] + sign * q[o + j] * sin[p * 64 + i];
    const size = Math.abs(q[o + i] * cos[p * 64 + i]) + Math.abs(q[o + j] * sin[p * 64 + i]);
    assert.ok(Math.abs(qr[o + i] - want) <= 3 * EPS * size, "rope");
  }
  // one head's causal attention: scores (65 roundings), softmax (P + 3), z (P)
  const kk = randn(P * 64, next), v = randn(P * 64, next), qq = randn(P * 64, next);
  const pat = alloc(4 * P * P), Z = alloc(4 * P * 64);
  k.attend(put(qq), 64, put(kk), 64, put(v), 64, P, pat, Z, 64);
  const pattern = f32(pat, P * P), z = f32(Z, P * 64);
  for (let a = 0; a < P; a++) {
    const s = [], size = [];
    for (let b = 0; b <= a; b++) {
      let t = 0, u = 0;
      for (let e = 0; e < 64; e++) { t += qq[a * 64 + e] * kk[b * 64 + e]; u += Math.abs(qq[a * 64 + e] * kk[b * 64 + e]); }
      s.push(t / 8); size.push(u / 8);
    }
    const max = Math.max(...s), ex = s.map((t) => Math.exp(t - max)), tot = ex.reduce((x1, x2) => x1 + x2, 0);
    const bound = (65 + P + 3) * EPS * Math.max(1, ...size);
    let vmax = 0;
    for (let b = 0; b <= a; b++) {
      assert.ok(Math.abs(pattern[a * P + b] - ex[b] / tot) <= bound, "pattern");
      for (let e = 0; e < 64; e++) vmax = Math.max(vmax, Math.abs(v[b * 64 + e]));
    }
    for (let b = a + 1; b < P; b++) assert.equal(pattern[a * P + b], 0, "the causal mask");
    for (let e = 0; e < 64; e++) {
      let want = 0;
      for (let b = 0; b <= a; b++) want += (ex[b] / tot) * v[b * 64 + e];
      assert.ok(Math.abs(z[a * 64 + e] - want) <= (a + 1) * (bound + P * EPS) * vmax, "z");
    }
  }
  // SwiGLU: g / (1 + exp(-g)) * u, five roundings
  const gate = randn(50, next, 6), up = randn(50, next), GA = put(gate);
  k.swiglu(GA, put(up), 50);
  const out = f32(GA, 50);
  for (let i = 0; i < 50; i++) {
    const want = (gate[i] / (1 + Math.exp(-gate[i]))) * up[i];
    assert.ok(Math.abs(out[i] - want) <= 5 * EPS * Math.abs(want) + 1e-30, `swiglu ${out[i]} vs ${want}`);
  }
});

// --- a tiny model of SmolLM2's shape, loaded as the page loads one ---------------------------

const CFG = { n_layers: 3, d_model: 64, n_heads: 4, n_key_value_heads: 2, d_head: 64, d_mlp: 96, d_vocab: 40, eps: 1e-5 };
const T = 12;

function tinyModel(seed) {
  const next = rng(seed), { n_layers: L, d_model: D, n_heads: H, n_key_value_heads: KV, d_head: E, d_mlp: F, d_vocab: V } = CFG;
  const files = [], tensors = { layers: [] }, ref = { layers: [] };
  const file = (name, parts) => {
    let size = 0;
    const entries = {}, chunks = [];
    for (const [key, format, shape, bytes] of parts) {
      const pad = (16 - (size % 16)) % 16;
      chunks.push(new Uint8Array(pad)); size += pad;
      entries[key] = { file: name, offset: size, bytes: bytes.length, format, shape };
      chunks.push(bytes); size += bytes.length;
    }
    const data = new Uint8Array(size);
    let at = 0;
    for (const c of chunks) { data.set(c, at); at += c.length; }
    files.push({ name, bytes: size, data });
    return entries;
  };
  const f32bytes = (a) => new Uint8Array(Float32Array.from(a).buffer);
  for (let l = 0; l < L; l++) {
    const w = {}, parts = [];
    for (const [key, N, K] of [["W_Q", H * E, D], ["W_K", KV * E, D], ["W_V", KV * E, D], ["W_O", D, H * E],
      ["W_gate", F, D], ["W_in", F, D], ["W_out", D, F]]) {
      const b = q4Blocks(N, K, next);
      w[key] = b.w; parts.push([key, "q4_1", [N, K], b.bytes]);
    }
    w.ln1 = randn(D, next, 1); w.ln2 = randn(D, next, 1);
    parts.unshift(["ln1", "f32", [D], f32bytes(w.ln1)]);
    parts.splice(5, 0, ["ln2", "f32", [D], f32bytes(w.ln2)]);
    tensors.layers.push(file(`layer-${l}.bin`, parts));
    ref.layers.push(w);
  }
  const emb = q8Blocks(V, D, next);
  ref.W_E = emb.w;
  Object.assign(tensors, file("embed.bin", [["W_E", "q8_0", [V, D], emb.bytes]]));
  ref.ln_final = randn(D, next);
  ref.cos = new Float32Array(T * 64); ref.sin = new Float32Array(T * 64);
  for (let p = 0; p < T; p++) for (let i = 0; i < 64; i++) {
    const angle = p * 10000 ** (-(i % 32) / 32);
    ref.cos[p * 64 + i] = Math.cos(angle); ref.sin[p * 64 + i] = Math.sin(angle);
  }
  ref.z_mean = randn(L * H * E, next, 0.3);
  Object.assign(tensors, file("tables.bin", [["ln_final", "f32", [D], f32bytes(ref.ln_final)],
    ["rotary_cos", "f32", [T, 64], f32bytes(ref.cos)], ["rotary_sin", "f32", [T, 64], f32bytes(ref.sin)],
    ["z_mean", "f32", [L, H, E], f32bytes(ref.z_mean)]]));
  const manifest = { name: "tiny", version: 1, max_tokens: T, config: CFG, tensors,
    files: files.map(({ name, bytes }) => ({ name, bytes })),
    induction: { scores: Array.from({ length: L }, () => Array(H).fill(0)) } };
  const source = {
    manifest: async () => manifest,
    file: async (name, put) => {  // in uneven chunks, as a network delivers them
      const data = files.find((f) => f.name === name).data;
      for (let at = 0; at < data.length; at += 1000 + (at % 7)) put(data.subarray(at, Math.min(data.length, at + 1000 + (at % 7))));
    },
  };
  return { source, ref };
}

// the same model in float64, written from the equations (TransformerLens's order)
function reference(ref, tokens, ablate = {}) {
  const { n_layers: L, d_model: D, n_heads: H, n_key_value_heads: KV, d_head: E, d_mlp: F, d_vocab: V, eps } = CFG;
  const P = tokens.length;
  const mm = (x, K, w, N) => {  // x [P, K] times w [N, K]^T
    const y = new Float64Array(P * N);
    for (let p = 0; p < P; p++) for (let n = 0; n < N; n++) {
      let s = 0;
      for (let i = 0; i < K; i++) s += x[p * K + i] * w[n * K + i];
      y[p * N + n] = s;
    }
    return y;
  };
  const rms = (x, g) => {
    const y = new Float64Array(P * D);
    for (let p = 0; p < P; p++) {
      let ss = 0;
      for (let i = 0; i < D; i++) ss += x[p * D + i] ** 2;
      const r = Math.sqrt(ss / D + eps);
      for (let i = 0; i < D; i++) y[p * D + i] = (x[p * D + i] / r) * g[i];
    }
    return y;
  };
  const rope = (x, n) => {
    const y = new Float64Array(x.length);
    for (let p = 0; p < P; p++) for (let h = 0; h < n; h++) for (let i = 0; i < 64; i++) {
      const o = p * n * 64 + h * 64, j = i < 32 ? i + 32 : i - 32, sign = i < 32 ? -1 : 1;
      y[o + i] = x[o + i] * ref.cos[p * 64 + i] + sign * x[o + j] * ref.sin[p * 64 + i];
    }
    return y;
  };
  let x = new Float64Array(P * D);
  for (let p = 0; p < P; p++) for (let i = 0; i < D; i++) x[p * D + i] = ref.W_E[tokens[p] * D + i];
  const patterns = [];
  for (let l = 0; l < L; l++) {
    const w = ref.layers[l], n1 = rms(x, w.ln1);
    const q = rope(mm(n1, D, w.W_Q, H * E), H), k = rope(mm(n1, D, w.W_K, KV * E), KV), v = mm(n1, D, w.W_V, KV * E);
    const z = new Float64Array(P * H * E), pats = [];
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / (H / KV)), pat = new Float64Array(P * P);
      for (let a = 0; a < P; a++) {
        const s = [];
        for (let b = 0; b <= a; b++) {
          let t = 0;
          for (let e = 0; e < E; e++) t += q[a * H * E + h * E + e] * k[b * KV * E + g * E + e];
          s.push(t / 8);
        }
        const max = Math.max(...s), ex = s.map((t) => Math.exp(t - max)), tot = ex.reduce((p1, p2) => p1 + p2, 0);
        for (let b = 0; b <= a; b++) pat[a * P + b] = ex[b] / tot;
        for (let e = 0; e < E; e++) {
          let t = 0;
          for (let b = 0; b <= a; b++) t += pat[a * P + b] * v[b * KV * E + g * E + e];
          const how = ablate[`${l}.${h}`];
          z[a * H * E + h * E + e] = how === "zero" ? 0 : how === "mean" ? ref.z_mean[(l * H + h) * E + e] : t;
        }
      }
      pats.push(pat);
    }
    patterns.push(pats);
    const attn = mm(z, H * E, w.W_O, D), mid = x.map((t, i) => t + attn[i]);
    const n2 = rms(mid, w.ln2), gate = mm(n2, D, w.W_gate, F), up = mm(n2, D, w.W_in, F);
    const act = gate.map((t, i) => (t / (1 + Math.exp(-t))) * up[i]);
    const out = mm(act, F, w.W_out, D);
    x = mid.map((t, i) => t + out[i]);
  }
  return { logits: mm(rms(x, ref.ln_final), D, ref.W_E, V), patterns };
}

// The worst-case rounding of the tiny model's float32 pass, counted as smollm2_export's
// docstring counts it for SmolLM2 (RMSNorm D + 4, projections D + 1, RoPE 3, scores E + 1,
// softmax P + 3, z P, W_O H E + 1, MLP D + 1 + 5 + F + 1, two additions), times the size
// of the result: the house's bound (circuitbook.book.rounding_bound), which counts
// roundings along the longest path and leaves out their growth through later layers.
function bound(P, scale) {
  const { n_layers: L, d_model: D, n_heads: H, d_head: E, d_mlp: F } = CFG;
  const layer = 2 * (D + 4) + (D + 1) + 3 + (E + 1) + (P + 3) + P + (H * E + 1) + (D + 1) + 5 + (F + 1) + 2;
  return (L * layer + D + 4 + D + 1) * EPS * scale;
}

test("the page's forward pass on a tiny model agrees with a float64 reference", async () => {
  const { source, ref } = tinyModel(7);
  let calls = 0;
  const net = await m.loadSmolLM2(source, () => calls++);
  assert.ok(calls > 0, "progress is reported");
  const next = rng(8);
  for (const P of [1, 5, T]) {
    const tokens = Array.from({ length: P }, () => Math.floor(next() * CFG.d_vocab));
    for (const ablate of [{}, { "1.2": "zero" }, { "0.1": "mean", "2.3": "zero" }]) {
      const run = m.forward(net, tokens, ablate), want = reference(ref, tokens, ablate);
      const scale = Math.max(1, ...want.logits.map(Math.abs));
      let err = 0;
      for (let i = 0; i < want.logits.length; i++) err = Math.max(err, Math.abs(run.logits[i] - want.logits[i]));
      assert.ok(err <= bound(P, scale), `${P} tokens, ${JSON.stringify(ablate)}: logits off by ${err}`);
      for (let l = 0; l < CFG.n_layers; l++) for (let h = 0; h < CFG.n_heads; h++) {
        const pat = run.pattern(l, h);
        for (let i = 0; i < P * P; i++) assert.ok(Math.abs(pat[i] - want.patterns[l][h][i]) <= bound(P, 1), "pattern");
      }
      for (const [key, how] of Object.entries(ablate)) {  // the ablated head's z is the substitute, exactly
        const [l, h] = key.split(".").map(Number), z = run.z(l);
        for (let p = 0; p < P; p++) for (let e = 0; e < 64; e++)
          assert.equal(z[p * 256 + h * 64 + e], how === "zero" ? 0 : Math.fround(ref.z_mean[(l * 4 + h) * 64 + e]));
      }
    }
  }
});

test("a re-run from the first changed layer gives the full pass's numbers, bit for bit", async () => {
  const { source } = tinyModel(9);
  const net = await m.loadSmolLM2(source);
  const tokens = [3, 1, 4, 1, 5, 9, 2, 6];
  m.forward(net, tokens, {});
  const partial = m.forward(net, tokens, { "2.1": "mean" });
  assert.equal(partial.from, 2, "layers 0 and 1 were not recomputed");
  const kept = Array.from(partial.logits);
  net.state = null;
  const full = m.forward(net, tokens, { "2.1": "mean" });
  assert.equal(full.from, 0);
  assert.deepEqual(Array.from(full.logits), kept);
  assert.equal(m.forward(net, tokens, { "2.1": "mean" }).from, CFG.n_layers, "nothing changed: nothing recomputed");
});

test("bad input is refused with a message that names it", async () => {
  const { source } = tinyModel(10);
  const net = await m.loadSmolLM2(source);
  assert.throws(() => m.forward(net, [], {}), /1 to 12 tokens/);
  assert.throws(() => m.forward(net, [40], {}), /token id 40/);
  assert.throws(() => m.forward(net, [1.5], {}), /token id 1.5/);
  assert.throws(() => m.forward(net, [1], { "3.0": "mean" }), /no head 3.0/);
  assert.throws(() => m.forward(net, [1], { "0.0": "half" }), /"zero" or "mean"/);
  const short = { ...source, file: async (name, put) => source.file(name, (c) => put(c.subarray(0, c.length - 1))) };
  await assert.rejects(m.loadSmolLM2(short), /the manifest says/);
});
