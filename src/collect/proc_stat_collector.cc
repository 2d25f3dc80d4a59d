#include "collect/proc_stat_collector.h"

#include "base/files.h"
#include "collect/metric_catalog.h"
#include "model/data_quality.h"

namespace trainprof::collect {

ProcStatCollector::ProcStatCollector(const std::string& proc_root)
    : stat_(JoinPath(proc_root, "stat"), ProcFile::Kind::kSingleRecord),
      loadavg_(JoinPath(proc_root, "loadavg"), ProcFile::Kind::kSingleRecord) {
  prev_.resize(1);
  devices_.push_back("total");
}

size_t ProcStatCollector::SlotFor(std::string_view label, bool* ok) {
  *ok = true;
  if (label == "cpu") return 0;
  unsigned long long n = 0;
  if (!ParseU64(label.substr(3), &n) || n > 65535) {
    *ok = false;
    return 0;
  }
  size_t slot = static_cast<size_t>(n) + 1;
  while (devices_.size() <= slot) {
    // Only when a core is seen for the first time: allocation stays out of later ticks.
    devices_.push_back("cpu" + std::to_string(devices_.size() - 1));
    prev_.emplace_back();
  }
  return slot;
}

void ProcStatCollector::EmitCpu(size_t slot, const CpuTimes& now, SampleSink& sink) {
  CpuTimes& prev = prev_[slot];
  if (prev.valid) {
    unsigned long long d[8];
    unsigned long long total = 0;
    bool went_back = false;
    for (int i = 0; i < 8; ++i) {
      // A hot-unplugged and re-plugged core restarts its counters: skip that interval.
      if (now.v[i] < prev.v[i]) went_back = true;
      d[i] = now.v[i] - prev.v[i];
      total += d[i];
    }
    if (!went_back && total > 0) {
      const double t = static_cast<double>(total);
      const std::string_view dev = devices_[slot];
      const double idle = static_cast<double>(d[3]);
      const double iowait = static_cast<double>(d[4]);
      sink.Add(metric::kCpuUtilization, dev, (t - idle - iowait) / t);
      sink.Add(metric::kCpuIowait, dev, iowait / t);
      sink.Add(metric::kCpuUser, dev, static_cast<double>(d[0] + d[1]) / t);
      sink.Add(metric::kCpuSystem, dev, static_cast<double>(d[2] + d[5] + d[6]) / t);
      sink.Add(metric::kCpuIdle, dev, idle / t);
      sink.Add(metric::kCpuSteal, dev, static_cast<double>(d[7]) / t);
    }
  }
  prev = now;
  prev.valid = true;
}

void ProcStatCollector::Sample(const Tick& tick, SampleSink& sink) {
  std::string_view text;
  if (stat_.Read(&text)) {
    TextCursor cursor(text);
    std::string_view line;
    while (cursor.NextLine(&line)) {
      std::string_view rest = line;
      std::string_view key = NextToken(&rest);
      if (key.starts_with("cpu")) {
        bool ok = false;
        size_t slot = SlotFor(key, &ok);
        CpuTimes now;
        // Old kernels have fewer columns; missing ones stay 0 (they did not exist).
        if (!ok || ParseU64s(rest, now.v, 8) < 4) {
          sink.Count(model::dq::kParseErrors, 1);
          continue;
        }
        EmitCpu(slot, now, sink);
      } else if (key == "ctxt") {
        unsigned long long ctxt = 0;
        if (!ParseU64(NextToken(&rest), &ctxt)) {
          sink.Count(model::dq::kParseErrors, 1);
          continue;
        }
        if (have_prev_ctxt_ && tick.mono_ns > prev_mono_ns_ && ctxt >= prev_ctxt_) {
          sink.Add(metric::kContextSwitches, "",
                   static_cast<double>(ctxt - prev_ctxt_) * 1e9 /
                       static_cast<double>(tick.mono_ns - prev_mono_ns_));
        }
        prev_ctxt_ = ctxt;
        have_prev_ctxt_ = true;
      } else if (key == "procs_running" || key == "procs_blocked") {
        unsigned long long n = 0;
        if (!ParseU64(NextToken(&rest), &n)) {
          sink.Count(model::dq::kParseErrors, 1);
          continue;
        }
        sink.Add(key == "procs_running" ? metric::kProcsRunning : metric::kProcsBlocked, "",
                 static_cast<double>(n));
      }
    }
  } else {
    sink.Count(kReadErrorsCounter, 1);
  }
  prev_mono_ns_ = tick.mono_ns;

  if (loadavg_.Read(&text)) {
    double load[3];
    std::string_view rest = text;
    bool ok = true;
    for (double& l : load) ok = ok && ParseDouble(NextToken(&rest), &l);
    if (ok) {
      sink.Add(metric::kLoad1, "", load[0]);
      sink.Add(metric::kLoad5, "", load[1]);
      sink.Add(metric::kLoad15, "", load[2]);
    } else {
      sink.Count(model::dq::kParseErrors, 1);
    }
  } else {
    sink.Count(kReadErrorsCounter, 1);
  }
}

}  // namespace trainprof::collect
