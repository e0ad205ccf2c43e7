#include "weft/common/text.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>

namespace weft {

std::string QuoteForMessage(std::string_view text, size_t max_chars) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  const size_t kept = text.size() <= max_chars ? text.size() : max_chars;
  for (size_t i = 0; i < kept; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += "\"";
  if (kept < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::string NumberForMessage(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  if (ec != std::errc()) return "?";
  return std::string(buffer, end);
}

Status CheckInputFile(std::string_view path, int64_t max_bytes, std::string_view what) {
  const std::string p(path);
  const std::string name = std::string(what) + " " + QuoteForMessage(path, 200);
  struct stat st {};
  // stat (not open): opening a FIFO for reading blocks until a writer appears.
  if (::stat(p.c_str(), &st) != 0) {
    return NotFoundError(name + ": cannot read: " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return InvalidArgumentError(name + ": is a directory, not a file");
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgumentError(name + ": not a regular file (a FIFO, socket or device); give a file");
  }
  if (st.st_size > max_bytes) {
    return ResourceExhaustedError(name + ": " + std::to_string(st.st_size) +
                                  " bytes; the limit is " + std::to_string(max_bytes) + " bytes");
  }
  return OkStatus();
}

}  // namespace weft
