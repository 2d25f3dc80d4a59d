// `trainprof detail RUN --steps N`: asks a running job for detailed profiling of its next N
// training steps. The request is a file in the run directory (detail-request.json, written
// atomically) that every instrumented process of the job looks at when a training step ends,
// at most every 0.5 s (python/trainprof/_detail.py, RequestWatcher): no signal reaches the
// training process, and it works for every process and node sharing the run directory. Each
// process that takes the request annotates detail.request.<id> with the steps it chose and,
// when they are done, detail.steps.<lo>-<hi> (operators) or detail.python.<lo>-<hi> (cProfile);
// --wait reads those back.
#include <time.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <set>
#include <string>

#include "base/files.h"
#include "base/json_dump.h"
#include "base/time.h"
#include "cli/command.h"
#include "store/run_directory.h"
#include "store/run_reader.h"

namespace trainprof::cli {
namespace {

struct DetailOptions {
  std::string run;
  int64_t steps = 5;
  bool python = false;
  double wait_s = 0;
};

constexpr const char* kRequestFile = "detail-request.json";

void Sleep200Ms() {
  timespec ts{0, 200'000'000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

struct Ack {
  std::string steps;  // "lo-hi"
  int64_t pid = 0;
  std::string profiler;
};

// The processes that took request `id`, and which of them have stored their profile.
Status ReadProgress(const std::string& run, const std::string& id, bool python,
                    std::vector<Ack>* acks, std::set<std::string>* done) {
  TP_ASSIGN_OR_RETURN(auto reader, store::RunReader::Open(run));
  TP_ASSIGN_OR_RETURN(auto annotations, reader->Annotations());
  acks->clear();
  done->clear();
  const std::string ack_key = "detail.request." + id;
  const std::string done_prefix = python ? "detail.python." : "detail.steps.";
  for (const auto& [node, a] : annotations) {
    if (a.key == ack_key) {
      const nlohmann::json j = nlohmann::json::parse(a.value, nullptr, false);
      if (!j.is_object()) continue;
      Ack ack;
      ack.steps = j.value("steps", "");
      ack.pid = j.value("pid", int64_t{0});
      ack.profiler = j.value("profiler", "");
      acks->push_back(ack);
    } else if (a.key.rfind(done_prefix, 0) == 0) {
      done->insert(a.key.substr(done_prefix.size()));
      // A range the job's end closed early is stored under the steps it reached; its
      // "request" names the request it served.
      const nlohmann::json j = nlohmann::json::parse(a.value, nullptr, false);
      if (j.is_object() && j.value("request", "") == id) {
        done->insert("pid:" + std::to_string(j.value("pid", int64_t{0})));
      }
    }
  }
  return OkStatus();
}

Status RunDetail(const DetailOptions& o, std::ostream& out) {
  if (!store::IsRunDirectory(o.run)) {
    return NotFound(o.run + ": not a run directory (no run.json)");
  }
  if (o.steps <= 0) return InvalidArgument("--steps must be at least 1");
  auto meta = store::ReadRunMetadata(o.run);
  if (meta.ok() && meta->exit_status.has_value()) {
    return FailedPrecondition(o.run + ": the job has ended (exit status " +
                              std::to_string(*meta->exit_status) +
                              "); use --detail-steps when recording it again");
  }
  const int64_t now = WallNowNs();
  const std::string id = std::to_string(now);
  const nlohmann::json request = {
      {"id", id}, {"steps", o.steps}, {"python", o.python}, {"created_ns", now}};
  const std::string path = JoinPath(o.run, kRequestFile);
  TP_RETURN_IF_ERROR(WriteFileAtomically(path, DumpJson(request, 2) + "\n"));
  out << "requested " << (o.python ? "Python function profiling (cProfile)" : "operator profiling")
      << " of the next " << o.steps << " training step" << (o.steps == 1 ? "" : "s") << " in "
      << o.run << " (request " << id
      << "); the job's processes take it at their next training step end\n";
  if (o.wait_s <= 0) return OkStatus();

  const int64_t deadline = MonotonicNowNs() + static_cast<int64_t>(o.wait_s * 1e9);
  std::vector<Ack> acks;
  std::set<std::string> done;
  size_t reported = 0;
  while (true) {
    Status s = ReadProgress(o.run, id, o.python, &acks, &done);
    if (s.ok()) {
      for (; reported < acks.size(); ++reported) {
        out << "process " << acks[reported].pid << " profiles steps " << acks[reported].steps
            << " (" << acks[reported].profiler << ")\n";
      }
      size_t finished = 0;
      for (const Ack& a : acks) {
        finished += done.count(a.steps) > 0 || done.count("pid:" + std::to_string(a.pid)) > 0;
      }
      if (!acks.empty() && finished == acks.size()) {
        out << "done: " << finished << " process" << (finished == 1 ? "" : "es")
            << " stored their profile; see `trainprof analyze " << o.run << "` or export it\n";
        return OkStatus();
      }
    }
    if (MonotonicNowNs() > deadline) {
      if (acks.empty()) {
        return Unavailable(
            "no process took the request within " +
            FormatDuration(static_cast<int64_t>(o.wait_s * 1e9)) +
            " (is the job running and stepping? requests are seen when a training step ends)");
      }
      return Unavailable(std::to_string(acks.size()) + " process(es) took the request but not " +
                         "all stored their profile within the wait; they will when the steps end");
    }
    Sleep200Ms();
  }
}

}  // namespace

void AddDetailCommand(CLI::App& app, CommandAction* action) {
  auto opts = std::make_shared<DetailOptions>();
  auto* cmd = app.add_subcommand(
      "detail", "Ask a running job for detailed profiling of its next training steps");
  cmd->add_option("run", opts->run, "Run directory of the running job")->required();
  cmd->add_option("--steps", opts->steps, "How many training steps to profile (default 5)");
  cmd->add_flag("--python-profile", opts->python,
                "Profile Python functions (cProfile) instead of operators");
  cmd->add_option("--wait", opts->wait_s,
                  "Wait up to this many seconds for the processes to store the profile")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->callback([opts, action] { action->run = [opts] { return RunDetail(*opts, std::cout); }; });
}

}  // namespace trainprof::cli
