// The run directory refuses what another user could plant in it (issue 20, item 1): symlinks
// at nodes/<node>, at store.sqlite and its journal files, and directories that another user
// owns or that every user may write.

#include "store/run_directory.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "store/node_store_reader.h"
#include "store/store_test_util.h"

namespace trainprof::store {
namespace {

using testing::MakeTempDir;
using testing::TestNode;

model::RunMetadata Meta() {
  model::RunMetadata m;
  m.run_id = "r1";
  m.name = "r1";
  m.start_ns = 1'700'000'000'000'000'000;
  return m;
}

std::string Contents(const std::string& path) {
  auto text = ReadFileToString(path);
  return text.ok() ? *text : "<" + text.status().message() + ">";
}

bool IsSymlink(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

TEST(RunDirectoryTest, SymlinkedNodeDirectoryIsNotWrittenThrough) {
  std::string run = MakeTempDir();
  std::string elsewhere = MakeTempDir();
  ASSERT_TRUE(MakeDirs(JoinPath(run, "nodes")).ok());
  ASSERT_EQ(symlink(elsewhere.c_str(), JoinPath(run, "nodes/node0").c_str()), 0);
  auto w = OpenNodeWriter(run, TestNode("node0"));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("nodes/node0"), std::string::npos) << w.status().message();
  EXPECT_NE(w.status().message().find("symbolic link"), std::string::npos) << w.status().message();
  EXPECT_FALSE(PathExists(JoinPath(elsewhere, "store.sqlite")));
  EXPECT_TRUE(ListDirectory(elsewhere)->empty());
}

TEST(RunDirectoryTest, SymlinkedStoreFileIsNotWrittenThrough) {
  // `rules --store` on such a run wrote its findings into the store the link points at.
  std::string other_run = MakeTempDir();
  { ASSERT_TRUE(OpenNodeWriter(other_run, TestNode("node0")).ok()); }
  std::string victim = NodeStorePath(other_run, "node0");
  const std::string before = Contents(victim);
  ASSERT_FALSE(before.empty());

  std::string run = MakeTempDir();
  ASSERT_TRUE(MakeDirs(JoinPath(run, "nodes/node0")).ok());
  ASSERT_EQ(symlink(victim.c_str(), NodeStorePath(run, "node0").c_str()), 0);
  auto w = OpenNodeWriter(run, TestNode("node0"));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("store.sqlite"), std::string::npos) << w.status().message();
  EXPECT_NE(w.status().message().find("symbolic link"), std::string::npos) << w.status().message();
  EXPECT_EQ(Contents(victim), before);
  EXPECT_TRUE(IsSymlink(NodeStorePath(run, "node0")));
}

TEST(RunDirectoryTest, SymlinkedJournalFilesAreRefused) {
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    std::string run = MakeTempDir();
    std::string victim = JoinPath(MakeTempDir(), "victim");
    ASSERT_TRUE(WriteFileAtomically(victim, "root only").ok());
    ASSERT_TRUE(MakeDirs(JoinPath(run, "nodes/node0")).ok());
    ASSERT_EQ(symlink(victim.c_str(), (NodeStorePath(run, "node0") + suffix).c_str()), 0);
    auto w = OpenNodeWriter(run, TestNode("node0"));
    ASSERT_FALSE(w.ok()) << suffix;
    EXPECT_NE(w.status().message().find(suffix), std::string::npos) << w.status().message();
    EXPECT_EQ(Contents(victim), "root only") << suffix;
  }
}

TEST(RunDirectoryTest, SymlinkedNodesDirectoryIsRefused) {
  std::string run = MakeTempDir();
  std::string elsewhere = MakeTempDir();
  ASSERT_EQ(symlink(elsewhere.c_str(), JoinPath(run, "nodes").c_str()), 0);
  auto w = OpenNodeWriter(run, TestNode("node0"));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("symbolic link"), std::string::npos) << w.status().message();
  EXPECT_TRUE(ListDirectory(elsewhere)->empty());
}

TEST(RunDirectoryTest, WorldWritableRunDirectoryIsRefused) {
  for (mode_t mode : {mode_t{0777}, mode_t{01777}, mode_t{0757}}) {
    std::string run = MakeTempDir();
    ASSERT_EQ(chmod(run.c_str(), mode), 0);
    Status s = WriteRunMetadata(run, Meta());
    ASSERT_FALSE(s.ok()) << std::oct << mode;
    EXPECT_NE(s.message().find("writable by every user"), std::string::npos) << s.message();
    EXPECT_FALSE(PathExists(RunJsonPath(run)));
    EXPECT_FALSE(OpenNodeWriter(run, TestNode("node0")).ok());
    EXPECT_FALSE(PathExists(JoinPath(run, "nodes")));
  }
  // A world-writable nodes/ inside our own run directory is refused as well.
  std::string run = MakeTempDir();
  ASSERT_TRUE(MakeDirs(JoinPath(run, "nodes")).ok());
  ASSERT_EQ(chmod(JoinPath(run, "nodes").c_str(), 0777), 0);
  auto w = OpenNodeWriter(run, TestNode("node0"));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("writable by every user"), std::string::npos);
}

TEST(RunDirectoryTest, GroupWritableRunDirectoryIsAccepted) {
  // Shared team folders are group-writable by design; the group is trusted (docs/reliability.md).
  std::string run = MakeTempDir();
  ASSERT_EQ(chmod(run.c_str(), 0770), 0);
  EXPECT_TRUE(WriteRunMetadata(run, Meta()).ok());
  EXPECT_TRUE(OpenNodeWriter(run, TestNode("node0")).ok());
}

TEST(RunDirectoryTest, RunDirectoryOwnedByAnotherUserIsRefused) {
  std::string run = MakeTempDir();
  std::string foreign;
  if (geteuid() == 0) {
    // Root can hand the directory to nobody (65534), as another user's pre-created folder.
    ASSERT_EQ(chown(run.c_str(), 65534, 65534), 0);
    foreign = run;
  } else {
    foreign = "/usr";  // root's, not ours, not world-writable
  }
  Status s = CheckRunDirectoryForWriting(foreign);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("owned by uid"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(foreign), std::string::npos) << s.message();
  if (geteuid() == 0) {
    EXPECT_FALSE(WriteRunMetadata(run, Meta()).ok());
    EXPECT_FALSE(PathExists(RunJsonPath(run)));
    EXPECT_FALSE(OpenNodeWriter(run, TestNode("node0")).ok());
    EXPECT_FALSE(PathExists(JoinPath(run, "nodes")));
    // A nodes/<node> directory planted by another user inside our run is refused too.
    std::string mine = MakeTempDir();
    ASSERT_TRUE(MakeDirs(JoinPath(mine, "nodes/node0")).ok());
    ASSERT_EQ(chown(JoinPath(mine, "nodes/node0").c_str(), 65534, 65534), 0);
    auto w = OpenNodeWriter(mine, TestNode("node0"));
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.status().message().find("owned by uid 65534"), std::string::npos)
        << w.status().message();
  }
}

TEST(RunDirectoryTest, RunJsonIsNotReadableByOthers) {
  std::string run = MakeTempDir();
  ASSERT_TRUE(WriteRunMetadata(run, Meta()).ok());
  struct stat st {};
  ASSERT_EQ(stat(RunJsonPath(run).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u) << std::oct << st.st_mode;
  auto back = ReadRunMetadata(run);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->run_id, "r1");
}

}  // namespace
}  // namespace trainprof::store
