#include "analyze/rules/live.h"

#include <algorithm>

namespace trainprof::analyze::rules {

StatusOr<std::unique_ptr<LiveEvaluator>> LiveEvaluator::Open(const std::string& run_dir,
                                                             const RuleConfig& config,
                                                             const EngineOptions& options) {
  std::unique_ptr<LiveEvaluator> live(new LiveEvaluator());
  TP_ASSIGN_OR_RETURN(live->reader_, store::RunReader::Open(run_dir));
  TP_ASSIGN_OR_RETURN(live->engine_,
                      RuleEngine::Create(config, live->reader_->metadata(), options));
  return live;
}

Status LiveEvaluator::ReadNew() {
  ++stats_.polls;
  TP_RETURN_IF_ERROR(reader_->Refresh());
  for (const model::NodeInfo* info : reader_->node_infos()) {
    if (node_info_set_.emplace(info->node, true).second) engine_->SetNodeInfo(*info);
  }
  // System samples: one writer (the node's recorder) appends every series of a tick together,
  // so nothing older than the newest timestamp already read can appear later.
  store::MetricQuery mq;
  mq.start_ns = next_metric_ns_;
  TP_ASSIGN_OR_RETURN(store::MetricTable metrics, reader_->SystemMetrics(mq));
  if (metrics.size() > 0) {
    const int64_t newest =
        *std::max_element(metrics.timestamp_ns.begin(), metrics.timestamp_ns.end());
    next_metric_ns_ = std::max(next_metric_ns_, newest + 1);
    stats_.values_read += static_cast<int64_t>(metrics.size());
    engine_->Feed(metrics);
  }
  // Steps: each process writes its steps in order, so per (node, pid, mode) only those that
  // start after the last one fed are new.
  TP_ASSIGN_OR_RETURN(store::StepTable all, reader_->Steps());
  store::StepTable fresh;
  fresh.nodes = all.nodes;
  fresh.modes = all.modes;
  for (size_t i = 0; i < all.size(); ++i) {
    auto key = std::make_tuple(all.nodes.at(all.node[i]), all.pid[i], all.modes.at(all.mode[i]));
    auto it = last_step_.find(key);
    if (it != last_step_.end() && all.start_ns[i] <= it->second) continue;
    last_step_[key] = all.start_ns[i];
    fresh.node.push_back(all.node[i]);
    fresh.mode.push_back(all.mode[i]);
    fresh.rank.push_back(all.rank[i]);
    fresh.pid.push_back(all.pid[i]);
    fresh.step.push_back(all.step[i]);
    fresh.start_ns.push_back(all.start_ns[i]);
    fresh.duration_ns.push_back(all.duration_ns[i]);
    fresh.data_wait_ns.push_back(all.data_wait_ns[i]);
    fresh.forward_ns.push_back(all.forward_ns[i]);
    fresh.backward_ns.push_back(all.backward_ns[i]);
    fresh.optimizer_ns.push_back(all.optimizer_ns[i]);
  }
  if (fresh.size() > 0) {
    stats_.steps_read += static_cast<int64_t>(fresh.size());
    engine_->Feed(fresh);
  }
  // The events rules read, from the chunks written since the last poll.
  store::EventQuery eq;
  eq.categories = {"phase", "collective", "dataloader"};
  TP_ASSIGN_OR_RETURN(store::EventTable events, reader_->EventsSince(&events_, eq));
  if (events.size() > 0) {
    stats_.events_read += static_cast<int64_t>(events.size());
    engine_->Feed(events);
  }
  return OkStatus();
}

StatusOr<std::vector<model::Finding>> LiveEvaluator::Poll() {
  if (engine_->finalized()) return std::vector<model::Finding>{};
  TP_RETURN_IF_ERROR(ReadNew());
  std::vector<model::Finding> out = engine_->TakeNewFindings();
  stats_.findings += static_cast<int64_t>(out.size());
  return out;
}

StatusOr<std::vector<model::Finding>> LiveEvaluator::Finish() {
  if (!engine_->finalized()) {
    Status read = ReadNew();
    engine_->Finalize();
    TP_RETURN_IF_ERROR(read);
  }
  std::vector<model::Finding> out = engine_->TakeNewFindings();
  stats_.findings += static_cast<int64_t>(out.size());
  return out;
}

}  // namespace trainprof::analyze::rules
