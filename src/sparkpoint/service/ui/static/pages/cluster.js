// Cluster: the leader and its lease, every replica, and the failover history.
import { get } from "../api.js";
import { dateTime, duration, html, time, toHtml } from "../format.js";

export const NAV = "cluster";

export async function refresh(main, _params, _state) {
  const c = await get("/v1/ui/cluster");
  const leader = c.leader;
  const lease = c.lease;
  const changes = c.changes.filter((x) => x.previous_leader);
  main.innerHTML = toHtml(html`
    <h1>Cluster</h1>
    <div class="cards">
      <div class="card stat" id="leader-card">
        <div class="label">Leader</div>
        <div class="value" id="leader-id">${leader ? leader.instance_id : "none"}</div>
        <div class="sub">${leader ? leader.address : "no replica holds the current term"}</div>
      </div>
      <div class="card stat">
        <div class="label">Term</div>
        <div class="value" id="leader-term">${leader ? leader.term : "—"}</div>
        <div class="sub">fencing number (version of the leader/epoch znode)</div>
      </div>
      <div class="card stat">
        <div class="label">Lease age</div>
        <div class="value">${lease ? duration(lease.age_ms) : "—"}</div>
        <div class="sub">${lease ? `${lease.renewals} renewals` : ""}</div>
      </div>
      <div class="card stat">
        <div class="label">Leading for</div>
        <div class="value">${lease ? duration(lease.leading_for_ms) : "—"}</div>
        <div class="sub">since ${leader ? dateTime(leader.since_ms) : "—"}</div>
      </div>
      <div class="card stat">
        <div class="label">Failovers seen</div>
        <div class="value" id="failover-count">${changes.length}</div>
        <div class="sub">by ${c.served_by.instance_id}</div>
      </div>
    </div>

    <section class="card">
      <h2>Replicas</h2>
      <table class="grid" id="replicas">
        <thead><tr><th>Instance</th><th>Address</th><th>Role</th><th>ZooKeeper</th>
          <th>Ready</th><th>Term</th><th>Lease left</th></tr></thead>
        <tbody>${c.replicas.map(
          (r) => html`<tr class="${r.instance_id === leader?.instance_id ? "is-leader" : ""}">
            <td><b>${r.instance_id}</b>${
              r.instance_id === c.served_by.instance_id ? html` <span class="tag">this page</span>` : ""
            }</td>
            <td class="mono">${r.address}</td>
            <td>${
              r.answered
                ? html`<span class="role ${r.role}">${r.role}</span>`
                : html`<span class="role unreachable" title="${r.error ?? ""}">not answering</span>
                  <span class="muted small">since ${time(r.not_answering_since_ms)}</span>`
            }</td>
            <td><span class="zk ${r.zookeeper}">${r.zookeeper}</span></td>
            <td>${r.answered ? (r.ready ? "yes" : "no") : "—"}</td>
            <td>${r.term ?? "—"}</td>
            <td>${r.lease_remaining_s == null ? "—" : duration(r.lease_remaining_s * 1000)}</td>
          </tr>`,
        )}</tbody>
      </table>
    </section>

    <section class="card">
      <h2>Failover history <span class="muted small">as observed by ${c.served_by.instance_id}</span></h2>
      ${
        c.changes.length === 0
          ? html`<p class="muted">No leadership change observed yet.</p>`
          : html`<table class="grid" id="failovers">
        <thead><tr><th>New leader since</th><th>Term</th><th>New leader</th><th>Previous</th>
          <th>How</th><th class="num">No leader for</th></tr></thead>
        <tbody>${c.changes.map(
          (x) => html`<tr>
            <td>${dateTime(x.since_ms)}</td>
            <td>${x.term}</td>
            <td><b>${x.leader}</b></td>
            <td>${x.previous_leader ? `${x.previous_leader} (term ${x.previous_term})` : "—"}</td>
            <td>${x.how}</td>
            <td class="num">${x.leaderless_ms == null ? "—" : html`<b>${duration(x.leaderless_ms)}</b>`}</td>
          </tr>`,
        )}</tbody></table>
        <p class="muted small">"No leader for": from the old leader's last lease renewal to
        the new leader's grant, as both wrote them in ZooKeeper.</p>`
      }
    </section>
  `);
}
