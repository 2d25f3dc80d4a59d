#include "model/run_metadata.h"

#include <unistd.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <random>
#include <string_view>

#include "base/files.h"
#include "base/json_dump.h"
#include "base/platform.h"
#include "base/time.h"

namespace trainprof::model {
namespace {

using nlohmann::json;

template <typename T>
void PutOptional(json& j, const char* key, const std::optional<T>& v) {
  j[key] = v ? json(*v) : json(nullptr);
}

template <typename T>
StatusOr<std::optional<T>> GetOptional(const json& j, const char* key, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<T>();
  try {
    return std::optional<T>(it->get<T>());
  } catch (const json::exception&) {
    return DataLoss(origin + ": field '" + key + "' has the wrong type");
  }
}

template <typename T>
Status GetRequired(const json& j, const char* key, const std::string& origin, T* out) {
  auto it = j.find(key);
  if (it == j.end()) return DataLoss(origin + ": required field '" + key + "' is missing");
  try {
    *out = it->get<T>();
  } catch (const json::exception&) {
    return DataLoss(origin + ": field '" + key + "' has the wrong type");
  }
  return OkStatus();
}

StatusOr<json> Parse(const std::string& text, const std::string& origin) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return DataLoss(origin + ": not valid JSON");
  if (!j.is_object()) return DataLoss(origin + ": expected a JSON object");
  return j;
}

}  // namespace

namespace {

constexpr const char* kRedacted = "<redacted>";

// Whether a variable or flag name (any case, '-' or '_') names a secret.
bool NamesSecret(std::string_view name) {
  std::string n;
  for (char c : name) {
    if (c == '-') c = '_';
    n.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  }
  for (const char* word : {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY",
                           "ACCESS_KEY", "PRIVATE_KEY", "CREDENTIAL"}) {
    if (n.find(word) != std::string::npos) return true;
  }
  return false;
}

bool IsVariableName(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// Passwords in URLs and AWS access key ids, wherever they appear in an argument.
std::string RedactInside(std::string a) {
  for (size_t from = 0;;) {
    size_t scheme = a.find("://", from);
    if (scheme == std::string::npos) break;
    size_t start = scheme + 3;
    size_t end = a.find_first_of("/?# ", start);
    if (end == std::string::npos) end = a.size();
    size_t at = a.rfind('@', end);
    size_t colon = a.find(':', start);
    if (at != std::string::npos && at >= start && colon != std::string::npos && colon < at) {
      a.replace(colon + 1, at - colon - 1, kRedacted);
      end = colon + 1 + std::string_view(kRedacted).size();
    }
    from = end;
  }
  for (size_t i = 0; i + 20 <= a.size(); ++i) {
    if (a.compare(i, 4, "AKIA") != 0 && a.compare(i, 4, "ASIA") != 0) continue;
    bool key = true;
    for (size_t k = i + 4; k < i + 20 && key; ++k) {
      key = std::isupper(static_cast<unsigned char>(a[k])) ||
            std::isdigit(static_cast<unsigned char>(a[k]));
    }
    if (key) a.replace(i, 20, kRedacted);
  }
  return a;
}

}  // namespace

std::vector<std::string> RedactCommand(const std::vector<std::string>& command) {
  std::vector<std::string> out;
  out.reserve(command.size());
  bool redact_next = false;
  for (const std::string& arg : command) {
    if (redact_next) {
      redact_next = false;
      out.emplace_back(kRedacted);
      continue;
    }
    const size_t eq = arg.find('=');
    if (arg.size() > 2 && arg[0] == '-') {
      const size_t dashes = arg[1] == '-' ? 2 : 1;
      const std::string_view name = std::string_view(arg).substr(
          dashes, eq == std::string::npos ? std::string::npos : eq - dashes);
      if (NamesSecret(name)) {
        if (eq == std::string::npos) {
          redact_next = true;  // --token VALUE
          out.push_back(arg);
        } else {
          out.push_back(arg.substr(0, eq + 1) + kRedacted);
        }
        continue;
      }
    } else if (eq != std::string::npos && IsVariableName(std::string_view(arg).substr(0, eq)) &&
               NamesSecret(std::string_view(arg).substr(0, eq))) {
      out.push_back(arg.substr(0, eq + 1) + kRedacted);  // HF_TOKEN=VALUE
      continue;
    }
    out.push_back(RedactInside(arg));
  }
  return out;
}

std::string RunMetadataToJson(const RunMetadata& m) {
  json j;
  j["format_version"] = m.format_version;
  j["run_id"] = m.run_id;
  j["name"] = m.name;
  j["command"] = RedactCommand(m.command);
  j["start_ns"] = m.start_ns;
  PutOptional(j, "end_ns", m.end_ns);
  PutOptional(j, "exit_status", m.exit_status);
  j["source"] = m.source;
  j["instance_type"] = m.instance_type;
  PutOptional(j, "instance_count", m.instance_count);
  j["tags"] = m.tags;
  j["trainprof_version"] = m.trainprof_version;
  return DumpJson(j, 2) + "\n";
}

StatusOr<RunMetadata> RunMetadataFromJson(const std::string& text, const std::string& origin) {
  TP_ASSIGN_OR_RETURN(json j, Parse(text, origin));
  RunMetadata m;
  TP_RETURN_IF_ERROR(GetRequired(j, "format_version", origin, &m.format_version));
  if (m.format_version > kRunFormatVersion) {
    return FailedPrecondition(origin + ": run format version " + std::to_string(m.format_version) +
                              " is newer than this trainprof understands (" +
                              std::to_string(kRunFormatVersion) + "); upgrade trainprof");
  }
  TP_RETURN_IF_ERROR(GetRequired(j, "run_id", origin, &m.run_id));
  TP_RETURN_IF_ERROR(GetRequired(j, "start_ns", origin, &m.start_ns));
  TP_ASSIGN_OR_RETURN(auto name, GetOptional<std::string>(j, "name", origin));
  m.name = name.value_or("");
  TP_ASSIGN_OR_RETURN(auto command, GetOptional<std::vector<std::string>>(j, "command", origin));
  m.command = command.value_or(std::vector<std::string>{});
  TP_ASSIGN_OR_RETURN(m.end_ns, GetOptional<int64_t>(j, "end_ns", origin));
  TP_ASSIGN_OR_RETURN(m.exit_status, GetOptional<int>(j, "exit_status", origin));
  TP_ASSIGN_OR_RETURN(auto source, GetOptional<std::string>(j, "source", origin));
  m.source = source.value_or("");
  TP_ASSIGN_OR_RETURN(auto itype, GetOptional<std::string>(j, "instance_type", origin));
  m.instance_type = itype.value_or("");
  TP_ASSIGN_OR_RETURN(m.instance_count, GetOptional<int>(j, "instance_count", origin));
  TP_ASSIGN_OR_RETURN(auto tags,
                      (GetOptional<std::map<std::string, std::string>>(j, "tags", origin)));
  m.tags = tags.value_or(std::map<std::string, std::string>{});
  TP_ASSIGN_OR_RETURN(auto version, GetOptional<std::string>(j, "trainprof_version", origin));
  m.trainprof_version = version.value_or("");
  return m;
}

std::string NodeInfoToJson(const NodeInfo& n) {
  json j;
  j["node"] = n.node;
  j["hostname"] = n.hostname;
  j["cpu_model"] = n.cpu_model;
  PutOptional(j, "cpu_cores", n.cpu_cores);
  PutOptional(j, "memory_total_bytes", n.memory_total_bytes);
  json gpus = json::array();
  for (const GpuInfo& g : n.gpus) {
    json gj;
    gj["index"] = g.index;
    gj["name"] = g.name;
    gj["uuid"] = g.uuid;
    PutOptional(gj, "memory_total_bytes", g.memory_total_bytes);
    gpus.push_back(gj);
  }
  j["gpus"] = gpus;
  j["instance_type"] = n.instance_type;
  PutOptional(j, "clock_offset_ns", n.clock_offset_ns);
  return DumpJson(j);
}

StatusOr<NodeInfo> NodeInfoFromJson(const std::string& text, const std::string& origin) {
  TP_ASSIGN_OR_RETURN(json j, Parse(text, origin));
  NodeInfo n;
  TP_RETURN_IF_ERROR(GetRequired(j, "node", origin, &n.node));
  TP_ASSIGN_OR_RETURN(auto hostname, GetOptional<std::string>(j, "hostname", origin));
  n.hostname = hostname.value_or("");
  TP_ASSIGN_OR_RETURN(auto cpu_model, GetOptional<std::string>(j, "cpu_model", origin));
  n.cpu_model = cpu_model.value_or("");
  TP_ASSIGN_OR_RETURN(n.cpu_cores, GetOptional<int>(j, "cpu_cores", origin));
  TP_ASSIGN_OR_RETURN(n.memory_total_bytes, GetOptional<int64_t>(j, "memory_total_bytes", origin));
  TP_ASSIGN_OR_RETURN(auto itype, GetOptional<std::string>(j, "instance_type", origin));
  n.instance_type = itype.value_or("");
  TP_ASSIGN_OR_RETURN(n.clock_offset_ns, GetOptional<int64_t>(j, "clock_offset_ns", origin));
  auto gpus = j.find("gpus");
  if (gpus != j.end() && gpus->is_array()) {
    for (const json& gj : *gpus) {
      if (!gj.is_object()) return DataLoss(origin + ": 'gpus' entries must be objects");
      GpuInfo g;
      TP_RETURN_IF_ERROR(GetRequired(gj, "index", origin, &g.index));
      TP_ASSIGN_OR_RETURN(auto gname, GetOptional<std::string>(gj, "name", origin));
      g.name = gname.value_or("");
      TP_ASSIGN_OR_RETURN(auto uuid, GetOptional<std::string>(gj, "uuid", origin));
      g.uuid = uuid.value_or("");
      TP_ASSIGN_OR_RETURN(g.memory_total_bytes,
                          GetOptional<int64_t>(gj, "memory_total_bytes", origin));
      n.gpus.push_back(std::move(g));
    }
  }
  return n;
}

NodeInfo DetectLocalNode(const std::string& node_name) {
  NodeInfo n;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) n.hostname = host;
  n.node = node_name.empty() ? n.hostname : node_name;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores > 0) n.cpu_cores = static_cast<int>(cores);
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) n.memory_total_bytes = static_cast<int64_t>(pages) * page_size;
  n.cpu_model = platform::CpuModelName();
  return n;
}

std::string NewRunId(const std::string& name, int64_t start_ns) {
  std::random_device rd;
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, "%04x", static_cast<unsigned>(rd() & 0xffff));
  std::string id = FormatCompactUtc(start_ns);
  if (!name.empty()) id += "-" + name;
  return id + "-" + suffix;
}

}  // namespace trainprof::model
