#include "weft/common/text.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

namespace weft {
namespace {

TEST(QuoteForMessage, EscapesControlBytesQuotesAndHighBytes) {
  EXPECT_EQ(QuoteForMessage("vlm-s"), "\"vlm-s\"");
  EXPECT_EQ(QuoteForMessage("a\nb\tc\rd"), "\"a\\nb\\tc\\rd\"");
  EXPECT_EQ(QuoteForMessage("say \"hi\" \\"), "\"say \\\"hi\\\" \\\\\"");
  EXPECT_EQ(QuoteForMessage(std::string("\x1b[K\xff\0", 5)), "\"\\x1b[K\\xff\\x00\"");
}

TEST(QuoteForMessage, TruncatesLongInputAndSaysItsLength) {
  const std::string quoted = QuoteForMessage(std::string(1000, 'x'), 10);
  EXPECT_EQ(quoted, "\"xxxxxxxxxx\"... (1000 bytes)");
  EXPECT_EQ(quoted.find('\n'), std::string::npos);
}

TEST(EscapeForMessage, KeepsQuotesEscapesNewlines) {
  EXPECT_EQ(EscapeForMessage("file 'a\nb': tp·pp \\x"), "file 'a\\nb': tp·pp \\x");
  EXPECT_EQ(EscapeForMessage("abcdef", 3), "abc... (6 bytes)");
}

TEST(NumberForMessage, ShortestFormAndNonFinite) {
  EXPECT_EQ(NumberForMessage(0.25), "0.25");
  EXPECT_EQ(NumberForMessage(1e308), "1e+308");
  EXPECT_EQ(NumberForMessage(std::nan("")), "nan");
  EXPECT_EQ(NumberForMessage(-HUGE_VAL), "-inf");
}

TEST(CheckInputFile, AcceptsSmallRegularFilesOnly) {
  const std::string dir = ::testing::TempDir();
  const std::string file = dir + "/weft_text_test_small.yaml";
  { std::ofstream(file) << "name: x\n"; }
  EXPECT_TRUE(CheckInputFile(file, 1024).ok());
  Status big = CheckInputFile(file, 3, "--model file");
  EXPECT_EQ(big.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(big.message().find("the limit is 3 bytes"), std::string::npos) << big.message();
  EXPECT_EQ(CheckInputFile(dir, 1024).code(), StatusCode::kInvalidArgument);
  Status dev = CheckInputFile("/dev/zero", 1024);
  EXPECT_EQ(dev.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dev.message().find("not a regular file"), std::string::npos) << dev.message();
  const std::string fifo = dir + "/weft_text_test_fifo";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(CheckInputFile(fifo, 1024).code(), StatusCode::kInvalidArgument);  // does not block
  ::unlink(fifo.c_str());
  EXPECT_EQ(CheckInputFile(dir + "/no\nsuch", 1024).code(), StatusCode::kNotFound);
  EXPECT_NE(CheckInputFile(dir + "/no\nsuch", 1024).message().find("no\\nsuch"),
            std::string::npos);
  std::remove(file.c_str());
}

}  // namespace
}  // namespace weft
