#include "cli/cli.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/commands.h"
#include "trainprof/version.h"

namespace trainprof::cli {
namespace {

struct Planned {
  const char* name;
  const char* help;
};

// Subcommands that later work fills in; they are listed so that `trainprof --help` shows the
// whole tool, and answer "not implemented yet" until then.
constexpr Planned kPlanned[] = {
    {"record", "Run a command and profile it: system, GPU and framework metrics"},
    {"agent", "Collect a node's metrics for jobs started elsewhere"},
    {"import", "Import SageMaker Debugger, Kineto or Horovod data into a run"},
    {"analyze", "Trace analyses per rank (temporal, kernel and idle breakdowns)"},
    {"rules", "Evaluate the profiler rules on a run"},
    {"report", "Write the HTML / JSON / PDF report of a run"},
    {"cost", "What a run cost and what to change, in dollars"},
    {"instances", "List the instance catalog"},
    {"serve", "Serve the live dashboard"},
    {"mark", "Mark a phase (download, upload...) in a running job"},
    {"detail", "Ask a running job for detailed operator profiling"},
};

int Finish(const Status& status) {
  if (status.ok()) return kExitOk;
  std::cerr << "error: " << status.message() << "\n";
  return status.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

}  // namespace

int Main(const std::vector<std::string>& args) {
  CLI::App app{"trainprof: profiler and cost advisor for machine-learning training jobs", "trainprof"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("trainprof ") + kVersion);
  app.footer("Run 'trainprof <command> --help' for a command's options.");

  LsOptions ls;
  auto* ls_cmd = app.add_subcommand("ls", "List runs in a directory (default ./trainprof-runs)");
  ls_cmd->add_option("dir", ls.dir, "Directory holding run directories, or a run");
  ls_cmd->add_flag("--json", ls.json, "Print JSON");

  ShowOptions show;
  auto* show_cmd = app.add_subcommand("show", "Show a run's metadata and what its store holds");
  show_cmd->add_option("run", show.run, "Run directory")->required();
  show_cmd->add_flag("--json", show.json, "Print JSON");

  auto* export_cmd = app.add_subcommand("export", "Export a run to other formats");
  export_cmd->require_subcommand(1);
  ExportCsvOptions csv;
  auto* csv_cmd = export_cmd->add_subcommand("csv", "CSV files: metrics, events, steps, findings");
  csv_cmd->add_option("run", csv.run, "Run directory")->required();
  csv_cmd->add_option("--out", csv.out_dir, "Output directory")->required();
  for (const char* planned : {"chrome-trace", "smdebug"}) {
    export_cmd->add_subcommand(planned, std::string("Export as ") + planned + " (not implemented yet)")
        ->allow_extras();
  }

  DemoOptions demo;
  auto* demo_cmd = app.add_subcommand(
      "demo", "Write a demo run with synthetic data and read it back (the embedded default job)");
  demo_cmd->add_option("--out", demo.out, "Run directory to write");
  demo_cmd->add_option("--duration", demo.duration_s, "Seconds of synthetic data")
      ->check(CLI::Range(10, 86400));

  for (const Planned& p : kPlanned) {
    app.add_subcommand(p.name, std::string(p.help) + " (not implemented yet)")->allow_extras();
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

  if (*ls_cmd) return Finish(RunLs(ls, std::cout));
  if (*show_cmd) return Finish(RunShow(show, std::cout));
  if (*csv_cmd) return Finish(RunExportCsv(csv, std::cout));
  if (*demo_cmd) return Finish(RunDemo(demo, std::cout));
  for (CLI::App* sub : app.get_subcommands()) {
    std::string name = sub->get_name();
    if (name == "export") {
      for (CLI::App* s : sub->get_subcommands()) name += " " + s->get_name();
    }
    std::cerr << "error: 'trainprof " << name << "' is not implemented yet\n";
    return kExitFailure;
  }
  return kExitUsage;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  return Main(args);
}

}  // namespace trainprof::cli
