// A thread's reusable buffer for one call: the vectors and strings that a first visit's mask
// and name clears fill and drop again. Allocated anew on every call they were a few dozen
// mallocs per first-visit fill, and allocation is where the threads of a batch fill met.
#pragma once

#include <utility>

namespace structgen {

// Takes `slot` (a static thread_local buffer) for the scope, empty, and gives it back with
// its capacity at the end. A nested call taking the same slot finds it empty and uses a fresh
// buffer of its own, so reentrancy never shares one.
template <class T>
class Scratch {
 public:
  explicit Scratch(T& slot) : slot_(slot) {
    value.swap(slot_);
    value.clear();
  }
  ~Scratch() { value.swap(slot_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  T value;

 private:
  T& slot_;
};

}  // namespace structgen
