#pragma once
// How a subcommand plugs into the CLI. Each <name>_command.cc defines one Add<Name>Command that
// adds its CLI11 subcommand (options bound to a shared options struct) and, from the
// subcommand's callback, sets *action to the function that runs it. cli.cc lists them all.
// The work itself lives in a Run<Name>(options, out) function that tests call without argv.

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"

namespace CLI {
class App;
}

namespace trainprof::cli {

// What the parsed command line asks to run; returns the command's exit code through Status
// (ok: 0; InvalidArgument: 2; anything else: 1) unless it sets *exit_code itself (record,
// which exits with the child's status).
struct CommandAction {
  std::function<Status()> run;
  int exit_code = -1;  // when >= 0 after run() succeeds, the process exits with it
};

using AddCommandFn = void (*)(CLI::App& app, CommandAction* action);

void AddLsCommand(CLI::App& app, CommandAction* action);
void AddShowCommand(CLI::App& app, CommandAction* action);
void AddExportCommand(CLI::App& app, CommandAction* action);  // `export` and `export csv`
void AddDemoCommand(CLI::App& app, CommandAction* action);
// record_command.cc
void AddRecordCommand(CLI::App& app, CommandAction* action);
void AddAgentCommand(CLI::App& app, CommandAction* action);
void AddMarkCommand(CLI::App& app, CommandAction* action);
void AddCostCommand(CLI::App& app, CommandAction* action);       // cost_command.cc
void AddInstancesCommand(CLI::App& app, CommandAction* action);  // instances_command.cc
void AddImportCommand(CLI::App& app, CommandAction* action);
void AddAnalyzeCommand(CLI::App& app, CommandAction* action);
void AddReportCommand(CLI::App& app, CommandAction* action);
void AddRulesCommand(CLI::App& app, CommandAction* action);
void AddDetailCommand(CLI::App& app, CommandAction* action);  // detail_command.cc
void AddTuneCommand(CLI::App& app, CommandAction* action);    // tune_command.cc
void AddServeCommand(CLI::App& app, CommandAction* action);   // serve_command.cc
// `tune ARGS...`: execs the Python driver with ARGS unparsed; returns only on failure.
Status RunTuneHandOver(const std::vector<std::string>& args);
void AddFleetCommand(CLI::App& app, CommandAction* action);  // fleet_command.cc
// `fleet ARGS...` / `export parquet ARGS...`: execs `python -m trainprof.fleet VERB ARGS...`
// (VERB "fleet" or "export-parquet"); returns only on failure.
Status RunFleetHandOver(const std::string& verb, const std::vector<std::string>& args);
// The argv that starts the fleet view for VERB in a child (`serve`'s /api/fleet), with this
// process's environment prepared as RunFleetHandOver does (PYTHONPATH, TRAINPROF_BIN).
std::vector<std::string> FleetViewCommand(const std::string& verb);
// `record --out s3://bucket/prefix/RUN`: records into trainprof-runs/RUN and copies the run
// there as it grows (`python -m trainprof.fleet sync --follow`, docs/fleet.md).
struct RunUpload {
  std::string url, local;
  int pid = 0;
};
bool IsObjectStoreUrl(const std::string& path);
StatusOr<std::shared_ptr<RunUpload>> StartRunUpload(const std::string& url);
// After the run's end (summary and report written): the last copy; problems are warnings.
void FinishRunUpload(RunUpload& upload, std::ostream& out);

}  // namespace trainprof::cli
