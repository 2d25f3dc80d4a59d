#pragma once
// Run directories on object storage for the native commands (docs/fleet.md, issue 21).
//
// A RUN argument with a scheme (`s3://bucket/prefix/run`, any fsspec URL) of the commands that
// read runs (show, cost, rules, analyze, report, export, serve, ls) names a local path in a private
// temporary directory (mkdtemp, 0700) while the command line is parsed; before the command
// runs, `python -m trainprof.fleet fetch URL PATH` copies the run there. What the command adds
// to the copy or changes (report.html, stored findings) is uploaded back after it succeeds
// (`python -m trainprof.fleet push`; `serve` and `ls` read a snapshot and write nothing back). An
// output URL (`report --out s3://...`, `export ... --out s3://...`, `import ... --out
// s3://...`) is written locally and uploaded when the command succeeds. The temporary
// directories are removed when the command ends, whatever happened; while a URL is in use the
// command's stdout and stderr name the URL, not the temporary copy.
//
// Errors (unreachable store, access denied, no such bucket, no run at that prefix) name the URL
// and make the command exit 1 before it runs (or, for an upload, after it ran).

#include <string>

#include "base/status.h"

namespace CLI {
class App;
}

namespace trainprof::cli {

// Adds the URL handling to the RUN and --out options of the commands above (cli.cc, once,
// after every command was added).
void AcceptObjectStoreUrls(CLI::App& app);

// `agent --out URL`: copies the run.json another node of the job already uploaded (if any)
// into `local_dir`, so that every node's agent records into the same run (its run_id, name,
// tags). An error is for the caller to warn about: the agent records anyway.
Status FetchSharedRunJson(const std::string& url, const std::string& local_dir);

// One per command line (cli.cc's Main): fetches before the command, uploads after it, removes
// the temporary copies in its destructor.
class RemoteRuns {
 public:
  RemoteRuns();
  ~RemoteRuns();
  RemoteRuns(const RemoteRuns&) = delete;
  RemoteRuns& operator=(const RemoteRuns&) = delete;

  // Copies every remote run named on the command line; an error names the URL.
  Status Fetch();
  // After the command succeeded: uploads its outputs and what it changed in a remote run.
  Status Push();
};

}  // namespace trainprof::cli
