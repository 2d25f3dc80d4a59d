#include "analyze/rules/actions.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <httplib.h>

#include "analyze/rules/engine.h"
#include "base/children.h"
#include "base/files.h"
#include "base/json_dump.h"
#include "base/logging.h"
#include "base/platform.h"
#include "base/time.h"

namespace trainprof::analyze::rules {
namespace {

void SleepNs(int64_t ns) {
  timespec ts{static_cast<time_t>(ns / kNanosPerSecond), static_cast<long>(ns % kNanosPerSecond)};
  nanosleep(&ts, nullptr);
}

// Whether `pid` has exited: gone, or a zombie waiting for its parent to reap it.
bool Exited(pid_t pid) { return platform::ProcessHasExited(pid); }

}  // namespace

StatusOr<StopOutcome> StopProcess(pid_t pid, int64_t grace_ns, bool process_group) {
  if (pid <= 0) return InvalidArgument("no process to stop (pid " + std::to_string(pid) + ")");
  StopOutcome out;
  if (Exited(pid)) {
    out.already_gone = true;
    return out;
  }
  const pid_t target = process_group ? -pid : pid;
  if (kill(target, SIGTERM) != 0) {
    if (errno == ESRCH) {
      out.already_gone = true;
      return out;
    }
    return Internal("SIGTERM to " + std::to_string(target) + ": " + ErrnoMessage(errno));
  }
  const int64_t start = MonotonicNowNs();
  while (MonotonicNowNs() - start < grace_ns) {
    if (Exited(pid)) {
      out.exited_after_sigterm = true;
      out.waited_ns = MonotonicNowNs() - start;
      return out;
    }
    SleepNs(std::min<int64_t>(10'000'000, grace_ns));
  }
  if (kill(target, SIGKILL) != 0 && errno != ESRCH) {
    return Internal("SIGKILL to " + std::to_string(target) + ": " + ErrnoMessage(errno));
  }
  out.killed = true;
  out.waited_ns = MonotonicNowNs() - start;
  return out;
}

bool WriteToPipe(int fd, const std::string& data) {
  // The reader may have exited: a blocked SIGPIPE turns that into EPIPE here, and the pending
  // signal is consumed before unblocking.
  sigset_t pipe_set, old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = write(fd, data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  timespec zero{0, 0};
  while (sigtimedwait(&pipe_set, nullptr, &zero) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  return written == data.size();
}

StatusOr<int> RunCommandWithInput(const std::vector<std::string>& argv, const std::string& input,
                                  int64_t timeout_ns) {
  if (argv.empty()) return InvalidArgument("empty command");
  int fds[2];
  if (platform::PipeCloseOnExec(fds) != 0) return Internal("pipe: " + ErrnoMessage(errno));
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // posix_spawn, not fork: this process has threads (the store's flusher, this runner).
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[0], STDIN_FILENO);
  pid_t pid = 0;
  int err = 0;
  // Owned: `record` reaps orphans on another thread, and must leave this child's status to us.
  SpawnOwnedChild([&] {
    err = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    return err == 0 ? pid : -1;
  });
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    close(fds[0]);
    close(fds[1]);
    return NotFound("cannot run '" + argv[0] + "': " + ErrnoMessage(err));
  }
  close(fds[0]);
  (void)WriteToPipe(fds[1], input);
  close(fds[1]);

  const int64_t start = MonotonicNowNs();
  int status = 0;
  while (true) {
    const pid_t r = WaitOwnedChild(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0) return Internal("waitpid: " + ErrnoMessage(errno));
    if (MonotonicNowNs() - start > timeout_ns) {
      kill(pid, SIGKILL);
      WaitOwnedChild(pid, &status, 0);
      return Unavailable("command '" + argv[0] + "' timed out and was killed");
    }
    SleepNs(5'000'000);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

StatusOr<int> PostJson(const std::string& url, const std::string& body, int64_t timeout_ns) {
  const std::string prefix = "http://";
  if (url.rfind(prefix, 0) != 0) return InvalidArgument("webhook URL must start with http://");
  const std::string rest = url.substr(prefix.size());
  const size_t slash = rest.find('/');
  const std::string host_port = rest.substr(0, slash);
  const std::string path = slash == std::string::npos ? "/" : rest.substr(slash);
  std::string host = host_port;
  int port = 80;
  const size_t colon = host_port.rfind(':');
  if (colon != std::string::npos) {
    host = host_port.substr(0, colon);
    port = std::atoi(host_port.substr(colon + 1).c_str());
    if (port <= 0 || port > 65535) return InvalidArgument("bad port in webhook URL " + url);
  }
  httplib::Client client(host, port);
  const time_t sec = static_cast<time_t>(timeout_ns / kNanosPerSecond);
  const time_t usec = static_cast<time_t>((timeout_ns % kNanosPerSecond) / 1000);
  client.set_connection_timeout(sec, usec);
  client.set_read_timeout(sec, usec);
  client.set_write_timeout(sec, usec);
  auto res = client.Post(path, body, "application/json");
  if (!res) return Unavailable("POST " + url + ": " + httplib::to_string(res.error()));
  return res->status;
}

ActionRunner::StopFn StopPid(pid_t pid, bool process_group) {
  return [pid, process_group](const model::Finding&, int64_t grace_ns) {
    return StopProcess(pid, grace_ns, process_group);
  };
}

ActionRunner::ActionRunner(RuleConfig config, StopFn stop)
    : config_(std::move(config)), stop_(std::move(stop)) {
  worker_ = std::thread([this] { Loop(); });
}

ActionRunner::~ActionRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void ActionRunner::Submit(const model::Finding& finding) {
  std::vector<ActionConfig> actions;
  auto it = config_.actions.find(finding.rule);
  if (it != config_.actions.end()) actions = it->second;
  // Actions given for ProfilerReport apply to every rule it runs.
  auto all = config_.actions.find(kProfilerReport);
  if (all != config_.actions.end())
    actions.insert(actions.end(), all->second.begin(), all->second.end());
  if (actions.empty()) actions.push_back(ActionConfig{});
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& a : actions) queue_.emplace_back(a, finding);
  }
  cv_.notify_all();
}

void ActionRunner::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && running_ == 0; });
}

std::vector<ActionOutcome> ActionRunner::TakeOutcomes() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ActionOutcome> out;
  out.swap(outcomes_);
  return out;
}

void ActionRunner::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return quit_ || !queue_.empty(); });
    if (queue_.empty()) return;  // quit with nothing left
    auto [action, finding] = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    ActionOutcome outcome = RunOne(action, finding);
    lock.lock();
    outcomes_.push_back(std::move(outcome));
    --running_;
    cv_.notify_all();
  }
}

ActionOutcome ActionRunner::RunOne(const ActionConfig& action, const model::Finding& finding) {
  ActionOutcome out;
  out.rule = finding.rule;
  out.action = ActionTypeName(action.type);
  const std::string json = DumpJson(FindingToJson(finding));
  switch (action.type) {
    case ActionConfig::Type::kLog:
      TP_LOG_WARNING("rule " + finding.rule + " fired on " + finding.node +
                     (finding.device.empty() ? "" : "/" + finding.device) + ": " + finding.message);
      out.ok = true;
      out.detail = "logged";
      break;
    case ActionConfig::Type::kStop: {
      if (!stop_) {
        out.detail = "no running job to stop (offline evaluation)";
        break;
      }
      if (stop_done_) {
        out.ok = true;
        out.detail = "job already stopped";
        break;
      }
      auto r = stop_(finding, action.grace_ns);
      if (!r.ok()) {
        out.detail = r.status().message();
        break;
      }
      stop_done_ = true;
      out.ok = true;
      const std::string grace = FormatDuration(action.grace_ns);
      if (r->already_gone)
        out.detail = "job had already exited";
      else if (r->killed)
        out.detail = "SIGTERM, then SIGKILL after " + grace + " grace";
      else
        out.detail = "SIGTERM; exited after " + FormatDuration(r->waited_ns);
      break;
    }
    case ActionConfig::Type::kCommand: {
      auto r = RunCommandWithInput(action.command, json + "\n", action.timeout_ns);
      out.ok = r.ok() && *r == 0;
      out.detail = r.ok() ? "exit status " + std::to_string(*r) : r.status().message();
      break;
    }
    case ActionConfig::Type::kWebhook: {
      auto r = PostJson(action.url, json, action.timeout_ns);
      out.ok = r.ok() && *r >= 200 && *r < 300;
      out.detail = r.ok() ? "HTTP " + std::to_string(*r) : r.status().message();
      break;
    }
  }
  if (!out.ok && action.type != ActionConfig::Type::kLog) {
    TP_LOG_WARNING("action " + out.action + " for rule " + finding.rule + " failed: " + out.detail);
  }
  return out;
}

}  // namespace trainprof::analyze::rules
