#include "agent/control_channel.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/json_dump.h"
#include "base/logging.h"
#include "base/time.h"

namespace trainprof::agent {
namespace {

constexpr size_t kMaxRequestBytes = 64 * 1024;
constexpr int kConnectionDeadlineMs = 2000;

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

// Reads until '\n' or the deadline; false on timeout, error or an oversized request.
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
    if (line->size() > kMaxRequestBytes) return false;
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

std::optional<int64_t> OptionalInt(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

}  // namespace

StatusOr<ControlRequest> ParseControlRequest(const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument("request is not a JSON object");
  ControlRequest r;
  auto type = j.find("type");
  if (type == j.end() || !type->is_string()) return InvalidArgument("request has no \"type\"");
  r.type = type->get<std::string>();
  if (auto name = j.find("name"); name != j.end() && name->is_string()) {
    r.name = name->get<std::string>();
  }
  r.ts_ns = OptionalInt(j, "ts_ns");
  r.start_ns = OptionalInt(j, "start_ns");
  r.end_ns = OptionalInt(j, "end_ns");
  return r;
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

ControlServer::ControlServer(std::string path, int listen_fd, int wake_read, int wake_write,
                             Handler handler)
    : path_(std::move(path)),
      listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      handler_(std::move(handler)) {}

ControlServer::~ControlServer() { Stop(); }

StatusOr<std::unique_ptr<ControlServer>> ControlServer::Start(const std::string& socket_path,
                                                              Handler handler) {
  sockaddr_un addr;
  int dir_fd = -1;
  TP_RETURN_IF_ERROR(MakeAddress(socket_path, &addr, &dir_fd));
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    if (dir_fd >= 0) ::close(dir_fd);
    return Unavailable("socket: " + ErrnoMessage(errno));
  }
  ::unlink(addr.sun_path);  // a stale socket of an earlier recorder
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  if (rc == 0) {
    rc = ::listen(fd, 16);
    err = errno;
  }
  if (dir_fd >= 0) ::close(dir_fd);
  if (rc != 0) {
    ::close(fd);
    return Unavailable(socket_path + ": " + ErrnoMessage(err));
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    ::close(fd);
    return Unavailable("pipe: " + ErrnoMessage(errno));
  }
  std::unique_ptr<ControlServer> server(
      new ControlServer(socket_path, fd, pipe_fds[0], pipe_fds[1], std::move(handler)));
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  return server;
}

void ControlServer::Stop() {
  if (!thread_.joinable()) return;
  char b = 1;
  (void)!::write(wake_write_, &b, 1);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_read_);
  ::close(wake_write_);
  ::unlink(path_.c_str());
}

void ControlServer::Serve() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    int r = ::poll(fds, 2, -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      TP_LOG_ONCE(LogLevel::kWarning, "control channel: poll failed: " + ErrnoMessage(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    ServeOne(conn);
    ::close(conn);
  }
}

void ControlServer::ServeOne(int fd) {
  std::string line;
  int64_t deadline = MonotonicNowNs() + kConnectionDeadlineMs * kNanosPerMilli;
  if (!ReadLine(fd, &line, deadline)) {
    WriteAll(fd, Answer(InvalidArgument("no complete request line")) + "\n");
    return;
  }
  StatusOr<ControlRequest> request = ParseControlRequest(line);
  StatusOr<std::string> result = request.ok() ? handler_(*request) : request.status();
  WriteAll(fd, Answer(result) + "\n");
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
