// structgen._core.fill_rows: copy memoised masks into many rows of a bitmask in one call;
//
// Why native: filling a batch row by row from Python costs a slice assignment, a tail fill and
// their argument checks per row (a few microseconds each, 64 rows: a quarter of a
// millisecond), all under the GIL. Here the pointers are gathered under the GIL and the copies
// run without it, so threads computing the batch's missing masks keep running meanwhile.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

using i32w = py::array_t<int32_t, py::array::c_style>;  // written in place: no cast copies
using i64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

// bitmask (batch, words) int32, rows[n] (row numbers), masks: n int32 arrays of at most
// `words` words each. Row rows[k] becomes masks[k] followed by zero words.
void fill_rows(i32w& bitmask, const i64& rows, const py::list& masks) {
  if (bitmask.ndim() != 2) throw std::invalid_argument("bitmask must be 2-D (batch, words)");
  const int64_t batch = bitmask.shape(0), words = bitmask.shape(1);
  const int64_t n = rows.shape(0);
  if (static_cast<int64_t>(masks.size()) != n) throw std::invalid_argument("rows and masks differ in length");
  const int64_t* R = rows.data();
  std::vector<const int32_t*> src(n);
  std::vector<int64_t> len(n);
  std::vector<py::array> keep;  // the arrays stay referenced while the GIL is released
  keep.reserve(n);
  for (int64_t k = 0; k < n; ++k) {
    if (R[k] < 0 || R[k] >= batch)
      throw std::invalid_argument("row " + std::to_string(R[k]) + " outside the batch of " + std::to_string(batch));
    py::array a = py::reinterpret_borrow<py::object>(masks[k]);
    // only the exact layout is read: a cast would copy, and an int64 mask read as words is wrong
    if (a.ndim() != 1 || a.itemsize() != 4 || (a.dtype().kind() != 'i' && a.dtype().kind() != 'u') ||
        !(a.flags() & py::array::c_style))
      throw std::invalid_argument("mask " + std::to_string(k) + " is not a contiguous 1-D 32-bit array");
    if (a.shape(0) > words)
      throw std::invalid_argument("mask " + std::to_string(k) + " has " + std::to_string(a.shape(0)) +
                                  " words but the bitmask rows have " + std::to_string(words));
    src[k] = static_cast<const int32_t*>(a.data());
    len[k] = a.shape(0);
    keep.push_back(std::move(a));
  }
  int32_t* B = bitmask.mutable_data();
  py::gil_scoped_release release;
  for (int64_t k = 0; k < n; ++k) {
    int32_t* row = B + R[k] * words;
    std::memcpy(row, src[k], static_cast<size_t>(len[k]) * 4);
    if (len[k] < words) std::memset(row + len[k], 0, static_cast<size_t>(words - len[k]) * 4);
  }
}

}  // namespace

void register_batch(py::module_& m) {
  m.def("fill_rows", &fill_rows, py::arg("bitmask").noconvert(), py::arg("rows"), py::arg("masks"));
}
