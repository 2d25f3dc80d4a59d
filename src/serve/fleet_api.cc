#include "serve/fleet_api.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/children.h"
#include "base/platform.h"

extern char** environ;

namespace trainprof::serve {
namespace {

constexpr int kDepth = 3;                  // as `fleet` searches a directory of runs
constexpr size_t kMaxEntries = 200'000;    // directories looked at for the fingerprint
constexpr size_t kMaxOutput = 512u << 20;  // the fleet document's size limit
constexpr size_t kMaxErrors = 64u << 10;   // stderr kept for the error message
constexpr int64_t kTimeoutMs = 300'000;    // one fleet computation

void Walk(const std::string& dir, int depth, std::string& out, size_t& seen) {
  struct stat st {};
  if (seen >= kMaxEntries || stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
  ++seen;
  const timespec mt = platform::ModificationTime(st);
  out += dir + '\t' + std::to_string(mt.tv_sec) + '.' + std::to_string(mt.tv_nsec) + '\n';
  if (depth <= 0) return;
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (!d) return;
  std::vector<std::string> subdirs;
  while (dirent* e = readdir(d.get())) {
    const std::string name = e->d_name;
    if (name == "." || name == ".." || name == "nodes") continue;
    if (e->d_type == DT_DIR || e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) {
      subdirs.push_back(dir + '/' + name);
    }
    if (name == "summary.json" || name == "run.json") {  // rewritten in place: a file's mtime
      struct stat fs {};
      if (stat((dir + '/' + name).c_str(), &fs) == 0) {
        const timespec t = platform::ModificationTime(fs);
        out += dir + '/' + name + '\t' + std::to_string(t.tv_sec) + '.' +
               std::to_string(t.tv_nsec) + '\n';
      }
    }
    if (subdirs.size() + seen >= kMaxEntries) break;
  }
  for (const std::string& s : subdirs) Walk(s, depth - 1, out, seen);
}

struct Result {
  int status = 0;  // HTTP status
  std::string body;
};

// Runs argv; stdout is the answer, stderr the error message.
Result RunFleet(std::vector<std::string> argv) {
  int out_pipe[2], err_pipe[2];
  if (platform::PipeCloseOnExec(out_pipe) != 0) return {500, "pipe failed"};
  if (platform::PipeCloseOnExec(err_pipe) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return {500, "pipe failed"};
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  int err = 0;
  const pid_t pid = SpawnOwnedChild([&] {
    pid_t p = 0;
    err = posix_spawnp(&p, args[0], &fa, nullptr, args.data(), environ);
    return err == 0 ? p : -1;
  });
  posix_spawn_file_actions_destroy(&fa);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (pid <= 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return {503, "cannot start the fleet view '" + argv[0] + "': " + std::strerror(err)};
  }
  std::string out, errors;
  bool too_big = false, timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kTimeoutMs);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    const int n = poll(fds, 2, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      std::string& into = i == 0 ? out : errors;
      const size_t limit = i == 0 ? kMaxOutput : kMaxErrors;
      if (into.size() + static_cast<size_t>(got) > limit) {
        if (i == 0) too_big = true;
        if (i == 1)
          into.append(buf, std::min<size_t>(static_cast<size_t>(got), limit - into.size()));
        if (i == 0) break;
        continue;
      }
      into.append(buf, static_cast<size_t>(got));
    }
    if (too_big) break;
  }
  if (timed_out || too_big) kill(pid, SIGKILL);
  for (pollfd& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int status = 0;
  WaitOwnedChild(pid, &status, 0);
  if (timed_out) return {504, "the fleet view took more than 300 s"};
  if (too_big) return {500, "the fleet document is larger than 512 MiB"};
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!errors.empty() && (errors.back() == '\n' || errors.back() == ' ')) errors.pop_back();
    return {500,
            "trainprof fleet failed: " + (errors.empty() ? std::string("no message") : errors)};
  }
  return {200, std::move(out)};
}

void SendError(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(nlohmann::json{{"error", message}}.dump(-1, ' ', false,
                                                          nlohmann::json::error_handler_t::replace),
                  "application/json");
}

}  // namespace

std::string FleetFingerprint(const std::vector<std::string>& roots) {
  std::string out;
  size_t seen = 0;
  for (const std::string& r : roots) Walk(r, kDepth, out, seen);
  return out;
}

void AddFleetRoute(httplib::Server& http, std::vector<std::string> roots,
                   std::vector<std::string> command) {
  struct Cache {
    std::mutex mu;  // one computation at a time; the others wait for its answer
    std::string key;
    Result result;
  };
  auto cache = std::make_shared<Cache>();
  http.Get("/api/fleet", [cache, roots, command](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    if (command.empty()) return SendError(res, 503, "the fleet view is not available");
    std::lock_guard<std::mutex> lock(cache->mu);
    std::string key = FleetFingerprint(roots);
    if (cache->key.empty() || key != cache->key || cache->result.status != 200) {
      std::vector<std::string> argv = command;
      argv.push_back("--json");
      argv.push_back("--");
      argv.insert(argv.end(), roots.begin(), roots.end());
      cache->result = RunFleet(std::move(argv));
      cache->key = std::move(key);
    }
    if (cache->result.status != 200)
      return SendError(res, cache->result.status, cache->result.body);
    res.set_content(cache->result.body, "application/json");
  });
}

}  // namespace trainprof::serve
