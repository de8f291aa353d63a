// The page: a router over the location's hash (so a view and its filters can be shared as a
// link), the header (runs, each demo run marked), the keyboard, and a refresh while a run is
// live. The demo label is the page's own (state.js `label`): a real run's task has none.
//   #/                 overview
//   #/tasks?judge=&status=&reason=&temperature=&repeat=&min=&max=&q=&sort=&page=
//   #/item?id=ITEM
//   #/transcript?run=N&task=TASK_ID
import {get} from "./api.js";
import {el, replace} from "./dom.js";
import * as item from "./item.js";
import * as overview from "./overview.js";
import {label, state} from "./state.js";
import * as tasks from "./tasks.js";
import * as transcript from "./transcript.js";

const VIEWS = {"": overview, tasks, item, transcript};
const LIVE_EVERY_MS = 2500;

function route() {
  const [name, query] = location.hash.replace(/^#\/?/, "").split("?");
  return {name: VIEWS[name] ? name : "", params: Object.fromEntries(new URLSearchParams(query || ""))};
}

async function show() {
  const {name, params} = route();
  const view = VIEWS[name];
  document.getElementById("nav-overview").classList.toggle("active", name === "");
  document.getElementById("nav-tasks").classList.toggle("active", name === "tasks");
  const main = document.getElementById("main");
  const changed = state.view !== view;
  state.view = view;
  state.synthetic = undefined;
  try {
    await view.render(main, params, changed);
  } catch (error) {
    replace(main, el("p", {class: "error"}, "This page could not be loaded: ", error.message));
  }
  if (state.synthetic === undefined) label();  // a page that says nothing of its runs: the overview's label
}

async function header() {
  state.overview = await get("overview");
  label();
  const names = state.overview.runs.map((r) => r.run_id + (r.demo ? " (demo)" : "") + (r.live ? " (live)" : ""));
  replace(document.getElementById("run-names"), names.join(" + "));
}

async function live() {
  if (!state.overview?.live) return;
  await header();
  if (state.view?.refresh) await state.view.refresh();
}

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.target.matches("input, select, textarea")) {
    if (event.key === "Escape") event.target.blur();
    return;
  }
  if (event.key === "/" && location.hash.startsWith("#/tasks")) {
    document.getElementById("search")?.focus();
    event.preventDefault();
  } else if (state.view?.key?.(event.key)) {
    event.preventDefault();
  }
});

window.addEventListener("hashchange", show);
header().then(show, (error) => replace(document.getElementById("main"), el("p", {class: "error"}, error.message)));
setInterval(() => live().catch(() => {}), LIVE_EVERY_MS);
