#include "agent/control_channel.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "agent/phase_tracker.h"
#include "base/files.h"
#include "base/json_dump.h"
#include "base/logging.h"
#include "base/time.h"

namespace trainprof::agent {
namespace {

constexpr size_t kMaxTypeLength = 32;

// Fills `addr` for `path`. When the path is too long for sun_path, opens its directory and
// goes through /proc/self/fd; the caller closes *dir_fd after bind/connect.
Status MakeAddress(const std::string& path, sockaddr_un* addr, int* dir_fd) {
  *dir_fd = -1;
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  std::string target = path;
  if (path.size() >= sizeof(addr->sun_path)) {
    size_t slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    *dir_fd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*dir_fd < 0) return NotFound(dir + ": " + ErrnoMessage(errno));
    target = "/proc/self/fd/" + std::to_string(*dir_fd) + "/" + base;
    if (target.size() >= sizeof(addr->sun_path)) {
      return InvalidArgument(path + ": socket name too long");
    }
  }
  std::memcpy(addr->sun_path, target.c_str(), target.size() + 1);
  return OkStatus();
}

std::string Answer(const StatusOr<std::string>& result) {
  nlohmann::json j;
  if (!result.ok()) {
    j["ok"] = false;
    j["error"] = result.status().message();
    return DumpJson(j);
  }
  if (!result->empty()) {
    j = nlohmann::json::parse(*result, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) j = nlohmann::json::object();
  }
  j["ok"] = true;
  return DumpJson(j);
}

// Reads until '\n' or the deadline; false on timeout, error or an oversized answer.
bool ReadLine(int fd, std::string* line, int64_t deadline_mono_ns) {
  char buf[4096];
  while (line->find('\n') == std::string::npos) {
    int64_t left_ms = (deadline_mono_ns - MonotonicNowNs()) / kNanosPerMilli;
    if (left_ms <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left_ms));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return !line->empty();  // EOF: accept an unterminated last line
    line->append(buf, static_cast<size_t>(n));
    if (line->size() > (1 << 20)) return false;
  }
  line->resize(line->find('\n'));
  return true;
}

bool WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// An optional integer field: absent is fine, present must be an integer that fits int64.
Status OptionalInt(const nlohmann::json& j, const char* key, std::optional<int64_t>* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return OkStatus();
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{INT64_MAX}) {
    return InvalidArgument(std::string("\"") + key + "\" is out of range");
  }
  if (!it->is_number_integer()) {
    return InvalidArgument(std::string("\"") + key +
                           "\" must be an integer (nanoseconds since the Unix epoch)");
  }
  *out = it->get<int64_t>();
  return OkStatus();
}

bool Printable(const std::string& s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// `ts` within [lo, hi], the run's bounds widened by the slack; messages name the run's start
// and the current time.
Status InsideRun(const char* what, int64_t ts, int64_t lo, int64_t hi, int64_t run_start_ns,
                 int64_t now_ns) {
  if (ts < lo) {
    return InvalidArgument(std::string(what) + " " + std::to_string(ts) +
                           " is before the run started (" + FormatIso8601(run_start_ns) + ")");
  }
  if (ts > hi) {
    return InvalidArgument(std::string(what) + " " + std::to_string(ts) +
                           " is in the future (now " + FormatIso8601(now_ns) + ")");
  }
  return OkStatus();
}

}  // namespace

StatusOr<ControlRequest> ParseControlRequest(const std::string& line) {
  if (line.size() > kControlMaxRequestBytes) {
    return InvalidArgument("request longer than " + std::to_string(kControlMaxRequestBytes) +
                           " bytes");
  }
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument("request is not a JSON object");
  ControlRequest r;
  auto type = j.find("type");
  if (type == j.end() || !type->is_string()) return InvalidArgument("request has no \"type\"");
  r.type = type->get<std::string>();
  if (r.type != "mark" && r.type != "step" && r.type != "ping") {
    if (r.type.size() > kMaxTypeLength || !Printable(r.type)) {
      return InvalidArgument("unknown request type (expected mark, step or ping)");
    }
    return InvalidArgument("unknown request type '" + r.type + "' (expected mark, step or ping)");
  }
  if (auto name = j.find("name"); name != j.end() && !name->is_null()) {
    if (!name->is_string()) return InvalidArgument("\"name\" must be a string");
    r.name = name->get<std::string>();
  }
  TP_RETURN_IF_ERROR(OptionalInt(j, "ts_ns", &r.ts_ns));
  TP_RETURN_IF_ERROR(OptionalInt(j, "start_ns", &r.start_ns));
  TP_RETURN_IF_ERROR(OptionalInt(j, "end_ns", &r.end_ns));
  if (r.type == "mark" || !r.name.empty()) {
    TP_RETURN_IF_ERROR(ValidateMarkName(r.name));  // bounded, printable
  }
  if (r.type == "step") {
    if (!r.start_ns || !r.end_ns) return InvalidArgument("step needs start_ns and end_ns");
    if (*r.end_ns < *r.start_ns) return InvalidArgument("step ends before it starts");
  }
  return r;
}

Status ValidateControlRequest(const ControlRequest& request, int64_t run_start_ns, int64_t now_ns) {
  // Saturating bounds: a run start near the int64 limits must not wrap.
  int64_t lo = run_start_ns < INT64_MIN + kControlClockSlackNs
                   ? INT64_MIN
                   : run_start_ns - kControlClockSlackNs;
  int64_t hi =
      now_ns > INT64_MAX - kControlClockSlackNs ? INT64_MAX : now_ns + kControlClockSlackNs;
  if (request.ts_ns)
    TP_RETURN_IF_ERROR(InsideRun("ts_ns", *request.ts_ns, lo, hi, run_start_ns, now_ns));
  if (request.type == "step") {
    if (!request.start_ns || !request.end_ns || *request.end_ns < *request.start_ns) {
      return InvalidArgument("step needs start_ns <= end_ns");
    }
    TP_RETURN_IF_ERROR(InsideRun("start_ns", *request.start_ns, lo, hi, run_start_ns, now_ns));
    TP_RETURN_IF_ERROR(InsideRun("end_ns", *request.end_ns, lo, hi, run_start_ns, now_ns));
  }
  return OkStatus();
}

std::string ControlRequestToJson(const ControlRequest& request) {
  nlohmann::json j;
  j["type"] = request.type;
  if (!request.name.empty()) j["name"] = request.name;
  if (request.ts_ns) j["ts_ns"] = *request.ts_ns;
  if (request.start_ns) j["start_ns"] = *request.start_ns;
  if (request.end_ns) j["end_ns"] = *request.end_ns;
  return DumpJson(j);
}

ControlServer::ControlServer(std::string path, Handler handler, ControlServerOptions options)
    : path_(std::move(path)), handler_(std::move(handler)), options_(std::move(options)) {}

ControlServer::~ControlServer() { Stop(); }

StatusOr<std::unique_ptr<ControlServer>> ControlServer::Start(const std::string& socket_path,
                                                              Handler handler,
                                                              ControlServerOptions options) {
  // Bind inside a fresh 0700 directory next to the final path: nobody else can reach the
  // socket there while its mode is set to 0600 (bind's mode comes from the umask), then rename
  // it into place (atomically replacing a stale socket of an earlier recorder).
  size_t slash = socket_path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : socket_path.substr(0, slash);
  std::string tmpl = dir + "/.control-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return Unavailable(dir + ": cannot create the control socket there: " + ErrnoMessage(errno));
  }
  const std::string private_dir = tmpl;
  const std::string private_path = private_dir + "/" + kControlSocketName;
  auto fail = [&](const std::string& message, int fd) -> Status {
    if (fd >= 0) ::close(fd);
    ::unlink(private_path.c_str());
    ::rmdir(private_dir.c_str());
    return Unavailable(socket_path + ": " + message);
  };
  sockaddr_un addr;
  int dir_fd = -1;
  Status made = MakeAddress(private_path, &addr, &dir_fd);
  if (!made.ok()) {
    if (dir_fd >= 0) ::close(dir_fd);
    return fail(made.message(), -1);
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int err = errno;
    if (dir_fd >= 0) ::close(dir_fd);
    return fail("socket: " + ErrnoMessage(err), -1);
  }
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  if (dir_fd >= 0) ::close(dir_fd);
  if (rc != 0) return fail("bind: " + ErrnoMessage(err), fd);
  if (::chmod(private_path.c_str(), 0600) != 0) return fail("chmod: " + ErrnoMessage(errno), fd);
  if (::listen(fd, 64) != 0) return fail("listen: " + ErrnoMessage(errno), fd);
  if (::rename(private_path.c_str(), socket_path.c_str()) != 0) {
    return fail("rename: " + ErrnoMessage(errno), fd);
  }
  ::rmdir(private_dir.c_str());
  std::unique_ptr<ControlServer> server(
      new ControlServer(socket_path, std::move(handler), std::move(options)));
  struct stat st;
  if (::lstat(socket_path.c_str(), &st) == 0) {
    server->dev_ = st.st_dev;
    server->ino_ = st.st_ino;
  }
  ControlServer* self = server.get();
  ConnectionHooks hooks;
  hooks.frame = [](std::string_view data, bool eof) -> size_t {
    size_t nl = data.find('\n');
    if (nl != std::string_view::npos) return nl + 1;
    return eof ? data.size() : 0;  // accept an unterminated last line
  };
  hooks.respond = [self](std::string_view request) { return self->Respond(request); };
  hooks.admit = [self](int conn) { return self->Admit(conn); };
  hooks.reject = [self](const std::string& reason) {
    if (reason.rfind("request larger", 0) == 0) self->Count(kControlRequestsRefused);
    return Answer(InvalidArgument(reason)) + "\n";
  };
  auto loop = ConnectionLoop::Start(fd, server->options_.limits, std::move(hooks));
  if (!loop.ok()) {
    ::unlink(socket_path.c_str());
    return loop.status();
  }
  server->loop_ = std::move(*loop);
  return server;
}

void ControlServer::Count(const char* counter) {
  if (options_.count) options_.count(counter, 1);
}

std::optional<std::string> ControlServer::Admit(int fd) {
  ucred peer{};
  socklen_t len = sizeof(peer);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) {
    Count(kControlPeersRefused);
    return Answer(FailedPrecondition("cannot read the peer's credentials")) + "\n";
  }
  uid_t self = ::geteuid();
  if (peer.uid == self || peer.uid == 0) return std::nullopt;
  Count(kControlPeersRefused);
  return Answer(FailedPrecondition("uid " + std::to_string(peer.uid) +
                                   " may not use this recorder (it runs as uid " +
                                   std::to_string(self) + ")")) +
         "\n";
}

std::string ControlServer::Respond(std::string_view line) {
  std::string text(line);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
  StatusOr<std::string> result = [&]() -> StatusOr<std::string> {
    TP_ASSIGN_OR_RETURN(ControlRequest request, ParseControlRequest(text));
    if (options_.run_start_ns) {
      TP_RETURN_IF_ERROR(ValidateControlRequest(request, *options_.run_start_ns, WallNowNs()));
    }
    return handler_(request);
  }();
  if (!result.ok()) Count(kControlRequestsRefused);
  return Answer(result) + "\n";
}

void ControlServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (loop_) {
    loop_->Stop();
    const ConnectionStats& s = loop_->stats();
    int64_t dropped = s.timed_out + s.evicted;
    if (dropped > 0 && options_.count) options_.count(kControlConnectionsDropped, dropped);
  }
  struct stat st;
  if (::lstat(path_.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_dev) == dev_ &&
      static_cast<uint64_t>(st.st_ino) == ino_) {
    ::unlink(path_.c_str());
  }
}

StatusOr<std::string> SendControlRequest(const std::string& socket_path,
                                         const ControlRequest& request, int64_t timeout_ms) {
  sockaddr_un addr;
  int dir_fd = -1;
  TP_RETURN_IF_ERROR(MakeAddress(socket_path, &addr, &dir_fd));
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    if (dir_fd >= 0) ::close(dir_fd);
    return Unavailable("socket: " + ErrnoMessage(errno));
  }
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  if (dir_fd >= 0) ::close(dir_fd);
  if (rc != 0) {
    ::close(fd);
    if (err == EACCES || err == EPERM) {
      return FailedPrecondition(socket_path + ": " + ErrnoMessage(err) +
                                " (the recorder's socket is private to the user that runs it)");
    }
    return Unavailable(socket_path + ": " + ErrnoMessage(err) +
                       " (is the recorder still running?)");
  }
  std::string line;
  bool ok = WriteAll(fd, ControlRequestToJson(request) + "\n") &&
            ReadLine(fd, &line, MonotonicNowNs() + timeout_ms * kNanosPerMilli);
  ::close(fd);
  if (!ok) return Unavailable(socket_path + ": no answer from the recorder");
  return line;
}

}  // namespace trainprof::agent
