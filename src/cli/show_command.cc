#include <map>
#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include "base/time.h"

#include "base/json_dump.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "store/run_reader.h"

namespace trainprof::cli {
namespace {

using nlohmann::json;

template <typename T>
json Opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

}  // namespace

Status RunShow(const ShowOptions& options, std::ostream& out) {
  TP_ASSIGN_OR_RETURN(auto reader, store::RunReader::Open(options.run));
  const model::RunMetadata& m = reader->metadata();
  TP_ASSIGN_OR_RETURN(auto series, reader->ListSeries());
  TP_ASSIGN_OR_RETURN(auto events, reader->Events({}));
  TP_ASSIGN_OR_RETURN(auto findings, reader->Findings());
  TP_ASSIGN_OR_RETURN(auto counters, reader->Counters());
  TP_ASSIGN_OR_RETURN(auto latest, reader->LatestTimestampNs());
  std::map<std::string, int64_t> by_category;
  for (size_t i = 0; i < events.size(); ++i)
    ++by_category[events.categories.at(events.category[i])];
  int64_t total_values = 0;
  for (const auto& s : series) total_values += s.series.count;

  if (options.json) {
    json j;
    j["dir"] = reader->dir();
    j["run_id"] = m.run_id;
    j["name"] = m.name;
    j["command"] = m.command;
    j["start_ns"] = m.start_ns;
    j["end_ns"] = Opt(m.end_ns);
    j["exit_status"] = Opt(m.exit_status);
    j["source"] = m.source;
    j["instance_type"] = m.instance_type;
    j["tags"] = m.tags;
    j["trainprof_version"] = m.trainprof_version;
    j["format_version"] = m.format_version;
    j["latest_timestamp_ns"] = Opt(latest);
    json nodes = json::array();
    for (const model::NodeInfo* n : reader->node_infos()) {
      json nj = json::parse(model::NodeInfoToJson(*n));
      nodes.push_back(nj);
    }
    j["nodes"] = nodes;
    json sj = json::array();
    for (const auto& s : series) {
      sj.push_back({{"node", s.node},
                    {"metric", s.series.metric},
                    {"device", s.series.device},
                    {"count", s.series.count},
                    {"first_ns", s.series.first_ns},
                    {"last_ns", s.series.last_ns}});
    }
    j["series"] = sj;
    j["metric_values"] = total_values;
    j["events"] = events.size();
    j["events_by_category"] = by_category;
    j["findings"] = findings.size();
    j["data_quality"] = counters;
    j["problems"] = reader->problems();
    out << DumpJson(j, 2) << "\n";
    return OkStatus();
  }

  out << "run        " << reader->dir() << "\n";
  out << "id         " << m.run_id << (m.name.empty() ? "" : "  (" + m.name + ")") << "\n";
  if (!m.command.empty()) {
    std::string cmd;
    for (const auto& a : m.command) cmd += (cmd.empty() ? "" : " ") + a;
    out << "command    " << cmd << "\n";
  }
  out << "start      " << (m.start_ns ? FormatIso8601(m.start_ns) : "n/a") << "\n";
  if (m.end_ns) {
    out << "end        " << FormatIso8601(*m.end_ns) << "  ("
        << FormatDuration(*m.end_ns - m.start_ns) << ")\n";
  } else {
    out << "end        n/a (still running, or ended without closing the run)"
        << (latest ? "; data up to " + FormatIso8601(*latest) : "") << "\n";
  }
  out << "exit       " << (m.exit_status ? std::to_string(*m.exit_status) : "n/a") << "\n";
  if (!m.source.empty()) out << "source     " << m.source << "\n";
  if (!m.instance_type.empty()) out << "instance   " << m.instance_type << "\n";
  for (const auto& [k, v] : m.tags) out << "tag        " << k << "=" << v << "\n";
  out << "\nnodes\n";
  std::vector<std::vector<std::string>> rows = {
      {"  NODE", "HOST", "CPU", "CORES", "MEMORY", "GPUS"}};
  for (const model::NodeInfo* n : reader->node_infos()) {
    std::string gpus = std::to_string(n->gpus.size());
    if (!n->gpus.empty()) gpus += " x " + n->gpus[0].name;
    rows.push_back(
        {"  " + n->node, n->hostname, n->cpu_model.empty() ? "n/a" : n->cpu_model,
         n->cpu_cores ? std::to_string(*n->cpu_cores) : "n/a",
         n->memory_total_bytes ? FormatBytes(static_cast<double>(*n->memory_total_bytes)) : "n/a",
         gpus});
  }
  PrintTable(out, rows);
  out << "\nsystem metrics: " << series.size() << " series, "
      << FormatCount(static_cast<double>(total_values)) << " values\n";
  std::map<std::pair<std::string, std::string>, std::pair<int, int64_t>> by_metric;
  for (const auto& s : series) {
    auto& e = by_metric[{s.node, s.series.metric}];
    ++e.first;
    e.second += s.series.count;
  }
  rows = {{"  NODE", "METRIC", "DEVICES", "VALUES"}};
  for (const auto& [key, e] : by_metric) {
    rows.push_back(
        {"  " + key.first, key.second, std::to_string(e.first), std::to_string(e.second)});
  }
  if (!by_metric.empty()) PrintTable(out, rows);
  out << "\nframework events: " << events.size() << "\n";
  for (const auto& [cat, n] : by_category) {
    out << "  " << (cat.empty() ? "(none)" : cat) << ": " << n << "\n";
  }
  out << "\nfindings: " << findings.size() << "\n";
  out << "\ndata quality\n";
  if (counters.empty()) out << "  nothing dropped or skipped\n";
  for (const auto& [name, value] : counters) out << "  " << name << ": " << value << "\n";
  if (!reader->problems().empty()) {
    out << "\nproblems\n";
    for (const auto& p : reader->problems()) out << "  " << p << "\n";
  }
  return OkStatus();
}

void AddShowCommand(CLI::App& app, CommandAction* action) {
  auto opts = std::make_shared<ShowOptions>();
  auto* cmd = app.add_subcommand("show", "Show a run's metadata and what its store holds");
  cmd->add_option("run", opts->run, "Run directory")->required();
  cmd->add_flag("--json", opts->json, "Print JSON");
  cmd->callback([opts, action] { action->run = [opts] { return RunShow(*opts, std::cout); }; });
}

}  // namespace trainprof::cli
