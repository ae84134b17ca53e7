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
      card("Brokers", count(c.brokers.length), false, "card-brokers"),
      card("Controller", c.controller, false, "card-controller"),
      card("Topics", count(c.topics), false, "card-topics"),
      card("Partitions", count(c.partitions), false, "card-partitions"),
      card("Under-replicated", count(c.under_replicated), c.under_replicated > 0, "card-under-replicated"),
      card("Offline", count(c.offline), c.offline > 0, "card-offline"));
    lineChart(chart, c.throughput, "messages/s");
    fill(brokers, table("overview-brokers-table", [
      { title: "Id", cell: (b) => String(b.id) },
      { title: "Host", cell: (b) => `${b.host}:${b.port}` },
      { title: "Rack", cell: (b) => b.rack || "–" },
      { title: "Role", cell: (b) => (b.controller ? h("span", { class: "tag" }, "controller") : "") },
    ], c.brokers));
  };
}
