#include "agent/sampling_loop.h"

#include <chrono>
#include <cmath>
#include <exception>
#include <set>
#include <system_error>

#include "base/logging.h"
#include "base/time.h"
#include "model/data_quality.h"

namespace trainprof::agent {
namespace {

constexpr int64_t kAllowedIntervalsNs[] = {
    100 * kNanosPerMilli, 200 * kNanosPerMilli, 500 * kNanosPerMilli,
    kNanosPerSecond,      5 * kNanosPerSecond,  60 * kNanosPerSecond,
};

}  // namespace

bool IsAllowedInterval(int64_t interval_ns) {
  for (int64_t allowed : kAllowedIntervalsNs) {
    if (interval_ns == allowed) return true;
  }
  return false;
}

StatusOr<int64_t> ParseInterval(const std::string& text) {
  auto bad = [&] {
    return InvalidArgument("--interval '" + text +
                           "': use one of 100ms, 200ms, 500ms, 1s, 5s, 1min");
  };
  size_t unit_at = 0;
  while (unit_at < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[unit_at])) || text[unit_at] == '.')) {
    ++unit_at;
  }
  if (unit_at == 0) return bad();
  double number = 0;
  try {
    number = std::stod(text.substr(0, unit_at));
  } catch (...) {
    return bad();
  }
  std::string unit = text.substr(unit_at);
  double scale = 0;
  if (unit == "ms") {
    scale = kNanosPerMilli;
  } else if (unit == "s" || unit.empty()) {
    scale = kNanosPerSecond;
  } else if (unit == "min" || unit == "m") {
    scale = 60.0 * kNanosPerSecond;
  } else {
    return bad();
  }
  auto ns = static_cast<int64_t>(std::llround(number * scale));
  if (!IsAllowedInterval(ns)) return bad();
  return ns;
}

// Routes one tick's values into the store, the latest snapshot and the summary. Used only on
// the sampling thread (inside RunTick).
class SamplingLoop::Sink : public collect::SampleSink {
 public:
  Sink(SamplingLoop* loop, const collect::Tick& tick) : loop_(loop), tick_(tick) {}

  void Add(std::string_view metric, std::string_view device, double value) override {
    if (!std::isfinite(value)) {
      ++invalid_;
      return;
    }
    std::string key;
    key.reserve(metric.size() + device.size() + 1);
    key.append(metric).push_back('\0');
    key.append(device);
    auto it = loop_->series_ids_.find(key);
    if (it == loop_->series_ids_.end()) {
      store::SeriesId id = loop_->writer_->Series(std::string(metric), std::string(device));
      it = loop_->series_ids_.emplace(std::move(key), id).first;
    }
    loop_->writer_->Append(it->second, tick_.wall_ns, value);
    if (loop_->summary_ != nullptr) loop_->summary_->Observe(metric, device, value);
    if (loop_->latest_ != nullptr) {
      values_.push_back({std::string(metric), std::string(device), value});
    }
  }

  void Count(std::string_view counter, int64_t delta) override {
    std::string name(counter);
    loop_->writer_->AddCounter(name, delta);
    std::lock_guard<std::mutex> lock(loop_->mu_);
    loop_->counters_[name] += delta;
  }

  void Note(std::string_view key, std::string_view value) override {
    loop_->writer_->Annotate(tick_.wall_ns, std::string(key), std::string(value));
  }

  std::vector<MetricValue> TakeValues() { return std::move(values_); }
  int64_t invalid() const { return invalid_; }

 private:
  SamplingLoop* loop_;
  collect::Tick tick_;
  std::vector<MetricValue> values_;
  int64_t invalid_ = 0;
};

SamplingLoop::SamplingLoop(std::vector<std::unique_ptr<collect::Collector>> collectors,
                           store::NodeStoreWriter* writer, LatestValues* latest,
                           SummaryStats* summary, SamplingOptions options)
    : collectors_(std::move(collectors)),
      writer_(writer),
      latest_(latest),
      summary_(summary),
      options_(options) {}

SamplingLoop::~SamplingLoop() { Stop(); }

Status SamplingLoop::Start() {
  TP_CHECK(!thread_.joinable());
  try {
    thread_ = std::thread([this] { Loop(); });
  } catch (const std::system_error& e) {
    return Unavailable(std::string("cannot start the sampling thread: ") + e.what());
  }
  return OkStatus();
}

void SamplingLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SamplingLoop::CountFromOutside(const std::string& counter, int64_t delta) {
  writer_->AddCounter(counter, delta);
  std::lock_guard<std::mutex> lock(mu_);
  counters_[counter] += delta;
}

SamplingStats SamplingLoop::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::map<std::string, int64_t> SamplingLoop::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

void SamplingLoop::RunTick(const collect::Tick& tick) {
  Sink sink(this, tick);
  int64_t errors = 0;
  for (auto& collector : collectors_) {
    // The contract says collectors never throw; a bug in one must still not reach the job.
    try {
      collector->Sample(tick, sink);
    } catch (const std::exception& e) {
      ++errors;
      TP_LOG_ONCE(LogLevel::kWarning, "collector " + std::string(collector->name()) +
                                          " failed: " + e.what() + " (counted, not repeated)");
    } catch (...) {
      ++errors;
      TP_LOG_ONCE(LogLevel::kWarning,
                  "collector " + std::string(collector->name()) + " failed (counted)");
    }
  }
  if (errors > 0) sink.Count("collector_errors", errors);
  if (sink.invalid() > 0) sink.Count("invalid_values", sink.invalid());
  CheckWriter();

  std::vector<MetricValue> values = sink.TakeValues();
  LatestSnapshot snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.ticks;
    stats_.collector_errors += errors;
    stats_.invalid_values += sink.invalid();
    stats_.values += static_cast<int64_t>(values.size());
    if (latest_ != nullptr) {
      snapshot.tick_wall_ns = tick.wall_ns;
      snapshot.tick_mono_ns = tick.mono_ns;
      snapshot.ticks = stats_.ticks;
      snapshot.counters = counters_;
    }
  }
  if (latest_ != nullptr) {
    snapshot.values = std::move(values);
    latest_->Publish(std::move(snapshot));
  }
}

// The writer drops and counts what it cannot write; tell the user once, while the job goes on.
void SamplingLoop::CheckWriter() {
  store::WriterStats ws = writer_->stats();
  if (ws.write_errors > last_write_errors_) {
    TP_LOG_ONCE(LogLevel::kWarning,
                "writing the run store failed (disk full or slow?); the command keeps running, "
                "failed batches are dropped and counted as write_errors");
  }
  if (ws.dropped_values > last_dropped_) {
    TP_LOG_ONCE(LogLevel::kWarning,
                "the run store cannot keep up; samples are dropped and counted as "
                "dropped_samples");
  }
  last_write_errors_ = ws.write_errors;
  last_dropped_ = ws.dropped_values;
}

void SamplingLoop::Loop() {
  const int64_t interval = options_.interval_ns;
  const int64_t start_mono = MonotonicNowNs();
  int64_t slot = 0;  // the tick due at start_mono + slot * interval
  while (true) {
    collect::Tick tick;
    tick.wall_ns = WallNowNs();
    tick.mono_ns = MonotonicNowNs();
    RunTick(tick);

    int64_t now = MonotonicNowNs();
    int64_t next = slot + 1;
    int64_t behind = (now - start_mono) / interval;  // the last slot already due
    if (behind >= next) {
      int64_t missed = behind - slot;  // slots slot+1 .. behind were not sampled
      next = behind + 1;
      {
        std::lock_guard<std::mutex> lock(mu_);
        stats_.overruns += missed;
        counters_[model::dq::kSamplingOverruns] += missed;
      }
      writer_->AddCounter(model::dq::kSamplingOverruns, missed);
      TP_LOG_ONCE(LogLevel::kWarning,
                  "a sampling tick took longer than the interval; late ticks are counted as "
                  "sampling_overruns");
    }
    slot = next;
    auto due = std::chrono::steady_clock::time_point(
        std::chrono::nanoseconds(start_mono + slot * interval));
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_until(lock, due, [this] { return stop_; })) return;
  }
}

}  // namespace trainprof::agent
