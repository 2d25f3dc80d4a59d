#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include "base/files.h"

#include "cli/command.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "cli/progress.h"
#include "model/finding.h"
#include "store/run_reader.h"

namespace trainprof::cli {
namespace {

std::string Int(int64_t v) { return v == model::kMissing ? "" : std::to_string(v); }

std::string Double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

Status Check(std::ofstream& f, const std::string& path) {
  f.flush();
  if (!f) return Unavailable(path + ": write failed");
  return OkStatus();
}

}  // namespace

// Writes system_metrics.csv, events.csv, steps.csv, findings.csv and data_quality.csv.
// Missing integers are empty cells, never 0.
Status RunExportCsv(const ExportCsvOptions& options, std::ostream& out) {
  if (options.out_dir.empty()) return InvalidArgument("export csv needs --out DIR");
  TP_ASSIGN_OR_RETURN(auto reader, store::RunReader::Open(options.run));
  TP_RETURN_IF_ERROR(MakeDirs(options.out_dir));
  // Rows written, by file (the stage); a file's rows count once it is written.
  TerminalProgress progress({.label = "export csv", .bytes = false});
  // The "wrote" lines are printed at the end, after the progress line is cleared.
  std::ostringstream info;

  std::string path = JoinPath(options.out_dir, "system_metrics.csv");
  {
    progress.SetStage("system_metrics.csv");
    TP_ASSIGN_OR_RETURN(auto t, reader->SystemMetrics({}));
    std::ofstream f(path);
    f << "node,metric,device,timestamp_ns,value\n";
    for (size_t i = 0; i < t.size(); ++i) {
      f << CsvCell(t.nodes.at(t.node[i])) << ',' << CsvCell(t.metrics.at(t.metric[i])) << ','
        << CsvCell(t.devices.at(t.device[i])) << ',' << t.timestamp_ns[i] << ','
        << Double(t.value[i]) << '\n';
    }
    TP_RETURN_IF_ERROR(Check(f, path));
    progress.Advance(static_cast<int64_t>(t.size()));
    info << "wrote " << path << " (" << t.size() << " rows)\n";
  }
  path = JoinPath(options.out_dir, "events.csv");
  {
    progress.SetStage("events.csv");
    TP_ASSIGN_OR_RETURN(auto t, reader->Events({}));
    std::ofstream f(path);
    f << "node,rank,pid,tid,name,category,mode,step,kind,start_ns,duration_ns,args\n";
    for (size_t i = 0; i < t.size(); ++i) {
      f << CsvCell(t.nodes.at(t.node[i])) << ',' << Int(t.rank[i]) << ',' << Int(t.pid[i]) << ','
        << Int(t.tid[i]) << ',' << CsvCell(t.names.at(t.name[i])) << ','
        << CsvCell(t.categories.at(t.category[i])) << ',' << CsvCell(t.modes.at(t.mode[i])) << ','
        << Int(t.step[i]) << ',' << (t.kind[i] == 0 ? "span" : "instant") << ',' << t.start_ns[i]
        << ',' << t.duration_ns[i] << ',' << CsvCell(t.args[i]) << '\n';
    }
    TP_RETURN_IF_ERROR(Check(f, path));
    progress.Advance(static_cast<int64_t>(t.size()));
    info << "wrote " << path << " (" << t.size() << " rows)\n";
  }
  path = JoinPath(options.out_dir, "steps.csv");
  {
    progress.SetStage("steps.csv");
    TP_ASSIGN_OR_RETURN(auto t, reader->Steps());
    std::ofstream f(path);
    f << "node,rank,pid,step,mode,start_ns,duration_ns,data_wait_ns,forward_ns,backward_ns,"
         "optimizer_ns\n";
    for (size_t i = 0; i < t.size(); ++i) {
      f << CsvCell(t.nodes.at(t.node[i])) << ',' << Int(t.rank[i]) << ',' << Int(t.pid[i]) << ','
        << Int(t.step[i]) << ',' << CsvCell(t.modes.at(t.mode[i])) << ',' << t.start_ns[i] << ','
        << t.duration_ns[i] << ',' << Int(t.data_wait_ns[i]) << ',' << Int(t.forward_ns[i]) << ','
        << Int(t.backward_ns[i]) << ',' << Int(t.optimizer_ns[i]) << '\n';
    }
    TP_RETURN_IF_ERROR(Check(f, path));
    progress.Advance(static_cast<int64_t>(t.size()));
    info << "wrote " << path << " (" << t.size() << " rows)\n";
  }
  path = JoinPath(options.out_dir, "findings.csv");
  {
    progress.SetStage("findings.csv");
    TP_ASSIGN_OR_RETURN(auto findings, reader->Findings());
    std::ofstream f(path);
    f << "rule,severity,node,device,start_ns,end_ns,message,recommendation,evidence\n";
    for (const auto& x : findings) {
      f << CsvCell(x.rule) << ',' << model::SeverityName(x.severity) << ',' << CsvCell(x.node)
        << ',' << CsvCell(x.device) << ',' << x.start_ns << ',' << x.end_ns << ','
        << CsvCell(x.message) << ',' << CsvCell(x.recommendation) << ',' << CsvCell(x.evidence_json)
        << '\n';
    }
    TP_RETURN_IF_ERROR(Check(f, path));
    progress.Advance(static_cast<int64_t>(findings.size()));
    info << "wrote " << path << " (" << findings.size() << " rows)\n";
  }
  path = JoinPath(options.out_dir, "data_quality.csv");
  {
    progress.SetStage("data_quality.csv");
    TP_ASSIGN_OR_RETURN(auto counters, reader->Counters());
    std::ofstream f(path);
    f << "counter,value\n";
    for (const auto& [name, value] : counters) f << CsvCell(name) << ',' << value << '\n';
    TP_RETURN_IF_ERROR(Check(f, path));
    info << "wrote " << path << " (" << counters.size() << " rows)\n";
  }
  progress.Finish();
  if (!Quiet()) out << info.str();
  return OkStatus();
}

void AddExportCommand(CLI::App& app, CommandAction* action) {
  auto* export_cmd = app.add_subcommand("export", "Export a run to other formats");
  export_cmd->require_subcommand(1);
  auto opts = std::make_shared<ExportCsvOptions>();
  auto* csv = export_cmd->add_subcommand("csv", "CSV files: metrics, events, steps, findings");
  csv->add_option("run", opts->run, "Run directory")->required();
  csv->add_option("--out", opts->out_dir, "Output directory")->required();
  AddQuietFlag(csv);
  csv->callback(
      [opts, action] { action->run = [opts] { return RunExportCsv(*opts, std::cout); }; });
  auto chrome_opts = std::make_shared<ExportChromeTraceOptions>();
  auto* chrome = export_cmd->add_subcommand(
      "chrome-trace",
      "Chrome Trace Event Format (Perfetto UI, chrome://tracing): events, metrics as counters, "
      "findings");
  chrome->add_option("run", chrome_opts->run, "Run directory")->required();
  chrome->add_option("--out", chrome_opts->out, "Output file (.json, or .json.gz for gzip)")
      ->required();
  AddQuietFlag(chrome);
  chrome->callback([chrome_opts, action] {
    action->run = [chrome_opts] { return RunExportChromeTrace(*chrome_opts, std::cout); };
  });
  auto smdebug_opts = std::make_shared<ExportSmdebugOptions>();
  auto* smdebug = export_cmd->add_subcommand(
      "smdebug", "SageMaker Debugger profiler-output folder (system metrics, framework timelines)");
  smdebug->add_option("run", smdebug_opts->run, "Run directory")->required();
  smdebug->add_option("--out", smdebug_opts->out_dir, "Output directory")->required();
  AddQuietFlag(smdebug);
  smdebug->callback([smdebug_opts, action] {
    action->run = [smdebug_opts] { return RunExportSmdebug(*smdebug_opts, std::cout); };
  });
}

}  // namespace trainprof::cli
