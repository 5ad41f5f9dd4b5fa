// freecode ui: the one script of the pages (no build step). It never writes HTML from data:
// text goes through textContent, and a live waterfall is re-parsed from the server's own
// escaped fragment. Everything works without it except the details panels and live updates.
"use strict";

(function () {
  // A waterfall row opens and closes its details panel (click, Enter or Space).
  function toggle(row) {
    var panel = row.querySelector(".wf-details");
    if (!panel) return;
    var open = panel.hasAttribute("hidden");
    if (open) panel.removeAttribute("hidden");
    else panel.setAttribute("hidden", "");
    row.classList.toggle("open", open);
  }

  document.addEventListener("click", function (ev) {
    var t = ev.target;
    if (!(t instanceof Element) || t.closest("a")) return;
    var row = t.closest(".wf-row");
    if (row) toggle(row);
  });
  document.addEventListener("keydown", function (ev) {
    if (ev.key !== "Enter" && ev.key !== " ") return;
    var t = ev.target;
    if (t instanceof Element && t.classList.contains("wf-row")) {
      ev.preventDefault();
      toggle(t);
    }
  });

  function fmt(ms) {
    if (ms < 1000) return Math.round(ms) + "ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + "s";
    return Math.floor(ms / 60000) + "m" + Math.round((ms % 60000) / 1000) + "s";
  }

  // Live updates: the server sends the trace (`trace --json`) each time the log grows.
  function live() {
    var chart = document.getElementById("chart");
    if (!chart || !window.EventSource || location.protocol.indexOf("http") !== 0) return;
    // A finished trace (nothing open, no writer) has nothing to wait for.
    if (chart.getAttribute("data-live") !== "true") return;
    var id = chart.getAttribute("data-session");
    var turn = chart.getAttribute("data-turn");
    var es = new EventSource("/api/events/" + encodeURIComponent(id));
    es.onopen = function () { chart.setAttribute("data-stream", "open"); };
    es.addEventListener("trace", function (ev) {
      var t;
      try { t = JSON.parse(ev.data); } catch (e) { return; }
      var summary = document.getElementById("summary");
      if (summary) {
        var time = t.time || {};
        summary.textContent = fmt(t.wallMs) + " wall · model " + fmt(time.modelMs || 0) +
          " · tools " + fmt(time.toolsMs || 0) + " · idle " + fmt(time.idleMs || 0) +
          " · other " + fmt(time.otherMs || 0) + " · " + t.modelSpans.length + " model calls, " +
          t.toolSpans.length + " tools, " + t.deniedSpans.length + " denied" +
          (t.hung ? " · hung request" : "") + (t.inFlight ? " · in flight" : "") + " · live";
      }
      var url = "/trace/" + encodeURIComponent(id) + "?fragment=1" +
        (turn ? "&turn=" + encodeURIComponent(turn) : "");
      fetch(url, { credentials: "same-origin" }).then(function (r) {
        return r.ok ? r.text() : null;
      }).then(function (text) {
        if (!text) return;
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fresh = doc.querySelector(".waterfall");
        if (fresh) chart.replaceChildren(document.importNode(fresh, true));
      }).catch(function () {});
    });
  }

  // A search or the stats may wait for the index to catch up with a big home: while the next
  // page loads, the server says how far it has got (`/api/progress`).
  function progress(after) {
    if (!window.EventSource || location.protocol.indexOf("http") !== 0) return;
    var note = document.getElementById("indexing");
    if (!note) {
      note = document.createElement("p");
      note.id = "indexing";
      note.className = "note";
      note.setAttribute("role", "status");
      after.insertAdjacentElement("afterend", note);
    }
    var es = new EventSource("/api/progress");
    es.addEventListener("progress", function (ev) {
      var p;
      try { p = JSON.parse(ev.data); } catch (e) { return; }
      note.textContent = p.indexing
        ? "indexing " + p.done.toLocaleString("en") + " of " + p.total.toLocaleString("en") + " sessions…"
        : "";
    });
    window.addEventListener("pagehide", function () { es.close(); });
  }

  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (form && form.getAttribute && form.getAttribute("action") === "/search") progress(form);
  });
  document.addEventListener("click", function (ev) {
    var a = ev.target && ev.target.closest ? ev.target.closest("a[href='/stats']") : null;
    if (a) progress(a);
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", live);
  else live();
})();
