// `trainprof fleet RUNS...` and `trainprof export parquet RUNS... --out DIR`: hand their
// arguments over, unchanged, to the Python fleet view (`python -m trainprof.fleet`,
// python/trainprof/fleet.py), which reads run summaries (run_summary.h), groups spend in Cost
// Explorer's vocabulary, writes Parquet (pyarrow) and reads and writes object storage
// (docs/fleet.md). The interpreter and the package are found as for custom rules
// (cli/custom_rules.h); $TRAINPROF_BIN names this executable (the fleet view runs
// `trainprof cost --json` on runs without a summary).

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "base/children.h"
#include "base/files.h"
#include "base/platform.h"
#include "cli/command.h"
#include "cli/custom_rules.h"
#include "store/run_directory.h"

extern char** environ;

namespace trainprof::cli {

bool IsObjectStoreUrl(const std::string& path) { return path.find("://") != std::string::npos; }

StatusOr<std::shared_ptr<RunUpload>> StartRunUpload(const std::string& url) {
  std::string tail = url.substr(url.find("://") + 3);
  while (!tail.empty() && tail.back() == '/') tail.pop_back();
  const size_t slash = tail.rfind('/');
  if (slash == std::string::npos || slash + 1 >= tail.size()) {
    return InvalidArgument("--out " + url + ": name the run, e.g. s3://bucket/prefix/RUN");
  }
  auto upload = std::make_shared<RunUpload>();
  upload->url = url;
  upload->local = JoinPath("trainprof-runs", tail.substr(slash + 1));
  if (store::IsRunDirectory(upload->local)) {
    return FailedPrecondition("--out " + url + ": the local copy " + upload->local +
                              " already holds a run; move it away first");
  }
  PreparePythonHandOver();
  setenv("TRAINPROF_DISABLE", "1", 0);
  std::vector<std::string> argv = {
      FindPython(""), "-m", "trainprof.fleet", "sync",
      upload->local,  url,  "--follow",        std::to_string(getpid())};
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  // The job's environment, less trainprof's own hooks (the uploader is not part of the job).
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (kv.rfind("TRAINPROF_RUN_DIR=", 0) == 0 || kv.rfind("TRAINPROF_SOCKET=", 0) == 0) continue;
    env.push_back(kv);
  }
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // SIGTERM (FinishRunUpload's "copy once more and exit") starts blocked: one sent while the
  // uploader's interpreter is still starting stays pending until sync_main has its handler and
  // unblocks it, instead of killing it before it copied anything.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &mask);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  int err = 0;
  pid_t pid = 0;
  SpawnOwnedChild([&] {
    err = posix_spawnp(&pid, args[0], nullptr, &attr, args.data(), envp.data());
    return err == 0 ? pid : -1;
  });
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    return NotFound("--out " + url + ": cannot start the uploader ('" + argv[0] +
                    "': " + ErrnoMessage(err) + "; set $TRAINPROF_PYTHON)");
  }
  upload->pid = pid;
  return upload;
}

void FinishRunUpload(RunUpload& upload, std::ostream& out) {
  if (upload.pid <= 0) return;
  // SIGTERM: the uploader copies what changed once more (summary, report) and exits.
  kill(upload.pid, SIGTERM);
  int status = 0;
  pid_t got = 0;
  for (int i = 0; i < 6000 && (got = WaitOwnedChild(upload.pid, &status, WNOHANG)) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (got == 0) {
    kill(upload.pid, SIGKILL);
    WaitOwnedChild(upload.pid, &status, 0);
    out << "trainprof: warning: the upload to " << upload.url
        << " did not finish in 5 minutes; the run is complete in " << upload.local << "\n";
  } else if (got < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    out << "trainprof: warning: the upload to " << upload.url << " failed; the run is complete in "
        << upload.local << "\n";
  } else {
    out << "trainprof: uploaded to " << upload.url << " (local copy " << upload.local << ")\n";
  }
  upload.pid = 0;
}

std::vector<std::string> FleetViewCommand(const std::string& verb) {
  const std::string python = FindPython("");
  PreparePythonHandOver();
  return {python, "-m", "trainprof.fleet", verb};
}

Status RunFleetHandOver(const std::string& verb, const std::vector<std::string>& args) {
  setenv("TRAINPROF_DISABLE", "1", 1);  // the fleet view is not a training job
  std::vector<std::string> module_args = {verb};
  module_args.insert(module_args.end(), args.begin(), args.end());
  return ExecPythonModule("trainprof.fleet", module_args, verb);
}

void AddFleetCommand(CLI::App& app, CommandAction* /*action*/) {
  // Listed for `trainprof --help`; the arguments never reach CLI11 (see RunFleetHandOver).
  app.add_subcommand("fleet",
                     "Spend across many runs (usage type, phase, tag, user, week), idle spend, "
                     "summed savings; local or s3:// runs (trainprof fleet --help)")
      ->allow_extras()
      ->prefix_command();
}

}  // namespace trainprof::cli
