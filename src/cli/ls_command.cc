#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include "base/time.h"

#include "cli/command.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "store/run_reader.h"

namespace trainprof::cli {

Status RunLs(const LsOptions& options, std::ostream& out) {
  TP_ASSIGN_OR_RETURN(auto runs, store::ListRuns(options.dir));
  if (options.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : runs) {
      nlohmann::json row;
      row["dir"] = r.dir;
      row["run_id"] = r.run_id;
      row["name"] = r.name;
      row["start_ns"] = r.start_ns ? nlohmann::json(*r.start_ns) : nlohmann::json(nullptr);
      row["duration_ns"] = r.duration_ns ? nlohmann::json(*r.duration_ns) : nlohmann::json(nullptr);
      row["exit_status"] = r.exit_status ? nlohmann::json(*r.exit_status) : nlohmann::json(nullptr);
      row["nodes"] = r.node_count;
      row["source"] = r.source;
      if (!r.error.empty()) row["error"] = r.error;
      j.push_back(row);
    }
    out << nlohmann::json{{"runs", j}}.dump(2) << "\n";
    return OkStatus();
  }
  if (runs.empty()) {
    out << "no runs in " << options.dir << "\n";
    return OkStatus();
  }
  std::vector<std::vector<std::string>> rows = {
      {"RUN", "NAME", "START (UTC)", "DURATION", "NODES", "EXIT", "SOURCE"}};
  for (const auto& r : runs) {
    std::string exit = r.exit_status ? std::to_string(*r.exit_status) : "n/a";
    if (!r.error.empty()) exit = "unreadable: " + r.error;
    rows.push_back({r.dir, r.name, r.start_ns ? FormatIso8601(*r.start_ns) : "n/a",
                    r.duration_ns ? FormatDuration(*r.duration_ns) : "n/a",
                    std::to_string(r.node_count), exit, r.source});
  }
  PrintTable(out, rows);
  return OkStatus();
}

void AddLsCommand(CLI::App& app, CommandAction* action) {
  auto opts = std::make_shared<LsOptions>();
  auto* cmd = app.add_subcommand("ls", "List runs in a directory (default ./trainprof-runs)");
  cmd->add_option("dir", opts->dir, "Directory holding run directories, or a run");
  cmd->add_flag("--json", opts->json, "Print JSON");
  cmd->callback([opts, action] { action->run = [opts] { return RunLs(*opts, std::cout); }; });
}

}  // namespace trainprof::cli
