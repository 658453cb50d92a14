//===- TokenizerJson.cpp - reading a Hugging Face tokenizer.json ----------===//

#include "runtime/data/tokenizer/TokenizerJson.h"

#include "runtime/data/tokenizer/Unicode.h"
#include "support/Json.h"
#include "support/ReadFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Base64.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace twill;
namespace json = llvm::json;

namespace {

/// Reads one file, its errors naming it and the part being read.
class Reader {
public:
  explicit Reader(llvm::StringRef path) : path(path) {}

  llvm::Error fail(const llvm::Twine &where, const llvm::Twine &what) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " + where + ": " + what);
  }
  /// A construct this reader does not build, named, with those it does.
  llvm::Error unbuilt(const llvm::Twine &where, llvm::StringRef type,
                      llvm::StringRef built) const {
    return fail(where,
                "type '" + type + "' is not supported; supported: " + built);
  }

  llvm::Expected<std::shared_ptr<TextPattern>>
  pattern(const json::Object &object, const llvm::Twine &where) const;
  llvm::Error normalizer(const json::Object &object, const llvm::Twine &where,
                         std::vector<NormalizerStep> &steps) const;
  llvm::Error preTokenizer(const json::Object &object, const llvm::Twine &where,
                           std::vector<PreTokenizerStep> &steps) const;
  llvm::Error decoder(const json::Object &object, const llvm::Twine &where,
                      std::vector<DecoderStep> &steps) const;
  llvm::Error model(const json::Object &object, BpeModel &bpe) const;
  llvm::Error postProcessor(const json::Object &object,
                            const llvm::Twine &where,
                            TokenizerParts &parts) const;
  /// `value` as the id of `token` (its name, quoted), or an error naming
  /// both: tokenizers reads a u32, and Twill's ids are int32_t.
  llvm::Expected<int32_t> tokenId(const json::Value *value,
                                  const llvm::Twine &where,
                                  const llvm::Twine &token) const;

private:
  std::string path;
};

} // namespace

/// An object's items of array `key`, each an object, or an error naming it.
template <typename Each>
static llvm::Error eachObject(const Reader &reader, const json::Object &object,
                              llvm::StringRef key, const llvm::Twine &where,
                              Each each) {
  const json::Array *items = object.getArray(key);
  if (!items)
    return reader.fail(where, "needs an array '" + key + "'");
  for (auto [index, item] : llvm::enumerate(*items)) {
    const json::Object *step = item.getAsObject();
    std::string at = (where + "." + key + "[" + llvm::Twine(index) + "]").str();
    if (!step)
      return reader.fail(at, "expected an object");
    if (llvm::Error error = each(*step, at))
      return error;
  }
  return llvm::Error::success();
}

llvm::Expected<std::shared_ptr<TextPattern>>
Reader::pattern(const json::Object &object, const llvm::Twine &where) const {
  const json::Object *pattern = object.getObject("pattern");
  std::optional<llvm::StringRef> literal =
      pattern ? pattern->getString("String") : std::nullopt;
  std::optional<llvm::StringRef> regex =
      pattern ? pattern->getString("Regex") : std::nullopt;
  if (!literal && !regex)
    return fail(where, "needs a pattern {\"String\": ...} or {\"Regex\": ...}");
  llvm::Expected<TextPattern> compiled =
      literal ? TextPattern::literal(*literal) : TextPattern::regex(*regex);
  if (!compiled)
    return fail(where, llvm::toString(compiled.takeError()));
  return std::make_shared<TextPattern>(std::move(*compiled));
}

llvm::Error Reader::normalizer(const json::Object &object,
                               const llvm::Twine &where,
                               std::vector<NormalizerStep> &steps) const {
  llvm::StringRef type = object.getString("type").value_or("");
  if (type == "Sequence")
    return eachObject(*this, object, "normalizers", where,
                      [&](const json::Object &step, const std::string &at) {
                        return normalizer(step, at, steps);
                      });
  if (type == "NFC" || type == "NFKC") {
    steps.push_back(
        {type == "NFC" ? NormalizerStep::Nfc : NormalizerStep::Nfkc, {}, {}});
    return llvm::Error::success();
  }
  if (type == "Prepend") {
    std::optional<llvm::StringRef> prepend = object.getString("prepend");
    if (!prepend)
      return fail(where, "Prepend needs 'prepend'");
    steps.push_back({NormalizerStep::Prepend, prepend->str(), {}});
    return llvm::Error::success();
  }
  if (type == "Replace") {
    llvm::Expected<std::shared_ptr<TextPattern>> found = pattern(object, where);
    if (!found)
      return found.takeError();
    std::optional<llvm::StringRef> content = object.getString("content");
    if (!content)
      return fail(where, "Replace needs 'content'");
    steps.push_back({NormalizerStep::Replace, content->str(), *found});
    return llvm::Error::success();
  }
  return unbuilt(where, type, "NFC, NFKC, Prepend, Replace, Sequence");
}

/// tokenizers' prepend_scheme (or, written before it, add_prefix_space).
static std::optional<PreTokenizerStep::Prepend>
prependScheme(const json::Object &object) {
  if (std::optional<llvm::StringRef> scheme =
          object.getString("prepend_scheme")) {
    if (*scheme == "always")
      return PreTokenizerStep::Always;
    if (*scheme == "first")
      return PreTokenizerStep::First;
    if (*scheme == "never")
      return PreTokenizerStep::Never;
    return std::nullopt;
  }
  return object.getBoolean("add_prefix_space").value_or(true)
             ? PreTokenizerStep::Always
             : PreTokenizerStep::Never;
}

llvm::Error Reader::preTokenizer(const json::Object &object,
                                 const llvm::Twine &where,
                                 std::vector<PreTokenizerStep> &steps) const {
  llvm::StringRef type = object.getString("type").value_or("");
  PreTokenizerStep step;
  if (type == "Sequence")
    return eachObject(*this, object, "pretokenizers", where,
                      [&](const json::Object &inner, const std::string &at) {
                        return preTokenizer(inner, at, steps);
                      });
  if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::ByteLevel;
    step.addPrefixSpace = object.getBoolean("add_prefix_space").value_or(true);
    step.useRegex = object.getBoolean("use_regex").value_or(true);
  } else if (type == "Split") {
    step.kind = PreTokenizerStep::Split;
    llvm::Expected<std::shared_ptr<TextPattern>> found = pattern(object, where);
    if (!found)
      return found.takeError();
    step.pattern = *found;
    static const std::pair<llvm::StringLiteral, SplitBehavior> behaviors[] = {
        {"Removed", SplitBehavior::Removed},
        {"Isolated", SplitBehavior::Isolated},
        {"MergedWithPrevious", SplitBehavior::MergedWithPrevious},
        {"MergedWithNext", SplitBehavior::MergedWithNext},
        {"Contiguous", SplitBehavior::Contiguous}};
    llvm::StringRef behavior = object.getString("behavior").value_or("");
    auto *known = llvm::find_if(
        behaviors, [&](const auto &entry) { return entry.first == behavior; });
    if (known == std::end(behaviors))
      return fail(where, "Split's behavior '" + behavior +
                             "' is not one of Removed, Isolated, "
                             "MergedWithPrevious, MergedWithNext, Contiguous");
    step.behavior = known->second;
    step.invert = object.getBoolean("invert").value_or(false);
  } else if (type == "Metaspace") {
    step.kind = PreTokenizerStep::Metaspace;
    step.replacement = object.getString("replacement").value_or("").str();
    std::optional<PreTokenizerStep::Prepend> scheme = prependScheme(object);
    if (step.replacement.empty() || !scheme)
      return fail(where, "Metaspace needs a replacement and a prepend_scheme "
                         "of always, first or never");
    step.prepend = *scheme;
    step.split = object.getBoolean("split").value_or(true);
  } else if (type == "Digits") {
    step.kind = PreTokenizerStep::Digits;
    step.individualDigits =
        object.getBoolean("individual_digits").value_or(false);
  } else {
    return unbuilt(where, type,
                   "ByteLevel, Split, Metaspace, Digits, Sequence");
  }
  steps.push_back(std::move(step));
  return llvm::Error::success();
}

llvm::Error Reader::decoder(const json::Object &object,
                            const llvm::Twine &where,
                            std::vector<DecoderStep> &steps) const {
  llvm::StringRef type = object.getString("type").value_or("");
  DecoderStep step;
  if (type == "Sequence")
    return eachObject(*this, object, "decoders", where,
                      [&](const json::Object &inner, const std::string &at) {
                        return decoder(inner, at, steps);
                      });
  if (type == "ByteLevel") {
    step.kind = DecoderStep::ByteLevel;
  } else if (type == "ByteFallback") {
    step.kind = DecoderStep::ByteFallback;
  } else if (type == "Fuse") {
    step.kind = DecoderStep::Fuse;
  } else if (type == "Metaspace") {
    step.kind = DecoderStep::Metaspace;
    step.replacement = object.getString("replacement").value_or("").str();
    std::optional<PreTokenizerStep::Prepend> scheme = prependScheme(object);
    if (step.replacement.empty() || !scheme)
      return fail(where, "Metaspace needs a replacement and a prepend_scheme "
                         "of always, first or never");
    step.prependFirst = *scheme != PreTokenizerStep::Never;
  } else if (type == "Replace") {
    step.kind = DecoderStep::Replace;
    llvm::Expected<std::shared_ptr<TextPattern>> found = pattern(object, where);
    if (!found)
      return found.takeError();
    step.pattern = *found;
    std::optional<llvm::StringRef> content = object.getString("content");
    if (!content)
      return fail(where, "Replace needs 'content'");
    step.content = content->str();
  } else if (type == "Strip") {
    step.kind = DecoderStep::Strip;
    std::optional<llvm::StringRef> content = object.getString("content");
    std::optional<int64_t> start = object.getInteger("start");
    std::optional<int64_t> stop = object.getInteger("stop");
    if (!content || !start || !stop || *start < 0 || *stop < 0)
      return fail(where, "Strip needs a content and counts start and stop");
    // tokenizers' content is a char: an empty one would start every token,
    // and strip it `start` times over.
    if (content->empty() || unicode::charLength(*content, 0) != content->size())
      return fail(where, "Strip's content must be one character, not '" +
                             *content + "'");
    step.content = content->str();
    step.start = uint64_t(*start);
    step.stop = uint64_t(*stop);
  } else {
    return unbuilt(where, type,
                   "ByteLevel, ByteFallback, Metaspace, Replace, Fuse, Strip, "
                   "Sequence");
  }
  steps.push_back(std::move(step));
  return llvm::Error::success();
}

llvm::Error Reader::model(const json::Object &object, BpeModel &bpe) const {
  llvm::StringRef type = object.getString("type").value_or("");
  if (type != "BPE")
    return unbuilt("model", type, "BPE");
  // What would change the ids and is not built: refused by name.
  if (const json::Value *dropout = object.get("dropout");
      dropout && dropout->kind() != json::Value::Null &&
      dropout->getAsNumber().value_or(1) != 0)
    return fail("model", "BPE dropout is not supported (it must be null)");
  for (llvm::StringRef affix :
       {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!object.getString(affix).value_or("").empty())
      return fail("model", "BPE's " + affix +
                               " is not supported (it must be null or \"\")");
  const json::Object *vocab = object.getObject("vocab");
  if (!vocab)
    return fail("model", "the BPE model has no vocab");
  for (const auto &[text, value] : *vocab) {
    std::optional<int64_t> id = value.getAsInteger();
    if (!id || *id < 0 || *id > std::numeric_limits<int32_t>::max())
      return fail("model.vocab", "token '" + text.str() + "' has no id");
    if (llvm::Error error = bpe.addToken(text.str(), int32_t(*id)))
      return fail("model.vocab", llvm::toString(std::move(error)));
  }
  const json::Array *merges = object.getArray("merges");
  if (!merges)
    return fail("model", "the BPE model has no merges");
  for (auto [rank, merge] : llvm::enumerate(*merges)) {
    // "left right", or ["left", "right"] (tokenizers 0.20 on).
    std::optional<llvm::StringRef> left, right;
    if (std::optional<llvm::StringRef> line = merge.getAsString()) {
      llvm::SmallVector<llvm::StringRef, 3> parts;
      line->split(parts, ' ');
      if (parts.size() == 2)
        left = parts[0], right = parts[1];
    } else if (const json::Array *pair = merge.getAsArray();
               pair && pair->size() == 2) {
      left = (*pair)[0].getAsString();
      right = (*pair)[1].getAsString();
    }
    std::string at = llvm::formatv("model.merges[{0}]", rank).str();
    if (!left || !right)
      return fail(at, "expected \"left right\" or [\"left\", \"right\"]");
    if (llvm::Error error = bpe.addMerge(*left, *right, int32_t(rank)))
      return fail(at, llvm::toString(std::move(error)));
  }
  bpe.ignoreMerges = object.getBoolean("ignore_merges").value_or(false);
  bpe.byteFallback = object.getBoolean("byte_fallback").value_or(false);
  bpe.fuseUnknown = object.getBoolean("fuse_unk").value_or(false);
  if (std::optional<llvm::StringRef> unknown = object.getString("unk_token")) {
    bpe.unknown = bpe.idOf(*unknown);
    if (bpe.unknown < 0)
      return fail("model",
                  "unk_token '" + *unknown + "' is not in the vocabulary");
  }
  return llvm::Error::success();
}

llvm::Error Reader::postProcessor(const json::Object &object,
                                  const llvm::Twine &where,
                                  TokenizerParts &parts) const {
  llvm::StringRef type = object.getString("type").value_or("");
  if (type == "Sequence")
    return eachObject(*this, object, "processors", where,
                      [&](const json::Object &inner, const std::string &at) {
                        return postProcessor(inner, at, parts);
                      });
  if (type == "ByteLevel") // offsets only: the ids are the same
    return llvm::Error::success();
  if (type != "TemplateProcessing")
    return unbuilt(where, type, "TemplateProcessing, ByteLevel, Sequence");
  const json::Array *single = object.getArray("single");
  const json::Object *specials = object.getObject("special_tokens");
  if (!single || !specials)
    return fail(where, "TemplateProcessing needs 'single' and "
                       "'special_tokens'");
  bool afterText = false;
  for (const json::Value &item : *single) {
    const json::Object *piece = item.getAsObject();
    if (piece && piece->getObject("Sequence")) {
      afterText = true;
      continue;
    }
    const json::Object *special =
        piece ? piece->getObject("SpecialToken") : nullptr;
    std::optional<llvm::StringRef> name =
        special ? special->getString("id") : std::nullopt;
    const json::Object *token = name ? specials->getObject(*name) : nullptr;
    const json::Array *ids = token ? token->getArray("ids") : nullptr;
    if (!ids)
      return fail(where, "a template item is neither the text nor a special "
                         "token of special_tokens with its ids");
    for (const json::Value &value : *ids) {
      llvm::Expected<int32_t> id =
          tokenId(&value, where, "special token '" + *name + "'");
      if (!id)
        return id.takeError();
      // tokenizers writes it as it is: one of no token is no input.
      if (parts.model.textOf(*id).empty() && !parts.added.byId(*id))
        return fail(where, llvm::formatv("special token '{0}' has id {1}, "
                                         "which is no token of the tokenizer",
                                         *name, *id));
      (afterText ? parts.suffix : parts.prefix).push_back(*id);
    }
  }
  return llvm::Error::success();
}

llvm::Expected<int32_t> Reader::tokenId(const json::Value *value,
                                        const llvm::Twine &where,
                                        const llvm::Twine &token) const {
  std::optional<int64_t> id = value ? value->getAsInteger() : std::nullopt;
  if (id && *id >= 0 && *id <= std::numeric_limits<int32_t>::max())
    return int32_t(*id);
  if (!value)
    return fail(where, token + " has no id");
  return fail(where, token + llvm::formatv(
                                 " has id {0}, which is no token id (0 "
                                 "to {1})",
                                 *value, std::numeric_limits<int32_t>::max()));
}

void twill::useTiktokenRules(TokenizerParts &parts, llvm::StringRef pattern) {
  parts.model.mergeByIds();
  parts.model.ignoreMerges = true;
  PreTokenizerStep split;
  split.kind = PreTokenizerStep::Split;
  split.pattern = std::make_shared<TextPattern>(
      llvm::cantFail(TextPattern::regex(pattern)));
  PreTokenizerStep byteLevel;
  byteLevel.kind = PreTokenizerStep::ByteLevel;
  parts.preTokenizers = {std::move(split), std::move(byteLevel)};
  parts.decoders = {DecoderStep{DecoderStep::ByteLevel}};
}

/// More special tokens than a Tekken file has (Mistral's have 1000), few
/// enough that making those it does not list, a name each, is cheap.
static constexpr int64_t kMaxTekkenSpecials = int64_t(1) << 14;

/// Mistral's special tokens where a Tekken file lists none (mistral-common's
/// defaults); the rest up to the file's count are "<SPECIAL_i>".
static const char *const kTekkenSpecials[] = {"<unk>",
                                              "<s>",
                                              "</s>",
                                              "[INST]",
                                              "[/INST]",
                                              "[AVAILABLE_TOOLS]",
                                              "[/AVAILABLE_TOOLS]",
                                              "[TOOL_RESULTS]",
                                              "[/TOOL_RESULTS]",
                                              "[TOOL_CALLS]",
                                              "[IMG]",
                                              "<pad>",
                                              "[IMG_BREAK]",
                                              "[IMG_END]",
                                              "[PREFIX]",
                                              "[MIDDLE]",
                                              "[SUFFIX]",
                                              "[SYSTEM_PROMPT]",
                                              "[/SYSTEM_PROMPT]",
                                              "[TOOL_CONTENT]"};

/// Mistral's Tekken file: `config` (its pattern, how many special tokens
/// come first and how many ids there are), `vocab` (base64 bytes by rank;
/// a token's id is its rank after the special tokens') and maybe
/// `special_tokens`.
static llvm::Expected<TokenizerParts> readTekken(const Reader &reader,
                                                 const json::Object &root) {
  const json::Object *config = root.getObject("config");
  const json::Array *vocab = root.getArray("vocab");
  const json::Array *listed = root.getArray("special_tokens");
  std::optional<llvm::StringRef> pattern = config->getString("pattern");
  std::optional<int64_t> specials =
      config->getInteger("default_num_special_tokens");
  std::optional<int64_t> size = config->getInteger("default_vocab_size");
  if (!pattern || !specials || !size)
    return reader.fail("config", "a Tekken file needs a pattern, "
                                 "default_num_special_tokens and "
                                 "default_vocab_size");
  // The special tokens the file does not list are made from its count, a
  // name apiece: the counts must be ones the file can hold (mistral-common
  // asserts the same of them) before anything is made of them.
  if (*specials < 0 || *specials > kMaxTekkenSpecials)
    return reader.fail("config.default_num_special_tokens",
                       llvm::formatv("{0} special tokens; a Tekken file has "
                                     "0 to {1} (Mistral's have 1000)",
                                     *specials, kMaxTekkenSpecials));
  if (listed && int64_t(listed->size()) > *specials)
    return reader.fail("special_tokens",
                       llvm::formatv("{0} listed, more than "
                                     "config.default_num_special_tokens ({1})",
                                     listed->size(), *specials));
  if (*size < *specials || *size > *specials + int64_t(vocab->size()))
    return reader.fail(
        "config.default_vocab_size",
        llvm::formatv("{0} ids, but the file has {1} special tokens and {2} "
                      "after them (mistral-common asserts "
                      "default_num_special_tokens <= default_vocab_size <= "
                      "their sum)",
                      *size, *specials, vocab->size()));
  llvm::Expected<TextPattern> compiled = TextPattern::regex(*pattern);
  if (!compiled)
    return reader.fail("config.pattern", llvm::toString(compiled.takeError()));
  TokenizerParts parts;
  for (auto [index, entry] : llvm::enumerate(*vocab)) {
    std::string at = llvm::formatv("vocab[{0}]", index).str();
    const json::Object *token = entry.getAsObject();
    std::optional<int64_t> rank =
        token ? token->getInteger("rank") : std::nullopt;
    std::optional<llvm::StringRef> encoded =
        token ? token->getString("token_bytes") : std::nullopt;
    std::vector<char> bytes;
    if (!rank || !encoded || *rank != int64_t(index))
      return reader.fail(at, "expected rank " + llvm::Twine(index) +
                                 " and its token_bytes");
    if (*rank >= *size - *specials)
      break; // past the vocabulary the model uses
    if (llvm::Error error = llvm::decodeBase64(*encoded, bytes)) {
      llvm::consumeError(std::move(error));
      return reader.fail(at, "token_bytes is not base64");
    }
    std::string text;
    for (char byte : bytes)
      text += byteLevelChar((unsigned char)byte);
    if (llvm::Error error =
            parts.model.addToken(text, int32_t(*rank + *specials)))
      return reader.fail(at, llvm::toString(std::move(error)));
  }
  std::vector<std::string> names;
  if (listed) {
    for (auto [index, entry] : llvm::enumerate(*listed)) {
      const json::Object *token = entry.getAsObject();
      std::optional<llvm::StringRef> name =
          token ? token->getString("token_str") : std::nullopt;
      std::optional<int64_t> rank =
          token ? token->getInteger("rank") : std::nullopt;
      if (!name || !rank || *rank != int64_t(index))
        return reader.fail(llvm::formatv("special_tokens[{0}]", index).str(),
                           "expected rank " + llvm::Twine(index) +
                               " and its token_str");
      names.push_back(name->str());
    }
  } else {
    names.assign(std::begin(kTekkenSpecials), std::end(kTekkenSpecials));
  }
  for (int64_t rank = 0; rank < *specials; ++rank) {
    std::string name = rank < int64_t(names.size())
                           ? names[rank]
                           : llvm::formatv("<SPECIAL_{0}>", rank).str();
    AddedToken token{name, int32_t(rank)};
    token.special = true;
    if (llvm::Error error = parts.added.add(std::move(token), ""))
      return reader.fail("special_tokens", llvm::toString(std::move(error)));
  }
  if (const AddedToken *bos = parts.added.find("<s>"))
    parts.prefix = {bos->id};
  useTiktokenRules(parts, *pattern);
  return std::move(parts);
}

llvm::Expected<TokenizerParts> twill::readTokenizerJson(llvm::StringRef path) {
  Reader reader(path);
  llvm::Expected<json::Value> parsed = readJsonFile(path, kMaxTokenizerBytes);
  if (!parsed)
    return parsed.takeError();
  const json::Object *root = parsed->getAsObject();
  if (!root)
    return reader.fail("the file", "expected a JSON object");
  if (!root->get("model") && root->getObject("config") &&
      root->getArray("vocab"))
    return readTekken(reader, *root);
  TokenizerParts parts;
  const json::Object *model = root->getObject("model");
  if (!model)
    return reader.fail("the file", "has no model");
  if (llvm::Error error = reader.model(*model, parts.model))
    return std::move(error);
  // Absent or null: no such part.
  if (const json::Object *object = root->getObject("normalizer"))
    if (llvm::Error error =
            reader.normalizer(*object, "normalizer", parts.normalizers))
      return std::move(error);
  if (const json::Object *object = root->getObject("pre_tokenizer"))
    if (llvm::Error error =
            reader.preTokenizer(*object, "pre_tokenizer", parts.preTokenizers))
      return std::move(error);
  if (const json::Object *object = root->getObject("decoder"))
    if (llvm::Error error = reader.decoder(*object, "decoder", parts.decoders))
      return std::move(error);
  // tokenizers numbers an added token the model lacks itself, next after
  // the model's tokens and those added before it (the id written is only
  // checked, with a warning): a file that says otherwise would encode to
  // ids other than tokenizers' (a token past the model's vocabulary, or
  // two tokens of one id).
  int64_t next = parts.model.size();
  if (const json::Array *added = root->getArray("added_tokens"))
    for (auto [index, value] : llvm::enumerate(*added)) {
      std::string at = llvm::formatv("added_tokens[{0}]", index).str();
      const json::Object *object = value.getAsObject();
      std::optional<llvm::StringRef> content =
          object ? object->getString("content") : std::nullopt;
      if (!content)
        return reader.fail(at, "an added token needs a content");
      llvm::Expected<int32_t> id =
          reader.tokenId(object->get("id"), at, "'" + *content + "'");
      if (!id)
        return id.takeError();
      // A token of the model's vocabulary keeps its id there.
      int32_t inVocab = parts.model.idOf(*content);
      if (inVocab >= 0 && inVocab != *id)
        return reader.fail(at, llvm::formatv("'{0}' has id {1}, and {2} in "
                                             "the vocabulary",
                                             *content, *id, inVocab)
                                   .str());
      if (inVocab < 0 && !parts.model.textOf(*id).empty())
        return reader.fail(at,
                           llvm::formatv("id {0} of '{1}' is the "
                                         "vocabulary's '{2}'",
                                         *id, *content, parts.model.textOf(*id))
                               .str());
      if (inVocab < 0 && *id != next)
        return reader.fail(at, llvm::formatv("'{0}' has id {1}, but "
                                             "tokenizers numbers it {2}, "
                                             "after the model's {3} tokens "
                                             "and the tokens added before it",
                                             *content, *id, next,
                                             parts.model.size())
                                   .str());
      if (inVocab < 0)
        next = *id + 1;
      AddedToken token{content->str(), *id};
      token.special = object->getBoolean("special").value_or(false);
      token.lstrip = object->getBoolean("lstrip").value_or(false);
      token.rstrip = object->getBoolean("rstrip").value_or(false);
      token.normalized = object->getBoolean("normalized").value_or(false);
      token.singleWord = object->getBoolean("single_word").value_or(false);
      llvm::Expected<std::string> normalizedContent =
          token.normalized ? normalize(parts.normalizers, token.content)
                           : std::string();
      if (!normalizedContent)
        return reader.fail(at, llvm::toString(normalizedContent.takeError()));
      if (llvm::Error error =
              parts.added.add(std::move(token), std::move(*normalizedContent)))
        return reader.fail(at, llvm::toString(std::move(error)));
    }
  // After the added tokens: its ids must be tokens.
  if (const json::Object *object = root->getObject("post_processor"))
    if (llvm::Error error =
            reader.postProcessor(*object, "post_processor", parts))
      return std::move(error);
  return std::move(parts);
}
