// The widgets' pure parts in Node (no browser): reading the token box, the bars' scale, the
// lab's ablation cycle and random draws, the stepper's import and labels, and what a widget
// says when its model's weights do not load. tests/js/fake_dom.js stands in for the page
// where a part builds elements; tests/browser drives the real widgets on the built site.
import assert from "node:assert/strict";
import { afterEach, test } from "node:test";

import { fakeModel, installDocument, removeDocument } from "./fake_dom.js";
import { barWidth, bars } from "../../src/circuitbook/widgets/dom.js";
import { droppedNote, parseTokens } from "../../src/circuitbook/widgets/token_input.js";
import { loadRecord } from "../../src/circuitbook/widgets/attn_only_forward.js";

afterEach(removeDocument);

const TOY = { dVocab: 64, nCtx: 64 };

test("junk in the token box is dropped, and named with the reason", () => {
  const read = parseTokens("hello t3 99 t70 5,6", TOY);
  assert.deepEqual(read.ids, [3, 5, 6]);
  assert.deepEqual(read.labels, ["t3", "t5", "t6"]);
  assert.deepEqual(read.dropped, [{ piece: "hello", why: "not a token" }, { piece: "99", why: "past t63" },
    { piece: "t70", why: "past t63" }]);
  assert.equal(droppedNote(read, 64), 'Dropped "hello" (not a token); "99", "t70" (past t63).');
  assert.equal(droppedNote(parseTokens("t1 2", TOY), 64), "");
});

test("tokens past the context are cut, and the cut is said", () => {
  const read = parseTokens(Array.from({ length: 70 }, (_, i) => `t${i % 64}`).join(" "), TOY);
  assert.equal(read.ids.length, 64);
  assert.equal(read.cut, 6);
  assert.match(droppedNote(read, 64), /kept the first 64 tokens .* cut 6/);
});

test("typed ids keep their spelling; words of the text are read as their ids", () => {
  const words = { Mr: 1, Dursley: 2 };
  const read = parseTokens("t1 t2 Mr 2 Dursley", { ...TOY, words });
  assert.deepEqual(read.ids, [1, 2, 1, 2, 2]);
  assert.deepEqual(read.labels, ["t1", "t2", "Mr", "t2", "Dursley"]);
});

test("a probability is drawn on a 0-1 scale, not against the top value", () => {
  assert.equal(barWidth(0.04, 1), 4);
  assert.equal(barWidth(-0.5, 2), 25);
  assert.equal(barWidth(3, 1), 100);
  assert.throws(() => barWidth(1, 0), /must be positive/);
  installDocument();
  const box = bars([["t1", 0.04, false], ["t2", 0.02, true]], { full: 1 });
  assert.deepEqual(box.findAll("cb-bar").map((b) => b.style.width), ["4%", "2%"]);
  assert.deepEqual(box.findAll("cb-bar-value").map((v) => v.textContent), ["0.04", "0.02"]);
  assert.equal(box.findAll("cb-mark").length, 1);
  // with no natural scale, the largest |value| is drawn full width; signed values say "+"
  const signed = bars([["a", 2, false], ["b", -1, false]], { signed: true, digits: 1 });
  assert.deepEqual(signed.findAll("cb-bar").map((b) => b.style.width), ["100%", "50%"]);
  assert.deepEqual(signed.findAll("cb-bar-value").map((v) => v.textContent), ["+2.0", "-1.0"]);
  assert.equal(signed.findAll("cb-neg").length, 1);
});

test("a click on a head cycles it through zero, mean and back, keyed by the head", async () => {
  const { nextAblation } = await import("../../src/circuitbook/widgets/lab.js");
  let ablated = { "1.3": "zero" };
  const seen = [];
  for (let i = 0; i < 4; i++) {
    ablated = nextAblation(ablated, "0.2");
    seen.push(ablated["0.2"]);
    assert.equal(ablated["1.3"], "zero", "another head's ablation is kept");
    assert.ok(!("undefined" in ablated), "no ablation is keyed by the string undefined");
  }
  assert.deepEqual(seen, ["zero", "mean", undefined, "zero"]);
  assert.deepEqual(Object.keys(nextAblation({ "0.2": "mean" }, "0.2")), []);
});

test("each random draw is a fresh repeated sequence", async () => {
  const { repeatedRandom } = await import("../../src/circuitbook/widgets/lab.js");
  const draws = Array.from({ length: 20 }, () => repeatedRandom(64, 64));
  for (const d of draws) {
    const n = d.length / 2;
    assert.ok(n >= 16 && n <= 32 && Number.isInteger(n), `a segment of ${n} tokens`);
    assert.deepEqual(d.slice(0, n), d.slice(n));
    assert.ok(d.every((t) => Number.isInteger(t) && t >= 0 && t < 64));
  }
  assert.equal(new Set(draws.map((d) => d.join())).size, draws.length, "two draws were the same");
  assert.ok(repeatedRandom(64, 20).length <= 20, "a draw fits the context");
});

test("the widgets import with no page: the stepper makes no canvas at import", async () => {
  assert.equal(globalThis.document, undefined);
  for (const name of ["induction_stepper", "lab", "composition_builder", "explore", "quiz", "progress"]) {
    const mod = await import(`../../src/circuitbook/widgets/${name}.js`);
    assert.equal(typeof mod.default.render, "function", name);
  }
});

test("weights missing from the site: the promise rejects with a message naming the file", async () => {
  const document = installDocument({ contentRoot: "../../" });
  const model = fakeModel({ model_name: "toy-2l", weights: "" });
  const pending = loadRecord(model);
  const [script] = document.head.children;
  assert.equal(script.src, "../../_static/lab/toy-2l.js");
  script.onerror();
  await assert.rejects(pending, /weights of toy-2l did not load from \.\.\/\.\.\/_static\/lab\/toy-2l\.js/);
  assert.deepEqual(model.sent, [], "a static page has no kernel to ask");
});

test("a script that loads but holds no model is an error, not a wait", async () => {
  const document = installDocument({ contentRoot: "./" });
  const pending = loadRecord(fakeModel({ model_name: "toy-2l", weights: "" }));
  document.head.children[0].onload();
  await assert.rejects(pending, /loaded but holds no model toy-2l/);
});

test("no kernel answering: the reader is told, and a late answer still loads", async () => {
  installDocument();  // no content root: Jupyter or Colab
  const model = fakeModel({ model_name: "toy-2l", weights: "" });
  const said = [];
  const pending = loadRecord(model, { kernelWait: 5, onSlow: (m) => said.push(m) });
  assert.deepEqual(model.sent, [{ ask: "weights" }]);
  await new Promise((ok) => setTimeout(ok, 30));
  assert.equal(said.length, 1);
  assert.match(said[0], /no kernel has sent the weights of toy-2l yet: run this notebook's cells/);
  model.kernelSets("weights", JSON.stringify({ name: "toy-2l" }));
  assert.deepEqual(await pending, { name: "toy-2l" });
});

for (const name of ["lab", "induction_stepper"]) {
  test(`the ${name} widget shows the failure instead of "loading" forever`, async () => {
    const document = installDocument({ contentRoot: "./" });
    const { default: widget } = await import(`../../src/circuitbook/widgets/${name}.js`);
    const root = document.createElement("div");
    widget.render({ model: fakeModel({ model_name: "toy-2l", weights: "", data: {} }), el: root });
    const status = root.findAll(name === "lab" ? "cb-lab-status" : "cb-stepper-status")[0];
    assert.match(status.textContent, /loading/);
    document.head.children[0].onerror();
    await new Promise((ok) => setTimeout(ok, 0));
    assert.match(status.textContent, /^could not load the model: the weights of toy-2l did not load/);
    assert.ok(status.className.includes("cb-error"));
  });
}

// fire the listeners a test's click or change would
const fire = (node, type) => (node.listeners[type] || []).forEach((fn) => fn());

test("the quiz: answer every question to submit, then a score and feedback", async () => {
  const document = installDocument();
  const { default: quiz } = await import("../../src/circuitbook/widgets/quiz.js");
  const questions = [0, 1].map((i) => ({ question: `Q${i}`, options: ["a", "b"], correct: i, explanation: "because",
    why_not: i ? ["not a", null] : [null, "not b"] }));
  const model = fakeModel({ questions, answers: [null, null], submitted: false, attempts: 0 });
  model.on = () => {};
  const root = document.createElement("div");
  quiz.render({ model, el: root });
  const [submit] = root.findAll("cb-submit");
  assert.equal(root.findAll("cb-question").length, 2);
  assert.equal(submit.disabled, true, "a quiz with open questions cannot be submitted");
  const radios = () => root.findAll("cb-option").map((label) => label.children[0]);
  fire(radios()[0], "change");  // question 0: a (right)
  fire(radios()[2], "change");  // question 1: a (wrong)
  assert.deepEqual(model.get("answers"), [0, 0]);
  assert.equal(submit.disabled, false);
  fire(submit, "click");
  assert.equal(root.findAll("cb-summary")[0].textContent, "Score: 1 of 2.");
  const feedback = root.findAll("cb-feedback");
  assert.deepEqual(feedback.map((f) => f.attributes["data-right"]), ["true", "false"]);
  assert.match(feedback[1].innerHTML, /not a/);
  assert.doesNotMatch(feedback[1].innerHTML, /because/, "a wrong answer is not shown the right one's explanation");
});

test("the progress line says that progress needs a kernel until one answers", async () => {
  const document = installDocument();
  const { default: progress } = await import("../../src/circuitbook/widgets/progress.js");
  const model = fakeModel({ problem: "2", problems: ["1", "2"], done: [], still_open: { 2: ["ex_a"] } });
  const root = document.createElement("div");
  progress.render({ model, el: root });
  assert.match(root.findAll("cb-counter")[0].textContent, /tracked when this notebook runs/);
  assert.deepEqual(model.sent, [{ type: "hello" }]);
});
