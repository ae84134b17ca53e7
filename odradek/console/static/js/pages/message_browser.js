// The message browser of a topic page: a page of records from a partition, by offset or by
// time, with keys, values and headers shown as text, JSON or hex.
import { getJSON, seg } from "../api.js";
import { count, dash, errorBox, fill, h, table, time } from "../dom.js";

function shown(view, format) {
  if (!view || view.size === null) return h("span", { class: "muted" }, "null");
  const text = format === "hex" ? view.hex : format === "json" ? (view.json ?? view.text) : view.text;
  return h("pre", { class: "payload" }, text + (view.truncated ? ` … (${count(view.size)} bytes)` : ""));
}

export function messageBrowser(topic) {
  const partition = h("select", { id: "browse-partition" });
  const mode = h("select", { id: "browse-mode" }, h("option", { value: "offset" }, "from offset"),
    h("option", { value: "timestamp" }, "from time"), h("option", { value: "latest" }, "latest"));
  const offset = h("input", { id: "browse-offset", type: "number", min: 0, value: 0 });
  const when = h("input", { id: "browse-time", type: "datetime-local", step: 1 });
  const limit = h("input", { id: "browse-limit", type: "number", min: 1, max: 200, value: 20 });
  const format = h("select", { id: "browse-format" }, ["text", "json", "hex"].map((f) => h("option", { value: f }, f)));
  const results = h("div", { id: "messages" });
  let last = null;
  const form = h("form", { class: "inline", id: "browse-form", onsubmit: (e) => { e.preventDefault(); browse(); } },
    h("label", {}, "Partition", partition), h("label", {}, "Start", mode), h("label", {}, "Offset", offset),
    h("label", {}, "Time (local)", when), h("label", {}, "Records", limit), h("label", {}, "Show as", format),
    h("button", { class: "primary", id: "browse-go", type: "submit" }, "Browse"));
  format.addEventListener("change", () => last && render(last));

  async function browse(from = null) {
    const query = new URLSearchParams({ partition: partition.value, limit: limit.value || 20 });
    if (from !== null) query.set("offset", from);
    else if (mode.value === "offset") query.set("offset", offset.value || 0);
    else if (mode.value === "timestamp" && when.value) query.set("timestamp", new Date(when.value).getTime());
    try {
      render(await getJSON(`/api/topics/${seg(topic)}/messages?${query}`));
    } catch (error) {
      fill(results, errorBox(error));
    }
  }

  function render(page) {
    last = page;
    const f = format.value;
    const more = page.next < page.end
      ? h("button", { id: "browse-next", type: "button", onclick: () => browse(page.next) }, "Next page") : null;
    fill(results,
      h("p", { class: "muted", id: "browse-summary" },
        `Partition ${page.partition}: offsets ${count(page.start)} to ${count(page.end)}; ` +
        `${page.records.length} record(s) from offset ${count(page.from)}.`),
      table("messages-table", [
        { title: "Offset", cell: (r) => String(r.offset), num: true, key: "offset" },
        { title: "Timestamp", cell: (r) => time(r.timestamp), key: "timestamp" },
        { title: "Key", cell: (r) => shown(r.key, f), key: "key" },
        { title: "Value", cell: (r) => shown(r.value, f), key: "value" },
        { title: "Headers", cell: (r) => r.headers.map((x) => h("div", {}, `${x.key}: `, shown(x.value, f))), key: "headers" },
      ], page.records, (r) => ({ dataset: { offset: r.offset } })), more);
  }

  return {
    element: h("div", {}, form, results),
    setPartitions(ids) {
      if (partition.options.length === ids.length) return;
      const chosen = partition.value;
      fill(partition, ids.map((p) => h("option", { value: p }, String(p))));
      if (ids.map(String).includes(chosen)) partition.value = chosen;
    },
  };
}
