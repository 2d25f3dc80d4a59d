#include "cli/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "base/time.h"
#include "cli/output.h"

namespace trainprof::cli {
namespace {

std::atomic<bool> g_quiet{false};

constexpr int64_t kRedrawMs = 100;  // at most 10 draws a second
constexpr int64_t kDefaultShowAfterMs = 1000;

int64_t ShowAfterMs(int64_t asked) {
  if (asked >= 0) return asked;
  if (const char* env = std::getenv("TRAINPROF_PROGRESS_AFTER_MS"); env != nullptr && *env) {
    char* end = nullptr;
    long long v = std::strtoll(env, &end, 10);
    if (end != env && *end == '\0' && v >= 0) return std::min<long long>(v, 3'600'000);
  }
  return kDefaultShowAfterMs;
}

std::string Amount(double v, bool bytes) { return bytes ? FormatBytes(v) : FormatCount(v); }

std::string Clock(double seconds) {
  if (!(seconds >= 0) || seconds > 359'999) return "--:--";
  auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  }
  return buf;
}

void WriteAll(int fd, const std::string& text) {
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed terminal: progress is not worth an error
    off += static_cast<size_t>(n);
  }
}

int TerminalWidth(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
  return 80;
}

}  // namespace

bool Quiet() { return g_quiet.load(); }
void SetQuiet(bool quiet) { g_quiet.store(quiet); }

void AddQuietFlag(CLI::App* app) {
  app->add_flag_callback(
      "-q,--quiet", [] { SetQuiet(true); },
      "No progress line and no informational output (errors and warnings still print)");
}

std::string TerminalProgress::FormatLine(const std::string& label, const std::string& stage,
                                         int64_t done, int64_t total, double elapsed_s, bool bytes,
                                         int width) {
  std::string line = label + ":";
  if (!stage.empty()) line += " " + stage;
  // Work without units (stages only) shows its stage and clock.
  if (done > 0 || total > 0) line += " " + Amount(static_cast<double>(done), bytes);
  const double rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0;
  if (total > 0) {
    const int64_t shown = std::min(done, total);
    char pct[16];
    std::snprintf(pct, sizeof pct, "%.0f%%",
                  100.0 * static_cast<double>(shown) / static_cast<double>(total));
    line += " / " + Amount(static_cast<double>(total), bytes) + " (" + pct + ")";
  }
  if (done > 0 && elapsed_s > 0) line += "  " + Amount(rate, bytes) + "/s";
  if (total > 0 && done > 0 && rate > 0 && done < total) {
    line += "  ETA " + Clock(static_cast<double>(total - done) / rate);
  } else {
    line += "  " + Clock(elapsed_s);
  }
  if (width > 1 && static_cast<int>(line.size()) > width - 1) {
    line.resize(static_cast<size_t>(width - 1));
  }
  return line;
}

TerminalProgress::TerminalProgress(ProgressOptions options) : options_(std::move(options)) {
  options_.show_after_ms = ShowAfterMs(options_.show_after_ms);
  enabled_ = !Quiet() && (options_.force || ::isatty(options_.fd) == 1);
  start_mono_ns_ = MonotonicNowNs();
  if (enabled_) thread_ = std::thread([this] { Loop(); });
}

TerminalProgress::~TerminalProgress() { Finish(); }

void TerminalProgress::AddTotal(int64_t units) { total_.fetch_add(units); }
void TerminalProgress::Advance(int64_t units) { done_.fetch_add(units); }

void TerminalProgress::SetStage(const std::string& stage) {
  std::lock_guard<std::mutex> lock(mu_);
  stage_ = stage;
}

void TerminalProgress::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const double elapsed_s = static_cast<double>(MonotonicNowNs() - start_mono_ns_) / 1e9;
    if (elapsed_s * 1000 >= static_cast<double>(options_.show_after_ms)) {
      lock.unlock();
      Draw(elapsed_s);
      lock.lock();
    }
    cv_.wait_for(lock, std::chrono::milliseconds(kRedrawMs), [this] { return stop_; });
  }
}

void TerminalProgress::Draw(double elapsed_s) {
  std::string stage;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stage = stage_;
  }
  const std::string line = FormatLine(options_.label, stage, done_.load(), total_.load(), elapsed_s,
                                      options_.bytes, TerminalWidth(options_.fd));
  // Carriage return, the line, erase to its end: one write, so that it never tears.
  WriteAll(options_.fd, "\r" + line + "\x1b[K");
  drawn_ = true;
  draws_.fetch_add(1);
}

void TerminalProgress::Finish() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (drawn_) WriteAll(options_.fd, "\r\x1b[K");
}

}  // namespace trainprof::cli
