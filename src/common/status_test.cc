#include "weft/common/status.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("x = " + std::to_string(x) + "; must be even");
  return x / 2;
}

Status Quarter(int x, int* out) {
  WEFT_ASSIGN_OR_RETURN(int h, Half(x));
  WEFT_ASSIGN_OR_RETURN(*out, Half(h));
  return OkStatus();
}

TEST(Status, OkByDefaultAndPrefixesErrors) {
  EXPECT_TRUE(Status().ok());
  Status s = NotFoundError("no such file").WithPrefix("model.yaml");
  EXPECT_EQ(s.ToString(), "NOT_FOUND: model.yaml: no such file");
  EXPECT_TRUE(IsUserError(s));
  EXPECT_FALSE(IsUserError(InternalError("bug")));
}

TEST(StatusOr, PropagatesThroughMacros) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "x = 3; must be even");
}

}  // namespace
}  // namespace weft
