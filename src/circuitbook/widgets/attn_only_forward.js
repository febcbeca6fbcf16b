// The forward pass of the book's attention-only toy models, in the page (no kernel).
// One module for every widget that runs the model (the induction lab and the toy model's
// induction stepper import it; circuitbook.widgets.frontend.esm joins it into each). Row
// vectors and TransformerLens's names and shapes; weights arrive as float32 (exported by
// circuitbook.widgets.lab_export) and every product is accumulated in float64. The models
// are shortformer (W_pos enters only the queries and keys; lab_export exports no other
// kind). Chapter 13 teaches the path expansion at the end.

function decode(b64) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return Float64Array.from(new Float32Array(bytes.buffer));
}

// spec: {name, config, tensors: {name: [shape, base64 float32 little-endian]}} -> a model
export function loadModel(spec) {
  if (spec.config.positional !== "shortformer") {
    throw new Error(`${spec.name}: the page runs shortformer models only, not ` +
      `positional embeddings of type ${JSON.stringify(spec.config.positional)}`);
  }
  const w = {};
  for (const [name, [, b64]] of Object.entries(spec.tensors)) w[name] = decode(b64);
  return { name: spec.name, cfg: spec.config, w };
}

// How long a widget with no site to load from waits for the kernel's answer before it says
// so (it keeps listening: a kernel that answers later still gets the model drawn).
export const KERNEL_WAIT_MS = 15000;

// The record of the widget's model (its trait model_name): from the widget's trait weights
// (live), from the site (_static/lab/, by a script tag, which works from file:// too), or
// asked of the kernel (lab.py's answer_weights puts it in weights). On the site it rejects
// with a message for the reader when the file does not load (a static page has no kernel to
// ask). With no site, if no kernel has answered within `kernelWait` ms, `onSlow(message)`
// tells the reader why nothing is drawn yet, and the promise still resolves when the
// weights arrive.
export function loadRecord(model, { kernelWait = KERNEL_WAIT_MS, onSlow = () => {} } = {}) {
  const name = model.get("model_name");
  const have = () => (window.cbLabModels || {})[name] || (model.get("weights") && JSON.parse(model.get("weights")));
  if (have()) return Promise.resolve(have());
  return new Promise((resolve, reject) => {
    const root = document.documentElement.dataset.content_root;
    if (root === undefined) {  // Jupyter or Colab: the kernel sends the weights
      const timer = setTimeout(() => onSlow(`no kernel has sent the weights of ${name} yet: ` +
        "run this notebook's cells (in Jupyter or Colab) and the model will load"), kernelWait);
      model.on("change:weights", () => { if (have()) { clearTimeout(timer); resolve(have()); } });
      model.send({ ask: "weights" });
      return;
    }
    const script = document.createElement("script");
    script.src = `${root}_static/lab/${name}.js`;
    script.onload = () => (have() ? resolve(have())
      : reject(new Error(`${script.src} loaded but holds no model ${name}`)));
    script.onerror = () => reject(new Error(`the weights of ${name} did not load from ${script.src} ` +
      "(the site is missing the file, or the page was opened without its _static folder)"));
    document.head.append(script);
  });
}

// x [P, n] times the slice of `mat` at `offset`, [n, m] -> [P, m] (plus bias[m] at bOff)
function matmul(x, P, n, mat, offset, m, bias = null, bOff = 0) {
  const out = new Float64Array(P * m);
  for (let p = 0; p < P; p++) {
    const row = p * m;
    if (bias) for (let j = 0; j < m; j++) out[row + j] = bias[bOff + j];
    for (let i = 0; i < n; i++) {
      const xi = x[p * n + i], w = offset + i * m;
      if (xi !== 0) for (let j = 0; j < m; j++) out[row + j] += xi * mat[w + j];
    }
  }
  return out;
}

// softmax(q k^T / sqrt(d_head)) with the causal mask: scores and pattern, each [P, P]
function attend(q, k, P, E) {
  const scores = new Float64Array(P * P).fill(-Infinity);
  const pattern = new Float64Array(P * P);
  const scale = Math.sqrt(E);
  for (let a = 0; a < P; a++) {
    let max = -Infinity;
    for (let b = 0; b <= a; b++) {
      let s = 0;
      for (let e = 0; e < E; e++) s += q[a * E + e] * k[b * E + e];
      scores[a * P + b] = s / scale;
      max = Math.max(max, s / scale);
    }
    let total = 0;
    for (let b = 0; b <= a; b++) total += (pattern[a * P + b] = Math.exp(scores[a * P + b] - max));
    for (let b = 0; b <= a; b++) pattern[a * P + b] /= total;
  }
  return { scores, pattern };
}

// pattern [P, P] times v [P, E] -> [P, E]
function mix(pattern, v, P, E) {
  const z = new Float64Array(P * E);
  for (let a = 0; a < P; a++)
    for (let b = 0; b <= a; b++) {
      const w = pattern[a * P + b];
      for (let e = 0; e < E; e++) z[a * E + e] += w * v[b * E + e];
    }
  return z;
}

// The z an ablated head writes instead of its own: zeros, or its exported mean z [d_head]
function ablatedZ(model, l, h, how, P) {
  const E = model.cfg.d_head, z = new Float64Array(P * E);
  if (how === "mean") {
    const off = (l * model.cfg.n_heads + h) * E;
    for (let p = 0; p < P; p++) for (let e = 0; e < E; e++) z[p * E + e] = model.w.z_mean[off + e];
  }
  return z;
}

// One forward pass on `tokens` (ints). ablate: {"l.h": "zero" | "mean"}, as
// circuitbook.heads.ablate with reference means. Returns logits [P, V], and per layer and
// head the scores and pattern [P, P], z [P, d_head] and output z W_O [P, d_model].
export function forward(model, tokens, ablate = {}) {
  const { n_layers: L, d_model: D, n_heads: H, d_head: E, d_vocab: V } = model.cfg;
  const w = model.w, P = tokens.length;
  let resid = new Float64Array(P * D);
  for (let p = 0; p < P; p++) for (let i = 0; i < D; i++) resid[p * D + i] = w.W_E[tokens[p] * D + i];
  const layers = [];
  for (let l = 0; l < L; l++) {
    const qkIn = new Float64Array(P * D);
    for (let i = 0; i < P * D; i++) qkIn[i] = resid[i] + w.W_pos[i];  // W_pos[:P]: Q and K only
    const next = Float64Array.from(resid);
    for (let p = 0; p < P; p++) for (let j = 0; j < D; j++) next[p * D + j] += w.b_O[l * D + j];
    const heads = [];
    for (let h = 0; h < H; h++) {
      const m = (l * H + h) * D * E, b = (l * H + h) * E;
      const q = matmul(qkIn, P, D, w.W_Q, m, E, w.b_Q, b);
      const k = matmul(qkIn, P, D, w.W_K, m, E, w.b_K, b);
      const v = matmul(resid, P, D, w.W_V, m, E, w.b_V, b);
      const { scores, pattern } = attend(q, k, P, E);
      const how = ablate[`${l}.${h}`];
      const z = how ? ablatedZ(model, l, h, how, P) : mix(pattern, v, P, E);
      const out = matmul(z, P, E, w.W_O, (l * H + h) * E * D, D);
      for (let i = 0; i < P * D; i++) next[i] += out[i];
      heads.push({ scores, pattern, z, out });
    }
    layers.push(heads);
    resid = next;
  }
  const logits = matmul(resid, P, D, w.W_U, 0, V, w.b_U, 0);
  return { tokens: tokens.slice(), logits, layers, P, V };
}

// log-softmax of row p of logits [P, V]
export function logProbs(run, p) {
  const row = run.logits.subarray(p * run.V, (p + 1) * run.V);
  let max = -Infinity;
  for (const x of row) max = Math.max(max, x);
  let total = 0;
  for (const x of row) total += Math.exp(x - max);
  const lse = max + Math.log(total);
  return Array.from(row, (x) => x - lse);
}

// Loss at each position p < P - 1 of predicting tokens[p + 1]: -log p(t_{p+1} | t_<=p)
export function losses(run) {
  const out = [];
  for (let p = 0; p + 1 < run.P; p++) out.push(-logProbs(run, p)[run.tokens[p + 1]]);
  return out;
}

// The path expansion of the logits at position p (chapter 13; circuitbook.paths): with the
// run's patterns held fixed, every head is linear, and the logits are a sum over paths: the
// direct path e W_U + b_U, each head's path, each chain of heads (virtual heads), and the
// paths that start at a layer's b_O. An ablated head writes a constant (its mean z W_O, or
// nothing): that is its own path, and what later heads make of it. Returns
// [{label, logits: Float64Array[V]}]; the terms sum to run.logits[p].
export function pathTerms(model, run, p, ablate = {}) {
  const { n_layers: L, d_model: D, n_heads: H, d_head: E, d_vocab: V } = model.cfg;
  const w = model.w, P = run.P;
  const e = new Float64Array(P * D);
  for (let q = 0; q < P; q++) for (let i = 0; i < D; i++) e[q * D + i] = w.W_E[run.tokens[q] * D + i];
  let streams = [{ src: "embed", path: [], x: e }];
  for (let l = 0; l < L; l++) {
    const added = [];
    for (const s of streams) {
      for (let h = 0; h < H; h++) {
        const head = run.layers[l][h], how = ablate[`${l}.${h}`];
        let z;
        if (how) {  // a constant: a source of its own, from the bare embedding's stream
          if (s.src !== "embed" || s.path.length) continue;
          z = head.z;
        } else {
          const m = (l * H + h) * D * E;
          const bias = s.src === "embed" && !s.path.length ? w.b_V : null;  // rowsum(A) b_V W_O
          z = mix(head.pattern, matmul(s.x, P, D, w.W_V, m, E, bias, (l * H + h) * E), P, E);
        }
        added.push({ src: s.src, path: s.path.concat([[l, h]]), x: matmul(z, P, E, w.W_O, (l * H + h) * E * D, D) });
      }
    }
    const bO = new Float64Array(P * D);
    for (let q = 0; q < P; q++) for (let j = 0; j < D; j++) bO[q * D + j] = w.b_O[l * D + j];
    streams = streams.concat(added, [{ src: l, path: [], x: bO }]);
  }
  const terms = new Map();
  for (const s of streams) {
    const label = s.src !== "embed" ? `b_O L${s.src}` : s.path.length === 0 ? "direct"
      : s.path.map(([l, h]) => `L${l}H${h}`).join("\u2192");
    const out = matmul(s.x.subarray(p * D, (p + 1) * D), 1, D, w.W_U, 0, V, label === "direct" ? w.b_U : null, 0);
    if (terms.has(label)) terms.get(label).forEach((_, j, a) => { a[j] += out[j]; });
    else terms.set(label, out);
  }
  return [...terms].map(([label, logits]) => ({ label, logits }));
}
