#include "agent/prometheus_exporter.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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
      {"process_count", "Processes in the training process tree at the tick."},
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

// The family of a stored metric: trainprof_<metric>, except that a gauge may not end in the
// suffixes Prometheus reserves for histograms and summaries (promtool's lint, and queries that
// take x_count for a summary's): process_count becomes trainprof_processes, any other such name
// gets "_value" appended.
std::string FamilyName(const std::string& metric) {
  if (metric == "process_count") return "trainprof_processes";
  std::string family = "trainprof_" + SanitizeName(metric);
  for (std::string_view reserved : {"_count", "_sum", "_bucket"}) {
    if (family.size() > reserved.size() &&
        family.compare(family.size() - reserved.size(), reserved.size(), reserved) == 0) {
      return family + "_value";
    }
  }
  return family;
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

// The shortest text that reads back as `v` ("0.025", not "0.025000000000000001"): bucket
// bounds as the client libraries write them.
std::string ShortestValue(double v) {
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
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

StatusOr<PrometheusNaming> ParsePrometheusNames(const std::string& text) {
  PrometheusNaming naming;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string word = text.substr(pos, comma - pos);
    if (word == "dcgm") {
      naming.dcgm = true;
    } else if (word == "node_exporter" || word == "node") {
      naming.node_exporter = true;
    } else if (word == "all") {
      naming.dcgm = naming.node_exporter = true;
    } else if (word != "trainprof" && !(word.empty() && text.empty())) {
      return InvalidArgument("--prometheus-names '" + text + "': '" + word +
                             "' is not one of trainprof, dcgm, node_exporter, all");
    }
    pos = comma + 1;
  }
  return naming;
}

namespace {

// One metric family: HELP, TYPE and its sample lines, written in first-seen order.
class Families {
 public:
  void Add(const std::string& name, const std::string& type, const std::string& help,
           const std::string& labels, double value) {
    auto [it, inserted] = families_.try_emplace(name);
    if (inserted) {
      order_.push_back(name);
      it->second.type = type;
      it->second.help = help;
    }
    it->second.lines +=
        name + (labels.empty() ? "" : "{" + labels + "}") + " " + FormatValue(value) + "\n";
  }
  void AddRaw(const std::string& name, const std::string& type, const std::string& help,
              const std::string& lines) {
    auto [it, inserted] = families_.try_emplace(name);
    if (inserted) {
      order_.push_back(name);
      it->second.type = type;
      it->second.help = help;
    }
    it->second.lines += lines;
  }
  void Write(std::ostringstream& out) const {
    for (const std::string& name : order_) {
      const Family& f = families_.at(name);
      out << "# HELP " << name << " " << EscapeHelp(f.help) << "\n"
          << "# TYPE " << name << " " << f.type << "\n"
          << f.lines;
    }
  }

 private:
  struct Family {
    std::string type, help, lines;
  };
  std::vector<std::string> order_;
  std::map<std::string, Family> families_;
};

// dcgm-exporter's names (its default counters), units and types, for the GPU metrics whose
// meaning is the same (docs/cli.md, "Names other exporters use").
struct OtherName {
  const char* name;
  const char* type;
  double scale;  // trainprof value x scale = the other exporter's value
  const char* help;
};
const OtherName* DcgmName(const std::string& metric) {
  static const auto* map = new std::map<std::string, OtherName>{
      {"gpu_utilization_ratio", {"DCGM_FI_DEV_GPU_UTIL", "gauge", 100, "GPU utilization (in %)."}},
      {"gpu_memory_utilization_ratio",
       {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", 100, "Memory utilization (in %)."}},
      {"gpu_memory_used_bytes",
       {"DCGM_FI_DEV_FB_USED", "gauge", 1.0 / (1 << 20), "Framebuffer memory used (in MiB)."}},
      {"gpu_power_watts", {"DCGM_FI_DEV_POWER_USAGE", "gauge", 1, "Power draw (in W)."}},
      {"gpu_temperature_celsius", {"DCGM_FI_DEV_GPU_TEMP", "gauge", 1, "GPU temperature (in C)."}},
      {"gpu_sm_clock_hertz",
       {"DCGM_FI_DEV_SM_CLOCK", "gauge", 1e-6, "SM clock frequency (in MHz)."}},
      {"gpu_memory_clock_hertz",
       {"DCGM_FI_DEV_MEM_CLOCK", "gauge", 1e-6, "Memory clock frequency (in MHz)."}},
      {"gpu_energy_joules_total",
       {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", 1000,
        "Total energy consumption since boot (in mJ)."}},
      {"gpu_ecc_corrected_errors_total",
       {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", 1,
        "Total number of single-bit volatile ECC errors."}},
      {"gpu_ecc_uncorrected_errors_total",
       {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", 1,
        "Total number of double-bit volatile ECC errors."}},
  };
  auto it = map->find(metric);
  return it == map->end() ? nullptr : &it->second;
}

// node_exporter's names for the host series that mean the same (per interface / disk, not
// the "total" device node_exporter does not have).
const OtherName* NodeExporterName(const std::string& metric) {
  static const auto* map = new std::map<std::string, OtherName>{
      {"memory_total_bytes",
       {"node_memory_MemTotal_bytes", "gauge", 1, "Memory information field MemTotal_bytes."}},
      {"load_average_1m", {"node_load1", "gauge", 1, "1m load average."}},
      {"load_average_5m", {"node_load5", "gauge", 1, "5m load average."}},
      {"load_average_15m", {"node_load15", "gauge", 1, "15m load average."}},
      {"network_receive_errors_total",
       {"node_network_receive_errs_total", "counter", 1, "Network device statistic receive_errs."}},
      {"network_transmit_errors_total",
       {"node_network_transmit_errs_total", "counter", 1,
        "Network device statistic transmit_errs."}},
      {"network_receive_drops_total",
       {"node_network_receive_drop_total", "counter", 1, "Network device statistic receive_drop."}},
      {"network_transmit_drops_total",
       {"node_network_transmit_drop_total", "counter", 1,
        "Network device statistic transmit_drop."}},
      // Integrated counters (LatestSnapshot::integrated): bytes since the recording began.
      {"network_receive_bytes_total",
       {"node_network_receive_bytes_total", "counter", 1,
        "Network device statistic receive_bytes (since trainprof started)."}},
      {"network_transmit_bytes_total",
       {"node_network_transmit_bytes_total", "counter", 1,
        "Network device statistic transmit_bytes (since trainprof started)."}},
      {"disk_read_bytes_total",
       {"node_disk_read_bytes_total", "counter", 1,
        "The total number of bytes read successfully (since trainprof started)."}},
      {"disk_write_bytes_total",
       {"node_disk_written_bytes_total", "counter", 1,
        "The total number of bytes written successfully (since trainprof started)."}},
  };
  auto it = map->find(metric);
  return it == map->end() ? nullptr : &it->second;
}

std::string Label(const char* name, const std::string& value) {
  return std::string(name) + "=\"" + EscapeLabel(value) + "\"";
}

}  // namespace

std::string RenderPrometheusText(const LatestSnapshot& snapshot, const model::NodeInfo& node,
                                 const PrometheusNaming& naming,
                                 const std::map<std::string, StepModeStats>* steps) {
  Families families;
  const std::string node_label = Label("node", node.node);
  auto trainprof_labels = [&](const std::string& device) {
    std::string labels = node_label + "," + Label("device", device);
    if (const model::GpuInfo* gpu = GpuForDevice(node, device)) {
      labels += "," + Label("uuid", gpu->uuid) + "," + Label("model", gpu->name);
    }
    return labels;
  };
  auto trainprof_help = [](const std::string& metric) {
    auto help = KnownHelp().find(metric);
    return help != KnownHelp().end() ? help->second
                                     : "trainprof metric " + metric + " (see docs/metrics.md).";
  };
  auto is_counter = [](const std::string& name) {
    return name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
  };
  // A series under another exporter's name, when asked for and the meaning matches.
  auto other = [&](const std::string& metric, const std::string& device, double value) {
    if (naming.dcgm) {
      if (const OtherName* o = DcgmName(metric)) {
        if (const model::GpuInfo* gpu = GpuForDevice(node, device)) {
          families.Add(o->name, o->type, o->help,
                       Label("gpu", std::to_string(gpu->index)) + "," + Label("UUID", gpu->uuid) +
                           "," + Label("device", "nvidia" + std::to_string(gpu->index)) + "," +
                           Label("modelName", gpu->name) + "," + Label("Hostname", node.node),
                       value * o->scale);
          return true;
        }
      }
    }
    if (naming.node_exporter && device != "total") {
      if (const OtherName* o = NodeExporterName(metric)) {
        families.Add(o->name, o->type, o->help, device.empty() ? "" : Label("device", device),
                     value * o->scale);
        return true;
      }
    }
    return false;
  };

  double mem_total = NAN, mem_used = NAN;
  for (const MetricValue& v : snapshot.values) {
    if (v.metric == "memory_total_bytes" && v.device.empty()) mem_total = v.value;
    if (v.metric == "memory_used_bytes" && v.device.empty()) mem_used = v.value;
    if (other(v.metric, v.device, v.value)) continue;
    const std::string family = FamilyName(v.metric);
    families.Add(family, is_counter(family) ? "counter" : "gauge", trainprof_help(v.metric),
                 trainprof_labels(v.device), v.value);
  }
  if (naming.node_exporter && !std::isnan(mem_total) && !std::isnan(mem_used)) {
    // memory_used_bytes is MemTotal - MemAvailable (docs/metrics.md).
    families.Add("node_memory_MemAvailable_bytes", "gauge",
                 "Memory information field MemAvailable_bytes.", "", mem_total - mem_used);
  }
  for (const auto& [key, value] : snapshot.integrated) {
    const auto& [counter, device] = key;
    if (naming.node_exporter && device.size() > 3 && device.compare(0, 3, "cpu") == 0 &&
        (counter == "cpu_idle_seconds_total" || counter == "cpu_iowait_seconds_total")) {
      families.Add("node_cpu_seconds_total", "counter",
                   "Seconds the CPUs spent in each mode (idle and iowait only; since trainprof "
                   "started).",
                   Label("cpu", device.substr(3)) + "," +
                       Label("mode", counter == "cpu_idle_seconds_total" ? "idle" : "iowait"),
                   value);
      continue;
    }
    if (other(counter, device, value)) continue;
    families.Add("trainprof_" + SanitizeName(counter), "counter",
                 "Accumulated from trainprof's sampled rate or share since the recording began "
                 "(see docs/cli.md).",
                 trainprof_labels(device), value);
  }

  if (steps != nullptr) {
    for (const auto& [mode, s] : *steps) {
      const std::string labels = node_label + "," + Label("mode", mode);
      families.Add("trainprof_steps_total", "counter",
                   "Training steps the instrumented processes completed, by mode.", labels,
                   static_cast<double>(s.steps));
      std::string lines;
      const std::vector<double>& bounds = StepDurationBuckets();
      for (size_t i = 0; i < bounds.size() && i < s.bucket_counts.size(); ++i) {
        lines += "trainprof_step_duration_seconds_bucket{" + labels + ",le=\"" +
                 ShortestValue(bounds[i]) + "\"} " + std::to_string(s.bucket_counts[i]) + "\n";
      }
      lines += "trainprof_step_duration_seconds_bucket{" + labels + ",le=\"+Inf\"} " +
               std::to_string(s.steps) + "\n";
      lines += "trainprof_step_duration_seconds_sum{" + labels + "} " +
               FormatValue(s.duration_sum_s) + "\n";
      lines +=
          "trainprof_step_duration_seconds_count{" + labels + "} " + std::to_string(s.steps) + "\n";
      families.AddRaw("trainprof_step_duration_seconds", "histogram",
                      "Step time (start to end of each step), seconds.", lines);
      families.Add("trainprof_data_wait_seconds_total", "counter",
                   "Time spent waiting for input batches (data_wait spans), seconds.", labels,
                   s.data_wait_sum_s);
      families.Add("trainprof_data_wait_ratio", "gauge",
                   "Share of step time spent waiting for data, over the steps of the last 10 s "
                   "before the newest step (NaN: none).",
                   labels, s.data_wait_ratio);
      families.Add("trainprof_throughput_steps_per_second", "gauge",
                   "Steps per second over the steps that ended in the last 10 s before the "
                   "newest one (NaN: fewer than two).",
                   labels, s.throughput_steps_per_second);
      if (s.last_end_ns > 0) {
        families.Add("trainprof_last_step_timestamp_seconds", "gauge",
                     "Wall-clock time the newest step ended.", labels,
                     static_cast<double>(s.last_end_ns) / 1e9);
      }
    }
  }

  std::ostringstream out;
  families.Write(out);
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
    std::map<std::string, StepModeStats> steps;
    if (steps_ != nullptr) steps = steps_->Get();
    return HttpResponse("200 OK", "text/plain; version=0.0.4; charset=utf-8",
                        RenderPrometheusText(latest_->Get(), current, naming_,
                                             steps_ != nullptr ? &steps : nullptr),
                        head);
  }
  if (target == "/") {
    return HttpResponse("200 OK", "text/plain", "trainprof metrics: see /metrics\n", head);
  }
  return HttpResponse("404 Not Found", "text/plain", "not found: try /metrics\n", head);
}

StatusOr<std::unique_ptr<PrometheusServer>> PrometheusServer::Start(const ListenAddress& address,
                                                                    const LatestValues* latest,
                                                                    model::NodeInfo node,
                                                                    PrometheusNaming naming,
                                                                    const StepMetrics* steps) {
  std::unique_ptr<PrometheusServer> s(new PrometheusServer());
  s->latest_ = latest;
  s->naming_ = naming;
  s->steps_ = steps;
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
