// scanfleet console: the theme toggle, copy buttons, select-all, and the
// live scan page (server-sent events). Everything written into the page
// goes through textContent: scan text is never parsed as markup.
(function () {
  "use strict";
  var root = document.documentElement;
  var saved = null;
  try { saved = localStorage.getItem("scanfleet-theme"); } catch (e) { saved = null; }
  if (saved === "dark" || saved === "light") { root.setAttribute("data-theme", saved); }

  function currentTheme() {
    var t = root.getAttribute("data-theme");
    if (t) { return t; }
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }

  function setupTheme() {
    var button = document.getElementById("theme-toggle");
    if (!button) { return; }
    var show = function () {
      var dark = currentTheme() === "dark";
      button.setAttribute("aria-pressed", dark ? "true" : "false");
    };
    show();
    button.addEventListener("click", function () {
      var next = currentTheme() === "dark" ? "light" : "dark";
      root.setAttribute("data-theme", next);
      try { localStorage.setItem("scanfleet-theme", next); } catch (e) { /* private mode */ }
      show();
    });
  }

  function setupCopy() {
    document.querySelectorAll("button[data-copy]").forEach(function (b) {
      b.addEventListener("click", function () {
        var source = document.getElementById(b.getAttribute("data-copy"));
        if (!source || !navigator.clipboard) { return; }
        navigator.clipboard.writeText(source.textContent).then(function () {
          var label = b.textContent;
          b.textContent = "Copied";
          setTimeout(function () { b.textContent = label; }, 1500);
        });
      });
    });
  }

  function setupSelectAll() {
    document.addEventListener("change", function (ev) {
      var t = ev.target;
      if (!t.classList || !t.classList.contains("select-all")) { return; }
      var form = t.closest("form");
      if (!form) { return; }
      form.querySelectorAll("input[type=checkbox][name=finding]").forEach(function (c) { c.checked = t.checked; });
    });
  }

  function cell(text, className) {
    var td = document.createElement("td");
    if (className) {
      var span = document.createElement("span");
      span.className = className;
      span.textContent = text;
      td.appendChild(span);
    } else {
      td.textContent = text;
    }
    return td;
  }

  function setupLive() {
    var live = document.getElementById("live");
    if (!live || live.getAttribute("data-finished") === "true" || !window.EventSource) { return; }
    var scan = live.getAttribute("data-scan");
    var target = live.getAttribute("data-target");
    var bar = document.getElementById("scan-bar");
    var progress = document.getElementById("scan-progress");
    var percent = document.getElementById("scan-percent");
    var status = document.getElementById("scan-status");
    var stage = document.getElementById("scan-stage");
    var count = document.getElementById("scan-count");
    var note = document.getElementById("live-note");
    var rows = document.getElementById("live-findings");
    var none = document.getElementById("no-findings");
    var seen = {};
    rows.querySelectorAll("tr[data-fingerprint]").forEach(function (r) { seen[r.getAttribute("data-fingerprint")] = true; });
    var shown = 0;
    var source = new EventSource("/scans/" + scan + "/events");
    source.onopen = function () { note.textContent = ""; };
    source.onerror = function () {
      if (source.readyState === EventSource.CLOSED) { return; }
      note.textContent = "Connection lost; reconnecting…";
    };
    source.onmessage = function (ev) {
      var m;
      try { m = JSON.parse(ev.data); } catch (e) { return; }
      var p = Math.max(shown, m.progress || 0);
      shown = p;
      bar.value = p;
      progress.setAttribute("aria-valuenow", String(p));
      percent.textContent = p + "%";
      status.textContent = m.status;
      status.className = "status st-" + m.status;
      if (m.stage) { stage.textContent = m.stage; }
      count.textContent = String(m.findings_count);
      if (m.type === "finding" && m.finding && !seen[m.finding.fingerprint]) {
        seen[m.finding.fingerprint] = true;
        var f = m.finding;
        var tr = document.createElement("tr");
        tr.setAttribute("data-fingerprint", f.fingerprint);
        tr.appendChild(cell(f.severity, "sev sev-" + f.severity));
        var name = document.createElement("td");
        // The finding's page exists once it is recorded; until then its
        // row links to the target's list, filtered to its URL.
        var link = document.createElement("a");
        link.href = "/targets/" + target + "?q=" + encodeURIComponent(f.matched_at);
        link.textContent = f.name;
        name.appendChild(link);
        name.appendChild(document.createElement("br"));
        var code = document.createElement("code");
        code.className = "small";
        code.textContent = f.matched_at;
        name.appendChild(code);
        tr.appendChild(name);
        tr.appendChild(cell(f.host));
        tr.appendChild(cell(f.change || "", "change ch-" + (f.change || "")));
        rows.appendChild(tr);
        if (none) { none.hidden = true; }
      }
      if (m.status === "completed" || m.status === "failed" || m.status === "stopped") {
        source.close();
        note.textContent = "The scan has " + m.status + ".";
        var stop = document.getElementById("stop-form");
        if (stop) { stop.hidden = true; }
        // The changes, reports and finding links are rendered by the
        // server once the scan is recorded as ended, which can be a moment
        // after this event: fetch the page until it is, then take those
        // parts.
        var tries = 0;
        var refresh = function () {
          tries += 1;
          fetch("/scans/" + scan, { credentials: "same-origin" }).then(function (r) { return r.text(); }).then(function (html) {
            var doc = new DOMParser().parseFromString(html, "text/html");
            var fresh = doc.getElementById("scan-end");
            if (fresh && fresh.hidden === false) {
              var end = document.getElementById("scan-end");
              if (end) { end.replaceWith(document.importNode(fresh, true)); }
              var rowsNow = doc.getElementById("live-findings");
              if (rowsNow) { rows.replaceWith(document.importNode(rowsNow, true)); }
            } else if (tries < 20) {
              setTimeout(refresh, 500);
            }
          });
        };
        refresh();
      }
    };
  }

  document.addEventListener("DOMContentLoaded", function () {
    setupTheme();
    setupCopy();
    setupSelectAll();
    setupLive();
  });
}());
