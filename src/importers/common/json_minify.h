#pragma once
// Copying a JSON object or array without the whitespace between its tokens, in the same pass
// that finds where it ends: the Kineto importer's args, about a third of a trace's text and,
// byte by byte, the largest part of its parse. On x86-64 CPUs with AVX2 and PCLMUL (every one
// since 2013) 64 bytes are classified at a time: quotes, the inside of strings (a carry-less
// multiply turns the quotes into a mask of the bytes between them), whitespace, brackets; the
// bytes kept are packed through an 8-byte shuffle table. A value with a backslash, the last 64
// bytes before `end`, and other CPUs take the scalar loop, which gives the same bytes.
// Threads: pure functions.

#include <string>

namespace trainprof::importers::json {

// The object or array starting at p (p[0] is '{' or '['), appended to *out without whitespace
// outside strings (json::AppendMinified's bytes); *value_end is one past its closing bracket
// (json::FindValueEnd's end). False when `end` comes first: *out then holds part of it, which
// the caller drops.
bool MinifyValue(const char* p, const char* end, std::string* out, const char** value_end);

// The same with the scalar loop alone, whatever the CPU (tests compare the two).
bool MinifyValueScalar(const char* p, const char* end, std::string* out, const char** value_end);

// Whether MinifyValue takes the 64-byte path on this CPU.
bool MinifyValueIsVectorized();

}  // namespace trainprof::importers::json
