// Size parsing: the forms the command line documents, and one clear error for everything else.
#include <gtest/gtest.h>

#include "lms/support/size.h"

namespace lms {
namespace {

TEST(Size, ParsesDocumentedForms) {
  const std::pair<const char*, int64_t> cases[] = {
      {"1000000", 1000000},
      {"0", 0},
      {"512MiB", 512LL << 20},
      {"16GiB", 16LL << 30},
      {"1.5GiB", 3LL << 29},
      {"64KiB", 64LL << 10},
      {"2GB", 2000000000},
      {"500kB", 500000},
      {"1TiB", 1LL << 40},
      {"16G", 16LL << 30},
      {"512 MiB", 512LL << 20},
      {"  64kib ", 64LL << 10},
      {"100B", 100},
      {"0.5KiB", 512},
  };
  for (const auto& [text, bytes] : cases) {
    auto r = parse_size(text);
    ASSERT_TRUE(r.has_value()) << text << ": " << r.error().str();
    EXPECT_EQ(*r, bytes) << text;
  }
}

TEST(Size, RejectsMalformed) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"-5", "negative"},
      {"GiB", "no number"},
      {"12XB", "unknown unit"},
      {"1.5", "whole number"},
      {"1.2.3GiB", "unknown unit"},
      {"99999999999999999999", "too large"},
      {"100000000TiB", "too large"},
      {"1e9", "unknown unit"},
  };
  for (const auto& [text, needle] : cases) {
    auto r = parse_size(text);
    ASSERT_FALSE(r.has_value()) << text;
    EXPECT_NE(r.error().str().find(needle), std::string::npos) << text << ": " << r.error().str();
  }
}

TEST(Size, Formats) {
  EXPECT_EQ(format_size(512), "512 B");
  EXPECT_EQ(format_size(3LL << 29), "1.5 GiB");
  EXPECT_EQ(format_size(1024), "1.0 KiB");
}

}  // namespace
}  // namespace lms
