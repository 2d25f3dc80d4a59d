#pragma once
// `trainprof mark NAME`: tells a running recorder (record or agent) that something happened
// now, through its control channel (control_channel.h). NAME_start / NAME_end pairs become
// phases (download, upload, checkpoint...).
//
// Which recorder: --socket PATH; else --run DIR (its nodes' control sockets, --node to pick
// one); else $TRAINPROF_SOCKET, then $TRAINPROF_RUN_DIR (set for commands run by `record`);
// else the newest run under ./trainprof-runs whose recorder answers.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"

namespace trainprof::agent {

struct MarkOptions {
  std::string name;
  std::string run;
  std::string node;
  std::string socket;
  std::string runs_root = "trainprof-runs";
  std::optional<int64_t> ts_ns;  // default: now
};

// The control sockets of `run_dir` (all nodes, or `node`), existing files only.
std::vector<std::string> ControlSocketsOfRun(const std::string& run_dir, const std::string& node);

Status RunMark(const MarkOptions& options, std::ostream& out);

}  // namespace trainprof::agent
