#include "analyze/cost/catalog.h"

#include <filesystem>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "analyze/cost/csv.h"
#include "analyze/cost/embedded_catalog.h"
#include "base/files.h"
#include "base/platform.h"
#include "base/time.h"

namespace trainprof::cost {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Reads the cells of one record by column name, turning bad cells into errors that name the
// file, the line and the field.
class RowReader {
 public:
  RowReader(const CsvTable& table, const CsvRecord& record, const std::string& origin)
      : table_(table), record_(record), origin_(origin) {}

  bool Has(const std::string& column) const { return table_.Column(column).has_value(); }

  std::string Text(const std::string& column) const {
    auto i = table_.Column(column);
    return i ? Trim(record_.cells[*i]) : "";
  }

  // Empty cell: nullopt. A cell that is not a finite, non-negative number: an error.
  StatusOr<std::optional<double>> Number(const std::string& column) const {
    std::string text = Text(column);
    if (text.empty()) return std::optional<double>();
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || errno != 0 || !std::isfinite(v)) {
      return Error(column, "'" + text + "' is not a number");
    }
    if (v < 0) return Error(column, "'" + text + "' is negative");
    return std::optional<double>(v);
  }

  StatusOr<std::optional<int>> Integer(const std::string& column) const {
    TP_ASSIGN_OR_RETURN(auto v, Number(column));
    if (!v) return std::optional<int>();
    if (*v != std::floor(*v) || *v > 1e6) {
      return Error(column, "'" + Text(column) + "' is not a whole number");
    }
    return std::optional<int>(static_cast<int>(*v));
  }

  StatusOr<std::string> Date(const std::string& column) const {
    std::string text = Text(column);
    if (!text.empty() && !ParseDateDays(text)) {
      return Error(column, "'" + text + "' is not a date (YYYY-MM-DD)");
    }
    return text;
  }

  Status Error(const std::string& column, const std::string& what) const {
    return InvalidArgument(Where() + ": field '" + column + "': " + what);
  }
  std::string Where() const { return origin_ + ":" + std::to_string(record_.line); }

 private:
  const CsvTable& table_;
  const CsvRecord& record_;
  const std::string& origin_;
};

Status RequireColumns(const CsvTable& table, const std::string& origin,
                      std::initializer_list<const char*> columns) {
  for (const char* c : columns) {
    if (!table.Column(c)) {
      return InvalidArgument(origin + ":1: missing column '" + std::string(c) + "'");
    }
  }
  return OkStatus();
}

// Reads one instance row. Cells absent from a user file stay empty.
StatusOr<InstanceType> ReadInstance(const RowReader& r) {
  InstanceType t;
  t.provider = r.Text("provider");
  t.service = r.Text("service");
  t.instance_type = r.Text("instance_type");
  if (t.instance_type.empty()) return r.Error("instance_type", "empty");
  t.region = r.Text("region");
  t.family = r.Text("family");
  TP_ASSIGN_OR_RETURN(t.vcpus, r.Number("vcpus"));
  TP_ASSIGN_OR_RETURN(t.memory_gib, r.Number("memory_gib"));
  TP_ASSIGN_OR_RETURN(t.accel_count, r.Integer("accel_count"));
  t.accel_model = r.Text("accel_model");
  TP_ASSIGN_OR_RETURN(t.accel_mem_gib_each, r.Number("accel_mem_gib_each"));
  TP_ASSIGN_OR_RETURN(t.accel_mem_mib_api, r.Number("accel_mem_mib_api"));
  TP_ASSIGN_OR_RETURN(t.local_nvme_gb, r.Number("local_nvme_gb"));
  TP_ASSIGN_OR_RETURN(t.price_usd_per_hour, r.Number("price_usd_per_hour"));
  t.price_basis = r.Text("price_basis");
  t.price_source = r.Text("price_source");
  TP_ASSIGN_OR_RETURN(t.price_as_of, r.Date("price_as_of"));
  TP_ASSIGN_OR_RETURN(t.spot_discount_pct, r.Number("spot_discount_pct"));
  if (t.spot_discount_pct && *t.spot_discount_pct >= 100) {
    return r.Error("spot_discount_pct", "must be below 100");
  }
  TP_ASSIGN_OR_RETURN(t.spot_price_usd_per_hour, r.Number("spot_price_usd_per_hour"));
  t.spot_interrupt_bucket = r.Text("spot_interrupt_bucket");
  t.spot_source = r.Text("spot_source");
  TP_ASSIGN_OR_RETURN(t.spot_as_of, r.Date("spot_as_of"));
  if (t.spot_price_usd_per_hour) {
    if (t.spot_as_of.empty()) return r.Error("spot_as_of", "a spot price needs its date");
    if (t.spot_source.empty()) return r.Error("spot_source", "a spot price needs its source");
  }
  t.confidence = r.Text("confidence");
  t.notes = r.Text("notes");
  t.spec_source = r.Text("spec_source");
  t.origin = r.Where();
  if (t.price_usd_per_hour) {
    // A price is only as good as its date and source.
    if (t.price_as_of.empty()) return r.Error("price_as_of", "a price needs its date");
    if (t.price_source.empty()) return r.Error("price_source", "a price needs its source");
  }
  if (t.accel_count && *t.accel_count > 0 && t.accel_model.empty()) {
    return r.Error("accel_model", "empty while accel_count is " + r.Text("accel_count"));
  }
  return t;
}

StatusOr<std::vector<InstanceType>> ParseInstances(const std::string& text,
                                                   const std::string& origin, bool user_file) {
  TP_ASSIGN_OR_RETURN(CsvTable table, ParseCsv(text, origin));
  if (user_file) {
    TP_RETURN_IF_ERROR(RequireColumns(
        table, origin, {"instance_type", "price_usd_per_hour", "price_source", "price_as_of"}));
  } else {
    TP_RETURN_IF_ERROR(RequireColumns(
        table, origin,
        {"provider", "service", "instance_type", "region", "family", "vcpus", "memory_gib",
         "accel_count", "accel_model", "accel_mem_gib_each", "local_nvme_gb", "price_usd_per_hour",
         "price_source", "price_as_of", "spot_discount_pct"}));
  }
  std::vector<InstanceType> out;
  std::set<std::string> seen;
  for (const CsvRecord& rec : table.records) {
    RowReader r(table, rec, origin);
    TP_ASSIGN_OR_RETURN(InstanceType t, ReadInstance(r));
    if (!seen.insert(Lower(t.instance_type)).second) {
      return r.Error("instance_type", "'" + t.instance_type + "' appears twice");
    }
    out.push_back(std::move(t));
  }
  return out;
}

StatusOr<std::vector<Accelerator>> ParseAccelerators(const std::string& text,
                                                     const std::string& origin) {
  TP_ASSIGN_OR_RETURN(CsvTable table, ParseCsv(text, origin));
  TP_RETURN_IF_ERROR(
      RequireColumns(table, origin,
                     {"accel_model", "memory_gib", "mem_bw_gbs", "fp32_tflops",
                      "bf16_tensor_tflops_dense", "fp16_tensor_tflops_dense", "source", "as_of"}));
  std::vector<Accelerator> out;
  for (const CsvRecord& rec : table.records) {
    RowReader r(table, rec, origin);
    Accelerator a;
    a.accel_model = r.Text("accel_model");
    if (a.accel_model.empty()) return r.Error("accel_model", "empty");
    TP_ASSIGN_OR_RETURN(a.memory_gib, r.Number("memory_gib"));
    TP_ASSIGN_OR_RETURN(a.mem_bw_gbs, r.Number("mem_bw_gbs"));
    TP_ASSIGN_OR_RETURN(a.fp32_tflops, r.Number("fp32_tflops"));
    TP_ASSIGN_OR_RETURN(a.tf32_tensor_tflops, r.Number("tf32_tensor_tflops_dense"));
    TP_ASSIGN_OR_RETURN(a.bf16_tensor_tflops, r.Number("bf16_tensor_tflops_dense"));
    TP_ASSIGN_OR_RETURN(a.fp16_tensor_tflops, r.Number("fp16_tensor_tflops_dense"));
    a.source = r.Text("source");
    TP_ASSIGN_OR_RETURN(a.as_of, r.Date("as_of"));
    a.confidence = r.Text("confidence");
    out.push_back(std::move(a));
  }
  return out;
}

StatusOr<std::vector<StoragePrice>> ParseStorage(const std::string& text,
                                                 const std::string& origin) {
  TP_ASSIGN_OR_RETURN(CsvTable table, ParseCsv(text, origin));
  TP_RETURN_IF_ERROR(RequireColumns(
      table, origin,
      {"provider", "service", "region", "price_usd_per_gb_month", "price_source", "price_as_of"}));
  std::vector<StoragePrice> out;
  for (const CsvRecord& rec : table.records) {
    RowReader r(table, rec, origin);
    StoragePrice s;
    s.provider = r.Text("provider");
    s.service = r.Text("service");
    s.region = r.Text("region");
    s.storage = r.Text("storage");
    TP_ASSIGN_OR_RETURN(auto price, r.Number("price_usd_per_gb_month"));
    if (!price) return r.Error("price_usd_per_gb_month", "empty");
    s.price_usd_per_gb_month = *price;
    TP_ASSIGN_OR_RETURN(s.default_volume_gb, r.Number("default_volume_gb"));
    s.price_source = r.Text("price_source");
    if (s.price_source.empty()) return r.Error("price_source", "a price needs its source");
    TP_ASSIGN_OR_RETURN(s.price_as_of, r.Date("price_as_of"));
    if (s.price_as_of.empty()) return r.Error("price_as_of", "a price needs its date");
    s.notes = r.Text("notes");
    out.push_back(std::move(s));
  }
  return out;
}

// The directory of the file holding this code: the executable (trainprof/bin/trainprof in a
// wheel, bin/trainprof in a prefix) or the extension module (trainprof/_core*.so), so that the
// Python API finds the same catalog as the CLI. Never a path of the machine that built it.
std::string CodeDir() {
  Dl_info info;
  std::string path;
  if (dladdr(reinterpret_cast<void*>(&LoadDefaultCatalog), &info) != 0 &&
      info.dli_fname != nullptr && std::strchr(info.dli_fname, '/') != nullptr) {
    path = info.dli_fname;
  } else {
    path = platform::SelfExecutablePath();
    if (path.empty()) return "";
  }
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

bool HasCatalogFiles(const std::string& dir) {
  return PathExists(JoinPath(dir, "instances.csv")) &&
         PathExists(JoinPath(dir, "accelerators.csv")) && PathExists(JoinPath(dir, "storage.csv"));
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

std::optional<double> InstanceType::AcceleratorMemoryBytes() const {
  if (accel_mem_mib_api) return *accel_mem_mib_api * 1024.0 * 1024.0;
  if (accel_mem_gib_each) return *accel_mem_gib_each * 1024.0 * 1024.0 * 1024.0;
  return std::nullopt;
}

std::optional<double> Accelerator::TensorTflops16() const {
  if (bf16_tensor_tflops) return bf16_tensor_tflops;
  return fp16_tensor_tflops;
}

StatusOr<Catalog> ParseCatalog(const std::string& instances_csv,
                               const std::string& instances_origin,
                               const std::string& accelerators_csv,
                               const std::string& accelerators_origin,
                               const std::string& storage_csv, const std::string& storage_origin) {
  Catalog c;
  TP_ASSIGN_OR_RETURN(c.instances, ParseInstances(instances_csv, instances_origin, false));
  TP_ASSIGN_OR_RETURN(c.accelerators, ParseAccelerators(accelerators_csv, accelerators_origin));
  TP_ASSIGN_OR_RETURN(c.storage, ParseStorage(storage_csv, storage_origin));
  return c;
}

StatusOr<Catalog> LoadCatalogDir(const std::string& dir) {
  std::string paths[3] = {JoinPath(dir, "instances.csv"), JoinPath(dir, "accelerators.csv"),
                          JoinPath(dir, "storage.csv")};
  std::string texts[3];
  for (int i = 0; i < 3; ++i) {
    auto text = ReadFileToString(paths[i]);
    if (!text.ok()) return text.status().WithContext("catalog");
    texts[i] = std::move(*text);
  }
  TP_ASSIGN_OR_RETURN(Catalog c,
                      ParseCatalog(texts[0], paths[0], texts[1], paths[1], texts[2], paths[2]));
  c.origin = dir;
  return c;
}

StatusOr<Catalog> LoadEmbeddedCatalog() {
  TP_ASSIGN_OR_RETURN(
      Catalog c,
      ParseCatalog(EmbeddedInstancesCsv(), "embedded instances.csv", EmbeddedAcceleratorsCsv(),
                   "embedded accelerators.csv", EmbeddedStorageCsv(), "embedded storage.csv"));
  c.origin = "embedded copy of data/catalog (built in)";
  return c;
}

StatusOr<Catalog> LoadDefaultCatalog() {
  if (const char* env = std::getenv("TRAINPROF_CATALOG_DIR"); env != nullptr && *env) {
    // An explicit directory that is broken is an error, not a silent fallback.
    return LoadCatalogDir(env);
  }
  // Only paths relative to the installed code; a build tree's binaries use the embedded copy
  // (rebuilt whenever data/catalog changes).
  std::vector<std::string> candidates;
  std::string code = CodeDir();
  if (!code.empty()) {
    candidates.push_back(JoinPath(code, "../data/catalog"));  // wheel: trainprof/bin/trainprof
    candidates.push_back(JoinPath(code, "data/catalog"));     // wheel: trainprof/_core*.so
    candidates.push_back(JoinPath(code, "../share/trainprof/catalog"));  // a prefix install
  }
  for (const std::string& dir : candidates) {
    // One spelling of the directory whichever binary found it (the CLI or the extension).
    if (HasCatalogFiles(dir))
      return LoadCatalogDir(std::filesystem::path(dir).lexically_normal().string());
  }
  return LoadEmbeddedCatalog();
}

Status MergeInstancesText(Catalog* catalog, const std::string& text, const std::string& origin) {
  TP_ASSIGN_OR_RETURN(auto rows, ParseInstances(text, origin, true));
  for (InstanceType& row : rows) {
    InstanceType* existing = nullptr;
    for (InstanceType& t : catalog->instances) {
      if (Lower(t.instance_type) == Lower(row.instance_type)) existing = &t;
    }
    if (existing == nullptr) {
      if (row.provider.empty()) row.provider = "custom";
      catalog->instances.push_back(std::move(row));
      continue;
    }
    auto take = [](auto& dst, const auto& src) {
      if constexpr (std::is_same_v<std::decay_t<decltype(src)>, std::string>) {
        if (!src.empty()) dst = src;
      } else {
        if (src) dst = src;
      }
    };
    take(existing->provider, row.provider);
    take(existing->service, row.service);
    take(existing->region, row.region);
    take(existing->family, row.family);
    take(existing->vcpus, row.vcpus);
    take(existing->memory_gib, row.memory_gib);
    take(existing->accel_count, row.accel_count);
    take(existing->accel_model, row.accel_model);
    take(existing->accel_mem_gib_each, row.accel_mem_gib_each);
    take(existing->accel_mem_mib_api, row.accel_mem_mib_api);
    take(existing->local_nvme_gb, row.local_nvme_gb);
    if (row.price_usd_per_hour) {
      // The price, its basis, date and source travel together.
      existing->price_usd_per_hour = row.price_usd_per_hour;
      existing->price_basis = row.price_basis.empty() ? "user catalog" : row.price_basis;
      existing->price_source = row.price_source;
      existing->price_as_of = row.price_as_of;
    }
    if (row.spot_discount_pct || row.spot_price_usd_per_hour) {
      // The spot figures, their source and date travel together too.
      existing->spot_discount_pct = row.spot_discount_pct;
      existing->spot_price_usd_per_hour = row.spot_price_usd_per_hour;
      existing->spot_source = row.spot_source;
      existing->spot_as_of = row.spot_as_of;
    }
    take(existing->spot_interrupt_bucket, row.spot_interrupt_bucket);
    take(existing->confidence, row.confidence);
    take(existing->notes, row.notes);
    existing->origin = row.origin;
  }
  catalog->origin += " + " + origin;
  return OkStatus();
}

Status MergeInstancesFile(Catalog* catalog, const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status().WithContext("catalog");
  return MergeInstancesText(catalog, *text, path);
}

const InstanceType* FindInstance(const Catalog& catalog, const std::string& instance_type) {
  std::string want = Lower(Trim(instance_type));
  for (const InstanceType& t : catalog.instances) {
    if (Lower(t.instance_type) == want) return &t;
  }
  return nullptr;
}

const Accelerator* FindAccelerator(const Catalog& catalog, const std::string& accel_model) {
  std::string want = Lower(accel_model);
  for (const Accelerator& a : catalog.accelerators) {
    if (Lower(a.accel_model) == want) return &a;
  }
  return nullptr;
}

const StoragePrice* FindStorage(const Catalog& catalog, const std::string& provider,
                                const std::string& service, const std::string& region) {
  const StoragePrice* any = nullptr;
  for (const StoragePrice& s : catalog.storage) {
    if (s.provider != provider || s.service != service) continue;
    if (s.region == region) return &s;
    if (any == nullptr) any = &s;
  }
  return region.empty() ? any : nullptr;
}

std::optional<int64_t> ParseDateDays(const std::string& date) {
  if (date.size() != 10 || date[4] != '-' || date[7] != '-') return std::nullopt;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (!std::isdigit(static_cast<unsigned char>(date[i]))) return std::nullopt;
  }
  int y = std::stoi(date.substr(0, 4));
  unsigned m = static_cast<unsigned>(std::stoi(date.substr(5, 2)));
  unsigned d = static_cast<unsigned>(std::stoi(date.substr(8, 2)));
  static constexpr unsigned kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m < 1 || m > 12 || d < 1 || d > kDays[m - 1]) return std::nullopt;
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (m == 2 && d == 29 && !leap) return std::nullopt;
  // Days from civil (H. Hinnant's algorithm).
  y -= m <= 2;
  const int era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return static_cast<int64_t>(era) * 146097 + static_cast<int64_t>(doe) - 719468;
}

std::optional<int64_t> AgeDays(const std::string& date, int64_t now_ns) {
  auto days = ParseDateDays(date);
  if (!days) return std::nullopt;
  int64_t now_days = now_ns / (86400 * kNanosPerSecond);
  return now_days - *days;
}

std::vector<std::string> StalePriceWarnings(const InstanceType& row, int64_t now_ns,
                                            int max_age_days) {
  std::vector<std::string> out;
  auto check = [&](const std::string& what, const std::string& date) {
    auto age = AgeDays(date, now_ns);
    if (age && *age > max_age_days) {
      out.push_back(what + " of " + row.instance_type + " is from " + date + " (" +
                    std::to_string(*age) + " days old, over " + std::to_string(max_age_days) +
                    "): refresh the catalog or pass --price-usd-per-hour");
    }
  };
  if (row.price_usd_per_hour) check("the price", row.price_as_of);
  return out;
}

double SpotPriceUsdPerHour(const Catalog& catalog, const InstanceType& row, double* discount_pct,
                           std::string* basis) {
  std::string b;
  const double d = TypicalSpotDiscountPct(catalog, row, &b);
  if (discount_pct != nullptr) *discount_pct = d;
  if (basis != nullptr) *basis = b;
  // A spot list price is the price, not a rounded discount off the on-demand one.
  if (row.spot_price_usd_per_hour) return *row.spot_price_usd_per_hour;
  return row.price_usd_per_hour.value_or(0) * (1 - d / 100);
}

std::vector<std::string> StaleSpotWarnings(const InstanceType& row, int64_t now_ns,
                                           int max_age_days) {
  std::vector<std::string> out;
  auto age = AgeDays(row.spot_as_of, now_ns);
  if ((row.spot_discount_pct || row.spot_price_usd_per_hour) && age && *age > max_age_days) {
    out.push_back("the spot figure of " + row.instance_type + " is from " + row.spot_as_of + " (" +
                  std::to_string(*age) + " days old, over " + std::to_string(max_age_days) +
                  "): spot prices move; check the provider's current spot price");
  }
  return out;
}

double TypicalSpotDiscountPct(const Catalog& catalog, const InstanceType& row, std::string* basis) {
  if (row.spot_price_usd_per_hour && row.price_usd_per_hour && *row.price_usd_per_hour > 0) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "spot list price %.4f $/h of %s against %.4f on demand",
                  *row.spot_price_usd_per_hour, row.instance_type.c_str(), *row.price_usd_per_hour);
    *basis = std::string(buf) + " (" + row.spot_source +
             (row.spot_as_of.empty() ? "" : ", " + row.spot_as_of) + ")";
    return (1 - *row.spot_price_usd_per_hour / *row.price_usd_per_hour) * 100;
  }
  if (row.spot_discount_pct) {
    *basis = "catalog spot discount of " + row.instance_type + " (" + row.spot_source +
             (row.spot_as_of.empty() ? "" : ", " + row.spot_as_of) + ")";
    return *row.spot_discount_pct;
  }
  std::vector<double> family;
  for (const InstanceType& t : catalog.instances) {
    if (t.provider == row.provider && t.family == row.family && !row.family.empty() &&
        t.spot_discount_pct) {
      family.push_back(*t.spot_discount_pct);
    }
  }
  if (!family.empty()) {
    *basis = "median spot discount of the " + row.family + " family in the catalog (" +
             std::to_string(family.size()) + " rows)";
    return Median(family);
  }
  *basis =
      "no spot figure for this family; planning default of 55 % (NOTES.md section 5.4; observed "
      "range 45-65 %)";
  return 55.0;
}

std::string AcceleratorModelFromGpuName(const std::string& name,
                                        std::optional<int64_t> memory_total_bytes) {
  std::string n = Lower(name);
  double gib = memory_total_bytes ? static_cast<double>(*memory_total_bytes) / (1LL << 30) : 0;
  if (Contains(n, "h200")) return "H200-141GB";
  if (Contains(n, "h100")) return Contains(n, "nvl") ? "H100-NVL-94GB" : "H100-80GB";
  if (Contains(n, "b200")) return "B200";
  if (Contains(n, "a100")) {
    bool big = Contains(n, "80gb") || gib > 60;
    if (!big) return "A100-40GB";
    return Contains(n, "pcie") ? "A100-80GB-PCIe" : "A100-80GB";
  }
  if (Contains(n, "a10g")) return "A10G";
  if (Contains(n, "l40s")) return "L40S";
  if (Contains(n, "v100")) return (Contains(n, "32gb") || gib > 20) ? "V100-32GB" : "V100-16GB";
  if (Contains(n, "t4")) return "T4";
  // "NVIDIA L4": match the word, not L40 / L40S.
  size_t pos = n.find("l4");
  if (pos != std::string::npos &&
      (pos + 2 == n.size() || !std::isalnum(static_cast<unsigned char>(n[pos + 2])))) {
    return "L4";
  }
  return "";
}

Detection DetectInstance(const Catalog& catalog, const model::NodeInfo& node,
                         bool prefer_sagemaker) {
  Detection d;
  d.confidence = "none";
  int gpu_count = static_cast<int>(node.gpus.size());
  std::string model;
  if (gpu_count > 0) {
    model = AcceleratorModelFromGpuName(node.gpus[0].name, node.gpus[0].memory_total_bytes);
    if (model.empty()) {
      d.reasons.push_back("GPU '" + node.gpus[0].name + "' is not in the catalog");
      return d;
    }
    d.reasons.push_back(std::to_string(gpu_count) + " x " + node.gpus[0].name + " -> " + model);
  } else {
    d.reasons.push_back("no GPUs in the node facts");
  }
  const std::string wanted_service = prefer_sagemaker ? kServiceSageMakerTraining : "ec2";
  struct Scored {
    const InstanceType* row;
    int score;  // vCPU match + memory match
  };
  std::vector<Scored> matches;
  for (const InstanceType& t : catalog.instances) {
    if (t.AcceleratorCount() != gpu_count) continue;
    if (gpu_count > 0 && Lower(t.accel_model) != Lower(model)) continue;
    int score = 0;
    if (node.cpu_cores && t.vcpus && static_cast<double>(*node.cpu_cores) == *t.vcpus) score += 2;
    if (node.memory_total_bytes && t.memory_gib) {
      // The kernel reports a little less than the nominal size; GCP/Azure list "GB".
      double have = static_cast<double>(*node.memory_total_bytes);
      for (double unit : {1024.0 * 1024 * 1024, 1e9}) {
        double nominal = *t.memory_gib * unit;
        if (have <= nominal * 1.02 && have >= nominal * 0.90) {
          score += 1;
          break;
        }
      }
    }
    matches.push_back({&t, score});
  }
  if (matches.empty()) {
    d.reasons.push_back("no catalog row has " + std::to_string(gpu_count) + " x " +
                        (model.empty() ? "no accelerator" : model));
    return d;
  }
  int best = 0;
  for (const Scored& s : matches) best = std::max(best, s.score);
  if (gpu_count == 0 && best == 0) {
    // Without accelerators only vCPUs and memory can tell types apart.
    d.reasons.push_back("no GPUs and no vCPU/memory match: cannot tell the instance type");
    return d;
  }
  std::vector<const InstanceType*> top;
  for (const Scored& s : matches) {
    if (s.score == best) top.push_back(s.row);
  }
  // The same hardware is sold as ml.X and X: pick the service the run points to.
  std::vector<const InstanceType*> preferred;
  for (const InstanceType* t : top) {
    if (t->service == wanted_service) preferred.push_back(t);
  }
  const std::vector<const InstanceType*>& pool = preferred.empty() ? top : preferred;
  d.instance_type = pool.front()->instance_type;
  for (const InstanceType* t : pool) {
    if (t != pool.front()) d.alternatives.push_back(t->instance_type);
  }
  std::string facts;
  if (node.cpu_cores) facts += std::to_string(*node.cpu_cores) + " vCPUs";
  if (node.memory_total_bytes) {
    facts += (facts.empty() ? "" : ", ") + std::to_string(*node.memory_total_bytes / (1LL << 30)) +
             " GiB memory";
  }
  if (best == 3 && pool.size() == 1) {
    d.confidence = "high";
    d.reasons.push_back("accelerators, vCPUs and memory (" + facts + ") match one row");
  } else if (best >= 2) {
    d.confidence = "medium";
    d.reasons.push_back(pool.size() > 1
                            ? std::to_string(pool.size()) + " rows fit equally (" + facts + ")"
                            : "accelerators and vCPUs match; memory does not (" + facts + ")");
  } else {
    d.confidence = "low";
    d.reasons.push_back(gpu_count > 0 ? "only the accelerator model and count match (" + facts + ")"
                                      : "CPU-only node; vCPU/memory match is weak (" + facts + ")");
  }
  if (gpu_count == 0 && best < 3) d.confidence = "low";
  d.reasons.push_back(prefer_sagemaker ? "SageMaker training preferred (node named algo-N or "
                                         "imported from SageMaker)"
                                       : "EC2 preferred (not a SageMaker-shaped node)");
  return d;
}

}  // namespace trainprof::cost
