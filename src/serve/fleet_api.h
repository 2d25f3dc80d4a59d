#pragma once
// GET /api/fleet: the fleet view (`trainprof fleet ROOTS... --json`, docs/fleet.md) of the
// directories the dashboard serves, computed by the same code as the command (the Python fleet
// view, started as a child process) and cached while no directory under the roots changed
// (their mtimes, 3 levels deep, as `fleet` searches them).

#include <string>
#include <vector>

namespace httplib {
class Server;
}

namespace trainprof::serve {

// `command`: the fleet view's argv before the runs (`python -m trainprof.fleet fleet`); the
// route answers 503 when it is empty (no Python fleet view installed).
void AddFleetRoute(httplib::Server& http, std::vector<std::string> roots,
                   std::vector<std::string> command);

// What the cache is keyed on: every directory's mtime under `roots` (3 levels), bounded.
std::string FleetFingerprint(const std::vector<std::string>& roots);

}  // namespace trainprof::serve
