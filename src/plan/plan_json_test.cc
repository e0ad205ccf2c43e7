#include "weft/plan/plan_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_plans.h"
#include "weft/plan/validator.h"

namespace weft::plan {
namespace {

using ::testing::HasSubstr;
using ::testing::EndsWith;
using ::testing::StartsWith;
using ::testing::StrEq;

// Replaces the first occurrence of `from` in `text` (which must exist).
std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

ExecutionPlan RichPlan() {
  ExecutionPlan plan = testing::TwoRankOneFOneB();
  plan.iteration = 17;
  plan.replica = 1;
  plan.num_replicas = 4;
  plan.ranks[0].memory_capacity_bytes = 80LL << 30;
  plan.ranks[0].static_bytes = 12345678901;
  plan.ranks[0].actions[0].recompute = spec::Recompute::kSelective;
  plan.ranks[0].actions[0].recompute_layers = {1, 3, 0, 0};
  plan.ranks[0].actions[0].activation_alloc_bytes = 1 << 20;
  plan.ranks[0].actions[0].latency_s = 0.1 + 0.2;  // not exactly representable in decimal
  plan.ranks[0].actions[0].samples = {0, 3, 7};
  plan.ranks[0].actions[0].instance_begin = 2;
  plan.ranks[0].actions[0].instance_end = 5;
  plan.ranks[0].actions[3].group = 4;
  plan.ranks[0].actions[4].group = 4;
  plan.ranks[0].actions[16].bytes = int64_t{3} << 40;
  plan.ranks[1].buffers[0].tensor.dtype = DType::kFp32;
  plan.ranks[0].buffers[0].tensor.dtype = DType::kFp32;
  plan.ranks[0].buffers[0].samples = {0, 3, 7};
  plan.ranks[0].buffers[0].rows = 4096;
  plan.ranks[1].actions[2].stage.sub_microbatch = 2;
  plan.ranks[1].buffers[0].consumer.stage.sub_microbatch = 2;
  plan.data = testing::TwoRankOneFOneBWithData().data;
  plan.data.samples[2].id = -(int64_t{1} << 62);  // any int64 id
  plan.data.microbatches[1].instances[0].push_back(
      {.tokens = {1500}, .samples = {3}, .item = 2, .unpadded_tokens = 38});  // a padded window
  plan.data.ranks[1].chunks.push_back(
      {.module = 0, .chunk = 1, .first_layer = 4, .num_layers = 1, .module_replica = 3});
  return plan;
}

TEST(PlanJson, RoundTripIsExact) {
  const ExecutionPlan plan = RichPlan();
  const std::string text = PlanToJson(plan);
  auto back = PlanFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, plan);
  EXPECT_EQ(PlanToJson(*back), text);
}

// The writer streams text; its strings and numbers must read exactly as nlohmann's dump() writes
// them (the files' bytes must not change): escapes, UTF-8, shortest round-trip doubles.
TEST(PlanJson, FormatsStringsAndNumbersAsNlohmannDumps) {
  ExecutionPlan plan = testing::TwoRankOneFOneB();
  const std::vector<std::string> strings = {"quote\" back\\slash", "tab\tnew\nline\x01\x1f",
                                            "caf\xc3\xa9 \xe2\x86\x92", "del\x7f", ""};
  const std::vector<double> doubles = {0.1 + 0.2, 1.0, 1e-5, 1e-4, 123456789012345678.0, 1e21,
                                       0.0, 5e-324, 1.7976931348623157e308, 3.0e15, 1234.5};
  for (const std::string& s : strings) {
    plan.model = s;
    plan.ranks[0].label = s;
    plan.ranks[0].buffers[0].name = s.empty() ? "x" : s;
    const std::string text = PlanToJson(plan);
    const std::string dumped = nlohmann::json(s).dump();
    EXPECT_THAT(text, HasSubstr("\"model\": " + dumped + ",\n")) << dumped;
    EXPECT_THAT(text, HasSubstr("\"label\": " + dumped + ",\n")) << dumped;
    if (!s.empty()) EXPECT_THAT(text, HasSubstr("\"name\":" + dumped + ",")) << dumped;
  }
  for (double x : doubles) {
    plan.ranks[0].actions[0].latency_s = x;
    EXPECT_THAT(PlanToJson(plan),
                HasSubstr("\"latency_s\":" + nlohmann::json(x).dump() + ",\"op\""))
        << fmt::format("{}", x);
  }
}

TEST(PlanJson, WritesTheDocumentedSchema) {
  const std::string text = PlanToJson(testing::TwoRankOneFOneB());
  EXPECT_THAT(text, StartsWith("{\n  \"schema\": \"weft.plan/v3\",\n"));
  // A plan compiled from a bare graph has empty data tables, still written.
  EXPECT_THAT(text, EndsWith("\n  ],\n  \"data\": {\n    \"samples\": [],\n"
                             "    \"sequences\": [],\n    \"microbatches\": [],\n"
                             "    \"ranks\": []\n  }\n}\n"));
  EXPECT_THAT(text, HasSubstr("\"replica\": 0,\n  \"num_replicas\": 2,\n  \"num_ranks\": 2,\n"));
  EXPECT_THAT(text, HasSubstr("{\"consumer\":{\"chunk\":0,\"mb\":0,\"module\":0,\"pass\":\"forward\","
                              "\"rank\":1,\"sub\":0},\"dtype\":\"bf16\",\"id\":0,\"name\":\"act0\","
                              "\"producer\":{\"chunk\":0,\"mb\":0,\"module\":0,\"pass\":\"forward\","
                              "\"rank\":0,\"sub\":0},\"rows\":-1,\"samples\":[],\"shape\":[16,8]}"));
  EXPECT_THAT(text, HasSubstr("{\"buffer\":0,\"group\":-1,\"op\":\"isend\",\"peer\":1,\"stage\":"
                              "{\"chunk\":0,\"mb\":0,\"module\":0,\"pass\":\"forward\",\"sub\":0}}"));
  EXPECT_THAT(text, HasSubstr("{\"activation_alloc_bytes\":0,\"activation_free_bytes\":0,"
                              "\"inputs\":[30],\"instances\":[0,0],\"latency_s\":0.001,\"op\":"
                              "\"backward\",\"outputs\":[],\"recompute\":\"none\",\"samples\":[],"
                              "\"stage\":{\"chunk\":0,\"mb\":0,\"module\":0,\"sub\":0}}"));
  EXPECT_THAT(text, HasSubstr("{\"bytes\":1024,\"dp\":2,\"module\":0,\"op\":\"all_reduce_grads\"}"));
}

TEST(PlanJson, WritesTheDataTablesOneEntryALine) {
  const std::string text = PlanToJson(testing::TwoRankOneFOneBWithData());
  EXPECT_THAT(text, HasSubstr("  \"data\": {\n    \"samples\": [\n"
                              "      {\"id\":100,\"text_tokens\":10},\n"));
  EXPECT_THAT(text, HasSubstr("    \"sequences\": [\n"
                              "      {\"llm_tokens\":21,\"samples\":[0,1]},\n"));
  EXPECT_THAT(text, HasSubstr("    \"microbatches\": [\n"
                              "      {\"instances\":[[{\"item\":-1,\"samples\":[0,1],"
                              "\"tokens\":[10,11]}]],\"microbatch\":0,\"replica\":0,"
                              "\"sequences\":[0]},\n"));
  EXPECT_THAT(text, HasSubstr("    \"ranks\": [\n"
                              "      {\"chunks\":[{\"chunk\":0,\"first_layer\":0,\"module\":0,"
                              "\"module_replica\":0,\"num_layers\":2}],\"group\":0,\"rank\":0,"
                              "\"replica\":0},\n"));
  // The bytes are nlohmann's dump() of the same values (keys in byte order).
  const nlohmann::json doc = nlohmann::json::parse(text);
  EXPECT_THAT(text, HasSubstr(doc["data"]["microbatches"][1].dump()));
  EXPECT_THAT(text, HasSubstr(doc["data"]["ranks"][1].dump()));
  // unpadded_tokens is written only for a padded instance.
  ExecutionPlan padded = testing::TwoRankOneFOneBWithData();
  padded.data.microbatches[0].instances[0][0].unpadded_tokens = 20;
  EXPECT_THAT(PlanToJson(padded), HasSubstr("\"tokens\":[10,11],\"unpadded_tokens\":20}"));
}

TEST(PlanJson, EarlierVersionsAreRefusedWithHowToRegenerate) {
  const std::string good = PlanToJson(testing::TwoRankOneFOneB());
  for (std::string_view old : {"weft.plan/v1", "weft.plan/v2"}) {
    auto plan = PlanFromJson(Replace(good, "weft.plan/v3", std::string(old)));
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(plan.status().message(),
              fmt::format("{} is no longer read; regenerate it with `weft plan ... --out FILE` "
                          "(writes weft.plan/v3)",
                          old));
  }
  auto other = PlanFromJson(Replace(good, "weft.plan/v3", "weft.plan/v4"));
  EXPECT_EQ(other.status().message(), "schema = \"weft.plan/v4\"; expected \"weft.plan/v3\"");
}

TEST(PlanJson, DataTablesAreRequiredAndChecked) {
  const std::string good = PlanToJson(testing::TwoRankOneFOneBWithData());
  ASSERT_TRUE(PlanFromJson(good).ok()) << PlanFromJson(good).status().ToString();
  nlohmann::json doc = nlohmann::json::parse(good);
  doc.erase("data");
  EXPECT_EQ(PlanFromJson(doc.dump()).status().message(), "data: missing");
  doc = nlohmann::json::parse(good);
  doc["data"].erase("sequences");
  EXPECT_EQ(PlanFromJson(doc.dump()).status().message(), "data.sequences: missing");
  EXPECT_THAT(PlanFromJson(Replace(good, "\"text_tokens\":10", "\"text_tokens\":-1"))
                  .status()
                  .message(),
              StrEq("data.samples[0].text_tokens = -1; must be >= 0"));
  EXPECT_THAT(PlanFromJson(Replace(good, "\"samples\": [", "\"sampels\": [")).status().message(),
              EndsWith("unknown key (did you mean 'samples'?)"));
  EXPECT_EQ(PlanFromJson(Replace(good, "\"tokens\":[10,11]", "\"tokens\":[10]"))
                .status()
                .message(),
            "data.microbatches[0].instances[0][0].samples = [0,1]; must have one sample per "
            "segment (1, as tokens)");
  EXPECT_EQ(PlanFromJson(Replace(good, "\"instances\":[[{", "\"instances\":[[],[{"))
                .status()
                .message(),
            "data.microbatches[0].instances has 2 entries; more than 1 (len(modules))");
  EXPECT_EQ(PlanFromJson(Replace(good, "\"tokens\":[10,11]}",
                                 "\"tokens\":[10,11],\"unpadded_tokens\":22}"))
                .status()
                .message(),
            "data.microbatches[0].instances[0][0].unpadded_tokens = 22; must be <= 21");
  EXPECT_EQ(PlanFromJson(Replace(good, "\"module\":0,\"module_replica\"",
                                 "\"module\":1,\"module_replica\""))
                .status()
                .message(),
            "data.ranks[0].chunks[0].module = 1; must be < 1 (the number of modules)");
  EXPECT_EQ(PlanFromJson(Replace(good, "\"rank\":1,\"replica\"", "\"rank\":0,\"replica\""))
                .status()
                .message(),
            "data.ranks[1].rank = 0; must equal its position (1)");
  doc = nlohmann::json::parse(good);
  doc["data"]["ranks"].erase(1);
  EXPECT_EQ(PlanFromJson(doc.dump()).status().message(),
            "data.ranks = [{\"chunks\":[{\"chunk\":0,\"first_layer\":0,\"module\":0,\"module..."
            "; must have one entry per rank (2) or none");
  EXPECT_EQ(PlanFromJson(good, {.max_list_length = 3}).status().message(),
            "data.samples has 4 entries; more than 3 (ReadOptions::max_list_length)");
}

TEST(PlanJson, MalformedFieldsNameTheirPath) {
  const std::string good = PlanToJson(testing::TwoRankOneFOneB());
  auto bad_op = PlanFromJson(Replace(good, "\"op\":\"forward\"", "\"op\":\"fwd\""));
  EXPECT_EQ(bad_op.status().message(),
            "ranks[0].actions[0].op = \"fwd\"; must be one of forward, backward, backward_input, "
            "backward_weight, isend, irecv, wait_send, wait_recv, free, all_reduce_grads");
  auto unknown_op = PlanFromJson(Replace(good, "\"op\":\"all_reduce_grads\"", "\"op\":\"all_gather\""));
  EXPECT_THAT(unknown_op.status().message(),
              StartsWith("ranks[0].actions[16].op = \"all_gather\"; must be one of forward,"));
  auto missing_peer = PlanFromJson(Replace(good, "\"peer\":1,", ""));
  EXPECT_EQ(missing_peer.status().message(), "ranks[0].actions[1].peer: missing");
  auto bad_dtype = PlanFromJson(Replace(good, "\"dtype\":\"bf16\"", "\"dtype\":\"fp8\""));
  EXPECT_EQ(bad_dtype.status().message(),
            "ranks[0].buffers[0].dtype = \"fp8\"; must be bf16 or fp32");
  auto bad_type = PlanFromJson(Replace(good, "\"static_bytes\": 0", "\"static_bytes\": \"lots\""));
  EXPECT_EQ(bad_type.status().message(), "ranks[0].static_bytes = \"lots\"; must be an integer");
  auto negative = PlanFromJson(Replace(good, "\"shape\":[16,8]", "\"shape\":[16,-8]"));
  EXPECT_EQ(negative.status().message(), "ranks[0].buffers[0].shape[1] = -8; must be >= 0");
  auto count = PlanFromJson(Replace(good, "\"num_ranks\": 2", "\"num_ranks\": 3"));
  EXPECT_EQ(count.status().message(), "num_ranks = 3; must equal the length of ranks (2)");
  auto not_json = PlanFromJson("{\"schema\": ");
  EXPECT_THAT(not_json.status().message(), StartsWith("not valid JSON (byte"));
}

// The fuzz cases of issue 11: each is one line naming the field (or the byte) and the rule.
TEST(PlanJson, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = std::string(80000, '[') + std::string(80000, ']');
  auto plan = PlanFromJson(deep);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(plan.status().message(),
            "byte 32: JSON nested deeper than 32 levels (ReadOptions::max_depth)");
  // Inside an otherwise valid plan too; brackets inside strings do not count.
  const std::string good = PlanToJson(testing::TwoRankOneFOneB());
  auto nested = PlanFromJson(Replace(good, "\"toy\"", std::string(80000, '{') + "}"));
  EXPECT_THAT(nested.status().message(), HasSubstr("JSON nested deeper than 32 levels"));
  auto in_string = PlanFromJson(Replace(good, "\"toy\"", "\"" + std::string(100, '[') + "\""));
  EXPECT_TRUE(in_string.ok()) << in_string.status().ToString();
  auto shallow = PlanFromJson(good, {.max_depth = 5});
  EXPECT_THAT(shallow.status().message(), HasSubstr("nested deeper than 5 levels"));
}

TEST(PlanJson, IntegersThatDoNotFitTheirFieldAreRefusedNotWrapped) {
  const std::string good = PlanToJson(testing::TwoRankOneFOneB());
  auto huge = PlanFromJson(
      Replace(good, "\"static_bytes\": 0", "\"static_bytes\": 9223372036854775807"));
  EXPECT_EQ(huge.status().message(),
            "ranks[0].static_bytes = 9223372036854775807; must be <= 1125899906842624 (2^50)");
  auto unsigned_max = PlanFromJson(
      Replace(good, "\"static_bytes\": 0", "\"static_bytes\": 18446744073709551615"));
  EXPECT_EQ(unsigned_max.status().message(),
            "ranks[0].static_bytes = 18446744073709551615; must be <= 1125899906842624 (2^50)");
  auto beyond_uint64 = PlanFromJson(
      Replace(good, "\"static_bytes\": 0", "\"static_bytes\": 18446744073709551616"));
  EXPECT_THAT(beyond_uint64.status().message(),
              HasSubstr("ranks[0].static_bytes = 1.8446744073709552e+19; must be an integer"));
  auto shape = PlanFromJson(Replace(good, "\"shape\":[16,8]", "\"shape\":[16,4294967297]"));
  EXPECT_EQ(shape.status().message(),
            "ranks[0].buffers[0].shape[1] = 4294967297; must be <= 2147483647");
  auto product = PlanFromJson(Replace(good, "\"shape\":[16,8]",
                                      "\"shape\":[2147483647,2147483647,2147483647]"));
  EXPECT_EQ(product.status().message(),
            "ranks[0].buffers[0].shape = [2147483647,2147483647,2147483647]; bf16 bytes exceeds "
            "1125899906842624 (2^50)");
  auto peer = PlanFromJson(Replace(good, "\"peer\":1,", "\"peer\":4294967296,"));
  EXPECT_EQ(peer.status().message(), "ranks[0].actions[1].peer = 4294967296; must be <= 2147483647");
  auto peer_rank = PlanFromJson(Replace(good, "\"peer\":1,", "\"peer\":2,"));
  EXPECT_EQ(peer_rank.status().message(),
            "ranks[0].actions[1].peer = 2; must be < 2 (the number of ranks)");
  auto float_int = PlanFromJson(Replace(good, "\"chunk\":0,\"mb\":0,\"module\":0,\"sub\":0}",
                                        "\"chunk\":1.0,\"mb\":0,\"module\":0,\"sub\":0}"));
  EXPECT_EQ(float_int.status().message(),
            "ranks[0].actions[0].stage.chunk = 1.0; must be an integer");
  auto rows = PlanFromJson(Replace(good, "\"rows\":-1", "\"rows\":-2"));
  EXPECT_EQ(rows.status().message(), "ranks[0].buffers[0].rows = -2; must be >= -1");
  auto activation = PlanFromJson(
      Replace(good, "\"activation_alloc_bytes\":0", "\"activation_alloc_bytes\":-1"));
  EXPECT_EQ(activation.status().message(),
            "ranks[0].actions[0].activation_alloc_bytes = -1; must be >= 0");
  auto latency = PlanFromJson(Replace(good, "\"latency_s\":0.001", "\"latency_s\":-0.5"));
  EXPECT_EQ(latency.status().message(),
            "ranks[0].actions[0].latency_s = -0.5; must be finite and >= 0");
  auto dp = PlanFromJson(Replace(good, "\"dp\":2", "\"dp\":0"));
  EXPECT_EQ(dp.status().message(), "ranks[0].actions[16].dp = 0; must be >= 1");
  auto reduce_bytes = PlanFromJson(Replace(good, "\"bytes\":1024", "\"bytes\":9223372036854775807"));
  EXPECT_EQ(reduce_bytes.status().message(),
            "ranks[0].actions[16].bytes = 9223372036854775807; must be <= 1125899906842624 (2^50)");
}

TEST(PlanJson, ModuleIndicesMustNameAModule) {
  const std::string good = PlanToJson(testing::TwoRankOneFOneB());
  auto stage = PlanFromJson(
      Replace(good, "\"module\":0,\"sub\":0}", "\"module\":1,\"sub\":0}"));
  EXPECT_EQ(stage.status().message(),
            "ranks[0].actions[0].stage.module = 1; must be < 1 (the number of modules)");
  auto end = PlanFromJson(Replace(good, "\"module\":0", "\"module\":7"));
  EXPECT_EQ(end.status().message(),
            "ranks[0].buffers[0].consumer.module = 7; must be < 1 (the number of modules)");
  auto reduce = PlanFromJson(Replace(good, "\"module\":0,\"op\":\"all_reduce_grads\"",
                                     "\"module\":2147483647,\"op\":\"all_reduce_grads\""));
  EXPECT_EQ(reduce.status().message(),
            "ranks[0].actions[16].module = 2147483647; must be < 1 (the number of modules)");
  auto no_modules = PlanFromJson(Replace(good, "\"modules\": [\"llm\"]", "\"modules\": []"));
  EXPECT_THAT(no_modules.status().message(),
              HasSubstr("module = 0; must be < 0 (the number of modules)"));
}

TEST(PlanJson, DuplicateAndUnknownKeysAreErrors) {
  const std::string good = PlanToJson(testing::TwoRankOneFOneB());
  auto dup = PlanFromJson(Replace(good, "\"num_replicas\": 2,", "\"num_replicas\": 2, \"num_replicas\": 1,"));
  EXPECT_EQ(dup.status().message(),
            "key \"num_replicas\" appears twice in one object; keys must be unique");
  auto unknown = PlanFromJson(Replace(good, "\"strategy\":", "\"strategi\":"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("strategi = "));
  EXPECT_THAT(unknown.status().message(), EndsWith("unknown key (did you mean 'strategy'?)"));
  auto control = PlanFromJson(Replace(good, "\"strategy\":", "\"st\\u001b[Kx\":"));
  EXPECT_THAT(control.status().message(), StartsWith("\"st\\x1b[Kx\" = "));
}

TEST(PlanJson, HugeDepthAndNumbersAreOneLineErrors) {
  const std::string deep = std::string(80000, '[') + std::string(80000, ']');
  auto d = PlanFromJson(deep);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), "byte 32: JSON nested deeper than 32 levels (ReadOptions::max_depth)");
  const std::string good = PlanToJson(testing::TwoRankOneFOneB());
  auto huge = PlanFromJson(Replace(good, "\"num_replicas\": 2,", "\"num_replicas\": 1e999999,"));
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(), ::testing::Not(HasSubstr("\n")));
  auto big = PlanFromJson(Replace(good, "\"num_replicas\": 2,", "\"num_replicas\": 184467440737095516150,"));
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(), ::testing::Not(HasSubstr("\n")));
}

TEST(PlanJson, NewFieldsAreRequiredAndChecked) {
  const std::string good = PlanToJson(testing::TwoRankOneFOneB());
  nlohmann::json doc = nlohmann::json::parse(good);
  doc["ranks"] = nlohmann::json::object();
  auto wrong_ranks = PlanFromJson(doc.dump());
  EXPECT_EQ(wrong_ranks.status().message(), "ranks = {}; must be an array");
  auto samples_type = PlanFromJson(Replace(good, "\"samples\":[]", "\"samples\":\"all\""));
  EXPECT_EQ(samples_type.status().message(), "ranks[0].buffers[0].samples = \"all\"; must be an array");
  auto unsorted = PlanFromJson(Replace(good, "\"samples\":[]", "\"samples\":[3,0]"));
  EXPECT_EQ(unsorted.status().message(),
            "ranks[0].buffers[0].samples[1] = 0; must be > the previous entry (3): samples are "
            "strictly ascending");
  auto instances = PlanFromJson(Replace(good, "\"instances\":[0,0]", "\"instances\":[3,1]"));
  EXPECT_EQ(instances.status().message(),
            "ranks[0].actions[0].instances = [3,1]; must be [begin, end] with begin <= end");
  auto no_producer = PlanFromJson(Replace(good, "\"producer\":", "\"producer_\":"));
  EXPECT_THAT(no_producer.status().message(),
              StartsWith("ranks[0].buffers[0].producer_ = {"));
  EXPECT_THAT(no_producer.status().message(), EndsWith("; unknown key (did you mean 'producer'?)"));
  doc = nlohmann::json::parse(good);
  doc["ranks"][0]["buffers"][0].erase("producer");
  EXPECT_EQ(PlanFromJson(doc.dump()).status().message(), "ranks[0].buffers[0].producer: missing");
  auto end_rank = PlanFromJson(Replace(good, "\"rank\":1,", "\"rank\":2,"));
  EXPECT_EQ(end_rank.status().message(),
            "ranks[0].buffers[0].consumer.rank = 2; must be < 2 (the number of ranks)");
  auto replica = PlanFromJson(Replace(good, "\"replica\": 0", "\"replica\": 2"));
  EXPECT_EQ(replica.status().message(), "replica = 2; must be < num_replicas (2)");
  auto no_replicas = PlanFromJson(Replace(good, "\"num_replicas\": 2,", ""));
  EXPECT_EQ(no_replicas.status().message(), "num_replicas: missing");
  auto truncated = PlanFromJson(good.substr(0, good.size() / 2));
  EXPECT_THAT(truncated.status().message(), StartsWith("not valid JSON (byte"));
  EXPECT_EQ(truncated.status().message().find('\n'), std::string::npos);
}

TEST(PlanJson, CountLimitsNameTheOption) {
  const std::string good = PlanToJson(testing::TwoRankOneFOneB());
  EXPECT_EQ(PlanFromJson(good, {.max_actions_per_rank = 4}).status().message(),
            "ranks[0].actions has 17 entries; more than 4 (ReadOptions::max_actions_per_rank)");
  EXPECT_EQ(PlanFromJson(good, {.max_buffers_per_rank = 3}).status().message(),
            "ranks[0].buffers has 4 entries; more than 3 (ReadOptions::max_buffers_per_rank)");
  EXPECT_EQ(PlanFromJson(good, {.max_ranks = 1}).status().message(),
            "ranks has 2 entries; more than 1 (ReadOptions::max_ranks)");
  EXPECT_EQ(PlanFromJson(good, {.max_list_length = 1}).status().message(),
            "ranks[0].buffers[0].shape has 2 entries; more than 1 (ReadOptions::max_list_length)");
  EXPECT_EQ(PlanFromJson(good, {.max_file_bytes = 100}).status().message(),
            fmt::format("{} bytes; larger than 100 bytes (ReadOptions::max_file_bytes)", good.size()));
}

TEST(PlanJson, ReadPlanFilePrefixesThePath) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "weft_plan_json_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "bad.json").string();
  const std::string good = PlanToJson(testing::TwoRankOneFOneB());
  auto write = [&](const std::string& text) { std::ofstream(path, std::ios::binary) << text; };
  write(Replace(good, "weft.plan/v3", "weft.plan/v0"));
  EXPECT_EQ(ReadPlanFile(path).status().message(),
            path + ": schema = \"weft.plan/v0\"; expected \"weft.plan/v3\"");
  write(Replace(good, "weft.plan/v3", "weft.plan/v2"));
  EXPECT_EQ(ReadPlanFile(path).status().message(),
            path + ": weft.plan/v2 is no longer read; regenerate it with `weft plan ... --out "
                   "FILE` (writes weft.plan/v3)");
  write(std::string(80000, '[') + std::string(80000, ']'));
  EXPECT_EQ(ReadPlanFile(path).status().message(),
            path + ": byte 32: JSON nested deeper than 32 levels (ReadOptions::max_depth)");
  write(good);
  auto too_large = ReadPlanFile(path, {.max_file_bytes = 1000});
  EXPECT_EQ(too_large.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(too_large.status().message(),
            fmt::format("{}: {} bytes; larger than 1000 bytes (ReadOptions::max_file_bytes)", path,
                        good.size()));
  auto missing = ReadPlanFile((dir / "missing.json").string());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto read = ReadPlanFile(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(ValidatePlan(*read).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace weft::plan
