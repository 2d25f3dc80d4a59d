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

#include "base/files.h"
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

// Runs argv with `env`, collecting stdout; stderr passes through (what the rules print).
StatusOr<int> RunCollectingStdout(const std::vector<std::string>& argv,
                                  const std::vector<std::string>& env, int64_t timeout_ns,
                                  std::string* out) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Internal("pipe: " + ErrnoMessage(errno));
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  // posix_spawn, not fork: this process has threads. The runner gets an empty signal mask
  // (`record` blocks the signals it relays).
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (err != 0) {
    close(fds[0]);
    return NotFound("cannot run the Python interpreter '" + argv[0] + "': " + ErrnoMessage(err) +
                    " (set --python or $TRAINPROF_PYTHON)");
  }
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
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Internal("waitpid: " + ErrnoMessage(errno));
  }
  if (timed_out) {
    return Unavailable("custom rules did not finish within " +
                       std::to_string(timeout_ns / 1'000'000'000) + " s and were stopped");
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

std::string JsonString(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int64_t JsonInt(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : 0;
}

}  // namespace

std::string FindPythonPackageDir() {
  if (const char* dir = std::getenv("TRAINPROF_PYTHON_PACKAGE_DIR"); dir != nullptr && *dir) {
    return dir;
  }
  // Run as <package>/bin/trainprof: the package is above us.
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    const std::string package = Parent(Parent(std::string(exe, static_cast<size_t>(n))));
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
        model::Finding finding;
        finding.rule = r.name;
        if (!model::ParseSeverity(JsonString(f, "severity"), &finding.severity)) {
          return InvalidArgument("custom rule " + r.name + ": bad severity in the runner output");
        }
        finding.node = JsonString(f, "node");
        finding.device = JsonString(f, "device");
        finding.start_ns = JsonInt(f, "start_ns");
        finding.end_ns = JsonInt(f, "end_ns");
        finding.message = JsonString(f, "message");
        finding.recommendation = JsonString(f, "recommendation");
        finding.evidence_json =
            f.contains("evidence") && f["evidence"].is_object() ? f["evidence"].dump() : "{}";
        r.findings.push_back(std::move(finding));
      }
    }
    outcome.results.push_back(std::move(r));
  }
  if (j.contains("errors") && j["errors"].is_array()) {
    for (const nlohmann::json& e : j["errors"]) {
      const std::string rule = JsonString(e, "rule");
      outcome.errors.push_back("custom " + (rule.empty() ? "" : "rule " + rule + " in ") +
                               JsonString(e, "file") + ": " + JsonString(e, "error"));
    }
  }
  return outcome;
}

StatusOr<CustomRulesOutcome> RunCustomRules(const std::string& run_dir,
                                            const CustomRulesOptions& options) {
  if (options.files.empty()) return CustomRulesOutcome{};
  const std::string package = FindPythonPackageDir();
  std::vector<std::string> argv = {FindPython(options.python), "-m", "trainprof.rules_runner",
                                   run_dir, "--json"};
  for (const std::string& f : options.files) {
    argv.push_back("--custom");
    argv.push_back(f);
  }
  for (const std::string& o : options.overrides) {
    argv.push_back("--rule");
    argv.push_back(o);
  }
  std::string output;
  TP_ASSIGN_OR_RETURN(
      int code, RunCollectingStdout(argv, RunnerEnvironment(package), options.timeout_ns, &output));
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

}  // namespace trainprof::cli
