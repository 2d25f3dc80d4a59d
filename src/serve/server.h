#pragma once
// `trainprof serve` / `record --serve`: the live dashboard's HTTP server (cpp-httplib) over a
// RunIndex and the API in api.h, with the page's assets embedded in the binary.
//
// Security: binds 127.0.0.1 unless told otherwise; any other address needs a token (given, or
// generated and printed) on every request (Authorization: Bearer, ?token= once, then a cookie).
// Read-only. Runs are named by id (run_index.h), so no URL reaches a path outside the roots.
// Requests are bounded (size, read/write timeouts, worker threads, live streams).
//
// Threads: Start() returns once listening; requests run on the server's worker threads.

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "report/report_model.h"
#include "serve/answer_cache.h"
#include "serve/run_index.h"
#include "store/run_reader.h"

namespace httplib {
class Server;
}

namespace trainprof::serve {

inline constexpr const char* kDefaultAddress = "127.0.0.1:8787";

struct ServeOptions {
  std::vector<std::string> roots;         // run directories, or directories holding runs
  std::string address = kDefaultAddress;  // host:port; port 0 picks a free one
  std::string token;                      // required on every request when not empty
  report::BuildOptions build;             // how the overview's report model is made
  // Worker threads: each open connection (keep-alive) or live stream holds one; at least
  // max_streams + 32. Connections beyond wait in the queue.
  int worker_threads = 96;
  int max_streams = 64;  // live (server-sent events) connections at once
  int64_t stream_poll_ns = 250'000'000;
  int64_t stream_max_ns = 3600'000'000'000;  // a stream ends after this; the page reconnects
  // argv of the fleet view before its runs (fleet_api.h); empty: /api/fleet answers 503.
  std::vector<std::string> fleet_command;
};

struct ListenAddress {
  std::string host;
  int port = 0;
};
StatusOr<ListenAddress> ParseAddress(const std::string& address);
bool IsLoopback(const std::string& host);
// 32 hex digits from the kernel's random source.
std::string NewToken();

class Server {
 public:
  ~Server();
  // Listens on options.address. A non-loopback address without a token gets a new token.
  static StatusOr<std::unique_ptr<Server>> Start(ServeOptions options);
  void Stop();
  // http://host:port/ (with ?token=... when a token is required)
  std::string url() const;
  const std::string& token() const { return options_.token; }
  int port() const { return port_; }

 private:
  explicit Server(ServeOptions options);
  void Routes();

  // A run's version, read from one shared reader per run at most every stream_poll_ns, however
  // many clients ask.
  StatusOr<RunVersion> VersionOf(const std::string& dir);
  struct Watched {
    std::mutex mu;
    std::unique_ptr<store::RunReader> reader;
    int64_t checked_ns = 0;
    RunVersion version;
  };
  std::mutex watched_mu_;
  std::map<std::string, std::shared_ptr<Watched>> watched_;
  // The answers, by run and request (path and query): answer_cache.h.
  AnswerCache answers_;

  ServeOptions options_;
  RunIndex index_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  std::string host_;
  int port_ = 0;
  std::atomic<int> streams_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace trainprof::serve
