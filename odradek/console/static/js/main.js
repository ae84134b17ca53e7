// The console's router: each bookmarkable address (app.py's PAGES) maps to a page module
// with mount(root, params) -> refresh(); the page refreshes every data-refresh-ms.
import * as overview from "./pages/overview.js";
import * as brokers from "./pages/brokers.js";
import * as topics from "./pages/topics.js";
import * as topic from "./pages/topic.js";
import * as groups from "./pages/groups.js";
import * as group from "./pages/group.js";

const ROUTES = [
  [/^\/$/, overview, "overview"],
  [/^\/brokers\/?$/, brokers, "brokers"],
  [/^\/topics\/?$/, topics, "topics"],
  [/^\/topics\/([^/]+)\/?$/, topic, "topics"],
  [/^\/groups\/?$/, groups, "groups"],
  [/^\/groups\/(.+?)\/?$/, group, "groups"],
];

const status = document.getElementById("status");

function route(path) {
  for (const [pattern, page, section] of ROUTES) {
    const match = pattern.exec(path);
    if (match) return { page, section, params: match.slice(1).map(decodeURIComponent) };
  }
  return null;
}

async function start() {
  const root = document.getElementById("page");
  const found = route(location.pathname);
  if (!found) {
    root.textContent = "No such page.";
    return;
  }
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.section === found.section);
  }
  const every = Number(document.body.dataset.refreshMs) || 5000;
  const refresh = found.page.mount(root, found.params);
  const tick = async () => {
    try {
      await refresh();
      status.classList.remove("error");
      status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    } catch (error) {
      status.classList.add("error");
      status.textContent = String(error.message || error);
    }
    setTimeout(tick, every);
  };
  tick();
}

start();
