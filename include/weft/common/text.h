#pragma once
// Safe text for messages: user input quoted, escaped and truncated (so an error is one line and
// never echoes raw bytes), and a checked input path (a regular file of bounded size, so reading
// it can neither hang on a FIFO nor exhaust memory on /dev/zero).
// Free functions; thread-safe.
#include <cstdint>
#include <string>
#include <string_view>

#include "weft/common/status.h"

namespace weft {

// `text` in double quotes for an error message: control bytes, quotes, backslashes and bytes >=
// 0x7f escaped (\n, \t, \", \\, \xNN), at most `max_chars` characters of the input kept ("..."
// marks a cut, with the total length). QuoteForMessage("a\nb") == "\"a\\nb\"".
std::string QuoteForMessage(std::string_view text, size_t max_chars = 80);

// A number for a message: shortest round-trip form for doubles ("1e+308", "nan", "0.25").
std::string NumberForMessage(double value);

// OK when `path` names a regular file of at most `max_bytes` bytes; else NotFound (missing),
// InvalidArgument (a directory, FIFO, device, ...) or ResourceExhausted (too large, saying the
// limit), each naming the path (quoted). `what` names the input in the message ("--model file").
Status CheckInputFile(std::string_view path, int64_t max_bytes, std::string_view what = "file");

}  // namespace weft
