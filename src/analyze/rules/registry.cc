#include "analyze/rules/registry.h"

namespace trainprof::analyze::rules {

RuleRegistry& RuleRegistry::Global() {
  static RuleRegistry* registry = [] {
    auto* r = new RuleRegistry();
    RegisterBuiltinRules(*r);
    return r;
  }();
  return *registry;
}

Status RuleRegistry::Register(RuleSpec spec, RuleFactory factory, bool builtin) {
  std::lock_guard<std::mutex> lock(mu_);
  if (spec.name.empty()) return InvalidArgument("a rule needs a name");
  for (const Entry& e : entries_) {
    if (e.spec.name == spec.name) return InvalidArgument("rule " + spec.name + " exists already");
  }
  entries_.push_back({std::move(spec), std::move(factory), builtin});
  return OkStatus();
}

std::vector<RuleSpec> RuleRegistry::Specs() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RuleSpec> out;
  for (const Entry& e : entries_) out.push_back(e.spec);
  return out;
}

StatusOr<RuleSpec> RuleRegistry::Find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : entries_) {
    if (e.spec.name == name) return e.spec;
  }
  std::string known;
  for (const Entry& e : entries_) known += (known.empty() ? "" : ", ") + e.spec.name;
  return NotFound("no rule named '" + name + "' (rules: " + known + ")");
}

std::vector<std::string> RuleRegistry::BuiltinNames() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const Entry& e : entries_) {
    if (e.builtin && e.factory) out.push_back(e.spec.name);
  }
  return out;
}

StatusOr<std::unique_ptr<Rule>> RuleRegistry::Create(const std::string& name,
                                                     const nlohmann::json& overrides) const {
  RuleSpec spec;
  RuleFactory factory;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Entry& e : entries_) {
      if (e.spec.name == name) {
        spec = e.spec;
        factory = e.factory;
      }
    }
  }
  if (spec.name.empty()) return Find(name).status();
  if (!factory) return InvalidArgument(name + " is a set of rules, not one rule");
  TP_ASSIGN_OR_RETURN(Params params, ResolveParams(spec, overrides));
  return factory(spec, std::move(params));
}

}  // namespace trainprof::analyze::rules
