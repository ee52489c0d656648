#include "common/hex.h"

#include <gtest/gtest.h>

namespace leapfrog {
namespace {

TEST(Hex, TwoLowercaseDigitsPerByteInOrder) {
  EXPECT_EQ(hex_encode(std::string_view()), "");
  EXPECT_EQ(hex_encode(std::string("\x00\x01\x7f\x80\xab\xff", 6)), "00017f80abff");
  const unsigned char digest[] = {0xde, 0xad, 0xbe, 0xef};
  EXPECT_EQ(hex_encode(digest, sizeof digest), "deadbeef");
}

}  // namespace
}  // namespace leapfrog
