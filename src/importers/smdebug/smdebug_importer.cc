#include "importers/smdebug/smdebug_importer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "base/files.h"
#include "base/json_dump.h"
#include "importers/common/byte_source.h"
#include "importers/common/chrome_trace_importer.h"
#include "importers/common/import_counters.h"
#include "importers/common/json_text.h"
#include "importers/common/run_builder.h"
#include "importers/smdebug/python_stats_reader.h"
#include "model/data_quality.h"
#include "model/event.h"

namespace trainprof::importers::smdebug {
namespace {

namespace fs = std::filesystem;

std::string Snake(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') {
      // A new word: after a lower-case letter or digit, or the last capital of an acronym
      // ("GPUPower" -> gpu_power).
      const bool prev_upper = i > 0 && s[i - 1] >= 'A' && s[i - 1] <= 'Z';
      const bool next_lower = i + 1 < s.size() && s[i + 1] >= 'a' && s[i + 1] <= 'z';
      if (i > 0 && !out.empty() && out.back() != '_' && (!prev_upper || next_lower)) {
        out.push_back('_');
      }
      out.push_back(static_cast<char>(c - 'A' + 'a'));
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      out.push_back(c);
    } else if (!out.empty() && out.back() != '_') {
      out.push_back('_');
    }
  }
  return out;
}

// Regular files under `dir`. Symbolic links inside it are not followed (a link to a file
// or a folder outside would import, or show, what is not the profiler output: /etc/passwd was
// read as 27 unreadable lines); each is named in *skipped. `dir` itself may be a link.
std::vector<std::string> FilesUnder(const std::string& dir, std::vector<std::string>* skipped) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_symlink(ec)) {
      skipped->push_back(it->path().string() + ": a symbolic link (not followed)");
      continue;
    }
    if (it->is_regular_file(ec)) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  std::sort(skipped->begin(), skipped->end());
  return out;
}

std::string BaseName(const std::string& p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

// As many rows as trainprof's own --python-profile keeps (python/trainprof/_detail.py).
constexpr size_t kMaxPythonFunctions = 500;
constexpr uintmax_t kMaxPythonStatsBytes = 256u << 20;

model::NodeInfo Node(const std::string& name) {
  model::NodeInfo n;
  n.node = name;
  return n;
}

}  // namespace

MetricMapping MapSystemMetric(const std::string& type, const std::string& dimension,
                              const std::string& name) {
  // CPU and GPU lines: Name = the device (cpuN, gpuN), Dimension = the quantity, percent.
  if (dimension == "CPUUtilization") return {"cpu_utilization_ratio", name, true};
  if (dimension == "I/OWaitPercentage") return {"cpu_iowait_ratio", name, true};
  if (dimension == "GPUUtilization") return {"gpu_utilization_ratio", name, true};
  // Memory in use (docs/metrics.md: what SageMaker's GPUMemoryIncrease and BatchSize read).
  if (dimension == "GPUMemoryUtilization") return {"gpu_memory_used_ratio", name, true};
  // Memory, I/O and network lines: Name = the quantity; Dimension empty, or for the network
  // whose traffic it is ("Algorithm": the training container's, "Platform": SageMaker's own,
  // e.g. File-mode data download).
  if (name == "MemoryUsedPercent" || dimension == "MemoryUsedPercent") {
    return {"memory_utilization_ratio", "", true};
  }
  if (type == "i/o" || type == "io") {
    if (name == "IOPS") return {"disk_operations_per_second", "total", false};
    if (name == "ReadThroughputInBytesPerSecond") {
      return {"disk_read_bytes_per_second", "total", false};
    }
    if (name == "WriteThroughputInBytesPerSecond") {
      return {"disk_write_bytes_per_second", "total", false};
    }
  }
  if (type == "network" && (name == "ReceiveBytesPerSecond" || name == "TransmitBytesPerSecond")) {
    std::string device = dimension.empty() ? std::string("total") : Snake(dimension);
    return {
        name[0] == 'R' ? "network_receive_bytes_per_second" : "network_transmit_bytes_per_second",
        device, false};
  }
  // Nothing we know: keep it, under a name that says where it came from.
  std::string metric = "smdebug";
  for (const std::string& part : {Snake(type), Snake(dimension.empty() ? name : dimension)}) {
    if (!part.empty()) metric += "_" + part;
  }
  if (metric == "smdebug") metric = "smdebug_unknown";
  return {metric, dimension.empty() ? std::string() : name, false};
}

NodeIdParts SplitNodeId(const std::string& node_id) {
  static const std::regex smdebug_re(R"(^(\d{1,9})-(.+)$)");
  static const std::regex export_re(R"(^(algo-\d+)-(\d{1,9})$)");
  static const std::regex bare_re(R"(^\d{1,9}$)");
  std::smatch m;
  NodeIdParts out;
  if (std::regex_match(node_id, bare_re)) {
    out.number = std::stoll(node_id);  // a process or a rank; no host
  } else if (std::regex_match(node_id, m, export_re)) {
    out.host = m[1].str();
    out.number = std::stoll(m[2].str());
    out.number_is_rank = true;
  } else if (std::regex_match(node_id, m, smdebug_re)) {
    out.host = m[2].str();
    out.number = std::stoll(m[1].str());
  } else {
    out.host = node_id;
  }
  return out;
}

bool PercentTextToRatio(std::string_view text, double* ratio) {
  // Rewrite "[-]I.FeX" as "[-]IFe(X-len(F)-2)" and let strtod round it once, correctly.
  if (text.empty() || text.size() > 64) return false;
  std::string digits;
  size_t i = 0;
  bool negative = false;
  if (text[i] == '-') {
    negative = true;
    ++i;
  }
  int64_t frac = 0;
  bool dot = false, any = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c >= '0' && c <= '9') {
      any = true;
      if (!(digits.empty() && c == '0')) digits.push_back(c);
      if (dot) ++frac;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (!any) return false;
  int64_t exponent = 0;
  if (i < text.size()) {
    if (text[i] != 'e' && text[i] != 'E') return false;
    std::string_view x = text.substr(i + 1);
    if (!x.empty() && x[0] == '+') x.remove_prefix(1);
    if (!json::ParseInt64(x, &exponent) || exponent < -400 || exponent > 400) return false;
  }
  if (digits.empty()) {
    *ratio = negative ? -0.0 : 0.0;
    return true;
  }
  std::string normalized =
      (negative ? "-" : "") + digits + "e" + std::to_string(exponent - frac - 2);
  char* end = nullptr;
  double v = std::strtod(normalized.c_str(), &end);
  if (end != normalized.c_str() + normalized.size() || !std::isfinite(v)) return false;
  *ratio = v;
  return true;
}

StatusOr<SmdebugImportResult> ImportSmdebug(const SmdebugImportOptions& options) {
  if (!IsDirectory(options.dir)) {
    return NotFound(options.dir +
                    ": not a directory (expected a SageMaker profiler-output "
                    "folder)");
  }
  TP_ASSIGN_OR_RETURN(auto builder,
                      RunBuilder::Create(options.out, options.name, "import smdebug",
                                         {"trainprof", "import", "smdebug", options.dir}));
  SmdebugImportResult result;
  std::vector<std::string> files = FilesUnder(options.dir, &result.skipped);
  const std::regex system_re(R"((\d+)\.(algo-\d+|[A-Za-z0-9._-]+)\.json(\.corrupt)?$)");
  const std::regex pevents_re(
      R"(^(\d+)_(.+)_(pythontimeline|model_timeline|horovod_timeline)\.json$)");
  const std::regex metadata_re(R"(^(.+)_(\d+)_(\d+)\.metadata$)");
  const std::regex cprofile_re(R"(^([0-9.]+)_([0-9.]+)_(.+)_(-?\d+)$)");

  // Framework node ids, first for all files: the numbers in "<n>-<host>" are ranks when the
  // job's numbers are exactly 0..N-1 (smdebug writes the rank in distributed jobs), process ids
  // otherwise (it writes os.getpid(); 0 is never one).
  auto framework_node_id = [&](const std::string& path) -> std::string {
    std::string base = BaseName(path);
    std::smatch mm;
    if (std::regex_search(base, mm, pevents_re)) {
      // smdebug's own reader: the second "_" field (its node ids have no "_").
      std::string middle = mm[2].str();
      return middle.substr(0, middle.find('_'));
    }
    if (base == "python_stats") {
      std::string leaf = BaseName(path.substr(0, path.size() - base.size() - 1));
      if (std::regex_search(leaf, mm, cprofile_re)) return mm[3].str();
    }
    if (std::regex_search(base, mm, metadata_re)) return mm[1].str();
    return {};
  };
  auto is_system_file = [&](const std::string& path) {
    std::string base = BaseName(path);
    std::smatch mm;
    return path.find("/system/") != std::string::npos ||
           (std::regex_search(base, mm, system_re) &&
            path.find("/framework/") == std::string::npos &&
            base.find("timeline") == std::string::npos && base.find("trace") == std::string::npos &&
            base.find("profiler_config") == std::string::npos);
  };
  std::set<int64_t> numbers;
  std::set<std::string> system_hosts;  // the hosts the system files name
  for (const std::string& path : files) {
    NodeIdParts parts = SplitNodeId(framework_node_id(path));
    if (parts.number >= 0 && !parts.number_is_rank) numbers.insert(parts.number);
    std::smatch mm;
    const std::string base = BaseName(path);
    if (is_system_file(path) && std::regex_search(base, mm, system_re)) {
      system_hosts.insert(mm[2].str());
    }
  }
  const bool numbers_are_ranks = !numbers.empty() && *numbers.begin() == 0 &&
                                 *numbers.rbegin() == static_cast<int64_t>(numbers.size()) - 1;
  struct Placement {
    std::string node;
    int64_t pid = model::kMissing;
    int64_t rank = model::kMissing;
  };
  auto place = [&](const std::string& node_id) {
    NodeIdParts parts = SplitNodeId(node_id);
    Placement p;
    p.node = parts.host;
    // A bare number (smdebug's node id outside SageMaker, or before it added the host: the
    // process id) names no host: the job's one instance when its system files name exactly
    // one; with several the instance is unknown and the number stays the node's name.
    if (p.node.empty()) p.node = system_hosts.size() == 1 ? *system_hosts.begin() : node_id;
    if (parts.number >= 0) {
      (parts.number_is_rank || numbers_are_ranks ? p.rank : p.pid) = parts.number;
    }
    return p;
  };

  for (const std::string& path : files) ProgressAddFile(options.progress, path);
  for (const std::string& path : files) {
    ProgressFileScope file_progress(options.progress, path);
    std::string base = BaseName(path);
    std::smatch m;
    bool in_system = is_system_file(path);
    if (base == "training_job_end.ts") {
      auto text = ReadFileToString(path);
      int64_t ns;
      if (text.ok()) {
        std::string t = *text;
        while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
        double secs;
        // Seconds since the epoch; a value whose nanoseconds would not fit int64 is no time.
        if (json::ParseDouble(t, &secs) && secs >= 0 && secs < 9.0e9) {
          ns = static_cast<int64_t>(secs * 1e9);
          builder->metadata().end_ns = ns;
          builder->metadata().tags["training_job_end"] = t;
        }
      }
      continue;
    }
    if (in_system && std::regex_search(base, m, system_re)) {
      // JSON lines; every line one metric sample. Bad lines are skipped and counted.
      auto text = ReadAllDecompressed(path);
      if (!text.ok()) {
        result.skipped.push_back(path + ": " + text.status().message());
        continue;
      }
      ++result.system_files;
      std::string default_node = m[2].str();
      size_t pos = 0;
      int64_t errors = 0;
      std::map<std::string, store::NodeStoreWriter*> writers;
      while (pos < text->size()) {
        size_t nl = text->find('\n', pos);
        if (nl == std::string::npos) nl = text->size();
        std::string_view line(text->data() + pos, nl - pos);
        pos = nl + 1;
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
        nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded() || !j.is_object() || !j.contains("Timestamp") ||
            !j["Timestamp"].is_number() || !j.contains("Value") || !j["Value"].is_number() ||
            !j.contains("Dimension") || !j["Dimension"].is_string()) {
          ++errors;
          continue;
        }
        std::string node = j.value("NodeId", default_node);
        if (!j["NodeId"].is_string()) node = default_node;
        auto wit = writers.find(node);
        if (wit == writers.end()) {
          TP_ASSIGN_OR_RETURN(auto* w, builder->Node(Node(node)));
          wit = writers.emplace(node, w).first;
        }
        std::string type = j.value("Type", std::string());
        std::string dim = j["Dimension"].get<std::string>();
        std::string name = j.contains("Name") && j["Name"].is_string()
                               ? j["Name"].get<std::string>()
                               : std::string();
        MetricMapping map = MapSystemMetric(type, dim, name);
        // Seconds as decimal text into exact ns (a double loses the µs digits here), and the
        // value's text for an exact percent -> ratio.
        int64_t ts_ns = 0;
        std::string_view value_text;
        {
          json::ObjectReader r(line);
          std::string_view k, v;
          while (r.Next(&k, &v)) {
            if (k == "Timestamp") json::ParseScaledDecimal(v, 9, &ts_ns);
            if (k == "Value") value_text = v;
          }
        }
        double value = j["Value"].get<double>();
        if (map.percent && !PercentTextToRatio(value_text, &value)) value /= 100;
        wit->second->Append(wit->second->Series(map.metric, map.device), ts_ns, value);
        builder->NoteTime(ts_ns, ts_ns);
        ++result.system_samples;
        ++result.samples_by_type[type];
      }
      if (errors > 0) {
        result.parse_errors += errors;
        TP_ASSIGN_OR_RETURN(auto* w, builder->Node(Node(default_node)));
        w->AddCounter(model::dq::kParseErrors, errors);
      }
      continue;
    }
    if (std::regex_search(base, m, pevents_re)) {
      Placement at = place(framework_node_id(path));
      ChromeImportOptions o;
      o.flavor = m[3].str() == "horovod_timeline" ? ChromeFlavor::kHorovod
                                                  : ChromeFlavor::kSmdebugFramework;
      o.pid = at.pid;
      o.rank = at.rank;
      TP_ASSIGN_OR_RETURN(auto* w, builder->Node(Node(at.node)));
      auto s = ImportChromeTrace(path, o, w);
      if (!s.ok()) {
        result.skipped.push_back(s.status().message());
        continue;
      }
      ++result.framework_files;
      if (auto t = s->problems.find(dq::kTruncatedFiles); t != s->problems.end()) {
        // Cut off inside an event: what came before is kept, and the run says so.
        ++result.truncated_files;
        std::string warning = path + ": truncated inside an event; imported the " +
                              std::to_string(s->spans + s->instants) + " events before the cut";
        w->Annotate(s->end_ns == INT64_MIN ? builder->metadata().start_ns : s->end_ns,
                    "import_warning", warning);
        result.warnings.push_back(std::move(warning));
      }
      result.framework_events += s->spans + s->instants;
      result.steps += s->steps;
      if (s->spans + s->instants > 0) builder->NoteTime(s->start_ns, s->end_ns);
      continue;
    }
    if (base.size() > 14 && base.compare(base.size() - 14, 14, ".trace.json.gz") == 0 &&
        path.find("/plugins/profile/") != std::string::npos) {
      // TF profiler trace: its start time is in the NAME of the .metadata file of the step
      // directory (…/detailed_profiling/<YYYYMMDDHH>/<step>/<node>_<start_us>_<end_us>.metadata).
      std::string step_dir = path.substr(0, path.find("/plugins/profile/"));
      ChromeImportOptions o;
      o.flavor = ChromeFlavor::kTensorflow;
      std::string node = base.substr(0, base.size() - 14);
      auto listing = ListDirectory(step_dir);
      if (listing.ok()) {
        for (const std::string& f : *listing) {
          std::smatch mm;
          if (std::regex_search(f, mm, metadata_re)) {
            int64_t us;
            if (json::ParseInt64(mm[2].str(), &us)) o.base_time_ns = us * 1000;
            // The TF trace's own pids are its device tracks (/host:CPU, /device:GPU:0): kept;
            // the node id's number only names the rank, when it is one.
            Placement at = place(mm[1].str());
            node = at.node;
            o.rank = at.rank;
          }
        }
      }
      TP_ASSIGN_OR_RETURN(auto* w, builder->Node(Node(node)));
      auto s = ImportChromeTrace(path, o, w);
      if (!s.ok()) {
        result.skipped.push_back(s.status().message());
        continue;
      }
      ++result.tf_trace_files;
      result.tf_events += s->spans + s->instants;
      if (s->spans + s->instants > 0 && o.base_time_ns) builder->NoteTime(s->start_ns, s->end_ns);
      continue;
    }
    if (base == "python_stats") {
      std::string dir = path.substr(0, path.size() - base.size() - 1);
      std::smatch mm;
      std::string leaf = BaseName(dir);
      if (!std::regex_search(leaf, mm, cprofile_re)) {
        result.skipped.push_back(path +
                                 ": cProfile directory name not <start>_<end>_<node>_<step>");
        continue;
      }
      int64_t start_ns, end_ns;
      if (!json::ParseMicrosToNs(mm[1].str(), &start_ns) ||
          !json::ParseMicrosToNs(mm[2].str(), &end_ns) || end_ns < start_ns) {
        result.skipped.push_back(path + ": bad start/end in its directory name");
        continue;
      }
      Placement at = place(mm[3].str());
      int64_t step;
      if (!json::ParseInt64(mm[4].str(), &step) || step < 0) step = model::kMissing;
      TP_ASSIGN_OR_RETURN(auto* w, builder->Node(Node(at.node)));
      // The dump's per-function statistics, stored as trainprof's own --python-profile stores
      // them (python/trainprof/_detail.py store_pstats): the top functions by cumulative time.
      std::vector<PythonFunctionStats> functions;
      std::error_code size_ec;
      const auto bytes = fs::file_size(path, size_ec);
      if (size_ec || bytes > kMaxPythonStatsBytes) {
        result.skipped.push_back(path + ": " +
                                 (size_ec ? size_ec.message() : "larger than 256 MiB") +
                                 " (function statistics not decoded)");
      } else {
        auto text = ReadFileToString(path);
        auto decoded = text.ok() ? DecodePythonStats(*text)
                                 : StatusOr<std::vector<PythonFunctionStats>>(text.status());
        if (decoded.ok()) {
          functions = std::move(decoded).value();
        } else {
          result.skipped.push_back(path + ": " + decoded.status().message() +
                                   " (function statistics not decoded)");
        }
      }
      std::stable_sort(functions.begin(), functions.end(),
                       [](const PythonFunctionStats& a, const PythonFunctionStats& b) {
                         return a.cumulative_s > b.cumulative_s;
                       });
      if (functions.size() > kMaxPythonFunctions) functions.resize(kMaxPythonFunctions);
      model::Event ev;
      ev.start_ns = start_ns;
      ev.duration_ns = end_ns - start_ns;
      ev.name = "cProfile";
      ev.category = "python_profile";
      ev.step = step;
      ev.pid = at.pid;
      ev.rank = at.rank;
      nlohmann::json args = {{"python_stats", path},
                             {"bytes", size_ec ? 0 : static_cast<int64_t>(bytes)},
                             {"functions", functions.size()}};
      ev.args = DumpJson(args);
      w->AppendEvent(std::move(ev));
      const std::string steps = step == model::kMissing
                                    ? std::string()
                                    : std::to_string(step) + "-" + std::to_string(step);
      for (const PythonFunctionStats& f : functions) {
        model::Event fe;
        fe.kind = model::EventKind::kInstant;
        fe.start_ns = end_ns;
        fe.name = f.function + " (" + f.file + ":" + std::to_string(f.line) + ")";
        fe.category = "python_function";
        fe.step = step;
        fe.pid = at.pid;
        fe.rank = at.rank;
        nlohmann::json fa = {{"function", f.function},
                             {"file", f.file},
                             {"line", f.line},
                             {"calls", f.calls},
                             {"primitive_calls", f.primitive_calls},
                             // int(seconds * 1e9), as the Python side computes it
                             {"total_ns", static_cast<int64_t>(f.total_s * 1e9)},
                             {"cumulative_ns", static_cast<int64_t>(f.cumulative_s * 1e9)},
                             {"callers", f.callers}};
        nlohmann::json called_by = nlohmann::json::array();
        for (const PythonCallerStats& c : f.called_by) {
          called_by.push_back({{"function", c.function},
                               {"file", c.file},
                               {"line", c.line},
                               {"calls", c.calls},
                               {"primitive_calls", c.primitive_calls},
                               {"total_ns", static_cast<int64_t>(c.total_s * 1e9)},
                               {"cumulative_ns", static_cast<int64_t>(c.cumulative_s * 1e9)}});
        }
        fa["called_by"] = std::move(called_by);
        if (!steps.empty()) fa["steps"] = steps;
        fe.args = DumpJson(fa);
        w->AppendEvent(std::move(fe));
        ++result.python_functions;
      }
      builder->NoteTime(start_ns, end_ns);
      ++result.python_stats_files;
      continue;
    }
    // Config files, TF .pb tool data, empty tfevents, licences: not profiler data.
    if (base.find(".pb") != std::string::npos || base.find("tfevents") != std::string::npos ||
        base.find(".metadata") != std::string::npos) {
      continue;
    }
    result.skipped.push_back(path + ": not a SageMaker Debugger profiler file");
  }
  TP_RETURN_IF_ERROR(builder->Finish());
  result.nodes = builder->node_names();
  return result;
}

}  // namespace trainprof::importers::smdebug
