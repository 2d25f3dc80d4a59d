#include "analyze/cost/csv.h"

namespace trainprof::cost {

std::optional<size_t> CsvTable::Column(const std::string& name) const {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return i;
  }
  return std::nullopt;
}

StatusOr<CsvTable> ParseCsv(const std::string& text, const std::string& origin) {
  std::vector<CsvRecord> rows;
  CsvRecord current;
  std::string cell;
  int line = 1;
  current.line = 1;
  bool in_quotes = false;
  bool record_has_content = false;
  int quote_start_line = 0;
  size_t i = 0;
  // A UTF-8 byte-order mark is tolerated (spreadsheets write one).
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          cell.push_back('"');
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        cell.push_back(c);
      }
      continue;
    }
    switch (c) {
      case '"':
        if (!cell.empty()) {
          return InvalidArgument(origin + ":" + std::to_string(line) +
                                 ": a quote inside an unquoted cell");
        }
        in_quotes = true;
        quote_start_line = line;
        record_has_content = true;
        break;
      case ',':
        current.cells.push_back(std::move(cell));
        cell.clear();
        record_has_content = true;
        break;
      case '\r':
        break;
      case '\n':
        if (record_has_content || !cell.empty()) {
          current.cells.push_back(std::move(cell));
          rows.push_back(std::move(current));
        }
        cell.clear();
        current = CsvRecord{};
        ++line;
        current.line = line;
        record_has_content = false;
        break;
      default:
        cell.push_back(c);
        record_has_content = true;
    }
  }
  if (in_quotes) {
    return InvalidArgument(origin + ":" + std::to_string(quote_start_line) +
                           ": a quoted cell is never closed");
  }
  if (record_has_content || !cell.empty()) {
    current.cells.push_back(std::move(cell));
    rows.push_back(std::move(current));
  }
  if (rows.empty()) return InvalidArgument(origin + ": empty file (no header line)");
  CsvTable table;
  table.header = std::move(rows.front().cells);
  for (auto& h : table.header) {
    while (!h.empty() && (h.back() == ' ')) h.pop_back();
  }
  for (size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].cells.size() != table.header.size()) {
      return InvalidArgument(origin + ":" + std::to_string(rows[r].line) + ": " +
                             std::to_string(rows[r].cells.size()) + " cells, the header has " +
                             std::to_string(table.header.size()));
    }
    table.records.push_back(std::move(rows[r]));
  }
  return table;
}

}  // namespace trainprof::cost
