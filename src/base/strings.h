#pragma once
// printf-style formatting into a std::string of whatever length the result needs (no fixed
// buffer to truncate a long path, kernel name or evidence line), and a substring search for
// short needles in short texts.

#include <cstddef>
#include <string>
#include <string_view>

namespace trainprof {

__attribute__((format(printf, 1, 2))) std::string StrFormat(const char* format, ...);

// Where `needle` first occurs in `text` (as std::string_view::find; npos when it does not, 0 for
// an empty needle). Tests 16 positions at a time on two bytes of the needle, then the whole
// needle where both match: for a key in a JSON args text (a few hundred bytes, a quote
// every few bytes) several times faster than memmem, whose set-up is most of its cost there,
// and than find, which stops at every occurrence of the first byte.
size_t FindSubstring(std::string_view text, std::string_view needle);

}  // namespace trainprof
