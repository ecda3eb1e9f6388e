// structgen._core, finite automata over interval alphabets: one implementation for the byte-level
// rule automata (structgen/automaton.py) and the code-point algebra (structgen/regular.py).
//
// An alphabet is a range of integers: bytes 0..255 or code points 0..0x10FFFF. Edges carry
// inclusive [lo, hi] intervals, so a code-point class costs one edge, not one per character.
// Pipeline: a serialized expression (src/core/expr_plan.cpp) -> Thompson NFA -> subset
// construction over the elementary intervals of each state's edges -> (trimming, in the caller)
// -> Hopcroft minimisation. Products (intersection, difference) and UTF-8 lowering of code
// points to bytes work on the same structures.
#pragma once

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace fa {

// Sets `eq` (256 bits) to the bytes b where row[b] == value, four bytes per compare (a row's
// loops, its live bytes, whether it has a target at all are each one of these and a test).
// Each 64-bit word is gathered in a register and stored once: or-ing every four bits into
// memory chained each compare to the store before it, most of a large rule's distances.
inline void equal_bits(const int32_t* row, int32_t value, uint64_t* eq) {
#if defined(__SSE2__)
  const __m128i want = _mm_set1_epi32(value);
  for (int w = 0; w < 4; ++w) {
    uint64_t bits = 0;
    for (int j = 0; j < 64; j += 4) {
      const __m128i got = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 64 * w + j));
      bits |= static_cast<uint64_t>(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(got, want)))) << j;
    }
    eq[w] = bits;
  }
#else
  for (int w = 0; w < 4; ++w) {
    uint64_t bits = 0;
    for (int j = 0; j < 64; ++j) bits |= uint64_t(row[64 * w + j] == value) << j;
    eq[w] = bits;
  }
#endif
}

// Sets in `change` (256 bits) the bytes b > 0 where row[b] != row[b - 1]: where a run of
// equal targets starts, four bytes per compare (a DFA row is mostly a few long runs). Or-ed
// into `change`, one store per 64-bit word (see equal_bits).
inline void mark_changes(const int32_t* row, uint64_t* change) {
  for (int w = 0; w < 4; ++w) {
    uint64_t bits = 0;
    int j = w == 0 ? 1 : 0;  // byte 0 has no byte before it
#if defined(__SSE2__)
    for (; j < 4 && w == 0; ++j) bits |= uint64_t(row[j] != row[j - 1]) << j;
    for (; j < 64; j += 4) {
      const int b = 64 * w + j;
      const __m128i cur = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + b));
      const __m128i before = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + b - 1));
      const int same = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(cur, before)));
      bits |= static_cast<uint64_t>(~same & 0xF) << j;
    }
#endif
    for (; j < 64; ++j) bits |= uint64_t(row[64 * w + j] != row[64 * w + j - 1]) << j;
    change[w] |= bits;
  }
}

// Whether every entry of T[0, count) is -1 or a state below n (a transition table's targets).
// Four entries per SSE2 compare: run over whole (states x 256) tables at every binding that
// takes one, a compare-and-branch per entry was a visible share of a large schema's compile.
inline bool targets_in_range(const int32_t* T, int64_t count, int32_t n) {
  int64_t k = 0;
  bool ok = true;
#if defined(__SSE2__)
  // x in [-1, n) <=> unsigned(x + 1) <= unsigned(n): compared signed after flipping the sign bit
  const __m128i one = _mm_set1_epi32(1), sign = _mm_set1_epi32(INT32_MIN);
  const __m128i limit = _mm_xor_si128(_mm_set1_epi32(n), sign);
  __m128i bad = _mm_setzero_si128();
  for (; k + 4 <= count; k += 4) {
    const __m128i x = _mm_add_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(T + k)), one);
    bad = _mm_or_si128(bad, _mm_cmpgt_epi32(_mm_xor_si128(x, sign), limit));
  }
  ok = _mm_movemask_epi8(bad) == 0;
#endif
  for (; k < count; ++k) ok = ok && T[k] >= -1 && T[k] < n;
  return ok;
}

// Fewest bytes from each state of a rule DFA (T: n x 256, F: final flags, calls of state s at
// CE[2 * CO[s] ..] as (callee, return state) pairs) to the rule's end, into dist[0, n):
// Dijkstra backwards from the final states; a byte costs 1, a call to rule c costs minlen[c]
// (no edge where c is outside [0, R) or minlen[c] >= unreachable). `unreachable` where the end
// cannot be reached. The tables are trusted (their bindings range-check them).
template <class Final, class Off>
void rule_distances(const int32_t* T, const Final* F, int64_t n, const Off* CO, const int32_t* CE,
                    const int64_t* minlen, int64_t R, int64_t unreachable, int64_t* dist) {
  // predecessors with costs, CSR by target
  std::vector<std::pair<int32_t, std::pair<int32_t, int64_t>>> pairs;  // (target, (source, cost))
  pairs.reserve(static_cast<size_t>(n) * 4);
  for (int64_t s = 0; s < n; ++s) {
    const int32_t* row = T + s * 256;
    // one edge per run of equal targets (a repeated edge costs a heap check, nothing more):
    // the runs' starts are found four bytes per compare, where a test per byte was most of
    // the distances of a large schema's rules (thousands of states x 256 bytes)
    uint64_t starts[4] = {1, 0, 0, 0};  // byte 0 starts a run
    mark_changes(row, starts);
    for (int w = 0; w < 4; ++w)
      for (uint64_t bits = starts[w]; bits != 0; bits &= bits - 1) {
        const int32_t t = row[w * 64 + __builtin_ctzll(bits)];
        if (t >= 0) pairs.push_back({t, {static_cast<int32_t>(s), 1}});
      }
    for (int64_t k = CO[s]; k < static_cast<int64_t>(CO[s + 1]); ++k) {
      const int32_t c = CE[2 * k];
      if (c >= 0 && c < R && minlen[c] < unreachable) pairs.push_back({CE[2 * k + 1], {static_cast<int32_t>(s), minlen[c]}});
    }
  }
  std::vector<int64_t> off(static_cast<size_t>(n) + 1, 0);
  for (auto& p : pairs) ++off[p.first + 1];
  for (int64_t t = 0; t < n; ++t) off[t + 1] += off[t];
  std::vector<std::pair<int32_t, int64_t>> pre(pairs.size());
  std::vector<int64_t> fill(off.begin(), off.end() - 1);
  for (auto& p : pairs) pre[fill[p.first]++] = p.second;
  using Item = std::pair<int64_t, int32_t>;
  std::vector<Item> heap;
  auto cmp = [](const Item& a, const Item& b) { return a > b; };
  std::fill(dist, dist + n, unreachable);
  for (int64_t s = 0; s < n; ++s)
    if (F[s]) {
      dist[s] = 0;
      heap.emplace_back(0, static_cast<int32_t>(s));
    }
  std::make_heap(heap.begin(), heap.end(), cmp);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    const auto [ds, s] = heap.back();
    heap.pop_back();
    if (ds > dist[s]) continue;
    for (int64_t k = off[s]; k < off[s + 1]; ++k) {
      const auto [a, cost] = pre[k];
      const int64_t nd = std::min(ds + cost, unreachable);
      if (nd < dist[a]) {
        dist[a] = nd;
        heap.emplace_back(nd, a);
        std::push_heap(heap.begin(), heap.end(), cmp);
      }
    }
  }
}

// The rule's shortest match: Dijkstra forward from state 0, stopping at the first final
// state popped (the same costs as rule_distances, whose dist[0] it equals, without every
// state's distance); `unreachable` where no final state can be reached. `scratch` holds the
// search's buffers between calls (its dist entries are left at `unreachable`).
struct ShortestScratch {
  std::vector<int64_t> dist;
  std::vector<int32_t> touched;
  std::vector<std::pair<int64_t, int32_t>> heap;
};
template <class Final, class Off>
int64_t shortest_match(const int32_t* T, const Final* F, int64_t n, const Off* CO, const int32_t* CE,
                       const int64_t* minlen, int64_t R, int64_t unreachable, ShortestScratch& scratch) {
  if (n <= 0) return unreachable;
  auto& [dist, touched, heap] = scratch;
  if (static_cast<int64_t>(dist.size()) < n) dist.resize(static_cast<size_t>(n), unreachable);
  auto cmp = [](const std::pair<int64_t, int32_t>& a, const std::pair<int64_t, int32_t>& b) { return a > b; };
  auto relax = [&](int32_t t, int64_t d) {
    if (d >= dist[t]) return;
    if (dist[t] == unreachable) touched.push_back(t);
    dist[t] = d;
    heap.emplace_back(d, t);
    std::push_heap(heap.begin(), heap.end(), cmp);
  };
  heap.clear();
  touched.clear();
  relax(0, 0);
  int64_t found = unreachable;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    const auto [d, s] = heap.back();
    heap.pop_back();
    if (d > dist[s]) continue;
    if (F[s]) {
      found = d;
      break;
    }
    const int32_t* row = T + static_cast<int64_t>(s) * 256;
    uint64_t starts[4] = {1, 0, 0, 0};  // (one edge per run of equal targets)
    mark_changes(row, starts);
    for (int w = 0; w < 4; ++w)
      for (uint64_t bits = starts[w]; bits != 0; bits &= bits - 1) {
        const int32_t t = row[w * 64 + __builtin_ctzll(bits)];
        if (t >= 0) relax(t, std::min(d + 1, unreachable));
      }
    for (int64_t k = CO[s]; k < static_cast<int64_t>(CO[s + 1]); ++k) {
      const int32_t c = CE[2 * k];
      if (c >= 0 && c < R && minlen[c] < unreachable) relax(CE[2 * k + 1], std::min(d + minlen[c], unreachable));
    }
  }
  for (int32_t t : touched) dist[t] = unreachable;
  return found;
}

// The expression reachable from node `root` of serialized expressions (nodes: n x 4, data: nd)
// in a canonical form, as bytes (src/core/automaton.cpp): equal keys, equal rule automata.
std::string rule_key(const int32_t* nodes, int64_t n, const int32_t* data, int64_t nd, int32_t root);

// A size limit was reached while an automaton grew (the Python side raises the matching
// AutomatonSizeError or LimitError). kind: 0 = NFA states, 1 = DFA states.
struct LimitHit {
  int kind;
  int64_t reached;
};

// A malformed serialized expression or an unsupported construct (a rule reference where only
// regular operands are allowed): a ValueError / GrammarError on the Python side.
struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Node kinds of a serialized expression; nodes are (kind, a, b, c) int32 quadruples over a
// shared int32 data array.
enum Kind : int32_t {
  LIT = 0,     // data[a : a + b]: code points
  SET = 1,     // data[a : a + 2b]: sorted disjoint (lo, hi) code-point ranges
  SEQ = 2,     // data[a : a + b]: child nodes
  ALT = 3,     // data[a : a + b]: child nodes
  REP = 4,     // child a, min b, max c (-1: unbounded)
  CALL = 5,    // call rule a (byte automata only)
  INLINE = 6,  // the body of rule a is node b, copied in place (byte automata only)
  GRAPH = 7,   // data[a : a + b]: n, final[n], then per state: count, count * (lo, hi, target)
  EGRAPH = 8,  // data[a : a + b]: n, final[n], then per state: count, count * (node, target)
  REF = 9,     // a reference to rule a, not resolved yet (patched into CALL or INLINE before building)
  REGEX = 10,  // the parsed regular expression of node a (b: its pattern's length, for size estimates)
};

// Appends to a flat vector of pairs or triples (push_back inlines; an initializer-list insert
// went through vector::_M_range_insert, a tenth of building a rule's automaton).
inline void push2(std::vector<int32_t>& v, int32_t a, int32_t b) {
  v.push_back(a);
  v.push_back(b);
}
inline void push3(std::vector<int32_t>& v, int32_t a, int32_t b, int32_t c) {
  v.push_back(a);
  v.push_back(b);
  v.push_back(c);
}

struct Expr {
  const int32_t* nodes;  // 4 per node
  int64_t n_nodes;
  const int32_t* data;
  int64_t n_data;
};

// A Thompson NFA as CSR arrays (filled by build_nfa).
struct NFA {
  int64_t n = 0;
  std::vector<int64_t> eps_off, edge_off, call_off;
  std::vector<int32_t> eps;         // targets
  std::vector<int32_t> edges;       // (lo, hi, target) triples
  std::vector<int32_t> calls;       // (callee, target) pairs
};

// Thompson construction of `root` between a fresh start state (0) and end state (1).
// bytes: code points are lowered to UTF-8 byte sequences (alphabet 0..255); otherwise the
// alphabet is code points and CALL / INLINE nodes are refused. Throws LimitHit{0, reached}
// when the NFA would pass `max_states` (counting `used` states built before).
NFA build_nfa(const Expr& e, int32_t root, bool bytes, int64_t max_states, int64_t used);

// A DFA with interval rows: state s has rows[row_off[s] : row_off[s + 1]] (lo, hi, target)
// triples, sorted and disjoint; calls[call_off[s] : call_off[s + 1]] (callee, target) pairs.
struct DFA {
  std::vector<int64_t> row_off{0}, call_off{0};
  std::vector<int32_t> rows, calls;
  std::vector<uint8_t> final;
  // determinise(): the smallest `max_states - used` this construction fits in (its largest
  // count of states where a new one was checked against the limit, plus one)
  int64_t need = 0;
  int64_t size() const { return static_cast<int64_t>(final.size()); }
};

// Subset construction from NFA state `start`; final where `end` is in the set. A new state
// past `max_states - used` throws LimitHit{1, used + states + 1} (byte automata: states
// reached by a call edge are not counted against the limit while it grows, as before);
// merge: adjacent intervals with one target become one row (code points).
// The byte-range sequences the UTF-8 encodings of [lo, hi] take (what one code-point edge of
// an automaton becomes in a byte NFA).
int64_t utf8_sequence_count(int32_t lo, int32_t hi);

DFA determinise(const NFA& nfa, int32_t start, int32_t end, int64_t max_states, int64_t used, bool bytes);

// Product of two DFAs over code points: final where a is final and b is (intersection,
// keep_b_final) or is not (difference; b may then be "dead", -1). Throws LimitHit{1, states}.
DFA product(const DFA& a, const DFA& b, bool keep_b_final, int64_t max_states);

// The coarsest partition of states compatible with finality and the interval rows and calls,
// a missing transition being none (two states are merged when they have the same finality
// and, letter by letter, both no transition or transitions into one block). For a trimmed
// DFA (every state reaches a final one) that is language equivalence. Returns block ids
// numbered by first appearance over the states 0..n-1.
std::vector<int32_t> hopcroft(const DFA& d, int32_t* nblocks);

// The minimal DFA of `d` (classes of hopcroft(): a missing transition is none, so a dead
// state is not merged with it; adjacent intervals with the same target class merged).
// Unreachable and dead states stay, as classes.
DFA minimise_rows(const DFA& d);

}  // namespace fa
