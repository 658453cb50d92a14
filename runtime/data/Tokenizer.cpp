//===- Tokenizer.cpp - text to token ids and back -------------------------===//

#include "runtime/data/Tokenizer.h"

#include "runtime/data/tokenizer/Unicode.h"
#include "support/ReadFile.h"

#include "llvm/Support/Base64.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

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

llvm::Expected<std::unique_ptr<Tokenizer>>
Tokenizer::loadTiktoken(llvm::StringRef path) {
  auto file = readRegularFile(path, kMaxTokenizerBytes);
  if (!file)
    return file.takeError();
  TokenizerParts parts;
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
    if (rankText.getAsInteger(10, rank) || rank != int32_t(index))
      return fail("expected rank " + std::to_string(index) + ", got '" +
                  rankText + "'");
    // The token in GPT-2's byte alphabet, as the byte-level pre-tokenizer
    // writes text; one rank per token.
    std::string token;
    for (char byte : bytes)
      token += byteLevelChar((unsigned char)byte);
    if (llvm::Error error = parts.model.addToken(token, rank)) {
      llvm::consumeError(std::move(error));
      return fail(
          llvm::formatv("the token of rank {0} again", parts.model.idOf(token))
              .str());
    }
  }
  for (int byte = 0; byte < 256; ++byte)
    if (parts.model.idOf(byteLevelChar((unsigned char)byte)) < 0)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("{0}: has no token for byte {1:x2}: a byte-level "
                        "vocabulary needs all 256 (an empty or truncated "
                        "file?)",
                        path, byte));
  useTiktokenRules(parts, kLlama3Pattern);
  int32_t next = parts.model.idEnd();
  for (std::string &name : llama3Specials()) {
    // A special token is not also text: its id must mean one thing.
    if (parts.model.idOf(name) >= 0)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     path + ": special token '" + name +
                                         "' is also a token of the "
                                         "vocabulary");
    AddedToken token{std::move(name), next++};
    token.special = true;
    if (llvm::Error error = parts.added.add(std::move(token), ""))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     path + ": " +
                                         llvm::toString(std::move(error)));
  }
  parts.prefix = {parts.added.find("<|begin_of_text|>")->id};
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(parts), path));
}

llvm::Expected<std::unique_ptr<Tokenizer>>
Tokenizer::loadHuggingFace(llvm::StringRef path) {
  llvm::Expected<TokenizerParts> parts = readTokenizerJson(path);
  if (!parts)
    return parts.takeError();
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(*parts), path));
}

llvm::Expected<std::unique_ptr<Tokenizer>>
Tokenizer::load(llvm::StringRef path) {
  return path.ends_with(".json") ? loadHuggingFace(path) : loadTiktoken(path);
}

int32_t Tokenizer::specialId(llvm::StringRef name) const {
  const AddedToken *token = parts.added.find(name);
  return token && token->special ? token->id : -1;
}

int32_t Tokenizer::addedId(llvm::StringRef content) const {
  const AddedToken *token = parts.added.find(content);
  return token ? token->id : -1;
}

Tokenizer::Tokenizer(TokenizerParts parts, llvm::StringRef path)
    : parts(std::move(parts)), path(path) {
  for (const AddedToken &token : this->parts.added.all())
    if (token.special && !token.content.empty())
      specialFirstBytes.set(uint8_t(token.content.front()));
}

llvm::Expected<std::string> Tokenizer::findInModel(llvm::StringRef dir) {
  llvm::SmallString<256> model(dir), json(dir);
  llvm::sys::path::append(model, "original", "tokenizer.model");
  llvm::sys::path::append(json, "tokenizer.json");
  // tokenizer.json first, as transformers reads it: a fine-tune may edit
  // it and keep the base's original/.
  for (llvm::StringRef path : {json.str(), model.str()})
    if (llvm::sys::fs::exists(path))
      return path.str();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "looked for " + json + " and " + model);
}

size_t Tokenizer::specialTokenAtStart(llvm::StringRef text) const {
  if (text.empty() || !specialFirstBytes.test(uint8_t(text.front())))
    return 0;
  size_t longest = 0;
  for (const AddedToken &token : parts.added.all())
    if (token.special && text.starts_with(token.content))
      longest = std::max(longest, token.content.size());
  return longest;
}

int64_t Tokenizer::vocabSize() const {
  int64_t end = parts.model.idEnd();
  for (const AddedToken &token : parts.added.all())
    end = std::max<int64_t>(end, token.id + 1);
  return end;
}

llvm::Error Tokenizer::inFile(llvm::Error error) const {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 path + ": " +
                                     llvm::toString(std::move(error)));
}

llvm::Error Tokenizer::encodeText(llvm::StringRef text, bool atStart,
                                  bool allowSpecial,
                                  std::vector<int32_t> &ids) const {
  // Nothing is no piece (a Metaspace would make one of its replacement).
  if (text.empty())
    return llvm::Error::success();
  llvm::Expected<std::string> normalized = normalize(parts.normalizers, text);
  if (!normalized)
    return inFile(normalized.takeError());
  for (const Segment &segment :
       parts.added.split(*normalized, /*normalizedText=*/true, allowSpecial)) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    if (llvm::Error error = preTokenize(parts.preTokenizers, segment.text,
                                        atStart && segment.begin == 0,
                                        [&](llvm::StringRef piece, bool) {
                                          parts.model.encode(piece, ids);
                                          return llvm::Error::success();
                                        }))
      return inFile(std::move(error));
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<int32_t>>
Tokenizer::encode(llvm::StringRef input, bool allowSpecial) const {
  return encodeStretches(unicode::replaceInvalid(input), allowSpecial, nullptr);
}

llvm::Expected<std::vector<int32_t>>
Tokenizer::encode(llvm::StringRef text, std::vector<Stretch> &stretches) const {
  return encodeStretches(text, /*allowSpecial=*/true, &stretches);
}

llvm::Expected<std::vector<int32_t>>
Tokenizer::encodeStretches(llvm::StringRef text, bool allowSpecial,
                           std::vector<Stretch> *stretches) const {
  std::vector<int32_t> ids;
  for (const Segment &segment :
       parts.added.split(text, /*normalizedText=*/false, allowSpecial)) {
    if (stretches)
      stretches->push_back({segment.begin, ids.size(), segment.id >= 0});
    if (segment.id >= 0)
      ids.push_back(segment.id);
    else if (llvm::Error error = encodeText(segment.text, segment.begin == 0,
                                            allowSpecial, ids))
      return std::move(error);
  }
  return ids;
}

llvm::Expected<std::vector<int32_t>>
Tokenizer::encodeStretchStart(llvm::StringRef text, bool startsInput) const {
  std::vector<int32_t> ids;
  if (llvm::Error error =
          encodeText(text, startsInput, /*allowSpecial=*/true, ids))
    return std::move(error);
  return ids;
}

llvm::Expected<std::vector<int32_t>>
Tokenizer::encodeChat(llvm::ArrayRef<ChatMessage> messages,
                      bool generationPrompt) const {
  std::vector<int32_t> ids = {specialId("<|begin_of_text|>")};
  auto append = [&](llvm::StringRef text) -> llvm::Error {
    llvm::Expected<std::vector<int32_t>> more =
        encode(text, /*allowSpecial=*/false);
    if (!more)
      return more.takeError();
    ids.insert(ids.end(), more->begin(), more->end());
    return llvm::Error::success();
  };
  auto header = [&](llvm::StringRef role) -> llvm::Error {
    ids.push_back(specialId("<|start_header_id|>"));
    if (llvm::Error error = append(role))
      return error;
    ids.push_back(specialId("<|end_header_id|>"));
    return append("\n\n");
  };
  for (const ChatMessage &message : messages) {
    if (llvm::Error error = header(message.role))
      return std::move(error);
    if (llvm::Error error = append(message.content))
      return std::move(error);
    ids.push_back(specialId("<|eot_id|>"));
  }
  if (generationPrompt)
    if (llvm::Error error = header("assistant"))
      return std::move(error);
  return ids;
}

llvm::Expected<std::string>
Tokenizer::decode(llvm::ArrayRef<int32_t> ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (const AddedToken *added = parts.added.byId(id)) {
      tokens.push_back(added->content);
      continue;
    }
    llvm::StringRef text = parts.model.textOf(id);
    if (text.empty())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("token id {0} is outside the vocabulary [0, {1})", id,
                        vocabSize()));
    tokens.push_back(text.str());
  }
  llvm::Expected<std::string> text =
      decodeTokens(parts.decoders, std::move(tokens));
  if (!text)
    return inFile(text.takeError());
  return text;
}
