# Third-party libraries (see docs/install.md and third_party/README.md).
#
# Header-only and file dependencies (nlohmann-json, CLI11, cpp-httplib without TLS, dygraphs,
# ISA-L's igzip declarations) always come from third_party/: no -dev package is needed.
#
# zstd, SQLite and zlib:
#   TRAINPROF_STATIC_DEPS=ON (default; wheels): built from third_party/ as static,
#     position-independent libraries, linked into the executable and the extension module alike.
#     A build needs only a C/C++20 compiler and CMake, and the installed package no shared
#     library beyond the C/C++ runtime. (Debian's own libzstd.a/libsqlite3.a/libz.a are not PIC,
#     so they cannot go into the extension module: they are not used.)
#   TRAINPROF_STATIC_DEPS=OFF: the system's shared libraries (pkg-config / FindZLIB), for
#     distribution packagers.
# ISA-L is never linked: src/importers/common/isal_inflate.cc loads libisal.so.2 with dlopen
# when present and inflates with zlib otherwise.
option(TRAINPROF_STATIC_DEPS "Build zstd, SQLite and zlib from third_party/ and link them statically" ON)

find_package(Threads REQUIRED)
add_subdirectory(${PROJECT_SOURCE_DIR}/third_party ${PROJECT_BINARY_DIR}/third_party)

if(TRAINPROF_STATIC_DEPS)
  add_library(trainprof::sqlite3 ALIAS trainprof_sqlite3)
  add_library(trainprof::zstd ALIAS trainprof_zstd)
  add_library(trainprof::zlib ALIAS trainprof_zlib)
else()
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(SQLITE3 REQUIRED IMPORTED_TARGET GLOBAL sqlite3)
  pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET GLOBAL libzstd)
  find_package(ZLIB REQUIRED GLOBAL)
  add_library(trainprof::sqlite3 ALIAS PkgConfig::SQLITE3)
  add_library(trainprof::zstd ALIAS PkgConfig::ZSTD)
  add_library(trainprof::zlib ALIAS ZLIB::ZLIB)
endif()

if(TRAINPROF_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# Adds a GoogleTest binary for a module, labelled with the module name for `ctest -L`.
function(trainprof_add_test name module)
  if(NOT TRAINPROF_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  # Tests read JSON freely: nlohmann-json (third_party/) for every test, so none falls back on a
  # system copy in /usr/include.
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} nlohmann_json::nlohmann_json GTest::gtest
                        GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
      TRAINPROF_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
      TRAINPROF_BINARY_DIR="${PROJECT_BINARY_DIR}")
  gtest_discover_tests(${name} PROPERTIES LABELS ${module} DISCOVERY_TIMEOUT 60)
endfunction()
