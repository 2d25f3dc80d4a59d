#include "cli/run_summary.h"

#include <pwd.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/json_dump.h"
#include "cli/cost_command.h"
#include "store/run_directory.h"
#include "store/run_reader.h"

namespace trainprof::cli {
namespace {

std::string UserName() {
  const passwd* pw = getpwuid(geteuid());
  if (pw != nullptr && pw->pw_name != nullptr) return pw->pw_name;
  return std::to_string(geteuid());
}

}  // namespace

Status WriteRunSummary(const std::string& run_dir, const cost::CostReport* report,
                       const std::string& why_not) {
  nlohmann::json j;
  j["summary_version"] = kRunSummaryVersion;
  j["user"] = UserName();
  TP_ASSIGN_OR_RETURN(std::string run_json,
                      ReadFileToString(JoinPath(run_dir, store::kRunJsonName)));
  j["run"] = nlohmann::json::parse(run_json, nullptr, /*allow_exceptions=*/false);
  if (j["run"].is_discarded()) return DataLoss(run_dir + ": run.json is not JSON");
  if (report != nullptr) {
    nlohmann::json c = nlohmann::json::parse(cost::CostReportToJson(*report), nullptr, false);
    if (c.is_discarded()) return Internal("cost report is not JSON");
    if (c.contains("nodes") && c["nodes"].is_array()) {
      for (auto& n : c["nodes"]) n.erase("gpus");  // per-GPU detail: not a fleet's concern
    }
    j["cost"] = std::move(c);
    j["cost_error"] = nullptr;
  } else {
    j["cost"] = nullptr;
    j["cost_error"] = why_not;
  }
  return WriteFileAtomically(JoinPath(run_dir, kRunSummaryName), DumpJson(j, -1) + "\n");
}

Status WriteRunSummaryFor(const std::string& run_dir) {
  TP_ASSIGN_OR_RETURN(auto reader, store::RunReader::Open(run_dir));
  TP_ASSIGN_OR_RETURN(cost::Catalog catalog, LoadCatalogForCli(""));
  auto c = cost::ComputeCost(*reader, catalog, cost::CostOptions{});
  if (!c.ok()) return WriteRunSummary(run_dir, nullptr, c.status().message());
  return WriteRunSummary(run_dir, &*c, "");
}

}  // namespace trainprof::cli
