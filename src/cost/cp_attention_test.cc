#include "weft/cost/cp_attention.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "weft/cost/cost_model.h"
#include "weft/spec/preset.h"

namespace weft::cost {
namespace {

spec::ModuleSpec Llm() {
  auto preset = spec::LoadModel("llama3-8b");
  EXPECT_TRUE(preset.ok()) << preset.status().ToString();
  return preset->model.modules[*preset->model.FindModule("llm")];
}

spec::ModuleParallel Par(int cp) {
  return {.module = "llm", .tp = 1, .pp = 1, .dp = 1, .cp = cp, .sequence_parallel = false};
}

const Op& FindOp(const std::vector<Op>& ops, const std::string& name, spec::Pass pass) {
  auto it = std::find_if(ops.begin(), ops.end(),
                         [&](const Op& o) { return o.name == name && o.pass == pass; });
  EXPECT_NE(it, ops.end()) << name;
  return *it;
}

TEST(CpAttentionImbalance, CausalTextFavoursLptAndZigzagOverRing) {
  const TokenShape one = TokenShape::Uniform(32768);
  EXPECT_EQ(CpAttentionImbalance(one, 1, true, cp::Method::kRing), 1.0);
  EXPECT_EQ(CpAttentionImbalance(one, 4, true, std::nullopt), 1.0);
  const double lpt = CpAttentionImbalance(one, 4, true, cp::Method::kLpt);
  const double zigzag = CpAttentionImbalance(one, 4, true, cp::Method::kZigzag);
  const double ring = CpAttentionImbalance(one, 4, true, cp::Method::kRing);
  EXPECT_GE(lpt, 1.0);
  EXPECT_LT(lpt, 1.01);
  EXPECT_LT(zigzag, 1.01);  // zigzag's design case
  EXPECT_GT(ring, 1.6);     // ring: last rank has (2G−1)/G of the mean, 1.75 for G = 4
  // Bidirectional attention is uniform per block: every method is balanced.
  EXPECT_NEAR(CpAttentionImbalance(one, 4, false, cp::Method::kRing), 1.0, 1e-12);
  // Fewer blocks than ranks: nothing to distribute.
  EXPECT_EQ(CpAttentionImbalance(TokenShape::Uniform(200), 4, true, cp::Method::kRing), 1.0);
}

TEST(CpCostModel, AttentionCostsTheWorstRank) {
  const spec::ModuleSpec llm = Llm();
  const TokenShape shape = TokenShape::Uniform(16384);
  auto flops = [&](std::optional<cp::Method> method, int cp) {
    OpBuildContext ctx{.shape = shape, .parallel = Par(cp), .cp_distribution = method};
    auto ops = BuildLayerOps(llm, 1, ctx);
    EXPECT_TRUE(ops.ok()) << ops.status().ToString();
    return FindOp(*ops, "attention", spec::Pass::kForward).flops;
  };
  const double balanced = flops(std::nullopt, 2);
  EXPECT_DOUBLE_EQ(flops(std::nullopt, 1) / 2, balanced);
  EXPECT_DOUBLE_EQ(flops(cp::Method::kRing, 2),
                   balanced * CpAttentionImbalance(shape, 2, true, cp::Method::kRing));
  EXPECT_GT(flops(cp::Method::kRing, 2), 1.4 * balanced);
  EXPECT_GE(flops(cp::Method::kLpt, 2), balanced);
  // cp = 1: the distribution does not enter at all (bit-identical).
  EXPECT_EQ(flops(cp::Method::kRing, 1), flops(std::nullopt, 1));

  auto cluster = spec::LoadCluster("h100");
  ASSERT_TRUE(cluster.ok());
  auto time = [&](std::optional<cp::Method> method, int cp) {
    CostOptions options;
    options.cp_distribution = method;
    CostModel model(*cluster, options);
    auto layer = model.ModuleLayer(llm, 1, shape, Par(cp), BackwardMode::kFull);
    EXPECT_TRUE(layer.ok()) << layer.status().ToString();
    return layer->forward_s;
  };
  EXPECT_GT(time(cp::Method::kRing, 2), time(cp::Method::kLpt, 2));
  EXPECT_EQ(time(cp::Method::kRing, 1), time(std::nullopt, 1));
}

TEST(CpAttentionForward, SplitsTheWholeAttentionByTiles) {
  const spec::ModuleSpec llm = Llm();
  auto cluster = spec::LoadCluster("a40");
  ASSERT_TRUE(cluster.ok());
  auto layout = cp::MakeLayout(cp::MaskKind::kEe, {.tokens = 16384, .seed = 3});
  ASSERT_TRUE(layout.ok());
  auto w = cp::ComputeBlockWorkloads(*layout);
  ASSERT_TRUE(w.ok());
  for (cp::Method method : {cp::Method::kLpt, cp::Method::kRing}) {
    auto d = cp::Distribute(w->key_blocks, {.ranks = 8, .method = method});
    ASSERT_TRUE(d.ok());
    auto t = CpAttentionForward(llm, *w, *d, 1, *cluster);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_EQ(t->rank_forward_s.size(), 8u);
    const double launch = CostOptions{}.kernel_launch_s;
    double sum = 0;
    for (double s : t->rank_forward_s) sum += s - launch;
    EXPECT_NEAR(sum / 8, t->balanced_forward_s - launch, 1e-12);
    const double worst = *std::max_element(t->rank_forward_s.begin(), t->rank_forward_s.end());
    EXPECT_NEAR((worst - launch) / (t->balanced_forward_s - launch), d->Imbalance(), 1e-9);
    EXPECT_GT(t->kv_all_gather_s, 0);
  }
  auto d = cp::Distribute(w->key_blocks, {.ranks = 8});
  EXPECT_FALSE(CpAttentionForward(llm, *w, *d, 3, *cluster).ok());  // 3 does not divide 32 heads
}

}  // namespace
}  // namespace weft::cost
