#include "weft/spec/parallel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft::spec {
namespace {

using ::testing::HasSubstr;

ModelSpec Model() {
  ModuleSpec llm;
  llm.name = "llm";
  llm.kind = ModuleKind::kLlm;
  llm.num_layers = 4;
  llm.hidden_size = 256;
  llm.ffn_hidden_size = 512;
  llm.num_attention_heads = 32;
  llm.num_kv_groups = 8;
  llm.vocab_size = 10;
  ModuleSpec proj;
  proj.name = "projector";
  proj.kind = ModuleKind::kMlpProjector;
  proj.num_layers = 1;
  proj.input_size = 256;
  proj.output_size = proj.hidden_size = 256;
  ModelSpec model;
  model.name = "m";
  model.modules = {proj, llm};
  model.edges = {{"projector", "llm"}};
  return model;
}

ParallelConfig Config(int tp) {
  ParallelConfig p;
  p.modules = {{.module = "llm", .tp = tp, .pp = 2}};
  return p;
}

TEST(ParallelConfigValidate, AcceptsTpDividingHeadsAndGroups) {
  EXPECT_TRUE(Config(8).Validate(Model()).ok());
  EXPECT_TRUE(Config(16).Validate(Model()).ok());  // kv groups 8 divide tp 16: replicated KV
}

TEST(ParallelConfigValidate, RejectsTpNotDividingHeads) {
  Status s = Config(3).Validate(Model());
  EXPECT_EQ(s.message(),
            "parallel.modules[0].tp = 3; must divide num_attention_heads (32) of module 'llm'");
}

TEST(ParallelConfigValidate, RejectsTpIncompatibleWithKvGroups) {
  ModelSpec model = Model();
  model.modules[1].num_kv_groups = 8;
  model.modules[1].num_attention_heads = 48;
  model.modules[1].hidden_size = 48 * 8;
  Status s = Config(12).Validate(model);
  EXPECT_THAT(s.message(), HasSubstr("parallel.modules[0].tp = 12; must divide num_kv_groups (8)"));
}

TEST(ParallelConfigValidate, RejectsUnknownAndDuplicateModules) {
  ParallelConfig p = Config(2);
  p.modules.push_back({.module = "vision"});
  EXPECT_EQ(p.Validate(Model()).message(),
            "parallel.modules[1].module = \"vision\"; must name a module of model 'm'");
  p.modules.back().module = "llm";
  EXPECT_THAT(p.Validate(Model()).message(), HasSubstr("must be unique (also parallel.modules[0])"));
}

TEST(ParallelConfigValidate, RejectsNonPositiveSizes) {
  ParallelConfig p = Config(2);
  p.modules[0].cp = 0;
  EXPECT_EQ(p.Validate(Model()).message(), "parallel.modules[0].cp = 0; must be > 0");
  p = Config(2);
  p.num_microbatches = 0;
  EXPECT_EQ(p.Validate(Model()).message(), "parallel.num_microbatches = 0; must be > 0");
}

TEST(ParallelConfigValidate, ChecksEachModuleFitsTheCluster) {
  ClusterSpec cluster;
  cluster.name = "small";
  cluster.num_nodes = 1;
  cluster.gpus_per_node = 8;
  ParallelConfig p = Config(8);  // 8 x 2 = 16 GPUs
  EXPECT_EQ(p.Validate(Model(), cluster).message(),
            "parallel.modules[0] = tp 8 x pp 2 x dp 1 x cp 1 = 16 GPUs; must fit the 8 GPUs of "
            "cluster 'small'");
  cluster.num_nodes = 2;
  EXPECT_TRUE(p.Validate(Model(), cluster).ok());
}

TEST(ParallelConfigFor, MissingModuleGetsDefaults) {
  const ParallelConfig p = Config(4);
  EXPECT_EQ(p.For("llm").tp, 4);
  const ModuleParallel d = p.For("projector");
  EXPECT_EQ(d.module, "projector");
  EXPECT_EQ(d.Gpus(), 1);
}

}  // namespace
}  // namespace weft::spec
