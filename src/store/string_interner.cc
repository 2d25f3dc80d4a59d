#include "store/string_interner.h"

#include <cstring>

namespace trainprof::store {
namespace {

constexpr size_t kBlockBytes = 64 << 10;
constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;

inline uint64_t Mix(uint64_t h) {
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return h;
}

}  // namespace

uint64_t HashBytes(std::string_view s) {
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = kMul ^ (n * 0xFF51AFD7ED558CCDull);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * kMul;
  }
  return Mix(h);
}

StringInterner::StringInterner() { slots_.resize(1024); }

void StringInterner::Clear() {
  slots_.assign(1024, Slot{});
  texts_.clear();
  blocks_.clear();
  block_ = nullptr;
  block_left_ = 0;
}

size_t StringInterner::Find(std::string_view text, uint64_t hash) const {
  const size_t mask = slots_.size() - 1;
  size_t i = static_cast<size_t>(hash) & mask;
  while (true) {
    const Slot& s = slots_[i];
    if (s.id == 0) return i;
    if (s.hash == hash) {
      std::string_view t = texts_[s.id - 1];
      if (t.size() == text.size() && std::memcmp(t.data(), text.data(), text.size()) == 0) {
        return i;
      }
    }
    i = (i + 1) & mask;
  }
}

std::string_view StringInterner::Store(std::string_view text) {
  if (text.size() > kBlockBytes / 4) {  // a long string gets a block of its own
    blocks_.emplace_back(new char[text.size()]);
    std::memcpy(blocks_.back().get(), text.data(), text.size());
    return {blocks_.back().get(), text.size()};
  }
  if (block_left_ < text.size()) {
    blocks_.emplace_back(new char[kBlockBytes]);
    block_ = blocks_.back().get();
    block_left_ = kBlockBytes;
  }
  char* at = block_;
  std::memcpy(at, text.data(), text.size());
  block_ += text.size();
  block_left_ -= text.size();
  return {at, text.size()};
}

void StringInterner::Grow() {
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(old.size() * 2, Slot{});
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.id == 0) continue;
    size_t i = static_cast<size_t>(s.hash) & mask;
    while (slots_[i].id != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

uint32_t StringInterner::Intern(std::string_view text) {
  if (text.empty()) return 0;
  const uint64_t hash = HashBytes(text);
  size_t i = Find(text, hash);
  if (slots_[i].id != 0) return slots_[i].id;
  texts_.push_back(Store(text));
  const auto id = static_cast<uint32_t>(texts_.size());
  slots_[i] = Slot{hash, id};
  if (texts_.size() * 2 > slots_.size()) Grow();
  return id;
}

bool StringInterner::AddWithId(uint32_t id, std::string_view text) {
  if (text.empty() || id != texts_.size() + 1) return false;
  const uint64_t hash = HashBytes(text);
  size_t i = Find(text, hash);
  if (slots_[i].id != 0) return false;
  texts_.push_back(Store(text));
  slots_[i] = Slot{hash, id};
  if (texts_.size() * 2 > slots_.size()) Grow();
  return true;
}

}  // namespace trainprof::store
