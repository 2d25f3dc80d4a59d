#pragma once
// What to evaluate and what to do when a rule fires, from a JSON file and command-line
// overrides:
//
//   {"rules": {
//      "ProfilerReport": {},
//      "LowGPUUtilization": {"parameters": {"threshold_p95": 60},
//                            "actions": [{"type": "stop", "grace_s": 30}]},
//      "StepOutlier": {"actions": [{"type": "webhook", "url": "http://127.0.0.1:9000/hook"},
//                                  {"type": "command", "command": ["sh", "-c", "cat >> f"]}]}}}
//
// Listing rules selects them; "ProfilerReport" selects all built-in rules. No "rules" key
// (or no file) selects ProfilerReport. Actions default to "log".

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace trainprof::analyze::rules {

struct ActionConfig {
  enum class Type { kLog, kStop, kCommand, kWebhook };
  Type type = Type::kLog;
  std::vector<std::string> command;     // kCommand: argv, run without a shell
  std::string url;                      // kWebhook: http://host:port/path
  int64_t grace_ns = 30'000'000'000;    // kStop: SIGTERM, then SIGKILL after this
  int64_t timeout_ns = 10'000'000'000;  // kCommand / kWebhook: give up after this
};
const char* ActionTypeName(ActionConfig::Type type);

struct RuleConfig {
  std::vector<std::string> rules;                    // as selected; empty: ProfilerReport
  std::map<std::string, nlohmann::json> parameters;  // rule -> {param: value}
  std::map<std::string, std::vector<ActionConfig>> actions;
  // Set when every rule the configuration listed was a custom one (TakeCustomRules): no
  // built-in rule is evaluated then, instead of ProfilerReport.
  bool no_builtin = false;
};

// The entries of a configuration that name no built-in rule: custom (Python) rules, known only
// once their files are loaded by the runner, which checks the names.
struct CustomRuleEntries {
  std::vector<std::string> names;
  std::vector<std::string> overrides;  // "NAME.param=value" for the runner
  std::map<std::string, std::vector<ActionConfig>> actions;
};
// Moves those entries out of `config` (its rules, parameters and actions).
CustomRuleEntries TakeCustomRules(RuleConfig* config);

// `origin` names the file in error messages.
StatusOr<RuleConfig> ParseRuleConfig(const std::string& json_text, const std::string& origin);
StatusOr<RuleConfig> LoadRuleConfig(const std::string& path);
// Applies "NAME.param=value" (value: a number, else text). Checked against the registry
// when the engine is created.
Status ApplyParamOverride(const std::string& text, RuleConfig* config);

}  // namespace trainprof::analyze::rules
