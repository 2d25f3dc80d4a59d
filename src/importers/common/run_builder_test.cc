#include "importers/common/run_builder.h"

#include <gtest/gtest.h>

#include "importers/common/test_util.h"
#include "store/run_reader.h"

namespace trainprof::importers {
namespace {

// Two node names that map to one node directory ("a b" and "a:b" -> nodes/a_b/) share one
// writer: a second writer on the same file would wait on the first one's lock and fail.
TEST(RunBuilderTest, NamesOfOneNodeDirectoryShareOneWriter) {
  const std::string dir = testing::TempDir() + "/run";
  auto b = RunBuilder::Create(dir, "r", "import test", {"test"});
  ASSERT_TRUE(b.ok()) << b.status().message();
  model::NodeInfo first, second, other;
  first.node = "a b";
  second.node = "a:b";
  other.node = "c";
  auto w1 = (*b)->Node(first);
  auto w2 = (*b)->Node(second);
  auto w3 = (*b)->Node(other);
  ASSERT_TRUE(w1.ok() && w2.ok() && w3.ok());
  EXPECT_EQ(*w1, *w2);
  EXPECT_NE(*w1, *w3);
  for (auto* w : {*w1, *w2}) {
    model::EventView e;
    e.kind = model::EventKind::kSpan;
    e.name = "op";
    e.category = "cpu_op";
    e.start_ns = 1'700'000'000'000'000'000;
    e.duration_ns = 10;
    w->AppendEvent(e);
  }
  (*b)->NoteTime(1'700'000'000'000'000'000, 1'700'000'000'000'000'010);
  EXPECT_EQ((*b)->node_names(), (std::vector<std::string>{"a_b", "c"}));
  ASSERT_TRUE((*b)->Finish().ok());
  auto reader = store::RunReader::Open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_EQ((*reader)->StoreCount(), 2u);
  auto events = (*reader)->Events({});
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 2u);
}

}  // namespace
}  // namespace trainprof::importers
