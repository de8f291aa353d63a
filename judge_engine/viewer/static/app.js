// The page: a router over the location's hash (so a view and its filters can be shared as a
// link), the header (runs, the demo label), the keyboard, and a refresh while a run is live.
//   #/                 overview
//   #/tasks?judge=&status=&reason=&temperature=&repeat=&min=&max=&q=&sort=&page=
//   #/item?id=ITEM
//   #/transcript?run=N&task=TASK_ID
import {get} from "./api.js";
import {el, replace} from "./dom.js";
import * as item from "./item.js";
import * as overview from "./overview.js";
import {state} from "./state.js";
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
  try {
    await view.render(main, params, changed);
  } catch (error) {
    replace(main, el("p", {class: "error"}, "This page could not be loaded: ", error.message));
  }
}

async function header() {
  state.overview = await get("overview");
  const banner = document.getElementById("demo");
  banner.hidden = !state.overview.demo;
  replace(banner, state.overview.synthetic || "");
  const names = state.overview.runs.map((r) => r.run_id + (r.live ? " (live)" : ""));
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
