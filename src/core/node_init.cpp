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

}  // namespace

void register_node_init(py::module_& m) {
  m.def("install_slots_init", &install_slots_init, py::arg("cls"), py::arg("fields"), py::arg("defaults"));
}
