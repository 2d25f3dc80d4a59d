#pragma once
// What happens when a rule fires, per rule (config.h): log it (the default), stop the job,
// run a command with the finding as JSON on stdin, or POST the finding as JSON to a webhook.
//
// ActionRunner runs actions on its own worker thread so that a slow webhook or command never
// holds up the record loop; Submit() only queues. Every action's outcome is kept (and can be
// stored in the run as an annotation by the caller), including a stop that had to escalate
// to SIGKILL.
//
// Threads: Submit/Drain/TakeOutcomes from any thread; actions run on the worker thread.

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "analyze/rules/config.h"
#include "base/status.h"
#include "model/finding.h"

namespace trainprof::analyze::rules {

struct StopOutcome {
  bool exited_after_sigterm = false;
  bool killed = false;        // SIGKILL was needed after the grace period
  bool already_gone = false;  // the process had exited before we signalled it
  int64_t waited_ns = 0;
};
// Sends SIGTERM to `pid` (to its process group when `process_group`), waits up to `grace_ns`
// for it to exit (a zombie counts as exited: the caller reaps its own child), then SIGKILLs.
StatusOr<StopOutcome> StopProcess(pid_t pid, int64_t grace_ns, bool process_group = false);

struct ActionOutcome {
  std::string rule;
  std::string action;  // log, stop, command, webhook
  bool ok = false;
  std::string detail;  // "exit status 0", "HTTP 200", "SIGKILL after 30 s grace", errors
};

// Writes all of `data` to the pipe `fd` (blocking); false when the reader has gone (EPIPE,
// without a SIGPIPE to this process).
bool WriteToPipe(int fd, const std::string& data);

// Runs `argv` without a shell, writes `input` to its stdin, waits up to `timeout_ns`.
// Returns its exit status (128 + signal when killed by one).
StatusOr<int> RunCommandWithInput(const std::vector<std::string>& argv, const std::string& input,
                                  int64_t timeout_ns);
// POSTs `body` (application/json) to `url` (http://host[:port]/path); returns the HTTP status.
StatusOr<int> PostJson(const std::string& url, const std::string& body, int64_t timeout_ns);

class ActionRunner {
 public:
  // How the recorder stops its job: it knows the child's pid and reaps it. Without one
  // (offline evaluation), a stop action is recorded as not possible.
  using StopFn = std::function<StatusOr<StopOutcome>(const model::Finding&, int64_t grace_ns)>;

  ActionRunner(RuleConfig config, StopFn stop);
  ~ActionRunner();
  ActionRunner(const ActionRunner&) = delete;
  ActionRunner& operator=(const ActionRunner&) = delete;

  // Queues the actions configured for finding.rule (log when none are).
  void Submit(const model::Finding& finding);
  // Waits until every submitted action has run.
  void Drain();
  std::vector<ActionOutcome> TakeOutcomes();

 private:
  void Loop();
  ActionOutcome RunOne(const ActionConfig& action, const model::Finding& finding);

  RuleConfig config_;
  StopFn stop_;
  bool stop_done_ = false;  // the job is stopped once, however many rules ask

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<ActionConfig, model::Finding>> queue_;
  int running_ = 0;
  bool quit_ = false;
  std::vector<ActionOutcome> outcomes_;
  std::thread worker_;
};

// A StopFn for a process the caller started: StopProcess(pid, grace, process_group).
ActionRunner::StopFn StopPid(pid_t pid, bool process_group);

}  // namespace trainprof::analyze::rules
