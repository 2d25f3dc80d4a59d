#include "analyze/rules/rule.h"
#include "base/json_dump.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace trainprof::analyze::rules {

double Params::Number(const std::string& name) const {
  auto it = values_.find(name);
  TP_CHECK(it != values_.end() && it->is_number());
  return it->get<double>();
}

namespace {

// Parameters are finite and >= 0 (ResolveParams); a huge one means "never", and is held below
// the int64 limit rather than cast past it.
int64_t SaturatingRound(double v) {
  constexpr double kMax = 9.0e18;
  return v >= kMax ? static_cast<int64_t>(kMax) : static_cast<int64_t>(std::llround(v));
}

}  // namespace

int64_t Params::Integer(const std::string& name) const { return SaturatingRound(Number(name)); }

int64_t Params::Nanoseconds(const std::string& name) const {
  return SaturatingRound(Number(name) * 1e9);
}

std::string Params::Text(const std::string& name) const {
  auto it = values_.find(name);
  TP_CHECK(it != values_.end());
  return it->is_string() ? it->get<std::string>() : std::string();
}

StatusOr<Params> ResolveParams(const RuleSpec& spec, const nlohmann::json& overrides) {
  nlohmann::json values = nlohmann::json::object();
  for (const ParamSpec& p : spec.params) values[p.name] = p.default_value;
  if (overrides.is_null()) return Params(std::move(values));
  if (!overrides.is_object()) {
    return InvalidArgument("parameters of rule " + spec.name + " must be a JSON object");
  }
  for (const auto& [key, value] : overrides.items()) {
    const ParamSpec* found = nullptr;
    for (const ParamSpec& p : spec.params) {
      if (p.name == key) found = &p;
    }
    if (found == nullptr) {
      std::string known;
      for (const ParamSpec& p : spec.params) known += (known.empty() ? "" : ", ") + p.name;
      return InvalidArgument("rule " + spec.name + " has no parameter '" + key +
                             "' (parameters: " + (known.empty() ? "none" : known) + ")");
    }
    const bool numeric = found->default_value.is_number();
    if (numeric && !value.is_number()) {
      return InvalidArgument("parameter " + spec.name + "." + key + " must be a number, got " +
                             DumpJson(value));
    }
    if (!numeric && !value.is_string() && !value.is_null()) {
      return InvalidArgument("parameter " + spec.name + "." + key + " must be text, got " +
                             DumpJson(value));
    }
    if (numeric && (!std::isfinite(value.get<double>()) || value.get<double>() < 0)) {
      return InvalidArgument("parameter " + spec.name + "." + key +
                             " must be a finite number >= 0, got " + DumpJson(value));
    }
    values[key] = value;
  }
  return Params(std::move(values));
}

Rule::Rule(const RuleSpec& spec, Params params) : params_(std::move(params)) {
  result_.name = spec.name;
  result_.parameters = params_.json();
}

void Rule::Emit(model::Finding finding) {
  finding.rule = result_.name;
  result_.triggered = true;
  result_.findings.push_back(std::move(finding));
}

void Rule::SortFindingsFrom(size_t from) {
  if (from + 1 >= result_.findings.size()) return;
  std::stable_sort(result_.findings.begin() + static_cast<ptrdiff_t>(from), result_.findings.end(),
                   [](const model::Finding& a, const model::Finding& b) {
                     return std::tie(a.node, a.device, a.start_ns, a.end_ns, a.message) <
                            std::tie(b.node, b.device, b.start_ns, b.end_ns, b.message);
                   });
}

}  // namespace trainprof::analyze::rules
