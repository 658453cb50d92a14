//===- PreferenceDataset.cpp - preference pairs for DPO -------------------===//

#include "runtime/data/PreferenceDataset.h"

#include "runtime/data/JsonLines.h"
#include "runtime/data/tokenizer/Unicode.h"

#include <limits>

using namespace twill;
namespace json = llvm::json;

static llvm::Error lineError(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

namespace {
/// One side of a pair as written: a string, or a conversation (its
/// messages' JSON values, compared whole as TRL compares the dicts).
struct Side {
  bool conversation = false;
  std::string text;
  std::vector<json::Value> messages;
};

/// Field `key` of `line` as a Side; none where the line has no such key.
llvm::Expected<std::optional<Side>> sideOf(const json::Object &line,
                                           llvm::StringRef key) {
  const json::Value *value = line.get(key);
  if (!value)
    return std::nullopt;
  Side side;
  if (std::optional<llvm::StringRef> text = value->getAsString()) {
    side.text = text->str();
    return side;
  }
  const json::Array *list = value->getAsArray();
  if (!list)
    return lineError("'" + key +
                     "' must be a string or a list of {\"role\", "
                     "\"content\"} messages");
  side.conversation = true;
  for (const json::Value &message : *list) {
    const json::Object *object = message.getAsObject();
    if (!object || !object->getString("role") || !object->getString("content"))
      return lineError("each message of '" + key +
                       "' must have a \"role\" and a \"content\" string");
    side.messages.push_back(message);
  }
  return side;
}

/// The byte offsets where each code point of `text` starts: TRL compares
/// strings by characters.
std::vector<size_t> characterStarts(llvm::StringRef text) {
  std::vector<size_t> starts;
  for (size_t at = 0; at < text.size(); at += unicode::charLength(text, at))
    starts.push_back(at);
  return starts;
}

/// TRL's extract_prompt: chosen and rejected up to where they first differ
/// (less a space before it) are the prompt. Where neither differs from the
/// other before one ends there is no prompt to find: refused.
llvm::Expected<Side> extractPrompt(Side &chosen, Side &rejected) {
  Side prompt;
  prompt.conversation = chosen.conversation;
  if (chosen.conversation) {
    size_t common = 0;
    while (common < chosen.messages.size() &&
           common < rejected.messages.size() &&
           chosen.messages[common] == rejected.messages[common])
      ++common;
    if (common == 0 ||
        common == std::min(chosen.messages.size(), rejected.messages.size()))
      return lineError("without a 'prompt', chosen and rejected must start "
                       "with the same messages and then differ");
    prompt.messages.assign(chosen.messages.begin(),
                           chosen.messages.begin() + common);
    chosen.messages.erase(chosen.messages.begin(),
                          chosen.messages.begin() + common);
    rejected.messages.erase(rejected.messages.begin(),
                            rejected.messages.begin() + common);
    return prompt;
  }
  std::vector<size_t> a = characterStarts(chosen.text),
                      b = characterStarts(rejected.text);
  size_t index = 0;
  auto character = [](const std::string &text, const std::vector<size_t> &at,
                      size_t i) {
    size_t end = i + 1 < at.size() ? at[i + 1] : text.size();
    return llvm::StringRef(text).slice(at[i], end);
  };
  while (index < a.size() && index < b.size() &&
         character(chosen.text, a, index) == character(rejected.text, b, index))
    ++index;
  if (index == 0 || index == std::min(a.size(), b.size()))
    return lineError("without a 'prompt', chosen and rejected must start "
                     "with the same text and then differ");
  if (character(chosen.text, a, index - 1) == " ")
    --index;
  prompt.text = chosen.text.substr(0, a[index]);
  chosen.text.erase(0, a[index]);
  rejected.text.erase(0, b[index]);
  return prompt;
}

std::vector<ChatMessage> messagesOf(llvm::ArrayRef<json::Value> values) {
  std::vector<ChatMessage> messages;
  for (const json::Value &value : values) {
    const json::Object &object = *value.getAsObject();
    messages.push_back(
        {object.getString("role")->str(), object.getString("content")->str()});
  }
  return messages;
}

size_t commonPrefix(llvm::ArrayRef<int32_t> a, llvm::ArrayRef<int32_t> b) {
  size_t length = 0;
  while (length < a.size() && length < b.size() && a[length] == b[length])
    ++length;
  return length;
}
} // namespace

llvm::Expected<std::vector<PreferencePair>>
twill::readPreferenceJsonl(llvm::StringRef path, const Tokenizer &tokenizer,
                           const ChatFormat &format) {
  std::vector<PreferencePair> pairs;
  // A string as the tokenizer's __call__ encodes it: special tokens added.
  auto encodeText = [&](llvm::StringRef text,
                        std::vector<int32_t> &ids) -> llvm::Error {
    llvm::Expected<std::vector<int32_t>> body =
        tokenizer.encode(text, /*allowSpecial=*/true);
    if (!body)
      return body.takeError();
    ids.assign(tokenizer.prefixIds().begin(), tokenizer.prefixIds().end());
    ids.insert(ids.end(), body->begin(), body->end());
    ids.insert(ids.end(), tokenizer.suffixIds().begin(),
               tokenizer.suffixIds().end());
    return llvm::Error::success();
  };
  llvm::Error error = readJsonLines(
      path,
      [&](const json::Object &line, llvm::StringRef text,
          int64_t lineNumber) -> llvm::Error {
        llvm::Expected<std::optional<Side>> chosen = sideOf(line, "chosen");
        if (!chosen)
          return chosen.takeError();
        llvm::Expected<std::optional<Side>> rejected = sideOf(line, "rejected");
        if (!rejected)
          return rejected.takeError();
        llvm::Expected<std::optional<Side>> prompt = sideOf(line, "prompt");
        if (!prompt)
          return prompt.takeError();
        if (!*chosen || !*rejected)
          return lineError(llvm::Twine("no '") +
                           (*chosen ? "rejected" : "chosen") +
                           "': a preference line is {\"prompt\", \"chosen\", "
                           "\"rejected\"} (the prompt may be left out)");
        Side &c = **chosen, &r = **rejected;
        if (c.conversation != r.conversation ||
            (*prompt && (*prompt)->conversation != c.conversation))
          return lineError("'prompt', 'chosen' and 'rejected' must all be "
                           "strings or all conversations");
        if (!*prompt) {
          llvm::Expected<Side> found = extractPrompt(c, r);
          if (!found)
            return found.takeError();
          *prompt = std::move(*found);
        }
        const Side &p = **prompt;
        PreferencePair pair;
        pair.line = lineNumber;
        std::vector<int32_t> promptIds, withChosen, withRejected;
        if (c.conversation) {
          // The line's tools go to the template, as TRL hands them to it:
          // a list as written, or a string of one (TRL parses it).
          std::optional<llvm::StringRef> encoded = line.getString("tools");
          llvm::StringRef tools =
              encoded ? *encoded : jsonMemberText(text, "tools");
          if (line.get("tools") && tools.empty())
            return lineError("'tools' cannot be read as written (a key with "
                             "escapes in it?)");
          // The prompt alone with the generation prompt, and then with
          // each completion.
          auto idsWith = [&](const Side *completion,
                             std::vector<int32_t> &ids) -> llvm::Error {
            std::vector<ChatMessage> messages = messagesOf(p.messages);
            if (completion) {
              std::vector<ChatMessage> more = messagesOf(completion->messages);
              messages.insert(messages.end(), more.begin(), more.end());
            }
            llvm::Expected<std::vector<int32_t>> found =
                format.templateIds(messages, !completion, tools);
            if (!found)
              return found.takeError();
            ids = std::move(*found);
            return llvm::Error::success();
          };
          if (llvm::Error error = idsWith(nullptr, promptIds))
            return error;
          if (llvm::Error error = idsWith(&c, withChosen))
            return error;
          if (llvm::Error error = idsWith(&r, withRejected))
            return error;
        } else {
          std::optional<llvm::StringRef> eos = format.specialToken("eos_token");
          if (!eos)
            return lineError("TRL ends each completion with the tokenizer's "
                             "eos_token, which its tokenizer_config.json does "
                             "not give");
          auto ended = [&](const std::string &text) {
            return llvm::StringRef(text).ends_with(*eos) ? text
                                                         : text + eos->str();
          };
          if (llvm::Error error = encodeText(p.text, promptIds))
            return error;
          if (llvm::Error error =
                  encodeText(p.text + ended(c.text), withChosen))
            return error;
          if (llvm::Error error =
                  encodeText(p.text + ended(r.text), withRejected))
            return error;
        }
        size_t shared = std::min(commonPrefix(promptIds, withChosen),
                                 commonPrefix(promptIds, withRejected));
        pair.prompt.assign(promptIds.begin(), promptIds.begin() + shared);
        pair.chosen.assign(withChosen.begin() + shared, withChosen.end());
        pair.rejected.assign(withRejected.begin() + shared, withRejected.end());
        pairs.push_back(std::move(pair));
        return llvm::Error::success();
      });
  if (error)
    return std::move(error);
  return pairs;
}

int64_t twill::dropFullyTruncated(std::vector<PreferencePair> &pairs,
                                  int64_t maxLength) {
  size_t before = pairs.size();
  llvm::erase_if(pairs, [&](const PreferencePair &pair) {
    return int64_t(pair.prompt.size()) >= maxLength;
  });
  return int64_t(before - pairs.size());
}

llvm::Expected<std::optional<std::vector<PreferencePair>>>
twill::readTokenizedPairs(llvm::StringRef path) {
  std::vector<PreferencePair> pairs;
  // The first line decides: text pairs stop the reading there (the error
  // is no error), for readPreferenceJsonl to read them.
  bool text = false;
  llvm::Error error = readJsonLines(
      path,
      [&](const json::Object &line, llvm::StringRef,
          int64_t lineNumber) -> llvm::Error {
        if (pairs.empty() && !line.get("chosen_ids")) {
          text = true;
          return lineError("text pairs");
        }
        PreferencePair pair;
        pair.line = lineNumber;
        for (auto [key, ids] : {std::pair("prompt_ids", &pair.prompt),
                                std::pair("chosen_ids", &pair.chosen),
                                std::pair("rejected_ids", &pair.rejected)}) {
          const json::Array *array = line.getArray(key);
          if (!array)
            return lineError(llvm::Twine("no '") + key +
                             "' array: a tokenized pair is {\"prompt_ids\", "
                             "\"chosen_ids\", \"rejected_ids\"}");
          for (const json::Value &value : *array) {
            std::optional<int64_t> id = value.getAsInteger();
            if (!id || *id < 0 || *id > std::numeric_limits<int32_t>::max())
              return lineError(llvm::Twine("'") + key +
                               "' must hold only token ids (integers from 0)");
            ids->push_back(int32_t(*id));
          }
        }
        if (pair.chosen.empty() || pair.rejected.empty())
          return lineError("a tokenized pair needs a token in each "
                           "completion");
        pairs.push_back(std::move(pair));
        return llvm::Error::success();
      });
  if (text) {
    llvm::consumeError(std::move(error));
    return std::nullopt;
  }
  if (error)
    return std::move(error);
  return std::move(pairs);
}

llvm::Error twill::checkPairVocabulary(llvm::ArrayRef<PreferencePair> pairs,
                                       llvm::StringRef path, int64_t vocab) {
  for (const PreferencePair &pair : pairs)
    for (auto [what, ids] : {std::pair("prompt token id", &pair.prompt),
                             std::pair("chosen token id", &pair.chosen),
                             std::pair("rejected token id", &pair.rejected)})
      if (llvm::Error error = checkIds(*ids, path, pair.line, what, vocab,
                                       /*ignorable=*/false))
        return error;
  return llvm::Error::success();
}

std::vector<Row> twill::pairRows(llvm::ArrayRef<PreferencePair> pairs,
                                 int64_t seqLen) {
  std::vector<Row> rows;
  rows.reserve(pairs.size());
  for (const PreferencePair &pair : pairs) {
    Row row = paddingRow(2 * seqLen);
    for (auto [segment, completion] :
         {std::pair(0, &pair.chosen), std::pair(1, &pair.rejected)}) {
      std::vector<int32_t> sequence = pair.prompt;
      sequence.insert(sequence.end(), completion->begin(), completion->end());
      sequence.resize(std::min<int64_t>(sequence.size(), seqLen));
      int64_t first = segment * seqLen;
      for (int64_t i = 0; i < seqLen; ++i) {
        row.positions[first + i] = int32_t(i);
        row.segments[first + i] = segment;
      }
      for (int64_t i = 0; i < int64_t(sequence.size()); ++i) {
        row.tokens[first + i] = sequence[i];
        row.attentionMask[first + i] = 1;
        // Position i predicts token i + 1: a completion token is trained.
        if (i + 1 < int64_t(sequence.size()) &&
            i + 1 >= int64_t(pair.prompt.size()))
          row.labels[first + i] = sequence[i + 1];
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}
