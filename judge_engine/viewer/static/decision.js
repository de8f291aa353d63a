// An item's decision card (composed.py sends it): what the judge's requests for the item decided
// (the prediction, by which method, its confidence, or the reason there is none), then each
// request's vote in a table: variant and repeat, vote, confidence, status or reason code, and a
// link to the request's transcript. The decision sent no request of its own.
import {el, fmt, link} from "./dom.js";

export function decision(data, task) {
  const head = data.prediction === null || data.prediction === undefined
    ? `no decision (${data.reason_code || "undecided"})` : fmt(data.prediction);
  const left = Object.entries(data.left_out || {}).map(([code, n]) => `${n} left out (${code})`);
  return el("div", {class: "decision-card"},
    el("p", {class: "decision"}, el("strong", {}, head),
      el("span", {class: "muted"}, " " + [data.method ? `by ${data.method}` : "",
        data.used !== null && data.used !== undefined ? `over ${fmt(data.used)} request(s)` : "",
        data.confidence !== null && data.confidence !== undefined ? `confidence ${fmt(data.confidence)}` : "",
        ...left].filter(Boolean).join(" · "))),
    el("table", {class: "votes"},
      el("thead", {}, el("tr", {}, ["request", "vote", "confidence", "status", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, data.requests.map((r) => el("tr", {"data-request": `${r.variant || "-"}|${r.repeat}`},
        el("td", {}, [r.variant, `repeat ${r.repeat}`].filter(Boolean).join(" · ")),
        el("td", {class: "num"}, fmt(r.vote)),
        el("td", {class: "num"}, fmt(r.confidence)),
        el("td", {class: "status-" + r.status}, r.status === "scored" ? "scored" : `${r.status} (${r.reason_code || "no vote"})`),
        el("td", {}, r.task_id ? el("a", {class: "request-transcript", href: link("transcript", {run: task.run, task: r.task_id})},
          "transcript ›") : null))))));
}
