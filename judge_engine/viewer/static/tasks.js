// The task list: one page at a time from the server (filtered, sorted and paged there), the
// filters in the URL (a view is shared by sharing its link), j/k to move, Enter to open the
// item, n/p for the next and previous page, / to search.
import {get} from "./api.js";
import {el, fmt, link, replace, SPREAD_TITLE, spread} from "./dom.js";
import {label, shadeClass, state} from "./state.js";

const SORTS = [["item", "item"], ["score", "score, lowest first"], ["score-desc", "score, highest first"],
               ["disagreement", "disagreement, most first"]];
const SEARCH_DELAY_MS = 300;

const view = {main: null, params: {}, page: null, selected: 0, bar: null, results: null, timer: null};

export async function render(main, params, changed) {
  view.main = main;
  if (changed || !view.bar || !main.contains(view.bar)) {
    view.bar = filterBar();
    view.results = el("div", {class: "results"});
    replace(main, el("h1", {}, "Tasks"), view.bar, view.results);
    view.selected = 0;
  }
  if (Number(params.page || 1) !== Number(view.params.page || 1) && params.select === "last") view.selected = -1;
  view.params = params;
  syncBar();
  await load();
}

export async function refresh() {
  await load();
}

async function load() {
  const {select, ...query} = view.params;
  const page = await get("tasks", query);
  view.page = page;
  label(page.synthetic);
  state.list = {hash: link("tasks", query), rows: page.rows};
  if (view.selected < 0 || view.selected >= page.rows.length) view.selected = view.selected < 0 ? page.rows.length - 1 : 0;
  draw();
}

function go(changes) {
  const params = {...view.params, ...changes};
  delete params.select;
  if (!("page" in changes)) delete params.page;
  location.hash = link("tasks", {...params, ...(changes.select ? {select: changes.select} : {})});
}

function options(values, all) {
  return [el("option", {value: ""}, all), values.map((v) => el("option", {value: String(v)}, String(v)))];
}

function filterBar() {
  const facets = state.overview.facets;
  const select = (name, values, all) => el("select", {name, "aria-label": name, onchange: (e) => go({[name]: e.target.value})},
    options(values, all));
  const number = (name, placeholder) => el("input", {name, type: "number", step: "any", placeholder, class: "narrow",
    "aria-label": placeholder, onchange: (e) => go({[name]: e.target.value})});
  const search = el("input", {id: "search", name: "q", type: "search", placeholder: "search item text…",
    "aria-label": "search item text", oninput: (e) => {
      clearTimeout(view.timer);
      view.timer = setTimeout(() => go({q: e.target.value}), SEARCH_DELAY_MS);
    }});
  return el("form", {class: "filters", onsubmit: (e) => e.preventDefault()},
    select("judge", facets.judges, "all judges"), select("status", facets.statuses, "any status"),
    select("reason", facets.reason_codes, "any reason"), select("temperature", facets.temperatures, "any T"),
    select("repeat", facets.repeats, "any repeat"), number("min", "min score"), number("max", "max score"),
    search,
    el("select", {name: "sort", "aria-label": "sort", onchange: (e) => go({sort: e.target.value})},
      SORTS.map(([value, label]) => el("option", {value}, "sort: " + label))),
    el("a", {href: "#/tasks", class: "clear"}, "clear"));
}

function syncBar() {
  for (const input of view.bar.elements) {
    if (document.activeElement === input) continue;
    input.value = view.params[input.name] ?? (input.name === "sort" ? "item" : "");
  }
}

function draw() {
  const page = view.page;
  const rows = page.rows.map((row, index) => el("tr", {
    class: index === view.selected ? "selected" : "", "data-index": index, "data-item": row.item_id,
    onclick: () => { view.selected = index; open(); }},
  el("td", {}, el("a", {href: itemLink(row)}, row.item_id)), el("td", {}, row.judge, row.demo && mixed() ? el("span", {class: "badge demo-badge"}, "demo") : null), el("td", {}, fmt(row.temperature)),
  el("td", {}, fmt(row.repeat)), el("td", {}, row.variant || ""),
  el("td", {class: "status-" + row.status}, row.status + (row.reason_code ? ": " + row.reason_code : "")),
  page.cascades ? el("td", {class: "stage"}, row.stage ?? "") : null,
  el("td", {class: "num " + shadeClass(row.judge, row.score)}, fmt(row.score)), el("td", {class: "num"}, spread(row.spread, page.spread_unit))));
  replace(view.results,
    page.notes.map((note) => el("p", {class: "note"}, note)),
    pager(page),
    el("table", {class: "tasks"},
      el("thead", {}, el("tr", {}, ["item", "judge", "T", "repeat", "variant", "status"].map((h) => el("th", {}, h)),
        page.cascades ? el("th", {title: "a cascade's line: the stage that answered the item (or abstained, held at a stage)"}, "stage") : null,
        el("th", {}, "score"),
        el("th", {title: SPREAD_TITLE[page.spread_unit]}, page.spread_unit === "share" ? "spread (% of scale)" : "spread"))),
      el("tbody", {}, rows)),
    page.rows.length ? null : el("p", {class: "muted"}, "No task matches these filters."));
}

// Whether demo runs are open beside real ones (then each demo row says so).
function mixed() {
  const runs = state.overview?.runs || [];
  return runs.some((r) => r.demo) && runs.some((r) => !r.demo);
}

function pager(page) {
  return el("div", {class: "pager"},
    page.page > 1 ? el("a", {href: link("tasks", {...view.params, select: null, page: page.page - 1}), id: "prev"}, "‹ previous") : el("span", {}, ""),
    el("span", {class: "muted", id: "page-info"}, `page ${fmt(page.page)} of ${fmt(page.pages)} · ${fmt(page.total)} tasks`),
    page.page < page.pages ? el("a", {href: link("tasks", {...view.params, select: null, page: page.page + 1}), id: "next"}, "next ›") : el("span", {}, ""));
}

function itemLink(row) {
  return link("item", {id: row.item_id, run: row.run, task: row.task_id});
}

function open() {
  const row = view.page?.rows[view.selected];
  if (row) location.hash = itemLink(row);
}

function move(step) {
  const page = view.page;
  if (!page) return;
  const next = view.selected + step;
  if (next >= page.rows.length && page.page < page.pages) return go({page: page.page + 1});
  if (next < 0 && page.page > 1) return go({page: page.page - 1, select: "last"});
  view.selected = Math.max(0, Math.min(page.rows.length - 1, next));
  draw();
  view.results.querySelector("tr.selected")?.scrollIntoView({block: "nearest"});
}

export function key(name) {
  const page = view.page;
  switch (name) {
    case "j": case "ArrowDown": move(1); return true;
    case "k": case "ArrowUp": move(-1); return true;
    case "Enter": case "o": open(); return true;
    case "n": if (page && page.page < page.pages) go({page: page.page + 1}); return true;
    case "p": if (page && page.page > 1) go({page: page.page - 1}); return true;
    default: return false;
  }
}
