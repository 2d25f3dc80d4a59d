// `record`, `agent` and `mark` in the portable build (TRAINPROF_COLLECTORS=OFF, e.g. macOS):
// listed like the others, each says that recording needs Linux and exits with status 1. The
// recording build compiles record_command.cc instead.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "base/platform.h"
#include "cli/command.h"

namespace trainprof::cli {
namespace {

void AddUnavailable(CLI::App& app, CommandAction* action, const std::string& name,
                    const std::string& help) {
  CLI::App* cmd = app.add_subcommand(name, help + " (recording needs Linux: not in this build)");
  // What the recording build accepts (its options with values, `-- COMMAND ARGS...`, flags) gets
  // this answer too, not a usage error.
  auto args = std::make_shared<std::vector<std::string>>();
  cmd->prefix_command();
  cmd->add_option("args", *args, "ignored");
  cmd->add_option(
         "--out,-o,--name,--interval,--instance-type,--tag,--node,--detail-steps,"
         "--python-profile,--detail-time,--python-profile-time,--health-every,--prometheus,"
         "--prometheus-names,"
         "--serve,--custom-rule,--custom-rule-param,--python,--rules-config,--live-rules-every,"
         "--pid,--cgroup,--duration,--run,--socket",
         *args, "ignored")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->callback([action, name, args] {  // keeps `args` alive with the app
    action->run = [name] {
      return FailedPrecondition(
          "'trainprof " + name +
          "': recording needs Linux. This trainprof was built without the collectors "
          "(TRAINPROF_COLLECTORS=OFF, platform " +
          platform::Name() +
          "): it reads, imports, analyses and reports runs recorded on Linux (ls, show, "
          "import, analyze, rules, cost, report, export, serve).");
    };
  });
}

}  // namespace

void AddRecordCommand(CLI::App& app, CommandAction* action) {
  AddUnavailable(app, action, "record",
                 "Run a command and profile it: system, GPU and framework metrics");
}

void AddAgentCommand(CLI::App& app, CommandAction* action) {
  AddUnavailable(app, action, "agent", "Collect a node's metrics for jobs started elsewhere");
}

void AddMarkCommand(CLI::App& app, CommandAction* action) {
  AddUnavailable(app, action, "mark",
                 "Mark a phase (download_start, upload_end...) in a running job");
}

}  // namespace trainprof::cli
