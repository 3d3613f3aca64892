// procfleet dashboard: applies the server's patches (Server-Sent Events),
// follows the log, sends the buttons' requests. No polling: the only timer
// rewrites the "age" texts from times already in the page.
"use strict";

(function () {
  const body = document.body;
  const live = document.getElementById("live");
  const toast = document.getElementById("toast");

  // ---- ages -------------------------------------------------------------
  function ago(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + "s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + "m" + (m < 10 && s % 60 ? (s % 60) + "s" : "");
    const h = Math.floor(m / 60);
    if (h < 24) return h + "h" + (m % 60 ? (m % 60) + "m" : "");
    return Math.floor(h / 24) + "d" + (h % 24 ? (h % 24) + "h" : "");
  }
  function ages(root) {
    const now = Date.now();
    for (const t of (root || document).querySelectorAll("time[data-since]")) {
      const at = Date.parse(t.dataset.since);
      if (!isNaN(at)) t.textContent = ago(now - at);
    }
  }
  ages();
  setInterval(function () { if (!document.hidden) ages(); }, 1000);

  // ---- patches ----------------------------------------------------------
  function fromHTML(html) {
    const t = document.createElement("template");
    t.innerHTML = html.trim();
    return t.content;
  }
  function rowFromHTML(html) {
    // A <tr> must be parsed inside a table body.
    const t = document.createElement("template");
    t.innerHTML = "<table><tbody>" + html + "</tbody></table>";
    return t.content.querySelector("tr");
  }
  function svgFromHTML(html) {
    // A graph box must be parsed inside an <svg> to be SVG.
    const t = document.createElement("template");
    t.innerHTML = "<svg>" + html + "</svg>";
    return t.content.firstChild.firstElementChild;
  }
  function applyPatch(p) {
    if (p.parts) {
      for (const id in p.parts) {
        const el = document.getElementById(id);
        if (!el) continue;
        el.replaceChildren(fromHTML(p.parts[id]));
        ages(el);
      }
    }
    if (p.nodes) {
      for (const name in p.nodes) {
        const old = document.getElementById("node-" + name);
        const n = svgFromHTML(p.nodes[name]);
        if (old && n) old.replaceWith(n);
      }
    }
    const tbody = document.getElementById("rows");
    if (!tbody) return;
    if (p.rows) {
      for (const name in p.rows) {
        const tr = rowFromHTML(p.rows[name]);
        if (!tr) continue;
        const old = document.getElementById("row-" + name);
        if (old) old.replaceWith(tr); else tbody.appendChild(tr);
        ages(tr);
      }
    }
    if (p.order) {
      const keep = new Set(p.order);
      for (const tr of Array.from(tbody.rows)) {
        if (!keep.has(tr.dataset.name)) tr.remove();
      }
      for (const name of p.order) {
        const tr = document.getElementById("row-" + name);
        if (tr) tbody.appendChild(tr); // appending in order sorts them
      }
    }
  }

  // ---- log --------------------------------------------------------------
  const log = document.getElementById("log");
  const follow = document.getElementById("log-follow");
  const maxLogLines = 5000;
  function appendLog(lines) {
    if (!log) return;
    const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 8;
    const frag = document.createDocumentFragment();
    for (const l of lines) {
      const div = document.createElement("div");
      div.textContent = l === "" ? "\u00a0" : l;
      frag.appendChild(div);
    }
    log.appendChild(frag);
    while (log.childElementCount > maxLogLines) log.firstElementChild.remove();
    if (follow && follow.checked && (atEnd || log.dataset.seen !== "1")) log.scrollTop = log.scrollHeight;
    log.dataset.seen = "1";
  }

  // ---- the stream -------------------------------------------------------
  function setLive(state, text) {
    if (!live) return;
    live.dataset.state = state;
    live.textContent = text;
  }
  const url = body.dataset.stream;
  if (url && window.EventSource) {
    const es = new EventSource(url);
    es.addEventListener("open", function () { setLive("live", "live"); });
    es.addEventListener("patch", function (e) { applyPatch(JSON.parse(e.data)); });
    es.addEventListener("log", function (e) { appendLog(JSON.parse(e.data)); });
    // The server follows the log anew (a new stream, a retry): it sends
    // the tail again after this.
    es.addEventListener("logreset", function () { if (log) { log.replaceChildren(); delete log.dataset.seen; } });
    es.addEventListener("error", function () {
      if (es.readyState === EventSource.CLOSED) {
        setLive("gone", "disconnected");
        say("The dashboard is gone (procfleet up stopped?). Open the URL that procfleet ui prints.", true);
      } else {
        setLive("connecting", "reconnecting");
      }
    });
  } else {
    setLive("gone", "static");
  }

  // ---- buttons ----------------------------------------------------------
  let toastTimer = 0;
  function say(text, bad) {
    if (!toast) return;
    toast.textContent = text;
    toast.dataset.tone = bad ? "bad" : "ok";
    toast.classList.add("show");
    clearTimeout(toastTimer);
    toastTimer = setTimeout(function () { toast.classList.remove("show"); }, bad ? 8000 : 3000);
  }
  document.addEventListener("submit", async function (e) {
    const form = e.target;
    if (!form.classList || !form.classList.contains("act")) return;
    e.preventDefault();
    if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) return;
    const button = form.querySelector("button");
    const what = button ? button.textContent : "Request";
    if (button) { button.disabled = true; button.dataset.busy = "1"; }
    try {
      const res = await fetch(form.action, {
        method: "POST",
        headers: { "Accept": "application/json" },
        credentials: "same-origin",
      });
      let msg = res.statusText;
      try { const j = await res.json(); if (j.error) msg = j.error; } catch (_) { /* not JSON */ }
      if (res.ok) say(what + ": requested"); else say(what + " failed: " + msg, true);
    } catch (err) {
      say(what + " failed: " + err, true);
    } finally {
      if (button && button.isConnected) { button.disabled = false; delete button.dataset.busy; }
    }
  });
})();
