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
  if (!options.detail_time.empty()) out[kEnvDetailTime] = options.detail_time;
  if (!options.python_profile_time.empty()) {
    out[kEnvPythonProfileTime] = options.python_profile_time;
  }
  if (options.health_every >= 0) out[kEnvHealthEvery] = std::to_string(options.health_every);
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

namespace {

// Decimal seconds ("60", "2.5") into nanoseconds; false for anything else.
bool SecondsToNs(std::string_view text, int64_t* ns) {
  if (text.empty() || text.size() > 24) return false;
  int64_t whole = 0, frac = 0, scale = 1'000'000'000;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    whole = whole * 10 + (text[i] - '0');
    if (whole > 9'000'000'000LL) return false;
  }
  if (i == 0) return false;
  if (i < text.size()) {
    if (text[i] != '.' || i + 1 == text.size()) return false;
    for (++i; i < text.size(); ++i) {
      if (text[i] < '0' || text[i] > '9') return false;
      if (scale > 1) {
        scale /= 10;
        frac += (text[i] - '0') * scale;
      }
    }
  }
  *ns = whole * 1'000'000'000 + frac;
  return true;
}

}  // namespace

Status CheckStepRange(const std::string& option, std::string_view spec) {
  const size_t dash = spec.find('-');
  auto number = [](std::string_view t, int64_t* v) {
    if (t.empty() || t.size() > 12) return false;
    *v = 0;
    for (char c : t) {
      if (c < '0' || c > '9') return false;
      *v = *v * 10 + (c - '0');
    }
    return true;
  };
  int64_t lo = 0, hi = 0;
  const bool ok =
      dash == std::string_view::npos
          ? number(spec, &lo)
          : number(spec.substr(0, dash), &lo) && number(spec.substr(dash + 1), &hi) && hi >= lo;
  if (!ok) {
    return InvalidArgument(option + " '" + std::string(spec) +
                           "': expected steps like 10-20 (first-last, from 0) or 7");
  }
  return OkStatus();
}

StatusOr<std::string> ParseTimeWindow(const std::string& option, std::string_view spec,
                                      int64_t origin_ns) {
  const size_t plus = spec.find('+');
  int64_t start_ns = 0, duration_ns = 0;
  if (plus == std::string_view::npos || !SecondsToNs(spec.substr(0, plus), &start_ns) ||
      !SecondsToNs(spec.substr(plus + 1), &duration_ns) || duration_ns <= 0) {
    return InvalidArgument(option + " '" + std::string(spec) +
                           "': expected START+SECONDS, e.g. 60+10 (from 60 s after the start, "
                           "for 10 s) or 1764576000+30 (a Unix time)");
  }
  // A start of 1e9 s or more is a Unix time (2001 onwards), not an offset.
  if (start_ns < 1'000'000'000LL * 1'000'000'000LL) start_ns += origin_ns;
  return std::to_string(start_ns) + "-" + std::to_string(start_ns + duration_ns);
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
