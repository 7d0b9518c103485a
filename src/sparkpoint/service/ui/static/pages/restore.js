// Restore preview: the restore plan at a chosen parallelism, drawn as key-group ranges
// per new subtask next to the checkpoint's own ranges. Read-only: the job is untouched.
import { get } from "../api.js";
import { bytes, html, toHtml } from "../format.js";

export const NAV = "jobs";
const COLORS = ["#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2", "#65a30d", "#db2777"];

export function enter(main, params, state, refreshNow) {
  state.parallelism = null;
  state.checkpoint = "";
  const job = encodeURIComponent(params.job);
  main.innerHTML = toHtml(html`
    <div class="crumbs"><a href="#/jobs">Jobs</a> › <a href="#/jobs/${job}/checkpoints">${params.job}</a> › restore preview</div>
    <h1>Restore preview of <span class="mono">${params.job}</span></h1>
    <form class="card controls" id="restore-form">
      <label>New parallelism <input id="parallelism" type="number" min="1" max="32768" required></label>
      <label>From checkpoint <select id="checkpoint"></select></label>
      <button type="submit" class="primary">Preview</button>
      <span class="muted small">Computes the plan a driver restoring at this parallelism would get; changes nothing.</span>
    </form>
    <div id="plan"></div>`);
  main.querySelector("#restore-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.parallelism = Number(main.querySelector("#parallelism").value);
    state.checkpoint = main.querySelector("#checkpoint").value;
    state.planKey = null;
    refreshNow();
  });
}

export async function refresh(main, params, state) {
  const job = encodeURIComponent(params.job);
  const history = await get(`/v1/ui/jobs/${job}/history?offset=0&limit=1`);
  const select = main.querySelector("#checkpoint");
  const ids = history.retained.map((p) => p.checkpoint_id);
  const options = ['<option value="">newest retained</option>', ...ids.map((id) => `<option value="${id}">${id}</option>`)].join("");
  if (select.dataset.options !== options) {
    select.innerHTML = options;
    select.dataset.options = options;
    select.value = state.checkpoint;
  }
  if (state.parallelism === null) {
    const jobs = await get("/v1/ui/jobs");
    const me = jobs.jobs.find((j) => j.job_id === params.job);
    state.parallelism = me ? Math.max(...me.operators.map((o) => o.parallelism)) + 1 : 2;
    main.querySelector("#parallelism").value = state.parallelism;
  }
  const key = `${state.parallelism}/${state.checkpoint}`;
  if (state.planKey === key) return; // a plan of a retained checkpoint does not change
  const box = main.querySelector("#plan");
  if (ids.length === 0) {
    box.innerHTML = '<div class="card muted">No retained checkpoint to restore from yet.</div>';
    return;
  }
  let preview;
  try {
    const cp = state.checkpoint ? `&checkpoint_id=${state.checkpoint}` : "";
    preview = await get(`/v1/ui/jobs/${job}/restore-preview?parallelism=${state.parallelism}${cp}`);
  } catch (err) {
    if (err.status >= 400 && err.status < 500) {
      box.innerHTML = toHtml(html`<div class="card error-card" id="plan-error">${err.message}</div>`);
      state.planKey = key;
      return;
    }
    throw err;
  }
  state.planKey = key;
  box.innerHTML = toHtml(drawPlan(preview));
}

// A plan's stream is {file, size} or {inline, data (base64)}.
function streamSize(stream) {
  if (!stream) return 0;
  if (stream.size !== undefined) return stream.size;
  const data = stream.data || "";
  return Math.floor((data.length * 3) / 4) - (data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0);
}

function ranges(max, p) {
  const out = [];
  for (let i = 0; i < p; i++) out.push([Math.ceil((i * max) / p), Math.ceil(((i + 1) * max) / p) - 1]);
  return out;
}

function bar(label, segments, max) {
  return html`<div class="kg-row"><div class="kg-label">${label}</div><div class="kg-bar">${segments.map(
    ([start, end, i, title]) => html`<div class="kg-seg" title="${title}"
      style="left:${(100 * start) / max}%;width:${(100 * (end - start + 1)) / max}%;background:${COLORS[i % COLORS.length]}">
      <span>${i}</span></div>`,
  )}</div></div>`;
}

function drawPlan(preview) {
  const plan = preview.plan;
  return html`<div class="card"><p>Checkpoint <b>#${preview.checkpoint_id}</b> <span class="mono small">${preview.metadata_uri}</span>
    → parallelism <b>${preview.parallelism}</b>${plan.non_restored.length ? html` · not restored: ${plan.non_restored.join(", ")}` : ""}</p></div>
    ${plan.operators.map((op) => {
      const max = op.max_parallelism;
      const keyed = op.subtasks.some((s) => s.keyed.length > 0);
      const oldP = op.old_parallelism ?? preview.old_parallelism[op.uid];
      const newSegs = op.subtasks.map((s) => [s.key_groups[0], s.key_groups[1], s.index,
        `new subtask ${s.index}: key groups ${s.key_groups[0]}–${s.key_groups[1]}`]);
      const oldSegs = oldP ? ranges(max, oldP).map(([a, b], i) => [a, b, i, `old subtask ${i}: key groups ${a}–${b}`]) : [];
      return html`<section class="card operator" data-operator="${op.uid}">
        <h2>${op.uid} <span class="muted small">${oldP ?? "—"} → ${op.parallelism} subtasks · ${max} key groups${keyed ? "" : " · operator state only"}</span></h2>
        <div class="kg">
          ${oldSegs.length ? bar(`now (${oldP})`, oldSegs, max) : ""}
          ${bar(`after (${op.parallelism})`, newSegs, max)}
          <div class="kg-axis"><span>0</span><span>${Math.floor(max / 2)}</span><span>${max - 1}</span></div>
        </div>
        <table class="grid plan-table"><thead><tr><th>New subtask</th><th>Key groups</th><th>Keyed state handles (their key groups)</th>
          <th>Operator state</th><th class="num">Handles' size</th></tr></thead><tbody>
        ${op.subtasks.map((s) => {
          const size = [...s.keyed, ...s.operator].reduce((n, h) => n + streamSize(h.stream), 0);
          return html`<tr><td><span class="swatch" style="background:${COLORS[s.index % COLORS.length]}"></span>${s.index}</td>
            <td class="mono">${s.key_groups[0]}–${s.key_groups[1]} (${s.key_groups[1] - s.key_groups[0] + 1})</td>
            <td class="mono small">${s.keyed.map((k) => `[${k.key_groups[0]}–${k.key_groups[1]}]`).join(" ") || "—"}</td>
            <td class="small">${s.operator.length ? `${s.operator.length} handles` : "—"}</td>
            <td class="num">${bytes(size)}</td></tr>`;
        })}</tbody></table></section>`;
    })}`;
}
