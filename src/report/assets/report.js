// trainprof report: draws the charts whose data the report embeds (every number is computed by
// trainprof in C++; the chart layer, charts.js, shared with the dashboard, only lays them out).
(function () {
  "use strict";
  var specs = JSON.parse(document.getElementById("tp-charts").textContent);
  document.querySelectorAll("div.chart[data-chart]").forEach(function (el) {
    window.tpCharts.draw(el, specs[Number(el.getAttribute("data-chart"))]);
  });
})();
