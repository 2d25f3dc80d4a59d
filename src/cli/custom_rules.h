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
// While `record`'s job runs, LiveCustomRules keeps one runner (`... --live`) that evaluates the
// rules implementing update() on what the run gained at each poll; findings come back as they
// are made, to be stored and acted on like the built-in rules' live findings.
//
// Threads: the functions are called from the CLI's main thread; a LiveCustomRules from one
// thread at a time (the live thread, then the main thread at the end).

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analyze/rules/rule.h"
#include "base/status.h"

namespace trainprof::cli {

struct CustomRulesOptions {
  std::vector<std::string> files;      // Python files defining Rule subclasses
  std::vector<std::string> overrides;  // NAME.param=value for the custom rules
  std::vector<std::string> required;   // names a configuration gave: each must be defined
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

// Prepares this process's environment for a Python driver of this installation: the package's
// parent first on PYTHONPATH (so `-m trainprof.X` imports this trainprof, not another one) and
// TRAINPROF_BIN naming this executable. Idempotent.
void PreparePythonHandOver();

// Replaces this process with `python -m MODULE ARGS...` (after PreparePythonHandOver). Returns
// only when the interpreter cannot be started, with an error naming `what` it was for.
Status ExecPythonModule(const std::string& module, const std::vector<std::string>& args,
                        const std::string& what);

// Runs the custom rules on the run in `run_dir`. A rule that fails is an entry of `errors`;
// the returned status is an error only when the runner could not run at all (no interpreter,
// no trainprof package, an unreadable run, a bad --rule, a timeout).
StatusOr<CustomRulesOutcome> RunCustomRules(const std::string& run_dir,
                                            const CustomRulesOptions& options);

// Parses the runner's JSON output (tests).
StatusOr<CustomRulesOutcome> ParseCustomRulesOutput(const std::string& json_text);

class LiveCustomRules {
 public:
  // Starts the runner on `run_dir` (run.json must exist).
  static StatusOr<std::unique_ptr<LiveCustomRules>> Start(const std::string& run_dir,
                                                          const CustomRulesOptions& options);
  ~LiveCustomRules();  // stops a runner still running
  LiveCustomRules(const LiveCustomRules&) = delete;
  LiveCustomRules& operator=(const LiveCustomRules&) = delete;

  // Never waits: returns the findings the runner has reported since the last call, and asks it
  // to poll again once it has answered the previous request (a slow rule delays only itself).
  std::vector<model::Finding> Poll();
  // Tells the runner the job has ended and waits (up to the options' timeout) for its last
  // findings (into `last`: those not returned by Poll) and every rule's entry.
  StatusOr<CustomRulesOutcome> Finish(std::vector<model::Finding>* last);

  int64_t polls_answered() const { return polls_answered_; }

 private:
  LiveCustomRules() = default;
  // Reads what the runner wrote, waiting up to `wait_ms`; handles each complete line.
  void Read(int wait_ms);
  void HandleLine(const std::string& line);
  void Stop();

  std::string runner_;  // argv[0], for messages
  int64_t timeout_ns_ = 0;
  pid_t pid_ = 0;
  int out_fd_ = -1;
  int in_fd_ = -1;
  std::string buffer_;
  bool eof_ = false;
  bool waiting_ = false;  // a poll was asked and not answered yet
  int64_t polls_answered_ = 0;
  std::vector<model::Finding> found_;
  std::vector<std::string> bad_lines_;
  std::optional<CustomRulesOutcome> final_;
};

}  // namespace trainprof::cli
