#pragma once
// The environment a recorder (`trainprof record`) gives the job it starts so that every Python
// process of the job instruments itself and writes into the run. The contract is documented in
// docs/instrumentation.md; this function is its one implementation on the C++ side.

#include <map>
#include <optional>
#include <string>

namespace trainprof::instrument {

// Environment variable names (the contract between record and the in-process hook).
inline constexpr const char* kEnvRunDir = "TRAINPROF_RUN_DIR";
inline constexpr const char* kEnvNode = "TRAINPROF_NODE";
inline constexpr const char* kEnvAuto = "TRAINPROF_AUTO";  // "0" = --no-auto
inline constexpr const char* kEnvDisable = "TRAINPROF_DISABLE";
inline constexpr const char* kEnvDetailSteps = "TRAINPROF_DETAIL_STEPS";
inline constexpr const char* kEnvPythonProfile = "TRAINPROF_PYTHON_PROFILE";
inline constexpr const char* kEnvPackageDir = "TRAINPROF_PYTHON_PACKAGE_DIR";
inline constexpr const char* kEnvRecorderActive = "TRAINPROF_RECORDER";  // "record"

struct ChildEnvOptions {
  std::string run_dir;             // absolute path of the run directory
  std::string node;                // the node name the recorder uses
  std::string python_package_dir;  // the trainprof package dir; "" = $TRAINPROF_PYTHON_PACKAGE_DIR
  bool auto_instrument = true;     // false for --no-auto
  std::string detail_steps;        // "10-20" or ""
  std::string python_profile;      // "10-12" or ""
};

// The variables to set (or replace) in the child's environment, given the recorder's own
// environment `parent`. PYTHONPATH gets <package>/_hook prepended (kept once). Returns nothing
// for PYTHONPATH when no package directory is known (the child then only gets the run vars).
std::map<std::string, std::string> ChildEnvironment(
    const ChildEnvOptions& options, const std::map<std::string, std::string>& parent);

// The same, read from this process's environ (what record calls).
std::map<std::string, std::string> ChildEnvironmentFromProcess(const ChildEnvOptions& options);

}  // namespace trainprof::instrument
