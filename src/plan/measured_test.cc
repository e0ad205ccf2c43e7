#include "weft/plan/measured.h"

#include <gmock/gmock.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_plans.h"

namespace weft::plan {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// What a runtime records for TwoRankOneFOneBWithData: every compute action, times made up.
MeasuredIteration Measured(const ExecutionPlan& plan) {
  MeasuredIteration it;
  it.model = plan.model;
  it.strategy = plan.strategy;
  it.iteration = 7;
  it.module_names = plan.module_names;
  for (int r = 0; r < plan.num_ranks(); ++r) {
    for (int i = 0; i < static_cast<int>(plan.ranks[r].actions.size()); ++i) {
      if (!IsCompute(plan.ranks[r].actions[i].kind)) continue;
      auto s = MeasuredStageOf(plan, r, i);
      EXPECT_TRUE(s.ok()) << s.status().ToString();
      s->measured_s = 0.001 * (i + 1) + 0.1 * r;
      it.stages.push_back(*s);
    }
    it.ranks.push_back({.rank = r, .wall_s = 0.5 + r});
  }
  return it;
}

TEST(Measured, StagesCarryThePlansStageAndShape) {
  const ExecutionPlan plan = testing::TwoRankOneFOneBWithData();
  auto s = MeasuredStageOf(plan, 1, 8);  // rank 1: forward of microbatch 1
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->stage, plan.ranks[1].actions[8].stage);
  EXPECT_EQ(s->stage.microbatch, 1);
  EXPECT_EQ(s->stage.pass, spec::Pass::kForward);
  EXPECT_EQ(s->replica, 0);
  EXPECT_EQ(s->group, 1);
  EXPECT_EQ(s->instance_begin, 0);
  EXPECT_EQ(s->instance_end, 1);
  EXPECT_EQ(s->tokens, 12 + 13);  // microbatch 1's LLM instance: segments of 12 and 13 tokens
  EXPECT_EQ(s->planned_s, 0.001);
  EXPECT_EQ(MeasuredStageOf(plan, 1, 0).status().message(),
            "rank 1 action 0 (irecv buf 10 from rank 0): not a compute action");
  EXPECT_EQ(MeasuredStageOf(plan, 2, 0).status().message(),
            "rank 2 action 0: not an action of the plan");
}

TEST(Measured, RoundTripIsExactAndDeterministic) {
  const ExecutionPlan plan = testing::TwoRankOneFOneBWithData();
  std::vector<MeasuredIteration> iterations = {Measured(plan), Measured(plan)};
  iterations[1].iteration = 8;
  iterations[1].stages[0].measured_s = 0.1 + 0.2;
  const std::string text = MeasuredToJson(iterations);
  EXPECT_THAT(text, StartsWith("{\n  \"iterations\": [\n    {\n      \"iteration\": 7,\n"));
  EXPECT_THAT(text, HasSubstr(
                        "{\"action\":2,\"group\":0,\"instances\":[0,1],\"measured_s\":0.003,"
                        "\"planned_s\":0.001,\"rank\":0,\"replica\":0,\"stage\":{\"chunk\":0,"
                        "\"mb\":1,\"module\":0,\"pass\":\"forward\",\"sub\":0},\"tokens\":25}"));
  EXPECT_THAT(text,
              HasSubstr("\"ranks\": [{\"rank\":0,\"wall_s\":0.5},{\"rank\":1,\"wall_s\":1.5}],"));
  // The bytes nlohmann writes for the same values.
  const nlohmann::json doc = nlohmann::json::parse(text);
  EXPECT_THAT(text, HasSubstr(doc["iterations"][1]["stages"][0].dump()));
  auto back = MeasuredFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, iterations);
  EXPECT_EQ(MeasuredToJson(*back), text);
  EXPECT_TRUE(CheckMeasuredAgainstPlan((*back)[0], plan).ok());
}

// Replaces the first occurrence of `from` (which must exist).
std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(Measured, ReaderIsHardenedWithOneLineErrors) {
  const std::string good = MeasuredToJson({Measured(testing::TwoRankOneFOneBWithData())});
  auto message = [](const std::string& text) {
    auto r = MeasuredFromJson(text);
    return r.ok() ? std::string("OK") : r.status().message();
  };
  EXPECT_EQ(message(good), "OK");
  EXPECT_EQ(message(Replace(good, "weft.measured/v1", "weft.measured/v0")),
            "schema = \"weft.measured/v0\"; expected \"weft.measured/v1\"");
  EXPECT_EQ(message(Replace(good, "\"measured_s\":0.003", "\"measured_s\":-1")),
            "iterations[0].stages[1].measured_s = -1; must be finite and >= 0");
  EXPECT_EQ(message(Replace(good, "\"measured_s\":0.003", "\"measured_s\":\"fast\"")),
            "iterations[0].stages[1].measured_s = \"fast\"; must be a number");
  EXPECT_EQ(message(Replace(good, "\"module\":0,\"pass\"", "\"module\":1,\"pass\"")),
            "iterations[0].stages[0].stage.module = 1; must be < 1 (the number of modules)");
  EXPECT_EQ(message(Replace(good, "\"pass\":\"forward\"", "\"pass\":\"isend\"")),
            "iterations[0].stages[0].stage.pass = \"isend\"; must be one of forward, backward, "
            "backward_input, backward_weight");
  EXPECT_EQ(message(Replace(good, "\"instances\":[0,1]", "\"instances\":[1,0]")),
            "iterations[0].stages[0].instances = [1,0]; must be [begin, end] with begin <= end");
  EXPECT_EQ(message(Replace(good, "\"action\":2,", "\"action\":0,\"actoin\":2,")),
            "iterations[0].stages[1].actoin = 2; unknown key (did you mean 'action'?)");
  EXPECT_EQ(message(Replace(good, "\"action\":2,", "\"action\":4294967296,")),
            "iterations[0].stages[1].action = 4294967296; must be <= 2147483647");
  EXPECT_EQ(message(Replace(good, "\"rank\":0,\"replica\"", "\"rank\":2,\"replica\"")),
            "iterations[0].stages[0].rank = 2; must be < 2 (the number of ranks)");
  EXPECT_EQ(message(Replace(good, "{\"action\":6,", "{\"action\":0,")),
            "iterations[0].stages[2].action = 0; stages must be sorted by (rank, action) without "
            "repeats; the previous one is (rank 0, action 2)");
  EXPECT_EQ(message(Replace(good, "{\"rank\":1,\"wall_s\"", "{\"rank\":0,\"wall_s\"")),
            "iterations[0].ranks[1].rank = 0; must equal its position (1)");
  EXPECT_EQ(message(std::string(100, '[')),
            "byte 32: JSON nested deeper than 32 levels (ReadOptions::max_depth)");
  EXPECT_THAT(message("{\"schema\": "), StartsWith("not valid JSON (byte"));
  EXPECT_EQ(MeasuredFromJson(good, {.max_file_bytes = 10}).status().message(),
            fmt::format("{} bytes; larger than 10 bytes (ReadOptions::max_file_bytes)",
                        good.size()));
}

TEST(Measured, CheckAgainstThePlanNamesTheFirstDifference) {
  const ExecutionPlan plan = testing::TwoRankOneFOneBWithData();
  MeasuredIteration it = Measured(plan);
  ASSERT_TRUE(CheckMeasuredAgainstPlan(it, plan).ok());
  MeasuredIteration wrong = it;
  wrong.stages[1].tokens = 5;
  EXPECT_EQ(CheckMeasuredAgainstPlan(wrong, plan).message(),
            "measured rank 0 action 2 (forward m0 c0 mb1) (replica 0, group 0, instances [0, "
            "1), 5 tokens) is not the plan's rank 0 action 2 (forward m0 c0 mb1) (replica 0, "
            "group 0, instances [0, 1), 25 tokens)");
  wrong = it;
  wrong.stages[1].action = 7;
  EXPECT_EQ(CheckMeasuredAgainstPlan(wrong, plan).message(),
            "rank 0 action 7 (free buf 30): not a compute action");
  wrong = it;
  wrong.ranks.pop_back();
  EXPECT_EQ(CheckMeasuredAgainstPlan(wrong, plan).message(), "measured 1 ranks; the plan has 2");
  wrong = it;
  wrong.module_names = {"vision"};
  EXPECT_EQ(CheckMeasuredAgainstPlan(wrong, plan).message(),
            "measured modules [vision] are not the plan's [llm]");
}

TEST(Measured, ReadMeasuredFilePrefixesThePath) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "weft_measured_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "m.json").string();
  const std::string good = MeasuredToJson({Measured(testing::TwoRankOneFOneBWithData())});
  std::ofstream(path, std::ios::binary) << Replace(good, "\"iteration\": 7", "\"iteration\": -7");
  EXPECT_EQ(ReadMeasuredFile(path).status().message(),
            path + ": iterations[0].iteration = -7; must be >= 0");
  std::ofstream(path, std::ios::binary) << good;
  auto read = ReadMeasuredFile(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->size(), 1u);
  EXPECT_EQ(ReadMeasuredFile((dir / "missing.json").string()).status().code(),
            StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace weft::plan
