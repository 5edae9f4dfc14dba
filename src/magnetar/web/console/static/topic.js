// The topic page: live stats and throughput chart, producers, subscriptions, consumers, peek, schemas, and
// the topic's actions (unload, compaction, delete; per subscription: create, skip, clear backlog, reset
// cursor, delete).
//
// Theory of operation: the page skeleton (headings, action forms) is rendered once; refresh() polls the
// stats route (partitioned-stats for a partitioned topic) and redraws only the live parts (cards, chart,
// tables), so what a user types in a form survives the polling. The chart plots rates computed from the
// stats' cumulative counters between two polls (msgInCounter, msgOutCounter): live at the poll interval
// even when the broker samples its own msgRateIn only every statsUpdateFrequencyInSecs; the cards show the
// broker's own rates next to it. Peeked payloads are decoded by POST /console/api/decode with the topic's
// schema from the schema registry route; both fetches use the user's credentials.
"use strict";

const TOPIC_POLL_MS = 2000;
const SCHEMA_POLL_MS = 5000;
const HISTORIES = new Map(); // topic -> {msgIn, msgOut, bytesIn, last: {t, msgIn, msgOut, bytesIn}}

function topicHistory(topic) {
  if (!HISTORIES.has(topic)) {
    HISTORIES.set(topic, { msgIn: new History(), msgOut: new History(), last: null });
  }
  return HISTORIES.get(topic);
}

function subscriptionBacklog(stats) {
  return Object.values(stats.subscriptions || {}).reduce((n, s) => n + (s.msgBacklog || 0), 0);
}

async function viewTopic({ domain, tenant, ns, topic }) {
  const full = `${domain}://${tenant}/${ns}/${topic}`;
  const base = `/admin/v2/${enc(domain)}/${enc(tenant)}/${enc(ns)}/${enc(topic)}`;
  const schemaBase = `/admin/v2/schemas/${enc(tenant)}/${enc(ns)}/${enc(topic)}`;
  let partitions = 0;
  try {
    partitions = ((await api("GET", base + "/partitions")) || {}).partitions || 0;
  } catch (_e) {
    partitions = 0; // the stats call below shows the refusal if there is one
  }
  const statsPath = partitions > 0 ? base + "/partitioned-stats" : base + "/stats";
  const hist = topicHistory(full);
  VIEW().innerHTML = `<p class="crumbs"><a href="#/tenants">tenants</a> / <a href="#/tenant/${enc(tenant)}">${esc(tenant)}</a>
      / <a href="#/ns/${enc(tenant)}/${enc(ns)}">${esc(ns)}</a> / ${esc(topic)}</p>
    <h1>Topic <code>${esc(full)}</code>${partitions ? ` <span class="tag">${partitions} partitions</span>` : ""}</h1>
    <div class="actions">
      <button id="topic-unload">Unload</button>
      <button id="topic-compact">Trigger compaction</button>
      <button id="topic-delete" class="danger">Delete topic</button>
      <span id="compaction-status" class="muted"></span>
    </div>
    ${partitions ? `<p class="partitions">partitions: ${Array.from({ length: partitions }, (_x, i) =>
      `<a href="#/topic/${enc(domain)}/${enc(tenant)}/${enc(ns)}/${enc(topic)}-partition-${i}">${i}</a>`).join(" ")}</p>` : ""}
    <div id="topic-stats-error"></div>
    <div class="cards" id="cards"></div>
    <h2>Throughput <span class="muted">(last 5 minutes, from the stats counters)</span></h2>
    <div id="chart"></div>
    <h2>Producers</h2><div id="producers"></div>
    <h2>Subscriptions</h2><div id="subscriptions"></div>
    <form id="create-sub" class="inline">
      <input name="sub" placeholder="new subscription" required>
      <select name="from"><option value="latest">from latest</option><option value="earliest">from earliest</option></select>
      <button>Create subscription</button>
    </form>
    <form id="sub-actions" class="inline">
      <select name="sub" id="sub-select"></select>
      <label>skip <input name="skip" type="number" min="1" value="1"></label><button type="button" id="sub-skip">Skip</button>
      <button type="button" id="sub-clear">Clear backlog</button>
      <label>reset to <input name="resetTo" id="reset-to" placeholder="earliest | minutes ago | epoch ms | ledger:entry"></label>
      <button type="button" id="sub-reset">Reset cursor</button>
      <label>peek <input name="peek" type="number" min="1" max="100" value="5"></label><button type="button" id="sub-peek">Peek</button>
      <button type="button" id="sub-delete" class="danger">Delete subscription</button>
    </form>
    <h2>Consumers</h2><div id="consumers"></div>
    <h2>Peeked messages</h2><div id="peek"><p class="muted">Pick a subscription and press Peek.</p></div>
    <h2>Schema</h2><div id="schema"></div>`;

  const subName = () => document.getElementById("sub-select").value;
  const subPath = () => `${base}/subscription/${enc(subName())}`;

  let schemaShownAt = 0;
  const refresh = async () => {
    if (Date.now() - schemaShownAt > SCHEMA_POLL_MS) {
      schemaShownAt = Date.now(); // a producer may register the first schema (or a new version) at any time
      renderSchema(schemaBase);
    }
    let stats;
    try {
      stats = await api("GET", statsPath);
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) throw e; // back to the sign-in form
      document.getElementById("topic-stats-error").innerHTML = refusal(e);
      document.getElementById("cards").innerHTML = "";
      return;
    }
    document.getElementById("topic-stats-error").innerHTML = "";
    renderLive(stats, hist);
  };

  on("#topic-unload", "click", () => act(`unload ${full}`, () => api("PUT", base + "/unload")));
  on("#topic-compact", "click", async () => {
    await act(`trigger compaction of ${full}`, () => api("PUT", base + "/compaction"));
  });
  on("#topic-delete", "click", async () => {
    if (confirmed(`Delete ${full}?`)) {
      const ok = await act(`delete ${full}`, () => api("DELETE", partitions ? base + "/partitions" : base));
      if (ok) Console.go(`#/ns/${enc(tenant)}/${enc(ns)}`);
    }
  });
  on("#create-sub", "submit", (_e, f) => {
    const name = f.sub.value.trim();
    const body = f.from.value === "earliest" ? { ledgerId: -1, entryId: -1 } : undefined;
    return act(`create subscription ${name}`, () => api("PUT", `${base}/subscription/${enc(name)}`, body));
  });
  on("#sub-skip", "click", () => {
    const n = parseInt(document.querySelector("#sub-actions [name=skip]").value, 10);
    return act(`skip ${n} on ${subName()}`, () => api("POST", `${subPath()}/skip/${n}`));
  });
  on("#sub-clear", "click", () => act(`clear backlog of ${subName()}`, () => api("POST", `${subPath()}/skip_all`)));
  on("#sub-reset", "click", () => {
    const to = document.getElementById("reset-to").value.trim() || "earliest";
    return act(`reset cursor of ${subName()} to ${to}`, () => resetCursor(subPath(), to));
  });
  on("#sub-delete", "click", async () => {
    if (confirmed(`Delete subscription ${subName()}?`)) {
      await act(`delete subscription ${subName()}`, () => api("DELETE", subPath()));
    }
  });
  on("#sub-peek", "click", () => {
    const n = parseInt(document.querySelector("#sub-actions [name=peek]").value, 10) || 1;
    return peek(subPath(), n, schemaBase);
  });

  await refresh();
  await renderCompaction(base);
  return { refresh, intervalMs: Console.pollMs(TOPIC_POLL_MS) };
}

// "earliest" | "<n>m" or "<n>" minutes ago (small numbers) | epoch ms | "ledger:entry".
function resetCursor(subPath, to) {
  if (to === "earliest") return api("POST", `${subPath}/resetcursor/0`);
  const id = /^(\d+):(\d+)$/.exec(to);
  if (id) return api("POST", `${subPath}/resetcursor`, { ledgerId: +id[1], entryId: +id[2] });
  const n = Number(to.replace(/m$/, ""));
  if (!isFinite(n) || n < 0) throw new ApiError(0, `cannot reset to "${to}"`, "POST", subPath + "/resetcursor");
  const ts = to.endsWith("m") || n < 1e9 ? Date.now() - n * 60000 : n;
  return api("POST", `${subPath}/resetcursor/${Math.floor(ts)}`);
}

function renderLive(stats, hist) {
  const now = Date.now();
  const backlog = subscriptionBacklog(stats);
  const last = hist.last;
  const cur = { t: now, msgIn: stats.msgInCounter || 0, msgOut: stats.msgOutCounter || 0 };
  if (last && now > last.t) {
    const dt = (now - last.t) / 1000;
    hist.msgIn.push(now, Math.max(0, (cur.msgIn - last.msgIn) / dt));
    hist.msgOut.push(now, Math.max(0, (cur.msgOut - last.msgOut) / dt));
  }
  hist.last = cur;
  const cards = [
    ["msgRateIn", "msg/s in", fmtNum(stats.msgRateIn || 0)],
    ["msgRateOut", "msg/s out", fmtNum(stats.msgRateOut || 0)],
    ["msgThroughputIn", "bytes/s in", fmtBytes(stats.msgThroughputIn || 0)],
    ["msgThroughputOut", "bytes/s out", fmtBytes(stats.msgThroughputOut || 0)],
    ["liveRateIn", "msg/s in (live)", fmtNum(hist.msgIn.last())],
    ["backlog", "backlog (all subscriptions)", fmtNum(backlog)],
    ["storageSize", "storage size", fmtBytes(stats.storageSize || 0)],
    ["msgInCounter", "messages in", fmtNum(stats.msgInCounter || 0)],
    ["msgOutCounter", "messages out", fmtNum(stats.msgOutCounter || 0)],
    ["producers", "producers", fmtNum((stats.publishers || []).length)],
    ["subscriptions", "subscriptions", fmtNum(Object.keys(stats.subscriptions || {}).length)],
  ];
  document.getElementById("cards").innerHTML = cards.map(([id, label, v]) =>
    `<div class="card"><div class="label">${esc(label)}</div><div class="value" id="stat-${id}">${v}</div></div>`).join("");
  document.getElementById("chart").innerHTML = renderChart([
    { name: "in", unit: " msg/s", color: "#2563eb", points: hist.msgIn.points, history: hist.msgIn },
    { name: "out", unit: " msg/s", color: "#16a34a", points: hist.msgOut.points, history: hist.msgOut },
  ], { label: "messages per second in and out", now });
  document.getElementById("producers").innerHTML = table([
    ["producer", (p) => esc(p.producerName)],
    ["address", (p) => esc(p.address)],
    ["msg/s", (p) => fmtNum(p.msgRateIn || 0)],
    ["bytes/s", (p) => fmtBytes(p.msgThroughputIn || 0)],
    ["access mode", (p) => esc(p.accessMode)],
    ["client", (p) => esc(p.clientVersion)],
    ["since", (p) => esc(p.connectedSince)],
  ], stats.publishers || [], 'id="producers-table"');
  const subs = Object.entries(stats.subscriptions || {}).map(([name, s]) => ({ name, ...s }));
  document.getElementById("subscriptions").innerHTML = table([
    ["subscription", (s) => `<b>${esc(s.name)}</b>`],
    ["type", (s) => esc(s.type)],
    ["backlog", (s) => `<span class="sub-backlog" data-sub="${esc(s.name)}">${fmtNum(s.msgBacklog || 0)}</span>`],
    ["unacked", (s) => fmtNum(s.unackedMessages || 0)],
    ["msg/s out", (s) => fmtNum(s.msgRateOut || 0)],
    ["ack holes", (s) => fmtNum(s.nonContiguousDeletedMessagesRanges || 0)],
    ["consumers", (s) => fmtNum((s.consumers || []).length)],
    ["Key_Shared", (s) => keySharedInfo(s)],
    ["blocked", (s) => (s.blockedSubscriptionOnUnackedMsgs ? "<b>blocked on unacked</b>" : "")],
  ], subs, 'id="subscriptions-table"');
  const select = document.getElementById("sub-select");
  const names = subs.map((s) => s.name);
  if (select.dataset.names !== names.join("\n")) {
    const keep = select.value;
    select.innerHTML = names.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join("");
    if (names.includes(keep)) select.value = keep;
    select.dataset.names = names.join("\n");
  }
  const consumers = subs.flatMap((s) => (s.consumers || []).map((c) => ({ sub: s.name, ranges: hashRanges(s, c), ...c })));
  document.getElementById("consumers").innerHTML = table([
    ["subscription", (c) => esc(c.sub)],
    ["consumer", (c) => esc(c.consumerName)],
    ["address", (c) => esc(c.address)],
    ["permits", (c) => fmtNum(c.availablePermits || 0)],
    ["unacked", (c) => fmtNum(c.unackedMessages || 0)],
    ["msg/s out", (c) => fmtNum(c.msgRateOut || 0)],
    ["blocked", (c) => (c.blockedConsumerOnUnackedMsgs ? "yes" : "")],
    ["key hash ranges", (c) => rangesCell(c.ranges)],
  ], consumers, 'id="consumers-table"');
}

function keySharedInfo(s) {
  if (s.type !== "Key_Shared") return "";
  const parts = [];
  if (s.keySharedMode) parts.push(`mode ${esc(s.keySharedMode)}`);
  if (s.allowOutOfOrderDelivery) parts.push("out-of-order allowed");
  if (s.drainingHashesCount) parts.push(`draining hashes ${fmtNum(s.drainingHashesCount)} (${fmtNum(s.drainingHashesUnackedMessages || 0)} unacked)`);
  if (s.parkedEntries) parts.push(`parked entries ${fmtNum(s.parkedEntries)}`);
  for (const b of (s.blockedHashes || []).slice(0, 5)) {
    parts.push(`blocked hash ${esc(b.hash)}: ${esc(b.reason)}`);
  }
  const stuck = Object.entries(s.consumersAfterMarkDeletePosition || {});
  if (stuck.length) parts.push("waiting for mark-delete: " + stuck.map(([c, p]) => `${esc(c)} @ ${esc(p)}`).join(", "));
  return `<span class="key-shared">${parts.join("<br>")}</span>`;
}

// A consumer's Key_Shared hash ranges: in its own stats (Pulsar) or in the subscription's keySharedConsumers.
function hashRanges(sub, c) {
  if (c.keyHashRanges && c.keyHashRanges.length) return c.keyHashRanges;
  const ks = (sub.keySharedConsumers || []).find((k) => k.consumerName === c.consumerName);
  return ks ? ks.keyHashRanges || [] : [];
}

// "[s, e]" strings -> a short summary (count and hashes covered) with the ranges folded under it.
function rangesCell(ranges) {
  if (!ranges.length) return "";
  let hashes = 0;
  for (const r of ranges) {
    const m = /(\d+),\s*(\d+)/.exec(r);
    if (m) hashes += +m[2] - +m[1] + 1;
  }
  const summary = `${ranges.length} range${ranges.length > 1 ? "s" : ""}, ${hashes} hashes`;
  return `<details class="hash-ranges"><summary>${esc(summary)}</summary>${esc(ranges.join(" "))}</details>`;
}

async function renderCompaction(base) {
  const el = document.getElementById("compaction-status");
  try {
    const st = await api("GET", base + "/compaction");
    el.textContent = st && st.status ? `compaction: ${st.status}${st.lastError ? " (" + st.lastError + ")" : ""}` : "";
  } catch (_e) {
    el.textContent = "";
  }
}

async function renderSchema(schemaBase) {
  const el = document.getElementById("schema");
  try {
    const latest = await api("GET", schemaBase + "/schema");
    let versions = [];
    try {
      versions = ((await api("GET", schemaBase + "/schemas")) || {}).getSchemaResponses || [];
    } catch (_e) {
      versions = [];
    }
    el.innerHTML = `<p>type <b id="schema-type">${esc(latest.type)}</b>, version <b>${esc(latest.version)}</b></p>` +
      definitionBlock(latest) + (versions.length > 1 ? "<h3>All versions</h3>" + table([
        ["version", (v) => esc(v.version)],
        ["type", (v) => esc(v.type)],
        ["timestamp", (v) => esc(v.timestamp ? new Date(v.timestamp).toISOString() : "")],
        ["definition", (v) => definitionBlock(v)],
      ], versions, 'id="schema-versions"') : "");
  } catch (e) {
    el.innerHTML = e.status === 404 ? `<p class="muted">no schema (payloads are shown as text)</p>` : refusal(e);
  }
}

function definitionBlock(s) {
  let data = s.data;
  try {
    data = JSON.stringify(JSON.parse(data), null, 2);
  } catch (_e) {
    /* not JSON: show as is */
  }
  return data ? `<pre class="json">${esc(data)}</pre>` : "";
}

async function topicSchema(schemaBase) {
  try {
    return await api("GET", schemaBase + "/schema");
  } catch (e) {
    if (e.status === 404) return { type: "NONE", data: "" };
    throw e;
  }
}

function toBase64(bytes) {
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

async function peek(subPath, count, schemaBase) {
  const el = document.getElementById("peek");
  el.innerHTML = `<p class="muted">peeking...</p>`;
  let schema;
  const out = [];
  try {
    schema = await topicSchema(schemaBase);
    for (let n = 1; n <= count; n++) {
      let msg;
      try {
        msg = await api("GET", `${subPath}/position/${n}`, undefined, { raw: true });
      } catch (e) {
        if (e.status === 404 && n > 1) break; // past the end of the backlog
        throw e;
      }
      const batch = msg.headers.get("X-Pulsar-num-batch-message");
      const decoded = await api("POST", "/console/api/decode", {
        schemaType: schema.type, schema: schema.data || "", payload: toBase64(msg.bytes),
        batchCount: batch ? parseInt(batch, 10) : undefined,
      });
      out.push({ n, headers: msg.headers, messages: decoded.messages });
    }
  } catch (e) {
    el.innerHTML = refusal(e);
    return;
  }
  if (!out.length) {
    el.innerHTML = `<p class="muted">no messages in the backlog</p>`;
    return;
  }
  el.innerHTML = out.map((m) => {
    const h = m.headers;
    const props = h.get("X-Pulsar-PROPERTY");
    return `<div class="message" data-position="${m.n}"><div class="meta">#${m.n} id <b>${esc(h.get("X-Pulsar-Message-ID"))}</b>
        published ${esc(h.get("X-Pulsar-publish-time"))} by ${esc(h.get("X-Pulsar-producer-name"))}
        ${h.get("X-Pulsar-partition-key") ? "key " + esc(h.get("X-Pulsar-partition-key")) : ""}
        ${props ? "properties " + esc(props) : ""} <span class="tag">${esc(schema.type)}</span></div>` +
      m.messages.map((r) => `<div class="payload" data-format="${esc(r.format)}">` +
        (r.key ? `<span class="muted">key ${esc(r.key)}</span> ` : "") +
        (r.format === "text" || r.format === "hex" ? `<pre>${esc(r.value)}</pre>` : jsonBlock(r.value)) +
        "</div>").join("") + "</div>";
  }).join("");
}
