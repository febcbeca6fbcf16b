// A graded multiple-choice quiz: answer every question to submit, then see per-question
// feedback, and "Try again" to change answers. Questions, answers and explanations arrive
// in the `questions` trait (HTML built in Python from trusted, authored text), so the quiz
// works on the static site with no kernel (it is for self-checking). Math arrives as
// span.cb-math with readable HTML inside and its TeX in data-tex; where MathJax is on the
// page we typeset the TeX in place of the HTML.

import { el } from "./dom.js";

function typeset(root) {
  const mj = window.MathJax;
  if (!mj || !mj.startup || !mj.startup.promise) return;
  mj.startup.promise.then(() => {
    if (typeof mj.tex2chtmlPromise !== "function") return;
    const spans = [...root.querySelectorAll("span.cb-math[data-tex]:not([data-typeset])")];
    return Promise.all(spans.map((span) =>
      mj.tex2chtmlPromise(span.dataset.tex, { display: false }).then((node) => {
        span.replaceChildren(node);
        span.dataset.typeset = "true";
      }))).then(() => {
      if (spans.length && mj.startup.document) {
        mj.startup.document.clear();
        mj.startup.document.updateDocument();  // adds the CHTML stylesheet for the new nodes
      }
    });
  }).catch(() => { /* keep the HTML rendering */ });
}

function render({ model, el: root }) {
  root.classList.add("cb-quiz", "cb-widget");
  const form = el("div");
  const submit = el("button", { class: "cb-btn cb-submit", text: "Submit answers" });
  const retry = el("button", { class: "cb-btn cb-retry", text: "Try again" });
  const status = el("div", { class: "cb-summary" });
  root.append(form, el("div", { class: "cb-actions" }, [submit, retry]), status);

  function draw() {
    const questions = model.get("questions");
    const answers = model.get("answers");
    const submitted = model.get("submitted");
    form.replaceChildren(...questions.map((q, qi) => {
      const box = el("fieldset", { class: "cb-question", "data-question": String(qi) },
        [el("legend", { html: `${qi + 1}. ${q.question}` })]);
      q.options.forEach((option, oi) => {
        const input = el("input", { type: "radio", name: `cb-q-${model.cid || "quiz"}-${qi}`, value: String(oi) });
        input.checked = answers[qi] === oi;
        input.disabled = submitted;
        input.addEventListener("change", () => {
          const next = model.get("answers").slice();
          next[qi] = oi;
          model.set("answers", next);
          model.save_changes();
          draw();
        });
        box.append(el("label", { class: "cb-option" }, [input, " ", el("span", { html: option })]));
      });
      if (submitted) {
        const right = answers[qi] === q.correct;
        // A wrong answer is told what is wrong with it, not which option is right: the reader can retry.
        box.append(el("div", { class: "cb-feedback " + (right ? "cb-right" : "cb-wrong"), "data-right": String(right),
          html: right ? `\u2714 Correct. ${q.explanation}`
            : `\u2718 Not quite. ${(q.why_not && q.why_not[answers[qi]]) || ""} Try again to pick another answer.` }));
      }
      return box;
    }));
    const answered = answers.filter((a) => a !== null && a !== undefined && a >= 0).length;
    submit.disabled = submitted || answered < questions.length;
    retry.hidden = !submitted;
    if (submitted) {
      const score = questions.filter((q, i) => answers[i] === q.correct).length;
      const tries = model.get("attempts");
      status.textContent = `Score: ${score} of ${questions.length}` +
        (tries > 1 ? ` (attempt ${tries}).` : ".");
      root.dataset.score = String(score);
      submit.textContent = "Submitted";
    } else {
      status.textContent = `${answered} of ${questions.length} answered` +
        (answered < questions.length ? ": answer all to submit." : ".");
      delete root.dataset.score;
      submit.textContent = "Submit answers";
    }
    typeset(root);
  }
  submit.addEventListener("click", () => {
    model.set("submitted", true);
    model.set("attempts", (model.get("attempts") || 0) + 1);
    model.save_changes();
    draw();
  });
  retry.addEventListener("click", () => {
    model.set("submitted", false);
    model.save_changes();
    draw();
  });
  for (const k of ["answers", "submitted", "questions"]) model.on("change:" + k, draw);
  draw();
}

export default { render };
