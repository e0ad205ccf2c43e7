#pragma once
// Shared by the libFuzzer targets of fuzz/: the input as text, and a check that an error is one
// line (the readers promise "one line naming file, field and rule").
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "weft/common/status.h"

namespace weft::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

inline bool HasControlByte(std::string_view s) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
  }
  return false;
}

// Aborts (a finding) when a failed read is not an InvalidArgument/NotFound/ResourceExhausted
// one-liner of sane length.
inline void CheckError(const Status& status) {
  if (status.ok()) return;
  const std::string& m = status.message();
  const bool user_error = status.code() == StatusCode::kInvalidArgument ||
                          status.code() == StatusCode::kNotFound ||
                          status.code() == StatusCode::kResourceExhausted ||
                          status.code() == StatusCode::kFailedPrecondition;
  if (!user_error || m.empty() || m.size() > 2048 || HasControlByte(m)) {
    std::fprintf(stderr, "bad error (code %d, %zu bytes): %s\n", static_cast<int>(status.code()),
                 m.size(), m.c_str());
    std::abort();
  }
}

}  // namespace weft::fuzz
