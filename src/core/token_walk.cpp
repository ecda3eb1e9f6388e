// structgen._core: the vocabulary trie and the walk that computes a configuration's mask.
//
// Why native: the mask of a configuration seen for the first time is a walk over every token
// prefix the grammar allows. In Python that walk went level by level through numpy gathers
// (~20 us per level however few nodes it held) with a node-by-node tail, and it dominated
// first-visit masks. Here it is one depth-first pass over a flat trie in preorder: a rejected
// byte skips its whole subtree with one jump (`end`), and nothing is allocated per node.
//
// The package's masks come from the configuration engine in config_index.cpp, whose walk
// computes the rows it meets. `walk` here reads byte rows given as a table and stops below any
// configuration whose row is not computed yet, reporting it as pending: the Python reference
// engine (tests/reference_index.py) computes those rows and resumes from the pending nodes.
// `group_bytes`, `set_runs` and `copy_dups` serve that reference too (`set_bits` also builds
// the plain-split bitmasks). The GIL is released during the walk.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

using u8 = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;
using i32 = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using i64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using u32w = py::array_t<uint32_t, py::array::c_style>;  // written in place: no cast copies

constexpr int32_t kDead = 0;  // configuration id of a rejected prefix (token_index.DEAD)

// Sorted distinct keys (concatenated bytes, offsets[n + 1], ids[n]) -> the trie in preorder:
// node 0 is the root; per node its last byte, the token ending there (-1: none), its depth
// and `end`, one past the last node of its subtree. A key's prefix sorts before it, so each
// node is created by the first key through it, and a key that is a prefix of another one
// creates its own node before the longer key's nodes below it.
py::tuple build_trie(const u8& flat, const i64& offsets, const i64& ids) {
  const int64_t n = ids.shape(0);
  if (offsets.shape(0) != n + 1) throw std::invalid_argument("offsets must have len(ids) + 1 entries");
  const uint8_t* data = flat.data();
  const int64_t* off = offsets.data();
  const int64_t* id = ids.data();
  std::vector<uint8_t> byte{0};
  std::vector<int32_t> tok{-1}, depth{0}, end{0};
  std::vector<int32_t> open{0};  // open[d]: the node at depth d on the current path
  {
    py::gil_scoped_release release;
    for (int64_t k = 0; k < n; ++k) {
      const uint8_t* key = data + off[k];
      const int64_t len = off[k + 1] - off[k];
      int64_t lcp = 0;
      if (k > 0) {
        const uint8_t* prev = data + off[k - 1];
        const int64_t plen = off[k] - off[k - 1];
        while (lcp < len && lcp < plen && prev[lcp] == key[lcp]) ++lcp;
        if (lcp == len || (lcp < plen && prev[lcp] > key[lcp]))
          throw std::invalid_argument("keys must be sorted and distinct");
      }
      // close the nodes of the previous key deeper than the shared prefix
      while (static_cast<int64_t>(open.size()) > lcp + 1) {
        end[open.back()] = static_cast<int32_t>(byte.size());
        open.pop_back();
      }
      for (int64_t d = lcp + 1; d <= len; ++d) {
        open.push_back(static_cast<int32_t>(byte.size()));
        byte.push_back(key[d - 1]);
        tok.push_back(d == len ? static_cast<int32_t>(id[k]) : -1);
        depth.push_back(static_cast<int32_t>(d));
        end.push_back(0);
      }
    }
    for (int32_t node : open) end[node] = static_cast<int32_t>(byte.size());
  }
  const auto N = static_cast<py::ssize_t>(byte.size());
  u8 b(N);
  i32 t(N), dp(N), e(N);
  std::copy(byte.begin(), byte.end(), b.mutable_data());
  std::copy(tok.begin(), tok.end(), t.mutable_data());
  std::copy(depth.begin(), depth.end(), dp.mutable_data());
  std::copy(end.begin(), end.end(), e.mutable_data());
  return py::make_tuple(b, t, dp, e);
}

// Walk the subtrees below `starts` (node ids) from configurations `start_cfgs`.
//
// rows: (R, 256) successor configurations; slot[c]: row of configuration c (-1: not computed;
// every start configuration must have one). first_bytes: 256 flags, or empty: tokens whose
// first byte is unflagged are skipped. For every allowed token: its bit is set in `mask`
// (when not empty) and, with `collect`, (token, configuration after it) is recorded.
// Returns (pending nodes, their configurations, tokens, configurations after them): a pending
// node is allowed, has children, and its configuration has no row yet.
py::tuple walk(const u8& byte, const i32& tok, const i32& depth, const i32& end, const i32& rows,
               const i32& slot, const i64& starts, const i64& start_cfgs, const u8& first_bytes, u32w& mask,
               bool collect) {
  const int64_t nodes = byte.shape(0);
  if (tok.shape(0) != nodes || depth.shape(0) != nodes || end.shape(0) != nodes)
    throw std::invalid_argument("trie arrays differ in length");
  if (rows.ndim() != 2 || rows.shape(1) != 256) throw std::invalid_argument("rows must be (R, 256)");
  if (starts.shape(0) != start_cfgs.shape(0)) throw std::invalid_argument("starts and start_cfgs differ in length");
  const bool filter = first_bytes.size() != 0;
  if (filter && first_bytes.shape(0) != 256) throw std::invalid_argument("first_bytes must have 256 entries");
  const int64_t num_rows = rows.shape(0);
  const int64_t num_cfgs = slot.shape(0);
  const int64_t bits = mask.size() * 32;
  const uint8_t* B = byte.data();
  const int32_t* T = tok.data();
  const int32_t* D = depth.data();
  const int32_t* E = end.data();
  const int32_t* R = rows.data();
  const int32_t* S = slot.data();
  const int64_t* st = starts.data();
  const int64_t* sc = start_cfgs.data();
  const uint8_t* F = filter ? first_bytes.data() : nullptr;
  uint32_t* M = mask.size() ? mask.mutable_data() : nullptr;
  const int64_t count = starts.shape(0);
  std::vector<int64_t> pend_node, pend_cfg, out_tok, out_cfg;
  std::string error;
  {
    py::gil_scoped_release release;
    std::vector<const int32_t*> row_at;  // row_at[d]: the row of the configuration at depth d
    auto row_of = [&](int64_t cfg) -> const int32_t* {
      if (cfg < 0 || cfg >= num_cfgs) return nullptr;
      const int32_t s = S[cfg];
      return (s < 0 || s >= num_rows) ? nullptr : R + static_cast<int64_t>(s) * 256;
    };
    for (int64_t k = 0; k < count && error.empty(); ++k) {
      const int64_t root = st[k];
      if (root < 0 || root >= nodes) { error = "start node out of range"; break; }
      const int32_t base = D[root];
      const int32_t* root_row = row_of(sc[k]);
      if (root_row == nullptr) { error = "a start configuration has no row"; break; }
      if (static_cast<int64_t>(row_at.size()) <= base) row_at.resize(base + 1);
      row_at[base] = root_row;
      int64_t i = root + 1;
      const int64_t stop = E[root];
      while (i < stop) {
        const int32_t d = D[i];
        const int32_t next = row_at[d - 1][B[i]];
        if (next == kDead || (F != nullptr && d == 1 && !F[B[i]])) {
          i = E[i];  // the whole subtree below a rejected byte
          continue;
        }
        const int32_t t = T[i];
        if (t >= 0) {
          if (M != nullptr) {
            if (t >= bits) { error = "token id beyond the mask"; break; }
            M[t >> 5] |= 1u << (t & 31);
          }
          if (collect) { out_tok.push_back(t); out_cfg.push_back(next); }
        }
        if (E[i] > i + 1) {  // children below
          const int32_t* r = row_of(next);
          if (r == nullptr) {
            pend_node.push_back(i);
            pend_cfg.push_back(next);
            i = E[i];
            continue;
          }
          if (static_cast<int64_t>(row_at.size()) <= d) row_at.resize(d + 1);
          row_at[d] = r;
        }
        ++i;
      }
    }
  }
  if (!error.empty()) throw std::invalid_argument(error);
  auto to_array = [](const std::vector<int64_t>& v) {
    i64 a(static_cast<py::ssize_t>(v.size()));
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
  };
  return py::make_tuple(to_array(pend_node), to_array(pend_cfg), to_array(out_tok), to_array(out_cfg));
}

// Set the bits of token ids `ids` in `mask`.
void set_bits(u32w& mask, const i64& ids) {
  const int64_t n = ids.shape(0), bits = mask.size() * 32;
  const int64_t* I = ids.data();
  uint32_t* M = mask.mutable_data();
  for (int64_t k = 0; k < n; ++k) {
    if (I[k] < 0 || I[k] >= bits) throw std::invalid_argument("token id beyond the mask");
  }
  py::gil_scoped_release release;
  for (int64_t k = 0; k < n; ++k) M[I[k] >> 5] |= 1u << (I[k] & 31);
}

// Tokens with the bytes of another token: bit dups[k, 1] is set when bit dups[k, 0] is.
void copy_dups(u32w& mask, const i64& dups) {
  if (dups.size() == 0) return;
  if (dups.ndim() != 2 || dups.shape(1) != 2) throw std::invalid_argument("dups must be (n, 2)");
  const int64_t n = dups.shape(0), bits = mask.size() * 32;
  const int64_t* P = dups.data();
  uint32_t* M = mask.mutable_data();
  for (int64_t k = 0; k < 2 * n; ++k) {
    if (P[k] < 0 || P[k] >= bits) throw std::invalid_argument("token id beyond the mask");
  }
  py::gil_scoped_release release;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t c = P[2 * k], d = P[2 * k + 1];
    if (M[c >> 5] >> (c & 31) & 1u) M[d >> 5] |= 1u << (d & 31);
  }
}

// For each flagged byte b (flags[256]), set the bits of ids[offsets[b]:offsets[b + 1]].
void set_runs(u32w& mask, const i64& ids, const i64& offsets, const u8& flags) {
  if (offsets.shape(0) != 257 || flags.shape(0) != 256) throw std::invalid_argument("offsets needs 257 entries, flags 256");
  const int64_t n = ids.shape(0), bits = mask.size() * 32;
  const int64_t* I = ids.data();
  const int64_t* O = offsets.data();
  const uint8_t* F = flags.data();
  for (int b = 0; b < 256; ++b)
    if (O[b] < 0 || O[b] > O[b + 1] || O[b + 1] > n) throw std::invalid_argument("bad offsets");
  for (int64_t k = 0; k < n; ++k)
    if (I[k] < 0 || I[k] >= bits) throw std::invalid_argument("token id beyond the mask");
  uint32_t* M = mask.mutable_data();
  py::gil_scoped_release release;
  for (int b = 0; b < 256; ++b)
    if (F[b])
      for (int64_t k = O[b]; k < O[b + 1]; ++k) M[I[k] >> 5] |= 1u << (I[k] & 31);
}

// Group the 256 bytes by their column of `targets` (k, 256): returns (group per byte, numbered
// in order of first appearance; the column of each group (g, k)). A configuration with several
// stack tops closes each group of bytes once.
py::tuple group_bytes(const i32& targets) {
  if (targets.ndim() != 2 || targets.shape(1) != 256) throw std::invalid_argument("targets must be (k, 256)");
  const int64_t k = targets.shape(0);
  const int32_t* T = targets.data();
  i32 gid(256);
  int32_t* G = gid.mutable_data();
  std::vector<int32_t> reps;  // g * k
  int32_t groups = 0;
  for (int b = 0; b < 256; ++b) {
    int32_t found = -1;
    for (int32_t g = 0; g < groups && found < 0; ++g) {
      bool same = true;
      for (int64_t j = 0; j < k && same; ++j) same = reps[g * k + j] == T[j * 256 + b];
      if (same) found = g;
    }
    if (found < 0) {
      found = groups++;
      for (int64_t j = 0; j < k; ++j) reps.push_back(T[j * 256 + b]);
    }
    G[b] = found;
  }
  py::array_t<int32_t> r({static_cast<py::ssize_t>(groups), static_cast<py::ssize_t>(k)});
  std::copy(reps.begin(), reps.end(), r.mutable_data());
  return py::make_tuple(gid, r);
}

}  // namespace

void register_automaton(py::module_& m);     // src/core/automaton.cpp
void register_config_index(py::module_& m);  // src/core/config_index.cpp
void register_names(py::module_& m);         // src/core/names.cpp
void register_apply(py::module_& m);         // src/core/apply.cpp
void register_expr_plan(py::module_& m);     // src/core/expr_plan.cpp
void register_node_init(py::module_& m);     // src/core/node_init.cpp

PYBIND11_MODULE(_core, m) {
  m.doc() = "structgen's native core: rule DFAs (src/core/automaton.cpp), the configuration index (src/core/config_index.cpp), member-name tracking (src/core/names.cpp), the vocabulary trie and the mask walk";
  register_automaton(m);
  register_config_index(m);
  register_names(m);
  register_apply(m);
  register_expr_plan(m);
  register_node_init(m);
  m.def("build_trie", &build_trie, py::arg("flat"), py::arg("offsets"), py::arg("ids"));
  m.def("walk", &walk, py::arg("byte"), py::arg("tok"), py::arg("depth"), py::arg("end"), py::arg("rows"),
        py::arg("slot"), py::arg("starts"), py::arg("start_cfgs"), py::arg("first_bytes"), py::arg("mask").noconvert(),
        py::arg("collect"));
  m.def("set_bits", &set_bits, py::arg("mask").noconvert(), py::arg("ids"));
  m.def("copy_dups", &copy_dups, py::arg("mask").noconvert(), py::arg("dups"));
  m.def("set_runs", &set_runs, py::arg("mask").noconvert(), py::arg("ids"), py::arg("offsets"), py::arg("flags"));
  m.def("group_bytes", &group_bytes, py::arg("targets"));
}
