// "/groups": every group with its type (classic, consumer (KIP-848) or share (KIP-932)), state,
// members and total lag; when there are share groups, an "In flight" column with each share
// group's records not yet delivered or in flight (groups_view.py).
import { getJSON, seg } from "../api.js";
import { count, fill, h, table } from "../dom.js";

export function mount(root) {
  const list = h("div", { id: "groups" });
  fill(root, h("h1", {}, "Consumer groups"), list);
  return async () => {
    const data = await getJSON("/api/groups");
    const shared = data.groups.some((g) => g.type === "share");
    fill(list, data.groups.length === 0 ? h("p", { class: "muted" }, "No consumer groups.") :
      table("groups-table", [
        { title: "Group", cell: (g) => h("a", { href: `/groups/${seg(g.id)}` }, g.id) },
        { title: "Type", cell: (g) => g.type || "–", key: "type" },
        { title: "State", cell: (g) => g.state, key: "state" },
        { title: "Protocol", cell: (g) => [g.protocol_type, g.protocol].filter(Boolean).join(" / ") || "–" },
        { title: "Members", cell: (g) => count(g.members), num: true, key: "members" },
        { title: "Lag", cell: (g) => count(g.lag), num: true, key: "lag" },
        ...(shared ? [{ title: "In flight", cell: (g) => count(g.in_flight), num: true, key: "in-flight" }] : []),
      ], data.groups, (g) => ({ dataset: { group: g.id } })));
  };
}
