// Issue 17.3: the two torch CSV formats accept or refuse the same plans, for the same stated
// reason (the compute-only format leaves the communication to torch, which can express no more).
#include <gtest/gtest.h>

#include "weft/plan/torch_export.h"
#include "weft/planning/planner.h"
#include "weft/strategy/compare.h"

namespace weft {
namespace {

struct Exports {
  StatusOr<std::string> comms = InternalError("unset");
  StatusOr<std::string> compute_only = InternalError("unset");
};

Exports ExportBoth(std::string_view model, std::string_view strategy) {
  auto planner = weft::strategy::MakePlanner({.model = std::string(model)}, strategy);
  EXPECT_TRUE(planner.ok()) << planner.status().ToString();
  auto batches = (*planner)->Batches(0, 1);
  EXPECT_TRUE(batches.ok());
  auto planned = (*planner)->Plan(batches->front());
  EXPECT_TRUE(planned.ok()) << planned.status().ToString();
  auto plan = (*planner)->Compile(*planned, 0);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  Exports out;
  out.comms = plan::ExportTorchCsv(*plan, {.format = plan::TorchCsvFormat::kComputeComms});
  out.compute_only = plan::ExportTorchCsv(*plan, {.format = plan::TorchCsvFormat::kComputeOnly});
  return out;
}

TEST(TorchExportFormats, RefuseTheSamePlanForTheSameReason) {
  // tiny-valm under megatron-vpp: a module inside a slot reads a cross-rank transfer.
  Exports e = ExportBoth("tiny-valm", "megatron-vpp");
  ASSERT_FALSE(e.comms.ok());
  ASSERT_FALSE(e.compute_only.ok());
  EXPECT_EQ(e.comms.status().message(), e.compute_only.status().message());
}

TEST(TorchExportFormats, AcceptTheSameLinearPlan) {
  Exports e = ExportBoth("tiny-vlm", "megatron-1f1b");
  EXPECT_TRUE(e.comms.ok()) << e.comms.status().ToString();
  EXPECT_TRUE(e.compute_only.ok()) << e.compute_only.status().ToString();
}

}  // namespace
}  // namespace weft
