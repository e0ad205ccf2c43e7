#include "weft/planning/mimo_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "weft/plan/validator.h"
#include "weft/spec/preset.h"
#include "weft/strategy/compare.h"
#include "weft/planning/planner.h"

namespace weft::planning {
namespace {

// The heterogeneous VLM of issue 16: vision encoder TP1·PP1·DP8 at rank 0, the LLM TP4·PP2·DP2
// at rank 8, 24 ranks (vlm-s: ViT 5B + projector + Llama3 8B, 8 H800 GPUs per node).
constexpr const char* kHeteroVlm = R"(module_parallelisms:
  vision:
    tensor_model_parallel_size: 1
    pipeline_model_parallel_size: 1
    context_parallel_size: 1
    data_parallel_size: 8
    rank_offset: 0
  llm:
    tensor_model_parallel_size: 4
    pipeline_model_parallel_size: 2
    context_parallel_size: 1
    data_parallel_size: 2
    rank_offset: 8
)";

struct Fixture {
  spec::ModelSpec model;
  spec::ClusterSpec cluster;
  std::unique_ptr<cost::CostModel> cost_model;
};

Fixture Make(const std::string& model_name, int gpus) {
  Fixture f;
  auto preset = spec::LoadModel(model_name);
  EXPECT_TRUE(preset.ok()) << preset.status().ToString();
  f.model = preset->model;
  auto cluster = spec::LoadCluster(preset->setup->cluster);
  EXPECT_TRUE(cluster.ok());
  auto sized = cluster->WithTotalGpus(gpus);
  EXPECT_TRUE(sized.ok());
  f.cluster = *sized;
  f.cost_model = std::make_unique<cost::CostModel>(f.cluster);
  return f;
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(MimoConfig, HeterogeneousVlmBecomesAPlacementWithMegatronRankOrder) {
  // The preset is kHeteroVlm with comments.
  const std::string path =
      std::string(WEFT_SOURCE_DIR) + "/presets/placements/vlm-s-mimo-hetero.yaml";
  {
    std::ifstream in(path);
    std::string line, body;
    while (std::getline(in, line)) {
      if (line.rfind('#', 0) != 0) body += line + "\n";
    }
    EXPECT_EQ(body, kHeteroVlm);
  }
  auto planner = strategy::MakePlanner(
      JobOptions{.model = "vlm-s", .gpus = 24, .data = "mixed", .placement = path}, "manual");
  ASSERT_TRUE(planner.ok()) << planner.status().ToString();
  const Placement& p = (*planner)->static_plan().placement;
  EXPECT_TRUE(p.unfolded);
  ASSERT_EQ(p.groups.size(), 12u);  // 8 vision replicas + 2 stages x 2 LLM replicas
  const int vision = 0, projector = 1, llm = 2;
  EXPECT_EQ(p.NumReplicas(vision), 8);
  EXPECT_EQ(p.NumReplicas(projector), 8);
  EXPECT_EQ(p.NumReplicas(llm), 2);
  EXPECT_EQ(p.parallel[llm].tp, 4);
  EXPECT_EQ(p.parallel[llm].pp, 2);
  EXPECT_EQ(p.parallel[vision].dp, 8);
  for (int r = 0; r < 8; ++r) {
    const auto chunks = p.ChunksOf(vision, r);
    ASSERT_EQ(chunks.size(), 1u);
    const auto& g = p.groups[p.chunks[chunks[0]].group];
    EXPECT_EQ(g.first_gpu, r);
    EXPECT_EQ(g.num_gpus, 1);
    // The projector sits on its encoder's group (the modality submodule).
    const auto proj = p.ChunksOf(projector, r);
    ASSERT_EQ(proj.size(), 1u);
    EXPECT_EQ(p.chunks[proj[0]].group, p.chunks[chunks[0]].group);
  }
  for (int r = 0; r < 2; ++r) {
    const auto chunks = p.ChunksOf(llm, r);
    ASSERT_EQ(chunks.size(), 2u);
    for (int s = 0; s < 2; ++s) {
      const auto& c = p.chunks[chunks[s]];
      EXPECT_EQ(c.first_layer, 16 * s);
      EXPECT_EQ(c.num_layers, 16);  // Llama3 8B: 32 layers split evenly
      EXPECT_EQ(p.groups[c.group].first_gpu, 8 + (s * 2 + r) * 4);  // TP, DP, PP from fastest
      EXPECT_EQ(p.groups[c.group].num_gpus, 4);
    }
  }
  EXPECT_EQ(p.NumGpus(), 24);
  // It plans and its world plan validates.
  auto batches = (*planner)->Batches(0, 1);
  ASSERT_TRUE(batches.ok());
  auto planned = (*planner)->Plan(batches->front());
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  EXPECT_GT(planned->evaluation.iteration_time_s, 0);
  EXPECT_EQ(planned->evaluation.gpus_idle, 0);
  plan::ValidationReport report;
  auto world = (*planner)->CompileWorld(*planned, 0, &report);
  ASSERT_TRUE(world.ok()) << world.status().ToString();
}

TEST(MimoConfig, MalformedConfigsGiveOneLineNamingFileModuleFieldAndRule) {
  const Fixture f = Make("vlm-s", 24);
  struct Case {
    std::string name, text, expect;
  };
  const std::vector<Case> cases = {
      {"overlap", Replace(kHeteroVlm, "rank_offset: 8", "rank_offset: 4"),
       "module_parallelisms.llm.rank_offset = 4: ranks [4, 20) overlap module 'vision'"},
      {"dp_unset", Replace(kHeteroVlm, "    data_parallel_size: 8\n", ""),
       "module_parallelisms.vision.data_parallel_size is not set"},
      {"dp_null", Replace(kHeteroVlm, "data_parallel_size: 8", "data_parallel_size: null"),
       "module_parallelisms.vision.data_parallel_size is not set"},
      {"world", Replace(kHeteroVlm, "data_parallel_size: 2", "data_parallel_size: 1"),
       "module_parallelisms.llm: world size max(rank_offset + tp·cp·pp·dp) = 16"},
      {"unknown", Replace(kHeteroVlm, "  vision:", "  images:"),
       "module_parallelisms.images is not a module of model 'vlm-s'"},
      {"no_llm", Replace(kHeteroVlm, "  llm:", "  lm:"), "module_parallelisms.lm is not a module"},
      {"tp_pow2", Replace(kHeteroVlm, "tensor_model_parallel_size: 4", "tensor_model_parallel_size: 3"),
       "module_parallelisms.llm.tensor_model_parallel_size = 3; must be a power of two"},
      {"encoder_dp",
       "module_parallelisms:\n"
       "  vision: {tensor_model_parallel_size: 8, data_parallel_size: 1, rank_offset: 0}\n"
       "  llm: {tensor_model_parallel_size: 8, data_parallel_size: 2, rank_offset: 8}\n",
       "module_parallelisms.vision.data_parallel_size = 1 < the language module's DP 2"},
      {"dp_divisible",
       "module_parallelisms:\n"
       "  vision: {tensor_model_parallel_size: 4, data_parallel_size: 3, rank_offset: 0}\n"
       "  llm: {tensor_model_parallel_size: 4, data_parallel_size: 3, pipeline_model_parallel_size: 1,"
       " rank_offset: 12}\n"
       "modules: {}\n",
       ""},  // valid: DP 3 and 3, ranks [0, 12) and [12, 24)
      {"dp_not_divisible",
       "module_parallelisms:\n"
       "  vision: {tensor_model_parallel_size: 4, data_parallel_size: 3, rank_offset: 0}\n"
       "  llm: {tensor_model_parallel_size: 4, data_parallel_size: 2, pipeline_model_parallel_size: 1,"
       " rank_offset: 12}\n"
       "special_token_ids: {images: 32000}\n",
       "do not divide one another"},
      {"tp_node",
       "module_parallelisms:\n"
       "  vision: {tensor_model_parallel_size: 8, context_parallel_size: 2, data_parallel_size: 1}\n"
       "  llm: {tensor_model_parallel_size: 8, data_parallel_size: 1, rank_offset: 16}\n",
       "module_parallelisms.vision.tensor_model_parallel_size × context_parallel_size = 16 GPUs"},
      {"straddle",
       "module_parallelisms:\n"
       "  vision: {tensor_model_parallel_size: 4, data_parallel_size: 1, rank_offset: 0}\n"
       "  llm: {tensor_model_parallel_size: 8, data_parallel_size: 1, pipeline_model_parallel_size: 2,"
       " rank_offset: 4}\n"
       "  projector: {data_parallel_size: 1, rank_offset: 20, tensor_model_parallel_size: 4}\n",
       "module_parallelisms.llm.rank_offset = 4: the TP·CP group at rank 4 straddles two nodes"},
      {"pp_layers",
       "module_parallelisms:\n"
       "  vision: {data_parallel_size: 8, rank_offset: 0}\n"
       "  projector: {pipeline_model_parallel_size: 4, data_parallel_size: 2, rank_offset: 8}\n"
       "  llm: {tensor_model_parallel_size: 4, pipeline_model_parallel_size: 2,"
       " data_parallel_size: 1, rank_offset: 16}\n",
       "module_parallelisms.projector.pipeline_model_parallel_size = 4; module 'projector' has "
       "only 2 layers"},
      {"unknown_field", Replace(kHeteroVlm, "context_parallel_size: 1\n    data_parallel_size: 8",
                                "context_parallel_size: 1\n    data_parallel: 8"),
       "module_parallelisms.vision.data_parallel is not a known key"},
      {"experts", Replace(kHeteroVlm, "context_parallel_size: 1\n    data_parallel_size: 2",
                          "expert_tensor_parallel_size: 2\n    data_parallel_size: 2"),
       "expert_tensor_parallel_size = 2; must be 1"},
      {"bad_map", std::string(kHeteroVlm) + "modules: {vision: eye}\n",
       "modules.vision = 'eye' is not a module of model"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto spec = ReadMimoConfigYaml(c.text, c.name + ".yaml", f.model, f.cluster);
    if (c.expect.empty()) {
      EXPECT_TRUE(spec.ok()) << spec.status().ToString();
      continue;
    }
    ASSERT_FALSE(spec.ok());
    const std::string msg(spec.status().message());
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_EQ(msg.rfind(c.name + ".yaml: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(c.expect), std::string::npos) << msg;
  }
}

TEST(MimoConfig, ModulesMappingAndMegatronCoreLanguageKey) {
  const Fixture f = Make("vlm-s", 24);
  const std::string mapped = Replace(Replace(kHeteroVlm, "  vision:", "  images:"), "  llm:",
                                     "  language:") +
                             "modules: {images: vision}\n";
  auto spec = ReadMimoConfigYaml(mapped, "mapped.yaml", f.model, f.cluster);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto direct = ReadMimoConfigYaml(kHeteroVlm, "direct.yaml", f.model, f.cluster);
  ASSERT_TRUE(direct.ok());
  auto a = BuildPlacement(*spec, f.model, f.cluster, *f.cost_model);
  auto b = BuildPlacement(*direct, f.model, f.cluster, *f.cost_model);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->Describe(f.model), b->Describe(f.model));
  EXPECT_TRUE(LooksLikeMimoConfig(mapped));
  EXPECT_FALSE(LooksLikeMimoConfig("placement:\n  modules: {}\n"));
  EXPECT_FALSE(LooksLikeMimoConfig("[unbalanced"));
}

TEST(MimoConfig, EmitThenReadGivesTheSamePlacement) {
  const Fixture f = Make("vlm-s", 24);
  auto spec = ReadMimoConfigYaml(kHeteroVlm, "hetero.yaml", f.model, f.cluster);
  ASSERT_TRUE(spec.ok());
  auto placement = BuildPlacement(*spec, f.model, f.cluster, *f.cost_model);
  ASSERT_TRUE(placement.ok());
  auto config = MimoConfigOfPlacement(*placement, f.model, f.cluster, *f.cost_model);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const std::string yaml = MimoConfigToYaml(*config, "written by a test\nsecond line");
  EXPECT_EQ(yaml.rfind("# written by a test\n# second line\nmodule_parallelisms:\n", 0), 0u)
      << yaml;
  EXPECT_NE(yaml.find("  llm:\n    tensor_model_parallel_size: 4\n    "
                      "pipeline_model_parallel_size: 2\n    context_parallel_size: 1\n    "
                      "data_parallel_size: 2\n    rank_offset: 8\n"),
            std::string::npos)
      << yaml;
  auto back_spec = ReadMimoConfigYaml(yaml, "back.yaml", f.model, f.cluster);
  ASSERT_TRUE(back_spec.ok()) << back_spec.status().ToString();
  auto back = BuildPlacement(*back_spec, f.model, f.cluster, *f.cost_model);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->chunks.size(), placement->chunks.size());
  ASSERT_EQ(back->groups.size(), placement->groups.size());
  for (size_t g = 0; g < back->groups.size(); ++g) {
    EXPECT_EQ(back->groups[g].first_gpu, placement->groups[g].first_gpu);
    EXPECT_EQ(back->groups[g].num_gpus, placement->groups[g].num_gpus);
  }
  for (size_t c = 0; c < back->chunks.size(); ++c) {
    const auto &x = back->chunks[c], &y = placement->chunks[c];
    EXPECT_EQ(std::tie(x.module, x.first_layer, x.num_layers, x.group, x.chunk, x.replica),
              std::tie(y.module, y.first_layer, y.num_layers, y.group, y.chunk, y.replica));
  }
  EXPECT_EQ(DescribeMimoConfig(*config),
            "vision [0, 8) TP1·PP1·CP1·DP8, llm [8, 24) TP4·PP2·CP1·DP2");
}

TEST(MimoConfig, UserPlacementPresetRoundTripsAndALanguageModuleOfAnotherNameIsMapped) {
  // tiny-vlm's heterogeneous-DP preset (a `placement:` file) as a MIMO config and back.
  const Fixture f = Make("tiny-vlm", 4);
  auto spec = ReadPlacementFile(std::string(WEFT_SOURCE_DIR) +
                                    "/presets/placements/tiny-vlm-hetero-dp.yaml",
                                f.model, f.cluster);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto placement = BuildPlacement(*spec, f.model, f.cluster, *f.cost_model);
  ASSERT_TRUE(placement.ok());
  auto config = MimoConfigOfPlacement(*placement, f.model, f.cluster, *f.cost_model);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto back = ReadMimoConfigYaml(MimoConfigToYaml(*config), "back.yaml", f.model, f.cluster);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  auto rebuilt = BuildPlacement(*back, f.model, f.cluster, *f.cost_model);
  ASSERT_TRUE(rebuilt.ok());
  EXPECT_EQ(rebuilt->Describe(f.model), placement->Describe(f.model));

  // Renaming the language module: the config keeps `llm` and maps it.
  Fixture g = Make("tiny-vlm", 4);
  for (auto& m : g.model.modules) {
    if (m.name == "llm") m.name = "decoder";
  }
  for (auto& e : g.model.edges) {
    if (e.to == "llm") e.to = "decoder";
    if (e.from == "llm") e.from = "decoder";
  }
  PlacementSpec renamed = *spec;
  for (auto& m : renamed.modules) {
    if (m.module == "llm") m.module = "decoder";
  }
  auto p2 = BuildPlacement(renamed, g.model, g.cluster, *g.cost_model);
  ASSERT_TRUE(p2.ok()) << p2.status().ToString();
  auto c2 = MimoConfigOfPlacement(*p2, g.model, g.cluster, *g.cost_model);
  ASSERT_TRUE(c2.ok()) << c2.status().ToString();
  const std::string yaml = MimoConfigToYaml(*c2);
  EXPECT_NE(yaml.find("modules:\n  llm: decoder\n"), std::string::npos) << yaml;
  EXPECT_TRUE(ReadMimoConfigYaml(yaml, "renamed.yaml", g.model, g.cluster).ok());
}

TEST(MimoConfig, PlacementsAMimoConfigCannotExpressSayWhy) {
  const Fixture f = Make("tiny-vlm", 4);
  // Uneven layer split.
  auto spec = ParsePlacementYaml(
      "placement:\n  modules:\n    vision: {dp: 2, layers: [2], first_gpu: 0}\n"
      "    projector: {on: vision}\n    llm: {layers: [1, 3], first_gpu: 2}\n",
      "uneven.yaml", f.model, f.cluster);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto placement = BuildPlacement(*spec, f.model, f.cluster, *f.cost_model);
  ASSERT_TRUE(placement.ok());
  auto config = MimoConfigOfPlacement(*placement, f.model, f.cluster, *f.cost_model);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(std::string(config.status().message()).find("not evenly [2, 2]"), std::string::npos)
      << config.status().message();
  // Idle GPUs: the MIMO world size would not be the job's.
  spec = ParsePlacementYaml(
      "placement:\n  modules:\n    vision: {layers: [2], first_gpu: 0}\n"
      "    projector: {on: vision}\n    llm: {layers: [2, 2], first_gpu: 1}\n",
      "idle.yaml", f.model, f.cluster);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  placement = BuildPlacement(*spec, f.model, f.cluster, *f.cost_model);
  ASSERT_TRUE(placement.ok());
  config = MimoConfigOfPlacement(*placement, f.model, f.cluster, *f.cost_model);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(std::string(config.status().message()).find("the job has 4 GPUs"), std::string::npos)
      << config.status().message();
  // Megatron-LM's single chain (folded).
  auto planner = strategy::MakePlanner(JobOptions{.model = "tiny-vlm"}, "megatron-1f1b");
  ASSERT_TRUE(planner.ok());
  const auto& job = (*planner)->job();
  config = MimoConfigOfPlacement((*planner)->static_plan().placement, job.model, job.cluster,
                                 *job.cost_model);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(std::string(config.status().message()).find("folded"), std::string::npos);
}

}  // namespace
}  // namespace weft::planning
