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
// Paths longer than a sockaddr_un allows are reached through /proc/self/fd/<dir fd>/<name>.
//
// Threads: the server runs one background thread that serves connections one at a time, each
// with a short deadline, so a stuck client cannot block others for long; the handler runs on it.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "base/status.h"

namespace trainprof::agent {

inline constexpr const char* kControlSocketName = "control.sock";

struct ControlRequest {
  std::string type;  // "mark", "step", "ping"
  std::string name;  // mark name
  std::optional<int64_t> ts_ns;
  std::optional<int64_t> start_ns;
  std::optional<int64_t> end_ns;
};

// Parses one request line; errors name the problem.
StatusOr<ControlRequest> ParseControlRequest(const std::string& line);
std::string ControlRequestToJson(const ControlRequest& request);

class ControlServer {
 public:
  // Answers a request: ok with an optional JSON object of extra fields, or an error.
  using Handler = std::function<StatusOr<std::string>(const ControlRequest&)>;

  ~ControlServer();
  // Binds `socket_path` (replacing a stale socket file) and starts serving.
  static StatusOr<std::unique_ptr<ControlServer>> Start(const std::string& socket_path,
                                                        Handler handler);
  // Stops serving and removes the socket file. Idempotent.
  void Stop();
  const std::string& path() const { return path_; }

 private:
  ControlServer(std::string path, int listen_fd, int wake_read, int wake_write, Handler handler);
  void Serve();
  void ServeOne(int fd);

  std::string path_;
  int listen_fd_;
  int wake_read_;
  int wake_write_;
  Handler handler_;
  std::thread thread_;
};

// Sends one request to the server at `socket_path`, returns the raw response line.
StatusOr<std::string> SendControlRequest(const std::string& socket_path,
                                         const ControlRequest& request, int64_t timeout_ms = 3000);

}  // namespace trainprof::agent
