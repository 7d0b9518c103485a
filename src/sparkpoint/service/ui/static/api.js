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

export async function get(path) {
  for (let attempt = 0; ; attempt++) {
    const headers = { Accept: "application/json" };
    const t = token();
    if (t) headers.Authorization = `Bearer ${t}`;
    const response = await fetch(path, { headers });
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
