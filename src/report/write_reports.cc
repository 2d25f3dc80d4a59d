#include "report/write_reports.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "base/children.h"
#include "base/files.h"
#include "base/json_dump.h"
#include "report/report_html.h"
#include "report/report_json.h"
#include "store/run_directory.h"
#include "store/run_reader.h"

extern char** environ;

namespace trainprof::report {
namespace {

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  std::string p = path;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(start, end - start);
    if (!dir.empty() && IsExecutable(JoinPath(dir, name))) return JoinPath(dir, name);
    start = end + 1;
  }
  return "";
}

}  // namespace

StatusOr<std::string> FindChromium(const std::string& preferred) {
  if (!preferred.empty()) {
    if (IsExecutable(preferred)) return preferred;
    std::string found = FindOnPath(preferred);
    if (!found.empty()) return found;
    return NotFound("chromium not found at " + preferred);
  }
  if (const char* env = std::getenv("TRAINPROF_CHROMIUM"); env != nullptr && *env != '\0') {
    if (IsExecutable(env)) return std::string(env);
    return NotFound(std::string("TRAINPROF_CHROMIUM=") + env + " is not an executable");
  }
  for (const char* name :
       {"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}) {
    std::string found = FindOnPath(name);
    if (!found.empty()) return found;
  }
  return NotFound(
      "PDF needs headless Chromium, which is not installed: on Debian run `apt-get install -y "
      "chromium` (or set TRAINPROF_CHROMIUM); the HTML report has everything the PDF would");
}

Status PrintPdf(const std::string& chromium, const std::string& html_path,
                const std::string& pdf_path) {
  std::error_code ec;
  std::string abs_html = std::filesystem::absolute(html_path, ec).string();
  std::string abs_pdf = std::filesystem::absolute(pdf_path, ec).string();
  std::string profile = std::filesystem::temp_directory_path(ec).string() + "/trainprof-chromium-" +
                        std::to_string(getpid());
  std::vector<std::string> args = {chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                   "--no-first-run", "--disable-extensions",
                                   "--user-data-dir=" + profile,
                                   // Lets the charts' scripts run before printing.
                                   "--virtual-time-budget=10000", "--no-pdf-header-footer",
                                   "--print-to-pdf=" + abs_pdf, "file://" + abs_html};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // Chromium is chatty on stderr even when it succeeds; its exit status and the file decide.
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  int rc = 0;
  SpawnOwnedChild([&] {
    rc = posix_spawn(&pid, chromium.c_str(), &actions, nullptr, argv.data(), environ);
    return rc == 0 ? pid : -1;
  });
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return Internal("could not start " + chromium + ": " + ErrnoMessage(rc));
  int status = 0;
  WaitOwnedChild(pid, &status, 0);
  std::filesystem::remove_all(profile, ec);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Internal(chromium + " failed to print " + html_path + " to PDF (status " +
                    std::to_string(status) + ")");
  }
  if (!PathExists(pdf_path)) return Internal(chromium + " wrote no PDF at " + pdf_path);
  return OkStatus();
}

StatusOr<WrittenReports> WriteReports(const std::string& run_dir, const WriteOptions& options) {
  TP_ASSIGN_OR_RETURN(auto reader, store::RunReader::Open(run_dir));
  TP_ASSIGN_OR_RETURN(Report report, BuildReport(*reader, options.build));
  WrittenReports out;
  // Reports written into the run directory: refuse one another user controls (issue 20), and
  // write them 0600 wherever they go (they show the job's command line).
  if ((options.write_json && options.json_path.empty()) ||
      ((options.write_html || !options.pdf_path.empty()) && options.html_path.empty())) {
    TP_RETURN_IF_ERROR(store::CheckRunDirectoryForWriting(run_dir));
  }
  if (options.write_json) {
    out.json_path =
        options.json_path.empty() ? JoinPath(run_dir, "report.json") : options.json_path;
    std::string text = DumpJson(ReportToJson(report), 1) + "\n";
    TP_RETURN_IF_ERROR(WriteFileAtomically(out.json_path, text, 0600));
    out.json_bytes = static_cast<int64_t>(text.size());
  }
  std::string html_path =
      options.html_path.empty() ? JoinPath(run_dir, "report.html") : options.html_path;
  if (options.write_html || !options.pdf_path.empty()) {
    std::string html = RenderHtml(report);
    TP_RETURN_IF_ERROR(WriteFileAtomically(html_path, html, 0600));
    out.html_path = html_path;
    out.html_bytes = static_cast<int64_t>(html.size());
  }
  if (!options.pdf_path.empty()) {
    TP_ASSIGN_OR_RETURN(std::string chromium, FindChromium(options.chromium));
    TP_RETURN_IF_ERROR(PrintPdf(chromium, html_path, options.pdf_path));
    out.pdf_path = options.pdf_path;
  }
  return out;
}

}  // namespace trainprof::report
