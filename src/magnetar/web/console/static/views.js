// The console's views of the cluster and of tenancy: clusters, brokers, bookies, tenants, a tenant,
// a namespace (policies, topics, permissions). The topic page lives in topic.js.
//
// Theory of operation: a view is `async (params) => ({refresh?, intervalMs?})`. It renders into #view
// from admin API answers; each section is fetched on its own, so one refused call shows its refusal
// (status + reason) where its data would be and the rest of the page still works. Actions call the API
// through act(), which reports the API's answer in the banner and re-renders. A view that returns
// refresh() is polled (app.js) so live values change without reloading.
"use strict";

const VIEW = () => document.getElementById("view");

// Fetch one section: its rendered HTML or the API's refusal. A 401 (no or expired credentials) is not a
// refusal of this section but of the sign-in: it propagates, and app.js shows the sign-in form.
async function section(fn) {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) throw e;
    return refusal(e);
  }
}

function on(selector, event, handler) {
  VIEW().querySelectorAll(selector).forEach((el) => el.addEventListener(event, (ev) => {
    if (event === "submit") ev.preventDefault();
    handler(ev, el);
  }));
}

// Run an action, re-render the current view, then say in the banner what the API answered (so "done"
// is shown once the page already reflects it).
async function act(what, fn) {
  banner("");
  try {
    await fn();
  } catch (e) {
    banner(`${esc(what)} failed: ${refusal(e)}`);
    return false;
  }
  await Console.render();
  banner(`<span class="ok">${esc(what)}: done</span>`, "ok");
  return true;
}

function confirmed(text) {
  return window.CONSOLE_NO_CONFIRM || window.confirm(text);
}

function splitList(text) {
  return text.split(",").map((s) => s.trim()).filter(Boolean);
}

// ---------------------------------------------------------------- clusters

async function viewClusters() {
  const render = async () => {
    const body = await section(async () => {
      const names = await api("GET", "/admin/v2/clusters");
      const rows = await Promise.all(names.map(async (n) => {
        try {
          return { name: n, data: await api("GET", `/admin/v2/clusters/${enc(n)}`) };
        } catch (e) {
          return { name: n, error: e };
        }
      }));
      return table([
        ["cluster", (r) => `<b>${esc(r.name)}</b>`],
        ["serviceUrl", (r) => (r.error ? refusal(r.error) : esc(r.data.serviceUrl))],
        ["brokerServiceUrl", (r) => esc(r.data && r.data.brokerServiceUrl)],
        ["peerClusterNames", (r) => esc(r.data && (r.data.peerClusterNames || []).join(", "))],
        ["brokers", (r) => `<a href="#/brokers">brokers</a>`],
      ], rows, 'id="clusters"');
    });
    VIEW().innerHTML = `<h1>Clusters</h1>${body}`;
  };
  await render();
  return { refresh: render, intervalMs: 10000 };
}

// ---------------------------------------------------------------- brokers

async function viewBrokers() {
  const render = async () => {
    let html = "<h1>Brokers</h1>";
    html += await section(async () => {
      const version = await api("GET", "/admin/v2/brokers/version");
      return `<p class="muted">version <b>${esc(version)}</b></p>`;
    });
    html += await section(async () => {
      const leader = await api("GET", "/admin/v2/brokers/leaderBroker");
      return `<p>leader: <b id="leader-broker">${esc(leader.brokerId || leader.serviceUrl || JSON.stringify(leader))}</b></p>`;
    });
    html += await section(async () => {
      const clusters = await api("GET", "/admin/v2/clusters");
      let out = "";
      for (const c of clusters) {
        out += `<h2>${esc(c)}</h2>`;
        out += await section(async () => {
          const brokers = await api("GET", `/admin/v2/brokers/${enc(c)}`);
          const rows = await Promise.all(brokers.map(async (b) => {
            try {
              return { id: b, owned: await api("GET", `/admin/v2/brokers/${enc(c)}/${enc(b)}/ownedNamespaces`) };
            } catch (e) {
              return { id: b, error: e };
            }
          }));
          return table([
            ["broker", (r) => `<b>${esc(r.id)}</b>`],
            ["owned bundles", (r) => (r.error ? refusal(r.error) : fmtNum(Object.keys(r.owned || {}).length))],
            ["bundles", (r) => (r.owned ? Object.keys(r.owned).map(esc).join("<br>") : "")],
          ], rows, 'class="brokers"');
        });
      }
      return out;
    });
    // Load of the broker serving this page: its own gauges from /metrics (magnetar_broker_*).
    html += `<h2>Load (this broker)</h2>` + await section(async () => {
      const text = String(await api("GET", "/metrics"));
      const rows = [];
      for (const line of text.split("\n")) {
        const m = /^magnetar_broker_([a-z0-9_]+)(?:\{[^}]*\})? ([-+0-9.eE]+|NaN)$/.exec(line);
        if (m) rows.push({ name: m[1], value: Number(m[2]) });
      }
      return table([["gauge", (r) => esc(r.name)], ["value", (r) => fmtNum(r.value)]], rows, 'id="broker-load"');
    });
    html += `<h2>Health</h2>` + await section(async () => {
      const health = await api("GET", "/admin/v2/brokers/health");
      return `<p id="broker-health">${esc(health)}</p>`;
    });
    VIEW().innerHTML = html;
  };
  await render();
  return { refresh: render, intervalMs: 10000 };
}

// ---------------------------------------------------------------- bookies

async function viewBookies() {
  const render = async () => {
    const body = await section(async () => {
      const all = await api("GET", "/admin/v2/bookies/all");
      const bookies = (all && all.bookies) || [];
      // Whatever the API reports per bookie (id, and disk use / read-only state where it has them).
      const keys = [];
      for (const b of bookies) for (const k of Object.keys(b)) if (!keys.includes(k)) keys.push(k);
      const cols = keys.map((k) => [k, (b) => {
        const v = b[k];
        if (typeof v === "boolean") return v ? "yes" : "no";
        if (typeof v === "number" && /size|bytes|usage|space/i.test(k)) return fmtBytes(v);
        return esc(typeof v === "object" ? JSON.stringify(v) : v);
      }]);
      return table(cols, bookies, 'id="bookies"');
    });
    const racks = await section(async () => jsonBlock(await api("GET", "/admin/v2/bookies/racks-info")));
    VIEW().innerHTML = `<h1>Bookies</h1>${body}<h2>Racks</h2>${racks}`;
  };
  await render();
  return { refresh: render, intervalMs: 10000 };
}

// ---------------------------------------------------------------- tenants

async function viewTenants() {
  const list = await section(async () => {
    const tenants = await api("GET", "/admin/v2/tenants");
    return table([
      ["tenant", (t) => `<a href="#/tenant/${enc(t)}">${esc(t)}</a>`],
      ["", (t) => `<button class="danger" data-delete-tenant="${esc(t)}">Delete</button>`],
    ], tenants.map((t) => t), 'id="tenants"');
  });
  VIEW().innerHTML = `<h1>Tenants</h1>${list}
    <form id="goto-tenant" class="inline"><input name="tenant" placeholder="tenant name">
      <button>Open</button></form>
    <h2>Create a tenant</h2>
    <form id="create-tenant" class="inline">
      <input name="tenant" placeholder="tenant" required>
      <input name="adminRoles" placeholder="admin roles (comma separated)">
      <input name="allowedClusters" placeholder="allowed clusters (empty: all)">
      <button>Create tenant</button>
    </form>`;
  on("#goto-tenant", "submit", (_e, f) => Console.go(`#/tenant/${enc(f.tenant.value.trim())}`));
  on("#create-tenant", "submit", async (_e, f) => {
    let clusters = splitList(f.allowedClusters.value);
    if (!clusters.length) {
      try {
        clusters = await api("GET", "/admin/v2/clusters");
      } catch (_x) {
        clusters = [];
      }
    }
    const name = f.tenant.value.trim();
    await act(`create tenant ${name}`, () => api("PUT", `/admin/v2/tenants/${enc(name)}`,
      { adminRoles: splitList(f.adminRoles.value), allowedClusters: clusters }));
  });
  on("[data-delete-tenant]", "click", async (_e, b) => {
    const t = b.dataset.deleteTenant;
    if (confirmed(`Delete tenant ${t}?`)) await act(`delete tenant ${t}`, () => api("DELETE", `/admin/v2/tenants/${enc(t)}`));
  });
  return {};
}

async function viewTenant({ tenant }) {
  const info = await section(async () => {
    const t = await api("GET", `/admin/v2/tenants/${enc(tenant)}`);
    const roles = (t.adminRoles || []).join(", ");
    const clusters = (t.allowedClusters || []).join(", ");
    return `<dl><dt>admin roles</dt><dd id="tenant-roles">${esc(roles || "-")}</dd>
      <dt>allowed clusters</dt><dd id="tenant-clusters">${esc(clusters || "-")}</dd></dl>
      <form id="update-tenant" class="inline">
        <input name="adminRoles" value="${esc(roles)}" placeholder="admin roles (comma separated)">
        <input name="allowedClusters" value="${esc(clusters)}" placeholder="allowed clusters">
        <button>Update tenant</button></form>`;
  });
  const namespaces = await section(async () => {
    const list = await api("GET", `/admin/v2/namespaces/${enc(tenant)}`);
    return table([
      ["namespace", (n) => `<a href="#/ns/${n.split("/").map(enc).join("/")}">${esc(n)}</a>`],
      ["", (n) => `<button class="danger" data-delete-ns="${esc(n)}">Delete</button>`],
    ], list, 'id="namespaces"');
  });
  VIEW().innerHTML = `<p class="crumbs"><a href="#/tenants">tenants</a> / ${esc(tenant)}</p>
    <h1>Tenant ${esc(tenant)}</h1>${info}
    <h2>Namespaces</h2>${namespaces}
    <form id="create-ns" class="inline"><input name="ns" placeholder="namespace" required>
      <button>Create namespace</button></form>`;
  on("#update-tenant", "submit", (_e, f) => act(`update tenant ${tenant}`, () =>
    api("POST", `/admin/v2/tenants/${enc(tenant)}`,
      { adminRoles: splitList(f.adminRoles.value), allowedClusters: splitList(f.allowedClusters.value) })));
  on("#create-ns", "submit", (_e, f) => {
    const ns = f.ns.value.trim();
    return act(`create namespace ${tenant}/${ns}`, () => api("PUT", `/admin/v2/namespaces/${enc(tenant)}/${enc(ns)}`));
  });
  on("[data-delete-ns]", "click", async (_e, b) => {
    const ns = b.dataset.deleteNs;
    if (confirmed(`Delete namespace ${ns}?`)) {
      await act(`delete namespace ${ns}`, () => api("DELETE", `/admin/v2/namespaces/${ns.split("/").map(enc).join("/")}`));
    }
  });
  return {};
}

// ---------------------------------------------------------------- namespace

let POLICY_TABLE = null;

async function policyTable() {
  if (!POLICY_TABLE) POLICY_TABLE = await api("GET", "/console/api/policies");
  return POLICY_TABLE;
}

function baseTopicName(full) {
  return full.replace(/^[a-z-]+:\/\//, "").split("/").slice(2).join("/");
}

async function viewNamespace({ tenant, ns }) {
  const nsPath = `${enc(tenant)}/${enc(ns)}`;
  const topics = await section(async () => {
    const rows = [];
    for (const domain of ["persistent", "non-persistent"]) {
      const [plain, partitioned] = await Promise.all([
        api("GET", `/admin/v2/${domain}/${nsPath}`),
        api("GET", `/admin/v2/${domain}/${nsPath}/partitioned`),
      ]);
      const parted = new Set(partitioned);
      for (const t of partitioned) rows.push({ domain, name: t, partitioned: true });
      for (const t of plain) {
        const base = t.replace(/-partition-\d+$/, "");
        if (!(base !== t && parted.has(base))) rows.push({ domain, name: t, partitioned: false });
      }
    }
    rows.sort((a, b) => a.name.localeCompare(b.name));
    return table([
      ["topic", (r) => `<a href="#/topic/${r.domain}/${nsPath}/${enc(baseTopicName(r.name))}">${esc(r.name)}</a>`],
      ["partitioned", (r) => (r.partitioned ? "yes" : "no")],
      ["", (r) => `<button class="danger" data-delete-topic="${esc(baseTopicName(r.name))}"` +
        ` data-domain="${r.domain}" data-partitioned="${r.partitioned}">Delete</button>`],
    ], rows, 'id="topics"');
  });
  const policies = await section(async () => {
    const [doc, specs] = await Promise.all([api("GET", `/admin/v2/namespaces/${nsPath}`), policyTable()]);
    return table([
      ["policy", (s) => `<code>${esc(s.name)}</code>`],
      ["value", (s) => `<code class="policy-value" data-policy="${esc(s.name)}">${esc(JSON.stringify(doc[s.field] ?? null))}</code>`],
      ["edit", (s) => s.perCluster ? `<span class="muted">per cluster</span>` :
        `<form class="inline policy-edit" data-policy="${esc(s.name)}"><input name="value" placeholder="JSON value">` +
        `<button>Set</button><button type="button" data-clear-policy="${esc(s.name)}">Clear</button></form>`],
    ], specs, 'id="policies"');
  });
  const permissions = await section(async () => jsonBlock(await api("GET", `/admin/v2/namespaces/${nsPath}/permissions`)));
  VIEW().innerHTML = `<p class="crumbs"><a href="#/tenants">tenants</a> / <a href="#/tenant/${enc(tenant)}">${esc(tenant)}</a>
      / ${esc(ns)}</p>
    <h1>Namespace ${esc(tenant)}/${esc(ns)}</h1>
    <div class="actions"><button id="ns-unload">Unload</button><button id="ns-clear-backlog">Clear backlog</button></div>
    <h2>Topics</h2>${topics}
    <form id="create-topic" class="inline">
      <select name="domain"><option value="persistent">persistent</option>
        <option value="non-persistent">non-persistent</option></select>
      <input name="topic" placeholder="topic" required>
      <label>partitions <input name="partitions" type="number" min="0" value="0"></label>
      <button>Create topic</button>
    </form>
    <h2>Policies</h2>${policies}
    <h2>Permissions</h2>${permissions}`;
  on("#create-topic", "submit", (_e, f) => {
    const name = f.topic.value.trim();
    const parts = parseInt(f.partitions.value || "0", 10);
    const path = `/admin/v2/${f.domain.value}/${nsPath}/${enc(name)}`;
    return act(`create topic ${name}`, () => (parts > 0 ? api("PUT", path + "/partitions", parts) : api("PUT", path)));
  });
  on("[data-delete-topic]", "click", async (_e, b) => {
    const name = b.dataset.deleteTopic;
    const path = `/admin/v2/${b.dataset.domain}/${nsPath}/${enc(name)}` + (b.dataset.partitioned === "true" ? "/partitions" : "");
    if (confirmed(`Delete topic ${name}?`)) await act(`delete topic ${name}`, () => api("DELETE", path));
  });
  on(".policy-edit", "submit", async (_e, f) => {
    const spec = POLICY_TABLE.find((s) => s.name === f.dataset.policy);
    let value;
    try {
      value = JSON.parse(f.value.value);
    } catch (_x) {
      value = f.value.value; // a bare word, e.g. an enum value
    }
    await act(`set ${spec.name}`, () => api(spec.method, `/admin/v2/namespaces/${nsPath}/${spec.suffix}`, value));
  });
  on("[data-clear-policy]", "click", async (_e, b) => {
    const spec = POLICY_TABLE.find((s) => s.name === b.dataset.clearPolicy);
    await act(`clear ${spec.name}`, () => api("DELETE", `/admin/v2/namespaces/${nsPath}/${spec.suffix}`));
  });
  on("#ns-unload", "click", () => act(`unload ${tenant}/${ns}`, () => api("PUT", `/admin/v2/namespaces/${nsPath}/unload`)));
  on("#ns-clear-backlog", "click", async () => {
    if (confirmed(`Clear the backlog of every subscription in ${tenant}/${ns}?`)) {
      await act(`clear backlog of ${tenant}/${ns}`, () => api("POST", `/admin/v2/namespaces/${nsPath}/clearBacklog`));
    }
  });
  return {};
}
