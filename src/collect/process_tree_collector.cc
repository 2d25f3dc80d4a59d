#include "collect/process_tree_collector.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "collect/metric_catalog.h"
#include "model/data_quality.h"

namespace trainprof::collect {
namespace {

// Offsets in the kernel's struct linux_dirent64 {u64 ino; s64 off; u16 reclen; u8 type;
// char name[];}. getdents64 fills a caller buffer, so a directory scan allocates nothing
// (opendir would malloc its buffer each time).
constexpr size_t kDirentReclenOffset = 16;
constexpr size_t kDirentNameOffset = 19;

bool ParsePid(const char* name, int* pid) {
  int v = 0;
  if (*name == '\0') return false;
  for (const char* p = name; *p; ++p) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (*p - '0');
    if (v > 1 << 30) return false;
  }
  *pid = v;
  return true;
}

}  // namespace

bool ParsePidStat(std::string_view text, PidStat* out) {
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so start after the
  // last ')'.
  size_t close = text.rfind(')');
  if (close == std::string_view::npos) return false;
  std::string_view rest = text.substr(close + 1);
  std::string_view tok[22];
  for (auto& t : tok) {
    t = NextToken(&rest);
    if (t.empty()) return false;
  }
  // tok[0] is field 3 (state): field N is tok[N - 3].
  long long ppid = 0;
  if (!ParseI64(tok[1], &ppid) || !ParseU64(tok[11], &out->utime) ||
      !ParseU64(tok[12], &out->stime) || !ParseI64(tok[17], &out->num_threads) ||
      !ParseI64(tok[21], &out->rss_pages)) {
    return false;
  }
  out->ppid = static_cast<int>(ppid);
  out->state = tok[0][0];
  return true;
}

std::string_view PidStatName(std::string_view text) {
  size_t open = text.find('(');
  size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return {};
  return text.substr(open + 1, close - open - 1);
}

ProcessTreeCollector::ProcessTreeCollector(const std::string& proc_root, std::vector<int> root_pids)
    : proc_root_(proc_root),
      root_pids_(std::move(root_pids)),
      ticks_per_second_(static_cast<double>(sysconf(_SC_CLK_TCK))),
      page_bytes_(static_cast<double>(sysconf(_SC_PAGESIZE))) {
  dirent_buffer_.resize(32 * 1024);
  const std::string self_children =
      proc_root_ + "/self/task/" + std::to_string(static_cast<long>(::getpid())) + "/children";
  children_supported_ = PathExists(self_children);
}

std::unique_ptr<ProcessTreeCollector> ProcessTreeCollector::ForCgroup(
    const std::string& proc_root, const std::string& cgroup_dir) {
  auto c = std::make_unique<ProcessTreeCollector>(proc_root, std::vector<int>{});
  c->cgroup_mode_ = true;
  c->cgroup_procs_ = ProcFile(JoinPath(cgroup_dir, "cgroup.procs"));
  return c;
}

ProcessTreeCollector::~ProcessTreeCollector() {
  if (proc_dir_fd_ >= 0) ::close(proc_dir_fd_);
}

bool ProcessTreeCollector::IsRoot(int pid) const {
  return std::find(root_pids_.begin(), root_pids_.end(), pid) != root_pids_.end();
}

void ProcessTreeCollector::AddMember(int pid) {
  char path[64];
  Member m;
  std::snprintf(path, sizeof(path), "/%d/stat", pid);
  m.stat = ProcFile(proc_root_ + path, ProcFile::Kind::kSingleRecord);
  std::snprintf(path, sizeof(path), "/%d/io", pid);
  m.io = ProcFile(proc_root_ + path, ProcFile::Kind::kSingleRecord);
  std::snprintf(path, sizeof(path), "/%d/task/%d/children", pid, pid);
  m.children = ProcFile(proc_root_ + path);
  m.seen = generation_;
  // Counters stay 0: a process first seen after the first tick started during the interval.
  members_.emplace(pid, std::move(m));
}

void ProcessTreeCollector::Place(int pid, Member& m, std::string_view stat_text, const PidStat& st,
                                 const Tick& tick, SampleSink& sink) {
  m.placed = true;
  if (own_series_given_ >= kMaxProcessSeries) return;  // summed on "other"
  ++own_series_given_;
  m.device = "pid" + std::to_string(pid);
  m.rechecks = kCmdlineRechecks;
  Note(pid, m, stat_text, st, tick, sink);
}

void ProcessTreeCollector::Note(int pid, Member& m, std::string_view stat_text, const PidStat& st,
                                const Tick& tick, SampleSink& sink) {
  // One bounded read: the kernel gives at most what is asked of /proc/<pid>/cmdline.
  nlohmann::json args = nlohmann::json::array();
  char path[4096];
  std::snprintf(path, sizeof(path), "%s/%d/cmdline", proc_root_.c_str(), pid);
  cmdline_buffer_.resize(kMaxCmdlineBytes);
  const std::string_view name = PidStatName(stat_text);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = -1;
  if (fd >= 0) {
    n = ::read(fd, cmdline_buffer_.data(), cmdline_buffer_.size());
    ::close(fd);
  }
  std::string noted(name);
  noted.push_back('\0');
  if (n > 0) noted.append(cmdline_buffer_.data(), static_cast<size_t>(n));
  if (noted == m.noted) return;
  m.noted = std::move(noted);
  if (n > 0) {
    size_t start = 0;
    for (size_t i = 0; n > 0 && i <= static_cast<size_t>(n) && args.size() < kMaxCmdlineArgs; ++i) {
      if (i == static_cast<size_t>(n) || cmdline_buffer_[i] == '\0') {
        if (i > start || i < static_cast<size_t>(n)) {
          args.push_back(std::string(cmdline_buffer_.data() + start, i - start));
        }
        start = i + 1;
      }
    }
  }
  nlohmann::json note = {{"pid", pid},
                         {"ppid", st.ppid},
                         {"name", std::string(name)},
                         {"cmdline", std::move(args)},
                         {"ts_ns", tick.wall_ns}};
  // Names and arguments are bytes, not always UTF-8: invalid sequences become U+FFFD.
  sink.Note("process", note.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void ProcessTreeCollector::ScanProc(SampleSink& sink) {
  if (proc_dir_fd_ < 0) {
    proc_dir_fd_ = ::open(proc_root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (proc_dir_fd_ < 0) {
      sink.Count(kReadErrorsCounter, 1);
      return;
    }
  }
  ::lseek(proc_dir_fd_, 0, SEEK_SET);
  pending_.clear();
  for (;;) {
    long n = ::syscall(SYS_getdents64, proc_dir_fd_, dirent_buffer_.data(), dirent_buffer_.size());
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      const char* entry = dirent_buffer_.data() + off;
      unsigned short reclen = 0;
      std::memcpy(&reclen, entry + kDirentReclenOffset, sizeof(reclen));
      off += reclen;
      int pid = 0;
      if (!ParsePid(entry + kDirentNameOffset, &pid)) continue;
      if (auto it = members_.find(pid); it != members_.end()) {
        it->second.seen = generation_;
      } else if (auto ot = others_.find(pid); ot != others_.end()) {
        ot->second = generation_;
      } else {
        pending_.push_back({pid, -1});
      }
    }
  }
  // New pids: read their parent once.
  char path[4096];
  char buf[1024];
  for (Pending& p : pending_) {
    std::snprintf(path, sizeof(path), "%s/%d/stat", proc_root_.c_str(), p.pid);
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // exited since the scan
    ssize_t len = ::read(fd, buf, sizeof(buf));
    ::close(fd);
    PidStat st;
    if (len > 0 && ParsePidStat(std::string_view(buf, static_cast<size_t>(len)), &st)) {
      p.ppid = st.ppid;
    } else if (len > 0) {
      sink.Count(model::dq::kParseErrors, 1);
    }
  }
  // A new child and its new grandchild can appear in one scan, in any order: settle parents
  // before children by repeating until nothing changes.
  bool changed = true;
  while (changed) {
    changed = false;
    for (Pending& p : pending_) {
      if (p.pid == 0) continue;  // settled
      if (IsRoot(p.pid) || members_.contains(p.ppid)) {
        AddMember(p.pid);
      } else if (p.ppid >= 0 && !others_.contains(p.ppid) && p.ppid != 0) {
        bool parent_pending = false;
        for (const Pending& q : pending_) parent_pending |= (q.pid == p.ppid);
        if (parent_pending) continue;
        others_[p.pid] = generation_;
      } else {
        others_[p.pid] = generation_;
      }
      p.pid = 0;
      changed = true;
    }
  }
  std::erase_if(others_, [this](const auto& kv) { return kv.second != generation_; });
}

void ProcessTreeCollector::ScanChildren() {
  worklist_.clear();
  for (auto& [pid, m] : members_) {
    m.seen = generation_;  // liveness is decided by reading the member's stat below
    worklist_.push_back(pid);
  }
  // New members join the worklist so that their own children are found in the same pass.
  for (size_t i = 0; i < worklist_.size(); ++i) {
    auto it = members_.find(worklist_[i]);
    if (it == members_.end()) continue;
    std::string_view text;
    if (!it->second.children.Read(&text)) continue;
    for (std::string_view token = NextToken(&text); !token.empty(); token = NextToken(&text)) {
      long long child = 0;
      if (!ParseI64(token, &child) || members_.contains(static_cast<int>(child))) continue;
      // Rehashing keeps nodes in place: `text` (in the member's buffer) stays valid.
      AddMember(static_cast<int>(child));
      worklist_.push_back(static_cast<int>(child));
    }
  }
}

void ProcessTreeCollector::ScanCgroup(SampleSink& sink) {
  std::string_view text;
  if (!cgroup_procs_.Read(&text)) {
    sink.Count(kReadErrorsCounter, 1);
    return;
  }
  TextCursor cursor(text);
  std::string_view line;
  while (cursor.NextLine(&line)) {
    long long pid = 0;
    if (line.empty()) continue;
    if (!ParseI64(line, &pid) || pid <= 0) {
      sink.Count(model::dq::kParseErrors, 1);
      continue;
    }
    auto it = members_.find(static_cast<int>(pid));
    if (it != members_.end()) {
      it->second.seen = generation_;
    } else {
      AddMember(static_cast<int>(pid));
    }
  }
}

void ProcessTreeCollector::Sample(const Tick& tick, SampleSink& sink) {
  // A quarter of the interval is slack for the ticks' jitter: at 100 ms ticks and a 200 ms
  // minimum, a tick 199.9 ms after the last reading must not push the next one to 300 ms.
  if (!first_sample_ && tick.mono_ns - prev_mono_ns_ < min_interval_ns_ - min_interval_ns_ / 4) {
    return;
  }
  ++generation_;
  if (cgroup_mode_) {
    ScanCgroup(sink);
  } else if (first_sample_ || !children_supported_ ||
             tick.mono_ns - last_full_scan_ns_ >= kFullScanIntervalNs) {
    ScanProc(sink);
    last_full_scan_ns_ = tick.mono_ns;
  } else {
    ScanChildren();
  }
  unsigned long long cpu_delta = 0, read_delta = 0, write_delta = 0;
  double rss_bytes = 0, threads = 0;
  int count = 0;
  bool have_io = false;
  const bool have_rate = !first_sample_ && tick.mono_ns > prev_mono_ns_;
  const double dt_s = have_rate ? static_cast<double>(tick.mono_ns - prev_mono_ns_) / 1e9 : 0;
  // The processes past kMaxProcessSeries, summed.
  unsigned long long other_cpu_delta = 0;
  double other_rss_bytes = 0, other_threads = 0;
  int other_count = 0;
  readings_.clear();
  for (auto it = members_.begin(); it != members_.end();) {
    Member& m = it->second;
    Reading r{it->first, &m, {}, {}};
    if (m.seen != generation_ || !m.stat.Read(&r.stat_text)) {
      it = members_.erase(it);  // exited (erasing keeps the other members in place)
      continue;
    }
    if (!ParsePidStat(r.stat_text, &r.st)) {
      sink.Count(model::dq::kParseErrors, 1);
      ++it;
      continue;
    }
    readings_.push_back(r);
    ++it;
  }
  // Series of their own go to the oldest processes first (pid order: the launcher and the
  // training processes before their workers, barring a pid wrap), not to hash order.
  std::sort(readings_.begin(), readings_.end(),
            [](const Reading& a, const Reading& b) { return a.pid < b.pid; });
  for (Reading& r : readings_) {
    if (!r.m->placed) {
      Place(r.pid, *r.m, r.stat_text, r.st, tick, sink);
    } else if (r.m->rechecks > 0 && !r.m->device.empty()) {
      --r.m->rechecks;
      Note(r.pid, *r.m, r.stat_text, r.st, tick, sink);
    }
  }
  for (Reading& r : readings_) {
    Member& m = *r.m;
    const PidStat& st = r.st;
    const unsigned long long cpu = st.utime + st.stime;
    unsigned long long own_cpu_delta = 0;
    if (!first_sample_ && cpu >= m.cpu_ticks) own_cpu_delta = cpu - m.cpu_ticks;
    cpu_delta += own_cpu_delta;
    m.cpu_ticks = cpu;
    // A zombie (exited, not yet reaped) still shows its final CPU, which counts, but holds no
    // memory or threads and is no longer a running process; so does a process caught exiting,
    // its memory already released but not yet a zombie (no resident page: a live process of the
    // tree always has some).
    const bool exited = st.state == 'Z' || st.state == 'X' || st.rss_pages == 0;
    const double own_rss_bytes = static_cast<double>(st.rss_pages) * page_bytes_;
    if (!exited) {
      rss_bytes += own_rss_bytes;
      threads += static_cast<double>(st.num_threads);
      ++count;
    }
    if (!m.device.empty()) {
      if (!exited) {
        sink.Add(metric::kPidRss, m.device, own_rss_bytes);
        sink.Add(metric::kPidThreads, m.device, static_cast<double>(st.num_threads));
      }
      if (have_rate) {
        sink.Add(metric::kPidCpu, m.device,
                 static_cast<double>(own_cpu_delta) / ticks_per_second_ / dt_s);
      }
    } else {
      other_cpu_delta += own_cpu_delta;
      if (!exited) {
        other_rss_bytes += own_rss_bytes;
        other_threads += static_cast<double>(st.num_threads);
        ++other_count;
      }
    }
    // /proc/<pid>/io needs ptrace rights: unreadable for other users' processes.
    std::string_view text;
    if (m.io.Read(&text)) {
      unsigned long long rb = 0, wb = 0;
      TextCursor cursor(text);
      std::string_view line;
      while (cursor.NextLine(&line)) {
        std::string_view key, rest;
        if (!SplitKey(line, &key, &rest)) continue;
        if (key == "read_bytes") ParseU64(NextToken(&rest), &rb);
        if (key == "write_bytes") ParseU64(NextToken(&rest), &wb);
      }
      if (!first_sample_) {
        if (rb >= m.read_bytes) read_delta += rb - m.read_bytes;
        if (wb >= m.write_bytes) write_delta += wb - m.write_bytes;
      }
      m.read_bytes = rb;
      m.write_bytes = wb;
      have_io = true;
    }
  }
  sink.Add(metric::kProcessCount, "tree", count);
  if (count > 0) {
    sink.Add(metric::kProcessRss, "tree", rss_bytes);
    sink.Add(metric::kProcessThreads, "tree", threads);
  }
  if (other_count > 0) {
    sink.Add(metric::kPidRss, "other", other_rss_bytes);
    sink.Add(metric::kPidThreads, "other", other_threads);
  }
  if (have_rate && (other_count > 0 || other_cpu_delta > 0)) {
    sink.Add(metric::kPidCpu, "other",
             static_cast<double>(other_cpu_delta) / ticks_per_second_ / dt_s);
  }
  if (have_rate) {
    sink.Add(metric::kProcessCpu, "tree",
             static_cast<double>(cpu_delta) / ticks_per_second_ / dt_s);
    if (have_io) {
      sink.Add(metric::kProcessRead, "tree", static_cast<double>(read_delta) / dt_s);
      sink.Add(metric::kProcessWrite, "tree", static_cast<double>(write_delta) / dt_s);
    }
  }
  first_sample_ = false;
  prev_mono_ns_ = tick.mono_ns;
}

std::vector<int> ProcessTreeCollector::MemberPids() const {
  std::vector<int> pids;
  for (const auto& [pid, m] : members_) pids.push_back(pid);
  std::sort(pids.begin(), pids.end());
  return pids;
}

}  // namespace trainprof::collect
