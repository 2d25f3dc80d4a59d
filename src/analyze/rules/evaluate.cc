#include "analyze/rules/evaluate.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "model/event.h"
#include "store/run_directory.h"

namespace trainprof::analyze::rules {

StatusOr<std::unique_ptr<RuleEngine>> EvaluateRun(store::RunReader& reader,
                                                  const RuleConfig& config,
                                                  const EngineOptions& options) {
  // Everything is at hand: hold all data until Finalize, so that feeding the metrics before
  // the steps does not make the steps "late" (the canonical order is then one global sort).
  EngineOptions offline = options;
  offline.release_lag_ns = std::numeric_limits<int64_t>::max() / 4;
  TP_ASSIGN_OR_RETURN(auto engine, RuleEngine::Create(config, reader.metadata(), offline));
  for (const model::NodeInfo* info : reader.node_infos()) engine->SetNodeInfo(*info);
  store::MetricQuery metric_query;
  metric_query.metrics = engine->MetricsRead();
  TP_ASSIGN_OR_RETURN(store::MetricTable metrics, reader.SystemMetrics(metric_query));
  engine->Feed(metrics);
  TP_ASSIGN_OR_RETURN(store::StepTable steps, reader.Steps());
  engine->Feed(steps);
  store::EventQuery query;
  query.categories = {"phase", "collective", "dataloader", "metric", "compile"};
  TP_ASSIGN_OR_RETURN(store::EventTable events, reader.Events(query));
  engine->Feed(events);
  // A step's parts end before the step: the first of them tells the rules that a step began
  // (MaxInitializationTime: a long first step is not a slow start). Only the parts that start
  // before the first step ended are read; after it, the steps say so.
  int64_t first_step_end = store::kMaxTime;
  for (size_t i = 0; i < steps.size(); ++i) {
    first_step_end = std::min(first_step_end, steps.start_ns[i] + steps.duration_ns[i]);
  }
  store::EventQuery parts;
  parts.categories = {model::kCategoryDataWait, model::kCategoryForward, model::kCategoryBackward,
                      model::kCategoryOptimizer};
  parts.end_ns = first_step_end;
  parts.args = false;
  TP_ASSIGN_OR_RETURN(store::EventTable part_events, reader.Events(parts));
  engine->Feed(part_events);
  engine->Finalize();
  return engine;
}

StatusOr<int64_t> StoreFindings(store::RunReader& reader,
                                const std::vector<model::Finding>& findings) {
  if (findings.empty()) return int64_t{0};
  auto key = [](const model::Finding& f) {
    return std::make_tuple(f.rule, f.node, f.device, f.start_ns, f.end_ns, f.message);
  };
  TP_ASSIGN_OR_RETURN(auto existing, reader.Findings());
  std::set<decltype(key(findings[0]))> seen;
  for (const auto& f : existing) seen.insert(key(f));

  std::vector<const model::NodeInfo*> infos = reader.node_infos();
  if (infos.empty()) return FailedPrecondition("run " + reader.dir() + " has no readable node");
  std::map<std::string, std::vector<model::Finding>> by_node;
  for (model::Finding f : findings) {
    if (seen.count(key(f))) continue;
    bool known = false;
    for (const auto* info : infos) known |= info->node == f.node;
    by_node[known ? f.node : infos[0]->node].push_back(std::move(f));
  }
  int64_t written = 0;
  for (auto& [node, list] : by_node) {
    const model::NodeInfo* info = infos[0];
    for (const auto* i : infos) {
      if (i->node == node) info = i;
    }
    TP_ASSIGN_OR_RETURN(auto writer, store::OpenNodeWriter(reader.dir(), *info));
    for (auto& f : list) {
      writer->AddFinding(std::move(f));
      ++written;
    }
    TP_RETURN_IF_ERROR(writer->Close());
  }
  return written;
}

}  // namespace trainprof::analyze::rules
