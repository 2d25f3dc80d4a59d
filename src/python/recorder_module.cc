// trainprof._rec: the in-process recorder (src/instrument) for Python, written against the C
// API alone (no pybind11, no NumPy) because it is imported at the start of every Python
// process of a recorded job and sits on the training thread's hot path:
//
//   - Span, the type behind trainprof.span: `with Span("load"):` costs one object, two clock
//     reads and one record appended to the thread's buffer, with no Python frame at all;
//   - record_span / record_instant, what the automatic PyTorch instrumentation calls from its
//     hooks (timestamps are time.perf_counter_ns readings: the same CLOCK_MONOTONIC);
//   - set_step, the process's current step and mode, which spans and records take by default;
//   - the recorder's lifecycle (start, stop, flush...), returning "" or an error message:
//     the Python layer warns, never raises into training.
//
// Threads: every function runs with the GIL held; the recorder underneath is thread-safe and
// never blocks.

// Python's C API macros (Py_RETURN_NONE, PyTuple_GET_ITEM...) cast the C way inside our code.
#pragma GCC diagnostic ignored "-Wold-style-cast"

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <time.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "instrument/recorder.h"
#include "model/event.h"

namespace {

using trainprof::Status;
namespace instrument = trainprof::instrument;
constexpr int64_t kMissing = trainprof::model::kMissing;

// The process's current step, set by the Python step logic (steps are a process-level
// notion: spans from any thread carry the current one).
int64_t g_step = kMissing;
PyObject* g_mode = nullptr;  // a str, owned
std::string_view g_mode_text;
PyObject* g_current = nullptr;  // the CURRENT sentinel: "the current step / mode"
PyObject* g_str_step = nullptr;
PyObject* g_str_mode = nullptr;
PyObject* g_str_args = nullptr;
PyObject* g_str_ts = nullptr;
PyObject* g_str_category = nullptr;
PyObject* g_str_name = nullptr;

inline int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// A str's UTF-8 (cached inside the str object after the first call; no copy). Anything else
// gives "", as does None.
inline std::string_view Text(PyObject* o) {
  if (o == nullptr || !PyUnicode_Check(o)) return {};
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(o, &n);
  if (s == nullptr) {
    PyErr_Clear();
    return {};
  }
  return {s, static_cast<size_t>(n)};
}

// An int, or kMissing for None and anything that is not one (the error is cleared).
inline int64_t IntOrMissing(PyObject* o) {
  if (o == nullptr || o == Py_None) return kMissing;
  int64_t v = PyLong_AsLongLong(o);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return kMissing;
  }
  return v;
}

// Calls trainprof._recorder.<fn>(*args): the rare paths (a misuse warning, a decorator) live in
// Python. Returns a new reference or null with the error cleared.
PyObject* CallRecorder(const char* fn, PyObject* arg0, PyObject* arg1 = nullptr) {
  PyObject* mod = PyImport_ImportModule("trainprof._recorder");
  if (mod == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* f = PyObject_GetAttrString(mod, fn);
  Py_DECREF(mod);
  if (f == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* r = arg1 == nullptr ? PyObject_CallOneArg(f, arg0)
                                : PyObject_CallFunctionObjArgs(f, arg0, arg1, nullptr);
  Py_DECREF(f);
  return r;
}

void WarnOnce(const char* key, PyObject* message) {
  PyObject* k = PyUnicode_FromString(key);
  if (k == nullptr || message == nullptr) {
    Py_XDECREF(k);
    PyErr_Clear();
    return;
  }
  PyObject* r = CallRecorder("warn_once", k, message);
  if (r == nullptr) PyErr_Clear();
  Py_XDECREF(r);
  Py_DECREF(k);
}

// Matches keyword arguments of a FASTCALL call to parameter slots by name (interned names
// compare by pointer first); names[j] is positional parameter first_position + j. Returns
// false (with a TypeError set) for an unknown keyword or one repeating a positional argument.
bool BindKeywords(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                  PyObject* const* names, Py_ssize_t n_names, Py_ssize_t first_position,
                  PyObject** slots, const char* func) {
  if (kwnames == nullptr) return true;
  const Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, i);
    Py_ssize_t slot = -1;
    for (Py_ssize_t j = 0; j < n_names && slot < 0; ++j) {
      if (key == names[j]) slot = j;
    }
    for (Py_ssize_t j = 0; j < n_names && slot < 0; ++j) {
      if (PyUnicode_Compare(key, names[j]) == 0) slot = j;
    }
    if (slot < 0) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", func, key);
      return false;
    }
    if (first_position + slot < nargs) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'", func, key);
      return false;
    }
    slots[slot] = args[nargs + i];
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// record_span(name, category, start, end, step=CURRENT, mode=CURRENT, args=None)

PyObject* RecordSpan(PyObject*, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (!instrument::Active()) Py_RETURN_NONE;
  PyObject* v[7] = {nullptr, nullptr, nullptr, nullptr, g_current, g_current, Py_None};
  if (nargs > 7) {
    PyErr_SetString(PyExc_TypeError, "record_span() takes at most 7 arguments");
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) v[i] = args[i];
  // name, category, start and end are positional; step, mode and args also by keyword.
  PyObject* const names[3] = {g_str_step, g_str_mode, g_str_args};
  if (kwnames != nullptr &&
      !BindKeywords(args, nargs, kwnames, names, 3, 4, v + 4, "record_span")) {
    return nullptr;
  }
  if (v[3] == nullptr) {
    PyErr_SetString(PyExc_TypeError, "record_span() needs name, category, start and end");
    return nullptr;
  }
  const int64_t start = IntOrMissing(v[2]), end = IntOrMissing(v[3]);
  if (start == kMissing || end == kMissing) {
    instrument::AddCounter("malformed_events", 1);
    Py_RETURN_NONE;
  }
  const int64_t step = v[4] == g_current ? g_step : IntOrMissing(v[4]);
  const std::string_view mode = v[5] == g_current ? g_mode_text : Text(v[5]);
  instrument::RecordSpan(Text(v[0]), Text(v[1]), mode, step, start + instrument::ClockOffsetNs(),
                         end - start, Text(v[6]));
  Py_RETURN_NONE;
}

// record_instant(name, category, ts=None, step=CURRENT, mode=CURRENT, args=None)
PyObject* RecordInstant(PyObject*, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (!instrument::Active()) Py_RETURN_NONE;
  PyObject* v[6] = {nullptr, nullptr, Py_None, g_current, g_current, Py_None};
  if (nargs > 6) {
    PyErr_SetString(PyExc_TypeError, "record_instant() takes at most 6 arguments");
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) v[i] = args[i];
  PyObject* const names[4] = {g_str_ts, g_str_step, g_str_mode, g_str_args};
  if (kwnames != nullptr &&
      !BindKeywords(args, nargs, kwnames, names, 4, 2, v + 2, "record_instant")) {
    return nullptr;
  }
  if (v[1] == nullptr) {
    PyErr_SetString(PyExc_TypeError, "record_instant() needs name and category");
    return nullptr;
  }
  const int64_t ts = v[2] == Py_None ? MonotonicNs() : IntOrMissing(v[2]);
  if (ts == kMissing) {
    instrument::AddCounter("malformed_events", 1);
    Py_RETURN_NONE;
  }
  const int64_t step = v[3] == g_current ? g_step : IntOrMissing(v[3]);
  const std::string_view mode = v[4] == g_current ? g_mode_text : Text(v[4]);
  instrument::RecordInstant(Text(v[0]), Text(v[1]), mode, step, ts + instrument::ClockOffsetNs(),
                            Text(v[5]));
  Py_RETURN_NONE;
}

// set_step(step, mode): step None when no step is open.
PyObject* SetStep(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyUnicode_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "set_step(step: int | None, mode: str)");
    return nullptr;
  }
  g_step = IntOrMissing(args[0]);
  PyObject* old = g_mode;
  Py_INCREF(args[1]);
  g_mode = args[1];
  g_mode_text = Text(g_mode);
  Py_XDECREF(old);  // last: a __del__ it may run sees the new mode already
  Py_RETURN_NONE;
}

// ---------------------------------------------------------------------------------------------
// Span: a context manager (and, through Python, a decorator) timing a region.

struct SpanObject {
  PyObject_HEAD PyObject* name;  // str
  PyObject* category;            // str
  PyObject* args;                // str (JSON) or None
  int64_t t0;                    // the enter time, 0 when not entered
};

PyTypeObject SpanType{};  // filled in by InitSpanType

PyObject* NewSpan(PyObject* name, PyObject* category, PyObject* args_json) {
  SpanObject* self = PyObject_New(SpanObject, &SpanType);
  if (self == nullptr) return nullptr;
  Py_INCREF(name);
  Py_INCREF(category);
  Py_INCREF(args_json);
  self->name = name;
  self->category = category;
  self->args = args_json;
  self->t0 = 0;
  return reinterpret_cast<PyObject*>(self);
}

PyObject* g_default_category = nullptr;  // "user"

// Span(name, category="user", **args): args become the span's JSON args.
PyObject* SpanVectorcall(PyObject*, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  PyObject* name = nargs > 0 ? args[0] : nullptr;
  PyObject* category = nargs > 1 ? args[1] : g_default_category;
  if (nargs > 2) {
    PyErr_SetString(PyExc_TypeError, "span() takes the name, a category and keyword args");
    return nullptr;
  }
  PyObject* extra = nullptr;  // other keywords: the span's args
  if (kwnames != nullptr) {
    const Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; ++i) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, i);
      PyObject* value = args[nargs + i];
      const bool is_name = PyUnicode_Compare(key, g_str_name) == 0;
      const bool is_category = !is_name && PyUnicode_Compare(key, g_str_category) == 0;
      if ((is_name && nargs > 0) || (is_category && nargs > 1)) {
        Py_XDECREF(extra);
        PyErr_Format(PyExc_TypeError, "span() got multiple values for argument '%U'", key);
        return nullptr;
      }
      if (is_name) {
        name = value;
      } else if (is_category) {
        category = value;
      } else {
        if (extra == nullptr && (extra = PyDict_New()) == nullptr) return nullptr;
        if (PyDict_SetItem(extra, key, value) < 0) {
          Py_DECREF(extra);
          return nullptr;
        }
      }
    }
  }
  if (name == nullptr) {
    Py_XDECREF(extra);
    PyErr_SetString(PyExc_TypeError, "span() needs a name");
    return nullptr;
  }
  PyObject* args_json = Py_None;
  Py_INCREF(args_json);
  if (extra != nullptr) {
    PyObject* j = CallRecorder("_json_args", extra);
    Py_DECREF(extra);
    if (j == nullptr) {
      Py_DECREF(args_json);
      if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_RuntimeError, "trainprof: cannot encode the span's args");
      }
      return nullptr;
    }
    Py_SETREF(args_json, j);
  }
  PyObject* self = NewSpan(name, category, args_json);
  Py_DECREF(args_json);
  return self;
}

PyObject* SpanNew(PyTypeObject*, PyObject* args, PyObject* kwargs) {
  // The tuple/dict form of the call (type.__call__ spelled out): the same as the vectorcall.
  return PyVectorcall_Call(reinterpret_cast<PyObject*>(&SpanType), args, kwargs);
}

void SpanDealloc(PyObject* o) {
  auto* self = reinterpret_cast<SpanObject*>(o);
  Py_XDECREF(self->name);
  Py_XDECREF(self->category);
  Py_XDECREF(self->args);
  PyObject_Free(o);
}

PyObject* SpanEnter(PyObject* o, PyObject*) {
  reinterpret_cast<SpanObject*>(o)->t0 = MonotonicNs();
  Py_INCREF(o);
  return o;
}

PyObject* SpanExit(PyObject* o, PyObject* const*, Py_ssize_t) {
  const int64_t t1 = MonotonicNs();
  auto* self = reinterpret_cast<SpanObject*>(o);
  const int64_t t0 = self->t0;
  if (t0 == 0) {
    PyObject* msg =
        PyUnicode_FromFormat("span %R ended twice (or never started); ignored", self->name);
    WarnOnce("span_twice", msg);
    Py_XDECREF(msg);
    Py_RETURN_FALSE;
  }
  self->t0 = 0;
  if (instrument::Active()) {
    instrument::RecordSpan(Text(self->name), Text(self->category), g_mode_text, g_step,
                           t0 + instrument::ClockOffsetNs(), t1 - t0, Text(self->args));
  }
  Py_RETURN_FALSE;
}

// @span("name") on a function: Python's functools.wraps does the wrapping.
PyObject* SpanCall(PyObject* o, PyObject* args, PyObject* kwargs) {
  if (PyTuple_GET_SIZE(args) != 1 || (kwargs != nullptr && PyDict_GET_SIZE(kwargs) > 0)) {
    PyErr_SetString(PyExc_TypeError, "span(...) decorates one function");
    return nullptr;
  }
  PyObject* r = CallRecorder("_decorate", o, PyTuple_GET_ITEM(args, 0));
  if (r == nullptr && !PyErr_Occurred()) {
    PyErr_SetString(PyExc_RuntimeError, "trainprof: cannot decorate");
  }
  return r;
}

PyMethodDef kSpanMethods[] = {
    {"__enter__", SpanEnter, METH_NOARGS, nullptr},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(SpanExit)),
     METH_FASTCALL, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef kSpanMembers[] = {
    {"name", T_OBJECT, offsetof(SpanObject, name), READONLY, nullptr},
    {"category", T_OBJECT, offsetof(SpanObject, category), READONLY, nullptr},
    {"args", T_OBJECT, offsetof(SpanObject, args), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyObject* SpanRepr(PyObject* o) {
  auto* self = reinterpret_cast<SpanObject*>(o);
  return PyUnicode_FromFormat("trainprof.span(%R, %R)", self->name, self->category);
}

// ---------------------------------------------------------------------------------------------
// Lifecycle and process-level facts.

PyObject* StatusText(const Status& st) {
  return PyUnicode_FromString(st.ok() ? "" : st.message().c_str());
}

PyObject* Start(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"run_dir",        "node",       "rank",
                             "local_rank",     "world_size", "flush_interval_ns",
                             "write_run_json", "run_name",   nullptr};
  const char* run_dir = nullptr;
  const char* node = "";
  PyObject *rank = Py_None, *local_rank = Py_None, *world_size = Py_None;
  long long flush_interval_ns = 500'000'000;
  int write_run_json = 1;
  const char* run_name = "";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|sOOOLps", const_cast<char**>(kw), &run_dir,
                                   &node, &rank, &local_rank, &world_size, &flush_interval_ns,
                                   &write_run_json, &run_name)) {
    return nullptr;
  }
  instrument::RecorderOptions o;
  o.run_dir = run_dir;
  o.node = node;
  o.rank = IntOrMissing(rank);
  o.local_rank = IntOrMissing(local_rank);
  o.world_size = IntOrMissing(world_size);
  o.flush_interval_ns = flush_interval_ns;
  o.write_run_json = write_run_json != 0;
  o.run_name = run_name;
  Status st;
  {
    PyThreadState* save = PyEval_SaveThread();
    st = instrument::Start(o);
    PyEval_RestoreThread(save);
  }
  return StatusText(st);
}

PyObject* Stop(PyObject*, PyObject*) {
  PyThreadState* save = PyEval_SaveThread();
  Status st = instrument::Stop();
  PyEval_RestoreThread(save);
  return StatusText(st);
}

PyObject* Flush(PyObject*, PyObject*) {
  PyThreadState* save = PyEval_SaveThread();
  Status st = instrument::FlushNow();
  PyEval_RestoreThread(save);
  return StatusText(st);
}

PyObject* Active(PyObject*, PyObject*) { return PyBool_FromLong(instrument::Active()); }

PyObject* ClockOffset(PyObject*, PyObject*) {
  return PyLong_FromLongLong(instrument::ClockOffsetNs());
}

PyObject* Now(PyObject*, PyObject*) { return PyLong_FromLongLong(instrument::NowNs()); }

PyObject* SetRank(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"rank", "local_rank", "world_size", nullptr};
  PyObject *rank = Py_None, *local_rank = Py_None, *world_size = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO", const_cast<char**>(kw), &rank, &local_rank,
                                   &world_size)) {
    return nullptr;
  }
  instrument::SetRank(IntOrMissing(rank), IntOrMissing(local_rank), IntOrMissing(world_size));
  Py_RETURN_NONE;
}

PyObject* Annotate(PyObject*, PyObject* args) {
  const char *k, *v;
  Py_ssize_t kn, vn;
  if (!PyArg_ParseTuple(args, "s#s#", &k, &kn, &v, &vn)) return nullptr;
  instrument::Annotate({k, static_cast<size_t>(kn)}, {v, static_cast<size_t>(vn)});
  Py_RETURN_NONE;
}

PyObject* AddCounter(PyObject*, PyObject* args) {
  const char* k;
  Py_ssize_t kn;
  long long d;
  if (!PyArg_ParseTuple(args, "s#L", &k, &kn, &d)) return nullptr;
  instrument::AddCounter({k, static_cast<size_t>(kn)}, d);
  Py_RETURN_NONE;
}

PyObject* SetMeta(PyObject*, PyObject* args) {
  const char *k, *v;
  Py_ssize_t kn, vn;
  if (!PyArg_ParseTuple(args, "s#s#", &k, &kn, &v, &vn)) return nullptr;
  instrument::SetMeta({k, static_cast<size_t>(kn)}, {v, static_cast<size_t>(vn)});
  Py_RETURN_NONE;
}

PyObject* Stats(PyObject*, PyObject*) {
  instrument::RecorderStats s = instrument::Stats();
  return Py_BuildValue(
      "{s:L,s:L,s:L,s:L,s:L,s:L,s:L}", "dropped_events", static_cast<long long>(s.dropped_events),
      "no_block_drops", static_cast<long long>(s.no_block_drops), "pool_empty_allocations",
      static_cast<long long>(s.pool_empty_allocations), "spare_blocks",
      static_cast<long long>(s.spare_blocks), "written_events",
      static_cast<long long>(s.written_events), "flushes", static_cast<long long>(s.flushes),
      "flush_cpu_ns", static_cast<long long>(s.flush_cpu_ns));
}

// set_bulk(on): bulk writes on this thread (instrument::SetBulkWrites): a profiler's events
// stored at once allocate blocks rather than being dropped when the thread's pool runs out.
PyObject* SetBulk(PyObject*, PyObject* arg) {
  const int on = PyObject_IsTrue(arg);
  if (on < 0) return nullptr;
  instrument::SetBulkWrites(on != 0);
  Py_RETURN_NONE;
}

template <typename F>
PyCFunction Fast(F f) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f));
}

PyMethodDef kMethods[] = {
    {"record_span", Fast(RecordSpan), METH_FASTCALL | METH_KEYWORDS,
     "record_span(name, category, start, end, step=CURRENT, mode=CURRENT, args=None)"},
    {"record_instant", Fast(RecordInstant), METH_FASTCALL | METH_KEYWORDS,
     "record_instant(name, category, ts=None, step=CURRENT, mode=CURRENT, args=None)"},
    {"set_step", Fast(SetStep), METH_FASTCALL, "set_step(step or None, mode)"},
    {"start", Fast(Start), METH_VARARGS | METH_KEYWORDS, "start the recorder: '' or an error"},
    {"stop", Stop, METH_NOARGS, "flush and close: '' or an error"},
    {"set_bulk", SetBulk, METH_O, "set_bulk(on): this thread's records may allocate blocks"},
    {"flush", Flush, METH_NOARGS, "make everything durable now: '' or an error"},
    {"active", Active, METH_NOARGS, nullptr},
    {"clock_offset_ns", ClockOffset, METH_NOARGS, "epoch ns minus CLOCK_MONOTONIC ns"},
    {"now_ns", Now, METH_NOARGS, "the recorder's clock (epoch ns)"},
    {"set_rank", Fast(SetRank), METH_VARARGS | METH_KEYWORDS, nullptr},
    {"annotate", Annotate, METH_VARARGS, nullptr},
    {"add_counter", AddCounter, METH_VARARGS, nullptr},
    {"set_meta", SetMeta, METH_VARARGS, nullptr},
    {"stats", Stats, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                       "trainprof._rec",
                       nullptr,
                       -1,
                       kMethods,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr};

void InitSpanType() {
  PyTypeObject& t = SpanType;
  Py_SET_REFCNT(&t, 1);  // a static type: PyType_Ready sets its type (PyType_Type)
  t.tp_name = "trainprof.span";
  t.tp_basicsize = sizeof(SpanObject);
  t.tp_dealloc = SpanDealloc;
  t.tp_repr = SpanRepr;
  t.tp_call = SpanCall;
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc =
      "with trainprof.span(\"name\"): or @trainprof.span(\"name\"): a timed region carrying "
      "the current step and mode. Ending a span twice warns once.";
  t.tp_methods = kSpanMethods;
  t.tp_members = kSpanMembers;
  t.tp_new = SpanNew;
  t.tp_vectorcall = SpanVectorcall;  // span("name") without building a tuple
}

}  // namespace

PyMODINIT_FUNC PyInit__rec() {
  InitSpanType();
  if (PyType_Ready(&SpanType) < 0) return nullptr;
  PyObject* m = PyModule_Create(&kModule);
  if (m == nullptr) return nullptr;
  g_mode = PyUnicode_InternFromString("");
  g_mode_text = Text(g_mode);
  g_current = PyObject_CallNoArgs(reinterpret_cast<PyObject*>(&PyBaseObject_Type));
  g_default_category = PyUnicode_InternFromString("user");
  g_str_step = PyUnicode_InternFromString("step");
  g_str_mode = PyUnicode_InternFromString("mode");
  g_str_args = PyUnicode_InternFromString("args");
  g_str_ts = PyUnicode_InternFromString("ts");
  g_str_category = PyUnicode_InternFromString("category");
  g_str_name = PyUnicode_InternFromString("name");
  for (PyObject* o : {g_mode, g_current, g_default_category, g_str_step, g_str_mode, g_str_args,
                      g_str_ts, g_str_category, g_str_name}) {
    if (o == nullptr) {
      Py_DECREF(m);
      return nullptr;
    }
  }
  Py_INCREF(&SpanType);
  if (PyModule_AddObject(m, "Span", reinterpret_cast<PyObject*>(&SpanType)) < 0 ||
      PyModule_AddObject(m, "CURRENT", g_current) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  Py_INCREF(g_current);  // the module took one reference; the global keeps its own
  return m;
}
