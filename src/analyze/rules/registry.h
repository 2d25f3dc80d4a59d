#pragma once
// The rule registry: every rule the engine can run, by name. Built-in rules are registered
// on first use of Global(); code outside this library (the Python layer's custom rules, a
// plugin) adds its own with Register() before creating an engine.
// "ProfilerReport" is registered as a spec without a factory: selecting it selects every
// built-in rule, as SageMaker's ProfilerReport ran them all.
//
// Threads: Register/Find/Create may be called from any thread (a mutex guards the table).

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "analyze/rules/rule.h"
#include "base/status.h"

namespace trainprof::analyze::rules {

inline constexpr const char* kProfilerReport = "ProfilerReport";

class RuleRegistry {
 public:
  // The process-wide registry, holding the built-in rules.
  static RuleRegistry& Global();

  // Adds a rule. Names are unique; a name already taken is an error.
  Status Register(RuleSpec spec, RuleFactory factory, bool builtin = false);
  // Copies of the specs, in registration order (built-ins first).
  std::vector<RuleSpec> Specs() const;
  StatusOr<RuleSpec> Find(const std::string& name) const;
  // The names ProfilerReport stands for: every built-in rule.
  std::vector<std::string> BuiltinNames() const;
  // A fresh evaluator with `overrides` merged into the defaults.
  StatusOr<std::unique_ptr<Rule>> Create(const std::string& name,
                                         const nlohmann::json& overrides) const;

 private:
  struct Entry {
    RuleSpec spec;
    RuleFactory factory;
    bool builtin = false;
  };
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
};

// Registers the built-in rules (SageMaker's and ours) into `registry`.
void RegisterBuiltinRules(RuleRegistry& registry);

}  // namespace trainprof::analyze::rules
