// The rescale control of a job's page: its parallelism, the last rescale asked of it
// (pending until its driver applied it, then the epoch and checkpoint at which it took
// effect), and a form that asks for another (POST /v1/jobs/<job>/rescale, an operator's
// call: the token must allow it).
import { get, post } from "../api.js";
import { dateTime, html, toHtml } from "../format.js";

export const CARD = html`<section class="card" id="rescale"><h2>Parallelism</h2>
  <div id="rescale-state"></div>
  <form id="rescale-form">
    <label>Rescale to <input id="rescale-parallelism" type="number" min="1" required></label>
    <button type="submit" id="rescale-submit">Rescale</button>
    <span id="rescale-answer"></span>
  </form></section>`;

// Wire the form (once, when the page is entered).
export function wire(main, job, refreshNow) {
  main.querySelector("#rescale-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const answer = main.querySelector("#rescale-answer");
    const parallelism = Number(main.querySelector("#rescale-parallelism").value);
    answer.className = "muted";
    answer.textContent = "asking…";
    try {
      const reply = await post(`/v1/jobs/${job}/rescale`, { parallelism });
      answer.className = "ok";
      answer.textContent =
        reply.state === "unchanged"
          ? `already at parallelism ${parallelism}`
          : `requested (${reply.request_id}): applied at the next epoch boundary`;
    } catch (err) {
      answer.className = "bad";
      answer.textContent = err.message;
    }
    refreshNow();
  });
}

export async function render(main, job) {
  const data = await get(`/v1/jobs/${job}`);
  const input = main.querySelector("#rescale-parallelism");
  input.max = data.max_parallelism;
  const r = data.rescale;
  main.querySelector("#rescale-state").innerHTML = toHtml(html`
    <p>Runs at <b id="rescale-current">${data.parallelism}</b> (max ${data.max_parallelism}).
    ${r ? lastRequest(r) : html`<span class="muted">Never rescaled.</span>`}</p>`);
}

function lastRequest(r) {
  if (r.state === "applied") {
    return html`Last rescale: to <b>${r.parallelism}</b>, <span id="rescale-last" class="ok">applied</span>
      after epoch ${r.epoch} from checkpoint #${r.checkpoint_id} (${dateTime(r.applied_ms)}).`;
  }
  return html`Rescale to <b>${r.parallelism}</b> <span id="rescale-last" class="warn">${r.state}</span>
    since ${dateTime(r.requested_ms)}.`;
}
