#include "serve/server.h"

#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <system_error>

#include "base/json_dump.h"
#include "base/logging.h"
#include "base/time.h"
#include "report/report_assets.h"
#include "serve/api.h"
#include "serve/fleet_api.h"
#include "store/run_reader.h"

namespace trainprof::serve {
namespace assets {
extern const std::string_view kIndexHtml;
extern const std::string_view kAppJs;
extern const std::string_view kAppCss;
}  // namespace assets

namespace {

using nlohmann::json;

constexpr const char* kIdPattern = "([0-9a-f]{16})";

void Json(httplib::Response& res, const json& j, int status = 200) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(DumpJson(j), "application/json");
}

void Error(httplib::Response& res, int status, const std::string& message) {
  Json(res, {{"error", message}}, status);
}

Params ParamsOf(const httplib::Request& req) {
  Params p;
  for (const auto& [k, v] : req.params) p.emplace(k, v);
  return p;
}

std::string CookieToken(const httplib::Request& req) {
  const std::string cookie = req.get_header_value("Cookie");
  const std::string key = "tp_token=";
  size_t at = cookie.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  const size_t end = cookie.find(';', at);
  return cookie.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

void SleepNs(int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

bool SameSecret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

StatusOr<ListenAddress> ParseAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument("address '" + address + "' is not HOST:PORT (e.g. 127.0.0.1:8787)");
  }
  ListenAddress a;
  a.host = address.substr(0, colon);
  if (a.host.size() > 2 && a.host.front() == '[' && a.host.back() == ']') {
    a.host = a.host.substr(1, a.host.size() - 2);
  }
  try {
    size_t used = 0;
    a.port = std::stoi(address.substr(colon + 1), &used);
    if (used != address.size() - colon - 1 || a.port < 0 || a.port > 65535) throw 0;
  } catch (...) {
    return InvalidArgument("address '" + address + "': bad port");
  }
  return a;
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string NewToken() {
  unsigned char bytes[16] = {};
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    (void)!::read(fd, bytes, sizeof bytes);
    ::close(fd);
  }
  std::string out;
  char hex[3];
  for (unsigned char b : bytes) {
    std::snprintf(hex, sizeof hex, "%02x", b);
    out += hex;
  }
  return out;
}

Server::Server(ServeOptions options)
    : answers_(AnswerCache::Policy{}, MonotonicNowNs),
      options_(std::move(options)),
      index_(options_.roots),
      http_(new httplib::Server()) {}

Server::~Server() { Stop(); }

StatusOr<RunVersion> Server::VersionOf(const std::string& dir) {
  std::shared_ptr<Watched> w;
  {
    std::lock_guard<std::mutex> lock(watched_mu_);
    auto& slot = watched_[dir];
    if (!slot) slot = std::make_shared<Watched>();
    w = slot;
  }
  std::lock_guard<std::mutex> lock(w->mu);
  const int64_t now = MonotonicNowNs();
  if (w->reader && now - w->checked_ns < options_.stream_poll_ns) return w->version;
  if (!w->reader) {
    TP_ASSIGN_OR_RETURN(w->reader, store::RunReader::Open(dir));
  }
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> latest, Latest(*w->reader));
  w->version = {latest, w->reader->metadata().exit_status.has_value()};
  w->checked_ns = now;
  return w->version;
}

StatusOr<std::unique_ptr<Server>> Server::Start(ServeOptions options) {
  TP_ASSIGN_OR_RETURN(ListenAddress addr, ParseAddress(options.address));
  if (!IsLoopback(addr.host) && options.token.empty()) options.token = NewToken();
  if (options.roots.empty()) return InvalidArgument("no run directories to serve");
  std::unique_ptr<Server> s(new Server(std::move(options)));
  s->host_ = addr.host;
  (void)s->index_.Rescan();
  s->Routes();
  httplib::Server& h = *s->http_;
  const int workers = std::max(s->options_.max_streams + 32, s->options_.worker_threads);
  h.new_task_queue = [workers] { return new httplib::ThreadPool(static_cast<size_t>(workers)); };
  h.set_payload_max_length(16 * 1024);
  h.set_read_timeout(5, 0);
  h.set_write_timeout(5, 0);
  h.set_keep_alive_max_count(100);
  h.set_keep_alive_timeout(2);
  // Headers and body go out in separate writes: with Nagle's algorithm the body waits for the
  // client's delayed ACK (40 ms on Linux), which was the API's whole median latency.
  h.set_tcp_nodelay(true);
  int port = addr.port;
  if (port == 0) {
    port = h.bind_to_any_port(addr.host);
    if (port < 0) return Unavailable("cannot listen on " + addr.host);
  } else if (!h.bind_to_port(addr.host, port)) {
    return Unavailable("cannot listen on " + s->options_.address +
                       " (in use? choose another with --addr)");
  }
  s->port_ = port;
  Server* self = s.get();
  try {
    s->thread_ = std::thread([self] { self->http_->listen_after_bind(); });
  } catch (const std::system_error& e) {
    return Unavailable(std::string("cannot start the server's thread: ") + e.what());
  }
  return s;
}

void Server::Stop() {
  stopping_ = true;
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string Server::url() const {
  const bool v6 = host_.find(':') != std::string::npos;
  std::string u = "http://" + (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_) + "/";
  if (!options_.token.empty()) u += "?token=" + options_.token;
  return u;
}

void Server::Routes() {
  httplib::Server& h = *http_;
  // Every request: the token when one is set; response headers that keep the page to itself.
  h.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("X-Frame-Options", "DENY");
    if (options_.token.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string given = CookieToken(req);
    if (req.has_param("token")) given = req.get_param_value("token");
    const std::string auth = req.get_header_value("Authorization");
    if (auth.rfind("Bearer ", 0) == 0) given = auth.substr(7);
    if (!SameSecret(given, options_.token)) {
      Error(res, 401, "a token is required (the URL printed by trainprof serve has it)");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.has_param("token")) {
      res.set_header("Set-Cookie",
                     "tp_token=" + options_.token + "; HttpOnly; SameSite=Strict; Path=/");
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  auto asset = [&h](const std::string& path, std::string_view body, const char* type) {
    h.Get(path, [body, type](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-cache");
      res.set_content(std::string(body), type);
    });
  };
  asset("/", assets::kIndexHtml, "text/html; charset=utf-8");
  asset("/assets/app.js", assets::kAppJs, "text/javascript");
  asset("/assets/app.css", assets::kAppCss, "text/css");
  asset("/assets/charts.js", report::assets::kChartsJs, "text/javascript");
  asset("/assets/dygraph.min.js", report::assets::kDygraphsJs, "text/javascript");
  asset("/assets/dygraph.min.css", report::assets::kDygraphsCss, "text/css");
  asset("/assets/dygraphs-LICENSE.txt", report::assets::kDygraphsNotice, "text/plain");

  AddFleetRoute(h, options_.roots, options_.fleet_command);
  h.Get("/api/runs", [this](const httplib::Request&, httplib::Response& res) {
    (void)index_.Rescan(2'000'000'000);
    Json(res, RunsJson(index_, WallNowNs()));
  });

  // /api/runs/<id>[/<what>]: the run is looked up by id only; the answers are shared by the
  // clients (answer_cache.h).
  auto with_run = [this](const std::string& pattern, auto handler) {
    http_->Get(pattern, [this, handler](const httplib::Request& req, httplib::Response& res) {
      auto run = index_.Find(req.matches[1]);
      if (!run) {
        (void)index_.Rescan(1'000'000'000);
        run = index_.Find(req.matches[1]);
      }
      if (!run) return Error(res, 404, "no such run");
      auto version = VersionOf(run->dir);
      if (!version.ok()) return Error(res, 500, version.status().message());
      std::string key = run->dir + '\n' + req.path;
      for (const auto& [k, v] : req.params) {
        if (k != "token") key += '\n' + k + '=' + v;
      }
      const AnswerCache::Answer answer = answers_.Get(key, *version, [&] {
        AnswerCache::Answer made{200, nullptr};
        auto reader = store::RunReader::Open(run->dir);
        StatusOr<json> body =
            reader.ok() ? handler(*run, **reader, ParamsOf(req)) : StatusOr<json>(reader.status());
        if (body.ok()) {
          made.body = std::make_shared<const std::string>(DumpJson(*body));
        } else {
          made.status = body.status().code() == StatusCode::kInvalidArgument ? 400 : 500;
          made.body = std::make_shared<const std::string>(
              DumpJson(json{{"error", body.status().message()}}));
        }
        return made;
      });
      res.status = answer.status;
      res.set_header("Cache-Control", "no-store");
      res.set_content(*answer.body, "application/json");
    });
  };
  with_run(std::string("/api/runs/") + kIdPattern,
           [this](const IndexedRun& run, store::RunReader& r, const Params&) {
             return OverviewJson(run, r, options_.build, WallNowNs());
           });
  with_run(std::string("/api/runs/") + kIdPattern + "/info",
           [](const IndexedRun& run, store::RunReader& r, const Params&) -> StatusOr<json> {
             return RunInfoJson(run, r, WallNowNs());
           });
  with_run(std::string("/api/runs/") + kIdPattern + "/processes",
           [](const IndexedRun&, store::RunReader& r, const Params&) { return ProcessesJson(r); });
  with_run(std::string("/api/runs/") + kIdPattern + "/series",
           [](const IndexedRun&, store::RunReader& r, const Params&) { return SeriesListJson(r); });
  with_run(
      std::string("/api/runs/") + kIdPattern + "/metric",
      [](const IndexedRun&, store::RunReader& r, const Params& p) { return MetricJson(r, p); });
  with_run(std::string("/api/runs/") + kIdPattern + "/steps",
           [](const IndexedRun&, store::RunReader& r, const Params& p) { return StepsJson(r, p); });
  with_run(
      std::string("/api/runs/") + kIdPattern + "/events",
      [](const IndexedRun&, store::RunReader& r, const Params& p) { return EventsJson(r, p); });

  // Live: one server-sent event each time the run's newest timestamp moves (new samples,
  // steps, findings), polled every stream_poll_ns; a comment every 10 s keeps proxies open.
  h.Get(std::string("/api/runs/") + kIdPattern + "/stream",
        [this](const httplib::Request& req, httplib::Response& res) {
          auto run = index_.Find(req.matches[1]);
          if (!run) return Error(res, 404, "no such run");
          if (streams_.fetch_add(1) >= options_.max_streams) {
            streams_.fetch_sub(1);
            res.set_header("Connection", "close");  // and free the worker at once
            return Error(res, 503, "too many live streams");
          }
          struct State {
            std::optional<RunVersion> sent;
            int64_t started = MonotonicNowNs(), last_write = 0;
            bool first = true;
          };
          auto state = std::make_shared<State>();
          const std::string dir = run->dir;
          res.set_header("Cache-Control", "no-store");
          res.set_chunked_content_provider(
              "text/event-stream",
              [this, state, dir](size_t, httplib::DataSink& sink) {
                if (stopping_ || MonotonicNowNs() - state->started > options_.stream_max_ns) {
                  sink.done();
                  return true;
                }
                if (!state->first) SleepNs(options_.stream_poll_ns);
                state->first = false;
                auto version = VersionOf(dir);
                if (!version.ok()) return false;
                std::string msg;
                if (state->sent != *version) {
                  state->sent = *version;
                  const json ev = {
                      {"latest_ns", version->latest ? json(*version->latest) : json(nullptr)},
                      {"finished", version->finished}};
                  msg = "event: update\ndata: " + DumpJson(ev) + "\n\n";
                } else if (MonotonicNowNs() - state->last_write > 10'000'000'000) {
                  msg = ": alive\n\n";
                }
                if (!msg.empty()) {
                  state->last_write = MonotonicNowNs();
                  if (!sink.write(msg.data(), msg.size())) return false;
                }
                return sink.is_writable();
              },
              [this](bool) { streams_.fetch_sub(1); });
        });
}

}  // namespace trainprof::serve
