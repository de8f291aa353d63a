// A task's transcript: every attempt in order, the request as sent (parameters and messages;
// the prefix every request shares and what the previous attempt already sent are folded, one
// click away), the raw answer, why it was sent back (the parse problems and the re-ask
// message), finish reason, usage, cost, latency, rate-limit headers and errors. Esc goes back.
import {get} from "./api.js";
import {el, fmt, link, money, pre, replace} from "./dom.js";
import {label} from "./state.js";

const view = {data: null};

export async function render(main, params) {
  replace(main, el("p", {class: "muted"}, "Loading transcript…"));
  view.data = await get("transcript", {run: params.run, task: params.task});
  label(view.data.synthetic);
  const data = view.data;
  const outcome = data.outcome;
  replace(main,
    el("div", {class: "crumbs"}, el("a", {href: link("item", {id: data.item_id, run: data.run, task: data.task_id})}, "‹ item " + data.item_id)),
    el("h1", {}, "Transcript ", el("span", {class: "mono small"}, data.task_id)),
    el("p", {}, `${data.judge} · run ${data.run_id}`, outcome ? ` · T ${fmt(outcome.temperature)} · repeat ${outcome.repeat}`
      + (outcome.variant ? ` · ${outcome.variant}` : "") : ""),
    outcome?.parts ? el("p", {class: "note parts"}, "This outcome was decided from other tasks' outcomes (a jury's from "
      + "its jurors') and sent no request of its own. Their transcripts: ",
    outcome.parts.map((p, i) => [i ? ", " : "", el("a", {href: link("transcript", {run: data.run, task: p.task_id})}, p.judge)]))
      : null,
    outcome ? el("p", {class: "outcome status-" + outcome.status},
      outcome.status === "scored" ? `scored ${fmt(outcome.score)}` : `unscored (${outcome.reason_code}): `,
      outcome.status === "scored" ? "" : outcome.reason || "",
      outcome.parts ? "" : ` · ${outcome.attempts} attempt(s) · ${outcome.reasks} re-ask(s) · ${money(outcome.cost)}`)
      : el("p", {class: "muted"}, "No outcome: the run stopped before this task finished (resume finishes it)."),
    data.attempts.map(attempt),
    data.protocol_errors.map((e) => el("section", {class: "attempt error-block"},
      el("h2", {}, `Protocol error in ${e.stage}`), el("p", {}, e.error), pre(e.traceback))));
}

function attempt(a) {
  const shared = a.messages.filter((m) => m.shared && !m.repeated);
  const repeated = a.messages.filter((m) => m.repeated);
  const fresh = a.messages.filter((m) => !m.shared && !m.repeated);
  return el("section", {class: "attempt", "data-attempt": a.attempt},
    el("h2", {}, `Attempt ${a.attempt}`, a.reask ? el("span", {class: "badge"}, `re-ask ${a.reask}`) : null,
      a.cache_hit ? el("span", {class: "badge"}, "cache hit") : null, a.replayed ? el("span", {class: "badge"}, "replayed") : null,
      el("span", {class: "muted small"}, ` ${a.at} · ${fmt(a.latency_s)} s`)),
    el("details", {class: "parameters"}, el("summary", {}, "parameters"),
      el("dl", {class: "facts"}, Object.entries(a.parameters).map(([k, v]) => [el("dt", {}, k),
        el("dd", {class: "mono"}, typeof v === "string" ? v : JSON.stringify(v))]))),
    repeated.length ? el("details", {class: "folded"}, el("summary", {}, `${repeated.length} message(s) the previous attempt sent too`),
      repeated.map(message)) : null,
    shared.length ? el("details", {class: "folded shared"}, el("summary", {},
      `${shared.length} shared message(s): the prefix every request repeats (system prompt, few-shot turns)`), shared.map(message)) : null,
    fresh.map(message),
    a.error ? el("div", {class: "error-block"}, el("h4", {}, `Error: ${a.error.kind}` + (a.error.status ? ` (HTTP ${a.error.status})` : "")),
      pre(a.error.message)) : null,
    a.answer !== null && a.answer !== undefined ? el("div", {class: "answer"}, el("h4", {}, "Answer",
      el("span", {class: "muted small"}, ` finish: ${a.finish_reason ?? "–"}` + (a.model ? ` · ${a.model}` : ""))), pre(a.answer)) : null,
    a.reasked ? el("div", {class: "reasked"}, el("h4", {}, "Sent back: this answer could not be used"),
      a.reasked.problems.length ? el("ul", {}, a.reasked.problems.map((p) => el("li", {}, p))) : null,
      el("details", {}, el("summary", {}, "the re-ask message"), pre(a.reasked.message))) : null,
    el("p", {class: "muted small"}, a.usage ? `tokens ${fmt(a.usage.prompt_tokens)} in · ${fmt(a.usage.completion_tokens)} out · ` : "",
      `cost ${money(a.cost)}`),
    Object.keys(a.headers).length ? el("details", {}, el("summary", {}, "rate-limit headers"),
      el("dl", {class: "facts"}, Object.entries(a.headers).map(([k, v]) => [el("dt", {class: "mono"}, k), el("dd", {class: "mono"}, v)]))) : null);
}

function message(m) {
  return el("div", {class: "message role-" + m.role}, el("div", {class: "role"}, m.role), pre(m.content));
}

export function key(name) {
  if ((name === "Escape" || name === "u") && view.data) {
    location.hash = link("item", {id: view.data.item_id, run: view.data.run, task: view.data.task_id});
    return true;
  }
  return false;
}
