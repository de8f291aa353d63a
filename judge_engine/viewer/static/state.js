// What the views share: the overview (judges, filter values, demo flag), the last list page
// (for Esc and [ ] in the item view), which view is showing, and the demo label it calls for.
export const state = {
  overview: null,
  view: null,
  list: {hash: "#/tasks", rows: []},
  synthetic: undefined,
};

// What the page shown says about demo runs (the server's `synthetic` of the page's own runs:
// a real run's task says nothing); until the page has said, what the overview says of all.
export function label(synthetic) {
  if (synthetic !== undefined) state.synthetic = synthetic;
  const text = state.synthetic !== undefined ? state.synthetic : state.overview?.synthetic;
  const banner = document.getElementById("demo");
  banner.hidden = !text;
  banner.textContent = text || "";
}

// The judge of the overview by its label.
export function judge(label) {
  return (state.overview?.judges || []).find((j) => j.label === label);
}

// A score on its judge's scale, 0..1 (null when the scale is unknown): colours cells.
export function shade(label, score) {
  const range = judge(label)?.score_range;
  if (score === null || score === undefined || !range || range[1] <= range[0]) return null;
  return Math.max(0, Math.min(1, (score - range[0]) / (range[1] - range[0])));
}

export function shadeClass(label, score) {
  const value = shade(label, score);
  return value === null ? "" : "shade-" + Math.min(4, Math.floor(value * 5));
}
