// Jobs: status, parallelism per operator, last checkpoint age, driver run.
import { get } from "../api.js";
import { ago, badge, dateTime, html, toHtml } from "../format.js";

export const NAV = "jobs";

export async function refresh(main) {
  const data = await get("/v1/ui/jobs");
  const link = (job) => `#/jobs/${encodeURIComponent(job)}`;
  main.innerHTML = toHtml(html`
    <h1>Jobs</h1>
    ${
      data.jobs.length === 0
        ? html`<div class="card"><p class="muted">No job is registered. A pipeline driver
            registers its job when it starts.</p></div>`
        : html`<section class="card"><table class="grid" id="jobs">
      <thead><tr><th>Job</th><th>Status</th><th>Driver</th><th>Operators (parallelism / max)</th>
        <th>Last checkpoint</th><th>Retained</th><th>Registered</th><th></th></tr></thead>
      <tbody>${data.jobs.map(
        (j) => html`<tr>
          <td><a href="${link(j.job_id)}/checkpoints"><b>${j.job_id}</b></a></td>
          <td>${badge(j.status)}${j.status_reason ? html`<div class="muted small">${j.status_reason}</div>` : ""}</td>
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
          <td>${
            j.last_checkpoint
              ? html`<a href="${link(j.job_id)}/checkpoints/${j.last_checkpoint.id}">#${j.last_checkpoint.id}</a>
                 <span class="muted">${ago(j.last_checkpoint.age_ms)}</span>`
              : html`<span class="muted">none yet</span>`
          }</td>
          <td>${j.retained}</td>
          <td class="small">${dateTime(j.registered_ms)}</td>
          <td class="actions"><a href="${link(j.job_id)}/checkpoints">Checkpoints</a>
            <a href="${link(j.job_id)}/restore">Restore preview</a></td>
        </tr>`,
      )}</tbody></table></section>`
    }
  `);
}
