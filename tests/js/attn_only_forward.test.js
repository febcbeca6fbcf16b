// The page's forward pass (src/circuitbook/widgets/attn_only_forward.js) against
// TransformerLens, on fixtures written at test time by tests/js/export_fixtures.py
// (`make test-js` writes them to a temporary file and passes its path in
// CIRCUITBOOK_JS_FIXTURES). The page loads toy-2l's float32 weights and computes in float64;
// TransformerLens computes in float32. Their difference is TransformerLens's rounding, which
// is at most `terms` roundings of float32's eps times the run's largest activation
// (circuitbook.book.rounding_bound with attn_only_forward_terms; the exporter counts them).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { forward, loadModel } from "../../src/circuitbook/widgets/attn_only_forward.js";

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
}

test("the bound is tight enough to see one head removed", () => {
  // zero-ablating layer 1's strongest head moves the logits far past the rounding bound,
  // so a comparison that passes above is not passing for any answer
  const c = fx.cases[0];
  const moved = Math.max(...[0, 1, 2, 3].map((h) => maxError(forward(model, c.tokens, { [`1.${h}`]: "zero" }).logits, c.logits)));
  assert.ok(moved > 100 * tolerance(c), `ablating a head moved the logits by ${moved} only`);
});
