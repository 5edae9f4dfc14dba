// The console's shell: sign-in, hash routing and polling.
//
// Theory of operation: on load the page asks the API who may look (GET /admin/v2/clusters, which any
// authenticated role may call): answered without credentials means authentication is off and the console
// is open; 401 shows the sign-in form. Signing in checks the credentials with the same call and keeps
// them in sessionStorage (this tab only). Routes are URL fragments (#/tenants, #/ns/t/n,
// #/topic/persistent/t/n/x), so views can be bookmarked; a view that returns refresh() is polled every
// intervalMs while it is shown (one timer, cancelled on navigation). A 401 from any call returns to the
// sign-in form (an expired token).
"use strict";

const ROUTES = [
  [/^#\/clusters$/, [], viewClusters, "clusters"],
  [/^#\/brokers$/, [], viewBrokers, "brokers"],
  [/^#\/bookies$/, [], viewBookies, "bookies"],
  [/^#\/tenants$/, [], viewTenants, "tenants"],
  [/^#\/tenant\/([^/]+)$/, ["tenant"], viewTenant, "tenants"],
  [/^#\/ns\/([^/]+)\/([^/]+)$/, ["tenant", "ns"], viewNamespace, "tenants"],
  [/^#\/topic\/(persistent|non-persistent)\/([^/]+)\/([^/]+)\/([^/]+)$/, ["domain", "tenant", "ns", "topic"], viewTopic, "tenants"],
];

const Console = {
  timer: null,
  generation: 0,

  pollMs(defaultMs) {
    const v = parseInt(new URLSearchParams(location.search).get("poll") || "", 10);
    return v > 0 ? v : defaultMs;
  },

  go(hash) {
    if (location.hash === hash) this.render();
    else location.hash = hash;
  },

  stop() {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  },

  async render() {
    this.stop();
    const gen = ++this.generation;
    const hash = location.hash || "#/tenants";
    const route = ROUTES.find((r) => r[0].test(hash));
    document.querySelectorAll("#nav a").forEach((a) => a.classList.toggle("active", route && a.dataset.nav === route[3]));
    if (!route) {
      VIEW().innerHTML = `<p class="refusal">No such page: ${esc(hash)}</p>`;
      return;
    }
    const m = route[0].exec(hash);
    const params = {};
    route[1].forEach((name, i) => (params[name] = decodeURIComponent(m[i + 1])));
    let result;
    try {
      result = await route[2](params);
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return this.showSignIn(e.reason);
      VIEW().innerHTML = refusal(e);
      return;
    }
    if (gen !== this.generation || !result || !result.refresh) return;
    const loop = async () => {
      if (gen !== this.generation) return;
      try {
        await result.refresh();
      } catch (e) {
        if (e instanceof ApiError && e.status === 401) return this.showSignIn(e.reason);
      }
      if (gen === this.generation) this.timer = setTimeout(loop, result.intervalMs || 5000);
    };
    this.timer = setTimeout(loop, result.intervalMs || 5000);
  },

  showSignIn(reason) {
    this.stop();
    this.generation++;
    Auth.clear();
    document.getElementById("view").hidden = true;
    document.getElementById("signin").hidden = false;
    document.getElementById("signout").hidden = true;
    document.getElementById("who").textContent = "";
    const err = document.getElementById("signin-error");
    err.hidden = !reason;
    err.textContent = reason ? `401 ${reason}` : "";
  },

  signedIn(auth) {
    Auth.set(auth);
    document.getElementById("signin").hidden = true;
    document.getElementById("view").hidden = false;
    document.getElementById("signout").hidden = auth.kind === "none";
    document.getElementById("who").textContent = auth.kind === "none" ? "open (no sign-in needed)" : `signed in as ${auth.label}`;
    banner("");
    this.render();
  },

  async start() {
    const form = document.getElementById("signin-form");
    form.querySelectorAll("input[name=kind]").forEach((r) => r.addEventListener("change", () => {
      form.querySelectorAll("[data-kind]").forEach((d) => (d.hidden = d.dataset.kind !== form.kind.value));
    }));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const auth = form.kind.value === "token"
        ? Auth.fromToken(document.getElementById("signin-token").value)
        : Auth.fromBasic(document.getElementById("signin-user").value, document.getElementById("signin-password").value);
      const err = document.getElementById("signin-error");
      try {
        await api("GET", "/admin/v2/clusters", undefined, { auth });
      } catch (e) {
        err.hidden = false;
        err.innerHTML = refusal(e);
        return;
      }
      this.signedIn(auth);
    });
    document.getElementById("signout").addEventListener("click", () => this.showSignIn(""));
    window.addEventListener("hashchange", () => this.render());
    const stored = Auth.current();
    try {
      await api("GET", "/admin/v2/clusters", undefined, { auth: stored && stored.header ? stored : null });
      this.signedIn(stored && stored.header ? stored : { kind: "none", header: null, label: "" });
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) this.showSignIn(stored ? e.reason : "");
      else VIEW().innerHTML = refusal(e);
    }
  },
};

Console.start();
