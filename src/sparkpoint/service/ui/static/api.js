// Fetching JSON from the replica that served the page, with the session's bearer token.

const TOKEN_KEY = "sparkpoint.token";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

let loginWaiter = null;

// Ask for a token once; every request that got 401 meanwhile waits for the same answer.
function askToken(message) {
  if (loginWaiter) return loginWaiter;
  const dialog = document.getElementById("login");
  const form = document.getElementById("login-form");
  document.getElementById("login-error").textContent = message || "";
  loginWaiter = new Promise((resolve) => {
    form.addEventListener(
      "submit",
      () => {
        setToken(document.getElementById("token").value.trim());
        loginWaiter = null;
        resolve();
      },
      { once: true },
    );
  });
  if (!dialog.open) dialog.showModal();
  return loginWaiter;
}

export function get(path) {
  return call("GET", path);
}

// A leader-only call (the rescale control): a follower that served the page forwards it
// to the leader (service/proxy.py) instead of redirecting the browser elsewhere.
export function post(path, body) {
  return call("POST", path, body);
}

async function call(method, path, payload) {
  for (let attempt = 0; ; attempt++) {
    const headers = { Accept: "application/json" };
    const t = token();
    if (t) headers.Authorization = `Bearer ${t}`;
    const init = { method, headers };
    if (method !== "GET") {
      headers["Content-Type"] = "application/json";
      headers["Sparkpoint-Proxy"] = "allow";
      init.body = JSON.stringify(payload ?? {});
    }
    const response = await fetch(path, init);
    if (response.status === 401 && attempt < 3) {
      await askToken(t ? "That token was not accepted." : "");
      continue;
    }
    let body = null;
    try {
      body = await response.json();
    } catch {
      body = null;
    }
    if (!response.ok) {
      const message = body?.message || body?.detail || `${response.status} ${response.statusText}`;
      throw new ApiError(response.status, body?.error || "http", String(message));
    }
    return body;
  }
}
