// `trainprof analyze RUN [--json] [--diff BASE_RUN]`: trace analyses per rank. RUN may also be
// one or more Kineto trace files, imported into a scratch run for this command alone.

// GCC 12 sees a null string in CLI11's split() as this file's inlining goes (a false positive:
// the same code builds without it elsewhere).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <CLI/CLI.hpp>
#pragma GCC diagnostic pop
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "analyze/advice/rank_advice.h"
#include "analyze/trace/analysis_json.h"
#include "analyze/trace/hta_compat.h"
#include "analyze/trace/rank_trace.h"
#include "analyze/trace/trace_analysis.h"
#include "base/files.h"
#include "base/parallel.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "importers/common/run_builder.h"
#include "importers/kineto/kineto_importer.h"
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
  store::EventTable events;  // the merged table (--hta-compat, or ranks across stores)
  // Per store (the usual path): the rank traces point into their dictionaries.
  std::vector<std::unique_ptr<tr::StoreSplit>> stores;
  std::vector<tr::RankTrace> ranks;
  store::StepTable steps;  // from the events read (RunReader::Steps() would read them again)
};

// The merged read: every store's events in one table, split by rank.
Status LoadMerged(Loaded* l) {
  l->stores.clear();
  // Of the args, the analyses read a kernel's or runtime call's stream and correlation only.
  store::EventQuery query;
  query.map_args = tr::KeepTraceArgs;
  TP_ASSIGN_OR_RETURN(l->events, l->reader->Events(query));
  l->ranks = tr::SplitByRank(l->events);
  l->steps = store::BuildSteps(l->events);
  return OkStatus();
}

// Heap-allocated: the rank traces point into the event tables' dictionaries.
// Usually each store's chunks are split into its ranks as they are decoded, the stores on a
// small thread pool (a node's ranks are in its own store): the same traces as splitting the
// merged table, since a rank's events keep their order. When a rank (or a node without ranks) has
// events in several stores, or with
// --hta-compat (which reads the merged table), the merged table is read instead.
StatusOr<std::unique_ptr<Loaded>> Load(const std::string& run, bool merged) {
  auto l = std::make_unique<Loaded>();
  TP_ASSIGN_OR_RETURN(l->reader, store::RunReader::Open(run));
  if (merged) {
    TP_RETURN_IF_ERROR(LoadMerged(l.get()));
    return l;
  }
  l->stores.resize(l->reader->StoreCount());
  l->reader->ForEachStore([&](size_t i, store::NodeStoreReader& store, store::ReadProblems* p) {
    l->stores[i] = std::make_unique<tr::StoreSplit>();
    return tr::SplitStoreByRank(store, p, l->stores[i].get());
  });
  std::vector<const store::EventTable*> step_events;
  for (const auto& s : l->stores) step_events.push_back(&s->step_events);
  l->steps = store::BuildSteps(step_events);
  // SplitByRank's order: by (rank, node when the rank is unknown).
  using Key = std::pair<int64_t, std::string>;
  std::vector<std::pair<Key, tr::RankTrace*>> keyed;
  for (auto& store : l->stores) {
    for (tr::RankTrace& t : store->ranks) {
      keyed.push_back({{t.rank, t.rank >= 0 ? std::string() : t.node}, &t});
    }
  }
  std::sort(keyed.begin(), keyed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < keyed.size(); ++i) {
    if (keyed[i].first == keyed[i - 1].first) {
      TP_RETURN_IF_ERROR(LoadMerged(l.get()));
      return l;
    }
  }
  l->ranks.reserve(keyed.size());
  for (auto& [key, t] : keyed) l->ranks.push_back(std::move(*t));
  return l;
}

// Trace files given instead of a run: imported as `trainprof import kineto` would, into a
// directory of our own (mkdtemp under $TMPDIR, 0700), with nothing synced to disk and no
// summary.json, and removed when the command ends. One process instead of two, as HTA loads a
// trace and analyses it.
class ScratchRun {
 public:
  static StatusOr<std::unique_ptr<ScratchRun>> Import(const std::vector<std::string>& traces) {
    int64_t file_bytes = 0;
    for (const std::string& t : traces) {
      struct stat st {};
      if (stat(t.c_str(), &st) == 0) file_bytes += st.st_size;
      if (IsDirectory(t)) {
        return InvalidArgument(t + ": is a directory; give one run directory, or trace files");
      }
      if (!PathExists(t)) return NotFound(t + ": no such run directory or trace file");
    }
    std::string tmpl;
    for (const std::string& parent : ScratchParents(file_bytes)) {
      tmpl = JoinPath(parent, "trainprof-analyze-XXXXXX");
      if (mkdtemp(tmpl.data()) != nullptr) break;
      tmpl.clear();
    }
    if (tmpl.empty()) {
      return Unavailable(JoinPath(ScratchParents(file_bytes).back(), "trainprof-analyze-*") +
                         ": cannot create a scratch directory: " + ErrnoMessage(errno));
    }
    std::unique_ptr<ScratchRun> run(new ScratchRun(tmpl));
    importers::kineto::KinetoImportOptions o;
    o.traces = traces;
    o.out = run->dir_;
    o.name = importers::FileStem(traces.front());
    o.scratch = true;
    TP_ASSIGN_OR_RETURN(importers::kineto::KinetoImportResult result,
                        importers::kineto::ImportKineto(o));
    // What `import kineto` would print as the data's problems, on stderr (the analysis, on
    // stdout, stays what it prints for the imported run).
    for (const auto& f : result.files) {
      for (const auto& [problem, n] : f.problems) {
        std::cerr << "warning: " << f.path << ": " << n << " " << problem << "\n";
      }
      for (const std::string& w : f.warnings)
        std::cerr << "warning: " << f.path << ": " << w << "\n";
    }
    return run;
  }
  // Where to try: $TMPDIR when set. Else a small run lives in memory (/dev/shm, a tmpfs:
  // creating, writing and removing its files cost about a millisecond less than on a disk's
  // file system, a tenth of the whole command on a 1 MB trace; up to 4 MiB of trace files,
  // since a container's /dev/shm may hold only 64 MiB), then /tmp.
  static std::vector<std::string> ScratchParents(int64_t trace_file_bytes) {
    const char* env = std::getenv("TMPDIR");
    if (env != nullptr && *env != '\0') return {env};
    constexpr int64_t kInMemoryMaxFileBytes = 4 << 20;
    if (trace_file_bytes <= kInMemoryMaxFileBytes && IsDirectory("/dev/shm") &&
        access("/dev/shm", W_OK | X_OK) == 0) {
      return {"/dev/shm", "/tmp"};
    }
    return {"/tmp"};
  }
  ~ScratchRun() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }

 private:
  explicit ScratchRun(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

// The run a positional argument list names: one run directory as it is, else trace files
// imported into a scratch run (kept alive in *scratch).
StatusOr<std::string> RunOf(const std::vector<std::string>& inputs,
                            std::unique_ptr<ScratchRun>* scratch) {
  if (inputs.empty()) return InvalidArgument("analyze needs a run directory or trace files");
  if (inputs.size() == 1 && IsDirectory(inputs.front())) return inputs.front();
  TP_ASSIGN_OR_RETURN(*scratch, ScratchRun::Import(inputs));
  return (*scratch)->dir();
}

}  // namespace

Status RunAnalyze(const AnalyzeOptions& given, std::ostream& out) {
  AnalyzeOptions options = given;
  std::unique_ptr<ScratchRun> scratch, scratch_base;
  // What messages call the run and the baseline: as the user named them, not a scratch path.
  std::string run_name = options.run;
  if (!options.inputs.empty()) {
    run_name = options.inputs.front();
    for (size_t i = 1; i < options.inputs.size(); ++i) run_name += " " + options.inputs[i];
    if (!options.scaling.empty() && !IsDirectory(options.inputs.front())) {
      return InvalidArgument(
          "--scaling compares run directories: import each job's traces "
          "with 'trainprof import kineto' first");
    }
    TP_ASSIGN_OR_RETURN(options.run, RunOf(options.inputs, &scratch));
  }
  if (!options.scaling.empty()) return RunScaling(options, out);
  if (!options.diff_base.empty() && !IsDirectory(options.diff_base)) {
    TP_ASSIGN_OR_RETURN(options.diff_base, RunOf({options.diff_base}, &scratch_base));
  }
  TP_ASSIGN_OR_RETURN(auto loaded, Load(options.run, options.hta_compat));
  Loaded& run = *loaded;
  if (run.ranks.empty()) {
    return FailedPrecondition(run_name + ": no trace spans to analyze" +
                              (scratch ? std::string(" (no Kineto operator or kernel events)")
                                       : std::string(" (import a Kineto trace with 'trainprof "
                                                     "import kineto')")));
  }
  tr::AnalysisOptions o;
  o.kernel_wait_threshold_ns = static_cast<int64_t>(options.kernel_wait_threshold_us * 1000.0);
  o.hta_count_sync_as_busy = options.hta_compat;
  o.top_n = static_cast<size_t>(options.top);
  // Ranks are independent: analysed on a small thread pool, kept in rank order.
  std::vector<tr::RankAnalysis> results(run.ranks.size());
  ParallelFor(run.ranks.size(), [&](size_t i) { results[i] = tr::AnalyzeRank(run.ranks[i], o); });
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
                      advice::SummarizeRun(*run.reader, run.steps, run.ranks, results));
  advice::ApplyToAnalyses(summaries, &results);
  std::vector<tr::DiffEntry> diff;
  bool has_diff = !options.diff_base.empty();
  if (has_diff) {
    TP_ASSIGN_OR_RETURN(auto base, Load(options.diff_base, /*merged=*/false));
    diff = tr::DiffTraces(base->ranks, run.ranks, o.top_n);
  }
  if (options.json) {
    out << tr::AnalysisToJson(results, stragglers, has_diff ? &diff : nullptr,
                              hta ? &hta->kernel_types : nullptr,
                              [&](size_t i, nlohmann::json* rank) {
                                if (i < summaries.size())
                                  advice::AddSummaryJson(summaries[i], rank);
                              })
        << "\n";
    return OkStatus();
  }
  for (const tr::RankAnalysis& r : results) {
    out << "rank " << r.label << " (node " << r.node << "): " << r.gpu_activities
        << " GPU activities, " << r.cpu_spans << " CPU spans\n";
    if (!r.temporal_note.empty()) out << r.temporal_note << "\n";
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
        {"diff vs " + given.diff_base, "kind", "base_us", "test_us", "delta_us"}};
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
  cmd->add_option("run", opts->inputs,
                  "Run directory, or Kineto trace files (imported into a scratch run for this "
                  "command, as 'import kineto' would, and removed after)")
      ->required();
  cmd->add_flag("--json", opts->json, "Print JSON");
  cmd->add_option("--diff", opts->diff_base,
                  "Compare with this (baseline) run, or Kineto trace file");
  // A day at most: in nanoseconds the threshold must fit (1e308 overflowed to a threshold of
  // 0), and NaN passes every comparison, so it is refused by name.
  const CLI::Validator finite_us(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !std::isfinite(v) || v < 0 || v > 86400e6) {
          return "must be a number of microseconds from 0 to 86400000000 (a day), got " + text;
        }
        return {};
      },
      "MICROSECONDS");
  cmd->add_option("--kernel-wait-threshold-us", opts->kernel_wait_threshold_us,
                  "Gaps shorter than this are kernel_wait (default 30 us)")
      ->check(finite_us);
  cmd->add_option("--top", opts->top, "Entries in the top lists (default 10)")
      ->check(CLI::Range(1, 1000000));
  cmd->add_flag("--hta-compat", opts->hta_compat,
                "HolisticTraceAnalysis 0.5.0's idle, temporal and kernel breakdowns and "
                "overlap, computed as HTA computes them");
  cmd->add_option("--scaling", opts->scaling,
                  "Scaling efficiency instead: RUN and these runs of the same job at other world "
                  "sizes, training steps/s per device against the run of fewest devices");
  cmd->add_option("--warmup-steps", opts->warmup_steps,
                  "--scaling: first training steps of each device left out (default 5)")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([opts, action] { action->run = [opts] { return RunAnalyze(*opts, std::cout); }; });
}

}  // namespace trainprof::cli
