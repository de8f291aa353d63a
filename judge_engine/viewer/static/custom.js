// A custom judge's card (custom_card.py sends it): the texts its quotes come from, each quote
// highlighted (one colour per spans field); the candidates in the order shown; every declared
// field in order (a bounded number on its scale, a label among its choices, yes or no, the
// candidate picked, the quotes), the headline score marked; free text below; quotes found in no
// text listed apart.
import {el, fmt, marked, pre} from "./dom.js";

const COLOURS = 4;
const MATCH = {exact: "found exactly", normalised: "found after normalising", none: "not in the text"};

export function custom(data) {
  const spansFields = data.fields.filter((f) => f.type === "spans").map((f) => f.name);
  const colour = (field) => "quote-" + (spansFields.indexOf(field) % COLOURS);
  const kind = (marks) => colour(data.spans[marks[0]].field) + " match-" + data.spans[marks[0]].match;
  const title = (marks) => marks.map((i) => `${data.spans[i].field}: ${data.spans[i].text}`).join("\n");
  const missing = data.spans.filter((s) => s.where === "none");
  const values = data.fields.filter((f) => f.type !== "text");
  const texts = data.fields.filter((f) => f.type === "text");
  return el("div", {class: "custom"},
    data.texts.map((t) => el("div", {class: "quoted", "data-field": t.field}, el("h4", {}, words(t.field)),
      marked(t.segments, kind, title))),
    data.candidates.length ? el("ol", {class: "candidates"}, data.candidates.map((c) => el("li",
      {class: c.picked_by.length ? "best" : ""}, el("strong", {}, c.label), ` (${c.id}) `,
      c.picked_by.map((name) => el("span", {class: "badge best"}, name)), c.text ? pre(c.text) : null))) : null,
    values.length ? el("table", {class: "fields"}, el("tbody", {}, values.map((f) => el("tr", {"data-field": f.name,
      class: f.headline ? "headline" : ""},
    el("th", {title: f.description || null}, f.name,
      f.headline && f.name !== "score" ? el("span", {class: "badge", title: "the judge's score"}, "score") : null,
      f.description ? el("div", {class: "muted small"}, f.description) : null),
    el("td", {}, value(f, data, colour)))))) : null,
    texts.map((f) => el("div", {class: "field-text", "data-field": f.name},
      el("h4", {title: f.description || null}, f.name), f.value === null || f.value === undefined
        ? el("p", {class: "muted"}, "(not given)") : pre(f.value))),
    missing.length ? el("div", {class: "not-found"}, el("h4", {}, "Quoted, but not in the text"),
      el("ul", {}, missing.map((s) => el("li", {}, `${s.field}: `, s.text ? el("q", {}, s.text)
        : el("span", {class: "muted"}, "(an empty quote)"))))) : null,
    data.score.expression ? el("p", {class: "muted score-rule"}, "score = ", el("code", {}, data.score.rule)) : null);
}

function value(f, data, colour) {
  switch (f.type) {
    case "integer": case "number": return number(f);
    case "label": return [el("strong", {}, f.value ?? "–"),
      f.number !== null && f.number !== undefined ? ` = ${fmt(f.number)}` : "",
      f.choices?.length ? el("span", {class: "muted"}, ` (one of: ${f.choices.join(", ")})`) : null];
    case "boolean": return el("span", {class: "badge " + (f.value ? "yes" : "no")}, f.value ? "yes" : "no");
    case "candidate": return [el("strong", {}, f.value ?? "–"), el("span", {class: "muted"}, f.id ? ` (candidate ${f.id})` : ""),
      f.number !== null && f.number !== undefined ? ` = ${fmt(f.number)}` : ""];
    case "spans": return quotes(f, data, colour);
    default: return typeof f.value === "string" ? f.value : JSON.stringify(f.value);
  }
}

// A number, on its declared range when it has one (a meter shows where it sits).
function number(f) {
  const bounded = typeof f.low === "number" && typeof f.high === "number" && f.high > f.low;
  return [bounded && typeof f.value === "number" ? el("meter", {min: f.low, max: f.high, value: f.value}) : null,
    el("strong", {class: "value"}, fmt(f.value)),
    bounded ? el("span", {class: "muted"}, ` on ${fmt(f.low)}..${fmt(f.high)}`) : null];
}

function quotes(f, data, colour) {
  if (!f.spans.length) return el("span", {class: "muted"}, "no quote");
  return el("ol", {class: "quotes"}, f.spans.map((i) => data.spans[i]).map((s) => el("li", {class: "match-" + s.match},
    el("q", {class: colour(s.field)}, s.text), " ",
    el("span", {class: "badge match-" + s.match}, MATCH[s.match] || s.match),
    s.where !== "none" ? el("span", {class: "muted"}, ` in the ${words(s.where)}`) : null)));
}

function words(name) {
  return String(name).replaceAll("_", " ");
}
