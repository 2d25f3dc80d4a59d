// `trainprof record`, `trainprof agent` and `trainprof mark`: thin argv layers over
// agent::RunRecord / RunAgent / RunMark (src/agent), which tests call directly.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "agent/mark.h"
#include "agent/node_agent.h"
#include "agent/record.h"
#include "analyze/rules/config.h"
#include "cli/command.h"
#include "cli/custom_rules.h"
#include "cli/live_rules.h"
#include "cli/remote_run.h"
#include "cli/report_providers.h"
#include "serve/server.h"

namespace trainprof::cli {
namespace {

constexpr const char* kIntervalHelp =
    "Sampling interval: 100ms, 200ms, 500ms (default), 1s, 5s, 1min";
constexpr const char* kPrometheusHelp =
    "Serve Prometheus /metrics on [HOST:]PORT (host 127.0.0.1 unless given; port 0 = any)";
constexpr const char* kPrometheusNamesHelp =
    "Names on /metrics: trainprof (default), dcgm (GPU series as dcgm-exporter's), "
    "node_exporter (host series as node_exporter's), all, or a comma-separated list";

}  // namespace

void AddRecordCommand(CLI::App& app, CommandAction* action) {
  auto opts = std::make_shared<agent::RecordOptions>();
  auto* cmd = app.add_subcommand("record",
                                 "Run a command and profile it: system, GPU and framework metrics");
  cmd->add_option("--out,-o", opts->out,
                  "Run directory (default ./trainprof-runs/<UTC time>-<name>)");
  cmd->add_option("--name", opts->name, "Run name (default: the command's name)");
  cmd->add_option("--interval", opts->interval, kIntervalHelp);
  cmd->add_option("--instance-type", opts->instance_type,
                  "Instance type, stored for cost (e.g. ml.p3.8xlarge)");
  cmd->add_option("--tag", opts->tags, "key=value stored in run.json (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--node", opts->node, "This node's name in the run (default: host name)");
  cmd->add_flag("--no-gpu", opts->no_gpu, "Do not collect GPU metrics");
  cmd->add_flag("--no-auto", opts->no_auto,
                "Do not instrument Python/PyTorch processes automatically");
  cmd->add_option(
      "--detail-steps", opts->detail_steps,
      "Operator-level profiling (the PyTorch or TensorFlow profiler) for these steps, e.g. 10-20");
  cmd->add_option("--python-profile", opts->python_profile,
                  "cProfile Python functions for these steps, e.g. 10-12");
  cmd->add_option("--detail-time", opts->detail_time,
                  "Operator-level profiling over a time window, START+SECONDS: e.g. 60+10 = the "
                  "training steps from 60 s after the start for 10 s (START may be a Unix time)");
  cmd->add_option("--python-profile-time", opts->python_profile_time,
                  "cProfile over a time window, START+SECONDS (as --detail-time)");
  cmd->add_option("--health-every", opts->health_every,
                  "Sample training health (the loss passed to backward, the gradient norm before "
                  "the optimizer step) every N training steps (default 10; 0: off)")
      ->check(CLI::Range(int64_t{0}, int64_t{1'000'000'000}));
  cmd->add_option("--prometheus", opts->prometheus, kPrometheusHelp);
  cmd->add_flag("--prometheus-allow-remote", opts->prometheus_allow_remote,
                "Allow --prometheus on a non-loopback address");
  cmd->add_option("--prometheus-names", opts->prometheus_names, kPrometheusNamesHelp);
  auto serve_addr = std::make_shared<std::string>();
  cmd->add_option("--serve", *serve_addr,
                  "Serve the live dashboard of this run while it records, on HOST:PORT (e.g. "
                  "127.0.0.1:8787; another host than loopback gets a token)");
  cmd->footer("Usage: trainprof record [OPTIONS] -- CMD [ARGS...]");
  cmd->add_option("command", opts->command, "The command to run, after --")->required();
  auto custom = std::make_shared<CustomRulesOptions>();
  cmd->add_option("--custom-rule", custom->files,
                  "Python file with custom rules (trainprof.rules.Rule subclasses): those with "
                  "update() are evaluated while the command runs, the others when it ends; "
                  "findings are stored in the run and acted on (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--custom-rule-param", custom->overrides,
                  "Override a custom rule's parameter: NAME.param=value (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--python", custom->python,
                  "Python interpreter for --custom-rule (default: $TRAINPROF_PYTHON, the "
                  "package's environment, python3)");
  auto rules_config = std::make_shared<std::string>();
  auto live_every_s = std::make_shared<double>(5.0);
  cmd->add_option("--rules-config", *rules_config,
                  "Rule configuration (JSON, as `trainprof rules --config`): rules, parameters "
                  "and actions such as stopping the job");
  cmd->add_option("--live-rules-every", *live_every_s,
                  "Evaluate the rules while the job runs, every this many seconds (0: only at "
                  "the end)")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->callback([opts, action, rules_config, live_every_s, custom, serve_addr] {
    action->run = [opts, action, rules_config, live_every_s, custom, serve_addr]() -> Status {
      // --serve: the dashboard over this run, from before the command starts until `record`
      // ends (so the finished run's final data is shown too).
      auto dashboard = std::make_shared<std::unique_ptr<serve::Server>>();
      if (!serve_addr->empty()) {
        TP_RETURN_IF_ERROR(serve::ParseAddress(*serve_addr).status());
        opts->on_started = [serve_addr, dashboard](const std::string& run_dir, std::ostream& out) {
          serve::ServeOptions so;
          so.roots = {run_dir};
          so.address = *serve_addr;
          UseAnalyses(&so.build);
          auto server = serve::Server::Start(so);
          if (!server.ok()) {
            out << "trainprof: warning: the dashboard did not start: " << server.status().message()
                << "\n";
            return;
          }
          *dashboard = std::move(*server);
          out << "trainprof: dashboard at " << (*dashboard)->url() << "\n" << std::flush;
        };
      }
      analyze::rules::RuleConfig config;
      if (!rules_config->empty()) {
        TP_ASSIGN_OR_RETURN(config, analyze::rules::LoadRuleConfig(*rules_config));
      }
      auto live = std::make_shared<LiveRules>(config, *custom);
      if (*live_every_s > 0) {
        opts->live_period_ns = static_cast<int64_t>(*live_every_s * 1e9);
        opts->live_poll = [live](const agent::RecordOptions::LiveContext& ctx) { live->Poll(ctx); };
      }
      // --out s3://...: record locally, upload as it goes (fleet_command.cc).
      std::shared_ptr<RunUpload> upload;
      if (IsObjectStoreUrl(opts->out)) {
        TP_ASSIGN_OR_RETURN(upload, StartRunUpload(opts->out));
        opts->out = upload->local;
      }
      opts->on_finished = [live, upload](const std::string& run_dir, std::ostream& out) {
        FinishRecordedRun(run_dir, out, live.get());
        if (upload) FinishRunUpload(*upload, out);
      };
      StatusOr<int> code = agent::RunRecord(*opts, std::cerr);
      if (upload) FinishRunUpload(*upload, std::cerr);  // when on_finished was not reached
      if (*dashboard) (*dashboard)->Stop();
      if (!code.ok()) return code.status();
      action->exit_code = *code;
      return OkStatus();
    };
  });
}

void AddAgentCommand(CLI::App& app, CommandAction* action) {
  auto opts = std::make_shared<agent::AgentOptions>();
  auto* cmd = app.add_subcommand("agent", "Collect a node's metrics for jobs started elsewhere");
  cmd->add_option("--out,-o", opts->out,
                  "Run directory, shared by the nodes of a job "
                  "(default ./trainprof-runs/<UTC time>-<name>)");
  cmd->add_option("--node", opts->node, "This node's name in the run (default: host name)");
  cmd->add_option("--name", opts->name, "Run name, when this agent creates run.json");
  cmd->add_option("--pid", opts->pids, "Watch this process and its descendants (repeatable)");
  cmd->add_option("--cgroup", opts->cgroup, "Watch this cgroup v2 directory");
  cmd->add_option("--interval", opts->interval, kIntervalHelp);
  cmd->add_option("--instance-type", opts->instance_type, "Instance type, stored for cost");
  cmd->add_option("--tag", opts->tags, "key=value stored in run.json (repeatable)")
      ->allow_extra_args(false);
  cmd->add_flag("--no-gpu", opts->no_gpu, "Do not collect GPU metrics");
  cmd->add_option("--prometheus", opts->prometheus, kPrometheusHelp);
  cmd->add_flag("--prometheus-allow-remote", opts->prometheus_allow_remote,
                "Allow --prometheus on a non-loopback address");
  cmd->add_option("--prometheus-names", opts->prometheus_names, kPrometheusNamesHelp);
  cmd->add_option("--duration", opts->duration_s, "Stop after this many seconds");
  auto rules_config = std::make_shared<std::string>();
  auto live_every_s = std::make_shared<double>(0.0);
  cmd->add_option(
      "--rules-config", *rules_config,
      "Rule configuration (JSON, as `trainprof rules --config`) for --live-rules-every");
  cmd->add_option("--live-rules-every", *live_every_s,
                  "Evaluate the rules over the whole run directory every this many seconds and "
                  "once more when the agent stops (default 0: off; enable it on one node)")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->callback([opts, action, rules_config, live_every_s] {
    action->run = [opts, rules_config, live_every_s]() -> Status {
      if (*live_every_s > 0) {
        analyze::rules::RuleConfig config;
        if (!rules_config->empty()) {
          TP_ASSIGN_OR_RETURN(config, analyze::rules::LoadRuleConfig(*rules_config));
        }
        auto live = std::make_shared<LiveRules>(config);
        opts->live_period_ns = static_cast<int64_t>(*live_every_s * 1e9);
        opts->live_poll = [live](const agent::RecordOptions::LiveContext& ctx) { live->Poll(ctx); };
        opts->on_finished = [live](const std::string& run_dir, std::ostream& out) {
          FinishRecordedRun(run_dir, out, live.get());
        };
      } else if (!rules_config->empty()) {
        return InvalidArgument("--rules-config needs --live-rules-every on the agent");
      }
      // --out s3://...: record locally, upload as it goes; the nodes of a job share the
      // run (the first one's run.json is kept: _fleet_sync.py, TRAINPROF_SHARED_RUN).
      std::shared_ptr<RunUpload> upload;
      if (IsObjectStoreUrl(opts->out)) {
        setenv("TRAINPROF_SHARED_RUN", "1", 1);
        TP_ASSIGN_OR_RETURN(upload, StartRunUpload(opts->out));
        if (Status st = FetchSharedRunJson(opts->out, upload->local); !st.ok()) {
          std::cerr << "trainprof: warning: " << st.message() << " (recording into "
                    << upload->local << ")\n";
        }
        opts->out = upload->local;
      }
      Status status = agent::RunAgent(*opts, std::cerr);
      if (upload) FinishRunUpload(*upload, std::cerr);
      return status;
    };
  });
}

void AddMarkCommand(CLI::App& app, CommandAction* action) {
  auto opts = std::make_shared<agent::MarkOptions>();
  auto* cmd =
      app.add_subcommand("mark", "Mark a phase (download_start, upload_end...) in a running job");
  cmd->add_option("name", opts->name, "Mark name; NAME_start/NAME_end pairs make phase NAME")
      ->required();
  cmd->add_option("--run", opts->run,
                  "Run directory of the running recorder (default: $TRAINPROF_RUN_DIR, then "
                  "the newest live run in ./trainprof-runs)");
  cmd->add_option("--node", opts->node, "Node whose recorder to tell (multi-node runs)");
  cmd->add_option("--socket", opts->socket, "The recorder's control socket");
  cmd->callback(
      [opts, action] { action->run = [opts] { return agent::RunMark(*opts, std::cout); }; });
}

}  // namespace trainprof::cli
