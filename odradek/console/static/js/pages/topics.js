// "/topics": every topic with its size and rate, and the form that creates one.
import { getJSON, postJSON, seg } from "../api.js";
import { bytes, confirmDialog, count, errorBox, fill, h, rate, table } from "../dom.js";
import { sparkline } from "../charts.js";

export function mount(root) {
  const list = h("div", { id: "topics" });
  const summary = h("p", { class: "muted", id: "topics-summary" });
  const message = h("div", { id: "create-topic-result" });
  const internal = h("input", { type: "checkbox", id: "show-internal" });
  const name = h("input", { id: "new-topic-name", required: true, placeholder: "name", pattern: "[a-zA-Z0-9._\\-]+" });
  const partitions = h("input", { id: "new-topic-partitions", type: "number", min: 1, placeholder: "default" });
  const replication = h("input", { id: "new-topic-replication", type: "number", min: 1, placeholder: "default" });
  let refresh;
  const form = h("form", { class: "inline", id: "create-topic-form", onsubmit: (e) => { e.preventDefault(); create(); } },
    h("label", {}, "Name", name), h("label", {}, "Partitions", partitions),
    h("label", {}, "Replication factor", replication),
    h("button", { class: "primary", id: "create-topic", type: "submit" }, "Create topic…"));

  async function create() {
    const body = { name: name.value.trim() };
    if (partitions.value) body.partitions = Number(partitions.value);
    if (replication.value) body.replication_factor = Number(replication.value);
    const what = [
      body.partitions ? `${body.partitions} partition(s)` : "the broker's default number of partitions",
      body.replication_factor ? `replication factor ${body.replication_factor}` : "the broker's default replication factor",
    ].join(" and ");
    if (!await confirmDialog(`Create topic ${body.name}?`, h("p", {}, `With ${what}.`), "Create")) return;
    try {
      await postJSON("/api/topics", body);
      fill(message, h("div", { class: "notice" }, `Created topic ${body.name}.`));
      form.reset();
      await refresh();
    } catch (error) {
      fill(message, errorBox(error));
    }
  }

  internal.addEventListener("change", () => refresh());
  fill(root, h("h1", {}, "Topics"), h("h2", {}, "Create a topic"), form, message,
    h("h2", {}, "All topics ", h("label", { class: "muted" }, internal, " show internal")), summary, list);
  refresh = async () => {
    const data = await getJSON("/api/topics");
    const rows = data.topics.filter((t) => internal.checked || !t.internal);
    const hidden = data.topics.length - rows.length;
    fill(summary, `${count(data.topics.filter((t) => !t.internal).length)} topic(s)`,
      hidden ? `, ${count(hidden)} internal hidden` : "");
    const sparks = [];
    fill(list, table("topics-table", [
      { title: "Topic", cell: (t) => h("a", { href: `/topics/${seg(t.name)}` }, t.name, t.internal ? " " : "",
        t.internal ? h("span", { class: "tag" }, "internal") : "") },
      { title: "Partitions", cell: (t) => count(t.partitions), num: true, key: "partitions" },
      { title: "Replication", cell: (t) => count(t.replication_factor), num: true },
      { title: "Under-replicated", cell: (t) => count(t.under_replicated), num: true },
      { title: "Offline", cell: (t) => count(t.offline), num: true },
      { title: "Size", cell: (t) => bytes(t.size), num: true },
      { title: "Messages", cell: (t) => count(t.messages), num: true },
      { title: "Messages/s", cell: (t) => rate(t.rate), num: true },
      { title: "Trend", cell: (t) => { const s = h("div", { class: "spark" }); sparks.push([s, t.rates]); return s; } },
    ], rows, (t) => ({ dataset: { topic: t.name }, class: t.offline ? "bad" : t.under_replicated ? "warn" : null })));
    for (const [el, points] of sparks) sparkline(el, points);
  };
  return refresh;
}
