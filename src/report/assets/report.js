// trainprof report: draws the charts whose data the report embeds (every number is computed by
// trainprof in C++; the chart layer, charts.js, shared with the dashboard, only lays them out).
(function () {
  "use strict";
  var specs = JSON.parse(document.getElementById("tp-charts").textContent);
  // Charts inside a closed <details> ("More metrics") are drawn when it first opens: a hidden
  // element has no width to lay a chart out in (and a long page draws faster).
  function drawIn(root) {
    root.querySelectorAll("div.chart[data-chart]").forEach(function (el) {
      if (el.hasAttribute("data-drawn")) return;
      var closed = el.closest("details:not([open])");
      if (closed) return;
      el.setAttribute("data-drawn", "");
      window.tpCharts.draw(el, specs[Number(el.getAttribute("data-chart"))]);
    });
  }
  drawIn(document);
  document.querySelectorAll("details").forEach(function (d) {
    d.addEventListener("toggle", function () { if (d.open) drawIn(d); });
  });
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details.more").forEach(function (d) { d.open = true; });
    drawIn(document);
  });
})();
