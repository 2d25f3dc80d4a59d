// trainprof dashboard: a single page over the JSON API (/api/...), drawing with the report's
// chart layer (window.tpCharts, charts.js). Pages: #/ (runs), #/run/<id>[/<tab>],
// #/compare/<id>,<id>... Live: a run's page listens to /api/runs/<id>/stream (server-sent
// events) and refetches what it shows when the run gains data. Every text from a run goes
// through esc() or textContent.
(function () {
  "use strict";
  var C = window.tpCharts, esc = C.esc, fmt = C.fmt;
  var app = document.getElementById("app"), crumbs = document.getElementById("crumbs");
  var liveBadge = document.getElementById("live");
  var stream = null, refresh = null, pending = false;

  function api(path) {
    return fetch(path, { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) return r.json().then(function (j) { throw new Error(j.error || r.statusText); });
      return r.json();
    });
  }
  function h(tag, attrs, children) {
    var el = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") el.textContent = attrs[k];
      else if (k === "html") el.innerHTML = attrs[k];  // only for markup built from esc()'d text
      else if (k.slice(0, 2) === "on") el.addEventListener(k.slice(2), attrs[k]);
      else el.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) el.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return el;
  }
  function dur(ns) {
    if (ns === null || ns === undefined) return "n/a";
    var s = ns / 1e9;
    if (s < 120) return s.toFixed(1) + " s";
    if (s < 7200) return (s / 60).toFixed(1) + " min";
    return (s / 3600).toFixed(2) + " h";
  }
  function when(ns) { return ns ? new Date(ns / 1e6).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "n/a"; }
  function usd(v) { return v === null || v === undefined ? "n/a" : "$" + Number(v).toFixed(v < 1 ? 4 : 2); }
  function setCrumbs(parts) {
    crumbs.textContent = "";
    parts.forEach(function (p, i) {
      if (i) crumbs.appendChild(document.createTextNode(" / "));
      crumbs.appendChild(p.href ? h("a", { href: p.href, text: p.text }) : h("span", { text: p.text }));
    });
  }
  function stopLive() {
    if (stream) { stream.close(); stream = null; }
    if (later) { clearTimeout(later); later = null; }
    liveBadge.hidden = true;
    refresh = null;
  }
  // Listens to the run's stream; `onUpdate` runs (one at a time, at most once a second: new
  // data still shows within 2 s) each time it gains data; an update that arrives meanwhile is
  // not lost, it runs once the second is over.
  var lastRefresh = 0, later = null;
  function live(id, onUpdate) {
    stopLive();
    refresh = onUpdate;
    stream = new EventSource("/api/runs/" + id + "/stream");
    function run(d) {
      if (!refresh) return;
      var wait = lastRefresh + 1000 - Date.now();
      if (pending || wait > 0) {
        if (!later) later = setTimeout(function () { later = null; run(d); }, Math.max(wait, 100));
        return;
      }
      pending = true;
      lastRefresh = Date.now();
      Promise.resolve(refresh(d)).catch(function (err) { console.error(err); })
        .then(function () { pending = false; });
    }
    stream.addEventListener("update", function (e) {
      var d = JSON.parse(e.data);
      liveBadge.hidden = !!d.finished;
      run(d);
    });
  }

  // ---- Runs -------------------------------------------------------------------------------
  var sortKey = "start_ns", sortDesc = true, filterText = "", selected = {};
  function runsPage() {
    stopLive();
    setCrumbs([{ text: "Runs" }]);
    return api("/api/runs").then(function (data) {
      var runs = data.runs;
      app.textContent = "";
      var filter = h("input", { type: "search", placeholder: "filter by name, status, tag…", value: filterText });
      var compare = h("button", { text: "Compare selected", disabled: "" });
      var table = h("table", { id: "runs" });
      app.appendChild(h("p", {}, [filter, " ", compare, h("span", { class: "muted", text: "  " + runs.length + " runs  " }),
                                  h("a", { href: "#/fleet", id: "fleet-link", text: "Fleet spend" })]));
      app.appendChild(table);
      var cols = [["name", "Name"], ["status", "Status"], ["start_ns", "Start"], ["duration_ns", "Duration", "num"],
                  ["nodes", "Nodes", "num"], ["gpus", "GPUs", "num"], ["findings", "Findings", "num"],
                  ["instance_type", "Instance"]];
      function updateCompare() {
        var ids = Object.keys(selected).filter(function (k) { return selected[k]; });
        if (ids.length >= 2) compare.removeAttribute("disabled"); else compare.setAttribute("disabled", "");
        compare.onclick = function () { location.hash = "#/compare/" + ids.join(","); };
      }
      function render() {
        var rows = runs.filter(function (r) {
          var t = (r.name + " " + r.status + " " + JSON.stringify(r.tags || {}) + " " + (r.path || "")).toLowerCase();
          return t.indexOf(filterText.toLowerCase()) >= 0;
        }).sort(function (a, b) {
          var x = a[sortKey], y = b[sortKey];
          var c = x === y ? 0 : (x === undefined || x === null) ? -1 : (y === undefined || y === null) ? 1 : x < y ? -1 : 1;
          return sortDesc ? -c : c;
        });
        table.textContent = "";
        table.appendChild(h("tr", {}, [h("th", { text: "" })].concat(cols.map(function (c) {
          return h("th", { class: c[2] || "", text: c[1] + (sortKey === c[0] ? (sortDesc ? " ▾" : " ▴") : ""),
                           onclick: function () { if (sortKey === c[0]) sortDesc = !sortDesc; else { sortKey = c[0]; sortDesc = true; } render(); } });
        }))));
        rows.forEach(function (r) {
          var box = h("input", { type: "checkbox" });
          box.checked = !!selected[r.id];
          box.onchange = function () { selected[r.id] = box.checked; updateCompare(); };
          var status = r.status + (r.status === "failed" ? " (exit " + r.exit_status + ")" : "");
          table.appendChild(h("tr", { "data-id": r.id }, [
            h("td", {}, [box]),
            h("td", {}, [h("a", { href: "#/run/" + r.id, text: r.name || r.path || r.id })]),
            h("td", { class: "status-" + r.status, text: status }),
            h("td", { text: when(r.start_ns) }),
            h("td", { class: "num", text: dur(r.duration_ns) }),
            h("td", { class: "num", text: String(r.nodes) }),
            h("td", { class: "num", text: String(r.gpus) }),
            h("td", { class: "num", text: String(r.findings) }),
            h("td", { text: r.instance_type || "" })
          ]));
        });
      }
      filter.oninput = function () { filterText = filter.value; render(); };
      render();
      updateCompare();
    });
  }

  // ---- One run ----------------------------------------------------------------------------
  var NODE_CHARTS = [
    ["cpu_utilization_ratio", "CPU utilisation", ["total"]],
    ["gpu_utilization_ratio", "GPU utilisation"],
    ["gpu_memory_used_ratio", "GPU memory used"],
    ["memory_used_bytes", "Host memory used"],
    ["network_receive_bytes_per_second", "Network received"],
    ["network_transmit_bytes_per_second", "Network sent"],
    ["disk_read_bytes_per_second", "Disk read"],
    ["disk_write_bytes_per_second", "Disk written"]
  ];

  function chartBox(title, id) {
    return [h("div", { class: "chart-title", text: title }), h("div", { class: "chart", id: id })];
  }
  // A metric's chart from /metric, one line per (node, device); a series that is flat zero
  // collapses to one line of text.
  function metricChart(id, metric, title, devices, into) {
    var el = document.getElementById(into);
    var width = Math.max(200, Math.min(2000, Math.round((el && el.clientWidth) || 900)));
    var q = "/api/runs/" + id + "/metric?metric=" + encodeURIComponent(metric) + "&points=" + width;
    (devices || []).forEach(function (d) { q += "&device=" + encodeURIComponent(d); });
    return api(q).then(function (m) {
      // Re-rendered meanwhile (a live refresh, another tab): that render draws. Drawing into the
      // detached element made dygraph read no computed style ("Main div contains padding").
      if (!el || !el.isConnected) return;
      if (!m.series.length) { el.className = "collapsed"; el.textContent = "no " + title.toLowerCase() + " recorded"; return; }
      var flat = m.series.every(function (s) { return s.max.every(function (v) { return v === 0; }); });
      if (flat) { el.className = "collapsed"; el.textContent = title + ": zero throughout"; return; }
      el.className = "chart";
      el.setAttribute("data-samples", String(m.series.reduce(function (n, s) { return n + s.samples; }, 0)));
      C.draw(el, { kind: "band", unit: m.unit === "bytes/s" ? "bytes_per_second" : m.unit, series: m.series.map(function (s) {
        return { label: (m.series.length > 1 ? s.node + " " : "") + (s.device || metric),
                 x: s.ts_ns.map(function (t) { return t / 1e9; }), min: s.min, mean: s.mean, max: s.max };
      }) });
    });
  }

  function overviewTab(id, o) {
    var s = o.summary, run = o.run, out = [];
    out.push(h("div", { class: "verdict", text: s.verdict || "no verdict yet" }));
    var cards = h("div", { class: "cards" });
    [["Status", run.status + (run.exit_status !== null && run.exit_status !== undefined ? " (exit " + run.exit_status + ")" : "")],
     ["Duration", dur(run.duration_ns)], ["Nodes / GPUs", run.nodes + " / " + run.gpus],
     ["Findings", String(run.findings)],
     ["Cost", o.cost && o.cost.available ? usd(o.cost.total_usd) : "n/a"],
     ["Cost per step", o.cost && o.cost.available ? usd(o.cost.cost_per_step_usd) : "n/a"],
     ["GPU idle share", s.gpus ? fmt(s.gpu_idle_share, "ratio") : "no GPU"]].forEach(function (c) {
      cards.appendChild(h("div", { class: "card" }, [h("div", { class: "k", text: c[0] }), h("div", { class: "v", text: c[1] })]));
    });
    out.push(cards);
    if (o.cost && !o.cost.available && o.cost.note) out.push(h("p", { class: "muted", text: "Cost: " + o.cost.note }));
    out.push(h("h3", { text: "What to change" }));
    (s.top_changes || []).forEach(function (c) {
      out.push(h("div", { class: "finding" }, [h("b", { text: c.title }), h("div", { text: c.detail }), h("div", { class: "muted", text: c.source })]));
    });
    out.push(h("h3", { text: "Findings" }));
    var any = false;
    ((o.rules && o.rules.rules) || []).forEach(function (r) {
      (r.findings || []).forEach(function (f) {
        any = true;
        out.push(h("div", { class: "finding", "data-rule": r.name }, [
          h("span", { class: "sev-" + (f.severity || "").toLowerCase(), text: r.name + " · " + (f.severity || "") }),
          h("span", { class: "muted", text: "  " + (f.node || "") + " " + (f.device || "") + " · " + when(f.start_ns) +
                      (f.cost_usd !== undefined && f.cost_usd !== null ? " · ≈ " + usd(f.cost_usd) : "") }),
          h("div", { text: f.message }), h("div", { class: "muted", text: f.recommendation || "" }),
          h("details", {}, [h("summary", { text: "evidence" }), h("pre", { text: JSON.stringify(f.evidence, null, 1) })])
        ]));
      });
    });
    if (!any) out.push(h("p", { class: "collapsed", text: "no rule has fired" }));
    out.push(h("h3", { text: "Phases" }));
    var phases = o.phases || [];
    if (!phases.length) out.push(h("p", { class: "collapsed", text: "no phases recorded" }));
    else {
      var t = h("table");
      phases.forEach(function (p) { t.appendChild(h("tr", {}, [h("td", { text: p.name }), h("td", { class: "num", text: dur(p.duration_ns) })])); });
      out.push(t);
    }
    return out;
  }

  // The processes per node (/processes), loaded when the section is opened: the process
  // tree's totals, the tree itself (parent -> children, with each process's newest CPU, RSS,
  // threads and GPU memory, for the processes the recorder kept series for; the rest summed as
  // "other"), and the pids that wrote steps or data-loader batches.
  var processesOpen = false;  // kept open across the live re-renders
  // The tree's sort: each parent's children ordered by this column (kept across re-renders).
  var procSort = { key: "pid", desc: false };
  var PROC_COLS = [["name", "Process"], ["cpu_cores", "CPU", "cores"], ["rss_bytes", "RSS", "bytes"],
                   ["threads", "Threads"], ["gpu_memory_bytes", "GPU memory", "bytes"], ["cmdline", "Command"]];
  function processTree(n) {
    var procs = n.tree_processes || [];
    var wrap = h("div", { class: "proc-tree-wrap" });
    if (!procs.length) { wrap.appendChild(h("div", { class: "collapsed", text: "no per-process data (recorded before trainprof kept it, or imported)" })); return wrap; }
    var byPid = {}, kids = {}, roots = [];
    procs.forEach(function (q) { byPid[q.pid] = q; });
    procs.forEach(function (q) {
      if (q.ppid !== null && byPid[q.ppid] && q.ppid !== q.pid) (kids[q.ppid] = kids[q.ppid] || []).push(q);
      else roots.push(q);
    });
    function val(q) {
      var k = procSort.key;
      if (k === "name") return q.name + " " + q.pid;
      if (k === "cmdline") return (q.cmdline || []).join(" ");
      if (k === "pid") return q.pid;
      return q[k] === null || q[k] === undefined ? -Infinity : q[k];
    }
    function order(list) {
      return list.slice().sort(function (a, b) {
        var x = val(a), y = val(b), c = x < y ? -1 : x > y ? 1 : a.pid - b.pid;
        return procSort.desc ? -c : c;
      });
    }
    var t = h("table", { class: "proc-tree", "data-node": n.node });
    var head = h("tr");
    PROC_COLS.forEach(function (c) {
      var on = procSort.key === c[0];
      head.appendChild(h("th", { class: c[2] || c[0] === "threads" ? "num" : "", "data-key": c[0],
        text: c[1] + (on ? (procSort.desc ? " ▼" : " ▲") : ""),
        onclick: function () {
          procSort = { key: c[0], desc: on ? !procSort.desc : c[0] !== "name" && c[0] !== "cmdline" };
          wrap.parentNode.replaceChild(processTree(n), wrap);
        } }));
    });
    t.appendChild(head);
    var seen = {};
    function row(q, depth) {
      if (seen[q.pid]) return;  // a parent link that loops: shown once
      seen[q.pid] = true;
      var name = h("td", { class: "proc-name", style: "padding-left:" + (8 + 18 * depth) + "px" },
                   [(depth ? "└ " : "") + (q.name || "?") + " ", h("span", { class: "muted", text: "pid " + q.pid + (q.alive ? "" : " · exited") })]);
      t.appendChild(h("tr", { "data-pid": String(q.pid), "data-ppid": q.ppid === null ? "" : String(q.ppid), "data-depth": String(depth),
                              class: q.alive ? "" : "exited" }, [
        name,
        h("td", { class: "num", "data-key": "cpu_cores", text: q.cpu_cores === null ? "n/a" : fmt(q.cpu_cores, "cores") }),
        h("td", { class: "num", "data-key": "rss_bytes", text: q.rss_bytes === null ? "n/a" : fmt(q.rss_bytes, "bytes") }),
        h("td", { class: "num", "data-key": "threads", text: q.threads === null ? "n/a" : String(q.threads) }),
        h("td", { class: "num", "data-key": "gpu_memory_bytes", text: q.gpu_memory_bytes === null ? "n/a" : fmt(q.gpu_memory_bytes, "bytes") }),
        h("td", { class: "proc-cmd", text: (q.cmdline || []).join(" ") })]));
      order(kids[q.pid] || []).forEach(function (c) { row(c, depth + 1); });
    }
    order(roots).forEach(function (q) { row(q, 0); });
    var o = n.tree_other;
    if (o) {
      t.appendChild(h("tr", { class: "proc-other", "data-pid": "other" }, [
        h("td", { text: "other processes (past the first 64 the recorder follows one by one)" }),
        h("td", { class: "num", text: o.cpu_cores === null ? "n/a" : fmt(o.cpu_cores, "cores") }),
        h("td", { class: "num", text: o.rss_bytes === null ? "n/a" : fmt(o.rss_bytes, "bytes") }),
        h("td", { class: "num", text: o.threads === null ? "n/a" : String(o.threads) }), h("td", { text: "" }), h("td", { text: "" })]));
    }
    wrap.appendChild(t);
    return wrap;
  }
  function processesBox(id) {
    var box = h("details", { id: "processes" }, [h("summary", { text: "Processes" })]);
    var loaded = false;
    function load() {
      if (!box.isConnected) {
        // A live update re-rendered the page between the click and this toggle event (the
        // stream's first update comes right after the first render): open or close the box
        // that replaced this one, which then loads itself.
        var current = document.getElementById("processes");
        if (current && current !== box && current.open !== box.open) current.open = box.open;
        return;
      }
      processesOpen = box.open;
      if (!box.open || loaded) return;
      loaded = true;
      api("/api/runs/" + id + "/processes").then(function (p) {
        var any = p.nodes.some(function (n) { return n.tree || n.processes.length || (n.tree_processes || []).length; });
        if (!any) { box.appendChild(h("p", { class: "collapsed", text: "no process data" })); return; }
        p.nodes.forEach(function (n) {
          var t = n.tree || {}, m = n.tree_max || {};
          function part(k, label, unit) {
            if (t[k] === undefined) return "";
            return " · " + label + " " + (unit ? fmt(t[k], unit) : t[k]) + " (peak " + (unit ? fmt(m[k], unit) : m[k]) + ")";
          }
          var head = n.node + part("process_count", "processes") + part("process_cpu_utilization_ratio", "CPU", "cores") +
            part("process_resident_memory_bytes", "RSS", "bytes") + part("process_threads", "threads") +
            (n.tree ? ": the whole tree, newest sample" : "");
          var node = h("details", { class: "proc-node", "data-node": n.node, open: "" }, [h("summary", { text: head })]);
          node.appendChild(h("div", { class: "muted", text: "command: " + (p.command || []).join(" ") }));
          node.appendChild(processTree(n));
          if (!n.processes.length) node.appendChild(h("div", { class: "collapsed", text: "no instrumented process" }));
          var ul = h("ul");
          n.processes.forEach(function (q) {
            ul.appendChild(h("li", { "data-pid": String(q.pid), "data-role": q.role, text: "pid " + q.pid + " · " + q.role +
              (q.ranks.length ? " · rank " + q.ranks.join(",") : "") + " · " + (q.steps ? q.steps + " steps" : q.batches + " batches") +
              " · " + when(q.first_ns) + " to " + when(q.last_ns) }));
          });
          node.appendChild(ul);
          box.appendChild(node);
        });
      }).catch(function (err) { box.appendChild(h("p", { class: "status-failed", text: "Could not load: " + err.message })); });
    }
    box.addEventListener("toggle", load);
    if (processesOpen) { box.open = true; load(); }
    return box;
  }

  function nodesTab(id) {
    var out = [];
    NODE_CHARTS.forEach(function (c, i) { out = out.concat(chartBox(c[1], "m" + i)); });
    out.push(processesBox(id));
    setTimeout(function () { NODE_CHARTS.forEach(function (c, i) { metricChart(id, c[0], c[1], c[2], "m" + i); }); }, 0);
    return out;
  }

  function heatmapTab(id, o) {
    var out = [];
    ((o.system && o.system.nodes) || []).forEach(function (n, i) {
      out.push(h("div", { class: "chart-title", text: "Utilisation of " + n.node + " (cores and GPUs × time)" }));
      var el = h("div", { class: "chart", "data-kind": "heatmap", id: "hm" + i });
      out.push(el);
      setTimeout(function () {
        if (!el.isConnected) return;  // re-rendered meanwhile: that render draws
        var hm = n.heatmap;
        if (!hm || !hm.rows || !hm.rows.length) { el.className = "collapsed"; el.textContent = "no utilisation samples"; return; }
        C.draw(el, { kind: "heatmap", rows: hm.rows, cells: hm.cells, start_s: hm.start_ns / 1e9, bucket_s: hm.bucket_ns / 1e9 });
      }, 0);
    });
    return out;
  }

  function trainingTab(id) {
    var out = chartBox("Step time per rank (ms)", "steps");
    var shares = h("div", { class: "cards", id: "shares" });
    out.push(shares);
    setTimeout(function () {
      var el = out[1];
      if (!el.isConnected) return;  // re-rendered meanwhile: that render draws
      api("/api/runs/" + id + "/steps?points=" + Math.max(200, Math.min(2000, el.clientWidth || 900))).then(function (st) {
        if (!el.isConnected) return;
        if (!st.steps) { el.className = "collapsed"; el.textContent = "no training steps recorded"; return; }
        // compile / recompile events (torch.compile): a marker on the chart at the step that
        // compiled, at its duration, and one line each below the chart
        var marks = (st.compiles || []).map(function (c) { return { x: c.start_ns / 1e9, y: c.duration_ns / 1e6 }; });
        C.draw(el, { kind: "band", unit: "ms", markers: marks, markerLabel: "compile / recompile", series: st.series.map(function (s) {
          return { label: s.label, x: s.ts_ns.map(function (t) { return t / 1e9; }), min: s.min, mean: s.mean, max: s.max };
        }) });
        var list = h("div", { id: "compiles" });
        if (!(st.compiles || []).length) list.appendChild(h("p", { class: "collapsed", text: "no compile or recompile event recorded" }));
        else {
          list.appendChild(h("div", { class: "chart-title", text: "Compile events (" + st.compiles_total + ", marked on the chart)" }));
          var t = h("table");
          st.compiles.forEach(function (c) {
            t.appendChild(h("tr", { "data-name": c.name }, [h("td", { text: c.name }), h("td", { text: c.node }),
              h("td", { text: c.step === null ? "" : "step " + c.step }), h("td", { text: when(c.start_ns) }),
              h("td", { class: "num", text: (c.duration_ns / 1e6).toFixed(1) + " ms" }),
              h("td", { class: "num", text: c.new_graphs === null ? "" : c.new_graphs + " new graph" + (c.new_graphs === 1 ? "" : "s") })]));
          });
          list.appendChild(t);
        }
        el.parentNode.insertBefore(list, shares);
        Object.keys(st.shares).forEach(function (k) {
          shares.appendChild(h("div", { class: "card" }, [h("div", { class: "k", text: k.replace("_", " ") + " share" }),
                                                            h("div", { class: "v", text: fmt(st.shares[k], "ratio") })]));
        });
        shares.appendChild(h("div", { class: "card" }, [h("div", { class: "k", text: "training steps" }), h("div", { class: "v", text: String(st.steps) })]));
      });
    }, 0);
    return out;
  }

  function timelineTab(id, o) {
    var run = o.run, out = [];
    var end = run.latest_ns || run.end_ns || run.start_ns, start = Math.max(run.start_ns, end - 60e9);
    var from = h("input", { type: "number", value: String(Math.round((start - run.start_ns) / 1e9)), style: "width:90px" });
    var to = h("input", { type: "number", value: String(Math.round((end - run.start_ns) / 1e9)), style: "width:90px" });
    var table = h("table", { id: "events" });
    var dl = h("button", { text: "Open in Perfetto (download Chrome trace)" });
    var current = [];
    function load() {
      var a = run.start_ns + Number(from.value) * 1e9, b = run.start_ns + Number(to.value) * 1e9;
      return api("/api/runs/" + id + "/events?start=" + Math.round(a) + "&end=" + Math.round(b) + "&limit=5000").then(function (ev) {
        current = ev.events;
        table.textContent = "";
        table.appendChild(h("tr", {}, ["start", "duration", "category", "name", "rank", "step"].map(function (t) { return h("th", { text: t }); })));
        ev.events.slice(0, 500).forEach(function (e) {
          table.appendChild(h("tr", {}, [h("td", { text: when(e.start_ns) }), h("td", { class: "num", text: (e.duration_ns / 1e6).toFixed(3) + " ms" }),
                                        h("td", { text: e.category }), h("td", { text: e.name }),
                                        h("td", { text: e.rank === null ? "" : String(e.rank) }), h("td", { text: e.step === null ? "" : String(e.step) })]));
        });
        if (ev.truncated || ev.events.length > 500) table.appendChild(h("tr", {}, [h("td", { colspan: "6", class: "muted", text: ev.total + " events in range; showing the first 500 (the download has up to 5000)" })]));
      });
    }
    dl.onclick = function () {
      var trace = { traceEvents: current.map(function (e) {
        return { name: e.name, cat: e.category, ph: e.duration_ns > 0 ? "X" : "i", ts: e.start_ns / 1000, dur: e.duration_ns / 1000,
                 pid: e.rank !== null ? e.rank : (e.pid || 0), tid: e.category, s: "t", args: { step: e.step, node: e.node } };
      }), displayTimeUnit: "ms" };
      var a = h("a", { href: URL.createObjectURL(new Blob([JSON.stringify(trace)], { type: "application/json" })), download: "trainprof-range.json" });
      document.body.appendChild(a); a.click(); a.remove();
    };
    out.push(h("p", {}, ["From ", from, " s to ", to, " s after the start ", h("button", { text: "Show", onclick: load }), " ", dl]));
    out.push(table);
    setTimeout(load, 0);
    return out;
  }

  // [tab, title, render, needs the report's model (/api/runs/<id>); the others take the run's
  // row and command from /api/runs/<id>/info, which does not build the report: a 24-hour run's
  // nodes page loads in well under a second]
  var TABS = [["overview", "Overview", overviewTab, true], ["nodes", "Nodes", nodesTab], ["heatmap", "Heatmap", heatmapTab, true],
              ["training", "Training loop", trainingTab], ["timeline", "Timeline", timelineTab]];

  function runPage(id, tab) {
    tab = tab || "overview";
    var spec = TABS.filter(function (t) { return t[0] === tab; })[0] || TABS[0];
    // The run's version this page shows: a stream update that brings nothing newer (the one
    // that comes right after the first render, for a finished run always) does not redraw it.
    var shown = null;
    function render(d) {
      if (d && shown && d.latest_ns === shown.latest_ns && !!d.finished === shown.finished) return Promise.resolve();
      var got = spec[3] ? api("/api/runs/" + id) : api("/api/runs/" + id + "/info").then(function (i) {
        return { run: i.run, summary: { command: i.command } };
      });
      return got.then(function (o) {
        shown = { latest_ns: o.run.latest_ns === undefined ? null : o.run.latest_ns,
                  finished: o.run.exit_status !== null && o.run.exit_status !== undefined };
        setCrumbs([{ text: "Runs", href: "#/" }, { text: o.run.name || id }]);
        var scrollY = window.scrollY;
        app.textContent = "";
        app.appendChild(h("p", { class: "tabs" }, TABS.map(function (t) {
          return h("a", { href: "#/run/" + id + "/" + t[0], class: t[0] === spec[0] ? "on" : "", text: t[1] });
        })));
        app.appendChild(h("div", { class: "muted", text: (o.summary.command || []).join(" ") + " · started " + when(o.run.start_ns) }));
        spec[2](id, o).forEach(function (el) { app.appendChild(el); });
        window.scrollTo(0, scrollY);
      });
    }
    return render().then(function () { if (spec[0] !== "timeline") live(id, render); else stopLive(); });
  }

  // ---- Compare ----------------------------------------------------------------------------
  function comparePage(ids) {
    stopLive();
    setCrumbs([{ text: "Runs", href: "#/" }, { text: "Compare " + ids.length + " runs" }]);
    return Promise.all(ids.map(function (id) {
      return Promise.all([api("/api/runs/" + id), api("/api/runs/" + id + "/steps?points=2")]);
    })).then(function (all) {
      app.textContent = "";
      var t = h("table", { id: "compare" });
      t.appendChild(h("tr", {}, [h("th", { text: "" })].concat(all.map(function (a) { return h("th", { text: a[0].run.name }); }))));
      function medianStep(o) {
        var r = (o.training.ranks || [])[0];
        return r && r.step_ms ? r.step_ms.p50 : null;
      }
      var rows = [
        ["status", function (o) { return o.run.status; }],
        ["duration", function (o) { return dur(o.run.duration_ns); }],
        ["training steps", function (o, st) { return String(st.steps); }],
        ["median step", function (o) { var m = medianStep(o); return m === null || m === undefined ? "n/a" : m.toFixed(2) + " ms"; }],
        ["steps / s", function (o, st) { return o.run.duration_ns ? (st.steps / (o.run.duration_ns / 1e9)).toFixed(2) : "n/a"; }],
        ["data wait share", function (o, st) { return fmt(st.shares.data_wait, "ratio"); }],
        ["GPU utilisation (mean)", function (o) { return o.summary.gpus ? fmt(o.summary.gpu_utilization_mean, "ratio") : "no GPU"; }],
        ["findings", function (o) { return String(o.run.findings); }],
        ["cost", function (o) { return o.cost && o.cost.available ? usd(o.cost.total_usd) : "n/a"; }],
        ["cost per step", function (o) { return o.cost && o.cost.available ? usd(o.cost.cost_per_step_usd) : "n/a"; }],
        ["command", function (o) { return (o.summary.command || []).join(" "); }],
        ["instance type", function (o) { return o.summary.instance_type || "n/a"; }],
        ["tags", function (o) { return JSON.stringify(o.summary.tags || {}); }],
        ["trainprof", function (o) { return o.generator; }]
      ];
      rows.forEach(function (r) {
        var vals = all.map(function (a) { return r[1](a[0], a[1]); });
        var changed = vals.some(function (v) { return v !== vals[0]; });
        t.appendChild(h("tr", { class: changed ? "diff-changed" : "" }, [h("th", { text: r[0] })].concat(vals.map(function (v) { return h("td", { text: v }); }))));
      });
      app.appendChild(h("p", { class: "muted", text: "Rows that differ between the runs are highlighted." }));
      app.appendChild(t);
    });
  }

  // ---- Fleet: spend of every served run (GET /api/fleet = `trainprof fleet ROOTS --json`) ---
  function fleetPage() {
    stopLive();
    setCrumbs([{ text: "Runs", href: "#/" }, { text: "Fleet" }]);
    return api("/api/fleet").then(function (d) {
      app.textContent = "";
      var pct = function (v) { return fmt(v, "ratio"); };
      var cards = h("div", { class: "cards", id: "fleet-summary" });
      [["total_cost_usd", "Total spend", usd(d.total_cost_usd)],
       ["idle_cost_usd", "Idle accelerator spend", usd(d.idle_cost_usd)],
       ["idle_share", "Idle share of spend", pct(d.idle_share)],
       ["priced_runs", "Priced runs", d.priced_runs + " of " + d.runs]].forEach(function (c) {
        cards.appendChild(h("div", { class: "card" }, [h("div", { class: "k", text: c[1] }), h("div", { class: "v", "data-k": c[0], text: c[2] })]));
      });
      app.appendChild(cards);
      // Spend per day stacked by instance type (every day of the period; one past the last).
      var cells = (d.by_day_instance_type || []).filter(function (c) { return c.day !== "unknown"; });
      var days = cells.map(function (c) { return Date.parse(c.day + "T00:00:00Z") / 1000; });
      var spec = { kind: "stack", unit: "usd", x: [], series: [] };
      if (days.length) {
        var lo = Math.min.apply(null, days), hi = Math.max.apply(null, days);
        for (var t = lo; t <= hi + 86400 && spec.x.length < 3700; t += 86400) spec.x.push(t);
        var types = [];
        cells.forEach(function (c) { if (types.indexOf(c.instance_type) < 0) types.push(c.instance_type); });
        spec.series = types.map(function (ty) {
          var y = spec.x.map(function () { return 0; });
          cells.forEach(function (c, i) {
            if (c.instance_type === ty) { var k = Math.round((days[i] - lo) / 86400); if (k < y.length) y[k] += c.cost_usd; }
          });
          return { label: ty || "unknown", y: y };
        });
      }
      app.appendChild(h("h2", { text: "Spend per day by instance type" }));
      var chart = h("div", { class: "chart", id: "fleet-chart" });
      app.appendChild(chart);
      C.draw(chart, spec);
      function table(id, title, head, rows) {
        app.appendChild(h("h2", { text: title }));
        var t = h("table", { id: id });
        t.appendChild(h("tr", {}, head.map(function (x) { return h("th", { text: x }); })));
        rows.forEach(function (r) { t.appendChild(h("tr", {}, r.map(function (x) { return h("td", { text: String(x) }); }))); });
        app.appendChild(t);
      }
      table("fleet-top", "Top jobs by cost", ["job", "instance type", "cost", "idle share", "run"],
            (d.top_runs || []).map(function (r) { return [r.name || r.run, r.instance_type, usd(r.total_cost_usd), pct(r.idle_share), r.run]; }));
      table("fleet-savings", "What-if savings (ranked)", ["what", "runs", "saving", "per month"],
            (d.savings || []).map(function (s) { return [s.title || s.what, s.runs, usd(s.saving_usd), usd(s.saving_usd_per_month)]; }));
      table("fleet-usage", "By usage type", ["usage type", "hours", "cost", "runs"],
            (d.by_usage_type || []).map(function (u) { return [u.usage_type, u.hours.toFixed(2), usd(u.cost_usd), u.runs]; }));
      table("fleet-phases", "By phase", ["phase", "cost", "share"],
            (d.by_phase || []).map(function (p) { return [p.phase, usd(p.cost_usd), pct(p.share)]; }));
      Object.keys(d.by_tag || {}).forEach(function (k) {
        table("fleet-tag-" + k.replace(/[^A-Za-z0-9_-]/g, "_"), "By tag: " + k, [k, "cost", "runs"],
              d.by_tag[k].map(function (v) { return [v.value === null ? "(none)" : v.value, usd(v.cost_usd), v.runs]; }));
      });
      if ((d.unpriced || []).length) {
        table("fleet-unpriced", "Runs without a price", ["run", "why"], d.unpriced.map(function (u) { return [u.run, u.why]; }));
      }
    });
  }

  function route() {
    var parts = location.hash.replace(/^#\/?/, "").split("/");
    var done;
    if (parts[0] === "run" && parts[1]) done = runPage(parts[1], parts[2]);
    else if (parts[0] === "compare" && parts[1]) done = comparePage(parts[1].split(",").filter(Boolean));
    else if (parts[0] === "fleet") done = fleetPage();
    else done = runsPage();
    Promise.resolve(done).catch(function (err) {
      app.textContent = "";
      app.appendChild(h("p", { class: "status-failed", text: "Could not load: " + err.message }));
    });
  }
  window.addEventListener("hashchange", route);
  route();
})();
