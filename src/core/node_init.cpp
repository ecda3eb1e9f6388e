// A native __init__ for the frozen, slotted dataclasses of grammar expressions (Lit, Seq, Alt,
// Repeat, ...): it stores each argument in its slot, as the generated __init__ does.
//
// Why native: the schema converter builds a few hundred expression nodes for a median schema
// and thousands for a large one. The generated __init__ of a frozen dataclass is Python code
// that sets every field through object.__setattr__ (about 0.6 µs for a one-field node, 1.2 µs
// for Repeat's three): a tenth of converting a schema. Here the arguments go straight into the
// slots (about 0.15 µs). Semantics are the generated __init__'s: positional or keyword
// arguments, defaults, the same TypeErrors for a missing, repeated or unknown argument; no
// validation (the dataclasses have none). The classes stay frozen: only __init__ writes.
#include <pybind11/pybind11.h>

#include <Python.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pyslots.hpp"

namespace py = pybind11;

namespace {

constexpr int kMaxFields = 4;

struct NodeInit {
  PyTypeObject* type = nullptr;
  int n = 0;
  Py_ssize_t off[kMaxFields] = {};
  PyObject* name[kMaxFields] = {};     // interned, owned (kept for the process)
  PyObject* fallback[kMaxFields] = {};  // default value, owned, or nullptr: required
};

// The classes with this __init__ (a handful, installed at import; never removed, like the
// classes themselves)
std::vector<NodeInit>& inits() {
  static std::vector<NodeInit>* v = new std::vector<NodeInit>();
  return *v;
}

const NodeInit* init_of(PyTypeObject* t) {
  for (const NodeInit& e : inits())
    if (e.type == t) return &e;
  return nullptr;
}

PyObject* node_init(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const NodeInit* e = init_of(Py_TYPE(self));
  if (e == nullptr) {  // a subclass: not something the expression classes have
    PyErr_Format(PyExc_TypeError, "%s.__init__ is installed for its own class only", Py_TYPE(self)->tp_name);
    return nullptr;
  }
  const char* cls = Py_TYPE(self)->tp_name;
  if (nargs > e->n) {
    int required = 0;  // (defaults trail, as in every dataclass)
    while (required < e->n && e->fallback[required] == nullptr) ++required;
    if (required == e->n)
      PyErr_Format(PyExc_TypeError, "%s.__init__() takes %d positional arguments but %zd were given", cls, e->n + 1,
                   nargs + 1);
    else
      PyErr_Format(PyExc_TypeError, "%s.__init__() takes from %d to %d positional arguments but %zd were given", cls,
                   required + 1, e->n + 1, nargs + 1);
    return nullptr;
  }
  PyObject* value[kMaxFields] = {};
  for (Py_ssize_t i = 0; i < nargs; ++i) value[i] = args[i];
  const Py_ssize_t nk = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < nk; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    int at = -1;
    for (int i = 0; i < e->n && at < 0; ++i)
      if (key == e->name[i]) at = i;
    for (int i = 0; i < e->n && at < 0; ++i) {
      const int eq = PyUnicode_Compare(key, e->name[i]);
      if (eq == -1 && PyErr_Occurred()) return nullptr;
      if (eq == 0) at = i;
    }
    if (at < 0) {
      PyErr_Format(PyExc_TypeError, "%s.__init__() got an unexpected keyword argument '%U'", cls, key);
      return nullptr;
    }
    if (value[at] != nullptr) {
      PyErr_Format(PyExc_TypeError, "%s.__init__() got multiple values for argument '%U'", cls, key);
      return nullptr;
    }
    value[at] = args[nargs + k];
  }
  for (int i = 0; i < e->n; ++i) {
    if (value[i] == nullptr) value[i] = e->fallback[i];
    if (value[i] == nullptr) {
      PyErr_Format(PyExc_TypeError, "%s.__init__() missing 1 required positional argument: '%U'", cls, e->name[i]);
      return nullptr;
    }
  }
  for (int i = 0; i < e->n; ++i) {
    PyObject** slot = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(self) + e->off[i]);
    PyObject* old = *slot;
    Py_INCREF(value[i]);
    *slot = value[i];
    Py_XDECREF(old);
  }
  Py_RETURN_NONE;
}

PyMethodDef node_init_def = {"__init__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(node_init)),
                             METH_FASTCALL | METH_KEYWORDS,
                             "Store each field in its slot (the dataclass's own __init__, natively)."};

// Installs node_init as cls.__init__. fields: the dataclass's fields in order; defaults: one
// per field, a 1-tuple (value,) for a default, () for a required field. Refuses a class whose
// fields are not all plain object slots.
void install_slots_init(py::object cls, py::tuple fields, py::tuple defaults) {
  if (!PyType_Check(cls.ptr())) throw std::invalid_argument("cls must be a class");
  const auto n = static_cast<int>(fields.size());
  if (n < 1 || n > kMaxFields || static_cast<int>(defaults.size()) != n)
    throw std::invalid_argument("one to four fields, one default entry per field");
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  if (init_of(type) != nullptr) return;
  NodeInit e;
  e.type = type;
  e.n = n;
  for (int i = 0; i < n; ++i) {
    const std::string name = py::cast<std::string>(fields[i]);
    e.off[i] = structgen::slot_offset(cls.ptr(), name.c_str());
    if (e.off[i] < 0) throw std::invalid_argument("field " + name + " is not a plain slot of the class");
    e.name[i] = PyUnicode_InternFromString(name.c_str());
    py::tuple d = py::reinterpret_borrow<py::tuple>(defaults[i]);
    if (d.size() > 1) throw std::invalid_argument("a default entry is () or (value,)");
    e.fallback[i] = d.size() ? py::object(d[0]).release().ptr() : nullptr;
  }
  PyObject* descr = PyDescr_NewMethod(type, &node_init_def);
  if (descr == nullptr) throw py::error_already_set();
  Py_INCREF(cls.ptr());  // the class outlives the table entry (classes of a module are kept anyway)
  inits().push_back(e);
  const int rc = PyObject_SetAttrString(cls.ptr(), "__init__", descr);
  Py_DECREF(descr);
  if (rc != 0) {
    inits().pop_back();
    throw py::error_already_set();
  }
}

// seq() and alt() of structgen/grammar/expr.py, natively: the converter calls them for
// nearly every node it builds (about fifty times for a median schema, 1.5 to 4 µs each in
// Python, where alt's duplicate scan went through the dataclasses' __eq__): about a twelfth
// of a median compile. Same results as the Python definitions kept in
// tests/reference_expr.py (tests/test_expr_nodes.py compares them); nodes are made as
// node_init makes them (the slot written, no __init__ call).
struct Joins {
  PyTypeObject *lit = nullptr, *seq = nullptr, *alt = nullptr;
  Py_ssize_t lit_text = -1, seq_items = -1, alt_options = -1;
  PyObject* nothing = nullptr;  // NOTHING, owned
  std::vector<PyTypeObject*> nodes;  // every expression class: nodes of two of them never compare equal
  bool node(PyTypeObject* t) const { return std::find(nodes.begin(), nodes.end(), t) != nodes.end(); }
};

Joins& joins() {
  static Joins* j = new Joins();
  return *j;
}

inline PyObject* slot(PyObject* o, Py_ssize_t off) { return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + off); }

// a new node of a one-field class holding `value` (stolen)
PyObject* make_node(PyTypeObject* t, Py_ssize_t off, PyObject* value) {
  if (value == nullptr) return nullptr;
  PyObject* o = t->tp_alloc(t, 0);
  if (o == nullptr) {
    Py_DECREF(value);
    return nullptr;
  }
  *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + off) = value;
  return o;
}

// owned references, released unless taken
struct Owned {
  std::vector<PyObject*> v;
  ~Owned() {
    for (PyObject* x : v) Py_XDECREF(x);
  }
  PyObject* tuple() {  // takes them all
    PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(v.size()));
    if (t == nullptr) return nullptr;
    for (size_t i = 0; i < v.size(); ++i) PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), v[i]);
    v.clear();
    return t;
  }
};

PyObject* join_seq(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  const Joins& J = joins();
  Owned merged;
  bool last_lit = false;  // merged.v.back() is a literal
  auto push = [&](PyObject* x) -> bool {
    if (Py_TYPE(x) == J.lit) {
      if (last_lit) {  // adjacent literals join
        PyObject* text = PyUnicode_Concat(slot(merged.v.back(), J.lit_text), slot(x, J.lit_text));
        PyObject* joined = make_node(J.lit, J.lit_text, text);
        if (joined == nullptr) return false;
        Py_DECREF(merged.v.back());
        merged.v.back() = joined;
        return true;
      }
      last_lit = true;
    } else {
      last_lit = false;
    }
    Py_INCREF(x);
    merged.v.push_back(x);
    return true;
  };
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    PyObject* it = args[i];
    PyTypeObject* t = Py_TYPE(it);
    if (t == J.seq) {  // its items, one level (a sequence made here is flat)
      PyObject* items = slot(it, J.seq_items);
      if (!PyTuple_Check(items)) {
        PyErr_SetString(PyExc_TypeError, "Seq.items must be a tuple");
        return nullptr;
      }
      for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(items); ++k)
        if (!push(PyTuple_GET_ITEM(items, k))) return nullptr;
    } else if (t == J.alt && PyTuple_Check(slot(it, J.alt_options)) && PyTuple_GET_SIZE(slot(it, J.alt_options)) == 0) {
      Py_INCREF(J.nothing);  // NOTHING anywhere: the whole sequence
      return J.nothing;
    } else if (!push(it)) {
      return nullptr;
    }
  }
  if (merged.v.size() == 1) {
    PyObject* only = merged.v[0];
    merged.v.clear();
    return only;
  }
  return make_node(J.seq, J.seq_items, merged.tuple());
}

PyObject* join_alt(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  const Joins& J = joins();
  std::vector<PyObject*> flat;  // borrowed: the arguments and their options hold them
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    PyObject* o = args[i];
    if (Py_TYPE(o) == J.alt) {
      PyObject* opts = slot(o, J.alt_options);
      if (!PyTuple_Check(opts)) {
        PyErr_SetString(PyExc_TypeError, "Alt.options must be a tuple");
        return nullptr;
      }
      for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(opts); ++k) flat.push_back(PyTuple_GET_ITEM(opts, k));
    } else {
      flat.push_back(o);
    }
  }
  Owned kept;
  if (flat.size() <= 16) {
    // a list scan: equality stops at the first difference, while hashing walks whole trees
    // (large expressions from regular.py are combined here pairwise, often)
    for (PyObject* x : flat) {
      bool seen = false;
      for (PyObject* k : kept.v) {
        int eq;
        if (k == x) {
          eq = 1;
        } else if (Py_TYPE(k) != Py_TYPE(x) && J.node(Py_TYPE(k)) && J.node(Py_TYPE(x))) {
          eq = 0;  // (a dataclass's __eq__ returns NotImplemented both ways: two Python calls)
        } else if (Py_TYPE(k) == J.lit && Py_TYPE(x) == J.lit) {
          eq = PyUnicode_Compare(slot(k, J.lit_text), slot(x, J.lit_text));
          if (eq == -1 && PyErr_Occurred()) return nullptr;
          eq = eq == 0;
        } else {
          eq = PyObject_RichCompareBool(k, x, Py_EQ);
        }
        if (eq < 0) return nullptr;
        if (eq) {
          seen = true;
          break;
        }
      }
      if (!seen) {
        Py_INCREF(x);
        kept.v.push_back(x);
      }
    }
  } else {  // by hash, the first occurrence kept in order (a scan made an enum of 20,000 strings quadratic)
    PyObject* d = PyDict_New();
    if (d == nullptr) return nullptr;
    for (PyObject* x : flat) {
      const int has = PyDict_Contains(d, x);
      if (has < 0 || (!has && PyDict_SetItem(d, x, Py_None) < 0)) {
        Py_DECREF(d);
        return nullptr;
      }
      if (!has) {
        Py_INCREF(x);
        kept.v.push_back(x);
      }
    }
    Py_DECREF(d);
  }
  if (kept.v.size() == 1) {
    PyObject* only = kept.v[0];
    kept.v.clear();
    return only;
  }
  return make_node(J.alt, J.alt_options, kept.tuple());
}

PyMethodDef seq_def = {"seq", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(join_seq)), METH_FASTCALL,
                       "seq(*items)\n--\n\nA sequence, flattened (one level), adjacent literals joined; NOTHING "
                       "anywhere makes the whole sequence NOTHING."};
PyMethodDef alt_def = {"alt", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(join_alt)), METH_FASTCALL,
                       "alt(*options)\n--\n\nAn alternative, flattened (one level), duplicates removed (the first "
                       "kept); one option left is that option."};

// (seq, alt) over the classes Lit, Seq and Alt (one field each, a plain slot), NOTHING and
// every expression class (`classes`: frozen dataclasses, equal only to their own kind).
py::tuple expr_joins(py::object lit, py::object seq, py::object alt, py::object nothing, py::tuple classes) {
  for (const py::object* c : {&lit, &seq, &alt})
    if (!PyType_Check(c->ptr())) throw std::invalid_argument("Lit, Seq and Alt must be classes");
  Joins& J = joins();
  J.lit = reinterpret_cast<PyTypeObject*>(lit.release().ptr());  // kept for the process, like the classes
  J.seq = reinterpret_cast<PyTypeObject*>(seq.release().ptr());
  J.alt = reinterpret_cast<PyTypeObject*>(alt.release().ptr());
  J.lit_text = structgen::slot_offset(reinterpret_cast<PyObject*>(J.lit), "text");
  J.seq_items = structgen::slot_offset(reinterpret_cast<PyObject*>(J.seq), "items");
  J.alt_options = structgen::slot_offset(reinterpret_cast<PyObject*>(J.alt), "options");
  if (J.lit_text < 0 || J.seq_items < 0 || J.alt_options < 0) throw std::invalid_argument("a field is not a plain slot");
  Py_XDECREF(J.nothing);
  J.nothing = nothing.release().ptr();
  J.nodes.clear();
  for (py::handle c : classes) {
    if (!PyType_Check(c.ptr())) throw std::invalid_argument("classes must be classes");
    J.nodes.push_back(reinterpret_cast<PyTypeObject*>(c.inc_ref().ptr()));
  }
  PyObject* s = PyCFunction_New(&seq_def, nullptr);
  if (s == nullptr) throw py::error_already_set();
  py::object so = py::reinterpret_steal<py::object>(s);
  PyObject* a = PyCFunction_New(&alt_def, nullptr);
  if (a == nullptr) throw py::error_already_set();
  return py::make_tuple(so, py::reinterpret_steal<py::object>(a));
}

// check_schema_depth's walk (structgen.schema.text): the first container (dict, list or
// tuple) nested `limit` levels or more below `root`, in the order of a depth-first walk with
// an explicit stack (items pushed in order, the last one taken first), as (path, depth + 1):
// the keys and indexes from the root to it. None when there is none. No Python code runs
// during the walk (PyDict_Next and the type checks call none), so the borrowed references
// stay valid. The Python walk cost about 1 us a container, 2% of compiling a median schema.
py::object first_too_deep(py::handle root, int64_t limit) {
  struct Entry {
    PyObject* node;
    int64_t depth;
    PyObject* key;   // a dict's key (borrowed), or nullptr: `index` in a list or tuple
    Py_ssize_t index;
    int64_t parent;  // entry of the container holding it, -1 for the root
  };
  auto container = [](PyObject* o) { return PyDict_Check(o) || PyList_Check(o) || PyTuple_Check(o); };
  std::vector<Entry> entries;
  std::vector<int64_t> stack;
  if (!container(root.ptr())) return py::none();
  entries.push_back({root.ptr(), 0, nullptr, 0, -1});
  stack.push_back(0);
  while (!stack.empty()) {
    const int64_t at = stack.back();
    stack.pop_back();
    const Entry e = entries[static_cast<size_t>(at)];
    if (e.depth >= limit) {
      std::vector<int64_t> chain;  // from the root down
      for (int64_t k = at; entries[static_cast<size_t>(k)].parent >= 0; k = entries[static_cast<size_t>(k)].parent)
        chain.push_back(k);
      std::reverse(chain.begin(), chain.end());
      py::list path;
      for (int64_t k : chain) {
        const Entry& x = entries[static_cast<size_t>(k)];
        if (x.key != nullptr)
          path.append(py::reinterpret_borrow<py::object>(x.key));
        else
          path.append(py::int_(x.index));
      }
      return py::make_tuple(path, e.depth + 1);
    }
    auto push = [&](PyObject* value, PyObject* key, Py_ssize_t index) {
      if (!container(value)) return;
      entries.push_back({value, e.depth + 1, key, index, at});
      stack.push_back(static_cast<int64_t>(entries.size()) - 1);
    };
    if (PyDict_Check(e.node)) {
      PyObject *k, *v;
      Py_ssize_t pos = 0;
      while (PyDict_Next(e.node, &pos, &k, &v)) push(v, k, 0);
    } else if (PyList_Check(e.node)) {
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(e.node); ++i) push(PyList_GET_ITEM(e.node, i), nullptr, i);
    } else {
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(e.node); ++i) push(PyTuple_GET_ITEM(e.node, i), nullptr, i);
    }
  }
  return py::none();
}

}  // namespace

void register_node_init(py::module_& m) {
  m.def("first_too_deep", &first_too_deep, py::arg("root"), py::arg("limit"));
  m.def("install_slots_init", &install_slots_init, py::arg("cls"), py::arg("fields"), py::arg("defaults"));
  m.def("expr_joins", &expr_joins, py::arg("lit"), py::arg("seq"), py::arg("alt"), py::arg("nothing"),
        py::arg("classes"));
}
