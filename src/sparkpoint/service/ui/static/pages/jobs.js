// Jobs: status, how the pipeline keeps up (records/s, epoch, source lag, from its
// driver's heartbeats), parallelism per operator, last checkpoint, driver run.
import { get } from "../api.js";
import { ago, badge, dateTime, duration, html, sizes, toHtml } from "../format.js";

const rate = (n) => (n >= 100 ? Math.round(n).toLocaleString("en") : n.toFixed(1));

export const NAV = "jobs";

export async function refresh(main) {
  const data = await get("/v1/ui/jobs");
  const link = (job) => `#/jobs/${encodeURIComponent(job)}`;
  const withLag = data.jobs.some((j) => j.progress?.source_lag != null);
  const progress = (j, field, show) =>
    j.progress && j.progress[field] != null
      ? html`<td class="num" title="reported ${ago(j.progress.age_ms)}">${show(j.progress[field])}</td>`
      : html`<td class="num muted">—</td>`;
  main.innerHTML = toHtml(html`
    <h1>Jobs</h1>
    ${
      data.jobs.length === 0
        ? html`<div class="card"><p class="muted">No job is registered. A pipeline driver
            registers its job when it starts.</p></div>`
        : html`<section class="card"><table class="grid" id="jobs">
      <thead><tr><th>Job</th><th>Status</th><th class="num">Records/s</th><th class="num">Epoch</th>
        ${withLag ? html`<th class="num" title="waiting in the source">Source lag</th>` : ""}
        <th>Last checkpoint</th><th>Driver</th><th>Operators (parallelism / max)</th>
        <th>Retained</th><th>Registered</th><th></th></tr></thead>
      <tbody>${data.jobs.map(
        (j) => html`<tr>
          <td><a href="${link(j.job_id)}/checkpoints"><b>${j.job_id}</b></a></td>
          <td>${badge(j.status)}${j.status_reason ? html`<div class="muted small">${j.status_reason}</div>` : ""}</td>
          ${progress(j, "records_per_s", rate)}
          ${progress(j, "epoch", String)}
          ${withLag ? progress(j, "source_lag", (n) => n.toLocaleString("en")) : ""}
          <td class="last-checkpoint">${
            j.last_checkpoint
              ? html`<a href="${link(j.job_id)}/checkpoints/${j.last_checkpoint.id}">#${j.last_checkpoint.id}</a>
                 <span class="muted">${ago(j.last_checkpoint.age_ms)}</span>
                 <div class="small">${duration(j.last_checkpoint.duration_ms)} · ${sizes(j.last_checkpoint.state_size, j.last_checkpoint.checkpointed_size)}</div>`
              : html`<span class="muted">none yet</span>`
          }</td>
          <td>${
            j.connected === null || j.connected === undefined
              ? html`<span class="muted">unknown (follower)</span>`
              : j.connected
                ? html`<span class="ok">connected</span>`
                : html`<span class="warn">not heartbeating</span>`
          }<div class="mono small" title="driver run id">${j.driver_run ? `run ${j.driver_run}` : ""}</div>
          ${j.standby_run ? html`<div class="mono small muted">standby ${j.standby_run}</div>` : ""}</td>
          <td>${j.operators.map(
            (op) => html`<span class="op" title="${op.name || op.uid}${op.keyed ? " (keyed)" : ""}">
              ${op.uid}${op.keyed ? html`<i>keyed</i>` : ""} <b>${op.parallelism}</b><span class="muted">/${op.max_parallelism}</span></span>`,
          )}</td>
          <td>${j.retained}</td>
          <td class="small">${dateTime(j.registered_ms)}</td>
          <td class="actions"><a href="${link(j.job_id)}/checkpoints">Checkpoints</a>
            <a href="${link(j.job_id)}/restore">Restore preview</a></td>
        </tr>`,
      )}</tbody></table></section>`
    }
  `);
}
