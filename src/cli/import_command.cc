// `trainprof import kineto|smdebug|horovod SRC... --out RUN`: other tools' data into a run.

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "importers/kineto/kineto_importer.h"

namespace trainprof::cli {
namespace {

std::string RankText(int64_t rank) { return rank == model::kMissing ? "-" : std::to_string(rank); }

}  // namespace

Status RunImportKineto(const ImportOptions& options, std::ostream& out) {
  importers::kineto::KinetoImportOptions o;
  o.traces = options.sources;
  o.out = options.out;
  o.name = options.name;
  TP_ASSIGN_OR_RETURN(auto result, importers::kineto::ImportKineto(o));
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
      files.push_back(fj);
    }
    j["files"] = files;
    out << j.dump(2) << "\n";
    return OkStatus();
  }
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
  out << "imported " << result.events_stored << " events into " << options.out << " ("
      << result.nodes.size() << " node" << (result.nodes.size() == 1 ? "" : "s") << ")\n";
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
  };
  auto* kineto = import->add_subcommand(
      "kineto", "PyTorch profiler / Kineto traces (.json, .json.gz), one file per rank");
  add_common(kineto, "Trace files");
  kineto->callback(
      [opts, action] { action->run = [opts] { return RunImportKineto(*opts, std::cout); }; });
}

}  // namespace trainprof::cli
