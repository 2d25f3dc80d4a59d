// `trainprof tune`: hands its arguments over, unchanged, to the Python driver
// (`python -m trainprof.tune`, python/trainprof/tune.py), which runs short `trainprof record`
// trials and searches the job's settings with Optuna (docs/tune.md). The interpreter and the
// package are found as for custom rules (cli/custom_rules.h); $TRAINPROF_BIN tells the driver
// which executable runs the trials (this one).
//
// The arguments are taken before CLI11 parses them (RunTuneHandOver, called from Main), since
// CLI11 would reorder or drop the `--` that separates tune's options from the command.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/platform.h"
#include "cli/command.h"
#include "cli/custom_rules.h"

namespace trainprof::cli {

Status RunTuneHandOver(const std::vector<std::string>& args) {
  return ExecPythonModule("trainprof.tune", args, "tune");
}

void AddTuneCommand(CLI::App& app, CommandAction* /*action*/) {
  // Listed for `trainprof --help`; the arguments never reach CLI11 (see RunTuneHandOver).
  app.add_subcommand("tune",
                     "Find the settings that make a job fastest per dollar, by short profiled "
                     "trials (trainprof tune --help)")
      ->allow_extras()
      ->prefix_command();
}

}  // namespace trainprof::cli
