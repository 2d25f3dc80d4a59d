#pragma once
// The strings of one store (event names, categories, modes) interned to dense ids: 0 is "",
// others count from 1 in first-seen order, matching the store's `strings` table.
//
// Built for the append path, where every event brings three strings that are almost always
// ones seen before: one hash of the bytes and, on a hit, one comparison; no allocation. The
// text lives in arena blocks that never move, so text(id) stays valid for the interner's life,
// even while more strings are added (readers still need the lock that guards Intern).
// Threads: not thread-safe; the owner serializes calls.

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace trainprof::store {

class StringInterner {
 public:
  StringInterner();

  // The id of `text`, adding it when new.
  uint32_t Intern(std::string_view text);
  // Adds `text` with an id chosen elsewhere (reopening a store); false when the id is not the
  // next dense one or the text is already there.
  bool AddWithId(uint32_t id, std::string_view text);
  // The text of an id in [0, size()].
  std::string_view text(uint32_t id) const { return id == 0 ? std::string_view() : texts_[id - 1]; }
  // Number of non-empty strings, which is also the largest id.
  uint32_t size() const { return static_cast<uint32_t>(texts_.size()); }
  void Clear();

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t id = 0;  // 0: empty slot
  };
  std::string_view Store(std::string_view text);
  void Grow();
  size_t Find(std::string_view text, uint64_t hash) const;  // slot index (empty or match)

  std::vector<Slot> slots_;  // open addressing, a power of two in size, at most half full
  std::vector<std::string_view> texts_;
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* block_ = nullptr;
  size_t block_left_ = 0;
};

// A fast 64-bit hash of short strings (names, categories): 8 bytes a step, then a final mix.
uint64_t HashBytes(std::string_view s);

}  // namespace trainprof::store
