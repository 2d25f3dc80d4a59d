// trainprof._core: the Python boundary. Translates Status into exceptions and columnar tables
// into NumPy arrays without copying values one by one; no logic lives here. Every call that
// touches the store releases the GIL.

#include <pybind11/eval.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "agent/recording_session.h"
#include "cli/cli.h"
#include "collect/metric_catalog.h"
#include "model/data_quality.h"
#include "model/run_metadata.h"
#include "report/report_assets.h"
#include "store/run_directory.h"
#include "store/run_reader.h"
#include "trainprof/version.h"

namespace py = pybind11;
using namespace trainprof;

void BindRecorder(py::module_& m);  // recorder_bindings.cc

namespace {

std::mutex& InProcessSessionMu() {
  static std::mutex mu;
  return mu;
}

std::unique_ptr<agent::RecordingSession>& InProcessSession() {
  static auto* session = new std::unique_ptr<agent::RecordingSession>();  // lives to exit
  return *session;
}

// Raised for every non-ok Status; the Python layer subclasses it by code.
PyObject* g_error = nullptr;

[[noreturn]] void Throw(const Status& status) {
  py::object err = py::reinterpret_borrow<py::object>(g_error);
  py::object exc = err(status.message(), std::string(StatusCodeName(status.code())));
  PyErr_SetObject(g_error, exc.ptr());
  throw py::error_already_set();
}

template <typename T>
T Unwrap(StatusOr<T> v) {
  if (!v.ok()) Throw(v.status());
  return std::move(v).value();
}

void Check(const Status& s) {
  if (!s.ok()) Throw(s);
}

// Hands a vector's buffer to NumPy: the array owns the vector through a capsule.
template <typename T>
py::array_t<T> ToNumpy(std::vector<T>&& v) {
  auto* heap = new std::vector<T>(std::move(v));
  py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>({static_cast<py::ssize_t>(heap->size())}, {sizeof(T)}, heap->data(), owner);
}

py::dict Column(const store::Dictionary& dict, std::vector<int32_t>&& codes) {
  py::dict d;
  d["codes"] = ToNumpy(std::move(codes));
  d["categories"] = dict.values();
  return d;
}

py::dict MetricsToPy(store::MetricTable&& t) {
  py::dict d;
  d["node"] = Column(t.nodes, std::move(t.node));
  d["metric"] = Column(t.metrics, std::move(t.metric));
  d["device"] = Column(t.devices, std::move(t.device));
  d["timestamp_ns"] = ToNumpy(std::move(t.timestamp_ns));
  d["value"] = ToNumpy(std::move(t.value));
  return d;
}

py::dict EventsToPy(store::EventTable&& t) {
  py::dict d;
  d["node"] = Column(t.nodes, std::move(t.node));
  d["rank"] = ToNumpy(std::move(t.rank));
  d["pid"] = ToNumpy(std::move(t.pid));
  d["tid"] = ToNumpy(std::move(t.tid));
  d["name"] = Column(t.names, std::move(t.name));
  d["category"] = Column(t.categories, std::move(t.category));
  d["mode"] = Column(t.modes, std::move(t.mode));
  d["step"] = ToNumpy(std::move(t.step));
  d["kind"] = ToNumpy(std::move(t.kind));
  d["start_ns"] = ToNumpy(std::move(t.start_ns));
  d["duration_ns"] = ToNumpy(std::move(t.duration_ns));
  d["args"] = py::cast(t.args);
  return d;
}

py::dict StepsToPy(store::StepTable&& t) {
  py::dict d;
  d["node"] = Column(t.nodes, std::move(t.node));
  d["rank"] = ToNumpy(std::move(t.rank));
  d["pid"] = ToNumpy(std::move(t.pid));
  d["step"] = ToNumpy(std::move(t.step));
  d["mode"] = Column(t.modes, std::move(t.mode));
  d["start_ns"] = ToNumpy(std::move(t.start_ns));
  d["duration_ns"] = ToNumpy(std::move(t.duration_ns));
  d["data_wait_ns"] = ToNumpy(std::move(t.data_wait_ns));
  d["forward_ns"] = ToNumpy(std::move(t.forward_ns));
  d["backward_ns"] = ToNumpy(std::move(t.backward_ns));
  d["optimizer_ns"] = ToNumpy(std::move(t.optimizer_ns));
  return d;
}

// Runs f without the GIL: store reads and writes never need Python.
template <typename F>
auto Release(F&& f) -> decltype(f()) {
  py::gil_scoped_release release;
  return f();
}

int64_t OrMin(const std::optional<int64_t>& v) { return v.value_or(store::kMinTime); }
int64_t OrMax(const std::optional<int64_t>& v) { return v.value_or(store::kMaxTime); }
std::vector<std::string> OrAll(const std::optional<std::vector<std::string>>& v) {
  return v.value_or(std::vector<std::string>{});
}

// A run opened for reading; wraps store::RunReader (one per Python object, not shared).
class PyRun {
 public:
  explicit PyRun(const std::string& dir) {
    py::gil_scoped_release release;
    auto r = store::RunReader::Open(dir);
    if (!r.ok()) {
      py::gil_scoped_acquire acquire;
      Throw(r.status());
    }
    reader_ = std::move(r).value();
  }

  std::string metadata_json() const { return model::RunMetadataToJson(reader_->metadata()); }
  std::vector<std::string> node_infos_json() const {
    std::vector<std::string> out;
    for (const auto* n : reader_->node_infos()) out.push_back(model::NodeInfoToJson(*n));
    return out;
  }
  std::vector<std::string> nodes() const { return reader_->nodes(); }
  std::vector<std::string> problems() const { return reader_->problems(); }
  std::string dir() const { return reader_->dir(); }

  void refresh() {
    Check(Release([&] { return reader_->Refresh(); }));
  }

  py::dict system_metrics(std::optional<int64_t> start, std::optional<int64_t> end,
                          std::optional<std::vector<std::string>> metrics,
                          std::optional<std::vector<std::string>> nodes,
                          std::optional<std::vector<std::string>> devices) {
    store::MetricQuery q;
    q.start_ns = OrMin(start);
    q.end_ns = OrMax(end);
    q.metrics = OrAll(metrics);
    q.nodes = OrAll(nodes);
    q.devices = OrAll(devices);
    return MetricsToPy(Unwrap(Release([&] { return reader_->SystemMetrics(q); })));
  }

  py::dict events(std::optional<int64_t> start, std::optional<int64_t> end,
                  std::optional<std::vector<std::string>> names,
                  std::optional<std::vector<std::string>> categories,
                  std::optional<std::vector<int64_t>> ranks,
                  std::optional<std::vector<std::string>> nodes) {
    store::EventQuery q;
    q.start_ns = OrMin(start);
    q.end_ns = OrMax(end);
    q.names = OrAll(names);
    q.categories = OrAll(categories);
    q.ranks = ranks.value_or(std::vector<int64_t>{});
    q.nodes = OrAll(nodes);
    return EventsToPy(Unwrap(Release([&] { return reader_->Events(q); })));
  }

  py::tuple events_since(std::map<std::string, int64_t> cursor) {
    store::EventCursor c;
    c.last_chunk_id = std::move(cursor);
    auto table = Unwrap(Release([&] { return reader_->EventsSince(&c, {}); }));
    return py::make_tuple(EventsToPy(std::move(table)), c.last_chunk_id);
  }

  // Samples written since the previous call (the cursor lives here: it is per series).
  py::dict new_system_metrics() {
    return MetricsToPy(
        Unwrap(Release([&] { return reader_->SystemMetricsSince(&metric_cursor_, {}); })));
  }

  py::dict steps() {
    return StepsToPy(Unwrap(Release([&] { return reader_->Steps(); })));
  }

  py::list findings() {
    auto findings = Unwrap(Release([&] { return reader_->Findings(); }));
    py::list out;
    for (const auto& f : findings) {
      py::dict d;
      d["rule"] = f.rule;
      d["severity"] = model::SeverityName(f.severity);
      d["node"] = f.node;
      d["device"] = f.device;
      d["start_ns"] = f.start_ns;
      d["end_ns"] = f.end_ns;
      d["message"] = f.message;
      d["recommendation"] = f.recommendation;
      d["evidence_json"] = f.evidence_json;
      out.append(d);
    }
    return out;
  }

  py::list series() {
    auto series = Unwrap(Release([&] { return reader_->ListSeries(); }));
    py::list out;
    for (const auto& s : series) {
      py::dict d;
      d["node"] = s.node;
      d["metric"] = s.series.metric;
      d["device"] = s.series.device;
      d["count"] = s.series.count;
      d["first_ns"] = s.series.first_ns;
      d["last_ns"] = s.series.last_ns;
      out.append(d);
    }
    return out;
  }

  std::map<std::string, int64_t> counters() {
    return Unwrap(Release([&] { return reader_->Counters(); }));
  }

  py::list annotations() {
    auto annotations = Unwrap(Release([&] { return reader_->Annotations(); }));
    py::list out;
    for (const auto& [node, a] : annotations) {
      out.append(py::make_tuple(node, a.ts_ns, a.key, a.value));
    }
    return out;
  }

  std::optional<int64_t> latest_timestamp_ns() {
    return Unwrap(Release([&] { return reader_->LatestTimestampNs(); }));
  }

 private:
  std::unique_ptr<store::RunReader> reader_;
  store::ChunkCursor metric_cursor_;
};

// Writes a run from Python: for users bringing their own data and for tests. One node.
class PyRunWriter {
 public:
  PyRunWriter(const std::string& dir, const std::string& node, const std::string& name,
              std::vector<std::string> command, std::optional<int64_t> start_ns, std::string source)
      : dir_(dir) {
    meta_.name = name;
    meta_.start_ns = start_ns.value_or(WallNowNsForPy());
    meta_.run_id = model::NewRunId(name, meta_.start_ns);
    meta_.command = std::move(command);
    meta_.source = std::move(source);
    meta_.trainprof_version = kVersion;
    Check(store::WriteRunMetadata(dir_, meta_));
    model::NodeInfo info = model::DetectLocalNode(node);
    writer_ = Unwrap(store::OpenNodeWriter(dir_, info));
  }

  void append_metric(const std::string& metric, const std::string& device,
                     py::array_t<int64_t, py::array::c_style | py::array::forcecast> ts,
                     py::array_t<double, py::array::c_style | py::array::forcecast> values) {
    if (ts.size() != values.size()) {
      Throw(InvalidArgument("timestamps and values differ in length"));
    }
    Live();
    auto id = writer_->Series(metric, device);
    const int64_t* t = ts.data();
    const double* v = values.data();
    py::ssize_t n = ts.size();
    py::gil_scoped_release release;
    for (py::ssize_t i = 0; i < n; ++i) writer_->Append(id, t[i], v[i]);
  }

  void append_event(const std::string& name, const std::string& category, int64_t start_ns,
                    int64_t duration_ns, const std::string& mode, std::optional<int64_t> step,
                    std::optional<int64_t> pid, std::optional<int64_t> tid,
                    std::optional<int64_t> rank, const std::string& args, bool instant) {
    Live();
    model::Event e;
    e.kind = instant ? model::EventKind::kInstant : model::EventKind::kSpan;
    e.name = name;
    e.category = category;
    e.start_ns = start_ns;
    e.duration_ns = instant ? 0 : duration_ns;
    e.mode = mode;
    e.step = step.value_or(model::kMissing);
    e.pid = pid.value_or(model::kMissing);
    e.tid = tid.value_or(model::kMissing);
    e.rank = rank.value_or(model::kMissing);
    e.args = args;
    writer_->AppendEvent(std::move(e));
  }

  void annotate(int64_t ts_ns, const std::string& key, const std::string& value) {
    Live();
    writer_->Annotate(ts_ns, key, value);
  }

  void flush() {
    Live();
    Check(Release([&] { return writer_->Flush(); }));
  }

  void close(std::optional<int64_t> end_ns, std::optional<int> exit_status) {
    if (!writer_) return;
    Check(Release([&] { return writer_->Close(); }));
    writer_.reset();
    meta_.end_ns = end_ns;
    meta_.exit_status = exit_status;
    Check(store::WriteRunMetadata(dir_, meta_));
  }

  std::string dir() const { return dir_; }

 private:
  static int64_t WallNowNsForPy() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  void Live() {
    if (!writer_) Throw(FailedPrecondition(dir_ + ": writer is closed"));
  }
  std::string dir_;
  model::RunMetadata meta_;
  std::unique_ptr<store::NodeStoreWriter> writer_;
};

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "trainprof native core (C++): run store readers and writers, the CLI";
  m.attr("__version__") = kVersion;
  m.attr("MISSING") = model::kMissing;
  BindRecorder(m);

  py::object base = py::module_::import("builtins").attr("Exception");
  py::dict ns;
  py::exec(R"py(
class TrainprofError(Exception):
    """An error from trainprof's core. `code` names the kind: 'not found', 'data loss',
    'invalid argument', 'failed precondition', 'unavailable', 'internal', 'not implemented'."""
    def __init__(self, message, code="internal"):
        super().__init__(message)
        self.code = code
)py",
           py::globals(), ns);
  py::object error = ns["TrainprofError"];
  error.attr("__module__") = "trainprof";
  m.attr("TrainprofError") = error;
  g_error = error.ptr();
  Py_INCREF(g_error);

  py::class_<PyRun>(m, "Run")
      .def(py::init<const std::string&>(), py::arg("dir"))
      .def_property_readonly("dir", &PyRun::dir)
      .def("metadata_json", &PyRun::metadata_json)
      .def("node_infos_json", &PyRun::node_infos_json)
      .def("nodes", &PyRun::nodes)
      .def("problems", &PyRun::problems)
      .def("refresh", &PyRun::refresh)
      .def("system_metrics", &PyRun::system_metrics, py::arg("start") = py::none(),
           py::arg("end") = py::none(), py::arg("metrics") = py::none(),
           py::arg("nodes") = py::none(), py::arg("devices") = py::none())
      .def("events", &PyRun::events, py::arg("start") = py::none(), py::arg("end") = py::none(),
           py::arg("names") = py::none(), py::arg("categories") = py::none(),
           py::arg("ranks") = py::none(), py::arg("nodes") = py::none())
      .def("events_since", &PyRun::events_since, py::arg("cursor"))
      .def("new_system_metrics", &PyRun::new_system_metrics)
      .def("steps", &PyRun::steps)
      .def("findings", &PyRun::findings)
      .def("series", &PyRun::series)
      .def("counters", &PyRun::counters)
      .def("annotations", &PyRun::annotations)
      .def("latest_timestamp_ns", &PyRun::latest_timestamp_ns);

  py::class_<PyRunWriter>(m, "RunWriter")
      .def(py::init<const std::string&, const std::string&, const std::string&,
                    std::vector<std::string>, std::optional<int64_t>, std::string>(),
           py::arg("dir"), py::arg("node") = "", py::arg("name") = "",
           py::arg("command") = std::vector<std::string>{}, py::arg("start_ns") = py::none(),
           py::arg("source") = "python")
      .def_property_readonly("dir", &PyRunWriter::dir)
      .def("append_metric", &PyRunWriter::append_metric, py::arg("metric"), py::arg("device"),
           py::arg("timestamps_ns"), py::arg("values"))
      .def("append_event", &PyRunWriter::append_event, py::arg("name"), py::arg("category"),
           py::arg("start_ns"), py::arg("duration_ns") = 0, py::arg("mode") = "",
           py::arg("step") = py::none(), py::arg("pid") = py::none(), py::arg("tid") = py::none(),
           py::arg("rank") = py::none(), py::arg("args") = "", py::arg("instant") = false)
      .def("annotate", &PyRunWriter::annotate)
      .def("flush", &PyRunWriter::flush)
      .def("close", &PyRunWriter::close, py::arg("end_ns") = py::none(),
           py::arg("exit_status") = py::none());

  m.def(
      "list_runs",
      [](const std::string& dir) {
        auto runs = Unwrap(store::ListRuns(dir));
        py::list out;
        for (const auto& r : runs) {
          py::dict d;
          d["dir"] = r.dir;
          d["run_id"] = r.run_id;
          d["name"] = r.name;
          d["start_ns"] = r.start_ns;
          d["duration_ns"] = r.duration_ns;
          d["exit_status"] = r.exit_status;
          d["nodes"] = r.node_count;
          d["source"] = r.source;
          d["error"] = r.error;
          out.append(d);
        }
        return out;
      },
      py::arg("dir"));

  // System metrics for a run started from Python (trainprof.start() without `record`): the
  // node's sampling session (what `agent` runs) on threads of this process, watching it.
  m.def(
      "start_system_sampling",
      [](const std::string& run_dir, const std::string& node, int64_t interval_ns, bool gpus,
         int pid, int64_t start_ns) -> std::string {
        std::lock_guard<std::mutex> lock(InProcessSessionMu());
        if (InProcessSession()) return "system sampling already runs in this process";
        agent::SessionOptions so;
        so.run_dir = run_dir;
        so.node = node;
        so.interval_ns = interval_ns;
        so.gpus = gpus;
        py::gil_scoped_release release;
        auto session = agent::RecordingSession::Open(so, start_ns);
        if (!session.ok()) return session.status().message();
        Status st = (*session)->StartSampling({pid});
        if (!st.ok()) return st.message();
        InProcessSession() = std::move(*session);
        return "";
      },
      py::arg("run_dir"), py::arg("node"), py::arg("interval_ns"), py::arg("gpus"), py::arg("pid"),
      py::arg("start_ns"),
      "Starts sampling this node's system metrics into the run on a thread of this process; "
      "returns an error message or ''.");
  m.def(
      "stop_system_sampling",
      [](int64_t end_ns) {
        std::lock_guard<std::mutex> lock(InProcessSessionMu());
        if (!InProcessSession()) return false;
        py::gil_scoped_release release;
        InProcessSession()->Finish(end_ns);
        InProcessSession().reset();
        return true;
      },
      py::arg("end_ns"), "Stops the sampling started by start_system_sampling; closes its store.");

  m.def(
      "metric_catalog",
      [] {
        py::list out;
        for (const collect::MetricSpec& spec : collect::MetricCatalog()) {
          py::dict d;
          d["name"] = std::string(spec.name);
          d["unit"] = std::string(spec.unit);
          d["kind"] = std::string(collect::MetricKindName(spec.kind));
          d["device"] = std::string(spec.device);
          d["source"] = std::string(spec.source);
          d["help"] = std::string(spec.help);
          out.append(d);
        }
        return out;
      },
      "Every metric the samplers (and importers) store: name, unit, kind, device, source, help "
      "(docs/metrics.md).");

  m.def(
      "report_assets",
      [] {
        namespace a = report::assets;
        py::dict d;
        d["dygraphs_js"] = std::string(a::kDygraphsJs);
        d["dygraphs_css"] = std::string(a::kDygraphsCss);
        d["dygraphs_notice"] = std::string(a::kDygraphsNotice);
        d["charts_js"] = std::string(a::kChartsJs);
        return d;
      },
      "The report's embedded chart assets (dygraphs, its notice and the shared charts.js), for "
      "pages built in Python (the fleet page).");

  m.def(
      "run_cli",
      [](std::vector<std::string> argv) {
        // One command at a time: std::cout / std::cerr are redirected for its duration.
        static std::mutex mu;
        std::ostringstream out, err;
        int code = 0;
        {
          py::gil_scoped_release release;
          std::lock_guard<std::mutex> lock(mu);
          std::streambuf* old_out = std::cout.rdbuf(out.rdbuf());
          std::streambuf* old_err = std::cerr.rdbuf(err.rdbuf());
          try {
            code = cli::Main(argv);
          } catch (...) {
            std::cout.rdbuf(old_out);
            std::cerr.rdbuf(old_err);
            throw;
          }
          std::cout.rdbuf(old_out);
          std::cerr.rdbuf(old_err);
        }
        return py::make_tuple(code, py::bytes(out.str()), py::bytes(err.str()));
      },
      py::arg("argv"),
      "Runs the trainprof command line in this process with its output captured; returns "
      "(exit code, stdout bytes, stderr bytes).");

  m.def(
      "main",
      [](std::vector<std::string> argv) {
        py::gil_scoped_release release;
        return cli::Main(argv);
      },
      py::arg("argv"), "Runs the trainprof command line in this process; returns the exit code.");
}
