// Without libFuzzer (a GCC build), each fuzz target links with this driver and replays the
// files given on the command line (or every file in the directories given) through
// LLVMFuzzerTestOneInput, plus truncated prefixes of each: the seed corpus becomes a test.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path p(argv[i]);
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p)) files.push_back(e.path());
    } else {
      files.push_back(p);
    }
  }
  size_t runs = 0;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::vector<char> bytes;
    char buf[4096];
    while (in.read(buf, sizeof buf) || in.gcount() > 0)
      bytes.insert(bytes.end(), buf, buf + in.gcount());
    // The whole file, then prefixes (truncated input) and a few byte flips.
    for (size_t cut : {bytes.size(), bytes.size() / 2, bytes.size() / 3, size_t{1}, size_t{0}}) {
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), cut);
      ++runs;
    }
    for (size_t k = 0; k < 16 && !bytes.empty(); ++k) {
      std::vector<char> m = bytes;
      m[(k * 7919) % m.size()] ^= static_cast<char>(0x5a + k);
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(m.data()), m.size());
      ++runs;
    }
  }
  std::printf("replayed %zu inputs from %zu files\n", runs, files.size());
  return 0;
}
