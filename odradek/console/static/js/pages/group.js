// "/groups/<id>": a group's members, per-partition offsets and lag, and lag over time.
// A KIP-848 consumer group (type "consumer") also shows its type, group epoch, target
// assignment epoch and assignor, and per member its epoch and target assignment (groups_view.py).
// A KIP-932 share group (type "share") shows its in-flight counts instead (share_group.js).
import { ApiError, getJSON, seg } from "../api.js";
import { card, count, dash, fill, h, notFound, table } from "../dom.js";
import { lineChart } from "../charts.js";
import { renderShareGroup } from "./share_group.js";

export function mount(root, [id]) {
  const cards = h("div", { class: "cards", id: "group-cards" });
  const chart = h("div", { class: "chart", id: "lag-chart" });
  const members = h("div", { id: "members" });
  const partitions = h("div", { id: "group-partitions" });
  const chartTitle = h("h2", { id: "chart-title" }, "Lag over time");
  const heading = h("span", { id: "group-kind" }, "Consumer group ");
  fill(root, h("h1", {}, heading, h("span", { id: "group-id" }, id)), cards, chartTitle, chart,
    h("h2", {}, "Partitions"), partitions, h("h2", {}, "Members"), members);
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
    if (g.type === "share") {
      fill(heading, "Share group ");
      renderShareGroup(g, { cards, chart, chartTitle, partitions, members });
      return;
    }
    const modern = g.type === "consumer";
    fill(cards, card("State", g.state, false, "group-state"), card("Members", count(g.members.length)),
      card("Total lag", count(g.lag), false, "group-lag"),
      modern ? consumerGroupCards(g) :
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
        ...(modern ? [{ title: "Member epoch", cell: (m) => String(m.member_epoch), num: true, key: "member-epoch" }] : []),
        { title: "Assigned partitions", cell: (m) => m.assignment.join(", ") || "–", key: "assignment" },
        ...(modern ? [{ title: "Target assignment", cell: (m) => m.target_assignment.join(", ") || "–",
          key: "target-assignment" }] : []),
      ], g.members, (m) => (m.reconciling ? {
        dataset: { member: m.id }, class: "warn reconciling", title: "reconciling: its assignment is not yet its target",
      } : { dataset: { member: m.id } })));
  };
}

// A consumer group's own cards: its type, the assignor and the two epochs (a member whose
// epoch is below the target assignment epoch has not yet reached its target).
function consumerGroupCards(g) {
  return [card("Type", g.type, false, "group-type"), card("Assignor", dash(g.assignor), false, "group-assignor"),
    card("Group epoch", String(g.group_epoch), false, "group-epoch"),
    card("Target assignment epoch", String(g.assignment_epoch), false, "group-assignment-epoch")];
}
