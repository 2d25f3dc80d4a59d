#pragma once
// Text output helpers shared by the subcommands: aligned tables, CSV quoting, numbers.

#include <ostream>
#include <string>
#include <vector>

namespace trainprof::cli {

// Prints rows as columns padded to the widest cell; the first row is the header.
void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows);
// RFC 4180 quoting: cells with a comma, quote or newline are quoted, quotes doubled.
std::string CsvCell(const std::string& cell);
// Compact number for people: "1.5 GiB", "12.3k".
std::string FormatBytes(double bytes);
std::string FormatCount(double n);

}  // namespace trainprof::cli
