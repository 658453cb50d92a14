//===- twill-tokenize.cpp - see exactly what the model is fed -------------===//
//
//   twill-tokenize --tokenizer tokenizer.model < text        ids, one line
//   twill-tokenize --tokenizer tokenizer.model --chat < messages.json
//   twill-tokenize --tokenizer tokenizer.model --decode < ids
//
// Text is encoded with special tokens recognised; --chat reads a JSON list
// of {"role", "content"} messages and applies Llama 3's chat format.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/Tokenizer.h"
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
    tokenizerPath("tokenizer", cl::Required,
                  cl::desc("Llama 3 original/tokenizer.model"),
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

int main(int argc, char **argv) {
  twill::checkStandardOutputAtExit("twill-tokenize");
  llvm::InitLLVM init(argc, argv);
  // --help lists these, not the LLVM internals linked in.
  cl::HideUnrelatedOptions(options);
  cl::ParseCommandLineOptions(argc, argv, "Llama 3 tokenizer\n");
  llvm::Expected<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::load(tokenizerPath);
  if (!tokenizer)
    return fail(llvm::toString(tokenizer.takeError()));
  auto input = llvm::MemoryBuffer::getSTDIN();
  if (!input)
    return fail("cannot read standard input");
  llvm::StringRef text = (*input)->getBuffer();

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

  std::vector<int32_t> ids;
  if (chat) {
    llvm::Expected<std::vector<ChatMessage>> messages = parseMessages(text);
    if (!messages)
      return fail(llvm::toString(messages.takeError()));
    ids = (*tokenizer)->encodeChat(*messages, generationPrompt);
  } else {
    ids = (*tokenizer)->encode(text, /*allowSpecial=*/true);
  }
  for (size_t i = 0; i < ids.size(); ++i)
    llvm::outs() << (i ? " " : "") << ids[i];
  llvm::outs() << "\n";
  return 0;
}
