# Third-party libraries, all from Debian's -dev packages (see docs/architecture.md for why each).
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(SQLITE3 REQUIRED IMPORTED_TARGET sqlite3)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(ISAL REQUIRED IMPORTED_TARGET libisal)
find_package(nlohmann_json 3.10 REQUIRED)
find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
add_library(trainprof_cli11 INTERFACE)
target_include_directories(trainprof_cli11 SYSTEM INTERFACE ${CLI11_INCLUDE_DIR})
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
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
      TRAINPROF_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
      TRAINPROF_BINARY_DIR="${PROJECT_BINARY_DIR}")
  gtest_discover_tests(${name} PROPERTIES LABELS ${module} DISCOVERY_TIMEOUT 60)
endfunction()
