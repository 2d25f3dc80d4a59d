#pragma once
// The estimated cost impact of a rule finding, in dollars, priced from a run's CostReport: what
// the time or capacity the finding describes was billed. Each rule has its own basis (docs/
// rules.md, "Cost impact"): idle GPU share over the finding's window, time spent waiting for
// data, excess step time, pauses, initialisation, the saving of a smaller instance... The cost
// module knows rule names and evidence keys as plain data (model::Finding); it does not depend
// on the rules library. The CLI joins the two where findings are shown.

#include <optional>
#include <string>

#include "analyze/cost/catalog.h"
#include "analyze/cost/cost_model.h"
#include "model/finding.h"

namespace trainprof::cost {

struct FindingCost {
  std::optional<double> cost_usd;  // absent: no figure can be computed (basis says why)
  std::string basis;               // what was priced, at which price, its date and source
};

// Prices `finding` from `report`. `catalog` (optional) names the price, date and source of the
// instance a what-if proposes (UnderusedInstance).
FindingCost CostOfFinding(const CostReport& report, const Catalog* catalog,
                          const model::Finding& finding);

// Sets finding->cost_usd / cost_basis from CostOfFinding.
void PriceFinding(const CostReport& report, const Catalog* catalog, model::Finding* finding);

// When no CostReport can be made (instance type or price unknown): no figure, and why.
void MarkUnpriced(const std::string& why, model::Finding* finding);

}  // namespace trainprof::cost
