#pragma once
// The copy of data/catalog/*.csv embedded at build time (generated embedded_catalog.cc), the
// fallback when no catalog directory is found at run time.

#include <string>

namespace trainprof::cost {

std::string EmbeddedInstancesCsv();
std::string EmbeddedAcceleratorsCsv();
std::string EmbeddedStorageCsv();

}  // namespace trainprof::cost
