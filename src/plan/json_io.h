#pragma once
// Private JSON helpers of the plan module's readers and writers (plan_json.cc, measured.cc):
// an appending writer whose bytes equal nlohmann's dump(), the bracket-depth scan that runs
// before any tree is built, and path-naming field access with one-line errors. Not installed.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/common/strict_input.h"
#include "weft/common/text.h"
#include "weft/plan/plan_json.h"

namespace weft::plan::internal {

using nlohmann::json;

inline constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();


// Writes JSON by appending to one string. The bytes are those nlohmann::json's dump()
// gives for the same values (the writer used to build a json tree per buffer and action, which
// cost several times the rest of `weft plan --out`): objects list their keys in byte order
// (nlohmann's std::map), integers in decimal, doubles in nlohmann's own shortest round-trip form
// ("null" when not finite), strings escaped as dump() escapes them. Fixed text (keys and
// punctuation) is appended as whole literals.
class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  void Raw(std::string_view text) { out_.append(text); }
  void Int(int64_t value) {
    if (value >= 0 && value < 10) {  // most stage fields and many ids
      out_.push_back(static_cast<char>('0' + value));
      return;
    }
    char buffer[24];
    const auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
    out_.append(buffer, static_cast<size_t>(end - buffer));
  }
  void Double(double value) {
    if (!std::isfinite(value)) {
      out_.append("null");
      return;
    }
    // What nlohmann's serializer calls for a double (its buffer holds 64 characters too).
    char buffer[64];
    const char* end = nlohmann::detail::to_chars(buffer, buffer + sizeof(buffer), value);
    out_.append(buffer, static_cast<size_t>(end - buffer));
  }
  void String(std::string_view text) {
    // Printable ASCII other than '"' and '\\' is written as is; anything else (escapes, UTF-8,
    // which dump() also checks) goes through nlohmann.
    const bool plain = std::all_of(text.begin(), text.end(), [](char c) {
      return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
    });
    if (!plain) {
      out_.append(json(text).dump());
      return;
    }
    out_.push_back('"');
    out_.append(text);
    out_.push_back('"');
  }
  template <typename Range>
  void IntList(const Range& values) {
    out_.push_back('[');
    bool first = true;
    for (const auto value : values) {
      if (!first) out_.push_back(',');
      first = false;
      Int(value);
    }
    out_.push_back(']');
  }

 private:
  std::string& out_;
};

// Rejects text nested deeper than `max_depth` before any tree is built: a scan of the brackets
// outside strings. (nlohmann's parser and the destructor of its tree recurse per level, so an
// 80,000-deep array would overflow the stack.)
inline Status CheckDepth(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return InvalidArgumentError(fmt::format(
            "byte {}: JSON nested deeper than {} levels (ReadOptions::max_depth)", i, max_depth));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return OkStatus();
}

inline std::string MaxText(int64_t max_value) {
  if (max_value == kMaxPlanBytes) return fmt::format("{} (2^50)", max_value);
  return fmt::format("{}", max_value);
}

// Field access with path-named, one-line errors.
class Reader {
 public:
  explicit Reader(const ReadOptions& options) : options_(options) {}

  static std::string Show(const json& v) {
    std::string s;
    if (v.is_array() && v.size() > 16) {
      s = fmt::format("[... {} entries]", v.size());
    } else if (v.is_object() && v.size() > 16) {
      s = fmt::format("{{... {} keys}}", v.size());
    } else {
      s = v.dump();
    }
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return Shown(s);
  }
  // Input text in a message: printable ASCII as is, other bytes escaped (one line, no raw bytes).
  static std::string Shown(std::string_view s) {
    const bool plain = std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
    return plain ? std::string(s) : QuoteForMessage(s, 60);
  }
  static Status Bad(const std::string& path, const json& v, std::string_view rule) {
    return InvalidArgumentError(fmt::format("{} = {}; {}", path, Show(v), rule));
  }
  static std::string Join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }

  // Every key of object `obj` is in `known` (a misspelt optional field is not silently dropped).
  static Status KnownKeys(const json& obj, const std::string& path,
                          const std::vector<std::string>& known) {
    const std::string* key = FirstUnknownKey(obj, known);
    if (key == nullptr) return OkStatus();
    return Bad(Join(path, Shown(*key)), obj[*key],
               fmt::format("unknown key{}", DidYouMean(*key, known)));
  }

  static StatusOr<const json*> Get(const json& obj, const std::string& path, std::string_view key,
                                   bool required = true) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (!required) return static_cast<const json*>(nullptr);
      return InvalidArgumentError(fmt::format("{}: missing", Join(path, key)));
    }
    return &*it;
  }

  // An integer in [min_value, max_value] (max_value must fit Int); values that do not fit are
  // refused, never wrapped.
  template <typename Int>
  static Status IntegerValue(const json& v, const std::string& path, Int* out, int64_t min_value,
                             int64_t max_value) {
    if (!v.is_number_integer()) return Bad(path, v, "must be an integer");
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(max_value)) {
        return Bad(path, v, fmt::format("must be <= {}", MaxText(max_value)));
      }
      if (static_cast<int64_t>(u) < min_value) {
        return Bad(path, v, fmt::format("must be >= {}", min_value));
      }
      *out = static_cast<Int>(u);
      return OkStatus();
    }
    const int64_t x = v.get<int64_t>();
    if (x < min_value) return Bad(path, v, fmt::format("must be >= {}", min_value));
    if (x > max_value) return Bad(path, v, fmt::format("must be <= {}", MaxText(max_value)));
    *out = static_cast<Int>(x);
    return OkStatus();
  }

  template <typename Int>
  static Status Integer(const json& obj, const std::string& path, std::string_view key, Int* out,
                        bool required, int64_t min_value, int64_t max_value) {
    static_assert(sizeof(Int) >= 4);
    WEFT_ASSIGN_OR_RETURN(const json* v, Get(obj, path, key, required));
    if (v == nullptr) return OkStatus();
    return IntegerValue(*v, Join(path, key), out, min_value, max_value);
  }
  // An int field (int32 range).
  static Status Int(const json& obj, const std::string& path, std::string_view key, int* out,
                    int64_t min_value = 0, bool required = true) {
    return Integer(obj, path, key, out, required, min_value, kMaxInt32);
  }
  // A byte count (or another int64 quantity) in [min_value, 2^50].
  static Status Bytes(const json& obj, const std::string& path, std::string_view key, int64_t* out,
                      bool required = true, int64_t min_value = 0) {
    return Integer(obj, path, key, out, required, min_value, kMaxPlanBytes);
  }

  static Status Number(const json& obj, const std::string& path, std::string_view key, double* out,
                       bool required = true) {
    WEFT_ASSIGN_OR_RETURN(const json* v, Get(obj, path, key, required));
    if (v == nullptr) return OkStatus();
    if (!v->is_number()) return Bad(Join(path, key), *v, "must be a number");
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < 0) return Bad(Join(path, key), *v, "must be finite and >= 0");
    *out = x;
    return OkStatus();
  }

  static Status String(const json& obj, const std::string& path, std::string_view key,
                       std::string* out, bool required = true) {
    WEFT_ASSIGN_OR_RETURN(const json* v, Get(obj, path, key, required));
    if (v == nullptr) return OkStatus();
    if (!v->is_string()) return Bad(Join(path, key), *v, "must be a string");
    *out = v->get<std::string>();
    return OkStatus();
  }

  // An array of at most `limit` entries (`limit_name` names the ReadOptions field).
  static StatusOr<const json*> Array(const json& obj, const std::string& path, std::string_view key,
                                     int64_t limit, std::string_view limit_name,
                                     bool required = true) {
    WEFT_ASSIGN_OR_RETURN(const json* v, Get(obj, path, key, required));
    if (v == nullptr) return v;
    if (!v->is_array()) return Bad(Join(path, key), *v, "must be an array");
    if (static_cast<int64_t>(v->size()) > limit) {
      return InvalidArgumentError(fmt::format("{} has {} entries; more than {} ({})",
                                              Join(path, key), v->size(), limit, limit_name));
    }
    return v;
  }

  static StatusOr<const json*> Object(const json& obj, const std::string& path,
                                      std::string_view key) {
    WEFT_ASSIGN_OR_RETURN(const json* v, Get(obj, path, key));
    if (!v->is_object()) return Bad(Join(path, key), *v, "must be an object");
    return v;
  }

  // A list of integers in [min_value, max_value], at most max_list_length long.
  template <typename Int>
  Status IntList(const json& obj, const std::string& path, std::string_view key,
                 std::vector<Int>* out, int64_t min_value, int64_t max_value) const {
    WEFT_ASSIGN_OR_RETURN(const json* arr, Array(obj, path, key, options_.max_list_length,
                                                 "ReadOptions::max_list_length"));
    out->clear();
    out->reserve(arr->size());
    for (size_t i = 0; i < arr->size(); ++i) {
      Int x = 0;
      WEFT_RETURN_IF_ERROR(IntegerValue((*arr)[i], fmt::format("{}[{}]", Join(path, key), i), &x,
                                        min_value, max_value));
      out->push_back(x);
    }
    return OkStatus();
  }

  // Sample ids: int32 >= 0, strictly ascending.
  Status Samples(const json& obj, const std::string& path, std::vector<int32_t>* out) const {
    WEFT_RETURN_IF_ERROR(IntList(obj, path, "samples", out, 0, kMaxInt32));
    for (size_t i = 1; i < out->size(); ++i) {
      if ((*out)[i] <= (*out)[i - 1]) {
        return Bad(fmt::format("{}.samples[{}]", path, i), (*out)[i],
                   fmt::format("must be > the previous entry ({}): samples are strictly ascending",
                               (*out)[i - 1]));
      }
    }
    return OkStatus();
  }

  const ReadOptions& options() const { return options_; }

 private:
  const ReadOptions& options_;
};

}  // namespace weft::plan::internal
