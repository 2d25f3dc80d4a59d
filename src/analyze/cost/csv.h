#pragma once
// A small RFC 4180 CSV reader for the catalog files: quoted cells, doubled quotes, newlines
// inside quotes. Each record remembers the line it starts on so that errors can name it.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace trainprof::cost {

struct CsvRecord {
  int line = 0;  // 1-based line where the record starts
  std::vector<std::string> cells;
};

struct CsvTable {
  std::vector<std::string> header;
  std::vector<CsvRecord> records;  // without the header
  // Index of a column in `header`, or nullopt.
  std::optional<size_t> Column(const std::string& name) const;
};

// `origin` names the file in error messages ("data/catalog/instances.csv").
StatusOr<CsvTable> ParseCsv(const std::string& text, const std::string& origin);

}  // namespace trainprof::cost
