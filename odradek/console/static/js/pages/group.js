// "/groups/<id>": a group's members, per-partition offsets and lag, and lag over time.
import { ApiError, getJSON, seg } from "../api.js";
import { card, count, dash, fill, h, notFound, table } from "../dom.js";
import { lineChart } from "../charts.js";

export function mount(root, [id]) {
  const cards = h("div", { class: "cards", id: "group-cards" });
  const chart = h("div", { class: "chart", id: "lag-chart" });
  const members = h("div", { id: "members" });
  const partitions = h("div", { id: "group-partitions" });
  fill(root, h("h1", {}, "Consumer group ", h("span", { id: "group-id" }, id)), cards,
    h("h2", {}, "Lag over time"), chart, h("h2", {}, "Partitions"), partitions, h("h2", {}, "Members"), members);
  let missing = false;
  return async () => {
    if (missing) return;
    let g;
    try {
      g = await getJSON(`/api/groups/${seg(id)}`);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) throw error;
      missing = true;
      notFound(root, "Consumer group", id, "/groups", "consumer groups");
      return;
    }
    fill(cards, card("State", g.state, false, "group-state"), card("Members", count(g.members.length)),
      card("Total lag", count(g.lag), false, "group-lag"),
      card("Protocol", [g.protocol_type, g.protocol].filter(Boolean).join(" / ") || "–"));
    lineChart(chart, g.lag_history, "lag (messages)", "#a05a00");
    fill(partitions, table("group-partitions-table", [
      { title: "Topic", cell: (p) => h("a", { href: `/topics/${seg(p.topic)}` }, p.topic) },
      { title: "Partition", cell: (p) => String(p.partition), num: true },
      { title: "Committed offset", cell: (p) => count(p.committed), num: true, key: "committed" },
      { title: "End offset", cell: (p) => count(p.end), num: true, key: "end" },
      { title: "Lag", cell: (p) => count(p.lag), num: true, key: "lag" },
      { title: "Member", cell: (p) => (p.member ? `${p.client_id} (${p.host})` : "–") },
    ], g.partitions, (p) => ({ dataset: { partition: `${p.topic}-${p.partition}` } })));
    fill(members, g.members.length === 0 ? h("p", { class: "muted" }, "No active members.") :
      table("members-table", [
        { title: "Member", cell: (m) => m.id },
        { title: "Client", cell: (m) => m.client_id },
        { title: "Host", cell: (m) => m.host },
        { title: "Instance", cell: (m) => dash(m.instance_id) },
        { title: "Assigned partitions", cell: (m) => m.assignment.join(", ") || "–" },
      ], g.members));
  };
}
