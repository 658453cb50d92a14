//===- TokenizerTest.cpp - loading a tokenizer ----------------------------===//
//
// Encoding itself is checked against tiktoken and Hugging Face tokenizers
// (test/oracle); these are the file errors, of tiktoken's .model and
// Hugging Face's tokenizer.json, and the parts of a tokenizer.json read.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/Tokenizer.h"
#include "runtime/data/ChatFormat.h"

#include "llvm/Support/Base64.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

using namespace twill;
using ::testing::HasSubstr;

namespace {

std::string writeModel(llvm::StringRef contents,
                       llvm::StringRef suffix = "model") {
  llvm::SmallString<128> path;
  EXPECT_FALSE(llvm::sys::fs::createTemporaryFile("twill-tok", suffix, path));
  std::error_code error;
  llvm::raw_fd_ostream os(path, error);
  os << contents;
  return std::string(path);
}

std::string errorOf(llvm::StringRef contents) {
  std::string path = writeModel(contents);
  auto tokenizer = Tokenizer::loadTiktoken(path);
  EXPECT_FALSE(bool(tokenizer));
  return tokenizer ? "" : llvm::toString(tokenizer.takeError());
}

/// A tiktoken file: every byte (ranks 0-255, as byte-level BPE needs), then
/// `merged` tokens.
std::string vocabulary(llvm::ArrayRef<std::string> merged) {
  std::string text;
  int rank = 0;
  for (int byte = 0; byte < 256; ++byte)
    text += llvm::encodeBase64(std::string(1, char(byte))) + " " +
            std::to_string(rank++) + "\n";
  for (const std::string &token : merged)
    text += llvm::encodeBase64(token) + " " + std::to_string(rank++) + "\n";
  return text;
}

/// The ids of `text`, none where encoding it fails (a failure of the test).
std::vector<int32_t> encoded(const Tokenizer &tokenizer, llvm::StringRef text,
                             bool allowSpecial) {
  llvm::Expected<std::vector<int32_t>> ids =
      tokenizer.encode(text, allowSpecial);
  if (ids)
    return std::move(*ids);
  ADD_FAILURE() << llvm::toString(ids.takeError());
  return {};
}

TEST(Tokenizer, TinyVocabularyEncodesAndDecodes) {
  // The 256 bytes, "ab", and the special tokens after them.
  std::string path = writeModel(vocabulary({"ab"}));
  auto tokenizer = Tokenizer::loadTiktoken(path);
  ASSERT_TRUE(bool(tokenizer)) << llvm::toString(tokenizer.takeError());
  EXPECT_EQ((*tokenizer)->vocabSize(), 257 + 256);
  EXPECT_EQ((*tokenizer)->specialId("<|begin_of_text|>"), 257);
  EXPECT_EQ((*tokenizer)->specialId("<|eot_id|>"), 266);
  EXPECT_EQ((*tokenizer)->specialId("ab"), -1);
  EXPECT_THAT(encoded(**tokenizer, "abab<|eot_id|>", true),
              ::testing::ElementsAre(256, 256, 266));
  auto text = (*tokenizer)->decode({256, 'a', 266});
  ASSERT_TRUE(bool(text));
  EXPECT_EQ(*text, "aba<|eot_id|>");
  EXPECT_THAT(llvm::toString((*tokenizer)->decode({999}).takeError()),
              HasSubstr("token id 999 is outside the vocabulary"));
}

TEST(Tokenizer, AVocabularyWithoutEveryByteIsRefused) {
  // An empty or truncated file: some byte would have no encoding.
  EXPECT_THAT(errorOf(""), HasSubstr("has no token for byte 0x00"));
  std::string truncated = vocabulary({});
  truncated.resize(truncated.find(llvm::encodeBase64(std::string("z"))));
  EXPECT_THAT(errorOf(truncated), HasSubstr("has no token for byte 0x7a"));
}

TEST(Tokenizer, BadLinesAreNamed) {
  EXPECT_THAT(errorOf("YQ== 0\n!!! 1\n"), HasSubstr(":2: '!!!' is not base64"));
  EXPECT_THAT(errorOf("YQ== 0\nYg== 5\n"),
              HasSubstr(":2: expected rank 1, got '5'"));
  EXPECT_THAT(
      llvm::toString(
          Tokenizer::loadTiktoken("/nonexistent/tokenizer.model").takeError()),
      HasSubstr("/nonexistent/tokenizer.model"));
}

TEST(Tokenizer, ATokenOrIdTwiceIsRefused) {
  // Found by fuzz/tokenizer_hf: two tokens of one id loaded, and text
  // encoded to that id decoded as the other token.
  auto hugging = Tokenizer::loadHuggingFace(writeModel(
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}}})", "json"));
  ASSERT_FALSE(bool(hugging));
  EXPECT_THAT(llvm::toString(hugging.takeError()),
              HasSubstr("two tokens have id 0"));
  EXPECT_THAT(errorOf(vocabulary({"a"})),
              HasSubstr(":257: the token of rank 97 again"));
  EXPECT_THAT(errorOf(vocabulary({"<|eot_id|>"})),
              HasSubstr("special token '<|eot_id|>' is also a token of the "
                        "vocabulary"));
}

/// The error loading tokenizer.json `contents`.
std::string jsonErrorOf(llvm::StringRef contents) {
  auto tokenizer = Tokenizer::loadHuggingFace(writeModel(contents, "json"));
  EXPECT_FALSE(bool(tokenizer));
  return tokenizer ? "" : llvm::toString(tokenizer.takeError());
}

/// A tokenizer.json of tokens a, b, c and "ab", merged from a and b, with
/// `parts` (JSON members) beside its model, whose own `model` members
/// follow its vocab and merges.
std::string tokenizerJson(llvm::StringRef parts, llvm::StringRef model = "") {
  return (R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, )"
          R"("ab": 3, "<unk>": 4}, "merges": [["a", "b"]])" +
          model + "}" + parts + "}")
      .str();
}

TEST(Tokenizer, TokenizerJsonErrorsNameTheConstruct) {
  // A truncated file, a merge naming a token the vocabulary lacks.
  EXPECT_THAT(jsonErrorOf(tokenizerJson("").substr(0, 40)), HasSubstr("json"));
  EXPECT_THAT(jsonErrorOf(R"({"model": {"type": "BPE", "vocab": {"a": 0},)"
                          R"( "merges": ["a z"]}})"),
              HasSubstr("model.merges[0]: merge 0 ('a' + 'z') names 'z', "
                        "which is not in the vocabulary"));
  EXPECT_THAT(jsonErrorOf(R"({"model": {"type": "BPE", "vocab": {"a": 0},)"
                          R"( "merges": ["a a b"]}})"),
              HasSubstr("model.merges[0]: expected \"left right\""));
  // An id past any vocabulary's (the fuzzer's: 32 GB for its table).
  EXPECT_THAT(jsonErrorOf(R"({"model": {"type": "BPE", "vocab": )"
                          R"({"a": 2000000000}, "merges": []}})"),
              HasSubstr("token 'a' has id 2000000000, past the 4194304 ids "
                        "a vocabulary may have"));
  // Constructs not built are refused by name, never skipped.
  EXPECT_THAT(jsonErrorOf(R"({"model": {"type": "WordPiece", "vocab": {}}})"),
              HasSubstr("model: type 'WordPiece' is not supported; "
                        "supported: BPE"));
  EXPECT_THAT(
      jsonErrorOf(tokenizerJson(R"(, "pre_tokenizer": {"type": "Sequence",)"
                                R"( "pretokenizers": [{"type": "Digits"},)"
                                R"( {"type": "Whitespace"}]})")),
      HasSubstr("pre_tokenizer.pretokenizers[1]: type 'Whitespace' is not "
                "supported; supported: ByteLevel, Split, Metaspace, Digits, "
                "Sequence"));
  EXPECT_THAT(
      jsonErrorOf(tokenizerJson(R"(, "normalizer": {"type": "Lowercase"})")),
      HasSubstr("normalizer: type 'Lowercase' is not supported"));
  EXPECT_THAT(
      jsonErrorOf(tokenizerJson(R"(, "decoder": {"type": "WordPiece"})")),
      HasSubstr("decoder: type 'WordPiece' is not supported"));
  EXPECT_THAT(jsonErrorOf(tokenizerJson(
                  R"(, "post_processor": {"type": "BertProcessing"})")),
              HasSubstr("post_processor: type 'BertProcessing' is not "
                        "supported"));
  EXPECT_THAT(jsonErrorOf(tokenizerJson("", R"(, "dropout": 0.1)")),
              HasSubstr("BPE dropout is not supported"));
  EXPECT_THAT(
      jsonErrorOf(tokenizerJson("", R"(, "continuing_subword_prefix": "##")")),
      HasSubstr("continuing_subword_prefix is not supported"));
  EXPECT_THAT(jsonErrorOf(tokenizerJson("", R"(, "unk_token": "<?>")")),
              HasSubstr("unk_token '<?>' is not in the vocabulary"));
  EXPECT_THAT(jsonErrorOf(tokenizerJson(
                  R"(, "pre_tokenizer": {"type": "Split", "pattern": )"
                  R"({"Regex": "(unclosed"}, "behavior": "Isolated"})")),
              HasSubstr("regex '(unclosed' does not compile"));
  EXPECT_THAT(jsonErrorOf(tokenizerJson(
                  R"(, "added_tokens": [{"id": 2, "content": "<s>"}])")),
              HasSubstr("id 2 of '<s>' is the vocabulary's 'c'"));
}

/// A Tekken file of tokens a, b, ab and c (ranks 0-3) after `specials`
/// special tokens, of `size` ids in all, with `members` after its vocab.
std::string tekkenJson(int64_t specials, int64_t size,
                       llvm::StringRef members = "") {
  return (R"({"config": {"pattern": "[a-z]+|.", )"
          R"("default_num_special_tokens": )" +
          llvm::Twine(specials) + R"(, "default_vocab_size": )" +
          llvm::Twine(size) +
          R"(}, "vocab": [{"rank": 0, "token_bytes": "YQ=="}, {"rank": 1, )"
          R"("token_bytes": "Yg=="}, {"rank": 2, "token_bytes": "YWI="}, )"
          R"({"rank": 3, "token_bytes": "Yw=="}])" +
          members + "}")
      .str();
}

TEST(Tokenizer, TekkenFileErrorsAreNamed) {
  // Mistral's Tekken JSON: its config, and a vocabulary ranked in order.
  EXPECT_THAT(jsonErrorOf(R"({"config": {"pattern": "(", )"
                          R"("default_num_special_tokens": 2, )"
                          R"("default_vocab_size": 2}, "vocab": []})"),
              HasSubstr("config.pattern: regex '(' does not compile"));
  EXPECT_THAT(jsonErrorOf(R"({"config": {"pattern": "."}, "vocab": []})"),
              HasSubstr("config: a Tekken file needs a pattern, "
                        "default_num_special_tokens and default_vocab_size"));
  EXPECT_THAT(jsonErrorOf(R"({"config": {"pattern": ".", )"
                          R"("default_num_special_tokens": 2, )"
                          R"("default_vocab_size": 3}, "vocab": [)"
                          R"({"rank": 1, "token_bytes": "YQ=="}]})"),
              HasSubstr("vocab[0]: expected rank 0 and its token_bytes"));
  auto tekken =
      Tokenizer::loadHuggingFace(writeModel(tekkenJson(3, 6), "json"));
  ASSERT_TRUE(bool(tekken)) << llvm::toString(tekken.takeError());
  // Ids after the 3 special tokens (Mistral's first three); a rank past the
  // vocabulary size ("c") is not a token.
  EXPECT_EQ((*tekken)->specialId("</s>"), 2);
  EXPECT_THAT(encoded(**tekken, "ab", false), ::testing::ElementsAre(5));
  EXPECT_THAT((*tekken)->prefixIds(), ::testing::ElementsAre(1));
}

TEST(Tokenizer, TokenizerJsonPartsAreRead) {
  // A BOS template, an unknown token for what the vocabulary lacks (fused),
  // merges, a special token and its id.
  auto tokenizer = Tokenizer::loadHuggingFace(writeModel(
      tokenizerJson(
          R"(, "added_tokens": [{"id": 5, "content": "<s>", "special": true}],)"
          R"( "post_processor": {"type": "TemplateProcessing", "single": [)"
          R"({"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": )"
          R"({"id": "A", "type_id": 0}}], "special_tokens": {"<s>": {"id": )"
          R"("<s>", "ids": [5], "tokens": ["<s>"]}}})",
          R"(, "unk_token": "<unk>", "fuse_unk": true)"),
      "json"));
  ASSERT_TRUE(bool(tokenizer)) << llvm::toString(tokenizer.takeError());
  EXPECT_THAT((*tokenizer)->prefixIds(), ::testing::ElementsAre(5));
  EXPECT_TRUE((*tokenizer)->suffixIds().empty());
  EXPECT_EQ((*tokenizer)->specialId("<s>"), 5);
  EXPECT_EQ((*tokenizer)->vocabSize(), 6);
  EXPECT_THAT(encoded(**tokenizer, "abxyc<s>ab", true),
              ::testing::ElementsAre(3, 4, 2, 5, 3));
  EXPECT_THAT(encoded(**tokenizer, "<s>", false), ::testing::ElementsAre(4));
}

//===----------------------------------------------------------------------===//
// Hostile files: tokenizer files come with downloaded models, so a count,
// an id or a pattern in one is checked before it is used.
//===----------------------------------------------------------------------===//

TEST(TokenizerBadInput, TekkenCountsMustFitTheFile) {
  // 2^31 special tokens, none of them in the file: each was made, a name
  // apiece, until memory ran out.
  EXPECT_THAT(jsonErrorOf(tekkenJson(2147483647, 2147483647)),
              HasSubstr("config.default_num_special_tokens: 2147483647"));
  // More ids than the file's tokens and special tokens (mistral-common
  // asserts it), and more special tokens listed than counted.
  EXPECT_THAT(jsonErrorOf(tekkenJson(3, 1000)),
              HasSubstr("config.default_vocab_size: 1000 ids"));
  EXPECT_THAT(jsonErrorOf(tekkenJson(
                  1, 5,
                  R"(, "special_tokens": [{"rank": 0, "token_str": "<s>"}, )"
                  R"({"rank": 1, "token_str": "</s>"}])")),
              HasSubstr("special_tokens: 2 listed"));
}

TEST(TokenizerBadInput, AStripDecoderStripsACharacter) {
  // An empty content always starts a token: each token's decode went
  // round the loop 2^32 times.
  EXPECT_THAT(jsonErrorOf(tokenizerJson(
                  R"(, "decoder": {"type": "Strip", "content": "", )"
                  R"("start": 4294967295, "stop": 0})")),
              HasSubstr("decoder: Strip's content must be one character"));
}

/// The error loading a tokenizer.json whose added_tokens are `tokens`.
std::string addedTokensError(llvm::StringRef tokens) {
  return jsonErrorOf(
      tokenizerJson((", \"added_tokens\": [" + tokens + "]").str()));
}

TEST(TokenizerBadInput, AddedTokenIdsAreTheOnesTokenizersGives) {
  // tokenizers reads a u32 and refuses the rest.
  EXPECT_THAT(addedTokensError(R"({"id": -1, "content": "<s>"})"),
              HasSubstr("added_tokens[0]: '<s>' has id -1, which is no "
                        "token id"));
  EXPECT_THAT(addedTokensError(R"({"id": 4294967296, "content": "<s>"})"),
              HasSubstr("'<s>' has id 4294967296, which is no token id"));
  EXPECT_THAT(addedTokensError(R"({"id": 5.5, "content": "<s>"})"),
              HasSubstr("'<s>' has id 5.5, which is no token id"));
  // It numbers a token the vocabulary lacks itself, after the vocabulary
  // and the tokens added before: a file saying otherwise (an id past the
  // vocabulary, or one given twice) would encode to other ids than it does.
  EXPECT_THAT(addedTokensError(R"({"id": 1000, "content": "<s>"})"),
              HasSubstr("added_tokens[0]: '<s>' has id 1000, but tokenizers "
                        "numbers it 5"));
  EXPECT_THAT(addedTokensError(R"({"id": 5, "content": "<s>"}, )"
                               R"({"id": 5, "content": "<t>"})"),
              HasSubstr("added_tokens[1]: '<t>' has id 5, but tokenizers "
                        "numbers it 6"));
  auto tokenizer = Tokenizer::loadHuggingFace(writeModel(
      tokenizerJson(R"(, "added_tokens": [{"id": 5, "content": "<s>"}, )"
                    R"({"id": 4, "content": "<unk>"}, )"
                    R"({"id": 6, "content": "<t>"}])"),
      "json"));
  ASSERT_TRUE(bool(tokenizer)) << llvm::toString(tokenizer.takeError());
  EXPECT_EQ((*tokenizer)->vocabSize(), 7);
}

TEST(TokenizerBadInput, PostProcessorIdsAreTokens) {
  auto withIds = [](llvm::StringRef ids) {
    return tokenizerJson(
        (R"(, "post_processor": {"type": "TemplateProcessing", "single": [)"
         R"({"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": )"
         R"({"id": "A", "type_id": 0}}], "special_tokens": {"<s>": {"id": )"
         R"("<s>", "ids": [)" +
         ids + R"(], "tokens": ["<s>"]}}})")
            .str());
  };
  EXPECT_THAT(jsonErrorOf(withIds("-1")),
              HasSubstr("post_processor: special token '<s>' has id -1, "
                        "which is no token id"));
  EXPECT_THAT(jsonErrorOf(withIds("4294967297")),
              HasSubstr("'<s>' has id 4294967297, which is no token id"));
  EXPECT_THAT(jsonErrorOf(withIds("99")),
              HasSubstr("post_processor: special token '<s>' has id 99, "
                        "which is no token of the tokenizer"));
}

/// The error finding the chat format of tokenizer_config.json `config`
/// for a tokenizer with added token <s> (id 5).
std::string configError(llvm::StringRef config) {
  auto tokenizer = Tokenizer::loadHuggingFace(writeModel(
      tokenizerJson(R"(, "added_tokens": [{"id": 5, "content": "<s>", )"
                    R"("special": true}])"),
      "json"));
  if (!tokenizer)
    return llvm::toString(tokenizer.takeError());
  llvm::Expected<ChatFormat> format =
      ChatFormat::find(**tokenizer, "tokenizer.json",
                       writeModel(config, "json"), /*modelDir=*/"");
  return format ? "" : llvm::toString(format.takeError());
}

TEST(TokenizerBadInput, TokenizerConfigTokensAreTheTokenizers) {
  EXPECT_EQ(configError(R"({"chat_template": "{{ bos_token }}", )"
                        R"("bos_token": "<s>", "added_tokens_decoder": )"
                        R"({"5": {"content": "<s>", "special": true}}})"),
            "");
  // transformers adds a token the config names and the tokenizer has not
  // added (a new id past the vocabulary, or a token of the vocabulary then
  // recognised whole): Twill's tokenizer would encode its text otherwise.
  EXPECT_THAT(configError(R"({"chat_template": "x", "bos_token": "<zz>"})"),
              HasSubstr("bos_token: '<zz>' is not an added token of the "
                        "tokenizer"));
  EXPECT_THAT(configError(R"({"chat_template": "x", "eos_token": )"
                          R"({"content": "ab"}})"),
              HasSubstr("eos_token: 'ab' is not an added token"));
  EXPECT_THAT(configError(R"({"chat_template": "x", "added_tokens_decoder": )"
                          R"({"7": {"content": "<t>"}}})"),
              HasSubstr("added_tokens_decoder: '<t>' is not an added token"));
  // Its ids: a token id, and the tokenizer's.
  for (llvm::StringRef id : {"-1", "4294967296", "x"})
    EXPECT_THAT(configError((R"({"chat_template": "x", )"
                             R"("added_tokens_decoder": {")" +
                             id + R"(": {"content": "<s>"}}})")
                                .str()),
                HasSubstr(("added_tokens_decoder: '<s>' has id '" + id +
                           "', which is no token id")
                              .str()));
  EXPECT_THAT(configError(R"({"chat_template": "x", "added_tokens_decoder": )"
                          R"({"9": {"content": "<s>"}}})"),
              HasSubstr("added_tokens_decoder: '<s>' has id 9, and 5 in the "
                        "tokenizer"));
}

/// A tokenizer.json of tokenizerJson's tokens whose pre-tokenizer splits by
/// `regex` with `behavior`.
std::unique_ptr<Tokenizer> splitBy(llvm::StringRef regex,
                                   llvm::StringRef behavior) {
  auto tokenizer = Tokenizer::loadHuggingFace(writeModel(
      tokenizerJson((R"(, "pre_tokenizer": {"type": "Split", "pattern": )"
                     R"({"Regex": ")" +
                     regex + R"("}, "behavior": ")" + behavior + R"("})")
                        .str()),
      "json"));
  EXPECT_TRUE(bool(tokenizer)) << llvm::toString(tokenizer.takeError());
  return tokenizer ? std::move(*tokenizer) : nullptr;
}

TEST(TokenizerBadInput, RegexMatchErrorsAreErrors) {
  // Backtracking past PCRE2's match limit (Oniguruma's retry limit stops
  // tokenizers too): the split ended there and the rest was one piece.
  std::unique_ptr<Tokenizer> catastrophic = splitBy("(x+x+)+[yz]", "Isolated");
  ASSERT_TRUE(catastrophic);
  llvm::Expected<std::vector<int32_t>> ids =
      catastrophic->encode(std::string(30, 'x') + "ab", false);
  ASSERT_FALSE(bool(ids));
  EXPECT_THAT(llvm::toString(ids.takeError()),
              HasSubstr("regex '(x+x+)+[yz]' gives up matching from byte 0 "
                        "of a 32-byte text: match limit exceeded"));
  // A normalizer's Replace left the text after it as it was.
  auto replacing = Tokenizer::loadHuggingFace(writeModel(
      tokenizerJson(R"(, "normalizer": {"type": "Replace", "pattern": )"
                    R"({"Regex": "(x+x+)+[yz]"}, "content": "a"})"),
      "json"));
  ASSERT_TRUE(bool(replacing)) << llvm::toString(replacing.takeError());
  EXPECT_THAT(
      llvm::toString(
          (*replacing)->encode(std::string(30, 'x'), false).takeError()),
      HasSubstr("match limit exceeded"));
}

TEST(TokenizerBadInput, RegexesMatchLongPieces) {
  // A group repeated over 40000 characters outgrows the JIT's stack; the
  // match was dropped (tokenizers removes it, leaving "ab").
  std::unique_ptr<Tokenizer> removed = splitBy("(?:a|b)+c", "Removed");
  ASSERT_TRUE(removed);
  std::string text;
  for (int i = 0; i < 20000; ++i)
    text += "ab";
  EXPECT_THAT(encoded(*removed, text + "cab", false),
              ::testing::ElementsAre(3));
}

} // namespace
