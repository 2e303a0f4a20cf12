// seglog console: every page's script. Each page polls the JSON API (relative "api/..." URLs) at most
// every POLL_MS and redraws; nothing here writes to the broker.
"use strict";

const POLL_MS = 5000;
const params = new URLSearchParams(location.search);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const child of children) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

function link(href, text) { return el("a", {href}, text); }
function q(obj) { return new URLSearchParams(obj).toString(); }
function num(n) { return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"); }
function time(ms) { return ms === null || ms === undefined || ms < 0 ? "–" : new Date(ms).toISOString(); }

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n, i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return i === 0 ? `${n} B` : `${v.toFixed(1)} ${units[i]}`;
}

function duration(ms) {
  ms = Number(ms);
  if (ms < 0) return "unlimited";
  for (const [unit, size] of [["d", 86400000], ["h", 3600000], ["min", 60000], ["s", 1000]]) {
    if (ms >= size && ms % size === 0) return `${ms / size} ${unit}`;
  }
  return `${ms} ms`;
}

function known(offset) { return offset < 0 ? null : offset; }
function numCell(value, field) { return el("td", {class: "num", "data-field": field}, num(value)); }
function bytesCell(value, field) { return el("td", {class: "num", "data-field": field, title: `${value} bytes`}, bytes(value)); }

function table(headers, rows, id) {
  const head = el("tr", {}, ...headers.map(([label, cls]) => el("th", {class: cls || null}, label)));
  return el("table", {id}, el("thead", {}, head), el("tbody", {}, ...rows));
}

function card(label, value, id, title) {
  return el("div", {class: "card"}, el("div", {class: "label"}, label),
            el("div", {class: "value", id, title: title || null}, value));
}

async function getJson(path, query) {
  const response = await fetch("api/" + path + (query ? "?" + q(query) : ""), {cache: "no-store"});
  const body = await response.json();
  if (!response.ok) throw new Error(`${body.error}: ${body.message}`);
  return body;
}

function replace(id, ...nodes) { document.getElementById(id).replaceChildren(...nodes); }

function showError(error) { replace("content", el("p", {class: "error", id: "error"}, String(error.message || error))); }

// Runs draw() now and every POLL_MS; the status line says when the figures were read.
function poll(draw) {
  const status = document.getElementById("status");
  async function once() {
    try {
      await draw();
      status.textContent = "updated " + new Date().toISOString().slice(11, 19) + " UTC";
      document.body.dataset.loaded = "true";
    } catch (error) {
      showError(error);
      document.body.dataset.loaded = "error";
    }
  }
  once();
  // A page in a hidden tab asks nothing.
  setInterval(() => { if (!document.hidden) once(); }, POLL_MS);
}

// --- pages ----------------------------------------------------------------------------

async function clusterPage() {
  const c = await getJson("cluster");
  replace("content",
    el("div", {class: "cards"},
      card("Cluster id", c.cluster_id || "–", "cluster-id"),
      card("Controller", num(c.controller_id), "controller-id"),
      card("Brokers", num(c.brokers.length), "broker-count"),
      card("Topics", num(c.topics), "topic-count"),
      card("Partitions", num(c.partitions), "partition-count"),
      card("Under-replicated", num(c.under_replicated_partitions), "under-replicated"),
      card("Log size", bytes(c.size_bytes), "log-size", `${c.size_bytes} bytes`),
      card("Consumer groups", num(c.groups), "group-count")),
    el("h2", {}, "Brokers"),
    table([["Node id", "num"], ["Endpoints"], ["Rack"], ["Role"]], c.brokers.map((b) => el("tr", {},
      numCell(b.node_id, "node_id"), el("td", {"data-field": "endpoints"}, b.endpoints.join(", ")),
      el("td", {}, b.rack || "–"),
      el("td", {}, [b.node_id === c.controller_id ? "controller" : "", b.node_id === c.node_id ? "this broker" : ""]
        .filter(Boolean).join(", ")))), "brokers"));
}

async function topicsPage() {
  const data = await getJson("topics");
  replace("content", table(
    [["Topic"], ["Partitions", "num"], ["Records", "num"], ["Size", "num"], ["Segments", "num"],
     ["cleanup.policy"], ["retention.ms"], ["retention.bytes"]],
    data.topics.map((t) => el("tr", {"data-topic": t.name},
      el("td", {"data-field": "name"}, link("topic?" + q({topic: t.name}), t.name)),
      numCell(t.partitions, "partitions"), numCell(t.records, "records"), bytesCell(t.size_bytes, "size_bytes"),
      numCell(t.segments, "segments"), el("td", {"data-field": "cleanup_policy"}, t.cleanup_policy),
      el("td", {"data-field": "retention_ms", title: String(t.retention_ms)}, duration(t.retention_ms)),
      el("td", {"data-field": "retention_bytes", title: String(t.retention_bytes)},
         t.retention_bytes < 0 ? "unlimited" : bytes(t.retention_bytes)))), "topics"));
}

async function topicPage() {
  const name = params.get("topic");
  document.getElementById("title").textContent = "Topic " + name;
  const t = await getJson("topic", {topic: name});
  replace("content",
    el("p", {class: "muted"}, "Topic id ", el("code", {}, t.topic_id)),
    el("h2", {}, "Partitions"),
    table([["Partition", "num"], ["Leader", "num"], ["Replicas"], ["In sync"], ["Log start", "num"],
           ["Log end", "num"], ["High watermark", "num"], ["Size", "num"], ["Segments", "num"], [""]],
      t.partitions.map((p) => el("tr", {"data-partition": p.partition},
        el("td", {class: "num", "data-field": "partition"},
           link("partition?" + q({topic: name, partition: p.partition}), String(p.partition))),
        numCell(p.leader, "leader"), el("td", {}, p.replicas.join(", ")), el("td", {}, p.isr.join(", ")),
        // -1: a replica this broker does not hold (cluster mode); its offsets are the other brokers'.
        numCell(known(p.log_start_offset), "log_start_offset"), numCell(known(p.log_end_offset), "log_end_offset"),
        numCell(known(p.high_watermark), "high_watermark"), bytesCell(p.size_bytes, "size_bytes"),
        numCell(p.segments, "segments"),
        el("td", {}, link("records?" + q({topic: name, partition: p.partition}), "records")))), "partitions"),
    el("h2", {}, "Retention and segments"),
    table([["Setting"], ["Value"], ["Source"]], Object.entries(t.config).map(([k, v]) => el("tr", {"data-config": k},
      el("td", {}, k), el("td", {"data-field": "value"}, v),
      el("td", {class: "muted"}, k in t.overrides ? "topic" : "broker default"))), "config"));
}

function coverage(index, withTime) {
  if (!index.entries) return el("span", {class: "muted"}, "0 entries");
  const from = withTime ? `${time(index.first_timestamp)} (offset ${num(index.first_offset)})` : num(index.first_offset);
  const to = withTime ? `${time(index.last_timestamp)} (offset ${num(index.last_offset)})` : num(index.last_offset);
  return el("span", {}, `${num(index.entries)} entries: ${from} … ${to}`);
}

async function partitionPage() {
  const topic = params.get("topic"), partition = params.get("partition");
  document.getElementById("title").textContent = `Partition ${topic}-${partition}`;
  const s = await getJson("segments", {topic, partition});
  replace("content",
    el("p", {}, link("topic?" + q({topic}), "← topic " + topic), " · ",
       link("records?" + q({topic, partition}), "browse records")),
    table([["Base offset", "num"], ["Next offset", "num"], ["Size", "num"], ["Largest timestamp"],
           ["Offset index (.index)"], ["Time index (.timeindex)"]],
      s.segments.map((g) => el("tr", {"data-base-offset": g.base_offset},
        numCell(g.base_offset, "base_offset"), numCell(g.next_offset, "next_offset"),
        bytesCell(g.size_bytes, "size_bytes"), el("td", {}, time(g.largest_timestamp), g.active ? " (active)" : ""),
        el("td", {"data-field": "offset_index"}, coverage(g.offset_index, false)),
        el("td", {"data-field": "time_index"}, coverage(g.time_index, true)))), "segments"));
}

async function drawLag(svgId, legendId, group) {
  const h = await getJson("lag-history", group ? {group} : {});
  const legend = drawLineChart(document.getElementById(svgId), h.series, h.now_ms - h.window_ms, h.now_ms);
  replace(legendId, ...legend.map(([name, color]) => el("span", {}, el("i", {style: `background:${color}`}), name)));
}

async function groupsPage() {
  const data = await getJson("groups");
  replace("content", table([["Group"], ["State"], ["Protocol type"], ["Members", "num"], ["Partitions", "num"],
                            ["Lag", "num"]],
    data.groups.map((g) => el("tr", {"data-group": g.group},
      el("td", {"data-field": "group"}, link("group?" + q({group: g.group}), g.group)),
      el("td", {class: "state-" + g.state, "data-field": "state"}, g.state), el("td", {}, g.protocol_type),
      numCell(g.members, "members"), numCell(g.partitions, "partitions"), numCell(g.lag, "lag"))), "groups"));
  await drawLag("lag-chart", "lag-legend", null);
}

async function groupPage() {
  const group = params.get("group");
  document.getElementById("title").textContent = "Consumer group " + group;
  const g = await getJson("group", {group});
  replace("content",
    el("div", {class: "cards"},
      card("State", g.state, "group-state"), card("Members", num(g.members.length), "member-count"),
      card("Protocol", g.protocol || "–", "group-protocol"), card("Total lag", num(g.lag), "total-lag")),
    el("h2", {}, "Members"),
    table([["Member id"], ["Client id"], ["Host"], ["Assigned partitions"]], g.members.map((m) => el("tr", {"data-member": m.member_id},
      el("td", {"data-field": "member_id"}, m.member_id), el("td", {"data-field": "client_id"}, m.client_id),
      el("td", {}, m.client_host),
      el("td", {"data-field": "assignment"}, m.assignment.map((a) => `${a.topic}-${a.partition}`).join(", ")))), "members"),
    el("h2", {}, "Offsets and lag"),
    table([["Topic"], ["Partition", "num"], ["Committed offset", "num"], ["Log end offset", "num"], ["Lag", "num"],
           ["Member"]],
      g.partitions.map((p) => el("tr", {"data-tp": `${p.topic}-${p.partition}`},
        el("td", {}, link("topic?" + q({topic: p.topic}), p.topic)), numCell(p.partition, "partition"),
        numCell(p.current_offset, "current_offset"), numCell(p.log_end_offset, "log_end_offset"),
        numCell(p.lag, "lag"), el("td", {class: "muted"}, p.member_id || "–"))), "offsets"));
  await drawLag("lag-chart", "lag-legend", group);
}

// The record browser: the form's fields are the page's query; "next" moves the offset on.
async function recordsPage() {
  const form = document.getElementById("browse");
  const topics = (await getJson("topics")).topics;
  const select = form.elements.topic;
  if (!select.options.length) {
    for (const t of topics) select.append(el("option", {value: t.name}, t.name));
    for (const name of ["topic", "partition", "offset", "limit", "format"]) {
      if (params.get(name) !== null) form.elements[name].value = params.get(name);
    }
    if (params.get("timestamp")) form.elements.time.value = new Date(Number(params.get("timestamp"))).toISOString().slice(0, 19);
  }
  const query = {topic: select.value, partition: form.elements.partition.value || "0",
                 limit: form.elements.limit.value || "20", format: form.elements.format.value};
  if (params.get("timestamp")) query.timestamp = params.get("timestamp");
  else if (params.get("offset")) query.offset = params.get("offset");
  if (!query.topic) { replace("content", el("p", {class: "muted"}, "No topics.")); return; }
  const page = await getJson("records", query);
  const next = {...query, offset: page.next_offset}; delete next.timestamp;
  replace("content",
    el("div", {class: "pager"},
      el("span", {id: "page-range"}, page.records.length
        ? `offsets ${num(page.records[0].offset)} … ${num(page.records[page.records.length - 1].offset)}`
        : `no records from offset ${num(page.start_offset)}`),
      el("span", {class: "muted"}, `log start ${num(page.log_start_offset)} · high watermark ${num(page.high_watermark)}`),
      page.next_offset < page.high_watermark ? link("records?" + q(next), "next page →") : ""),
    table([["Offset", "num"], ["Timestamp"], ["Key"], ["Headers"], ["Value"]],
      page.records.map((r) => el("tr", {"data-offset": r.offset},
        numCell(r.offset, "offset"), el("td", {"data-field": "timestamp"}, time(r.timestamp)),
        el("td", {"data-field": "key"}, r.key === null ? el("span", {class: "muted"}, "null") : el("pre", {}, r.key)),
        el("td", {"data-field": "headers"}, ...r.headers.map(([k, v]) => el("pre", {}, `${k}: ${v === null ? "null" : v}`))),
        el("td", {"data-field": "value"}, r.value === null ? el("span", {class: "muted"}, "null (tombstone)")
                                                             : el("pre", {}, r.value)))), "records"));
}

function onSubmitRecords(event) {
  event.preventDefault();
  const f = event.target.elements;
  const query = {topic: f.topic.value, partition: f.partition.value, limit: f.limit.value, format: f.format.value};
  if (f.time.value) query.timestamp = String(Date.parse(f.time.value + "Z"));
  else if (f.offset.value) query.offset = f.offset.value;
  location.search = q(query);
}

const PAGES = {cluster: clusterPage, topics: topicsPage, topic: topicPage, partition: partitionPage,
               groups: groupsPage, group: groupPage};

document.addEventListener("DOMContentLoaded", () => {
  const page = document.body.dataset.page;
  for (const a of document.querySelectorAll("header nav a")) {
    if (a.dataset.nav === page || (a.dataset.nav === "topics" && ["topic", "partition"].includes(page)) ||
        (a.dataset.nav === "groups" && page === "group")) a.classList.add("current");
  }
  if (page === "records") {
    document.getElementById("browse").addEventListener("submit", onSubmitRecords);
    recordsPage().then(() => { document.body.dataset.loaded = "true"; },
                       (error) => { showError(error); document.body.dataset.loaded = "error"; });
  } else {
    poll(PAGES[page]);
  }
});
