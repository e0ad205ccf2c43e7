#include "weft/data/generators.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <string>

namespace weft::data {
namespace internal {

// Distributions written out here (std:: distributions differ across standard libraries, and
// weft promises identical output for a seed everywhere).
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  int64_t UniformInt(int64_t lo, int64_t hi) {  // inclusive
    return lo + static_cast<int64_t>(Uniform() * static_cast<double>(hi - lo + 1));
  }
  bool Bernoulli(double p) { return Uniform() < p; }
  double Normal() {  // Box–Muller
    double u1 = Uniform();
    while (u1 <= 0) u1 = Uniform();
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  // Log-normal with the given *mean* and log-space sigma (mu = ln(mean) − σ²/2).
  double LogNormalWithMean(double mean, double sigma) {
    return std::exp(std::log(mean) - 0.5 * sigma * sigma + sigma * Normal());
  }
  double LogNormalWithMedian(double median, double sigma) { return median * std::exp(sigma * Normal()); }
  // Failures before the first success, mean (1−p)/p.
  int64_t Geometric(double mean) {
    const double p = 1.0 / (1.0 + mean);
    double u = Uniform();
    while (u <= 0) u = Uniform();
    return static_cast<int64_t>(std::floor(std::log(u) / std::log(1.0 - p)));
  }
  // Index drawn with the given weights.
  int Choose(std::initializer_list<double> weights) {
    double total = 0;
    for (double w : weights) total += w;
    double x = Uniform() * total;
    int i = 0;
    for (double w : weights) {
      if (x < w) return i;
      x -= w;
      ++i;
    }
    return i - 1;
  }

 private:
  std::mt19937_64 engine_;
};

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t ProfileHash(std::string_view name) {  // FNV-1a: stable across platforms
  uint64_t h = 1469598103934665603ULL;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

int ClampTokens(double tokens, int lo = 1, int hi = 1 << 20) {
  return static_cast<int>(std::clamp<double>(std::llround(tokens), lo, hi));
}

double RoundMs(double seconds) { return std::round(seconds * 1000.0) / 1000.0; }

// Web-image sizes (LAION / OBELICS crawls): short side log-normal around 500 px, common aspect
// ratios, mostly landscape. An assumption: the papers give no size histogram.
spec::ImageMeta WebImage(Rng& rng) {
  const double short_side = std::clamp(rng.LogNormalWithMedian(500, 0.4), 64.0, 4096.0);
  const double aspect = std::array<double, 4>{1.0, 4.0 / 3, 3.0 / 2, 16.0 / 9}[rng.Choose({40, 25, 20, 15})];
  int a = static_cast<int>(std::lround(short_side)), b = static_cast<int>(std::lround(short_side * aspect));
  if (rng.Bernoulli(0.7)) std::swap(a, b);  // landscape: width is the long side
  return spec::ImageMeta{.width_px = a, .height_px = b};
}

// COCO val2017 sizes: long side 640, short side 360–480, 70% landscape (mean 574 x 484 px in
// ../shared/data/images/coco_captions_val2017.json).
spec::ImageMeta CocoImage(Rng& rng) {
  const int short_side = static_cast<int>(rng.UniformInt(360, 480));
  return rng.Bernoulli(0.7) ? spec::ImageMeta{.width_px = 640, .height_px = short_side}
                            : spec::ImageMeta{.width_px = short_side, .height_px = 640};
}

spec::VideoMeta VideoClip(Rng& rng, double duration_s) {
  static constexpr int kSizes[3][2] = {{1280, 720}, {640, 360}, {1920, 1080}};
  const int k = rng.Choose({60, 25, 15});
  return spec::VideoMeta{.frames = 0, .fps = 0, .duration_s = RoundMs(duration_s),
                         .width_px = kSizes[k][0], .height_px = kSizes[k][1]};
}

void Laion(Rng& rng, spec::Sample& s) {
  // LAION-2B: one image with a short alt-text caption, 16.4 tokens/image (DIP §2.2, Fig. 4a).
  s.text_tokens = ClampTokens(rng.LogNormalWithMean(16.4, 0.5));
  s.images.push_back(WebImage(rng));
}

void Obelics(Rng& rng, spec::Sample& s) {
  // OBELICS (Laurençon et al. 2023): 141M docs, 353M images, 115B tokens => ≈2.5 images and ≈816
  // tokens per document; text/image ratio 0.4–3115 tokens/image (DIP §2.2). Every document keeps
  // at least one image; image count 1 + geometric (mean 1.5, capped at 30 images, OBELICS' filter);
  // text log-normal with a heavy tail (σ = 1.1). 3% of documents are image galleries with
  // almost no text (mean 20 tokens; an assumption that reproduces the 0.4 tokens/image end);
  // the article component's mean (840.6) keeps the overall mean at 816.
  const int images = static_cast<int>(std::min<int64_t>(30, 1 + rng.Geometric(1.5)));
  const bool gallery = rng.Bernoulli(0.03);
  s.text_tokens = ClampTokens(rng.LogNormalWithMean(gallery ? 20 : 840.6, gallery ? 1.0 : 1.1), 1, 32768);
  for (int i = 0; i < images; ++i) s.images.push_back(WebImage(rng));
}

void CocoLlava(Rng& rng, spec::Sample& s) {
  // LLaVA-Instruct-150K on COCO images: one image, ≈276 words (≈359 tokens) of conversation per
  // sample (../shared/data/samples/llava_instruct_150k_subset100.json).
  s.text_tokens = ClampTokens(rng.LogNormalWithMean(359, 0.5));
  s.images.push_back(CocoImage(rng));
}

void Video(Rng& rng, spec::Sample& s) {
  // Half InternVid-like clips (85% of clips 0–10 s: log-normal median 4.5 s, σ 0.77 puts 85% under
  // 10 s; short captions ≈13 tokens), half ShareGPT4Video-like clips (40K captions for 300 h =>
  // ≈27 s/clip; dense captions, assumed ≈300 tokens). DIP §2.2 Fig. 4b.
  if (rng.Bernoulli(0.5)) {
    s.videos.push_back(VideoClip(rng, std::clamp(rng.LogNormalWithMedian(4.5, 0.77), 0.5, 600.0)));
    s.text_tokens = ClampTokens(rng.LogNormalWithMean(13, 0.4));
  } else {
    s.videos.push_back(VideoClip(rng, std::clamp(rng.LogNormalWithMean(27, 0.5), 1.0, 600.0)));
    s.text_tokens = ClampTokens(rng.LogNormalWithMean(300, 0.4));
  }
}

void Audio(Rng& rng, spec::Sample& s) {
  // Half LibriSpeech-like read speech (dev-clean: mean 7.18 s, median 5.9 s, 1.4–32.6 s =>
  // log-normal median 5.9, σ 0.63; transcript ≈2.5 words/s · 1.3 tokens/word), half
  // AudioCaps-like 10 s clips with ≈8.3-word captions (../shared/data/audio/).
  if (rng.Bernoulli(0.5)) {
    const double d = RoundMs(std::clamp(rng.LogNormalWithMedian(5.9, 0.63), 1.0, 35.0));
    s.audios.push_back(spec::AudioMeta{.duration_s = d});
    s.text_tokens = ClampTokens(d * 2.5 * 1.3);
  } else {
    s.audios.push_back(spec::AudioMeta{.duration_s = 10.0});
    s.text_tokens = ClampTokens(rng.LogNormalWithMean(8.3 * 1.3, 0.3));
  }
}

void Mixed(Rng& rng, spec::Sample& s) {
  // DFLOP Table 2 (LLaVA-OneVision-like SFT mix): single image 65K (LLaVA-Wild 28K, AI2D 18K,
  // InfographicVQA 19K), multi-image 60K (M4-Instruct), video 60K (LLaVA-Video-178K).
  // Within each kind the shapes are assumptions: documents/diagrams/infographics are larger than
  // web photos; M4-Instruct has 2–12 images; LLaVA-Video clips are 0–3 min.
  switch (rng.Choose({65, 60, 60})) {
    case 0: {
      spec::ImageMeta im = WebImage(rng);
      const double scale = rng.Uniform(1.0, 3.0);  // higher-resolution sources
      im.width_px = static_cast<int>(im.width_px * scale);
      im.height_px = static_cast<int>(im.height_px * scale);
      s.images.push_back(im);
      s.text_tokens = ClampTokens(rng.LogNormalWithMean(250, 0.7));
      break;
    }
    case 1: {
      const int images = static_cast<int>(std::min<int64_t>(12, 2 + rng.Geometric(2.0)));
      for (int i = 0; i < images; ++i) s.images.push_back(WebImage(rng));
      s.text_tokens = ClampTokens(rng.LogNormalWithMean(300, 0.6));
      break;
    }
    default: {
      s.videos.push_back(VideoClip(rng, std::clamp(rng.LogNormalWithMedian(40, 0.8), 2.0, 180.0)));
      s.text_tokens = ClampTokens(rng.LogNormalWithMean(350, 0.6));
      break;
    }
  }
}

// ---- dflop-mixed: DFLOP Table 2's composition, shapes from the datasets' published statistics
// ---- Every parameter below names its source; "approximate" marks an estimate where the source
// publishes no such statistic (docs/data.md has the table with references).

// LLaMA-style BPE on English: 1.3 tokens per word (ReadOptions::tokens_per_word).
constexpr double kTokensPerWord = 1.3;

// LLaVA-Wild (LLaVA-NeXT "in-the-wild" user images with GPT-4V answers, LLaVA-OneVision SFT data):
// one image. Sizes: phone photos and screenshots, short side log-normal median 720 px (σ 0.35,
// approximate; the card gives no size histogram). Text: multi-turn GPT-style conversation, mean
// 359 tokens as measured on LLaVA-Instruct-150K (../shared/data/samples, 276 words), σ 0.6
// (approximate: the same kind of GPT-written answers).
void DflopLlavaWild(Rng& rng, spec::Sample& s) {
  const double short_side = std::clamp(rng.LogNormalWithMedian(720, 0.35), 256.0, 4096.0);
  const double aspect =
      std::array<double, 4>{4.0 / 3, 16.0 / 9, 1.0, 3.0 / 2}[rng.Choose({40, 30, 15, 15})];
  int a = static_cast<int>(std::lround(short_side)),
      b = static_cast<int>(std::lround(short_side * aspect));
  if (rng.Bernoulli(0.6)) std::swap(a, b);  // 60% landscape (approximate)
  s.images.push_back(spec::ImageMeta{.width_px = a, .height_px = b});
  s.text_tokens = ClampTokens(rng.LogNormalWithMean(359, 0.6));
}

// AI2D (Kembhavi et al., ECCV 2016): 4,903 grade-school science diagrams, >15,000 multiple-choice
// questions; one question per sample (18k ≈ the question count). Diagrams from image search:
// long side log-normal median 800 px (σ 0.3), aspect 1–1.6 (approximate). Text: question +
// four options + the answer ≈ 35 words ≈ 45 tokens (σ 0.35, approximate).
void DflopAi2d(Rng& rng, spec::Sample& s) {
  const double long_side = std::clamp(rng.LogNormalWithMedian(800, 0.3), 200.0, 4096.0);
  const double short_side = long_side / rng.Uniform(1.0, 1.6);
  int a = static_cast<int>(std::lround(long_side)), b = static_cast<int>(std::lround(short_side));
  if (rng.Bernoulli(0.3)) std::swap(a, b);  // portrait diagrams (approximate)
  s.images.push_back(spec::ImageMeta{.width_px = a, .height_px = b});
  s.text_tokens = ClampTokens(rng.LogNormalWithMean(45, 0.35));
}

// InfographicVQA (Mathew et al., WACV 2022): 5,485 infographics, 30,035 questions; questions
// average 11.54 words, answers 1.60 words; images from 600x340 to 6250x9375 px (validation split).
// Infographics are tall: width log-normal median 1000 px (σ 0.3), height/width log-normal median
// 2.0 (σ 0.5) (approximate), clamped to the published range. A sample is one image with
// 1 + geometric(mean 0.58) QA turns: 30,035 questions over DFLOP's 19k samples = 1.58 turns each;
// a turn = (11.54 + 1.60) words · 1.3 + a 10-token "answer with a word or phrase" instruction
// ≈ 27 tokens (σ 0.3, approximate).
void DflopInfoVqa(Rng& rng, spec::Sample& s) {
  const double width = std::clamp(rng.LogNormalWithMedian(1000, 0.3), 600.0, 6250.0);
  const double height = std::clamp(width * rng.LogNormalWithMedian(2.0, 0.5), 340.0, 9375.0);
  s.images.push_back(spec::ImageMeta{.width_px = static_cast<int>(std::lround(width)),
                                     .height_px = static_cast<int>(std::lround(height))});
  const int64_t turns = 1 + std::min<int64_t>(rng.Geometric(30035.0 / 19000.0 - 1.0), 19);
  const double turn_tokens = (11.54 + 1.60) * kTokensPerWord + 10;
  double text = 0;
  for (int64_t t = 0; t < turns; ++t) text += rng.LogNormalWithMean(turn_tokens, 0.3);
  s.text_tokens = ClampTokens(text);
}

// M4-Instruct multi-image part (LLaVA-NeXT-Interleave, Li et al. 2024): tasks from spot-the-
// difference and image editing (2 images) to visual story telling (5) and multi-image puzzles.
// Images per sample 2 + geometric(mean 2.0), capped at 16 (approximate: the paper lists tasks,
// not a count histogram); web / photo sizes (the `laion` sizes); instruction + answer mean 150
// tokens, σ 0.7 (approximate).
void DflopM4Instruct(Rng& rng, spec::Sample& s) {
  const int images = static_cast<int>(std::min<int64_t>(16, 2 + rng.Geometric(2.0)));
  for (int i = 0; i < images; ++i) s.images.push_back(WebImage(rng));
  s.text_tokens = ClampTokens(rng.LogNormalWithMean(150, 0.7));
}

// LLaVA-Video-178K (Zhang et al. 2024): instruction rows per duration bucket on the dataset card
// (academic + youtube + NExT-QA + PerceptionTest subsets): 0–30 s 618.0k, 30–60 s 274.1k,
// 1–2 min 246.5k, 2–3 min 234.3k; uniform within a bucket (approximate; 0–30 s from 2 s).
// Task split of the 0_30_s_academic subset: caption 12.0k, open-ended 48.5k, multiple-choice
// 5.75k rows. Detailed captions ≈547 words (approximate, the paper's comparison table as
// recalled) ≈ 711 tokens + a 15-token prompt (σ 0.3); an open-ended or multiple-choice QA
// ≈ 55 tokens (σ 0.4, approximate). Frame sizes: the `video` profile's 720p/360p/1080p mix.
void DflopLlavaVideo(Rng& rng, spec::Sample& s) {
  static constexpr double kBucketS[4][2] = {{2, 30}, {30, 60}, {60, 120}, {120, 180}};
  const int bucket = rng.Choose({618.0, 274.1, 246.5, 234.3});
  s.videos.push_back(VideoClip(rng, rng.Uniform(kBucketS[bucket][0], kBucketS[bucket][1])));
  switch (rng.Choose({12.0, 48.5, 5.75})) {
    case 0:
      s.text_tokens = ClampTokens(rng.LogNormalWithMean(547 * kTokensPerWord + 15, 0.3));
      break;
    default:
      s.text_tokens = ClampTokens(rng.LogNormalWithMean(55, 0.4));
      break;
  }
}

// DFLOP Table 2: each sample's source drawn with the table's sample counts as weights.
void DflopMixed(Rng& rng, spec::Sample& s) {
  const auto composition = DflopMixedComposition();
  double total = 0;
  for (const auto& c : composition) total += static_cast<double>(c.samples);
  double x = rng.Uniform() * total;
  size_t which = 0;
  while (which + 1 < composition.size() && x >= static_cast<double>(composition[which].samples)) {
    x -= static_cast<double>(composition[which].samples);
    ++which;
  }
  switch (which) {
    case 0:
      DflopLlavaWild(rng, s);
      break;
    case 1:
      DflopAi2d(rng, s);
      break;
    case 2:
      DflopInfoVqa(rng, s);
      break;
    case 3:
      DflopM4Instruct(rng, s);
      break;
    default:
      DflopLlavaVideo(rng, s);
      break;
  }
}

void RiseAndFall(Rng& rng, const GeneratorOptions& o, spec::Sample& s) {
  // DIP §7.1 "Dynamic Workloads": image count per packed sequence inside the iteration's bounds;
  // the document's text fills the rest of the context (up to 5% left empty, as packing leaves).
  const ImageCountBounds b = RiseAndFallImageBounds(o.iteration);
  const int64_t max_fit = o.llm_tokens_per_image > 0 ? o.context_tokens / o.llm_tokens_per_image : b.max_images;
  const int images = static_cast<int>(std::min<int64_t>(max_fit, rng.UniformInt(b.min_images, b.max_images)));
  const double slack = rng.Uniform(0.0, 0.05) * static_cast<double>(o.context_tokens);
  const int64_t text = o.context_tokens - static_cast<int64_t>(images) * o.llm_tokens_per_image -
                       static_cast<int64_t>(slack);
  s.text_tokens = static_cast<int>(std::max<int64_t>(1, text));
  s.images.assign(images, spec::ImageMeta{.width_px = o.image_size_px, .height_px = o.image_size_px});
}

void ScienceQa(Rng& rng, spec::Sample& s) {
  // ScienceQA (Lu et al. 2022): 21,208 multiple-choice science questions, 10,332 (48.7%) with an
  // image context; 83.9% carry a lecture and 90.5% an explanation. Text = question, context,
  // choices, answer, lecture and explanation: the HF release holds ≈1.29 kB of text fields per
  // question (27.3 MB / 21,208) ≈ 300 tokens at ≈4.3 bytes/token, of which the metadata fields
  // (task, grade, subject, topic, category, skill) are not trained on => mean 260 tokens
  // (log-normal σ 0.5, an assumption). Images are small diagrams (no size histogram published).
  s.text_tokens = ClampTokens(rng.LogNormalWithMean(260, 0.5));
  if (rng.Bernoulli(0.487)) s.images.push_back(WebImage(rng));
}

// DIP §7.1 VLM data. The paper names its sources (LAION-2B pairs, OBELICS documents, ScienceQA)
// but not their weights. Assumption: MM1's pre-training ratio (McKinzie et al. 2024, §3.3: 45%
// captioned images, 45% interleaved documents, 10% text-only, by tokens), ScienceQA taking the
// 10% slot (half of it is text-only). Token shares 45 : 45 : 10 become per-sample shares through
// the sources' mean LLM tokens at 169 tokens per image: LAION 16.4 + 169 = 185.4, OBELICS
// 816 + 2.5·169 = 1238.5, ScienceQA 260 + 0.487·169 = 342.3 => 78.74% : 11.79% : 9.48%.
// Every image is then scaled to 728 px (169 LLM tokens), as §7.1 does.
constexpr double kDipVlmSampleShares[3] = {0.7874, 0.1179, 0.0948};  // LAION, OBELICS, ScienceQA

void DipVlm(Rng& rng, const GeneratorOptions& o, spec::Sample& s) {
  const auto& w = kDipVlmSampleShares;
  switch (rng.Choose({w[0], w[1], w[2]})) {
    case 0: Laion(rng, s); break;
    case 1: Obelics(rng, s); break;
    default: ScienceQa(rng, s); break;
  }
  for (auto& im : s.images) im = spec::ImageMeta{.width_px = o.image_size_px, .height_px = o.image_size_px};
}

// DIP §7.1 T2V data (after MovieGen): clips transcoded to 16 fps, at most 16 s each (packing
// then groups up to 8 clips and 16 s per microbatch). Durations: the `video` profile's sources
// (InternVid-like and ShareGPT4Video-like halves, two of DIP Fig. 4b's three datasets), each clip
// cut to its first 16 s (the paper gives no histogram of its own). Resolution: MovieGen's
// 768 px stage, 768 x 768 (a 16-s clip = 256 frames = 73,728 latent tokens, MovieGen's "73K").
constexpr double kDipT2vFps = 16.0;
constexpr double kDipT2vMaxClipS = 16.0;
constexpr int kDipT2vSizePx = 768;

void DipT2v(Rng& rng, spec::Sample& s) {
  Video(rng, s);
  spec::VideoMeta& v = s.videos.front();
  const double duration_s = std::min(v.duration_s, kDipT2vMaxClipS);
  v.frames = std::max<int>(1, static_cast<int>(std::floor(duration_s * kDipT2vFps)));
  v.fps = kDipT2vFps;
  v.duration_s = v.frames / kDipT2vFps;
  v.width_px = v.height_px = kDipT2vSizePx;
}

void Cornstarch(spec::Sample& s) {
  // Cornstarch §6.1's synthetic samples: 1k text tokens, one 1280×720 image and one 30-s audio
  // clip, the modality tokens injected in the middle of the text (every sample the same; the
  // seed changes nothing). A model without an audio (or vision) encoder ignores that input.
  s.text_tokens = 1000;
  s.images.push_back(spec::ImageMeta{.width_px = 1280, .height_px = 720, .text_position = 500});
  s.audios.push_back(spec::AudioMeta{.duration_s = 30.0});
}

}  // namespace internal

namespace {
constexpr std::string_view kProfiles[] = {"laion",     "obelics", "coco-llava",    "video",
                                          "audio",     "mixed",   "rise-and-fall", "cornstarch",
                                          "scienceqa", "dip-vlm", "dip-t2v",       "dflop-mixed",
                                          "infovqa",   "dflop-multi-image", "dflop-video"};
// DFLOP Table 2 (the order DflopMixed's switch follows).
constexpr MixComponent kDflopMixed[] = {
    {.dataset = "LLaVA-Wild", .kind = "single-image", .samples = 28000},
    {.dataset = "AI2D", .kind = "single-image", .samples = 18000},
    {.dataset = "InfographicVQA", .kind = "single-image", .samples = 19000},
    {.dataset = "M4-Instruct", .kind = "multi-image", .samples = 60000},
    {.dataset = "LLaVA-Video-178K", .kind = "video", .samples = 60000},
};
}  // namespace

std::span<const MixComponent> DflopMixedComposition() { return kDflopMixed; }

std::vector<std::string_view> GeneratorProfileNames() {
  return std::vector<std::string_view>(std::begin(kProfiles), std::end(kProfiles));
}

Status GeneratorOptions::Validate() const {
  if (num_samples < 0) {
    return InvalidArgumentError("generator.num_samples = " + std::to_string(num_samples) + "; must be >= 0");
  }
  if (iteration < 0) {
    return InvalidArgumentError("generator.iteration = " + std::to_string(iteration) + "; must be >= 0");
  }
  if (context_tokens <= 0) {
    return InvalidArgumentError("generator.context_tokens = " + std::to_string(context_tokens) + "; must be > 0");
  }
  if (llm_tokens_per_image <= 0) {
    return InvalidArgumentError("generator.llm_tokens_per_image = " + std::to_string(llm_tokens_per_image) +
                                "; must be > 0");
  }
  if (image_size_px <= 0) {
    return InvalidArgumentError("generator.image_size_px = " + std::to_string(image_size_px) + "; must be > 0");
  }
  return OkStatus();
}

ImageCountBounds RiseAndFallImageBounds(int64_t iteration) {
  const int64_t p = ((iteration % 20) + 20) % 20;  // position in the 20-iteration pattern
  if (p < 5) return {static_cast<int>(4 * p), 32};  // DIP iterations 1–5: lower 0,4,…,16; upper 32
  // DIP iterations 6–20: both bounds fall linearly from (16, 32) at iteration 5 to (0, 0) at 20.
  const double f = static_cast<double>(19 - p) / 15.0;
  return {static_cast<int>(std::lround(16 * f)), static_cast<int>(std::lround(32 * f))};
}

StatusOr<std::vector<spec::Sample>> GenerateSamples(std::string_view profile,
                                                    const GeneratorOptions& options) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  int which = -1;
  for (size_t i = 0; i < std::size(kProfiles); ++i) {
    if (kProfiles[i] == profile) which = static_cast<int>(i);
  }
  if (which < 0) {
    std::string known;
    for (auto p : kProfiles) known += (known.empty() ? "" : ", ") + std::string(p);
    return NotFoundError("profile = \"" + std::string(profile) + "\"; must be one of " + known);
  }
  const uint64_t seed = internal::SplitMix64(
      options.seed ^ internal::SplitMix64(static_cast<uint64_t>(options.iteration) ^ internal::ProfileHash(profile)));
  internal::Rng rng(seed);
  std::vector<spec::Sample> samples;
  samples.reserve(static_cast<size_t>(options.num_samples));
  for (int64_t i = 0; i < options.num_samples; ++i) {
    spec::Sample s;
    s.id = options.first_id + i;
    switch (which) {
      case 0: internal::Laion(rng, s); break;
      case 1: internal::Obelics(rng, s); break;
      case 2: internal::CocoLlava(rng, s); break;
      case 3: internal::Video(rng, s); break;
      case 4: internal::Audio(rng, s); break;
      case 5: internal::Mixed(rng, s); break;
      case 6: internal::RiseAndFall(rng, options, s); break;
      case 7: internal::Cornstarch(s); break;
      case 8: internal::ScienceQa(rng, s); break;
      case 9: internal::DipVlm(rng, options, s); break;
      case 10:
        internal::DipT2v(rng, s);
        break;
      case 11:
        internal::DflopMixed(rng, s);
        break;
      case 12:  // infovqa: FlowTrain's InfoVQA workload (§4.1), InfographicVQA's statistics
        internal::DflopInfoVqa(rng, s);
        break;
      case 13:  // dflop-multi-image: DFLOP Fig. 11's multiple-image dataset (M4-Instruct rows)
        internal::DflopM4Instruct(rng, s);
        break;
      default:  // dflop-video: DFLOP Fig. 11's video dataset (LLaVA-Video-178K rows)
        internal::DflopLlavaVideo(rng, s);
        break;
    }
    samples.push_back(std::move(s));
  }
  return samples;
}

}  // namespace weft::data
