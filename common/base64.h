// Base64 (RFC 4648, with padding) for carrying binary content — a gzipped trace — inside a
// JSON protocol frame. Plain functions; any thread.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace ckprof {

std::string Base64Encode(std::string_view data);
// Whitespace is ignored; any other character outside the alphabet is an error naming its
// offset.
Result<std::string> Base64Decode(std::string_view text);

}  // namespace ckprof
