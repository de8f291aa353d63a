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

// Dollars as the command line writes them (judge_engine/util/money.py's dollars(), held equal by
// a browser test): $0; under a dollar three significant digits written out in full (never an
// exponent), rounded half up as the amount is written (its shortest decimal form), at least
// cents; from a dollar on, cents with thousands separators, rounded as Python's format() rounds
// the binary value (half to even on an exact tie); a negative amount keeps its sign.
export function money(value) {
  if (value === null || value === undefined) return "–";
  const amount = Number(value);
  if (!Number.isFinite(amount)) return "$" + (Number.isNaN(amount) ? "nan" : amount > 0 ? "inf" : "-inf");
  if (amount < 0) return "-" + money(-amount);
  if (amount === 0) return "$0";
  const cents = rounded(exactDecimal(amount), 2, true);
  if (cents >= 100n) {
    const [whole, fraction] = decimalText(cents, 2);
    return "$" + whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",") + "." + fraction;
  }
  const decimals = 2 - Math.floor(Math.log10(amount));
  const [whole, fraction] = decimalText(rounded(shortestDecimal(amount), decimals, false), decimals);
  return "$" + whole + "." + fraction.replace(/0+$/, "").padEnd(2, "0");
}

// x > 0 as [digits, scale] (x = digits / 10^scale): its exact binary value ...
function exactDecimal(x) {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const bits = view.getBigUint64(0);
  const exponent = Number((bits >> 52n) & 0x7ffn);
  const mantissa = (bits & ((1n << 52n) - 1n)) | (exponent ? 1n << 52n : 0n);
  const power = (exponent || 1) - 1075;
  return power >= 0 ? [mantissa << BigInt(power), 0] : [mantissa * 5n ** BigInt(-power), -power];
}

// ... or the shortest decimal that reads back as x (String(x), as Python's repr).
function shortestDecimal(x) {
  const [, whole, fraction = "", exponent = "0"] = String(x).match(/^(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/);
  const scale = fraction.length - Number(exponent);
  const digits = BigInt(whole + fraction);
  return scale >= 0 ? [digits, scale] : [digits * 10n ** BigInt(-scale), 0];
}

// [digits, scale] rounded to `decimals` places, as a whole number of 10^-decimals.
function rounded([digits, scale], decimals, halfEven) {
  if (scale <= decimals) return digits * 10n ** BigInt(decimals - scale);
  const unit = 10n ** BigInt(scale - decimals);
  const quotient = digits / unit;
  const twice = 2n * (digits % unit);
  const up = twice > unit || (twice === unit && (!halfEven || quotient % 2n === 1n));
  return up ? quotient + 1n : quotient;
}

function decimalText(units, decimals) {
  const text = units.toString().padStart(decimals + 1, "0");
  return [text.slice(0, text.length - decimals), text.slice(text.length - decimals)];
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
