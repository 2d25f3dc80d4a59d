#include "importers/smdebug/smdebug_importer.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "base/files.h"
#include "base/json_dump.h"
#include "importers/common/byte_source.h"
#include "importers/common/chrome_trace_importer.h"
#include "importers/common/import_counters.h"
#include "importers/common/json_text.h"
#include "importers/common/run_builder.h"
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
      if (i > 0 && !out.empty() && out.back() != '_' && !(s[i - 1] >= 'A' && s[i - 1] <= 'Z')) {
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

std::vector<std::string> FilesUnder(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_regular_file(ec)) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string BaseName(const std::string& p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

model::NodeInfo Node(const std::string& name) {
  model::NodeInfo n;
  n.node = name;
  return n;
}

}  // namespace

MetricMapping MapSystemMetric(const std::string& type, const std::string& dimension) {
  (void)type;
  if (dimension == "CPUUtilization") return {"cpu_utilization_ratio", 0.01};
  if (dimension == "I/OWaitPercentage") return {"cpu_iowait_ratio", 0.01};
  if (dimension == "GPUUtilization") return {"gpu_utilization_ratio", 0.01};
  if (dimension == "GPUMemoryUtilization") return {"gpu_memory_used_ratio", 0.01};  // in use
  if (dimension == "MemoryUsedPercent") return {"memory_used_ratio", 0.01};
  return {"smdebug_" + Snake(dimension), 1.0};
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
  std::vector<std::string> files = FilesUnder(options.dir);
  const std::regex system_re(R"((\d+)\.(algo-\d+|[A-Za-z0-9._-]+)\.json(\.corrupt)?$)");
  const std::regex pevents_re(
      R"(^(\d+)_(.+)_(pythontimeline|model_timeline|horovod_timeline)\.json$)");
  const std::regex metadata_re(R"(^(.+)_(\d+)_(\d+)\.metadata$)");
  const std::regex cprofile_re(R"(^([0-9.]+)_([0-9.]+)_(.+)_(-?\d+)$)");

  for (const std::string& path : files) {
    std::string base = BaseName(path);
    std::smatch m;
    bool in_system =
        path.find("/system/") != std::string::npos ||
        (std::regex_search(base, m, system_re) && path.find("/framework/") == std::string::npos &&
         base.find("timeline") == std::string::npos && base.find("trace") == std::string::npos &&
         base.find("profiler_config") == std::string::npos);
    if (base == "training_job_end.ts") {
      auto text = ReadFileToString(path);
      int64_t ns;
      if (text.ok()) {
        std::string t = *text;
        while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
        double secs;
        if (json::ParseDouble(t, &secs)) {
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
        std::string device = j.contains("Name") && j["Name"].is_string()
                                 ? j["Name"].get<std::string>()
                                 : std::string();
        MetricMapping map = MapSystemMetric(type, dim);
        // Seconds as decimal text into exact ns (a double loses the µs digits here).
        int64_t ts_ns = 0;
        {
          json::ObjectReader r(line);
          std::string_view k, v;
          while (r.Next(&k, &v)) {
            if (k == "Timestamp") json::ParseScaledDecimal(v, 9, &ts_ns);
          }
        }
        wit->second->Append(wit->second->Series(map.metric, device), ts_ns,
                            j["Value"].get<double>() * map.scale);
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
      std::string node = m[2].str();
      ChromeImportOptions o;
      o.flavor = m[3].str() == "horovod_timeline" ? ChromeFlavor::kHorovod
                                                  : ChromeFlavor::kSmdebugFramework;
      TP_ASSIGN_OR_RETURN(auto* w, builder->Node(Node(node)));
      auto s = ImportChromeTrace(path, o, w);
      if (!s.ok()) {
        result.skipped.push_back(s.status().message());
        continue;
      }
      ++result.framework_files;
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
            node = mm[1].str();
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
      // The pstats marshal dump itself is kept by reference (path, size): function-level
      // statistics are not decoded yet (docs/importers.md).
      model::Event ev;
      ev.start_ns = start_ns;
      ev.duration_ns = end_ns - start_ns;
      ev.name = "cProfile";
      ev.category = "python_profile";
      int64_t step;
      if (json::ParseInt64(mm[4].str(), &step) && step >= 0) ev.step = step;
      auto bytes = fs::file_size(path);
      nlohmann::json args = {{"python_stats", path}, {"bytes", bytes}};
      ev.args = DumpJson(args);
      TP_ASSIGN_OR_RETURN(auto* w, builder->Node(Node(mm[3].str())));
      w->AppendEvent(std::move(ev));
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
