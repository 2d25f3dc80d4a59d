// Temporary directories for tests, removed when the test process exits.
//
// A test binary that makes its directories with mkdtemp and never removes them leaves them in
// /tmp: the test command, run on every stop, had left 15 GB there. MakeTestDir creates the
// directory the same way (mkdtemp: a new name, mode 0700, ours alone) and removes it, with all
// it holds, when the process that made it exits normally (the end of main or exit()). A forked
// child that exits does not remove its parent's directories. TRAINPROF_KEEP_TEST_DIRS=1 keeps
// them, to look at what a failing test wrote. Test code only: never linked into the product.

#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace trainprof {

namespace test_dir_internal {

class Registry {
 public:
  static Registry& Get() {
    static Registry registry;
    return registry;
  }

  void Add(std::string dir) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.push_back({getpid(), std::move(dir)});
  }

  // Each process removes the directories it made: a forked child has its parent's list too.
  ~Registry() {
    const char* keep = std::getenv("TRAINPROF_KEEP_TEST_DIRS");
    if (keep != nullptr && *keep != '\0' && std::string_view(keep) != "0") return;
    const pid_t self = getpid();
    for (const Made& made : dirs_) {
      if (made.pid == self) Remove(made.dir);
    }
  }

 private:
  Registry() = default;

  // A test may have taken the write bit off a directory to test a failure; as root that does
  // not matter, as another user remove_all would stop there. Directories get it back first.
  static void Remove(const std::string& dir) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (!ec) return;
    for (auto it = std::filesystem::recursive_directory_iterator(
             dir, std::filesystem::directory_options::skip_permission_denied, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0700);
    }
    ::chmod(dir.c_str(), 0700);
    std::filesystem::remove_all(dir, ec);
  }

  struct Made {
    pid_t pid;
    std::string dir;
  };
  std::mutex mu_;
  std::vector<Made> dirs_;
};

}  // namespace test_dir_internal

// A new directory /tmp/<prefix>_XXXXXX, removed at exit. Throws if it cannot be made (a test
// that cannot make its directory fails there, not later with an empty path).
inline std::string MakeTestDir(std::string_view prefix = "trainprof_test") {
  std::string tmpl = "/tmp/" + std::string(prefix) + "_XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("cannot create test directory " + tmpl + ": " +
                             std::error_code(errno, std::generic_category()).message());
  }
  test_dir_internal::Registry::Get().Add(tmpl);
  return tmpl;
}

}  // namespace trainprof
