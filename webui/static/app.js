// Gantry console: live health (SSE), the connection-lost banner and the
// throughput chart. Everything else is plain forms and htmx.
(function () {
  "use strict";
  function css(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }

  function health(root) {
    var banner = document.getElementById("conn-banner");
    var stamp = document.getElementById("live-stamp");
    var pause = document.getElementById("live-pause");
    var chartEl = document.getElementById("rate-chart");
    var rateText = document.getElementById("rate-text");
    var paused = false, last = 0, es = null, plot = null;
    var xs = [], ins = [], outs = [];

    function makePlot() {
      if (!window.uPlot || !chartEl) return;
      if (plot) plot.destroy();
      var width = Math.max(chartEl.clientWidth - 16, 200);
      var axis = {stroke: css("--fg"), grid: {stroke: css("--grid")}, ticks: {stroke: css("--grid")}};
      plot = new uPlot({width: width, height: 220, cursor: {show: false},
        series: [{}, {label: "in msg/s", stroke: css("--chart-in"), width: 2},
                 {label: "out msg/s", stroke: css("--chart-out"), width: 2, dash: [6, 4]}],
        axes: [axis, axis]}, [xs, ins, outs], chartEl);
    }
    function tick() {
      if (!stamp || !last) return;
      var s = Math.round((Date.now() - last) / 1000);
      stamp.textContent = paused ? "Live updates paused" : document.body.classList.contains("offline") ? "Last update " + s + " s ago" : "Updated " + (s <= 1 ? "just now" : s + " s ago");
    }
    function lost() {
      if (banner) {
        banner.hidden = false;
        banner.textContent = "Connection to the node lost, reconnecting… The values below are from " +
          (last ? new Date(last).toLocaleTimeString() : "before the page loaded") + ".";
      }
      document.body.classList.add("offline");
      // The node may answer but have ended the session: then the page
      // itself redirects, and a reload leads to the login.
      fetch(location.href, {redirect: "manual", credentials: "same-origin"}).then(function (r) {
        if (r.type === "opaqueredirect") location.reload();
      }).catch(function () {});
    }
    function connect() {
      es = new EventSource(root.dataset.events);
      es.onopen = function () { if (banner) banner.hidden = true; document.body.classList.remove("offline"); };
      es.onerror = function () { lost(); };
      es.addEventListener("tiles", function (e) {
        if (paused) return;
        var live = document.getElementById("health-live");
        if (live) live.innerHTML = e.data;
        last = Date.now(); tick();
      });
      es.addEventListener("history", function (e) {
        var pts = JSON.parse(e.data);
        xs = []; ins = []; outs = [];
        pts.forEach(function (p) { xs.push(p.t); ins.push(p.in); outs.push(p.out); });
        if (xs.length >= 2) { if (!plot) makePlot(); else plot.setData([xs, ins, outs]); }
      });
      es.addEventListener("rate", function (e) {
        var p = JSON.parse(e.data);
        if (xs.length && p.t <= xs[xs.length - 1]) return;
        xs.push(p.t); ins.push(p.in); outs.push(p.out);
        if (xs.length > 120) { xs.shift(); ins.shift(); outs.shift(); }
        if (rateText) rateText.textContent = "Now: " + p.in.toFixed(1) + " msg/s in, " + p.out.toFixed(1) + " msg/s out";
        if (paused) return;
        if (!plot) { if (xs.length >= 2) makePlot(); } else plot.setData([xs, ins, outs]);
      });
    }
    if (pause) {
      pause.hidden = false;
      pause.addEventListener("click", function () {
        paused = !paused;
        pause.setAttribute("aria-pressed", String(paused));
        pause.textContent = paused ? "Resume live updates" : "Pause live updates";
        if (!paused && plot) plot.setData([xs, ins, outs]);
        tick();
      });
    }
    setInterval(tick, 1000);
    window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", makePlot);
    window.addEventListener("resize", function () { if (plot) makePlot(); });
    connect();
  }

  // Forms that ask before they do something that cannot be undone.
  function confirms() {
    document.querySelectorAll("form[data-confirm]").forEach(function (f) {
      f.addEventListener("submit", function (e) { if (!window.confirm(f.dataset.confirm)) e.preventDefault(); });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var root = document.querySelector("[data-events]");
    if (root) health(root);
    confirms();
  });
})();
