// structgen._core.ConfigIndex: the configuration engine behind structgen.index.token_index.TokenIndex.
//
// A configuration is the set of parser stacks possible after the text so far (stack = linked
// frames (rule, state, parent stack)); configurations are interned as small integers and
// determinised lazily: each one's byte row (256 successor configurations) is computed on first
// use, and its allowed-token bitmask is one walk over the vocabulary trie through those rows.
//
// Why native: the first mask of a configuration walks every token prefix the grammar allows,
// and most configurations met on that walk are new, so their rows (closure over calls and
// returns, interning) are computed during it. Computing them here, inside the walk, keeps the
// whole first-visit mask in one native call with the GIL released.
//
// Threads: every table only grows and never changes an answer once given. Mutations happen
// under one (recursive) mutex. The walk reads rows without the lock: a configuration's row
// slot and its mask pointer are atomics in chunked tables whose chunks never move, published
// (release) only after the row or mask behind them is complete. So several threads compute
// masks of one index at once, meeting only where one of them computes a missing row.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "fa.hpp"
#include "lazy_gil.hpp"
#include "index_view.hpp"
#include "scratch.hpp"
#include "walk_share.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <queue>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <tuple>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

using u8 = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;
using i32 = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using i64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using b8 = py::array_t<bool, py::array::c_style | py::array::forcecast>;
using u32 = py::array_t<uint32_t, py::array::c_style | py::array::forcecast>;
using structgen::StoredMask;

constexpr int32_t kDead = 0;                      // token_index.DEAD
constexpr int64_t kUnreachable = int64_t(1) << 60;  // automaton.UNREACHABLE
constexpr int32_t kNone = -1;                     // "no single target" (Python's None)
constexpr int32_t kNoChars = -2;                  // no token holds a character from U+0080 up
constexpr int kPruneDepth = 8;                    // counters.prune_subsumed: frames looked through
constexpr int kMinLoopingFirstBytes = 16;         // fewer: the per-byte bookkeeping costs more than the walk saves
constexpr int kMaxSplitFrames = 4096;             // at most: a configuration's simple frames walked one by one (frames_walk)
constexpr int kMinChainBytes = 16;                // at least: the bytes of one class chain_class_walk's chain takes
constexpr int kChainRounds = 2;                   // at most: chain_class_walk's searches (bytes dropped from L in between)
constexpr int kMaxChainStates = 4;                // at most: the states of one level of chain_class_walk's search
constexpr int64_t kMaxChainSteps = 1 << 13;       // at most: its rows' plain bytes read, over its levels
constexpr int kMinSplitFrames = 4;                // at least: frames_walk's frames beside other stacks
constexpr int kSplitReleaseFrames = 16;           // from: frames_walk releases the GIL (see lazy_gil.hpp)
constexpr int kMaxFrameBytes = 64;                // at most: the bytes a frame takes in frames_walk
constexpr int kMaxSecondBytes = 16;               // at most: the bytes each of them leads to takes (frames_walk)
constexpr int kVirtualRootBytes = 4;              // at most: a walk from a simple frame starts at its DFA row
constexpr int kFewKidsScan = 8;                   // more children: a simple state's one or two bytes are looked up (visit_few)
constexpr int kMinRootDispatch = 64;              // root children: fewer are visited one by one (Trie::root_child)
// a batch fill's walk of at least kShareNodes nodes (counting whole subtrees of the first
// bytes taken) is shared with its idle threads, in units of about kShareUnit nodes, a root
// child of more than kShareSplit nodes cut at its children (walk_share.hpp); 16,384 nodes
// instead of 4,096 read the same in bench/batch.py (cutting a walk costs its owner a counter
// per unit and nothing else until a thread waits)
constexpr int64_t kShareNodes = 4096, kShareUnit = 1024, kShareSplit = 4096;


// Printable ASCII but '"' and '\\': the bytes a JSON string body takes literally (token_index.PLAIN_BYTES).
constexpr size_t kMaxPlain = 96;  // (93 of them: per-byte tables of them fit fixed arrays)
const std::vector<uint8_t>& plain_bytes() {
  static const std::vector<uint8_t> bytes = [] {
    std::vector<uint8_t> v;
    for (int b = 0x20; b < 0x7F; ++b)
      if (b != 0x22 && b != 0x5C) v.push_back(static_cast<uint8_t>(b));
    if (v.size() > kMaxPlain) throw std::logic_error("more plain bytes than kMaxPlain");
    return v;
  }();
  return bytes;
}

// plain_bytes() as bits of bytes 0..127 (the first two words of a Rule::none set), and as
// bits of bytes 0x20..0x7F in three words (the 96 row entries total_state compares)
struct PlainBits {
  uint64_t none[2] = {0, 0};
  uint32_t differ[3] = {0, 0, 0};
  PlainBits() {
    for (uint8_t b : plain_bytes()) {
      if (b < 0x20 || b >= 0x80) throw std::logic_error("a plain byte outside 0x20..0x7F");
      none[b >> 6] |= uint64_t(1) << (b & 63);
      differ[(b - 0x20) >> 5] |= uint32_t(1) << ((b - 0x20) & 31);
    }
  }
};
const PlainBits& plain_bits() {
  static const PlainBits bits;
  return bits;
}

// go(t) for the targets of a row that rejects no plain byte on the plain bytes, each
// distinct target at least once and in the order of its first byte, until go returns
// false (then false). Most plain bytes of a name's row go to one state (the declared
// names' next letters apart): the row is compared with its first plain target four
// entries at a time and only the bytes that differ are looked at one by one.
template <class Go>
bool each_plain_target(const int32_t* row, Go&& go) {
  const PlainBits& P = plain_bits();
  const int32_t first = row[0x20];
  if (!go(first)) return false;
  for (int w = 0; w < 3; ++w) {
    uint32_t bits = 0;  // bit k: byte 0x20 + 32w + k goes elsewhere
#if defined(__SSE2__)
    const __m128i want = _mm_set1_epi32(first);
    for (int k = 0; k < 32; k += 4) {
      const __m128i got = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 0x20 + 32 * w + k));
      const int same = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(got, want)));
      bits |= static_cast<uint32_t>(~same & 0xF) << k;
    }
#else
    for (int k = 0; k < 32; ++k) bits |= static_cast<uint32_t>(row[0x20 + 32 * w + k] != first) << k;
#endif
    for (bits &= P.differ[w]; bits != 0; bits &= bits - 1)
      if (!go(row[0x20 + 32 * w + __builtin_ctz(bits)])) return false;
  }
  return true;
}

// Rule::plain_to: per state, the distinct targets of its plain bytes in kPlainTo slots (the
// unused ones -1), or kPlainToRow in the first where the row must be read (it rejects a plain
// byte, or has more targets).
constexpr int kPlainTo = 4;
constexpr int32_t kPlainToRow = -2;

// Whether every entry of an (n, 256) transition table is -1 or a state below n, setting
// has_bytes[s] for each state with a target, none[s] to the bytes it rejects and plain_to
// (kPlainTo per state) row by row while the row is in cache (a range check over the whole
// table, then a pass per row for its targets: 25 against 23 us of the index construction
// for a 337-state rule).
bool rows_checked(const int32_t* T, int32_t n, uint8_t* has_bytes, std::array<uint64_t, 4>* none, int32_t* plain_to) {
  bool ok = true;
  const PlainBits& P = plain_bits();
  for (int32_t s = 0; s < n; ++s) {
    const int32_t* row = T + static_cast<int64_t>(s) * 256;
    ok = fa::targets_in_range(row, 256, n) && ok;
    uint64_t* no = none[s].data();
    fa::equal_bits(row, -1, no);
    has_bytes[s] = (no[0] & no[1] & no[2] & no[3]) != ~uint64_t(0);
    // (the states total_state searches: a name automaton just built, hundreds of them, whose
    // rows no cache holds by the first mask that asks; read there, they were a third of o15627's
    // first member name, 64 us at 49K tokens)
    int32_t* to = plain_to + static_cast<int64_t>(s) * kPlainTo;
    std::fill(to, to + kPlainTo, -1);
    if ((no[0] & P.none[0]) != 0 || (no[1] & P.none[1]) != 0) {
      to[0] = kPlainToRow;
      continue;
    }
    int k = 0;
    each_plain_target(row, [&](int32_t t) {
      if (std::find(to, to + k, t) != to + k) return true;
      if (k == kPlainTo) {
        to[0] = kPlainToRow;
        return false;
      }
      to[k++] = t;
      return true;
    });
  }
  return ok;
}

// Bytes in 48 classes: the runs a character class of a pattern keeps together (digits, a-f,
// g-z, A-F, G-Z), every other printable ASCII byte alone, the controls that JSON whitespace
// uses and the others, and four ranges of UTF-8 bytes. A configuration that goes back to
// itself on every byte of some classes takes the whole subtree of a trie node below which
// only those classes occur.
const uint8_t* byte_class() {
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> t(256);
    int next = 0;
    auto run = [&](int lo, int hi) {
      for (int b = lo; b <= hi; ++b) t[b] = static_cast<uint8_t>(next);
      ++next;
    };
    run(0x30, 0x39), run(0x61, 0x66), run(0x67, 0x7A), run(0x41, 0x46), run(0x47, 0x5A);
    for (int b = 0x20; b < 0x7F; ++b)
      if (!(b >= '0' && b <= '9') && !(b >= 'a' && b <= 'z') && !(b >= 'A' && b <= 'Z')) run(b, b);
    run(0x09, 0x09), run(0x0A, 0x0A), run(0x0D, 0x0D), run(0x00, 0x08), run(0x0B, 0x0C), run(0x0E, 0x1F);
    t[0x7F] = t[0x00];
    run(0x80, 0xBF), run(0xC0, 0xDF), run(0xE0, 0xEF), run(0xF0, 0xFF);
    if (next > 64) throw std::logic_error("more byte classes than bits");
    return t;
  }();
  return table.data();
}

// Per byte class, its bytes as a 256-bit set.
const std::vector<std::array<uint64_t, 4>>& class_masks() {
  static const std::vector<std::array<uint64_t, 4>> masks = [] {
    const uint8_t* cls = byte_class();
    std::vector<std::array<uint64_t, 4>> m;
    for (int b = 0; b < 256; ++b) {
      if (cls[b] >= m.size()) m.resize(cls[b] + 1, {0, 0, 0, 0});
      m[cls[b]][b >> 6] |= uint64_t(1) << (b & 63);
    }
    return m;
  }();
  return masks;
}

// A 64-bit hash of `n` mask words (equal masks are shared; a match is checked in full).
// Four independent lanes of 64 bits: a mask is hashed in about a microsecond at 128K.
// `nonzero` (nonzero_words(n) words, zeroed by the caller) gets bit c set for each 64-byte
// chunk c holding a set bit; the words after the last whole chunk are always compared.
// All-zero chunks are skipped (their position is mixed into the next nonzero one).
struct MaskHash {
  static constexpr uint64_t K = 0xBF58476D1CE4E5B9ull;
  uint64_t lane[4];
  explicit MaskHash(int64_t n) : lane{0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(n), 1, 2, 3} {}
  static bool zero_chunk(const unsigned char* at) {
#if defined(__SSE2__)
    const __m128i a = _mm_or_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)),
                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(at + 16)));
    const __m128i b = _mm_or_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at + 32)),
                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(at + 48)));
    return _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_or_si128(a, b), _mm_setzero_si128())) == 0xFFFF;
#else
    for (int j = 0; j < 64; ++j)
      if (at[j]) return false;
    return true;
#endif
  }
  // chunk c (64 bytes at `at`), nonzero
  void chunk(int64_t c, const unsigned char* at, uint64_t* nonzero) {
    nonzero[c >> 6] |= uint64_t(1) << (c & 63);
    lane[0] ^= static_cast<uint64_t>(c) * 0x94D049BB133111EBull;
    for (int j = 0; j < 8; ++j) {
      uint64_t x;
      std::memcpy(&x, at + j * 8, 8);
      uint64_t& l = lane[j & 3];
      l = (l ^ x) * K;
      l ^= l >> 31;
    }
  }
  uint64_t finish(const uint32_t* w, int64_t n) const {
    uint64_t h = lane[0] ^ (lane[1] * 3) ^ (lane[2] * 5) ^ (lane[3] * 7);
    for (int64_t k = n / 16 * 16; k < n; ++k) h = ((h ^ w[k]) * K) ^ (h >> 29);
    return (h ^ (h >> 32)) * K;
  }
};

uint64_t hash_words(const uint32_t* w, int64_t n, uint64_t* nonzero) {
  MaskHash m(n);
  const auto* bytes = reinterpret_cast<const unsigned char*>(w);
  const int64_t chunks = n / 16;  // 16 words = 64 bytes = 2 rounds of 4 lanes x 64 bits
  for (int64_t c = 0; c < chunks; ++c)
    if (!MaskHash::zero_chunk(bytes + c * 64)) m.chunk(c, bytes + c * 64, nonzero);
  return m.finish(w, n);
}

// hash_words() of a mask whose nonzero whole chunks all have their bit in `marked`
// (nonzero_words(n) words): only those chunks are read. A walk inside a name sets a few
// bits, and reading the whole mask for them was up to a tenth of such a first visit.
uint64_t hash_marked_words(const uint32_t* w, int64_t n, const uint64_t* marked, uint64_t* nonzero) {
  MaskHash m(n);
  const auto* bytes = reinterpret_cast<const unsigned char*>(w);
  const int64_t chunks = n / 16;
  const int64_t nzw = (chunks + 63) / 64;
  for (int64_t k = 0; k < nzw; ++k)
    for (uint64_t bits = marked[k]; bits != 0; bits &= bits - 1) {
      const int64_t c = k * 64 + __builtin_ctzll(bits);
      if (c < chunks && !MaskHash::zero_chunk(bytes + c * 64)) m.chunk(c, bytes + c * 64, nonzero);
    }
  return m.finish(w, n);
}

// The 64-byte chunks of a mask in which a walk inside a name set its bits (visit_few), for
// hash_marked_words(): `few` once such a walk is the whole mask's walk, `all` where bits were
// set another way as well (a subtree taken in whole) or the mask has more than 512 chunks.
struct ChunkMarks {
  bool few = false, all = false;
  uint64_t bits[8];
  void start(int64_t words) {
    few = true;
    all = (words + 15) / 16 > 512;  // (a partial last chunk's tokens are marked in it too)
    std::memset(bits, 0, sizeof bits);
  }
  void tok(int64_t t) {
    if (all) return;
    const int64_t c = t >> 9;  // (512 tokens a chunk)
    bits[c >> 6] |= uint64_t(1) << (c & 63);
  }
};
thread_local ChunkMarks chunk_marks;

// Words of hash_words' chunk bitmap for a mask of `n` words.
int64_t nonzero_words(int64_t n) { return (n / 16 + 63) / 64; }

// Whether masks `a` and `b` of `n` words, with hash_words' chunk bitmaps `anz` and `bnz`, are
// equal: the bitmaps, then only the chunks they mark and the tail. A stored mask that an
// equal new one finds is usually cold (computed long before): comparing all of it was most of
// the dedupe's cost, a twentieth of a first visit that allows a few tokens at 128K.
bool same_mask(const uint32_t* a, const uint64_t* anz, const uint32_t* b, const uint64_t* bnz, int64_t n) {
  const int64_t nzw = nonzero_words(n);
  if (std::memcmp(anz, bnz, static_cast<size_t>(nzw) * 8) != 0) return false;
  for (int64_t k = 0; k < nzw; ++k)
    for (uint64_t bits = anz[k]; bits != 0; bits &= bits - 1) {
      const int64_t c = k * 64 + __builtin_ctzll(bits);
      if (std::memcmp(a + c * 16, b + c * 16, 64) != 0) return false;
    }
  const int64_t tail = n / 16 * 16;
  return std::memcmp(a + tail, b + tail, static_cast<size_t>(n - tail) * 4) == 0;
}

// same_mask() of a kept mask `m` (whole or in part) and `b`
bool same_mask(const StoredMask& m, const uint32_t* b, const uint64_t* bnz, int64_t n) {
  if (m.packed == nullptr) return same_mask(m.dense.load(std::memory_order_relaxed), m.nonzero, b, bnz, n);
  const int64_t nzw = nonzero_words(n);
  if (std::memcmp(m.nonzero, bnz, static_cast<size_t>(nzw) * 8) != 0) return false;
  const uint32_t* from = m.packed;
  for (int64_t k = 0; k < nzw; ++k)
    for (uint64_t bits = bnz[k]; bits != 0; bits &= bits - 1, from += 16)
      if (std::memcmp(from, b + (k * 64 + __builtin_ctzll(bits)) * 16, 64) != 0) return false;
  const int64_t tail = n / 16 * 16;
  return std::memcmp(from, b + tail, static_cast<size_t>(n - tail) * 4) == 0;
}

// A configuration would hold more stacks than the limit (translated to Python, which raises
// structgen's LimitError with the limit's name).
struct StackLimitExceeded {
  int64_t stacks;
};

// Segments of geometrically growing size: segment k holds kBase << k entries, so 40 segment
// pointers cover any table and a small index allocates little (the first segment only).
template <int64_t kBase>
struct Segments {
  static constexpr int kMax = 40;
  static int segment(int64_t i) { return 63 - __builtin_clzll(static_cast<uint64_t>(i / kBase + 1)); }
  static int64_t offset(int64_t i, int k) { return i - kBase * ((int64_t(1) << k) - 1); }
  static int64_t size(int k) { return kBase << k; }
};

// Append-only table of atomics with stable addresses: readers need no lock.
template <class T>
class AtomicTable {
  using Seg = Segments<1024>;

 public:
  explicit AtomicTable(T init) : init_(init) {
    for (auto& c : chunks_) c.store(nullptr, std::memory_order_relaxed);
  }
  ~AtomicTable() {
    for (auto& c : chunks_) delete[] c.load(std::memory_order_relaxed);
  }
  AtomicTable(const AtomicTable&) = delete;
  AtomicTable& operator=(const AtomicTable&) = delete;

  T load(int64_t i) const {
    const int k = Seg::segment(i);
    const std::atomic<T>* chunk = chunks_[k].load(std::memory_order_acquire);
    return chunk == nullptr ? init_ : chunk[Seg::offset(i, k)].load(std::memory_order_acquire);
  }
  // under the owner's lock
  void store(int64_t i, T v) {
    ensure(i);
    const int k = Seg::segment(i);
    chunks_[k].load(std::memory_order_relaxed)[Seg::offset(i, k)].store(v, std::memory_order_release);
  }
  void ensure(int64_t i) {
    const int k = Seg::segment(i);
    if (k >= Seg::kMax) throw std::length_error("too many parser configurations");
    if (chunks_[k].load(std::memory_order_relaxed) == nullptr) {
      auto* chunk = new std::atomic<T>[Seg::size(k)];
      for (int64_t j = 0; j < Seg::size(k); ++j) chunk[j].store(init_, std::memory_order_relaxed);
      chunks_[k].store(chunk, std::memory_order_release);
    }
  }

 private:
  T init_;
  std::atomic<std::atomic<T>*> chunks_[Seg::kMax];
};

// Byte rows, 256 successor configurations each, in segments that never move.
class RowStore {
  using Seg = Segments<16>;

 public:
  RowStore() {
    for (auto& c : chunks_) c.store(nullptr, std::memory_order_relaxed);
  }
  ~RowStore() {
    for (auto& c : chunks_) delete[] c.load(std::memory_order_relaxed);
  }
  RowStore(const RowStore&) = delete;
  RowStore& operator=(const RowStore&) = delete;

  const int32_t* at(int64_t slot) const {
    const int k = Seg::segment(slot);
    return chunks_[k].load(std::memory_order_acquire) + Seg::offset(slot, k) * 256;
  }
  // under the owner's lock: a new row, published by the caller storing its slot
  int64_t append(const int32_t* row) {
    const int64_t slot = size_;
    const int k = Seg::segment(slot);
    if (k >= Seg::kMax) throw std::length_error("too many byte rows");
    int32_t* chunk = chunks_[k].load(std::memory_order_relaxed);
    if (chunk == nullptr) {
      chunk = new int32_t[Seg::size(k) * 256];
      chunks_[k].store(chunk, std::memory_order_release);
    }
    std::memcpy(chunk + Seg::offset(slot, k) * 256, row, 256 * sizeof(int32_t));
    ++size_;
    return slot;
  }
  int64_t size() const { return size_; }

 private:
  std::atomic<int32_t*> chunks_[Seg::kMax];
  int64_t size_ = 0;
};

struct Frame {  // s: a DFA state, or a counter's value (bounds up to 10**12 and more)
  int32_t r;
  int64_t s;
  int32_t p;
  bool operator==(const Frame& o) const { return r == o.r && s == o.s && p == o.p; }
};
struct FrameHash {
  size_t operator()(const Frame& f) const {
    uint64_t h = (static_cast<uint64_t>(static_cast<uint32_t>(f.r)) << 32) ^ static_cast<uint64_t>(f.s);
    h = h * 0x9E3779B97F4A7C15ull ^ static_cast<uint32_t>(f.p);
    return static_cast<size_t>(h * 0xBF58476D1CE4E5B9ull ^ (h >> 29));
  }
};
struct VecHash {
  template <class T>
  size_t operator()(const std::vector<T>& v) const {
    uint64_t h = 0xCBF29CE484222325ull ^ v.size();
    for (T x : v) h = (h ^ static_cast<uint64_t>(x)) * 0x100000001B3ull;
    return static_cast<size_t>(h ^ (h >> 31));
  }
};

// An open-addressing hash set of ids whose keys live in the owner's own records (stacks_,
// config_data_, ...): no copy of a key and no node per entry, where std::unordered_map keyed by a
// vector allocated a key and a node per configuration. Hashes are stored beside the ids, so
// probing compares keys only on a full hash match and growing does not rehash keys.
//
// Growing moves the entries over a few per insert rather than all at once: the doubled table
// comes zeroed from the allocator (an empty slot is all zero bits), lookups try it and then
// the old one until every old slot has been moved. Moving 8,192 entries at once cost one
// first-visit fill about 0.15 ms a table, and a large grammar's stack, configuration and
// closure tables pass that size within the same fill.
class IdTable {
 public:
  template <class Eq>
  int32_t find(uint64_t h, Eq eq) const {
    const int32_t id = find_in(slots_.get(), mask_, h, eq);
    return id >= 0 || old_ == nullptr ? id : find_in(old_.get(), old_mask_, h, eq);
  }
  void insert(uint64_t h, int32_t id) {
    if ((size_ + 1) * 2 > mask_ + 1) grow();  // (the first insert too: mask_ + 1 == 1)
    place(slots_.get(), mask_, h, id);
    ++size_;
    move_some(kMovesPerInsert);
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t hash;
    int32_t id_plus1;  // 0: empty
  };
  struct Free {
    void operator()(Slot* p) const { std::free(p); }
  };
  using Slots = std::unique_ptr<Slot[], Free>;
  // Old slots moved per insert: the doubled table takes as many inserts to fill to its next
  // growth (half full) as the old one has entries, and the old one is at most half full.
  static constexpr size_t kMovesPerInsert = 4;

  template <class Eq>
  static int32_t find_in(const Slot* slots, size_t mask, uint64_t h, Eq& eq) {
    if (slots == nullptr) return -1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& s = slots[i];
      if (s.id_plus1 == 0) return -1;
      if (s.hash == h && eq(s.id_plus1 - 1)) return s.id_plus1 - 1;
    }
  }
  static void place(Slot* slots, size_t mask, uint64_t h, int32_t id) {
    size_t i = h & mask;
    while (slots[i].id_plus1 != 0) i = (i + 1) & mask;
    slots[i] = {h, id + 1};
  }
  // (entries stay in the old table until it goes: a lookup finds them in either)
  void move_some(size_t n) {
    if (old_ == nullptr) return;
    for (const size_t end = std::min(moved_ + n, old_mask_ + 1); moved_ < end; ++moved_) {
      const Slot& s = old_[moved_];
      if (s.id_plus1 != 0) place(slots_.get(), mask_, s.hash, s.id_plus1 - 1);
    }
    if (moved_ > old_mask_) old_.reset();
  }
  void grow() {
    move_some(old_mask_ + 1);  // (a previous growth not finished: never, given kMovesPerInsert)
    const size_t n = slots_ == nullptr ? 64 : (mask_ + 1) * 2;
    Slots fresh(static_cast<Slot*>(std::calloc(n, sizeof(Slot))));
    if (fresh == nullptr) throw std::bad_alloc();
    old_ = std::move(slots_);
    old_mask_ = mask_;
    moved_ = 0;
    slots_ = std::move(fresh);
    mask_ = n - 1;
  }
  Slots slots_, old_;
  size_t mask_ = 0, old_mask_ = 0;
  size_t moved_ = 0;  // old slots moved so far
  size_t size_ = 0;
};

inline uint64_t mix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 33);
}
inline uint64_t frame_hash(const Frame& f) {
  return mix64((static_cast<uint64_t>(static_cast<uint32_t>(f.r)) << 32 | static_cast<uint32_t>(f.p)) ^
               mix64(static_cast<uint64_t>(f.s)));
}

// One rule of the pushdown automaton: a DFA, or a counter (virtual states 0..top that read no
// byte: state k calls the item and returns to k + 1, and may end once k >= lo).
struct Rule {
  bool counter = false;
  int32_t num_states = 0;
  py::array trans_ref;  // keeps the DFA's (n, 256) table alive
  const int32_t* trans = nullptr;
  std::vector<uint8_t> final, has_bytes;
  // per state: the bytes its row rejects (-1) as a 256-bit set, found while the rows are
  // checked: a walk inside a name tests a node's children against it (ConfigIndex::visit_few)
  std::vector<std::array<uint64_t, 4>> none;
  std::vector<int32_t> plain_to;  // per state: its plain bytes' targets (rows_checked)
  // per state: reads a byte, calls nothing and cannot end the rule, so that a frame in it
  // closes to itself alone (a walk steps such frames by the DFA's own row: see walk_range)
  std::vector<uint8_t> simple;
  // per simple state: bounded_classes() once known (0: not yet); any thread
  std::unique_ptr<std::atomic<uint64_t>[]> bounded;
  // per simple state: ConfigIndex::levels_of() once known (0: not yet); any thread
  std::unique_ptr<std::atomic<uint64_t>[]> levels;
  // per state: whether its row takes every ASCII byte as the first of its byte class (1) or
  // not (2), once known (0: not yet; bounded_classes); any thread
  std::unique_ptr<std::atomic<uint8_t>[]> alike;
  std::vector<int32_t> call_off;  // calls of state s: call_data[2 * call_off[s] ..]
  std::vector<int32_t> call_data;
  std::vector<int64_t> dist;  // per state: fewest bytes to the rule's end (ensure_dists)
  int32_t body = -1;
  int64_t lo = 0, hi = -1;  // counter; hi -1: unbounded
  int64_t item_min = kUnreachable;  // counter: the item's shortest match (ensure_dists)
};

// each_plain_target() of state q of `R`, from its plain_to slots where they hold the targets
template <class Go>
bool each_plain_to(const Rule& R, int32_t q, Go&& go) {
  const int32_t* to = R.plain_to.data() + static_cast<int64_t>(q) * kPlainTo;
  if (to[0] == kPlainToRow) return each_plain_target(R.trans + static_cast<int64_t>(q) * 256, go);
  for (int k = 0; k < kPlainTo && to[k] >= 0; ++k)
    if (!go(to[k])) return false;
  return true;
}

// A vocabulary trie in preorder (token_index.TokenTrie): per node its last byte, token (-1:
// none), depth and end (one past its subtree).
struct Trie {
  py::object refs;
  const uint8_t* byte = nullptr;
  const int32_t* tok = nullptr;
  const int32_t* depth = nullptr;
  const int32_t* end = nullptr;
  int64_t nodes = 0;
  int32_t max_depth = 0;

  void load(const py::object& t) {
    u8 b = t.attr("byte").cast<u8>();
    i32 k = t.attr("tok").cast<i32>(), d = t.attr("depth").cast<i32>(), e = t.attr("end").cast<i32>();
    nodes = b.shape(0);
    if (k.shape(0) != nodes || d.shape(0) != nodes || e.shape(0) != nodes)
      throw std::invalid_argument("trie arrays differ in length");
    refs = py::make_tuple(b, k, d, e);
    byte = b.data();
    tok = k.data();
    depth = d.data();
    end = e.data();
    for (int64_t i = 0; i < nodes; ++i) max_depth = std::max(max_depth, depth[i]);
    packed.resize(static_cast<size_t>(nodes));
    for (int64_t i = 0; i < nodes; ++i) {
      if (i > 0 && (depth[i] < 1 || end[i] <= i || end[i] > nodes || depth[i] > 0xFFFF))
        throw std::invalid_argument("malformed trie");
      packed[i] = {tok[i], end[i], static_cast<uint16_t>(depth[i]), byte[i]};
      max_tok = std::max(max_tok, tok[i]);
    }
    // the root's children by byte, when they come in ascending byte order (a trie built by
    // token_walk.build_trie always does) and are many enough that finding a row's live
    // bytes first (64 compares) costs less than visiting every child; else the walks visit
    // them one by one
    std::fill(std::begin(root_child), std::end(root_child), -1);
    bool ascending = nodes > 1 && end[0] == nodes;
    int prev = -1, children = 0;
    for (int64_t i = 1; i < nodes && ascending; i = end[i], ++children) {
      ascending = depth[i] == 1 && byte[i] > prev;
      prev = byte[i];
      root_child[byte[i]] = static_cast<int32_t>(i);
    }
    by_first_byte = ascending && children >= kMinRootDispatch;
    index_siblings();
  }

  // Siblings side by side: the slots of a node with m children hold each child's byte and
  // node in order, then one more slot holding -1 - the end of the node's subtree. A walk that
  // rejects a node finds the next sibling its row takes by reading these bytes in a row
  // (next_sibling()), where stepping from sibling to sibling read one node record each, a
  // cache line apart in preorder: inside a name or a literal a row takes one byte or two of
  // the few dozen children of a node (first-pass fills with SmolLM2 on the masks corpus: p50
  // and p90 about 8% faster).
  std::vector<int32_t> sib;       // per node: its slot (the root: -1)
  std::vector<uint8_t> sib_byte;  // per slot: the child's byte
  std::vector<int32_t> sib_node;  // per slot: the child, or -1 - (end of the parent's subtree)
  void index_siblings() {
    sib.assign(static_cast<size_t>(nodes), -1);
    sib_byte.clear();
    sib_node.clear();
    for (int64_t p = 0; p < nodes; ++p) {
      if (end[p] <= p + 1) continue;  // a leaf
      for (int64_t c = p + 1; c < end[p]; c = end[c]) {
        sib[c] = static_cast<int32_t>(sib_node.size());
        sib_byte.push_back(byte[c]);
        sib_node.push_back(static_cast<int32_t>(c));
      }
      sib_byte.push_back(0);
      sib_node.push_back(static_cast<int32_t>(-1 - end[p]));
    }
  }

  // root_child[b]: the node of first byte b (-1: none); valid where by_first_byte
  int32_t root_child[256];
  bool by_first_byte = false;

  // The walk reads every field of a node it visits and jumps to end when it skips a subtree:
  // one 12-byte record per node is one cache line touched per step instead of four.
  struct Node {
    int32_t tok;
    int32_t end;
    uint16_t depth;
    uint8_t byte;
  };
  std::vector<Node> packed;
  int32_t max_tok = -1;

  // The tokens of the trie in preorder (index_tokens()): the tokens of node i's subtree,
  // node i itself included, are toks[tok_before[i] .. tok_before[end[i]]).
  std::vector<int32_t> toks, tok_before;
  void index_tokens() {
    toks.clear();
    tok_before.assign(static_cast<size_t>(nodes) + 1, 0);
    for (int64_t i = 0; i < nodes; ++i) {
      tok_before[i] = static_cast<int32_t>(toks.size());
      if (tok[i] >= 0) toks.push_back(tok[i]);
    }
    tok_before[nodes] = static_cast<int32_t>(toks.size());
  }
};

struct IdRuns {  // token ids grouped: ids[offsets[g]:offsets[g + 1]]
  py::object refs;
  const int64_t* ids = nullptr;
  const int64_t* offsets = nullptr;
  int64_t groups = 0;
  // the bitmask of every id of every group, when no id is in two groups (else empty): a mask
  // taking most groups is that less the few groups left out
  std::vector<uint32_t> all;

  void build_union(int64_t words) {
    std::vector<uint32_t> u(static_cast<size_t>(words), 0);
    for (int64_t k = 0; k < offsets[groups]; ++k) {
      const int64_t id = ids[k];
      if (id < 0 || id >= words * 32 || (u[id >> 5] >> (id & 31) & 1u)) return;
      u[id >> 5] |= 1u << (id & 31);
    }
    all.swap(u);
  }

  void load(const py::object& id_arr, const py::object& off_arr) {
    i64 i = id_arr.cast<i64>(), o = off_arr.cast<i64>();
    if (o.shape(0) < 1) throw std::invalid_argument("offsets without their start");
    refs = py::make_tuple(i, o);
    ids = i.data();
    offsets = o.data();
    groups = o.shape(0) - 1;
  }
};

// token_index.PlainSplit: the vocabulary split at the plain bytes, built once per tokenizer.
struct Plain {
  std::vector<uint32_t> tokens, text, tokens_and_text;
  Trie rest, only, other, text_trie;
  // `other` split at each token's text prefix: `head` holds the tokens without one, `tail` the
  // distinct rests of the others, its node tokens groups of ids (tail_groups)
  Trie head, tail;
  bool tails_pay = false;  // walk_other is worth its tables (a large `other` trie)
  IdRuns by_first, text_by_first, by_len, tail_groups;  // by_len: ids sorted by length, offsets per length
  int64_t longest = 0;                     // the longest plain token
  // the text tokens by their count of characters: ids of those with at most n characters are
  // text_by_chars[:text_chars_off[n + 1]]; text_longest: the most characters (-1: no table,
  // when the text trie's tokens are not exactly `text`)
  std::vector<int64_t> text_by_chars, text_chars_off;
  int64_t text_longest = -1;
};

using ByteSet = std::array<uint64_t, 4>;
// The bytes of a 256-bit set a rule state rejects (Rule::none) that it takes instead.
inline int taken_bytes(const ByteSet& none) {
  return __builtin_popcountll(~none[0]) + __builtin_popcountll(~none[1]) + __builtin_popcountll(~none[2]) +
         __builtin_popcountll(~none[3]);
}
inline bool in_set(const ByteSet& set, int b) { return (set[b >> 6] >> (b & 63) & 1u) != 0; }
inline void add_to(ByteSet& set, int b) { set[b >> 6] |= uint64_t(1) << (b & 63); }

// Everything per vocabulary (token_index.TokenTrie with its PlainSplit): built once per trie
// and shared by the index of every grammar compiled for it.
// ConfigIndex::bounded_walk's table of one item automaton (a bounded string's character):
// the tokens of Plain::other it takes (bytes and characters read as items until one it cannot
// start: there the string ends), as ids grouped by the items they start (`by_items`, offsets
// per count); `leave`: those that end the string, the same way. A token the item rejects
// midway is in neither. Built once per vocabulary and item automaton (Vocab::item_table).
struct ItemTable {
  std::vector<int32_t> by_items, by_items_off, leave, leave_off;
};

struct Vocab {
  Trie trie;
  std::vector<int64_t> dups;  // (canonical, duplicate) pairs, flat
  std::unique_ptr<Plain> plain;
  uint8_t used[256] = {0};  // bytes some token contains
  // per character shape (a UTF-8 lead byte range, then continuation byte ranges), per byte of
  // the character: the bytes of its range that some token contains as a 256-bit set, and the
  // [lo, hi) range that holds them (a row's runs are scanned over the range: each_level_target)
  struct MbLevel {
    std::array<uint64_t, 4> used;
    int lo, hi;
  };
  std::vector<std::vector<MbLevel>> mb_levels;
  int64_t max_id = -1;      // the largest token id any table holds
  int64_t plain_words = -1;  // words of the plain bitmasks
  // the plain tokens' trie's tokens (no duplicate spelling: compute_mask adds those), and per
  // plain byte (plain_bytes() order) those holding it: plain_words words each
  std::vector<uint32_t> only_bits, with_byte;
  int64_t with_byte_count[kMaxPlain] = {0};  // per plain byte: how many plain tokens hold it
  std::vector<uint32_t> text_with_byte;  // per plain byte, the text tokens holding it (plain_words words each)

  static constexpr size_t kMaxClasses = 64;  // class_tokens kept per vocabulary
  // The plain tokens made of the bytes in `set` only (a pattern's [0-9a-f], say), as a
  // bitmask made on first use: every plain token less those holding a byte outside the set
  // (with_byte); nullptr once kMaxClasses classes are kept. Any thread.
  size_t class_count() const {
    std::lock_guard<std::mutex> g(class_mu_);
    return classes_.size();
  }
  const uint32_t* class_tokens(const ByteSet& set) const { return tokens_within(classes_, only_bits, with_byte, set); }
  // The text tokens (Plain::text) whose plain bytes are all in `set`, as a bitmask made on
  // first use like class_tokens(); nullptr once kMaxClasses such sets are kept. Any thread.
  const uint32_t* text_class_tokens(const ByteSet& set) const {
    return tokens_within(text_classes_, plain->text, text_with_byte, set);
  }
  // The plain tokens holding a byte of `set` (plain bytes), by id, each with its first byte:
  // made on first use and kept, like class_tokens(); nullptr once kMaxClasses such sets are
  // kept. Any thread. (The class walks step these tokens one by one: found from the bitmask
  // of each byte at every mask, their ids and first bytes, scattered over the vocabulary, were
  // a third of such a mask at 128K tokens.)
  struct ExitTokens {
    std::vector<int32_t> ids;
    std::vector<uint8_t> first;
    // their spellings, one after the other (token k's at off[k], off[k + 1]): read in order,
    // where plain_spelling() scattered the reads over the vocabulary's spellings
    std::vector<uint32_t> off;
    std::vector<uint8_t> bytes;
  };
  const ExitTokens* exit_tokens(const ByteSet& set) const {
    {
      std::lock_guard<std::mutex> g(class_mu_);
      auto it = exit_lists_.find(set);
      if (it != exit_lists_.end()) return &it->second;
      if (exit_lists_.size() >= kMaxClasses) return nullptr;
    }
    ExitTokens out = make_exit_tokens(set);
    std::lock_guard<std::mutex> g(class_mu_);
    return &exit_lists_.emplace(set, std::move(out)).first->second;  // a racing thread's, equal, may win
  }
  // the list exit_tokens() keeps, made anew (past the lists kept)
  ExitTokens make_exit_tokens(const ByteSet& set) const {
    std::vector<uint32_t> held(static_cast<size_t>(plain_words), 0);
    const auto& pb = plain_bytes();
    for (size_t k = 0; k < pb.size(); ++k) {
      if (!(set[pb[k] >> 6] >> (pb[k] & 63) & 1u)) continue;
      const uint32_t* w = with_byte.data() + k * static_cast<size_t>(plain_words);
      for (int64_t i = 0; i < plain_words; ++i) held[static_cast<size_t>(i)] |= w[i];
    }
    ExitTokens out;
    out.off.push_back(0);
    for (size_t i = 0; i < held.size(); ++i)
      for (uint32_t hits = held[i]; hits != 0; hits &= hits - 1) {
        const auto t = static_cast<int32_t>(i * 32 + static_cast<size_t>(__builtin_ctz(hits)));
        out.ids.push_back(t);
        out.first.push_back(first_byte[static_cast<size_t>(t)]);
        const auto [data, n] = plain_spelling(t);
        out.bytes.insert(out.bytes.end(), data, data + n);
        out.off.push_back(static_cast<uint32_t>(out.bytes.size()));
      }
    return out;
  }
  std::vector<uint8_t> first_byte;  // per token id: its first byte (0 for ids without bytes)
  // Per node of `trie`: the byte classes (byte_class()) of every byte below it. A subtree whose
  // classes a configuration loops on in whole is allowed in whole (ConfigIndex::walk_nodes).
  std::vector<uint64_t> below;
  // Per node of `trie`: the bytes on the longest path below it (at most 255).
  std::vector<uint8_t> height;
  // Per slot of `trie` (Trie::sib_node), what a walk reads of that child to visit it: the
  // walks inside a name or a literal (ConfigIndex::visit_few) test a node's children by
  // their bytes (Trie::sib_byte) and read one record per child taken, where visiting the
  // node itself read its record, its slot and `below`, each a cache miss of its own.
  struct Kid {
    int32_t node, tok, end, kids;  // kids: its children's first slot (-1: a leaf)
    uint64_t below;
    int32_t kids_m1, unused;  // kids_m1: its children, less one (32 bytes: no record spans two lines)
  };
  std::vector<Kid> kids;
  int32_t root_slot[256];  // the slot of the root's child of each byte (-1: none)

  Vocab(const py::object& t, const py::list& multibyte) {
    trie.load(t);
    i64 d = t.attr("dups").cast<i64>();
    dups.assign(d.data(), d.data() + d.size());
    note_ids(dups.data(), static_cast<int64_t>(dups.size()));
    for (int64_t i = 1; i < trie.nodes; ++i) {
      used[trie.byte[i]] = 1;
      max_id = std::max<int64_t>(max_id, trie.tok[i]);
    }
    py::object p = t.attr("plain");
    if (!p.is_none()) load_plain(p);
    first_byte.assign(static_cast<size_t>(max_id + 1), 0);
    for (int64_t i = 1, b = 0; i < trie.nodes; ++i) {
      if (trie.depth[i] == 1) b = trie.byte[i];
      if (trie.tok[i] >= 0) first_byte[trie.tok[i]] = static_cast<uint8_t>(b);
    }
    for (size_t k = 0; k + 1 < dups.size(); k += 2) first_byte[dups[k + 1]] = first_byte[dups[k]];
    trie.index_tokens();
    below.assign(static_cast<size_t>(trie.nodes), 0);
    const uint8_t* cls = byte_class();
    height.assign(static_cast<size_t>(trie.nodes), 0);
    for (int64_t i = trie.nodes - 1; i >= 0; --i)  // children come after their parent
      for (int64_t c = i + 1; c < trie.end[i]; c = trie.end[c]) {
        below[i] |= below[c] | uint64_t(1) << cls[trie.byte[c]];
        height[i] = std::max<uint8_t>(height[i], static_cast<uint8_t>(std::min(255, height[c] + 1)));
      }
    kids.assign(trie.sib_node.size(), Kid{-1, -1, -1, -1, 0, 0, 0});
    for (size_t k = 0; k < kids.size(); ++k) {
      const int32_t at = trie.sib_node[k];
      if (at < 0) continue;  // (the end of a node's slots)
      const Trie::Node& n = trie.packed[static_cast<size_t>(at)];
      Kid& c = kids[k];
      c = Kid{at, n.tok, n.end, -1, below[static_cast<size_t>(at)], 0, 0};
      if (n.end > at + 1) {  // its children's slots: from its first child's to the end mark
        c.kids = trie.sib[static_cast<size_t>(at) + 1];
        int64_t m = 0;
        while (trie.sib_node[static_cast<size_t>(c.kids + m)] >= 0) ++m;
        if (m > 256) throw std::invalid_argument("malformed trie: more than 256 children");
        c.kids_m1 = static_cast<int32_t>(m - 1);
      }
    }
    std::fill(std::begin(root_slot), std::end(root_slot), -1);
    for (int b = 0; b < 256; ++b)
      if (trie.root_child[b] >= 0) root_slot[b] = trie.sib[static_cast<size_t>(trie.root_child[b])];
    for (const auto& seq : multibyte) {
      std::vector<MbLevel> levels;
      bool usable = true;
      for (const auto& rg : seq) {
        auto pr = rg.cast<std::pair<int, int>>();
        if (pr.first < 0 || pr.second > 255 || pr.first > pr.second) throw std::invalid_argument("bad byte range");
        MbLevel l{{0, 0, 0, 0}, 256, -1};
        for (int b = pr.first; b <= pr.second; ++b) {
          if (!used[b]) continue;
          l.used[b >> 6] |= uint64_t(1) << (b & 63);
          l.lo = std::min(l.lo, b);
          l.hi = b + 1;
        }
        usable = usable && l.hi > 0;
        levels.push_back(l);
      }
      if (!usable) continue;  // no token holds the others
      mb_levels.push_back(std::move(levels));
    }
  }

  void note_ids(const int64_t* ids, int64_t n) {
    for (int64_t k = 0; k < n; ++k) {
      if (ids[k] < 0) throw std::invalid_argument("negative token id");
      max_id = std::max(max_id, ids[k]);
    }
  }

  // Plain::text_by_chars, from the text tokens' trie: a node's characters are its parent's
  // (the last node met one level up, in preorder), plus one unless its byte continues a
  // UTF-8 character
  void index_text_chars() {
    Plain& P = *plain;
    const Trie& t = P.text_trie;
    std::vector<int32_t> on_path(static_cast<size_t>(t.max_depth) + 1, 0);  // [d]: characters down to depth d
    std::vector<std::pair<int32_t, int64_t>> found;  // (characters, id)
    std::vector<uint32_t> seen(static_cast<size_t>(plain_words), 0);
    for (int64_t i = 1; i < t.nodes; ++i) {
      const int32_t d = t.depth[i];  // (1 <= d <= max_depth: checked by Trie::load)
      const int32_t chars = on_path[static_cast<size_t>(d) - 1] + ((t.byte[i] & 0xC0) != 0x80);
      on_path[static_cast<size_t>(d)] = chars;
      const int64_t id = t.tok[i];
      if (id < 0) continue;
      if (id >= plain_words * 32 || (seen[id >> 5] >> (id & 31) & 1u)) return;  // (no table)
      seen[id >> 5] |= 1u << (id & 31);
      found.emplace_back(chars, id);
    }
    if (seen != P.text) return;  // (no table: the shortcut would allow other tokens)
    int32_t most = 0;
    for (const auto& f : found) most = std::max(most, f.first);
    P.text_chars_off.assign(static_cast<size_t>(most) + 2, 0);
    for (const auto& f : found) ++P.text_chars_off[static_cast<size_t>(f.first) + 1];
    for (size_t n = 1; n < P.text_chars_off.size(); ++n) P.text_chars_off[n] += P.text_chars_off[n - 1];
    std::vector<int64_t> at(P.text_chars_off.begin(), P.text_chars_off.end() - 1);
    P.text_by_chars.resize(found.size());
    for (const auto& f : found) P.text_by_chars[static_cast<size_t>(at[static_cast<size_t>(f.first)]++)] = f.second;
    P.text_longest = most;
  }

  // with_byte (and only_bits, with_byte_count), from the plain tokens' trie
  void index_plain_bytes() {
    only_bits.assign(static_cast<size_t>(plain_words), 0);
    index_bytes_held(plain->only, true, with_byte, [&](int32_t tok, size_t kk) {
      only_bits[static_cast<size_t>(tok >> 5)] |= uint32_t(1) << (tok & 31);
      ++with_byte_count[kk];
    });
  }

  // by_byte[k]: the tokens of `t` holding plain byte k (plain_bytes() order), plain_words words
  // each: a node's plain bytes are its parent's and its own. `all_plain`: every byte of `t`'s
  // tokens must be plain (then every token holds one). on_token(token, k) for each plain byte
  // k a token holds.
  template <class OnToken>
  void index_bytes_held(const Trie& t, bool all_plain, std::vector<uint32_t>& by_byte, OnToken&& on_token) {
    const auto& pb = plain_bytes();
    uint8_t pos[256];
    std::fill(std::begin(pos), std::end(pos), 0xFF);
    for (size_t k = 0; k < pb.size(); ++k) pos[pb[k]] = static_cast<uint8_t>(k);
    by_byte.assign(pb.size() * static_cast<size_t>(plain_words), 0);
    std::vector<std::array<uint64_t, 2>> held(static_cast<size_t>(t.max_depth) + 1, {0, 0});
    for (int64_t i = 1; i < t.nodes; ++i) {
      const Trie::Node& nd = t.packed[static_cast<size_t>(i)];
      const uint8_t k = pos[nd.byte];
      if (k == 0xFF && all_plain) throw std::invalid_argument("a plain token with a byte that is not plain");
      auto& h = held[nd.depth];
      h = held[nd.depth - 1u];
      if (k != 0xFF) h[k >> 6] |= uint64_t(1) << (k & 63);
      if (nd.tok < 0) continue;
      if (nd.tok >= plain_words * 32) throw std::invalid_argument("a token beyond the plain bitmasks");
      for (int j = 0; j < 2; ++j)
        for (uint64_t bits = h[j]; bits != 0; bits &= bits - 1) {
          const size_t kk = static_cast<size_t>(j * 64 + __builtin_ctzll(bits));
          by_byte[kk * static_cast<size_t>(plain_words) + static_cast<size_t>(nd.tok >> 5)] |= uint32_t(1) << (nd.tok & 31);
          on_token(nd.tok, kk);
        }
    }
  }

  void load_plain(const py::object& p) {
    plain = std::make_unique<Plain>();
    auto words_of = [&](const py::object& a) {
      u32 w = a.cast<u32>();
      if (plain_words >= 0 && w.size() != plain_words) throw std::invalid_argument("plain bitmasks differ in size");
      plain_words = w.size();
      return std::vector<uint32_t>(w.data(), w.data() + w.size());
    };
    plain->tokens = words_of(p.attr("tokens"));
    plain->text = words_of(p.attr("text"));
    plain->tokens_and_text.resize(plain->tokens.size());
    for (size_t w = 0; w < plain->tokens.size(); ++w) plain->tokens_and_text[w] = plain->tokens[w] | plain->text[w];
    plain->rest.load(p.attr("rest"));
    plain->only.load(p.attr("only"));
    plain->only.index_tokens();
    index_plain_bytes();
    plain->other.load(p.attr("other"));
    plain->text_trie.load(p.attr("text_trie"));
    plain->by_first.load(p.attr("by_first"), p.attr("offsets"));
    plain->text_by_first.load(p.attr("text_by_first"), p.attr("text_offsets"));
    plain->by_len.load(p.attr("by_len"), p.attr("len_offsets"));
    plain->head.load(p.attr("other_head"));
    plain->tail.load(p.attr("other_tail"));
    plain->tail_groups.load(p.attr("tail_ids"), p.attr("tail_offsets"));
    if (plain->tail.max_tok >= plain->tail_groups.groups) throw std::invalid_argument("a tail group out of range");
    // the nodes below a text prefix that the tail trie saves (SmolLM2: 172, Llama-3: 5,286)
    plain->tails_pay = plain->other.nodes - plain->head.nodes - plain->tail.nodes >= 1024;
    plain->longest = plain->by_len.groups - 1;  // len_offsets has longest + 2 entries
    if (plain->by_first.groups != 256 || plain->text_by_first.groups != 256 || plain->longest < 0)
      throw std::invalid_argument("bad plain split offsets");
    for (const IdRuns* runs : {&plain->by_first, &plain->text_by_first, &plain->by_len, &plain->tail_groups}) {
      for (int64_t g = 0; g < runs->groups; ++g)
        if (runs->offsets[g] < 0 || runs->offsets[g] > runs->offsets[g + 1]) throw std::invalid_argument("bad offsets");
      note_ids(runs->ids, runs->offsets[runs->groups]);
    }
    plain->by_first.build_union(plain_words);
    plain->text_by_first.build_union(plain_words);
    index_text_chars();
    // (made here, with the tokenizer's preparation, not inside the first fill that needs them)
    build_spellings();
    build_char_index();
    index_text_plain_bytes();
    for (const Trie* sub : {&plain->rest, &plain->only, &plain->other, &plain->text_trie, &plain->head, &plain->tail})
      if (sub->max_depth > trie.max_depth) throw std::invalid_argument("a split trie deeper than the vocabulary's");
  }

  // The bytes of plain token `t` (a token of Plain::only): the exit-class walk steps the few
  // plain tokens holding an exit byte one by one.
  std::pair<const uint8_t*, size_t> plain_spelling(int32_t t) const {
    if (t < 0 || static_cast<size_t>(t) + 1 >= spell_off_.size()) return {nullptr, 0};
    return {spell_bytes_.data() + spell_off_[t], spell_off_[t + 1] - spell_off_[t]};
  }

  // The bytes of the plain tokens of `n` bytes, one after the other in Plain::by_len order
  // (the k-th at k * n), and of text token k of Plain::text_by_chars: a bounded string's
  // tokens of a few lengths past its sure one are stepped one by one (ConfigIndex::level_walk).
  const uint8_t* by_len_bytes(int64_t n) const { return by_len_bytes_.data() + by_len_at_[static_cast<size_t>(n)]; }
  std::pair<const uint8_t*, size_t> by_chars_spelling(int64_t k) const {
    return {by_chars_bytes_.data() + by_chars_off_[static_cast<size_t>(k)],
            by_chars_off_[static_cast<size_t>(k) + 1] - by_chars_off_[static_cast<size_t>(k)]};
  }
  // whether every token of those tables has its bytes there (else level_walk is not used)
  bool steppable() const { return steppable_; }

  // The characters from U+0080 up that the text tokens hold and the text prefixes of the
  // `other` tokens (Plain::other: whole characters before the first byte that is no text)
  // hold, and per character the tokens holding it there: what a configuration that rejects
  // a few such characters on its way around its loop rejects in bulk (ConfigIndex::char_kill).
  struct CharIndex {
    std::vector<uint32_t> chars;  // UTF-8 bytes as a big-endian number: ascending is byte order
    std::vector<int64_t> off;     // the tokens of chars[k]: toks[off[k]:off[k + 1]]
    std::vector<int32_t> toks;
  };
  const CharIndex& char_index() const { return char_index_; }

 private:
  // text_with_byte, from the text tokens' trie
  void index_text_plain_bytes() { index_bytes_held(plain->text_trie, false, text_with_byte, [](int32_t, size_t) {}); }

  void build_spellings() {
    build_spellings(plain->only, spell_off_, spell_bytes_);
    // (the text tokens' bytes are laid out below in the order of their count of characters,
    // the order level_walk steps them in; by id they are read nowhere)
    std::vector<uint32_t> text_off;
    std::vector<uint8_t> text_bytes;
    build_spellings(plain->text_trie, text_off, text_bytes);
    auto text_spelling = [&](int64_t t) -> std::pair<const uint8_t*, size_t> {
      if (t < 0 || static_cast<size_t>(t) + 1 >= text_off.size()) return {nullptr, 0};
      return {text_bytes.data() + text_off[t], text_off[t + 1] - text_off[t]};
    };
    // The plain tokens' bytes in Plain::by_len order, and the text tokens' in text_by_chars
    // order: the tokens a bounded string steps one by one are runs of those orders, read
    // from one block, where reading each by its id missed the cache twice a token.
    const Plain& P = *plain;
    // (a token spelled like another, phi-3's byte tokens, is in the tables by id but in the
    // tries once: it is spelled as its twin)
    std::unordered_map<int64_t, int64_t> twin;
    for (size_t k = 0; k + 1 < dups.size(); k += 2) twin.emplace(dups[k + 1], dups[k]);
    auto spelled = [&](int64_t t, auto&& spelling) {
      auto got = spelling(t);
      if (got.second == 0)
        if (auto it = twin.find(t); it != twin.end()) got = spelling(it->second);
      return got;
    };
    auto plain_of = [&](int64_t t) { return plain_spelling(static_cast<int32_t>(t)); };
    by_len_at_.assign(static_cast<size_t>(P.longest) + 2, 0);
    for (int64_t n = 0; n <= P.longest; ++n) {
      by_len_at_[static_cast<size_t>(n)] = static_cast<int64_t>(by_len_bytes_.size());
      for (int64_t k = P.by_len.offsets[n]; k < P.by_len.offsets[n + 1]; ++k) {
        const auto [data, len] = spelled(P.by_len.ids[k], plain_of);
        if (static_cast<int64_t>(len) != n) steppable_ = false;  // (not met on the real vocabularies)
        by_len_bytes_.insert(by_len_bytes_.end(), data, data + len);
      }
    }
    by_len_at_.back() = static_cast<int64_t>(by_len_bytes_.size());
    by_chars_off_.assign(1, 0);
    for (int64_t t : P.text_by_chars) {
      const auto [data, len] = spelled(t, text_spelling);
      if (len == 0) steppable_ = false;
      by_chars_bytes_.insert(by_chars_bytes_.end(), data, data + len);
      by_chars_off_.push_back(static_cast<uint32_t>(by_chars_bytes_.size()));
    }
  }
  // the bytes of every token of `t`, laid out by token id (off: per id, where they start)
  static void build_spellings(const Trie& t, std::vector<uint32_t>& off, std::vector<uint8_t>& out) {
    std::vector<uint8_t> path(static_cast<size_t>(t.max_depth) + 1);
    std::vector<std::pair<int32_t, std::pair<int64_t, int32_t>>> at;  // (token, (start, length))
    std::vector<uint8_t> bytes;
    for (int64_t i = 1; i < t.nodes; ++i) {
      const Trie::Node& nd = t.packed[static_cast<size_t>(i)];
      path[nd.depth] = nd.byte;
      if (nd.tok < 0) continue;
      at.push_back({nd.tok, {static_cast<int64_t>(bytes.size()), nd.depth}});
      bytes.insert(bytes.end(), path.begin() + 1, path.begin() + 1 + nd.depth);
    }
    int32_t most = -1;
    for (const auto& a : at) most = std::max(most, a.first);
    off.assign(static_cast<size_t>(most) + 2, 0);
    // (laid out again by token id, so that a token's bytes are its offsets' difference)
    for (const auto& a : at) off[static_cast<size_t>(a.first) + 1] = static_cast<uint32_t>(a.second.second);
    for (size_t k = 1; k < off.size(); ++k) off[k] += off[k - 1];
    out.resize(off.back());
    for (const auto& a : at)
      std::memcpy(out.data() + off[a.first], bytes.data() + a.second.first, static_cast<size_t>(a.second.second));
  }

  // Each trie in preorder, decoding UTF-8 along the path as token_index._text_prefix does
  // (strict: no overlong forms, surrogates or code points past U+10FFFF): a path stops being
  // text at its first byte that is neither plain nor part of a valid character.
  void build_char_index() {
    std::vector<std::pair<uint32_t, int32_t>> pairs;  // (character, token)
    const auto& pb = plain_bytes();
    bool is_plain[256] = {false};
    for (uint8_t b : pb) is_plain[b] = true;
    for (const Trie* t : {&plain->text_trie, &plain->other}) {
      struct At {
        uint32_t pend;  // the character's bytes so far
        uint8_t need, lo, hi;  // continuation bytes still to come, and the next one's range
        bool text;
        int32_t chars;  // characters completed on the path
      };
      std::vector<At> st(static_cast<size_t>(t->max_depth) + 1);
      std::vector<uint32_t> path(static_cast<size_t>(t->max_depth) + 1);
      st[0] = At{0, 0, 0x80, 0xBF, true, 0};
      std::vector<uint32_t> mine;
      for (int64_t i = 1; i < t->nodes; ++i) {
        const Trie::Node& nd = t->packed[static_cast<size_t>(i)];
        At a = st[nd.depth - 1u];
        const uint8_t b = nd.byte;
        if (a.text) {
          if (a.need > 0) {
            if (b < a.lo || b > a.hi) {
              a.text = false;
            } else {
              a.pend = a.pend << 8 | b;
              a.lo = 0x80, a.hi = 0xBF;
              if (--a.need == 0) path[static_cast<size_t>(a.chars++)] = a.pend;
            }
          } else if (b < 0x80) {
            a.text = is_plain[b];
          } else if (b >= 0xC2 && b <= 0xF4) {
            a.pend = b;
            a.need = b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3;
            a.lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
            a.hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
          } else {
            a.text = false;
          }
        }
        st[nd.depth] = a;
        if (nd.tok < 0 || a.chars == 0) continue;
        mine.assign(path.begin(), path.begin() + a.chars);
        std::sort(mine.begin(), mine.end());
        mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
        for (uint32_t c : mine) pairs.emplace_back(c, nd.tok);
      }
    }
    std::sort(pairs.begin(), pairs.end());
    CharIndex& x = char_index_;
    for (size_t k = 0; k < pairs.size(); ++k) {
      if (k == 0 || pairs[k].first != pairs[k - 1].first) {
        x.chars.push_back(pairs[k].first);
        x.off.push_back(static_cast<int64_t>(x.toks.size()));
      }
      x.toks.push_back(pairs[k].second);
    }
    x.off.push_back(static_cast<int64_t>(x.toks.size()));
  }

  // `all` less the tokens holding a plain byte outside `set` (by_byte: per plain byte, the
  // tokens of `all` holding it), memoised in `memo` (class_tokens, text_class_tokens)
  const uint32_t* tokens_within(std::map<ByteSet, std::vector<uint32_t>>& memo, const std::vector<uint32_t>& all,
                                const std::vector<uint32_t>& by_byte, const ByteSet& set) const {
    {
      std::lock_guard<std::mutex> g(class_mu_);
      auto it = memo.find(set);
      if (it != memo.end()) return it->second.data();
      if (memo.size() >= kMaxClasses) return nullptr;
    }
    std::vector<uint32_t> bits(all);
    const auto& pb = plain_bytes();
    for (size_t k = 0; k < pb.size(); ++k) {
      if (set[pb[k] >> 6] >> (pb[k] & 63) & 1u) continue;
      const uint32_t* w = by_byte.data() + k * static_cast<size_t>(plain_words);
      for (int64_t i = 0; i < plain_words; ++i) bits[static_cast<size_t>(i)] &= ~w[i];
    }
    std::lock_guard<std::mutex> g(class_mu_);
    return memo.emplace(set, std::move(bits)).first->second.data();  // a racing thread's, equal, may win
  }

  mutable std::mutex class_mu_;
  mutable std::map<ByteSet, std::vector<uint32_t>> classes_, text_classes_;
  mutable std::map<ByteSet, ExitTokens> exit_lists_;  // (exit_tokens; std::map: entries never move)
  std::vector<uint32_t> spell_off_, by_chars_off_;
  std::vector<uint8_t> spell_bytes_, by_len_bytes_, by_chars_bytes_;
  std::vector<int64_t> by_len_at_;
  bool steppable_ = true;
  CharIndex char_index_;

 public:
  // ItemTables by item automaton (its rows and final flags: grammars share the JSON string
  // character's), made once each: about 0.2 ms at 128K tokens. Any thread.
  mutable std::mutex item_mu;
  mutable std::map<std::string, std::unique_ptr<const ItemTable>> item_tables;
};

class ConfigIndex final : public structgen::IndexView {
 public:
  ConfigIndex(const py::list& rules, int32_t root, std::shared_ptr<const Vocab> vocab, const py::object& stop_ids,
              int64_t words, int64_t table_cells, int64_t stack_limit, bool trimmed)
      : vocab_(std::move(vocab)), V(*vocab_), words_(words), table_budget_(table_cells), stack_limit_(stack_limit),
        trimmed_(trimmed),
        slot_(-1), virt_(-1), virt_p_(-1), masks_(nullptr), equiv_(-1), equiv_slack_(-1), mb_target_(kMbUnasked) {
    for (const auto& item : rules) load_rule(py::reinterpret_borrow<py::tuple>(item));
    loaded_rules_ = rules_.size();
    // Each bounded counter gets an unbounded twin (same item, same lower bound), unreachable
    // from the root: a bounded string's masks are its twin's less the tokens that overrun the
    // bound (bounded_walk).
    twin_.assign(loaded_rules_, -1);
    for (size_t r = 0; r < loaded_rules_; ++r) {
      if (!rules_[r].counter || rules_[r].hi < 0) continue;
      Rule t;
      t.counter = true;
      t.body = rules_[r].body;
      t.lo = rules_[r].lo;
      t.hi = -1;
      twin_[r] = static_cast<int32_t>(rules_.size());
      rules_.push_back(std::move(t));
    }
    total_memo_.resize(rules_.size());
    text_total_memo_.resize(rules_.size());
    mb_state_.resize(rules_.size());
    for (const Rule& r : rules_) {
      if (r.counter) {
        counted_ = true;
        if (r.body < 0 || r.body >= static_cast<int32_t>(rules_.size()) || rules_[r.body].counter)
          throw std::invalid_argument("a counter's item must be a DFA rule");
      }
      for (int32_t x : r.call_data)
        if (x < 0) throw std::invalid_argument("negative call entry");
    }
    for (size_t r = 0; r < rules_.size(); ++r)
      for (size_t k = 0; k < rules_[r].call_data.size(); k += 2) {
        const int32_t callee = rules_[r].call_data[k];
        if (callee >= static_cast<int32_t>(rules_.size())) throw std::invalid_argument("call to an unknown rule");
      }
    if (root < 0 || root >= static_cast<int32_t>(rules_.size())) throw std::invalid_argument("root out of range");
    if (counted_) {  // a counter's configurations are canonicalised by its item's shortest match
      std::lock_guard<std::recursive_mutex> g(mu_);
      ensure_item_mins();
    }
    for (const auto& t : stop_ids) stop_.push_back(t.cast<int64_t>());
    stop_mask_.assign(static_cast<size_t>(words_), 0);
    for (int64_t t : stop_) {
      if (t < 0 || t >= words_ * 32) throw std::invalid_argument("stop token id beyond the mask");
      stop_mask_[static_cast<size_t>(t >> 5)] |= uint32_t(1) << (t & 31);
    }
    stop_stored_.dense.store(stop_mask_.data(), std::memory_order_relaxed);
    if (V.max_id >= words_ * 32) throw std::invalid_argument("token id beyond the mask");
    if (V.plain != nullptr && V.plain_words != words_) throw std::invalid_argument("plain bitmasks of the wrong size");
    std::lock_guard<std::recursive_mutex> g(mu_);
    intern_config({}, false);  // DEAD == 0
    const int32_t zeros[256] = {0};
    slot_.store(kDead, rows_.append(zeros));  // all-zero row: dead stays dead
    initial_ = close({{root, 0, -1}});
  }

  // -- accessors (Python) -------------------------------------------------------------

  int32_t initial() const { return initial_; }
  int64_t num_configs() const override { return num_configs_.load(std::memory_order_acquire); }
  int64_t words() const override { return words_; }
  bool counted() const override { return counted_; }
  const uint32_t* stop_mask() const override { return stop_mask_.data(); }
  const StoredMask* stop_stored() const override { return &stop_stored_; }

  void check_cid(int64_t cid) const {
    if (cid < 0 || cid >= num_configs()) throw py::index_error("configuration id out of range");
  }
  bool is_accepting(int32_t cid) override {
    check_cid(cid);
    std::lock_guard<std::recursive_mutex> g(mu_);
    return accepting_[cid] != 0;
  }
  int64_t config_dist(int32_t cid) override {
    check_cid(cid);
    std::lock_guard<std::recursive_mutex> g(mu_);
    ensure_dists();
    return config_dist_[cid];
  }
  bool can_complete(int32_t cid) override {
    if (cid == kDead) return false;
    return trimmed_ || config_dist(cid) < kUnreachable;
  }
  i64 config_dists(const i64& cids) {
    i64 out(cids.size());
    std::lock_guard<std::recursive_mutex> g(mu_);
    ensure_dists();
    for (int64_t k = 0; k < cids.size(); ++k) {
      const int64_t c = cids.data()[k];
      if (c < 0 || c >= static_cast<int64_t>(config_dist_.size())) throw py::index_error("configuration id out of range");
      out.mutable_data()[k] = config_dist_[c];
    }
    return out;
  }
  py::tuple config_stacks(int32_t cid) {
    check_cid(cid);
    std::lock_guard<std::recursive_mutex> g(mu_);
    const ConfigStacks st = config_of(cid);
    py::tuple out(st.size());
    for (size_t k = 0; k < st.size(); ++k) out[k] = st[k];
    return out;
  }
  py::tuple stack(int32_t sid) {
    std::lock_guard<std::recursive_mutex> g(mu_);
    if (sid < 0 || sid >= static_cast<int32_t>(stacks_.size())) throw py::index_error("stack id out of range");
    const Frame& f = stacks_[sid];
    return py::make_tuple(f.r, f.s, f.p);
  }
  // Per rule its completion distances (a DFA rule: int64 per state; a counter: (lo, the
  // item's shortest match)), for the tests' comparison with the reference.
  py::list rule_distances() {
    std::lock_guard<std::recursive_mutex> g(mu_);
    ensure_dists();
    py::list out;
    for (size_t r = 0; r < loaded_rules_; ++r) {  // (not the twins: internal)
      const Rule& R = rules_[r];
      if (R.counter) {
        out.append(py::make_tuple(R.lo, R.item_min));
      } else {
        i64 d(static_cast<py::ssize_t>(R.dist.size()));
        std::copy(R.dist.begin(), R.dist.end(), d.mutable_data());
        out.append(d);
      }
    }
    return out;
  }
  int64_t stack_dist(int32_t sid) {
    std::lock_guard<std::recursive_mutex> g(mu_);
    if (sid < 0 || sid >= static_cast<int32_t>(stacks_.size())) throw py::index_error("stack id out of range");
    ensure_dists();
    return stack_dist_[sid];
  }
  py::dict stats() {
    std::lock_guard<std::recursive_mutex> g(mu_);
    py::dict d;
    d["configs"] = config_count();
    d["config_keys"] = config_ids_.size();
    d["stacks"] = stacks_.size();
    d["rows"] = rows_.size();
    d["frame_tables"] = frame_tables_.size();
    d["table_cells"] = table_cells_;
    d["masks"] = mask_store_.size();  // distinct masks stored
    d["mask_bytes"] = mask_bytes_;      // their memory (masks kept in part count their chunks)
    d["classes"] = V.class_count();     // the vocabulary's class_tokens bitmasks
    d["class_closures"] = class_closures_.load(std::memory_order_relaxed);  // masks by closure_class_walk
    d["killed_char_loops"] = killed_loops_.load(std::memory_order_relaxed);  // masks clearing killed characters
    d["text_classes"] = text_classes_.load(std::memory_order_relaxed);  // class masks taking text tokens in bulk
    d["level_walks"] = level_walks_.load(std::memory_order_relaxed);  // bounded strings decided by their levels
    d["text_totals"] = text_totals_.load(std::memory_order_relaxed);  // masks of states no character kills
    d["counter_shifts"] = shifts_.load(std::memory_order_relaxed);
    d["walk_twins"] = walk_twins_;
    d["first_classes"] = first_classes_.load(std::memory_order_relaxed);  // a first class, then a loop's
    d["chain_classes"] = chain_classes_.load(std::memory_order_relaxed);  // first characters of bounded classes
    d["frames_walks"] = frames_walks_.load(std::memory_order_relaxed);  // masks walked frame by frame
    d["split_frames"] = split_frames_.load(std::memory_order_relaxed);  // of those, beside other stacks' own mask
    d["bounded_walks"] = bounded_walks_.load(std::memory_order_relaxed);  // bounded strings' masks from their twins'  // bounded strings' steps found to repeat
    {
      std::lock_guard<std::mutex> r(runs_mu_);
      d["run_masks"] = runs_memo_.size();  // set_runs' memoised masks (as large as a mask each)
    }
    int64_t with_mask = 0;
    for (size_t c = 0; c < config_count(); ++c) with_mask += masks_.load(static_cast<int64_t>(c)) != nullptr;
    d["mask_configs"] = with_mask;  // configurations whose mask is known (sharing those)
    return d;
  }
  void set_stack_limit(int64_t n) override { stack_limit_.store(n, std::memory_order_relaxed); }

  // -- rows and steps (GIL released by the bindings) ---------------------------------------

  // The byte row of `cid`, computed if needed.
  const int32_t* row(int32_t cid) override {
    const int32_t s = slot_.load(cid);
    if (s >= 0) return rows_.at(s);
    std::lock_guard<std::recursive_mutex> g(mu_);
    int32_t again = slot_.load(cid);  // another thread may have computed it meanwhile
    if (again < 0) again = compute_row_locked(cid);
    return rows_.at(again);
  }
  bool has_row(int32_t cid) const { return slot_.load(cid) >= 0; }
  const StoredMask* mask_if_ready(int32_t cid) const override { return masks_.load(cid); }

  // The configuration after byte `b` alone, without computing the whole row: each counter
  // value is a configuration of its own, and whole rows would create every byte's successor.
  int32_t step_one(int32_t cid, int b) {
    std::lock_guard<std::recursive_mutex> g(mu_);
    const int64_t key = static_cast<int64_t>(cid) * 256 + b;
    auto it = single_.find(key);
    if (it != single_.end()) return it->second;
    std::vector<Frame> raw;
    for (int32_t sid : config_of(cid)) {
      const Frame f = stacks_[sid];
      const int32_t t = rules_[f.r].trans[f.s * 256 + b];
      if (t >= 0) raw.push_back({f.r, t, f.p});
    }
    const int32_t nxt = raw.empty() ? kDead : close_memo(raw);
    single_.emplace(key, nxt);
    return nxt;
  }

  int32_t step_bytes(int32_t cid, const uint8_t* data, int64_t n) override {
    for (int64_t k = 0; k < n; ++k) {
      const int32_t s = slot_.load(cid);
      if (s >= 0) {
        cid = rows_.at(s)[data[k]];
      } else if (counted_) {
        cid = step_one(cid, data[k]);
      } else if (SimpleFrame f; simple_frame(cid, f)) {
        // no row yet, one stack in a simple state: its DFA is stepped while the states stay
        // simple, and only the configuration where that ends is made (no rows on the way)
        const Rule& R = rules_[f.r];
        int32_t t = f.s;
        for (;; ++k) {
          t = R.trans[static_cast<int64_t>(t) * 256 + data[k]];
          if (t < 0) return kDead;
          if (k + 1 == n || !R.simple[t]) break;
        }
        cid = frame_config(f.r, t, f.p);
      } else {
        cid = row(cid)[data[k]];
      }
      if (cid == kDead) return kDead;
    }
    return cid;
  }

  int32_t step_if_ready(int32_t cid, const uint8_t* data, int64_t n) const override {
    for (int64_t k = 0; k < n; ++k) {
      const int32_t s = slot_.load(cid);
      if (s < 0) return -1;
      cid = rows_.at(s)[data[k]];
      if (cid == kDead) return kDead;
    }
    return cid;
  }

  // -- masks --------------------------------------------------------------------------

  // The packed allowed-token bitmask of `cid` (words_ uint32), computed on first use.
  const uint32_t* mask(int32_t cid) override {
    const StoredMask* hit = masks_.load(cid);
    if (hit == nullptr) {
      // Computed in a per-thread buffer and copied out only when new: about four in five
      // masks repeat one already stored, and a fresh allocation per mask (6 KB at 49K tokens,
      // 16 KB at 128K) cost a malloc, a free and first-touch page faults each time.
      thread_local std::vector<uint32_t> scratch;
      if (scratch.size() < static_cast<size_t>(words_)) scratch.resize(static_cast<size_t>(words_));
      hit = compute_into(cid, scratch.data());
    }
    return whole(*hit);
  }

  // Where the caller wants the bits in its own row (a fill), the row is the buffer: a first
  // visit's mask is then computed in place, not computed in scratch and copied there.
  void mask_into(int32_t cid, uint32_t* out) override {
    const StoredMask* hit = masks_.load(cid);
    if (hit == nullptr)
      compute_into(cid, out);
    else
      hit->copy_to(out, words_);
  }

  // All words of kept mask `m`: one kept in part is written out whole once, and kept so.
  const uint32_t* whole(const StoredMask& m) {
    const uint32_t* d = m.dense.load(std::memory_order_acquire);
    if (d != nullptr) return d;
    std::lock_guard<std::recursive_mutex> g(mu_);
    d = m.dense.load(std::memory_order_relaxed);
    if (d == nullptr) {
      made_whole_.emplace_back(new uint32_t[words_]);
      m.copy_to(made_whole_.back().get(), words_);
      mask_bytes_ += words_ * 4;
      d = made_whole_.back().get();
      m.dense.store(d, std::memory_order_release);
    }
    return d;
  }

  // mask() of a `cid` with no mask yet, computed in `buf` (words_ words, left holding it)
  const StoredMask* compute_into(int32_t cid, uint32_t* const buf) {
    std::vector<int32_t> canon;
    if (counted_) {
      canon = canonical_config(cid);
      std::lock_guard<std::recursive_mutex> g(mu_);
      auto it = mask_by_canon_.find(canon);
      if (it != mask_by_canon_.end()) {
        masks_.store(cid, it->second);
        it->second->copy_to(buf, words_);
        return it->second;
      }
    }
    std::memset(buf, 0, static_cast<size_t>(words_) * 4);
    ChunkMarks& marks = chunk_marks;
    marks.few = false;
    compute_mask(cid, buf);  // no lock held: other threads walk meanwhile
    const int64_t nzw = nonzero_words(words_);
    uint64_t nz_small[8] = {0};  // (up to 512 chunks: 262,144 tokens)
    std::vector<uint64_t> nz_large;
    uint64_t* nz = nz_small;
    if (nzw > 8) {
      nz_large.assign(static_cast<size_t>(nzw), 0);
      nz = nz_large.data();
    }
    const uint64_t h = marks.few && !marks.all ? hash_marked_words(buf, words_, marks.bits, nz) : hash_words(buf, words_, nz);
    std::lock_guard<std::recursive_mutex> g(mu_);
    const StoredMask* hit = masks_.load(cid);
    if (hit != nullptr) return hit;  // another thread finished first: same bits
    if (counted_) {
      auto it = mask_by_canon_.find(canon);
      if (it != mask_by_canon_.end()) {  // (an equal configuration's: same bits)
        masks_.store(cid, it->second);
        return it->second;
      }
    }
    // Configurations with equal masks share one copy: along an output most configurations
    // repeat a mask of another (inside a string value, after a member's colon, ...), about
    // four in five on MaskBench, and a mask is 6 KB at 49K tokens, 16 KB at 128K.
    const StoredMask* out = nullptr;
    for (auto [it, end] = mask_by_content_.equal_range(h); it != end; ++it) {
      const StoredMask& m = mask_store_[it->second];
      if (same_mask(m, buf, nz, words_)) {
        out = &m;
        break;
      }
    }
    if (out == nullptr) out = &keep(buf, nz, h);
    if (counted_) mask_by_canon_.emplace(std::move(canon), out);
    masks_.store(cid, out);
    return out;
  }

  // A new distinct mask (`nz`: hash_words' chunk bitmap of `bits`, `h` its hash) kept, under
  // mu_: in part when at most a quarter of its whole chunks have a set bit (a hit then writes
  // the row's zeros and those chunks, where a whole copy read all of it from cold memory).
  const StoredMask& keep(const uint32_t* bits, const uint64_t* nz, uint64_t h) {
    const int64_t nzw = nonzero_words(words_), chunks = words_ / 16;
    int64_t set = 0;
    for (int64_t k = 0; k < nzw; ++k) set += __builtin_popcountll(nz[k]);
    const bool part = set * 4 <= chunks;
    const int64_t kept_words = part ? set * 16 + (words_ - chunks * 16) : words_;
    // one block: the chunk bitmap, then the words (8-byte aligned)
    auto& m = mask_store_.emplace_back();
    m.block.reset(new uint64_t[static_cast<size_t>(nzw + (kept_words + 1) / 2)]);
    std::memcpy(m.block.get(), nz, static_cast<size_t>(nzw) * 8);
    m.nonzero = m.block.get();
    auto* words = reinterpret_cast<uint32_t*>(m.block.get() + nzw);
    if (part) {
      uint32_t* to = words;
      for (int64_t k = 0; k < nzw; ++k)
        for (uint64_t b = nz[k]; b != 0; b &= b - 1, to += 16)
          std::memcpy(to, bits + (k * 64 + __builtin_ctzll(b)) * 16, 64);
      std::memcpy(to, bits + chunks * 16, static_cast<size_t>(words_ - chunks * 16) * 4);
      m.packed = words;
    } else {
      std::memcpy(words, bits, static_cast<size_t>(words_) * 4);
      m.dense.store(words, std::memory_order_relaxed);  // (published with masks_)
    }
    mask_bytes_ += nzw * 8 + kept_words * 4;
    mask_by_content_.emplace(h, static_cast<int64_t>(mask_store_.size() - 1));
    return m;
  }

  // A shortest text completing the output from `cid` (false for DEAD or no completion): the
  // cheapest stack (the first in stack order among equals) completed frame by frame along
  // strictly decreasing distances, printable ASCII preferred among equally short bytes.
  bool shortest_completion(int32_t cid, std::string& out) override {
    out.clear();
    int32_t sid = -1;
    {
      std::lock_guard<std::recursive_mutex> g(mu_);
      ensure_dists();
      if (cid == kDead || config_dist_[cid] >= kUnreachable) return false;
      if (accepting_[cid]) return true;
      int64_t best = kUnreachable + 1;
      for (int32_t st : config_of(cid))
        if (stack_dist_[st] < best) {
          best = stack_dist_[st];
          sid = st;
        }
      for (; sid >= 0; sid = stacks_[sid].p) complete_rule(stacks_[sid].r, stacks_[sid].s, out);
    }
    const int32_t end = step_bytes(cid, reinterpret_cast<const uint8_t*>(out.data()), static_cast<int64_t>(out.size()));
    if (end == kDead || !is_accepting(end))  // distances are exact: not reached
      throw std::logic_error("internal: a shortest completion does not complete its configuration");
    return true;
  }

  // (allowed non-stop canonical tokens, configuration after each): the full trie collected.
  void successors(int32_t cid, std::vector<int32_t>& toks, std::vector<int32_t>& cfgs) {
    walk(cid, V.trie, nullptr, nullptr, &toks, &cfgs);
  }

 private:
  // -- construction -------------------------------------------------------------------

  void load_rule(const py::tuple& d) {
    Rule r;
    const std::string kind = d[0].cast<std::string>();
    if (kind == "counter") {
      r.counter = true;
      r.body = d[1].cast<int32_t>();
      r.lo = d[2].cast<int64_t>();
      r.hi = d[3].cast<int64_t>();
      if (r.lo < 0 || (r.hi >= 0 && r.hi < r.lo)) throw std::invalid_argument("bad counter bounds");
      r.num_states = 0;  // virtual: never a stack top, never a frame table
    } else if (kind == "dfa") {
      // the calls come as CSR arrays (per state, its (callee, return state) pairs): reading
      // them as Python tuples, one per state, was most of this constructor's time on large
      // schemas (thousands of states)
      i32 trans = d[1].cast<i32>();
      b8 fin = d[2].cast<b8>();  // (bool: the rule's own array, no converted copy)
      i64 call_off = d[3].cast<i64>();
      i32 call_edge = d[4].cast<i32>();
      if (trans.ndim() != 2 || trans.shape(1) != 256) throw std::invalid_argument("trans must be (n, 256)");
      r.num_states = static_cast<int32_t>(trans.shape(0));
      if (fin.shape(0) != r.num_states || call_off.shape(0) != r.num_states + 1)
        throw std::invalid_argument("rule tables differ in length");
      const int64_t m = call_edge.size() / 2;
      if (call_edge.size() && (call_edge.ndim() != 2 || call_edge.shape(1) != 2))
        throw std::invalid_argument("call_edge must be (k, 2)");
      const int64_t* co = call_off.data();
      if (co[0] != 0 || co[r.num_states] != m) throw std::invalid_argument("call offsets do not match the calls");
      for (int32_t s = 0; s < r.num_states; ++s)
        if (co[s] > co[s + 1]) throw std::invalid_argument("call offsets must not decrease");
      r.trans_ref = trans;
      r.trans = trans.data();
      r.has_bytes.assign(r.num_states, 0);
      r.none.resize(static_cast<size_t>(r.num_states));
      r.plain_to.resize(static_cast<size_t>(r.num_states) * kPlainTo);
      if (!rows_checked(r.trans, r.num_states, r.has_bytes.data(), r.none.data(), r.plain_to.data()))
        throw std::invalid_argument("transition out of range");
      r.final.assign(fin.data(), fin.data() + r.num_states);
      const int32_t* ce = call_edge.data();
      for (int64_t k = 0; k < m; ++k)
        if (ce[2 * k + 1] < 0 || ce[2 * k + 1] >= r.num_states) throw std::invalid_argument("return state out of range");
      r.call_data.assign(ce, ce + 2 * m);
      r.call_off.resize(static_cast<size_t>(r.num_states) + 1);
      for (int32_t s = 0; s <= r.num_states; ++s) r.call_off[s] = static_cast<int32_t>(co[s]);
      r.simple.assign(r.num_states, 0);
      for (int32_t s = 0; s < r.num_states; ++s)
        r.simple[s] = r.has_bytes[s] && co[s] == co[s + 1] && !r.final[s];
      r.bounded.reset(new std::atomic<uint64_t>[static_cast<size_t>(r.num_states)]());
      r.levels.reset(new std::atomic<uint64_t>[static_cast<size_t>(r.num_states)]());
      r.alike.reset(new std::atomic<uint8_t>[static_cast<size_t>(r.num_states)]());
    } else {
      throw std::invalid_argument("unknown rule kind " + kind);
    }
    rules_.push_back(std::move(r));
  }

  // -- rule tables --------------------------------------------------------------------

  bool final_at(int32_t r, int64_t s) const {
    const Rule& R = rules_[r];
    return R.counter ? s >= R.lo : R.final[s] != 0;
  }
  int64_t dist_at(int32_t r, int64_t s) const {
    const Rule& R = rules_[r];
    if (!R.counter) return R.dist[s];
    const int64_t left = R.lo - s;
    if (left <= 0) return 0;
    if (R.item_min >= kUnreachable || R.item_min > kUnreachable / left) return kUnreachable;
    return std::min(left * R.item_min, kUnreachable);
  }

  // Each rule's shortest match (bytes; a call costs its callee's), by `rule_min(r, minlen)`
  // for a DFA rule given its callees' current ones; sets the counters' item_min. A fixed
  // point over the rules, repeated for the rules whose callees' shortest matches changed,
  // callees first.
  template <class RuleMin>
  std::vector<int64_t> shortest_matches(RuleMin rule_min) {
    const auto n = static_cast<int32_t>(rules_.size());
    std::vector<std::vector<int32_t>> callers(n);  // the rules whose distances read rule c's shortest match
    for (int32_t r = 0; r < n; ++r) {
      const Rule& R = rules_[r];
      if (R.counter) callers[R.body].push_back(r);
      for (size_t k = 0; k < R.call_data.size(); k += 2) callers[R.call_data[k]].push_back(r);
    }
    for (auto& c : callers) {
      std::sort(c.begin(), c.end());
      c.erase(std::unique(c.begin(), c.end()), c.end());
    }
    // rank: lower for callees than for their callers outside cycles (the finishing order of a
    // depth-first walk along "is called by", reversed): without recursion each rule is then
    // computed once. Any order reaches the same least fixed point (shortest matches only
    // decrease), and each rule's last computation used its callees' final ones.
    std::vector<int32_t> rank(n), finish;
    {
      std::vector<uint8_t> seen(n, 0);
      std::vector<std::pair<int32_t, size_t>> stack;
      for (int32_t root = 0; root < n; ++root) {
        if (seen[root]) continue;
        seen[root] = 1;
        stack.emplace_back(root, 0);
        while (!stack.empty()) {
          auto& [v, k] = stack.back();
          if (k < callers[v].size()) {
            const int32_t w = callers[v][k++];
            if (!seen[w]) {
              seen[w] = 1;
              stack.emplace_back(w, 0);
            }
          } else {
            finish.push_back(v);
            stack.pop_back();
          }
        }
      }
      for (int32_t i = 0; i < n; ++i) rank[finish[n - 1 - i]] = i;
    }
    std::vector<int64_t> minlen(n, kUnreachable);
    std::vector<uint8_t> queued(n, 1);
    using Item = std::pair<int32_t, int32_t>;  // (rank, rule)
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> pending;
    for (int32_t r = 0; r < n; ++r) pending.emplace(rank[r], r);
    while (!pending.empty()) {
      const int32_t r = pending.top().second;
      pending.pop();
      queued[r] = 0;
      Rule& R = rules_[r];
      int64_t d0 = kUnreachable;
      if (R.counter) {
        R.item_min = minlen[R.body];
        d0 = dist_at(r, 0);
      } else if (R.num_states > 0) {
        d0 = rule_min(r, minlen);
      }
      if (d0 != minlen[r]) {
        minlen[r] = d0;
        for (int32_t c : callers[r])
          if (!queued[c]) {
            queued[c] = 1;
            pending.emplace(rank[c], c);
          }
      }
    }
    return minlen;
  }

  // The counters' item_min alone (a counted grammar's constructor: its configurations are
  // canonicalised by them): each rule's shortest match by a search forward from its start
  // that stops at the first final state, not every state's distance to the end (those are
  // computed when first asked for). Computing them all was 4 of o359's 8 ms of index.
  void ensure_item_mins() {
    fa::ShortestScratch scratch;
    shortest_matches([&](int32_t r, const std::vector<int64_t>& minlen) {
      const Rule& R = rules_[r];
      return fa::shortest_match(R.trans, R.final.data(), R.num_states, R.call_off.data(), R.call_data.data(),
                                minlen.data(), static_cast<int64_t>(rules_.size()), kUnreachable, scratch);
    });
  }

  // Completion distances: per rule state the fewest bytes to the rule's end, then per stack
  // and configuration, computed when first asked for (under mu_). Shortest completions, token
  // budgets and the name checks that a configuration can still end read them; masking alone
  // never does, and computing them for every grammar was ~7% of compiling a median schema.
  // One Dijkstra per rule (fa::rule_distances) in the fixed point of shortest_matches.
  void ensure_dists() {
    if (dists_ready_) return;
    shortest_matches([&](int32_t r, const std::vector<int64_t>& minlen) {
      Rule& R = rules_[r];
      R.dist.resize(static_cast<size_t>(R.num_states));
      fa::rule_distances(R.trans, R.final.data(), R.num_states, R.call_off.data(), R.call_data.data(), minlen.data(),
                         static_cast<int64_t>(rules_.size()), kUnreachable, R.dist.data());
      return R.dist[0];
    });
    // the stacks and configurations interned so far (a parent stack before its children)
    for (size_t sid = 0; sid < stacks_.size(); ++sid) stack_dist_[sid] = frame_dist(stacks_[sid]);
    for (size_t c = 0; c < config_count(); ++c) {
      const ConfigStacks st = config_of(static_cast<int32_t>(c));
      config_dist_[c] = stacks_dist(st.begin(), st.size(), accepting_[c] != 0);
    }
    dists_ready_ = true;
  }
  // a new stack's distance: its frame's, plus its parent's (interned first, so known)
  int64_t frame_dist(const Frame& f) const {
    return std::min(dist_at(f.r, f.s) + (f.p >= 0 ? stack_dist_[f.p] : 0), kUnreachable);
  }
  int64_t stacks_dist(const int32_t* stacks, size_t count, bool accepting) const {
    if (accepting) return 0;
    int64_t d = kUnreachable;
    for (size_t k = 0; k < count; ++k) d = std::min(d, stack_dist_[stacks[k]]);
    return d;
  }

  // Bytes along a shortest path from state `s` of rule `r` to the rule's end (iterative:
  // calls are pushed, not recursed into).
  void complete_rule(int32_t r, int64_t s, std::string& out) const {
    static const std::vector<uint8_t> order = [] {  // printable ASCII first: completions read naturally
      std::vector<uint8_t> v;
      for (int b = 0x20; b < 0x7F; ++b) v.push_back(static_cast<uint8_t>(b));
      for (int b = 0; b < 0x20; ++b) v.push_back(static_cast<uint8_t>(b));
      for (int b = 0x7F; b < 0x100; ++b) v.push_back(static_cast<uint8_t>(b));
      return v;
    }();
    std::vector<std::pair<int32_t, int64_t>> work{{r, s}};
    while (!work.empty()) {
      std::tie(r, s) = work.back();
      work.pop_back();
      const Rule& R = rules_[r];
      int64_t d = dist_at(r, s);
      while (d > 0) {
        int next = -1;
        if (!R.counter) {
          const int32_t* row = R.trans + s * 256;
          for (uint8_t b : order)
            if (row[b] >= 0 && R.dist[row[b]] == d - 1) {
              next = b;
              break;
            }
        }
        if (next >= 0) {
          out.push_back(static_cast<char>(next));
          s = R.trans[s * 256 + next];
          --d;
          continue;
        }
        bool called = false;
        auto try_call = [&](int32_t callee, int64_t ret) {
          if (called || dist_at(callee, 0) + dist_at(r, ret) != d) return;
          work.emplace_back(r, ret);
          work.emplace_back(callee, 0);
          called = true;
        };
        if (R.counter) {  // counters.CounterRule.calls_at
          if (R.hi < 0)
            try_call(R.body, std::min(s + 1, R.lo));
          else if (s < R.hi)
            try_call(R.body, s + 1);
        } else {
          for (int32_t k = R.call_off[s]; k < R.call_off[s + 1]; ++k) try_call(R.call_data[2 * k], R.call_data[2 * k + 1]);
        }
        if (!called) throw std::logic_error("internal: inconsistent completion distances");
        break;
      }
    }
  }

  // -- interning (under the lock) -----------------------------------------------------

  // The id of stack `f` if it was interned, else -1 (`h`: its frame_hash).
  int32_t find_stack(const Frame& f, uint64_t h) const {
    return stack_ids_.find(h, [&](int32_t sid) { return stacks_[static_cast<size_t>(sid)] == f; });
  }

  int32_t stack_id(const Frame& f) {
    const uint64_t h = frame_hash(f);
    const int32_t hit = find_stack(f, h);
    if (hit >= 0) return hit;
    const auto sid = static_cast<int32_t>(stacks_.size());
    stacks_.push_back(f);
    stack_dist_.push_back(dists_ready_ ? frame_dist(f) : 0);
    stack_ids_.insert(h, sid);
    return sid;
  }

  static uint64_t config_hash(const std::vector<int32_t>& stacks, bool accepting) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (stacks.size() << 1 | (accepting ? 1 : 0));
    for (int32_t x : stacks) h = mix64(h ^ static_cast<uint32_t>(x));
    return h;
  }

  // (by reference: nearly every configuration a closure makes exists already, and is not copied)
  int32_t intern_config(const std::vector<int32_t>& stacks, bool accepting) {
    const uint64_t h = config_hash(stacks, accepting);
    const int32_t hit = config_ids_.find(
        h, [&](int32_t c) { return (accepting_[c] != 0) == accepting && config_of(c).equals(stacks); });
    if (hit >= 0) return hit;
    const auto cid = static_cast<int32_t>(config_count());
    slot_.ensure(cid);
    masks_.ensure(cid);
    config_data_.insert(config_data_.end(), stacks.begin(), stacks.end());
    config_off_.push_back(static_cast<int64_t>(config_data_.size()));
    accepting_.push_back(accepting ? 1 : 0);
    config_dist_.push_back(dists_ready_ ? stacks_dist(stacks.data(), stacks.size(), accepting) : 0);
    config_ids_.insert(h, cid);
    // Also in a grammar with counters: a frame in a simple state closes to itself alone, and
    // each byte it reads leads to the one frame (r, t, p) that step_one would close. Left out,
    // one bounded repeat anywhere in a schema sent every string and name of it through
    // configurations (an e-mail's host labels beside a "maxLength": 250: 400-430 us a first
    // mask, about 100 stepped by DFA rows). A counter frame has no DFA row, and a counter's
    // item (a character of a bounded string) stays a configuration too: its walk leaves the
    // frame at every character's end, where walk_equiv keeps the rows few, and stepped by
    // DFA rows each end was a frame lookup under the lock (o359's name at Llama-3: 1.07 ms
    // against 0.61-0.75).
    if (stacks.size() == 1) {
      const Frame& f = stacks_[stacks[0]];
      if (!rules_[f.r].counter && rules_[f.r].simple[f.s] &&
          (f.p < 0 || !rules_[stacks_[static_cast<size_t>(f.p)].r].counter)) {
        virt_p_.store(cid, f.p);
        virt_.store(cid, (static_cast<int64_t>(f.r) << 32) | static_cast<uint32_t>(f.s));
      }
    }
    num_configs_.store(cid + 1, std::memory_order_release);  // published last
    return cid;
  }

  // Frames a closure has met: a short list searched in place while small (nearly every
  // closure: a value's few calls and returns), a hash set past that.
  struct SeenFrames {
    std::vector<Frame> few;
    std::unordered_set<Frame, FrameHash> many;
    bool big = false;
    void clear() {
      few.clear();
      if (big) many.clear();
      big = false;
    }
    bool insert(const Frame& f) {
      if (big) return many.insert(f).second;
      for (const Frame& g : few)
        if (g == f) return false;
      few.push_back(f);
      if (few.size() > 32) {
        many.insert(few.begin(), few.end());
        big = true;
      }
      return true;
    }
  };

  // Expand calls and returns until every stack top can read a byte (or has ended).
  int32_t close(const std::vector<Frame>& raw) {
    // scratch kept across calls (under the lock; close() never re-enters itself)
    SeenFrames& seen = close_seen_;
    seen.clear();
    std::vector<Frame>& work = close_work_;
    work.assign(raw.begin(), raw.end());
    std::vector<int32_t>& tops = close_tops_;
    tops.clear();
    bool accepting = false;
    while (!work.empty()) {
      const Frame f = work.back();
      work.pop_back();
      if (!seen.insert(f)) continue;
      const Rule& R = rules_[f.r];
      if (!R.counter && R.has_bytes[f.s]) tops.push_back(stack_id(f));
      if (final_at(f.r, f.s)) {
        if (f.p < 0)
          accepting = true;
        else
          work.push_back(stacks_[f.p]);
      }
      if (R.counter) {
        if (R.hi < 0)
          work.push_back({R.body, 0, stack_id({f.r, std::min(f.s + 1, R.lo), f.p})});
        else if (f.s < R.hi)
          work.push_back({R.body, 0, stack_id({f.r, f.s + 1, f.p})});
      } else {
        for (int32_t k = R.call_off[f.s]; k < R.call_off[f.s + 1]; ++k)
          work.push_back({R.call_data[2 * k], 0, stack_id({f.r, R.call_data[2 * k + 1], f.p})});
      }
    }
    return intern_tops(tops, accepting);
  }

  // The configuration of these stack tops (sorted and deduplicated here, in place), past the
  // stack limit's check where counters may multiply them.
  int32_t intern_tops(std::vector<int32_t>& tops, bool accepting) {
    std::sort(tops.begin(), tops.end());
    tops.erase(std::unique(tops.begin(), tops.end()), tops.end());
    if (counted_ && tops.size() > 1) {  // bounded stacks per configuration
      prune_subsumed(tops);
      const auto n = static_cast<int64_t>(tops.size());
      if (n > stack_limit_.load(std::memory_order_relaxed)) throw StackLimitExceeded{n};
    }
    return intern_config(tops, accepting);
  }

  // The same raw frames always close to the same configuration. Memo entries keep their raw
  // frames in one flat array: entry k's are closed_frames_[closed_off_[k] .. closed_off_[k + 1]].
  int32_t close_memo(const std::vector<Frame>& raw) {
    if (raw.size() > 1 && all_simple(raw)) return close_simple(raw);
    uint64_t h = 0x2545F4914F6CDD1Dull ^ raw.size();
    for (const Frame& f : raw) h = mix64(h ^ frame_hash(f));
    const int32_t e = closed_.find(h, [&](int32_t k) {
      const int64_t lo = closed_off_[k], n = closed_off_[k + 1] - lo;
      return n == static_cast<int64_t>(raw.size()) && std::equal(raw.begin(), raw.end(), closed_frames_.begin() + lo);
    });
    if (e >= 0) return closed_cid_[e];
    const int32_t cid = close(raw);
    const auto k = static_cast<int32_t>(closed_cid_.size());
    closed_frames_.insert(closed_frames_.end(), raw.begin(), raw.end());
    closed_off_.push_back(static_cast<int64_t>(closed_frames_.size()));
    closed_cid_.push_back(cid);
    closed_.insert(h, k);
    return cid;
  }

  bool all_simple(const std::vector<Frame>& raw) const {
    for (const Frame& f : raw) {
      const Rule& R = rules_[f.r];
      if (R.counter || !R.simple[static_cast<size_t>(f.s)]) return false;
    }
    return true;
  }

  // close() of frames that all read a byte, call nothing and cannot end (the configurations
  // a row makes inside the member names of several object variants at once, most of a
  // first-visit fill at a name's start): each frame is its own stack, so the configuration is
  // their stacks, interned without the closure's walk and without a memo entry (the lookup
  // of the stacks costs about what the memo's would, and nearly every such set is met once)
  int32_t close_simple(const std::vector<Frame>& raw) {
    std::vector<int32_t>& tops = close_tops_;
    tops.clear();
    for (const Frame& f : raw) tops.push_back(stack_id(f));
    return intern_tops(tops, false);
  }

  // counters.prune_subsumed: drop stacks that differ from another only in a smaller value of
  // one unbounded counter frame (same frames above it, same parent below): the larger count
  // accepts every continuation the smaller does.
  void prune_subsumed(std::vector<int32_t>& tops) const {
    std::unordered_map<std::vector<int64_t>, std::pair<int64_t, int32_t>, VecHash> best;
    std::vector<int32_t> keep;
    std::unordered_set<int32_t> dropped;
    for (int32_t sid : tops) {
      std::vector<int64_t> above;
      Frame f = stacks_[sid];
      while (true) {
        if (f.p < 0 || static_cast<int>(above.size() / 2) >= kPruneDepth) {
          keep.push_back(sid);
          break;
        }
        const Frame parent = stacks_[f.p];
        above.push_back(f.r);
        above.push_back(f.s);
        const Rule& P = rules_[parent.r];
        if (P.counter && P.hi < 0) {
          std::vector<int64_t> key = above;
          key.push_back(parent.r);
          key.push_back(parent.p);
          auto it = best.find(key);
          if (it == best.end() || parent.s > it->second.first) {
            if (it != best.end()) dropped.insert(it->second.second);
            best[key] = {parent.s, sid};
            keep.push_back(sid);
          }
          break;
        }
        f = parent;
      }
    }
    tops.clear();
    for (int32_t sid : keep)
      if (!dropped.count(sid)) tops.push_back(sid);
    std::sort(tops.begin(), tops.end());
  }

  // -- rows (under the lock) ----------------------------------------------------------

  // Successor configuration per state of rule r under parent stack p (-1: not yet known; the
  // last entry, read for a rejected byte, is DEAD); nullptr past the cells' budget.
  int32_t* frame_table(int32_t r, int32_t p) {
    const int64_t key = (static_cast<int64_t>(r) << 32) | static_cast<uint32_t>(p);
    auto it = frame_tables_.find(key);
    if (it != frame_tables_.end()) return it->second.data();
    const int64_t n = rules_[r].num_states;
    if (table_cells_ + n >= table_budget_) return nullptr;
    std::vector<int32_t> table(n + 1, -1);
    table[n] = kDead;
    table_cells_ += n + 1;
    return frame_tables_.emplace(key, std::move(table)).first->second.data();
  }

  // Whether some bit of [b, e) is set in a 256-bit set.
  static bool any_bit(const std::array<uint64_t, 4>& bits, int b, int e) {
    for (int w = b >> 6; w <= (e - 1) >> 6; ++w) {
      const int lo = std::max(b, w * 64) - w * 64, hi = std::min(e, w * 64 + 64) - w * 64;
      const uint64_t span = (hi == 64 ? ~uint64_t(0) : (uint64_t(1) << hi) - 1) & ~((uint64_t(1) << lo) - 1);
      if ((bits[w] & span) != 0) return true;
    }
    return false;
  }

  // One past the last byte of the run of `targets[b]` that starts at `b` (at most `stop`).
  static int run_end(const int32_t* targets, int b, int stop = 256) {
    const int32_t t = targets[b];
    int e = b + 1;
#if defined(__SSE2__)
    const __m128i want = _mm_set1_epi32(t);
    for (; e + 4 <= stop; e += 4) {
      const __m128i got = _mm_loadu_si128(reinterpret_cast<const __m128i*>(targets + e));
      const int same = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(got, want)));
      if (same != 0xF) return e + __builtin_ctz(~same & 0xF);
    }
#endif
    while (e < stop && targets[e] == t) ++e;
    return e;
  }

  // go(t) for the target of each run of `row` over level L's range that holds a byte some token
  // contains (runs of one target are the rule: a continuation range mostly leads to one state)
  template <class Go>
  static void each_level_target(const int32_t* row, const Vocab::MbLevel& L, Go&& go) {
    for (int b = L.lo, e; b < L.hi; b = e) {
      e = run_end(row, b, L.hi);
      if (any_bit(L.used, b, e)) go(row[b]);
    }
  }
  static bool rejects_used(const ByteSet& none, const Vocab::MbLevel& L) {
    return ((none[0] & L.used[0]) | (none[1] & L.used[1]) | (none[2] & L.used[2]) | (none[3] & L.used[3])) != 0;
  }

  // New configurations are closed and interned in the order a walk over the bytes 0..255
  // meets them. The row is read byte by byte: byte classes per rule (bytes alike in every
  // state) would cost a pass over the rule's whole table, which for a large rule met in a few
  // rows only (the member-name DFA of a big object) was most of the work.
  int32_t compute_row_locked(int32_t cid) {
    structgen::LazyGil::release_here();  // (a row closes up to 256 successors)
    int32_t row[256];
    // a copy (close() interns more configs, which may move config_data_) into scratch kept
    // across calls, like the vectors below: allocating them per row was a tenth of its cost
    std::vector<int32_t>& stacks = row_stacks_;
    const ConfigStacks own = config_of(cid);
    stacks.assign(own.begin(), own.end());
    if (stacks.empty()) std::fill(row, row + 256, kDead);
    if (stacks.size() == 1) {
      // one stack: the row is its DFA row mapped through "state t of this rule under this
      // parent -> configuration", filled on demand; a run of one target (most of a DFA row)
      // takes one lookup and one fill (its end found four bytes per compare: a branch per
      // byte was most of this function's own cost)
      const Frame f = stacks_[stacks[0]];
      const Rule& R = rules_[f.r];
      const int32_t* targets = R.trans + f.s * 256;
      int32_t* table = frame_table(f.r, f.p);
      std::unordered_map<int32_t, int32_t> done;  // past the tables' budget: each target closed once
      for (int b = 0; b < 256;) {
        const int32_t t = targets[b];
        const int e = run_end(targets, b);
        int32_t v;
        if (t < 0) {
          v = kDead;
        } else if (table != nullptr) {
          if (table[t] < 0) table[t] = close_one({f.r, t, f.p});
          v = table[t];
        } else {
          auto it = done.find(t);
          v = it != done.end() ? it->second : (done[t] = close_one({f.r, t, f.p}));
        }
        std::fill(row + b, row + e, v);
        b = e;
      }
    } else if (!stacks.empty()) {
      // group the bytes by the tuple of per-frame targets (usually a handful of groups), then
      // close each group once. Most bytes have the tuple of the byte before: those are found
      // frame by frame first (four bytes per compare), and only the others are grouped.
      const size_t k = stacks.size();
      std::vector<Frame>& frames = row_frames_;
      std::vector<const int32_t*>& targets = row_targets_;
      frames.clear();
      targets.clear();
      for (int32_t sid : stacks) {
        frames.push_back(stacks_[sid]);
        targets.push_back(rules_[frames.back().r].trans + frames.back().s * 256);
      }
      uint64_t change[4] = {1, 0, 0, 0};  // bytes whose tuple may differ from the byte before's
      for (const int32_t* t : targets) fa::mark_changes(t, change);
      std::vector<int32_t>& reps = row_reps_;  // g * k targets
      std::vector<int32_t>& after = row_after_;
      std::vector<int32_t>& col = row_col_;
      std::vector<uint64_t>& hashes = row_hashes_;  // of each group's tuple
      hashes.clear();
      reps.clear();
      after.clear();
      col.assign(k, 0);
      int b = 0;  // the change point being filled: its tuple's configuration up to the next one
      for (int word = 0; word < 4; ++word) {
        for (uint64_t bits = change[word]; bits != 0; bits &= bits - 1) {
          const int next = word * 64 + __builtin_ctzll(bits);
          if (next > b) std::fill(row + b + 1, row + next, row[b]);
          b = next;
          uint64_t h = 0x9E3779B97F4A7C15ull;
          for (size_t j = 0; j < k; ++j) {
            col[j] = targets[j][b];
            h = mix64(h ^ static_cast<uint32_t>(col[j]));
          }
          // groups found by their tuple's hash first: a name's state has a change point and
          // a group per letter, and comparing every tuple with every group (a memcmp call
          // each) was a tenth of a member-name start's fill
          size_t g = 0;
          const size_t groups = after.size();
          for (; g < groups; ++g)
            if (hashes[g] == h && std::equal(col.begin(), col.end(), reps.begin() + g * k)) break;
          if (g == groups) {
            hashes.push_back(h);
            reps.insert(reps.end(), col.begin(), col.end());
            std::vector<Frame>& raw = row_raw_;
            raw.clear();
            for (size_t j = 0; j < k; ++j)
              if (col[j] >= 0) raw.push_back({frames[j].r, col[j], frames[j].p});
            after.push_back(raw.empty() ? kDead : close_memo(raw));
          }
          row[b] = after[g];
        }
      }
      std::fill(row + b + 1, row + 256, row[b]);
    }
    const auto slot = static_cast<int32_t>(rows_.append(row));
    slot_.store(cid, slot);  // published last: a reader finding it sees the row
    return slot;
  }

  bool simple_frame(int32_t cid, SimpleFrame& f) const override {
    if (slot_.load(cid) >= 0) return false;
    const int64_t v = virt_.load(cid);
    if (v < 0) return false;
    f.r = static_cast<int32_t>(v >> 32);
    f.s = static_cast<int32_t>(v & 0xFFFFFFFF);
    f.p = virt_p_.load(cid);
    return true;
  }
  const int32_t* dfa_row(const SimpleFrame& f) const override {
    return rules_[f.r].trans + static_cast<int64_t>(f.s) * 256;
  }
  bool state_simple(int32_t r, int32_t s) const override { return rules_[r].simple[s] != 0; }

  // The configuration of frame (r, t, p) alone: the entry a byte row of a configuration in
  // frame (r, s, p) holds for target state t (found through the same frame table).
  int32_t frame_config(int32_t r, int32_t t, int32_t p) override {
    std::lock_guard<std::recursive_mutex> g(mu_);
    int32_t* table = frame_table(r, p);
    if (table == nullptr) return close_one({r, t, p});
    if (table[t] < 0) table[t] = close_one({r, t, p});
    return table[t];
  }

  // close_memo of one frame, without a vector allocated per call (most of a walk's closes)
  int32_t close_one(const Frame& f) {
    const Rule& R = rules_[f.r];
    if (!R.counter && R.simple[static_cast<size_t>(f.s)]) {
      // a state that reads a byte, calls nothing and cannot end closes to itself alone: its
      // configuration is interned without the closure and its memo entry (the frame tables
      // that call this keep it), a row's successors inside a name are nearly all such states
      one_stack_.assign(1, stack_id(f));
      return intern_config(one_stack_, false);
    }
    row_raw_.assign(1, f);
    return close_memo(row_raw_);
  }

  // -- counters -----------------------------------------------------------------------

  // How many items one token can complete at most: its bytes over the item's shortest match.
  int64_t counter_reach(const Rule& c) const {
    const int64_t shortest = std::max<int64_t>(1, c.item_min);  // (the body's shortest match)
    return V.trie.max_depth / shortest + 1;
  }

  static int64_t canonical_count(int64_t k, int64_t lo, int64_t hi, int64_t reach) {
    if (hi >= 0 && hi - k <= reach) return k;
    if (k >= lo) return lo;  // past lo and far from hi (or unbounded: saturated at lo already)
    if (lo - k <= reach) return k;
    return lo - reach - 1;
  }

  int32_t canonical_stack(int32_t sid) {
    auto hit = canon_stack_.find(sid);
    if (hit != canon_stack_.end()) return hit->second;
    std::vector<int32_t> chain;  // iterative: recursive grammars build deep stacks
    while (sid >= 0 && !canon_stack_.count(sid)) {
      chain.push_back(sid);
      sid = stacks_[sid].p;
    }
    int32_t below = sid >= 0 ? canon_stack_[sid] : -1;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const Frame f = stacks_[*it];
      const Rule& R = rules_[f.r];
      int64_t k = f.s;
      if (R.counter) k = canonical_count(k, R.lo, R.hi, counter_reach(R));
      below = canon_stack_[*it] = stack_id({f.r, k, below});
    }
    return below;
  }

  // The configuration with every counter replaced by its class representative: equal for
  // configurations that allow the same tokens (counters.canonical_count).
  std::vector<int32_t> canonical_config(int32_t cid) {
    std::lock_guard<std::recursive_mutex> g(mu_);
    std::vector<int32_t> out;
    for (int32_t sid : config_of(cid)) out.push_back(canonical_stack(sid));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    out.push_back(accepting_[cid]);
    return out;
  }

  // -- the walk -----------------------------------------------------------------------

  // A walk's frames stepped by their DFA (walk_range), per depth d: when row_at[d] is a DFA
  // row (its entries DFA states, -1 dead), the frame's rule, parent stack and the rule's
  // `simple` flags and table; simple == nullptr when row_at[d] is a configuration's row.
  struct VirtAt {
    const uint8_t* simple;
    const int32_t* trans;  // the rule's table
    int32_t r, p;
  };
  // Row pointers of the configurations one walk meets, direct-mapped by id. The walk needs the
  // row of the configuration at every inner trie node it enters (most of them: 69% of
  // SmolLM2's nodes), nearly always one of a few configurations, and row() itself costs two
  // segment lookups and a call.
  struct RowCache {
    static constexpr int kSlots = 256;
    int32_t id[kSlots];
    const int32_t* row[kSlots];
    int8_t loops[kSlots];  // loops on every plain byte: 1 yes, 0 no, -1 not asked yet
    uint64_t classes[kSlots];  // the byte classes it loops on in whole (kUnknownClasses: not asked yet)
    // the same two answers for DFA states a walk steps by their rows (key r << 32 | s, -1 none)
    static constexpr int kVSlots = 64;
    int64_t vkey[kVSlots];
    int8_t vloops[kVSlots];
    int8_t vtotal[kVSlots];  // (the subtracting walk's plain_total of the frame)
    uint64_t vclasses[kVSlots];
    // the configurations of frames (r, t, p) a walk leaves the DFA rows at (frame_config)
    int32_t fkey[kVSlots][3];
    int32_t fcid[kVSlots];
    VirtAt* virt_at = nullptr;  // the walk's (virt_at_buffer(), read once per walk)
    // Rejected nodes are passed by next_sibling() (Trie::sib), not by their subtree's end: in
    // walks from a configuration that takes a few first bytes (inside a name or a literal),
    // where each row takes one byte or two of a node's few dozen children. In walks taking
    // most bytes most siblings are taken, and the lookup was a cache miss more per rejection
    // (a pattern's fixed-length string at 128K tokens: about a sixth slower).
    bool siblings = false;
    // walk_equiv's answers, direct-mapped by id like the rows (filled when first asked: only
    // walks of grammars with bounded counters ask)
    bool equiv_ready = false;
    int32_t eq_id[kSlots];
    int32_t eq_to[kSlots];
    int32_t eq_slack[kSlots];
    RowCache() {
      std::fill(id, id + kSlots, kDead);  // DEAD is never looked up
      std::fill(vkey, vkey + kVSlots, int64_t(-1));
      for (auto& k : fkey) k[0] = -1;
    }
  };
  // walk_equiv(cid, bytes) through the walk's cache
  int32_t cached_equiv(RowCache& c, int32_t cid, int64_t bytes) {
    if (!c.equiv_ready) {
      std::fill(c.eq_id, c.eq_id + RowCache::kSlots, kDead);  // (DEAD is never asked)
      c.equiv_ready = true;
    }
    const int h = cid & (RowCache::kSlots - 1);
    if (c.eq_id[h] != cid) {
      walk_equiv(cid, 0);  // (memoised: the twin and its slack below)
      c.eq_id[h] = cid;
      c.eq_to[h] = equiv_.load(cid);
      c.eq_slack[h] = equiv_slack_.load(cid);
    }
    return c.eq_slack[h] > bytes ? c.eq_to[h] : cid;
  }
  // the bytes of the longest token below node `i` of `t` at depth `depth` (past its byte)
  int64_t bytes_below(const Trie& t, int64_t i, int depth) const {
    if (&t == &V.trie && V.height[static_cast<size_t>(i)] < 255) return V.height[static_cast<size_t>(i)];
    return t.max_depth - depth;
  }
  const int32_t* cached_row(RowCache& c, int32_t cid) {
    const int h = cid & (RowCache::kSlots - 1);
    if (c.id[h] == cid) return c.row[h];
    const int32_t* r = row(cid);
    c.id[h] = cid;
    c.row[h] = r;
    c.loops[h] = -1;
    c.classes[h] = kUnknownClasses;
    return r;
  }
  static constexpr uint64_t kUnknownClasses = ~uint64_t(0);  // no configuration loops on all 48
  // Smaller subtrees are walked: asking a configuration's classes costs about what walking
  // this many nodes does.
  static constexpr int64_t kMinClassSkip = 16;
  // bounded_takes() is tried on smaller subtrees: below a bounded string's first characters
  // nearly every subtree of more than a few nodes holds a token longer than the bound, and
  // the subtrees beside the paths to those tokens are small
  static constexpr int64_t kMinBoundedSkip = 3;
  // ... nor on subtrees higher than this (walked: bounded_classes searches no deeper), and no
  // state is searched for a subtree of hardly more nodes than its height: a chain (a run of
  // hyphens or digits, one token every few bytes) whose every level is a state new to the
  // walk (each position of a host name's label), each searched anew for a few nodes.
  static constexpr int kMaxBoundedHeight = 63;
  static bool bounded_worth(int64_t nodes, int h) { return nodes > 2 * h; }
  // The byte classes all of whose bytes lead row `r` (of `cid`) back to `cid`. Asked of every
  // configuration a trie walk goes through, and most loop on no byte at all: the bytes that
  // loop are found first as a 256-bit set (four lanes per SSE2 compare).
  static uint64_t loop_classes(const int32_t* r, int32_t cid) {
    uint64_t eq[4];
    fa::equal_bits(r, cid, eq);
    return classes_within(eq);
  }
  // The byte classes all of whose bytes are in `eq`.
  static uint64_t classes_within(const uint64_t* eq) {
    if ((eq[0] | eq[1] | eq[2] | eq[3]) == 0) return 0;
    const auto& masks = class_masks();
    uint64_t in = 0;
    for (size_t c = 0; c < masks.size(); ++c) {
      const auto& m = masks[c];
      if ((eq[0] & m[0]) == m[0] && (eq[1] & m[1]) == m[1] && (eq[2] & m[2]) == m[2] && (eq[3] & m[3]) == m[3])
        in |= uint64_t(1) << c;
    }
    return in;
  }
  // The byte classes (byte_class()) on every byte of which `cid` goes back to itself.
  uint64_t cached_classes(RowCache& c, int32_t cid) {
    const int32_t* r = cached_row(c, cid);
    uint64_t& known = c.classes[cid & (RowCache::kSlots - 1)];
    if (known == kUnknownClasses) known = loop_classes(r, cid);
    return known;
  }
  // cached_loops and cached_classes of state `s` of rule `r`, whose DFA row is `row`
  int cached_vslot(RowCache& c, int32_t r, int32_t s) {
    const int64_t key = (static_cast<int64_t>(r) << 32) | static_cast<uint32_t>(s);
    const int h = static_cast<int>((static_cast<uint32_t>(s) * 0x9E3779B1u ^ static_cast<uint32_t>(r)) >> 26);  // (64 slots)
    if (c.vkey[h] != key) {
      c.vkey[h] = key;
      c.vloops[h] = -1;
      c.vtotal[h] = -1;
      c.vclasses[h] = kUnknownClasses;
    }
    return h;
  }

  int32_t cached_frame_config(RowCache& c, int32_t r, int32_t t, int32_t p) {
    const uint32_t mixed =
        (static_cast<uint32_t>(t) * 0x9E3779B1u) ^ (static_cast<uint32_t>(p) * 0x85EBCA6Bu) ^ static_cast<uint32_t>(r);
    const int h = static_cast<int>(mixed >> 26);  // (kVSlots == 64)
    int32_t* k = c.fkey[h];
    if (k[0] != r || k[1] != t || k[2] != p) {
      c.fcid[h] = frame_config(r, t, p);
      k[0] = r;
      k[1] = t;
      k[2] = p;
    }
    return c.fcid[h];
  }
  // whether every plain byte of `row` is `to` (a configuration's row and its id, or a DFA row
  // and its state: a loop on every plain byte)
  static bool plain_loop(const int32_t* row, int32_t to) {
    for (uint8_t b : plain_bytes())
      if (row[b] != to) return false;
    return true;
  }
  bool cached_vloops(RowCache& c, int32_t r, int32_t s, const int32_t* row) {
    int8_t& known = c.vloops[cached_vslot(c, r, s)];
    if (known < 0) known = plain_loop(row, s) ? 1 : 0;
    return known != 0;
  }
  // plain_total of the frame (r, s, p) alone, for any p: its rule's total_state
  bool cached_vtotal(RowCache& c, int32_t r, int32_t s) {
    int8_t& known = c.vtotal[cached_vslot(c, r, s)];
    if (known < 0) {
      if (rules_[r].counter) {
        known = 0;
      } else {
        std::lock_guard<std::recursive_mutex> g(mu_);
        known = total_state(r, s) ? 1 : 0;
      }
    }
    return known != 0;
  }
  uint64_t cached_vclasses(RowCache& c, int32_t r, int32_t s, const int32_t* row) {
    uint64_t& known = c.vclasses[cached_vslot(c, r, s)];
    if (known == kUnknownClasses) {
      // a state taking a few bytes (inside a name or a literal: most states a walk down a
      // declared name meets, each once) loops on its live bytes at most: those are read, not
      // the whole row (cold after the compile)
      const auto& none = rules_[r].none[static_cast<size_t>(s)];
      if (taken_bytes(none) <= kFewKidsScan) {
        uint64_t eq[4] = {~none[0], ~none[1], ~none[2], ~none[3]};
        for (int w = 0; w < 4; ++w)
          for (uint64_t bits = eq[w]; bits != 0; bits &= bits - 1)
            if (row[w * 64 + __builtin_ctzll(bits)] != s) eq[w] &= ~(uint64_t(1) << __builtin_ctzll(bits));
        known = classes_within(eq);
      } else {
        known = loop_classes(row, s);
      }
    }
    return known;
  }
  // Subtrees that a bounded string takes whole. Inside a string whose length is bounded
  // together with a pattern that does not bound it itself ("pattern": "[0-9a-f]+" with
  // "maxLength": 12), each character moves the DFA to another state: no byte loops, so no
  // subtree is taken by its classes (cached_vclasses) and the walk stepped through the whole
  // vocabulary, ~0.9 ms at 49K tokens. Here, for simple state `s` of rule `r`: a set C of
  // ASCII byte classes and the largest L (< 64) such that every string of C's bytes no longer
  // than L, read from `s`, goes through live simple states only. A subtree whose bytes below
  // are all in C and whose longest path below is at most L bytes then has every token
  // allowed, as the walk through it would find. Packed: bit 63 (known), L in bits 56..61, C
  // in the low 48 bits; memoised per state, by any thread (the value is the same).
  uint64_t bounded_classes(int32_t r, int32_t s) const {
    const Rule& R = rules_[r];
    std::atomic<uint64_t>& slot = R.bounded[s];
    uint64_t known = slot.load(std::memory_order_relaxed);
    if (known != 0) return known;
    const auto& cm = class_masks();
    // (a state that takes few plain bytes is inside a name, a literal or a number: its walk
    // visits little, and the search below would cost more than it saves)
    const auto& none = R.none[static_cast<size_t>(s)];
    if (__builtin_popcountll(~none[0] & 0xFFFFFFFF00000000ull) + __builtin_popcountll(~none[1]) < 32) {
      slot.store(uint64_t(1) << 63, std::memory_order_relaxed);
      return uint64_t(1) << 63;
    }
    // C starts as the ASCII classes every byte of which leads from `s` to a live simple state
    uint64_t C = 0;
    const int32_t* row = R.trans + static_cast<int64_t>(s) * 256;
    for (size_t c = 0; c < cm.size(); ++c) {
      if (cm[c][2] | cm[c][3]) continue;  // (UTF-8 bytes: a character of several bytes)
      bool ok = true;
      for (int w = 0; w < 2 && ok; ++w)
        for (uint64_t bits = cm[c][w]; bits != 0 && ok; bits &= bits - 1) {
          const int32_t t = row[w * 64 + __builtin_ctzll(bits)];
          ok = t >= 0 && R.simple[t];
        }
      if (ok) C |= uint64_t(1) << c;
    }
    // The levels of states that strings of C's bytes reach from `s`, while every byte of C
    // leads each of them to a live simple state. Where that stops early (after a backslash,
    // only an escape goes on), the classes leading there are dropped and the search redone
    // when they hold fewer bytes than those that fail: a plain character never reaches the
    // escape states.
    uint64_t best_c = 0;
    int best_l = 0;
    const uint8_t* byte_cls = byte_class();
    int64_t budget = 1 << 12;  // (byte steps over all searches: a bound, not a tuning)
    // One byte of each group that the states met take alike within its class is stepped (a
    // host name's labels take 62 letters and digits alike: stepping each made this search
    // most of a fill inside the name, 0.4-0.7 ms). A group is the class's first byte and the
    // others; each state met checks its row for them, and a byte it takes apart leaves its
    // group, the round then searched again.
    static const std::array<uint8_t, 128> first_of_class = [] {
      std::array<uint8_t, 128> f{};
      int first[64];
      std::fill(std::begin(first), std::end(first), -1);
      for (int b = 0; b < 128; ++b) {
        if (first[byte_class()[b]] < 0) first[byte_class()[b]] = b;
        f[static_cast<size_t>(b)] = static_cast<uint8_t>(first[byte_class()[b]]);
      }
      return f;
    }();
    static const std::vector<uint8_t> not_first = [] {
      std::vector<uint8_t> v;
      for (int b = 0; b < 128; ++b)
        if (first_of_class[static_cast<size_t>(b)] != b) v.push_back(static_cast<uint8_t>(b));
      return v;
    }();
    // whether state u takes every byte as the first of its class (memoised per state)
    auto alike = [&R](int32_t u) {
      std::atomic<uint8_t>& slot = R.alike[static_cast<size_t>(u)];
      uint8_t known = slot.load(std::memory_order_relaxed);
      if (known == 0) {
        const int32_t* tr = R.trans + static_cast<int64_t>(u) * 256;
        known = 1;
        for (uint8_t g : not_first)
          if (tr[g] != tr[first_of_class[g]]) known = 2;
        slot.store(known, std::memory_order_relaxed);
      }
      return known == 1;
    };
    std::array<uint8_t, 128> rep = first_of_class;
    for (int round = 0; round < 4 && C != 0; ++round) {
     search:
      uint8_t bytes[128], grouped[128];
      int nb = 0, ng = 0;
      for (uint64_t cs = C; cs != 0; cs &= cs - 1)
        for (int w = 0; w < 2; ++w)
          for (uint64_t bits = cm[__builtin_ctzll(cs)][w]; bits != 0; bits &= bits - 1) {
            const int b = w * 64 + __builtin_ctzll(bits);
            if (rep[static_cast<size_t>(b)] == b)
              bytes[nb++] = static_cast<uint8_t>(b);
            else
              grouped[ng++] = static_cast<uint8_t>(b);
          }
      constexpr int kWide = 16;  // (a level of more states ends the search)
      int32_t cur[kWide], nxt[kWide];
      uint64_t cur_lead[kWide], nxt_lead[kWide];  // classes on the paths to each state
      int nc = 1;
      cur[0] = s;
      cur_lead[0] = 0;
      int depth = 0;  // every string of C's bytes of at most `depth` bytes is live
      uint64_t bad_lead = 0, bad_fail = 0;
      while (depth < kMaxBoundedHeight && budget > 0) {
        int nn = 0;
        bool wide = false;
        bool split = false;
        for (int k = 0; k < nc; ++k) {
          const int32_t* tr = R.trans + static_cast<int64_t>(cur[k]) * 256;
          for (int j = 0; j < ng && !alike(cur[k]); ++j) {
            const uint8_t g = grouped[j];
            if (tr[g] != tr[rep[g]]) {
              rep[g] = g;
              split = true;
            }
          }
          if (split) break;
          budget -= nb;
          for (int j = 0; j < nb; ++j) {
            const int32_t u = tr[bytes[j]];
            const uint64_t cls = uint64_t(1) << byte_cls[bytes[j]];
            if (u < 0 || !R.simple[u]) {
              bad_lead |= cur_lead[k];
              bad_fail |= cls;
              continue;
            }
            int q = 0;
            while (q < nn && nxt[q] != u) ++q;
            if (q < nn) {
              nxt_lead[q] |= cur_lead[k] | cls;
            } else if (nn < kWide) {
              nxt[nn] = u;
              nxt_lead[nn++] = cur_lead[k] | cls;
            } else {
              wide = true;
            }
          }
        }
        if (split) {
          if (budget <= 0) break;
          goto search;  // (this round again, the split bytes stepped on their own)
        }
        if (bad_fail != 0 || wide) break;
        ++depth;
        std::memcpy(cur, nxt, sizeof(int32_t) * static_cast<size_t>(nn));
        std::memcpy(cur_lead, nxt_lead, sizeof(uint64_t) * static_cast<size_t>(nn));
        nc = nn;
      }
      // (fewer classes pay only for much longer strings: a subtree's tokens rarely exceed a
      // dozen bytes, and every class dropped keeps the subtrees holding it from the shortcut)
      if (round > 0 && depth <= 2 * best_l) break;
      best_c = C;
      best_l = depth;
      if (bad_fail == 0 || depth >= 16) break;
      auto bytes_of = [&](uint64_t cs) {
        int n = 0;
        for (; cs != 0; cs &= cs - 1)
          n += __builtin_popcountll(cm[__builtin_ctzll(cs)][0]) + __builtin_popcountll(cm[__builtin_ctzll(cs)][1]);
        return n;
      };
      // (the classes leading to the failing states, when fewer bytes than those failing there)
      const uint64_t drop = bad_lead != 0 && bytes_of(bad_lead & C) < bytes_of(bad_fail & C) ? bad_lead : bad_fail;
      C &= ~drop;
    }
    C = best_c;
    const int L = best_l;
    known = (uint64_t(1) << 63) | (static_cast<uint64_t>(C == 0 ? 0 : L) << 56) | C;
    slot.store(known, std::memory_order_relaxed);
    return known;
  }
  // whether bounded_classes(r, s) takes a subtree with classes `below` and height `h` whole
  bool bounded_takes(int32_t r, int32_t s, uint64_t below, int h, int64_t nodes) const {
    if (h > kMaxBoundedHeight) return false;
    const uint64_t known = rules_[r].bounded[s].load(std::memory_order_relaxed);
    if (known == 0 && !bounded_worth(nodes, h)) return false;  // (a chain: not worth a search)
    const uint64_t b = known != 0 ? known : bounded_classes(r, s);
    return static_cast<int>(b >> 56 & 63) >= h && (below & ~(b & ((uint64_t(1) << 48) - 1))) == 0;
  }

  // bounded_takes() of configuration `cid` when it is one frame in a simple state (whose row,
  // if computed, is that state's DFA row mapped to the frames' configurations)
  bool config_bounded_takes(int32_t cid, uint64_t below, int h, int64_t nodes) const {
    const int64_t v = virt_.load(cid);
    return v >= 0 && bounded_takes(static_cast<int32_t>(v >> 32), static_cast<int32_t>(v & 0xFFFFFFFF), below, h, nodes);
  }

  // whether every plain byte leads from `cid` back to itself (cid is not DEAD)
  bool cached_loops(RowCache& c, int32_t cid) {
    const int32_t* r = cached_row(c, cid);
    int8_t& known = c.loops[cid & (RowCache::kSlots - 1)];
    if (known < 0) known = plain_loop(r, cid) ? 1 : 0;
    return known != 0;
  }

  // Walk trie `t` from `cid`: set the bit of every allowed token in `mask` (canonical ids) and
  // record (token, configuration after it) when asked. `first` (256 flags, or nullptr) limits
  // the walk to tokens whose first byte is flagged. Rows missing on the way are computed here.
  // `frame` (masks of V.trie only, no `first`): cid's simple frame, walked from its DFA row.
  // `few`: cid takes a few first bytes (RowCache::siblings).
  void walk(int32_t cid, const Trie& t, const uint8_t* first, uint32_t* mask, std::vector<int32_t>* toks,
            std::vector<int32_t>* cfgs, const SimpleFrame* frame = nullptr, bool few = false) {
    if (cid == kDead || t.nodes <= 1) return;
    if (mask != nullptr && t.max_tok >= words_ * 32) throw std::invalid_argument("token id beyond the mask");
    if (toks != nullptr)
      walk_nodes<false, true>(cid, t, first, mask, toks, cfgs);
    else if (&t == &V.trie)
      walk_nodes<true, false, false, false, true>(cid, t, first, mask, toks, cfgs, nullptr, frame, few);
    else
      walk_nodes<true, false>(cid, t, first, mask, toks, cfgs);
  }

  // The walk of the plain tokens' trie (Plain::only) from the `first` bytes, into a mask that
  // holds every plain token of those bytes already: the tokens below a rejected byte are
  // cleared. Below a node whose configuration keeps a stack alive on any plain bytes
  // (plain_total: a free name's states, any name but the declared ones) nothing is rejected
  // and the subtree is not walked. A property name's first byte that also starts a declared
  // name does not lead into a free name's body at once, yet every plain token below it is a
  // name's prefix: walking them, thousands of nodes per first byte, was most of such a mask
  // (0.1-0.3 ms at 49K tokens, at every name start of a large object).
  void unwalk_plain_only(int32_t cid, const uint8_t* first, uint32_t* mask) {
    const Trie& t = V.plain->only;
    if (cid == kDead || t.nodes <= 1) return;
    if (t.max_tok >= words_ * 32) throw std::invalid_argument("token id beyond the mask");
    RowCache cache;
    const int32_t** const row_at = row_at_buffer();
    cache.virt_at = virt_at_buffer();
    cache.virt_at[1].simple = nullptr;  // (the root's row is a configuration's)
    row_at[1] = row(cid);
    const Trie::Node* N = t.packed.data();
    auto one = [&](int64_t at) {
      walk_range<true, false, true, false, false, true>(t, at, N[at].end, row_at, cache, mask, nullptr, nullptr, nullptr);
    };
    if (t.by_first_byte) {
      for (int b = 0; b < 256; ++b)
        if (first[b] && t.root_child[b] >= 0) one(t.root_child[b]);
      return;
    }
    for (int64_t at = 1; at < N[0].end; at = N[at].end)  // (the root's children)
      if (first[N[at].byte]) one(at);
  }

  // A walk's row_at: [d] the row a node at depth d steps from (of the configuration after its
  // first d - 1 bytes). Kept per thread and reused: every entry a node reads is written
  // first, on the way down; walks never run inside one another. (Read through a local
  // pointer: a thread-local read in the loop costs a call per node in a shared library.)
  const int32_t** row_at_buffer() const {
    thread_local std::vector<const int32_t*> buf;
    if (buf.size() < static_cast<size_t>(V.trie.max_depth) + 2) buf.resize(static_cast<size_t>(V.trie.max_depth) + 2);
    return buf.data();
  }
  VirtAt* virt_at_buffer() const {
    thread_local std::vector<VirtAt> buf;
    if (buf.size() < static_cast<size_t>(V.trie.max_depth) + 2)
      buf.resize(static_cast<size_t>(V.trie.max_depth) + 2, VirtAt{nullptr, nullptr, -1, -1});
    return buf.data();
  }

  // The walk's loop, compiled apart for masks and for successor lists so that neither pays
  // the other's branches on every node.
  // kGroups: a node's token is a group of Plain::tail_groups (the tail trie), whose ids are set.
  // `keep` (kGroups only, may be null): the first bytes whose tokens the groups set.
  // kClassLoops (V.trie only): below a node whose configuration loops on every byte class
  // under it (a pattern's character class: `[a-z0-9.-]+`, `\\S+`), every token is allowed.
  // `frame` (masks only, with no `first`): cid is that simple frame alone, walked from its
  // DFA row (no byte row made for it).
  template <bool kMask, bool kCollect, bool kPlainLoops = false, bool kGroups = false, bool kClassLoops = false>
  void walk_nodes(int32_t cid, const Trie& t, const uint8_t* first, uint32_t* mask, std::vector<int32_t>* toks,
                  std::vector<int32_t>* cfgs, const uint8_t* keep = nullptr, const SimpleFrame* frame = nullptr,
                  bool few = false) {
    RowCache cache;
    cache.siblings = few;
    const int32_t** const row_at = row_at_buffer();
    cache.virt_at = virt_at_buffer();
    int32_t root[256];
    const int32_t* r0;
    int32_t dead = kDead;
    if (kMask && !kCollect && frame != nullptr) {
      const Rule& R = rules_[frame->r];
      r0 = dfa_row(*frame);
      cache.virt_at[1] = VirtAt{R.simple.data(), R.trans, frame->r, frame->p};
      dead = -1;
    } else {
      r0 = row(cid);
      if (first != nullptr) {  // rejected first bytes act as DEAD transitions: no test per node
        for (int b = 0; b < 256; ++b) root[b] = first[b] ? r0[b] : kDead;
        r0 = root;
      }
      cache.virt_at[1].simple = nullptr;  // the root's row is a configuration's
    }
    row_at[1] = r0;
    const Trie::Node* N = t.packed.data();
    if (t.by_first_byte) {
      // Only the first bytes the row takes are visited, each subtree in turn (in byte order,
      // which is preorder): a configuration inside a property name or a literal takes a byte
      // or two, and stepping over the root's two hundred other children one by one touched a
      // cache line each (they lie far apart in preorder), most of such a mask's time.
      uint64_t live[4];  // (the bytes the row rejects, then flipped below)
      if (kMask && !kCollect && frame != nullptr)
        std::memcpy(live, rules_[frame->r].none[static_cast<size_t>(frame->s)].data(), sizeof live);
      else
        fa::equal_bits(r0, dead, live);
      if constexpr (kMask && !kCollect) {
        if (structgen::WalkHelp* help = structgen::WalkHelp::here(); help != nullptr) {
          int64_t nodes = 0;  // (at most what the walk visits)
          for (int w = 0; w < 4; ++w)
            for (uint64_t bits = ~live[w]; bits != 0; bits &= bits - 1) {
              const int32_t at = t.root_child[w * 64 + __builtin_ctzll(bits)];
              if (at >= 0) nodes += N[at].end - at;
            }
          if (nodes >= kShareNodes) {
            shared_walk<kPlainLoops, kGroups, kClassLoops>(*help, t, live, row_at, cache, mask, keep);
            return;
          }
        }
      }
      if constexpr (kMask && !kCollect && !kPlainLoops && !kGroups && kClassLoops) {
        if (few && &t == &V.trie) {
          chunk_marks.start(words_);
          for (int w = 0; w < 4; ++w)
            for (uint64_t bits = ~live[w]; bits != 0; bits &= bits - 1) {
              const int b = w * 64 + __builtin_ctzll(bits);
              const int32_t slot = V.root_slot[b];
              if (slot >= 0) visit_few(V.kids[static_cast<size_t>(slot)], 1, r0[b], row_at, cache, mask);
            }
          return;
        }
      }
      for (int w = 0; w < 4; ++w)
        for (uint64_t bits = ~live[w]; bits != 0; bits &= bits - 1) {
          const int32_t at = t.root_child[w * 64 + __builtin_ctzll(bits)];
          if (at >= 0) walk_range<kMask, kCollect, kPlainLoops, kGroups, kClassLoops>(t, at, N[at].end, row_at, cache,
                                                                                      mask, toks, cfgs, keep);
        }
      return;
    }
    walk_range<kMask, kCollect, kPlainLoops, kGroups, kClassLoops>(t, 1, N[0].end, row_at, cache, mask, toks, cfgs,
                                                                   keep);
  }

  // walk_nodes' root loop over the subtrees of the `live` first bytes, shared with the
  // threads of a batch fill that have run out of items (walk_share.hpp): a unit is a range
  // of consecutive subtrees of about kShareUnit nodes, below the root or, for a root child of
  // more than kShareSplit nodes, below that child (whose node each thread visits first, for
  // its row). The owner walks with its own cache; a helper with a cache of its own from the
  // same root row.
  template <bool kPlainLoops, bool kGroups, bool kClassLoops>
  void shared_walk(structgen::WalkHelp& help, const Trie& t, const uint64_t* live, const int32_t** const row_at,
                   RowCache& cache, uint32_t* mask, const uint8_t* keep) {
    struct Unit {
      int64_t parent;  // the root child the range lies below (-1: root children themselves)
      int64_t begin, end;
    };
    const Trie::Node* N = t.packed.data();
    std::vector<Unit> units;
    auto add = [&](int64_t parent, int64_t at) {  // the subtree of node `at`
      Unit* u = units.empty() ? nullptr : &units.back();
      if (u != nullptr && u->parent == parent && u->end == at && u->end - u->begin < kShareUnit)
        u->end = N[at].end;
      else
        units.push_back({parent, at, N[at].end});
    };
    for (int w = 0; w < 4; ++w)
      for (uint64_t bits = ~live[w]; bits != 0; bits &= bits - 1) {
        const int32_t at = t.root_child[w * 64 + __builtin_ctzll(bits)];
        if (at < 0) continue;
        if (N[at].end - at <= kShareSplit) {
          add(-1, at);
          continue;
        }
        for (int64_t c = at + 1; c < N[at].end; c = N[c].end) add(at, c);
      }
    const int32_t* const r0 = row_at[1];
    const VirtAt v1 = cache.virt_at[1];
    const bool siblings = cache.siblings;
    structgen::SharedWalk* self = nullptr;
    bool offered = false;
    // Takes units until none is left. A unit below a root child first visits that child's
    // node (range [p, p + 1)), which sets its row for the depth below, once per run of such
    // units: the child's subtree is walked unit by unit only if that visit went down into it
    // (else it was rejected or allowed in whole there).
    auto run = [&](const int32_t** ra, RowCache& c, uint32_t* m, bool owner) {
      int64_t prepared = -1;
      bool down = false;
      for (int64_t k; (k = self->take()) >= 0;) {
        if (owner && !offered && help.wanted()) offered = help.offer(*self);
        const Unit& u = units[static_cast<size_t>(k)];
        if (u.parent < 0) {
          walk_range<true, false, kPlainLoops, kGroups, kClassLoops>(t, u.begin, u.end, ra, c, m, nullptr, nullptr, keep);
          prepared = -1;  // (row_at[2] is another child's now)
          continue;
        }
        if (u.parent != prepared) {
          prepared = u.parent;
          down = walk_range<true, false, kPlainLoops, kGroups, kClassLoops>(t, u.parent, u.parent + 1, ra, c, m,
                                                                            nullptr, nullptr, keep) == u.parent + 1;
        }
        if (down)
          walk_range<true, false, kPlainLoops, kGroups, kClassLoops>(t, u.begin, u.end, ra, c, m, nullptr, nullptr, keep);
      }
    };
    structgen::SharedWalk shared(static_cast<int64_t>(units.size()), [&](uint32_t* buf) {
      RowCache c;
      c.siblings = siblings;
      c.virt_at = virt_at_buffer();
      c.virt_at[1] = v1;
      const int32_t** ra = row_at_buffer();
      ra[1] = r0;
      run(ra, c, buf, false);
    });
    self = &shared;
    struct Unwind {  // an exception in the owner's units: its helpers leave before `shared` goes
      structgen::WalkHelp& help;
      structgen::SharedWalk& shared;
      const bool& offered;
      bool done = false;
      ~Unwind() {
        if (offered && !done) help.withdraw(shared, nullptr);
      }
    } unwind{help, shared, offered};
    if (help.helper_first() && help.wanted()) {  // (tests: see WalkHelp::helper_first)
      offered = help.offer(shared);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (offered && !shared.started() && std::chrono::steady_clock::now() < until) structgen::WalkHelp::pause();
    }
    run(row_at, cache, mask, true);
    unwind.done = true;
    if (offered) help.withdraw(shared, mask);
  }

  // walk_nodes' loop over the nodes [i, stop) (whole subtrees of depth-1 nodes)
  // kSubtract (kPlainLoops only): `mask` holds every token of the range already; the tokens
  // below a rejected byte are cleared instead of the allowed ones set (unwalk_plain_only).
  // Returns where it stopped: `stop`, or past it where the last subtree was passed whole.
  template <bool kMask, bool kCollect, bool kPlainLoops, bool kGroups, bool kClassLoops, bool kSubtract = false>
  int64_t walk_range(const Trie& t, int64_t i, const int64_t stop, const int32_t** const row_at, RowCache& cache,
                  uint32_t* mask, std::vector<int32_t>* toks, std::vector<int32_t>* cfgs, const uint8_t* keep) {
    // (compiled apart for grammars with bounded counters: the twin's test in the loop, never
    // taken elsewhere, slowed the other walks by about a tenth)
    if (counted_)
      return walk_range_of<kMask, kCollect, kPlainLoops, kGroups, kClassLoops, kSubtract, true>(t, i, stop, row_at, cache,
                                                                                             mask, toks, cfgs, keep);
    return walk_range_of<kMask, kCollect, kPlainLoops, kGroups, kClassLoops, kSubtract, false>(t, i, stop, row_at, cache,
                                                                                            mask, toks, cfgs, keep);
  }
  template <bool kMask, bool kCollect, bool kPlainLoops, bool kGroups, bool kClassLoops, bool kSubtract, bool kCounted>
  int64_t walk_range_of(const Trie& t, int64_t i, const int64_t stop, const int32_t** const row_at, RowCache& cache,
                        uint32_t* mask, std::vector<int32_t>* toks, std::vector<int32_t>* cfgs, const uint8_t* keep) {
    static_assert(!kSubtract || (kPlainLoops && kMask && !kCollect && !kGroups && !kClassLoops));
    // Frames stepped by their DFA: below a configuration of one stack in a simple state (no
    // calls, no end: inside a name, a literal, a string), the row of every configuration the
    // walk goes through is that state's DFA row mapped to configurations, and all but a few
    // of those configurations are met by this walk only. The DFA row is read as it is (its
    // entries are states) until a state that is not simple, where the configuration is made;
    // a configuration's row was most of a first visit's time (a full row per trie node: 256
    // successors scanned, their configurations closed). Masks only: successor lists need the
    // configurations, and the subtracting walk asks plain_total of them.
    constexpr bool kVirtual = kMask && !kCollect;
    VirtAt* const virt_at = kVirtual ? cache.virt_at : nullptr;
    const Trie::Node* N = t.packed.data();
    while (i < stop) {
      const Trie::Node& n = N[i];
      int32_t next = row_at[n.depth][n.byte];
      bool virt = false;  // `next` is a DFA state of the frame virt_at[depth] describes
      if constexpr (kVirtual) {
        const VirtAt& va = virt_at[n.depth];
        if (va.simple != nullptr) {
          if (next < 0) {
            if constexpr (kSubtract) {  // (every rejected token is cleared)
              clear_subtree(t, i, mask);
              i = n.end;
              continue;
            }
            // (past the subtree below a rejected byte)
            i = cache.siblings ? next_sibling<true>(t, i, row_at[n.depth]) : n.end;
            continue;
          }
          if (va.simple[next])
            virt = true;
          else
            next = cached_frame_config(cache, va.r, next, va.p);
        }
      }
      if (!virt && next == kDead) {
        if constexpr (kSubtract) {
          clear_subtree(t, i, mask);
          i = n.end;  // the whole subtree below a rejected byte (every rejected one is cleared)
        } else if (!cache.siblings) {
          i = n.end;
        } else if (kVirtual && virt_at[n.depth].simple != nullptr) {  // (a DFA row's state made DEAD)
          i = next_sibling<true>(t, i, row_at[n.depth]);
        } else {
          i = next_sibling<false>(t, i, row_at[n.depth]);
        }
        continue;
      }
      if (!kSubtract && n.tok >= 0) {  // (subtracting, its token stays)
        if constexpr (kGroups) {
          const IdRuns& g = V.plain->tail_groups;
          if (keep == nullptr) {
            set_ids(mask, g.ids + g.offsets[n.tok], g.offsets[n.tok + 1] - g.offsets[n.tok]);
          } else {
            for (int64_t k = g.offsets[n.tok]; k < g.offsets[n.tok + 1]; ++k)
              if (keep[V.first_byte[g.ids[k]]]) mask[g.ids[k] >> 5] |= 1u << (g.ids[k] & 31);
          }
        } else if (kMask) {
          mask[n.tok >> 5] |= 1u << (n.tok & 31);
        }
        if (kCollect) {
          toks->push_back(n.tok);
          cfgs->push_back(next);
        }
      }
      if (n.end > i + 1) {  // children below
        if constexpr (kVirtual) {
          if constexpr (kCounted) {
            if (!virt) next = cached_equiv(cache, next, bytes_below(t, i, n.depth));  // (see walk_equiv)
          }
          VirtAt va{nullptr, nullptr, -1, -1};
          int32_t st = next;
          if (virt) {
            va = virt_at[n.depth];
          } else if (SimpleFrame f; cache.id[next & (RowCache::kSlots - 1)] != next && simple_frame(next, f)) {
            // (a configuration whose row is there is read by its row)
            const Rule& R = rules_[f.r];
            va = VirtAt{R.simple.data(), R.trans, f.r, f.p};
            st = f.s;
          }
          if (va.simple != nullptr) {
            const int32_t r = va.r;
            const int32_t* drow = va.trans + static_cast<int64_t>(st) * 256;
            // (a loop of the frame's state is a loop of its configuration)
            if constexpr (kSubtract) {  // (plain_total of a frame alone: its state's total_state)
              if (cached_vloops(cache, r, st, drow) || cached_vtotal(cache, r, st)) {
                i = n.end;
                continue;
              }
            } else if constexpr (kPlainLoops) {
              if (cached_vloops(cache, r, st, drow)) {
                set_ids(mask, t.toks.data() + t.tok_before[i + 1], t.tok_before[n.end] - t.tok_before[i + 1]);
                i = n.end;
                continue;
              }
            }
            if constexpr (kClassLoops) {
              if ((n.end - i > kMinClassSkip && (V.below[i] & ~cached_vclasses(cache, r, st, drow)) == 0) ||
                  (n.end - i > kMinBoundedSkip && bounded_takes(r, st, V.below[i], V.height[i], n.end - i))) {
                set_ids(mask, t.toks.data() + t.tok_before[i + 1], t.tok_before[n.end] - t.tok_before[i + 1]);
                i = n.end;
                continue;
              }
            }
            row_at[n.depth + 1] = drow;
            virt_at[n.depth + 1] = va;
            ++i;
            continue;
          }
          virt_at[n.depth + 1].simple = nullptr;
        }
        if constexpr (kPlainLoops) {
          if constexpr (kSubtract) {
            if (plain_total(next) || cached_loops(cache, next)) {  // (plain_total first: no row made)
              i = n.end;
              continue;
            }
          } else if (cached_loops(cache, next)) {
            set_ids(mask, t.toks.data() + t.tok_before[i + 1], t.tok_before[n.end] - t.tok_before[i + 1]);
            i = n.end;
            continue;
          }
        }
        if constexpr (kClassLoops) {
          if ((n.end - i > kMinClassSkip && (V.below[i] & ~cached_classes(cache, next)) == 0) ||
              (n.end - i > kMinBoundedSkip && config_bounded_takes(next, V.below[i], V.height[i], n.end - i))) {
            set_ids(mask, t.toks.data() + t.tok_before[i + 1], t.tok_before[n.end] - t.tok_before[i + 1]);
            i = n.end;
            continue;
          }
        }
        row_at[n.depth + 1] = cached_row(cache, next);
      }
      ++i;
    }
    return i;
  }

  // walk_range's node, for a walk of V.trie's masks from a configuration that takes a few
  // first bytes (inside a property name or a literal: RowCache::siblings): the child of slot
  // `c` at depth `d`, whose byte row_at[d] takes (`next`, that row's entry), then its own
  // children taken by its row, found by their bytes. Visiting every child in preorder and
  // passing the rejected ones by their slots read three or four cache lines per child and
  // level of a name (its node, its slot, its subtree's classes): most of such a walk's time.
  void visit_few(const Vocab::Kid& c, int d, int32_t next, const int32_t** const row_at, RowCache& cache,
                 uint32_t* mask) {
    VirtAt* const virt_at = cache.virt_at;
    bool virt = false;  // as in walk_range
    {
      const VirtAt& va = virt_at[d];
      if (va.simple != nullptr) {
        if (va.simple[next])
          virt = true;
        else
          next = cached_frame_config(cache, va.r, next, va.p);
      }
    }
    if (!virt && next == kDead) return;
    if (c.tok >= 0) {
      mask[c.tok >> 5] |= 1u << (c.tok & 31);
      chunk_marks.tok(c.tok);
    }
    if (c.kids < 0) return;
    if (counted_ && !virt) next = cached_equiv(cache, next, bytes_below(V.trie, c.node, d));
    const Trie& t = V.trie;
    VirtAt va{nullptr, nullptr, -1, -1};
    int32_t st = next;
    if (virt) {
      va = virt_at[d];
    } else if (SimpleFrame f; cache.id[next & (RowCache::kSlots - 1)] != next && simple_frame(next, f)) {
      const Rule& R = rules_[f.r];
      va = VirtAt{R.simple.data(), R.trans, f.r, f.p};
      st = f.s;
    }
    const int32_t* row;
    if (va.simple != nullptr) {
      row = va.trans + static_cast<int64_t>(st) * 256;
      if (c.end - c.node > kMinClassSkip && (c.below & ~cached_vclasses(cache, va.r, st, row)) == 0) {
        set_ids(mask, t.toks.data() + t.tok_before[c.node + 1], t.tok_before[c.end] - t.tok_before[c.node + 1]);
        chunk_marks.all = true;
        return;
      }
    } else {
      if (c.end - c.node > kMinClassSkip && (c.below & ~cached_classes(cache, next)) == 0) {
        set_ids(mask, t.toks.data() + t.tok_before[c.node + 1], t.tok_before[c.end] - t.tok_before[c.node + 1]);
        chunk_marks.all = true;
        return;
      }
      row = cached_row(cache, next);
    }
    row_at[d + 1] = row;
    virt_at[d + 1] = va;
    const uint8_t* bytes = t.sib_byte.data() + c.kids;
    const Vocab::Kid* kids = V.kids.data() + c.kids;
    const int m = c.kids_m1 + 1;
    // (a child's visit writes only the levels below d + 1: row_at[d + 1] and virt_at[d + 1] hold)
    if (va.simple != nullptr) {
      const ByteSet& none = rules_[va.r].none[static_cast<size_t>(st)];  // (one line: the row is 16)
      // a state taking a byte or two (inside a name or a literal): each found among many
      // children's bytes by one memchr, where testing every child's byte was most of a walk
      // down a declared name (frames_walk)
      if (m > kFewKidsScan && taken_bytes(none) <= 2) {
        for (int w = 0; w < 4; ++w)
          for (uint64_t bits = ~none[w]; bits != 0; bits &= bits - 1) {
            const int b = w * 64 + __builtin_ctzll(bits);
            const void* at = std::memchr(bytes, b, static_cast<size_t>(m));
            if (at != nullptr)
              visit_few(kids[static_cast<const uint8_t*>(at) - bytes], d + 1, row[b], row_at, cache, mask);
          }
        return;
      }
      for (int k = 0; k < m; ++k) {
        const uint8_t b = bytes[k];
        if (!(none[b >> 6] >> (b & 63) & 1)) visit_few(kids[k], d + 1, row[b], row_at, cache, mask);
      }
    } else {
      for (int k = 0; k < m; ++k) {
        const int32_t v = row[bytes[k]];
        if (v != kDead) visit_few(kids[k], d + 1, v, row_at, cache, mask);
      }
    }
  }

  // Clear the tokens of node i's subtree of `t` from `mask` (the subtracting walk's rejection).
  static void clear_subtree(const Trie& t, int64_t i, uint32_t* mask) {
    const int32_t* ids = t.toks.data() + t.tok_before[i];
    for (int64_t k = 0, m = t.tok_before[t.packed[static_cast<size_t>(i)].end] - t.tok_before[i]; k < m; ++k)
      mask[ids[k] >> 5] &= ~(1u << (ids[k] & 31));
  }

  // The node a walk goes on with after rejecting node i of `t`: the next sibling whose byte
  // `row` takes (kDfa: a DFA row, taken where >= 0; else a configuration's row, taken where
  // not DEAD), or the end of their parent's subtree (Trie::sib).
  template <bool kDfa>
  static int64_t next_sibling(const Trie& t, int64_t i, const int32_t* row) {
    const int32_t* node = t.sib_node.data();
    const uint8_t* byte = t.sib_byte.data();
    for (int64_t k = t.sib[i] + 1;; ++k) {
      const int32_t at = node[k];
      if (at < 0) return -1 - static_cast<int64_t>(at);
      const int32_t v = row[byte[k]];
      if (kDfa ? v >= 0 : v != kDead) return at;
    }
  }

  template <class Id>  // int64_t (the Python tables) or int32_t (Trie::toks)
  static void set_ids(uint32_t* mask, const Id* ids, int64_t n) {
    for (int64_t k = 0; k < n; ++k) mask[ids[k] >> 5] |= 1u << (ids[k] & 31);
  }
  // Set the ids of the flagged groups of `runs` (256 groups, one per byte).
  void set_runs(uint32_t* mask, const IdRuns& runs, const uint8_t* flags) {
    int64_t on = 0, off = 0;
    for (int b = 0; b < 256; ++b) (flags[b] ? on : off) += runs.offsets[b + 1] - runs.offsets[b];
    // A property name's first character takes nearly every plain byte: tens of thousands of
    // ids one bit at a time, where the union less the few groups left out costs two passes
    // over the mask's words.
    const bool by_union = !runs.all.empty() && static_cast<int64_t>(runs.all.size()) == words_ && on > off + 2 * words_;
    if ((by_union ? off : on) <= words_) {  // fewer ids than words: set them, no memo
      set_flagged(mask, runs, flags, by_union);
      return;
    }
    // The same flags come back at every place a name may start in one object (a name
    // starts, or a comma and a name, from each of the object's states), about six calls in
    // seven on MaskBench's first visits: the ids of each (runs, flags) are set once into a
    // memoised mask and ORed from there, a pass over the words instead of thousands of ids.
    RunsKey key{&runs, {0, 0, 0, 0}};
    for (int w = 0; w < 4; ++w) {  // a word gathered in a register (fa::equal_bits says why)
      uint64_t bits = 0;
      for (int j = 0; j < 64; ++j) bits |= static_cast<uint64_t>(flags[64 * w + j] != 0) << j;
      key.bits[w] = bits;
    }
    const uint32_t* bits = nullptr;
    {
      std::lock_guard<std::mutex> g(runs_mu_);
      auto it = runs_memo_.find(key);
      if (it != runs_memo_.end()) bits = it->second.get();
    }
    if (bits == nullptr) {
      std::unique_ptr<uint32_t[]> made(new uint32_t[words_]());
      set_flagged(made.get(), runs, flags, by_union);
      std::lock_guard<std::mutex> g(runs_mu_);
      bits = runs_memo_.emplace(key, std::move(made)).first->second.get();  // a racing thread's copy wins: same bits
    }
    for (int64_t w = 0; w < words_; ++w) mask[w] |= bits[w];
  }
  void set_flagged(uint32_t* mask, const IdRuns& runs, const uint8_t* flags, bool by_union) {
    if (by_union) {
      std::unique_ptr<uint32_t[]> left(new uint32_t[words_]());
      for (int b = 0; b < 256; ++b)
        if (!flags[b]) set_ids(left.get(), runs.ids + runs.offsets[b], runs.offsets[b + 1] - runs.offsets[b]);
      const uint32_t* all = runs.all.data();
      for (int64_t w = 0; w < words_; ++w) mask[w] |= all[w] & ~left[w];
      return;
    }
    for (int b = 0; b < 256; ++b)
      if (flags[b]) set_ids(mask, runs.ids + runs.offsets[b], runs.offsets[b + 1] - runs.offsets[b]);
  }

  void compute_mask(int32_t cid, uint32_t* mask) {
    if (cid != kDead) {
      if (V.plain != nullptr) {
        split_walks(cid, mask);
      } else {
        structgen::LazyGil::release_here();
        walk(cid, V.trie, nullptr, mask, nullptr, nullptr);
      }
    }
    // a token spelled like another (phi-3's byte tokens) is allowed where that one is: the
    // tries hold one of them, and a walk may have set or cleared the other in bulk
    ChunkMarks& marks = chunk_marks;
    for (size_t k = 0; k + 1 < V.dups.size(); k += 2) {
      const int64_t c = V.dups[k], d = V.dups[k + 1];
      const uint32_t bit = 1u << (d & 31);
      mask[d >> 5] = (mask[c >> 5] >> (c & 31) & 1u) ? mask[d >> 5] | bit : mask[d >> 5] & ~bit;
      if (marks.few) marks.tok(d);
    }
    bool accepting;
    {
      std::lock_guard<std::recursive_mutex> g(mu_);
      accepting = accepting_[cid] != 0;
    }
    if (accepting) {
      set_ids(mask, stop_.data(), static_cast<int64_t>(stop_.size()));
      if (marks.few)
        for (int64_t t : stop_) marks.tok(t);
    }
  }

  // -- plain-byte shortcuts (token_index.PlainSplit) ----------------------------------------

  // How many plain bytes `r` (a configuration's row, or a DFA row with dead == -1) takes.
  static int live_plain(const int32_t* r, int32_t dead) {
    uint64_t out[4];
    fa::equal_bits(r, dead, out);
    return live_plain(out);
  }
  // the same from the bytes a row rejects, as a 256-bit set (Rule::none: one cache line of a
  // rule just compiled, where scanning the row read sixteen)
  static int live_plain(const uint64_t* dead_bits) {
    static const std::array<uint64_t, 4> plain_set = [] {
      std::array<uint64_t, 4> m{};
      for (uint8_t b : plain_bytes()) m[b >> 6] |= uint64_t(1) << (b & 63);
      return m;
    }();
    int live = 0;
    for (int w = 0; w < 4; ++w) live += __builtin_popcountll(plain_set[w] & ~dead_bits[w]);
    return live;
  }

  // -- bounded strings: the twin's mask less what overruns ------------------------------

  // A bounded string body is a counter over one character: its configurations are a
  // position each (k items matched), and close to the end of the bound (closer than the
  // longest token) each had a mask of its own, walked anew. Where the item reads one whole
  // character at a time, token t started at position k is allowed exactly when it is
  // allowed by the unbounded twin at the same place (same item, same lower bound, same
  // continuation) and the items it starts, r(t), fit: r(t) <= hi - k, and, for a token that
  // leaves the string, k + r(t) >= lo. Plain tokens start one item per byte, text tokens one
  // per character, the others are counted once per item rule (ItemTable). Llama-3's first
  // fill inside a string of maxLength 100 walked and made about 900 configurations (0.27 ms);
  // here it is the twin's mask (one text-loop walk, then lookups) and a few ids cleared.

  // ItemTable of item rule `b`, or nullptr where its items are not one character each: no
  // calls, a non-final start, final states that read nothing more, every plain byte and every
  // whole character from U+0080 up an item of its own. Under mu_.
  const ItemTable* item_table(int32_t b) {
    auto hit = item_tables_.find(b);
    if (hit != item_tables_.end()) return hit->second;
    const Rule& B = rules_[b];
    bool ok = !B.counter && B.num_states > 0 && !B.final[0];
    for (int32_t s = 0; s < B.num_states && ok; ++s)
      ok = B.call_off[s] == B.call_off[s + 1] && (!B.final[s] || !B.has_bytes[s]);
    for (uint8_t c : plain_bytes()) {
      if (!ok) break;
      const int32_t t = B.trans[c];
      ok = t >= 0 && B.final[t];
    }
    if (ok) {
      const int32_t m = multibyte_state(b, 0);
      ok = m == kNoChars || (m >= 0 && B.final[m]);
    }
    const ItemTable* out = nullptr;
    if (ok) {
      std::string key(reinterpret_cast<const char*>(B.trans), static_cast<size_t>(B.num_states) * 256 * 4);
      key.append(reinterpret_cast<const char*>(B.final.data()), B.final.size());
      std::lock_guard<std::mutex> g(V.item_mu);
      auto& slot = V.item_tables[key];
      if (slot == nullptr) slot = make_item_table(B);
      out = slot.get();
    }
    item_tables_.emplace(b, out);
    return out;
  }
  std::unique_ptr<const ItemTable> make_item_table(const Rule& B) const {
    const Trie& T = V.plain->other;
    struct At {
      int32_t s, items;
      bool left, dead;
    };
    std::vector<At> st(static_cast<size_t>(T.max_depth) + 1);
    st[0] = {0, 0, false, false};
    std::vector<std::pair<int32_t, int32_t>> found;  // (items, id), `left` as ~items
    for (int64_t i = 1; i < T.nodes; ++i) {
      const Trie::Node& nd = T.packed[static_cast<size_t>(i)];
      At a = st[nd.depth - 1];
      if (!a.left && !a.dead) {
        const int32_t t = B.trans[static_cast<int64_t>(a.s) * 256 + nd.byte];
        if (a.s == 0 && t < 0) {
          a.left = true;  // the byte is not an item: the string ends before it
        } else if (t < 0) {
          a.dead = true;  // a character or an escape left unfinished
        } else {
          a.items += a.s == 0;
          a.s = B.final[t] ? 0 : t;
        }
      }
      st[nd.depth] = a;
      if (nd.tok >= 0 && !a.dead) found.push_back({a.left ? ~a.items : a.items, nd.tok});
    }
    // grouped by count (a counting sort: a comparison sort of these pairs was most of it)
    std::unique_ptr<ItemTable> t(new ItemTable);
    const size_t n = static_cast<size_t>(T.max_depth) + 2;
    t->by_items_off.assign(n + 1, 0);
    t->leave_off.assign(n + 1, 0);
    for (const auto& [c, id] : found) {
      ++t->by_items_off[static_cast<size_t>(c < 0 ? ~c : c) + 1];
      if (c < 0) ++t->leave_off[static_cast<size_t>(~c) + 1];
    }
    for (size_t j = 0; j < n; ++j) {
      t->by_items_off[j + 1] += t->by_items_off[j];
      t->leave_off[j + 1] += t->leave_off[j];
    }
    t->by_items.resize(found.size());
    t->leave.resize(static_cast<size_t>(t->leave_off[n]));
    std::vector<int32_t> at(t->by_items_off.begin(), t->by_items_off.end() - 1), lat(t->leave_off.begin(), t->leave_off.end() - 1);
    for (const auto& [c, id] : found) {
      const size_t k = static_cast<size_t>(c < 0 ? ~c : c);
      t->by_items[static_cast<size_t>(at[k]++)] = id;
      if (c < 0) t->leave[static_cast<size_t>(lat[k]++)] = id;
    }
    return t;
  }

  // The twin's configuration in place of counter frame (r, ., p), as it is at or past its
  // lower bound, or kNone where what follows the counter takes a byte that starts an item
  // (then a token's items are not its own to count). Under mu_.
  int32_t twin_config(int32_t r, int32_t p) {
    const uint64_t key = static_cast<uint64_t>(static_cast<uint32_t>(r)) << 32 | static_cast<uint32_t>(p);
    auto hit = twin_config_.find(key);
    if (hit != twin_config_.end()) return hit->second;
    const Rule& R = rules_[r];
    int32_t out = close({{twin_[static_cast<size_t>(r)], R.lo, p}});
    if (p >= 0) {
      const int32_t after = close({stacks_[p]});  // the counter ended
      const int32_t* row_after = row(after);
      const int32_t* item = rules_[R.body].trans;
      for (int b = 0; b < 256 && out != kNone; ++b)
        if (item[b] >= 0 && row_after[b] != kDead) out = kNone;
    }
    twin_config_.emplace(key, out);
    return out;
  }

  // The first bounded counter (with a twin) of `cid` at an item's start: frame (r, k, p),
  // k items matched; false where no stack is one. Under mu_.
  bool counter_position(int32_t cid, Frame& out) {
    for (int32_t sid : config_of(cid)) {
      const Frame f = stacks_[sid];
      if (f.s != 0 || f.p < 0 || rules_[f.r].counter) continue;
      const Frame c = stacks_[f.p];  // (the counter's value once this item is matched)
      if (static_cast<size_t>(c.r) >= loaded_rules_ || twin_[static_cast<size_t>(c.r)] < 0 || rules_[c.r].body != f.r)
        continue;
      out = {c.r, c.s - 1, c.p};
      return true;
    }
    return false;
  }

  // A configuration that allows the same strings as `cid` up to `bytes` bytes: the
  // unbounded twin at its lower bound in place of a bounded counter's position (the other
  // stacks beside it kept), at or past the lower bound and with more bytes to go than
  // `bytes` before an item past the bound could start, else `cid` itself. A mask's walk steps into the twin
  // there (with the bytes on the longest path below the trie node, or the longest token's
  // length): each position of a bounded string is a configuration of its own, and a walk that
  // entered one at a string's first character (a pattern's first class, then a bounded class:
  // `^[A-Za-z0-9_][^<>]*$` with maxLength 260; an e-mail's domain labels, {0,61}) made one per
  // trie level and walked every token below it byte by byte (about 0.6 ms at 49K tokens),
  // where the twin loops and its tokens are taken in whole. Walks of masks only: the
  // configurations a token leads to (successor lists, the matcher's steps) stay exact.
  int32_t walk_equiv(int32_t cid, int64_t bytes) {
    const int32_t twin = equiv_.load(cid);
    if (twin >= 0) return equiv_slack_.load(cid) > bytes ? twin : cid;
    std::lock_guard<std::recursive_mutex> g(mu_);
    int64_t slack = -1;  // the bytes read before an item past the bound can start
    const int32_t out = twin_in_place(cid, slack);
    if (out != cid) ++walk_twins_;
    equiv_slack_.store(cid, static_cast<int32_t>(slack));
    equiv_.store(cid, out);  // (published last: a reader finding it finds the slack)
    return slack > bytes ? out : cid;
  }
  // walk_equiv() for strings of up to a whole token
  int32_t walk_equiv(int32_t cid) { return walk_equiv(cid, V.trie.max_depth); }
  // walk_equiv's configuration for `cid` (`cid` itself where there is none) and, in `slack`,
  // the bytes it stands for. Under mu_.
  int32_t twin_in_place(int32_t cid, int64_t& slack) {
    Frame c;
    if (!counter_position(cid, c)) return cid;
    const Rule& R = rules_[c.r];
    const int64_t k = c.s;
    // (an item of no bytes would count without reading: never lifted, refused here anyway)
    if (k < R.lo || R.item_min < 1 || R.item_min >= kUnreachable) return cid;
    // the counter's stacks, and the others beside them (after a label's last character
    // that the counter's item also takes: an e-mail's domain, `[a-z]([a-z-]{0,61}[a-z])?`)
    const int32_t alone = close({{c.r, k, c.p}});
    std::vector<Frame> raw{{twin_[static_cast<size_t>(c.r)], R.lo, c.p}};
    if (alone != cid) {
      const ConfigStacks own = config_of(cid), counter = config_of(alone);
      std::vector<int32_t> mine(own.begin(), own.end()), its(counter.begin(), counter.end());
      if (!std::includes(mine.begin(), mine.end(), its.begin(), its.end())) return cid;
      std::vector<int32_t> rest;
      std::set_difference(mine.begin(), mine.end(), its.begin(), its.end(), std::back_inserter(rest));
      for (int32_t other : rest) raw.push_back(stacks_[other]);
    }
    const int64_t left = R.hi - k;  // (bounds reach 10**12 and more: no product past int32)
    slack = left >= INT32_MAX / R.item_min ? INT32_MAX : left * R.item_min;
    return close(raw);
  }

  // Set `mask` (all zero on entry) for `cid` when it is a bounded counter's position at a
  // character's start, alone in its configuration (see ItemTable); false, nothing written,
  // elsewhere.
  bool bounded_walk(int32_t cid, uint32_t* mask) {
    const Plain& P = *V.plain;
    if (P.text_longest < 0) return false;
    int32_t r = -1, p = -1, twin = kNone;
    int64_t k = 0;
    const ItemTable* table = nullptr;
    {
      std::lock_guard<std::recursive_mutex> g(mu_);
      Frame c;
      if (!counter_position(cid, c)) return false;
      r = c.r;
      k = c.s;
      p = c.p;
      if (close({{r, k, p}}) != cid) return false;  // (other stacks beside the counter's)
      table = item_table(rules_[r].body);
      if (table == nullptr) return false;
      twin = twin_config(r, p);
      if (twin == kNone) return false;
    }
    const StoredMask* stored = masks_.load(twin);
    if (stored == nullptr) {
      // (not mask(): its per-thread buffer may be the one this mask is computed in)
      std::vector<uint32_t> buf(static_cast<size_t>(words_));
      stored = compute_into(twin, buf.data());
    }
    stored->copy_to(mask, words_);
    chunk_marks.few = false;  // (the twin's computation used them)
    const Rule& R = rules_[r];
    const int64_t room = R.hi - k;  // items left
    auto clear = [mask](int64_t t) { mask[t >> 5] &= ~(1u << (t & 31)); };
    if (room < P.longest)  // plain tokens: one item a byte
      for (int64_t j = P.by_len.offsets[room + 1]; j < P.by_len.offsets[P.longest + 1]; ++j) clear(P.by_len.ids[j]);
    if (room < P.text_longest) {  // text tokens: one a character
      const auto& off = P.text_chars_off;
      for (int64_t j = off[static_cast<size_t>(room) + 1]; j < off[static_cast<size_t>(P.text_longest) + 1]; ++j)
        clear(P.text_by_chars[static_cast<size_t>(j)]);
    }
    // the others: by the items they start, then those leaving the string before lo
    const auto& off = table->by_items_off;
    const int64_t most = static_cast<int64_t>(off.size()) - 2;
    for (int64_t j = off[static_cast<size_t>(std::min(room, most)) + 1]; j < off.back(); ++j) clear(table->by_items[static_cast<size_t>(j)]);
    if (k < R.lo) {
      const auto& loff = table->leave_off;
      for (int64_t j = 0; j < loff[static_cast<size_t>(std::min(R.lo - k, most + 1))]; ++j) clear(table->leave[static_cast<size_t>(j)]);
    }
    for (int64_t t : stop_) clear(t);  // (the twin may end where this cannot: compute_mask sets them back)
    bounded_walks_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // Whether simple frame `f` is walked by frames_walk: how many bytes its state takes (0: not
  // walked there). A frame taking a few bytes is (inside a name or a literal); one taking
  // more (the declared names' first letters, in one DFA) only where each leads to a simple
  // state that takes a few bytes in turn (the names' second letters) and their targets are
  // mostly apart, as in a trie. A string's body, or a host name's label, takes dozens byte
  // after byte: walked node by node, its tokens cost ten times the walks of split_walks'
  // other paths; a character class's bytes lead to one state (its repeats: class_walk).
  int walkable_frame(const Frame& f) const {
    const Rule& R = rules_[f.r];
    if (R.counter || !R.simple[static_cast<size_t>(f.s)]) return 0;
    const auto& dead = R.none[static_cast<size_t>(f.s)];
    const int live = taken_bytes(dead);
    if (live <= kVirtualRootBytes || live > kMaxFrameBytes) return live <= kVirtualRootBytes ? live : 0;
    const int32_t* row = R.trans + f.s * 256;
    int32_t seen[kMaxFrameBytes];
    int distinct = 0;
    for (int w = 0; w < 4; ++w)
      for (uint64_t bits = ~dead[w]; bits != 0; bits &= bits - 1) {
        const int32_t t = row[w * 64 + __builtin_ctzll(bits)];
        if (t == f.s || !R.simple[static_cast<size_t>(t)]) return 0;
        if (std::find(seen, seen + distinct, t) != seen + distinct) continue;
        seen[distinct++] = t;
        if (taken_bytes(R.none[static_cast<size_t>(t)]) > kMaxSecondBytes) return 0;
      }
    return 2 * distinct < live ? 0 : live;
  }

  // A configuration whose stacks are simple frames that take a few bytes (a member name's
  // start among the declared names: a stack per name, each reading its name's next byte),
  // maybe beside others (a free name's string): its mask is the union of each such frame's
  // own walk from its DFA row (stacks are stepped apart), each down its name's path of the
  // trie, and of the other stacks' mask, a configuration of their own. Walked together,
  // every trie node inside the names made the configuration of the frames still alive there
  // and its byte row (a pass over each frame's DFA row, cold after the compile): o2312's
  // `compilerOptions`, 52 declared names, made 80 configurations and 47 rows in one mask of
  // 120 µs (SmolLM2).
  bool frames_walk(int32_t cid, uint32_t* mask) {
    if (!V.trie.by_first_byte) return false;
    static thread_local std::vector<Frame> frames_tl;
    static thread_local std::vector<int32_t> rest_tl;
    std::vector<Frame>& frames = frames_tl;
    std::vector<int32_t>& rest = rest_tl;  // the other frames' stacks
    frames.clear();
    rest.clear();
    int32_t others = kDead;
    {
      std::lock_guard<std::recursive_mutex> g(mu_);  // (other threads intern meanwhile: the vectors move)
      const ConfigStacks own = config_of(cid);
      if (own.size() == 0 || own.size() > kMaxSplitFrames) return false;
      int many = 0;  // frames taking more than a few bytes
      for (int32_t sid : own) {
        const Frame& f = stacks_[sid];
        const int live = walkable_frame(f);
        if (live == 0) {
          rest.push_back(sid);
          continue;
        }
        frames.push_back(f);
        many += live > kVirtualRootBytes;
      }
      // (a frame alone taking a few bytes: split_walks' own walk from its DFA row; beside
      // other stacks, too few frames to pay for a configuration of those)
      if (frames.empty() || (rest.empty() && frames.size() == 1 && many == 0) ||
          (!rest.empty() && (frames.size() < kMinSplitFrames)))
        return false;
      if (!rest.empty()) others = intern_config(rest, accepting_[cid] != 0);
    }
    if (frames.size() >= kSplitReleaseFrames) structgen::LazyGil::release_here();
    ChunkMarks& marks = chunk_marks;
    if (others != kDead) {
      split_walks(others, mask, false);  // (first: some of its walks take the mask as empty)
      split_frames_.fetch_add(1, std::memory_order_relaxed);
    } else {
      marks.start(words_);
    }
    // as walk_nodes' walk of a few first bytes from a simple frame, once per frame, with one
    // cache (keyed by configuration and rule state: the same across the frames)
    RowCache cache;
    cache.siblings = true;
    const int32_t** const row_at = row_at_buffer();
    cache.virt_at = virt_at_buffer();
    for (const Frame& f : frames) {
      const Rule& R = rules_[f.r];
      const int32_t* r0 = R.trans + f.s * 256;
      cache.virt_at[1] = VirtAt{R.simple.data(), R.trans, f.r, f.p};
      row_at[1] = r0;
      const auto& dead = R.none[static_cast<size_t>(f.s)];
      for (int w = 0; w < 4; ++w)
        for (uint64_t bits = ~dead[w]; bits != 0; bits &= bits - 1) {
          const int b = w * 64 + __builtin_ctzll(bits);
          const int32_t slot = V.root_slot[b];
          if (slot >= 0) visit_few(V.kids[static_cast<size_t>(slot)], 1, r0[b], row_at, cache, mask);
        }
    }
    frames_walks_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // Set in `mask` (all zero on entry) the tokens a string body decides in whole and walk the rest.
  // (`frames`: frames_walk may serve it; not for frames_walk's own other stacks, which it
  // found none of its frames among, and whose walk would reuse its per-thread lists)
  void split_walks(int32_t cid, uint32_t* mask, bool frames = true) {
    if (counted_ && bounded_walk(cid, mask)) return;
    if (frames && frames_walk(cid, mask)) return;
    const Plain& P = *V.plain;
    const auto& plain = plain_bytes();
    // A frame alone in a simple state with no byte row yet (inside a name or a literal, most
    // first visits there) is read by its DFA row, and its walk below starts from that row:
    // the configuration's own byte row (256 successors closed) was a fifth of such a mask.
    SimpleFrame f;
    bool simple = simple_frame(cid, f);
    const int32_t* r = simple ? dfa_row(f) : row(cid);
    {
      // A configuration that takes only a few plain bytes (inside a property name or a
      // literal) gets the whole trie's walk below, which visits the first bytes it takes and
      // nothing else; the per-byte bookkeeping that decides so cost as much as that walk.
      const int live = simple ? live_plain(rules_[f.r].none[static_cast<size_t>(f.s)].data()) : live_plain(r, kDead);
      if (live > 0 && live < kMinLoopingFirstBytes) {  // (none live: every plain byte alike, below)
        simple = simple && live <= kVirtualRootBytes;
        walk(cid, V.trie, nullptr, mask, nullptr, nullptr, simple ? &f : nullptr, true);
        return;
      }
    }
    structgen::LazyGil::release_here();  // (past the short walks: see lazy_gil.hpp)
    if (simple) r = row(cid);
    // (arrays, not vectors: a first visit allocated twice here, and allocation is what
    // threads filling one batch contend on)
    std::array<int32_t, kMaxPlain> into;
    for (size_t k = 0; k < plain.size(); ++k) into[k] = r[plain[k]];
    if (counted_)  // (what each first byte leads to, for the tokens' rest: see walk_equiv)
      for (size_t k = 0; k < plain.size(); ++k) into[k] = k > 0 && r[plain[k]] == r[plain[k - 1]] ? into[k - 1] : walk_equiv(into[k]);
    ByteSet taken;
    int64_t room = plain_room(cid, into, P.longest, taken);
    if (room > 0 && taken != all_plain()) {
      if (class_walk(cid, room, taken, mask)) return;
      room = -1;  // (no table for the class: byte by byte below)
    }
    if (room >= 0) {  // every plain byte acts alike, step after step
      if (room < P.longest) {  // a bounded string: the plain tokens that fit
        set_first_ids(mask, P.tokens.data(), P.by_len.ids, P.by_len.offsets[room + 1], P.by_len.offsets[P.longest + 1]);
        walk_rest(cid, mask);
        return;
      }
      // the mask is empty so far: a copy, not an OR
      const int32_t body = char_target(cid);
      // (or `body` is `cid` one character further along a bounded string whose end no token
      // reaches: a text prefix of j characters leads j steps along, and from there the rest
      // of the token acts as from `body`)
      if (text_loop(body) || (body > kDead && shifted(cid, body, V.trie.max_depth + 1))) {
        std::memcpy(mask, P.tokens_and_text.data(), static_cast<size_t>(words_) * 4);
        // a token's text prefix leads to `body` and stays there (see walk_other)
        walk(cid, P.head, nullptr, mask, nullptr, nullptr);
        walk_nodes<true, false, false, true>(body, P.tail, nullptr, mask, nullptr, nullptr);
        return;
      }
      // A loop on every plain byte and every character from U+0080 up but a few, which end it
      // (`.` of "^.*$" takes no U+2028 or U+2029; patternProperties keep names to the
      // characters where the regex engines agree): as a text loop, then the tokens holding
      // one of those characters are cleared. A token whose first character is not whole was
      // walked exactly, and holds none of them before its end (left as it is anyway when its
      // first byte is a quote, an escape or a control). Walking every token that is not
      // plain there cost about 0.35 ms at 128K tokens.
      const std::vector<int32_t>* killed = nullptr;
      if (room == P.longest && into[0] == cid && text_loop_killing(cid, killed) && killed != nullptr) {
        std::memcpy(mask, P.tokens_and_text.data(), static_cast<size_t>(words_) * 4);
        walk(cid, P.head, nullptr, mask, nullptr, nullptr);
        walk_nodes<true, false, false, true>(cid, P.tail, nullptr, mask, nullptr, nullptr);
        killed_loops_.fetch_add(1, std::memory_order_relaxed);
        const Vocab::CharIndex& ci = V.char_index();
        for (int32_t c : *killed)
          for (int64_t k = ci.off[static_cast<size_t>(c)]; k < ci.off[static_cast<size_t>(c) + 1]; ++k) {
            const int32_t t = ci.toks[static_cast<size_t>(k)];
            const uint8_t b = V.first_byte[static_cast<size_t>(t)];
            if (b >= 0x80 || (b >= 0x20 && b < 0x7F && b != '"' && b != '\\')) mask[t >> 5] &= ~(1u << (t & 31));
          }
        return;
      }
      std::memcpy(mask, P.tokens.data(), static_cast<size_t>(words_) * 4);
      walk_rest(cid, mask);
      return;
    }
    if (level_walk(cid, mask)) return;
    std::array<uint8_t, kMaxPlain> good{};
    int count = 0;
    // most plain bytes lead to one configuration: ask the memo (a lock and a hash lookup) once
    // per run of equal successors
    for (size_t k = 0; k < plain.size(); ++k)
      count += good[k] = k > 0 && into[k] == into[k - 1] ? good[k - 1] : loops_plain(into[k]);
    // Every string of whole characters keeps some stack alive (an unanchored pattern's body:
    // "pattern": "abc", whose states count how much of abc was seen and never reject a
    // character): every plain and text token is allowed, and only `other` (quotes, escapes,
    // controls, partial characters) is walked. No state there loops on every byte, and the
    // walk of the whole vocabulary it had took about 1 ms at 128K tokens. Where most first
    // bytes loop (a member name's start beside the declared names' first letters) the
    // per-first-byte path below walks less, and the name's states there are total too.
    if (count < static_cast<int>(plain.size()) / 2 && text_total(cid)) {
      text_totals_.fetch_add(1, std::memory_order_relaxed);
      const uint32_t* all = P.tokens_and_text.data();
      for (int64_t w = 0; w < words_; ++w) mask[w] |= all[w];
      walk(cid, P.other, nullptr, mask, nullptr, nullptr);
      return;
    }
    if (count < kMinLoopingFirstBytes) {
      if (first_class_walk(cid, into, mask) || closure_class_walk(cid, into, mask)) return;
      walk(cid, V.trie, nullptr, mask, nullptr, nullptr);
      return;
    }
    // some first bytes lead into a string body (the first character of a property name
    // beside the declared names' own prefixes): take their tokens per first byte
    uint8_t flags[256] = {0}, walk_plain[256] = {0};
    for (size_t k = 0; k < plain.size(); ++k) {
      if (good[k])
        flags[plain[k]] = 1;
      else if (into[k] != kDead)
        walk_plain[plain[k]] = 1;
    }
    // the walked first bytes' plain tokens too (in a free name nearly all are allowed), less
    // those below a rejected byte
    uint8_t set_first[256];
    for (int b = 0; b < 256; ++b) set_first[b] = flags[b] | walk_plain[b];
    set_runs(mask, P.by_first, set_first);
    unwalk_plain_only(cid, walk_plain, mask);
    // Every first byte taken whole leads to a configuration that stays in place on every
    // character, or (`killed`) on every one but the same few characters, which end it: a
    // property name when patternProperties keep names to the characters where the regex
    // engines agree (without U+2028, or Unicode digits with \\d). Their tokens are cleared
    // at the end; walking every token that is not plain instead was 0.5 ms at 128K tokens.
    bool all_text = true;
    const std::vector<int32_t>* killed = nullptr;  // (the index's own lists: no reference counts shared between threads)
    for (size_t k = 0; k < plain.size() && all_text; ++k)
      if (good[k] && !(k > 0 && good[k - 1] && into[k] == into[k - 1])) all_text = text_loop_killing(into[k], killed);
    if (all_text) {
      uint8_t other_first[256], whole[256];
      for (int b = 0; b < 256; ++b) {
        other_first[b] = !flags[b];
        whole[b] = flags[b];
      }
      int32_t multi = multibyte_target(cid);
      if (counted_ && multi > kDead) multi = walk_equiv(multi);
      // (`multi`: every first character from U+0080 up leads there, none rejected, so a token
      // whose first character is one the names' bodies kill is allowed all the same, and the
      // clearing below would drop it: whole only where nothing is killed)
      bool multi_whole =
          multi == kNoChars || (multi != kNone && text_loop_killing(multi, killed) && killed->empty());
      if (!multi_whole && multi == kNone && killed != nullptr) {
        // the first character from U+0080 up: to one such configuration, or killed alike
        const CharKill& first = char_kill(cid);
        multi_whole = first.target != kNone && first.killed != nullptr && *first.killed == *killed &&
                      (first.target == kNoChars || text_loop_killing(first.target, killed));
        if (multi_whole) multi = first.target;
      }
      if (multi_whole)  // non-ASCII first characters too
        for (int b = 0x80; b < 0x100; ++b) {
          other_first[b] = 0;
          whole[b] = 1;
        }
      set_runs(mask, P.text_by_first, whole);
      walk(cid, P.text_trie, other_first, mask, nullptr, nullptr);
      if (P.tails_pay) {
        int32_t after[256];
        for (int b = 0; b < 256; ++b) after[b] = b < 0x80 ? kDead : whole[b] ? multi : kNone;
        for (size_t k = 0; k < plain.size(); ++k) after[plain[k]] = good[k] ? into[k] : into[k] == kDead ? kDead : kNone;
        walk_other(cid, after, mask);
      } else {
        walk(cid, P.other, nullptr, mask, nullptr, nullptr);
      }
      if (killed != nullptr && !killed->empty()) {
        killed_loops_.fetch_add(1, std::memory_order_relaxed);
        // (a token whose first byte is walked was walked exactly: left as it is)
        const Vocab::CharIndex& ci = V.char_index();
        for (int32_t c : *killed)
          for (int64_t k = ci.off[static_cast<size_t>(c)]; k < ci.off[static_cast<size_t>(c) + 1]; ++k) {
            const int32_t t = ci.toks[static_cast<size_t>(k)];
            if (whole[V.first_byte[static_cast<size_t>(t)]]) mask[t >> 5] &= ~(1u << (t & 31));
          }
      }
    } else {
      walk(cid, P.rest, nullptr, mask, nullptr, nullptr);
    }
  }

  // Set in `mask` the allowed tokens of Plain::rest (those not made of plain bytes), from a
  // configuration where every plain byte acts alike step after step (plain_room >= 0). Where
  // every whole character from U+0080 up acts like them too (a bounded string body counts
  // characters: each position is a configuration of its own), a text token is allowed if and
  // only if its characters fit (text_fit); only Plain::other is walked. Llama-3's text
  // tokens are 28,608: walking them cost about 0.35 ms at every position of a maxLength string.
  void walk_rest(int32_t cid, uint32_t* mask) {
    const Plain& P = *V.plain;
    const int64_t fit = P.text_longest < 0 ? -1 : text_fit(cid, P.text_longest);
    if (fit < 0) {
      walk(cid, P.rest, nullptr, mask, nullptr, nullptr);
      return;
    }
    // (text and plain ids are apart: clearing the longer text tokens leaves the plain ones set)
    const auto& off = P.text_chars_off;
    set_first_ids(mask, P.text.data(), P.text_by_chars.data(), off[static_cast<size_t>(std::min(fit, P.text_longest)) + 1],
                  off[static_cast<size_t>(P.text_longest) + 1]);
    walk(cid, P.other, nullptr, mask, nullptr, nullptr);
  }

  // Set in `mask` the first `fit` of the `all` ids of a table (the tokens that fit), whose
  // bitmask is `all_bits`: where most fit, all of them less the others (a pass over the words
  // and a few bits cleared, where setting tens of thousands of ids one by one cost more).
  void set_first_ids(uint32_t* mask, const uint32_t* all_bits, const int64_t* ids, int64_t fit, int64_t all) {
    if (all - fit < fit) {
      for (int64_t w = 0; w < words_; ++w) mask[w] |= all_bits[w];
      for (int64_t k = fit; k < all; ++k) mask[ids[k] >> 5] &= ~(1u << (ids[k] & 31));
    } else {
      set_ids(mask, ids, fit);
    }
  }

  // How many characters may follow `cid`, at most `limit`, when at every step each plain
  // byte and each whole character from U+0080 up leads to one configuration, the same for
  // all, until at a step none goes on at all; -1 where some step tells them apart (or a
  // character from U+0080 up goes on where no plain byte does). A step that leads back to
  // its own configuration makes any length fit (`limit`).
  int64_t text_fit(int32_t cid, int64_t limit) {
    const auto& plain = plain_bytes();
    int32_t cur = cid;
    for (int64_t n = 0; n < limit; ++n) {
      if (trimmed_ && virt_.load(cur) >= 0) {
        const int64_t out = text_fit_dfa(cur, n, limit);
        if (out != kUndecided) return out;
        if (n >= limit) return limit;
      }
      const int32_t* r = row(cur);
      if (r[plain[0]] == kDead) {  // the end, if nothing at all goes on
        for (uint8_t b : plain)
          if (r[b] != kDead) return -1;
        for (int b = 0x80; b < 0x100; ++b)
          if (r[b] != kDead) return -1;
        return n;
      }
      const int32_t nxt = char_target(cur);
      if (nxt == kNone) return -1;
      if (nxt == cur) return limit;
      if (shifted(cur, nxt, limit - n)) return limit;
      cur = nxt;
    }
    return limit;
  }

  // plain_room and text_fit from a frame alone in a simple state (an unrolled bounded string:
  // its positions are states of one rule, maxLength 64 and less), stepped on the rule's DFA
  // while every byte they test leads to one simple state or to none: no configuration and
  // no byte row is made for the positions passed (a maxLength 64 string made about 580 at
  // its first fill). Where the DFA does not decide (targets that differ as states, a state
  // that is not simple: configurations may still agree there), `cur` becomes the
  // configuration of the state reached, `n` its step, and kUndecided is returned for the
  // configurations' own loop to go on from there. The rule is trimmed: a live transition is
  // a live configuration.
  static constexpr int64_t kUndecided = -100;
  // The frame of `cid`, a frame alone in a simple state (virt_ set), whether or not its byte
  // row exists yet (simple_frame() answers only before it does)
  SimpleFrame lone_frame(int32_t cid) const {
    const int64_t v = virt_.load(cid);
    SimpleFrame f;
    f.r = static_cast<int32_t>(v >> 32);
    f.s = static_cast<int32_t>(v & 0xFFFFFFFF);
    f.p = virt_p_.load(cid);
    return f;
  }
  int64_t plain_room_dfa(int32_t& cur, int64_t& n, int64_t longest, const ByteSet& taken) {
    const auto [r, start, p] = lone_frame(cur);
    const Rule& R = rules_[r];
    int32_t s = start;
    for (;;) {
      // (plain_room's step at the configuration of state s, step n)
      const int32_t* row = R.trans + static_cast<int64_t>(s) * 256;
      int32_t t = -1;
      bool decided = true, all = true;
      for (uint8_t b : plain_bytes()) {
        const int32_t x = row[b];
        const bool in = taken[b >> 6] >> (b & 63) & 1u;
        if (x < 0) {
          all = all && !in;
          continue;
        }
        if (!in || (t >= 0 && x != t)) {
          decided = false;
          break;
        }
        t = x;
      }
      if (!decided || (t >= 0 && (!all || !R.simple[static_cast<size_t>(t)]))) {
        if (s != start) cur = frame_config(r, s, p);
        return kUndecided;
      }
      // (plain_room's loop test, then its next step)
      if (n >= longest) return longest;
      if (t < 0) return n;
      if (t == s) return longest;
      s = t;
      ++n;
    }
  }
  int64_t text_fit_dfa(int32_t& cur, int64_t& n, int64_t limit) {
    const auto& plain = plain_bytes();
    const auto [r, start, p] = lone_frame(cur);
    const Rule& R = rules_[r];
    int32_t s = start;
    for (; n < limit; ++n) {
      // (text_fit's step at the configuration of state s, step n)
      const int32_t* row = R.trans + static_cast<int64_t>(s) * 256;
      const int32_t t = row[plain[0]];
      bool decided = t >= 0;
      for (size_t k = 1; k < plain.size() && decided; ++k) decided = row[plain[k]] == t;
      int32_t multi = kMbByConfigs;
      if (decided) {
        std::lock_guard<std::recursive_mutex> g(mu_);
        multi = multibyte_state(r, s);
      }
      if (!decided || (multi != t && multi != kNoChars) || !R.simple[static_cast<size_t>(t)]) {
        if (s != start) cur = frame_config(r, s, p);
        return kUndecided;
      }
      if (t == s) return limit;
      s = t;
    }
    return limit;
  }

  // Whether `nxt` is `cur` one item further along bounded counters and at least `need` items
  // short of their upper bounds: the same stacks frame for frame and the same acceptance,
  // but for counter frames one higher, each at or past its lower bound. A counter's frame
  // acts alike at every value from lo to hi - 1 (the steps test s >= lo and s < hi alone),
  // so the step that led from `cur` to `nxt` repeats from `nxt` for `need` more steps:
  // plain_room and text_fit, which step a bounded string's positions one by one to find its
  // room, stop there. A string of maxLength 255 made a configuration and a byte row for each
  // of the longest token's positions, and about ten more for the partial characters and
  // escapes of each: about 1,200 at the first fill of the string (0.45 ms at 128K tokens).
  bool shifted(int32_t cur, int32_t nxt, int64_t need) {
    if (!counted_ || cur < 0 || nxt < 0) return false;
    std::lock_guard<std::recursive_mutex> g(mu_);
    if (accepting_[cur] != accepting_[nxt]) return false;
    const ConfigStacks a = config_of(cur), b = config_of(nxt);
    if (a.size() != b.size()) return false;
    bool moved = false;
    // one frame chain of `b` for each of `a`'s (and so, the sizes equal and each of a's chains
    // matching one of b's distinct ones, the reverse)
    std::vector<uint8_t> used(b.size(), 0);
    for (int32_t sa : a) {
      bool found = false;
      for (size_t k = 0; k < b.size() && !found; ++k)
        if (!used[k] && shifted_stack(sa, b[k], need, moved)) {
          used[k] = 1;
          found = true;
        }
      if (!found) return false;
    }
    if (moved) shifts_.fetch_add(1, std::memory_order_relaxed);
    return moved;
  }
  // shifted() for one stack: frame for frame equal, or a counter one higher as shifted() says
  bool shifted_stack(int32_t sa, int32_t sb, int64_t need, bool& moved) const {
    bool any = false;
    while (sa != sb) {
      if (sa < 0 || sb < 0) return false;
      const Frame fa = stacks_[sa], fb = stacks_[sb];
      if (fa.r != fb.r) return false;
      if (fa.s != fb.s) {
        const Rule& R = rules_[fa.r];
        if (!R.counter || R.hi < 0 || fb.s != fa.s + 1 || fa.s < R.lo || R.hi - fb.s < need) return false;
        any = true;
      }
      sa = fa.p;
      sb = fb.p;
    }
    moved = moved || any;
    return true;
  }

  // plain_room's bytes as a ByteSet when they are every plain byte
  static const ByteSet& all_plain() {
    static const ByteSet set = [] {
      ByteSet m{0, 0, 0, 0};
      for (uint8_t b : plain_bytes()) m[b >> 6] |= uint64_t(1) << (b & 63);
      return m;
    }();
    return set;
  }

  // The mask of `cid` (all zero on entry) where the plain bytes it takes are one class (not
  // every plain byte: a pattern's [0-9a-f]{40}, [a-zA-Z0-9_.]+) for `room` steps, each to one
  // configuration, and then none (plain_room): the class's plain tokens up to `room` bytes are
  // allowed and every other plain token is not (a byte outside the class, or one past the
  // room, is dead where it comes); the tokens with another byte are walked. Each position of
  // such a string is a configuration of its own, where the walk through every class token
  // cost up to a quarter of a millisecond a position. False (nothing written) once the
  // vocabulary keeps too many classes.
  bool class_walk(int32_t cid, int64_t room, const ByteSet& taken, uint32_t* mask) {
    const uint32_t* bits = V.class_tokens(taken);
    if (bits == nullptr) return false;
    const Plain& P = *V.plain;
    const int64_t fit = P.by_len.offsets[std::min(room, P.longest) + 1], all = P.by_len.offsets[P.longest + 1];
    if (all - fit < fit) {  // most plain tokens fit: the class's less the longer ones
      std::memcpy(mask, bits, static_cast<size_t>(words_) * 4);
      for (int64_t k = fit; k < all; ++k) mask[P.by_len.ids[k] >> 5] &= ~(1u << (P.by_len.ids[k] & 31));
    } else {
      for (int64_t k = 0; k < fit; ++k) {
        const int64_t id = P.by_len.ids[k];
        mask[id >> 5] |= bits[id >> 5] & (1u << (id & 31));
      }
    }
    if (room >= P.longest && text_class_walk(cid, taken, mask)) return true;
    walk(cid, V.plain->rest, nullptr, mask, nullptr, nullptr);
    return true;
  }

  // The tokens of Plain::rest of `cid`, whose plain bytes loop on the class `taken` (after the
  // first, from cid, to the loop's configuration A): where A also keeps every character from
  // U+0080 up but a few (rejected alike from cid: `^[\\S]+$` keeps no space, plain or not),
  // the text tokens of the class are set from a per-vocabulary bitmask, those holding a
  // rejected character cleared (Vocab::char_index), and only Plain::other is walked. Walking
  // all of Plain::rest took 0.19-0.24 ms at such a string's start with Llama-3. False,
  // nothing written, where the shape differs.
  bool text_class_walk(int32_t cid, const ByteSet& taken, uint32_t* mask) {
    const auto& plain = plain_bytes();
    int first = -1;
    for (uint8_t b : plain)
      if (taken[b >> 6] >> (b & 63) & 1u) {
        first = b;
        break;
      }
    if (first < 0) return false;
    const int32_t a = row(cid)[first];
    if (a <= kDead) return false;
    const int32_t* ra = row(a);
    for (uint8_t b : plain)
      if ((taken[b >> 6] >> (b & 63) & 1u) ? ra[b] != a : ra[b] != kDead) return false;
    // (a class of ASCII bytes alone, `[a-z0-9.-]+`: the walk rejects every token that is not
    // plain at its first byte outside the class, cheaper than asking the characters)
    bool any_lead = false;
    for (int b = 0xC2; b <= 0xF4 && !any_lead; ++b) any_lead = ra[b] != kDead;
    if (!any_lead) return false;
    const CharKill& ka = char_kill(a);
    if (ka.killed == nullptr || (ka.target != a && ka.target != kNoChars)) return false;
    if (a != cid) {
      const CharKill& kc = char_kill(cid);
      if (kc.killed == nullptr || (kc.target != a && kc.target != kNoChars) || *kc.killed != *ka.killed) return false;
    }
    // Every text token holds a character from U+0080 up: where none is kept (`[a-z0-9.-]+`)
    // none is allowed, and only Plain::other is walked; where many are rejected (\\w beside
    // letters), clearing their tokens one by one costs more than the walk it replaces.
    if (ka.target != kNoChars) {
      static constexpr int64_t kMaxKilledTokens = 8192;
      const Vocab::CharIndex& ci = V.char_index();
      int64_t killed = 0;
      for (int32_t c : *ka.killed) killed += ci.off[static_cast<size_t>(c) + 1] - ci.off[static_cast<size_t>(c)];
      if (killed > kMaxKilledTokens) return false;
      const uint32_t* bits = V.text_class_tokens(taken);
      if (bits == nullptr) return false;
      for (int64_t w = 0; w < words_; ++w) mask[w] |= bits[w];
      // (before the walk of Plain::other, which sets its own tokens exactly)
      for (int32_t c : *ka.killed)
        for (int64_t k = ci.off[static_cast<size_t>(c)]; k < ci.off[static_cast<size_t>(c) + 1]; ++k) {
          const int32_t t = ci.toks[static_cast<size_t>(k)];
          mask[t >> 5] &= ~(1u << (t & 31));
        }
    }
    walk(cid, V.plain->other, nullptr, mask, nullptr, nullptr);
    text_classes_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // Walk the tokens of Plain::other from `cid`. after[b]: the configuration after a first
  // character starting with byte b, when it loops on every text character (kDead: no token
  // goes on; kNone: walked through in full). A token's text prefix leads there and stays, so
  // only its rest decides, and thousands of tokens share a few hundred rests ("\n", "\"",
  // "\","): Plain::tail is walked once per distinct configuration, where the whole `other`
  // trie went through every prefix first (Llama-3: ~5,300 nodes a walk). The tables here cost
  // a few thousand instructions: worth it where Plain::tails_pay.
  void walk_other(int32_t cid, const int32_t* after, uint32_t* mask) {
    const Plain& P = *V.plain;
    uint8_t whole[256], head[256], keep[256];
    bool any_whole = false;
    for (int b = 0; b < 256; ++b) {
      whole[b] = after[b] == kNone;
      head[b] = !whole[b];
      any_whole = any_whole || whole[b];
    }
    walk(cid, P.head, any_whole ? head : nullptr, mask, nullptr, nullptr);
    if (any_whole) walk(cid, P.other, whole, mask, nullptr, nullptr);
    if (P.tail.nodes <= 1) return;
    uint8_t done[256] = {0};
    for (int b = 0; b < 256; ++b) {
      const int32_t x = after[b];
      if (done[b] || x == kNone || x == kDead || x == kNoChars) continue;
      bool all = b == 0;
      for (int c = 0; c < 256; ++c) {
        keep[c] = after[c] == x;
        done[c] = done[c] || keep[c];
        all = all && keep[c];
      }
      // (the groups' ids are below V.max_id, checked against the mask at construction)
      walk_nodes<true, false, false, true>(x, P.tail, nullptr, mask, nullptr, nullptr, all ? nullptr : keep);
    }
  }

  // Whether every plain byte and whole character from U+0080 up keeps `cid` in place.
  bool text_loop(int32_t cid) { return cid > kDead && char_target(cid) == cid; }

  // text_loop(), or: every plain byte keeps `cid` in place and every character from U+0080
  // up that a token holds (Vocab::char_index) keeps it in place or is rejected, those
  // rejected being `killed` (char_index positions) if it is set, else setting it. An exact
  // text loop rejects none: `killed` is set to the empty list.
  bool text_loop_killing(int32_t cid, const std::vector<int32_t>*& killed) {
    static const std::vector<int32_t> none;
    if (cid <= kDead) return false;
    const std::vector<int32_t>* mine;
    if (text_loop(cid)) {
      mine = &none;
    } else {
      if (!loops_plain(cid)) return false;
      const CharKill& k = char_kill(cid);
      if (k.killed == nullptr || (k.target != cid && k.target != kNoChars)) return false;
      mine = k.killed.get();
    }
    if (killed == nullptr) {
      killed = mine;
      return true;
    }
    return killed == mine || *killed == *mine;
  }

  // Where the characters of Vocab::char_index lead from `cid`: `target`, the one configuration
  // all that are not rejected lead to (kNoChars: every one is rejected, or there are none;
  // kNone: they lead apart, or `cid` is not a simple frame), and `killed`, the positions of
  // those rejected. Stepped by the frame's DFA rows (no configuration made per partial
  // character), consecutive characters sharing the steps of their common first bytes.
  struct CharKill {
    int32_t target = kNone;
    std::shared_ptr<const std::vector<int32_t>> killed;
  };
  // (the memo's entry: unordered_map nodes do not move, and entries are never erased)
  const CharKill& char_kill(int32_t cid) {
    {
      std::lock_guard<std::recursive_mutex> g(mu_);
      auto it = char_kills_.find(cid);
      if (it != char_kills_.end()) return it->second;
    }
    CharKill out;
    // (a frame alone in a simple state, its byte row made or not: simple_frame() answers only
    // for configurations without one)
    const int64_t v = virt_.load(cid);
    if (v >= 0) {
      const SimpleFrame f{static_cast<int32_t>(v >> 32), static_cast<int32_t>(v & 0xFFFFFFFF), virt_p_.load(cid)};
      const Rule& R = rules_[f.r];
      const Vocab::CharIndex& ci = V.char_index();
      // Every character the vocabulary's bytes can spell led to one state, none rejected
      // (multibyte_state, by byte ranges and memoised per state): the characters tokens hold
      // do too. A string's body or a free name's is such a state; stepping the thousands of
      // characters one by one was a tenth of a member name's first mask.
      int32_t whole = kMbByConfigs;
      if (!ci.chars.empty()) {
        std::lock_guard<std::recursive_mutex> g(mu_);
        whole = multibyte_state(f.r, f.s);
      }
      if (whole >= 0) {
        out.killed = std::make_shared<std::vector<int32_t>>();
        out.target = frame_config(f.r, whole, f.p);
        if (out.target == kDead) out.target = kNone;
        std::lock_guard<std::recursive_mutex> g(mu_);
        return char_kills_.emplace(cid, std::move(out)).first->second;
      }
      auto killed = std::make_shared<std::vector<int32_t>>();
      int32_t st[5] = {f.s, -1, -1, -1, -1};
      uint32_t prev = 0;
      int prev_len = 0, target = -1;
      bool apart = false;
      for (size_t k = 0; k < ci.chars.size() && !apart; ++k) {
        const uint32_t c = ci.chars[k];
        const int len = c >= 0x1000000u ? 4 : c >= 0x10000u ? 3 : 2;
        int same = 0;  // leading bytes shared with the previous character (their steps kept)
        if (len == prev_len)
          while (same < len - 1 && ((c ^ prev) >> (8 * (len - 1 - same)) & 0xFF) == 0) ++same;
        for (int j = same; j < len; ++j) {
          const int32_t s = st[j];
          if (s < 0 || (j > 0 && !R.simple[static_cast<size_t>(s)])) {
            if (s >= 0) apart = true;  // (a state that is not simple: the DFA alone does not tell)
            st[j + 1] = -1;
            continue;
          }
          st[j + 1] = R.trans[static_cast<int64_t>(s) * 256 + ((c >> (8 * (len - 1 - j))) & 0xFF)];
        }
        prev = c, prev_len = len;
        const int32_t end = st[len];
        if (end < 0) {
          killed->push_back(static_cast<int32_t>(k));
        } else if (target < 0) {
          target = end;
        } else if (end != target) {
          apart = true;
        }
      }
      if (!apart) {
        out.killed = std::move(killed);
        out.target = target < 0 ? kNoChars : frame_config(f.r, target, f.p);
        if (out.target == kDead) out.target = kNone;  // (not expected: a live state's frame)
      }
    }
    std::lock_guard<std::recursive_mutex> g(mu_);
    return char_kills_.emplace(cid, std::move(out)).first->second;  // (a racing thread's, equal, may win)
  }

  // closure_class_walk's class: from the plain bytes flagged in `l`, the bytes some
  // configuration reached from `cid` through them rejects are dropped, until every reached one
  // takes all of L (the reached set shrinks with L); then the exit bytes E and an upper bound
  // of their tokens. `out.ok`: a class of at least kMinLoopingFirstBytes bytes, not all, with
  // at most kMaxStates configurations, kMaxExitBytes exits and kMaxExitTokens tokens.
  static constexpr size_t kMaxStates = 16;
  static constexpr int kMaxExitBytes = 16;
  static constexpr int kMaxFirstTargets = 16;  // configurations the first bytes lead to (first_class_walk)
  static constexpr int64_t kMaxExitTokens = 8192;
  struct ClassClosure {
    bool ok = false;
    ByteSet loop{0, 0, 0, 0};
    int nexit = 0;
    uint8_t exits[kMaxExitBytes];
    int64_t count = 0;
  };
  bool closure_of(int32_t cid, std::array<bool, kMaxPlain> in_l, ClassClosure& out) {
    const auto& plain = plain_bytes();
    out.ok = false;
    int nloop = 0;
    for (size_t k = 0; k < plain.size(); ++k) nloop += in_l[k];
    int32_t reached[kMaxStates];
    const int32_t* rows[kMaxStates];
    size_t n = 0;
    for (int round = 0;; ++round) {
      if (nloop < kMinLoopingFirstBytes || round == 4) return false;
      // A configuration's rejected bytes leave L as soon as it is reached, and the search
      // ends where L falls below its minimum, before the rows of the rest are made: a JSON
      // value's start reaches a number, three literals, an object and an array, each
      // rejecting the others' first bytes (their rows and the rows after them had been 35 us
      // of such a mask's 110). A round that drops nothing has checked every configuration L
      // reaches against all of L.
      int dropped = 0;
      auto drop_rejected = [&](const int32_t* r) {
        for (size_t j = 0; j < plain.size(); ++j)
          if (in_l[j] && r[plain[j]] == kDead) {
            in_l[j] = false;
            --nloop;
            ++dropped;
          }
        return nloop >= kMinLoopingFirstBytes;
      };
      reached[0] = cid;
      rows[0] = row(cid);
      n = 1;
      if (!drop_rejected(rows[0])) return false;
      for (size_t i = 0; i < n; ++i)
        for (size_t k = 0; k < plain.size(); ++k) {
          if (!in_l[k]) continue;
          int32_t t = rows[i][plain[k]];
          if (counted_ && t != kDead) t = walk_equiv(t);  // (strings of a token's length: see walk_equiv)
          if (t == kDead || std::find(reached, reached + n, t) != reached + n) continue;
          if (n == kMaxStates) return false;
          reached[n] = t;
          rows[n++] = row(t);
          if (!drop_rejected(rows[n - 1])) return false;
        }
      if (dropped == 0) break;
    }
    if (nloop < kMinLoopingFirstBytes || nloop == static_cast<int>(plain.size())) return false;
    out.loop = {0, 0, 0, 0};
    out.nexit = 0;
    out.count = 0;
    for (size_t k = 0; k < plain.size(); ++k) {
      const uint8_t b = plain[k];
      if (in_l[k]) {
        out.loop[b >> 6] |= uint64_t(1) << (b & 63);
        continue;
      }
      for (size_t i = 0; i < n; ++i)
        if (rows[i][b] != kDead) {
          if (out.nexit == kMaxExitBytes) return false;
          out.exits[out.nexit++] = static_cast<uint8_t>(k);
          out.count += V.with_byte_count[k];
          break;
        }
    }
    out.ok = out.count <= kMaxExitTokens;
    return out.ok;
  }

  // Set in `mask` the plain tokens holding a byte of `exits` (nexit plain-byte indexes) that
  // `cid` allows, each stepped through its bytes; with `first` (256 flags), only those whose
  // first byte is flagged. The class walks' tokens that leave the class.
  void step_exit_tokens(int32_t cid, const uint8_t* exits, int nexit, const uint8_t* first, uint32_t* mask) {
    ByteSet exit_set{0, 0, 0, 0};
    for (int e = 0; e < nexit; ++e) {
      const uint8_t b = plain_bytes()[exits[e]];
      exit_set[b >> 6] |= uint64_t(1) << (b & 63);
    }
    const Vocab::ExitTokens* listed = V.exit_tokens(exit_set);
    Vocab::ExitTokens made;
    if (listed == nullptr) {
      made = V.make_exit_tokens(exit_set);
      listed = &made;
    }
    // The tokens step through a few configurations (the loop's, the exits'): their rows are
    // kept here, where row() per byte (two chunk lookups) was most of such a mask.
    int32_t seen[16];
    const int32_t* seen_row[16];
    std::fill(std::begin(seen), std::end(seen), kDead);
    auto row_of = [&](int32_t c) {
      const int h = c & 15;
      if (seen[h] != c) {
        seen[h] = c;
        seen_row[h] = row(c);
      }
      return seen_row[h];
    };
    // The first bytes worth stepping: those `cid` takes (and `first` flags). Most tokens
    // holding an exit start with a byte `cid` rejects (Llama-3's words start with a space),
    // and each was looked up and stepped to that byte: o10314's repository name,
    // `^(?:[A-Za-z0-9]+[-]?)+[A-Za-z0-9]\/...`, has 6,000 tokens holding `-` or `/` at 128K
    // tokens, and its first character's mask took 63 us, 38 with this table.
    uint8_t go[256];
    {
      const int32_t* r0 = row_of(cid);
      for (int b = 0; b < 256; ++b) go[b] = r0[b] != kDead && (first == nullptr || first[b]);
    }
    const size_t m = listed->ids.size();
    const int32_t* ids = listed->ids.data();
    const uint8_t* firsts = listed->first.data();
    const uint32_t* off = listed->off.data();
    const uint8_t* bytes = listed->bytes.data();
    for (size_t q = 0; q < m; ++q) {
      if (!go[firsts[q]]) continue;
      int32_t c = cid;
      for (uint32_t j = off[q]; j < off[q + 1] && c != kDead; ++j) c = row_of(c)[bytes[j]];
      if (c != kDead) mask[ids[q] >> 5] |= 1u << (ids[q] & 31);
    }
  }

  // The mask of `cid` (all zero on entry) where a class L of plain bytes keeps `cid` among a
  // few configurations that all take every byte of L (an email's `[a-z0-9._+-]+` before its
  // `@`, a host name's labels and dots, a name's `[A-Za-z](?:[A-Za-z0-9]+-?)+`), and the other
  // plain bytes that any of them takes, E, are few: the plain tokens of L alone are allowed
  // (Vocab::class_tokens), the plain tokens holding a byte of E are stepped one by one (a
  // plain token holding neither is rejected at its first byte outside L), and the other
  // tokens are walked. The whole trie's walk went through every token starting with bytes of
  // L: 0.1-0.4 ms at 128K tokens, at every position of such a pattern. False, nothing
  // written, where the configurations or E's tokens are too many, or L too small.
  bool closure_class_walk(int32_t cid, const std::array<int32_t, kMaxPlain>& into, uint32_t* mask) {
    const auto& plain = plain_bytes();
    // L from every byte `cid` takes, or from those that lead back to it (a loop that an exit
    // byte leaves: taking the exit into L would drop the bytes its target rejects from L)
    ClassClosure best, other;
    std::array<bool, kMaxPlain> start{};
    int self = 0;
    for (size_t k = 0; k < plain.size(); ++k) start[k] = into[k] != kDead;
    closure_of(cid, start, best);
    for (size_t k = 0; k < plain.size(); ++k) self += start[k] = into[k] == cid;
    if (self >= kMinLoopingFirstBytes && closure_of(cid, start, other) && (!best.ok || other.count < best.count))
      best = other;
    if (!best.ok) return false;
    const ByteSet& loop = best.loop;
    const int nexit = best.nexit;
    const uint8_t* exits = best.exits;
    const uint32_t* bits = V.class_tokens(loop);
    if (bits == nullptr) return false;
    std::memcpy(mask, bits, static_cast<size_t>(words_) * 4);
    step_exit_tokens(cid, exits, nexit, nullptr, mask);
    walk(cid, V.plain->rest, nullptr, mask, nullptr, nullptr);
    class_closures_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // The mask of the first-class walks (all zero on entry): the plain tokens of F then L alone
  // (set_class_tokens), those of F holding a byte of E (`exits`) stepped one by one, the
  // tokens not plain walked, and those of the other first bytes X (`others`) walked.
  void class_mask(int32_t cid, const uint32_t* bits, const ByteSet& loop, const uint8_t* first, const uint8_t* exits,
                  int nexit, const uint8_t* others, int64_t other_count, uint32_t* mask) {
    set_class_tokens(bits, loop, first, mask);
    step_exit_tokens(cid, exits, nexit, first, mask);  // (those starting in F)
    walk(cid, V.plain->rest, nullptr, mask, nullptr, nullptr);
    // (X's tokens not plain are walked twice: they are few, and a walk only sets bits)
    if (other_count > 0) walk(cid, V.trie, others, mask, nullptr, nullptr);
  }

  // Set in `mask` (all zero on entry) the tokens of class L (`bits`: Vocab::class_tokens) whose
  // first byte is in F (`first`, within L): the class's tokens less those whose first byte is
  // in L but not in F, or (fewer ids) those whose first byte is in F.
  void set_class_tokens(const uint32_t* bits, const ByteSet& loop, const uint8_t* first, uint32_t* mask) {
    const IdRuns& by_first = V.plain->by_first;
    int64_t in_first = 0, not_first = 0;
    for (uint8_t b : plain_bytes())
      if (loop[b >> 6] >> (b & 63) & 1u)
        (first[b] ? in_first : not_first) += by_first.offsets[b + 1] - by_first.offsets[b];
    if (not_first <= in_first + words_) {
      std::memcpy(mask, bits, static_cast<size_t>(words_) * 4);
      for (uint8_t b : plain_bytes())
        if (!first[b] && (loop[b >> 6] >> (b & 63) & 1u))
          for (int64_t j = by_first.offsets[b]; j < by_first.offsets[b + 1]; ++j)
            mask[by_first.ids[j] >> 5] &= ~(1u << (by_first.ids[j] & 31));
    } else {
      for (uint8_t b : plain_bytes())
        if (first[b])
          for (int64_t j = by_first.offsets[b]; j < by_first.offsets[b + 1]; ++j) {
            const int64_t t = by_first.ids[j];
            mask[t >> 5] |= bits[t >> 5] & (1u << (t & 31));
          }
    }
  }

  // The mask of `cid` (all zero on entry) where a class F of plain bytes leads from `cid` to
  // one configuration A, and A loops on a class L of plain bytes holding F (a name's first
  // character, then its body: `^[A-Za-z0-9_][^<>*#.%&:]*$`, `^[a-z][a-z0-9-]*$`), the other
  // plain bytes A takes, E, being few: a plain token is allowed when its first byte is in F
  // and every byte in L (Vocab::class_tokens, less or only the first bytes), the plain tokens
  // holding a byte of E are stepped one by one, and the other tokens are walked. The trie's
  // walk went below every first byte of F down to each token holding a byte outside L: 0.27
  // ms at such a string's first character with Llama-3. A few other plain first bytes, X,
  // may lead elsewhere (the `$` of `^(?:[\w\-.\s]+|\$\([\w\-.]+\))+$`, whose first
  // mask walked the whole trie: 65-170 us at 49K tokens): their tokens are walked too.
  // False, nothing written, where the shape differs or the tokens of E or X are many.
  bool first_class_walk(int32_t cid, const std::array<int32_t, kMaxPlain>& into, uint32_t* mask) {
    const auto& plain = plain_bytes();
    // A: the configuration that most live first bytes lead to (of at most kMaxFirstTargets)
    int32_t targets[kMaxFirstTargets];
    int counts[kMaxFirstTargets] = {0};
    int ntargets = 0;
    for (size_t k = 0; k < plain.size(); ++k) {
      if (into[k] == kDead) continue;
      int j = 0;
      while (j < ntargets && targets[j] != into[k]) ++j;
      if (j == ntargets) {
        if (ntargets == kMaxFirstTargets) return false;
        targets[ntargets++] = into[k];
      }
      ++counts[j];
    }
    if (ntargets == 0) return false;
    int best = 0;
    for (int j = 1; j < ntargets; ++j)
      if (counts[j] > counts[best]) best = j;
    const int32_t a = targets[best];
    if (a == cid) return false;
    const IdRuns& by_first = V.plain->by_first;
    uint8_t others[256] = {0};  // X
    int64_t other_count = 0;  // their plain tokens (the walk below them visits about as many)
    for (size_t k = 0; k < plain.size(); ++k)
      if (into[k] != kDead && into[k] != a) {
        const uint8_t b = plain[k];
        others[b] = 1;
        other_count += by_first.offsets[b + 1] - by_first.offsets[b];
      }
    if (other_count > kMaxExitTokens) return false;
    const int32_t* ra = row(a);
    {
      bool loops = true;  // (F within L)
      for (size_t k = 0; k < plain.size() && loops; ++k) loops = into[k] != a || ra[plain[k]] == a;
      if (!loops) return chain_class_walk(cid, into, a, others, other_count, mask);
    }
    ByteSet loop{0, 0, 0, 0};
    uint8_t first[256] = {0}, exits[kMaxPlain];
    int nexit = 0, nloop = 0;
    int64_t exit_count = 0;
    for (size_t k = 0; k < plain.size(); ++k) {
      const uint8_t b = plain[k];
      if (into[k] == a) first[b] = 1;
      if (ra[b] == a) {
        loop[b >> 6] |= uint64_t(1) << (b & 63);
        ++nloop;
      } else if (ra[b] != kDead) {
        if (nexit == kMaxExitBytes) return false;
        exits[nexit++] = static_cast<uint8_t>(k);
        exit_count += V.with_byte_count[k];
      }
    }
    if (nloop < kMinLoopingFirstBytes || exit_count > kMaxExitTokens) return false;
    const uint32_t* bits = V.class_tokens(loop);
    if (bits == nullptr) return false;
    class_mask(cid, bits, loop, first, exits, nexit, others, other_count, mask);
    first_classes_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // first_class_walk's shape where A does not loop: A is a frame alone in a simple state, and
  // a class L of plain bytes leads from it through simple states of its rule byte after byte
  // (a host name's label, whose length bound makes each character a state of its own: an
  // e-mail domain's first character, whose first mask made 31 configurations and 15 rows in
  // 44 µs at best with SmolLM2). Where every string of L's bytes as long as the longest plain
  // token of L alone (less its first byte) stays in live simple states, a plain token of F
  // and then L is allowed (Vocab::class_tokens); E, the other plain bytes that the states L's
  // strings reach take, as long as the longest plain token, are few: the plain tokens holding
  // a byte of E are stepped one by one, and a plain token holding neither is rejected at its
  // first byte outside L. L starts as the bytes A takes where F's bytes take it; one that
  // leads out of simple live states too soon is dropped and the search redone. False,
  // nothing written, where the shape differs, the search grows, or E's tokens are many.
  bool chain_class_walk(int32_t cid, const std::array<int32_t, kMaxPlain>& into, int32_t a, const uint8_t* others,
                        int64_t other_count, uint32_t* mask) {
    const int64_t v = virt_.load(a);
    if (v < 0) return false;
    const auto r = static_cast<int32_t>(v >> 32);
    const auto s0 = static_cast<int32_t>(v & 0xFFFFFFFF);
    const Rule& R = rules_[r];
    if (R.counter) return false;
    const auto& plain = plain_bytes();
    const Plain& P = *V.plain;
    uint8_t first[256] = {0};  // F
    for (size_t k = 0; k < plain.size(); ++k)
      if (into[k] == a) first[plain[k]] = 1;
    // L: the bytes that A takes where F's bytes take it, into a simple state (a label's
    // letters and digits, not its hyphen or dot)
    ByteSet in_l{0, 0, 0, 0};
    int64_t chain = 0;  // the bytes one byte of F takes, repeated, from A
    {
      const int32_t* row0 = R.trans + static_cast<int64_t>(s0) * 256;
      int32_t to = -1;
      for (uint8_t b : plain)
        if (first[b]) {
          if (to != -1 && row0[b] != to) return false;
          to = row0[b];
        }
      if (to < 0 || !R.simple[static_cast<size_t>(to)]) return false;
      for (uint8_t b : plain)
        if (row0[b] == to) add_to(in_l, b);
      // a short chain (a uuid's eight hex digits) holds no class's longest token: one byte of F
      // is stepped along it first (the search below, and finding the class's longest token,
      // cost a uuid's first digit twice its walk), and a longest token past `chain` ends it
      int b = 0;
      while (!first[b]) ++b;  // (F is not empty: `to` was found)
      for (int32_t q = s0; chain < P.longest; ++chain) {
        const int32_t t = R.trans[static_cast<int64_t>(q) * 256 + b];
        if (t < 0 || !R.simple[static_cast<size_t>(t)]) break;
        q = t;
      }
      if (chain < kMinChainBytes) return false;
    }
    ByteSet in_e;
    const uint32_t* bits = nullptr;
    std::vector<int32_t> level, next;
    bool found = false;
    for (int round = 0; round < kChainRounds && !found; ++round) {
      int count = 0;
      for (uint8_t b : plain) {
        if (first[b] && !in_set(in_l, b)) return false;  // (F within L)
        count += in_set(in_l, b);
      }
      if (count < kMinLoopingFirstBytes) return false;
      {
        // E holds at least the other bytes A takes: too many tokens there already ends it
        // before the search (Llama-3's tokens holding a dot or a hyphen)
        const auto& none0 = R.none[static_cast<size_t>(s0)];
        int64_t at_a = 0;
        for (size_t k = 0; k < plain.size(); ++k)
          if (!(none0[plain[k] >> 6] >> (plain[k] & 63) & 1u) && !in_set(in_l, plain[k])) at_a += V.with_byte_count[k];
        if (at_a > kMaxExitTokens) return false;
      }
      bits = V.class_tokens(in_l);
      if (bits == nullptr) return false;
      // the longest plain token of L alone: the strings of L read after its first byte
      int64_t class_depth = 0;
      for (int64_t len = P.longest; len > 0 && class_depth == 0; --len)
        for (int64_t j = P.by_len.offsets[len]; j < P.by_len.offsets[len + 1]; ++j)
          if (bits[P.by_len.ids[j] >> 5] >> (P.by_len.ids[j] & 31) & 1u) {
            class_depth = len - 1;
            break;
          }
      // (a class whose longest token outgrows the chain: Llama-3's letters and digits, 96
      // bytes, in a label of 63)
      if (class_depth > chain) return false;
      // the states L's strings reach, level by level, up to the longest plain token
      in_e = {0, 0, 0, 0};
      ByteSet bad{0, 0, 0, 0};
      level.assign(1, s0);
      int64_t steps = 0;
      for (int64_t d = 0; d + 1 < P.longest && !level.empty(); ++d) {
        next.clear();
        for (int32_t q : level) {
          const int32_t* rq = R.trans + static_cast<int64_t>(q) * 256;
          const auto& none = R.none[static_cast<size_t>(q)];
          for (uint8_t b : plain) {
            if (none[b >> 6] >> (b & 63) & 1u) {  // (dead: past the class's strings only)
              if (in_set(in_l, b) && d < class_depth) add_to(bad, b);
              continue;
            }
            if (!in_set(in_l, b)) {
              add_to(in_e, b);
              continue;
            }
            const int32_t t = rq[b];
            if (!R.simple[static_cast<size_t>(t)]) {
              add_to(bad, b);
              continue;
            }
            if (std::find(next.begin(), next.end(), t) == next.end()) next.push_back(t);
          }
          if ((steps += static_cast<int64_t>(plain.size())) > kMaxChainSteps) return false;
        }
        if (next.size() > kMaxChainStates) return false;
        if ((bad[0] | bad[1] | bad[2] | bad[3]) != 0) break;  // (searched again without them)
        level.swap(next);
      }
      if ((bad[0] | bad[1] | bad[2] | bad[3]) == 0) {
        found = true;
      } else {
        for (int w = 0; w < 4; ++w) in_l[w] &= ~bad[w];
      }
    }
    if (!found) return false;
    uint8_t exits[kMaxPlain];
    int nexit = 0;
    int64_t exit_count = 0;
    for (size_t k = 0; k < plain.size(); ++k)
      if (in_set(in_e, plain[k])) {
        if (nexit == kMaxExitBytes) return false;
        exits[nexit++] = static_cast<uint8_t>(k);
        exit_count += V.with_byte_count[k];
      }
    if (exit_count > kMaxExitTokens) return false;
    class_mask(cid, bits, in_l, first, exits, nexit, others, other_count, mask);
    chain_classes_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // The mask of `cid` (all zero on entry), a frame alone in a simple state of a DFA rule,
  // where the plain bytes lead apart but no string read from it gets long: a string whose
  // length is bounded beside a pattern that does not bound it ("pattern": "[0-9a-f]+" with
  // "minLength" and "maxLength" 12, where before the first hex digit a digit and any other
  // character lead to different states). The levels of the state (levels_of) tell that every
  // plain string of at most `sure` bytes is live and none of `end` bytes or more: the plain
  // tokens up to `sure` bytes are set from Plain::by_len, those of sure + 1 to end - 1 bytes
  // are stepped through the DFA one by one, and the longer ones are left out; the text tokens
  // likewise by their characters where every character from U+0080 up takes each state to one
  // state; the other tokens are walked. The trie's walk went down every path to a token longer
  // than the room left (bounded_takes() takes only the subtrees that fit): 0.5-0.7 ms at 49K
  // tokens and 1.5-1.9 ms at 128K at such a string's first character. False, nothing
  // written, where the levels do not serve.
  bool level_walk(int32_t cid, uint32_t* mask) {
    const int64_t v = virt_.load(cid);
    if (v < 0) return false;
    const auto r = static_cast<int32_t>(v >> 32);
    const auto s0 = static_cast<int32_t>(v & 0xFFFFFFFF);
    const Levels L = levels_of(r, s0);
    if (!L.ok) return false;
    const Rule& R = rules_[r];
    const Plain& P = *V.plain;
    const int32_t* const trans = R.trans;
    auto live = [&](const uint8_t* data, size_t n) {  // (every state on the way is simple: levels_of)
      int32_t st = s0;
      for (size_t j = 0; j < n && st >= 0; ++j) st = trans[static_cast<int64_t>(st) * 256 + data[j]];
      return st >= 0;
    };
    const int64_t* bl = P.by_len.offsets;
    set_first_ids(mask, P.tokens.data(), P.by_len.ids, bl[std::min(L.sure, P.longest) + 1], bl[P.longest + 1]);
    for (int64_t n = L.sure + 1; n < std::min(L.end, P.longest + 1); ++n) {
      // the tokens of n bytes, four at a time: each step waits on the row the step before
      // chose, and four chains in turn keep the loads going
      const uint8_t* d = V.by_len_bytes(n);
      const int64_t first = bl[n], count = bl[n + 1] - bl[n];
      int64_t k = 0;
      for (; k + 4 <= count; k += 4, d += 4 * n) {
        int32_t a = s0, b = s0, c = s0, e = s0;  // (a chain that died stays dead)
        for (int64_t j = 0; j < n; ++j) {
          a = a < 0 ? a : trans[static_cast<int64_t>(a) * 256 + d[j]];
          b = b < 0 ? b : trans[static_cast<int64_t>(b) * 256 + d[n + j]];
          c = c < 0 ? c : trans[static_cast<int64_t>(c) * 256 + d[2 * n + j]];
          e = e < 0 ? e : trans[static_cast<int64_t>(e) * 256 + d[3 * n + j]];
        }
        const int32_t st[4] = {a, b, c, e};
        for (int q = 0; q < 4; ++q)
          if (st[q] >= 0) {
            const int64_t t = P.by_len.ids[first + k + q];
            mask[t >> 5] |= 1u << (t & 31);
          }
      }
      for (; k < count; ++k, d += n)
        if (live(d, static_cast<size_t>(n))) {
          const int64_t t = P.by_len.ids[first + k];
          mask[t >> 5] |= 1u << (t & 31);
        }
    }
    if (!L.text) {
      walk(cid, P.rest, nullptr, mask, nullptr, nullptr);
    } else {
      const int64_t* tc = P.text_chars_off.data();
      const int64_t most = P.text_longest;
      set_first_ids(mask, P.text.data(), P.text_by_chars.data(), tc[std::min(L.text_sure, most) + 1], tc[most + 1]);
      for (int64_t k = tc[std::min(L.text_sure + 1, most + 1)], e = tc[std::min(L.text_end, most + 1)]; k < e; ++k) {
        const auto t = static_cast<int32_t>(P.text_by_chars[static_cast<size_t>(k)]);
        const auto [data, n] = V.by_chars_spelling(k);
        if (live(data, n)) mask[t >> 5] |= 1u << (t & 31);
      }
      walk(cid, P.other, nullptr, mask, nullptr, nullptr);
    }
    level_walks_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // What level_walk() needs of simple state `s` of rule `r`: `ok` where every plain string of
  // at most `sure` bytes read from it is live and none of `end` bytes or more, with few plain
  // tokens in between; `text` where every string of plain bytes and whole characters from
  // U+0080 up is live up to `text_sure` characters and none from `text_end`, the same way.
  // Memoised per state (Rule::levels), by any thread: the many configurations of one state
  // (its frame's parents) ask once, and most states that do not serve are found so again.
  struct Levels {
    bool ok = false, text = false;
    int64_t sure = 0, end = 0, text_sure = 0, text_end = 0;
  };
  Levels levels_of(int32_t r, int32_t s) {
    std::atomic<uint64_t>& slot = rules_[r].levels[s];
    uint64_t k = slot.load(std::memory_order_relaxed);
    if (k == 0) {
      const Plain& P = *V.plain;
      Levels l;
      l.ok = V.steppable() && P.longest < 1000 && P.text_longest < 1000 &&
             find_levels(r, s, false, P.by_len.offsets, P.longest, l.sure, l.end);
      l.text = l.ok && P.text_longest >= 0 &&
               find_levels(r, s, true, P.text_chars_off.data(), P.text_longest, l.text_sure, l.text_end);
      // (10 bits a length: no level goes past the longest token, at most 255 bytes; the
      // lengths of a search that failed are left out)
      k = uint64_t(1) << 63;
      if (l.ok) k |= uint64_t(1) << 62 | static_cast<uint64_t>(l.sure) | static_cast<uint64_t>(l.end) << 10;
      if (l.text)
        k |= uint64_t(1) << 61 | static_cast<uint64_t>(l.text_sure) << 20 | static_cast<uint64_t>(l.text_end) << 30;
      slot.store(k, std::memory_order_relaxed);
    }
    Levels l;
    l.ok = k >> 62 & 1;
    l.text = k >> 61 & 1;
    l.sure = static_cast<int64_t>(k & 1023);
    l.end = static_cast<int64_t>(k >> 10 & 1023);
    l.text_sure = static_cast<int64_t>(k >> 20 & 1023);
    l.text_end = static_cast<int64_t>(k >> 30 & 1023);
    return l;
  }

  // The levels of simple state `s` of rule `r`: the states that strings of n plain bytes
  // (`chars`: or whole characters from U+0080 up, each one step) reach, n = 0, 1, ...; `sure`
  // the largest n up to which every such string is live, `end` the first n none is. False
  // where a level holds more than a few states or one that is not simple, the levels come
  // round (no end), every first byte is not live, a character from U+0080 up is rejected
  // where another is not or the characters lead apart in bytes (`chars`), or the tokens
  // between `sure` and `end` (by their lengths: off, longest) are too many to step.
  bool find_levels(int32_t r, int32_t s, bool chars, const int64_t* off, int64_t longest, int64_t& sure,
                   int64_t& end) {
    const Rule& R = rules_[r];
    const auto& plain = plain_bytes();
    constexpr int kWide = 16;
    // (stepping a token costs about a row lookup per byte: ten thousand tokens of a few
    // bytes are a tenth of the walk they replace)
    constexpr int64_t kMaxStepped = 16384;
    auto between = [&](int64_t from, int64_t to) {  // tokens of lengths in (from, to)
      const int64_t lo = std::min(from + 1, longest + 1), hi = std::min(to, longest + 1);
      return hi > lo ? off[hi] - off[lo] : int64_t(0);
    };
    int32_t cur[kWide], nxt[kWide];
    int nc = 1;
    cur[0] = s;
    sure = -1;
    for (int64_t n = 0;; ++n) {
      if (nc == 0 || n > longest) {  // (past the longest token: no token is longer)
        end = n;
        if (sure < 0) sure = longest;
        return true;
      }
      int nn = 0;
      bool dead = false;
      auto add = [&](int32_t u) {
        for (int q = 0; q < nn; ++q)
          if (nxt[q] == u) return true;
        if (nn == kWide || !R.simple[static_cast<size_t>(u)]) return false;
        nxt[nn++] = u;
        return true;
      };
      for (int k = 0; k < nc; ++k) {
        const int32_t* tr = R.trans + static_cast<int64_t>(cur[k]) * 256;
        for (uint8_t b : plain) {
          if (tr[b] < 0)
            dead = true;
          else if (tr[b] == cur[k] || !add(tr[b]))  // (a loop: no end, found before the levels come round)
            return false;
        }
        if (!chars) continue;
        int32_t m;
        {
          std::lock_guard<std::recursive_mutex> g(mu_);
          m = multibyte_state(r, cur[k]);
        }
        if (m >= 0) {
          if (!add(m)) return false;
        } else if (m == kNone) {  // some character is rejected: every one, or not
          for (int b = 0x80; b < 0x100; ++b)
            if (tr[b] >= 0) return false;
          dead = true;
        } else if (m != kNoChars) {
          return false;
        }
      }
      if (dead && sure < 0) {
        if (n == 0) return false;  // (every token would be stepped)
        sure = n;
      }
      bool same = nn == nc;  // a level equal to the one before: so are all after it
      for (int q = 0; q < nn && same; ++q) same = std::find(cur, cur + nc, nxt[q]) != cur + nc;
      if (same) return false;
      // (the lengths up to n + 1 are stepped where strings that long live: too many already)
      if (sure >= 0 && between(sure, nn > 0 ? n + 2 : n + 1) > kMaxStepped) return false;
      std::copy(nxt, nxt + nn, cur);
      nc = nn;
    }
  }

  // How many plain bytes may follow `cid` when, step after step, the plain bytes taken are
  // one set (`taken`: every plain byte in a string body, a pattern's class such as [0-9a-f]),
  // all leading to one configuration, until none is taken (a string body or a class repeat,
  // bounded or not); -1 when some step tells them apart or takes another set. `into`: cid's
  // targets of the plain bytes.
  int64_t plain_room(int32_t cid, std::array<int32_t, kMaxPlain> into, int64_t longest, ByteSet& taken) {
    const auto& plain = plain_bytes();
    taken = {0, 0, 0, 0};
    int32_t nxt = kDead;
    for (size_t k = 0; k < plain.size(); ++k) {
      if (into[k] == kDead) continue;
      if (nxt != kDead && into[k] != nxt) return -1;
      nxt = into[k];
      taken[plain[k] >> 6] |= uint64_t(1) << (plain[k] & 63);
    }
    int32_t cur = cid;
    int64_t n = 0;
    while (n < longest) {
      if (nxt == kDead) return n;
      if (nxt == cur) return longest;  // a loop: any length
      if (shifted(cur, nxt, longest - n)) return longest;  // a bounded string far from its end
      cur = nxt;
      ++n;
      if (trimmed_ && virt_.load(cur) >= 0) {
        const int64_t out = plain_room_dfa(cur, n, longest, taken);
        if (out != kUndecided) return out;
      }
      const int32_t* r = row(cur);
      nxt = kDead;
      bool all = true;  // every byte of `taken`
      for (uint8_t b : plain) {
        const int32_t t = r[b];
        const bool in = taken[b >> 6] >> (b & 63) & 1u;
        if (t == kDead) {
          all = all && !in;
          continue;
        }
        if (!in || (nxt != kDead && t != nxt)) return -1;
        nxt = t;
      }
      if (nxt != kDead && !all) return -1;
    }
    return longest;
  }

  // The one configuration that every plain byte and every whole UTF-8 character from U+0080
  // up leads to from `cid`, or kNone.
  int32_t char_target(int32_t cid) {
    const int32_t* r = row(cid);
    const auto& plain = plain_bytes();
    const int32_t target = r[plain[0]];
    if (target == kDead) return kNone;
    for (uint8_t b : plain)
      if (r[b] != target) return kNone;
    const int32_t multi = multibyte_target(cid);
    return multi == target || multi == kNoChars ? target : kNone;
  }

  // The one configuration every whole character from U+0080 up (that some token can hold)
  // leads to from `cid`; kNone when they lead apart or to DEAD; kNoChars when no token holds
  // any such character (memoised).
  int32_t multibyte_target(int32_t cid) {
    {
      std::lock_guard<std::recursive_mutex> g(mu_);
      const int32_t known = mb_target_.load(cid);
      if (known != kMbUnasked) return known;
      // A frame alone in a simple state (inside a string, say) is answered by its rule's DFA:
      // stepping configurations made a configuration and a byte row for every partial
      // character (a few per string position: a third of a first pass's byte rows).
      const int64_t v = virt_.load(cid);
      if (v >= 0) {
        const auto r = static_cast<int32_t>(v >> 32), s = static_cast<int32_t>(v & 0xFFFFFFFF);
        const int32_t t = multibyte_state(r, s);
        if (t != kMbByConfigs) {
          const int32_t target = t >= 0 ? frame_config(r, t, virt_p_.load(cid)) : t;
          mb_target_.store(cid, target);
          return target;
        }
      }
    }
    static thread_local std::vector<int32_t> found_tl, states_tl, after_tl;
    structgen::Scratch<std::vector<int32_t>> found_s(found_tl), states_s(states_tl), after_s(after_tl);
    std::vector<int32_t>&found = found_s.value, &states = states_s.value, &after = after_s.value;
    bool stop = false;
    for (const auto& seq : V.mb_levels) {
      states.assign(1, cid);
      for (const auto& level : seq) {
        after.clear();
        for (int32_t c : states)
          each_level_target(row(c), level, [&](int32_t t) {
            if (after.empty() || after.back() != t) after.push_back(t);
          });
        std::sort(after.begin(), after.end());
        after.erase(std::unique(after.begin(), after.end()), after.end());
        states.swap(after);
      }
      for (int32_t s : states)
        if (std::find(found.begin(), found.end(), s) == found.end()) found.push_back(s);
      for (int32_t s : found) stop = stop || s == kDead;
      if (found.size() > 1 || stop) break;
    }
    int32_t target;
    if (found.empty())
      target = kNoChars;
    else
      target = found.size() == 1 && found[0] != kDead ? found[0] : kNone;
    std::lock_guard<std::recursive_mutex> g(mu_);
    mb_target_.store(cid, target);  // (a racing thread's, equal, may be there already)
    return target;
  }

  // multibyte_target of a frame in simple state `s` of DFA rule `r`, as a state of the rule:
  // the one state every whole character from U+0080 up leads to, kNone when some character
  // is rejected, kNoChars when no token holds one, and kMbByConfigs where the characters'
  // bytes pass a state that is not simple or end in different states (the configurations
  // are stepped then). Memoised per state; under mu_.
  static constexpr int32_t kMbByConfigs = -3, kMbUnknown = -4;
  int32_t multibyte_state(int32_t r, int32_t s) {
    const Rule& R = rules_[r];
    std::vector<int32_t>& memo = mb_state_[static_cast<size_t>(r)];
    if (memo.empty()) memo.assign(static_cast<size_t>(R.num_states), kMbUnknown);
    int32_t& out = memo[static_cast<size_t>(s)];
    if (out != kMbUnknown) return out;
    int32_t found = -1;
    // (the index's lists, under mu_: a name start asks this of a new state, twice per grammar)
    std::vector<int32_t>&states = mb_states_, &after = mb_after_;
    for (const auto& seq : V.mb_levels) {
      states.assign(1, s);
      for (size_t level = 0; level < seq.size(); ++level) {
        const Vocab::MbLevel& L = seq[level];
        after.clear();
        for (int32_t st : states) {
          if (level > 0 && !R.simple[static_cast<size_t>(st)]) return out = kMbByConfigs;
          if (rejects_used(R.none[static_cast<size_t>(st)], L)) return out = kNone;  // (a character rejected: DEAD)
          each_level_target(R.trans + static_cast<int64_t>(st) * 256, L, [&](int32_t t) {
            if (after.empty() || after.back() != t) after.push_back(t);
          });
        }
        std::sort(after.begin(), after.end());
        after.erase(std::unique(after.begin(), after.end()), after.end());
        states.swap(after);
      }
      for (int32_t st : states) {
        if (found >= 0 && st != found) return out = kMbByConfigs;
        found = st;
      }
    }
    return out = found >= 0 ? found : kNoChars;
  }

  // Whether some stack of `cid` stays alive inside its top rule on every string of plain
  // bytes (its top state is total_state): then every plain token is allowed from `cid`.
  bool plain_total(int32_t cid) override {
    if (cid == kDead) return false;
    return some_top(cid, plain_total_cfg_, [this](int32_t r, int32_t s) { return total_state(r, s); });
  }

  // Whether some stack of `cid` stays alive inside its top rule on every string of whole
  // characters (text_total_state of its top frame): then every plain and text token is
  // allowed from `cid`.
  bool text_total(int32_t cid) {
    if (cid == kDead || V.plain == nullptr) return false;
    return some_top(cid, text_total_cfg_, [this](int32_t r, int32_t s) { return text_total_state(r, s); });
  }

  // Whether some stack of `cid` has its top frame in a DFA rule's state `s` with state_ok(r,
  // s), memoised per configuration in `memo` (-1: not known yet). By configuration id, not
  // hashed: the name clears ask plain_total for nearly every token they check, and a hash
  // lookup each was a twentieth of a large object's first fills. Takes mu_.
  template <class StateOk>
  bool some_top(int32_t cid, std::vector<int8_t>& memo, StateOk&& state_ok) {
    std::lock_guard<std::recursive_mutex> g(mu_);
    if (static_cast<size_t>(cid) >= memo.size())
      memo.resize(std::max<size_t>(static_cast<size_t>(cid) + 1, 2 * memo.size()), -1);
    if (memo[cid] >= 0) return memo[cid] != 0;
    bool hit = false;
    for (int32_t sid : config_of(cid)) {
      const Frame f = stacks_[sid];
      if (!rules_[f.r].counter && state_ok(f.r, static_cast<int32_t>(f.s))) {
        hit = true;
        break;
      }
    }
    memo[cid] = hit ? 1 : 0;
    return hit;
  }

  // Whether from state `s` of DFA rule `r` every string of whole characters goes on inside
  // the rule: plain bytes, and the characters from U+0080 up that the vocabulary's bytes can
  // spell (Vocab::mb_levels, a superset of those its tokens hold). The body of an unanchored
  // pattern ("pattern": "abc" is a string holding abc) is such a set of states: they tell
  // apart how much of the pattern was seen, and none rejects a character. A forward search
  // over the states whole characters reach from `s` (the states inside a character are
  // stepped through, not kept); total when none of them rejects a character. Memoised per
  // state; a search past kMaxReached states is taken as not total. Under mu_.
  bool text_total_state(int32_t r, int32_t s) {
    static constexpr size_t kMaxReached = 1024;
    const Rule& R = rules_[r];
    std::vector<int8_t>& memo = text_total_memo_[static_cast<size_t>(r)];
    if (memo.empty()) memo.assign(static_cast<size_t>(R.num_states), -1);
    if (memo[s] >= 0) return memo[s] != 0;
    if (rejects_plain(R, s)) return (memo[s] = 0) != 0;  // (most states: at once, from the bit set)
    std::vector<int32_t> order(1, s), states, after;
    std::unordered_set<int32_t> seen{s};
    bool ok = true;
    auto reach = [&](int32_t t) {  // false once the search is decided
      if (t < 0 || memo[t] == 0) return ok = false;
      if (memo[t] == 1 || seen.count(t) != 0) return true;
      if (seen.size() >= kMaxReached) return ok = false;
      seen.insert(t);
      order.push_back(t);
      return true;
    };
    for (size_t i = 0; i < order.size() && ok; ++i) {
      const int32_t q = order[i];
      if (rejects_plain(R, q)) {
        ok = false;
        break;
      }
      if (!each_plain_to(R, q, reach)) break;
      for (const auto& seq : V.mb_levels) {
        states.assign(1, q);
        for (const auto& level : seq) {
          after.clear();
          for (int32_t st : states) {
            if (rejects_used(R.none[static_cast<size_t>(st)], level)) {
              ok = false;
              break;
            }
            each_level_target(R.trans + static_cast<int64_t>(st) * 256, level, [&](int32_t t) {
              if (after.empty() || after.back() != t) after.push_back(t);
            });
          }
          if (!ok) break;
          std::sort(after.begin(), after.end());
          after.erase(std::unique(after.begin(), after.end()), after.end());
          states.swap(after);
        }
        if (!ok) break;
        for (int32_t t : states)
          if (!reach(t)) break;
        if (!ok) break;
      }
    }
    if (!ok) return (memo[s] = 0) != 0;
    for (int32_t q : order) memo[static_cast<size_t>(q)] = 1;
    return true;
  }

  // Whether state `q` of `R` rejects some plain byte (its bit set of rejected bytes, not its row).
  static bool rejects_plain(const Rule& R, int32_t q) {
    const uint64_t* no = R.none[static_cast<size_t>(q)].data();
    const PlainBits& P = plain_bits();
    return (no[0] & P.none[0]) != 0 || (no[1] & P.none[1]) != 0;
  }


  // Whether from state `s` of DFA rule `r` every plain byte goes on inside the rule, and so
  // from every state that plain bytes lead to: the states of "any name but the declared
  // ones", say. Found over the states plain bytes reach from `s` (a greatest fixed point:
  // a state is not total when a plain byte is rejected there or leads to one that is not),
  // memoised per state of the rule. Under mu_.
  bool total_state(int32_t r, int32_t s) {
    static constexpr size_t kMaxReached = 4096;  // more: taken as not total (walked instead)
    const Rule& R = rules_[r];
    std::vector<int8_t>& memo = total_memo_[static_cast<size_t>(r)];
    if (memo.empty()) memo.assign(static_cast<size_t>(R.num_states), -1);
    if (memo[s] >= 0) return memo[s] != 0;
    // reached states by number (total_at_: -1 where not reached, restored before returning);
    // the lists are the index's, reused (a name's first byte asks this of a new state at
    // every declared initial: allocating seven lists each time was a fifth of the call)
    std::vector<int32_t>& at = total_at_;
    if (at.size() < static_cast<size_t>(R.num_states)) at.resize(static_cast<size_t>(R.num_states), -1);
    TotalScratch& w = total_scratch_;
    std::vector<int32_t>& order = w.order;
    std::vector<uint8_t>& bad = w.bad;
    std::vector<std::pair<int32_t, int32_t>>& edges = w.edges;  // (reached state, a reached state leading to it)
    // First the reached states alone: when none of them rejects a plain byte (the states of
    // a member name: any name but the declared ones goes on), every one is total, and the
    // edges and the backward pass below are not needed. A large object's name start asks
    // this of the rule that holds its names, hundreds of states whose rows the compile has
    // just written and no cache holds: the search reads each state's plain targets from
    // Rule::plain_to (found while the rows were checked), not its row.
    order.assign(1, s);
    at[s] = 0;
    bool any_bad = false, too_many = false;
    // a target of a reached state: false once the search is decided (a state known not
    // total, or too many reached)
    auto reach = [&](int32_t t) {
      if (memo[t] == 0) return !(any_bad = true);
      if (memo[t] == 1 || at[t] >= 0) return true;
      if (order.size() >= kMaxReached) return !(too_many = true);
      at[t] = static_cast<int32_t>(order.size());
      order.push_back(t);
      __builtin_prefetch(R.plain_to.data() + static_cast<int64_t>(t) * kPlainTo);
      return true;
    };
    for (size_t i = 0; i < order.size(); ++i) {
      const int32_t q = order[i];
      if (rejects_plain(R, q)) {
        any_bad = true;
        break;
      }
      if (!each_plain_to(R, q, reach)) break;
    }
    for (int32_t q : order) at[q] = -1;
    if (too_many) {
      memo[s] = 0;
      return false;
    }
    if (!any_bad) {
      for (int32_t q : order) memo[static_cast<size_t>(q)] = 1;
      return true;
    }
    // Some reached state is not total: which of the others lead to one (edges recorded)
    order.assign(1, s);
    bad.assign(1, 0);
    edges.clear();
    at[s] = 0;
    for (size_t i = 0; i < order.size() && !too_many; ++i) {
      const int32_t q = order[i];
      if (rejects_plain(R, q)) {
        bad[i] = 1;
        continue;
      }
      each_plain_to(R, q, [&](int32_t t) {
        if (memo[t] == 0) return !(bad[i] = 1);
        if (memo[t] == 1) return true;
        if (at[t] < 0) {
          if (order.size() >= kMaxReached) return !(too_many = true);
          at[t] = static_cast<int32_t>(order.size());
          order.push_back(t);
          bad.push_back(0);
        }
        edges.emplace_back(at[t], static_cast<int32_t>(i));
        return true;
      });
    }
    for (int32_t q : order) at[q] = -1;
    if (too_many) {
      memo[s] = 0;
      return false;
    }
    // not total: a bad state and every reached state leading to one (edges by target, CSR)
    std::vector<int32_t>& start = w.start;
    std::vector<int32_t>& from = w.from;
    start.assign(order.size() + 1, 0);
    from.resize(edges.size());
    for (const auto& e : edges) ++start[static_cast<size_t>(e.first) + 1];
    for (size_t k = 0; k < order.size(); ++k) start[k + 1] += start[k];
    {
      std::vector<int32_t>& fill = w.fill;
      fill.assign(start.begin(), start.end() - 1);
      for (const auto& e : edges) from[static_cast<size_t>(fill[static_cast<size_t>(e.first)]++)] = e.second;
    }
    std::vector<int32_t>& queue = w.queue;
    queue.clear();
    for (size_t i = 0; i < order.size(); ++i)
      if (bad[i]) queue.push_back(static_cast<int32_t>(i));
    while (!queue.empty()) {
      const size_t j = static_cast<size_t>(queue.back());
      queue.pop_back();
      for (int32_t k = start[j]; k < start[j + 1]; ++k) {
        const size_t p = static_cast<size_t>(from[static_cast<size_t>(k)]);
        if (!bad[p]) {
          bad[p] = 1;
          queue.push_back(static_cast<int32_t>(p));
        }
      }
    }
    for (size_t i = 0; i < order.size(); ++i) memo[static_cast<size_t>(order[i])] = bad[i] ? 0 : 1;
    return memo[s] != 0;
  }

  // loops_plain() told from `cid`'s frames, without its byte row where that can be told: 0
  // where some plain byte surely leads elsewhere, 1 where every plain byte surely leads back,
  // -1 where only the row can tell. A DFA frame (r, s, p) whose state reads a plain byte into
  // a state t != s that reads bytes makes the successor hold stack (r, t, p) (close() keeps
  // every frame it starts from that reads bytes): where `cid` holds no such stack, the
  // successor differs. Where every frame's state reads every plain byte back into itself, the
  // successor is the closure of `cid`'s own stacks, which is `cid` again unless `cid` was
  // accepting through a frame that reads no byte (then the row tells). At a member name's
  // start each first byte leads to a configuration of several such frames (a declared name's
  // literal, the free names' body in each object variant): their rows, made only to be asked
  // this, were about a fifth of that mask (85 -> 72 us at SmolLM2's 49K tokens). Not in a
  // counted grammar: prune_subsumed may drop a stack the closure made.
  int plain_loop_by_frames(int32_t cid) {
    if (counted_) return -1;
    std::lock_guard<std::recursive_mutex> g(mu_);
    const ConfigStacks own = config_of(cid);
    bool back = true;
    for (int32_t sid : own) {
      const Frame f = stacks_[static_cast<size_t>(sid)];
      const Rule& R = rules_[static_cast<size_t>(f.r)];
      const int32_t* t = R.trans + f.s * 256;
      for (uint8_t b : plain_bytes()) {
        const int32_t u = t[b];
        if (u == f.s) continue;
        back = false;
        if (u < 0 || !R.has_bytes[static_cast<size_t>(u)]) continue;
        const Frame next{f.r, u, f.p};
        const int32_t have = find_stack(next, frame_hash(next));
        if (have < 0 || !std::binary_search(own.begin(), own.end(), have)) return 0;
      }
    }
    return back && own.size() > 0 && accepting_[static_cast<size_t>(cid)] == 0 ? 1 : -1;
  }

  // Whether `cid` goes back to itself on every plain byte (memoised).
  bool loops_plain(int32_t cid) {
    if (cid == kDead) return false;
    {
      std::lock_guard<std::recursive_mutex> g(mu_);
      if (static_cast<size_t>(cid) < plain_loop_.size() && plain_loop_[static_cast<size_t>(cid)] >= 0)
        return plain_loop_[static_cast<size_t>(cid)] != 0;
    }
    bool hit = true;
    const int64_t v = virt_.load(cid);
    if (v >= 0) {
      // A frame alone in a simple state loops where its state does (its other states are
      // other configurations): read from the DFA row, no byte row made. At a property name's
      // start each first byte of a declared name leads to such a configuration, and their
      // rows, made here only to be asked this, were a third of a large object's name start.
      const int32_t s = static_cast<int32_t>(v & 0xFFFFFFFF);
      const int32_t* t = rules_[static_cast<size_t>(v >> 32)].trans + static_cast<int64_t>(s) * 256;
      for (uint8_t b : plain_bytes()) hit = hit && t[b] == s;
    } else if (const int known = slot_.load(cid) < 0 ? plain_loop_by_frames(cid) : -1; known >= 0) {
      hit = known != 0;
    } else {
      const int32_t* r = row(cid);
      for (uint8_t b : plain_bytes()) hit = hit && r[b] == cid;
    }
    std::lock_guard<std::recursive_mutex> g(mu_);
    if (static_cast<size_t>(cid) >= plain_loop_.size())
      plain_loop_.resize(std::max<size_t>(static_cast<size_t>(cid) + 1, 2 * plain_loop_.size()), -1);
    plain_loop_[static_cast<size_t>(cid)] = hit ? 1 : 0;
    return hit;
  }

  // -- state ----------------------------------------------------------------------------

  std::vector<Rule> rules_;
  size_t loaded_rules_ = 0;    // rules_[loaded_rules_ ..]: the bounded counters' twins
  std::vector<int32_t> twin_;  // per loaded rule: its twin (-1: none)
  // bounded_walk's tables, under mu_: per item rule (ItemTable), and per (counter, parent
  // stack) the twin's configuration (kNone: the item and what follows the counter overlap)
  std::unordered_map<int32_t, const ItemTable*> item_tables_;  // (nullptr: not one character an item)
  std::unordered_map<uint64_t, int32_t> twin_config_;
  std::atomic<int64_t> bounded_walks_{0};
  std::atomic<int64_t> frames_walks_{0};
  std::atomic<int64_t> chain_classes_{0};
  std::atomic<int64_t> split_frames_{0};
  std::atomic<int64_t> first_classes_{0};  // (stats: masks by first_class_walk)  // (stats: masks made from the twin's)
  bool counted_ = false;
  std::shared_ptr<const Vocab> vocab_;
  const Vocab& V;
  std::vector<int64_t> stop_;
  std::vector<uint32_t> stop_mask_;  // stop_ as a mask of words_ words
  const int64_t words_;
  const int64_t table_budget_;
  std::atomic<int64_t> stack_limit_;

  std::recursive_mutex mu_;
  // stacks and configurations (under mu_)
  std::vector<Frame> stacks_;
  std::vector<int64_t> stack_dist_;  // (valid once dists_ready_)
  bool dists_ready_ = false;
  // every rule state can reach its rule's end (the caller says so: build_automaton trims),
  // so every configuration but DEAD can complete
  const bool trimmed_;
  IdTable stack_ids_;
  // each configuration's stack ids, sorted: config_data_[config_off_[c], config_off_[c + 1])
  // (flat: a vector per configuration was an allocation per new configuration, a few per
  // first-visit fill). Read under mu_; interning a configuration may move the data.
  std::vector<int32_t> config_data_;
  std::vector<int64_t> config_off_{0};
  struct ConfigStacks {
    const int32_t* b;
    const int32_t* e;
    const int32_t* begin() const { return b; }
    const int32_t* end() const { return e; }
    size_t size() const { return static_cast<size_t>(e - b); }
    int32_t operator[](size_t k) const { return b[k]; }
    bool equals(const std::vector<int32_t>& v) const {
      return v.size() == size() && std::equal(v.begin(), v.end(), b);
    }
  };
  ConfigStacks config_of(int32_t c) const {
    const int32_t* d = config_data_.data();
    return {d + config_off_[c], d + config_off_[c + 1]};
  }
  size_t config_count() const { return config_off_.size() - 1; }
  std::vector<uint8_t> accepting_;
  std::vector<int64_t> config_dist_;  // (valid once dists_ready_)
  IdTable config_ids_;
  std::atomic<int64_t> num_configs_{0};
  IdTable closed_;  // memo entries of close_memo
  std::vector<Frame> closed_frames_;
  std::vector<int64_t> closed_off_{0};
  std::vector<int32_t> closed_cid_;
  SeenFrames close_seen_;
  std::vector<Frame> close_work_;
  std::vector<int32_t> close_tops_;
  // compute_row_locked's scratch (never re-entered: close() computes no row)
  std::vector<Frame> row_raw_;  // frames to close
  std::vector<int32_t> row_stacks_, row_reps_, row_after_, row_col_;
  std::vector<uint64_t> row_hashes_;
  std::vector<Frame> row_frames_;
  std::vector<const int32_t*> row_targets_;
  std::unordered_map<int64_t, std::vector<int32_t>> frame_tables_;
  int64_t table_cells_ = 0;
  std::unordered_map<int64_t, int32_t> single_;
  std::unordered_map<int32_t, int32_t> canon_stack_;
  std::unordered_map<std::vector<int32_t>, const StoredMask*, VecHash> mask_by_canon_;
  std::unordered_map<int32_t, CharKill> char_kills_;  // (char_kill; under mu_)
  std::atomic<int64_t> class_closures_{0}, killed_loops_{0}, text_classes_{0}, level_walks_{0};  // (stats: how often each shortcut served)
  // loops_plain per configuration (-1: not known yet). A vector: a hash map's rehash, once
  // a grammar's walk had met some ten thousand configurations, made the one mask whose
  // insert triggered it 20-30 us slower, and such masks were among the largest first visits.
  std::vector<int8_t> plain_loop_;
  std::vector<int8_t> plain_total_cfg_;  // plain_total per configuration (-1: not known yet)
  std::vector<std::vector<int32_t>> mb_state_;         // multibyte_state per rule and state
  std::vector<int32_t> mb_states_, mb_after_;          // (multibyte_state's lists)
  std::vector<std::vector<int8_t>> total_memo_;         // total_state per rule and state (-1: not yet)
  std::vector<std::vector<int8_t>> text_total_memo_;    // text_total_state per rule and state (-1: not yet)
  std::vector<int8_t> text_total_cfg_;                  // text_total per configuration (-1: not known yet)
  std::atomic<int64_t> text_totals_{0};                 // (stats: masks split_walks took by text_total)
  std::atomic<int64_t> shifts_{0};                      // (stats: shifted() found a step that repeats)
  std::vector<int32_t> total_at_;                       // total_state's scratch (all -1 between calls)
  std::vector<int32_t> one_stack_;                      // close_one's (under mu_)
  struct TotalScratch {                                 // total_state's lists (under mu_)
    std::vector<int32_t> order, start, from, fill, queue;
    std::vector<uint8_t> bad;
    std::vector<std::pair<int32_t, int32_t>> edges;
  } total_scratch_;
  struct Kept : StoredMask {
    std::unique_ptr<uint64_t[]> block;  // the chunk bitmap, then the words kept
  };
  std::deque<Kept> mask_store_;  // each distinct mask once (never moved: masks_ points in)
  std::deque<std::unique_ptr<uint32_t[]>> made_whole_;  // whole() copies of masks kept in part
  int64_t mask_bytes_ = 0;
  StoredMask stop_stored_;
  std::unordered_multimap<uint64_t, int64_t> mask_by_content_;  // hash_words -> mask_store_ entry
  // set_runs' memo (its own lock: taken inside walks, which hold no other)
  struct RunsKey {
    const IdRuns* runs;
    uint64_t bits[4];
    bool operator==(const RunsKey& o) const {
      return runs == o.runs && bits[0] == o.bits[0] && bits[1] == o.bits[1] && bits[2] == o.bits[2] && bits[3] == o.bits[3];
    }
  };
  struct RunsKeyHash {
    size_t operator()(const RunsKey& k) const {
      uint64_t h = reinterpret_cast<uintptr_t>(k.runs) * 0x9E3779B97F4A7C15ull;
      for (uint64_t x : k.bits) h = (h ^ x) * 0xBF58476D1CE4E5B9ull ^ (h >> 29);
      return static_cast<size_t>(h);
    }
  };
  std::mutex runs_mu_;
  std::unordered_map<RunsKey, std::unique_ptr<uint32_t[]>, RunsKeyHash> runs_memo_;
  // lock-free reads
  RowStore rows_;
  AtomicTable<int32_t> slot_;
  // per configuration of one stack whose top state is simple (Rule::simple), that frame's
  // rule and state (r << 32 | s) and parent stack, for walks without the lock; -1 otherwise
  AtomicTable<int64_t> virt_;
  AtomicTable<int32_t> virt_p_;
  AtomicTable<const StoredMask*> masks_;
  AtomicTable<int32_t> equiv_;  // walk_equiv's twin, or the configuration itself (-1: not asked yet)
  AtomicTable<int32_t> equiv_slack_;  // and the bytes it holds for (-1: none)
  // multibyte_target per configuration (kMbUnasked: not asked yet; under mu_). Not a hash
  // map: its rehash, once a large grammar's walk had asked it of some thousands of
  // configurations, fell into one mask (o15627's, at SmolLM2: 65 us, most of it the rehash)
  static constexpr int32_t kMbUnasked = std::numeric_limits<int32_t>::min();
  AtomicTable<int32_t> mb_target_;
  int64_t walk_twins_ = 0;      // (stats: configurations walked as their twin's, under mu_)
  int32_t initial_ = kDead;
};

i64 to_i64(const std::vector<int32_t>& v) {
  i64 a(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}

}  // namespace

void register_config_index(py::module_& m) {
  // args[0]: the number of stacks; token_index raises structgen's LimitError from it. Leaked on
  // purpose: the translator may run until the interpreter is gone.
  static PyObject* stack_limit = PyErr_NewException("structgen._core.StackLimitExceeded", PyExc_RuntimeError, nullptr);
  m.add_object("StackLimitExceeded", py::handle(stack_limit).inc_ref());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StackLimitExceeded& e) {
      PyErr_SetObject(stack_limit, py::int_(e.stacks).ptr());
    }
  });
  py::class_<Vocab, std::shared_ptr<Vocab>>(m, "VocabTables")
      .def(py::init<const py::object&, const py::list&>(), py::arg("trie"), py::arg("multibyte"));
  // the base is registered so that functions of other files take any ConfigIndex as an IndexView
  py::class_<structgen::IndexView>(m, "IndexView");
  py::class_<ConfigIndex, structgen::IndexView>(m, "ConfigIndex")
      .def(py::init([](const py::list& rules, int32_t root, std::shared_ptr<Vocab> vocab, const py::object& stop_ids,
                       int64_t words, int64_t table_cells, int64_t stack_limit, bool trimmed) {
             if (vocab == nullptr) throw std::invalid_argument("vocab is required");
             return new ConfigIndex(rules, root, std::move(vocab), stop_ids, words, table_cells, stack_limit, trimmed);
           }),
           py::arg("rules"), py::arg("root"), py::arg("vocab"), py::arg("stop_ids"), py::arg("words"),
           py::arg("table_cells"), py::arg("stack_limit"), py::arg("trimmed") = false)
      .def_property_readonly("initial", &ConfigIndex::initial)
      .def_property_readonly("num_configs", &ConfigIndex::num_configs)
      .def_property_readonly("counted", &ConfigIndex::counted)
      // the address of the index as an IndexView, for _core.fill_row (valid while the index lives)
      .def_property_readonly("view",
                             [](ConfigIndex& ix) { return reinterpret_cast<uintptr_t>(static_cast<structgen::IndexView*>(&ix)); })
      // a read-only view of the mask allowing only the stop tokens (the index is its base)
      .def_property_readonly("stop_mask",
                             [](py::object self) {
                               const ConfigIndex& ix = self.cast<const ConfigIndex&>();
                               py::array_t<int32_t> out({static_cast<py::ssize_t>(ix.words())},
                                                        {static_cast<py::ssize_t>(4)},
                                                        reinterpret_cast<const int32_t*>(ix.stop_mask()), self);
                               py::detail::array_proxy(out.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
                               return out;
                             })
      .def("set_stack_limit", &ConfigIndex::set_stack_limit)
      .def("is_accepting", &ConfigIndex::is_accepting)
      .def("config_dist", &ConfigIndex::config_dist)
      .def("config_dists", &ConfigIndex::config_dists)
      .def("config_stacks", &ConfigIndex::config_stacks)
      .def("stack", &ConfigIndex::stack)
      .def("stack_dist", &ConfigIndex::stack_dist)
      .def("rule_distances", &ConfigIndex::rule_distances)
      .def("stats", &ConfigIndex::stats)
      .def("has_row", [](ConfigIndex& ix, int32_t cid) {
        ix.check_cid(cid);
        return ix.has_row(cid);
      })
      .def("row",
           [](ConfigIndex& ix, int32_t cid) {
             ix.check_cid(cid);
             const int32_t* r;
             {
               py::gil_scoped_release release;
               r = ix.row(cid);
             }
             i32 out(256);
             std::copy(r, r + 256, out.mutable_data());
             return out;
           })
      .def("step_bytes",
           [](ConfigIndex& ix, int32_t cid, const py::bytes& data) {
             ix.check_cid(cid);
             std::string s = data;
             py::gil_scoped_release release;
             return ix.step_bytes(cid, reinterpret_cast<const uint8_t*>(s.data()), static_cast<int64_t>(s.size()));
           })
      .def("mask",
           [](py::object self, int32_t cid) {
             ConfigIndex& ix = self.cast<ConfigIndex&>();
             ix.check_cid(cid);
             const uint32_t* m;
             {
               py::gil_scoped_release release;
               m = ix.mask(cid);
             }
             // a read-only view of the memoised mask; the index outlives it (its base)
             py::array_t<int32_t> out({static_cast<py::ssize_t>(ix.words())}, {static_cast<py::ssize_t>(4)},
                                      reinterpret_cast<const int32_t*>(m), self);
             py::detail::array_proxy(out.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
             // the address tells configurations sharing one mask (counter classes) apart cheaply
             return py::make_tuple(reinterpret_cast<uintptr_t>(m), out);
           })
      .def("shortest_completion",
           [](ConfigIndex& ix, int32_t cid) -> py::object {
             ix.check_cid(cid);
             std::string out;
             bool ok;
             {
               py::gil_scoped_release release;
               ok = ix.shortest_completion(cid, out);
             }
             if (!ok) return py::none();
             return py::bytes(out);
           })
      .def("successors", [](ConfigIndex& ix, int32_t cid) {
        ix.check_cid(cid);
        std::vector<int32_t> toks, cfgs;
        {
          py::gil_scoped_release release;
          ix.successors(cid, toks, cfgs);
        }
        return py::make_tuple(to_i64(toks), to_i64(cfgs));
      });
}
