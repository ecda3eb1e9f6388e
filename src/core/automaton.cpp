// structgen._core, automata bindings: Thompson construction + subset construction of rule and
// regular-expression automata, products and Hopcroft minimisation (the algorithms are in fa.cpp,
// over interval alphabets, shared by the byte-level rule DFAs and the code-point algebra).
//
// Why native: the per-node and per-configuration Python work of these stages was most of a
// schema's compile time. An expression is serialized once into flat arrays
// (src/core/expr_plan.cpp); the automaton is grown here, with the GIL released and every size
// limit checked while it grows.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "fa.hpp"
#include "pool.hpp"

namespace py = pybind11;

namespace {

using i32 = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using i64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using b8 = py::array_t<bool, py::array::c_style | py::array::forcecast>;


// Every entry of a (n, 256) table is -1 or a state (a test and throw per entry was a tenth of
// building a large schema's rules).
void check_targets(const int32_t* T, int64_t n) {
  if (!fa::targets_in_range(T, n * 256, static_cast<int32_t>(n))) throw std::invalid_argument("transition target out of range");
}


// ---------------------------------------------------------------------------- conversions

fa::DFA rows_in(const i64& row_off, const i32& rows, const b8& final_) {
  const int64_t n = final_.shape(0);
  if (row_off.shape(0) != n + 1) throw std::invalid_argument("row_off must have n + 1 entries");
  if (rows.size() && (rows.ndim() != 2 || rows.shape(1) != 3)) throw std::invalid_argument("rows must be (m, 3)");
  const int64_t m = rows.size() ? rows.shape(0) : 0;
  fa::DFA d;
  d.row_off.assign(row_off.data(), row_off.data() + n + 1);
  if (d.row_off[0] != 0 || d.row_off[n] != m) throw std::invalid_argument("row offsets do not match the rows");
  for (int64_t s = 0; s < n; ++s)
    if (d.row_off[s] > d.row_off[s + 1]) throw std::invalid_argument("offsets must not decrease");
  d.rows.assign(rows.data(), rows.data() + 3 * m);
  for (int64_t k = 0; k < m; ++k)
    if (d.rows[3 * k + 2] < 0 || d.rows[3 * k + 2] >= n || d.rows[3 * k] > d.rows[3 * k + 1])
      throw std::invalid_argument("bad row");
  d.final.assign(final_.data(), final_.data() + n);
  d.call_off.assign(n + 1, 0);
  return d;
}

py::tuple rows_out(const fa::DFA& d) {
  const auto n = static_cast<py::ssize_t>(d.final.size());
  py::array_t<int64_t> ro(n + 1);
  std::copy(d.row_off.begin(), d.row_off.end(), ro.mutable_data());
  py::array_t<int32_t> r({static_cast<py::ssize_t>(d.rows.size() / 3), static_cast<py::ssize_t>(3)});
  std::copy(d.rows.begin(), d.rows.end(), r.mutable_data());
  py::array_t<bool> f(n);
  std::copy(d.final.begin(), d.final.end(), f.mutable_data());
  return py::make_tuple(ro, r, f);
}

// The DFA of node `root` through its NFA (fa::LimitHit or fa::BadInput past a limit or on bad
// nodes); `nfa_states` gets the NFA's size. Called without the GIL.
fa::DFA expr_dfa(const fa::Expr& e, int32_t root, bool bytes, int64_t max_nfa, int64_t nfa_used, int64_t max_dfa,
                 int64_t dfa_used, int64_t& nfa_states) {
  const fa::NFA nfa = fa::build_nfa(e, root, bytes, max_nfa, nfa_used);
  nfa_states = nfa.n;
  return fa::determinise(nfa, 0, 1, max_dfa, dfa_used, bytes);
}

// The DFA of a serialized expression (see fa.hpp for the node layout). bytes: code points lowered
// to UTF-8, rule calls kept as call edges; returns (trans (N, 256) int32, final, call_off,
// call_edge (K, 2), nfa_states). Otherwise code points: (row_off, rows (M, 3), final,
// nfa_states). A limit reached while the automaton grows returns (kind, reached): kind 0 for
// NFA states (max_nfa, nfa_used built before), 1 for DFA states (max_dfa, dfa_used before).
py::tuple build_dfa(const i32& nodes, const i32& data, int32_t root, bool bytes, int64_t max_nfa, int64_t nfa_used,
                    int64_t max_dfa, int64_t dfa_used) {
  if (nodes.ndim() != 2 || nodes.shape(1) != 4) throw std::invalid_argument("nodes must be (n, 4)");
  const fa::Expr e{nodes.data(), nodes.shape(0), data.data(), static_cast<int64_t>(data.size())};
  fa::DFA d;
  int64_t nfa_states = 0;
  try {
    py::gil_scoped_release release;
    d = expr_dfa(e, root, bytes, max_nfa, nfa_used, max_dfa, dfa_used, nfa_states);
  } catch (const fa::LimitHit& hit) {
    return py::make_tuple(hit.kind, hit.reached);
  } catch (const fa::BadInput& err) {
    throw std::invalid_argument(err.what());
  }
  if (!bytes) {
    py::tuple r = rows_out(d);
    return py::make_tuple(r[0], r[1], r[2], nfa_states);
  }
  const auto N = static_cast<py::ssize_t>(d.final.size());
  py::array_t<int32_t> t({N, static_cast<py::ssize_t>(256)});
  int32_t* T = t.mutable_data();
  std::fill(T, T + N * 256, -1);
  for (py::ssize_t s = 0; s < N; ++s)
    for (int64_t k = d.row_off[s]; k < d.row_off[s + 1]; ++k)
      std::fill(T + s * 256 + d.rows[3 * k], T + s * 256 + d.rows[3 * k + 1] + 1, d.rows[3 * k + 2]);
  py::array_t<bool> f(N);
  std::copy(d.final.begin(), d.final.end(), f.mutable_data());
  py::array_t<int64_t> co(N + 1);
  std::copy(d.call_off.begin(), d.call_off.end(), co.mutable_data());
  py::array_t<int32_t> ce({static_cast<py::ssize_t>(d.calls.size() / 2), static_cast<py::ssize_t>(2)});
  std::copy(d.calls.begin(), d.calls.end(), ce.mutable_data());
  return py::make_tuple(t, f, co, ce, nfa_states);
}

// Product of two code-point DFAs (row form): intersection (keep_b_final) or difference.
// Returns (row_off, rows, final), or (reached,) past max_states.
py::tuple product(const i64& a_off, const i32& a_rows, const b8& a_final, const i64& b_off, const i32& b_rows,
                  const b8& b_final, bool keep_b_final, int64_t max_states) {
  const fa::DFA a = rows_in(a_off, a_rows, a_final), b = rows_in(b_off, b_rows, b_final);
  if (a.size() == 0 || b.size() == 0) throw std::invalid_argument("empty automaton");
  fa::DFA d;
  try {
    py::gil_scoped_release release;
    d = fa::product(a, b, keep_b_final, max_states);
  } catch (const fa::LimitHit& hit) {
    return py::make_tuple(hit.reached);
  }
  return rows_out(d);
}

// The minimal DFA of a code-point DFA (row form): Hopcroft; classes numbered by first
// appearance over the states, the start state's class is 0; a missing transition is not the
// same as one into a dead state (trimming is the caller's).
py::tuple minimise_rows(const i64& row_off, const i32& rows, const b8& final_) {
  const fa::DFA d = rows_in(row_off, rows, final_);
  fa::DFA out;
  {
    py::gil_scoped_release release;
    out = fa::minimise_rows(d);
  }
  return rows_out(out);
}


// ---------------------------------------------------------------------------- trimming

struct ByteDFA {
  int64_t n;
  const int32_t* T;
  const bool* F;
  const int64_t* CO;
  const int32_t* CE;
};

ByteDFA byte_dfa_in(const i32& trans, const b8& final_, const i64& call_off, const i32& call_edge) {
  if (trans.ndim() != 2 || trans.shape(1) != 256) throw std::invalid_argument("trans must be (n, 256)");
  const int64_t n = trans.shape(0);
  if (final_.shape(0) != n || call_off.shape(0) != n + 1) throw std::invalid_argument("final/call_off size mismatch");
  ByteDFA d{n, trans.data(), final_.data(), call_off.data(), call_edge.data()};
  if (d.CO[0] != 0 || d.CO[n] != (call_edge.size() ? call_edge.shape(0) : 0)) throw std::invalid_argument("bad call offsets");
  check_targets(d.T, n);
  for (int64_t k = 0; k < d.CO[n]; ++k)
    if (d.CE[2 * k + 1] < 0 || d.CE[2 * k + 1] >= n) throw std::invalid_argument("call target out of range");
  return d;
}

// A byte table as interval rows (runs of one target; -1 is no row), calls as they are.
fa::DFA byte_rows(const ByteDFA& d) {
  fa::DFA r;
  r.rows.reserve(static_cast<size_t>(d.n) * 6);
  for (int64_t s = 0; s < d.n; ++s) {
    const int32_t* row = d.T + s * 256;
    for (int b = 0; b < 256;) {
      int e = b;
      while (e + 1 < 256 && row[e + 1] == row[b]) ++e;
      if (row[b] >= 0) fa::push3(r.rows, b, e, row[b]);
      b = e + 1;
    }
    r.row_off.push_back(static_cast<int64_t>(r.rows.size() / 3));
    r.final.push_back(d.F[s]);
  }
  r.call_off.assign(d.CO, d.CO + d.n + 1);
  r.calls.assign(d.CE, d.CE + 2 * d.CO[d.n]);
  return r;
}

// Hopcroft minimisation of a trimmed byte DFA: trans (n, 256) int32 (-1: rejected), final bool[n],
// calls as CSR (call_off[n + 1], call_edge (k, 2): (callee, target)). Calls are letters like
// bytes; -1 and a missing call are no transition (for a trimmed DFA, language equivalence). Returns (block
// per state, numbered by first appearance from state 0, number of blocks).
py::tuple minimise(const i32& trans, const b8& final_, const i64& call_off, const i32& call_edge) {
  const ByteDFA in = byte_dfa_in(trans, final_, call_off, call_edge);
  std::vector<int32_t> blocks;
  int32_t count = 0;
  {
    py::gil_scoped_release release;
    blocks = fa::hopcroft(byte_rows(in), &count);
  }
  py::array_t<int64_t> out(static_cast<py::ssize_t>(in.n));
  std::copy(blocks.begin(), blocks.end(), out.mutable_data());
  return py::make_tuple(out, static_cast<int64_t>(count));
}

// States from which a final state is reachable by bytes and calls into productive rules.
std::vector<char> coaccessible_states(const fa::DFA& d, const bool* productive, int64_t n_rules) {
  const int64_t n = d.size();
  // predecessor lists, CSR by target
  std::vector<int64_t> off(n + 1, 0);
  auto ok_call = [&](int64_t k) {
    const int32_t c = d.calls[2 * k];
    return c >= 0 && c < n_rules && productive[c];
  };
  for (size_t k = 0; k < d.rows.size(); k += 3) ++off[d.rows[k + 2] + 1];
  for (size_t k = 0; k < d.calls.size() / 2; ++k)
    if (ok_call(static_cast<int64_t>(k))) ++off[d.calls[2 * k + 1] + 1];
  for (int64_t t = 0; t < n; ++t) off[t + 1] += off[t];
  std::vector<int32_t> src(off[n]);
  std::vector<int64_t> fill(off.begin(), off.end() - 1);
  for (int64_t s = 0; s < n; ++s) {
    for (int64_t k = d.row_off[s]; k < d.row_off[s + 1]; ++k) src[fill[d.rows[3 * k + 2]]++] = static_cast<int32_t>(s);
    for (int64_t k = d.call_off[s]; k < d.call_off[s + 1]; ++k)
      if (ok_call(k)) src[fill[d.calls[2 * k + 1]]++] = static_cast<int32_t>(s);
  }
  std::vector<char> seen(n, 0);
  std::vector<int32_t> stack;
  for (int64_t s = 0; s < n; ++s)
    if (d.final[s]) {
      seen[s] = 1;
      stack.push_back(static_cast<int32_t>(s));
    }
  while (!stack.empty()) {
    const int32_t t = stack.back();
    stack.pop_back();
    for (int64_t k = off[t]; k < off[t + 1]; ++k)
      if (!seen[src[k]]) {
        seen[src[k]] = 1;
        stack.push_back(src[k]);
      }
  }
  return seen;
}

// Drop the states of `d` that cannot reach a final state (calls only into productive rules),
// then those no longer reachable from the start, then merge equivalent states (Hopcroft).
// The start state stays 0; states are numbered by first appearance of their class.
fa::DFA trim_minimal(const fa::DFA& d, const bool* P, int64_t R) {
  const int64_t n = d.size();
  auto ok_callee = [&](int32_t c) { return c >= 0 && c < R && P[c]; };
  const std::vector<char> keep = coaccessible_states(d, P, R);
  bool dropped_call = false;
  for (int64_t s = 0; s < n && !dropped_call; ++s)
    if (keep[s])
      for (int64_t k = d.call_off[s]; k < d.call_off[s + 1]; ++k)
        if (!ok_callee(d.calls[2 * k])) dropped_call = true;
  std::vector<char> alive(keep.begin(), keep.end());
  // no path from the start to an end (bytes no token holds were cut from the only ones, as
  // a character no token can write): the language is empty. Numbering the kept states from
  // 0 made another state the start, whose suffix the masks then allowed.
  if (n > 0 && !keep[0]) std::fill(alive.begin(), alive.end(), 0);
  if (dropped_call) {
    // a state reached only through a call into a rule that matches nothing is unreachable
    // now; without such calls every kept state still is reachable
    std::fill(alive.begin(), alive.end(), 0);
    std::vector<int32_t> stack{0};
    alive[0] = 1;
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      if (!keep[s]) continue;
      for (int64_t k = d.row_off[s]; k < d.row_off[s + 1]; ++k) {
        const int32_t t = d.rows[3 * k + 2];
        if (keep[t] && !alive[t]) {
          alive[t] = 1;
          stack.push_back(t);
        }
      }
      for (int64_t k = d.call_off[s]; k < d.call_off[s + 1]; ++k) {
        const int32_t t = d.calls[2 * k + 1];
        if (ok_callee(d.calls[2 * k]) && keep[t] && !alive[t]) {
          alive[t] = 1;
          stack.push_back(t);
        }
      }
    }
  }
  std::vector<int32_t> remap(n, -1), live;
  for (int64_t s = 0; s < n; ++s)
    if (alive[s]) {
      remap[s] = static_cast<int32_t>(live.size());
      live.push_back(static_cast<int32_t>(s));
    }
  fa::DFA t;  // the trimmed DFA; adjacent rows with one target joined (fewer letters below)
  for (int32_t s : live) {
    const size_t row_start = t.rows.size();
    for (int64_t k = d.row_off[s]; k < d.row_off[s + 1]; ++k) {
      const int32_t lo = d.rows[3 * k], hi = d.rows[3 * k + 1], x = d.rows[3 * k + 2];
      if (!keep[x] || remap[x] < 0) continue;
      const size_t m = t.rows.size();
      if (m > row_start && t.rows[m - 1] == remap[x] && t.rows[m - 2] == lo - 1) {
        t.rows[m - 2] = hi;
      } else {
        fa::push3(t.rows, lo, hi, remap[x]);
      }
    }
    t.row_off.push_back(static_cast<int64_t>(t.rows.size() / 3));
    t.final.push_back(d.final[s]);
    if (keep[s])
      for (int64_t k = d.call_off[s]; k < d.call_off[s + 1]; ++k) {
        const int32_t c = d.calls[2 * k], x = d.calls[2 * k + 1];
        if (ok_callee(c) && keep[x] && remap[x] >= 0) fa::push2(t.calls, c, remap[x]);
      }
    t.call_off.push_back(static_cast<int64_t>(t.calls.size() / 2));
  }
  int32_t nb = 0;
  const std::vector<int32_t> blocks = fa::hopcroft(t, &nb);
  // the minimal DFA: each block's first state stands for it
  std::vector<int32_t> rep(nb, -1);
  for (size_t s = 0; s < live.size(); ++s)
    if (rep[blocks[s]] < 0) rep[blocks[s]] = static_cast<int32_t>(s);
  fa::DFA m;
  for (int32_t b = 0; b < nb; ++b) {
    const int32_t s = rep[b];
    for (int64_t k = t.row_off[s]; k < t.row_off[s + 1]; ++k)
      fa::push3(m.rows, t.rows[3 * k], t.rows[3 * k + 1], blocks[t.rows[3 * k + 2]]);
    m.row_off.push_back(static_cast<int64_t>(m.rows.size() / 3));
    m.final.push_back(t.final[s]);
    for (int64_t k = t.call_off[s]; k < t.call_off[s + 1]; ++k)
      fa::push2(m.calls, t.calls[2 * k], blocks[t.calls[2 * k + 1]]);
    m.call_off.push_back(static_cast<int64_t>(m.calls.size() / 2));
  }
  return m;
}

// The (n, 256) byte table of a DFA in row form, -1 where rejected, into `out`.
void fill_byte_table(const fa::DFA& m, int32_t* out) {
  const int64_t n = m.size();
  std::fill(out, out + n * 256, -1);
  for (int64_t s = 0; s < n; ++s)
    for (int64_t k = m.row_off[s]; k < m.row_off[s + 1]; ++k)
      std::fill(out + s * 256 + m.rows[3 * k], out + s * 256 + m.rows[3 * k + 1] + 1, m.rows[3 * k + 2]);
}

// A byte DFA in row form as (trans (n, 256) int32, -1 where rejected; final; call_off; call_edge
// (k, 2)). `table`: its byte table filled already (fill_byte_table), which the array takes over;
// else it is filled here.
py::tuple byte_table_out(const fa::DFA& m, std::unique_ptr<int32_t[]> table = nullptr) {
  const auto N = static_cast<py::ssize_t>(m.size());
  py::array_t<int32_t> out_t;
  if (table) {
    int32_t* data = table.release();
    py::capsule owner(data, [](void* p) { delete[] static_cast<int32_t*>(p); });
    out_t = py::array_t<int32_t>({N, static_cast<py::ssize_t>(256)}, data, owner);
  } else {
    out_t = py::array_t<int32_t>({N, static_cast<py::ssize_t>(256)});
    fill_byte_table(m, out_t.mutable_data());
  }
  py::array_t<bool> f(N);
  std::copy(m.final.begin(), m.final.end(), f.mutable_data());
  py::array_t<int64_t> co(N + 1);
  std::copy(m.call_off.begin(), m.call_off.end(), co.mutable_data());
  py::array_t<int32_t> ce({static_cast<py::ssize_t>(m.calls.size() / 2), static_cast<py::ssize_t>(2)});
  std::copy(m.calls.begin(), m.calls.end(), ce.mutable_data());
  return py::make_tuple(out_t, f, co, ce);
}

// trim_minimal() of a byte DFA table. Returns (trans (m, 256), final, call_off, call_edge).
py::tuple trim_minimise(const i32& trans, const b8& final_, const i64& call_off, const i32& call_edge,
                        const b8& productive) {
  const ByteDFA d = byte_dfa_in(trans, final_, call_off, call_edge);
  fa::DFA m;
  {
    py::gil_scoped_release release;
    m = trim_minimal(byte_rows(d), productive.data(), productive.shape(0));
  }
  return byte_table_out(m);
}

// One rule's automaton built (RuleBuild): the DFA, its NFA's size, whether the start state
// reaches a final state by bytes alone, and the smallest DFA budget the build fits.
struct RuleBuild {
  fa::DFA m;
  int64_t nfa_states = 0, dfa_need = 0;
  bool alone = false;
  // the callees of one path from the start state to a final state with the fewest calls
  // (sorted, distinct; empty when `alone`), valid when `has_path`: the rule is productive
  // once they all are (the caller's productivity pass then needs no search)
  std::vector<int32_t> path_callees;
  bool has_path = false;
  // m's byte table, where the build filled it (build_rules' threads: a large schema's tables
  // are tens of MB, which the caller otherwise wrote alone, holding the GIL, after the loop)
  std::unique_ptr<int32_t[]> table;
};

// build_dfa() of node `root` (bytes, calls kept), bytes outside `alphabet` (bool[256]) removed,
// then trim_minimal() with every one of the `n_rules` callees taken as productive. Called
// without the GIL; throws fa::LimitHit past a limit, fa::BadInput on bad nodes.
RuleBuild build_rule_alone(const fa::Expr& e, int32_t root, int64_t max_nfa, int64_t nfa_used, int64_t max_dfa,
                           int64_t dfa_used, const bool* A, int64_t n_rules) {
  RuleBuild out;
  fa::DFA d = expr_dfa(e, root, true, max_nfa, nfa_used, max_dfa, dfa_used, out.nfa_states);
  out.dfa_need = d.need;
  // bytes no token contains: the alphabet's runs of allowed bytes, once; each row keeps its
  // overlaps with them (a test per byte of every row was most of this call's own time on
  // large rules)
  std::vector<std::pair<int32_t, int32_t>> runs;
  for (int32_t b = 0; b < 256;) {
    if (!A[b]) {
      ++b;
      continue;
    }
    int32_t end = b;
    while (end + 1 < 256 && A[end + 1]) ++end;
    runs.emplace_back(b, end);
    b = end + 1;
  }
  // missing[b]: bytes below b that no token holds; a row [lo, hi] holds none where
  // missing[hi + 1] == missing[lo]. Most rows do not (the bytes missing from a vocabulary are
  // a few invalid in UTF-8), and a DFA none of whose rows does is kept as it is.
  int32_t missing[257];
  missing[0] = 0;
  for (int b = 0; b < 256; ++b) missing[b + 1] = missing[b] + (A[b] ? 0 : 1);
  auto holds_missing = [&](int64_t k) { return missing[d.rows[3 * k + 1] + 1] != missing[d.rows[3 * k]]; };
  bool any_missing = false;
  for (int64_t k = 0; k < static_cast<int64_t>(d.rows.size() / 3) && !any_missing; ++k) any_missing = holds_missing(k);
  fa::DFA cut;
  if (!any_missing) {
    cut.rows = std::move(d.rows);
    cut.row_off = std::move(d.row_off);
  } else {
    cut.rows.reserve(d.rows.size());
    cut.row_off.reserve(d.row_off.size());
    for (int64_t s = 0; s < d.size(); ++s) {
      for (int64_t k = d.row_off[s]; k < d.row_off[s + 1]; ++k) {
        const int32_t lo = d.rows[3 * k], hi = d.rows[3 * k + 1], x = d.rows[3 * k + 2];
        if (!holds_missing(k)) {
          fa::push3(cut.rows, lo, hi, x);
          continue;
        }
        for (const auto& [a, z] : runs) {
          if (z < lo) continue;
          if (a > hi) break;
          fa::push3(cut.rows, std::max(a, lo), std::min(z, hi), x);
        }
      }
      cut.row_off.push_back(static_cast<int64_t>(cut.rows.size() / 3));
    }
  }
  cut.final = std::move(d.final);
  cut.call_off = std::move(d.call_off);
  cut.calls = std::move(d.calls);
  const int64_t R = std::max<int64_t>(n_rules, 0);
  std::unique_ptr<bool[]> productive(new bool[R + 1]);
  std::fill(productive.get(), productive.get() + R + 1, true);
  out.m = trim_minimal(cut, productive.get(), R);
  // A path from the start state to a final state with the fewest calls (a 0-1 breadth-first
  // search: a byte costs nothing, a call one): none, where one by bytes alone exists, makes
  // the rule productive whatever its callees are; otherwise its callees are the rules whose
  // productivity is enough for this one's (the caller's productivity pass then skips it, or
  // settles it without searching the tables).
  const fa::DFA& m = out.m;
  const auto n = static_cast<int32_t>(m.size());
  std::vector<int32_t> cost(static_cast<size_t>(n), -1), prev(static_cast<size_t>(n), -1), via(static_cast<size_t>(n), -1);
  std::deque<std::pair<int32_t, int32_t>> queue;  // (state, its cost when queued)
  if (n > 0) {
    cost[0] = 0;
    queue.emplace_back(0, 0);
  }
  int32_t end = -1;
  while (!queue.empty()) {
    const auto [s, c] = queue.front();
    queue.pop_front();
    if (c != cost[static_cast<size_t>(s)]) continue;  // (queued again since, cheaper)
    if (m.final[static_cast<size_t>(s)]) {
      end = s;
      break;
    }
    for (int64_t k = m.row_off[s]; k < m.row_off[s + 1]; ++k) {
      const int32_t t = m.rows[3 * k + 2];
      if (cost[static_cast<size_t>(t)] < 0 || cost[static_cast<size_t>(t)] > c) {
        cost[static_cast<size_t>(t)] = c;
        prev[static_cast<size_t>(t)] = s;
        via[static_cast<size_t>(t)] = -1;
        queue.emplace_front(t, c);
      }
    }
    for (int64_t k = m.call_off[s]; k < m.call_off[s + 1]; ++k) {
      const int32_t t = m.calls[2 * k + 1];
      if (cost[static_cast<size_t>(t)] < 0 || cost[static_cast<size_t>(t)] > c + 1) {
        cost[static_cast<size_t>(t)] = c + 1;
        prev[static_cast<size_t>(t)] = s;
        via[static_cast<size_t>(t)] = m.calls[2 * k];
        queue.emplace_back(t, c + 1);
      }
    }
  }
  if (end >= 0) {
    out.has_path = true;
    out.alone = cost[static_cast<size_t>(end)] == 0;
    for (int32_t s = end; s != 0 && s >= 0; s = prev[static_cast<size_t>(s)])
      if (via[static_cast<size_t>(s)] >= 0) out.path_callees.push_back(via[static_cast<size_t>(s)]);
    std::sort(out.path_callees.begin(), out.path_callees.end());
    out.path_callees.erase(std::unique(out.path_callees.begin(), out.path_callees.end()), out.path_callees.end());
  }
  return out;
}

// (trans, final, call_off, call_edge, nfa_states, alone, dfa_need, path_callees): build_rule's
// result (path_callees a tuple of rule indices, None without a path to a final state)
py::tuple rule_out(RuleBuild& b) {
  py::tuple t = byte_table_out(b.m, std::move(b.table));
  py::object callees = py::none();
  if (b.has_path) {
    py::tuple c(b.path_callees.size());
    for (size_t i = 0; i < b.path_callees.size(); ++i) c[i] = b.path_callees[i];
    callees = std::move(c);
  }
  return py::make_tuple(t[0], t[1], t[2], t[3], b.nfa_states, b.alone, b.dfa_need, callees);
}

void check_rule_input(const i32& nodes, const b8& alphabet) {
  if (nodes.ndim() != 2 || nodes.shape(1) != 4) throw std::invalid_argument("nodes must be (n, 4)");
  if (alphabet.size() != 256) throw std::invalid_argument("alphabet must be bool[256]");
}

// One rule's automaton, all of it here (build_rule_alone): the same result as build_dfa(),
// the alphabet cut and trim_minimise() apart, without the (n, 256) tables between them.
// Returns (trans, final, call_off, call_edge, nfa_states, alone, dfa_need, path_callees), or (kind, reached)
// past a limit (as build_dfa). The build fits exactly the limits with
// max_nfa - nfa_used >= nfa_states and max_dfa - dfa_used >= dfa_need.
py::tuple build_rule(const i32& nodes, const i32& data, int32_t root, int64_t max_nfa, int64_t nfa_used,
                     int64_t max_dfa, int64_t dfa_used, const b8& alphabet, int64_t n_rules) {
  check_rule_input(nodes, alphabet);
  const fa::Expr e{nodes.data(), nodes.shape(0), data.data(), static_cast<int64_t>(data.size())};
  RuleBuild b;
  try {
    py::gil_scoped_release release;
    b = build_rule_alone(e, root, max_nfa, nfa_used, max_dfa, dfa_used, alphabet.data(), n_rules);
  } catch (const fa::LimitHit& hit) {
    return py::make_tuple(hit.kind, hit.reached);
  } catch (const fa::BadInput& err) {
    throw std::invalid_argument(err.what());
  }
  return rule_out(b);
}

// build_rule() of several roots at once, on up to `threads` threads of the native pool (a
// large schema's compile builds hundreds of rules, each independent of the others). Each
// build gets the DFA budget max_states - used (its NFA max_states alone), and no build starts
// once the states built pass max_states - used in all. Returns per root build_rule's tuple,
// or None where the root was not built: past a limit, on bad nodes, or not started. The
// caller replays the rules in order against its own running budget, building the None ones
// one by one (which raises where a limit is passed), so the outcome is that of building
// them one after the other.
py::list build_rules(const i32& nodes, const i32& data, const i32& roots, int64_t max_states, int64_t used,
                     const b8& alphabet, int64_t n_rules, int threads) {
  check_rule_input(nodes, alphabet);
  if (roots.ndim() != 1) throw std::invalid_argument("roots must be 1-D");
  const fa::Expr e{nodes.data(), nodes.shape(0), data.data(), static_cast<int64_t>(data.size())};
  const int64_t n = roots.shape(0);
  const int32_t* R = roots.data();
  const bool* A = alphabet.data();
  std::vector<std::unique_ptr<RuleBuild>> built(static_cast<size_t>(n));
  {
    py::gil_scoped_release release;
    std::atomic<int64_t> states{0};
    std::atomic<bool> stop{false};
    structgen::Pool::get().parallel_for(n, threads, [&](int64_t i) {
      if (stop.load(std::memory_order_relaxed)) return;
      try {
        auto b = std::make_unique<RuleBuild>(build_rule_alone(e, R[i], max_states, 0, max_states, used, A, n_rules));
        if (states.fetch_add(b->m.size()) + b->m.size() > max_states - used) stop.store(true);
        b->table.reset(new int32_t[static_cast<size_t>(b->m.size()) * 256]);
        fill_byte_table(b->m, b->table.get());
        built[static_cast<size_t>(i)] = std::move(b);
      } catch (const fa::LimitHit&) {
        stop.store(true);  // the replay builds this one alone, and raises
      } catch (const fa::BadInput&) {
        stop.store(true);
      }
    });
  }
  py::list out;
  for (auto& b : built) out.append(b ? py::object(rule_out(*b)) : py::object(py::none()));
  return out;
}


// ---------------------------------------------------------------------------- rule keys

// The expression reachable from node `root` in a canonical form, as bytes: nodes numbered in
// order of first visit (children in their stored order), inlined rules' ids likewise (an
// inlined copy is shared by rule id, so only their pattern matters), data slices written out,
// called rules' ids kept (they are the automaton's call entries). Two roots with equal keys
// are isomorphic expressions over the same calls: build_rule gives them the same automaton.
// structgen.index.automaton keys its process-wide cache of rule automata with it (a rule
// repeated within a schema or between schemas, such as the any-value rule, is built once).
py::bytes rule_key(const i32& nodes, const i32& data, int32_t root) {
  if (nodes.ndim() != 2 || nodes.shape(1) != 4) throw std::invalid_argument("nodes must be (n, 4)");
  return py::bytes(fa::rule_key(nodes.data(), nodes.shape(0), data.data(), static_cast<int64_t>(data.size()), root));
}

}  // namespace

// (fa.hpp) the canonical form of node `root` of serialized expressions, as bytes
std::string fa::rule_key(const int32_t* N, int64_t n, const int32_t* D, int64_t nd, int32_t root) {
  auto span = [&](int64_t a, int64_t len) {
    if (a < 0 || len < 0 || a + len > nd) throw std::invalid_argument("a node's data out of range");
    return D + a;
  };
  // node -> canonical number, -1 where not visited: a per-thread array reset where it was set
  // (a fresh one per key cost a pass over the whole grammar's nodes for each of its rules)
  static thread_local std::vector<int32_t> id;
  if (id.size() < static_cast<size_t>(n)) id.resize(static_cast<size_t>(n), -1);
  std::vector<int32_t> order, out;
  struct Reset {
    std::vector<int32_t>& id;
    const std::vector<int32_t>& order;
    ~Reset() {
      for (int32_t x : order) id[x] = -1;
    }
  } reset{id, order};
  std::unordered_map<int32_t, int32_t> rule_ids;
  auto visit = [&](int64_t x) {
    if (x < 0 || x >= n) throw std::invalid_argument("node out of range");
    if (id[x] < 0) {
      order.push_back(static_cast<int32_t>(x));  // first: the reset then covers every id set
      id[x] = static_cast<int32_t>(order.size() - 1);
    }
    return id[x];
  };
  // an EGRAPH's (node, target) entries: f(entry index) for each node entry of data[a : a + len]
  auto egraph_nodes = [&](int64_t a, int64_t len, auto f) {
    const int32_t* d = span(a, len);
    if (len < 1 || d[0] < 0 || 1 + d[0] > len) throw std::invalid_argument("bad automaton node");
    for (int64_t k = 1 + d[0], s = 0; s < d[0]; ++s) {
      if (k >= len) throw std::invalid_argument("bad automaton node");
      const int64_t cnt = d[k++];
      if (cnt < 0 || k + 2 * cnt > len) throw std::invalid_argument("bad automaton node");
      for (int64_t j = 0; j < cnt; ++j, k += 2) f(k);
    }
  };
  visit(root);
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t* q = N + 4 * static_cast<int64_t>(order[i]);
    const int32_t kind = q[0], a = q[1], b = q[2], c = q[3];
    out.push_back(kind);
    switch (kind) {
      case fa::LIT:
      case fa::GRAPH: {
        const int32_t* d = span(a, b);
        out.push_back(b);
        out.insert(out.end(), d, d + b);
        break;
      }
      case fa::SET: {
        const int32_t* d = span(a, 2 * static_cast<int64_t>(b));
        out.push_back(b);
        out.insert(out.end(), d, d + 2 * static_cast<int64_t>(b));
        break;
      }
      case fa::SEQ:
      case fa::ALT: {
        const int32_t* d = span(a, b);
        out.push_back(b);
        for (int32_t k = 0; k < b; ++k) out.push_back(visit(d[k]));
        break;
      }
      case fa::REP:
        out.push_back(visit(a));
        out.push_back(b);
        out.push_back(c);
        break;
      case fa::CALL:
        out.push_back(a);
        break;
      case fa::INLINE:
        out.push_back(rule_ids.emplace(a, static_cast<int32_t>(rule_ids.size())).first->second);
        out.push_back(visit(b));
        break;
      case fa::EGRAPH: {
        std::vector<int32_t> d(span(a, b), span(a, b) + b);
        egraph_nodes(a, b, [&](int64_t k) { d[k] = visit(d[k]); });
        out.push_back(b);
        out.insert(out.end(), d.begin(), d.end());
        break;
      }
      case fa::REGEX:
        out.push_back(visit(a));
        out.push_back(b);
        break;
      default:  // REF (unresolved) and unknown kinds: build_rule refuses them
        throw std::invalid_argument("a node build_rule does not take");
    }
  }
  return std::string(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(int32_t));
}

namespace {


// ---------------------------------------------------------------------------- rule calls

// A rule's final flags (bool per state) and calls as CSR arrays (int64 offsets, states + 1;
// (k, 2) int32 callee and return state), checked: the lengths agree, the offsets do not
// decrease, every callee is one of the `n` rules and every return state one of the rule's.
struct RuleCalls {
  b8 final_;
  i64 off;
  i32 edge;
  int64_t states = 0;
};

RuleCalls rule_calls_in(const py::handle& final_, const py::handle& call_off, const py::handle& call_edge, int32_t n) {
  RuleCalls R{final_.cast<b8>(), call_off.cast<i64>(), call_edge.cast<i32>(), 0};
  R.states = R.final_.shape(0);
  const int64_t k = R.edge.size() / 2;
  if (R.off.shape(0) != R.states + 1 || R.states < 1) throw std::invalid_argument("rule tables differ in length");
  if (R.edge.size() && (R.edge.ndim() != 2 || R.edge.shape(1) != 2)) throw std::invalid_argument("call_edge must be (k, 2)");
  const int64_t* co = R.off.data();
  if (co[0] != 0 || co[R.states] != k) throw std::invalid_argument("call offsets do not match the calls");
  for (int64_t s = 0; s < R.states; ++s)
    if (co[s] > co[s + 1]) throw std::invalid_argument("call offsets must not decrease");
  const int32_t* ce = R.edge.data();
  for (int64_t j = 0; j < k; ++j)
    if (ce[2 * j] < 0 || ce[2 * j] >= n || ce[2 * j + 1] < 0 || ce[2 * j + 1] >= R.states)
      throw std::invalid_argument("call entry out of range");
  return R;
}

// ---------------------------------------------------------------------------- left recursion

// A rule that can call itself without reading a byte (left recursion), found from the rules'
// final flags and calls alone (no transition table is read): per rule `finals[r]` (bool per
// state) and its calls as CSR arrays `call_offs[r]` (int64, states + 1) and `call_edges[r]`
// ((k, 2) int32: callee, return state). A rule is nullable when its start state reaches a
// final state through calls to nullable rules (a least fixed point); its left calls are the
// callees met on that way. Returns a cycle of left calls as rule indices (first rule again
// at the end; the first found by a depth-first walk from rule 0 up, callees in increasing
// order), or None.
py::object left_recursion(const py::list& finals, const py::list& call_offs, const py::list& call_edges) {
  const auto n = static_cast<int32_t>(finals.size());
  if (static_cast<int32_t>(call_offs.size()) != n || static_cast<int32_t>(call_edges.size()) != n)
    throw std::invalid_argument("one final array and one call table per rule");
  std::vector<RuleCalls> rules;
  rules.reserve(static_cast<size_t>(n));
  for (int32_t r = 0; r < n; ++r) rules.push_back(rule_calls_in(finals[r], call_offs[r], call_edges[r], n));
  std::vector<int32_t> cycle;
  {
    py::gil_scoped_release release;
    std::vector<uint8_t> nullable(n, 0);
    std::vector<uint8_t> seen;
    std::vector<int64_t> stack;
    // the states rule r reaches from its start by calls to nullable rules: the callees met
    // there (sorted, distinct), and whether a final state is among them
    auto reach = [&](int32_t r, std::vector<int32_t>& callees) {
      const RuleCalls& R = rules[r];
      const int64_t* co = R.off.data();
      const int32_t* ce = R.edge.data();
      const bool* fin = R.final_.data();
      seen.assign(static_cast<size_t>(R.states), 0);
      stack.assign(1, 0);
      seen[0] = 1;
      callees.clear();
      bool ends = false;
      while (!stack.empty()) {
        const int64_t s = stack.back();
        stack.pop_back();
        ends = ends || fin[s];
        for (int64_t j = co[s]; j < co[s + 1]; ++j) {
          const int32_t c = ce[2 * j], t = ce[2 * j + 1];
          callees.push_back(c);
          if (nullable[c] && !seen[t]) {
            seen[t] = 1;
            stack.push_back(t);
          }
        }
      }
      std::sort(callees.begin(), callees.end());
      callees.erase(std::unique(callees.begin(), callees.end()), callees.end());
      return ends;
    };
    // nullable rules: a rule is walked again only when a callee it met becomes nullable
    std::vector<std::vector<int32_t>> waiting(n);
    std::vector<int32_t> work, callees;
    for (int32_t r = n - 1; r >= 0; --r) work.push_back(r);
    while (!work.empty()) {
      const int32_t r = work.back();
      work.pop_back();
      if (nullable[r]) continue;
      if (reach(r, callees)) {
        nullable[r] = 1;
        work.insert(work.end(), waiting[r].begin(), waiting[r].end());
        waiting[r].clear();
      } else {
        for (int32_t c : callees)
          if (!nullable[c]) waiting[c].push_back(r);
      }
    }
    std::vector<std::vector<int32_t>> left(n);
    for (int32_t r = 0; r < n; ++r) reach(r, left[r]);
    // a cycle of the left-call graph: depth first from each rule not yet finished
    std::vector<uint8_t> state(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<int32_t, size_t>> path;
    for (int32_t start = 0; start < n && cycle.empty(); ++start) {
      if (state[start]) continue;
      state[start] = 1;
      path.assign(1, {start, 0});
      while (!path.empty() && cycle.empty()) {
        auto& [v, i] = path.back();
        if (i == left[v].size()) {
          state[v] = 2;
          path.pop_back();
          continue;
        }
        const int32_t w = left[v][i++];
        if (state[w] == 1) {
          size_t at = 0;
          while (path[at].first != w) ++at;
          for (size_t q = at; q < path.size(); ++q) cycle.push_back(path[q].first);
          cycle.push_back(w);
        } else if (state[w] == 0) {
          state[w] = 1;
          path.push_back({w, 0});
        }
      }
    }
  }
  if (cycle.empty()) return py::none();
  py::list out;
  for (int32_t r : cycle) out.append(r);
  return out;
}

// ---------------------------------------------------------------------------- productive rules

// Which rules match some string, given the rules that do by bytes alone (`alone`): a rule
// does when its start state reaches a final state by bytes and calls to rules that do (a
// least fixed point). Per rule its (n, 256) table, final flags and calls as CSR arrays; each
// rule's search walks forward from its start state until it meets a final state, and goes on
// past a call only once the callee is known to be productive (the rows it reads are
// range-checked).
py::list productive_rules(const py::list& trans, const py::list& finals, const py::list& call_offs,
                          const py::list& call_edges, const py::list& alone) {
  const auto n = static_cast<int32_t>(trans.size());
  if (static_cast<int32_t>(finals.size()) != n || static_cast<int32_t>(call_offs.size()) != n ||
      static_cast<int32_t>(call_edges.size()) != n || static_cast<int32_t>(alone.size()) != n)
    throw std::invalid_argument("one table, final array, call table and flag per rule");
  struct Rule {
    i32 trans;
    RuleCalls c;
  };
  std::vector<Rule> rules;
  rules.reserve(static_cast<size_t>(n));
  std::vector<uint8_t> prod(n, 0);
  for (int32_t r = 0; r < n; ++r) {
    Rule R{trans[r].cast<i32>(), rule_calls_in(finals[r], call_offs[r], call_edges[r], n)};
    if (R.trans.ndim() != 2 || R.trans.shape(1) != 256) throw std::invalid_argument("trans must be (n, 256)");
    if (R.trans.shape(0) != R.c.states) throw std::invalid_argument("rule tables differ in length");
    prod[r] = alone[r].cast<bool>() ? 1 : 0;
    rules.push_back(std::move(R));
  }
  bool bad_target = false;
  {
    py::gil_scoped_release release;
    // One search per rule from its start state, resumed where it was blocked: a state reached
    // with a call to a rule not (yet) productive is kept in that callee's `waiting` list, and
    // the search goes on from the call's return state when the callee turns productive. Each
    // state of each rule is visited at most once. (Searching a rule again from its start
    // whenever one of its callees turned productive visited a rule with many callees once
    // per callee: a large schema's objects made this pass a millisecond or two.)
    std::vector<std::vector<uint8_t>> seen(n);
    std::vector<std::vector<std::pair<int32_t, int32_t>>> waiting(n);  // callee -> (rule, return state)
    std::vector<int32_t> stack, turned;
    // goes on with rule r's search from the states on `stack`; true where a final state is met
    auto search = [&](int32_t r) {
      const Rule& R = rules[r];
      const int32_t* T = R.trans.data();
      const bool* F = R.c.final_.data();
      const int64_t* co = R.c.off.data();
      const int32_t* ce = R.c.edge.data();
      const auto states = static_cast<int32_t>(R.c.states);
      std::vector<uint8_t>& S = seen[r];
      while (!stack.empty()) {
        const int32_t s = stack.back();
        stack.pop_back();
        if (F[s]) {
          stack.clear();
          return true;
        }
        const int32_t* row = T + static_cast<int64_t>(s) * 256;
        if (!fa::targets_in_range(row, 256, states)) {
          bad_target = true;
          stack.clear();
          return false;
        }
        uint64_t starts[4] = {1, 0, 0, 0};  // one target per run of equal ones
        fa::mark_changes(row, starts);
        for (int w = 0; w < 4; ++w)
          for (uint64_t bits = starts[w]; bits != 0; bits &= bits - 1) {
            const int32_t t = row[w * 64 + __builtin_ctzll(bits)];
            if (t >= 0 && !S[t]) {
              S[t] = 1;
              stack.push_back(t);
            }
          }
        for (int64_t j = co[s]; j < co[s + 1]; ++j) {
          const int32_t c = ce[2 * j], t = ce[2 * j + 1];
          if (S[t]) continue;
          if (prod[c]) {
            S[t] = 1;
            stack.push_back(t);
          } else {
            waiting[c].emplace_back(r, t);
          }
        }
      }
      return false;
    };
    for (int32_t r = 0; r < n && !bad_target; ++r) {
      if (prod[r]) continue;
      seen[r].assign(static_cast<size_t>(rules[r].c.states), 0);
      seen[r][0] = 1;
      stack.assign(1, 0);
      if (search(r)) turned.push_back(r);
      // the rules that turned productive, and in turn the searches waiting on them
      while (!turned.empty() && !bad_target) {
        const int32_t c = turned.back();
        turned.pop_back();
        if (prod[c]) continue;
        prod[c] = 1;
        std::vector<std::pair<int32_t, int32_t>> resumed;
        resumed.swap(waiting[c]);
        for (const auto& [w, t] : resumed) {
          if (prod[w] || seen[w].empty() || seen[w][t]) continue;
          seen[w][t] = 1;
          stack.assign(1, t);
          if (search(w)) turned.push_back(w);
        }
      }
    }
  }
  if (bad_target) throw std::invalid_argument("transition out of range");
  py::list out(n);
  for (int32_t r = 0; r < n; ++r) out[r] = py::bool_(prod[r] != 0);
  return out;
}

// ---------------------------------------------------------------------------- completion distances

// Completion distances of one rule DFA (fa::rule_distances) given its callees' shortest
// matches; the configuration index computes its own when first needed, this binding serves
// the tests' comparisons with the reference.
py::array_t<int64_t> distances(const i32& trans, const b8& final_, const i64& call_off, const i32& call_edge,
                               const i64& minlen, int64_t unreachable) {
  const ByteDFA d = byte_dfa_in(trans, final_, call_off, call_edge);
  py::array_t<int64_t> out(static_cast<py::ssize_t>(d.n));
  int64_t* dist = out.mutable_data();
  const int64_t* M = minlen.data();
  const int64_t R = minlen.shape(0);
  {
    py::gil_scoped_release release;
    fa::rule_distances(d.T, d.F, d.n, d.CO, d.CE, M, R, unreachable, dist);
  }
  return out;
}

// A rule DFA's shortest match (fa::shortest_match) given its callees' shortest matches: what
// the configuration index computes for a counted grammar when it is built; this binding serves
// the tests' comparison with distances()[0].
int64_t shortest_match(const i32& trans, const b8& final_, const i64& call_off, const i32& call_edge,
                       const i64& minlen, int64_t unreachable) {
  const ByteDFA d = byte_dfa_in(trans, final_, call_off, call_edge);
  fa::ShortestScratch scratch;
  py::gil_scoped_release release;
  return fa::shortest_match(d.T, d.F, d.n, d.CO, d.CE, minlen.data(), minlen.shape(0), unreachable, scratch);
}

}  // namespace

void register_automaton(py::module_& m) {
  m.def("build_dfa", &build_dfa, py::arg("nodes"), py::arg("data"), py::arg("root"), py::arg("bytes"), py::arg("max_nfa"),
        py::arg("nfa_used"), py::arg("max_dfa"), py::arg("dfa_used"));
  m.def("product", &product, py::arg("a_off"), py::arg("a_rows"), py::arg("a_final"), py::arg("b_off"),
        py::arg("b_rows"), py::arg("b_final"), py::arg("keep_b_final"), py::arg("max_states"));
  m.def("build_rule", &build_rule, py::arg("nodes"), py::arg("data"), py::arg("root"), py::arg("max_nfa"),
        py::arg("nfa_used"), py::arg("max_dfa"), py::arg("dfa_used"), py::arg("alphabet"), py::arg("n_rules"));
  m.def("build_rules", &build_rules, py::arg("nodes"), py::arg("data"), py::arg("roots"), py::arg("max_states"),
        py::arg("used"), py::arg("alphabet"), py::arg("n_rules"), py::arg("threads"));
  m.def("rule_key", &rule_key, py::arg("nodes"), py::arg("data"), py::arg("root"));
  m.def("trim_minimise", &trim_minimise, py::arg("trans"), py::arg("final"), py::arg("call_off"), py::arg("call_edge"),
        py::arg("productive"));
  m.def("productive_rules", &productive_rules, py::arg("trans"), py::arg("finals"), py::arg("call_offs"),
        py::arg("call_edges"), py::arg("alone"));
  m.def("left_recursion", &left_recursion, py::arg("finals"), py::arg("call_offs"), py::arg("call_edges"));
  m.def("shortest_match", &shortest_match, py::arg("trans"), py::arg("final"), py::arg("call_off"),
        py::arg("call_edge"), py::arg("minlen"), py::arg("unreachable"));
  m.def("distances", &distances, py::arg("trans"), py::arg("final"), py::arg("call_off"), py::arg("call_edge"),
        py::arg("minlen"), py::arg("unreachable"));
  m.def("minimise_rows", &minimise_rows, py::arg("row_off"), py::arg("rows"), py::arg("final"));
  m.def("minimise", &minimise, py::arg("trans"), py::arg("final"), py::arg("call_off"), py::arg("call_edge"));
}
