#include "agent/mark.h"

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "agent/control_channel.h"
#include "agent/phase_tracker.h"
#include "base/files.h"
#include "base/time.h"
#include "store/run_directory.h"
#include "store/run_reader.h"

namespace trainprof::agent {
namespace {

std::string EnvOr(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace

std::vector<std::string> ControlSocketsOfRun(const std::string& run_dir, const std::string& node) {
  std::vector<std::string> out;
  std::string nodes_dir = JoinPath(run_dir, store::kNodesDirName);
  std::vector<std::string> names;
  if (!node.empty()) {
    names.push_back(store::SanitizeNodeName(node));
  } else if (auto listed = ListDirectory(nodes_dir); listed.ok()) {
    names = *listed;
  }
  for (const std::string& n : names) {
    std::string path = JoinPath(JoinPath(nodes_dir, n), kControlSocketName);
    if (PathExists(path)) out.push_back(path);
  }
  return out;
}

Status RunMark(const MarkOptions& options, std::ostream& out) {
  TP_RETURN_IF_ERROR(ValidateMarkName(options.name));
  std::vector<std::string> candidates;
  std::string where;
  if (!options.socket.empty()) {
    candidates = {options.socket};
    where = options.socket;
  } else if (!options.run.empty()) {
    candidates = ControlSocketsOfRun(options.run, options.node);
    where = options.run;
  } else if (std::string s = EnvOr("TRAINPROF_SOCKET"); !s.empty()) {
    candidates = {s};
    where = "$TRAINPROF_SOCKET";
  } else if (std::string r = EnvOr("TRAINPROF_RUN_DIR"); !r.empty()) {
    candidates = ControlSocketsOfRun(r, options.node);
    where = "$TRAINPROF_RUN_DIR";
  } else if (auto runs = store::ListRuns(options.runs_root); runs.ok()) {
    for (const auto& run : *runs) {  // newest first
      for (auto& path : ControlSocketsOfRun(run.dir, options.node)) candidates.push_back(path);
    }
    where = options.runs_root;
  }
  if (candidates.empty()) {
    return NotFound("mark: no running recorder found in " +
                    (where.empty() ? std::string("./trainprof-runs") : where) +
                    "; pass --run DIR (or run inside `trainprof record`)");
  }
  ControlRequest request;
  request.type = "mark";
  request.name = options.name;
  request.ts_ns = options.ts_ns.value_or(WallNowNs());
  Status last = NotFound("mark: no recorder answered");
  for (const std::string& socket : candidates) {
    StatusOr<std::string> answer = SendControlRequest(socket, request);
    if (!answer.ok()) {
      last = answer.status();
      continue;
    }
    nlohmann::json reply = nlohmann::json::parse(*answer, nullptr, /*allow_exceptions=*/false);
    if (!reply.is_object() || reply.value("ok", false) != true) {
      // The recorder's reason (bad name or time, another user's recorder...), else its answer.
      std::string reason =
          reply.is_object() && reply.contains("error") && reply["error"].is_string()
              ? reply["error"].get<std::string>()
              : *answer;
      return InvalidArgument("mark: the recorder at " + socket + " refused: " + reason);
    }
    out << "marked " << options.name << " at " << FormatIso8601(*request.ts_ns) << " (" << socket
        << ")\n";
    return OkStatus();
  }
  return Unavailable("mark: " + last.message());
}

}  // namespace trainprof::agent
