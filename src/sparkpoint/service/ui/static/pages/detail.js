// One checkpoint: its record, and per operator and subtask its sizes (from its _metadata)
// and acknowledgement times (from the leader's history, while it has them). Sizes are
// Flink's two: checkpointed (the bytes this checkpoint wrote) and full (all it references).
import { get } from "../api.js";
import { badge, bytes, dateTime, duration, html, raw, sizes, time, toHtml } from "../format.js";

export const NAV = "jobs";

export async function refresh(main, params) {
  const job = encodeURIComponent(params.job);
  const c = await get(`/v1/jobs/${job}/checkpoints/${params.id}`);
  const md = c.metadata && !c.metadata.error ? c.metadata : null;
  const acks = new Map((c.subtask_acks || []).map((a) => [`${a.operator}/${a.subtask}`, a]));
  const ops = md ? md.operators : [];
  const maxSize = Math.max(1, ...ops.flatMap((o) => o.subtasks.map((s) => s.state_size)));
  main.innerHTML = toHtml(html`
    <div class="crumbs"><a href="#/jobs">Jobs</a> › <a href="#/jobs/${job}/checkpoints">${params.job}</a> › checkpoint ${params.id}</div>
    <h1>Checkpoint ${params.id} ${badge(c.status)} ${c.is_savepoint ? html`<span class="tag">savepoint</span>` : ""}</h1>
    <div class="cards">
      ${stat("Triggered", time(c.trigger_timestamp), dateTime(c.trigger_timestamp).slice(0, 10))}
      ${stat("Completed", c.completion_timestamp ? time(c.completion_timestamp) : "—")}
      ${stat("End to end", duration(c.end_to_end_duration))}
      ${stat("Checkpointed size", bytes(c.checkpointed_size), "written by this checkpoint", "checkpointed-size")}
      ${stat("Full size", bytes(c.state_size), "all the state it references", "full-size")}
      ${stat("Acknowledged", c.num_subtasks == null ? "—" : `${c.num_acknowledged_subtasks}/${c.num_subtasks}`)}
      ${stat("Retained", c.retained ? "yes" : "no")}
    </div>
    ${c.failure_message ? html`<div class="card error-card">Failure: ${c.failure_message}</div>` : ""}
    ${c.external_path ? html`<p class="mono small">${c.external_path}</p>` : ""}
    ${
      c.metadata?.error
        ? html`<div class="card error-card">_metadata unreadable: ${c.metadata.error}</div>`
        : ""
    }
    ${
      md
        ? ops.map(
            (op) => html`<section class="card operator">
          <h2>${op.uid} <span class="muted small">parallelism ${op.parallelism} · max ${op.max_parallelism} · ${sizes(op.state_size, op.checkpointed_size)}</span></h2>
          <table class="grid subtasks"><thead><tr><th>Subtask</th><th>Acknowledged</th>
            <th class="num">After trigger</th><th class="num">Checkpointed</th><th class="num">Full size</th><th class="bar-col"></th>
            <th>Key groups</th><th>Handles</th></tr></thead><tbody>
          ${op.subtasks.map((s) => {
            const a = acks.get(`${op.uid}/${s.index}`);
            const kg = s.keyed.map((k) => `${k.key_groups[0]}–${k.key_groups[1]}`).join(", ");
            return html`<tr>
              <td>${s.index}</td>
              <td>${a ? time(a.ack_timestamp) : "—"}</td>
              <td class="num">${a ? duration(a.ack_timestamp - c.trigger_timestamp) : "—"}</td>
              <td class="num checkpointed">${bytes(s.checkpointed_size)}</td>
              <td class="num full">${bytes(s.state_size)}</td>
              <td class="bar-col">${sizeBar(s, maxSize)}</td>
              <td class="mono small">${kg || "—"}</td>
              <td class="small">${handles(s)}</td></tr>`;
          })}</tbody></table></section>`,
          )
        : html`<div class="card"><p class="muted">${
            c.retained
              ? "No _metadata to show."
              : "Per-subtask sizes come from _metadata, which only retained checkpoints keep, or from the acknowledgements in the leader's recent history."
          }</p>${acksOnly(c)}</div>`
    }
  `);
}

function acksOnly(c) {
  if (!c.subtask_acks || c.subtask_acks.length === 0) return "";
  return html`<table class="grid"><thead><tr><th>Operator</th><th>Subtask</th><th>Acknowledged</th>
    <th class="num">After trigger</th><th class="num">Checkpointed</th><th class="num">Full size</th></tr></thead><tbody>${c.subtask_acks.map(
      (a) => html`<tr><td>${a.operator}</td><td>${a.subtask}</td><td>${time(a.ack_timestamp)}</td>
      <td class="num">${duration(a.ack_timestamp - c.trigger_timestamp)}</td>
      <td class="num checkpointed">${bytes(a.checkpointed_size)}</td><td class="num full">${bytes(a.state_size)}</td></tr>`,
    )}</tbody></table>`;
}

// How many handles and files a subtask's state has; an incremental handle (an embedded
// store's files) counts each of its files, and says how many an earlier checkpoint wrote.
function handles(s) {
  const stored = s.keyed.filter((k) => k.kind === "incremental");
  const streams = [
    ...s.keyed.flatMap((k) => (k.kind === "incremental" ? [...k.shared, ...k.private].map((f) => f.stream) : [k.stream])),
    ...s.operator.map((h) => h.stream),
  ];
  const files = streams.filter((stream) => stream.kind === "file").length;
  const reused = stored.reduce((n, k) => n + k.shared.filter((f) => f.reused).length, 0);
  return `${s.keyed.length} keyed, ${s.operator.length} operator (${files} files${reused ? `, ${reused} reused` : ""})`;
}

// The full size as a bar scaled to the largest subtask, its checkpointed part filled in.
function sizeBar(s, maxSize) {
  const full = Math.round((100 * s.state_size) / maxSize);
  const written = s.state_size ? Math.round((100 * s.checkpointed_size) / s.state_size) : 100;
  return html`<div class="bar full" style="width:${full}%" title="${bytes(s.checkpointed_size)} checkpointed of ${bytes(s.state_size)}">
    <div class="checkpointed" style="width:${written}%"></div></div>`;
}

function stat(label, value, sub = "", id = "") {
  return html`<div class="card stat small-stat"><div class="label">${label}</div><div class="value"${id ? raw(` id="${id}"`) : ""}>${value}</div>
    ${sub ? html`<div class="sub">${sub}</div>` : ""}</div>`;
}
