// "/": the cluster at a glance, and its throughput over time.
import { getJSON } from "../api.js";
import { card, count, fill, h, table } from "../dom.js";
import { lineChart } from "../charts.js";

export function mount(root) {
  const cards = h("div", { class: "cards", id: "overview-cards" });
  const chart = h("div", { class: "chart", id: "throughput-chart" });
  const brokers = h("div", { id: "overview-brokers" });
  fill(root, h("h1", {}, "Cluster overview"), cards,
    h("h2", {}, "Throughput (messages/s, all topics)"), chart, h("h2", {}, "Brokers"), brokers);
  return async () => {
    const c = await getJSON("/api/cluster");
    fill(cards,
      card("Cluster id", c.cluster_id || "–"),
      card("Brokers", count(c.brokers.length - c.offline_brokers), false, "card-brokers"),
      card("Offline brokers", count(c.offline_brokers), c.offline_brokers > 0, "card-offline-brokers"),
      card("Controller", c.controller, false, "card-controller"),
      // users' topics and their partitions, as /topics lists them; internal ones apart
      card("Topics", count(c.topics), false, "card-topics"),
      card("Partitions", count(c.partitions), false, "card-partitions"),
      card("Internal topics", `${count(c.internal_topics)} (${count(c.internal_partitions)} partitions)`, false,
        "card-internal-topics"),
      card("Under-replicated", count(c.under_replicated), c.under_replicated > 0, "card-under-replicated"),
      card("Offline", count(c.offline), c.offline > 0, "card-offline"));
    lineChart(chart, c.throughput, "messages/s");
    fill(brokers, table("overview-brokers-table", [
      { title: "Id", cell: (b) => String(b.id) },
      { title: "Host", cell: (b) => (b.host === null ? "–" : `${b.host}:${b.port}`) },
      { title: "Status", cell: (b) => (b.offline ? h("span", { class: "tag bad" }, "offline") : "online"), key: "status" },
      { title: "Rack", cell: (b) => b.rack || "–" },
      { title: "Role", cell: (b) => (b.controller ? h("span", { class: "tag" }, "controller") : "") },
    ], c.brokers, (b) => ({ dataset: { broker: b.id }, class: b.offline ? "bad" : null })));
  };
}
