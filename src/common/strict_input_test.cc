#include "weft/common/strict_input.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace weft {
namespace {

using ::testing::HasSubstr;

// `levels` levels of `fanout` aliases to the level below: expands to about fanout^levels nodes.
std::string AliasBomb(int levels, int fanout) {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= levels; ++i) {
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < fanout; ++k) {
      text += (k ? ", *a" : "*a") + std::to_string(i - 1);
    }
    text += "]\n";
  }
  return text;
}

TEST(LoadStrictYaml, ReadsOneDocumentWithAliasesUnderTheBound) {
  auto root = LoadStrictYaml("base: &b {tp: 2}\nllm: *b\nvision: *b\n", "ok.yaml");
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_EQ((*root)["vision"]["tp"].as<int>(), 2);
  // A trailing document-end marker is not a second document.
  EXPECT_TRUE(LoadStrictYaml("a: 1\n...\n", "end.yaml").ok());
  // Empty input is a null node, as yaml-cpp reads it.
  auto empty = LoadStrictYaml("", "empty.yaml");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->IsNull());
  // 4 levels of 10: about 10^5 nodes, under kMaxYamlNodes.
  EXPECT_TRUE(LoadStrictYaml(AliasBomb(4, 10), "small.yaml").ok());
}

TEST(LoadStrictYaml, RefusesAnAliasBombQuickly) {
  const auto start = std::chrono::steady_clock::now();
  auto root = LoadStrictYaml(AliasBomb(10, 10), "bomb.yaml");
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(root.ok());
  EXPECT_EQ(root.status().message(),
            "bomb.yaml:6:50: aliases expand the document past 1048576 nodes; at most 1048576 "
            "(each alias counts as a copy of the node it names)");
  EXPECT_LT(elapsed_s, 1.0);  // counted on the parser's events, never walked (10^10 nodes)
}

TEST(LoadStrictYaml, RefusesASecondDocument) {
  auto root = LoadStrictYaml("name: x\n---\nname: y\n", "two.yaml");
  ASSERT_FALSE(root.ok());
  EXPECT_EQ(root.status().message(),
            "two.yaml:2:1: a second YAML document starts here; a file holds exactly one");
}

TEST(LoadStrictYaml, RefusesDuplicateKeysAtAnyDepth) {
  auto root = LoadStrictYaml("a:\n  b: 1\n  b: 2\n", "dup.yaml");
  ASSERT_FALSE(root.ok());
  EXPECT_EQ(root.status().message(),
            "dup.yaml:3:3: a.b appears twice (first at line 2); keys must be unique");
}

TEST(LoadStrictYaml, RefusesACyclicAlias) {
  auto root = LoadStrictYaml("a: &a [1, *a]\n", "cycle.yaml");
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(root.status().message(), HasSubstr("cycle.yaml:1:11: an alias names a node that "
                                                 "contains it"));
}

TEST(LoadStrictYaml, MalformedYamlNamesFileLineAndColumn) {
  auto root = LoadStrictYaml("a: [1, 2\n", "bad.yaml");
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(root.status().message(), HasSubstr("bad.yaml:"));
  EXPECT_THAT(root.status().message(), HasSubstr("malformed YAML"));
  EXPECT_EQ(root.status().message().find('\n'), std::string::npos);
}

}  // namespace
}  // namespace weft
