#pragma once
// TP_CHECK: invariants of our own code. A failed check is a bug in trainprof, never bad input;
// it prints file:line and aborts. Bad input goes through Status or a data-quality counter.

#include <cstdio>
#include <cstdlib>

#define TP_CHECK(cond)                                                                           \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      std::fprintf(stderr, "trainprof: CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                              \
    }                                                                                            \
  } while (0)
