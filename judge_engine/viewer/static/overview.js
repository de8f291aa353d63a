// The overview: each run (status, what the viewer has derived so far) and each judge (model,
// protocol, counts by status and reason, spend, 429s and retries, the score histogram, the
// consistency of its repeats and temperatures). Refreshed while a run is live.
import {el, fmt, link, money, replace, svg, table} from "./dom.js";
import {state} from "./state.js";

let main = null;

export async function render(node) {
  main = node;
  draw(state.overview);
}

export async function refresh() {
  draw(state.overview);
}

export function key() {
  return false;
}

function draw(data) {
  if (!main || !data) return;
  replace(main,
    el("h1", {}, "Overview"),
    data.runs.map(runPanel),
    el("p", {class: "muted small definitions"}, DEFINITIONS),
    el("div", {class: "judges"}, data.judges.map(judgePanel)));
}

function runPanel(run) {
  const derived = run.derived;
  const building = [];
  if (!derived.items) building.push(`search index: ${fmt(derived.items_done)} items read`);
  if (derived.attempts < 1) building.push(`attempt counts: ${Math.round(derived.attempts * 100)}%`);
  return el("section", {class: "panel run"},
    el("h2", {}, run.run_id, " ", el("span", {class: "badge status-" + run.status}, run.status),
      run.live ? el("span", {class: "badge live"}, "live") : null,
      run.demo ? el("span", {class: "badge demo-badge"}, "demo: synthetic answers") : null),
    el("dl", {class: "facts"},
      fact("directory", run.dir), fact("dataset", `${run.dataset.path ?? "–"} (${fmt(run.dataset.items)} items)`),
      fact("created", run.created_at), fact("updated", run.updated_at), fact("sessions", fmt(run.sessions)),
      fact("judge-engine", run.package_version),
      run.rescored_from ? fact("rescored from", run.rescored_from) : null,
      derived.items_origin === "request" ? fact("items", "the dataset is gone: item text is the prompt as sent") : null,
      building.length ? fact("preparing", building.join(" · ")) : null),
    run.tokens_note ? el("p", {class: "muted small tokens-note"}, run.tokens_note) : null,
    // Each message names its judge ("mqm-mini (openai/gpt-4o-mini) stopped: ..."): shown as it is.
    Object.values(run.failures || {}).map((why) => el("p", {class: "error"}, why)),
    derived.problems.map((problem) => el("p", {class: "error"}, problem)));
}

function fact(name, value) {
  return [el("dt", {}, name), el("dd", {}, value ?? "–")];
}

function judgePanel(judge) {
  const counts = judge.counts || {};
  const spend = judge.spend || {};
  const attempts = judge.attempts;
  const codes = Object.entries(counts.by_code || {}).sort((a, b) => b[1] - a[1]);
  const list = (params) => link("tasks", {judge: judge.label, ...params});
  return el("section", {class: "panel judge" + (judge.cascade ? " cascaded" : ""), "data-judge": judge.label},
    el("h2", {}, judge.label),
    el("p", {class: "muted about"}, about(judge)),
    judge.stage ? el("p", {class: "muted stage"}, stagePlace(judge.stage)) : null,
    judge.cascade ? cascadeCard(judge.cascade) : null,
    el("div", {class: "counts"},
      count("tasks", counts.tasks, list({})), count("scored", counts.scored, list({status: "scored"})),
      count("unscored", counts.unscored, list({status: "unscored"})),
      count("undone", counts.undone, list({status: "undone"}))),
    counts.undone > (counts.started ?? counts.undone)
      ? el("p", {class: "muted not-started"}, `tasks: planned for the whole dataset; undone: ${fmt(counts.undone - counts.started)} `
        + `not started yet, ${fmt(counts.started)} begun without an outcome (the undone list shows these)`) : null,
    counts.recorded ? el("p", {class: "muted"}, "as run.json last recorded them (counting…)") : null,
    codes.length ? table(codes, [["reason code", ([code]) => el("a", {href: list({reason: code})}, code)],
                                 ["tasks", ([, n]) => fmt(n)]], {class: "codes"}) : null,
    judge.jury || judge.cascade || judge.decisions ? null : el("dl", {class: "facts attempts"},
      fact("calls", fmt(spend.calls)), fact("tokens", `${fmt(spend.prompt_tokens)} in · ${fmt(spend.completion_tokens)} out`),
      fact("cost", money(spend.cost)), fact("cache hits", fmt(spend.cache_hits)),
      attempts ? [fact("429s", fmt(attempts.rate_limited || 0)), fact("retries", fmt(attempts.retries || 0)),
                  fact("re-asks", fmt(attempts.reasks || 0)), fact("rejected", fmt(attempts.rejected || 0)),
                  fact("protocol errors", fmt(attempts.protocol_errors || 0))]
        : fact("429s and retries", "counting…"),
      attempts && judge.attempts_share < 1 ? fact("counted", `${Math.round(judge.attempts_share * 100)}% of the transcript`) : null),
    spend.counted === false ? el("p", {class: "muted small"},
      "Calls, tokens and cost as run.json last recorded them (counting the transcript…).") : null,
    histogram(judge),
    estimate(judge),
    consistency(judge.consistency));
}

// The judge's human-scale estimate (judge-engine view --human-table): per group, the mean human
// score its verdicts and the labels give, with its interval, beside its raw mean and the labels alone.
function estimate(judge) {
  const data = judge.estimate;
  if (data === undefined) return null;
  if (data === null || data.absent) {
    return el("div", {class: "estimate"}, el("h3", {}, "Human-scale estimate"),
      el("p", {class: "muted"}, data ? data.absent : "no item of this judge has a numeric score to estimate from"));
  }
  const level = `${Math.round((1 - data.alpha) * 100)}%`;
  const interval = (ci) => (ci ? `[${fmt(ci[0], 4)}, ${fmt(ci[1], 4)}]` : "–");
  return el("div", {class: "estimate"},
    el("h3", {}, `Human-scale estimate (${level}, ${data.method}${data.estimator === "active" ? ", active labels" : ""})`),
    table(data.groups, [
      ["group", (g) => g.group], ["labelled", (g) => `${fmt(g.n_labelled)}/${fmt(g.n_labelled + g.n_unlabelled)}`],
      ["judge mean", (g) => fmt(g.judge_mean, 4)], ["estimate", (g) => fmt(g.estimate, 4)],
      [`${level} interval`, (g) => interval(g.ci)], ["labels alone", (g) => interval(g.classical?.ci)],
      ["effective labels", (g) => fmt(g.effective_labels, 3)]]),
    data.groups.filter((g) => g.reason).map((g) => el("p", {class: "muted"}, `${g.group}: ${g.reason}`)),
    data.notes.map((note) => el("p", {class: "muted small"}, note)),
    el("p", {class: "muted small"}, "The mean human score of the judge's items, from its score of every item "
      + "corrected by its error on the labelled ones (prediction-powered inference); the judge mean is its own scale."));
}

// The judge's model, protocol, temperatures, repeats and scale; a jury's jurors and how it
// aggregates them; a cascade's stages; whose requests an item decision decides. Only what is
// known (a judge found only in the index has no manifest entry).
function about(judge) {
  if (judge.cascade) {
    const asked = judge.cascade.stages.filter((s) => s.asked).map((s) => s.stage);
    const silent = judge.cascade.stages.filter((s) => !s.asked).map((s) => s.stage);
    return `cascade of ${asked.join(", ")}` + (silent.length ? ` (${silent.join(", ")} not asked)` : "")
      + ": each item asked of its stages in turn, cheapest first, until one is sure enough";
  }
  if (judge.decisions) {
    const d = judge.decisions;
    return `item decisions of ${d.judge}: one per item from its ${d.requests ? fmt(d.requests) + " " : ""}requests`
      + ` · ${d.model} · ${d.protocol}` + (d.confidence ? ` · confidence: ${d.confidence}` : "");
  }
  const parts = judge.jury ? [`jury: ${judge.jury.aggregate || "aggregate"} of ${judge.jury.jurors.join(", ")}`]
    : [judge.model, judge.protocol ? judge.protocol + (judge.protocol_version ? ` v${judge.protocol_version}` : "") : "",
       judge.temperatures?.length ? `T ${judge.temperatures.join(", ")}` : "",
       judge.repeats ? `${fmt(judge.repeats)} repeat${judge.repeats === 1 ? "" : "s"}` : ""];
  if (judge.score_range) parts.push(`scale ${judge.score_range.join("..")}`);
  return parts.filter(Boolean).join(" · ") || "not in the run's manifest";
}

// A stage judge's place in its cascade: how many of the items reached it (a later stage's
// tasks are the items escalated to it, not the dataset), or why it was never asked.
function stagePlace(stage) {
  const where = `a stage of ${stage.cascade} (${fmt(stage.position)} of ${fmt(stage.stages)})`;
  if (!stage.asked) return `${where}, ${stage.why}`;
  return `${where}: asked about ${fmt(stage.reached)} of ${fmt(stage.items)} items (those that reached it); `
    + `answers at confidence ≥ ${fmt(stage.threshold, 4)}`;
}

// The cascade: its guarantee, each stage (threshold, items reached, answered, sent on,
// abstained, held, what its judges cost), the coverage and what the cascade cost.
function cascadeCard(data) {
  const number = (key) => (s) => (s.asked ? fmt(s[key]) : "–");
  const pct = data.coverage === null ? "–" : (data.coverage * 100).toFixed(1) + "%";
  return el("div", {class: "cascade-card"},
    data.guarantee ? el("p", {}, el("strong", {}, "guaranteed: "), data.guarantee) : null,
    table(data.stages, [
      ["stage", (s) => s.stage], ["judges", (s) => s.judges.join(", ")],
      ["threshold", (s) => (s.asked ? fmt(s.threshold, 4) : "not asked")],
      ["reached", number("reached")], ["answered", number("answered")], ["escalated", number("escalated")],
      ["abstained", number("abstained")], ["held", number("held")], ["cost", (s) => money(s.cost)]],
    {class: "stages"}),
    el("p", {}, `coverage ${pct}: ${fmt(data.answered)} of ${fmt(data.items)} items answered, `
      + `${fmt(data.abstained)} abstained (no stage sure enough), ${fmt(data.held)} held (an outage at a stage)`
      + (data.waiting ? `, ${fmt(data.waiting)} waiting` : "") + ` · cost ${money(data.cost)} (its stages' judges)`),
    el("p", {class: "muted small"}, "reached: items asked of the stage; escalated: sent on to the next stage asked; "
      + "abstained: not sure enough, with no stage after it; held: no verdict for a reason outside the answers "
      + "(resume --retry asks again)."));
}

function count(name, value, href) {
  return el("a", {class: "count", href}, el("strong", {}, fmt(value ?? 0)), " ", name);
}

// What the attempt figures count: the definitions of the run's summary on the command line.
const DEFINITIONS = "Each judge's calls, tokens, cost, 429s, retries and re-asks are counted from its transcript as "
  + "written so far, as the run's summary counts them. Calls: requests sent to the provider, failed ones included "
  + "(cache hits and replayed answers are not). Retries: transport failures (5xx, timeouts, resets) within the "
  + "judge's retry budget, each tried again. 429s: rate-limit answers, waited out by the lane, not retries. "
  + "Re-asks: unusable answers sent back.";

// The histogram: scores on the judge's declared scale (the axis spans it even where no score
// fell; a judge without one spans its scores), counts on a labelled axis.
const WIDTH = 400;
const HEIGHT = 96;
const LEFT = 34;  // the count axis' labels
const TOP = 18;  // room for its title
const RIGHT = 8;

function histogram(judge) {
  const data = judge.histogram;
  if (!data) return el("p", {class: "muted"}, "no score distribution (no scored task, or a categorical verdict)");
  const bars = data.bars;
  const low = data.low ?? bars[0].low;
  const high = data.high ?? bars[bars.length - 1].high;
  const integral = [low, high, ...bars.map((b) => b.low)].every(Number.isInteger);
  const unit = data.exact ? barUnit(bars, low, high, integral) : 0;
  const from = low - unit / 2 - (high === low ? 0.5 : 0);
  const to = high + unit / 2 + (high === low ? 0.5 : 0);
  const x = (v) => LEFT + ((v - from) / (to - from)) * (WIDTH - LEFT - RIGHT);
  const counts = ticks(0, Math.max(...bars.map((b) => b.n), 1), 4, true);
  const top = counts[counts.length - 1];
  const y = (n) => TOP + HEIGHT - (n / top) * HEIGHT;
  const label = (bar) => data.exact ? fmt(bar.low) : `${fmt(bar.low)} to ${fmt(bar.high)}`;
  const scores = integral && high - low <= 12 ? range(low, high, 1) : ticks(low, high, 5, false);
  return el("figure", {class: "histogram"},
    svg("svg", {viewBox: `0 0 ${WIDTH} ${TOP + HEIGHT + 16}`, role: "img", "aria-label": `score distribution of ${judge.label}`},
      svg("text", {x: 0, y: 9, class: "axis title"}, "tasks"),
      counts.map((n) => svg("g", {class: "count-tick"},
        svg("line", {x1: LEFT, x2: WIDTH - RIGHT, y1: y(n), y2: y(n), class: n ? "grid" : "baseline"}),
        svg("text", {x: LEFT - 4, y: y(n) + 3, class: "axis end"}, fmt(n)))),
      bars.map((bar) => {
        const left = data.exact ? x(bar.low - unit * 0.4) : x(bar.low) + 0.5;
        const right = data.exact ? x(bar.low + unit * 0.4) : x(bar.high) - 0.5;
        const width = Math.max(2, right - left);
        const height = Math.max(bar.n ? 1 : 0, y(0) - y(bar.n));
        return svg("rect", {x: (left + right - width) / 2, y: y(0) - height, width, height, class: "bar"},
          svg("title", {}, `${label(bar)}: ${fmt(bar.n)} tasks`));
      }),
      scores.map((v) => svg("text", {x: x(v), y: TOP + HEIGHT + 12, class: "axis middle score-tick"}, fmt(v)))),
    el("figcaption", {class: "muted"}, "scores of scored tasks, " + (judge.score_range
      ? `on the judge's scale ${judge.score_range.map((v) => fmt(v)).join("..")}` : "from the lowest to the highest (no declared scale)")
      + " (hover a bar for its count)"));
}

// The width of an exact bar in score units: 1 on an integer scale, else the closest two scores.
function barUnit(bars, low, high, integral) {
  if (integral) return 1;
  const gaps = bars.slice(1).map((b, i) => b.low - bars[i].low);
  return Math.min(...gaps, (high - low) / 10 || 1);
}

// About `count` round ticks from `low` to `high` (1, 2 or 5 times a power of ten apart); counts
// (`whole`) in whole steps, the last tick at or above `high`.
function ticks(low, high, count, whole) {
  let step = nice((high - low) / count || 1);
  if (whole) step = Math.max(1, Math.round(step));
  const first = Math.ceil(low / step - 1e-9) * step;
  const last = whole ? Math.ceil(high / step) * step : high;
  return range(first, last, step);
}

function nice(raw) {
  const power = 10 ** Math.floor(Math.log10(raw));
  const mantissa = raw / power;
  return (mantissa <= 1 ? 1 : mantissa <= 2 ? 2 : mantissa <= 5 ? 5 : 10) * power;
}

function range(from, to, step) {
  const found = [];
  for (let k = 0; from + k * step <= to + step * 1e-9; k++) found.push(Number((from + k * step).toPrecision(12)));
  return found;
}

function consistency(data) {
  if (!data || (!data.repeats.length && !data.temperatures.length)) return null;
  return el("div", {class: "consistency"},
    data.repeats.length ? [el("h3", {}, "Repeat consistency"), table(data.repeats, [
      ["T", (r) => fmt(r.temperature)], ["variant", (r) => r.variant || "–"], ["items", (r) => fmt(r.items)],
      ["repeats", (r) => fmt(r.repeats)], ["identical", (r) => pct(r.identical)],
      ["mean Spearman", (r) => fmt(r.mean_spearman)], ["α interval", (r) => fmt(r.alpha_interval)],
      ["mean SD", (r) => fmt(r.mean_sd)]])] : null,
    data.temperatures.length ? [el("h3", {}, "Temperature consistency (item means)"), table(data.temperatures, [
      ["T", (r) => `${fmt(r.temperature)} vs ${fmt(r.against)}`], ["items", (r) => fmt(r.items)],
      ["Spearman", (r) => fmt(r.spearman)], ["mean |Δ|", (r) => fmt(r.mean_abs_delta)]])] : null);
}

function pct(value) {
  return value === null || value === undefined ? "–" : Math.round(value * 100) + "%";
}

