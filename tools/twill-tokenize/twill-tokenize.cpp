//===- twill-tokenize.cpp - see exactly what the model is fed -------------===//
//
//   twill-tokenize --tokenizer tokenizer.json < text         ids, one line
//   twill-tokenize --tokenizer tokenizer.model --chat < messages.json
//   twill-tokenize --tokenizer tokenizer.json --decode < ids
//   twill-tokenize --tokenizer tokenizer.json --lines < texts.jsonl
//   twill-tokenize --template tokenizer_config.json < variables.json
//   twill-tokenize --model DIR --data chat.jsonl [--format alpaca] > rows
//
// The tokenizer is a Hugging Face tokenizer.json or Llama 3's tiktoken
// tokenizer.model. Text is encoded with special tokens recognised; --chat
// reads a JSON list of {"role", "content"} messages and applies Llama 3's
// chat format; --lines encodes (or with --decode decodes) many at once.
// --data writes each example of an alpaca or chat JSONL file as twill-train
// reads it (the model's chat template, the turns it trains on) as a line
// of pre-tokenized JSONL: {"input_ids": [...], "labels": [...]}.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/PreferenceDataset.h"
#include "runtime/data/TextDataset.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/data/template/ChatTemplate.h"
#include "support/Json.h"
#include "support/ToolOutput.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;
using namespace twill;

static cl::OptionCategory options("twill-tokenize options");

static cl::opt<std::string>
    tokenizerPath("tokenizer",
                  cl::desc("a tokenizer.json, or Llama 3's "
                           "original/tokenizer.model"),
                  cl::value_desc("path"), cl::cat(options));
static cl::opt<bool> chat("chat",
                          cl::desc("Read JSON chat messages and "
                                   "apply Llama 3's chat format"),
                          cl::cat(options));
static cl::opt<bool>
    generationPrompt("generation-prompt",
                     cl::desc("With --chat: end with an assistant header"),
                     cl::cat(options));
static cl::opt<bool> decode("decode", cl::desc("Read ids and print their text"),
                            cl::cat(options));
static cl::opt<std::string> chatTemplate(
    "template",
    cl::desc("Render this chat template (tokenizer_config.json or a .jinja "
             "file) with the JSON object of variables read (messages, "
             "bos_token, add_generation_prompt, ...) and print its text; "
             "with --data, format the data with it"),
    cl::value_desc("path"), cl::cat(options));
static cl::opt<bool>
    noSpecial("no-special",
              cl::desc("Encode special tokens written in the text as text"),
              cl::cat(options));
static cl::opt<bool>
    lines("lines",
          cl::desc("Read one JSON string per line and write each one's ids "
                   "on a line; with --decode, read a JSON list of ids per "
                   "line and write each one's text as a JSON string"),
          cl::cat(options));

static cl::opt<std::string>
    dataPath("data",
             cl::desc("Write the examples of this alpaca or chat JSONL file "
                      "as twill-train reads them, a pre-tokenized JSONL line "
                      "each"),
             cl::value_desc("path"), cl::cat(options));
static cl::opt<std::string>
    modelDir("model",
             cl::desc("With --data: the model folder whose tokenizer and "
                      "chat template to use"),
             cl::value_desc("dir"), cl::cat(options));
static cl::opt<std::string> dataFormat(
    "format",
    cl::desc("With --data: alpaca, chat (default) or preference (DPO's "
             "pairs, written as {\"prompt_ids\", \"chosen_ids\", "
             "\"rejected_ids\"} lines)"),
    cl::init("chat"), cl::cat(options));
static cl::opt<int64_t> maxLength(
    "max-length",
    cl::desc("With --format preference: drop the pairs whose prompt alone "
             "fills this many tokens, as TRL's DPOTrainer does (0: none)"),
    cl::init(0), cl::cat(options));
static cl::opt<bool>
    trainOnInput("train-on-input",
                 cl::desc("With --data: train on every token, not only the "
                          "assistant's turns"),
                 cl::cat(options));

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "twill-tokenize") << message << "\n";
  return 1;
}

static llvm::Expected<std::vector<ChatMessage>>
parseMessages(llvm::StringRef text) {
  llvm::Expected<llvm::json::Value> parsed = parseJson(text, "the messages");
  if (!parsed)
    return parsed.takeError();
  std::vector<ChatMessage> messages;
  const llvm::json::Array *array = parsed->getAsArray();
  for (size_t i = 0; array && i < array->size(); ++i) {
    const llvm::json::Object *message = (*array)[i].getAsObject();
    auto role = message ? message->getString("role") : std::nullopt;
    auto content = message ? message->getString("content") : std::nullopt;
    if (!role || !content)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "message %zu needs a \"role\" and a \"content\" string", i);
    messages.push_back({role->str(), content->str()});
  }
  if (!array)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "expected a JSON list of messages");
  return messages;
}

/// --lines: a JSON value per line in, a line per value out.
static int eachLine(const Tokenizer &tokenizer, llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef> inputs;
  text.split(inputs, '\n', -1, /*KeepEmpty=*/false);
  for (auto [index, line] : llvm::enumerate(inputs)) {
    std::string where = "line " + std::to_string(index + 1);
    llvm::Expected<llvm::json::Value> value = parseJson(line, where);
    if (!value)
      return fail(llvm::toString(value.takeError()));
    if (!decode) {
      std::optional<llvm::StringRef> string = value->getAsString();
      if (!string)
        return fail(where + ": expected a JSON string");
      llvm::Expected<std::vector<int32_t>> ids =
          tokenizer.encode(*string, !noSpecial);
      if (!ids)
        return fail(where + ": " + llvm::toString(ids.takeError()));
      for (size_t i = 0; i < ids->size(); ++i)
        llvm::outs() << (i ? " " : "") << (*ids)[i];
      llvm::outs() << "\n";
      continue;
    }
    const llvm::json::Array *array = value->getAsArray();
    std::vector<int32_t> ids;
    for (size_t i = 0; array && i < array->size(); ++i) {
      std::optional<int64_t> id = (*array)[i].getAsInteger();
      if (!id)
        return fail(where + ": expected a JSON list of token ids");
      ids.push_back(int32_t(*id));
    }
    if (!array)
      return fail(where + ": expected a JSON list of token ids");
    llvm::Expected<std::string> decoded = tokenizer.decode(ids);
    if (!decoded)
      return fail(where + ": " + llvm::toString(decoded.takeError()));
    llvm::outs() << llvm::json::Value(llvm::json::fixUTF8(*decoded)) << "\n";
  }
  return 0;
}

/// --template: the template's text for the variables on standard input.
static int renderTemplate() {
  llvm::Expected<ChatTemplate> parsed = ChatTemplate::load(chatTemplate);
  if (!parsed)
    return fail(llvm::toString(parsed.takeError()));
  auto input = llvm::MemoryBuffer::getSTDIN();
  if (!input)
    return fail("cannot read standard input");
  llvm::Expected<std::string> text = parsed->render((*input)->getBuffer());
  if (!text)
    return fail(llvm::toString(text.takeError()));
  llvm::outs() << *text;
  return 0;
}

/// --data with --format preference: each pair's prompt, chosen and
/// rejected ids, a line each; how many were dropped to stderr.
static int writePairs(const Tokenizer &tokenizer, const ChatFormat &format) {
  llvm::Expected<std::vector<PreferencePair>> pairs =
      readPreferenceJsonl(dataPath, tokenizer, format);
  if (!pairs)
    return fail(llvm::toString(pairs.takeError()));
  if (maxLength > 0)
    llvm::errs() << "dropped " << dropFullyTruncated(*pairs, maxLength)
                 << " pairs whose prompt fills --max-length\n";
  for (const PreferencePair &pair : *pairs) {
    llvm::json::OStream out(llvm::outs());
    out.object([&] {
      for (auto [key, ids] : {std::pair("prompt_ids", &pair.prompt),
                              std::pair("chosen_ids", &pair.chosen),
                              std::pair("rejected_ids", &pair.rejected)})
        out.attributeArray(key, [&] {
          for (int32_t id : *ids)
            out.value(id);
        });
    });
    llvm::outs() << "\n";
  }
  return 0;
}

/// --data: the file's examples as pre-tokenized JSONL.
static int writeExamples() {
  if (dataFormat != "alpaca" && dataFormat != "chat" &&
      dataFormat != "preference")
    return fail("--format must be alpaca, chat or preference, got '" +
                dataFormat + "'");
  std::string path = tokenizerPath;
  if (path.empty()) {
    if (modelDir.empty())
      return fail("--data needs --model (or --tokenizer)");
    llvm::Expected<std::string> found = Tokenizer::findInModel(modelDir);
    if (!found)
      return fail(modelDir +
                  " has no tokenizer: " + llvm::toString(found.takeError()));
    path = *found;
  }
  llvm::Expected<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::load(path);
  if (!tokenizer)
    return fail(llvm::toString(tokenizer.takeError()));
  llvm::Expected<ChatFormat> format =
      ChatFormat::find(**tokenizer, path, chatTemplate, modelDir);
  if (!format)
    return fail(llvm::toString(format.takeError()));
  if (dataFormat == "preference")
    return writePairs(**tokenizer, *format);
  llvm::Expected<std::vector<Example>> examples =
      dataFormat == "alpaca" ? readAlpacaJsonl(dataPath, *format, trainOnInput)
                             : readChatJsonl(dataPath, *format, trainOnInput);
  if (!examples)
    return fail(llvm::toString(examples.takeError()));
  for (const Example &example : *examples) {
    llvm::json::OStream out(llvm::outs());
    out.object([&] {
      out.attributeArray("input_ids", [&] {
        for (int32_t id : example.inputIds)
          out.value(id);
      });
      out.attributeArray("labels", [&] {
        for (int32_t label : example.labels)
          out.value(label);
      });
    });
    llvm::outs() << "\n";
  }
  return 0;
}

int main(int argc, char **argv) {
  twill::checkStandardOutputAtExit("twill-tokenize");
  llvm::InitLLVM init(argc, argv);
  // --help lists these, not the LLVM internals linked in.
  cl::HideUnrelatedOptions(options);
  cl::ParseCommandLineOptions(argc, argv,
                              "Hugging Face and Llama 3 tokenizers\n");
  if (!dataPath.empty())
    return writeExamples();
  if (!chatTemplate.empty())
    return renderTemplate();
  if (tokenizerPath.empty())
    return fail("--tokenizer is required (or --template)");
  llvm::Expected<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::load(tokenizerPath);
  if (!tokenizer)
    return fail(llvm::toString(tokenizer.takeError()));
  auto input = llvm::MemoryBuffer::getSTDIN();
  if (!input)
    return fail("cannot read standard input");
  llvm::StringRef text = (*input)->getBuffer();

  if (lines)
    return eachLine(**tokenizer, text);
  if (decode) {
    std::vector<int32_t> ids;
    llvm::SmallVector<llvm::StringRef> words;
    text.split(words, ' ', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef word : words) {
      int32_t id;
      if (word.trim().getAsInteger(10, id))
        return fail("'" + word.trim() + "' is not a token id");
      ids.push_back(id);
    }
    llvm::Expected<std::string> decoded = (*tokenizer)->decode(ids);
    if (!decoded)
      return fail(llvm::toString(decoded.takeError()));
    llvm::outs() << *decoded;
    return 0;
  }

  llvm::Expected<std::vector<int32_t>> ids = std::vector<int32_t>();
  if (chat) {
    llvm::Expected<std::vector<ChatMessage>> messages = parseMessages(text);
    if (!messages)
      return fail(llvm::toString(messages.takeError()));
    ids = (*tokenizer)->encodeChat(*messages, generationPrompt);
  } else {
    ids = (*tokenizer)->encode(text, !noSpecial);
  }
  if (!ids)
    return fail(llvm::toString(ids.takeError()));
  for (size_t i = 0; i < ids->size(); ++i)
    llvm::outs() << (i ? " " : "") << (*ids)[i];
  llvm::outs() << "\n";
  return 0;
}
