//===- Tokenizer.cpp - Llama 3's byte-level BPE ---------------------------===//

#include "runtime/data/Tokenizer.h"

#include "runtime/data/JsonLines.h"
#include "support/ReadFile.h"

#include "llvm/Support/Base64.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <limits>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

using namespace twill;

/// Llama 3's pre-tokenization: contractions, words with one leading
/// non-letter, 1-3 digit numbers, punctuation runs, newlines, spaces.
static constexpr llvm::StringLiteral kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

/// The special tokens after the base vocabulary, in id order.
static std::vector<std::string> llama3Specials() {
  std::vector<std::string> names = {"<|begin_of_text|>",
                                    "<|end_of_text|>",
                                    "<|reserved_special_token_0|>",
                                    "<|reserved_special_token_1|>",
                                    "<|finetune_right_pad_id|>",
                                    "<|step_id|>",
                                    "<|start_header_id|>",
                                    "<|end_header_id|>",
                                    "<|eom_id|>",
                                    "<|eot_id|>",
                                    "<|python_tag|>",
                                    "<|image|>"};
  for (int i = 2; names.size() < 256; ++i)
    names.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
  return names;
}

struct Tokenizer::Pattern {
  pcre2_code *code = nullptr;
  ~Pattern() { pcre2_code_free(code); }
};

Tokenizer::~Tokenizer() = default;

llvm::Expected<std::unique_ptr<Tokenizer>>
Tokenizer::loadTiktoken(llvm::StringRef path) {
  auto file = readRegularFile(path, kMaxTokenizerBytes);
  if (!file)
    return file.takeError();
  auto tokenizer = std::unique_ptr<Tokenizer>(new Tokenizer());
  llvm::SmallVector<llvm::StringRef> lines;
  (*file)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (auto [index, line] : llvm::enumerate(lines)) {
    auto [encoded, rankText] = line.trim().split(' ');
    std::vector<char> bytes;
    int32_t rank;
    auto fail = [&, index = index](const llvm::Twine &what) {
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("{0}:{1}: ", path, index + 1).str() + what);
    };
    if (llvm::Error error = llvm::decodeBase64(encoded, bytes)) {
      llvm::consumeError(std::move(error));
      return fail("'" + encoded + "' is not base64");
    }
    if (rankText.getAsInteger(10, rank) ||
        rank != (int32_t)tokenizer->tokens.size())
      return fail("expected rank " + std::to_string(tokenizer->tokens.size()) +
                  ", got '" + rankText + "'");
    std::string token(bytes.begin(), bytes.end());
    // One rank per token: a second would leave the first undecodable.
    auto [existing, added] = tokenizer->ranks.try_emplace(token, rank);
    if (!added)
      return fail(
          llvm::formatv("the token of rank {0} again", existing->second).str());
    tokenizer->tokens.push_back(std::move(token));
  }
  return finish(std::move(tokenizer), llama3Specials(), path);
}

llvm::Expected<std::unique_ptr<Tokenizer>>
Tokenizer::finish(std::unique_ptr<Tokenizer> tokenizer,
                  std::vector<std::string> specials, llvm::StringRef path) {
  for (int byte = 0; byte < 256; ++byte)
    if (!tokenizer->ranks.count(std::string(1, char(byte))))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("{0}: has no token for byte {1:x2}: a byte-level "
                        "vocabulary needs all 256 (an empty or truncated "
                        "file?)",
                        path, byte));
  for (std::string &special : specials) {
    // A special token is not also text: its id must mean one thing.
    if (!tokenizer->ranks.try_emplace(special, tokenizer->tokens.size()).second)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     path + ": special token '" + special +
                                         "' is also a token of the "
                                         "vocabulary or named twice");
    tokenizer->tokens.push_back(special);
    tokenizer->specials.push_back(std::move(special));
  }
  int errorCode;
  PCRE2_SIZE errorOffset;
  tokenizer->pattern = std::make_unique<Pattern>();
  tokenizer->pattern->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kLlama3Pattern.data()),
                    kLlama3Pattern.size(), PCRE2_UTF | PCRE2_UCP, &errorCode,
                    &errorOffset, nullptr);
  if (!tokenizer->pattern->code)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot compile the Llama 3 pattern");
  pcre2_jit_compile(tokenizer->pattern->code, PCRE2_JIT_COMPLETE);
  return std::move(tokenizer);
}

/// The byte GPT-2's byte-level alphabet writes as code point `c`: printable
/// bytes as themselves, the others as 256, 257, ... in byte order.
static std::optional<unsigned char> byteOfCodePoint(uint32_t c) {
  static const std::vector<int> table = [] {
    std::vector<int> inverse(512, -1);
    int next = 256;
    for (int byte = 0; byte < 256; ++byte) {
      bool printable = (byte >= 33 && byte <= 126) ||
                       (byte >= 161 && byte <= 172) || byte >= 174;
      inverse[printable ? byte : next++] = byte;
    }
    return inverse;
  }();
  if (c >= table.size() || table[c] < 0)
    return std::nullopt;
  return (unsigned char)table[c];
}

/// The bytes of a token written in GPT-2's byte-level alphabet (UTF-8).
static std::optional<std::string> tokenBytes(llvm::StringRef text) {
  std::string bytes;
  auto *next = reinterpret_cast<const llvm::UTF8 *>(text.begin());
  auto *end = reinterpret_cast<const llvm::UTF8 *>(text.end());
  while (next < end) {
    llvm::UTF32 c;
    if (llvm::convertUTF8Sequence(&next, end, &c, llvm::strictConversion) !=
        llvm::conversionOK)
      return std::nullopt;
    std::optional<unsigned char> byte = byteOfCodePoint(c);
    if (!byte)
      return std::nullopt;
    bytes.push_back(char(*byte));
  }
  return bytes;
}

llvm::Expected<std::unique_ptr<Tokenizer>>
Tokenizer::loadHuggingFace(llvm::StringRef path) {
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " + what);
  };
  llvm::Expected<llvm::json::Value> parsed =
      readJsonFile(path, kMaxTokenizerBytes);
  if (!parsed)
    return parsed.takeError();
  const llvm::json::Object *root = parsed->getAsObject();
  const llvm::json::Object *model = root ? root->getObject("model") : nullptr;
  if (!model || model->getString("type") != "BPE")
    return fail("expected a byte-level BPE model (\"model\": {\"type\": "
                "\"BPE\", ...})");
  const llvm::json::Object *vocab = model->getObject("vocab");
  if (!vocab)
    return fail("the model has no vocab");
  // Ranks are ids: Llama 3's tokenizer.json is tiktoken's ranks, its merges
  // in rank order, so merging by rank is merging by the merges' priority.
  auto tokenizer = std::unique_ptr<Tokenizer>(new Tokenizer());
  tokenizer->tokens.resize(vocab->size());
  std::vector<bool> assigned(vocab->size());
  for (const auto &[text, value] : *vocab) {
    std::optional<int64_t> id = value.getAsInteger();
    if (!id || *id < 0 || *id >= (int64_t)vocab->size())
      return fail("token '" + text.str() + "' has no id in [0, vocab size)");
    if (assigned[*id])
      return fail(llvm::formatv("two tokens have id {0} (one is '{1}')", *id,
                                text.str())
                      .str());
    assigned[*id] = true;
    std::optional<std::string> bytes = tokenBytes(text.str());
    if (!bytes)
      return fail("token '" + text.str() +
                  "' is not in the byte-level alphabet");
    tokenizer->ranks[*bytes] = int32_t(*id);
    tokenizer->tokens[*id] = std::move(*bytes);
  }
  if (tokenizer->ranks.size() != vocab->size())
    return fail("two tokens stand for the same bytes");
  // The special tokens follow the vocab, in id order.
  std::vector<std::string> specials;
  if (const llvm::json::Array *added = root->getArray("added_tokens"))
    for (const llvm::json::Value &value : *added) {
      const llvm::json::Object *token = value.getAsObject();
      std::optional<int64_t> id =
          token ? token->getInteger("id") : std::nullopt;
      std::optional<llvm::StringRef> content =
          token ? token->getString("content") : std::nullopt;
      if (!id || !content)
        return fail("an added token needs an id and a content");
      if (*id != int64_t(vocab->size() + specials.size()))
        return fail(llvm::formatv("added token '{0}' has id {1}; expected {2}",
                                  *content, *id,
                                  vocab->size() + specials.size())
                        .str());
      specials.push_back(content->str());
    }
  return finish(std::move(tokenizer),
                specials.empty() ? llama3Specials() : std::move(specials),
                path);
}

llvm::Expected<std::unique_ptr<Tokenizer>>
Tokenizer::load(llvm::StringRef path) {
  return path.ends_with(".json") ? loadHuggingFace(path) : loadTiktoken(path);
}

int32_t Tokenizer::specialId(llvm::StringRef name) const {
  auto it = ranks.find(name);
  if (it == ranks.end() ||
      it->second < (int32_t)(tokens.size() - specials.size()))
    return -1;
  return it->second;
}

void Tokenizer::bytePairEncode(llvm::StringRef piece,
                               std::vector<int32_t> &ids) const {
  auto whole = ranks.find(piece);
  if (whole != ranks.end()) {
    ids.push_back(whole->second);
    return;
  }
  // tiktoken's merge: boundaries with the rank of the pair they start,
  // merged lowest rank first (leftmost on ties) until nothing merges.
  constexpr int32_t kNone = std::numeric_limits<int32_t>::max();
  struct Part {
    size_t start;
    int32_t rank;
  };
  std::vector<Part> parts;
  auto rankOf = [&](size_t begin, size_t end) {
    auto it = ranks.find(piece.slice(begin, end));
    return it == ranks.end() ? kNone : it->second;
  };
  for (size_t i = 0; i + 1 < piece.size(); ++i)
    parts.push_back({i, rankOf(i, i + 2)});
  parts.push_back({piece.size() - 1, kNone});
  parts.push_back({piece.size(), kNone});
  auto mergedRank = [&](size_t i) {
    return i + 3 < parts.size() ? rankOf(parts[i].start, parts[i + 3].start)
                                : kNone;
  };
  while (true) {
    size_t best = 0;
    int32_t bestRank = kNone;
    for (size_t i = 0; i + 1 < parts.size(); ++i)
      if (parts[i].rank < bestRank) {
        bestRank = parts[i].rank;
        best = i;
      }
    if (bestRank == kNone)
      break;
    if (best > 0)
      parts[best - 1].rank = mergedRank(best - 1);
    parts[best].rank = mergedRank(best);
    parts.erase(parts.begin() + best + 1);
  }
  for (size_t i = 0; i + 1 < parts.size(); ++i)
    ids.push_back(rankOf(parts[i].start, parts[i + 1].start));
}

void Tokenizer::encodeOrdinary(llvm::StringRef text,
                               std::vector<int32_t> &ids) const {
  pcre2_match_data *match =
      pcre2_match_data_create_from_pattern(pattern->code, nullptr);
  size_t offset = 0;
  // PCRE2 checks that the whole subject is UTF-8 on every call unless told
  // not to: check it on the first call only.
  uint32_t options = 0;
  while (offset < text.size()) {
    int found =
        pcre2_match(pattern->code, reinterpret_cast<PCRE2_SPTR>(text.data()),
                    text.size(), offset, options, match, nullptr);
    options = PCRE2_NO_UTF_CHECK;
    if (found < 0) {
      // No match (or bytes that are not UTF-8): the rest is one piece, so
      // every byte still becomes tokens and nothing is lost.
      bytePairEncode(text.drop_front(offset), ids);
      break;
    }
    PCRE2_SIZE *range = pcre2_get_ovector_pointer(match);
    if (range[0] > offset)
      bytePairEncode(text.slice(offset, range[0]), ids);
    bytePairEncode(text.slice(range[0], range[1]), ids);
    offset = range[1];
  }
  pcre2_match_data_free(match);
}

std::vector<int32_t> Tokenizer::encode(llvm::StringRef text,
                                       bool allowSpecial) const {
  std::vector<int32_t> ids;
  size_t start = 0;
  for (size_t at = 0;
       allowSpecial && (at = text.find("<|", at)) != llvm::StringRef::npos;) {
    size_t end = text.find("|>", at + 2);
    if (end == llvm::StringRef::npos)
      break;
    int32_t id = specialId(text.slice(at, end + 2));
    if (id < 0) {
      at += 2;
      continue;
    }
    encodeOrdinary(text.slice(start, at), ids);
    ids.push_back(id);
    start = at = end + 2;
  }
  encodeOrdinary(text.drop_front(start), ids);
  return ids;
}

std::vector<int32_t> Tokenizer::encodeChat(llvm::ArrayRef<ChatMessage> messages,
                                           bool generationPrompt) const {
  std::vector<int32_t> ids = {specialId("<|begin_of_text|>")};
  auto header = [&](llvm::StringRef role) {
    ids.push_back(specialId("<|start_header_id|>"));
    encodeOrdinary(role, ids);
    ids.push_back(specialId("<|end_header_id|>"));
    encodeOrdinary("\n\n", ids);
  };
  for (const ChatMessage &message : messages) {
    header(message.role);
    encodeOrdinary(message.content, ids);
    ids.push_back(specialId("<|eot_id|>"));
  }
  if (generationPrompt)
    header("assistant");
  return ids;
}

llvm::Expected<std::string>
Tokenizer::decode(llvm::ArrayRef<int32_t> ids) const {
  std::string text;
  for (int32_t id : ids) {
    if (id < 0 || id >= (int32_t)tokens.size())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("token id {0} is outside the vocabulary [0, {1})", id,
                        tokens.size()));
    text += tokens[id];
  }
  return text;
}
