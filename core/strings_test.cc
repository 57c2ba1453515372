#include "core/strings.h"

#include <gtest/gtest.h>

namespace rlflow {
namespace {

using List = std::vector<std::string>;

TEST(SplitList, TrimsAndDropsEmptyItems) {
  EXPECT_EQ(SplitList(" dce, cse,,fold_constants "), (List{"dce", "cse", "fold_constants"}));
  EXPECT_EQ(SplitList("a,b"), (List{"a", "b"}));
  EXPECT_EQ(SplitList("\ta b ,c"), (List{"a b", "c"}));  // inner spaces stay
  EXPECT_EQ(SplitList(""), List{});
  EXPECT_EQ(SplitList(" , ,"), List{});
  EXPECT_EQ(SplitList("x"), List{"x"});
  EXPECT_EQ(SplitList("0.5:1:1.75", ':'), (List{"0.5", "1", "1.75"}));
}

}  // namespace
}  // namespace rlflow
