#include "weft/common/strict_input.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include "weft/common/text.h"

namespace weft {
namespace {

int EditDistance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string KeyText(const YAML::Node& key) {
  return key.IsScalar() ? key.Scalar() : std::string("(non-scalar key)");
}

// A key as it appears in a message: plain when it looks like an identifier, else quoted.
std::string ShownKey(std::string_view key) {
  const bool plain = !key.empty() && key.size() <= 60 &&
                     std::all_of(key.begin(), key.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                              c == '-' || c == '.';
                     });
  return plain ? std::string(key) : QuoteForMessage(key, 60);
}

Status FindDuplicate(const YAML::Node& node, std::string_view source, const std::string& path) {
  if (node.IsMap()) {
    std::map<std::string, int> first_line;  // key -> 1-based line of its first occurrence
    for (const auto& kv : node) {
      const std::string key = KeyText(kv.first);
      const std::string child = path.empty() ? ShownKey(key) : path + "." + ShownKey(key);
      auto [it, inserted] = first_line.emplace(key, kv.first.Mark().line + 1);
      if (!inserted) {
        return InvalidArgumentError(fmt::format(
            "{}:{}:{}: {} appears twice (first at line {}); keys must be unique", source,
            kv.first.Mark().line + 1, kv.first.Mark().column + 1,
            child.size() <= 200 ? child : "..." + child.substr(child.size() - 197),
            it->second));
      }
      WEFT_RETURN_IF_ERROR(FindDuplicate(kv.second, source, child));
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      WEFT_RETURN_IF_ERROR(FindDuplicate(node[i], source, fmt::format("{}[{}]", path, i)));
    }
  }
  return OkStatus();
}

// Library text that may carry input bytes (a parser's message): printable ASCII kept, the rest
// escaped, cut at 200 characters.
std::string Shown(std::string_view text) {
  const std::string quoted = QuoteForMessage(text, 200);
  return quoted.substr(1, quoted.rfind('"') - 1) +
         (quoted.back() == '"' ? "" : quoted.substr(quoted.rfind('"') + 1));
}

}  // namespace

std::string OneLineMessage(std::string_view message, size_t max_chars) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const size_t kept = std::min(message.size(), max_chars);
  out.reserve(kept + 16);
  for (size_t i = 0; i < kept; ++i) {
    const auto c = static_cast<unsigned char>(message[i]);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (kept < message.size()) out += "... (" + std::to_string(message.size()) + " bytes)";
  return out;
}

Status OneLineStatus(const Status& status, size_t max_chars) {
  if (status.ok()) return status;
  return Status(status.code(), OneLineMessage(status.message(), max_chars));
}

std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  if (word.size() > 200) return "";  // not a misspelling; keeps the distance cheap
  int best = 1 << 30;
  std::string best_name;
  for (const std::string& c : candidates) {
    const int d = EditDistance(word, c);
    if (d < best) {
      best = d;
      best_name = c;
    }
  }
  const int limit = std::max<int>(2, static_cast<int>(word.size()) / 3);
  if (best_name.empty() || best > limit) return "";
  return fmt::format(" (did you mean '{}'?)", best_name);
}

namespace {

// Counts the nodes of the first document on the parser's events, each alias as the size of the
// node it names, and notes the first rule broken (with its mark). Ignores events after that.
class ExpansionCounter : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ == 2) {
      Fail(mark, "a second YAML document starts here; a file holds exactly one");
    }
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { Leaf(mark, anchor); }
  void OnScalar(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                const std::string& /*value*/) override {
    Leaf(mark, anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (!error_.empty()) return;
    const auto it = size_of_anchor_.find(anchor);
    if (it == size_of_anchor_.end()) {
      // Registered but not closed: the alias sits inside the node it names.
      Fail(mark, "an alias names a node that contains it; aliases must not form a cycle");
      return;
    }
    Add(mark, it->second);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string& /*tag*/,
                       YAML::anchor_t anchor, YAML::EmitterStyle::value /*style*/) override {
    Open(mark, anchor);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value /*style*/) override {
    Open(mark, anchor);
  }
  void OnMapEnd() override { Close(); }

  const std::string& error() const { return error_; }

 private:
  struct Open_ {
    YAML::anchor_t anchor;
    int64_t nodes;  // this collection and everything under it so far, aliases expanded
  };

  void Fail(const YAML::Mark& mark, std::string rule) {
    if (!error_.empty()) return;
    error_ = fmt::format("{}:{}: {}", mark.line + 1, mark.column + 1, rule);
  }
  // Adds `nodes` to the enclosing collection and the document total, refusing past the bound.
  // `to_parent` false for a collection's own node: its parent gets it, with its children, when
  // the collection closes.
  void Add(const YAML::Mark& mark, int64_t nodes, bool to_parent = true) {
    if (documents_ != 1) return;
    total_ = std::min(total_ + nodes, kMaxYamlNodes + 1);
    if (to_parent && !open_.empty()) {
      open_.back().nodes = std::min(open_.back().nodes + nodes, kMaxYamlNodes + 1);
    }
    if (total_ > kMaxYamlNodes) {
      Fail(mark, fmt::format("aliases expand the document past {} nodes; at most {} (each alias "
                             "counts as a copy of the node it names)",
                             kMaxYamlNodes, kMaxYamlNodes));
    }
  }
  void Leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (!error_.empty()) return;
    if (anchor != YAML::NullAnchor) size_of_anchor_[anchor] = 1;
    Add(mark, 1);
  }
  void Open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (!error_.empty()) return;
    Add(mark, 1, /*to_parent=*/false);
    open_.push_back({anchor, 1});
  }
  void Close() {
    if (!error_.empty() || open_.empty()) return;
    const Open_ done = open_.back();
    open_.pop_back();
    if (done.anchor != YAML::NullAnchor) size_of_anchor_[done.anchor] = done.nodes;
    if (!open_.empty()) {
      open_.back().nodes = std::min(open_.back().nodes + done.nodes, kMaxYamlNodes + 1);
    }
  }

  int documents_ = 0;
  int64_t total_ = 0;
  std::vector<Open_> open_;
  std::unordered_map<YAML::anchor_t, int64_t> size_of_anchor_;  // closed anchored nodes
  std::string error_;
};

}  // namespace

StatusOr<YAML::Node> LoadStrictYaml(std::string_view text, std::string_view source) {
  try {
    {
      std::istringstream in{std::string(text)};
      YAML::Parser parser(in);
      ExpansionCounter counter;
      while (counter.error().empty() && parser.HandleNextDocument(counter)) {
      }
      if (!counter.error().empty()) {
        return InvalidArgumentError(fmt::format("{}:{}", source, counter.error()));
      }
    }
    YAML::Node root = YAML::Load(std::string(text));
    WEFT_RETURN_IF_ERROR(CheckNoDuplicateKeys(root, source));
    return root;
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(fmt::format("{}:{}:{}: malformed YAML: {}", source,
                                            e.mark.line + 1, e.mark.column + 1, Shown(e.msg)));
  }
}

Status CheckNoDuplicateKeys(const YAML::Node& node, std::string_view source) {
  return FindDuplicate(node, source, "");
}

Status CheckMapKeys(const YAML::Node& node, std::string_view source, std::string_view path,
                    const std::vector<std::string>& known) {
  if (!node.IsMap()) return InvalidArgumentError(fmt::format("{}: {} must be a map", source, path));
  std::vector<std::string> seen;
  for (const auto& kv : node) {
    const std::string key = KeyText(kv.first);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return InvalidArgumentError(fmt::format("{}: {}.{} appears twice; keys must be unique",
                                              source, path, ShownKey(key)));
    }
    seen.push_back(key);
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return InvalidArgumentError(fmt::format("{}: {}.{} is not a known key{}; known: {}", source,
                                              path, ShownKey(key),
                                              DidYouMean(key, known), fmt::join(known, ", ")));
    }
  }
  return OkStatus();
}

StatusOr<int> ReadBoundedInt(const YAML::Node& node, std::string_view source,
                             std::string_view path, int min_value, int max_value) {
  if (!node.IsScalar()) {
    return InvalidArgumentError(fmt::format("{}: {} must be an integer", source, path));
  }
  long long v = 0;
  try {
    size_t used = 0;
    const std::string text = node.Scalar();
    v = std::stoll(text, &used);
    if (used != text.size()) throw std::invalid_argument("trailing");
  } catch (...) {
    return InvalidArgumentError(fmt::format("{}: {} = {}; must be an integer", source, path,
                                            QuoteForMessage(node.Scalar(), 40)));
  }
  if (v < min_value || v > max_value) {
    return InvalidArgumentError(fmt::format("{}: {} = {}; must be in [{}, {}]", source, path, v,
                                            min_value, max_value));
  }
  return static_cast<int>(v);
}

namespace {

// SAX handler: nlohmann's own DOM builder, plus the keys of every open object (vectors reused
// across objects of the same depth, so a large plan does not allocate per object). Stops at the
// first duplicate key.
class DuplicateKeySax {
 public:
  using json = nlohmann::json;
  explicit DuplicateKeySax(json& result) : dom_(result, /*allow_exceptions=*/true) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return dom_.number_float(v, s);
  }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    if (depth_ == keys_.size()) keys_.emplace_back();
    keys_[depth_++].clear();
    return dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    std::vector<std::string>& keys = keys_[depth_ - 1];
    if (std::find(keys.begin(), keys.end(), k) != keys.end()) {
      duplicate_ = k;
      return false;  // stops the parse
    }
    keys.push_back(k);
    return dom_.key(k);
  }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return dom_.start_array(n); }
  bool end_array() { return dom_.end_array(); }
  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& ex) {
    error_byte_ = position;
    error_ = ex.what();
    return false;
  }
  const std::string& duplicate() const { return duplicate_; }
  size_t error_byte() const { return error_byte_; }
  const std::string& error() const { return error_; }

 private:
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<std::vector<std::string>> keys_;  // [depth] -> keys of the open object
  size_t depth_ = 0;
  std::string duplicate_;
  size_t error_byte_ = 0;  // 1-based, as nlohmann counts
  std::string error_;
};

}  // namespace

Status ParseJsonRejectingDuplicates(std::string_view text, nlohmann::json* out,
                                    size_t* error_byte) {
  using nlohmann::json;
  json result;
  DuplicateKeySax sax(result);
  try {
    const bool complete = json::sax_parse(text.begin(), text.end(), &sax);
    if (!complete && !sax.duplicate().empty()) {
      *out = json();
      return InvalidArgumentError(
          fmt::format("key {} appears twice in one object; keys must be unique",
                      QuoteForMessage(sax.duplicate(), 60)));
    }
    if (!complete) {
      if (error_byte != nullptr) *error_byte = sax.error_byte() > 0 ? sax.error_byte() - 1 : 0;
      return InvalidArgumentError(
          fmt::format("not valid JSON (byte {}): {}", sax.error_byte(), Shown(sax.error())));
    }
  } catch (const json::exception& e) {
    return InvalidArgumentError(fmt::format("not valid JSON: {}", Shown(e.what())));
  }
  *out = std::move(result);
  return OkStatus();
}

const std::string* FirstUnknownKey(const nlohmann::json& obj, const std::vector<std::string>& known) {
  if (!obj.is_object()) return nullptr;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) return &it.key();
  }
  return nullptr;
}

}  // namespace weft
