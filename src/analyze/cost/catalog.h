#pragma once
// The instance catalog: instance types with specs and dated prices, accelerator peak figures
// and storage rates, loaded at run time from CSV files shipped as data (data/catalog/), from a
// directory named by TRAINPROF_CATALOG_DIR, or from the copy embedded at build time. Users add
// or replace rows with their own file (MergeInstancesFile). Empty cells are "not found"
// (std::nullopt), never 0.
//
// Passive structs and free functions; a Catalog is immutable once loaded and may be shared
// by threads that only read it.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/run_metadata.h"

namespace trainprof::cost {

inline constexpr const char* kServiceSageMakerTraining = "sagemaker-training";

struct InstanceType {
  std::string provider;       // aws, gcp, azure, or what a user file says
  std::string service;        // sagemaker-training, ec2, compute-engine, virtual-machines
  std::string instance_type;  // ml.p4d.24xlarge, p4d.24xlarge, a2-highgpu-8g...
  std::string region;
  std::string family;
  std::optional<double> vcpus;
  std::optional<double> memory_gib;  // GiB on AWS; "GB" as listed on GCP / Azure
  std::optional<int> accel_count;
  std::string accel_model;  // as in accelerators.csv; "" when none
  std::optional<double> accel_mem_gib_each;
  std::optional<double> accel_mem_mib_api;  // what the driver reports (22 888 MiB on A10G)
  std::optional<double> local_nvme_gb;      // 0: EBS-only; empty: unknown
  std::optional<double> price_usd_per_hour;
  std::string price_basis;
  std::string price_source;
  std::string price_as_of;  // YYYY-MM-DD
  std::optional<double> spot_discount_pct;
  // A spot list price (GCP's Spot VM price), exact where the discount above is rounded; its
  // source and date are spot_source and spot_as_of.
  std::optional<double> spot_price_usd_per_hour;
  std::string spot_interrupt_bucket;  // Spot Advisor bucket, "15-20%"
  std::string spot_source;
  std::string spot_as_of;
  std::string confidence;
  std::string notes;
  std::string spec_source;
  std::string origin;  // "<file>:<line>" the row came from

  bool IsSageMakerTraining() const { return service == kServiceSageMakerTraining; }
  int AcceleratorCount() const { return accel_count.value_or(0); }
  // Memory one accelerator offers a job: the driver figure when known, else the nominal GiB.
  std::optional<double> AcceleratorMemoryBytes() const;
};

struct Accelerator {
  std::string accel_model;
  std::optional<double> memory_gib;
  std::optional<double> mem_bw_gbs;
  std::optional<double> fp32_tflops;
  std::optional<double> tf32_tensor_tflops;
  std::optional<double> bf16_tensor_tflops;
  std::optional<double> fp16_tensor_tflops;
  std::string source;
  std::string as_of;
  std::string confidence;
  // The best dense 16-bit tensor figure (bf16, else fp16), the mixed-precision ceiling.
  std::optional<double> TensorTflops16() const;
};

struct StoragePrice {
  std::string provider, service, region, storage;
  double price_usd_per_gb_month = 0;
  std::optional<double> default_volume_gb;
  std::string price_source, price_as_of, notes;
};

struct Catalog {
  std::vector<InstanceType> instances;
  std::vector<Accelerator> accelerators;
  std::vector<StoragePrice> storage;
  std::string origin;  // where it was loaded from, for people ("embedded copy", a directory)
};

// Parses the three files' contents; `*_origin` name them in errors ("file:line: field ...").
StatusOr<Catalog> ParseCatalog(const std::string& instances_csv,
                               const std::string& instances_origin,
                               const std::string& accelerators_csv,
                               const std::string& accelerators_origin,
                               const std::string& storage_csv, const std::string& storage_origin);
// Loads instances.csv, accelerators.csv and storage.csv from `dir`.
StatusOr<Catalog> LoadCatalogDir(const std::string& dir);
// The default catalog: $TRAINPROF_CATALOG_DIR, else the files installed beside the code
// (trainprof/data/catalog in the Python package, share/trainprof/catalog under a prefix), else
// the embedded copy. Never a path of the build machine.
StatusOr<Catalog> LoadDefaultCatalog();
// The copy of data/catalog/ embedded at build time.
StatusOr<Catalog> LoadEmbeddedCatalog();
// Adds a user's instance file (the instances.csv columns; only instance_type,
// price_usd_per_hour, price_source and price_as_of are required). A row whose instance_type
// exists replaces that row's non-empty cells; other rows are added.
Status MergeInstancesFile(Catalog* catalog, const std::string& path);
Status MergeInstancesText(Catalog* catalog, const std::string& text, const std::string& origin);

// Case-insensitive lookup; nullptr when absent.
const InstanceType* FindInstance(const Catalog& catalog, const std::string& instance_type);
const Accelerator* FindAccelerator(const Catalog& catalog, const std::string& accel_model);
// The storage rate for a provider/service/region (region "" takes the first match).
const StoragePrice* FindStorage(const Catalog& catalog, const std::string& provider,
                                const std::string& service, const std::string& region);

// Days since 1970-01-01 for "YYYY-MM-DD"; nullopt when malformed.
std::optional<int64_t> ParseDateDays(const std::string& date);
// Age of a YYYY-MM-DD date at `now_ns`, in days; nullopt when malformed.
std::optional<int64_t> AgeDays(const std::string& date, int64_t now_ns);
// "price of ml.p3.8xlarge is from 2021-11-29 (1827 days old; over 180)" lines for stale prices.
std::vector<std::string> StalePriceWarnings(const InstanceType& row, int64_t now_ns,
                                            int max_age_days);

// The spot price of a priced row: its spot list price, else its list price less
// TypicalSpotDiscountPct. `discount_pct` and `basis` say how (either may be null).
double SpotPriceUsdPerHour(const Catalog& catalog, const InstanceType& row, double* discount_pct,
                           std::string* basis);

// The same for the row's spot figure (discount or spot price), when a spot price is used.
std::vector<std::string> StaleSpotWarnings(const InstanceType& row, int64_t now_ns,
                                           int max_age_days);

// The typical spot discount for a row: its spot list price against its on-demand price (exact),
// else its own discount figure, else the median of its family's rows in the same provider,
// else NOTES.md section 5.4's planning default of 55 %. `basis` says which one was used and
// its source.
double TypicalSpotDiscountPct(const Catalog& catalog, const InstanceType& row, std::string* basis);

// Maps an NVML device name ("NVIDIA A100-SXM4-40GB", "Tesla V100-SXM2-16GB") to the
// catalog's accel_model ("A100-40GB"); "" when unknown.
std::string AcceleratorModelFromGpuName(const std::string& name,
                                        std::optional<int64_t> memory_total_bytes);

struct Detection {
  std::string instance_type;              // "" when nothing matched
  std::string confidence;                 // "high", "medium", "low" or "none"
  std::vector<std::string> reasons;       // what matched and what did not
  std::vector<std::string> alternatives;  // other types that fit as well
};

// Recognises the instance from a node's facts (GPU model and count, vCPUs, memory), as the
// instance metadata service is not reachable from a stored run. SageMaker rows are preferred
// when `prefer_sagemaker` (node named algo-N, imported from SageMaker), EC2 rows otherwise.
Detection DetectInstance(const Catalog& catalog, const model::NodeInfo& node,
                         bool prefer_sagemaker);

}  // namespace trainprof::cost
