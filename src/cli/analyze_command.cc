// `trainprof analyze RUN [--json] [--diff BASE_RUN]`: trace analyses per rank.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "analyze/advice/rank_advice.h"
#include "analyze/trace/analysis_json.h"
#include "analyze/trace/hta_compat.h"
#include "analyze/trace/rank_trace.h"
#include "analyze/trace/trace_analysis.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "store/run_reader.h"

namespace trainprof::cli {
namespace {

namespace tr = analyze::trace;
namespace advice = analyze::advice;

std::string Us(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(ns) / 1000.0);
  return buf;
}

std::string Pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", v);
  return buf;
}

struct Loaded {
  std::unique_ptr<store::RunReader> reader;
  store::EventTable events;
  std::vector<tr::RankTrace> ranks;
};

// Heap-allocated: the rank traces point into the event table's dictionaries.
StatusOr<std::unique_ptr<Loaded>> Load(const std::string& run) {
  auto l = std::make_unique<Loaded>();
  TP_ASSIGN_OR_RETURN(l->reader, store::RunReader::Open(run));
  TP_ASSIGN_OR_RETURN(l->events, l->reader->Events({}));
  l->ranks = tr::SplitByRank(l->events);
  return l;
}

}  // namespace

Status RunAnalyze(const AnalyzeOptions& options, std::ostream& out) {
  if (!options.scaling.empty()) return RunScaling(options, out);
  TP_ASSIGN_OR_RETURN(auto loaded, Load(options.run));
  Loaded& run = *loaded;
  if (run.ranks.empty()) {
    return FailedPrecondition(options.run +
                              ": no trace spans to analyze (import a Kineto "
                              "trace with 'trainprof import kineto')");
  }
  tr::AnalysisOptions o;
  o.kernel_wait_threshold_ns = static_cast<int64_t>(options.kernel_wait_threshold_us * 1000.0);
  o.hta_count_sync_as_busy = options.hta_compat;
  o.top_n = static_cast<size_t>(options.top);
  std::vector<tr::RankAnalysis> results;
  for (const tr::RankTrace& t : run.ranks) results.push_back(tr::AnalyzeRank(t, o));
  // --hta-compat: HTA 0.5.0's own definitions for its figures (docs/trace-analysis.md).
  std::optional<tr::HtaResult> hta;
  if (options.hta_compat) {
    TP_ASSIGN_OR_RETURN(auto node_meta, run.reader->NodeMeta());
    hta = tr::AnalyzeHta(tr::BuildHtaTraces(run.events, node_meta), run.events,
                         static_cast<int64_t>(options.kernel_wait_threshold_us));
    tr::ApplyHta(*hta, &results);
  }
  std::vector<tr::Straggler> stragglers = tr::FindStragglers(results);
  // Averages over the steps that carry each kind of data, and advice that fits the machine
  // (replacing the trace analysis' step average and recommendations).
  TP_ASSIGN_OR_RETURN(std::vector<advice::RankSummary> summaries,
                      advice::SummarizeRun(*run.reader, run.ranks, results));
  advice::ApplyToAnalyses(summaries, &results);
  std::vector<tr::DiffEntry> diff;
  bool has_diff = !options.diff_base.empty();
  if (has_diff) {
    TP_ASSIGN_OR_RETURN(auto base, Load(options.diff_base));
    diff = tr::DiffTraces(base->ranks, run.ranks, o.top_n);
  }
  if (options.json) {
    out << advice::MergeIntoJson(tr::AnalysisToJson(results, stragglers, has_diff ? &diff : nullptr,
                                                    hta ? &hta->kernel_types : nullptr),
                                 summaries)
        << "\n";
    return OkStatus();
  }
  for (const tr::RankAnalysis& r : results) {
    out << "rank " << r.label << " (node " << r.node << "): " << r.gpu_activities
        << " GPU activities, " << r.cpu_spans << " CPU spans\n";
    if (r.temporal) {
      const tr::Temporal& t = *r.temporal;
      PrintTable(out, {{"temporal", "time_us", "pct"},
                       {"idle", Us(t.idle_ns), Pct(t.idle_pct)},
                       {"compute", Us(t.compute_ns), Pct(t.compute_pct)},
                       {"non_compute", Us(t.non_compute_ns), Pct(t.non_compute_pct)},
                       {"kernel (span)", Us(t.kernel_ns), ""}});
      std::vector<std::vector<std::string>> kt = {{"kernel type", "time_us", "pct"}};
      for (const auto& k : r.kernel_types) kt.push_back({k.type, Us(k.time_ns), Pct(k.pct)});
      PrintTable(out, kt);
      if (r.comm_comp_overlap_pct) {
        out << "communication overlapped with computation: " << Pct(*r.comm_comp_overlap_pct)
            << "\n";
      }
      out << "kernel launches: " << r.launch.kernels << " kernels, " << r.launch.correlated
          << " with their launch; delay p50 " << Us(r.launch.launch_delay_p50_ns) << " us, p90 "
          << Us(r.launch.launch_delay_p90_ns) << " us; " << r.launch.short_kernels
          << " shorter than their launch call\n";
    } else {
      out << "no GPU activity (CPU-only trace)\n";
    }
    if (!r.top_kernels.empty()) {
      std::vector<std::vector<std::string>> rows = {{"top kernels", "type", "count", "total_us"}};
      for (const auto& k : r.top_kernels) {
        rows.push_back({k.name.substr(0, 80), k.type, std::to_string(k.count), Us(k.total_ns)});
      }
      PrintTable(out, rows);
    }
    if (r.step_average) {
      const tr::StepBreakdown& a = *r.step_average;
      PrintTable(out, {{"avg step", "time_us"},
                       {"step", Us(a.step_ns)},
                       {"kernel", Us(a.kernel_ns)},
                       {"memcpy", Us(a.memcpy_ns)},
                       {"memset", Us(a.memset_ns)},
                       {"communication", Us(a.communication_ns)},
                       {"runtime", Us(a.runtime_ns)},
                       {"dataloader", Us(a.dataloader_ns)},
                       {"cpu_exec", Us(a.cpu_exec_ns)},
                       {"other", Us(a.other_ns)}});
    }
    out << advice::SummaryText(summaries[static_cast<size_t>(&r - results.data())]);
    for (const auto& rec : r.recommendations) out << "- " << rec << "\n";
    out << "\n";
  }
  for (const auto& s : stragglers) {
    out << "straggler: rank " << s.label << " " << s.metric << " "
        << Us(static_cast<int64_t>(s.value)) << " us is " << s.excess_pct << "% above the median\n";
  }
  if (has_diff) {
    std::vector<std::vector<std::string>> rows = {
        {"diff vs " + options.diff_base, "kind", "base_us", "test_us", "delta_us"}};
    for (const auto& e : diff) {
      rows.push_back({e.name.substr(0, 80), e.kind, Us(e.base_ns), Us(e.test_ns), Us(e.delta_ns)});
    }
    PrintTable(out, rows);
  }
  return OkStatus();
}

void AddAnalyzeCommand(CLI::App& app, CommandAction* action) {
  auto opts = std::make_shared<AnalyzeOptions>();
  auto* cmd = app.add_subcommand("analyze",
                                 "Trace analyses per rank (temporal, kernel and idle "
                                 "breakdowns, launches, steps, stragglers, diff)");
  cmd->add_option("run", opts->run, "Run directory")->required();
  cmd->add_flag("--json", opts->json, "Print JSON");
  cmd->add_option("--diff", opts->diff_base, "Compare with this (baseline) run");
  cmd->add_option("--kernel-wait-threshold-us", opts->kernel_wait_threshold_us,
                  "Gaps shorter than this are kernel_wait (default 30 us)");
  cmd->add_option("--top", opts->top, "Entries in the top lists (default 10)");
  cmd->add_flag("--hta-compat", opts->hta_compat,
                "HolisticTraceAnalysis 0.5.0's idle, temporal and kernel breakdowns and "
                "overlap, computed as HTA computes them");
  cmd->add_option("--scaling", opts->scaling,
                  "Scaling efficiency instead: RUN and these runs of the same job at other world "
                  "sizes, training steps/s per device against the run of fewest devices");
  cmd->add_option("--warmup-steps", opts->warmup_steps,
                  "--scaling: first training steps of each device left out (default 5)");
  cmd->callback([opts, action] { action->run = [opts] { return RunAnalyze(*opts, std::cout); }; });
}

}  // namespace trainprof::cli
