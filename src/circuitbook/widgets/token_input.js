// What a reader typed into a widget's token box, read as token ids (the induction lab and the
// toy model's stepper). Pure functions: no DOM, so Node tests them.

// Read `text` as at most `nCtx` tokens of a vocabulary of `dVocab`. A piece is a token id
// ("t12" or "12"), or a word of `words` ({word: id}, the stepper's text). Pieces are split on
// spaces and commas. Returns {ids, labels, dropped, cut}: the ids kept; a label for each, as
// the reader wrote it (the word, or "t12" for an id typed as "t12" or "12"), never the word
// of an id typed as a number; the pieces dropped with the reason (`why`); and how many tokens
// past nCtx were cut off, so that the widget can say what it did not read instead of
// dropping it silently.
export function parseTokens(text, { dVocab, nCtx, words = {} }) {
  const ids = [], labels = [], dropped = [];
  for (const piece of text.split(/[\s,]+/).filter(Boolean)) {
    let id = null;
    if (Object.hasOwn(words, piece)) id = words[piece];
    else if (/^t?\d+$/.test(piece)) id = Number(piece.replace(/^t/, ""));
    if (id === null) dropped.push({ piece, why: "not a token" });
    else if (id >= dVocab) dropped.push({ piece, why: `past t${dVocab - 1}` });
    else { ids.push(id); labels.push(Object.hasOwn(words, piece) ? piece : `t${id}`); }
  }
  const cut = Math.max(0, ids.length - nCtx);
  return { ids: ids.slice(0, nCtx), labels: labels.slice(0, nCtx), dropped, cut };
}

// One sentence on what parseTokens did not read ("" when it read everything).
export function droppedNote({ dropped, cut }, nCtx) {
  const parts = [];
  if (dropped.length) {
    const byWhy = new Map();
    for (const { piece, why } of dropped) byWhy.set(why, [...(byWhy.get(why) || []), `"${piece}"`]);
    parts.push("Dropped " + [...byWhy].map(([why, ps]) => `${ps.join(", ")} (${why})`).join("; "));
  }
  if (cut) parts.push(`kept the first ${nCtx} tokens (the model's context) and cut ${cut}`);
  return parts.length ? parts.join("; ") + "." : "";
}
