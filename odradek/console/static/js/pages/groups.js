// "/groups": every consumer group with its type (classic or consumer, KIP-848), state, members and total lag.
import { getJSON, seg } from "../api.js";
import { count, fill, h, table } from "../dom.js";

export function mount(root) {
  const list = h("div", { id: "groups" });
  fill(root, h("h1", {}, "Consumer groups"), list);
  return async () => {
    const data = await getJSON("/api/groups");
    fill(list, data.groups.length === 0 ? h("p", { class: "muted" }, "No consumer groups.") :
      table("groups-table", [
        { title: "Group", cell: (g) => h("a", { href: `/groups/${seg(g.id)}` }, g.id) },
        { title: "Type", cell: (g) => g.type || "–", key: "type" },
        { title: "State", cell: (g) => g.state, key: "state" },
        { title: "Protocol", cell: (g) => [g.protocol_type, g.protocol].filter(Boolean).join(" / ") || "–" },
        { title: "Members", cell: (g) => count(g.members), num: true, key: "members" },
        { title: "Lag", cell: (g) => count(g.lag), num: true, key: "lag" },
      ], data.groups, (g) => ({ dataset: { group: g.id } })));
  };
}
