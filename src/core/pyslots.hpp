// Reading a __slots__ field of a Python object without an attribute lookup (expression nodes
// built by the names walk, matchers read by the batch fill): the offset of the member
// descriptor a class resolves the field's name to.
#pragma once

#include <Python.h>
#include <structmember.h>

namespace structgen {

// The offset in an instance of `cls` of the slot that `cls` resolves `field` to, or -1 when
// the name resolves to anything else (a property, a method, nothing) or the slot is not a
// plain object slot. No Python error is left set.
inline Py_ssize_t slot_offset(PyObject* cls, const char* field) {
  PyObject* d = PyObject_GetAttrString(cls, field);
  if (d == nullptr) {
    PyErr_Clear();
    return -1;
  }
  Py_ssize_t off = -1;
  if (Py_TYPE(d) == &PyMemberDescr_Type) {
    const PyMemberDef* m = reinterpret_cast<PyMemberDescrObject*>(d)->d_member;
    if (m->type == T_OBJECT_EX) off = m->offset;
  }
  Py_DECREF(d);
  return off;
}

// Field `name` of `o`, borrowed from it: read at `off` (slot_offset() of o's exact class)
// where that is >= 0 and the slot is set, else through getattr (which raises the error).
inline PyObject* slot_or_attr(PyObject* o, Py_ssize_t off, PyObject* name) {
  if (off >= 0) {
    PyObject* v = *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + off);
    if (v != nullptr) return v;
  }
  PyObject* v = PyObject_GetAttr(o, name);
  if (v == nullptr) return nullptr;
  Py_DECREF(v);  // (still owned by `o`)
  return v;
}

}  // namespace structgen
