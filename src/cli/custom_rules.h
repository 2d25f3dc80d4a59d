#pragma once
// Custom rules in Python (trainprof.rules.Rule subclasses): `trainprof rules RUN --custom FILE`
// and `trainprof record --custom-rule FILE` run the Python runner
// (`python -m trainprof.rules_runner RUN --custom FILE... --json`) as a subprocess and merge
// its entries with the built-in rules'.
//
// The interpreter: --python, else $TRAINPROF_PYTHON (the console script sets it to its own
// interpreter), else the virtual environment's python the package is installed in, else
// python3 on PATH. The package directory (put on PYTHONPATH of the runner):
// $TRAINPROF_PYTHON_PACKAGE_DIR, else <package>/ when this executable is <package>/bin/trainprof.
//
// Threads: plain functions, called from the CLI's main thread.

#include <cstdint>
#include <string>
#include <vector>

#include "analyze/rules/rule.h"
#include "base/status.h"

namespace trainprof::cli {

struct CustomRulesOptions {
  std::vector<std::string> files;      // Python files defining Rule subclasses
  std::vector<std::string> overrides;  // NAME.param=value for the custom rules
  std::string python;                  // interpreter; "" = found as described above
  int64_t timeout_ns = 600'000'000'000;
};

struct CustomRulesOutcome {
  std::vector<analyze::rules::RuleResult> results;
  // One line per file that did not load or rule that failed, naming the file and the rule.
  std::vector<std::string> errors;
};

// The interpreter and package directory as described above.
std::string FindPython(const std::string& option);
std::string FindPythonPackageDir();

// Runs the custom rules on the run in `run_dir`. A rule that fails is an entry of `errors`;
// the returned status is an error only when the runner could not run at all (no interpreter,
// no trainprof package, an unreadable run, a bad --rule, a timeout).
StatusOr<CustomRulesOutcome> RunCustomRules(const std::string& run_dir,
                                            const CustomRulesOptions& options);

// Parses the runner's JSON output (tests).
StatusOr<CustomRulesOutcome> ParseCustomRulesOutput(const std::string& json_text);

}  // namespace trainprof::cli
