#pragma once
// Options and entry points of the subcommands. Each runs without argv (testable) and returns a
// Status; cli.cc parses arguments into these structs and prints errors.

#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"

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

struct RulesOptions {
  std::string run;
  bool json = false;
  std::string config_file;             // --config FILE
  std::vector<std::string> overrides;  // --rule NAME.param=value
  bool store = false;                  // write the findings into the run
  bool run_actions = false;            // run configured command / webhook actions
  bool list = false;                   // list the rules instead
};
Status RunRules(const RulesOptions& options, std::ostream& out);

struct DemoOptions {
  std::string out;  // run directory; default trainprof-runs/<run id>
  int64_t duration_s = 120;
};
Status RunDemo(const DemoOptions& options, std::ostream& out);

}  // namespace trainprof::cli
