// structgen._core, automata: subset construction and Hopcroft minimisation of rule DFAs.
//
// Why native: per-configuration Python work in these two stages was most of a schema's
// compile time (sets of NFA states hashed per elementary byte interval; Moore refinement
// rounds, one per unit of the longest chain, each a pass over every state). The NFA is still
// built in Python (structgen/automaton.py) and handed over as flat arrays; trimming and the
// rebuild of the minimal DFA from the blocks stay in numpy there.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace py = pybind11;

namespace {

using i32 = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using i64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using b8 = py::array_t<bool, py::array::c_style | py::array::forcecast>;

struct VecHash {
  size_t operator()(const std::vector<int32_t>& v) const noexcept {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
    for (int32_t x : v) {
      h ^= static_cast<uint64_t>(static_cast<uint32_t>(x)) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    }
    return static_cast<size_t>(h);
  }
};

using SetIds = std::unordered_map<std::vector<int32_t>, int32_t, VecHash>;

// Subset construction over an NFA slice given as CSR arrays (states are local: 0..n-1).
//   eps_off[n + 1], eps_tgt: epsilon edges; byte_off[n + 1], byte_edge (m, 3): (lo, hi, target);
//   call_off[n + 1], call_edge (k, 2): (callee, target).
// DFA states are numbered in discovery order: per state, its byte intervals ascending, then its
// calls by callee (the order of structgen/automaton.py's reference construction, so that equal
// inputs give equal arrays). Returns (trans (N, 256) int32, final bool[N], calls_off[N + 1],
// calls (K, 2)), or (reached,) when a byte target would make used + N exceed max_states.
py::tuple determinise(const i64& eps_off, const i32& eps_tgt, const i64& byte_off, const i32& byte_edge,
                      const i64& call_off, const i32& call_edge, int32_t start, int32_t end, int64_t max_states,
                      int64_t used) {
  const int64_t n = eps_off.shape(0) - 1;
  if (n < 0 || byte_off.shape(0) != n + 1 || call_off.shape(0) != n + 1)
    throw std::invalid_argument("offset arrays must have n + 1 entries");
  if ((byte_edge.size() && (byte_edge.ndim() != 2 || byte_edge.shape(1) != 3)) ||
      (call_edge.size() && (call_edge.ndim() != 2 || call_edge.shape(1) != 2)))
    throw std::invalid_argument("byte_edge must be (m, 3) and call_edge (k, 2)");
  if (start < 0 || start >= n) throw std::invalid_argument("start state out of range");
  const int64_t* EO = eps_off.data();
  const int32_t* ET = eps_tgt.data();
  const int64_t* BO = byte_off.data();
  const int32_t* BE = byte_edge.data();
  const int64_t* CO = call_off.data();
  const int32_t* CE = call_edge.data();
  for (int64_t k = 0; k < eps_tgt.shape(0); ++k)
    if (ET[k] < 0 || ET[k] >= n) throw std::invalid_argument("epsilon target outside the NFA slice");
  for (int64_t s = 0; s < n; ++s)
    if (EO[s] > EO[s + 1] || BO[s] > BO[s + 1] || CO[s] > CO[s + 1]) throw std::invalid_argument("offsets must not decrease");
  if (EO[0] != 0 || BO[0] != 0 || CO[0] != 0 || EO[n] != eps_tgt.shape(0) ||
      BO[n] != (byte_edge.size() ? byte_edge.shape(0) : 0) || CO[n] != (call_edge.size() ? call_edge.shape(0) : 0))
    throw std::invalid_argument("offsets do not match the edge arrays");
  for (int64_t k = 0; k < BO[n]; ++k)
    if (BE[3 * k + 2] < 0 || BE[3 * k + 2] >= n || BE[3 * k] < 0 || BE[3 * k + 1] > 255 || BE[3 * k] > BE[3 * k + 1])
      throw std::invalid_argument("bad byte edge");
  for (int64_t k = 0; k < CO[n]; ++k)
    if (CE[2 * k + 1] < 0 || CE[2 * k + 1] >= n) throw std::invalid_argument("call target outside the NFA slice");

  std::vector<std::vector<int32_t>> order;  // DFA state -> sorted NFA states
  SetIds ids, by_targets;                   // closure -> id; sorted target set -> id (memo)
  std::vector<int32_t> trans;               // N * 256
  std::vector<int64_t> out_call_off{0};
  std::vector<int32_t> out_calls;
  std::vector<uint32_t> stamp(n, 0);
  uint32_t epoch = 0;
  std::vector<int32_t> work;
  int64_t reached = -1;

  {
    py::gil_scoped_release release;
    // id of the epsilon closure of `targets` (sorted, unique), creating it when new;
    // -1 when creating it would exceed the limit and `limited`
    auto intern = [&](std::vector<int32_t>& targets, bool limited) -> int32_t {
      auto hit = by_targets.find(targets);
      if (hit != by_targets.end()) return hit->second;
      ++epoch;
      std::vector<int32_t> set;
      work.assign(targets.begin(), targets.end());
      for (int32_t t : targets) stamp[t] = epoch;
      while (!work.empty()) {
        const int32_t s = work.back();
        work.pop_back();
        set.push_back(s);
        for (int64_t k = EO[s]; k < EO[s + 1]; ++k) {
          const int32_t t = ET[k];
          if (stamp[t] != epoch) {
            stamp[t] = epoch;
            work.push_back(t);
          }
        }
      }
      std::sort(set.begin(), set.end());
      int32_t id;
      auto it = ids.find(set);
      if (it != ids.end()) {
        id = it->second;
      } else {
        if (limited && used + static_cast<int64_t>(order.size()) >= max_states) {
          reached = used + static_cast<int64_t>(order.size()) + 1;
          return -1;
        }
        id = static_cast<int32_t>(order.size());
        ids.emplace(set, id);
        order.push_back(std::move(set));
      }
      by_targets.emplace(targets, id);
      return id;
    };
    std::vector<int32_t> init{start};
    intern(init, false);
    std::vector<int32_t> points, targets;
    std::vector<std::pair<int32_t, int32_t>> edges;  // (lo, target) and (hi + 1, ~target) events
    std::vector<std::pair<int32_t, int32_t>> calls;
    for (size_t i = 0; i < order.size() && reached < 0; ++i) {
      trans.resize((i + 1) * 256, -1);
      const std::vector<int32_t> cur = order[i];  // a copy: `order` grows below
      // byte edges: sweep the interval end points; the live targets between two consecutive
      // points are one elementary interval's targets
      edges.clear();
      for (int32_t s : cur) {
        for (int64_t k = BO[s]; k < BO[s + 1]; ++k) {
          edges.emplace_back(BE[3 * k], BE[3 * k + 2]);
          edges.emplace_back(BE[3 * k + 1] + 1, ~BE[3 * k + 2]);
        }
      }
      if (!edges.empty()) {
        std::sort(edges.begin(), edges.end(), [](auto a, auto b) { return a.first < b.first; });
        std::unordered_map<int32_t, int32_t> live;  // target -> number of open edges
        size_t e = 0;
        while (e < edges.size()) {
          const int32_t p = edges[e].first;
          while (e < edges.size() && edges[e].first == p) {
            const int32_t t = edges[e].second;
            if (t >= 0) {
              ++live[t];
            } else if (--live[~t] == 0) {
              live.erase(~t);
            }
            ++e;
          }
          if (e == edges.size() || live.empty()) continue;
          const int32_t q = edges[e].first;
          targets.clear();
          for (auto& kv : live) targets.push_back(kv.first);
          std::sort(targets.begin(), targets.end());
          const int32_t id = intern(targets, true);
          if (id < 0) break;
          std::fill(trans.begin() + i * 256 + p, trans.begin() + i * 256 + q, id);
        }
        if (reached >= 0) break;
      }
      calls.clear();
      for (int32_t s : cur)
        for (int64_t k = CO[s]; k < CO[s + 1]; ++k) calls.emplace_back(CE[2 * k], CE[2 * k + 1]);
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
        out_calls.push_back(callee);
        out_calls.push_back(id);
      }
      out_call_off.push_back(static_cast<int64_t>(out_calls.size() / 2));
    }
  }
  if (reached >= 0) return py::make_tuple(reached);
  const auto N = static_cast<py::ssize_t>(order.size());
  py::array_t<int32_t> t({N, static_cast<py::ssize_t>(256)});
  std::copy(trans.begin(), trans.end(), t.mutable_data());
  py::array_t<bool> f(N);
  bool* F = f.mutable_data();
  for (py::ssize_t i = 0; i < N; ++i) F[i] = std::binary_search(order[i].begin(), order[i].end(), end);
  py::array_t<int64_t> co(static_cast<py::ssize_t>(out_call_off.size()));
  std::copy(out_call_off.begin(), out_call_off.end(), co.mutable_data());
  py::array_t<int32_t> ce({static_cast<py::ssize_t>(out_calls.size() / 2), static_cast<py::ssize_t>(2)});
  std::copy(out_calls.begin(), out_calls.end(), ce.mutable_data());
  return py::make_tuple(t, f, co, ce);
}

// Hopcroft's partition refinement of a trimmed DFA: trans (n, 256) int32 (-1: rejected),
// final bool[n], calls as CSR (call_off[n + 1], call_edge (k, 2): (callee, target); at most
// one call per callee and state). Calls are letters like bytes; -1 and a missing call go to
// an extra sink state. Returns (block per state, numbered by first appearance from state 0,
// number of blocks): the coarsest partition Moore refinement also reaches.
py::tuple minimise(const i32& trans, const b8& final_, const i64& call_off, const i32& call_edge) {
  if (trans.ndim() != 2 || trans.shape(1) != 256) throw std::invalid_argument("trans must be (n, 256)");
  const int64_t n = trans.shape(0);
  if (final_.shape(0) != n || call_off.shape(0) != n + 1) throw std::invalid_argument("final/call_off size mismatch");
  const int32_t* T = trans.data();
  const bool* F = final_.data();
  const int64_t* CO = call_off.data();
  const int32_t* CE = call_edge.data();
  if (CO[0] != 0 || CO[n] != (call_edge.size() ? call_edge.shape(0) : 0)) throw std::invalid_argument("bad call offsets");
  for (int64_t k = 0; k < n * 256; ++k)
    if (T[k] < -1 || T[k] >= n) throw std::invalid_argument("transition target out of range");
  for (int64_t k = 0; k < CO[n]; ++k)
    if (CE[2 * k + 1] < 0 || CE[2 * k + 1] >= n) throw std::invalid_argument("call target out of range");
  std::vector<int64_t> block_of(n);
  int64_t count = 0;
  {
    py::gil_scoped_release release;
    const int64_t N = n + 1;  // + the sink
    const int32_t sink = static_cast<int32_t>(n);
    // letters: the distinct byte columns, then the callees
    std::vector<std::vector<int32_t>> delta;
    {
      std::unordered_map<std::vector<int32_t>, int32_t, VecHash> cols;
      std::vector<int32_t> col(N);
      for (int b = 0; b < 256; ++b) {
        for (int64_t s = 0; s < n; ++s) col[s] = T[s * 256 + b] < 0 ? sink : T[s * 256 + b];
        col[n] = sink;
        if (cols.emplace(col, b).second) delta.push_back(col);
      }
      std::vector<int32_t> callees;
      for (int64_t k = 0; k < CO[n]; ++k) callees.push_back(CE[2 * k]);
      std::sort(callees.begin(), callees.end());
      callees.erase(std::unique(callees.begin(), callees.end()), callees.end());
      for (int32_t c : callees) {
        std::vector<int32_t> d(N, sink);
        for (int64_t s = 0; s < n; ++s)
          for (int64_t k = CO[s]; k < CO[s + 1]; ++k)
            if (CE[2 * k] == c) d[s] = CE[2 * k + 1];
        delta.push_back(std::move(d));
      }
    }
    const size_t L = delta.size();
    // predecessors per letter (CSR by target)
    std::vector<std::vector<int64_t>> pre_off(L, std::vector<int64_t>(N + 1, 0));
    std::vector<std::vector<int32_t>> pre(L, std::vector<int32_t>(N));
    for (size_t a = 0; a < L; ++a) {
      auto& off = pre_off[a];
      for (int64_t s = 0; s < N; ++s) ++off[delta[a][s] + 1];
      for (int64_t t = 0; t < N; ++t) off[t + 1] += off[t];
      std::vector<int64_t> fill(off.begin(), off.end() - 1);
      for (int64_t s = 0; s < N; ++s) pre[a][fill[delta[a][s]]++] = static_cast<int32_t>(s);
    }
    // the refinable partition: elems is grouped by block, [first, end) per block; the marked
    // states of a block are moved to [first, mid)
    std::vector<int32_t> elems(N), loc(N), blk(N);
    std::vector<int64_t> first, bend, mid;
    std::vector<char> in_work;
    std::vector<int32_t> work;
    {
      int64_t pos = 0;
      for (int pass = 0; pass < 2; ++pass) {  // non-final states (and the sink), then final ones
        const int64_t begin = pos;
        for (int64_t s = 0; s < N; ++s) {
          const bool fin = s < n && F[s];
          if (fin == (pass == 1)) {
            elems[pos] = static_cast<int32_t>(s);
            loc[s] = static_cast<int32_t>(pos);
            blk[s] = static_cast<int32_t>(first.size());
            ++pos;
          }
        }
        if (pos > begin) {
          work.push_back(static_cast<int32_t>(first.size()));
          first.push_back(begin);
          bend.push_back(pos);
          mid.push_back(begin);
          in_work.push_back(1);
        }
      }
    }
    std::vector<int32_t> splitter, touched;
    while (!work.empty()) {
      const int32_t A = work.back();
      work.pop_back();
      in_work[A] = 0;
      splitter.assign(elems.begin() + first[A], elems.begin() + bend[A]);
      for (size_t a = 0; a < L; ++a) {
        touched.clear();
        for (int32_t t : splitter) {
          for (int64_t k = pre_off[a][t]; k < pre_off[a][t + 1]; ++k) {
            const int32_t s = pre[a][k];
            const int32_t b = blk[s];
            if (mid[b] == first[b]) touched.push_back(b);
            // swap s to the end of the marked part
            const int64_t to = mid[b]++;
            const int32_t other = elems[to];
            const int32_t from = loc[s];
            elems[to] = s;
            loc[s] = static_cast<int32_t>(to);
            elems[from] = other;
            loc[other] = from;
          }
        }
        for (int32_t b : touched) {
          if (mid[b] == bend[b]) {  // every state marked: no split
            mid[b] = first[b];
            continue;
          }
          const auto nb = static_cast<int32_t>(first.size());
          first.push_back(first[b]);
          bend.push_back(mid[b]);
          mid.push_back(first[b]);
          in_work.push_back(0);
          for (int64_t k = first[nb]; k < bend[nb]; ++k) blk[elems[k]] = nb;
          first[b] = bend[nb];
          mid[b] = first[b];
          if (in_work[b]) {
            work.push_back(nb);
            in_work[nb] = 1;
          } else {
            const int32_t smaller = (bend[nb] - first[nb]) <= (bend[b] - first[b]) ? nb : b;
            work.push_back(smaller);
            in_work[smaller] = 1;
          }
        }
      }
    }
    std::vector<int64_t> rank(first.size(), -1);
    for (int64_t s = 0; s < n; ++s) {
      int64_t& r = rank[blk[s]];
      if (r < 0) r = count++;
      block_of[s] = r;
    }
  }
  py::array_t<int64_t> out(static_cast<py::ssize_t>(n));
  std::copy(block_of.begin(), block_of.end(), out.mutable_data());
  return py::make_tuple(out, count);
}

}  // namespace

void register_automaton(py::module_& m) {
  m.def("determinise", &determinise, py::arg("eps_off"), py::arg("eps_tgt"), py::arg("byte_off"), py::arg("byte_edge"),
        py::arg("call_off"), py::arg("call_edge"), py::arg("start"), py::arg("end"), py::arg("max_states"),
        py::arg("used"));
  m.def("minimise", &minimise, py::arg("trans"), py::arg("final"), py::arg("call_off"), py::arg("call_edge"));
}
