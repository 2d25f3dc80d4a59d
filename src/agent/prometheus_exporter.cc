#include "agent/prometheus_exporter.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <map>
#include <sstream>

#include "agent/connection_loop.h"
#include "base/files.h"
#include "base/logging.h"

namespace trainprof::agent {
namespace {

// HELP texts of the metrics every node has; others get a generic line naming docs/metrics.md.
const std::map<std::string, std::string>& KnownHelp() {
  static const auto* help = new std::map<std::string, std::string>{
      {"cpu_utilization_ratio", "Share of CPU time not idle (0..1), per core and total."},
      {"cpu_iowait_ratio", "Share of CPU time waiting for I/O (0..1), per core and total."},
      {"memory_used_bytes", "Memory in use on the node (total minus available), bytes."},
      {"memory_total_bytes", "Memory installed on the node, bytes."},
      {"network_receive_bytes_per_second", "Bytes received per second, per interface."},
      {"network_transmit_bytes_per_second", "Bytes sent per second, per interface."},
      {"disk_read_bytes_per_second", "Bytes read per second, per block device."},
      {"disk_write_bytes_per_second", "Bytes written per second, per block device."},
      {"process_cpu_utilization_ratio",
       "CPU used by the training process tree, in cores (1.0 = one core busy)."},
      {"process_resident_memory_bytes", "Resident memory of the training process tree, bytes."},
      {"gpu_utilization_ratio", "Share of time a GPU kernel was running (0..1), per GPU."},
      {"gpu_memory_utilization_ratio", "Share of time GPU memory was read or written (0..1)."},
      {"gpu_memory_used_bytes", "GPU memory in use, bytes."},
      {"gpu_memory_total_bytes", "GPU memory installed, bytes."},
      {"gpu_power_watts", "GPU power draw, watts."},
  };
  return *help;
}

std::string SanitizeName(const std::string& name) {
  std::string out;
  for (char c : name) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
    out.push_back(ok ? c : '_');
  }
  return out;
}

std::string EscapeLabel(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string EscapeHelp(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

const model::GpuInfo* GpuForDevice(const model::NodeInfo& node, const std::string& device) {
  if (device.size() < 4 || device.compare(0, 3, "gpu") != 0) return nullptr;
  int index = 0;
  for (size_t i = 3; i < device.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(device[i]))) return nullptr;
    index = index * 10 + (device[i] - '0');
  }
  for (const auto& gpu : node.gpus) {
    if (gpu.index == index) return &gpu;
  }
  return nullptr;
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  return false;
}

StatusOr<ListenAddress> ParsePrometheusAddress(const std::string& text, bool allow_remote) {
  ListenAddress addr;
  std::string port_text = text;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return InvalidArgument("--prometheus '" + text + "': expected [IPv6]:PORT");
    }
    addr.host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else if (size_t colon = text.rfind(':'); colon != std::string::npos) {
    if (colon > 0) addr.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  int port = -1;
  try {
    size_t used = 0;
    port = std::stoi(port_text, &used);
    if (used != port_text.size()) port = -1;
  } catch (...) {
    port = -1;
  }
  if (port < 0 || port > 65535) {
    return InvalidArgument("--prometheus '" + text + "': expected [HOST:]PORT");
  }
  addr.port = port;
  if (!IsLoopbackHost(addr.host) && !allow_remote) {
    return InvalidArgument("--prometheus '" + text + "': " + addr.host +
                           " is not a loopback address; metrics would be visible to the "
                           "network. Add --prometheus-allow-remote to serve them there.");
  }
  return addr;
}

std::string RenderPrometheusText(const LatestSnapshot& snapshot, const model::NodeInfo& node) {
  // Group by family, keeping the first-seen order of the tick (collector order).
  std::vector<std::string> order;
  std::map<std::string, std::vector<const MetricValue*>> families;
  for (const MetricValue& v : snapshot.values) {
    std::string family = "trainprof_" + SanitizeName(v.metric);
    auto [it, inserted] = families.try_emplace(family);
    if (inserted) order.push_back(family);
    it->second.push_back(&v);
  }
  std::ostringstream out;
  const std::string node_label = "node=\"" + EscapeLabel(node.node) + "\"";
  for (const std::string& family : order) {
    const std::string& metric = families[family].front()->metric;
    auto help = KnownHelp().find(metric);
    bool counter = family.size() > 6 && family.compare(family.size() - 6, 6, "_total") == 0;
    out << "# HELP " << family << " "
        << EscapeHelp(help != KnownHelp().end()
                          ? help->second
                          : "trainprof metric " + metric + " (see docs/metrics.md).")
        << "\n";
    out << "# TYPE " << family << (counter ? " counter" : " gauge") << "\n";
    for (const MetricValue* v : families[family]) {
      out << family << "{" << node_label << ",device=\"" << EscapeLabel(v->device) << "\"";
      if (const model::GpuInfo* gpu = GpuForDevice(node, v->device)) {
        out << ",uuid=\"" << EscapeLabel(gpu->uuid) << "\",model=\"" << EscapeLabel(gpu->name)
            << "\"";
      }
      out << "} " << FormatValue(v->value) << "\n";
    }
  }
  out << "# HELP trainprof_data_quality_total Data-quality problems counted by the recorder "
         "(see model/data_quality.h).\n"
      << "# TYPE trainprof_data_quality_total counter\n";
  for (const auto& [counter, value] : snapshot.counters) {
    out << "trainprof_data_quality_total{" << node_label << ",counter=\"" << EscapeLabel(counter)
        << "\"} " << value << "\n";
  }
  out << "# HELP trainprof_sampling_ticks_total Sampling ticks completed.\n"
      << "# TYPE trainprof_sampling_ticks_total counter\n"
      << "trainprof_sampling_ticks_total{" << node_label << "} " << snapshot.ticks << "\n";
  if (snapshot.tick_wall_ns > 0) {
    out << "# HELP trainprof_last_sample_timestamp_seconds Wall-clock time of the latest tick.\n"
        << "# TYPE trainprof_last_sample_timestamp_seconds gauge\n"
        << "trainprof_last_sample_timestamp_seconds{" << node_label << "} "
        << FormatValue(static_cast<double>(snapshot.tick_wall_ns) / 1e9) << "\n";
  }
  return out.str();
}

PrometheusServer::~PrometheusServer() { Stop(); }

namespace {

std::string HttpResponse(const std::string& status, const std::string& content_type,
                         const std::string& body, bool head_only = false) {
  std::string out = "HTTP/1.1 " + status + "\r\nContent-Type: " + content_type +
                    "\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\nConnection: close\r\n\r\n";
  if (!head_only) out += body;
  return out;
}

// A listening TCP socket on host:port (port 0: any free port, *port set to the one chosen).
StatusOr<int> Listen(const std::string& host, int* port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string service = std::to_string(*port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return InvalidArgument(host + ": " + ::gai_strerror(rc));
  }
  int err = 0;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      sockaddr_storage bound{};
      socklen_t len = sizeof(bound);
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
        *port = bound.ss_family == AF_INET6
                    ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                    : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      }
      ::freeaddrinfo(found);
      return fd;
    }
    err = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return Unavailable(ErrnoMessage(err));
}

}  // namespace

std::string PrometheusServer::Respond(std::string_view request) {
  // "METHOD SP TARGET SP VERSION" on the first line; headers and body are not needed.
  std::string_view line = request.substr(0, request.find_first_of("\r\n"));
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.substr(sp2 + 1).rfind("HTTP/", 0) != 0) {
    return HttpResponse("400 Bad Request", "text/plain", "malformed request line\n");
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find('?'));
  bool head = method == "HEAD";
  if (method != "GET" && !head) {
    return HttpResponse("405 Method Not Allowed", "text/plain", "use GET\n");
  }
  if (target == "/metrics") {
    model::NodeInfo current;
    {
      std::lock_guard<std::mutex> lock(node_mu_);
      current = node_;
    }
    return HttpResponse("200 OK", "text/plain; version=0.0.4; charset=utf-8",
                        RenderPrometheusText(latest_->Get(), current), head);
  }
  if (target == "/") {
    return HttpResponse("200 OK", "text/plain", "trainprof metrics: see /metrics\n", head);
  }
  return HttpResponse("404 Not Found", "text/plain", "not found: try /metrics\n", head);
}

StatusOr<std::unique_ptr<PrometheusServer>> PrometheusServer::Start(const ListenAddress& address,
                                                                    const LatestValues* latest,
                                                                    model::NodeInfo node) {
  std::unique_ptr<PrometheusServer> s(new PrometheusServer());
  s->latest_ = latest;
  s->node_ = std::move(node);
  s->host_ = address.host;
  std::string bind_host = address.host == "localhost" ? "127.0.0.1" : address.host;
  int port = address.port;
  StatusOr<int> fd = Listen(bind_host, &port);
  if (!fd.ok()) {
    return Unavailable("--prometheus: cannot listen on " + address.host + ":" +
                       std::to_string(address.port) + " (" + fd.status().message() +
                       "; port in use or address not local?)");
  }
  s->port_ = port;
  ConnectionLimits limits;
  limits.max_connections = kPrometheusMaxConnections;
  limits.request_timeout_ms = kPrometheusRequestTimeoutMs;
  limits.write_timeout_ms = 5000;
  limits.max_request_bytes = 8192;
  ConnectionHooks hooks;
  hooks.frame = [](std::string_view data, bool) -> size_t {
    size_t crlf = data.find("\r\n\r\n");
    if (crlf != std::string_view::npos) return crlf + 4;
    size_t lf = data.find("\n\n");
    return lf == std::string_view::npos ? 0 : lf + 2;
  };
  PrometheusServer* self = s.get();
  hooks.respond = [self](std::string_view request) { return self->Respond(request); };
  hooks.reject = [](const std::string& reason) {
    bool large = reason.rfind("request larger", 0) == 0;
    return HttpResponse(large ? "431 Request Header Fields Too Large" : "408 Request Timeout",
                        "text/plain", reason + "\n");
  };
  TP_ASSIGN_OR_RETURN(s->loop_, ConnectionLoop::Start(*fd, limits, std::move(hooks)));
  return s;
}

void PrometheusServer::SetNode(model::NodeInfo node) {
  std::lock_guard<std::mutex> lock(node_mu_);
  node_ = std::move(node);
}

void PrometheusServer::Stop() {
  if (loop_) loop_->Stop();
}

const ConnectionStats& PrometheusServer::stats() const { return loop_->stats(); }

std::string PrometheusServer::url() const {
  std::string host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  return "http://" + host + ":" + std::to_string(port_) + "/metrics";
}

}  // namespace trainprof::agent
