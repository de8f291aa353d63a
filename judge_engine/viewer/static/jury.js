// A jury's card (composed.py sends it): the decision (the aggregate, how many voted, how alike,
// the tie rule applied), then each juror's vote in a table: juror, vote, score, status or reason
// code, weight, and a link to the juror's transcript. A jury sent no request of its own: its
// jurors' transcripts are where its verdict comes from.
import {el, fmt, link} from "./dom.js";
import {shadeClass, state} from "./state.js";

export function jury(data, task) {
  return el("div", {class: "jury"},
    el("p", {class: "decision"}, el("strong", {}, data.value === null || data.value === undefined ? "no verdict" : fmt(data.value)),
      el("span", {class: "muted"}, " " + [`${data.aggregate} of ${fmt(data.voted)} vote(s)`,
        data.agreement !== null && data.agreement !== undefined ? `${Math.round(data.agreement * 100)}% of juror pairs voted alike` : "",
        data.spread !== null && data.spread !== undefined ? `spread ${fmt(data.spread)}` : "",
        data.tie ? `tie settled by: ${data.tie}` : ""].filter(Boolean).join(" · "))),
    el("table", {class: "votes"},
      el("thead", {}, el("tr", {}, ["juror", "vote", "score", "status", data.weighted ? "weight" : null, ""]
        .filter((h) => h !== null).map((h) => el("th", {}, h)))),
      el("tbody", {}, data.jurors.map((j) => el("tr", {"data-juror": j.judge},
        el("td", {}, j.judge),
        el("td", {class: "num"}, fmt(j.vote)),
        el("td", {class: "num " + shadeClass(label(task.run, j.judge), j.score)}, fmt(j.score)),
        el("td", {class: "status-" + j.status}, j.status === "scored" ? "scored" : `${j.status} (${j.reason_code || "no vote"})`),
        data.weighted ? el("td", {class: "num"}, fmt(j.weight)) : null,
        el("td", {}, j.task_id ? el("a", {class: "juror-transcript", href: link("transcript", {run: task.run, task: j.task_id})},
          "transcript ›") : null))))));
}

// The overview's label of a judge of this run (its name, unless two open runs share it).
function label(run, name) {
  return (state.overview?.judges || []).find((j) => j.run === run && j.name === name)?.label ?? name;
}
