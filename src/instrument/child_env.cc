#include "instrument/child_env.h"

#include <unistd.h>

#include <sstream>
#include <vector>

extern char** environ;

namespace trainprof::instrument {

std::map<std::string, std::string> ChildEnvironment(
    const ChildEnvOptions& options, const std::map<std::string, std::string>& parent) {
  std::map<std::string, std::string> out;
  auto get = [&](const char* key) -> std::string {
    auto it = parent.find(key);
    return it == parent.end() ? std::string() : it->second;
  };
  out[kEnvRunDir] = options.run_dir;
  if (!options.node.empty()) out[kEnvNode] = options.node;
  out[kEnvAuto] = options.auto_instrument ? "1" : "0";
  out[kEnvRecorderActive] = "record";
  if (!options.detail_steps.empty()) out[kEnvDetailSteps] = options.detail_steps;
  if (!options.python_profile.empty()) out[kEnvPythonProfile] = options.python_profile;
  std::string package = options.python_package_dir;
  if (package.empty()) package = get(kEnvPackageDir);
  if (!package.empty()) {
    out[kEnvPackageDir] = package;
    const std::string hook = package + "/_hook";
    std::vector<std::string> parts{hook};
    std::stringstream existing(get("PYTHONPATH"));
    std::string item;
    while (std::getline(existing, item, ':')) {
      if (!item.empty() && item != hook) parts.push_back(item);
    }
    std::string joined;
    for (size_t i = 0; i < parts.size(); ++i) joined += (i ? ":" : "") + parts[i];
    out["PYTHONPATH"] = joined;
  }
  return out;
}

std::map<std::string, std::string> ChildEnvironmentFromProcess(const ChildEnvOptions& options) {
  std::map<std::string, std::string> parent;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) parent[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return ChildEnvironment(options, parent);
}

}  // namespace trainprof::instrument
