// "/brokers": each broker, what it leads and holds, and its log directories; a broker seen
// before or named in a replica set that is not live now is listed as offline.
import { getJSON } from "../api.js";
import { bytes, count, errorBox, fill, h, table } from "../dom.js";

export function mount(root) {
  const body = h("div");
  fill(root, h("h1", {}, "Brokers"), body);
  return async () => {
    const data = await getJSON("/api/brokers");
    fill(body,
      table("brokers-table", [
        { title: "Id", cell: (b) => String(b.id) },
        { title: "Host", cell: (b) => (b.host === null ? "–" : `${b.host}:${b.port}`) },
        { title: "Status", cell: (b) => (b.offline ? h("span", { class: "tag bad" }, "offline") : "online"), key: "status" },
        { title: "Rack", cell: (b) => b.rack || "–" },
        { title: "Controller", cell: (b) => (b.controller ? "yes" : "") },
        { title: "Leader of", cell: (b) => count(b.leaders), num: true },
        { title: "Replicas", cell: (b) => count(b.replicas), num: true },
        { title: "Log directories", cell: (b) => b.dirs.map((d) => h("div", {},
          `${d.path}: ${bytes(d.size)} of replicas` +
          (d.usable_bytes >= 0 ? `, ${bytes(d.usable_bytes)} free of ${bytes(d.total_bytes)}` : "") +
          (d.error ? ` (${d.error})` : ""))) },
      ], data.brokers, (b) => ({ dataset: { broker: b.id }, class: b.offline ? "bad" : null })),
      data.dirs_error ? errorBox(`Log directories unavailable: ${data.dirs_error}`) : null);
  };
}
