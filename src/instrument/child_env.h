#pragma once
// The environment a recorder (`trainprof record`) gives the job it starts so that every Python
// process of the job instruments itself and writes into the run. The contract is documented in
// docs/instrumentation.md; this function is its one implementation on the C++ side.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace trainprof::instrument {

// Environment variable names (the contract between record and the in-process hook).
inline constexpr const char* kEnvRunDir = "TRAINPROF_RUN_DIR";
inline constexpr const char* kEnvNode = "TRAINPROF_NODE";
inline constexpr const char* kEnvAuto = "TRAINPROF_AUTO";  // "0" = --no-auto
inline constexpr const char* kEnvDisable = "TRAINPROF_DISABLE";
inline constexpr const char* kEnvDetailSteps = "TRAINPROF_DETAIL_STEPS";
inline constexpr const char* kEnvPythonProfile = "TRAINPROF_PYTHON_PROFILE";
// Time windows, "START_NS-END_NS" in epoch ns (record converts --detail-time's seconds).
inline constexpr const char* kEnvDetailTime = "TRAINPROF_DETAIL_TIME";
inline constexpr const char* kEnvPythonProfileTime = "TRAINPROF_PYTHON_PROFILE_TIME";
inline constexpr const char* kEnvPackageDir = "TRAINPROF_PYTHON_PACKAGE_DIR";
// Training health (train_loss, grad_norm) sampled every N training steps; "0" = off.
inline constexpr const char* kEnvHealthEvery = "TRAINPROF_HEALTH_EVERY";
inline constexpr const char* kEnvRecorderActive = "TRAINPROF_RECORDER";  // "record"

struct ChildEnvOptions {
  std::string run_dir;             // absolute path of the run directory
  std::string node;                // the node name the recorder uses
  std::string python_package_dir;  // the trainprof package dir; "" = $TRAINPROF_PYTHON_PACKAGE_DIR
  bool auto_instrument = true;     // false for --no-auto
  std::string detail_steps;        // "10-20" or ""
  std::string python_profile;      // "10-12" or ""
  std::string detail_time;         // "START_NS-END_NS" or "" (see ParseTimeWindow)
  std::string python_profile_time;
  int64_t health_every = -1;  // --health-every N (0 = off); -1: not set (the job's default, 10)
};

// A step range as --detail-steps takes it: "10-20" or "7" (steps from 0). Errors say why.
Status CheckStepRange(const std::string& option, std::string_view spec);

// A time window as --detail-time takes it, START+SECONDS: START in seconds after `origin_ns`
// (the recording's start), or a Unix time in seconds when it is 1e9 or more; SECONDS > 0. Both
// may have decimals. Returns the window as the environment carries it, "START_NS-END_NS".
StatusOr<std::string> ParseTimeWindow(const std::string& option, std::string_view spec,
                                      int64_t origin_ns);

// The variables to set (or replace) in the child's environment, given the recorder's own
// environment `parent`. PYTHONPATH gets <package>/_hook prepended (kept once). Returns nothing
// for PYTHONPATH when no package directory is known (the child then only gets the run vars).
std::map<std::string, std::string> ChildEnvironment(
    const ChildEnvOptions& options, const std::map<std::string, std::string>& parent);

// The same, read from this process's environ (what record calls).
std::map<std::string, std::string> ChildEnvironmentFromProcess(const ChildEnvOptions& options);

}  // namespace trainprof::instrument
