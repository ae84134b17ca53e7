// A KIP-932 share group's part of "/groups/<id>" (share_group_view.py): its cards (type, state,
// members, assignor, epochs, in flight), the in-flight count over time, and per partition the
// share-partition start offset, the end offset and the in-flight count, which is the broker's
// lag when it gives one, else end offset − start offset: records not yet delivered or in flight.
import { seg } from "../api.js";
import { card, count, dash, fill, h, table } from "../dom.js";
import { lineChart } from "../charts.js";

const FROM_OFFSETS = "end offset - start offset";

export const IN_FLIGHT_NOTE = "In flight: records from the share-partition start offset to the end offset, " +
  "either not yet delivered or delivered and not yet acknowledged (end offset − start offset, " +
  "where the broker gives no lag).";

export function renderShareGroup(g, { cards, chart, chartTitle, partitions, members }) {
  fill(cards, card("Type", g.type, false, "group-type"), card("State", g.state, false, "group-state"),
    card("Members", count(g.members.length)), card("In flight", count(g.in_flight), false, "group-in-flight"),
    card("Assignor", dash(g.assignor), false, "group-assignor"),
    card("Group epoch", String(g.group_epoch), false, "group-epoch"),
    card("Target assignment epoch", String(g.assignment_epoch), false, "group-assignment-epoch"));
  fill(chartTitle, "In flight over time");
  lineChart(chart, g.in_flight_history, "in flight (records)", "#5a3d8a");
  fill(partitions, h("p", { class: "muted", id: "in-flight-note" }, IN_FLIGHT_NOTE),
    table("group-partitions-table", [
      { title: "Topic", cell: (p) => h("a", { href: `/topics/${seg(p.topic)}` }, p.topic) },
      { title: "Partition", cell: (p) => String(p.partition), num: true },
      { title: "Start offset", cell: (p) => count(p.start_offset), num: true, key: "start-offset" },
      { title: "End offset", cell: (p) => count(p.end), num: true, key: "end" },
      { title: "In flight", cell: inFlightCell, num: true, key: "in-flight" },
      { title: "Members", cell: (p) => String(p.members.length), num: true, key: "holders" },
    ], g.partitions, (p) => ({ dataset: { partition: `${p.topic}-${p.partition}` } })));
  fill(members, g.members.length === 0 ? h("p", { class: "muted" }, "No active members.") :
    table("members-table", [
      { title: "Member", cell: (m) => m.id },
      { title: "Client", cell: (m) => m.client_id },
      { title: "Host", cell: (m) => m.host },
      { title: "Rack", cell: (m) => dash(m.rack) },
      { title: "Member epoch", cell: (m) => String(m.member_epoch), num: true, key: "member-epoch" },
      { title: "Assigned partitions", cell: (m) => m.assignment.join(", ") || "–", key: "assignment" },
    ], g.members, (m) => ({ dataset: { member: m.id } })));
}

function inFlightCell(p) {
  const title = p.in_flight_basis === FROM_OFFSETS ? "not yet delivered or in flight (end offset − start offset)" :
    p.in_flight_basis === "lag" ? "the broker's lag" : null;
  return h("span", { title }, count(p.in_flight));
}
