// trainprof's chart layer, shared by the HTML report and the live dashboard (serve): draws
// chart specs -- {"kind": "band" | "hist" | "heatmap" | "stack", ...} with data computed in C++
// -- with dygraphs. Text from traces is escaped before it reaches any API that writes HTML (dygraphs'
// legend uses innerHTML). Exposes window.tpCharts = {draw, fmt, esc}.
(function () {
  "use strict";

  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  function css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }
  function fmt(v, unit) {
    if (v === null || v === undefined || isNaN(v)) return "n/a";
    if (unit === "ratio") return (v * 100).toFixed(1) + " %";
    if (unit === "bytes" || unit === "bytes_per_second") {
      var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0, x = v;
      while (Math.abs(x) >= 1024 && i < 4) { x /= 1024; i++; }
      return x.toFixed(i ? 1 : 0) + " " + u[i] + (unit === "bytes" ? "" : "/s");
    }
    if (unit === "ms") return v >= 100 ? v.toFixed(0) + " ms" : v.toFixed(2) + " ms";
    if (unit === "watts") return v.toFixed(0) + " W";
    if (unit === "usd") return "$" + v.toFixed(2);
    if (unit === "cores") return v.toFixed(2) + " cores";
    return String(Math.round(v * 1000) / 1000);
  }
  // An axis tick: as many decimals as the tick spacing needs (so that "0.2 B/s" and "0.4 B/s"
  // are not both "0 B/s"), one scale for the whole axis (the range's, not each tick's).
  function fmtTick(v, unit, lo, hi) {
    var step = (hi - lo) / 10;  // dygraphs puts up to ~8 ticks on a 220 px axis
    if (!(step > 0) || !isFinite(step)) return fmt(v, unit);
    function dec(s) { return Math.max(0, Math.min(4, Math.ceil(-Math.log10(s) - 1e-9))); }
    if (unit === "ratio") return (v * 100).toFixed(dec(step * 100)) + " %";
    if (unit === "bytes" || unit === "bytes_per_second") {
      var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0, big = Math.max(Math.abs(lo), Math.abs(hi));
      while (big >= 1024 && i < 4) { big /= 1024; i++; }
      var k = Math.pow(1024, i);
      return (v / k).toFixed(dec(step / k)) + " " + u[i] + (unit === "bytes" ? "" : "/s");
    }
    var suffix = { ms: " ms", watts: " W", cores: " cores" }[unit] || "";
    if (unit === "usd") return "$" + v.toFixed(Math.max(2, dec(step)));
    return v.toFixed(dec(step)) + suffix;
  }
  function yTick(unit) {
    return function (v, gran, opts, g) {
      var r = g && g.yAxisRange ? g.yAxisRange() : null;
      return r ? fmtTick(v, unit, r[0], r[1]) : fmt(v, unit);
    };
  }
  // A legend that is always there for charts of several series (the hover legend shows values).
  function staticLegend(el, labels) {
    if (labels.length < 2) return;
    var box = document.createElement("div");
    box.className = "tp-legend";
    labels.forEach(function (label, k) {
      var item = document.createElement("span");
      var sw = document.createElement("i");
      sw.style.background = palette[k % palette.length];
      item.appendChild(sw);
      item.appendChild(document.createTextNode(label));
      box.appendChild(item);
    });
    el.parentNode.insertBefore(box, el.nextSibling);
  }
  var palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                 "#7f7f7f", "#bcbd22", "#17becf"];

  function common(unit) {
    return {
      labelsUTC: true,
      legend: "follow",
      gridLineColor: css("--grid") || "#ddd",
      axisLineColor: css("--muted") || "#888",
      colors: palette,
      animatedZooms: false,
      axes: {
        y: {
          valueFormatter: function (v) { return fmt(v, unit); },
          axisLabelFormatter: yTick(unit),
          axisLabelWidth: 72
        }
      }
    };
  }

  // Min/mean/max bands of several series, merged on their bucket times.
  function drawBand(el, spec) {
    var rows = new Map(), n = spec.series.length, hasMarkers = spec.markers && spec.markers.length;
    var width = n + (hasMarkers ? 1 : 0);
    function row(x) {
      var r = rows.get(x);
      if (!r) { r = new Array(width).fill(null); rows.set(x, r); }
      return r;
    }
    spec.series.forEach(function (s, k) {
      for (var i = 0; i < s.x.length; i++) row(s.x[i])[k] = [s.min[i], s.mean[i], s.max[i]];
    });
    if (hasMarkers) spec.markers.forEach(function (m) { row(m.x)[n] = [m.y, m.y, m.y]; });
    var xs = Array.from(rows.keys()).sort(function (a, b) { return a - b; });
    var data = xs.map(function (x) { return [new Date(x * 1000)].concat(rows.get(x)); });
    if (!data.length) { el.textContent = "n/a: no samples"; return; }
    var labels = ["time"].concat(spec.series.map(function (s) { return esc(s.label); }));
    var opts = common(spec.unit);
    opts.customBars = true;
    opts.connectSeparatedPoints = true;
    opts.labels = labels;
    if (hasMarkers) {  // spec.markerLabel names them (default "outlier")
      var ml = esc(spec.markerLabel || "outlier");
      labels.push(ml);
      opts.series = {};
      opts.series[ml] = { strokeWidth: 0, drawPoints: true, pointSize: 4, color: "#d62728",
                          connectSeparatedPoints: false };
    }
    var threshold = spec.threshold, hl = spec.highlight;
    if (threshold !== undefined && threshold !== null || hl) {
      opts.underlayCallback = function (ctx, area, g) {
        if (hl) {
          var l = g.toDomXCoord(hl[0] * 1000), r = g.toDomXCoord(hl[1] * 1000);
          ctx.fillStyle = "rgba(214,39,40,0.15)";
          ctx.fillRect(l, area.y, Math.max(2, r - l), area.h);
        }
        if (threshold !== undefined && threshold !== null) {
          var y = g.toDomYCoord(threshold);
          ctx.strokeStyle = "rgba(214,39,40,0.7)";
          ctx.setLineDash([4, 4]);
          ctx.beginPath(); ctx.moveTo(area.x, y); ctx.lineTo(area.x + area.w, y); ctx.stroke();
          ctx.setLineDash([]);
        }
      };
    }
    new Dygraph(el, data, opts);
    staticLegend(el, spec.series.map(function (s) { return String(s.label); }));
  }

  function drawHist(el, spec) {
    if (!spec.counts.length) { el.textContent = "n/a: no values"; return; }
    var data = spec.counts.map(function (c, i) { return [spec.edges[i], c]; });
    data.push([spec.edges[spec.edges.length - 1], spec.counts[spec.counts.length - 1]]);
    var opts = common("");
    opts.labels = ["value", "count"];
    opts.stepPlot = true;
    opts.fillGraph = true;
    opts.axes = {
      x: { valueFormatter: function (v) { return fmt(v, spec.unit); },
           axisLabelFormatter: function (v) { return fmt(v, spec.unit); } },
      y: { axisLabelWidth: 50 }
    };
    new Dygraph(el, data, opts);
  }

  // Colour of a utilisation 0..1: from the background's blue through green to yellow.
  function heatColor(v) {
    var stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
    var t = Math.max(0, Math.min(1, v)) * (stops.length - 1), i = Math.min(stops.length - 2, Math.floor(t));
    var f = t - i, a = stops[i], b = stops[i + 1];
    return "rgb(" + [0, 1, 2].map(function (k) { return Math.round(a[k] + (b[k] - a[k]) * f); }).join(",") + ")";
  }

  function drawHeatmap(el, spec) {
    var rows = spec.rows.length, cols = spec.cells.length ? spec.cells[0].length : 0;
    var rowH = rows > 40 ? 6 : Math.max(12, Math.min(28, Math.floor(168 / Math.max(1, rows)))), labelW = 56, axisH = 18;
    var canvas = document.createElement("canvas");
    var cssW = el.clientWidth || 900, cssH = rows * rowH + axisH;
    var dpr = window.devicePixelRatio || 1;
    canvas.width = cssW * dpr; canvas.height = cssH * dpr;
    canvas.style.width = cssW + "px"; canvas.style.height = cssH + "px";
    el.style.height = "auto";
    el.appendChild(canvas);
    var tip = document.createElement("div");
    tip.className = "heat-tip";
    el.appendChild(tip);
    var ctx = canvas.getContext("2d");
    ctx.scale(dpr, dpr);
    var cw = (cssW - labelW) / Math.max(1, cols);
    ctx.font = "10px sans-serif";
    ctx.fillStyle = css("--fg") || "#222";
    for (var r = 0; r < rows; r++) {
      if (rowH >= 10 || r % 4 === 0) ctx.fillText(spec.rows[r], 2, r * rowH + Math.min(rowH - 2, rowH / 2 + 4));
      for (var c = 0; c < cols; c++) {
        var v = spec.cells[r][c];
        ctx.fillStyle = v === null ? (css("--missing") || "#ccc") : heatColor(v);
        ctx.fillRect(labelW + c * cw, r * rowH, Math.ceil(cw), rowH - 1);
      }
      ctx.fillStyle = css("--fg") || "#222";
    }
    var t0 = spec.start_s, t1 = spec.start_s + spec.bucket_s * cols;
    ctx.fillText(new Date(t0 * 1000).toISOString().slice(11, 19), labelW, rows * rowH + 13);
    var end = new Date(t1 * 1000).toISOString().slice(11, 19) + " UTC";
    ctx.fillText(end, cssW - ctx.measureText(end).width - 2, rows * rowH + 13);
    canvas.addEventListener("mousemove", function (e) {
      var b = canvas.getBoundingClientRect(), x = e.clientX - b.left, y = e.clientY - b.top;
      var c = Math.floor((x - labelW) / cw), r = Math.floor(y / rowH);
      if (c < 0 || c >= cols || r < 0 || r >= rows) { tip.style.display = "none"; return; }
      var t = new Date((spec.start_s + c * spec.bucket_s) * 1000).toISOString().slice(0, 19);
      tip.textContent = spec.rows[r] + " · " + t + " UTC · " + fmt(spec.cells[r][c], "ratio");
      tip.style.display = "block";
      tip.style.left = Math.min(x + 12, cssW - 220) + "px";
      tip.style.top = (y + 12) + "px";
    });
    canvas.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  }

  // Stacked steps, one series per label, on shared times (spec.x: seconds; spec.series: [{label,
  // y}]): the fleet page's spend per day by instance type.
  function drawStack(el, spec) {
    if (!spec.x.length) { el.textContent = "n/a: no values"; return; }
    var data = spec.x.map(function (x, i) {
      return [new Date(x * 1000)].concat(spec.series.map(function (s) { return s.y[i]; }));
    });
    var opts = common(spec.unit);
    opts.labels = ["time"].concat(spec.series.map(function (s) { return esc(s.label); }));
    opts.stackedGraph = true;
    opts.stepPlot = true;
    opts.fillGraph = true;
    opts.includeZero = true;
    new Dygraph(el, data, opts);
  }

  var kinds = { band: drawBand, hist: drawHist, heatmap: drawHeatmap, stack: drawStack };

  // Draws `spec` into `el` (replacing what was there); a chart that cannot be drawn says so.
  function draw(el, spec) {
    el.textContent = "";
    try {
      kinds[spec.kind](el, spec);
    } catch (err) {
      el.textContent = "chart could not be drawn: " + err;
      console.error(err);
    }
  }

  window.tpCharts = { draw: draw, fmt: fmt, fmtTick: fmtTick, esc: esc };
})();
