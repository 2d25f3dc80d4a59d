#include "cli/cli.h"

#include <CLI/CLI.hpp>
#include <array>
#include <iostream>

#include "cli/command.h"
#include "cli/progress.h"
#include "cli/remote_run.h"
#include "trainprof/version.h"

namespace trainprof::cli {
namespace {

// One line per subcommand; add yours here (keep the list sorted by name after the basics).
constexpr AddCommandFn kCommands[] = {
    AddLsCommand,        AddShowCommand,   AddExportCommand, AddDemoCommand,    AddRecordCommand,
    AddAgentCommand,     AddMarkCommand,   AddImportCommand, AddAnalyzeCommand, AddCostCommand,
    AddInstancesCommand, AddReportCommand, AddRulesCommand,  AddDetailCommand,  AddTuneCommand,
    AddServeCommand,     AddFleetCommand,
};

struct Planned {
  const char* name;
  const char* help;
};

// Subcommands that later work fills in; listed so that `trainprof --help` shows the whole tool.
// They answer "not implemented yet" until then. Remove a line when its command lands.
// (None left: an empty list, kept for the next one.)
constexpr std::array<Planned, 0> kPlanned{};

int ExitCode(const Status& status) {
  if (status.ok()) return kExitOk;
  std::cerr << "error: " << status.message() << "\n";
  return status.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

}  // namespace

int Main(const std::vector<std::string>& args) {
  // `tune` passes its arguments on untouched, `--` included (tune_command.cc).
  if (args.size() >= 2 && args[1] == "tune") {
    return ExitCode(RunTuneHandOver({args.begin() + 2, args.end()}));
  }
  // `fleet` and `export parquet` too (fleet_command.cc).
  if (args.size() >= 2 && args[1] == "fleet") {
    return ExitCode(RunFleetHandOver("fleet", {args.begin() + 2, args.end()}));
  }
  if (args.size() >= 3 && args[1] == "export" && args[2] == "parquet") {
    return ExitCode(RunFleetHandOver("export-parquet", {args.begin() + 3, args.end()}));
  }
  CLI::App app{"trainprof: profiler and cost advisor for machine-learning training jobs",
               "trainprof"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("trainprof ") + kVersion);
  AddQuietFlag(&app);
  app.footer("Run 'trainprof <command> --help' for a command's options.");

  CommandAction action;
  for (AddCommandFn add : kCommands) add(app, &action);
  AcceptObjectStoreUrls(app);  // RUN and --out may be s3:// URLs (remote_run.h)
  RemoteRuns remote;           // removes its temporary copies on every return below
  std::string planned_name;
  for (const Planned& p : kPlanned) {
    bool taken = false;
    for (const CLI::App* sub : app.get_subcommands({})) taken |= sub->get_name() == p.name;
    if (taken) continue;
    app.add_subcommand(p.name, std::string(p.help) + " (not implemented yet)")
        ->allow_extras()
        ->callback([&planned_name, name = std::string(p.name)] { planned_name = name; });
  }

  std::vector<std::string> reversed(args.rbegin(), args.rend() - (args.empty() ? 0 : 1));
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "error: " << e.what() << "\n";
    std::cerr << "Run 'trainprof --help' for usage.\n";
    return kExitUsage;
  }
  if (!planned_name.empty()) {
    std::cerr << "error: 'trainprof " << planned_name << "' is not implemented yet\n";
    return kExitFailure;
  }
  if (!action.run) return kExitUsage;
  if (Status fetched = remote.Fetch(); !fetched.ok()) return ExitCode(fetched);
  Status status = action.run();
  if (status.ok()) status = remote.Push();
  if (status.ok() && action.exit_code >= 0) return action.exit_code;
  return ExitCode(status);
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  return Main(args);
}

}  // namespace trainprof::cli
