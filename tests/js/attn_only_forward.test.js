// The page's forward pass (src/circuitbook/widgets/attn_only_forward.js) against
// TransformerLens, on fixtures written at test time by tests/js/export_fixtures.py
// (`make test-js` writes them to a temporary file and passes its path in
// CIRCUITBOOK_JS_FIXTURES): the logits and patterns, the per-token loss, zero and mean
// ablation (circuitbook.heads.ablate) and the path expansion
// (circuitbook.paths.logit_attribution). The page loads toy-2l's float32 weights and computes
// in float64; the Python side computes in float32. Their difference is its rounding, which is
// at most `terms` roundings of float32's eps times the run's largest activation
// (circuitbook.book.rounding_bound; the exporter counts the terms of each kind of output).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { forward, loadModel, losses, pathTerms } from "../../src/circuitbook/widgets/attn_only_forward.js";
import { sequenceData } from "../../src/circuitbook/widgets/induction_stepper.js";

const FLOAT32_EPS = 2 ** -23; // torch.finfo(torch.float32).eps

function fixtures() {
  const path = process.env.CIRCUITBOOK_JS_FIXTURES;
  if (!path) {
    throw new Error("CIRCUITBOOK_JS_FIXTURES is not set: run `make test-js`, or " +
      "`python tests/js/export_fixtures.py OUT.json` and set it to OUT.json");
  }
  return JSON.parse(readFileSync(path, "utf8"));
}

const fx = fixtures();
const model = loadModel(fx.model);

// The largest |got - want| over a flat Float64Array and a nested array of the same entries
function maxError(got, want) {
  const flat = want.flat(Infinity);
  assert.equal(got.length, flat.length, "as many entries as TransformerLens gives");
  let worst = 0;
  for (let i = 0; i < flat.length; i++) worst = Math.max(worst, Math.abs(got[i] - flat[i]));
  return worst;
}

const tolerance = (c) => c.terms * FLOAT32_EPS * c.scale;
const within = (got, want, bound, what) => {
  const err = maxError(got, want);
  assert.ok(err <= bound, `${what} differs by ${err}, over the bound ${bound}`);
  return err;
};

test("the fixtures are TransformerLens's float32 runs of toy-2l", () => {
  assert.equal(fx.dtype, "torch.float32");
  assert.equal(model.cfg.n_layers, 2);
  assert.ok(fx.cases.length >= 3);
});

for (const c of fx.cases) {
  const name = `${c.tokens.length} tokens`;

  test(`logits match TransformerLens within float32 rounding (${name})`, () => {
    const run = forward(model, c.tokens);
    assert.equal(run.logits.length, c.tokens.length * model.cfg.d_vocab);
    const err = maxError(run.logits, c.logits);
    assert.ok(err <= tolerance(c), `logits differ by ${err}, over the bound ${tolerance(c)}`);
  });

  test(`every head's attention pattern matches TransformerLens (${name})`, () => {
    const run = forward(model, c.tokens);
    for (let l = 0; l < model.cfg.n_layers; l++) {
      for (let h = 0; h < model.cfg.n_heads; h++) {
        const err = maxError(run.layers[l][h].pattern, c.patterns[l][h]);
        assert.ok(err <= tolerance(c), `L${l}H${h}'s pattern differs by ${err}, over ${tolerance(c)}`);
      }
    }
  });

  if (c.losses) {
    test(`the loss at each position matches TransformerLens's (${name})`, () => {
      const got = losses(forward(model, c.tokens));
      assert.equal(got.length, c.tokens.length - 1);
      within(Float64Array.from(got), c.losses, c.loss_terms * FLOAT32_EPS * c.scale, "the per-token loss");
    });
  }

  test(`zero and mean ablation match circuitbook.heads.ablate (${name})`, () => {
    for (const a of c.ablations) {
      const what = Object.entries(a.ablate).map(([k, v]) => `${v}-ablating ${k}`).join(", ");
      within(forward(model, c.tokens, a.ablate).logits, a.logits, c.terms * FLOAT32_EPS * a.scale, what);
    }
  });

  test(`the path terms match circuitbook.paths.logit_attribution (${name})`, () => {
    const run = forward(model, c.tokens), last = c.tokens.length - 1;
    const terms = pathTerms(model, run, last);
    assert.deepEqual(terms.map((t) => t.label).sort(), Object.keys(c.paths).sort());
    const bound = c.path_terms * FLOAT32_EPS * c.path_scale;
    for (const t of terms) within(t.logits, c.paths[t.label], bound, `path term ${t.label}`);
    // in float64 the terms sum to the page's own logits, to float64 rounding of the sum
    const V = model.cfg.d_vocab, row = run.logits.subarray(last * V, (last + 1) * V);
    const sum = row.map((_, j) => terms.reduce((a, t) => a + t.logits[j], 0));
    within(sum, Array.from(row), terms.length * 64 * 2 ** -52 * c.path_scale, "the sum of the terms");
  });
}

test("with heads ablated, the path terms still sum to the ablated logits", () => {
  // no Python expansion of an ablated model to compare with term by term: the ablated head's
  // constant output is its own term, and the sum must be heads.ablate's logits
  const c = fx.cases[0], last = c.tokens.length - 1, V = model.cfg.d_vocab;
  for (const a of c.ablations) {
    const run = forward(model, c.tokens, a.ablate), terms = pathTerms(model, run, last, a.ablate);
    const sum = new Float64Array(V).map((_, j) => terms.reduce((s, t) => s + t.logits[j], 0));
    const want = a.logits[last];
    within(sum, want, c.path_terms * FLOAT32_EPS * a.scale, `the terms with ${JSON.stringify(a.ablate)}`);
  }
});

test("the loss bound is tight enough to see the wrong target", () => {
  const c = fx.cases[0], run = forward(model, c.tokens);
  const wrong = { ...run, tokens: run.tokens.map((t) => (t + 1) % model.cfg.d_vocab) };
  const moved = maxError(Float64Array.from(losses(wrong)), c.losses);
  assert.ok(moved > 100 * c.loss_terms * FLOAT32_EPS * c.scale, `shifting every target moved the loss by ${moved} only`);
});

test("the page refuses a model that is not shortformer", () => {
  // the page adds W_pos to the queries' and keys' input only: a model with standard
  // positional embeddings would run silently wrong, so it is refused by name
  const standard = { ...fx.model, config: { ...fx.model.config, positional: "standard" } };
  assert.throws(() => loadModel(standard), /shortformer models only.*"standard"/);
});

test("the bound is tight enough to see one head removed", () => {
  // zero-ablating layer 1's strongest head moves the logits far past the rounding bound,
  // so a comparison that passes above is not passing for any answer
  const c = fx.cases[0];
  const moved = Math.max(...[0, 1, 2, 3].map((h) => maxError(forward(model, c.tokens, { [`1.${h}`]: "zero" }).logits, c.logits)));
  assert.ok(moved > 100 * tolerance(c), `ablating a head moved the logits by ${moved} only`);
});

test("the stepper reads TransformerLens's attention and keeps the reader's labels", () => {
  // a reader who typed ids sees ids: the labels given are the ones shown, whatever the
  // text's words for those ids are
  const c = fx.cases[0], ids = c.tokens, query = ids.length - 1;
  const labels = ids.map((t) => `t${t}`);
  const seq = sequenceData(model, ids, labels, (t) => `word${t}`, "0.2", "1.1");
  const earlier = ids.lastIndexOf(ids[query], query - 1);
  assert.deepEqual(seq.tokens, labels);
  assert.equal(seq.expected, labels[earlier + 1]);
  assert.equal(seq.earlier, earlier);
  const want = c.patterns[1][1][query][earlier + 1];
  assert.ok(Math.abs(seq.attention_on_target - want) <= 5e-4 + tolerance(c),
    `attention ${seq.attention_on_target} against TransformerLens's ${want}`);
  assert.ok(seq.model_top.every(([label]) => label.startsWith("word")), "predictions are named by labelOf");
});
