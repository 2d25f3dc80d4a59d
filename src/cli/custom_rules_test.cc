#include "cli/custom_rules.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace trainprof::cli {
namespace {

TEST(CustomRulesTest, ParsesTheRunnersEntriesAndErrors) {
  const std::string text = R"({"rules": [{"name": "SlowSteps", "triggered": true,
      "violations": 2, "datapoints": 20, "parameters": {"max_step_ms": 500.0},
      "findings": [{"severity": "critical", "node": "algo-1", "device": "", "start_ns": 5,
                    "end_ns": 9, "message": "2 slow steps", "recommendation": "look",
                    "evidence": {"slow_steps": [3, 7]}}],
      "details": {}}],
    "errors": [{"file": "r.py", "rule": "Broken", "error": "KeyError: 'x'"},
               {"file": "s.py", "rule": null, "error": "cannot load the file: SyntaxError"}]})";
  auto outcome = ParseCustomRulesOutput(text);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  ASSERT_EQ(outcome->results.size(), 1u);
  const auto& r = outcome->results[0];
  EXPECT_EQ(r.name, "SlowSteps");
  EXPECT_TRUE(r.triggered);
  EXPECT_EQ(r.violations, 2);
  EXPECT_EQ(r.datapoints, 20);
  EXPECT_EQ(r.parameters["max_step_ms"], 500.0);
  ASSERT_EQ(r.findings.size(), 1u);
  const model::Finding& f = r.findings[0];
  EXPECT_EQ(f.rule, "SlowSteps");
  EXPECT_EQ(f.severity, model::Severity::kCritical);
  EXPECT_EQ(f.node, "algo-1");
  EXPECT_EQ(f.start_ns, 5);
  EXPECT_EQ(f.end_ns, 9);
  EXPECT_EQ(f.evidence_json, R"({"slow_steps":[3,7]})");
  ASSERT_EQ(outcome->errors.size(), 2u);
  EXPECT_EQ(outcome->errors[0], "custom rule Broken in r.py: KeyError: 'x'");
  EXPECT_EQ(outcome->errors[1], "custom s.py: cannot load the file: SyntaxError");
}

TEST(CustomRulesTest, RejectsOutputThatIsNotTheRunnersJson) {
  EXPECT_FALSE(ParseCustomRulesOutput("").ok());
  EXPECT_FALSE(ParseCustomRulesOutput("Traceback (most recent call last):").ok());
  EXPECT_FALSE(ParseCustomRulesOutput(R"({"rules": [{"name": "X", "findings":
      [{"severity": "fatal"}]}]})")
                   .ok());
}

TEST(CustomRulesTest, InterpreterOptionThenEnvironment) {
  EXPECT_EQ(FindPython("/opt/py/bin/python"), "/opt/py/bin/python");
  setenv("TRAINPROF_PYTHON", "/env/python", 1);
  EXPECT_EQ(FindPython(""), "/env/python");
  unsetenv("TRAINPROF_PYTHON");
  EXPECT_NE(FindPython(""), "");
}

TEST(CustomRulesTest, AMissingInterpreterIsAClearError) {
  CustomRulesOptions options;
  options.files = {"rule.py"};
  options.python = "/nonexistent/python3";
  auto outcome = RunCustomRules("/nonexistent/run", options);
  ASSERT_FALSE(outcome.ok());
  EXPECT_NE(outcome.status().message().find("cannot run the Python interpreter"), std::string::npos)
      << outcome.status().message();
}

}  // namespace
}  // namespace trainprof::cli
