//===- Bpe.cpp - byte-pair encoding of one piece of text ------------------===//

#include "runtime/data/tokenizer/Bpe.h"

#include "runtime/data/tokenizer/Unicode.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <queue>

using namespace twill;

static llvm::Error bpeError(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

llvm::Error BpeModel::addToken(llvm::StringRef text, int32_t id) {
  if (id < 0)
    return bpeError(llvm::formatv("token '{0}' has a negative id", text));
  if (id >= kMaxTokenIds)
    return bpeError(llvm::formatv("token '{0}' has id {1}, past the {2} ids "
                                  "a vocabulary may have",
                                  text, id, kMaxTokenIds));
  if (size_t(id) >= tokens.size())
    tokens.resize(id + 1);
  if (!tokens[id].empty())
    return bpeError(llvm::formatv("two tokens have id {0} ('{1}' and '{2}')",
                                  id, tokens[id], text));
  if (text.empty() || !vocab.try_emplace(text, id).second)
    return bpeError(llvm::formatv("token '{0}' (id {1}) is empty or named "
                                  "twice",
                                  text, id));
  tokens[id] = text.str();
  // Byte fallback's tokens, "<0x0A>": two upper-case hex digits.
  unsigned byte;
  if (text.size() == 6 && text.starts_with("<0x") && text.ends_with(">") &&
      llvm::all_of(
          text.substr(3, 2),
          [](char c) { return llvm::isDigit(c) || (c >= 'A' && c <= 'F'); }) &&
      !text.substr(3, 2).getAsInteger(16, byte))
    byteIds[byte] = id;
  return llvm::Error::success();
}

llvm::Error BpeModel::addMerge(llvm::StringRef left, llvm::StringRef right,
                               int32_t rank) {
  int32_t a = idOf(left), b = idOf(right);
  std::string joined = (left + right).str();
  int32_t result = idOf(joined);
  for (auto [text, id] : {std::pair{left, a}, std::pair{right, b},
                          std::pair{llvm::StringRef(joined), result}})
    if (id < 0)
      return bpeError(llvm::formatv("merge {0} ('{1}' + '{2}') names '{3}', "
                                    "which is not in the vocabulary",
                                    rank, left, right, text));
  // A pair merged twice keeps its first (highest-priority) rank, as
  // tokenizers' map does.
  merges.try_emplace(pairKey(a, b), Merge{rank, result});
  return llvm::Error::success();
}

void BpeModel::mergeByIds() {
  for (auto [id, text] : llvm::enumerate(tokens))
    for (size_t cut = unicode::charLength(text, 0); cut < text.size();
         cut += unicode::charLength(text, cut)) {
      int32_t left = idOf(llvm::StringRef(text).take_front(cut));
      int32_t right = idOf(llvm::StringRef(text).drop_front(cut));
      if (left >= 0 && right >= 0)
        merges.try_emplace(pairKey(left, right),
                           Merge{int32_t(id), int32_t(id)});
    }
}

void BpeModel::startingTokens(llvm::StringRef piece,
                              std::vector<int32_t> &ids) const {
  bool lastUnknown = false;
  for (size_t at = 0; at < piece.size();) {
    unsigned length = unicode::charLength(piece, at);
    llvm::StringRef character = piece.substr(at, length);
    at += length;
    if (int32_t id = idOf(character); id >= 0) {
      ids.push_back(id);
      lastUnknown = false;
      continue;
    }
    if (byteFallback) {
      if (llvm::all_of(character, [&](char byte) {
            return byteIds[(unsigned char)byte] >= 0;
          })) {
        for (char byte : character)
          ids.push_back(byteIds[(unsigned char)byte]);
        lastUnknown = false;
        continue;
      }
    }
    if (unknown < 0)
      continue;
    if (!(fuseUnknown && lastUnknown))
      ids.push_back(unknown);
    lastUnknown = true;
  }
}

/// The most pieces the cache holds, and the longest (bytes) it keeps.
static constexpr size_t kCacheEntries = 1 << 16, kCachedBytes = 64;

void BpeModel::encode(llvm::StringRef piece, std::vector<int32_t> &ids) const {
  if (piece.empty())
    return;
  if (ignoreMerges)
    if (int32_t id = idOf(piece); id >= 0) {
      ids.push_back(id);
      return;
    }
  if (piece.size() > kCachedBytes) {
    merge(piece, ids);
    return;
  }
  std::lock_guard<std::mutex> lock(cache->lock);
  auto cached = cache->ids.find(piece);
  if (cached != cache->ids.end()) {
    ids.insert(ids.end(), cached->second.begin(), cached->second.end());
    return;
  }
  size_t first = ids.size();
  merge(piece, ids);
  if (cache->ids.size() >= kCacheEntries)
    cache->ids.clear();
  cache->ids[piece].assign(ids.begin() + first, ids.end());
}

void BpeModel::merge(llvm::StringRef piece, std::vector<int32_t> &ids) const {
  std::vector<int32_t> symbols;
  startingTokens(piece, symbols);
  if (symbols.size() < 2) {
    ids.insert(ids.end(), symbols.begin(), symbols.end());
    return;
  }
  // tokenizers' merge: every adjacent pair that merges in a queue by (rank,
  // position); a merged symbol keeps its left part's position, so a pair
  // taken off the queue is stale if either part has merged since.
  int n = int(symbols.size());
  std::vector<int> previous(n), next(n);
  for (int i = 0; i < n; ++i) {
    previous[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int position;
    int32_t result;
    bool operator>(const Candidate &other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int left) {
    int right = next[left];
    if (right < 0)
      return;
    auto it = merges.find(pairKey(symbols[left], symbols[right]));
    if (it != merges.end())
      queue.push({it->second.rank, left, it->second.result});
  };
  for (int i = 0; i + 1 < n; ++i)
    consider(i);
  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    int left = top.position, right = next[left];
    if (symbols[left] < 0 || right < 0)
      continue;
    auto it = merges.find(pairKey(symbols[left], symbols[right]));
    if (it == merges.end() || it->second.result != top.result)
      continue;
    symbols[left] = top.result;
    symbols[right] = -1;
    next[left] = next[right];
    if (next[left] >= 0)
      previous[next[left]] = left;
    if (previous[left] >= 0)
      consider(previous[left]);
    consider(left);
  }
  for (int32_t symbol : symbols)
    if (symbol >= 0)
      ids.push_back(symbol);
}
