// "/topics/<name>": partitions, the message browser, configs, and deleting the topic.
import { deleteJSON, getJSON, postJSON, seg } from "../api.js";
import { ApiError } from "../api.js";
import { bytes, card, confirmDialog, count, dash, errorBox, fill, h, notFound, rate, table } from "../dom.js";
import { lineChart } from "../charts.js";
import { messageBrowser } from "./message_browser.js";

export function mount(root, [name]) {
  const path = `/api/topics/${seg(name)}`;
  const cards = h("div", { class: "cards", id: "topic-cards" });
  const chart = h("div", { class: "chart", id: "rate-chart" });
  const partitions = h("div", { id: "partitions" });
  const configs = h("div", { id: "configs" });
  const message = h("div", { id: "topic-result" });
  const browser = messageBrowser(name);
  const remove = h("button", { class: "danger", id: "delete-topic", onclick: () => deleteTopic() }, "Delete topic…");
  fill(root, h("h1", {}, "Topic ", h("span", { id: "topic-name" }, name)), cards, message,
    h("h2", {}, "Messages per second"), chart, h("h2", {}, "Partitions"), partitions,
    h("h2", {}, "Messages"), browser.element, h("h2", {}, "Configs"), configs, h("h2", {}, "Danger zone"), remove);

  async function deleteTopic() {
    const body = h("p", {}, `Topic ${name} and all its records will be deleted. This cannot be undone.`);
    if (!await confirmDialog(`Delete topic ${name}?`, body, "Delete")) return;
    // No refresh may ask for the topic once it is being deleted: its 404 would be logged as an error.
    deleting = true;
    await pending;  // a refresh already under way finishes first
    try {
      await deleteJSON(path);
      location.assign("/topics");
    } catch (error) {
      deleting = false;
      fill(message, errorBox(error));
    }
  }

  async function alter(change, title) {
    try {
      await postJSON(`${path}/configs`, change);
      fill(message, h("div", { class: "notice" }, title));
      await refresh();
    } catch (error) {
      fill(message, errorBox(error));
    }
  }

  async function edit(entry) {
    const input = h("input", { id: "config-value", value: entry.value ?? "", size: 40, autofocus: true });
    const body = h("label", {}, `New value of ${entry.name} (now ${dash(entry.value)}):`, h("br"), input);
    if (!await confirmDialog(`Change ${entry.name}?`, body, "Save")) return;
    await alter({ set: { [entry.name]: input.value } }, `Set ${entry.name} = ${input.value}.`);
  }

  async function reset(entry) {
    if (!await confirmDialog(`Reset ${entry.name}?`, h("p", {}, "It returns to the broker's default."), "Reset")) return;
    await alter({ delete: [entry.name] }, `Reset ${entry.name}.`);
  }

  let missing = false;
  let deleting = false;
  let pending = Promise.resolve();
  const refresh = () => {
    if (missing || deleting) return Promise.resolve();
    const run = load();
    pending = run.catch(() => {});
    return run;
  };
  const load = async () => {
    let t;
    try {
      t = await getJSON(path);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) throw error;
      missing = true;
      notFound(root, "Topic", name, "/topics", "topics");
      return;
    }
    fill(cards, card("Partitions", count(t.partitions.length)), card("Messages", count(t.messages)),
      card("Size", bytes(t.size)), card("Messages/s", rate(t.rate)),
      card("Under-replicated", count(t.partitions.filter((p) => p.under_replicated).length)));
    lineChart(chart, t.rates, "messages/s");
    browser.setPartitions(t.partitions.map((p) => p.partition));
    fill(partitions, table("partitions-table", [
      { title: "Partition", cell: (p) => String(p.partition), num: true },
      { title: "Leader", cell: (p) => (p.leader < 0 ? "none" : String(p.leader)), num: true, key: "leader" },
      { title: "Replicas", cell: (p) => p.replicas.join(", "), key: "replicas" },
      { title: "ISR", cell: (p) => p.isr.join(", "), key: "isr" },
      { title: "Start offset", cell: (p) => count(p.start), num: true, key: "start" },
      { title: "End offset", cell: (p) => count(p.end), num: true, key: "end" },
      { title: "Size", cell: (p) => bytes(p.size), num: true },
    ], t.partitions, (p) => ({ dataset: { partition: p.partition }, class: p.offline ? "bad" : p.under_replicated ? "warn" : null })),
    t.sizes_error ? errorBox(`Sizes unavailable: ${t.sizes_error}`) : null);
    fill(configs, table("configs-table", [
      { title: "Name", cell: (c) => c.name },
      { title: "Value", cell: (c) => (c.sensitive ? "(sensitive)" : dash(c.value)), key: "value" },
      { title: "Source", cell: (c) => c.source },
      { title: "", cell: (c) => (c.read_only ? "read-only" : [
        h("button", { class: "edit-config", onclick: () => edit(c) }, "Edit…"),
        c.source === "DYNAMIC_TOPIC_CONFIG" ? h("button", { class: "reset-config", onclick: () => reset(c) }, "Reset…") : null]) },
    ], t.configs, (c) => ({ dataset: { config: c.name } })));
  };
  return refresh;
}
