// Finite automata over interval alphabets: Thompson construction, subset construction,
// products and Hopcroft minimisation (see fa.hpp).
#include "fa.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>
#include <utility>

namespace fa {

namespace {

uint64_t hash_ints(const int32_t* p, int64_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(n);
  for (int64_t i = 0; i < n; ++i)
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(p[i])) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h;
}

struct VecHash {
  size_t operator()(const std::vector<int32_t>& v) const noexcept {
    return static_cast<size_t>(hash_ints(v.data(), static_cast<int64_t>(v.size())));
  }
};

// Sorted sets of NFA states, interned: flat storage and an open-addressing table of ids, so
// that neither a lookup nor a new set allocates per entry (the subset construction looks one
// up per elementary interval of every DFA state; a map keyed by vectors spent most of a small
// rule's time in malloc).
class SetTable {
 public:
  SetTable() : off_{0}, slots_(16, -1) {}
  int32_t size() const { return static_cast<int32_t>(off_.size() - 1); }
  const int32_t* data(int32_t id) const { return data_.data() + off_[id]; }
  int64_t length(int32_t id) const { return off_[id + 1] - off_[id]; }
  // id of the set `p[0..n)`, or -1
  int32_t find(const int32_t* p, int64_t n, uint64_t h) const {
    const size_t mask = slots_.size() - 1;
    for (size_t k = h & mask;; k = (k + 1) & mask) {
      const int32_t id = slots_[k];
      if (id < 0) return -1;
      if (hashes_[id] == h && length(id) == n && std::equal(p, p + n, data(id))) return id;
    }
  }
  // adds a set not in the table; returns its id
  int32_t add(const int32_t* p, int64_t n, uint64_t h) {
    if (2 * (off_.size()) >= slots_.size()) grow();
    const int32_t id = size();
    data_.insert(data_.end(), p, p + n);
    off_.push_back(static_cast<int64_t>(data_.size()));
    hashes_.push_back(h);
    place(id);
    return id;
  }
  // (the final multiply spreads the low bits the probe uses)
  static uint64_t hash(const int32_t* p, int64_t n) { return hash_ints(p, n) * 0xBF58476D1CE4E5B9ull; }

 private:
  void place(int32_t id) {
    const size_t mask = slots_.size() - 1;
    size_t k = hashes_[id] & mask;
    while (slots_[k] >= 0) k = (k + 1) & mask;
    slots_[k] = id;
  }
  void grow() {
    slots_.assign(slots_.size() * 2, -1);
    for (int32_t id = 0; id < size(); ++id) place(id);
  }
  std::vector<int32_t> data_;
  std::vector<int64_t> off_;
  std::vector<uint64_t> hashes_;
  std::vector<int32_t> slots_;
};

constexpr int32_t MAX_CP = 0x10FFFF;

// --------------------------------------------------------------------------- UTF-8 lowering

// One UTF-8 byte-range sequence: up to four (lo, hi) byte ranges, held inline (a vector per
// sequence was an allocation for every sequence of every character class the NFA reads)
struct ByteSeq {
  std::pair<int32_t, int32_t> r[4];
  size_t n = 0;
  size_t size() const { return n; }
  const std::pair<int32_t, int32_t>& operator[](size_t i) const { return r[i]; }
  void emplace_back(int32_t lo, int32_t hi) { r[n++] = {lo, hi}; }
};

int utf8_encode(int32_t cp, uint8_t* out) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

// Where [start, end] must be cut so that each piece is one byte-range sequence, or -1
// (structgen/utf8.py documents the split; this is the same algorithm).
int64_t split_point(int64_t start, int64_t end) {
  for (int64_t m : {0x7F, 0x7FF, 0xFFFF})
    if (start <= m && m < end) return m;
  if (end <= 0x7F) return -1;
  for (int i = 1; i < 4; ++i) {
    const int64_t m = (int64_t{1} << (6 * i)) - 1;
    if ((start & ~m) != (end & ~m)) {
      if ((start & m) != 0) return start | m;
      if ((end & m) != m) return (end & ~m) - 1;
    }
  }
  return -1;
}

// The UTF-8 encodings of [lo, hi] (surrogates skipped) as byte-range sequences, ascending.
void utf8_sequences(int32_t lo, int32_t hi, std::vector<ByteSeq>& out) {
  lo = std::max(lo, 0);
  hi = std::min(hi, MAX_CP);
  if (lo > hi) return;
  // (the pieces still to encode: each split pushes one, at most a few dozen in all)
  std::pair<int64_t, int64_t> stack[64];
  int depth = 0;
  if (hi > 0xDFFF) stack[depth++] = {std::max<int64_t>(lo, 0xE000), hi};
  if (lo < 0xD800) stack[depth++] = {lo, std::min<int64_t>(hi, 0xD7FF)};
  while (depth > 0) {
    auto [start, end] = stack[--depth];
    if (start > end) continue;
    for (;;) {
      const int64_t split = split_point(start, end);
      if (split < 0) break;
      if (depth == 64) throw BadInput("a code point range splits into too many UTF-8 sequences");
      stack[depth++] = {split + 1, end};
      end = split;
    }
    uint8_t a[4], b[4];
    const int n = utf8_encode(static_cast<int32_t>(start), a);
    utf8_encode(static_cast<int32_t>(end), b);
    ByteSeq s;
    for (int i = 0; i < n; ++i) s.emplace_back(a[i], b[i]);
    out.push_back(std::move(s));
  }
}

// --------------------------------------------------------------------------- Thompson NFA

struct Builder {
  const Expr& e;
  bool bytes;
  int64_t max_states, used;
  int64_t n = 0;
  std::vector<std::pair<int32_t, int32_t>> eps;              // (src, dst)
  std::vector<std::array<int32_t, 4>> edges;                 // (src, lo, hi, dst)
  std::vector<std::array<int32_t, 3>> calls;                 // (src, callee, dst)
  std::map<std::pair<int32_t, int32_t>, int32_t> shared;     // (rule, end state) -> start
  std::vector<char> inlining;                                // per rule id: being inlined now
  std::vector<ByteSeq> seqs;
  std::unordered_map<uint64_t, int32_t> tails;  // (target, lo, hi) -> the state reading it (range())

  Builder(const Expr& e_, bool b, int64_t m, int64_t u) : e(e_), bytes(b), max_states(m), used(u) {}

  int32_t add() {
    if (used + n >= max_states) throw LimitHit{0, used + n + 1};
    return static_cast<int32_t>(n++);
  }
  void ep(int32_t a, int32_t b) { eps.emplace_back(a, b); }
  void edge(int32_t a, int32_t lo, int32_t hi, int32_t b) { edges.push_back({a, lo, hi, b}); }

  const int32_t* node(int32_t i) const {
    if (i < 0 || i >= e.n_nodes) throw BadInput("node index out of range");
    return e.nodes + 4 * static_cast<int64_t>(i);
  }
  const int32_t* span(int64_t a, int64_t len) const {
    if (a < 0 || len < 0 || a + len > e.n_data) throw BadInput("data span out of range");
    return e.data + a;
  }

  // a code-point range [lo, hi] from a to b: one edge, or (bytes) its UTF-8 sequences
  void range(int32_t a, int32_t lo, int32_t hi, int32_t b) {
    if (!bytes) {
      edge(a, lo, hi, b);
      return;
    }
    if (hi < 0x80) {  // ASCII: one byte range, the one sequence utf8_sequences would give
      if (std::max(lo, 0) <= hi) edge(a, std::max(lo, 0), hi, b);
      return;
    }
    seqs.clear();
    utf8_sequences(lo, hi, seqs);
    for (const ByteSeq& s : seqs) {  // (nothing below calls range again)
      // built from the end: the state that reads the rest of a sequence into its target is
      // shared by every sequence (and every range) with that same rest and target. Separate
      // copies per lead byte and per occurrence of a character class made as many DFA states
      // "one continuation byte to go", one per NFA copy, merged again only by minimisation.
      int32_t cur = b;
      for (size_t i = s.size() - 1; i > 0; --i) {
        const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(cur)) << 16) |
                             static_cast<uint64_t>(s[i].first << 8 | s[i].second);  // bytes: 8 bits each
        auto it = tails.find(key);
        if (it == tails.end()) {
          const int32_t x = add();
          edge(x, s[i].first, s[i].second, cur);
          it = tails.emplace(key, x).first;
        }
        cur = it->second;
      }
      edge(a, s[0].first, s[0].second, cur);
    }
  }

  void build(int32_t id, int32_t a, int32_t b) {
    const int32_t* x = node(id);
    const int32_t kind = x[0], A = x[1], B = x[2], C = x[3];
    switch (kind) {
      case LIT: {
        const int32_t* cps = span(A, B);
        if (B == 0) {
          ep(a, b);
          break;
        }
        if (bytes) {
          int64_t total = 0;  // bytes of the literal: the last one ends in b
          for (int32_t i = 0; i < B; ++i) {
            if (cps[i] < 0 || cps[i] > MAX_CP || (cps[i] >= 0xD800 && cps[i] <= 0xDFFF))
              throw BadInput("a literal holds a code point without a UTF-8 encoding (a lone surrogate)");
            total += cps[i] < 0x80 ? 1 : cps[i] < 0x800 ? 2 : cps[i] < 0x10000 ? 3 : 4;
          }
          int32_t cur = a;
          int64_t done = 0;
          uint8_t tmp[4];
          for (int32_t i = 0; i < B; ++i) {
            const int k = utf8_encode(cps[i], tmp);
            for (int j = 0; j < k; ++j) {
              const int32_t nxt = ++done == total ? b : add();
              edge(cur, tmp[j], tmp[j], nxt);
              cur = nxt;
            }
          }
        } else {
          int32_t cur = a;
          for (int32_t i = 0; i < B; ++i) {
            const int32_t nxt = i + 1 == B ? b : add();
            edge(cur, cps[i], cps[i], nxt);
            cur = nxt;
          }
        }
        break;
      }
      case SET: {
        const int32_t* r = span(A, 2 * int64_t{B});
        for (int32_t i = 0; i < B; ++i) range(a, r[2 * i], r[2 * i + 1], b);
        break;
      }
      case SEQ: {
        const int32_t* items = span(A, B);
        if (B == 0) {
          ep(a, b);
          break;
        }
        int32_t cur = a;
        for (int32_t i = 0; i < B; ++i) {
          const int32_t nxt = i + 1 == B ? b : add();
          build(items[i], cur, nxt);
          cur = nxt;
        }
        break;
      }
      case ALT: {
        const int32_t* opts = span(A, B);
        for (int32_t i = 0; i < B; ++i) {
          if (bytes) {
            const int32_t s = add(), t = add();
            ep(a, s);
            ep(t, b);
            build(opts[i], s, t);
          } else {
            build(opts[i], a, b);
          }
        }
        break;
      }
      case REP: {
        if (B < 0 || (C >= 0 && C < B)) throw BadInput("bad repeat bounds");
        int32_t cur = a;
        for (int32_t i = 0; i < B; ++i) {
          const int32_t nxt = add();
          build(A, cur, nxt);
          cur = nxt;
        }
        if (C < 0) {
          if (bytes) {
            const int32_t s = add(), t = add();
            ep(cur, s);
            ep(cur, b);
            ep(t, s);
            ep(t, b);
            build(A, s, t);
          } else {
            const int32_t loop = add();
            ep(cur, loop);
            build(A, loop, loop);
            ep(loop, b);
          }
        } else {
          // nested optionals: item (item (item)?)? -- linear in max - min
          for (int32_t i = 0; i < C - B; ++i) {
            ep(cur, b);
            const int32_t nxt = add();
            build(A, cur, nxt);
            cur = nxt;
          }
          ep(cur, b);
        }
        break;
      }
      case CALL:
        if (!bytes) throw BadInput("a rule call in a regular expression");
        calls.push_back({a, A, b});
        break;
      case INLINE: {
        if (!bytes) throw BadInput("a rule reference in a regular expression");
        if (A < 0) throw BadInput("bad rule id");
        // A rule fragment only exits through its end state, so every reference to the same
        // rule ending in the same state shares one copy (keeps "suffix" rules, as in objects
        // with many optional members, linear).
        auto it = shared.find({A, b});
        int32_t start;
        if (it == shared.end()) {
          if (static_cast<size_t>(A) >= inlining.size()) inlining.resize(A + 1, 0);
          if (inlining[A]) throw BadInput("recursive inlining of a rule");
          start = add();
          shared.emplace(std::make_pair(A, b), start);
          inlining[A] = 1;
          build(B, start, b);
          inlining[A] = 0;
        } else {
          start = it->second;
        }
        ep(a, start);
        break;
      }
      case GRAPH:
      case EGRAPH: {
        const int32_t* d = span(A, B);
        int64_t k = 0;
        auto next = [&]() -> int32_t {
          if (k >= B) throw BadInput("truncated automaton");
          return d[k++];
        };
        const int32_t ns = next();
        if (ns <= 0) throw BadInput("an automaton needs a start state");
        std::vector<int32_t> states(ns);
        for (int32_t i = 0; i < ns; ++i) states[i] = add();
        std::vector<char> fin(ns);
        for (int32_t i = 0; i < ns; ++i) fin[i] = next() != 0;
        ep(a, states[0]);
        for (int32_t s = 0; s < ns; ++s) {
          if (fin[s]) ep(states[s], b);
          const int32_t cnt = next();
          for (int32_t j = 0; j < cnt; ++j) {
            if (kind == GRAPH) {
              const int32_t lo = next(), hi = next(), t = next();
              if (t < 0 || t >= ns) throw BadInput("automaton target out of range");
              if (!bytes || hi < 0x80) {
                edge(states[s], lo, hi, states[t]);  // ASCII: one byte
              } else {
                range(states[s], lo, hi, states[t]);
              }
            } else {
              const int32_t sub = next(), t = next();
              if (t < 0 || t >= ns) throw BadInput("automaton target out of range");
              build(sub, states[s], states[t]);
            }
          }
        }
        break;
      }
      case REGEX:
        build(A, a, b);
        break;
      case REF:
        throw BadInput("an unresolved rule reference");
      default:
        throw BadInput("unknown expression node kind");
    }
  }
};

template <class Edge, class Key>
void to_csr(int64_t n, const std::vector<Edge>& in, std::vector<int64_t>& off, std::vector<int32_t>& out, Key key,
            int width) {
  off.assign(n + 1, 0);
  for (const Edge& x : in) ++off[key(x) + 1];
  for (int64_t s = 0; s < n; ++s) off[s + 1] += off[s];
  out.resize(in.size() * width);
  std::vector<int64_t> fill(off.begin(), off.end() - 1);
  for (const Edge& x : in) {
    const int64_t at = fill[key(x)]++;
    for (int w = 0; w < width; ++w) out[at * width + w] = x[w + 1];
  }
}

}  // namespace

int64_t utf8_sequence_count(int32_t lo, int32_t hi) {
  thread_local std::vector<ByteSeq> seqs;
  seqs.clear();
  utf8_sequences(lo, hi, seqs);
  return static_cast<int64_t>(seqs.size());
}

NFA build_nfa(const Expr& e, int32_t root, bool bytes, int64_t max_states, int64_t used) {
  Builder b(e, bytes, max_states, used);
  const int32_t s = b.add(), t = b.add();
  b.build(root, s, t);
  NFA nfa;
  nfa.n = b.n;
  // epsilon edges as (src, dst) arrays; stable order per source
  {
    nfa.eps_off.assign(b.n + 1, 0);
    for (auto& x : b.eps) ++nfa.eps_off[x.first + 1];
    for (int64_t k = 0; k < b.n; ++k) nfa.eps_off[k + 1] += nfa.eps_off[k];
    nfa.eps.resize(b.eps.size());
    std::vector<int64_t> fill(nfa.eps_off.begin(), nfa.eps_off.end() - 1);
    for (auto& x : b.eps) nfa.eps[fill[x.first]++] = x.second;
  }
  to_csr(b.n, b.edges, nfa.edge_off, nfa.edges, [](const std::array<int32_t, 4>& x) { return x[0]; }, 3);
  to_csr(b.n, b.calls, nfa.call_off, nfa.calls, [](const std::array<int32_t, 3>& x) { return x[0]; }, 2);
  return nfa;
}

// --------------------------------------------------------------------------- subset construction

DFA determinise(const NFA& nfa, int32_t start, int32_t end, int64_t max_states, int64_t used, bool bytes) {
  const int64_t n = nfa.n;
  if (start < 0 || start >= n) throw BadInput("start state out of range");
  SetTable order;  // DFA state -> its sorted NFA states (ids are the DFA's state numbers)
  SetTable seen_targets;  // target sets looked up before, with their DFA state in `closure_of`
  std::vector<int32_t> closure_of;
  std::vector<uint32_t> stamp(n, 0);
  uint32_t epoch = 0;
  std::vector<int32_t> work, set;
  // A DFA state keeps only the NFA states that matter to it: those with a byte edge or a
  // call, and the end state. Thompson NFAs are mostly epsilon-only states, and two closures
  // that differ only in them behave alike; keeping them made sets several times longer and
  // split such closures into distinct DFA states for minimisation to merge again.
  std::vector<uint8_t> kept(n, 0);
  for (int64_t s = 0; s < n; ++s)
    kept[s] = nfa.edge_off[s] < nfa.edge_off[s + 1] || nfa.call_off[s] < nfa.call_off[s + 1] || s == end;
  DFA d;
  // id of the epsilon closure of `targets` (sorted, unique), created when new
  auto intern = [&](const std::vector<int32_t>& targets, bool limited) -> int32_t {
    const int64_t nt = static_cast<int64_t>(targets.size());
    const uint64_t ht = SetTable::hash(targets.data(), nt);
    const int32_t seen = seen_targets.find(targets.data(), nt, ht);
    if (seen >= 0) return closure_of[seen];
    ++epoch;
    set.clear();
    work.assign(targets.begin(), targets.end());
    for (int32_t t : targets) stamp[t] = epoch;
    while (!work.empty()) {
      const int32_t s = work.back();
      work.pop_back();
      if (kept[s]) set.push_back(s);
      for (int64_t k = nfa.eps_off[s]; k < nfa.eps_off[s + 1]; ++k) {
        const int32_t t = nfa.eps[k];
        if (stamp[t] != epoch) {
          stamp[t] = epoch;
          work.push_back(t);
        }
      }
    }
    std::sort(set.begin(), set.end());
    const int64_t ns = static_cast<int64_t>(set.size());
    const uint64_t hs = SetTable::hash(set.data(), ns);
    int32_t id = order.find(set.data(), ns, hs);
    if (id < 0) {
      if (limited) {
        if (used + order.size() >= max_states) throw LimitHit{1, used + order.size()};
        d.need = std::max<int64_t>(d.need, order.size() + 1);
      }
      id = order.add(set.data(), ns, hs);
    }
    seen_targets.add(targets.data(), nt, ht);
    closure_of.push_back(id);
    return id;
  };
  intern(std::vector<int32_t>{start}, false);
  std::vector<int32_t> targets;
  std::vector<std::pair<int32_t, int32_t>> events, sorted_events;  // (lo, target) and (hi + 1, ~target)
  std::vector<int64_t> at_pos(258);  // bytes: events per position, then where each goes
  std::vector<std::pair<int32_t, int32_t>> calls;
  // the sweep's live targets: open edges per NFA state (an array, not a map: a map's node
  // per event made most of a small rule's construction time in malloc and free)
  std::vector<int32_t> open(n, 0);
  std::vector<int32_t> live;  // states whose count went above zero (stale ones dropped lazily)
  std::vector<int32_t> cur;
  for (int32_t i = 0; i < order.size(); ++i) {
    cur.assign(order.data(i), order.data(i) + order.length(i));  // a copy: `order` grows below
    // sweep the interval end points: the live targets between two consecutive points are
    // one elementary interval's targets
    events.clear();
    bool in_bytes = bytes;
    for (int32_t s : cur)
      for (int64_t k = nfa.edge_off[s]; k < nfa.edge_off[s + 1]; ++k) {
        const int32_t* x = &nfa.edges[3 * k];
        events.emplace_back(x[0], x[2]);
        events.emplace_back(x[1] + 1, ~x[2]);
        in_bytes = in_bytes && x[0] >= 0 && x[1] < 256;
      }
    if (!events.empty()) {
      if (in_bytes && events.size() > 256) {  // positions 0..256: a counting sort (a comparison sort of many was a tenth of the construction)
        std::fill(at_pos.begin(), at_pos.end(), 0);
        for (const auto& ev : events) ++at_pos[ev.first + 1];
        for (int p = 0; p < 257; ++p) at_pos[p + 1] += at_pos[p];
        sorted_events.resize(events.size());
        for (const auto& ev : events) sorted_events[at_pos[ev.first]++] = ev;
        events.swap(sorted_events);
      } else {
        std::sort(events.begin(), events.end(), [](auto a, auto b) { return a.first < b.first; });
      }
      live.clear();
      int64_t live_count = 0;
      size_t e = 0;
      while (e < events.size()) {
        const int32_t p = events[e].first;
        while (e < events.size() && events[e].first == p) {
          const int32_t t = events[e].second;
          if (t >= 0) {
            if (open[t]++ == 0) {
              live.push_back(t);
              ++live_count;
            }
          } else if (--open[~t] == 0) {
            --live_count;
          }
          ++e;
        }
        if (e == events.size() || live_count == 0) continue;
        const int32_t q = events[e].first;
        // drop the states closed since (a state reopened meanwhile is listed twice: once kept)
        size_t keep = 0;
        for (int32_t t : live)
          if (open[t] > 0) live[keep++] = t;
        live.resize(keep);
        std::sort(live.begin(), live.end());
        live.erase(std::unique(live.begin(), live.end()), live.end());
        targets.assign(live.begin(), live.end());
        const int32_t id = intern(targets, true);
        const size_t m = d.rows.size();
        if (!bytes && static_cast<int64_t>(m / 3) > d.row_off.back() && d.rows[m - 1] == id && d.rows[m - 2] == p - 1) {
          d.rows[m - 2] = q - 1;  // adjacent interval, same target: one row
        } else {
          push3(d.rows, p, q - 1, id);
        }
      }
    }
    d.row_off.push_back(static_cast<int64_t>(d.rows.size() / 3));
    calls.clear();
    for (int32_t s : cur)
      for (int64_t k = nfa.call_off[s]; k < nfa.call_off[s + 1]; ++k) calls.emplace_back(nfa.calls[2 * k], nfa.calls[2 * k + 1]);
    std::sort(calls.begin(), calls.end());
    size_t c = 0;
    while (c < calls.size()) {
      const int32_t callee = calls[c].first;
      targets.clear();
      while (c < calls.size() && calls[c].first == callee) {
        if (targets.empty() || targets.back() != calls[c].second) targets.push_back(calls[c].second);
        ++c;
      }
      const int32_t id = intern(targets, false);
      d.calls.push_back(callee);
      d.calls.push_back(id);
    }
    d.call_off.push_back(static_cast<int64_t>(d.calls.size() / 2));
  }
  d.final.resize(order.size());
  for (int32_t i = 0; i < order.size(); ++i)
    d.final[i] = std::binary_search(order.data(i), order.data(i) + order.length(i), end);
  return d;
}

// --------------------------------------------------------------------------- product

DFA product(const DFA& a, const DFA& b, bool keep_b_final, int64_t max_states) {
  std::unordered_map<int64_t, int32_t> ids;
  std::vector<std::pair<int32_t, int32_t>> order{{0, 0}};
  // b's dead state -1 is stored as 0, so the start pair's key is key(0, 0), not 0 (0 is the
  // pair (0, dead): taking it for the start sent "a's start, b dead" back to the start)
  auto key = [](int32_t x, int32_t y) { return (static_cast<int64_t>(x) << 32) | static_cast<uint32_t>(y + 1); };
  ids.emplace(key(0, 0), 0);
  DFA d;
  std::vector<std::array<int32_t, 3>> pieces;
  for (size_t i = 0; i < order.size(); ++i) {
    const auto [sa, sb] = order[i];
    for (int64_t ka = a.row_off[sa]; ka < a.row_off[sa + 1]; ++ka) {
      const int32_t lo = a.rows[3 * ka], hi = a.rows[3 * ka + 1], na = a.rows[3 * ka + 2];
      // split [lo, hi] by b's intervals; uncovered parts send b to the dead state -1
      pieces.clear();
      int64_t pos = lo;
      if (sb >= 0) {
        for (int64_t kb = b.row_off[sb]; kb < b.row_off[sb + 1]; ++kb) {
          const int32_t blo = b.rows[3 * kb], bhi = b.rows[3 * kb + 1], nb = b.rows[3 * kb + 2];
          if (bhi < pos || blo > hi) continue;
          if (blo > pos) pieces.push_back({static_cast<int32_t>(pos), blo - 1, -1});
          pieces.push_back({static_cast<int32_t>(std::max<int64_t>(blo, pos)), std::min(bhi, hi), nb});
          pos = static_cast<int64_t>(std::min(bhi, hi)) + 1;
          if (pos > hi) break;
        }
      }
      if (pos <= hi) pieces.push_back({static_cast<int32_t>(pos), hi, -1});
      for (auto& pc : pieces) {
        if (pc[2] < 0 && keep_b_final) continue;  // intersection: b must keep up
        const int64_t k = key(na, pc[2]);
        auto it = ids.find(k);
        int32_t id;
        if (it == ids.end()) {
          if (static_cast<int64_t>(order.size()) >= max_states) throw LimitHit{1, static_cast<int64_t>(order.size())};
          id = static_cast<int32_t>(order.size());
          ids.emplace(k, id);
          order.emplace_back(na, pc[2]);
        } else {
          id = it->second;
        }
        push3(d.rows, pc[0], pc[1], id);
      }
    }
    d.row_off.push_back(static_cast<int64_t>(d.rows.size() / 3));
    d.call_off.push_back(0);
  }
  d.final.resize(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const auto [x, y] = order[i];
    const bool bf = y >= 0 && b.final[y];
    d.final[i] = a.final[x] && (keep_b_final ? bf : !bf);
  }
  return d;
}

// --------------------------------------------------------------------------- Hopcroft

std::vector<int32_t> hopcroft(const DFA& dfa, int32_t* nblocks) {
  const int64_t n = dfa.size();
  // letters: the elementary intervals of all rows, then one per callee. A row is kept whole
  // as its range of letters (lo, hi), not listed letter by letter: a state inside a string
  // reads most of the alphabet into itself in a few rows, which spelled out per letter were
  // most of the transitions (part of a Kubernetes object rule: 324 states, 70 letters,
  // 19,000 letter transitions from about 2,000 rows).
  std::vector<int32_t> points;
  // over bytes (every end point <= 256) the points are marked in a table, which then gives
  // each row's first letter directly (sorting the end points and a binary search per row
  // were a third of minimising a small rule)
  bool small = true;
  for (size_t k = 0; k < dfa.rows.size() && small; k += 3) small = dfa.rows[k] >= 0 && dfa.rows[k + 1] < 256;
  std::vector<int32_t> letter_at;  // small: end point -> its letter
  if (small) {
    letter_at.assign(257, -1);
    for (size_t k = 0; k < dfa.rows.size(); k += 3) {
      letter_at[dfa.rows[k]] = 0;
      letter_at[dfa.rows[k + 1] + 1] = 0;
    }
    for (int32_t v = 0; v <= 256; ++v)
      if (letter_at[v] == 0) {
        letter_at[v] = static_cast<int32_t>(points.size());
        points.push_back(v);
      }
  } else {
    points.reserve(dfa.rows.size() / 3 * 2);
    for (size_t k = 0; k < dfa.rows.size(); k += 3) {
      points.push_back(dfa.rows[k]);
      points.push_back(dfa.rows[k + 1] + 1);
    }
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());
  }
  // the letter starting at end point v (v is one: every row's lo and hi + 1 are)
  auto letter_of = [&](int64_t v) -> int32_t {
    return small ? letter_at[v]
                 : static_cast<int32_t>(std::lower_bound(points.begin(), points.end(), v) - points.begin());
  };
  const int32_t byte_letters = points.empty() ? 0 : static_cast<int32_t>(points.size()) - 1;
  std::vector<int32_t> callees;
  for (size_t k = 0; k < dfa.calls.size(); k += 2) callees.push_back(dfa.calls[k]);
  std::sort(callees.begin(), callees.end());
  callees.erase(std::unique(callees.begin(), callees.end()), callees.end());
  const int32_t L = byte_letters + static_cast<int32_t>(callees.size());
  auto callee_letter = [&](int32_t c) {
    return static_cast<int32_t>(byte_letters + (std::lower_bound(callees.begin(), callees.end(), c) - callees.begin()));
  };
  // incoming transitions per state as letter ranges [lo, hi] with their source (a call: one
  // letter): a splitter's predecessors are gathered from its states' lists
  struct In {
    int32_t lo, hi, src;
  };
  std::vector<int64_t> in_off(n + 1, 0);
  auto each = [&](auto&& visit) {  // visit(lo letter, hi letter, source, target) per row and call
    for (int64_t s = 0; s < n; ++s) {
      for (int64_t k = dfa.row_off[s]; k < dfa.row_off[s + 1]; ++k) {
        const int32_t* r = &dfa.rows[3 * k];
        visit(letter_of(r[0]), letter_of(static_cast<int64_t>(r[1]) + 1) - 1, static_cast<int32_t>(s), r[2]);
      }
      for (int64_t k = dfa.call_off[s]; k < dfa.call_off[s + 1]; ++k) {
        const int32_t c = callee_letter(dfa.calls[2 * k]);
        visit(c, c, static_cast<int32_t>(s), dfa.calls[2 * k + 1]);
      }
    }
  };
  each([&](int32_t, int32_t, int32_t, int32_t t) { ++in_off[t + 1]; });
  for (int64_t t = 0; t < n; ++t) in_off[t + 1] += in_off[t];
  std::vector<In> incoming(static_cast<size_t>(in_off[n]));
  {
    std::vector<int64_t> fill(in_off.begin(), in_off.end() - 1);
    each([&](int32_t lo, int32_t hi, int32_t src, int32_t t) { incoming[fill[t]++] = {lo, hi, src}; });
  }
  // the refinable partition: elems grouped by block, [first, end) per block; marked states
  // of a block are moved to [first, mid)
  std::vector<int32_t> elems(n), loc(n), blk(n);
  std::vector<int64_t> first, bend, mid;
  std::vector<char> in_work;
  std::vector<int32_t> work;
  {
    int64_t pos = 0;
    for (int pass = 0; pass < 2; ++pass) {  // non-final, final
      const int64_t begin = pos;
      for (int64_t s = 0; s < n; ++s) {
        if ((dfa.final[s] ? 1 : 0) == pass) {
          elems[pos] = static_cast<int32_t>(s);
          loc[s] = static_cast<int32_t>(pos);
          blk[s] = static_cast<int32_t>(first.size());
          ++pos;
        }
      }
      if (pos > begin) {
        first.push_back(begin);
        bend.push_back(pos);
        mid.push_back(begin);
        in_work.push_back(1);
        // every initial block splits: with a partial transition function, splitting by a
        // block is not the same as splitting by the others (a state may have no transition)
        work.push_back(static_cast<int32_t>(first.size() - 1));
      }
    }
  }
  // A splitter's incoming ranges cut the letters into pieces at their end points: over one
  // piece every source either enters the splitter on all its letters or on none (a state's
  // rows are disjoint, and each row into the splitter starts and ends at a cut), so splitting
  // by the piece's sources is splitting by each of its letters. The sources are bucketed by
  // piece in one flat array (counted, then placed).
  std::vector<int32_t> touched, cuts, by_piece;
  std::vector<int32_t> piece_at(static_cast<size_t>(L) + 1, 0);  // cut -> its piece (this splitter's cuts only)
  std::vector<char> is_cut(static_cast<size_t>(L) + 1, 0);
  std::vector<int64_t> per_piece, at;
  std::vector<In> entries;
  // split block b by its states marked at [first[b], mid[b]) (moved there by mark())
  auto split = [&](int32_t b) {
    if (mid[b] == bend[b]) {  // every state marked: no split
      mid[b] = first[b];
      return;
    }
    // the smaller part becomes the new block, whose states are relabelled: relabelling
    // the marked part always cost a block of thousands of states peeled one state at a
    // time (a large rule whose states are nearly all distinct) quadratic time
    const auto nb = static_cast<int32_t>(first.size());
    const int64_t marked = mid[b] - first[b], rest = bend[b] - mid[b];
    if (marked <= rest) {
      first.push_back(first[b]);
      bend.push_back(mid[b]);
      first[b] = mid[b];
    } else {
      first.push_back(mid[b]);
      bend.push_back(bend[b]);
      bend[b] = mid[b];
    }
    mid.push_back(first[nb]);
    mid[b] = first[b];
    in_work.push_back(0);
    for (int64_t k = first[nb]; k < bend[nb]; ++k) blk[elems[k]] = nb;
    // (b on the worklist: both parts must be; else the smaller one is enough)
    work.push_back(nb);
    in_work[nb] = 1;
  };
  // moves state s to the marked part of its block; true where it is the block's first mark
  auto mark = [&](int32_t s) {
    const int32_t b = blk[s];
    const bool fresh = mid[b] == first[b];
    const int64_t to = mid[b]++;
    const int32_t other = elems[to];
    const int32_t from = loc[s];
    elems[to] = s;
    loc[s] = static_cast<int32_t>(to);
    elems[from] = other;
    loc[other] = from;
    return fresh;
  };
  while (!work.empty()) {
    const int32_t A = work.back();
    work.pop_back();
    in_work[A] = 0;
    entries.clear();
    cuts.clear();
    bool one_source = true;
    for (int64_t k = first[A]; k < bend[A]; ++k) {
      const int32_t t = elems[k];
      for (int64_t j = in_off[t]; j < in_off[t + 1]; ++j) {
        const In& e = incoming[j];
        one_source = one_source && (entries.empty() || e.src == entries[0].src);
        entries.push_back(e);
        cuts.push_back(e.lo);
        cuts.push_back(e.hi + 1);
      }
    }
    if (entries.empty()) continue;
    // One source state (most splitters of a rule whose states form chains, such as its
    // member names' letters): every piece's sources are that state, so the split by each
    // letter is the split of its block by that one state.
    if (one_source) {
      const int32_t s = entries[0].src;
      mark(s);
      split(blk[s]);
      continue;
    }
    if (cuts.size() * 4 >= static_cast<size_t>(L)) {  // many: marked, then read in order
      for (int32_t c : cuts) is_cut[static_cast<size_t>(c)] = 1;
      cuts.clear();
      for (int32_t c = 0; c <= L; ++c)
        if (is_cut[static_cast<size_t>(c)]) {
          is_cut[static_cast<size_t>(c)] = 0;
          cuts.push_back(c);
        }
    } else {
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    }
    const size_t pieces = cuts.size() - 1;
    for (size_t i = 0; i < cuts.size(); ++i) piece_at[static_cast<size_t>(cuts[i])] = static_cast<int32_t>(i);
    per_piece.assign(pieces + 1, 0);
    for (const In& e : entries)
      for (int32_t p = piece_at[e.lo], z = piece_at[e.hi + 1]; p < z; ++p) ++per_piece[p + 1];
    for (size_t p = 0; p < pieces; ++p) per_piece[p + 1] += per_piece[p];
    at.assign(per_piece.begin(), per_piece.end() - 1);
    by_piece.resize(static_cast<size_t>(per_piece[pieces]));
    for (const In& e : entries)
      for (int32_t p = piece_at[e.lo], z = piece_at[e.hi + 1]; p < z; ++p) by_piece[at[p]++] = e.src;
    for (size_t p = 0; p < pieces; ++p) {
      touched.clear();
      for (int64_t q = per_piece[p]; q < per_piece[p + 1]; ++q) {
        const int32_t s = by_piece[q];
        if (mark(s)) touched.push_back(blk[s]);
      }
      for (int32_t b : touched) split(b);
    }
  }
  std::vector<int32_t> rank(first.size(), -1), out(n);
  int32_t count = 0;
  for (int64_t s = 0; s < n; ++s) {
    int32_t& r = rank[blk[s]];
    if (r < 0) r = count++;
    out[s] = r;
  }
  *nblocks = count;
  return out;
}

DFA minimise_rows(const DFA& d) {
  int32_t nb = 0;
  const std::vector<int32_t> cls = hopcroft(d, &nb);
  std::vector<int64_t> rep(nb, -1);
  for (int64_t s = 0; s < d.size(); ++s)
    if (rep[cls[s]] < 0) rep[cls[s]] = s;
  DFA out;
  out.final.resize(nb);
  for (int32_t c = 0; c < nb; ++c) {
    const int64_t s = rep[c];
    out.final[c] = d.final[s];
    const size_t row_start = out.rows.size();
    for (int64_t k = d.row_off[s]; k < d.row_off[s + 1]; ++k) {
      const int32_t lo = d.rows[3 * k], hi = d.rows[3 * k + 1], tc = cls[d.rows[3 * k + 2]];
      const size_t m = out.rows.size();
      if (m > row_start && out.rows[m - 1] == tc && out.rows[m - 2] == lo - 1) {
        out.rows[m - 2] = hi;
      } else {
        push3(out.rows, lo, hi, tc);
      }
    }
    out.row_off.push_back(static_cast<int64_t>(out.rows.size() / 3));
    for (int64_t k = d.call_off[s]; k < d.call_off[s + 1]; ++k) {
      out.calls.push_back(d.calls[2 * k]);
      out.calls.push_back(cls[d.calls[2 * k + 1]]);
    }
    out.call_off.push_back(static_cast<int64_t>(out.calls.size() / 2));
  }
  return out;
}

}  // namespace fa
