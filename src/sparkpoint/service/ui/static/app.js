// The UI's entry: hash routes, one page at a time, refreshed by polling.
import { ApiError, get } from "./api.js";
import { esc, html, toHtml } from "./format.js";
import * as cluster from "./pages/cluster.js";
import * as jobs from "./pages/jobs.js";
import * as checkpoints from "./pages/checkpoints.js";
import * as detail from "./pages/detail.js";
import * as restore from "./pages/restore.js";

const REFRESH_MS = Number(new URLSearchParams(location.search).get("refresh") || 2000);

const ROUTES = [
  [/^#\/cluster$/, cluster, () => ({})],
  [/^#\/jobs$/, jobs, () => ({})],
  [/^#\/jobs\/([^/]+)\/checkpoints$/, checkpoints, (m) => ({ job: decodeURIComponent(m[1]) })],
  [
    /^#\/jobs\/([^/]+)\/checkpoints\/(\d+)$/,
    detail,
    (m) => ({ job: decodeURIComponent(m[1]), id: Number(m[2]) }),
  ],
  [/^#\/jobs\/([^/]+)\/restore$/, restore, (m) => ({ job: decodeURIComponent(m[1]) })],
];

let current = null; // { page, params, state, timer, generation }
let generation = 0;

function route() {
  const hash = location.hash || "#/cluster";
  for (const [pattern, page, params] of ROUTES) {
    const m = hash.match(pattern);
    if (m) return { page, params: params(m) };
  }
  return { page: cluster, params: {} };
}

async function refreshServedBy() {
  try {
    const me = await get("/v1/ui/replica");
    const served = document.getElementById("served");
    served.innerHTML = toHtml(
      html`served by <b>${me.instance_id}</b> <span class="role ${me.role}">${me.role}</span>`,
    );
    const banner = document.getElementById("banner");
    if (me.role !== "leader") {
      banner.hidden = false;
      banner.innerHTML = toHtml(
        html`This replica <b>${me.instance_id}</b> <b>follows</b> the leader: it shows what
        ZooKeeper and checkpoint storage hold (retained checkpoints); in-flight and failed
        checkpoints are known to the leader only.`,
      );
    } else {
      banner.hidden = true;
    }
  } catch {
    /* the page's own refresh reports errors */
  }
}

function setLive(ok, text) {
  const live = document.getElementById("live");
  live.classList.toggle("stale", !ok);
  document.getElementById("live-text").textContent = text;
}

async function tick(gen) {
  if (gen !== generation) return;
  const { page, params, state } = current;
  try {
    await Promise.all([page.refresh(document.getElementById("main"), params, state), refreshServedBy()]);
    if (gen !== generation) return; // the user went to another page meanwhile
    setLive(true, `live · ${new Date().toLocaleTimeString()}`);
  } catch (err) {
    if (gen !== generation) return; // an answer for a page no longer shown
    setLive(false, "stale");
    if (!(err instanceof ApiError) && !(err instanceof TypeError && /fetch/i.test(err.message))) {
      console.error(err); // a bug in the page, not an unreachable or refusing server
    }
    const box = document.getElementById("page-error");
    if (box) {
      box.hidden = false;
      box.textContent = `Could not refresh: ${err.message}`;
    } else {
      document.getElementById("main").innerHTML =
        `<div class="card error-card" id="page-error">${esc(err.message)}</div>`;
    }
  }
  if (gen === generation) current.timer = setTimeout(() => tick(gen), REFRESH_MS);
}

function navigate() {
  if (current?.timer) clearTimeout(current.timer);
  current?.page.leave?.(current.state);
  const { page, params } = route();
  generation += 1;
  current = { page, params, state: {}, timer: null };
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.page === page.NAV);
  }
  const main = document.getElementById("main");
  main.innerHTML = '<p class="muted">Loading…</p>';
  page.enter?.(main, params, current.state, () => {
    // A page asks for an immediate refresh after the user changed something.
    if (current.timer) clearTimeout(current.timer);
    tick(generation);
  });
  tick(generation);
}

window.addEventListener("hashchange", navigate);
if (!location.hash) history.replaceState(null, "", "#/cluster");
navigate();
