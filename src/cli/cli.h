#pragma once
// Command-line entry: parses argv, dispatches to one <name>_command, prints "error: ..." and
// maps the outcome to the exit code (0 ok, 1 failure, 2 usage).

#include <string>
#include <vector>

namespace trainprof::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

int Main(int argc, char** argv);
int Main(const std::vector<std::string>& args);

}  // namespace trainprof::cli
