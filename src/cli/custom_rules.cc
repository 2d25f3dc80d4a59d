#include "cli/custom_rules.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "analyze/rules/actions.h"
#include "base/children.h"
#include "base/files.h"
#include "base/json_dump.h"
#include "base/platform.h"
#include "base/time.h"
#include "model/finding.h"

extern char** environ;

namespace trainprof::cli {
namespace {

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// The environment of the runner: ours, with the package on PYTHONPATH and trainprof's own
// instrumentation off (the runner is not part of the job).
std::vector<std::string> RunnerEnvironment(const std::string& package_dir) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!package_dir.empty()) {
    const std::string root = Parent(package_dir);
    auto it = env.find("PYTHONPATH");
    env["PYTHONPATH"] = it == env.end() || it->second.empty() ? root : root + ":" + it->second;
  }
  env["TRAINPROF_DISABLE"] = "1";
  env.erase("TRAINPROF_RUN_DIR");
  env.erase("TRAINPROF_SOCKET");
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

struct Spawned {
  pid_t pid = 0;
  int out_fd = -1;  // the child's stdout
  int in_fd = -1;   // the child's stdin, when asked for
};

// Starts argv with `env`, its stdout (and stdin when `with_stdin`) on pipes; stderr passes
// through (what the rules print).
StatusOr<Spawned> Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                        bool with_stdin) {
  int out[2];
  int in[2] = {-1, -1};
  if (platform::PipeCloseOnExec(out) != 0) return Internal("pipe: " + ErrnoMessage(errno));
  if (with_stdin && platform::PipeCloseOnExec(in) != 0) {
    close(out[0]);
    close(out[1]);
    return Internal("pipe: " + ErrnoMessage(errno));
  }
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  // posix_spawn, not fork: this process has threads. The runner gets an empty signal mask
  // (`record` blocks the signals it relays).
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  if (with_stdin) posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  Spawned s;
  int err = 0;
  SpawnOwnedChild([&] {  // owned: `record` reaps orphans meanwhile
    err = posix_spawnp(&s.pid, args[0], &actions, &attr, args.data(), envp.data());
    return err == 0 ? s.pid : -1;
  });
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  if (with_stdin) close(in[0]);
  if (err != 0) {
    close(out[0]);
    if (with_stdin) close(in[1]);
    return NotFound("cannot run the Python interpreter '" + argv[0] + "': " + ErrnoMessage(err) +
                    " (set --python or $TRAINPROF_PYTHON)");
  }
  s.out_fd = out[0];
  s.in_fd = in[1];
  return s;
}

int WaitStatus(pid_t pid) {
  int status = 0;
  if (WaitOwnedChild(pid, &status, 0) != pid) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

// Runs argv with `env`, collecting stdout; stderr passes through (what the rules print).
StatusOr<int> RunCollectingStdout(const std::vector<std::string>& argv,
                                  const std::vector<std::string>& env, int64_t timeout_ns,
                                  std::string* out) {
  TP_ASSIGN_OR_RETURN(Spawned child, Spawn(argv, env, /*with_stdin=*/false));
  const pid_t pid = child.pid;
  int fds[1] = {child.out_fd};
  const int64_t deadline = MonotonicNowNs() + timeout_ns;
  char buf[65536];
  bool timed_out = false;
  while (true) {
    const int64_t left_ms = (deadline - MonotonicNowNs()) / 1'000'000;
    if (left_ms <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    if (r == 0) continue;
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  const int status = WaitStatus(pid);
  if (timed_out) {
    return Unavailable("custom rules did not finish within " +
                       std::to_string(timeout_ns / 1'000'000'000) + " s and were stopped");
  }
  if (status < 0) return Internal("waitpid: " + ErrnoMessage(errno));
  return status;
}

std::string JsonString(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int64_t JsonInt(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : 0;
}

StatusOr<model::Finding> ParseFinding(const nlohmann::json& f, const std::string& rule) {
  model::Finding finding;
  finding.rule = rule;
  if (!model::ParseSeverity(JsonString(f, "severity"), &finding.severity)) {
    return InvalidArgument("custom rule " + rule + ": bad severity in the runner output");
  }
  finding.node = JsonString(f, "node");
  finding.device = JsonString(f, "device");
  finding.start_ns = JsonInt(f, "start_ns");
  finding.end_ns = JsonInt(f, "end_ns");
  finding.message = JsonString(f, "message");
  finding.recommendation = JsonString(f, "recommendation");
  finding.evidence_json =
      f.contains("evidence") && f["evidence"].is_object() ? DumpJson(f["evidence"]) : "{}";
  return finding;
}

std::vector<std::string> ParseErrors(const nlohmann::json& j) {
  std::vector<std::string> out;
  if (!j.contains("errors") || !j["errors"].is_array()) return out;
  for (const nlohmann::json& e : j["errors"]) {
    const std::string rule = JsonString(e, "rule");
    out.push_back("custom " + (rule.empty() ? "" : "rule " + rule + " in ") +
                  JsonString(e, "file") + ": " + JsonString(e, "error"));
  }
  return out;
}

std::vector<std::string> RunnerArgv(const std::string& run_dir, const CustomRulesOptions& options,
                                    const char* mode) {
  std::vector<std::string> argv = {FindPython(options.python), "-m", "trainprof.rules_runner",
                                   run_dir, mode};
  for (const std::string& f : options.files) {
    argv.push_back("--custom");
    argv.push_back(f);
  }
  for (const std::string& o : options.overrides) {
    argv.push_back("--rule");
    argv.push_back(o);
  }
  for (const std::string& name : options.required) {
    argv.push_back("--require");
    argv.push_back(name);
  }
  return argv;
}

}  // namespace

std::string FindPythonPackageDir() {
  if (const char* dir = std::getenv("TRAINPROF_PYTHON_PACKAGE_DIR"); dir != nullptr && *dir) {
    return dir;
  }
  // Run as <package>/bin/trainprof: the package is above us.
  if (const std::string exe = platform::SelfExecutablePath(); !exe.empty()) {
    const std::string package = Parent(Parent(exe));
    if (PathExists(package + "/rules_runner.py")) return package;
  }
  return "";
}

std::string FindPython(const std::string& option) {
  if (!option.empty()) return option;
  if (const char* p = std::getenv("TRAINPROF_PYTHON"); p != nullptr && *p) return p;
  // <venv>/lib/pythonX.Y/site-packages/trainprof -> <venv>/bin/python
  const std::string package = FindPythonPackageDir();
  if (!package.empty()) {
    const std::string venv = Parent(Parent(Parent(Parent(package))));
    if (PathExists(venv + "/pyvenv.cfg") && IsExecutable(venv + "/bin/python")) {
      return venv + "/bin/python";
    }
  }
  return "python3";
}

void PreparePythonHandOver() {
  if (const std::string package = FindPythonPackageDir(); !package.empty()) {
    const std::string root = package.substr(0, package.rfind('/'));
    const char* old = std::getenv("PYTHONPATH");
    if (old == nullptr || std::string(old).rfind(root + ":", 0) != 0) {
      const std::string path = old != nullptr && *old ? root + ":" + old : root;
      setenv("PYTHONPATH", path.c_str(), 1);
    }
  }
  if (const std::string exe = platform::SelfExecutablePath(); !exe.empty()) {
    setenv("TRAINPROF_BIN", exe.c_str(), 1);
  }
}

Status ExecPythonModule(const std::string& module, const std::vector<std::string>& args,
                        const std::string& what) {
  const std::string python = FindPython("");
  PreparePythonHandOver();
  std::vector<std::string> argv = {python, "-m", module};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c_argv;
  for (std::string& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  execvp(c_argv[0], c_argv.data());
  return NotFound("cannot run the Python interpreter '" + python + "' for " + what + ": " +
                  ErrnoMessage(errno) + " (set $TRAINPROF_PYTHON)");
}

StatusOr<CustomRulesOutcome> ParseCustomRulesOutput(const std::string& json_text) {
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("rules") || !j["rules"].is_array()) {
    return InvalidArgument("the custom rules runner printed no results JSON");
  }
  CustomRulesOutcome outcome;
  for (const nlohmann::json& e : j["rules"]) {
    analyze::rules::RuleResult r;
    r.name = JsonString(e, "name");
    r.triggered = e.value("triggered", false);
    r.violations = JsonInt(e, "violations");
    r.datapoints = JsonInt(e, "datapoints");
    if (e.contains("parameters") && e["parameters"].is_object()) r.parameters = e["parameters"];
    if (e.contains("details") && e["details"].is_object()) r.details = e["details"];
    if (e.contains("findings") && e["findings"].is_array()) {
      for (const nlohmann::json& f : e["findings"]) {
        TP_ASSIGN_OR_RETURN(model::Finding finding, ParseFinding(f, r.name));
        r.findings.push_back(std::move(finding));
      }
    }
    outcome.results.push_back(std::move(r));
  }
  outcome.errors = ParseErrors(j);
  return outcome;
}

StatusOr<CustomRulesOutcome> RunCustomRules(const std::string& run_dir,
                                            const CustomRulesOptions& options) {
  if (options.files.empty()) return CustomRulesOutcome{};
  const std::vector<std::string> argv = RunnerArgv(run_dir, options, "--json");
  std::string output;
  TP_ASSIGN_OR_RETURN(int code, RunCollectingStdout(argv, RunnerEnvironment(FindPythonPackageDir()),
                                                    options.timeout_ns, &output));
  if (code == 2) {
    return InvalidArgument("custom rules not run (see the error above from " + argv[0] + ")");
  }
  auto outcome = ParseCustomRulesOutput(output);
  if (!outcome.ok()) {
    return Internal("custom rules: " + argv[0] + " -m trainprof.rules_runner failed (exit status " +
                    std::to_string(code) +
                    "; is the trainprof package importable by it? set --python or "
                    "$TRAINPROF_PYTHON)");
  }
  return outcome;
}

StatusOr<std::unique_ptr<LiveCustomRules>> LiveCustomRules::Start(
    const std::string& run_dir, const CustomRulesOptions& options) {
  const std::vector<std::string> argv = RunnerArgv(run_dir, options, "--live");
  TP_ASSIGN_OR_RETURN(Spawned child,
                      Spawn(argv, RunnerEnvironment(FindPythonPackageDir()), /*with_stdin=*/true));
  std::unique_ptr<LiveCustomRules> live(new LiveCustomRules());
  live->runner_ = argv[0];
  live->timeout_ns_ = options.timeout_ns;
  live->pid_ = child.pid;
  live->out_fd_ = child.out_fd;
  live->in_fd_ = child.in_fd;
  return live;
}

LiveCustomRules::~LiveCustomRules() { Stop(); }

void LiveCustomRules::Stop() {
  if (in_fd_ >= 0) close(in_fd_);
  if (out_fd_ >= 0) close(out_fd_);
  in_fd_ = out_fd_ = -1;
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    WaitStatus(pid_);
    pid_ = 0;
  }
}

void LiveCustomRules::Read(int wait_ms) {
  char buf[65536];
  const int64_t deadline = MonotonicNowNs() + int64_t{wait_ms} * 1'000'000;
  while (!eof_ && out_fd_ >= 0) {
    const int64_t left_ms = std::max<int64_t>(0, (deadline - MonotonicNowNs()) / 1'000'000);
    pollfd p{out_fd_, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      eof_ = true;
      break;
    }
    if (r == 0) {
      if (left_ms == 0) break;
      continue;
    }
    const ssize_t n = read(out_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof_ = true;
      break;
    }
    buffer_.append(buf, static_cast<size_t>(n));
    size_t newline;
    while ((newline = buffer_.find('\n')) != std::string::npos) {
      HandleLine(buffer_.substr(0, newline));
      buffer_.erase(0, newline + 1);
    }
    if (final_) break;
  }
}

void LiveCustomRules::HandleLine(const std::string& line) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    if (bad_lines_.size() < 5) bad_lines_.push_back(line.substr(0, 200));
    return;
  }
  if (j.value("final", false)) {
    auto outcome = ParseCustomRulesOutput(line);
    if (outcome.ok()) final_ = std::move(*outcome);
    return;
  }
  waiting_ = false;
  ++polls_answered_;
  if (!j.contains("findings") || !j["findings"].is_array()) return;
  for (const nlohmann::json& f : j["findings"]) {
    auto finding = ParseFinding(f, JsonString(f, "rule"));
    if (finding.ok()) found_.push_back(std::move(*finding));
  }
}

std::vector<model::Finding> LiveCustomRules::Poll() {
  Read(/*wait_ms=*/0);
  if (!waiting_ && !eof_ && in_fd_ >= 0) {
    if (analyze::rules::WriteToPipe(in_fd_, "poll\n")) {
      waiting_ = true;
    } else {
      eof_ = true;
    }
  }
  return std::exchange(found_, {});
}

StatusOr<CustomRulesOutcome> LiveCustomRules::Finish(std::vector<model::Finding>* last) {
  if (in_fd_ >= 0) {
    (void)analyze::rules::WriteToPipe(in_fd_, "finish\n");
    close(in_fd_);
    in_fd_ = -1;
  }
  const int64_t deadline = MonotonicNowNs() + timeout_ns_;
  while (!final_ && !eof_ && MonotonicNowNs() < deadline) {
    Read(static_cast<int>(std::min<int64_t>((deadline - MonotonicNowNs()) / 1'000'000, 1000)));
  }
  *last = std::exchange(found_, {});
  const bool timed_out = !final_ && !eof_;
  int status = 0;
  if (timed_out) {
    Stop();
  } else {
    close(out_fd_);
    out_fd_ = -1;
    status = WaitStatus(pid_);
    pid_ = 0;
  }
  if (final_) return std::move(*final_);
  if (timed_out) {
    return Unavailable("custom rules did not finish within " +
                       std::to_string(timeout_ns_ / 1'000'000'000) +
                       " s after the job and were "
                       "stopped");
  }
  std::string why = status == 2
                        ? "see the error above from " + runner_
                        : runner_ + " -m trainprof.rules_runner --live exited with status " +
                              std::to_string(status);
  if (!bad_lines_.empty()) why += "; it printed: " + bad_lines_.front();
  return Internal("custom rules ended without results (" + why + ")");
}

}  // namespace trainprof::cli
