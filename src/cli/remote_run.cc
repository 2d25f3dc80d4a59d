// Run directories on object storage for the native commands: see remote_run.h.

#include "cli/remote_run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/children.h"
#include "base/files.h"
#include "cli/command.h"
#include "cli/custom_rules.h"

extern char** environ;

namespace trainprof::cli {
namespace {

enum class Kind {
  kRun,       // one run, fetched; what the command changes in it is uploaded back
  kSnapshot,  // a run or a prefix of runs (serve), fetched; nothing uploaded back
  kOutput,    // written locally, uploaded after the command
};

struct Remote {
  Kind kind = Kind::kRun;
  std::string option;  // "show RUN", "report --out"... for messages
  std::string url;
  std::string tmp;    // the private temporary directory (mkdtemp)
  std::string local;  // tmp/<the URL's last name>: what the command sees
  std::map<std::string, std::pair<int64_t, int64_t>> fetched;  // rel -> size, mtime (kRun)
};

std::vector<Remote>& Registry() {
  static std::vector<Remote> remotes;
  return remotes;
}

std::string TempRoot() {
  const char* t = std::getenv("TMPDIR");
  return t != nullptr && *t ? t : "/tmp";
}

// The last name of a URL (s3://b/p/run/ -> run), safe as a file name.
std::string LastName(const std::string& url, const char* fallback) {
  std::string tail = url.substr(url.find("://") + 3);
  while (!tail.empty() && tail.back() == '/') tail.pop_back();
  const size_t slash = tail.rfind('/');
  std::string name = slash == std::string::npos ? "" : tail.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") name = fallback;
  for (char& c : name) {
    if (c == '\0') c = '_';
  }
  return name;
}

// CLI11 transform: a URL becomes a path in a new private temporary directory, remembered for
// Fetch / Push; anything else passes unchanged.
std::function<std::string(std::string)> UrlToLocal(Kind kind, std::string option) {
  return [kind, option](std::string value) -> std::string {
    if (!IsObjectStoreUrl(value)) return value;
    if (value.find("://") == 0) throw CLI::ValidationError(option, value + ": no scheme");
    std::string templ = TempRoot() + "/trainprof-remote-XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) {  // mode 0700
      throw CLI::ValidationError(option, value + ": cannot make a temporary directory in " +
                                             TempRoot() + ": " + ErrnoMessage(errno));
    }
    Remote r;
    r.kind = kind;
    r.option = option;
    r.url = value;
    r.tmp = templ;
    r.local = templ + "/" + LastName(value, kind == Kind::kOutput ? "out" : "run");
    Registry().push_back(r);
    return r.local;
  };
}

std::map<std::string, std::pair<int64_t, int64_t>> FilesUnder(const std::string& dir) {
  std::map<std::string, std::pair<int64_t, int64_t>> out;
  std::error_code ec;
  namespace fs = std::filesystem;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e;
    if (!it->is_regular_file(e) || it->is_symlink(e)) continue;
    const auto size = it->file_size(e);
    const auto mtime = it->last_write_time(e);
    if (e) continue;
    out[it->path().lexically_relative(dir).generic_string()] = {
        static_cast<int64_t>(size),
        static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::file_clock::to_sys(mtime).time_since_epoch())
                                 .count())};
  }
  return out;
}

void RemoveTemporaries() {
  for (const Remote& r : Registry()) {
    std::error_code ec;
    std::filesystem::remove_all(r.tmp, ec);
  }
}

// Runs `python -m trainprof.fleet ARGS...` (stdout discarded, stderr kept in `err_file`);
// Ctrl-C meanwhile stops it, removes the temporary copies and ends this process by the
// signal. Returns the exit status, or an error when Python could not start.
StatusOr<int> RunFleetPython(const std::vector<std::string>& args, const std::string& err_file) {
  std::vector<std::string> argv = {FindPython(""), "-m", "trainprof.fleet"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env;
  std::string pythonpath;
  if (const std::string package = FindPythonPackageDir(); !package.empty()) {
    pythonpath = package.substr(0, package.rfind('/'));
  }
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (kv.rfind("TRAINPROF_RUN_DIR=", 0) == 0 || kv.rfind("TRAINPROF_SOCKET=", 0) == 0 ||
        kv.rfind("TRAINPROF_DISABLE=", 0) == 0) {
      continue;
    }
    if (kv.rfind("PYTHONPATH=", 0) == 0) {
      if (!pythonpath.empty() && kv.size() > 11) pythonpath += ":" + kv.substr(11);
      if (pythonpath.empty()) pythonpath = kv.substr(11);
      continue;
    }
    env.push_back(kv);
  }
  if (!pythonpath.empty()) env.push_back("PYTHONPATH=" + pythonpath);
  env.push_back("TRAINPROF_DISABLE=1");  // not a training job
  std::vector<char*> c_argv;
  for (std::string& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  std::vector<char*> c_env;
  for (std::string& e : env) c_env.push_back(e.data());
  c_env.push_back(nullptr);

  sigset_t stop, old;
  sigemptyset(&stop);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, s);
  pthread_sigmask(SIG_BLOCK, &stop, &old);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &stop);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  int err = 0;
  pid_t pid = 0;
  SpawnOwnedChild([&] {
    err = posix_spawnp(&pid, c_argv[0], &fa, &attr, c_argv.data(), c_env.data());
    return err == 0 ? pid : -1;
  });
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  int status = 0;
  if (err == 0) WaitOwnedChild(pid, &status, 0);
  sigset_t pending;
  sigpending(&pending);
  bool interrupted = false;
  for (int s : {SIGINT, SIGTERM, SIGHUP}) interrupted |= sigismember(&pending, s) == 1;
  if (interrupted) RemoveTemporaries();  // the pending signal ends us when unblocked
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (err != 0) {
    return NotFound("cannot start the Python interpreter '" + argv[0] +
                    "' for object storage: " + ErrnoMessage(err) + " (set $TRAINPROF_PYTHON)");
  }
  if (WIFSIGNALED(status)) return Unavailable("interrupted");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// The error Python printed (its last line, less "error: ").
std::string PythonError(const std::string& err_file) {
  auto text = ReadFileToString(err_file);
  std::string s = text.ok() ? *text : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  const size_t nl = s.rfind('\n');
  std::string last = nl == std::string::npos ? s : s.substr(nl + 1);
  if (last.rfind("error: ", 0) == 0) last = last.substr(7);
  if (last.size() > 2000) last = last.substr(0, 2000) + "...";
  return last.empty() ? "failed (no message)" : last;
}

// While URLs are in use: fd 1 and 2 go through a pipe each, copied to the original with the
// temporary paths replaced by their URLs (so `show s3://...` prints what `show DIR` prints
// with the URL in place of DIR).
class NameFilter {
 public:
  explicit NameFilter(std::vector<std::pair<std::string, std::string>> names)
      : names_(std::move(names)) {
    for (const auto& [from, to] : names_) longest_ = std::max(longest_, from.size());
    std::cout.flush();
    std::cerr.flush();
    std::fflush(stdout);
    std::fflush(stderr);
    for (int fd : {1, 2}) {
      int p[2];
      if (pipe(p) != 0) continue;
      fcntl(p[0], F_SETFD, FD_CLOEXEC);
      fcntl(p[1], F_SETFD, FD_CLOEXEC);
      const int orig = fcntl(fd, F_DUPFD_CLOEXEC, 3);
      if (orig < 0 || dup2(p[1], fd) < 0) {
        close(p[0]);
        close(p[1]);
        if (orig >= 0) close(orig);
        continue;
      }
      close(p[1]);
      streams_.push_back(Stream{fd, orig, p[0], std::thread()});
    }
    for (Stream& s : streams_) s.thread = std::thread([this, &s] { Copy(s); });
  }

  ~NameFilter() {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(stdout);
    std::fflush(stderr);
    for (Stream& s : streams_) dup2(s.orig, s.fd);  // closes the pipe's write end
    stop_ = true;
    for (Stream& s : streams_) {
      if (s.thread.joinable()) s.thread.join();
      close(s.in);
      close(s.orig);
    }
  }

 private:
  struct Stream {
    int fd, orig, in;
    std::thread thread;
  };

  void Copy(Stream& s) {
    std::string pending;
    char buf[8192];
    for (;;) {
      pollfd p{s.in, POLLIN, 0};
      const int ready = poll(&p, 1, 100);
      if (ready == 0) {
        if (stop_) break;  // a child may hold the write end: do not wait for EOF
        continue;
      }
      if (ready < 0 && errno == EINTR) continue;
      const ssize_t n = ready < 0 ? -1 : read(s.in, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      pending.append(buf, static_cast<size_t>(n));
      Emit(s.orig, pending, false);
    }
    Emit(s.orig, pending, true);
  }

  // Writes `pending` with the names replaced, keeping back a tail that may begin one.
  void Emit(int fd, std::string& pending, bool all) {
    std::string out;
    size_t i = 0;
    while (i < pending.size()) {
      bool replaced = false;
      for (const auto& [from, to] : names_) {
        if (pending.compare(i, from.size(), from) == 0) {
          out += to;
          i += from.size();
          replaced = true;
          break;
        }
      }
      if (replaced) continue;
      if (!all && pending.size() - i < longest_) {
        bool prefix = false;
        for (const auto& [from, to] : names_) {
          prefix |= from.compare(0, pending.size() - i, pending, i) == 0;
        }
        if (prefix) break;
      }
      out += pending[i++];
    }
    pending.erase(0, i);
    for (size_t done = 0; done < out.size();) {
      const ssize_t w = write(fd, out.data() + done, out.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      done += static_cast<size_t>(w);
    }
  }

  std::vector<std::pair<std::string, std::string>> names_;
  size_t longest_ = 0;
  std::vector<Stream> streams_;
  std::atomic<bool> stop_{false};
};

std::unique_ptr<NameFilter>& Filter() {
  static std::unique_ptr<NameFilter> filter;
  return filter;
}

struct Accepting {
  std::vector<const char*> path;  // subcommand names
  const char* option;
  Kind kind;
};

}  // namespace

// GCC 12 sees a null std::function in CLI11's Validator move when the transform is inlined
// here (a false positive: every Validator it moves holds a function).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
void AcceptObjectStoreUrls(CLI::App& app) {
  const Accepting table[] = {
      {{"show"}, "run", Kind::kRun},
      {{"cost"}, "run", Kind::kRun},
      {{"rules"}, "run", Kind::kRun},
      {{"analyze"}, "run", Kind::kRun},
      {{"analyze"}, "--diff", Kind::kRun},
      {{"report"}, "run", Kind::kRun},
      {{"report"}, "--out", Kind::kOutput},
      {{"report"}, "--json", Kind::kOutput},
      {{"report"}, "--pdf", Kind::kOutput},
      {{"export", "csv"}, "run", Kind::kRun},
      {{"export", "csv"}, "--out", Kind::kOutput},
      {{"export", "chrome-trace"}, "run", Kind::kRun},
      {{"export", "chrome-trace"}, "--out", Kind::kOutput},
      {{"export", "smdebug"}, "run", Kind::kRun},
      {{"export", "smdebug"}, "--out", Kind::kOutput},
      {{"serve"}, "runs", Kind::kSnapshot},
      {{"ls"}, "dir", Kind::kSnapshot},
      {{"import", "kineto"}, "--out", Kind::kOutput},
      {{"import", "smdebug"}, "--out", Kind::kOutput},
      {{"import", "horovod"}, "--out", Kind::kOutput},
  };
  for (const Accepting& a : table) {
    CLI::App* sub = &app;
    std::string where;
    for (const char* name : a.path) {
      CLI::App* next = nullptr;
      for (CLI::App* s : sub->get_subcommands({})) {
        if (s->get_name() == name) next = s;
      }
      sub = next;
      if (sub == nullptr) break;
      where += std::string(where.empty() ? "" : " ") + name;
    }
    if (sub == nullptr) continue;  // a command this build lacks
    CLI::Option* opt = sub->get_option_no_throw(a.option);
    if (opt == nullptr) continue;
    const std::string label = where + " " + (a.option[0] == '-' ? a.option : "RUN");
    opt->transform(UrlToLocal(a.kind, label), "", "object-storage URL");
  }
}
#pragma GCC diagnostic pop

Status FetchSharedRunJson(const std::string& url, const std::string& local_dir) {
  std::string tmp = TempRoot() + "/trainprof-remote-XXXXXX";
  if (mkdtemp(tmp.data()) == nullptr) {
    return Internal("cannot make a temporary directory in " + TempRoot() + ": " +
                    ErrnoMessage(errno));
  }
  const std::string err = tmp + "/fetch.err";
  StatusOr<int> code = RunFleetPython({"fetch", url, local_dir, "--only", "run.json"}, err);
  const std::string message = code.ok() && *code != 0 ? PythonError(err) : "";
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
  if (!code.ok()) return code.status();
  if (*code != 0) return Unavailable(message);
  return OkStatus();
}

RemoteRuns::RemoteRuns() { Registry().clear(); }

RemoteRuns::~RemoteRuns() {
  Filter().reset();
  RemoveTemporaries();
  Registry().clear();
}

Status RemoteRuns::Fetch() {
  std::vector<std::pair<std::string, std::string>> names;
  for (Remote& r : Registry()) {
    names.push_back({r.local, r.url});
    if (r.kind == Kind::kOutput) continue;
    std::vector<std::string> args = {"fetch", r.url, r.local};
    if (r.kind == Kind::kRun) args.push_back("--one");
    const std::string err = r.tmp + "/.fetch.err";
    TP_ASSIGN_OR_RETURN(int code, RunFleetPython(args, err));
    if (code != 0) return NotFound(r.option + ": " + PythonError(err));
    std::error_code ec;
    std::filesystem::remove(err, ec);
    r.fetched = FilesUnder(r.local);
  }
  if (!names.empty()) {
    // Longer names first (a run's path before a prefix of it).
    std::sort(names.begin(), names.end(),
              [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    Filter() = std::make_unique<NameFilter>(std::move(names));
  }
  return OkStatus();
}

Status RemoteRuns::Push() {
  for (Remote& r : Registry()) {
    if (r.kind == Kind::kSnapshot) continue;
    if (r.kind == Kind::kOutput && !PathExists(r.local)) continue;  // not written (optional)
    std::vector<std::string> args = {"push", r.local, r.url};
    if (r.kind == Kind::kRun) {
      // What the command added or changed. A run still being recorded (or whose recorder was
      // killed) has a SQLite write-ahead log: a reader's checkpoint rewrites the store, and
      // the recorder's uploads own it, so its store files are not written back.
      auto baseline = r.fetched;
      bool live = false;
      for (const auto& f : r.fetched) live |= f.first.ends_with("-wal");
      bool kept = false, changed = false;
      for (const auto& [rel, sm] : FilesUnder(r.local)) {
        auto it = baseline.find(rel);
        if (it != baseline.end() && it->second == sm) continue;
        if (live && rel.find(".sqlite") != std::string::npos) {
          baseline[rel] = sm;
          kept |= it != r.fetched.end() && rel.ends_with(".sqlite");
          continue;
        }
        changed = true;
      }
      if (kept) {
        std::cerr << "trainprof: note: " << r.url
                  << " is being recorded (its store has a write-ahead log): its store is read, "
                     "not written back\n";
      }
      if (!changed) continue;
      nlohmann::json files = nlohmann::json::object();
      for (const auto& [rel, sm] : baseline) files[rel] = {sm.first, sm.second};
      const std::string manifest = r.tmp + "/.manifest.json";
      TP_RETURN_IF_ERROR(WriteFileAtomically(
          manifest, files.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
      args.push_back("--manifest");
      args.push_back(manifest);
    }
    const std::string err = r.tmp + "/.push.err";
    TP_ASSIGN_OR_RETURN(int code, RunFleetPython(args, err));
    if (code != 0) {
      return Unavailable(r.option + ": uploading to " + r.url + ": " + PythonError(err));
    }
    std::cerr << "trainprof: uploaded "
              << (r.kind == Kind::kRun ? "what the command wrote into the run " : "") << "to "
              << r.url << "\n";
  }
  return OkStatus();
}

}  // namespace trainprof::cli
