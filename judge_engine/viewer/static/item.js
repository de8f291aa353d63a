// One item: its fields, every task of it (judges x temperatures x repeats, from every open run)
// in a grid where disagreement shows at a glance, then each task's verdict drawn the way its
// protocol's users read it (cards.js). j/k choose a task, Enter opens its transcript, Esc goes
// back to the list, [ and ] go to the previous and next item of the list page.
import {get} from "./api.js";
import {card, ownTranscript, showsItem} from "./cards.js";
import {el, fmt, link, pre, replace, SPREAD_TITLE, spread} from "./dom.js";
import {label, shadeClass, state} from "./state.js";

const view = {main: null, data: null, selected: 0, params: {}};

export async function render(main, params) {
  view.main = main;
  view.params = params;
  if (view.data?.item_id !== params.id) replace(main, el("p", {class: "muted"}, "Loading item…"));
  view.data = await get("item", {id: params.id});
  label(view.data.synthetic);
  const tasks = view.data.tasks;
  const wanted = tasks.findIndex((t) => t.task_id === params.task && String(t.run) === String(params.run ?? t.run));
  view.selected = wanted >= 0 ? wanted : 0;
  draw();
  main.querySelector(".task-card.selected")?.scrollIntoView({block: "nearest"});
}

function draw() {
  const data = view.data;
  replace(view.main,
    el("div", {class: "crumbs"}, el("a", {href: state.list.hash}, "‹ tasks"), " · ",
      neighbour(-1, "[ previous item"), " · ", neighbour(1, "next item ]")),
    el("h1", {}, "Item ", el("span", {class: "mono"}, data.item_id),
      data.spread !== null ? el("span", {class: "badge spread", title: SPREAD_TITLE[data.spread_unit]},
        "spread " + spread(data.spread, data.spread_unit) + (data.spread_unit === "share" ? " of the scale" : "")) : null),
    fields(data),
    grid(data.tasks),
    el("div", {class: "cards"}, data.tasks.map((task, index) => taskCard(task, index))));
}

// The item's fields, folded when the task cards below already show its text.
function fields(data) {
  if (!data.fields) return el("p", {class: "muted"}, "The item's text is not available (its dataset is gone).");
  const note = data.origin === "request" ? el("p", {class: "note"},
    "The run's dataset could not be read (gone, or not indexed yet): this is the item as the judge was sent it.") : null;
  const shown = data.tasks.some((t) => showsItem(t.card));
  const value = (v) => typeof v === "string" && v.length < 80 && !v.includes("\n") ? v
    : pre(typeof v === "string" ? v : JSON.stringify(v, null, 2));
  return el("details", {class: "fields", open: shown ? null : ""},
    el("summary", {}, `Item fields (${Object.keys(data.fields).length})`), note,
    el("dl", {class: "facts wide"}, Object.entries(data.fields).map(([name, v]) => [el("dt", {}, name), el("dd", {}, value(v))])));
}

// Rows: judges; columns: temperature x repeat x variant; cells: score or why unscored.
function grid(tasks) {
  const judges = [...new Set(tasks.map((t) => t.judge))];
  const key = (t) => `T ${fmt(t.temperature)} · r${t.repeat}` + (t.variant ? ` · ${t.variant}` : "");
  const columns = [...new Set(tasks.map(key))];
  const cell = (judge, column) => {
    const index = tasks.findIndex((t) => t.judge === judge && key(t) === column);
    if (index < 0) return el("td", {class: "empty"}, "");
    const t = tasks[index];
    const text = t.status === "scored" ? fmt(t.score ?? (t.card.kind === "bws" ? "picked" : null)) : (t.reason_code || t.status);
    return el("td", {class: "num clickable " + shadeClass(t.judge, t.score) + (index === view.selected ? " selected" : ""),
      title: t.status, onclick: () => select(index)}, text);
  };
  return el("table", {class: "grid"},
    el("thead", {}, el("tr", {}, el("th", {}, "judge"), columns.map((c) => el("th", {}, c)))),
    el("tbody", {}, judges.map((j) => el("tr", {}, el("th", {}, j), columns.map((c) => cell(j, c))))));
}

function taskCard(task, index) {
  const transcript = ownTranscript(task) ? link("transcript", {run: task.run, task: task.task_id}) : null;
  return el("section", {class: "task-card" + (index === view.selected ? " selected" : ""), "data-task": task.task_id,
    onclick: () => select(index, false)},
    el("header", {},
      el("strong", {}, task.judge), ` · T ${fmt(task.temperature)} · repeat ${task.repeat}`,
      task.variant ? ` · ${task.variant}` : "",
      el("span", {class: "badge " + (task.status === "scored" ? shadeClass(task.judge, task.score) : "status-" + task.status)},
        task.status === "scored" ? "score " + fmt(task.score ?? "–") : task.status),
      transcript ? el("a", {href: transcript, class: "transcript-link"}, "transcript ›") : null),
    task.status === "unscored" ? el("p", {class: "error"}, `${task.reason_code}: `, task.reason || "") : null,
    card(task.card, task),
    task.confidence ? el("p", {class: "small"}, confidenceText(task.confidence)) : null,
    el("p", {class: "muted small"}, `${task.model || ""} · ${task.protocol || ""}`, transcript ? ` · attempts ${fmt(task.attempts)} · `
      + `re-asks ${fmt(task.reasks)} · cost ${task.cost === undefined ? "–" : "$" + Number(task.cost).toFixed(5)}` : ""));
}

function confidenceText(c) {
  // "confidence 0.83 (logprobs) · A 0.83, B 0.12 · weighted 3.9": text only, drawn with textContent
  const probs = Object.entries(c.probs || {}).sort((a, b) => b[1] - a[1]).map(([k, p]) => `${k} ${fmt(p)}`).join(", ");
  return `confidence ${c.value === null || c.value === undefined ? "unread" : fmt(c.value)} (${c.method})`
    + (probs ? ` · ${probs}` : "") + (c.weighted !== undefined && c.weighted !== null ? ` · weighted ${fmt(c.weighted)}` : "");
}

function select(index, scroll = true) {
  view.selected = Math.max(0, Math.min(view.data.tasks.length - 1, index));
  draw();
  if (scroll) view.main.querySelector(".task-card.selected")?.scrollIntoView({block: "nearest"});
}

// The item before or after this one on the list page last shown.
function neighbourId(step) {
  const ids = [...new Set(state.list.rows.map((r) => r.item_id))];
  const at = ids.indexOf(view.data.item_id);
  return at < 0 ? null : ids[at + step] ?? null;
}

function neighbour(step, text) {
  const id = neighbourId(step);
  return id === null ? el("span", {class: "muted"}, text) : el("a", {href: link("item", {id})}, text);
}

export function key(name) {
  const task = view.data?.tasks[view.selected];
  switch (name) {
    case "j": case "ArrowDown": select(view.selected + 1); return true;
    case "k": case "ArrowUp": select(view.selected - 1); return true;
    case "Enter": case "o":  // a jury has no transcript of its own: its card links its jurors'
      if (task && ownTranscript(task)) location.hash = link("transcript", {run: task.run, task: task.task_id});
      return true;
    case "Escape": case "u": location.hash = state.list.hash; return true;
    case "]": case "[": {
      const id = neighbourId(name === "]" ? 1 : -1);
      if (id !== null) location.hash = link("item", {id});
      return true;
    }
    default: return false;
  }
}
