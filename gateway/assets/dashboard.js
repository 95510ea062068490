// Baton dashboard: progressive enhancement of server-rendered pages.
// - keeps relative times current;
// - polls running executions (list rows and the open panel) until they finish;
// - copy buttons; operator cancel without leaving the page;
// - reveal toggles: payloads are fetched only on a click, rendered as
//   collapsible JSON, and never written to the URL, history or storage.
"use strict";

(function () {
  const csrf = () => (document.querySelector('meta[name="baton-csrf"]') || {}).content || "";
  const TERMINAL = ["completed", "failed", "cancelled"];
  const FAST_MS = 2000;
  const SLOW_MS = 10000;

  // --- times -----------------------------------------------------------------
  function relative(ms) {
    const delta = Date.now() - ms;
    const secs = Math.floor(Math.abs(delta) / 1000);
    if (secs < 5) return "just now";
    let amount;
    if (secs < 60) amount = secs + " s";
    else if (secs < 3600) amount = Math.floor(secs / 60) + " min";
    else if (secs < 86400) amount = Math.floor(secs / 3600) + " h";
    else amount = Math.floor(secs / 86400) + " d";
    return delta >= 0 ? amount + " ago" : "in " + amount;
  }
  function refreshTimes(root) {
    (root || document).querySelectorAll("time[data-ms]").forEach((t) => {
      const rel = t.querySelector(".rel");
      if (rel) rel.textContent = relative(Number(t.dataset.ms));
    });
  }

  // --- fetch helpers -----------------------------------------------------------
  function sessionEnded(message) {
    let note = document.getElementById("session-ended");
    if (!note) {
      note = document.createElement("p");
      note.id = "session-ended";
      note.className = "notice notice-error";
      note.setAttribute("role", "alert");
      const main = document.getElementById("main");
      main.insertBefore(note, main.firstChild);
    }
    note.textContent = message + " ";
    const link = document.createElement("a");
    link.href = location.pathname + location.search;
    link.textContent = "Sign in again";
    note.appendChild(link);
  }
  async function getJson(url, options) {
    const response = await fetch(url, Object.assign({ credentials: "same-origin", headers: { Accept: "application/json" } }, options || {}));
    let body = null;
    try { body = await response.json(); } catch (_) { body = null; }
    if (response.status === 401) {
      sessionEnded((body && body.error && body.error.message) || "Your session ended.");
      throw new Error("signed out");
    }
    if (!response.ok) {
      const message = (body && body.error && body.error.message) || "Baton could not answer (" + response.status + ").";
      const err = new Error(message);
      err.status = response.status;
      throw err;
    }
    return body;
  }
  function post(url, fields) {
    const body = new URLSearchParams(Object.assign({ csrf: csrf() }, fields));
    return getJson(url, {
      method: "POST",
      body,
      headers: { Accept: "application/json", "Content-Type": "application/x-www-form-urlencoded" },
    });
  }
  function fromHtml(html) {
    const template = document.createElement("template");
    template.innerHTML = html.trim();
    return template.content;
  }

  // --- the list: live rows ------------------------------------------------------
  function startList(section) {
    const url = section.dataset.liveUrl;
    const tbody = section.querySelector("tbody");
    const total = section.querySelector("[data-total]");
    const fresh = section.querySelector(".new-runs");
    const selected = () => (tbody && tbody.querySelector("tr.selected")) ? tbody.querySelector("tr.selected").dataset.id : null;
    async function tick() {
      let running = false;
      try {
        const page = await getJson(url);
        const shown = new Map();
        if (tbody) tbody.querySelectorAll("tr[data-id]").forEach((tr) => shown.set(tr.dataset.id, tr));
        let unseen = 0;
        for (const row of page.rows) {
          const tr = shown.get(row.id);
          if (!tr) { unseen += 1; continue; }
          if (tr.dataset.status !== row.status) {
            const replacement = fromHtml(row.html).querySelector("tr");
            if (replacement) {
              if (row.id === selected()) { replacement.classList.add("selected"); }
              tr.replaceWith(replacement);
            }
          }
          if (!TERMINAL.includes(row.status)) running = true;
        }
        if (total && String(page.total_count) !== total.textContent) total.textContent = String(page.total_count);
        if (fresh && (unseen > 0 || (!tbody && page.rows.length > 0))) fresh.hidden = false;
      } catch (e) {
        if (e.message === "signed out") return;
      }
      setTimeout(tick, running ? FAST_MS : SLOW_MS);
    }
    const anyRunning = tbody && [...tbody.querySelectorAll("tr[data-status]")].some((tr) => !TERMINAL.includes(tr.dataset.status));
    setTimeout(tick, anyRunning ? FAST_MS : SLOW_MS);
  }

  // --- the panel: live part, cancel, copy --------------------------------------------
  function startPanel(panel) {
    const live = document.getElementById("panel-live");
    let version = null;
    let timer = null;
    async function tick() {
      timer = null;
      try {
        const answer = await getJson(panel.dataset.panelUrl);
        if (answer.version !== version) {
          const open = live.querySelector("details.cancel[open]") !== null;
          version = answer.version;
          live.replaceChildren(fromHtml(answer.html));
          const cancel = live.querySelector("details.cancel");
          if (cancel && open) cancel.open = true;
          const wasTerminal = TERMINAL.includes(panel.dataset.status);
          panel.dataset.status = answer.status;
          if (answer.terminal && !wasTerminal) refreshRevealed(panel);
        }
        if (!answer.terminal) timer = setTimeout(tick, FAST_MS);
      } catch (e) {
        if (e.message !== "signed out") timer = setTimeout(tick, SLOW_MS);
      }
    }
    panel.pollNow = () => { if (timer) clearTimeout(timer); tick(); };
    if (!TERMINAL.includes(panel.dataset.status)) timer = setTimeout(tick, FAST_MS);
  }

  document.addEventListener("click", async (event) => {
    const copy = event.target.closest("button.copy");
    if (copy) {
      const text = copy.dataset.copy;
      try { await navigator.clipboard.writeText(text); copy.firstChild.textContent = "Copied"; }
      catch (_) {
        const code = copy.parentElement.querySelector("code");
        if (code) { const range = document.createRange(); range.selectNodeContents(code); getSelection().removeAllRanges(); getSelection().addRange(range); }
        copy.firstChild.textContent = "Selected";
      }
      setTimeout(() => { copy.firstChild.textContent = "Copy"; }, 2000);
      return;
    }
    const toggle = event.target.closest("button.toggle");
    if (toggle && !toggle.disabled) toggleReveal(toggle);
  });

  document.addEventListener("submit", async (event) => {
    const form = event.target.closest("form.cancel-form");
    if (!form) return;
    event.preventDefault();
    const outcome = document.getElementById("cancel-outcome");
    const button = form.querySelector("button");
    button.disabled = true;
    outcome.hidden = false;
    outcome.className = "notice";
    outcome.textContent = "Cancelling…";
    try {
      const answer = await post(form.action, {});
      outcome.textContent = answer.message;
      outcome.dataset.outcome = answer.outcome;
    } catch (e) {
      outcome.className = "notice notice-error";
      outcome.textContent = e.message;
      button.disabled = false;
    }
    const panel = document.getElementById("panel");
    if (panel && panel.pollNow) panel.pollNow();
  });

  // --- reveal toggles and the JSON viewer -------------------------------------------
  function node(tag, cls, text) {
    const el = document.createElement(tag);
    if (cls) el.className = cls;
    if (text !== undefined) el.textContent = text;
    return el;
  }
  function jsonView(value, depth) {
    if (value === null) return node("span", "b", "null");
    if (typeof value === "string") return node("span", "s", JSON.stringify(value));
    if (typeof value === "number") return node("span", "n", String(value));
    if (typeof value === "boolean") return node("span", "b", String(value));
    const isArray = Array.isArray(value);
    const entries = isArray ? value.map((v, i) => [i, v]) : Object.entries(value);
    const open = isArray ? "[" : "{";
    const close = isArray ? "]" : "}";
    if (entries.length === 0) return node("span", "", open + close);
    const details = node("details");
    details.open = depth < 2 && entries.length <= 30;
    details.appendChild(node("summary", "", open + " " + entries.length + (isArray ? " items" : entries.length === 1 ? " key" : " keys") + " " + close));
    const list = node("ul");
    for (const [key, child] of entries) {
      const li = node("li");
      if (!isArray) { li.appendChild(node("span", "k", JSON.stringify(key))); li.appendChild(document.createTextNode(": ")); }
      li.appendChild(jsonView(child, depth + 1));
      list.appendChild(li);
    }
    details.appendChild(list);
    return details;
  }
  function jsonBlock(title, value) {
    const wrap = node("div");
    wrap.appendChild(node("h4", "", title));
    const pre = node("div", "json");
    pre.appendChild(jsonView(value, 0));
    wrap.appendChild(pre);
    return wrap;
  }
  function renderPayload(box, answer) {
    box.replaceChildren();
    if (answer.part === "inputs") {
      box.appendChild(jsonBlock("Input", answer.input));
      return;
    }
    box.appendChild(jsonBlock("Output", answer.output));
    for (const a of answer.attempts || []) {
      if (a.output !== null) box.appendChild(jsonBlock("Attempt " + a.attempt + " output", a.output));
      if (a.error_detail !== null) box.appendChild(jsonBlock("Attempt " + a.attempt + " error detail", a.error_detail));
    }
  }
  function updateWarning(panel) {
    const anyOn = panel.querySelector('button.toggle[aria-pressed="true"]') !== null;
    document.getElementById("reveal-warning").hidden = !anyOn;
  }
  async function reveal(panel, part) {
    const box = panel.querySelector('.payload[data-part="' + part + '"]');
    box.hidden = false;
    box.replaceChildren(node("p", "sub", "Loading " + part + "…"));
    try {
      renderPayload(box, await post(panel.dataset.revealUrl, { part }));
    } catch (e) {
      box.replaceChildren(node("p", "notice notice-error", e.message));
    }
  }
  async function toggleReveal(toggle) {
    const panel = document.getElementById("panel");
    const part = toggle.dataset.reveal;
    const box = panel.querySelector('.payload[data-part="' + part + '"]');
    if (toggle.getAttribute("aria-pressed") === "true") {
      toggle.setAttribute("aria-pressed", "false");
      toggle.textContent = part === "inputs" ? "Show inputs" : "Show outputs";
      box.replaceChildren();
      box.hidden = true;
      updateWarning(panel);
      return;
    }
    toggle.setAttribute("aria-pressed", "true");
    toggle.textContent = part === "inputs" ? "Hide inputs" : "Hide outputs";
    updateWarning(panel);
    await reveal(panel, part);
  }
  function refreshRevealed(panel) {
    panel.querySelectorAll('button.toggle[aria-pressed="true"]').forEach((t) => reveal(panel, t.dataset.reveal));
  }
  function hideAllPayloads() {
    document.querySelectorAll('button.toggle[aria-pressed="true"]').forEach((t) => {
      t.setAttribute("aria-pressed", "false");
      t.textContent = t.dataset.reveal === "inputs" ? "Show inputs" : "Show outputs";
    });
    document.querySelectorAll(".payload").forEach((b) => { b.replaceChildren(); b.hidden = true; });
    const warning = document.getElementById("reveal-warning");
    if (warning) warning.hidden = true;
  }

  // A page restored from the back/forward cache opens with payloads hidden too.
  window.addEventListener("pageshow", (event) => { if (event.persisted) hideAllPayloads(); });

  document.addEventListener("DOMContentLoaded", () => {
    refreshTimes();
    setInterval(refreshTimes, 15000);
    const section = document.querySelector("section.list[data-live-url]");
    if (section) startList(section);
    const panel = document.getElementById("panel");
    if (panel) startPanel(panel);
  });
})();
