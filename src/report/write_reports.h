#pragma once
// Writes a run's report files: what `trainprof report` runs and what `record` calls when the
// job ends. Threads: call from one thread; it reads the run through its own RunReader.

#include <optional>
#include <string>

#include "base/status.h"
#include "report/report_model.h"

namespace trainprof::report {

struct WriteOptions {
  // Empty html/json paths mean <run_dir>/report.html and <run_dir>/report.json; set
  // write_html / write_json to false to skip one. No PDF unless pdf_path is set.
  std::string html_path, json_path, pdf_path;
  bool write_html = true;
  bool write_json = true;
  BuildOptions build;
  // Chromium to print the PDF with; empty: $TRAINPROF_CHROMIUM, then chromium / chromium-browser /
  // google-chrome on PATH.
  std::string chromium;
};

struct WrittenReports {
  std::string html_path, json_path, pdf_path;  // what was written ("" when not)
  int64_t html_bytes = 0, json_bytes = 0;
};

StatusOr<WrittenReports> WriteReports(const std::string& run_dir, const WriteOptions& options);

// The Chromium executable to use, or NotFound with a message saying how to install it.
StatusOr<std::string> FindChromium(const std::string& preferred);
// Prints an HTML file to PDF with headless Chromium (after its scripts ran).
Status PrintPdf(const std::string& chromium, const std::string& html_path,
                const std::string& pdf_path);

}  // namespace trainprof::report
