#pragma once
// Self-describing metadata of a run (run.json) and of each node (kept in the node's store).
// Absent values are std::optional / empty, never 0.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace trainprof::model {

// Version of the run-directory layout and of run.json. Readers refuse a newer major version.
inline constexpr int kRunFormatVersion = 1;

struct GpuInfo {
  int index = 0;
  std::string name;  // "NVIDIA H200"
  std::string uuid;
  std::optional<int64_t> memory_total_bytes;
};

struct NodeInfo {
  std::string node;  // the node's name in the run ("algo-1", a hostname, "node0")
  std::string hostname;
  std::string cpu_model;
  std::optional<int> cpu_cores;
  std::optional<int64_t> memory_total_bytes;
  std::vector<GpuInfo> gpus;
  std::string instance_type;  // as given or detected; "" if unknown
  // This node's wall clock minus the run's reference clock, when measured.
  std::optional<int64_t> clock_offset_ns;
};

struct RunMetadata {
  int format_version = kRunFormatVersion;
  std::string run_id;  // unique: "<UTC compact time>-<name>-<random>"
  std::string name;
  std::vector<std::string> command;
  int64_t start_ns = 0;
  std::optional<int64_t> end_ns;
  std::optional<int> exit_status;  // the command's exit status (128+signal when killed)
  std::string source;              // "record", "agent", "import smdebug", "demo", ...
  std::string instance_type;
  std::optional<int> instance_count;
  std::map<std::string, std::string> tags;
  std::string trainprof_version;
};

// The command line with well-known secret shapes replaced by "<redacted>": NAME=value
// assignments whose NAME holds TOKEN, SECRET, PASSWORD, PASSWD, API_KEY, APIKEY, ACCESS_KEY,
// PRIVATE_KEY or CREDENTIAL; --flags naming such a thing (--api-key=V, --token V, --hf_token=V,
// --client-secret=V); passwords in URLs (scheme://user:PASSWORD@host); AWS access key ids
// (AKIA/ASIA + 16). RunMetadataToJson applies it: run.json never holds them.
std::vector<std::string> RedactCommand(const std::vector<std::string>& command);

std::string RunMetadataToJson(const RunMetadata& m);
// `origin` names the file in error messages.
StatusOr<RunMetadata> RunMetadataFromJson(const std::string& text, const std::string& origin);

std::string NodeInfoToJson(const NodeInfo& n);
StatusOr<NodeInfo> NodeInfoFromJson(const std::string& text, const std::string& origin);

// Fills the host facts of this machine: hostname, CPU model and cores, memory. GPUs come
// from the collectors. `node` defaults to the hostname.
NodeInfo DetectLocalNode(const std::string& node_name);

// A fresh run id: "20261130T152156Z-<name>-<4 hex>".
std::string NewRunId(const std::string& name, int64_t start_ns);

}  // namespace trainprof::model
