#include "analyze/rules/config.h"

#include <algorithm>
#include <cmath>

#include "analyze/rules/registry.h"
#include "base/files.h"
#include "base/json_dump.h"

namespace trainprof::analyze::rules {

const char* ActionTypeName(ActionConfig::Type type) {
  switch (type) {
    case ActionConfig::Type::kLog:
      return "log";
    case ActionConfig::Type::kStop:
      return "stop";
    case ActionConfig::Type::kCommand:
      return "command";
    case ActionConfig::Type::kWebhook:
      return "webhook";
  }
  return "log";
}

namespace {

StatusOr<ActionConfig> ParseAction(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return InvalidArgument(where + ": an action is an object with a \"type\"");
  }
  ActionConfig a;
  const std::string type = j["type"].get<std::string>();
  auto seconds = [&](const char* key, int64_t* out) -> Status {
    if (!j.contains(key)) return OkStatus();
    if (!j[key].is_number() || !(j[key].get<double>() >= 0 && j[key].get<double>() <= 1e9)) {
      return InvalidArgument(where + ": \"" + key + "\" must be a number of seconds, 0 to 1e9");
    }
    *out = static_cast<int64_t>(std::llround(j[key].get<double>() * 1e9));
    return OkStatus();
  };
  TP_RETURN_IF_ERROR(seconds("timeout_s", &a.timeout_ns));
  if (type == "log") {
    a.type = ActionConfig::Type::kLog;
  } else if (type == "stop") {
    a.type = ActionConfig::Type::kStop;
    TP_RETURN_IF_ERROR(seconds("grace_s", &a.grace_ns));
  } else if (type == "command") {
    a.type = ActionConfig::Type::kCommand;
    const nlohmann::json c = j.contains("command") ? j["command"] : nlohmann::json();
    if (c.is_string()) {
      a.command = {"/bin/sh", "-c", c.get<std::string>()};
    } else if (c.is_array() && !c.empty()) {
      for (const auto& arg : c) {
        if (!arg.is_string()) return InvalidArgument(where + ": command arguments are text");
        a.command.push_back(arg.get<std::string>());
      }
    } else {
      return InvalidArgument(where + ": a command action needs \"command\" (text or argv list)");
    }
  } else if (type == "webhook") {
    a.type = ActionConfig::Type::kWebhook;
    if (j.contains("url") && j["url"].is_string()) a.url = j["url"].get<std::string>();
    if (a.url.rfind("http://", 0) != 0) {
      return InvalidArgument(where + ": a webhook action needs an http:// \"url\"");
    }
  } else {
    return InvalidArgument(where + ": unknown action type '" + type +
                           "' (log, stop, command, webhook)");
  }
  return a;
}

}  // namespace

StatusOr<RuleConfig> ParseRuleConfig(const std::string& json_text, const std::string& origin) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument(origin + ": not a JSON object");
  }
  RuleConfig config;
  if (!j.contains("rules")) return config;
  const auto& rules = j["rules"];
  if (!rules.is_object()) return InvalidArgument(origin + ": \"rules\" must be an object");
  for (const auto& [name, entry] : rules.items()) {
    const std::string where = origin + ": rules." + name;
    if (!entry.is_object()) return InvalidArgument(where + " must be an object");
    config.rules.push_back(name);
    for (const auto& [key, value] : entry.items()) {
      if (key == "parameters") {
        if (!value.is_object()) return InvalidArgument(where + ".parameters must be an object");
        config.parameters[name] = value;
      } else if (key == "actions") {
        if (!value.is_array()) return InvalidArgument(where + ".actions must be a list");
        for (size_t i = 0; i < value.size(); ++i) {
          TP_ASSIGN_OR_RETURN(ActionConfig a,
                              ParseAction(value[i], where + ".actions[" + std::to_string(i) + "]"));
          config.actions[name].push_back(std::move(a));
        }
      } else {
        return InvalidArgument(where + ": unknown key '" + key + "' (parameters, actions)");
      }
    }
  }
  return config;
}

StatusOr<RuleConfig> LoadRuleConfig(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return InvalidArgument("cannot read rule config: " + text.status().message());
  return ParseRuleConfig(*text, path);
}

Status ApplyParamOverride(const std::string& text, RuleConfig* config) {
  const size_t dot = text.find('.');
  const size_t eq = text.find('=');
  if (dot == std::string::npos || eq == std::string::npos || dot == 0 || eq < dot + 2) {
    return InvalidArgument("--rule expects NAME.param=value, got '" + text + "'");
  }
  const std::string rule = text.substr(0, dot);
  const std::string param = text.substr(dot + 1, eq - dot - 1);
  const std::string value = text.substr(eq + 1);
  nlohmann::json v = nlohmann::json::parse(value, nullptr, false);
  if (v.is_discarded() || !(v.is_number() || v.is_null())) v = value;
  config->parameters[rule][param] = v;
  return OkStatus();
}

namespace {

// Moves the entries of `map` that name custom rules into `take(name, value)`.
template <typename Map, typename Take>
void TakeCustom(Map& map, std::vector<std::string>* names, const Take& take) {
  for (auto it = map.begin(); it != map.end();) {
    if (RuleRegistry::Global().Find(it->first).ok()) {
      ++it;
      continue;
    }
    if (std::find(names->begin(), names->end(), it->first) == names->end()) {
      names->push_back(it->first);
    }
    take(it->first, it->second);
    it = map.erase(it);
  }
}

}  // namespace

CustomRuleEntries TakeCustomRules(RuleConfig* config) {
  CustomRuleEntries out;
  const bool listed = !config->rules.empty();
  std::vector<std::string> builtin;
  for (const std::string& name : config->rules) {
    (RuleRegistry::Global().Find(name).ok() ? builtin : out.names).push_back(name);
  }
  config->rules = builtin;
  if (listed && builtin.empty()) config->no_builtin = true;
  TakeCustom(
      config->parameters, &out.names, [&](const std::string& rule, const nlohmann::json& params) {
        if (!params.is_object()) return;
        for (const auto& [param, value] : params.items()) {
          out.overrides.push_back(rule + "." + param + "=" +
                                  (value.is_string() ? value.get<std::string>() : DumpJson(value)));
        }
      });
  TakeCustom(config->actions, &out.names,
             [&](const std::string& rule, std::vector<ActionConfig>& actions) {
               out.actions[rule] = std::move(actions);
             });
  return out;
}

}  // namespace trainprof::analyze::rules
