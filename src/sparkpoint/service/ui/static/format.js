// Small formatting helpers shared by the pages.

const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ESC[c]);
}

// html`...${x}...` escapes every value unless it is wrapped by raw().
export function html(strings, ...values) {
  let out = strings[0];
  values.forEach((v, i) => {
    out += render(v) + strings[i + 1];
  });
  return { __raw: out };
}

export function raw(text) {
  return { __raw: text };
}

function render(v) {
  if (v === null || v === undefined || v === false) return "";
  if (Array.isArray(v)) return v.map(render).join("");
  if (typeof v === "object" && "__raw" in v) return v.__raw;
  return esc(v);
}

export function toHtml(fragment) {
  return render(fragment);
}

export function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s - m * 60)} s`;
  const h = Math.floor(m / 60);
  return `${h} h ${m - h * 60} min`;
}

// Where there is room for one figure: a checkpoint's full size, and the bytes it wrote
// itself (its checkpointed size) when incremental state made that less.
export function sizes(full, checkpointed) {
  if (checkpointed === null || checkpointed === undefined || checkpointed === full) return bytes(full);
  return `${bytes(full)} (${bytes(checkpointed)} checkpointed)`;
}

export function bytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 2 : 1)} ${units[u]}`;
}

export function time(ms) {
  if (!ms) return "—";
  const d = new Date(ms);
  const pad = (x, n = 2) => String(x).padStart(n, "0");
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export function dateTime(ms) {
  if (!ms) return "—";
  return `${new Date(ms).toISOString().slice(0, 10)} ${time(ms)}`;
}

export function ago(ms) {
  return ms === null || ms === undefined ? "—" : `${duration(ms)} ago`;
}

export function badge(status) {
  const s = String(status ?? "unknown");
  return html`<span class="badge ${s.toLowerCase().replace(/[^a-z_]/g, "")}">${s}</span>`;
}
