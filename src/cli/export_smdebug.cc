// `trainprof export smdebug RUN --out DIR`: SageMaker Debugger's profiler-output layout, which
// smdebug's readers and `trainprof import smdebug` read back:
//
//   DIR/system/incremental/YYYYMMDDHH/<epoch-s>.algo-N.json
//       JSON lines {"Name","Type","Dimension","Value","NodeId","Timestamp"}, one file per node
//       and UTC minute (named by the minute's first second), Timestamp in seconds with ns digits
//   DIR/framework/pevents/YYYYMMDDHH/<end-us>_algo-N[-<rank>]_model_timeline.json
//       a Chrome-trace JSON array per node and rank: the metadata event with
//       start_time_since_epoch_in_micros, then events with ts relative to it (µs, ns decimals);
//       step spans are "Step:ModeKeys.<MODE>" with args.step_num
//   DIR/training_job_end.ts
//       the run's end, seconds since the epoch (when the run has ended)
//
// Nodes named algo-N keep their name; the others become the next free algo-N in the order of
// their names.
// Only metrics with an smdebug equivalent are written (kMapping); the others are skipped and
// counted in the command's output. Values in ratios become percent (x100).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <regex>
#include <set>

#include "base/files.h"
#include "base/json_dump.h"
#include "cli/commands.h"
#include "cli/export_writer.h"
#include "cli/progress.h"
#include "model/event.h"
#include "store/run_reader.h"

namespace trainprof::cli {
namespace {

struct SmdebugMetric {
  const char* metric;          // ours
  const char* device_prefix;   // devices we export: "<prefix><digits>"; "": the device ""
  const char* type;            // smdebug Type
  const char* dimension;       // smdebug Dimension
  double scale;                // ours -> smdebug
  const char* name = nullptr;  // smdebug Name; null: the device
};

// Ours -> smdebug. GPUMemoryUtilization is read by smdebug's GPUMemoryIncrease rule as memory
// in use (docs/metrics.md), so gpu_memory_used_ratio goes there; the "total" CPU device is left
// out because smdebug has per-core series only (its tools average the cores).
constexpr SmdebugMetric kMapping[] = {
    {"cpu_utilization_ratio", "cpu", "cpu", "CPUUtilization", 100.0},
    {"cpu_iowait_ratio", "cpu", "cpu", "I/OWaitPercentage", 100.0},
    {"gpu_utilization_ratio", "gpu", "gpu", "GPUUtilization", 100.0},
    {"gpu_memory_used_ratio", "gpu", "gpu", "GPUMemoryUtilization", 100.0},
    // Host memory in use, as SageMaker writes it (a memory line with an empty Dimension; the
    // importer reads it back as memory_utilization_ratio).
    {"memory_utilization_ratio", "", "memory", "", 100.0, "MemoryUsedPercent"},
};

const SmdebugMetric* FindMapping(const std::string& metric, const std::string& device) {
  for (const SmdebugMetric& m : kMapping) {
    if (metric != m.metric) continue;
    size_t n = std::strlen(m.device_prefix);
    if (n == 0) return device.empty() ? &m : nullptr;
    if (device.size() > n && device.compare(0, n, m.device_prefix) == 0 &&
        std::all_of(device.begin() + static_cast<std::ptrdiff_t>(n), device.end(),
                    [](char c) { return c >= '0' && c <= '9'; })) {
      return &m;
    }
    return nullptr;
  }
  return nullptr;
}

// "YYYYMMDDHH" (UTC) of an epoch-ns time.
std::string HourDir(int64_t ns) {
  std::time_t secs =
      static_cast<std::time_t>(ns >= 0 ? ns / 1'000'000'000 : (ns + 1) / 1'000'000'000 - 1);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d%02d%02d%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour);
  return buf;
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return s;
}

// Percent values are written with 15 significant digits: exact for every decimal the samplers
// produce and free of the float noise of x100 (0.35 * 100 = 35.00000000000001).
void AppendPercent(double v, std::string* out) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  out->append(buf);
}

}  // namespace

Status RunExportSmdebug(const ExportSmdebugOptions& options, std::ostream& out) {
  if (options.out_dir.empty()) return InvalidArgument("export smdebug needs --out DIR");
  TP_ASSIGN_OR_RETURN(auto reader, store::RunReader::Open(options.run));
  TP_RETURN_IF_ERROR(MakeDirs(options.out_dir));

  // Node names -> algo-N: names already algo-N are kept; the others take the next free numbers
  // in the order of their names.
  std::vector<std::string> nodes = reader->nodes();
  std::sort(nodes.begin(), nodes.end());
  const std::regex algo_re("^algo-[0-9]+$");
  std::map<std::string, std::string> algo;
  std::set<std::string> taken;
  for (const std::string& n : nodes) {
    if (std::regex_match(n, algo_re)) {
      algo[n] = n;
      taken.insert(n);
    }
  }
  int next = 1;
  auto NextFree = [&] {
    std::string name;
    do {
      name = "algo-" + std::to_string(next++);
    } while (taken.count(name));
    taken.insert(name);
    return name;
  };
  for (const std::string& n : nodes) {
    if (!algo.count(n)) algo[n] = NextFree();
  }
  auto AlgoOf = [&](const std::string& node) -> const std::string& {
    auto it = algo.find(node);
    if (it == algo.end()) {
      it = algo.emplace(node, NextFree()).first;
    }
    return it->second;
  };
  if (!Quiet()) {
    for (const auto& [node, name] : algo) out << "node " << node << " -> " << name << "\n";
    out << std::flush;
  }
  // Bytes written over all files, by stage.
  TerminalProgress progress({.label = "export smdebug"});

  // System metrics: one JSON-lines file per (algo-N, minute).
  int64_t samples = 0, system_files = 0;
  std::map<std::string, int64_t> skipped;  // "metric device-kind" -> samples
  {
    progress.SetStage("metrics");
    TP_ASSIGN_OR_RETURN(auto t, reader->SystemMetrics({}));
    std::map<std::pair<std::string, int64_t>, std::vector<size_t>> files;
    std::vector<const SmdebugMetric*> series_map(t.metrics.values().size() *
                                                 t.devices.values().size());
    std::vector<char> series_known(series_map.size(), 0);
    for (size_t i = 0; i < t.size(); ++i) {
      size_t s = static_cast<size_t>(t.metric[i]) * t.devices.values().size() +
                 static_cast<size_t>(t.device[i]);
      if (!series_known[s]) {
        series_map[s] = FindMapping(t.metrics.at(t.metric[i]), t.devices.at(t.device[i]));
        series_known[s] = 1;
      }
      if (series_map[s] == nullptr || !std::isfinite(t.value[i])) {
        std::string why = t.metrics.at(t.metric[i]);
        if (series_map[s] != nullptr) {
          why += " (not a finite number)";
        } else if (FindMapping(why, "cpu0") || FindMapping(why, "gpu0")) {
          why += " (device " + t.devices.at(t.device[i]) + ")";
        }
        ++skipped[why];
        continue;
      }
      int64_t minute = FloorDiv(t.timestamp_ns[i], 60'000'000'000LL);
      files[{AlgoOf(t.nodes.at(t.node[i])), minute}].push_back(i);
    }
    for (auto& [key, rows] : files) {
      const auto& [node, minute] = key;
      std::stable_sort(rows.begin(), rows.end(),
                       [&](size_t a, size_t b) { return t.timestamp_ns[a] < t.timestamp_ns[b]; });
      const int64_t minute_ns = minute * 60'000'000'000LL;
      std::string dir =
          JoinPath(JoinPath(options.out_dir, "system/incremental"), HourDir(minute_ns));
      TP_RETURN_IF_ERROR(MakeDirs(dir));
      std::string path = JoinPath(dir, std::to_string(minute * 60) + "." + node + ".json");
      TP_ASSIGN_OR_RETURN(auto f, ExportFile::Create(path, /*gzip=*/false, &progress));
      for (size_t i : rows) {
        size_t s = static_cast<size_t>(t.metric[i]) * t.devices.values().size() +
                   static_cast<size_t>(t.device[i]);
        const SmdebugMetric& m = *series_map[s];
        std::string& b = f->buffer();
        b.append("{\"Name\":");
        AppendJsonString(m.name != nullptr ? std::string(m.name) : t.devices.at(t.device[i]), &b);
        b.append(",\"Type\":\"").append(m.type).append("\",\"Dimension\":\"");
        b.append(m.dimension).append("\",\"Value\":");
        AppendPercent(t.value[i] * m.scale, &b);
        b.append(",\"NodeId\":");
        AppendJsonString(node, &b);
        b.append(",\"Timestamp\":");
        AppendSeconds(t.timestamp_ns[i], &b);
        b.append("}\n");
        f->MaybeFlush();
        ++samples;
      }
      TP_RETURN_IF_ERROR(f->Close());
      ++system_files;
    }
  }

  // Framework events: one model_timeline per (node, rank).
  int64_t events = 0, steps = 0, framework_files = 0;
  {
    progress.SetStage("events");
    TP_ASSIGN_OR_RETURN(auto t, reader->Events({}));
    std::map<std::pair<std::string, int64_t>, std::vector<size_t>> groups;
    for (size_t i = 0; i < t.size(); ++i) {
      groups[{AlgoOf(t.nodes.at(t.node[i])), t.rank[i]}].push_back(i);
    }
    static const std::set<std::string> kTaken = {"step_num", "mode", "rank", "node"};
    for (auto& [key, rows] : groups) {
      const auto& [node, rank] = key;
      int64_t first = INT64_MAX, last = INT64_MIN;
      std::set<int64_t> pids;
      for (size_t i : rows) {
        pids.insert(t.pid[i] == model::kMissing ? 0 : t.pid[i]);
        first = std::min(first, t.start_ns[i]);
        last = std::max(last, t.start_ns[i] + t.duration_ns[i]);
      }
      const int64_t base_us = FloorDiv(first, 1000);
      const int64_t base_ns = base_us * 1000;
      const int64_t end_us = FloorDiv(last, 1000);
      std::string dir = JoinPath(JoinPath(options.out_dir, "framework/pevents"), HourDir(last));
      TP_RETURN_IF_ERROR(MakeDirs(dir));
      std::string label = node + (rank == model::kMissing ? "" : "-" + std::to_string(rank));
      std::string path =
          JoinPath(dir, std::to_string(end_us) + "_" + label + "_model_timeline.json");
      TP_ASSIGN_OR_RETURN(auto f, ExportFile::Create(path, /*gzip=*/false, &progress));
      std::string& head = f->buffer();
      head.append(
          "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"start_time_since_"
          "epoch_in_micros\":");
      head.append(std::to_string(base_us));
      head.append("}}");
      // A name for every pid used: smdebug's parser expects one (else "Unknown" and a warning).
      for (int64_t pid : pids) {
        if (pid == 0) continue;  // pid 0 is named by the metadata event above
        head.append(",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":");
        head.append(std::to_string(pid));
        head.append(",\"args\":{\"name\":");
        AppendJsonString(label + " pid " + std::to_string(pid), &head);
        head.append("}}");
      }
      for (size_t i : rows) {
        std::string& b = f->buffer();
        const bool instant = t.kind[i] == static_cast<uint8_t>(model::EventKind::kInstant);
        const std::string& category = t.categories.at(t.category[i]);
        const std::string& mode = t.modes.at(t.mode[i]);
        const bool step = category == model::kCategoryStep && !instant;
        b.append(",\n{\"name\":");
        if (step) {
          AppendJsonString("Step:ModeKeys." + (mode.empty() ? std::string("GLOBAL") : Upper(mode)),
                           &b);
          ++steps;
        } else {
          AppendJsonString(t.names.at(t.name[i]), &b);
        }
        b.append(",\"cat\":");
        AppendJsonString(category, &b);
        b.append(instant ? ",\"ph\":\"i\",\"s\":\"t\"" : ",\"ph\":\"X\"");
        b.append(",\"ts\":");
        AppendMicros(t.start_ns[i] - base_ns, &b);
        if (!instant) {
          b.append(",\"dur\":");
          AppendMicros(t.duration_ns[i], &b);
        }
        b.append(",\"pid\":").append(std::to_string(t.pid[i] == model::kMissing ? 0 : t.pid[i]));
        b.append(",\"tid\":").append(std::to_string(t.tid[i] == model::kMissing ? 0 : t.tid[i]));
        b.append(",\"args\":{\"node\":");
        AppendJsonString(t.nodes.at(t.node[i]), &b);
        if (t.step[i] != model::kMissing) {
          b.append(",\"step_num\":").append(std::to_string(t.step[i]));
        }
        if (!mode.empty()) {
          b.append(",\"mode\":");
          AppendJsonString(mode, &b);
        }
        if (rank != model::kMissing) b.append(",\"rank\":").append(std::to_string(rank));
        const std::string& args = t.args[i];
        if (!args.empty()) {
          // Deeper than kMaxExportArgsDepth: kept as text (nlohmann's dump recurses).
          nlohmann::json j = JsonNestingExceeds(args, kMaxExportArgsDepth)
                                 ? nlohmann::json(nlohmann::json::value_t::discarded)
                                 : nlohmann::json::parse(args, nullptr, false);
          if (j.is_object()) {
            for (const auto& [k, v] : j.items()) {
              if (kTaken.count(k)) continue;
              b.push_back(',');
              AppendJsonString(k, &b);
              b.push_back(':');
              b.append(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
            }
          } else {
            b.append(",\"args_text\":");
            AppendJsonString(args, &b);
          }
        }
        b.append("}}");
        f->MaybeFlush();
        ++events;
      }
      f->Write("\n]\n");
      TP_RETURN_IF_ERROR(f->Close());
      ++framework_files;
    }
  }

  const model::RunMetadata& meta = reader->metadata();
  if (meta.end_ns) {
    std::string text;
    AppendSeconds(*meta.end_ns, &text);
    text.push_back('\n');
    TP_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(options.out_dir, "training_job_end.ts"), text));
  }

  progress.Finish();
  if (Quiet()) {
    for (const std::string& p : reader->problems()) std::cerr << "warning: " << p << "\n";
    return OkStatus();
  }
  out << "wrote " << options.out_dir << ": " << samples << " system metric samples in "
      << system_files << " files, " << events << " framework events (" << steps << " steps) in "
      << framework_files << " files" << (meta.end_ns ? ", training_job_end.ts" : "") << "\n";
  int64_t skipped_total = 0;
  for (const auto& [name, n] : skipped) skipped_total += n;
  if (skipped_total > 0) {
    out << "skipped " << skipped_total
        << " metric samples with no smdebug equivalent (see docs/export.md):\n";
    for (const auto& [name, n] : skipped) out << "  " << name << ": " << n << "\n";
  }
  for (const std::string& p : reader->problems()) out << "warning: " << p << "\n";
  return OkStatus();
}

}  // namespace trainprof::cli
