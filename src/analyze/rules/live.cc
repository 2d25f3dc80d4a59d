#include "analyze/rules/live.h"

#include <algorithm>
#include <tuple>

#include "base/time.h"
#include "model/event.h"

namespace trainprof::analyze::rules {
namespace {

constexpr int64_t kPartCarryNs = 600LL * 1'000'000'000;

// Appends row `i` of `from` to `to`, re-coding its dictionary columns.
// Appends row i of `from` to `to` with `args`; `recode(from_dictionary, to_dictionary, code)`
// gives each dictionary code in `to`.
template <typename Recode>
void PushRow(const store::EventTable& from, size_t i, std::string args, const Recode& recode,
             store::EventTable* to) {
  to->node.push_back(recode(from.nodes, to->nodes, from.node[i]));
  to->name.push_back(recode(from.names, to->names, from.name[i]));
  to->category.push_back(recode(from.categories, to->categories, from.category[i]));
  to->mode.push_back(recode(from.modes, to->modes, from.mode[i]));
  to->kind.push_back(from.kind[i]);
  to->rank.push_back(from.rank[i]);
  to->pid.push_back(from.pid[i]);
  to->tid.push_back(from.tid[i]);
  to->step.push_back(from.step[i]);
  to->start_ns.push_back(from.start_ns[i]);
  to->duration_ns.push_back(from.duration_ns[i]);
  to->args.push_back(std::move(args));
}

void AppendEventRow(const store::EventTable& from, size_t i, store::EventTable* to) {
  PushRow(
      from, i, from.args[i],
      [](const store::Dictionary& a, store::Dictionary& b, int32_t c) { return b.Code(a.at(c)); },
      to);
}

// The rows of `from` whose `which` is `want`, with `from`'s dictionaries; their args are moved
// out of `from` (each row goes to one table).
store::EventTable RowsWhere(store::EventTable& from, const std::vector<uint8_t>& which,
                            uint8_t want) {
  store::EventTable to;
  to.nodes = from.nodes;
  to.names = from.names;
  to.categories = from.categories;
  to.modes = from.modes;
  auto same = [](const store::Dictionary&, const store::Dictionary&, int32_t c) { return c; };
  for (size_t i = 0; i < from.size(); ++i) {
    if (which[i] == want) PushRow(from, i, std::move(from.args[i]), same, &to);
  }
  return to;
}

}  // namespace

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
  // System samples from the chunks written since the last poll, each once.
  store::MetricQuery metric_query;
  metric_query.metrics = engine_->MetricsRead();
  TP_ASSIGN_OR_RETURN(
      store::MetricTable metrics,
      reader_->SystemMetricsSince(&metric_chunks_, metric_query, /*refresh=*/false));
  if (metrics.size() > 0) {
    stats_.values_read += static_cast<int64_t>(metrics.size());
    engine_->Feed(metrics);
  }
  // Steps: each process writes its steps in order, so per (node, pid, mode) only those that
  // start after the last one fed are new. One read of the new chunks gives the step events and
  // the events rules read.
  const std::vector<std::string> step_categories = {
      model::kCategoryStep, model::kCategoryDataWait, model::kCategoryForward,
      model::kCategoryBackward, model::kCategoryOptimizer};
  store::EventQuery eq;
  eq.categories = step_categories;
  for (const char* c : {"phase", "collective", "dataloader", "metric", "compile"}) {
    eq.categories.push_back(c);
  }
  TP_ASSIGN_OR_RETURN(store::EventTable read,
                      reader_->EventsSince(&events_, eq, /*refresh=*/false));
  std::vector<uint8_t> is_step_category;
  for (const std::string& c : read.categories.values()) {
    is_step_category.push_back(std::find(step_categories.begin(), step_categories.end(), c) !=
                               step_categories.end());
  }
  std::vector<uint8_t> is_step(read.size());
  for (size_t i = 0; i < read.size(); ++i) {
    is_step[i] = is_step_category[static_cast<size_t>(read.category[i])];
  }
  store::EventTable step_events = RowsWhere(read, is_step, 1);
  store::EventTable events = RowsWhere(read, is_step, 0);
  // The steps' parts tell the rules that a step began before any has ended (RuleEngine::Feed).
  engine_->Feed(step_events);
  if (step_events.size() > 0 || unmatched_parts_.size() > 0) {
    for (size_t i = 0; i < unmatched_parts_.size(); ++i) {
      AppendEventRow(unmatched_parts_, i, &step_events);
    }
    const store::StepTable all = store::BuildSteps(step_events);
    // Each dictionary entry of this poll's tables as a lasting name id, once per entry.
    auto ids_of = [&](const store::Dictionary& d) {
      std::vector<int32_t> ids;
      for (const std::string& v : d.values()) {
        ids.push_back(
            name_ids_.try_emplace(v, static_cast<int32_t>(name_ids_.size())).first->second);
      }
      return ids;
    };
    const std::vector<int32_t> all_node = ids_of(all.nodes), all_mode = ids_of(all.modes);
    store::StepTable fresh;
    fresh.nodes = all.nodes;
    fresh.modes = all.modes;
    using StepKey = std::tuple<int32_t, int64_t, int64_t, int32_t, int64_t>;  // node rank pid mode
    std::vector<StepKey> built;
    built.reserve(all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      const int32_t node = all_node[static_cast<size_t>(all.node[i])];
      const int32_t mode = all_mode[static_cast<size_t>(all.mode[i])];
      built.emplace_back(node, all.rank[i], all.pid[i], mode, all.step[i]);
      auto [it, first] =
          last_step_.try_emplace(std::make_tuple(node, all.pid[i], mode), all.start_ns[i]);
      if (!first) {
        if (all.start_ns[i] <= it->second) continue;
        it->second = all.start_ns[i];
      }
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
    std::sort(built.begin(), built.end());
    // Parts whose step has not been read yet wait for it, up to kPartCarryNs behind the newest
    // event (a part of a step that never ends is dropped then).
    int64_t newest = store::kMinTime;
    for (int64_t t : step_events.start_ns) newest = std::max(newest, t);
    const int32_t step_category = [&] {
      const auto& v = step_events.categories.values();
      auto it = std::find(v.begin(), v.end(), model::kCategoryStep);
      return it == v.end() ? -1 : static_cast<int32_t>(it - v.begin());
    }();
    const std::vector<int32_t> part_node = ids_of(step_events.nodes),
                               part_mode = ids_of(step_events.modes);
    store::EventTable carry;
    for (size_t i = 0; i < step_events.size(); ++i) {
      if (step_events.category[i] == step_category) continue;
      if (step_events.start_ns[i] < newest - kPartCarryNs) continue;
      const StepKey key{part_node[static_cast<size_t>(step_events.node[i])], step_events.rank[i],
                        step_events.pid[i], part_mode[static_cast<size_t>(step_events.mode[i])],
                        step_events.step[i]};
      if (std::binary_search(built.begin(), built.end(), key)) continue;
      AppendEventRow(step_events, i, &carry);
    }
    unmatched_parts_ = std::move(carry);
    if (fresh.size() > 0) {
      stats_.steps_read += static_cast<int64_t>(fresh.size());
      engine_->Feed(fresh);
    }
  }
  if (events.size() > 0) {
    stats_.events_read += static_cast<int64_t>(events.size());
    engine_->Feed(events);
  }
  return OkStatus();
}

StatusOr<std::vector<model::Finding>> LiveEvaluator::Poll() {
  if (engine_->finalized()) return std::vector<model::Finding>{};
  const int64_t cpu0 = ThreadCpuNs();
  if (stats_.first_poll_mono_ns == 0) stats_.first_poll_mono_ns = MonotonicNowNs();
  Status read = ReadNew();
  std::vector<model::Finding> out = engine_->TakeNewFindings();
  stats_.findings += static_cast<int64_t>(out.size());
  stats_.poll_cpu_ns += ThreadCpuNs() - cpu0;
  TP_RETURN_IF_ERROR(read);
  return out;
}

StatusOr<std::vector<model::Finding>> LiveEvaluator::Finish() {
  if (!engine_->finalized()) {
    const int64_t cpu0 = ThreadCpuNs();
    Status read = ReadNew();
    engine_->Finalize();
    stats_.finish_cpu_ns += ThreadCpuNs() - cpu0;
    stats_.finish_mono_ns = MonotonicNowNs();
    TP_RETURN_IF_ERROR(read);
  }
  std::vector<model::Finding> out = engine_->TakeNewFindings();
  stats_.findings += static_cast<int64_t>(out.size());
  return out;
}

}  // namespace trainprof::analyze::rules
