// `trainprof report RUN [--out report.html] [--json report.json] [--pdf report.pdf]
// [--scaling RUN2 ...]`: writes the run's report (with --scaling, its scaling efficiency against
// runs of the same job at other world sizes). With no output option it writes report.html and
// report.json into the run. On a `trainprof tune` state directory (tune.json, no run.json) it hands
// over to `python -m trainprof._tune_results --report STATE [OUT]`: each trial's report, then the
// tune result table (STATE/tune.html, or --out).

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/platform.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/custom_rules.h"
#include "cli/output.h"
#include "cli/progress.h"
#include "cli/report_providers.h"
#include "report/write_reports.h"

namespace trainprof::cli {

namespace {

// The tune result table of a `trainprof tune` state directory (see the top of this file).
Status RunTuneReport(const ReportOptions& options) {
  if (!options.json_path.empty() || !options.pdf_path.empty()) {
    return InvalidArgument(options.run +
                           " is a tune state directory: only --out applies (its results are "
                           "in tune.json already)");
  }
  std::vector<std::string> args = {"--report", options.run};
  if (!options.html_path.empty()) args.push_back(options.html_path);
  return ExecPythonModule("trainprof._tune_results", args, "the tune table");
}

}  // namespace

Status RunReport(const ReportOptions& options, std::ostream& out) {
  if (!PathExists(options.run + "/run.json") && PathExists(options.run + "/tune.json")) {
    return RunTuneReport(options);
  }
  report::WriteOptions w;
  const bool any =
      !options.html_path.empty() || !options.json_path.empty() || !options.pdf_path.empty();
  if (any) {
    w.write_html = !options.html_path.empty();
    w.write_json = !options.json_path.empty();
  }
  w.html_path = options.html_path;
  w.json_path = options.json_path;
  w.pdf_path = options.pdf_path;
  UseAnalyses(&w.build);
  if (!options.scaling.empty()) {
    w.build.scaling = [&options](store::RunReader& reader) {
      return ScalingSectionFor(options.run, reader, options.scaling, options.warmup_steps);
    };
  }
  // Stages only: the report reads the whole run, then the rules and the cost advisor run.
  TerminalProgress progress({.label = "report", .bytes = false});
  progress.SetStage("reading the run");
  w.build.rules = [&progress, rules = std::move(w.build.rules)](store::RunReader& reader) {
    progress.SetStage("rules");
    auto section = rules(reader);
    progress.SetStage("building");
    return section;
  };
  w.build.cost = [&progress, cost = std::move(w.build.cost)](store::RunReader& reader,
                                                             const report::Report& r) {
    progress.SetStage("cost");
    auto section = cost(reader, r);
    progress.SetStage("writing");
    return section;
  };
  if (!w.pdf_path.empty() && w.html_path.empty()) {
    // The PDF is printed from an HTML file; keep it beside the PDF.
    w.html_path = w.pdf_path + ".html";
  }
  TP_ASSIGN_OR_RETURN(auto written, report::WriteReports(options.run, w));
  progress.Finish();
  if (Quiet()) return OkStatus();
  if (!written.html_path.empty()) {
    out << "wrote " << written.html_path << " ("
        << FormatBytes(static_cast<double>(written.html_bytes)) << ")\n";
  }
  if (!written.json_path.empty()) {
    out << "wrote " << written.json_path << " ("
        << FormatBytes(static_cast<double>(written.json_bytes)) << ")\n";
  }
  if (!written.pdf_path.empty()) out << "wrote " << written.pdf_path << "\n";
  return OkStatus();
}

void AddReportCommand(CLI::App& app, CommandAction* action) {
  auto opts = std::make_shared<ReportOptions>();
  auto* cmd = app.add_subcommand("report", "Write the HTML / JSON / PDF report of a run");
  cmd->add_option("run", opts->run, "Run directory (or a `trainprof tune` state directory)")
      ->required();
  cmd->add_option("--out", opts->html_path, "HTML file to write (default <run>/report.html)");
  cmd->add_option("--json", opts->json_path, "JSON file to write (default <run>/report.json)");
  cmd->add_option("--pdf", opts->pdf_path, "PDF file to write (needs Debian's chromium)");
  cmd->add_option("--scaling", opts->scaling,
                  "Runs of the same job at other world sizes: adds the scaling-efficiency "
                  "section (as `analyze --scaling`)");
  cmd->add_option("--warmup-steps", opts->warmup_steps,
                  "--scaling: first training steps of each device left out (default 5)");
  AddQuietFlag(cmd);
  cmd->footer("With no --out/--json/--pdf, writes report.html and report.json into the run.");
  cmd->callback([opts, action] { action->run = [opts] { return RunReport(*opts, std::cout); }; });
}

}  // namespace trainprof::cli
