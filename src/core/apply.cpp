// structgen._core.apply_bitmask: set the logits of disallowed tokens to -inf, on the CPU.
//
// Why native: torch's shift-unpack plus masked_fill, or numpy's unpackbits plus a masked
// copyto, each make a full pass (and a temporary as large as the logits) per row, and in a
// constrained JSON string most words of a row are all-allowed (-1) and need no work at all.
// Here each word is read once: -1 words are skipped, 0 words set 32 logits, others only their
// clear bits; the GIL is released meanwhile.
//
// -inf is written as the bit pattern of the logits' float format through an integer type of
// the same width, so one loop serves every float width, bfloat16 included.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

// One row of contiguous logits: the compiler vectorises the 32-wide stores of blocked words.
template <typename T>
void apply_row(T* row, const int32_t* words, int64_t n_words, int64_t covered, int64_t vocab, T neg) {
  const int64_t full = covered / 32;  // words whose 32 tokens are all columns of the logits
  for (int64_t w = 0; w < full; ++w) {
    const uint32_t bits = static_cast<uint32_t>(words[w]);
    if (bits == 0xFFFFFFFFu) continue;  // every token of the word allowed: the usual case in a string
    T* p = row + w * 32;
    if (bits == 0) {
      for (int k = 0; k < 32; ++k) p[k] = neg;
      continue;
    }
    for (uint32_t blocked = ~bits; blocked; blocked &= blocked - 1) p[__builtin_ctz(blocked)] = neg;
  }
  if (full < n_words && full * 32 < covered) {  // a last word cut by the end of the logits
    const uint32_t blocked = ~static_cast<uint32_t>(words[full]);
    for (int64_t c = full * 32; c < covered; ++c)
      if ((blocked >> (c - full * 32)) & 1u) row[c] = neg;
  }
  for (int64_t c = covered; c < vocab; ++c) row[c] = neg;  // columns past the bitmask: padded vocabulary
}

// The same through a column stride (logits that are a view of a larger tensor).
template <typename T>
void apply_row_strided(char* base, int64_t col_stride, const int32_t* words, int64_t covered, int64_t vocab, T neg) {
  auto at = [&](int64_t col) -> T& { return *reinterpret_cast<T*>(base + col * col_stride); };
  for (int64_t c = 0; c < covered; ++c)
    if (!((static_cast<uint32_t>(words[c >> 5]) >> (c & 31)) & 1u)) at(c) = neg;
  for (int64_t c = covered; c < vocab; ++c) at(c) = neg;
}

template <typename T>
void apply_rows(char* L, int64_t ls0, int64_t ls1, const char* B, int64_t bs0, const std::vector<int64_t>& target,
                int64_t words, int64_t covered, int64_t vocab, T neg) {
  for (size_t r = 0; r < target.size(); ++r) {
    char* row = L + target[r] * ls0;
    const auto* bw = reinterpret_cast<const int32_t*>(B + static_cast<int64_t>(r) * bs0);
    if (ls1 == static_cast<int64_t>(sizeof(T)))
      apply_row<T>(reinterpret_cast<T*>(row), bw, words, covered, vocab, neg);
    else
      apply_row_strided<T>(row, ls1, bw, covered, vocab, neg);
  }
}

// The logits and the bitmask arrive as addresses with their shapes and byte strides: the
// caller (structgen.runtime.bitmask) has checked the tensors' device, dtype and shapes, and
// reading those off torch tensors directly is several microseconds cheaper a call than
// converting them to numpy arrays, which at batch 1 is most of the cost.
//   logits: rows x vocab elements of `item` bytes (2, 4, 8) at `lptr`, strides ls0, ls1;
//   bitmask: brows x words int32 at `bptr`, row stride bs0 (words contiguous);
//   indices: none (brows == rows), or brows row numbers of the logits;
//   neg: the bit pattern of -inf in the logits' format.
void apply_bitmask(uintptr_t lptr, int64_t rows, int64_t vocab, int64_t ls0, int64_t ls1, int64_t item,
                   uintptr_t bptr, int64_t brows, int64_t words, int64_t bs0, const py::object& indices, uint64_t neg) {
  if (item != 2 && item != 4 && item != 8) throw std::invalid_argument("logits must have 2, 4 or 8-byte elements");
  if (lptr == 0 || bptr == 0) throw std::invalid_argument("null tensor address");
  std::vector<int64_t> target(static_cast<size_t>(brows));
  if (indices.is_none()) {
    if (brows != rows) throw std::invalid_argument("bitmask and logits differ in rows");
    for (int64_t r = 0; r < rows; ++r) target[r] = r;
  } else {
    auto idx = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(indices);
    if (!idx || idx.ndim() != 1 || idx.shape(0) != brows)
      throw std::invalid_argument("indices must be one row number per bitmask row");
    for (int64_t r = 0; r < brows; ++r) {
      const int64_t t = idx.data()[r];
      if (t < 0 || t >= rows) throw std::invalid_argument("index " + std::to_string(t) + " outside the logits' rows");
      target[r] = t;
    }
  }
  const int64_t covered = words * 32 < vocab ? words * 32 : vocab;
  char* L = reinterpret_cast<char*>(lptr);
  const char* B = reinterpret_cast<const char*>(bptr);
  py::gil_scoped_release release;
  if (item == 2)
    apply_rows<uint16_t>(L, ls0, ls1, B, bs0, target, words, covered, vocab, static_cast<uint16_t>(neg));
  else if (item == 4)
    apply_rows<uint32_t>(L, ls0, ls1, B, bs0, target, words, covered, vocab, static_cast<uint32_t>(neg));
  else
    apply_rows<uint64_t>(L, ls0, ls1, B, bs0, target, words, covered, vocab, neg);
}

}  // namespace

void register_apply(py::module_& m) {
  m.def("apply_bitmask", &apply_bitmask, py::arg("logits"), py::arg("rows"), py::arg("vocab"), py::arg("ls0"),
        py::arg("ls1"), py::arg("item"), py::arg("bitmask"), py::arg("brows"), py::arg("words"), py::arg("bs0"),
        py::arg("indices"), py::arg("neg_inf"));
}
