// Building the page from run data. Everything a run contains (dataset text, answers, error
// bodies) is hostile input: it only ever becomes text nodes and attribute values through these
// helpers; nothing in the viewer ever parses a string as HTML.

// el("div", {class: "x", title: "..."}, child, "text", ...): children that are not nodes
// become text nodes.
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  setProps(node, props);
  append(node, children);
  return node;
}

// The same for SVG elements (the histograms).
export function svg(tag, props = {}, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  setProps(node, props);
  append(node, children);
  return node;
}

function setProps(node, props) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.setAttribute("class", value);
    else if (key === "href") node.setAttribute("href", internal(value));
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
  }
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

// Links only ever go to the viewer's own pages: a run's text can never become a URL scheme.
function internal(href) {
  return String(href).startsWith("#/") ? href : "#/";
}

export function replace(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

export function fmt(value, digits = 3) {
  if (value === null || value === undefined || value === "") return "–";
  if (typeof value !== "number") return String(value);
  if (Number.isInteger(value)) return value.toLocaleString("en");
  return Number(value.toPrecision(digits)).toLocaleString("en", {maximumFractionDigits: 6});
}

// An item's spread in its unit (the page's `spread_unit`): the scores' own units, or a share
// of each judge's range when the open judges' scales differ.
export function spread(value, unit) {
  if (value === null || value === undefined) return "–";
  return unit === "share" ? fmt(value * 100, 3) + "%" : fmt(value);
}

export const SPREAD_TITLE = {
  score: "max − min of the item's scores (every judge on the same scale)",
  share: "the judges' scales differ: max − min of the item's scores, each as a share of its judge's range",
};

export function money(value) {
  return value === null || value === undefined ? "–" : "$" + Number(value).toFixed(value < 1 ? 4 : 2);
}

// A link to a page of the viewer with these parameters (empty ones left out).
export function link(route, params = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") query.set(key, value);
  }
  const text = query.toString();
  return "#/" + route + (text ? "?" + text : "");
}

// A table: columns are [header, (row) => cell] pairs.
export function table(rows, columns, props = {}) {
  return el("table", props,
    el("thead", {}, el("tr", {}, columns.map(([head]) => el("th", {}, head)))),
    el("tbody", {}, rows.map((row) => el("tr", {}, columns.map(([, cell]) => el("td", {}, cell(row)))))));
}

// A text with its marked pieces (segments: the server cut the text at every span boundary):
// `kind(marks)` names the class of a marked piece, `title(marks)` what hovering it says.
export function marked(segments, kind, title) {
  return el("div", {class: "text marked"}, segments.map((piece) => piece.marks.length
    ? el("mark", {class: kind(piece.marks), title: title(piece.marks), "data-marks": piece.marks.join(" ")}, piece.text)
    : piece.text));
}

export function pre(text, props = {}) {
  return el("pre", {class: "text", ...props}, text ?? "");
}
