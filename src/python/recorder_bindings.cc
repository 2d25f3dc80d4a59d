// trainprof._core's part of the recorder: the environment `record` gives a job's processes.
// The recorder itself is trainprof._rec (recorder_module.cc), which the startup hook imports
// without pybind11 or NumPy.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <string>

#include "instrument/child_env.h"

namespace py = pybind11;
using namespace trainprof;

void BindRecorder(py::module_& m) {
  m.def(
      "child_environment",
      [](const std::string& run_dir, const std::string& node, const std::string& package_dir,
         bool auto_instrument, const std::string& detail_steps, const std::string& python_profile,
         std::map<std::string, std::string> parent, const std::string& detail_time,
         const std::string& python_profile_time) {
        instrument::ChildEnvOptions o;
        o.run_dir = run_dir;
        o.node = node;
        o.python_package_dir = package_dir;
        o.auto_instrument = auto_instrument;
        o.detail_steps = detail_steps;
        o.python_profile = python_profile;
        o.detail_time = detail_time;  // "START_NS-END_NS"
        o.python_profile_time = python_profile_time;
        return instrument::ChildEnvironment(o, parent);
      },
      py::arg("run_dir"), py::arg("node") = "", py::arg("package_dir") = "",
      py::arg("auto_instrument") = true, py::arg("detail_steps") = "",
      py::arg("python_profile") = "", py::arg("parent") = std::map<std::string, std::string>{},
      py::arg("detail_time") = "", py::arg("python_profile_time") = "");
}
