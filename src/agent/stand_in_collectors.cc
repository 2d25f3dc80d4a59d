// TEMPORARY STAND-IN, DELETE AT MERGE: a minimal collect::MakeCollectors so that the agent and
// `trainprof record` link and record something real before the collect/ module lands. The real
// collectors (src/collect/, issue 3's sampler work) replace this file and its CMake target
// `trainprof_stand_in_collectors`. It reads /proc/stat (total CPU), /proc/meminfo, /proc/net/dev,
// /proc/diskstats and the process tree's /proc/<pid>/{stat,status,io}, using the contract's
// metric names, and nothing else (no cgroup, no GPUs).

#include <dirent.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <vector>

#include "agent/collector_factory.h"
#include "base/files.h"

namespace trainprof::collect {
namespace {

double Seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

// Counters turned into per-second rates against the previous tick.
class RateKeeper {
 public:
  // Returns false on the first sight of `key` (no rate yet) or a counter reset.
  bool Rate(const std::string& key, double value, int64_t mono_ns, double* rate) {
    auto it = prev_.find(key);
    bool ok = false;
    if (it != prev_.end() && mono_ns > it->second.second && value >= it->second.first) {
      *rate = (value - it->second.first) / Seconds(mono_ns - it->second.second);
      ok = true;
    }
    prev_[key] = {value, mono_ns};
    return ok;
  }

 private:
  std::map<std::string, std::pair<double, int64_t>> prev_;
};

class StandInCpu : public Collector {
 public:
  explicit StandInCpu(std::string root) : path_(root + "/stat") {}
  std::string_view name() const override { return "stand_in_cpu"; }
  void Sample(const Tick&, SampleSink& sink) override {
    std::ifstream in(path_);
    std::string line;
    while (std::getline(in, line)) {
      if (line.compare(0, 3, "cpu") != 0) break;
      std::istringstream s(line);
      std::string label;
      double v[8] = {0};
      s >> label;
      for (double& x : v) s >> x;
      double total = 0;
      for (double x : v) total += x;
      double idle = v[3] + v[4];
      std::string device = label == "cpu" ? "total" : label;
      auto& p = prev_[device];
      double dt = total - p.first;
      if (p.first > 0 && dt > 0) {
        sink.Add("cpu_utilization_ratio", device, 1.0 - (idle - p.second) / dt);
        sink.Add("cpu_iowait_ratio", device, (v[4] - prev_iowait_[device]) / dt);
      }
      p = {total, idle};
      prev_iowait_[device] = v[4];
    }
  }

 private:
  std::string path_;
  std::map<std::string, std::pair<double, double>> prev_;
  std::map<std::string, double> prev_iowait_;
};

class StandInMemory : public Collector {
 public:
  explicit StandInMemory(std::string root) : path_(root + "/meminfo") {}
  std::string_view name() const override { return "stand_in_memory"; }
  void Sample(const Tick&, SampleSink& sink) override {
    std::ifstream in(path_);
    std::string key;
    double kb = 0, total = -1, available = -1;
    std::string unit;
    while (in >> key >> kb) {
      std::getline(in, unit);
      if (key == "MemTotal:") total = kb * 1024;
      if (key == "MemAvailable:") available = kb * 1024;
    }
    if (total < 0 || available < 0) {
      sink.Count("parse_errors", 1);
      return;
    }
    sink.Add("memory_total_bytes", "", total);
    sink.Add("memory_used_bytes", "", total - available);
  }

 private:
  std::string path_;
};

class StandInNetwork : public Collector {
 public:
  explicit StandInNetwork(std::string root) : path_(root + "/net/dev") {}
  std::string_view name() const override { return "stand_in_network"; }
  void Sample(const Tick& tick, SampleSink& sink) override {
    std::ifstream in(path_);
    std::string line;
    while (std::getline(in, line)) {
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string iface = line.substr(0, colon);
      iface.erase(0, iface.find_first_not_of(' '));
      std::istringstream s(line.substr(colon + 1));
      double f[9] = {0};
      for (double& x : f) s >> x;
      double rate;
      if (rates_.Rate(iface + "/rx", f[0], tick.mono_ns, &rate)) {
        sink.Add("network_receive_bytes_per_second", iface, rate);
      }
      if (rates_.Rate(iface + "/tx", f[8], tick.mono_ns, &rate)) {
        sink.Add("network_transmit_bytes_per_second", iface, rate);
      }
    }
  }

 private:
  std::string path_;
  RateKeeper rates_;
};

class StandInDisk : public Collector {
 public:
  StandInDisk(std::string proc_root, std::string sys_root)
      : path_(proc_root + "/diskstats"), sys_block_(sys_root + "/block") {}
  std::string_view name() const override { return "stand_in_disk"; }
  void Sample(const Tick& tick, SampleSink& sink) override {
    std::ifstream in(path_);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream s(line);
      int major = 0, minor = 0;
      std::string dev;
      double f[11] = {0};
      s >> major >> minor >> dev;
      for (double& x : f) s >> x;
      // Whole devices only (partitions would count the same bytes twice).
      if (!IsDirectory(sys_block_ + "/" + dev)) continue;
      double rate;
      if (rates_.Rate(dev + "/r", f[2] * 512, tick.mono_ns, &rate)) {
        sink.Add("disk_read_bytes_per_second", dev, rate);
      }
      if (rates_.Rate(dev + "/w", f[6] * 512, tick.mono_ns, &rate)) {
        sink.Add("disk_write_bytes_per_second", dev, rate);
      }
    }
  }

 private:
  std::string path_;
  std::string sys_block_;
  RateKeeper rates_;
};

// The watched processes and all their descendants, found through /proc/<pid>/task/*/children
// when available, else by scanning every process's parent.
class StandInProcessTree : public Collector {
 public:
  StandInProcessTree(std::string root, std::vector<int> pids)
      : root_(std::move(root)),
        pids_(std::move(pids)),
        ticks_per_s_(sysconf(_SC_CLK_TCK)),
        page_bytes_(sysconf(_SC_PAGESIZE)) {}
  std::string_view name() const override { return "stand_in_process_tree"; }

  void Sample(const Tick& tick, SampleSink& sink) override {
    if (pids_.empty()) return;
    std::map<int, int> parent;
    DIR* d = opendir(root_.c_str());
    if (d == nullptr) return;
    std::map<int, std::array<double, 4>> stats;  // cpu ticks, rss bytes, read, write
    while (dirent* e = readdir(d)) {
      int pid = std::atoi(e->d_name);
      if (pid <= 0) continue;
      auto stat = ReadFileToString(root_ + "/" + e->d_name + "/stat");
      if (!stat.ok()) continue;
      size_t paren = stat->rfind(')');
      if (paren == std::string::npos) continue;
      std::istringstream s(stat->substr(paren + 2));
      std::string state;
      long long f[22] = {0};
      s >> state;
      for (long long& x : f) s >> x;
      // After state: ppid(0) ... utime(10) stime(11) cutime stime ... rss(20).
      parent[pid] = static_cast<int>(f[0]);
      stats[pid] = {static_cast<double>(f[10] + f[11]),
                    static_cast<double>(f[20]) * static_cast<double>(page_bytes_), 0, 0};
    }
    closedir(d);
    std::set<int> tree(pids_.begin(), pids_.end());
    bool grew = true;
    while (grew) {
      grew = false;
      for (const auto& [pid, ppid] : parent) {
        if (tree.count(ppid) != 0 && tree.insert(pid).second) grew = true;
      }
    }
    double cpu_ticks = 0, rss = 0, read = 0, write = 0;
    int alive = 0;
    for (int pid : tree) {
      auto it = stats.find(pid);
      if (it == stats.end()) continue;
      ++alive;
      // Counters of processes that ended drop out; keep their last values so the total stays
      // monotonic.
      last_cpu_[pid] = it->second[0];
      rss += it->second[1];
      std::ifstream io(root_ + "/" + std::to_string(pid) + "/io");
      std::string key;
      double value;
      while (io >> key >> value) {
        if (key == "read_bytes:") last_read_[pid] = value;
        if (key == "write_bytes:") last_write_[pid] = value;
      }
    }
    for (const auto& [pid, v] : last_cpu_) cpu_ticks += v;
    for (const auto& [pid, v] : last_read_) read += v;
    for (const auto& [pid, v] : last_write_) write += v;
    if (alive == 0) return;
    double rate;
    if (rates_.Rate("cpu", cpu_ticks / static_cast<double>(ticks_per_s_), tick.mono_ns, &rate)) {
      sink.Add("process_cpu_utilization_ratio", "tree", rate);
    }
    sink.Add("process_resident_memory_bytes", "tree", rss);
    if (rates_.Rate("read", read, tick.mono_ns, &rate)) {
      sink.Add("process_read_bytes_per_second", "tree", rate);
    }
    if (rates_.Rate("write", write, tick.mono_ns, &rate)) {
      sink.Add("process_write_bytes_per_second", "tree", rate);
    }
  }

 private:
  std::string root_;
  std::vector<int> pids_;
  long ticks_per_s_;
  long page_bytes_;
  std::map<int, double> last_cpu_, last_read_, last_write_;
  RateKeeper rates_;
};

}  // namespace

std::vector<std::unique_ptr<Collector>> MakeCollectors(const CollectorContext& context) {
  std::vector<std::unique_ptr<Collector>> out;
  out.push_back(std::make_unique<StandInCpu>(context.proc_root));
  out.push_back(std::make_unique<StandInMemory>(context.proc_root));
  out.push_back(std::make_unique<StandInNetwork>(context.proc_root));
  out.push_back(std::make_unique<StandInDisk>(context.proc_root, context.sys_root));
  out.push_back(std::make_unique<StandInProcessTree>(context.proc_root, context.root_pids));
  return out;
}

}  // namespace trainprof::collect
