// `trainprof serve [RUNS_DIR...] [--addr HOST:PORT] [--token T]`: the live dashboard over the
// runs under the given directories (default ./trainprof-runs), until interrupted.

#include <signal.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "base/files.h"
#include "base/platform.h"
#include "cli/command.h"
#include "cli/report_providers.h"
#include "serve/server.h"

namespace trainprof::cli {
namespace {

struct ServeCmdOptions {
  std::vector<std::string> roots;
  std::string address = serve::kDefaultAddress;
  std::string token;
  bool addr_given = false;
};

Status RunServe(const ServeCmdOptions& o, std::ostream& out) {
  serve::ServeOptions so;
  so.roots = o.roots.empty() ? std::vector<std::string>{"trainprof-runs"} : o.roots;
  for (const std::string& r : so.roots) {
    if (!IsDirectory(r)) return NotFound(r + ": no such directory");
  }
  so.address = o.address;
  so.token = o.token;
  so.fleet_command = FleetViewCommand("fleet");  // GET /api/fleet (serve/fleet_api.h)
  UseAnalyses(&so.build);
  // Wait for SIGINT / SIGTERM synchronously: block them before the server's threads start.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // The charts read millions of samples a request in slices (serve/api.cc): keep the
  // slices' memory for the next one instead of faulting in fresh pages each time (a 24-hour
  // run's nodes page: a quarter of the server's CPU).
  platform::KeepFreedMemoryForReuse();
  TP_ASSIGN_OR_RETURN(auto server, serve::Server::Start(so));
  out << "trainprof serve: " << server->url() << "  (runs under";
  for (const std::string& r : so.roots) out << " " << r;
  out << "; Ctrl-C stops)\n";
  if (!server->token().empty() && o.token.empty()) {
    out << "a token is required on this address; it is in the URL above\n";
  }
  out.flush();
  int sig = 0;
  sigwait(&stop_signals, &sig);
  server->Stop();
  out << "trainprof serve: stopped\n";
  return OkStatus();
}

}  // namespace

void AddServeCommand(CLI::App& app, CommandAction* action) {
  auto opts = std::make_shared<ServeCmdOptions>();
  auto* cmd = app.add_subcommand(
      "serve", "Serve the live dashboard over run directories (read-only, loopback by default)");
  cmd->add_option("runs", opts->roots,
                  "Run directories, or directories holding runs (default ./trainprof-runs)");
  cmd->add_option("--addr", opts->address,
                  "HOST:PORT to listen on (default 127.0.0.1:8787; another host needs a token)");
  cmd->add_option(
      "--token", opts->token,
      "Token every request must carry (default: none on loopback, generated otherwise)");
  cmd->callback([opts, action] { action->run = [opts] { return RunServe(*opts, std::cout); }; });
}

}  // namespace trainprof::cli
