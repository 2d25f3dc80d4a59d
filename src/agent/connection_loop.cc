#include "agent/connection_loop.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>
#include <vector>

#include "base/files.h"
#include "base/logging.h"
#include "base/time.h"

namespace trainprof::agent {
namespace {

constexpr int kMaxAcceptsPerWake = 64;

struct Connection {
  int fd = -1;
  uint64_t order = 0;  // accept order: the smallest is the oldest
  int64_t deadline_ns = 0;
  std::string in;
  std::string out;
  size_t written = 0;
  bool writing = false;
};

// One non-blocking send: for refusals, where a client that does not read loses the answer.
void SendBestEffort(int fd, const std::string& data) {
  if (!data.empty()) (void)!::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void CloseConnection(Connection* c) {
  if (c->fd >= 0) ::close(c->fd);
  c->fd = -1;
}

void UpdateMax(std::atomic<int64_t>* max, int64_t value) {
  int64_t seen = max->load();
  while (value > seen && !max->compare_exchange_weak(seen, value)) {
  }
}

}  // namespace

ConnectionLoop::ConnectionLoop(int listen_fd, int wake_read, int wake_write,
                               ConnectionLimits limits, ConnectionHooks hooks)
    : listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      limits_(limits),
      hooks_(std::move(hooks)) {}

ConnectionLoop::~ConnectionLoop() { Stop(); }

StatusOr<std::unique_ptr<ConnectionLoop>> ConnectionLoop::Start(int listen_fd,
                                                                ConnectionLimits limits,
                                                                ConnectionHooks hooks) {
  if (!hooks.frame || !hooks.respond) {
    ::close(listen_fd);
    return InvalidArgument("connection loop: hooks missing");
  }
  if (limits.max_connections < 1) limits.max_connections = 1;
  int flags = ::fcntl(listen_fd, F_GETFL);
  if (flags < 0 || ::fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    int err = errno;
    ::close(listen_fd);
    return Unavailable("fcntl: " + ErrnoMessage(err));
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(listen_fd);
    return Unavailable("pipe: " + ErrnoMessage(err));
  }
  std::unique_ptr<ConnectionLoop> loop(
      new ConnectionLoop(listen_fd, pipe_fds[0], pipe_fds[1], limits, std::move(hooks)));
  try {
    loop->thread_ = std::thread([l = loop.get()] { l->Run(); });
  } catch (const std::system_error& e) {
    return Unavailable(std::string("cannot start the connection thread: ") + e.what());
  }
  return loop;
}

void ConnectionLoop::Stop() {
  if (!thread_.joinable()) return;
  char b = 1;
  (void)!::write(wake_write_, &b, 1);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_read_);
  ::close(wake_write_);
}

void ConnectionLoop::Run() {
  std::vector<Connection> conns;
  std::vector<pollfd> fds;
  uint64_t next_order = 0;
  const int64_t request_timeout_ns = limits_.request_timeout_ms * kNanosPerMilli;
  const int64_t write_timeout_ns = limits_.write_timeout_ms * kNanosPerMilli;

  auto reject = [&](Connection* c, const std::string& reason) {
    if (hooks_.reject) SendBestEffort(c->fd, hooks_.reject(reason));
    CloseConnection(c);
  };
  // Sends what the socket takes now; closes the connection once all is written.
  auto write_some = [&](Connection* c) {
    while (c->written < c->out.size()) {
      ssize_t n = ::send(c->fd, c->out.data() + c->written, c->out.size() - c->written,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c->written += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      break;  // the client went away
    }
    CloseConnection(c);
  };
  auto read_some = [&](Connection* c, int64_t now) {
    bool eof = false;
    char buf[4096];
    while (c->in.size() <= limits_.max_request_bytes) {
      ssize_t n = ::recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        c->in.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) {
        eof = true;
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      CloseConnection(c);
      return;
    }
    size_t length = hooks_.frame(c->in, eof);
    if (length == 0 || length > c->in.size()) {
      if (c->in.size() > limits_.max_request_bytes) {
        ++stats_.oversized;
        reject(c, "request larger than " + std::to_string(limits_.max_request_bytes) + " bytes");
      } else if (eof) {
        CloseConnection(c);
      }
      return;
    }
    c->out = hooks_.respond(std::string_view(c->in).substr(0, length));
    if (c->out.size() > limits_.max_response_bytes) c->out.resize(limits_.max_response_bytes);
    c->in.clear();
    c->writing = true;
    c->deadline_ns = now + write_timeout_ns;
    ++stats_.served;
    write_some(c);
  };

  while (true) {
    int64_t now = MonotonicNowNs();
    int timeout_ms = -1;
    for (const Connection& c : conns) {
      int64_t left_ms =
          std::max<int64_t>(0, (c.deadline_ns - now + kNanosPerMilli - 1) / kNanosPerMilli);
      if (timeout_ms < 0 || left_ms < timeout_ms) timeout_ms = static_cast<int>(left_ms);
    }
    fds.clear();
    fds.push_back({wake_read_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const Connection& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.writing ? POLLOUT : POLLIN), 0});
    }
    int r = ::poll(fds.data(), fds.size(), timeout_ms);
    if (r < 0 && errno != EINTR) {
      TP_LOG_ONCE(LogLevel::kWarning, "server loop: poll failed: " + ErrnoMessage(errno));
      break;
    }
    if (r > 0 && fds[0].revents != 0) break;
    now = MonotonicNowNs();

    for (size_t i = 0; r > 0 && i < conns.size(); ++i) {
      short events = fds[i + 2].revents;
      if (events == 0) continue;
      Connection& c = conns[i];
      if (c.writing) {
        write_some(&c);
      } else {
        read_some(&c, now);
      }
    }
    for (Connection& c : conns) {
      if (c.fd >= 0 && now >= c.deadline_ns) {
        ++stats_.timed_out;
        if (c.writing) {
          CloseConnection(&c);
        } else {
          reject(&c, "no complete request within " + std::to_string(limits_.request_timeout_ms) +
                         " ms");
        }
      }
    }
    conns.erase(
        std::remove_if(conns.begin(), conns.end(), [](const Connection& c) { return c.fd < 0; }),
        conns.end());

    if (r <= 0 || (fds[1].revents & POLLIN) == 0) continue;
    for (int k = 0; k < kMaxAcceptsPerWake; ++k) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: make room by dropping the oldest connection, else wait a bit
          // rather than spin on a listening socket that stays readable.
          if (!conns.empty()) {
            CloseConnection(&conns.front());
            conns.erase(conns.begin());
            ++stats_.evicted;
          } else {
            ::poll(nullptr, 0, 10);
          }
        }
        break;
      }
      ++stats_.accepted;
      if (hooks_.admit) {
        if (std::optional<std::string> refusal = hooks_.admit(fd)) {
          ++stats_.refused;
          SendBestEffort(fd, *refusal);
          ::close(fd);
          continue;
        }
      }
      if (conns.size() >= static_cast<size_t>(limits_.max_connections)) {
        auto oldest = std::min_element(
            conns.begin(), conns.end(),
            [](const Connection& a, const Connection& b) { return a.order < b.order; });
        CloseConnection(&*oldest);
        conns.erase(oldest);
        ++stats_.evicted;
      }
      Connection c;
      c.fd = fd;
      c.order = next_order++;
      c.deadline_ns = now + request_timeout_ns;
      conns.push_back(std::move(c));
      UpdateMax(&stats_.max_open, static_cast<int64_t>(conns.size()));
    }
  }
  for (Connection& c : conns) CloseConnection(&c);
}

}  // namespace trainprof::agent
