#include "weft/plan/plan_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_plans.h"
#include "weft/plan/validator.h"

namespace weft::plan {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

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
  plan.ranks[0].memory_capacity_bytes = 80LL << 30;
  plan.ranks[0].static_bytes = 12345678901;
  plan.ranks[0].actions[0].recompute = graph::Recompute::kSelective;
  plan.ranks[0].actions[0].recompute_layers = {1, 3, 0, 0};
  plan.ranks[0].actions[0].activation_alloc_bytes = 1 << 20;
  plan.ranks[0].actions[0].latency_s = 0.1 + 0.2;  // not exactly representable in decimal
  plan.ranks[0].actions[3].group = 4;
  plan.ranks[0].actions[4].group = 4;
  plan.ranks[1].buffers[0].tensor.dtype = DType::kFp32;
  plan.ranks[0].buffers[0].tensor.dtype = DType::kFp32;
  plan.ranks[1].actions[2].stage.sub_microbatch = 2;
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

TEST(PlanJson, WritesTheDocumentedSchema) {
  const std::string text = PlanToJson(testing::TwoRankOneFOneB());
  EXPECT_THAT(text, StartsWith("{\n  \"schema\": \"weft.plan/v1\",\n"));
  EXPECT_THAT(text, HasSubstr("\"num_ranks\": 2"));
  EXPECT_THAT(text, HasSubstr("{\"dtype\":\"bf16\",\"id\":0,\"name\":\"act0\",\"shape\":[16,8]}"));
  EXPECT_THAT(text, HasSubstr("{\"buffer\":0,\"group\":-1,\"op\":\"isend\",\"peer\":1,\"stage\":"
                              "{\"chunk\":0,\"mb\":0,\"module\":0,\"pass\":\"forward\",\"sub\":0}}"));
  EXPECT_THAT(text, HasSubstr("{\"activation_alloc_bytes\":0,\"activation_free_bytes\":0,"
                              "\"inputs\":[30],\"latency_s\":0.001,\"op\":\"backward\",\"outputs\":"
                              "[],\"recompute\":\"none\",\"stage\":{\"chunk\":0,\"mb\":0,"
                              "\"module\":0,\"sub\":0}}"));
}

TEST(PlanJson, WrongVersionIsRefusedNamingTheField) {
  const std::string text =
      Replace(PlanToJson(testing::TwoRankOneFOneB()), "weft.plan/v1", "weft.plan/v2");
  auto plan = PlanFromJson(text);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(plan.status().message(), "schema = \"weft.plan/v2\"; expected \"weft.plan/v1\"");
}

TEST(PlanJson, MalformedFieldsNameTheirPath) {
  const std::string good = PlanToJson(testing::TwoRankOneFOneB());
  auto bad_op = PlanFromJson(Replace(good, "\"op\":\"forward\"", "\"op\":\"fwd\""));
  EXPECT_EQ(bad_op.status().message(),
            "ranks[0].actions[0].op = \"fwd\"; must be one of forward, backward, backward_input, "
            "backward_weight, isend, irecv, wait_send, wait_recv, free");
  auto missing_peer = PlanFromJson(Replace(good, "\"peer\":1,", ""));
  EXPECT_EQ(missing_peer.status().message(), "ranks[0].actions[1].peer: missing");
  auto bad_dtype = PlanFromJson(Replace(good, "\"dtype\":\"bf16\"", "\"dtype\":\"fp8\""));
  EXPECT_EQ(bad_dtype.status().message(),
            "ranks[0].buffers[0].dtype = \"fp8\"; must be bf16 or fp32");
  auto bad_type = PlanFromJson(Replace(good, "\"static_bytes\": 0", "\"static_bytes\": \"lots\""));
  EXPECT_EQ(bad_type.status().message(), "ranks[0].static_bytes = \"lots\"; must be an integer");
  auto negative = PlanFromJson(Replace(good, "\"shape\":[16,8]", "\"shape\":[16,-8]"));
  EXPECT_EQ(negative.status().message(), "ranks[0].buffers[0].shape = [16,-8]; dims must be >= 0");
  auto count = PlanFromJson(Replace(good, "\"num_ranks\": 2", "\"num_ranks\": 3"));
  EXPECT_EQ(count.status().message(), "num_ranks = 3; must equal the length of ranks (2)");
  auto not_json = PlanFromJson("{\"schema\": ");
  EXPECT_THAT(not_json.status().message(), StartsWith("not valid JSON (byte"));
}

TEST(PlanJson, ReadPlanFilePrefixesThePath) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "weft_plan_json_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "bad.json").string();
  {
    std::ofstream out(path);
    out << Replace(PlanToJson(testing::TwoRankOneFOneB()), "weft.plan/v1", "weft.plan/v0");
  }
  auto plan = ReadPlanFile(path);
  EXPECT_EQ(plan.status().message(),
            path + ": schema = \"weft.plan/v0\"; expected \"weft.plan/v1\"");
  auto missing = ReadPlanFile((dir / "missing.json").string());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  {
    std::ofstream out(path);
    out << PlanToJson(testing::TwoRankOneFOneB());
  }
  auto good = ReadPlanFile(path);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_TRUE(ValidatePlan(*good).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace weft::plan
