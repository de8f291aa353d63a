// Each outcome's card as its users read it. The server sends the layout (verdicts.py): texts as
// segments, each listing the spans that cover it, so nothing here searches text. A kind of card
// is an entry of KINDS: how to draw it, whether it shows the item's text (then the item's fields
// are folded above the cards), and whether the task has a transcript of its own (an outcome made
// of other tasks' outcomes, a jury's, names those tasks, its `parts`, and links each instead).
import {custom} from "./custom.js";
import {decision} from "./decision.js";
import {el, fmt, marked, pre} from "./dom.js";
import {jury} from "./jury.js";

const SEVERITY = {critical: 3, major: 2, minor: 1};

const KINDS = {
  mqm: {draw: mqm, showsItem: true},
  spans: {draw: spans, showsItem: true},
  rubric: {draw: rubric, showsItem: true},
  pair: {draw: pair, showsItem: true},
  ttct: {draw: ttct, showsItem: true},
  bws: {draw: bws, showsItem: true},
  words: {draw: words, showsItem: true},
  custom: {draw: custom, showsItem: false},  // it shows only the texts it quotes, or none
  jury: {draw: jury, showsItem: false},
  item: {draw: decision, showsItem: false},  // an item's decision over its requests: their cards show the item
  cascade: {draw: cascade, showsItem: false},  // the stage lines below it show the item
  verdict: {draw: (data) => pre(data.json), showsItem: false},
};

export function card(data, task) {
  const kind = KINDS[data.kind];
  if (kind) return kind.draw(data, task);
  return task.status === "undone" ? el("p", {class: "muted"}, "No outcome yet: the run has not finished this task.") : null;
}

// Whether the card shows the item's text itself.
export function showsItem(data) {
  const shows = KINDS[data.kind]?.showsItem;
  return typeof shows === "function" ? shows(data) : Boolean(shows);
}

// Whether the task has a transcript of its own (not an outcome made of other tasks' outcomes).
export function ownTranscript(task) {
  return !task.card?.parts;
}

function mqm(data) {
  const worst = (marks) => marks.map((i) => data.errors[i].severity).sort((a, b) => SEVERITY[b] - SEVERITY[a])[0];
  const title = (marks) => marks.map((i) => `${data.errors[i].severity} · ${data.errors[i].category}`).join("\n");
  const kind = (marks) => "sev-" + worst(marks);
  const found = data.errors.filter((e) => e.where !== "none");
  const missing = data.errors.filter((e) => e.where === "none");
  return el("div", {class: "mqm"},
    el("div", {class: "side-by-side"},
      el("div", {}, el("h4", {}, "Source", data.source_lang ? ` (${data.source_lang})` : ""), marked(data.source, kind, title)),
      el("div", {class: "target"}, el("h4", {}, "Target", data.target_lang ? ` (${data.target_lang})` : ""), marked(data.target, kind, title))),
    data.errors.length === 0 ? el("p", {class: "muted"}, "No error found.") : null,
    found.length ? el("ul", {class: "errors"}, found.map((e) => el("li", {},
      el("span", {class: "badge sev-" + e.severity}, e.severity), " ", e.category, " · ", el("q", {}, e.span || "(no span)"),
      el("span", {class: "muted"}, ` in the ${e.where}` + (e.match === "normalised" ? " (after normalising case, quotes, spaces)" : ""))))) : null,
    missing.length ? el("div", {class: "not-found"}, el("h4", {}, "Quoted, but not in the text"),
      el("ul", {}, missing.map((e) => el("li", {}, el("span", {class: "badge sev-" + e.severity}, e.severity), " ",
        e.category, " · ", e.span ? el("q", {}, e.span) : el("span", {class: "muted"}, "(no span given)"))))) : null,
    data.literary ? el("table", {class: "aspects"},
      el("thead", {}, el("tr", {}, el("th", {}, "aspect"), el("th", {}, "penalty"), el("th", {}, "per sentence"))),
      el("tbody", {}, data.literary.aspects.map((a) => el("tr", {}, el("td", {}, a.aspect), el("td", {class: "num"}, fmt(a.penalty)),
        el("td", {class: "num"}, fmt(a.per_sentence))))),
      el("caption", {}, `${fmt(data.literary.sentences)} sentence(s) in the target`)) : null);
}

function spans(data) {
  const title = (marks) => marks.map((i) => data.expressions[i].justification || data.expressions[i].expression).join("\n");
  const kind = (marks) => "match-" + data.expressions[marks[0]].match;
  return el("div", {class: "spans side-by-side"},
    el("div", {}, el("h4", {}, "Passage"), marked(data.passage, kind, title)),
    data.expressions.length === 0 ? el("p", {class: "muted"}, "The judge selected no expression.") :
    el("ol", {class: "expressions"}, data.expressions.map((e) => el("li", {class: "match-" + e.match},
      el("q", {}, e.expression), " ", el("span", {class: "badge match-" + e.match}, {exact: "found exactly",
        normalised: "found after normalising", none: "not in the passage"}[e.match]),
      el("div", {class: "muted"}, e.justification)))));
}

function rubric(data) {
  return el("div", {class: "rubric"},
    el("p", {}, el("strong", {}, "Score ", fmt(data.score)), data.low !== undefined ? ` on ${data.low}..${data.high}` : ""),
    data.criteria ? el("p", {class: "criteria"}, data.criteria) : null,
    el("ul", {class: "descriptions"}, data.descriptions.map((d) => el("li", {class: d.score === data.score ? "chosen" : ""},
      el("strong", {}, `Score ${d.score}: `), d.text))),
    el("h4", {}, "Feedback"), pre(data.feedback),
    el("details", {}, el("summary", {}, "Instruction and response"),
      el("h4", {}, "Instruction"), pre(data.instruction), el("h4", {}, "Response"), pre(data.response),
      data.reference ? [el("h4", {}, "Reference answer"), pre(data.reference)] : null));
}

function pair(data) {
  const side = (label, text) => el("div", {class: data.winner === label ? "winner" : ""},
    el("h4", {}, `Response ${label}`, data.winner === label ? el("span", {class: "badge best"}, "winner") : null), pre(text));
  const swapped = data.order === "BA";
  return el("div", {class: "pair"},
    el("p", {class: "muted"}, swapped ? "Shown in the order B, A (swapped); the winner is in the item's own labels."
      : "Shown in the order A, B."),
    el("h4", {}, "Instruction"), pre(data.instruction),
    el("div", {class: "side-by-side"}, side("A", data.response_a), side("B", data.response_b)),
    el("h4", {}, "Feedback"), pre(data.feedback));
}

function ttct(data) {
  return el("div", {class: "ttct"},
    pre(data.text), data.topic ? el("p", {class: "muted"}, "topic: ", data.topic) : null,
    data.dimensions.map((d) => el("table", {class: "questions"},
      el("caption", {}, `${d.name}: ${fmt(d.mean)}`),
      el("tbody", {}, d.questions.map((q) => el("tr", {},
        el("th", {}, q.id.toUpperCase()), el("td", {}, q.text, q.reversed ? el("span", {class: "muted"}, " (reverse-scored)") : null),
        el("td", {class: "num"}, fmt(q.rating)),
        el("td", {class: "num muted"}, q.reversed ? `→ ${fmt(q.oriented)}` : "")))))));
}

function bws(data) {
  return el("div", {class: "bws"},
    el("h4", {}, "Source"), pre(data.source),
    el("ol", {class: "candidates"}, data.shown.map((c) => el("li", {class: c.best ? "best" : c.worst ? "worst" : ""},
      el("strong", {}, c.label), ` (${c.id}) `, c.best ? el("span", {class: "badge best"}, "best") : null,
      c.worst ? el("span", {class: "badge worst"}, "worst") : null, pre(c.text)))),
    el("p", {class: "muted"}, `shuffle seed ${data.seed ?? "–"}` + (data.order ? ` · ${data.order}` : "")));
}

function words(data) {
  return el("div", {class: "words"},
    data.cue ? el("p", {}, "cue: ", el("strong", {}, data.cue)) : null,
    el("ul", {class: "chips"}, data.words.map((w) => el("li", {class: w.scored ? "scored" : w.valid ? "valid" : "dropped",
      title: w.valid ? (w.scored ? "valid, scored" : "valid (beyond the first seven)") : "dropped: " + w.reason},
    w.word, w.valid ? "" : el("small", {}, " " + w.reason)))),
    el("p", {class: "muted"}, Object.entries(data.scores).map(([k, v]) => `${k} ${fmt(v)}`).join(" · ")
      + (data.lexicon ? ` · lexicon ${data.lexicon}` : "")));
}

// The words and numbers are the command line's (judge_engine/util/cascade_words.py, sent as
// `then` and `*_text`): thresholds with 4 decimals, "escalated" as stats and show say it.
function cascade(data) {
  const head = data.stage ? `Answered by ${data.stage}: ${data.prediction} (confidence ${data.confidence_text} ≥ ${data.threshold_text})`
    : data.held_at ? `Held at ${data.held_at} (${data.code}: an outage there; resume --retry asks again)`
    : "Abstained: no stage was sure enough";
  return el("div", {class: "cascade"},
    el("p", {}, el("strong", {}, head)),
    el("table", {class: "stages"},
      el("thead", {}, el("tr", {}, ["stage", "prediction", "confidence", "threshold", "then"].map((h) => el("th", {}, h)))),
      el("tbody", {}, data.asked.map((a) => el("tr", {class: a.route === "answer" ? "chosen" : ""},
        el("td", {}, a.stage), el("td", {}, a.prediction ?? "–"), el("td", {class: "num"}, a.confidence_text),
        el("td", {class: "num"}, a.threshold_text),
        el("td", {}, a.code ? `${a.then} (${a.code})` : a.then))))),
    data.not_asked.length ? el("p", {class: "muted"}, `${data.not_asked_word} (no threshold): `, data.not_asked.join(", ")) : null);
}
