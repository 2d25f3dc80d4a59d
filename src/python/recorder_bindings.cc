// trainprof._core recorder functions: the Python side of the in-process recorder
// (src/instrument). Python code takes its own timestamps (time.perf_counter_ns, the same
// CLOCK_MONOTONIC as the recorder) and hands events over in batches, so one span costs Python
// a tuple append, not a call across the boundary.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "instrument/child_env.h"
#include "instrument/recorder.h"
#include "model/event.h"

namespace py = pybind11;
using namespace trainprof;

namespace {

int64_t OrMissing(const std::optional<int64_t>& v) { return v.value_or(model::kMissing); }

std::string_view View(PyObject* o) {
  if (o == Py_None || !PyUnicode_Check(o)) return {};
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(o, &n);
  if (s == nullptr) {
    PyErr_Clear();
    return {};
  }
  return {s, static_cast<size_t>(n)};
}

int64_t Int(PyObject* o) {
  if (o == Py_None) return model::kMissing;
  int64_t v = PyLong_AsLongLong(o);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return model::kMissing;
  }
  return v;
}

// Each item: (kind, name, category, mode, step, start_mono_ns, duration_ns, tid, args) with
// kind 0 = span, 1 = instant; step/args may be None. Malformed items are skipped and counted.
int64_t Submit(py::iterable items) {
  const int64_t offset = instrument::ClockOffsetNs();
  int64_t bad = 0;
  for (py::handle item : items) {
    PyObject* t = item.ptr();
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 9) {
      ++bad;
      continue;
    }
    const int64_t kind = Int(PyTuple_GET_ITEM(t, 0));
    const int64_t start = Int(PyTuple_GET_ITEM(t, 5));
    if (start == model::kMissing) {
      ++bad;
      continue;
    }
    if (kind == 1) {
      instrument::RecordInstant(View(PyTuple_GET_ITEM(t, 1)), View(PyTuple_GET_ITEM(t, 2)),
                                View(PyTuple_GET_ITEM(t, 3)), Int(PyTuple_GET_ITEM(t, 4)),
                                start + offset, View(PyTuple_GET_ITEM(t, 8)),
                                Int(PyTuple_GET_ITEM(t, 7)));
    } else {
      instrument::RecordSpan(View(PyTuple_GET_ITEM(t, 1)), View(PyTuple_GET_ITEM(t, 2)),
                             View(PyTuple_GET_ITEM(t, 3)), Int(PyTuple_GET_ITEM(t, 4)),
                             start + offset, Int(PyTuple_GET_ITEM(t, 6)),
                             View(PyTuple_GET_ITEM(t, 8)), Int(PyTuple_GET_ITEM(t, 7)));
    }
  }
  if (bad > 0) instrument::AddCounter("malformed_events", bad);
  return bad;
}

}  // namespace

void BindRecorder(py::module_& m) {
  m.def(
      "recorder_start",
      [](const std::string& run_dir, const std::string& node, std::optional<int64_t> rank,
         std::optional<int64_t> local_rank, std::optional<int64_t> world_size,
         int64_t flush_interval_ns, bool write_run_json, const std::string& run_name) {
        instrument::RecorderOptions o;
        o.run_dir = run_dir;
        o.node = node;
        o.rank = OrMissing(rank);
        o.local_rank = OrMissing(local_rank);
        o.world_size = OrMissing(world_size);
        o.flush_interval_ns = flush_interval_ns;
        o.write_run_json = write_run_json;
        o.run_name = run_name;
        Status st;
        {
          py::gil_scoped_release release;
          st = instrument::Start(o);
        }
        return st.ok() ? std::string() : st.message();
      },
      py::arg("run_dir"), py::arg("node") = "", py::arg("rank") = py::none(),
      py::arg("local_rank") = py::none(), py::arg("world_size") = py::none(),
      py::arg("flush_interval_ns") = 500'000'000, py::arg("write_run_json") = true,
      py::arg("run_name") = "");
  // Stop/flush return "" or the error message: the Python layer warns, never raises.
  m.def("recorder_stop", [] {
    py::gil_scoped_release release;
    Status st = instrument::Stop();
    return st.ok() ? std::string() : st.message();
  });
  m.def("recorder_flush", [] {
    py::gil_scoped_release release;
    Status st = instrument::FlushNow();
    return st.ok() ? std::string() : st.message();
  });
  m.def("recorder_active", &instrument::Active);
  m.def("recorder_clock_offset_ns", &instrument::ClockOffsetNs);
  m.def("recorder_now_ns", &instrument::NowNs);
  m.def("recorder_submit", &Submit, py::arg("items"));
  m.def(
      "recorder_set_rank",
      [](std::optional<int64_t> rank, std::optional<int64_t> local_rank,
         std::optional<int64_t> world_size) {
        instrument::SetRank(OrMissing(rank), OrMissing(local_rank), OrMissing(world_size));
      },
      py::arg("rank"), py::arg("local_rank") = py::none(), py::arg("world_size") = py::none());
  m.def("recorder_annotate",
        [](const std::string& k, const std::string& v) { instrument::Annotate(k, v); });
  m.def("recorder_add_counter",
        [](const std::string& k, int64_t d) { instrument::AddCounter(k, d); });
  m.def("recorder_set_meta",
        [](const std::string& k, const std::string& v) { instrument::SetMeta(k, v); });
  m.def("recorder_stats", [] {
    auto s = instrument::Stats();
    py::dict d;
    d["dropped_events"] = s.dropped_events;
    d["written_events"] = s.written_events;
    d["flushes"] = s.flushes;
    return d;
  });
  m.def(
      "child_environment",
      [](const std::string& run_dir, const std::string& node, const std::string& package_dir,
         bool auto_instrument, const std::string& detail_steps, const std::string& python_profile,
         std::map<std::string, std::string> parent) {
        instrument::ChildEnvOptions o{run_dir,         node,         package_dir,
                                      auto_instrument, detail_steps, python_profile};
        return instrument::ChildEnvironment(o, parent);
      },
      py::arg("run_dir"), py::arg("node") = "", py::arg("package_dir") = "",
      py::arg("auto_instrument") = true, py::arg("detail_steps") = "",
      py::arg("python_profile") = "", py::arg("parent") = std::map<std::string, std::string>{});
}
