// weft tune (strategy/tune.h), the shared parallel space (planning/parallel_space.h) and the
// Megatron-style job flags (planning/job_setup.h).
#include "weft/strategy/tune.h"

#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "weft/planning/job_setup.h"
#include "weft/planning/parallel_space.h"
#include "weft/spec/preset.h"
#include "weft/strategy/compare.h"

namespace weft::strategy {
namespace {

using planning::JobOptions;

spec::ModuleSpec Llm(int heads, int kv, int layers) {
  spec::ModuleSpec m;
  m.name = "llm";
  m.kind = spec::ModuleKind::kLlm;
  m.num_attention_heads = heads;
  m.num_kv_groups = kv;
  m.num_layers = layers;
  m.hidden_size = 128 * heads;
  m.ffn_hidden_size = 4 * m.hidden_size;
  m.vocab_size = 32000;
  return m;
}

TEST(ParallelSpace, EnumeratesEverySplitInOrderAndCountsTheRules) {
  const spec::ModuleSpec m = Llm(/*heads=*/12, /*kv=*/4, /*layers=*/3);
  planning::RejectCounts rejected;
  const auto layouts = planning::EnumerateModuleLayouts(m, 24, 8, nullptr, "LLM", &rejected);
  // Brute force over every (tp, pp, dp) with the same rules.
  std::vector<planning::ModuleLayout> want;
  for (int tp = 1; tp <= 8; ++tp) {
    for (int pp = 1; pp <= 24; ++pp) {
      for (int dp = 1; dp <= 24; ++dp) {
        if (tp * pp * dp != 24 || !planning::TpFitsHeads(m, tp) || pp > 3) continue;
        want.push_back({tp, pp, dp});
      }
    }
  }
  EXPECT_EQ(layouts, want);
  EXPECT_EQ(rejected["LLM tp (heads / table)"], 3);  // tp 3, 6 (kv 4), tp 8 (heads 12)
  EXPECT_GT(rejected["LLM pp > layers"], 0);
  // tp_allowed narrows further.
  const auto only_two =
      planning::EnumerateModuleLayouts(m, 24, 8, [](int tp) { return tp == 2; }, "LLM", nullptr);
  for (const auto& l : only_two) EXPECT_EQ(l.tp, 2);
}

TEST(ParallelSpace, StateBoundIsBelowEveryEvenSplit) {
  spec::ModuleSpec m = Llm(32, 8, 32);
  cost::CostOptions options;
  const double params = static_cast<double>(m.ParameterCount());
  EXPECT_DOUBLE_EQ(planning::StateBytesLowerBound(m, 1, 1, 1, options), params * 18);
  EXPECT_DOUBLE_EQ(planning::StateBytesLowerBound(m, 4, 2, 8, options),
                   params / 8 * (2 + 4 + 12.0 / 8));
  m.frozen = true;
  EXPECT_DOUBLE_EQ(planning::StateBytesLowerBound(m, 2, 1, 1, options), params / 2 * 2);
}

TEST(JobFlags, TensorContextAndDataParallelSizes) {
  JobOptions o{.model = "tiny-vlm", .gpus = 8};
  ASSERT_TRUE(planning::AddModuleSize("--tp", "2", 64, o.tensor_size).ok());
  ASSERT_TRUE(planning::AddModuleSize("--tp", "vision=1", 64, o.tensor_size).ok());
  o.pipeline_size = 2;
  o.data_parallel_size = 1;  // 4 of 8 GPUs used: said in the notes
  auto setup = planning::MakeJobSetup(o);
  ASSERT_TRUE(setup.ok()) << setup.status().message();
  const auto& p = (*setup)->job.parallel;
  EXPECT_EQ(p.For("vision").tp, 1);
  EXPECT_EQ(p.For("llm").tp, 2);
  EXPECT_EQ((*setup)->job.DataParallelSize(), 1);
  EXPECT_NE((*setup)->notes.find("4 GPUs unused"), std::string::npos) << (*setup)->notes;

  // Refusals name the flag and the rule.
  planning::ModuleSizes sizes;
  EXPECT_FALSE(planning::AddModuleSize("--tp", "=2", 64, sizes).ok());
  EXPECT_FALSE(planning::AddModuleSize("--tp", "0", 64, sizes).ok());
  EXPECT_FALSE(planning::AddModuleSize("--tp", "2x", 64, sizes).ok());
  JobOptions bad{.model = "tiny-vlm", .gpus = 8};
  bad.tensor_size.by_module["nosuch"] = 2;
  auto s = planning::MakeJobSetup(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("no module 'nosuch'"), std::string::npos);
  JobOptions too_many{.model = "tiny-vlm", .gpus = 8, .pipeline_size = 2};
  too_many.data_parallel_size = 8;
  s = planning::MakeJobSetup(too_many);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--dp 8 needs"), std::string::npos) << s.status().message();
}

TEST(JobFlags, MicroBatchSizeSetsTheMicrobatches) {
  JobOptions o{.model = "tiny-vlm", .gpus = 8, .pipeline_size = 2, .sequences_per_batch = 16};
  o.micro_batch_sequences = 2;  // 16 / (2 x DP 4) = 2 microbatches
  auto setup = planning::MakeJobSetup(o);
  ASSERT_TRUE(setup.ok()) << setup.status().message();
  EXPECT_EQ((*setup)->job.parallel.num_microbatches, 2);
  o.micro_batch_sequences = 3;
  auto bad = planning::MakeJobSetup(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("must be a multiple of micro batch size x DP"),
            std::string::npos);
}

TEST(JobFlags, RecomputeFloorIsForRuleBasedStrategies) {
  JobOptions o{.model = "tiny-vlm", .gpus = 4};
  o.recompute = "full";
  auto megatron = MakePlanner(o, "megatron-1f1b");
  ASSERT_TRUE(megatron.ok()) << megatron.status().message();
  auto planned = (*megatron)->Plan((*megatron)->job().profile_batches.front());
  ASSERT_TRUE(planned.ok());
  EXPECT_EQ(planned->recompute_used, spec::Recompute::kFull);
  auto dip = MakePlanner(o, "dip");
  ASSERT_FALSE(dip.ok());
  EXPECT_NE(dip.status().message().find("chooses recomputation itself"), std::string::npos);
}

// The screen (the strategy's plan at budget 1, the best max_simulations planned) finds the
// exhaustive argmin of the same space, and the tuned time never exceeds the job's own.
TEST(Tune, ScreenFindsTheExhaustiveArgminOnSmallJobs) {
  struct Case {
    const char* model;
    int gpus;
  };
  int compared = 0, exact = 0;
  for (Case c : {Case{"tiny-vlm", 4}, Case{"tiny-vlm", 8}, Case{"tiny-valm", 8},
                 Case{"tiny-vlm", 16}}) {
    TuneOptions options;
    options.job = JobOptions{.model = c.model, .gpus = c.gpus, .data = "mixed"};
    options.strategies = {"megatron-1f1b", "gpipe", "megatron-vpp", "optimus", "cornstarch",
                          "fsdp", "dip-interleave"};
    options.max_simulations = 4;
    auto screened = Tune(options);
    ASSERT_TRUE(screened.ok()) << screened.status().message();
    options.exhaustive = true;
    auto oracle = Tune(options);
    ASSERT_TRUE(oracle.ok()) << oracle.status().message();
    ASSERT_EQ(screened->strategies.size(), oracle->strategies.size());
    for (const StrategyTuning& s : screened->strategies) {
      const StrategyTuning* o = nullptr;
      for (const auto& x : oracle->strategies) {
        if (x.strategy == s.strategy) o = &x;
      }
      ASSERT_NE(o, nullptr);
      SCOPED_TRACE(std::string(c.model) + " " + std::to_string(c.gpus) + " " + s.strategy);
      if (!o->error.empty()) {
        EXPECT_FALSE(s.error.empty());
        continue;
      }
      ASSERT_TRUE(s.error.empty()) << s.error;
      EXPECT_LE(s.planned, 4);
      EXPECT_GE(o->planned, s.planned);
      // The screen is a heuristic: within 1% of the oracle everywhere, exact on most.
      EXPECT_LE(s.best.time_s, o->best.time_s * 1.01)
          << s.best.Describe() << " vs " << o->best.Describe();
      if (std::abs(s.best.time_s - o->best.time_s) <= 1e-12 * o->best.time_s) ++exact;
      if (s.default_config.error.empty() && !s.default_config.oom) {
        EXPECT_LE(s.best.time_s, s.default_config.time_s);
      }
      ++compared;
    }
  }
  EXPECT_GE(compared, 24);
  EXPECT_GE(exact * 10, compared * 9) << exact << " of " << compared << " exact";
}

TEST(Tune, IsDeterministicAndPrunesByMemory) {
  TuneOptions options;
  // A 7B backbone on 2 A100s: at tp 1 pp 1 dp 2 its state alone (12 bytes per parameter under
  // ZeRO-1) exceeds the usable memory.
  options.job = JobOptions{.model = "llava-ov-qwen2.5-7b",
                           .cluster = "a100",
                           .gpus = 2,
                           .pipeline_size = 1,
                           .data = "mixed"};
  // The job's own configuration at tp 1 · cp 1 and 2 microbatches (the preset's tuned layout
  // needs 16 GPUs and its 32 microbatches would make the batch 64 sequences).
  options.job.num_microbatches = 2;
  options.job.tensor_size = {.all = 1, .by_module = {}};
  options.job.context_size = {.all = 1, .by_module = {}};
  options.strategies = {"megatron-1f1b"};
  auto a = Tune(options);
  auto b = Tune(options);
  ASSERT_TRUE(a.ok() && b.ok());
  auto strip = [](std::string json) {
    auto j = nlohmann::json::parse(json);
    for (auto& s : j["strategies"]) s.erase("wall_s");
    return j.dump();
  };
  EXPECT_EQ(strip(a->ToJson()), strip(b->ToJson()));
  const StrategyTuning& t = a->strategies.front();
  EXPECT_GT(t.rejected.count("memory: LLM state / (tp·pp) above usable"), 0u)
      << a->ToText();
  EXPECT_LE(t.best.time_s, t.default_config.time_s);
  EXPECT_NE(a->ToText().find("pruning rules:"), std::string::npos);
}

// Memory varies with the batch: on VLM-L the two profile batches alone chose megatron-vpp at
// tp4 cp2 pp8 dp1 mb16, which later batches overflow. The check rejects it, and the winner is
// re-checked here independently: planned on every check batch, it fits; the rejected one does
// not fit at least one.
TEST(Tune, TheWinnerFitsTheMemoryCheckBatches) {
  TuneOptions options;
  options.job = JobOptions{.model = "vlm-l", .data = "mixed"};
  options.strategies = {"megatron-vpp"};
  auto r = Tune(options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->memory_check_batches, 8);
  const StrategyTuning& t = r->strategies.front();
  ASSERT_TRUE(t.error.empty()) << t.error;
  ASSERT_GT(t.rejected.count("memory: out of memory on a check batch"), 0u) << r->ToText();
  EXPECT_EQ(t.best.memory_check, "fits 8 check batches");
  EXPECT_FALSE(t.best.oom);
  const TuneCandidate* rejected = nullptr;
  for (const TuneCandidate& c : t.planned_candidates) {
    if (c.memory_check.rfind("out of memory on check batch", 0) == 0) rejected = &c;
  }
  ASSERT_NE(rejected, nullptr);
  EXPECT_TRUE(rejected->oom);
  auto base = planning::MakeJobSetup(options.job);
  ASSERT_TRUE(base.ok());
  auto check = planning::MakeProfileBatches(**base, 2, 8);
  ASSERT_TRUE(check.ok());
  planning::PlanBudget one{.time_budget_s = 0, .work_budget = 1};
  auto ooms = [&](const TuneCandidate& c) {
    auto planner = MakePlanner(c.Apply(options.job, r->global_batch_sequences), "megatron-vpp");
    EXPECT_TRUE(planner.ok());
    int n = 0;
    for (const spec::Batch& b : *check) {
      auto planned = (*planner)->Plan(b, one);
      EXPECT_TRUE(planned.ok());
      n += planned.ok() && planned->evaluation.oom ? 1 : 0;
    }
    return n;
  };
  EXPECT_EQ(ooms(t.best), 0) << t.best.Describe();
  EXPECT_GT(ooms(*rejected), 0) << rejected->Describe();
  // 0 turns the check off: the profile batches alone decide, as before.
  options.memory_check_batches = 0;
  auto unchecked = Tune(options);
  ASSERT_TRUE(unchecked.ok());
  EXPECT_EQ(unchecked->strategies.front().best.Describe(), rejected->Describe());
  EXPECT_TRUE(unchecked->strategies.front().best.memory_check.empty());
}

TEST(Tune, RefusesBadOptions) {
  TuneOptions options;
  options.job = JobOptions{.model = "tiny-vlm", .gpus = 4};
  options.max_simulations = 0;
  EXPECT_FALSE(Tune(options).ok());
  options.max_simulations = 4;
  options.memory_check_batches = -1;
  EXPECT_FALSE(Tune(options).ok());
  options.memory_check_batches = 8;
  options.strategies = {"nosuch"};
  EXPECT_FALSE(Tune(options).ok());
  options.strategies = {};
  options.job.placement = "presets/placements/tiny-vlm-hetero-dp.yaml";
  auto r = Tune(options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--placement"), std::string::npos);
}

}  // namespace
}  // namespace weft::strategy
