// A graded multiple-choice quiz: answer every question to submit, then see per-question
// feedback explaining why. Questions, answers and explanations arrive in the `questions`
// trait, so the quiz works on the static site with no kernel (it is for self-checking).

function render({ model, el }) {
  el.classList.add("cb-quiz");
  const form = document.createElement("div");
  const submit = document.createElement("button");
  const status = document.createElement("div");
  submit.className = "cb-btn cb-submit";
  submit.textContent = "Submit answers";
  status.className = "cb-summary";
  el.append(form, submit, status);

  function draw() {
    const questions = model.get("questions");
    const answers = model.get("answers");
    const submitted = model.get("submitted");
    form.replaceChildren();
    questions.forEach((q, qi) => {
      const box = document.createElement("fieldset");
      box.className = "cb-question";
      box.dataset.question = String(qi);
      const legend = document.createElement("legend");
      legend.textContent = `${qi + 1}. ${q.question}`;
      box.appendChild(legend);
      q.options.forEach((option, oi) => {
        const label = document.createElement("label");
        label.className = "cb-option";
        const input = document.createElement("input");
        input.type = "radio";
        input.name = `cb-q-${model.cid || "quiz"}-${qi}`;
        input.value = String(oi);
        input.checked = answers[qi] === oi;
        input.disabled = submitted;
        input.addEventListener("change", () => {
          const next = model.get("answers").slice();
          next[qi] = oi;
          model.set("answers", next);
          model.save_changes();
          draw();
        });
        label.append(input, document.createTextNode(" " + option));
        box.appendChild(label);
      });
      if (submitted) {
        const right = answers[qi] === q.correct;
        const fb = document.createElement("div");
        fb.className = "cb-feedback " + (right ? "cb-right" : "cb-wrong");
        fb.textContent = (right ? "\u2714 Correct. " : `\u2718 Not quite: the answer is "${q.options[q.correct]}". `) + q.explanation;
        box.appendChild(fb);
      }
      form.appendChild(box);
    });
    const answered = answers.filter((a) => a !== null && a !== undefined && a >= 0).length;
    submit.disabled = submitted || answered < questions.length;
    if (submitted) {
      const score = questions.filter((q, i) => answers[i] === q.correct).length;
      status.textContent = `Score: ${score} of ${questions.length}.`;
      el.dataset.score = String(score);
      submit.textContent = "Submitted";
    } else {
      status.textContent = `${answered} of ${questions.length} answered` +
        (answered < questions.length ? ": answer all to submit." : ".");
    }
  }
  submit.addEventListener("click", () => {
    model.set("submitted", true);
    model.save_changes();
    draw();
  });
  for (const k of ["answers", "submitted", "questions"]) model.on("change:" + k, draw);
  draw();
}

export default { render };
