#pragma once
// What the files of trainprof's own rules share (own_rules.cc registers them all): the
// factories of the rules that live in files of their own, by family.
//   own_rules_steps.cc   DataLoaderStarvation, GPUIdleBetweenSteps (step shares)
//   own_rules_memory.cc  HostMemoryGrowth, GPUMemoryGrowth (growth towards a limit)
//   own_rules.cc         CPUThrottling, StragglerRank, CommunicationBound, LongPauses,
//                        UnderusedInstance, and the registry of all of them
// Threads: as Rule (rule.h).

#include <cstdint>
#include <string>
#include <tuple>

#include "analyze/rules/rule_util.h"

namespace trainprof::analyze::rules::own {

inline constexpr double kNsPerSecond = 1e9;
using StreamKey = std::tuple<std::string, int64_t, int64_t, std::string>;  // node, rank, pid, mode

RuleFactory DataLoaderStarvation();
RuleFactory GpuIdleBetweenSteps();
RuleFactory HostMemoryGrowth();
RuleFactory GpuMemoryGrowth();

}  // namespace trainprof::analyze::rules::own
