// Small DOM helpers: element building, tables, number formats, the confirmation dialog.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

// columns: [{title, cell: row => node|text, num?: bool}], rowAttrs: row => attrs of the <tr>.
export function table(id, columns, rows, rowAttrs = () => ({})) {
  const head = h("tr", {}, columns.map((c) => h("th", { class: c.num ? "num" : null }, c.title)));
  const body = rows.map((row) => h("tr", rowAttrs(row),
    columns.map((c) => h("td", { class: [c.num ? "num" : "", c.key || ""].join(" ").trim() || null }, c.cell(row)))));
  return h("table", { id }, h("thead", {}, head), h("tbody", {}, body));
}

export function card(label, value, bad = false, id = null) {
  return h("div", { class: bad ? "card bad" : "card", id },
    h("div", { class: "label" }, label), h("div", { class: "value" }, value));
}

export function fill(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
  return el;
}

export function errorBox(error) {
  return h("div", { class: "error-box" }, String(error.message || error));
}

export const dash = (v) => (v === null || v === undefined ? "–" : v);

export function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

export function rate(r) {
  if (r === null || r === undefined) return "–";
  return r >= 100 ? Math.round(r).toLocaleString("en") : r.toFixed(1);
}

export const count = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en"));

export function time(ms) {
  if (ms === null || ms === undefined || ms < 0) return "–";
  return new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC");
}

// The confirmation dialog of index.html: resolves true when the person confirms.
export function confirmDialog(title, body, confirmLabel = "Confirm") {
  const dialog = document.getElementById("confirm");
  fill(document.getElementById("confirm-title"), title);
  fill(document.getElementById("confirm-body"), body);
  fill(document.getElementById("confirm-ok"), confirmLabel);
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
  });
}

// The page of a topic or group the cluster does not have (the API answered 404): says so, links
// back to the list, and offers no action on it (no Delete button for a topic that is not there).
export function notFound(root, kind, name, listPath, listLabel) {
  fill(root, h("div", { id: "not-found", class: "not-found" },
    h("h1", {}, `${kind} not found`),
    h("p", {}, `The cluster has no ${kind.toLowerCase()} `, h("code", {}, name), "."),
    h("p", {}, h("a", { href: listPath }, `All ${listLabel}`))));
}
