// `trainprof import kineto|smdebug|horovod SRC... --out RUN`: other tools' data into a run.

#include <stdlib.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/json_dump.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "cli/progress.h"
#include "cli/run_summary.h"
#include "importers/horovod/horovod_importer.h"
#include "importers/kineto/kineto_importer.h"
#include "importers/smdebug/smdebug_importer.h"
#include "store/run_directory.h"

namespace trainprof::cli {
namespace {

std::string RankText(int64_t rank) { return rank == model::kMissing ? "-" : std::to_string(rank); }

// Imports into a new directory created exclusively beside the target (mkdtemp: ours alone,
// 0700 while it fills) and moves it into place only when the import succeeded: a failed
// import leaves no partial run behind (issue 20). `import(dir, name)` writes the run into dir.
Status ImportIntoPlace(const ImportOptions& options,
                       const std::function<Status(const std::string&, const std::string&)>& run) {
  std::string out = options.out;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  if (out.empty()) return InvalidArgument("import needs --out RUN_DIR");
  if (store::IsRunDirectory(out)) {
    return FailedPrecondition(out + ": already holds a run; import into a new directory");
  }
  const bool exists = PathExists(out);
  if (exists && !IsDirectory(out))
    return FailedPrecondition(out + ": exists and is not a directory");
  const size_t slash = out.rfind('/');
  const std::string parent =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : out.substr(0, slash));
  const std::string base = slash == std::string::npos ? out : out.substr(slash + 1);
  TP_RETURN_IF_ERROR(MakeDirs(parent));
  std::string tmpl = JoinPath(parent, "." + base + ".importing.XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) {
    return Unavailable(parent +
                       ": cannot create a directory to import into: " + ErrnoMessage(errno));
  }
  const std::string tmp = tmpl;
  auto discard = [&] {
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
  };
  Status s = run(tmp, options.name.empty() ? base : options.name);
  if (s.ok()) {
    // The run's summary for `trainprof fleet` (run_summary.h); without one, fleet makes it.
    const Status summary = WriteRunSummaryFor(tmp);
    if (!summary.ok()) {
      std::cerr << "warning: summary.json not written: " << summary.message() << "\n";
    }
  }
  if (s.ok()) {
    // The run directory gets the usual mode (0755 less the umask) once complete.
    const mode_t mask = umask(0);
    umask(mask);
    if (chmod(tmp.c_str(), 0755 & ~mask) != 0) s = Unavailable(tmp + ": " + ErrnoMessage(errno));
  }
  if (s.ok()) {
    if (!exists) {
      if (rename(tmp.c_str(), out.c_str()) != 0) {
        s = Unavailable(out + ": cannot move the imported run into place: " + ErrnoMessage(errno));
      }
    } else {
      // An existing directory (empty, or holding other files): the run's entries move into
      // it, run.json last, so that it only looks like a run once complete.
      for (const char* entry : {store::kNodesDirName, kRunSummaryName, store::kRunJsonName}) {
        const std::string from = JoinPath(tmp, entry);
        if (!PathExists(from)) continue;
        if (rename(from.c_str(), JoinPath(out, entry).c_str()) != 0) {
          s = Unavailable(JoinPath(out, entry) +
                          ": cannot move the imported run into place: " + ErrnoMessage(errno));
          break;
        }
      }
    }
  }
  discard();
  return s;
}

}  // namespace

Status RunImportKineto(const ImportOptions& options, std::ostream& out) {
  importers::kineto::KinetoImportOptions o;
  o.traces = options.sources;
  TerminalProgress progress({.label = "import kineto"});
  o.progress = &progress;
  importers::kineto::KinetoImportResult result;
  TP_RETURN_IF_ERROR(ImportIntoPlace(options, [&](const std::string& dir, const std::string& name) {
    o.out = dir;
    o.name = name;
    TP_ASSIGN_OR_RETURN(result, importers::kineto::ImportKineto(o));
    return OkStatus();
  }));
  progress.Finish();
  if (options.json) {
    nlohmann::json j;
    j["run"] = options.out;
    j["events_stored"] = result.events_stored;
    j["nodes"] = result.nodes;
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : result.files) {
      nlohmann::json fj;
      fj["path"] = f.path;
      fj["node"] = f.node;
      fj["rank"] = f.rank == model::kMissing ? nlohmann::json(nullptr) : nlohmann::json(f.rank);
      fj["world_size"] =
          f.world_size == model::kMissing ? nlohmann::json(nullptr) : nlohmann::json(f.world_size);
      fj["timestamp_format"] = f.timestamp_format;
      fj["base_time_ns"] = f.base_time_ns;
      fj["elements"] = f.elements;
      fj["events_stored"] = f.events_stored;
      fj["steps"] = f.steps;
      fj["flows"] = f.flows;
      fj["metric_samples"] = f.metric_samples;
      fj["gpus"] = f.gpus;
      fj["start_ns"] = f.start_ns;
      fj["end_ns"] = f.end_ns;
      fj["categories"] = f.categories;
      fj["problems"] = f.problems;
      fj["warnings"] = f.warnings;
      files.push_back(fj);
    }
    j["files"] = files;
    out << DumpJson(j, 2) << "\n";
    return OkStatus();
  }
  if (Quiet()) return OkStatus();
  std::vector<std::vector<std::string>> rows = {
      {"file", "node", "rank", "ts", "events", "steps", "flows", "samples", "problems"}};
  for (const auto& f : result.files) {
    std::string problems;
    for (const auto& [name, n] : f.problems) {
      problems += (problems.empty() ? "" : " ") + name + "=" + std::to_string(n);
    }
    rows.push_back({f.path, f.node, RankText(f.rank), f.timestamp_format,
                    std::to_string(f.events_stored), std::to_string(f.steps),
                    std::to_string(f.flows), std::to_string(f.metric_samples),
                    problems.empty() ? "-" : problems});
  }
  PrintTable(out, rows);
  for (const auto& f : result.files) {
    for (const std::string& w : f.warnings) std::cerr << "warning: " << f.path << ": " << w << "\n";
  }
  out << "imported " << result.events_stored << " events into " << options.out << " ("
      << result.nodes.size() << " node" << (result.nodes.size() == 1 ? "" : "s") << ")\n";
  return OkStatus();
}

Status RunImportSmdebug(const ImportOptions& options, std::ostream& out) {
  if (options.sources.size() != 1) {
    return InvalidArgument("import smdebug takes one profiler-output directory");
  }
  importers::smdebug::SmdebugImportOptions o;
  o.dir = options.sources[0];
  TerminalProgress progress({.label = "import smdebug"});
  o.progress = &progress;
  importers::smdebug::SmdebugImportResult r;
  TP_RETURN_IF_ERROR(ImportIntoPlace(options, [&](const std::string& dir, const std::string& name) {
    o.out = dir;
    o.name = name;
    TP_ASSIGN_OR_RETURN(r, importers::smdebug::ImportSmdebug(o));
    return OkStatus();
  }));
  progress.Finish();
  nlohmann::json j = {{"run", options.out},
                      {"nodes", r.nodes},
                      {"system_files", r.system_files},
                      {"system_samples", r.system_samples},
                      {"samples_by_type", r.samples_by_type},
                      {"framework_files", r.framework_files},
                      {"framework_events", r.framework_events},
                      {"steps", r.steps},
                      {"tf_trace_files", r.tf_trace_files},
                      {"tf_events", r.tf_events},
                      {"python_stats_files", r.python_stats_files},
                      {"python_functions", r.python_functions},
                      {"parse_errors", r.parse_errors},
                      {"skipped", r.skipped},
                      {"truncated_files", r.truncated_files},
                      {"warnings", r.warnings}};
  if (options.json) {
    out << DumpJson(j, 2) << "\n";
    return OkStatus();
  }
  if (Quiet()) {
    // Only what needs attention.
    for (const auto& w : r.warnings) std::cerr << "warning: " << w << "\n";
    return OkStatus();
  }
  out << "imported into " << options.out << ": " << r.system_samples << " system samples from "
      << r.system_files << " files, " << r.framework_events << " framework events from "
      << r.framework_files << " files (" << r.steps << " steps), " << r.tf_events
      << " TF profiler events, " << r.python_stats_files << " cProfile dumps ("
      << r.python_functions << " function rows); nodes:";
  for (const auto& n : r.nodes) out << " " << n;
  out << "\n";
  if (r.parse_errors > 0) out << "skipped " << r.parse_errors << " unreadable lines\n";
  for (const auto& s : r.skipped) out << "skipped " << s << "\n";
  for (const auto& w : r.warnings) out << "warning: " << w << "\n";
  return OkStatus();
}

Status RunImportHorovod(const ImportOptions& options, std::ostream& out) {
  importers::horovod::HorovodImportOptions o;
  o.timelines = options.sources;
  if (options.base_time_us >= 0) o.base_time_ns = options.base_time_us * 1000;
  TerminalProgress progress({.label = "import horovod"});
  o.progress = &progress;
  importers::horovod::HorovodImportResult r;
  TP_RETURN_IF_ERROR(ImportIntoPlace(options, [&](const std::string& dir, const std::string& name) {
    o.out = dir;
    o.name = name;
    TP_ASSIGN_OR_RETURN(r, importers::horovod::ImportHorovod(o));
    return OkStatus();
  }));
  progress.Finish();
  if (options.json) {
    nlohmann::json j = {{"run", options.out},
                        {"spans", r.spans},
                        {"instants", r.instants},
                        {"nodes", r.nodes},
                        {"warnings", r.warnings}};
    out << DumpJson(j, 2) << "\n";
    return OkStatus();
  }
  for (const std::string& w : r.warnings) std::cerr << "warning: " << w << "\n";
  if (Quiet()) return OkStatus();
  out << "imported " << r.spans << " spans and " << r.instants << " instants into " << options.out
      << "\n";
  return OkStatus();
}

void AddImportCommand(CLI::App& app, CommandAction* action) {
  auto* import = app.add_subcommand("import",
                                    "Import SageMaker Debugger, Kineto or Horovod data "
                                    "into a run");
  import->require_subcommand(1);
  auto opts = std::make_shared<ImportOptions>();
  auto add_common = [opts](CLI::App* sub, const char* what) {
    sub->add_option("sources", opts->sources, what)->required();
    sub->add_option("--out", opts->out, "Run directory to create")->required();
    sub->add_option("--name", opts->name, "Run name (default: the directory's name)");
    sub->add_flag("--json", opts->json, "Print the import summary as JSON");
    AddQuietFlag(sub);
  };
  auto* kineto = import->add_subcommand(
      "kineto", "PyTorch profiler / Kineto traces (.json, .json.gz), one file per rank");
  add_common(kineto, "Trace files");
  kineto->callback(
      [opts, action] { action->run = [opts] { return RunImportKineto(*opts, std::cout); }; });
  auto* smdebug = import->add_subcommand(
      "smdebug", "A SageMaker Debugger profiler-output folder (system, framework, TF, cProfile)");
  add_common(smdebug, "The profiler-output directory");
  auto* horovod = import->add_subcommand("horovod", "Horovod timelines (HOROVOD_TIMELINE files)");
  add_common(horovod, "Timeline files");
  horovod->add_option("--base-time-us", opts->base_time_us,
                      "Wall-clock time (µs since the epoch) of the timeline's ts 0");
  horovod->callback(
      [opts, action] { action->run = [opts] { return RunImportHorovod(*opts, std::cout); }; });
  smdebug->callback(
      [opts, action] { action->run = [opts] { return RunImportSmdebug(*opts, std::cout); }; });
}

}  // namespace trainprof::cli
