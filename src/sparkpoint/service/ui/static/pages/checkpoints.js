// Checkpoints of a job: Flink's overview (counts, latest of each kind), a chart of
// duration and sizes over time, the history table (paged), the retained list with
// "verify files". Sizes are Flink's two: checkpointed (the bytes a checkpoint wrote) and
// full (everything it references, shared files of incremental state included).
import uPlot from "../vendor/uplot/uPlot.esm.js";
import { get } from "../api.js";
import { ago, badge, bytes, dateTime, duration, html, raw, sizes, toHtml } from "../format.js";
import * as rescale from "./rescale.js";

export const NAV = "jobs";
const PAGE = 25;

export function enter(main, params, state, refreshNow) {
  state.offset = 0;
  state.verify = {};
  const job = encodeURIComponent(params.job);
  main.innerHTML = toHtml(html`
    <div class="crumbs"><a href="#/jobs">Jobs</a> › <b>${params.job}</b> › checkpoints
      <a class="right" href="#/jobs/${job}/restore">Restore preview →</a></div>
    <h1>Checkpoints of <span class="mono">${params.job}</span></h1>
    <div class="cards" id="counts"></div>
    <div class="cards" id="latest"></div>
    <section class="card"><h2>Duration and sizes <span class="muted small" id="chart-note"></span></h2>
      <div id="chart" class="chart"></div></section>
    <section class="card"><h2>History <span class="muted small" id="history-note"></span></h2>
      <div class="pager" id="pager-top"></div>
      <table class="grid" id="history">
        <thead><tr><th>ID</th><th>Status</th><th>Kind</th><th>Triggered</th>
          <th class="num">End to end</th><th class="num">Checkpointed</th><th class="num">Full size</th>
          <th class="num">Acknowledged</th><th>Failure</th></tr></thead>
        <tbody></tbody></table>
      <div class="pager" id="pager"></div></section>
    <section class="card"><h2>Retained <span class="muted small" id="retained-note"></span></h2>
      <table class="grid" id="retained">
        <thead><tr><th>ID</th><th>Kind</th><th>Completed</th><th class="num">Checkpointed</th><th class="num">Full size</th>
          <th>_metadata</th><th>Files</th></tr></thead><tbody></tbody></table></section>
    ${rescale.CARD}
    <section class="card"><h2>Configuration</h2><div id="config"></div></section>
  `);
  rescale.wire(main, job, refreshNow);
  main.addEventListener("click", async (event) => {
    const pager = event.target.closest("[data-offset]");
    if (pager) {
      state.offset = Number(pager.dataset.offset);
      refreshNow();
      return;
    }
    const verify = event.target.closest("[data-verify]");
    if (verify) {
      const id = Number(verify.dataset.verify);
      state.verify[id] = { running: true };
      renderRetained(main, params, state);
      try {
        state.verify[id] = await get(`/v1/ui/jobs/${job}/checkpoints/${id}/verify`);
      } catch (err) {
        state.verify[id] = { ok: false, error: err.message, problems: [], files: 0 };
      }
      renderRetained(main, params, state);
    }
  });
}

export function leave(state) {
  state.chart?.destroy();
}

export async function refresh(main, params, state) {
  const job = encodeURIComponent(params.job);
  const data = await get(`/v1/ui/jobs/${job}/history?offset=${state.offset}&limit=${PAGE}`);
  state.data = data;
  const c = data.counts;
  main.querySelector("#counts").innerHTML = toHtml(html`
    ${stat("Triggered", c.total, "counts-total")}
    ${stat("In progress", c.in_progress, "counts-in-progress")}
    ${stat("Completed", c.completed, "counts-completed", "ok")}
    ${stat("Failed", c.failed, "counts-failed", c.failed ? "bad" : "")}
    ${stat("Restored", c.restored, "counts-restored")}
    ${data.summary ? stat("Duration avg", duration(data.summary.end_to_end_duration.avg), "duration-avg") : ""}
    ${data.summary ? sizeAverages(data.summary) : ""}`);
  const l = data.latest;
  main.querySelector("#latest").innerHTML = toHtml(html`
    ${latest("Latest completed", l.completed, params.job, data.now_ms)}
    ${latest("Latest savepoint", l.savepoint, params.job, data.now_ms)}
    ${latest("Latest failed", l.failed, params.job, data.now_ms)}
    ${restored(l.restored)}`);
  renderHistory(main, params, data);
  renderChart(main, state, data);
  renderRetained(main, params, state);
  main.querySelector("#config").innerHTML = toHtml(configTable(data.options));
  await rescale.render(main, job);
}

function stat(label, value, id, cls = "") {
  return html`<div class="card stat small-stat"><div class="label">${label}</div>
    <div class="value ${cls}" id="${id}">${value}</div></div>`;
}

// Averages over completed checkpoints: the full size, and below it the checkpointed size.
function sizeAverages(summary) {
  return html`<div class="card stat small-stat"><div class="label">Full size avg</div>
    <div class="value" id="size-avg">${bytes(summary.state_size.avg)}</div>
    <div class="sub"><span id="checkpointed-avg">${bytes(summary.checkpointed_size.avg)}</span> checkpointed</div></div>`;
}

function latest(label, e, job, now) {
  if (!e) return html`<div class="card stat latest"><div class="label">${label}</div><div class="value muted">none</div></div>`;
  const when = e.completion_timestamp || e.failure_timestamp || e.trigger_timestamp;
  return html`<div class="card stat latest"><div class="label">${label}</div>
    <div class="value"><a href="#/jobs/${encodeURIComponent(job)}/checkpoints/${e.id}">#${e.id}</a></div>
    <div class="sub">${ago(now - when)} · ${duration(e.end_to_end_duration)} · ${sizes(e.state_size, e.checkpointed_size)}</div>
    ${e.failure_message ? html`<div class="sub bad">${e.failure_message}</div>` : ""}</div>`;
}

function restored(e) {
  if (!e) return html`<div class="card stat latest"><div class="label">Latest restore</div><div class="value muted">none</div></div>`;
  return html`<div class="card stat latest"><div class="label">Latest restore</div>
    <div class="value">#${e.id}</div><div class="sub">${dateTime(e.restore_timestamp)}${e.is_savepoint ? " · savepoint" : ""}</div></div>`;
}

function renderHistory(main, params, data) {
  const job = encodeURIComponent(params.job);
  const rows = data.page.map(
    (e) => html`<tr data-id="${e.id}">
      <td><a href="#/jobs/${job}/checkpoints/${e.id}"><b>${e.id}</b></a></td>
      <td>${badge(e.status)}</td>
      <td>${e.is_savepoint ? "savepoint" : "checkpoint"}</td>
      <td>${dateTime(e.trigger_timestamp)}</td>
      <td class="num">${duration(e.end_to_end_duration)}</td>
      <td class="num checkpointed">${bytes(e.checkpointed_size)}</td>
      <td class="num full">${bytes(e.state_size)}</td>
      <td class="num">${e.num_subtasks == null ? "—" : `${e.num_acknowledged_subtasks}/${e.num_subtasks}`}</td>
      <td class="failure">${e.failure_message || ""}</td>
    </tr>`,
  );
  main.querySelector("#history tbody").innerHTML = rows.length
    ? toHtml(html`${rows}`)
    : '<tr><td colspan="9" class="muted">No checkpoint yet.</td></tr>';
  const from = data.total ? data.offset + 1 : 0;
  const to = Math.min(data.offset + data.limit, data.total);
  main.querySelector("#history-note").textContent =
    data.source === "leader" ? "(the leader's recent history and every retained checkpoint)" : "(retained checkpoints: read from ZooKeeper)";
  const last = Math.max(0, Math.floor((data.total - 1) / data.limit) * data.limit);
  const pager = toHtml(html`
    <span id="history-range">${from}–${to} of <b id="history-total">${data.total}</b></span>
    <button data-offset="0" ${raw(data.offset === 0 ? "disabled" : "")}>« newest</button>
    <button data-offset="${Math.max(0, data.offset - data.limit)}" ${raw(data.offset === 0 ? "disabled" : "")}>‹ newer</button>
    <button data-offset="${data.offset + data.limit}" ${raw(to >= data.total ? "disabled" : "")}>older ›</button>
    <button data-offset="${last}" ${raw(to >= data.total ? "disabled" : "")}>oldest »</button>`);
  main.querySelector("#pager").innerHTML = pager;
  main.querySelector("#pager-top").innerHTML = pager;
}

function renderChart(main, state, data) {
  const rows = data.chart.rows;
  const xs = rows.map((r) => r[1] / 1000);
  const durations = rows.map((r) => r[2]);
  const fullSizes = rows.map((r) => r[3]);
  const checkpointedSizes = rows.map((r) => r[4]);
  main.querySelector("#chart-note").textContent = `(${rows.length} completed checkpoints)`;
  const box = main.querySelector("#chart");
  if (!state.chart) {
    const opts = {
      width: Math.max(box.clientWidth - 8, 300),
      height: 240,
      cursor: { drag: { x: true, y: false } },
      scales: { x: { time: true }, ms: {}, b: {} },
      series: [
        {},
        { label: "end-to-end duration", scale: "ms", stroke: "#2563eb", width: 2, points: { show: rows.length < 80 }, value: (u, v) => duration(v) },
        { label: "full size", scale: "b", stroke: "#d97706", width: 2, points: { show: rows.length < 80 }, value: (u, v) => bytes(v) },
        { label: "checkpointed size", scale: "b", stroke: "#059669", width: 2, dash: [6, 3], points: { show: rows.length < 80 }, value: (u, v) => bytes(v) },
      ],
      axes: [
        { stroke: "#475569", grid: { stroke: "#eef2f7" } },
        { scale: "ms", stroke: "#2563eb", grid: { stroke: "#eef2f7" }, values: (u, ticks) => ticks.map((t) => duration(t)), size: 70 },
        { scale: "b", side: 1, stroke: "#d97706", grid: { show: false }, values: (u, ticks) => ticks.map((t) => bytes(t)), size: 80 },
      ],
    };
    state.chart = new uPlot(opts, [xs, durations, fullSizes, checkpointedSizes], box);
    state.resize = () => state.chart?.setSize({ width: Math.max(box.clientWidth - 8, 300), height: 240 });
    window.addEventListener("resize", state.resize);
  } else {
    state.chart.setData([xs, durations, fullSizes, checkpointedSizes]);
  }
}

function renderRetained(main, params, state) {
  const data = state.data;
  if (!data) return;
  const job = encodeURIComponent(params.job);
  main.querySelector("#retained-note").textContent =
    data.retained_count > data.retained.length
      ? `(newest ${data.retained.length} of ${data.retained_count})`
      : `(${data.retained_count})`;
  main.querySelector("#retained tbody").innerHTML = data.retained.length
    ? toHtml(html`${data.retained.map((p) => {
        const v = state.verify[p.checkpoint_id];
        return html`<tr data-retained="${p.checkpoint_id}">
        <td><a href="#/jobs/${job}/checkpoints/${p.checkpoint_id}"><b>${p.checkpoint_id}</b></a></td>
        <td>${p.kind.toLowerCase()}</td>
        <td>${dateTime(p.completion_timestamp_ms)}</td>
        <td class="num checkpointed">${bytes(p.checkpointed_size)}</td>
        <td class="num full">${bytes(p.state_size)}</td>
        <td class="mono small path" title="${p.metadata_uri}">${p.metadata_uri}</td>
        <td><button data-verify="${p.checkpoint_id}" ${raw(v?.running ? "disabled" : "")}>Verify files</button>
          <span class="verify-result">${verifyResult(v)}</span></td></tr>`;
      })}`)
    : '<tr><td colspan="7" class="muted">Nothing retained yet.</td></tr>';
}

function verifyResult(v) {
  if (!v) return "";
  if (v.running) return html`<span class="muted">checking…</span>`;
  if (v.error) return html`<span class="bad">${v.error}</span>`;
  if (v.ok) return html`<span class="ok">✓ ${v.files} state files OK</span>`;
  return html`<span class="bad">✗ ${v.problems.length} of ${v.files} files: ${v.problems
    .map((p) => `${p.operator}[${p.subtask}] ${p.problem}`)
    .join("; ")}</span>`;
}

function configTable(options) {
  if (!options) return html`<p class="muted">Known to the leader only.</p>`;
  return html`<table class="kv">${Object.entries(options).map(
    ([k, v]) => html`<tr><th>${k.replaceAll("_", " ")}</th><td class="mono">${typeof v === "object" ? JSON.stringify(v) : String(v)}</td></tr>`,
  )}</table>`;
}
