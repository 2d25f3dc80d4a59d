#pragma once
// Helpers for the importer tests: temp dirs, writing plain or gzip files, the shared data path.

#include <stdlib.h>
#include <zlib.h>

#include <fstream>
#include <string>

#include "base/test_dir.h"

namespace trainprof::importers::testing {

inline std::string TempDir(const std::string& prefix = "tp_import") { return MakeTestDir(prefix); }

inline void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream f(path, std::ios::binary);
  f << contents;
}

inline void WriteGzip(const std::string& path, const std::string& contents) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, contents.data(), static_cast<unsigned>(contents.size()));
  gzclose(f);
}

// ../shared/data beside the repository (CI clones the repo beside shared/).
inline std::string SharedData(const std::string& rel) {
  return std::string(TRAINPROF_SOURCE_DIR) + "/../shared/data/" + rel;
}

}  // namespace trainprof::importers::testing
