// The console's only way to the broker: the admin REST API, with the signed-in user's credentials.
//
// Theory of operation: the credentials (a token or user:password) live in this tab's sessionStorage and
// become the Authorization header of every call, exactly as pulsar-admin sends them. A call that the
// API refuses throws an ApiError carrying the API's status and its {"reason": ...}; views show that
// refusal in place of the data (refusal()), so the console never decides on its own what a role may do.
"use strict";

const AUTH_KEY = "magnetar.console.auth";
const CALL_TIMEOUT_MS = 15000;

class ApiError extends Error {
  constructor(status, reason, method, path) {
    super(`${status} ${reason}`);
    this.status = status;
    this.reason = reason;
    this.method = method;
    this.path = path;
  }
}

const Auth = {
  // {kind: "token"|"basic"|"none", header: string|null, label: string}
  current() {
    try {
      return JSON.parse(sessionStorage.getItem(AUTH_KEY) || "null");
    } catch (_e) {
      return null;
    }
  },
  set(auth) {
    sessionStorage.setItem(AUTH_KEY, JSON.stringify(auth));
  },
  clear() {
    sessionStorage.removeItem(AUTH_KEY);
  },
  fromToken(token) {
    token = token.trim().replace(/^Bearer\s+/i, "");
    return { kind: "token", header: "Bearer " + token, label: tokenSubject(token) || "token" };
  },
  fromBasic(user, password) {
    const bytes = new TextEncoder().encode(`${user}:${password}`);
    let bin = "";
    bytes.forEach((b) => (bin += String.fromCharCode(b)));
    return { kind: "basic", header: "Basic " + btoa(bin), label: user };
  },
};

// The "sub" claim of a JWT, only to show who is signed in (the broker verifies the token, not us).
function tokenSubject(token) {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part + "===".slice((part.length + 3) % 4))).sub || null;
  } catch (_e) {
    return null;
  }
}

function reasonOf(status, text) {
  try {
    const doc = JSON.parse(text);
    if (doc && typeof doc.reason === "string") return doc.reason;
    if (doc && typeof doc.detail === "string") return doc.detail;
  } catch (_e) {
    /* not JSON */
  }
  return text ? text.slice(0, 300) : statusText(status);
}

function statusText(status) {
  return { 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 409: "Conflict",
    412: "Precondition Failed", 500: "Internal Server Error" }[status] || "HTTP " + status;
}

// One call. opts: {raw: true} -> {status, headers, bytes}; {auth} overrides the stored credentials.
async function api(method, path, body, opts = {}) {
  const auth = opts.auth !== undefined ? opts.auth : Auth.current();
  const headers = {};
  if (auth && auth.header) headers["Authorization"] = auth.header;
  let payload;
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), CALL_TIMEOUT_MS);
  let resp;
  try {
    resp = await fetch(path, { method, headers, body: payload, signal: ctl.signal, credentials: "omit" });
  } catch (e) {
    throw new ApiError(0, `no answer from the broker (${e.name === "AbortError" ? "timed out" : e.message})`,
      method, path);
  } finally {
    clearTimeout(timer);
  }
  if (!resp.ok) {
    throw new ApiError(resp.status, reasonOf(resp.status, await resp.text()), method, path);
  }
  if (opts.raw) {
    return { status: resp.status, headers: resp.headers, bytes: new Uint8Array(await resp.arrayBuffer()) };
  }
  const text = await resp.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch (_e) {
    return text;
  }
}

// ---- small DOM helpers shared by the views

function esc(v) {
  return String(v === undefined || v === null ? "" : v).replace(/[&<>"']/g, (c) =>
    ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function refusal(err) {
  if (!(err instanceof ApiError)) return `<div class="refusal">${esc(err && err.message ? err.message : err)}</div>`;
  return `<div class="refusal" data-status="${err.status}"><b>${err.status} ${esc(statusText(err.status))}</b>` +
    ` <span class="reason">${esc(err.reason)}</span> <span class="muted">${esc(err.method)} ${esc(err.path)}</span></div>`;
}

function banner(html, kind = "error") {
  const el = document.getElementById("banner");
  el.className = kind;
  el.innerHTML = html;
  el.hidden = !html;
}

function fmtNum(v, digits = 2) {
  if (typeof v !== "number" || !isFinite(v)) return esc(v);
  return Number.isInteger(v) ? v.toLocaleString("en-US") : v.toFixed(digits);
}

function fmtBytes(v) {
  if (typeof v !== "number") return esc(v);
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return (i ? v.toFixed(1) : Math.round(v)) + " " + units[i];
}

function enc(name) {
  return encodeURIComponent(name);
}

function table(columns, rows, attrs = "") {
  if (!rows.length) return `<p class="muted empty">none</p>`;
  const head = columns.map((c) => `<th>${esc(c[0])}</th>`).join("");
  const body = rows.map((r) => "<tr>" + columns.map((c) => `<td>${c[1](r)}</td>`).join("") + "</tr>").join("");
  return `<table ${attrs}><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

function jsonBlock(value) {
  return `<pre class="json">${esc(JSON.stringify(value, null, 2))}</pre>`;
}
