#pragma once
// The training process tree: every descendant of the root pids (or every process of a cgroup),
// followed as processes come and go (data-loader workers). Adds, with device "tree": CPU in
// cores, resident memory, storage read/write bytes per second, threads and process count.
//
// Per process, bounded: the first kMaxProcessSeries processes of the tree (in the order they
// were found, in pid order within a tick; over the run's whole life, not at a time) each get series
// of their own, device "pid<P>": pid_cpu_utilization_ratio (cores), pid_resident_memory_bytes,
// pid_threads; every later process is summed into device "other". When a process gets its series,
// one note "process" = {"pid", "ppid", "name", "cmdline": [args...], "ts_ns"} says who it is
// (stored as an annotation): name from /proc/<pid>/stat, cmdline from /proc/<pid>/cmdline, at most
// kMaxCmdlineArgs args of kMaxCmdlineBytes in all; read again at the next kCmdlineRechecks
// ticks, and noted again when changed (a process seen between its fork and its exec showed its
// parent's: the newest note is the process's). Bounds: a run's store holds at most
// 3 * kMaxProcessSeries + 3 per-process series and (1 + kCmdlineRechecks) * kMaxProcessSeries
// notes per recorder.
//
// Per-process state (previous CPU and I/O counters, open /proc/<pid>/stat and io files) keeps
// rates right when workers appear or exit: a process first seen after the first tick was born
// during the interval, so all of its CPU and I/O so far belongs to the interval; a process
// that exits takes only its last partial interval with it (the parent's cutime would
// double-count what was already seen, so it is not used).
//
// Discovery: a full scan of /proc (getdents plus one stat read per new pid, ~100 us on a
// node with 200 processes) runs on the first tick and then at most once per
// kFullScanIntervalNs; in between, new processes are found through the members' main-thread
// `/proc/<pid>/task/<pid>/children` files (under 1 us each). Children forked by other threads
// or reparented orphans are picked up by the next full scan, and since a newly found process
// brings all its CPU and I/O since birth, totals stay right; only their placement in time can
// shift by up to one scan interval. Kernels without CONFIG_PROC_CHILDREN scan every tick.
//
// Membership is monotone: a pid found outside the tree stays outside until it disappears from
// /proc, and a member stays a member after reparenting. Called from the agent's sampling thread.

#include <string>
#include <unordered_map>
#include <vector>

#include "collect/collector.h"
#include "collect/proc_file.h"

namespace trainprof::collect {

// Fields of /proc/<pid>/stat the collectors use; false when the line is malformed.
struct PidStat {
  char state = '?';  // R, S, D, Z (zombie), ...
  int ppid = 0;
  unsigned long long utime = 0, stime = 0;  // clock ticks
  long long num_threads = 0;
  long long rss_pages = 0;
};
bool ParsePidStat(std::string_view text, PidStat* out);
// The name in "pid (name) state ...": between the first '(' and the last ')'; "" if malformed.
std::string_view PidStatName(std::string_view text);

class ProcessTreeCollector : public Collector {
 public:
  // Follows the descendants of `root_pids`.
  ProcessTreeCollector(const std::string& proc_root, std::vector<int> root_pids);
  // Follows the processes listed in `<cgroup_dir>/cgroup.procs` instead.
  static std::unique_ptr<ProcessTreeCollector> ForCgroup(const std::string& proc_root,
                                                         const std::string& cgroup_dir);
  ~ProcessTreeCollector() override;

  static constexpr int kMaxProcessSeries = 64;
  static constexpr size_t kMaxCmdlineBytes = 512;
  static constexpr size_t kMaxCmdlineArgs = 32;
  // Ticks after its first at which a process's name and command line are read again (a
  // process caught between fork and exec).
  static constexpr int kCmdlineRechecks = 2;

  std::string_view name() const override { return "process_tree"; }
  void Sample(const Tick& tick, SampleSink& sink) override;

  // The pids in the tree after the last Sample, sorted (for tests and the agent).
  std::vector<int> MemberPids() const;

  // Samples the tree at most once per `interval_ns` (ticks in between add nothing). Rates stay
  // right: they come from cumulative counters over the actual time between samples.
  void set_min_interval_ns(int64_t interval_ns) { min_interval_ns_ = interval_ns; }

 private:
  static constexpr int64_t kFullScanIntervalNs = 1000LL * 1000 * 1000;

  struct Member {
    ProcFile stat;
    ProcFile io;
    ProcFile children;                 // /proc/<pid>/task/<pid>/children
    unsigned long long cpu_ticks = 0;  // utime + stime at the previous tick
    unsigned long long read_bytes = 0, write_bytes = 0;
    uint64_t seen = 0;    // scan generation
    bool placed = false;  // own series or "other" decided (at its first good stat read)
    std::string device;   // "pid<P>" when it has series of its own, else ""
    // Name and command line of its last "process" note. A process seen between its fork and
    // its exec still shows its parent's: it is read again at the next ticks, and a change is
    // noted again (the newest note is the process's).
    std::string noted;
    int rechecks = 0;
  };
  // One member's stat at this tick (`stat_text` lives in the member's own buffer).
  struct Reading {
    int pid;
    Member* m;
    PidStat st;
    std::string_view stat_text;
  };
  struct Pending {
    int pid;
    int ppid;
  };
  void ScanProc(SampleSink& sink);
  void ScanChildren();
  void ScanCgroup(SampleSink& sink);
  void AddMember(int pid);
  bool IsRoot(int pid) const;
  // Gives `pid` series of its own while fewer than kMaxProcessSeries were given, and notes who
  // it is; `stat_text` is its /proc/<pid>/stat.
  void Place(int pid, Member& m, std::string_view stat_text, const PidStat& st, const Tick& tick,
             SampleSink& sink);
  // Writes the member's "process" note when its name or command line differ from the last one.
  void Note(int pid, Member& m, std::string_view stat_text, const PidStat& st, const Tick& tick,
            SampleSink& sink);

  std::string proc_root_;
  std::vector<int> root_pids_;
  ProcFile cgroup_procs_;  // open only in cgroup mode
  bool cgroup_mode_ = false;
  int proc_dir_fd_ = -1;
  std::vector<char> dirent_buffer_;
  std::unordered_map<int, Member> members_;
  std::unordered_map<int, uint64_t> others_;  // pid -> generation last seen
  std::vector<Pending> pending_;
  std::vector<int> worklist_;
  std::vector<Reading> readings_;
  bool children_supported_ = false;
  int64_t last_full_scan_ns_ = 0;
  int64_t min_interval_ns_ = 0;
  uint64_t generation_ = 0;
  int own_series_given_ = 0;
  std::vector<char> cmdline_buffer_;
  bool first_sample_ = true;
  int64_t prev_mono_ns_ = 0;
  double ticks_per_second_;
  double page_bytes_;
};
}  // namespace trainprof::collect
