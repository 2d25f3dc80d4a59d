#pragma once
// Options and entry points of the subcommands. Each runs without argv (testable) and returns a
// Status; cli.cc parses arguments into these structs and prints errors.

#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "cli/cost_command.h"

namespace trainprof::cli {

struct LsOptions {
  std::string dir = "trainprof-runs";
  bool json = false;
};
Status RunLs(const LsOptions& options, std::ostream& out);

struct ShowOptions {
  std::string run;
  bool json = false;
};
Status RunShow(const ShowOptions& options, std::ostream& out);

struct ExportCsvOptions {
  std::string run;
  std::string out_dir;
};
Status RunExportCsv(const ExportCsvOptions& options, std::ostream& out);

// `export chrome-trace`: one Chrome Trace Event Format file (gzip when `out` ends in .gz).
struct ExportChromeTraceOptions {
  std::string run;
  std::string out;
};
Status RunExportChromeTrace(const ExportChromeTraceOptions& options, std::ostream& out);

// `export smdebug`: a SageMaker Debugger profiler-output folder.
struct ExportSmdebugOptions {
  std::string run;
  std::string out_dir;
};
Status RunExportSmdebug(const ExportSmdebugOptions& options, std::ostream& out);

// `import kineto|smdebug|horovod`.
struct ImportOptions {
  std::vector<std::string> sources;  // files (kineto, horovod) or one directory (smdebug)
  std::string out;
  std::string name;
  bool json = false;
  int64_t base_time_us = -1;  // horovod: wall clock of ts 0; -1 = unknown
};
Status RunImportKineto(const ImportOptions& options, std::ostream& out);
Status RunImportSmdebug(const ImportOptions& options, std::ostream& out);
Status RunImportHorovod(const ImportOptions& options, std::ostream& out);

struct AnalyzeOptions {
  std::string run;
  // On the command line: one run directory, or Kineto trace files (analyze_command.cc imports
  // them into a scratch run and sets `run`). Empty: `run` as set.
  std::vector<std::string> inputs;
  bool json = false;
  std::string diff_base;  // baseline run for a trace diff
  double kernel_wait_threshold_us = 30.0;
  int top = 10;
  bool hta_compat = false;
  // --scaling RUN2 [RUN3...]: scaling efficiency of `run` and these (analyze/scaling), instead
  // of the trace analyses.
  std::vector<std::string> scaling;
  int64_t warmup_steps = 5;
};
Status RunAnalyze(const AnalyzeOptions& options, std::ostream& out);
Status RunScaling(const AnalyzeOptions& options, std::ostream& out);  // scaling_command.cc

struct RulesOptions {
  std::string run;
  bool json = false;
  std::string config_file;             // --config FILE
  std::vector<std::string> overrides;  // --rule NAME.param=value
  bool store = false;                  // write the findings into the run
  bool run_actions = false;            // run configured command / webhook actions
  bool list = false;                   // list the rules instead
  PricingOptions pricing;              // how the findings' cost impact is priced
  std::vector<std::string> custom;     // --custom FILE: Python custom rules (cli/custom_rules.h)
  std::string python;                  // --python: the interpreter for the custom rules
};
Status RunRules(const RulesOptions& options, std::ostream& out);

struct DemoOptions {
  std::string out;  // run directory; default trainprof-runs/<run id>
  int64_t duration_s = 120;
};
Status RunDemo(const DemoOptions& options, std::ostream& out);

struct ReportOptions {
  std::string run;
  std::string html_path, json_path, pdf_path;  // all empty: report.html + report.json in the run
  std::vector<std::string> scaling;            // runs of the same job at other world sizes
  int64_t warmup_steps = 5;  // --scaling: first training steps of each device left out
};
Status RunReport(const ReportOptions& options, std::ostream& out);

}  // namespace trainprof::cli
