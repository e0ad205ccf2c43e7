#include "weft/data/readers.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <nlohmann/json.hpp>

#include "weft/common/strict_input.h"
#include "weft/common/text.h"

namespace weft::data {
namespace internal {

using nlohmann::json;

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Collects samples and warnings; enforces max_samples / max_warnings.
class Sink {
 public:
  Sink(DataFormat format, std::string_view source, const ReadOptions& options)
      : source_(source), options_(options) {
    result_.format = format;
  }
  // False once max_samples is reached (the caller stops reading).
  bool Add(spec::Sample sample) {
    if (Full()) return false;
    result_.samples.push_back(std::move(sample));
    return !Full();
  }
  bool Full() const {
    return options_.max_samples > 0 &&
           static_cast<int64_t>(result_.samples.size()) >= options_.max_samples;
  }
  void Warn(int64_t line, std::string message) {
    ++result_.num_malformed;
    if (static_cast<int>(result_.warnings.size()) < options_.max_warnings) {
      result_.warnings.push_back(ReadWarning{source_, line, OneLineMessage(message)});
    }
  }
  // An input whose every record is malformed is an error, not an empty dataset.
  StatusOr<ReadResult> Finish() && {
    if (result_.samples.empty() && result_.num_malformed > 0) {
      return InvalidArgumentError(source_ + ": no valid samples (" +
                                  std::to_string(result_.num_malformed) +
                                  " malformed); first: " + result_.warnings.front().ToString());
    }
    return std::move(result_);
  }

 private:
  std::string source_;
  const ReadOptions& options_;
  ReadResult result_;
};

// Splits content into lines, keeping 1-based line numbers; strips a trailing '\r'.
template <typename F>
void ForEachLine(std::string_view content, F&& f) {
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos <= content.size()) {
    size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    std::string_view line = content.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++line_no;
    if (!(end == content.size() && line.empty())) {
      if (!f(line_no, line)) return;
    }
    if (end == content.size()) break;
    pos = end + 1;
  }
}

// One CSV record: its fields and the line it starts on. RFC 4180 quoting ("" escapes a quote;
// a quoted field may span lines).
struct CsvRecord {
  int64_t line = 0;
  std::vector<std::string> fields;
};

std::vector<CsvRecord> ParseCsv(std::string_view content, char delimiter, std::vector<int64_t>& bad_lines) {
  std::vector<CsvRecord> records;
  CsvRecord current;
  std::string field;
  bool in_quotes = false;
  bool record_started = false;
  int64_t line = 1;
  current.line = 1;
  auto end_field = [&] {
    current.fields.push_back(std::move(field));
    field.clear();
  };
  auto end_record = [&] {
    end_field();
    if (!(current.fields.size() == 1 && Trim(current.fields[0]).empty())) records.push_back(std::move(current));
    current = CsvRecord{};
    record_started = false;
  };
  for (size_t i = 0; i < content.size(); ++i) {
    const char c = content[i];
    if (!record_started) {
      current.line = line;
      record_started = true;
    }
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < content.size() && content[i + 1] == '"') {
          field.push_back('"');
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        field.push_back(c);
      }
      continue;
    }
    if (c == '"' && field.empty()) {
      in_quotes = true;
    } else if (c == delimiter) {
      end_field();
    } else if (c == '\n') {
      if (!field.empty() && field.back() == '\r') field.pop_back();
      end_record();
      ++line;
    } else {
      field.push_back(c);
    }
  }
  if (in_quotes) bad_lines.push_back(current.line);  // unterminated quote: record dropped
  else if (record_started) end_record();
  return records;
}

std::optional<double> ParseDouble(std::string_view s) {
  s = Trim(s);
  if (s.empty()) return std::nullopt;
  std::string str(s);
  char* end = nullptr;
  double v = std::strtod(str.c_str(), &end);
  if (end != str.c_str() + str.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  auto v = ParseDouble(s);
  if (!v || *v != std::floor(*v) || std::abs(*v) > 9e15) return std::nullopt;
  return static_cast<int64_t>(*v);
}

// A JSON value for a message: its dump, escaped and cut (one line, no raw input bytes).
std::string ShowJson(const json& v) {
  std::string text = v.dump(-1, ' ', /*ensure_ascii=*/true);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// Valid ranges of the sample fields of weft's JSONL (docs/data.md): beyond them a record is
// malformed, so nothing downstream multiplies absurd values (a 2e9-frame video would expand to
// gigabytes of per-frame work).
constexpr double kMaxTextTokens = 1 << 24;      // 16.7 M tokens of text in one sample
constexpr double kMaxPixels = 1 << 16;          // 65536 px per side
constexpr double kMaxPatchTokens = 1 << 20;     // encoder tokens given for one image
constexpr double kMaxVideoFrames = 16384;       // sampled frames (≈ 9 min at 30 fps, 2.3 h at 2)
constexpr double kMaxFps = 240;                 // sampling rate of a video
constexpr double kMaxDurationS = 86400;         // one day, for a video or an audio clip
constexpr size_t kMaxItemsPerSample = 1024;     // entries of images / videos / audios

std::string RangeText(double max_value) {
  return std::to_string(static_cast<int64_t>(max_value));
}

// Reads an optional non-negative number field of a JSON object in [0, max_value]; error text
// names the field and the range.
bool GetNumber(const json& obj, const char* key, double& out, std::string& error,
               bool integer, double max_value) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_number()) {
    error = std::string(key) + " = " + ShowJson(*it) + "; must be a number";
    return false;
  }
  double v = it->get<double>();
  if (!std::isfinite(v) || v < 0 || (integer && v != std::floor(v)) || v > max_value) {
    error = std::string(key) + " = " + ShowJson(*it) + "; must be " +
            (integer ? "an integer" : "a number") + " in [0, " + RangeText(max_value) + "]";
    return false;
  }
  out = v;
  return true;
}

// The keys of weft's JSONL objects; any other key is a mistake (a misspelt field would be read
// as absent).
const std::vector<std::string> kSampleKeys = {"id", "text_tokens", "images", "videos", "audios"};
const std::vector<std::string> kImageKeys = {"w", "h", "patch_tokens", "pos"};
const std::vector<std::string> kVideoKeys = {"frames", "fps", "w", "h", "duration_s"};
const std::vector<std::string> kAudioKeys = {"duration_s"};

// False with `error` set when `obj` has a key outside `known`.
bool KnownKeysOnly(const json& obj, const std::vector<std::string>& known, std::string_view where,
                   std::string& error) {
  const std::string* key = FirstUnknownKey(obj, known);
  if (key == nullptr) return true;
  error = std::string(where) + QuoteForMessage(*key, 40) + " is not a known key" +
          DidYouMean(*key, known);
  return false;
}

int64_t LineOfOffset(std::string_view content, size_t offset) {
  offset = std::min(offset, content.size());
  return 1 + std::count(content.begin(), content.begin() + offset, '\n');
}

// Parses a whole-file JSON document; on error names the line.
StatusOr<json> ParseJsonDocument(std::string_view content, std::string_view source) {
  try {
    json doc;
    size_t error_byte = 0;
    if (Status parsed = ParseJsonRejectingDuplicates(content, &doc, &error_byte); !parsed.ok()) {
      return InvalidArgumentError(std::string(source) + ":" +
                                  std::to_string(LineOfOffset(content, error_byte)) + ": " +
                                  parsed.message());
    }
    return doc;
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string(source) + ": invalid JSON (" +
                                QuoteForMessage(e.what(), 200) + ")");
  }
}

// ---- weft JSONL ----
std::optional<spec::Sample> ParseWeftObject(const json& obj, int64_t default_id, std::string& error) {
  if (!obj.is_object()) {
    error = "not a JSON object";
    return std::nullopt;
  }
  if (!KnownKeysOnly(obj, kSampleKeys, "", error)) return std::nullopt;
  spec::Sample sample;
  sample.id = default_id;
  if (auto it = obj.find("id"); it != obj.end()) {
    if (it->is_number_integer()) {
      sample.id = it->get<int64_t>();
    } else if (it->is_string() && ParseInt(it->get<std::string>())) {
      sample.id = *ParseInt(it->get<std::string>());
    } else {
      error = "id = " + ShowJson(*it) + "; must be an integer";
      return std::nullopt;
    }
  }
  double v = 0;
  if (!GetNumber(obj, "text_tokens", v, error, true, kMaxTextTokens)) return std::nullopt;
  sample.text_tokens = static_cast<int>(v);
  auto get_array = [&](const char* key) -> std::optional<json> {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return json::array();
    if (!it->is_array()) {
      error = std::string(key) + " = " + ShowJson(*it) + "; must be an array";
      return std::nullopt;
    }
    if (it->size() > kMaxItemsPerSample) {
      error = std::string(key) + " has " + std::to_string(it->size()) + " entries; at most " +
              std::to_string(kMaxItemsPerSample) + " per sample";
      return std::nullopt;
    }
    return *it;
  };
  auto images = get_array("images");
  if (!images) return std::nullopt;
  for (size_t i = 0; i < images->size(); ++i) {
    const json& im = (*images)[i];
    std::string field_error;
    double w = 0, h = 0, patch = 0, pos = -1;
    if (!im.is_object()) {
      error = "images[" + std::to_string(i) + "] must be an object";
      return std::nullopt;
    }
    if (!KnownKeysOnly(im, kImageKeys, "images[" + std::to_string(i) + "].", error)) {
      return std::nullopt;
    }
    if (!GetNumber(im, "w", w, field_error, true, kMaxPixels) ||
        !GetNumber(im, "h", h, field_error, true, kMaxPixels) ||
        !GetNumber(im, "patch_tokens", patch, field_error, true, kMaxPatchTokens) ||
        !GetNumber(im, "pos", pos, field_error, true, kMaxTextTokens)) {
      error = "images[" + std::to_string(i) + "]." + field_error;
      return std::nullopt;
    }
    sample.images.push_back(spec::ImageMeta{.width_px = static_cast<int>(w),
                                            .height_px = static_cast<int>(h),
                                            .patch_tokens = static_cast<int>(patch),
                                            .text_position = static_cast<int>(pos)});
  }
  auto videos = get_array("videos");
  if (!videos) return std::nullopt;
  double total_frames = 0, total_video_s = 0;  // over the sample's videos
  for (size_t i = 0; i < videos->size(); ++i) {
    const json& vj = (*videos)[i];
    std::string field_error;
    double frames = 0, fps = 0, w = 0, h = 0, dur = 0;
    if (!vj.is_object()) {
      error = "videos[" + std::to_string(i) + "] must be an object";
      return std::nullopt;
    }
    if (!KnownKeysOnly(vj, kVideoKeys, "videos[" + std::to_string(i) + "].", error)) {
      return std::nullopt;
    }
    if (!GetNumber(vj, "frames", frames, field_error, true, kMaxVideoFrames) ||
        !GetNumber(vj, "fps", fps, field_error, false, kMaxFps) ||
        !GetNumber(vj, "w", w, field_error, true, kMaxPixels) ||
        !GetNumber(vj, "h", h, field_error, true, kMaxPixels) ||
        !GetNumber(vj, "duration_s", dur, field_error, false, kMaxDurationS)) {
      error = "videos[" + std::to_string(i) + "]." + field_error;
      return std::nullopt;
    }
    if (frames == 0 && fps > 0 && dur * fps > kMaxVideoFrames) {
      error = "videos[" + std::to_string(i) + "]: duration_s x fps = " +
              NumberForMessage(dur * fps) + " frames; at most " + RangeText(kMaxVideoFrames);
      return std::nullopt;
    }
    total_frames += frames > 0 ? frames : dur * fps;
    total_video_s += dur;
    if (total_frames > kMaxVideoFrames || total_video_s > kMaxDurationS) {
      error = "videos[0.." + std::to_string(i) + "] hold " + NumberForMessage(total_frames) +
              " frames, " + NumberForMessage(total_video_s) + " s; a sample's videos hold at most " +
              RangeText(kMaxVideoFrames) + " frames and " + RangeText(kMaxDurationS) + " s";
      return std::nullopt;
    }
    if (frames <= 0 && dur <= 0) {
      error = "videos[" + std::to_string(i) + "] has neither frames nor duration_s > 0";
      return std::nullopt;
    }
    sample.videos.push_back(spec::VideoMeta{.frames = static_cast<int>(frames), .fps = fps,
                                            .duration_s = dur, .width_px = static_cast<int>(w),
                                            .height_px = static_cast<int>(h)});
  }
  auto audios = get_array("audios");
  if (!audios) return std::nullopt;
  double total_audio_s = 0;
  for (size_t i = 0; i < audios->size(); ++i) {
    const json& aj = (*audios)[i];
    std::string field_error;
    double dur = 0;
    if (aj.is_object() &&
        !KnownKeysOnly(aj, kAudioKeys, "audios[" + std::to_string(i) + "].", error)) {
      return std::nullopt;
    }
    if (!aj.is_object() || !GetNumber(aj, "duration_s", dur, field_error, false, kMaxDurationS) ||
        dur <= 0) {
      error = "audios[" + std::to_string(i) + "]" +
              (field_error.empty() ? " needs duration_s > 0" : "." + field_error);
      return std::nullopt;
    }
    total_audio_s += dur;
    if (total_audio_s > kMaxDurationS) {
      error = "audios[0.." + std::to_string(i) + "] last " + NumberForMessage(total_audio_s) +
              " s; a sample's audio clips last at most " + RangeText(kMaxDurationS) + " s";
      return std::nullopt;
    }
    sample.audios.push_back(spec::AudioMeta{.duration_s = dur});
  }
  return sample;
}

void ReadWeftJsonl(std::string_view content, Sink& sink) {
  int64_t index = 0;
  ForEachLine(content, [&](int64_t line_no, std::string_view line) {
    if (Trim(line).empty()) return true;
    json obj;
    if (Status parsed = ParseJsonRejectingDuplicates(line, &obj); !parsed.ok()) {
      sink.Warn(line_no, parsed.message() + "; skipped");
      return true;
    }
    std::string error;
    auto sample = ParseWeftObject(obj, index, error);
    if (!sample) {
      sink.Warn(line_no, error + "; skipped");
      return true;
    }
    ++index;
    return sink.Add(std::move(*sample));
  });
}

void ReadMsrvttJsonl(std::string_view content, Sink& sink, const ReadOptions&) {
  int64_t index = 0;
  ForEachLine(content, [&](int64_t line_no, std::string_view line) {
    if (Trim(line).empty()) return true;
    json obj;
    if (Status parsed = ParseJsonRejectingDuplicates(line, &obj); !parsed.ok()) {
      sink.Warn(line_no, parsed.message() + "; skipped");
      return true;
    }
    if (!obj.is_object()) {
      sink.Warn(line_no, "not a JSON object; skipped");
      return true;
    }
    auto start = obj.find("start time");
    auto end = obj.find("end time");
    if (start == obj.end() || end == obj.end() || !start->is_number() || !end->is_number()) {
      sink.Warn(line_no, "needs numeric \"start time\" and \"end time\"; skipped");
      return true;
    }
    const double duration_s = end->get<double>() - start->get<double>();
    if (!(duration_s > 0) || duration_s > kMaxDurationS) {
      sink.Warn(line_no, "end time - start time = " + NumberForMessage(duration_s) +
                             "; must be in (0, " + RangeText(kMaxDurationS) + "] s; skipped");
      return true;
    }
    spec::Sample sample;
    auto id = obj.find("id");
    sample.id = (id != obj.end() && id->is_number_integer()) ? id->get<int64_t>() : index;
    sample.videos.push_back(spec::VideoMeta{.duration_s = duration_s});
    ++index;
    return sink.Add(std::move(sample));
  });
}

void ReadLlavaJson(const json& doc, Sink& sink, const ReadOptions& options) {
  if (!doc.is_array()) {
    sink.Warn(1, "top level must be an array of samples");
    return;
  }
  for (size_t i = 0; i < doc.size(); ++i) {
    const json& entry = doc[i];
    const std::string where = "entry [" + std::to_string(i) + "]: ";
    if (!entry.is_object()) {
      sink.Warn(0, where + "not an object; skipped");
      continue;
    }
    auto conv = entry.find("conversations");
    if (conv == entry.end() || !conv->is_array()) {
      sink.Warn(0, where + "missing conversations array; skipped");
      continue;
    }
    int64_t image_tags = 0;
    std::string text;
    bool ok = true;
    for (const json& turn : *conv) {
      auto value = turn.is_object() ? turn.find("value") : turn.end();
      if (!turn.is_object() || value == turn.end() || !value->is_string()) {
        ok = false;
        break;
      }
      std::string v = value->get<std::string>();
      for (size_t p = v.find("<image>"); p != std::string::npos; p = v.find("<image>", p)) {
        ++image_tags;
        v.replace(p, 7, " ");
      }
      text += v;
      text += ' ';
    }
    if (!ok) {
      sink.Warn(0, where + "a conversation turn lacks a string \"value\"; skipped");
      continue;
    }
    int64_t images = image_tags;
    if (auto im = entry.find("image"); im != entry.end()) {
      const int64_t listed = im->is_array() ? static_cast<int64_t>(im->size()) : (im->is_string() ? 1 : 0);
      images = std::max(images, listed);
    }
    spec::Sample sample;
    sample.id = static_cast<int64_t>(i);
    if (auto id = entry.find("id"); id != entry.end()) {
      if (id->is_number_integer()) sample.id = id->get<int64_t>();
      else if (id->is_string() && ParseInt(id->get<std::string>())) sample.id = *ParseInt(id->get<std::string>());
    }
    sample.text_tokens = EstimateTextTokens(text, options.tokens_per_word);
    sample.images.assign(images, spec::ImageMeta{});  // size unknown: the model's fixed size
    if (!sink.Add(std::move(sample))) return;
  }
}

void ReadCoco(const json& doc, Sink& sink, const ReadOptions& options) {
  if (!doc.is_object() || !doc.contains("images") || !doc["images"].is_array()) {
    sink.Warn(1, "COCO file needs an \"images\" array");
    return;
  }
  const json& images = doc["images"];
  std::map<int64_t, size_t> by_id;
  std::vector<spec::ImageMeta> metas(images.size());
  std::vector<bool> valid(images.size(), false);
  for (size_t i = 0; i < images.size(); ++i) {
    const json& im = images[i];
    auto id = im.is_object() ? im.find("id") : im.end();
    auto w = im.is_object() ? im.find("width") : im.end();
    auto h = im.is_object() ? im.find("height") : im.end();
    if (!im.is_object() || id == im.end() || !id->is_number_integer() || w == im.end() ||
        h == im.end() || !w->is_number_integer() || !h->is_number_integer() ||
        w->get<int64_t>() <= 0 || h->get<int64_t>() <= 0) {
      sink.Warn(0, "images[" + std::to_string(i) + "]: needs integer id and width, height > 0; skipped");
      continue;
    }
    by_id[id->get<int64_t>()] = i;
    metas[i] = spec::ImageMeta{.width_px = static_cast<int>(w->get<int64_t>()),
                               .height_px = static_cast<int>(h->get<int64_t>())};
    valid[i] = true;
  }
  std::vector<int> first_caption_tokens(images.size(), -1);
  std::vector<spec::Sample> per_caption;
  if (auto anns = doc.find("annotations"); anns != doc.end() && anns->is_array()) {
    for (size_t j = 0; j < anns->size(); ++j) {
      const json& a = (*anns)[j];
      auto image_id = a.is_object() ? a.find("image_id") : a.end();
      if (!a.is_object() || image_id == a.end() || !image_id->is_number_integer() ||
          !by_id.count(image_id->get<int64_t>())) {
        sink.Warn(0, "annotations[" + std::to_string(j) + "]: image_id missing or unknown; skipped");
        continue;
      }
      const size_t i = by_id[image_id->get<int64_t>()];
      auto caption = a.find("caption");
      const int tokens = (caption != a.end() && caption->is_string())
                             ? EstimateTextTokens(caption->get<std::string>(), options.tokens_per_word)
                             : 0;
      if (first_caption_tokens[i] < 0) first_caption_tokens[i] = tokens;
      if (options.coco_sample_per_caption) {
        spec::Sample s;
        auto ann_id = a.find("id");
        s.id = (ann_id != a.end() && ann_id->is_number_integer()) ? ann_id->get<int64_t>()
                                                                  : static_cast<int64_t>(j);
        s.text_tokens = tokens;
        s.images.push_back(metas[i]);
        per_caption.push_back(std::move(s));
      }
    }
  }
  if (options.coco_sample_per_caption) {
    for (auto& s : per_caption) {
      if (!sink.Add(std::move(s))) return;
    }
    return;
  }
  for (size_t i = 0; i < images.size(); ++i) {
    if (!valid[i]) continue;
    spec::Sample s;
    s.id = images[i]["id"].get<int64_t>();
    s.text_tokens = std::max(0, first_caption_tokens[i]);
    s.images.push_back(metas[i]);
    if (!sink.Add(std::move(s))) return;
  }
}

// Column index by header name, or -1.
int Column(const std::vector<std::string>& header, std::string_view name) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (Trim(header[i]) == name) return static_cast<int>(i);
  }
  return -1;
}

Status ReadNextQa(std::string_view content, Sink& sink, const ReadOptions& options,
                  std::string_view source) {
  std::vector<int64_t> bad;
  auto records = ParseCsv(content, ',', bad);
  for (int64_t line : bad) sink.Warn(line, "unterminated quoted field; skipped");
  if (records.empty()) return InvalidArgumentError(std::string(source) + ": empty CSV");
  const auto& header = records[0].fields;
  const int c_video = Column(header, "video"), c_frames = Column(header, "frame_count"),
            c_w = Column(header, "width"), c_h = Column(header, "height"),
            c_q = Column(header, "question"), c_answer = Column(header, "answer");
  if (c_frames < 0 || c_w < 0 || c_h < 0) {
    return InvalidArgumentError(std::string(source) +
                                ":1: NExT-QA header needs frame_count, width, height columns");
  }
  for (size_t r = 1; r < records.size(); ++r) {
    const auto& rec = records[r];
    if (rec.fields.size() != header.size()) {
      sink.Warn(rec.line, std::to_string(rec.fields.size()) + " fields; header has " +
                              std::to_string(header.size()) + "; skipped");
      continue;
    }
    auto frames = ParseInt(rec.fields[c_frames]);
    auto w = ParseInt(rec.fields[c_w]);
    auto h = ParseInt(rec.fields[c_h]);
    if (!frames || !w || !h || *frames <= 0 || *w <= 0 || *h <= 0) {
      sink.Warn(rec.line, "frame_count, width, height must be positive integers; skipped");
      continue;
    }
    if (*frames / options.nextqa_native_fps > kMaxDurationS || *w > kMaxPixels || *h > kMaxPixels) {
      sink.Warn(rec.line, "frame_count / fps must be at most " + RangeText(kMaxDurationS) +
                              " s and width, height at most " + RangeText(kMaxPixels) +
                              " px; skipped");
      continue;
    }
    std::string text = c_q >= 0 ? rec.fields[c_q] : "";
    if (c_answer >= 0) {
      // The answer column indexes the options a0..a4; the chosen option is the target text.
      if (auto a = ParseInt(rec.fields[c_answer]); a && *a >= 0 && *a <= 9) {
        const int c_opt = Column(header, "a" + std::to_string(*a));
        if (c_opt >= 0) text += " " + rec.fields[c_opt];
      }
    }
    spec::Sample s;
    s.id = static_cast<int64_t>(r - 1);
    s.text_tokens = EstimateTextTokens(text, options.tokens_per_word);
    s.videos.push_back(spec::VideoMeta{.duration_s = *frames / options.nextqa_native_fps,
                                       .width_px = static_cast<int>(*w),
                                       .height_px = static_cast<int>(*h)});
    (void)c_video;
    if (!sink.Add(std::move(s))) break;
  }
  return OkStatus();
}

Status ReadAudioCaps(std::string_view content, Sink& sink, const ReadOptions& options,
                     std::string_view source) {
  std::vector<int64_t> bad;
  auto records = ParseCsv(content, ',', bad);
  for (int64_t line : bad) sink.Warn(line, "unterminated quoted field; skipped");
  if (records.empty()) return InvalidArgumentError(std::string(source) + ": empty CSV");
  const auto& header = records[0].fields;
  const int c_id = Column(header, "audiocap_id"), c_caption = Column(header, "caption");
  if (c_caption < 0) {
    return InvalidArgumentError(std::string(source) + ":1: AudioCaps header needs a caption column");
  }
  for (size_t r = 1; r < records.size(); ++r) {
    const auto& rec = records[r];
    if (rec.fields.size() != header.size()) {
      sink.Warn(rec.line, std::to_string(rec.fields.size()) + " fields; header has " +
                              std::to_string(header.size()) + "; skipped");
      continue;
    }
    spec::Sample s;
    s.id = static_cast<int64_t>(r - 1);
    if (c_id >= 0) {
      auto id = ParseInt(rec.fields[c_id]);
      if (!id) {
        sink.Warn(rec.line, "audiocap_id = \"" + rec.fields[c_id] + "\"; must be an integer; skipped");
        continue;
      }
      s.id = *id;
    }
    s.text_tokens = EstimateTextTokens(rec.fields[c_caption], options.tokens_per_word);
    s.audios.push_back(spec::AudioMeta{.duration_s = options.audiocaps_clip_s});
    if (!sink.Add(std::move(s))) break;
  }
  return OkStatus();
}

void ReadFairseqTsv(std::string_view content, Sink& sink, const ReadOptions& options) {
  bool root_seen = false;
  int64_t index = 0;
  ForEachLine(content, [&](int64_t line_no, std::string_view line) {
    if (Trim(line).empty()) return true;
    if (!root_seen) {  // the first line names the root directory
      root_seen = true;
      return true;
    }
    const size_t tab = line.find('\t');
    auto samples = tab == std::string_view::npos ? std::nullopt : ParseInt(line.substr(tab + 1));
    if (!samples || *samples <= 0) {
      sink.Warn(line_no, "expected \"<path>\\t<num_samples > 0>\"; skipped");
      return true;
    }
    const double duration_s = *samples / options.audio_sample_rate_hz;
    if (!(duration_s <= kMaxDurationS)) {
      sink.Warn(line_no, "num_samples / sample rate = " + NumberForMessage(duration_s) +
                             " s; at most " + RangeText(kMaxDurationS) + " s; skipped");
      return true;
    }
    spec::Sample s;
    s.id = index++;
    s.text_tokens = static_cast<int>(
        std::llround(duration_s * options.speech_words_per_s * options.tokens_per_word));
    s.audios.push_back(spec::AudioMeta{.duration_s = duration_s});
    return sink.Add(std::move(s));
  });
}

// "<source>: the file is empty" (or has only blank lines): no samples to read.
Status EmptyFileError(std::string_view source, std::string_view content) {
  return InvalidArgumentError(std::string(source) +
                              (content.empty() ? ": the file is empty (0 bytes); no samples"
                                               : ": the file has only blank lines; no samples"));
}

std::string FirstNonEmptyLine(std::string_view content) {
  std::string result;
  ForEachLine(content, [&](int64_t, std::string_view line) {
    if (Trim(line).empty()) return true;
    result = std::string(Trim(line));
    return false;
  });
  return result;
}

StatusOr<DataFormat> DetectJsonLines(std::string_view content, std::string_view path) {
  const std::string first = FirstNonEmptyLine(content);
  json obj = json::parse(first, nullptr, false);
  if (!obj.is_discarded() && obj.is_object() && obj.contains("start time") && obj.contains("end time")) {
    return DataFormat::kMsrvttJsonl;
  }
  if (first.empty() || first[0] != '{') {
    return InvalidArgumentError(std::string(path) + ":1: expected one JSON object per line");
  }
  return DataFormat::kWeftJsonl;
}

}  // namespace internal

std::string ReadWarning::ToString() const {
  return file + ":" + (line > 0 ? std::to_string(line) + ":" : "") + " " + message;
}

namespace {
constexpr std::pair<DataFormat, std::string_view> kFormatNames[] = {
    {DataFormat::kWeftJsonl, "weft-jsonl"}, {DataFormat::kLlavaJson, "llava"},
    {DataFormat::kCocoCaptions, "coco"},    {DataFormat::kMsrvttJsonl, "msrvtt"},
    {DataFormat::kNextQaCsv, "nextqa"},     {DataFormat::kFairseqTsv, "fairseq-tsv"},
    {DataFormat::kAudioCapsCsv, "audiocaps"},
};
}  // namespace

std::string_view DataFormatName(DataFormat format) {
  for (const auto& [f, name] : kFormatNames) {
    if (f == format) return name;
  }
  return "unknown";
}

std::vector<std::string_view> DataFormatNames() {
  std::vector<std::string_view> names;
  for (const auto& entry : kFormatNames) names.push_back(entry.second);
  return names;
}

StatusOr<DataFormat> ParseDataFormat(std::string_view name) {
  for (const auto& [f, n] : kFormatNames) {
    if (n == name) return f;
  }
  std::string all;
  for (const auto& entry : kFormatNames) all += (all.empty() ? "" : ", ") + std::string(entry.second);
  return InvalidArgumentError("format = \"" + std::string(name) + "\"; must be one of " + all);
}

int EstimateTextTokens(std::string_view text, double tokens_per_word) {
  int64_t words = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = std::isspace(static_cast<unsigned char>(c));
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return static_cast<int>(std::llround(words * tokens_per_word));
}

StatusOr<DataFormat> DetectDataFormat(std::string_view path, std::string_view content) {
  using internal::ToLower;
  const std::string lower = ToLower(path);
  auto ends_with = [&](std::string_view suffix) {
    return lower.size() >= suffix.size() && lower.compare(lower.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  const std::string_view head = internal::Trim(content.substr(0, 4096));
  if (internal::Trim(content).empty()) return internal::EmptyFileError(path, content);
  if (ends_with(".jsonl") || ends_with(".ndjson")) return internal::DetectJsonLines(content, path);
  if (ends_with(".csv")) {
    const std::string header = internal::FirstNonEmptyLine(content);
    if (header.find("frame_count") != std::string::npos) return DataFormat::kNextQaCsv;
    if (header.find("audiocap_id") != std::string::npos || header.find("youtube_id") != std::string::npos) {
      return DataFormat::kAudioCapsCsv;
    }
    return InvalidArgumentError(std::string(path) +
                                ":1: unrecognized CSV header (expected NExT-QA frame_count,width,height "
                                "or AudioCaps audiocap_id,youtube_id,start_time,caption)");
  }
  if (ends_with(".tsv") || ends_with(".manifest")) return DataFormat::kFairseqTsv;
  if (!head.empty() && head[0] == '[') return DataFormat::kLlavaJson;
  if (!head.empty() && head[0] == '{') {
    // A COCO file is one object with an "annotations"/"images" key; JSONL has one object a line.
    const std::string first = internal::FirstNonEmptyLine(content);
    auto obj = nlohmann::json::parse(first, nullptr, false);
    if (!obj.is_discarded() && obj.is_object() && !obj.contains("annotations") &&
        !(obj.contains("images") && obj.contains("info"))) {
      return internal::DetectJsonLines(content, path);
    }
    return DataFormat::kCocoCaptions;
  }
  return InvalidArgumentError(std::string(path) + ": cannot tell the data format (known: " +
                              [] {
                                std::string all;
                                for (auto n : DataFormatNames()) all += (all.empty() ? "" : ", ") + std::string(n);
                                return all;
                              }() + ")");
}

StatusOr<ReadResult> ParseSamples(std::string_view content, DataFormat format,
                                  std::string_view source, const ReadOptions& options) {
  if (internal::Trim(content).empty()) return internal::EmptyFileError(source, content);
  internal::Sink sink(format, source, options);
  switch (format) {
    case DataFormat::kWeftJsonl:
      internal::ReadWeftJsonl(content, sink);
      break;
    case DataFormat::kMsrvttJsonl:
      internal::ReadMsrvttJsonl(content, sink, options);
      break;
    case DataFormat::kLlavaJson: {
      WEFT_ASSIGN_OR_RETURN(auto doc, internal::ParseJsonDocument(content, source));
      internal::ReadLlavaJson(doc, sink, options);
      break;
    }
    case DataFormat::kCocoCaptions: {
      WEFT_ASSIGN_OR_RETURN(auto doc, internal::ParseJsonDocument(content, source));
      internal::ReadCoco(doc, sink, options);
      break;
    }
    case DataFormat::kNextQaCsv:
      WEFT_RETURN_IF_ERROR(internal::ReadNextQa(content, sink, options, source));
      break;
    case DataFormat::kFairseqTsv:
      internal::ReadFairseqTsv(content, sink, options);
      break;
    case DataFormat::kAudioCapsCsv:
      WEFT_RETURN_IF_ERROR(internal::ReadAudioCaps(content, sink, options, source));
      break;
  }
  StatusOr<ReadResult> result = std::move(sink).Finish();
  if (!result.ok()) return OneLineStatus(result.status());
  return result;
}

namespace {
StatusOr<std::string> ReadWholeFile(const std::string& path) {
  WEFT_RETURN_IF_ERROR(CheckInputFile(path, kMaxDataFileBytes, "data file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot open file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return NotFoundError(path + ": read failed");
  return buffer.str();
}
}  // namespace

StatusOr<ReadResult> ReadSamples(const std::string& path, const ReadOptions& options) {
  WEFT_ASSIGN_OR_RETURN(std::string content, ReadWholeFile(path));
  StatusOr<DataFormat> format = DetectDataFormat(path, content);
  if (!format.ok()) return OneLineStatus(format.status());
  return ParseSamples(content, *format, path, options);
}

StatusOr<ReadResult> ReadSamples(const std::string& path, DataFormat format,
                                 const ReadOptions& options) {
  WEFT_ASSIGN_OR_RETURN(std::string content, ReadWholeFile(path));
  return ParseSamples(content, format, path, options);
}

std::string SampleToJsonLine(const spec::Sample& sample) {
  nlohmann::ordered_json j;
  j["id"] = sample.id;
  j["text_tokens"] = sample.text_tokens;
  if (!sample.images.empty()) {
    auto& arr = j["images"] = nlohmann::ordered_json::array();
    for (const auto& im : sample.images) {
      nlohmann::ordered_json o;
      if (im.width_px > 0) o["w"] = im.width_px;
      if (im.height_px > 0) o["h"] = im.height_px;
      if (im.patch_tokens > 0) o["patch_tokens"] = im.patch_tokens;
      if (im.text_position >= 0) o["pos"] = im.text_position;
      if (o.is_null()) o = nlohmann::ordered_json::object();
      arr.push_back(std::move(o));
    }
  }
  if (!sample.videos.empty()) {
    auto& arr = j["videos"] = nlohmann::ordered_json::array();
    for (const auto& v : sample.videos) {
      nlohmann::ordered_json o = nlohmann::ordered_json::object();
      if (v.frames > 0) o["frames"] = v.frames;
      if (v.fps > 0) o["fps"] = v.fps;
      if (v.width_px > 0) o["w"] = v.width_px;
      if (v.height_px > 0) o["h"] = v.height_px;
      if (v.duration_s > 0) o["duration_s"] = v.duration_s;
      arr.push_back(std::move(o));
    }
  }
  if (!sample.audios.empty()) {
    auto& arr = j["audios"] = nlohmann::ordered_json::array();
    for (const auto& a : sample.audios) arr.push_back({{"duration_s", a.duration_s}});
  }
  return j.dump();
}

std::string SamplesToJsonl(std::span<const spec::Sample> samples) {
  std::string out;
  for (const auto& s : samples) {
    out += SampleToJsonLine(s);
    out += '\n';
  }
  return out;
}

}  // namespace weft::data
