#pragma once
// printf-style formatting into a std::string of whatever length the result needs (no fixed
// buffer to truncate a long path, kernel name or evidence line).

#include <string>

namespace trainprof {

__attribute__((format(printf, 1, 2))) std::string StrFormat(const char* format, ...);

}  // namespace trainprof
