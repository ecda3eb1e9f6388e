// structgen._core, expressions in: the serializer of grammar expression trees into the node
// arrays of fa.hpp, and the rule plan of a grammar (which rules are called, which inlined).
//
// Why native: before the automata are built, a grammar's expression trees were walked in Python
// four times per node (counted repeats, references per rule, sizes for the inlining decision
// twice) and a fifth time to serialize them. Those walks were about a quarter of compiling a
// typical schema. Here the trees are walked once, straight from the Python objects, and every
// analysis after that reads the flat arrays.
//
// Rule references are serialized as REF placeholders (the rule's index): whether a reference
// becomes a CALL or an INLINE copy is decided by the serializer's `plan` over its own nodes,
// and its `resolve` patches the placeholders (structgen/index/automaton.py, RulePlan).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fa.hpp"
#include "pyslots.hpp"

namespace py = pybind11;

namespace {

using i32 = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// A Python int clamped to [lo, kInt32Max] (counts beyond int32 cannot be built under any limit).
int32_t clamped(PyObject* v, int64_t lo = 0) {
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow > 0) return static_cast<int32_t>(kInt32Max);
  if (overflow < 0) return static_cast<int32_t>(lo);
  return static_cast<int32_t>(std::max<long long>(lo, std::min<long long>(x, kInt32Max)));
}

int32_t as_int(PyObject* v) {
  const long long x = PyLong_AsLongLong(v);
  if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (x < std::numeric_limits<int32_t>::min() || x > kInt32Max) throw std::invalid_argument("integer out of range");
  return static_cast<int32_t>(x);
}

// Ids by object address, open addressing: the serializer's memo and the reference check's
// visited set take an entry per distinct node of a grammar (tens of thousands in a large
// schema's), where std::unordered_map allocated a node for each.
class PointerIds {
 public:
  PointerIds() : slots_(256, Slot{nullptr, -1}) {}
  // the id of `p`, or -1
  int32_t find(const void* p) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = slot(p, mask);; i = (i + 1) & mask) {
      if (slots_[i].key == p) return slots_[i].id;
      if (slots_[i].key == nullptr) return -1;
    }
  }
  // `p` (not null) gets `id` unless it has one; whether it was new
  bool insert(const void* p, int32_t id) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    const size_t mask = slots_.size() - 1;
    size_t i = slot(p, mask);
    for (; slots_[i].key != nullptr; i = (i + 1) & mask)
      if (slots_[i].key == p) return false;
    slots_[i] = Slot{p, id};
    ++size_;
    return true;
  }

 private:
  struct Slot {
    const void* key;
    int32_t id;
  };
  static size_t slot(const void* p, size_t mask) {
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(p) >> 4) * 0x9E3779B97F4A7C15ull >> 20) & mask;
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2, Slot{nullptr, -1});
    old.swap(slots_);
    size_ = 0;
    for (const Slot& x : old)
      if (x.key != nullptr) insert(x.key, x.id);
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

// the rule plan over serialized nodes (below), without the GIL
void plan_rules_core(const int32_t* N, int64_t n, const int32_t* D, int64_t nd, const int32_t* RT, int32_t R,
                     const int32_t* rank, int64_t inline_limit, int64_t split_limit, std::vector<uint8_t>& recursive,
                     std::vector<uint8_t>& extra);

// A Python sequence of ints as int32 (out of range: ValueError).
std::vector<int32_t> int_list(const py::handle& seq) {
  py::object f = py::reinterpret_steal<py::object>(PySequence_Fast(seq.ptr(), "expected a sequence of ints"));
  if (!f) throw py::error_already_set();
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(f.ptr());
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) out[i] = as_int(PySequence_Fast_GET_ITEM(f.ptr(), i));
  return out;
}

// Serializer of expression trees (structgen.grammar: Lit, Regex, CharSet, Seq, Alt, Repeat,
// Ref, Dfa) into nodes of four int32 (kind, a, b, c) over one int32 data array. A subtree met
// again (the same object) is serialized once; a regex is parsed once per (pattern, flags).
class ExprSerializer {
 public:
  // classes: the node classes (Lit, Regex, CharSet, Seq, Alt, Repeat, Ref, Dfa); parse_regex:
  // (pattern, flags) -> Expr; names: rule name -> index (REF placeholders) or None; on_ref:
  // called with a name that cannot be referenced here (raises the Python error).
  ExprSerializer(py::tuple classes, py::object parse_regex, py::object names, py::object on_ref)
      : parse_regex_(std::move(parse_regex)), names_(std::move(names)), on_ref_(std::move(on_ref)) {
    if (classes.size() != 8) throw std::invalid_argument("expected the 8 expression classes");
    for (int i = 0; i < 8; ++i) types_[i] = reinterpret_cast<PyTypeObject*>(classes[i].ptr());
    classes_ = classes;
    for (const char* a : {"text", "pattern", "flags", "ranges", "items", "options", "item", "min", "max", "name", "trans",
                          "final"})
      attrs_.push_back(py::reinterpret_steal<py::object>(PyUnicode_InternFromString(a)));
    // each field read from its slot, where the class keeps it there (a getattr per field,
    // through the type's member descriptor, was most of serializing a large schema's rules)
    for (int w = 0; w < kFields; ++w)
      slot_[w] = structgen::slot_offset(classes[kOwner[w]].ptr(), PyUnicode_AsUTF8(attrs_[w].ptr()));
  }

  int32_t add(py::handle root) {
    int32_t id = leaf(root.ptr());
    if (id >= 0) return id;
    struct Frame {
      py::object e, kids;  // kids: a list or tuple (PySequence_Fast)
      int kind;
      Py_ssize_t next = 0;
    };
    std::vector<Frame> stack;
    auto push = [&](PyObject* e) {
      const int kind = kind_of(e);
      py::object kids;
      if (kind == kSeq || kind == kAlt) {
        kids = fast(attr(e, kind == kSeq ? kItems : kOptions));
      } else if (kind == kRepeat) {
        kids = py::reinterpret_steal<py::object>(PyTuple_Pack(1, attr(e, kItem).ptr()));
      } else {  // kRegex: the parsed expression is its one child
        kids = py::reinterpret_steal<py::object>(
            PyTuple_Pack(1, parse_regex_(attr(e, kPattern), attr(e, kFlags)).ptr()));
      }
      stack.push_back(Frame{py::reinterpret_borrow<py::object>(e), std::move(kids), kind});
    };
    push(root.ptr());
    while (!stack.empty()) {
      Frame& f = stack.back();
      PyObject* kids = f.kids.ptr();
      const Py_ssize_t n = PySequence_Fast_GET_SIZE(kids);
      if (f.next < n) {
        PyObject* k = PySequence_Fast_GET_ITEM(kids, f.next);
        ++f.next;
        if (leaf(k) < 0) push(k);  // `f` may dangle after the push: not used again this turn
        continue;
      }
      PyObject* e = f.e.ptr();
      const int32_t at = static_cast<int32_t>(data_.size());
      if (f.kind == kSeq || f.kind == kAlt) {
        for (Py_ssize_t i = 0; i < n; ++i) data_.push_back(memo_.find(PySequence_Fast_GET_ITEM(kids, i)));
        emit(f.kind == kSeq ? fa::SEQ : fa::ALT, at, static_cast<int32_t>(n), 0);
      } else if (f.kind == kRepeat) {
        PyObject* mx = attr(e, kMax).ptr();
        const int32_t lo = clamped(attr(e, kMin).ptr()), hi = mx == Py_None ? -1 : clamped(mx);
        emit(fa::REP, memo_.find(PySequence_Fast_GET_ITEM(kids, 0)), lo, hi);
        largest_bound_ = std::max(largest_bound_, hi >= 0 ? hi : lo);
      } else {
        const Py_ssize_t len = PyUnicode_GetLength(attr(e, kPattern).ptr());
        emit(fa::REGEX, memo_.find(PySequence_Fast_GET_ITEM(kids, 0)), static_cast<int32_t>(std::min<Py_ssize_t>(len, kInt32Max)), 0);
      }
      remember(e, last());
      if (f.kind == kRegex) note_regex(e, last());
      stack.pop_back();
    }
    return memo_.find(root.ptr());
  }

  // An automaton whose edges are expression nodes: edges[s] lists (node, target) pairs.
  int32_t graph(py::sequence final_, py::sequence edges) {
    const int32_t at = static_cast<int32_t>(data_.size());
    data_.push_back(static_cast<int32_t>(final_.size()));
    for (py::handle f : final_) data_.push_back(PyObject_IsTrue(f.ptr()) ? 1 : 0);
    for (py::handle row : edges) {
      py::sequence r = py::reinterpret_borrow<py::sequence>(row);
      data_.push_back(static_cast<int32_t>(r.size()));
      for (py::handle x : r) {
        py::sequence p = py::reinterpret_borrow<py::sequence>(x);
        data_.push_back(as_int(p[0].ptr()));
        data_.push_back(as_int(p[1].ptr()));
      }
    }
    emit(fa::EGRAPH, at, static_cast<int32_t>(data_.size()) - at, 0);
    return last();
  }

  // A grammar's rule bodies, in order: their nodes (kept as the rules' roots for plan/resolve).
  py::list add_rules(const py::handle& bodies) {
    roots_.clear();
    for (py::handle b : bodies) roots_.push_back(add(b));
    py::list out(roots_.size());
    for (size_t r = 0; r < roots_.size(); ++r) out[r] = roots_[r];
    return out;
  }

  // The plan of the rules of add_rules (plan_rules_core over this serializer's own nodes, REF
  // placeholders unresolved): (recursive rules, other rules to call), as sorted indices.
  // rank: each rule's name's rank in sorted order (ties of the splitting go to the first).
  py::tuple plan(const py::handle& rank, int64_t inline_limit, int64_t split_limit) {
    const std::vector<int32_t> rk = int_list(rank);
    const auto R = static_cast<int32_t>(roots_.size());
    if (static_cast<int32_t>(rk.size()) != R) throw std::invalid_argument("rank must have one entry per rule");
    std::vector<uint8_t> recursive, extra;
    {
      py::gil_scoped_release release;
      plan_rules_core(nodes_.data(), size(), data_.data(), static_cast<int64_t>(data_.size()), roots_.data(), R,
                      rk.data(), inline_limit, split_limit, recursive, extra);
    }
    py::list rec, ext;
    for (int32_t r = 0; r < R; ++r) {
      if (recursive[r]) rec.append(r);
      if (extra[r]) ext.append(r);
    }
    return py::make_tuple(rec, ext);
  }

  // Every REF placeholder to rule r becomes (CALL, call_ids[r]) where call_ids[r] >= 0, else
  // (INLINE, rule_ids[r], root of r): now, and for placeholders serialized later when the
  // nodes are next read (arrays, rule_key).
  void resolve(const py::handle& call_ids, const py::handle& rule_ids) {
    const std::vector<int32_t> c = int_list(call_ids), ids = int_list(rule_ids);
    if (c.size() != roots_.size() || ids.size() != roots_.size()) throw std::invalid_argument("one entry per rule");
    table_.clear();
    for (size_t r = 0; r < roots_.size(); ++r) {
      if (c[r] >= 0) {
        fa::push2(table_, fa::CALL, c[r]);
        fa::push2(table_, 0, 0);
      } else {
        fa::push2(table_, fa::INLINE, ids[r]);
        fa::push2(table_, roots_[r], 0);
      }
    }
    patch_refs();
  }

  // rule_key (fa.hpp) of node `root` of the resolved nodes
  py::bytes rule_key(int32_t root) {
    patch_refs();
    if (root < 0 || root >= size()) throw std::invalid_argument("node out of range");
    return py::bytes(fa::rule_key(nodes_.data(), size(), data_.data(), static_cast<int64_t>(data_.size()), root));
  }

  py::tuple arrays() {
    patch_refs();
    py::array_t<int32_t> nodes({static_cast<py::ssize_t>(nodes_.size() / 4), py::ssize_t{4}});
    std::copy(nodes_.begin(), nodes_.end(), nodes.mutable_data());
    py::array_t<int32_t> data(static_cast<py::ssize_t>(data_.size()));
    std::copy(data_.begin(), data_.end(), data.mutable_data());
    return py::make_tuple(nodes, data);
  }

  // The REF placeholders: their node ids, in order of serialization.
  py::array_t<int32_t> refs() const {
    py::array_t<int32_t> out(static_cast<py::ssize_t>(refs_.size()));
    std::copy(refs_.begin(), refs_.end(), out.mutable_data());
    return out;
  }

  int64_t size() const { return static_cast<int64_t>(nodes_.size() / 4); }

  // The largest bound of a repeat serialized so far (its max, or its min when unbounded; -1
  // without repeats): counters are lifted only past a threshold (RulePlan.large_repeats).
  int32_t largest_bound() const { return largest_bound_; }

  // Per rule of add_rules, the largest bound of a repeat in its body, parsed regexes included
  // and references to other rules not followed (-1: none): the rules lift_counters rewrites.
  // One pass over the nodes, each after its children (the serialization's order), where a
  // Python walk of the expression trees was a sixth of compiling the largest schemas.
  py::list rule_bounds() const {
    const int64_t n = size();
    std::vector<int32_t> big(static_cast<size_t>(n), -1);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t* x = nodes_.data() + 4 * i;
      int32_t b = -1;
      if (x[0] == fa::SEQ || x[0] == fa::ALT) {
        for (int32_t k = 0; k < x[2]; ++k) b = std::max(b, big[static_cast<size_t>(data_[static_cast<size_t>(x[1] + k)])]);
      } else if (x[0] == fa::REP) {
        b = std::max(big[static_cast<size_t>(x[1])], x[3] >= 0 ? x[3] : x[2]);
      } else if (x[0] == fa::REGEX) {
        b = big[static_cast<size_t>(x[1])];
      }
      big[static_cast<size_t>(i)] = b;
    }
    py::list out(roots_.size());
    for (size_t r = 0; r < roots_.size(); ++r) out[r] = big[static_cast<size_t>(roots_[r])];
    return out;
  }

  // Per rule of add_rules, whether its body matches the empty string: the least fixed point
  // over the REF placeholders, each pass one sweep over the nodes in serialization order
  // (children first), repeated while a rule turned nullable. (lift_counters needs it for the
  // rules past its threshold; a Python fixed point over the expression trees was about a
  // millisecond of a large counted schema's compile.)
  py::list rule_nullables() const {
    const int64_t n = size();
    const size_t R = roots_.size();
    std::vector<uint8_t> node_null(static_cast<size_t>(n), 0), rule_null(R, 0);
    auto kid = [&](int32_t x) -> bool {
      if (x < 0 || x >= n) throw std::invalid_argument("node out of range");
      return node_null[static_cast<size_t>(x)] != 0;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (int64_t i = 0; i < n; ++i) {
        const int32_t* x = nodes_.data() + 4 * i;
        bool v = false;
        switch (x[0]) {
          case fa::LIT:
            v = x[2] == 0;
            break;
          case fa::SEQ:
            v = true;
            for (int32_t k = 0; k < x[2] && v; ++k) v = kid(data_[static_cast<size_t>(x[1] + k)]);
            break;
          case fa::ALT:
            for (int32_t k = 0; k < x[2] && !v; ++k) v = kid(data_[static_cast<size_t>(x[1] + k)]);
            break;
          case fa::REP:
            v = x[2] == 0 || kid(x[1]);
            break;
          case fa::REGEX:
            v = kid(x[1]);
            break;
          case fa::REF:
            if (x[1] < 0 || static_cast<size_t>(x[1]) >= R) throw std::invalid_argument("rule reference out of range");
            v = rule_null[static_cast<size_t>(x[1])] != 0;
            break;
          case fa::GRAPH:
            v = data_[static_cast<size_t>(x[1])] > 0 && data_[static_cast<size_t>(x[1]) + 1] != 0;  // (n, final[0], ...)
            break;
          case fa::EGRAPH:  // (graph(): the code-point algebra's serializers, which hold no rules)
            throw std::invalid_argument("rule_nullables: an expression-edged automaton among a grammar's rules");
          default:  // SET; CALL and INLINE only after resolve
            v = false;
        }
        node_null[static_cast<size_t>(i)] = v;
      }
      for (size_t r = 0; r < R; ++r)
        if (!rule_null[r] && node_null[static_cast<size_t>(roots_[r])]) rule_null[r] = 1, changed = true;
    }
    py::list out(R);
    for (size_t r = 0; r < R; ++r) out[r] = py::bool_(rule_null[r] != 0);
    return out;
  }

 private:
  void patch_refs() {
    if (table_.empty()) return;
    const auto R = static_cast<int32_t>(table_.size() / 4);
    for (; patched_ < refs_.size(); ++patched_) {
      int32_t* q = nodes_.data() + 4 * static_cast<int64_t>(refs_[patched_]);
      if (q[0] != fa::REF) continue;
      if (q[1] < 0 || q[1] >= R) throw std::invalid_argument("rule reference out of range");
      std::copy(table_.begin() + 4 * static_cast<int64_t>(q[1]), table_.begin() + 4 * static_cast<int64_t>(q[1]) + 4, q);
    }
  }

  enum { kLit, kRegex, kCharSet, kSeq, kAlt, kRepeat, kRef, kDfa };
  enum { kText, kPattern, kFlags, kRanges, kItems, kOptions, kItem, kMin, kMax, kName, kTrans, kFinal, kFields };
  // the class (index into `classes`) each field belongs to
  static constexpr int kOwner[kFields] = {kLit, kRegex, kRegex, kCharSet, kSeq, kAlt, kRepeat, kRepeat, kRepeat, kRef, kDfa, kDfa};
  Py_ssize_t slot_[kFields];  // slot_offset of each field in its class, or -1

  int kind_of(PyObject* e) const {
    PyTypeObject* t = Py_TYPE(e);
    for (int i = 0; i < 8; ++i)
      if (t == types_[i]) return i;  // exact types: no node class is subclassed
    throw py::type_error("not a grammar expression: " + py::repr(e).cast<std::string>());
  }

  py::object attr(PyObject* e, int which) const {
    const Py_ssize_t off = Py_TYPE(e) == types_[kOwner[which]] ? slot_[which] : -1;
    PyObject* v = structgen::slot_or_attr(e, off, attrs_[which].ptr());  // (borrowed)
    if (v == nullptr) throw py::error_already_set();
    return py::reinterpret_borrow<py::object>(v);
  }

  static py::object fast(const py::object& seq) {
    PyObject* f = PySequence_Fast(seq.ptr(), "expected a sequence");
    if (f == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(f);
  }

  void emit(int32_t kind, int32_t a, int32_t b, int32_t c) {
    fa::push2(nodes_, kind, a);
    fa::push2(nodes_, b, c);
  }

  int32_t last() const { return static_cast<int32_t>(nodes_.size() / 4 - 1); }

  // `e` is node `id` from now on
  void remember(PyObject* e, int32_t id) {
    memo_.insert(e, id);
    keep_.push_back(py::reinterpret_borrow<py::object>(e));  // the memo is keyed by address
  }

  // after a Regex's node is built, the (pattern, flags) key points at it for later objects
  void note_regex(PyObject* e, int32_t id) {
    py::object key = py::make_tuple(attr(e, kPattern), attr(e, kFlags));
    if (PyDict_SetItem(regex_.ptr(), key.ptr(), py::int_(id).ptr()) != 0) throw py::error_already_set();
  }

  // The node of `e` if it is serialized already or a leaf (serialized here), else -1.
  int32_t leaf(PyObject* e) {
    const int32_t known = memo_.find(e);
    if (known >= 0) return known;
    const int kind = kind_of(e);
    const int32_t at = static_cast<int32_t>(data_.size());
    switch (kind) {
      case kLit: {
        py::object text = attr(e, kText);
        PyObject* s = text.ptr();
        if (!PyUnicode_Check(s)) throw py::type_error("a literal's text must be a str");
        const Py_ssize_t n = PyUnicode_GET_LENGTH(s);
        const int k = PyUnicode_KIND(s);
        const void* d = PyUnicode_DATA(s);
        for (Py_ssize_t i = 0; i < n; ++i) data_.push_back(static_cast<int32_t>(PyUnicode_READ(k, d, i)));
        emit(fa::LIT, at, static_cast<int32_t>(n), 0);
        break;
      }
      case kCharSet: {
        py::object ranges = fast(attr(e, kRanges));
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(ranges.ptr());
        for (Py_ssize_t i = 0; i < n; ++i) {
          py::object r = fast(py::reinterpret_borrow<py::object>(PySequence_Fast_GET_ITEM(ranges.ptr(), i)));
          if (PySequence_Fast_GET_SIZE(r.ptr()) != 2) throw std::invalid_argument("a range is a (lo, hi) pair");
          data_.push_back(as_int(PySequence_Fast_GET_ITEM(r.ptr(), 0)));
          data_.push_back(as_int(PySequence_Fast_GET_ITEM(r.ptr(), 1)));
        }
        emit(fa::SET, at, static_cast<int32_t>(n), 0);
        break;
      }
      case kRef: {
        py::object name = attr(e, kName);
        PyObject* id = names_.is_none() ? nullptr : PyDict_GetItemWithError(names_.ptr(), name.ptr());
        if (id == nullptr) {
          if (PyErr_Occurred()) throw py::error_already_set();
          on_ref_(name);  // raises
          throw std::invalid_argument("a rule reference that cannot be resolved");
        }
        refs_.push_back(static_cast<int32_t>(nodes_.size() / 4));
        emit(fa::REF, as_int(id), 0, 0);
        break;
      }
      case kDfa: {
        py::object trans = fast(attr(e, kTrans)), fin = fast(attr(e, kFinal));
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(trans.ptr());
        if (PySequence_Fast_GET_SIZE(fin.ptr()) != n) throw std::invalid_argument("an automaton's final flags do not match its states");
        data_.push_back(static_cast<int32_t>(n));
        for (Py_ssize_t s = 0; s < n; ++s) data_.push_back(PyObject_IsTrue(PySequence_Fast_GET_ITEM(fin.ptr(), s)) ? 1 : 0);
        for (Py_ssize_t s = 0; s < n; ++s) {
          py::object row = fast(py::reinterpret_borrow<py::object>(PySequence_Fast_GET_ITEM(trans.ptr(), s)));
          const Py_ssize_t m = PySequence_Fast_GET_SIZE(row.ptr());
          data_.push_back(static_cast<int32_t>(m));
          for (Py_ssize_t j = 0; j < m; ++j) {
            py::object x = fast(py::reinterpret_borrow<py::object>(PySequence_Fast_GET_ITEM(row.ptr(), j)));
            if (PySequence_Fast_GET_SIZE(x.ptr()) != 3) throw std::invalid_argument("an automaton edge is (lo, hi, target)");
            for (int q = 0; q < 3; ++q) data_.push_back(as_int(PySequence_Fast_GET_ITEM(x.ptr(), q)));
          }
        }
        emit(fa::GRAPH, at, static_cast<int32_t>(data_.size()) - at, 0);
        break;
      }
      case kRegex: {  // one node per (pattern, flags), whichever object spells it
        py::object key = py::make_tuple(attr(e, kPattern), attr(e, kFlags));
        PyObject* got = PyDict_GetItemWithError(regex_.ptr(), key.ptr());
        if (got == nullptr) {
          if (PyErr_Occurred()) throw py::error_already_set();
          return -1;
        }
        remember(e, as_int(got));
        return as_int(got);
      }
      default:
        return -1;  // Seq, Alt, Repeat: built from their children
    }
    remember(e, last());
    return last();
  }

  PyTypeObject* types_[8];
  py::tuple classes_;  // holds the classes whose type objects types_ points at
  py::object parse_regex_, names_, on_ref_;
  py::dict regex_;
  std::vector<py::object> attrs_;
  std::vector<int32_t> nodes_, data_, refs_;
  std::vector<int32_t> roots_, table_;  // add_rules' roots; resolve's (kind, a, b, c) per rule
  size_t patched_ = 0;  // refs_[0, patched_) are resolved
  int32_t largest_bound_ = -1;
  PointerIds memo_;
  std::vector<py::object> keep_;
};

// ---------------------------------------------------------------------------- rule plan

constexpr int64_t kSizeCap = int64_t{1} << 60;  // sizes saturate (only compared with the limits)

int64_t sat_add(int64_t a, int64_t b) { return std::min(kSizeCap, a + b); }
int64_t sat_mul(int64_t a, int64_t m) { return m > 0 && a > kSizeCap / m ? kSizeCap : std::min(kSizeCap, a * m); }

int64_t utf8_length(const int32_t* cps, int32_t n) {
  int64_t k = 0;
  for (int32_t i = 0; i < n; ++i) k += cps[i] < 0x80 ? 1 : cps[i] < 0x800 ? 2 : cps[i] < 0x10000 ? 3 : 4;
  return k;
}

// Sizes of rules as inlined, for the inlining decision: expression nodes (weighed = false) or
// estimated NFA states (weighed = true). A reference to a called rule counts 1, one to an
// inlined rule the size of its body. Sizes of subtrees without references are kept by node
// (they depend on nothing else); a rule's size is kept once computed, as the decision
// procedure below expects (it recomputes the sizes it needs fresh).
struct Sizer {
  const int32_t* N;
  const int32_t* D;
  const int32_t* roots;
  const std::vector<uint8_t>& called;
  bool weighed = false;
  std::vector<int64_t> memo, sizes;

  Sizer(const int32_t* nodes, const int32_t* data, int64_t n, const int32_t* roots_, int64_t rules,
        const std::vector<uint8_t>& called_)
      : N(nodes), D(data), roots(roots_), called(called_), memo(n, -1), sizes(rules, -1) {}

  void reset(bool w) {
    weighed = w;
    std::fill(memo.begin(), memo.end(), -1);
    std::fill(sizes.begin(), sizes.end(), -1);
  }

  int64_t size_of(int32_t r) {
    if (sizes[r] < 0) {
      sizes[r] = 1;  // rules not called form a DAG: this guard is never read on a real cycle
      sizes[r] = esize(roots[r]).first;
    }
    return sizes[r];
  }

  // An automaton counts its states and its edges as a byte NFA has them (an edge of
  // non-ASCII code points is several byte sequences), in both modes: an expression of the
  // same language would have at least as many nodes. Counted as one node (or by its states
  // alone), the member names of an object (a trie of tens of states, each with a handful of
  // edges) were copied into every rule that refers to them, and large rules holding many
  // were determinised whole: o358 of MaskBench built in twice the time.
  std::unordered_map<uint64_t, int64_t> utf8_counts;
  int64_t graph_size(const int32_t* d, int64_t len) {
    const int64_t n = d[0];
    int64_t size = n;
    for (int64_t k = 1 + n, s = 0; s < n && k < len; ++s) {
      const int64_t cnt = d[k++];
      for (int64_t j = 0; j < cnt && k + 2 < len; ++j, k += 3) {
        const int32_t lo = d[k], hi = d[k + 1];
        size += lo < 0x80 ? 1 : 0;
        if (hi >= 0x80) {
          const int32_t from = std::max<int32_t>(lo, 0x80);
          const uint64_t key = static_cast<uint64_t>(static_cast<uint32_t>(from)) << 32 | static_cast<uint32_t>(hi);
          auto it = utf8_counts.find(key);
          if (it == utf8_counts.end()) it = utf8_counts.emplace(key, fa::utf8_sequence_count(from, hi)).first;
          size += it->second;
        }
      }
    }
    return size;
  }

  std::pair<int64_t, bool> esize(int32_t i) {  // (size, holds a reference)
    const int32_t* x = N + 4 * int64_t{i};
    switch (x[0]) {
      case fa::REF:
        return {called[x[1]] ? 1 : size_of(x[1]), true};
      case fa::SEQ:
      case fa::ALT:
      case fa::REP: {
        if (memo[i] >= 0) return {memo[i], false};
        int64_t n;
        bool refs = false;
        if (x[0] == fa::REP) {
          auto [k, r] = esize(x[1]);
          const int64_t times = x[3] > 0 ? x[3] : x[2];  // max, or min when unbounded (or 0)
          n = sat_add(1, sat_mul(k, std::max<int64_t>(1, times)));
          refs = r;
        } else {
          n = x[0] == fa::ALT && weighed ? 3 : 1;
          for (int32_t j = 0; j < x[2]; ++j) {
            auto [k, r] = esize(D[x[1] + j]);
            n = sat_add(n, k);
            refs = refs || r;
          }
        }
        if (!refs) memo[i] = n;
        return {n, refs};
      }
      default:
        break;
    }
    if (x[0] == fa::GRAPH) {
      if (memo[i] < 0) memo[i] = graph_size(D + x[1], x[2]);
      return {memo[i], false};
    }
    if (!weighed) return {1, false};
    switch (x[0]) {
      case fa::LIT:
        return {utf8_length(D + x[1], x[2]), false};
      case fa::SET:
        return {1 + 2 * int64_t{x[2]}, false};
      case fa::REGEX:
        return {2 * int64_t{x[2]}, false};
      default:
        return {1, false};
    }
  }
};

// Rules on a reference cycle (Tarjan's strongly connected components, iterative).
std::vector<uint8_t> recursive_rules(const std::vector<std::vector<std::pair<int32_t, uint8_t>>>& refs) {
  const int32_t R = static_cast<int32_t>(refs.size());
  std::vector<int32_t> index(R, -1), low(R, 0), stack;
  std::vector<uint8_t> on_stack(R, 0), out(R, 0);
  int32_t counter = 0;
  std::vector<std::pair<int32_t, size_t>> work;
  for (int32_t root = 0; root < R; ++root) {
    if (index[root] >= 0) continue;
    work.assign(1, {root, 0});
    while (!work.empty()) {
      auto [v, i] = work.back();
      work.pop_back();
      if (i == 0) {
        index[v] = low[v] = counter++;
        stack.push_back(v);
        on_stack[v] = 1;
      }
      bool recurse = false;
      for (size_t j = i; j < refs[v].size(); ++j) {
        const int32_t w = refs[v][j].first;
        if (index[w] < 0) {
          work.push_back({v, j + 1});
          work.push_back({w, 0});
          recurse = true;
          break;
        }
        if (on_stack[w]) low[v] = std::min(low[v], index[w]);
      }
      if (recurse) continue;
      if (low[v] == index[v]) {
        std::vector<int32_t> comp;
        while (true) {
          const int32_t w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          comp.push_back(w);
          if (w == v) break;
        }
        bool self = false;
        for (auto& p : refs[v]) self = self || p.first == v;
        if (comp.size() > 1 || self)
          for (int32_t w : comp) out[w] = 1;
      }
      if (!work.empty()) {
        const int32_t parent = work.back().first;
        low[parent] = std::min(low[parent], low[v]);
      }
    }
  }
  return out;
}

// The plan of a grammar's rules, from its serialized bodies (`RT[r]`: rule r's node; rule
// references as REF placeholders), without the GIL. Fills one flag per rule:
//  - recursive: rules on a reference cycle (they are always called);
//  - extra: non-recursive rules to call rather than inline: those referenced more than once
//    whose body is larger than `inline_limit` nodes and, inside a rule whose inlined NFA would
//    pass `split_limit` states (estimated), its largest references until it would not (ties go
//    to the first by `rank`, the rank of each rule's name in sorted order).
void plan_rules_core(const int32_t* N, int64_t n, const int32_t* D, int64_t nd, const int32_t* RT, int32_t R,
                     const int32_t* rank, int64_t inline_limit, int64_t split_limit, std::vector<uint8_t>& recursive,
                     std::vector<uint8_t>& extra) {
  for (int32_t r = 0; r < R; ++r)
    if (RT[r] < 0 || RT[r] >= n) throw std::invalid_argument("rule root out of range");
  std::vector<uint8_t> called(R, 0);
  extra.assign(R, 0);
  // references per node, bottom-up (a node follows its children), with occurrence counts
  // saturating at 2: "referenced more than once" is all the counts decide
  std::vector<std::vector<std::pair<int32_t, uint8_t>>> nref(n);
  std::vector<uint8_t> cnt(R, 0);
  std::vector<int32_t> touched;
  auto child = [&](int64_t i, int64_t c) {
    if (c < 0 || c >= i) throw std::invalid_argument("a node must follow its children");
    return c;
  };
  for (int64_t i = 0; i < n; ++i) {
    const int32_t* x = N + 4 * i;
    if (x[0] == fa::REF) {
      if (x[1] < 0 || x[1] >= R) throw std::invalid_argument("rule reference out of range");
      nref[i].push_back({x[1], 1});
    } else if (x[0] == fa::SEQ || x[0] == fa::ALT) {
      if (x[1] < 0 || x[2] < 0 || int64_t{x[1]} + x[2] > nd) throw std::invalid_argument("node data out of range");
      touched.clear();
      for (int32_t j = 0; j < x[2]; ++j)
        for (auto [name, k] : nref[child(i, D[x[1] + j])]) {
          if (!cnt[name]) touched.push_back(name);
          cnt[name] = static_cast<uint8_t>(std::min(2, cnt[name] + k));
        }
      std::sort(touched.begin(), touched.end());
      for (int32_t name : touched) {
        nref[i].push_back({name, cnt[name]});
        cnt[name] = 0;
      }
    } else if (x[0] == fa::REP) {
      nref[i] = nref[child(i, x[1])];
    }
  }
  std::vector<std::vector<std::pair<int32_t, uint8_t>>> refs(R);
  std::vector<int32_t> uses(R, 0);
  for (int32_t r = 0; r < R; ++r) {
    refs[r] = nref[RT[r]];
    for (auto [name, k] : refs[r]) uses[name] = std::min(2, uses[name] + k);
  }
  nref.clear();
  recursive = recursive_rules(refs);
  called = recursive;
  Sizer sz(N, D, n, RT, R, called);
  // expression nodes: rules used in several places and large are called
  for (int32_t r = 0; r < R; ++r)
    if (uses[r] > 1 && !recursive[r] && sz.size_of(r) > inline_limit) extra[r] = 1;
  for (int32_t r = 0; r < R; ++r) called[r] = called[r] || extra[r];
  // estimated NFA states: split a rule too large to determinise whole
  sz.reset(true);
  std::vector<int32_t> kids;
  for (int32_t r = 0; r < R; ++r) {
    while (sz.size_of(r) > split_limit) {
      kids.clear();
      for (auto [name, k] : refs[r])
        if (!called[name]) kids.push_back(name);
      std::sort(kids.begin(), kids.end(), [&](int32_t a, int32_t b) { return rank[a] < rank[b]; });
      int32_t largest = -1;
      int64_t best = -1;
      for (int32_t c : kids) {
        const int64_t s = sz.size_of(c);
        if (s > best) {
          best = s;
          largest = c;
        }
      }
      if (largest < 0 || best <= inline_limit) break;
      called[largest] = 1;
      extra[largest] = 1;
      sz.sizes[r] = sz.esize(RT[r]).first;
    }
  }
}

// The first reference to an undefined rule: None, or (rule, name) for the first rule in order
// with one and the least such name in it (`rules`: name -> expression; classes: (Seq, Alt,
// Repeat, Ref)). Each distinct subtree is visited once over all rules (the converter shares
// subtrees between rules): one in a later rule already seen held defined names only.
py::object undefined_reference(py::dict rules, py::tuple classes) {
  if (classes.size() != 4) throw std::invalid_argument("expected (Seq, Alt, Repeat, Ref)");
  PyTypeObject* T[4];
  for (int i = 0; i < 4; ++i) T[i] = reinterpret_cast<PyTypeObject*>(classes[i].ptr());
  py::str items("items"), options("options"), item("item"), name_attr("name");
  // The fields are read from their slots where the classes keep them there (a getattr per
  // node, through the type's member descriptor, was most of this walk: 1.5 ms for o16062).
  const Py_ssize_t off[4] = {structgen::slot_offset(classes[0].ptr(), "items"),
                             structgen::slot_offset(classes[1].ptr(), "options"),
                             structgen::slot_offset(classes[2].ptr(), "item"),
                             structgen::slot_offset(classes[3].ptr(), "name")};
  // Nodes are held as borrowed pointers: the rules keep every node alive, and a node keeps
  // its children's tuple alive (the expressions are immutable), so a walk over a large
  // schema's grammar takes no reference per node (tens of thousands of nodes).
  auto get = [&off](PyObject* o, int cls, const py::str& a) {
    PyObject* v = structgen::slot_or_attr(o, off[cls], a.ptr());
    if (v == nullptr) throw py::error_already_set();
    return v;
  };
  PointerIds seen;
  std::vector<PyObject*> stack, missing;
  for (auto kv : rules) {
    missing.clear();
    stack.assign(1, kv.second.ptr());
    while (!stack.empty()) {
      PyObject* x = stack.back();
      stack.pop_back();
      PyTypeObject* t = Py_TYPE(x);
      if (t == T[3]) {
        PyObject* n = get(x, 3, name_attr);
        const int has = PyDict_Contains(rules.ptr(), n);
        if (has < 0) throw py::error_already_set();
        if (!has) missing.push_back(n);
      } else if (t == T[0] || t == T[1] || t == T[2]) {
        if (!seen.insert(x, 0)) continue;
        if (t == T[2]) {
          stack.push_back(get(x, 2, item));
        } else {
          PyObject* kids = t == T[0] ? get(x, 0, items) : get(x, 1, options);
          if (PyTuple_Check(kids)) {
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kids); ++k) stack.push_back(PyTuple_GET_ITEM(kids, k));
          } else {
            for (py::handle k : py::reinterpret_borrow<py::object>(kids)) stack.push_back(k.ptr());
          }
        }
      }
    }
    if (!missing.empty()) {
      py::list names;
      for (PyObject* n : missing) names.append(py::reinterpret_borrow<py::object>(n));
      names.attr("sort")();
      return py::make_tuple(kv.first, names[0]);
    }
  }
  return py::none();
}

// Nodes of an expression tree, depth first with every occurrence of a shared subtree counted,
// a bounded repeat counted once per copy it unrolls into (max, or min when unbounded) and an
// automaton once per state and per edge; stops once the count reaches `cap` (cap < 0: no cap). classes:
// (Seq, Alt, Repeat, Dfa). Sizes saturate at INT64_MAX.
int64_t expr_size(py::handle e, int64_t cap, py::tuple classes) {
  if (classes.size() != 4) throw std::invalid_argument("expected (Seq, Alt, Repeat, Dfa)");
  PyTypeObject* T[4];
  for (int i = 0; i < 4; ++i) T[i] = reinterpret_cast<PyTypeObject*>(classes[i].ptr());
  static PyObject* items = PyUnicode_InternFromString("items");
  static PyObject* options = PyUnicode_InternFromString("options");
  static PyObject* item = PyUnicode_InternFromString("item");
  static PyObject* mn = PyUnicode_InternFromString("min");
  static PyObject* mx = PyUnicode_InternFromString("max");
  static PyObject* trans = PyUnicode_InternFromString("trans");
  // The fields are read from their slots, borrowed (the converter asks this of every large
  // expression it may share, a few per schema node: a getattr and a reference per node were
  // a twelfth of converting a median schema). The offsets are looked up once per set of classes.
  static PyTypeObject* seen_classes[4] = {nullptr, nullptr, nullptr, nullptr};
  static Py_ssize_t off[6] = {-1, -1, -1, -1, -1, -1};  // items, options, item, min, max, trans
  if (!std::equal(T, T + 4, seen_classes)) {
    PyObject* C[4];
    for (int i = 0; i < 4; ++i) C[i] = classes[i].ptr();
    off[0] = structgen::slot_offset(C[0], "items");
    off[1] = structgen::slot_offset(C[1], "options");
    off[2] = structgen::slot_offset(C[2], "item");
    off[3] = structgen::slot_offset(C[2], "min");
    off[4] = structgen::slot_offset(C[2], "max");
    off[5] = structgen::slot_offset(C[3], "trans");
    // the classes are held while cached: a class freed and another made at its address must
    // not meet offsets that were not looked up on it
    for (int i = 0; i < 4; ++i) {
      Py_INCREF(C[i]);
      Py_XDECREF(reinterpret_cast<PyObject*>(seen_classes[i]));
    }
    std::copy(T, T + 4, seen_classes);
  }
  auto get = [](PyObject* o, Py_ssize_t at, PyObject* name) {
    PyObject* v = structgen::slot_or_attr(o, at, name);
    if (v == nullptr) throw py::error_already_set();
    return v;  // borrowed: the tree holds it while this walk runs (no Python code runs)
  };
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto add = [&](int64_t a, int64_t b) { return a > kMax - b ? kMax : a + b; };
  int64_t n = 0;
  std::vector<PyObject*> stack;
  stack.reserve(64);
  stack.push_back(e.ptr());
  while (!stack.empty()) {
    if (cap >= 0 && n >= cap) break;
    PyObject* x = stack.back();
    stack.pop_back();
    PyTypeObject* t = Py_TYPE(x);
    int64_t extra = 0;
    if (t == T[0] || t == T[1]) {
      PyObject* kids = t == T[0] ? get(x, off[0], items) : get(x, off[1], options);
      if (PyTuple_Check(kids)) {
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kids); ++k) stack.push_back(PyTuple_GET_ITEM(kids, k));
      } else {  // (not made by this package: a list, say)
        for (py::handle k : py::reinterpret_borrow<py::object>(kids)) stack.push_back(k.ptr());
      }
    } else if (t == T[2]) {
      stack.push_back(get(x, off[2], item));
      PyObject* v = get(x, off[4], mx);
      if (v == Py_None) {
        v = get(x, off[3], mn);
      } else {
        const int no = PyObject_Not(v);
        if (no < 0) throw py::error_already_set();
        if (no == 1) v = get(x, off[3], mn);
      }
      int overflow = 0;
      const long long k = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (k == -1 && PyErr_Occurred()) throw py::error_already_set();
      extra = overflow > 0 ? kMax : std::max<long long>(k, 0);
    } else if (t == T[3]) {  // its states and edges, as its expression would count
      py::object rows = py::reinterpret_borrow<py::object>(get(x, off[5], trans));
      for (py::handle row : rows) {
        const Py_ssize_t len = PyObject_Length(row.ptr());
        if (len < 0) throw py::error_already_set();
        extra = add(extra, 1 + static_cast<int64_t>(len));
      }
    }
    n = add(n, add(1, extra));
  }
  return n;
}

// "Any string of a character class but these names" (structgen/regex/regular.py,
// star_minus_literals) as a code-point DFA, built straight from the trie of the names: the
// undeclared member names of every object that allows them. The trie's nodes are states; a
// character no name goes on with leaves for a copy of the class's own automaton, where
// anything may follow. Before, the same language was an expression (three alternations of
// trie paths joined in Python objects) that the rule's NFA and subset construction then
// took apart again: about an eighth of compiling a median schema.
//
// With `json`, the strings are those of the JSON-string text of the names (json.dumps's
// encoding, which is one-to-one and prefix-free: a name's text is a path of the class's text
// automaton, and excluding the texts of the names excludes exactly the names). The class's
// text automaton: raw characters loop on the boundary state B; the escaped ones go through
// '\' and then a short escape letter, or "u00" and two lowercase hex digits.
//   ranges: the class's sorted disjoint (lo, hi) code-point ranges; names: strings (a name
//   with a character outside the class is no string of the class: ignored).
// Returns (trans, final) in the form of structgen.grammar.Dfa (state 0 starts, every state
// reachable and able to end), or None for the empty language.
struct CpAutomaton {
  struct Edge {
    int32_t lo, hi, to;
  };
  std::vector<std::vector<Edge>> rows;
  std::vector<uint8_t> final_;

  int32_t add(bool fin) {
    rows.emplace_back();
    final_.push_back(fin);
    return static_cast<int32_t>(rows.size() - 1);
  }
  int32_t step(int32_t s, int32_t c) const {
    const auto& r = rows[s];
    auto it = std::upper_bound(r.begin(), r.end(), c, [](int32_t x, const Edge& e) { return x < e.lo; });
    if (it == r.begin() || (--it)->hi < c) return -1;
    return it->to;
  }
};

bool in_ranges(const std::vector<std::pair<int32_t, int32_t>>& rs, int32_t c) {
  auto it = std::upper_bound(rs.begin(), rs.end(), c, [](int32_t x, const auto& r) { return x < r.first; });
  return it != rs.begin() && (--it)->second >= c;
}

// The characters json.dumps writes as a short escape, with the escape's letter after '\'
constexpr std::pair<int32_t, int32_t> kShortEscapes[] = {{0x22, 0x22}, {0x5C, 0x5C}, {0x08, 'b'}, {0x0C, 'f'},
                                                         {0x0A, 'n'}, {0x0D, 'r'}, {0x09, 't'}};

// the letter of c's short escape, or 0
int32_t short_escape(int32_t c) {
  for (const auto& [code, letter] : kShortEscapes)
    if (code == c) return letter;
  return 0;
}

// json.dumps(chr(c), ensure_ascii=False)[1:-1] as code points
void json_text(int32_t c, std::vector<int32_t>& out) {
  static const char kHex[] = "0123456789abcdef";
  if (const int32_t letter = short_escape(c)) {
    out.insert(out.end(), {0x5C, letter});
  } else if (c < 0x20) {
    out.insert(out.end(), {0x5C, 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]});
  } else {
    out.push_back(c);
  }
}

// The automaton of class* (json: of the class's JSON-string text); state 0 = B, the boundary.
CpAutomaton class_star(const std::vector<std::pair<int32_t, int32_t>>& cls, bool json) {
  CpAutomaton d;
  const int32_t B = d.add(true);
  if (!json) {
    for (const auto& [lo, hi] : cls) d.rows[B].push_back({lo, hi, B});
    return d;
  }
  // raw: the class but the quote, the backslash and the controls
  std::vector<CpAutomaton::Edge> raw;
  for (auto [lo, hi] : cls) {
    lo = std::max(lo, 0x20);
    for (const int32_t cut : {0x22, 0x5C}) {
      if (lo <= cut && cut <= hi) {
        if (lo < cut) raw.push_back({lo, cut - 1, B});
        lo = cut + 1;
      }
    }
    if (lo <= hi) raw.push_back({lo, hi, B});
  }
  std::vector<CpAutomaton::Edge> esc_row;  // after '\': the short escape letters, 'u'
  for (const auto& [c, letter] : kShortEscapes)
    if (in_ranges(cls, c)) esc_row.push_back({letter, letter, B});
  std::vector<int32_t> lows[2];  // \u00XY: by high digit X (0 or 1), the low digits Y
  for (int32_t c = 0; c < 0x20; ++c) {
    if (!in_ranges(cls, c)) continue;
    if (!short_escape(c)) lows[c >> 4].push_back(c & 0xF);
  }
  d.rows[B] = raw;
  if (esc_row.empty() && lows[0].empty() && lows[1].empty()) return d;
  const int32_t esc = d.add(false);
  d.rows[B].push_back({0x5C, 0x5C, esc});
  if (!lows[0].empty() || !lows[1].empty()) {
    const int32_t u = d.add(false), u0 = d.add(false), u00 = d.add(false);
    esc_row.push_back({'u', 'u', u});
    d.rows[u].push_back({'0', '0', u0});
    d.rows[u0].push_back({'0', '0', u00});
    for (int32_t h = 0; h < 2; ++h) {
      if (lows[h].empty()) continue;
      const int32_t x = d.add(false);
      d.rows[u00].push_back({'0' + h, '0' + h, x});
      for (const int32_t y : lows[h]) {
        const int32_t digit = y < 10 ? '0' + y : 'a' + y - 10;
        d.rows[x].push_back({digit, digit, B});
      }
    }
  }
  d.rows[esc] = esc_row;
  for (auto& r : d.rows) {  // sorted, adjacent ranges to the same state joined (hex digits)
    std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.lo < b.lo; });
    size_t k = 0;
    for (const auto& e : r) {
      if (k > 0 && r[k - 1].to == e.to && r[k - 1].hi + 1 == e.lo) {
        r[k - 1].hi = e.hi;
      } else {
        r[k++] = e;
      }
    }
    r.resize(k);
  }
  return d;
}

py::object names_except(py::iterable ranges, py::iterable names, bool json) {
  std::vector<std::pair<int32_t, int32_t>> cls;
  for (py::handle r : ranges) {
    PyObject* t = r.ptr();
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2) throw std::invalid_argument("a range is a (lo, hi) tuple");
    const int32_t lo = as_int(PyTuple_GET_ITEM(t, 0)), hi = as_int(PyTuple_GET_ITEM(t, 1));
    if (lo > hi || (!cls.empty() && lo <= cls.back().second)) throw std::invalid_argument("ranges must be sorted and disjoint");
    cls.emplace_back(lo, hi);
  }
  const CpAutomaton star = class_star(cls, json);
  // The trie of the names' texts, children in a flat list per node (sorted by code point):
  // kid_first[t] is node t's first child edge, kid_next the next sibling's.
  struct Kid {
    int32_t c, node, next;
  };
  std::vector<Kid> kids;
  std::vector<int32_t> first{-1}, at{0};  // per node: first child edge, automaton state
  std::vector<uint8_t> ends{0};
  std::vector<int32_t> text;
  for (py::handle h : names) {
    PyObject* name = h.ptr();
    if (!PyUnicode_Check(name)) throw std::invalid_argument("names must be strings");
    const Py_ssize_t len = PyUnicode_GET_LENGTH(name);
    const int kind = PyUnicode_KIND(name);
    const void* data = PyUnicode_DATA(name);
    text.clear();
    bool inside = true;
    for (Py_ssize_t i = 0; i < len && inside; ++i) {
      const int32_t c = static_cast<int32_t>(PyUnicode_READ(kind, data, i));
      inside = in_ranges(cls, c);
      if (json) {
        json_text(c, text);
      } else {
        text.push_back(c);
      }
    }
    if (!inside) continue;
    int32_t node = 0;
    for (const int32_t c : text) {
      // the sorted sibling list, walked to c's place: `prev` is the edge before it (-1: none)
      int32_t prev = -1, cur = first[node];
      while (cur >= 0 && kids[cur].c < c) prev = cur, cur = kids[cur].next;
      if (cur >= 0 && kids[cur].c == c) {
        node = kids[cur].node;
        continue;
      }
      const int32_t s = star.step(at[node], c);
      if (s < 0) throw std::logic_error("a name's text is no string of its class");
      const int32_t child = static_cast<int32_t>(first.size()), edge = static_cast<int32_t>(kids.size());
      kids.push_back({c, child, cur});
      (prev < 0 ? first[node] : kids[prev].next) = edge;
      first.push_back(-1);
      at.push_back(s);
      ends.push_back(0);
      node = child;
    }
    ends[node] = 1;
  }
  const int32_t T = static_cast<int32_t>(first.size()), S = static_cast<int32_t>(star.rows.size());
  // chars* = {""}: the root alone, which ends unless "" is a name
  if (cls.empty() && ends[0]) return py::none();
  // States: the trie's nodes (0 the root), then the class automaton's states that some node
  // leaves for (where no name can follow). Every state can end: the class automaton's states
  // lead back to its boundary state, and a trie node leads out of the trie or to a child.
  std::vector<int32_t> free_id(S, -1);
  std::vector<int32_t> order;  // the free states, in the order of their ids (T on)
  auto free_state = [&](int32_t s) {
    if (free_id[s] < 0) {
      free_id[s] = T + static_cast<int32_t>(order.size());
      order.push_back(s);
    }
    return free_id[s];
  };
  // Python objects are made with the C API; an edge out of the trie that no child splits
  // is one tuple shared by every node leaving from the same automaton state (most of them).
  auto pyint = [](int64_t v) {
    PyObject* o = PyLong_FromLongLong(v);
    if (!o) throw py::error_already_set();
    return o;
  };
  auto triple = [&](int32_t lo, int32_t hi, int32_t to) {
    PyObject* t = PyTuple_New(3);
    if (!t) throw py::error_already_set();
    PyTuple_SET_ITEM(t, 0, pyint(lo));
    PyTuple_SET_ITEM(t, 1, pyint(hi));
    PyTuple_SET_ITEM(t, 2, pyint(to));
    return t;
  };
  std::vector<std::vector<py::object>> whole(S);  // per automaton state, per edge: the shared tuple
  std::vector<PyObject*> row;
  py::list rows_out;  // trie nodes' rows, then free states' (appended as ids are given)
  auto emit_row = [&]() {
    PyObject* r = PyTuple_New(static_cast<Py_ssize_t>(row.size()));
    if (!r) {
      for (PyObject* x : row) Py_DECREF(x);
      throw py::error_already_set();
    }
    for (size_t j = 0; j < row.size(); ++j) PyTuple_SET_ITEM(r, static_cast<Py_ssize_t>(j), row[j]);
    row.clear();
    if (PyList_Append(rows_out.ptr(), r) < 0) {
      Py_DECREF(r);
      throw py::error_already_set();
    }
    Py_DECREF(r);
  };
  auto shared_edge = [&](int32_t s, size_t k) {
    auto& w = whole[s];
    if (w.empty()) w.resize(star.rows[s].size());
    if (!w[k]) {
      const auto& e = star.rows[s][k];
      w[k] = py::reinterpret_steal<py::object>(triple(e.lo, e.hi, free_state(e.to)));
    }
    Py_INCREF(w[k].ptr());
    return w[k].ptr();
  };
  auto fill = [&](int32_t s, int32_t kid) {  // state s's edges, the children from `kid` on cut out
    const auto& es = star.rows[s];
    for (size_t k = 0; k < es.size(); ++k) {
      const auto& e = es[k];
      if (kid < 0 || kids[kid].c > e.hi) {
        row.push_back(shared_edge(s, k));
        continue;
      }
      int32_t lo = e.lo;
      for (; kid >= 0 && kids[kid].c <= e.hi; kid = kids[kid].next) {
        const int32_t c = kids[kid].c;
        if (lo < c) row.push_back(triple(lo, c - 1, free_state(e.to)));
        row.push_back(triple(c, c, kids[kid].node));
        lo = c + 1;
      }
      if (lo <= e.hi) row.push_back(triple(lo, e.hi, free_state(e.to)));
    }
  };
  try {
    for (int32_t t = 0; t < T; ++t) {
      fill(at[t], first[t]);
      emit_row();
    }
    // the free states, as ids were given (a free state's edges may give more)
    for (size_t i = 0; i < order.size(); ++i) {
      fill(order[i], -1);
      emit_row();
    }
  } catch (...) {
    for (PyObject* x : row) Py_DECREF(x);
    throw;
  }
  const auto n_states = static_cast<int32_t>(T + order.size());
  py::tuple final_(n_states);
  for (int32_t i = 0; i < n_states; ++i) {
    const bool f = i < T ? star.final_[at[i]] && !ends[i] : star.final_[order[i - T]] != 0;
    PyObject* b = f ? Py_True : Py_False;
    Py_INCREF(b);
    PyTuple_SET_ITEM(final_.ptr(), i, b);
  }
  return py::make_tuple(py::tuple(rows_out), std::move(final_));
}

}  // namespace

// Take the nodes of expression trees (instances of `classes`, and the tuples holding them)
// out of the cycle collector's lists; returns how many it took. A compiled grammar keeps its
// expressions (20,000 to 80,000 objects for the largest MaskBench schemas), and every
// collection of the generation they sit in traversed them all again: a generation-0 pass
// right after a large compile cost 1-2.5 ms, a generation-1 pass over a few kept grammars 8 ms.
// The nodes are frozen and hold only strings, numbers and other nodes, so they cannot be in
// a reference cycle, which is all the collector looks for (CPython takes tuples of atoms out
// the same way). Reference counting still frees them; an object the nodes point at that is
// not a node stays tracked, and the collector then counts the nodes' references to it as
// outside ones, so it can only keep such an object, never free it early.
int64_t untrack_tree(py::iterable roots, py::tuple classes) {
  std::vector<PyTypeObject*> types;
  for (py::handle c : classes) {
    if (!PyType_Check(c.ptr())) throw std::invalid_argument("classes must be types");
    types.push_back(reinterpret_cast<PyTypeObject*>(c.ptr()));
  }
  std::vector<PyObject*> stack;  // borrowed: the roots hold every node while the GIL is held
  for (py::handle r : roots) stack.push_back(r.ptr());
  auto push = [](PyObject* o, void* arg) -> int {
    static_cast<std::vector<PyObject*>*>(arg)->push_back(o);
    return 0;
  };
  int64_t n = 0;
  while (!stack.empty()) {
    PyObject* o = stack.back();
    stack.pop_back();
    PyTypeObject* t = Py_TYPE(o);
    if (t != &PyTuple_Type && std::find(types.begin(), types.end(), t) == types.end()) continue;
    if (!PyObject_GC_IsTracked(o)) continue;  // (an atom-only tuple, or a node already taken)
    PyObject_GC_UnTrack(o);
    ++n;
    t->tp_traverse(o, push, &stack);  // its fields (and, for a class instance, its type: skipped)
  }
  return n;
}

void register_expr_plan(py::module_& m) {
  m.def("names_except", &names_except, py::arg("ranges"), py::arg("names"), py::arg("json"));
  m.def("expr_size", &expr_size, py::arg("expr"), py::arg("cap"), py::arg("classes"));
  m.def("undefined_reference", &undefined_reference, py::arg("rules"), py::arg("classes"));
  m.def("untrack_tree", &untrack_tree, py::arg("roots"), py::arg("classes"));
  py::class_<ExprSerializer>(m, "ExprSerializer")
      .def(py::init<py::tuple, py::object, py::object, py::object>(), py::arg("classes"), py::arg("parse_regex"),
           py::arg("names"), py::arg("on_ref"))
      .def("add", &ExprSerializer::add, py::arg("expr"))
      .def("graph", &ExprSerializer::graph, py::arg("final"), py::arg("edges"))
      .def("arrays", &ExprSerializer::arrays)
      .def("add_rules", &ExprSerializer::add_rules, py::arg("bodies"))
      .def("plan", &ExprSerializer::plan, py::arg("rank"), py::arg("inline_limit"), py::arg("split_limit"))
      .def("resolve", &ExprSerializer::resolve, py::arg("call_ids"), py::arg("rule_ids"))
      .def("rule_key", &ExprSerializer::rule_key, py::arg("root"))
      .def("refs", &ExprSerializer::refs)
      .def("largest_bound", &ExprSerializer::largest_bound)
      .def("rule_bounds", &ExprSerializer::rule_bounds)
      .def("rule_nullables", &ExprSerializer::rule_nullables)
      .def("__len__", &ExprSerializer::size);
}
