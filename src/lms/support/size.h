// Byte sizes as people type and read them. `parse_size` accepts a plain byte count ("1000000"), binary units
// ("64KiB", "512MiB", "1.5GiB", "1TiB", and the short forms "64K", "512M", "16G") and decimal ones ("2GB" = 2e9
// bytes, "500kB"), with optional space between the number and the unit; unit letters are case-insensitive. A
// fraction is allowed with a unit and rounds to the nearest byte; without a unit the count must be whole.
// `format_size` prints the binary form with one decimal ("1.5 GiB", "512 B") for messages.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "lms/support/error.h"

namespace lms {

// "No limit" for budgets and other byte caps.
inline constexpr int64_t kUnlimitedBytes = std::numeric_limits<int64_t>::max();

// Errors name the text and say what was expected; negative, empty, malformed and overflowing sizes fail.
Result<int64_t> parse_size(std::string_view text);

// "1.5 GiB", "97.5 MiB", "512 B".
std::string format_size(int64_t bytes);

}  // namespace lms
