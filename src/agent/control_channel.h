#pragma once
// The local control channel of a running recorder: a Unix stream socket, by default
// <run>/nodes/<node>/control.sock (one per node, so agents of a multi-node job sharing a run
// directory each have their own). `trainprof mark` and in-process instrumentation connect,
// write one JSON object on one line and read one JSON line back:
//
//   -> {"type":"mark","name":"download_start","ts_ns":1764512345000000000}
//   <- {"ok":true}
//   -> {"type":"step","start_ns":...,"end_ns":...}   (a training step, for phase boundaries)
//   -> {"type":"ping"}  <- {"ok":true,"run_dir":"...","node":"...","pid":123}
//
// ts_ns is optional (the receive time is used). Errors answer {"ok":false,"error":"..."}.
// Unknown fields are ignored. Paths longer than a sockaddr_un allows are reached through
// /proc/self/fd/<dir fd>/<name>.
//
// Who may talk to it (issue 20): the socket is created mode 0600 whatever the umask (bound
// inside a fresh 0700 directory, set to 0600 there, then renamed into place), and every
// connection's peer is checked with SO_PEERCRED: the recorder's own uid or root, anyone else is
// refused and counted (control_peers_refused).
// What it accepts: every request is validated (ValidateControlRequest) -- a known type, a mark
// name of 1..128 characters [A-Za-z0-9_.-], integer timestamps inside the run (not before its
// start minus kControlClockSlackNs, not after now plus the same slack), a step's end >= start;
// a request refused answers the reason and is counted (control_requests_refused).
// Load: connections are served concurrently by one poll loop (connection_loop.h) with at most
// kControlMaxConnections open, kControlRequestTimeoutMs per request and kControlMaxRequestBytes
// per line, so idle or slow clients cannot block `trainprof mark`; connections dropped for
// those bounds are counted (control_connections_dropped).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "agent/connection_loop.h"
#include "base/status.h"

namespace trainprof::agent {

inline constexpr const char* kControlSocketName = "control.sock";
inline constexpr int64_t kControlClockSlackNs = 10'000'000'000;  // 10 s either side of the run
inline constexpr int kControlMaxConnections = 32;
inline constexpr int64_t kControlRequestTimeoutMs = 1000;
inline constexpr size_t kControlMaxRequestBytes = 4096;

// Data-quality counters of the channel.
inline constexpr const char* kControlPeersRefused = "control_peers_refused";
inline constexpr const char* kControlRequestsRefused = "control_requests_refused";
inline constexpr const char* kControlConnectionsDropped = "control_connections_dropped";

struct ControlRequest {
  std::string type;  // "mark", "step", "ping"
  std::string name;  // mark name
  std::optional<int64_t> ts_ns;
  std::optional<int64_t> start_ns;
  std::optional<int64_t> end_ns;
};

// Parses one request line and checks its shape (type, name, field types, end >= start);
// errors name the problem without echoing unprintable input.
StatusOr<ControlRequest> ParseControlRequest(const std::string& line);
// Checks a parsed request's timestamps against the run: inside
// [run_start_ns - kControlClockSlackNs, now_ns + kControlClockSlackNs].
Status ValidateControlRequest(const ControlRequest& request, int64_t run_start_ns, int64_t now_ns);
std::string ControlRequestToJson(const ControlRequest& request);

struct ControlServerOptions {
  // When set, requests are validated against the run (ValidateControlRequest, now = wall
  // clock) before the handler sees them.
  std::optional<int64_t> run_start_ns;
  // Counts the channel's data-quality problems (the counters above); called on the server's
  // thread. May be empty.
  std::function<void(const std::string& counter, int64_t n)> count;
  ConnectionLimits limits{kControlMaxConnections, kControlRequestTimeoutMs,
                          kControlRequestTimeoutMs, kControlMaxRequestBytes, 1 << 20};
};

class ControlServer {
 public:
  // Answers a request: ok with an optional JSON object of extra fields, or an error.
  using Handler = std::function<StatusOr<std::string>(const ControlRequest&)>;

  ~ControlServer();
  // Binds `socket_path` (replacing a stale socket file) and starts serving.
  static StatusOr<std::unique_ptr<ControlServer>> Start(const std::string& socket_path,
                                                        Handler handler,
                                                        ControlServerOptions options = {});
  // Stops serving and removes the socket file (if it is still this server's). Idempotent.
  void Stop();
  const std::string& path() const { return path_; }
  const ConnectionStats& stats() const { return loop_->stats(); }

 private:
  ControlServer(std::string path, Handler handler, ControlServerOptions options);
  std::string Respond(std::string_view line);
  std::optional<std::string> Admit(int fd);
  void Count(const char* counter);

  std::string path_;
  Handler handler_;
  ControlServerOptions options_;
  uint64_t dev_ = 0;  // the socket file's identity, to remove only our own at Stop
  uint64_t ino_ = 0;
  std::unique_ptr<ConnectionLoop> loop_;
  bool stopped_ = false;
};

// Sends one request to the server at `socket_path`, returns the raw response line.
StatusOr<std::string> SendControlRequest(const std::string& socket_path,
                                         const ControlRequest& request, int64_t timeout_ms = 3000);

}  // namespace trainprof::agent
