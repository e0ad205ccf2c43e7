#include "weft/report/tables.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"

namespace weft::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Comparison ThreeStrategies() {
  Comparison c{.model = "qwen2-vl-7b", .cluster = "h800x32", .num_gpus = 32,
               .data_profile = "llava-665k", .num_iterations = 3, .baseline = "megatron"};
  StrategyResult megatron{.name = "megatron", .description = "1F1B, uniform layer split"};
  StrategyResult dip{.name = "dip", .description = "MCTS-searched schedule"};
  for (int i = 0; i < 3; ++i) {
    megatron.iterations.push_back({.iteration = i, .iteration_time_s = 2.0 + 0.1 * i,
                                   .samples_per_s = 16, .tokens_per_s = 40000, .mfu = 0.3,
                                   .bubble_ratio = 0.25, .peak_memory_bytes = 60 * testing::kGiB,
                                   .lower_bound_s = 1.5});
    dip.iterations.push_back({.iteration = i, .iteration_time_s = 1.6 + 0.1 * i,
                              .samples_per_s = 20, .tokens_per_s = 50000, .mfu = 0.38,
                              .bubble_ratio = 0.1, .peak_memory_bytes = 70 * testing::kGiB,
                              .lower_bound_s = 1.5, .plan_time_s = 0.4});
  }
  c.strategies = {megatron, dip, {.name = "cornstarch", .error = "needs >= 2 encoders"}};
  return c;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Splits one CSV record (no embedded newlines) honouring quotes.
std::vector<std::string> CsvRecord(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        fields.back() += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      fields.emplace_back();
    } else {
      fields.back() += ch;
    }
  }
  return fields;
}

TEST(ComparisonJson, HasTheDocumentedKeysWithMeanTimeAndPerIterationArrays) {
  const nlohmann::json j = ComparisonJson(ThreeStrategies());
  EXPECT_EQ(j["model"], "qwen2-vl-7b");
  EXPECT_EQ(j["num_gpus"], 32);
  EXPECT_EQ(j["baseline"], "megatron");
  ASSERT_EQ(j["strategies"].size(), 3u);
  for (const auto& s : j["strategies"]) {
    for (const char* key :
         {"name", "description", "error", "iteration_time_s", "iteration_time_p50_s",
          "iteration_time_p90_s", "throughput_samples_per_s", "throughput_tokens_per_s", "mfu",
          "bubble_ratio", "peak_memory_bytes", "lower_bound_s", "gap_to_lower_bound", "oom",
          "plan_time_s", "speedup_vs_baseline", "iterations"}) {
      EXPECT_TRUE(s.contains(key)) << s["name"] << " lacks " << key;
    }
  }
  const auto& megatron = j["strategies"][0];
  EXPECT_DOUBLE_EQ(megatron["iteration_time_s"].get<double>(), 2.1);
  EXPECT_DOUBLE_EQ(megatron["iteration_time_p50_s"].get<double>(), 2.1);
  EXPECT_DOUBLE_EQ(megatron["lower_bound_s"].get<double>(), 1.5);
  EXPECT_EQ(megatron["peak_memory_bytes"].get<int64_t>(), 60 * testing::kGiB);
  EXPECT_EQ(megatron["oom"], false);
  EXPECT_TRUE(megatron["error"].is_null());
  EXPECT_EQ(megatron["iterations"]["iteration_time_s"].size(), 3u);
  EXPECT_DOUBLE_EQ(megatron["iterations"]["iteration_time_s"][2].get<double>(), 2.2);
  const auto& dip = j["strategies"][1];
  EXPECT_NEAR(dip["speedup_vs_baseline"].get<double>(), 2.1 / 1.7, 1e-12);
  EXPECT_DOUBLE_EQ(dip["plan_time_s"].get<double>(), 0.4);
  const auto& failed = j["strategies"][2];
  EXPECT_EQ(failed["error"], "needs >= 2 encoders");
  EXPECT_TRUE(failed["iteration_time_s"].is_null());
  EXPECT_TRUE(failed["speedup_vs_baseline"].is_null());
  EXPECT_TRUE(failed["oom"].is_null());
}

TEST(ComparisonJson, InvalidUtf8IsReplacedNotThrown) {
  Comparison c = ThreeStrategies();
  c.strategies[0].name = "bad\xff\xfename";
  std::string dumped;
  ASSERT_NO_THROW(dumped = ComparisonJsonString(c));
  const nlohmann::json back = nlohmann::json::parse(dumped);
  EXPECT_EQ(back["strategies"][0]["name"], "bad\xEF\xBF\xBD\xEF\xBF\xBDname");
}

TEST(TextTable, AlignsColumnsAndListsErrors) {
  const std::string text = TextTable(ThreeStrategies());
  const std::vector<std::string> lines = Lines(text);
  ASSERT_GE(lines.size(), 6u);
  EXPECT_THAT(lines[0], HasSubstr("model qwen2-vl-7b | cluster h800x32 | 32 GPUs"));
  EXPECT_THAT(lines[1], HasSubstr("strategy"));
  EXPECT_THAT(lines[1], HasSubstr("speedup"));
  // Header, rule and rows all end at the same column (the last column is right-aligned).
  for (int i = 1; i <= 5; ++i) EXPECT_EQ(lines[i].size(), lines[1].size()) << lines[i];
  // Right-aligned numbers: the "time mean s" column ends where its header ends.
  const size_t mean_end = lines[1].find("time mean s") + std::string("time mean s").size();
  EXPECT_EQ(lines[3].substr(mean_end - 3, 3), "2.1");
  EXPECT_THAT(lines[4], HasSubstr("1.7"));
  EXPECT_THAT(lines[4], HasSubstr("1.24x"));
  EXPECT_THAT(lines[3], HasSubstr("1.00x"));
  EXPECT_THAT(lines[3], HasSubstr("60.00"));  // peak GiB
  EXPECT_THAT(lines[3], HasSubstr("40.0"));    // gap to lower bound: 2.1/1.5 - 1 = 40 %
  EXPECT_THAT(lines[5].substr(0, 10), HasSubstr("cornstarch"));
  EXPECT_THAT(text, HasSubstr("error: cornstarch: needs >= 2 encoders"));
}

TEST(TextTable, ExplainsGapLowerBoundUnderTheRows) {
  const std::vector<std::string> lines = Lines(TextTable(ThreeStrategies()));
  const auto legend = std::find(lines.begin(), lines.end(), std::string(kGapLegend));
  ASSERT_NE(legend, lines.end());
  EXPECT_EQ(legend - lines.begin(), 6);  // title, header, rule, three rows, then the legend
}

TEST(TextTable, NewlinesInNamesDoNotBreakRows) {
  Comparison c = ThreeStrategies();
  c.strategies[1].name = "d\nip";
  EXPECT_EQ(Lines(TextTable(c)).size(), Lines(TextTable(ThreeStrategies())).size());
}

TEST(SummaryCsv, OneQuotedRecordPerStrategyWithTheHeaderFieldCount) {
  Comparison c = ThreeStrategies();
  c.strategies[0].name = "megatron, \"1f1b\"";
  c.baseline = c.strategies[0].name;
  const std::vector<std::string> lines = Lines(SummaryCsv(c));
  ASSERT_EQ(lines.size(), 4u);
  const std::vector<std::string> header = CsvRecord(lines[0]);
  EXPECT_EQ(header.front(), "strategy");
  EXPECT_EQ(header.back(), "error");
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(CsvRecord(lines[i]).size(), header.size()) << lines[i];
  }
  EXPECT_EQ(CsvRecord(lines[1])[0], "megatron, \"1f1b\"");
  EXPECT_DOUBLE_EQ(std::stod(CsvRecord(lines[1])[1]), 2.1);
  EXPECT_EQ(CsvRecord(lines[3]).back(), "needs >= 2 encoders");
}

TEST(IterationsCsv, OneRecordPerStrategyIteration) {
  const std::vector<std::string> lines = Lines(IterationsCsv(ThreeStrategies()));
  ASSERT_EQ(lines.size(), 1u + 3 + 3);
  const size_t fields = CsvRecord(lines[0]).size();
  for (const std::string& line : lines) EXPECT_EQ(CsvRecord(line).size(), fields);
  EXPECT_EQ(CsvRecord(lines[4])[0], "dip");
  EXPECT_EQ(CsvRecord(lines[4])[1], "0");
  EXPECT_DOUBLE_EQ(std::stod(CsvRecord(lines[4])[2]), 1.6);
  EXPECT_THAT(IterationsCsv(ThreeStrategies()), Not(HasSubstr("cornstarch")));
}

}  // namespace
}  // namespace weft::report
