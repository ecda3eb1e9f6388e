// A GIL released on demand. A first-visit fill (names.cpp fill_one) and a first step of
// accept_token hold the GIL while they compute until the computation reaches a step that may
// take long (release_here(): a byte row to compute, a walk beyond a few first bytes, a first
// name clear), then release it until the call returns. Why: most first visits along an output
// are walks inside a name or a literal of about a microsecond, where releasing the GIL and
// taking it back cost ~0.08 µs (a twentieth of the median first-pass fill with SmolLM2), and
// the longer walks still run without it.
#pragma once

#include <Python.h>

namespace structgen {

class LazyGil {
 public:
  // (with the GIL held)
  LazyGil() : prev_(active_) { active_ = this; }
  ~LazyGil() {
    active_ = prev_;
    if (state_ != nullptr) PyEval_RestoreThread(state_);
  }
  LazyGil(const LazyGil&) = delete;
  LazyGil& operator=(const LazyGil&) = delete;

  // Releases the GIL if this thread is inside a LazyGil that holds it; nothing otherwise (a
  // pool thread, a call that released the GIL itself). Callable under the core's own locks:
  // releasing never waits.
  static void release_here() {
    LazyGil* g = active_;
    if (g != nullptr && g->state_ == nullptr) {
      g->state_ = PyEval_SaveThread();
      ++releases_;
    }
  }
  // how many times this thread released the GIL here (_core.gil_releases, for the tests)
  static uint64_t releases() { return releases_; }

 private:
  LazyGil* prev_;
  PyThreadState* state_ = nullptr;
  static inline thread_local LazyGil* active_ = nullptr;
  static inline thread_local uint64_t releases_ = 0;
};

}  // namespace structgen
