// Grid's live dashboard: renders /ui/view.json and polls it every second (ETag: an unchanged
// view answers 304). Operator actions ask for the operator token once per tab; the token lives
// in this closure only (never a URL, a cookie, web storage or the page's markup).
"use strict";
(function () {
  const POLL_MS = 1000;
  let token = null; // the operator token, in memory only
  let etag = "";
  let view = null;
  const $ = (id) => document.getElementById(id);
  const esc = (v) => String(v === null || v === undefined ? "" : v).replace(/[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  const mb = (n) => (n >= 10240 ? (n / 1024).toFixed(1) + " GB" : n + " MB");
  const clock = (t) => (t ? new Date(t * 1000).toLocaleTimeString() : "");

  const shown = {}; // id -> the markup on screen: an unchanged section is not replaced, so a
  // click, a hover or a selection on it survives the next poll
  function setHtml(id, markup) {
    if (shown[id] === markup) return false;
    $(id).innerHTML = markup;
    shown[id] = markup;
    return true;
  }

  function notice(text, isError) {
    const el = $("notice");
    el.textContent = text;
    el.className = "notice" + (text ? " show" : "") + (isError ? " error" : "");
  }

  // ------------------------------------------------------------------ rendering
  function hostCard(h) {
    const m = h.memory;
    const segs = [["used", m.used], ["reserved", m.reserved], ["headroom", m.headroom],
      ["free", m.free]].map(([k, v]) =>
      `<span class="seg ${k}" data-w="${v}" title="${k} ${mb(v)}"></span>`).join("");
    const chips = h.residencies.map((r) =>
      `<span class="chip ${esc(r.state)}" data-model="${esc(r.model_id)}" data-state="${esc(r.state)}"` +
      ` title="${esc(r.state)}, ${mb(r.memory_mb)}">${esc(r.model_id)} · ${esc(r.state)}</span>`).join("");
    const slots = h.slots.max ? `${h.slots.used}/${h.slots.max}` : `${h.slots.used}/∞`;
    const flags = [];
    if (h.stale) flags.push("stale");
    if (h.drained !== null) flags.push("drained: " + h.drained);
    const why = h.refusals.filter((r) => r !== "heartbeat_stale");
    const button = h.drained !== null
      ? `<button class="small" data-act="undrain" data-host="${esc(h.host_id)}">Undrain</button>`
      : `<button class="small" data-act="drain" data-host="${esc(h.host_id)}">Drain</button>`;
    return `<div class="host${h.refusals.length ? " refusing" : ""}${h.stale ? " stale" : ""}"` +
      ` data-host="${esc(h.host_id)}" data-state="${esc(h.state)}">` +
      `<h3><span class="id" title="${esc(h.host_id)}">${esc(h.host_id)}</span>` +
      `<span class="state ${esc(h.state)}">${esc(h.state)}</span>${button}</h3>` +
      `<div class="bar" title="capacity ${mb(m.capacity)}, allocatable ${mb(m.allocatable)}">${segs}</div>` +
      `<div class="meta">${mb(m.used)} used · ${mb(m.free)} free of ${mb(m.allocatable)}` +
      ` (headroom ${mb(m.headroom)}) · slots ${slots}${h.domain ? " · " + esc(h.domain) : ""}</div>` +
      (flags.length ? `<div class="meta">${esc(flags.join(" · "))}</div>` : "") +
      (why.length ? `<div class="problems">takes no new work: ${esc(why.join(", "))}</div>` : "") +
      (h.problems.length ? `<div class="problems">${esc(h.problems.join("; "))}</div>` : "") +
      `<div class="chips">${chips || '<span class="muted">no models</span>'}</div></div>`;
  }

  function renderFleet(v) {
    $("fleet-count").textContent = `${v.hosts.length} hosts`;
    const changed = setHtml("fleet-body", v.hosts.length
      ? `<div class="grid">${v.hosts.map(hostCard).join("")}</div>`
      : '<p class="muted">No host has registered yet: start a node (grid allocator node start, or grid allocator join on another machine).</p>');
    if (!changed) return;
    for (const seg of $("fleet-body").querySelectorAll(".seg")) seg.style.flexGrow = seg.dataset.w;
  }

  function unmetRows(model) {
    return model.unmet.map((u) => {
      const binding = u.binding.map((b) =>
        `<li><b>${esc(b.constraint)}</b>${b.host_id ? " on " + esc(b.host_id) : ""}: ${esc(b.detail)}</li>`).join("");
      return `<tr class="unmet" data-unmet="${esc(model.model_id)}"><td colspan="8">` +
        `<b>${esc(u.code)}</b>: ${u.missing} replica(s) unmet. ${esc(u.message)}` +
        (binding ? `<ul class="binding">${binding}</ul>` : "") +
        (u.would_fit_if ? `<div class="fits">Would fit if ${esc(u.would_fit_if)}</div>` : "") +
        `</td></tr>`;
    }).join("");
  }

  function renderModels(v) {
    if (!v.models.length) {
      setHtml("models-body", '<p class="muted">No model profile yet: <code>grid allocator model set MODEL --memory-mb MB</code>.</p>');
      return;
    }
    const rows = v.models.map((m) =>
      `<tr data-model="${esc(m.model_id)}"><td>${esc(m.model_id)}</td><td class="num">${m.priority}</td>` +
      `<td class="num bounds">${m.min_replicas}–${m.max_replicas}</td>` +
      `<td class="num desired">${m.desired}</td><td class="num planned">${m.planned}</td>` +
      `<td class="num ready">${m.ready}</td><td>${esc(m.reason)}</td>` +
      `<td><button class="small" data-act="bounds" data-model="${esc(m.model_id)}">Bounds…</button></td></tr>` +
      unmetRows(m)).join("");
    const anyUnmet = v.models.some((m) => m.unmet.length);
    setHtml("models-body", `<table><thead><tr><th>Model</th><th class="num">Priority</th>` +
      `<th class="num">Min–max</th><th class="num">Desired</th><th class="num">Planned</th>` +
      `<th class="num">Ready</th><th>Why this many</th><th></th></tr></thead><tbody>${rows}</tbody></table>` +
      (anyUnmet ? '<p class="next">Next: grid allocator snapshot -o fleet.json && grid capacity fleet.json --add models/templates/gpu-server.json --survive 1 (how many hosts would place every replica)</p>' : ""));
  }

  function renderPlan(v) {
    const p = v.plan;
    if (!p) { setHtml("plan-body", '<p class="muted">No plan yet: the controller plans on its next tick.</p>'); return; }
    const levels = p.levels.map((l) =>
      `<tr><td>${esc(l.level)}</td><td class="num">${l.value}</td><td class="num">${l.bound}</td>` +
      `<td class="num">${(100 * l.gap).toFixed(1)}%</td></tr>`).join("");
    setHtml("plan-body", `<p><b>${esc(p.engine)}</b> ${esc(p.status)} in ${Number(p.wall_ms).toFixed(0)} ms` +
      (p.generation ? ` · generation <code>${esc(p.generation)}</code>` : "") +
      (p.message ? ` · ${esc(p.message)}` : "") + ` · ${v.pending} pending command(s)</p>` +
      `<table><thead><tr><th>Level (highest first)</th><th class="num">Value</th><th class="num">Bound</th>` +
      `<th class="num">Gap</th></tr></thead><tbody>${levels}</tbody></table>`);
  }

  function renderWorkloads(v) {
    if (!v.workloads.length) {
      setHtml("workloads-body", '<p class="muted">No workload demand yet (requests to model "auto" are workload demand).</p>');
      return;
    }
    const rows = v.workloads.map((w) =>
      `<tr><td>${esc(w.workload)}</td><td>${esc(w.model_id || "—")}</td>` +
      `<td class="num">${Number(w.offered_concurrency).toFixed(2)}</td><td>${esc(w.state)}</td>` +
      `<td class="num">${w.desired}/${w.planned}/${w.ready}</td><td>${esc(w.reason)}</td></tr>`).join("");
    setHtml("workloads-body", `<table><thead><tr><th>Workload</th><th>Chosen model</th>` +
      `<th class="num">Offered concurrency</th><th>State</th><th class="num">Desired/planned/ready</th>` +
      `<th>Reason</th></tr></thead><tbody>${rows}</tbody></table>`);
  }

  function fillSelect(sel, values) {
    const keep = sel.value;
    sel.innerHTML = '<option value="">all</option>' +
      values.map((x) => `<option value="${esc(x)}">${esc(x)}</option>`).join("");
    sel.value = values.includes(keep) ? keep : "";
  }

  function renderHistory(v) {
    const hosts = [...new Set(v.history.map((r) => r.host_id).concat(v.hosts.map((h) => h.host_id)))].sort();
    const models = [...new Set(v.history.map((r) => r.model_id).concat(v.models.map((m) => m.model_id)))].sort();
    fillSelect($("hist-host"), hosts);
    fillSelect($("hist-model"), models);
    const host = $("hist-host").value, model = $("hist-model").value;
    const rows = v.history.filter((r) => (!host || r.host_id === host) && (!model || r.model_id === model));
    setHtml("history-body", rows.length
      ? `<table><thead><tr><th>When</th><th>Action</th><th>Host</th><th>Model</th><th>Status</th>` +
        `<th>Reason / outcome</th></tr></thead><tbody>` + rows.map((r) =>
        `<tr data-host="${esc(r.host_id)}" data-model="${esc(r.model_id)}"><td>${esc(clock(r.at))}</td>` +
        `<td>${esc(r.kind)}</td><td>${esc(r.host_id)}</td><td>${esc(r.model_id)}</td>` +
        `<td>${esc(r.status)}</td><td>${esc(r.outcome || r.reason)}</td></tr>`).join("") + "</tbody></table>"
      : '<p class="muted">No command matches.</p>');
  }

  function renderHeader(v) {
    $("mode").textContent = "mode: " + v.mode;
    if (document.activeElement !== $("mode-select")) $("mode-select").value = v.mode;
    const note = $("mode-note");
    const text = {
      recommend: "Recommend mode: Grid plans but loads and unloads nothing. To let it act: grid allocator mode automatic (or Set mode above).",
      observe: "Observe mode: Grid records demand but neither plans actions nor acts. To let it act: grid allocator mode automatic (or Set mode above).",
    }[v.mode];
    note.hidden = !text;
    note.textContent = text || "";
  }

  function render(v) {
    view = v;
    renderHeader(v);
    renderFleet(v);
    renderModels(v);
    renderPlan(v);
    renderWorkloads(v);
    renderHistory(v);
  }

  // ------------------------------------------------------------------ live updates
  async function poll() {
    const live = $("live");
    try {
      const res = await fetch("/ui/view.json", { headers: etag ? { "If-None-Match": etag } : {}, cache: "no-store" });
      if (res.status === 200) {
        etag = res.headers.get("ETag") || "";
        render(await res.json());
      } else if (res.status !== 304) {
        throw new Error("HTTP " + res.status);
      }
      live.textContent = "live · " + new Date().toLocaleTimeString();
      live.className = "badge live ok";
    } catch (err) {
      live.textContent = "disconnected, retrying";
      live.className = "badge live err";
    }
  }

  // ------------------------------------------------------------------ operator actions
  function askToken() {
    return new Promise((resolve) => {
      const dialog = $("token-dialog"), input = $("token-input");
      input.value = "";
      const done = (value) => {
        input.value = ""; // never left in the page
        $("token-ok").onclick = $("token-cancel").onclick = input.onkeydown = null;
        dialog.close();
        resolve(value);
      };
      $("token-ok").onclick = () => done(input.value.trim());
      $("token-cancel").onclick = () => done(null);
      input.onkeydown = (e) => { if (e.key === "Enter") done(input.value.trim()); };
      dialog.showModal();
      input.focus();
    });
  }

  async function act(method, url, body, what) {
    if (token === null) {
      const typed = await askToken();
      if (typed === null) { notice("Cancelled: " + what + " needs the operator token."); return; }
      token = typed;
    }
    const headers = { "Content-Type": "application/json" };
    if (token) headers["X-Grid-Allocator-Token"] = token;
    let res, doc = {};
    try {
      res = await fetch(url, { method, headers, body: body ? JSON.stringify(body) : undefined, cache: "no-store" });
      doc = await res.json().catch(() => ({}));
    } catch (err) {
      notice("Could not reach the controller: " + what + " was not sent.", true);
      return;
    }
    if (res.ok) {
      $("auth").textContent = "operator";
      notice("Done: " + what + ".");
      etag = "";
      poll();
      return;
    }
    const e = doc.error || {};
    if (res.status === 401 || res.status === 403) { token = null; $("auth").textContent = "read-only"; }
    notice(`Refused (${res.status} ${e.code || ""}): ${e.message || what}` + (e.fix ? ". To fix: " + e.fix : ""), true);
  }

  function boundsAction(modelId) {
    const model = (view && view.models.find((m) => m.model_id === modelId)) || {};
    const lo = window.prompt(`Minimum replicas of ${modelId}`, model.min_replicas);
    if (lo === null) return;
    const hi = window.prompt(`Maximum replicas of ${modelId}`, model.max_replicas);
    if (hi === null) return;
    const body = { min_replicas: Number(lo), max_replicas: Number(hi) };
    act("PATCH", `/allocator/models/${encodeURIComponent(modelId)}/replicas`, body,
      `bounds ${body.min_replicas}–${body.max_replicas} for ${modelId}`);
  }

  document.addEventListener("click", (e) => {
    const el = e.target.closest("[data-act]");
    if (!el) return;
    const host = el.dataset.host, model = el.dataset.model;
    if (el.dataset.act === "drain") {
      act("PUT", `/allocator/hosts/${encodeURIComponent(host)}/drain`, { reason: "drained from the dashboard" }, "drain " + host);
    } else if (el.dataset.act === "undrain") {
      act("DELETE", `/allocator/hosts/${encodeURIComponent(host)}/drain`, null, "undrain " + host);
    } else if (el.dataset.act === "bounds") {
      boundsAction(model);
    }
  });

  document.addEventListener("DOMContentLoaded", () => {
    $("mode-set").addEventListener("click", () => {
      const mode = $("mode-select").value;
      act("PUT", "/allocator/mode", { mode }, "mode " + mode);
    });
    $("hist-host").addEventListener("change", () => view && renderHistory(view));
    $("hist-model").addEventListener("change", () => view && renderHistory(view));
    poll();
    setInterval(poll, POLL_MS);
  });
})();
