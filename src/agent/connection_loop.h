#pragma once
// A small server loop with bounded resources, for the recorder's local endpoints (the control
// socket and the Prometheus /metrics endpoint): one thread polls the listening socket and every
// open connection at once, so a client that connects and stays silent (or sends its request one
// byte at a time) never delays another. Each connection carries one request and one response,
// then closes.
//
// Bounds: at most `max_connections` open at a time (when full, the connection accepted longest
// ago is dropped to make room, so a flood of idle clients cannot lock new ones out); a request
// must be complete within `request_timeout_ms` of the accept and within `max_request_bytes`;
// a response must be taken by the client within `write_timeout_ms`. Drops are counted.
//
// Threads: Start() spawns the loop thread; the hooks run on it, one at a time.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "base/status.h"

namespace trainprof::agent {

struct ConnectionLimits {
  int max_connections = 32;
  int64_t request_timeout_ms = 1000;
  int64_t write_timeout_ms = 1000;
  size_t max_request_bytes = 8192;
  size_t max_response_bytes = 64 << 20;
};

struct ConnectionHooks {
  // How many leading bytes of `data` are one complete request; 0 while more is needed. At
  // end-of-input `eof` is true (0 then drops the connection unanswered).
  std::function<size_t(std::string_view data, bool eof)> frame;
  // The response to a complete request.
  std::function<std::string(std::string_view request)> respond;
  // Called at accept with the new connection's fd: nullopt serves it; a string refuses it
  // (written back best-effort, then closed). May be empty.
  std::function<std::optional<std::string>(int fd)> admit;
  // The answer written (best-effort) to a request that was too large or too slow; may be empty.
  std::function<std::string(const std::string& reason)> reject;
};

struct ConnectionStats {
  std::atomic<int64_t> accepted{0};
  std::atomic<int64_t> served{0};
  std::atomic<int64_t> refused{0};    // admit() said no
  std::atomic<int64_t> evicted{0};    // dropped to make room under max_connections
  std::atomic<int64_t> timed_out{0};  // request or response not done in time
  std::atomic<int64_t> oversized{0};  // request larger than max_request_bytes
  std::atomic<int64_t> max_open{0};   // most connections open at once
};

class ConnectionLoop {
 public:
  ~ConnectionLoop();
  // Takes ownership of `listen_fd` (a listening stream socket; made non-blocking here).
  static StatusOr<std::unique_ptr<ConnectionLoop>> Start(int listen_fd, ConnectionLimits limits,
                                                         ConnectionHooks hooks);
  // Stops the loop, closes every connection and the listening socket. Idempotent.
  void Stop();
  const ConnectionStats& stats() const { return stats_; }

 private:
  ConnectionLoop(int listen_fd, int wake_read, int wake_write, ConnectionLimits limits,
                 ConnectionHooks hooks);
  void Run();

  int listen_fd_;
  int wake_read_;
  int wake_write_;
  ConnectionLimits limits_;
  ConnectionHooks hooks_;
  ConnectionStats stats_;
  std::thread thread_;
};

}  // namespace trainprof::agent
