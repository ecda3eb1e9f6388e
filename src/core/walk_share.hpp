// One large trie walk shared with the idle threads of a batch fill (structgen.runtime.batch).
//
// Why: a batch step's missing masks are items of the pool's loop, one thread per mask. Most
// are a few microseconds, but a first visit that walks most of the vocabulary trie (the
// first character of a string under an unanchored pattern: 98,098 of SmolLM2's 100,298 nodes,
// 1.2 ms) or a step whose last item is a 50-100 us mask leaves every other thread idle until
// it ends: with 2 threads, about a third of a 64-grammar walk's late steps was the caller
// waiting for the helper's last mask. A walk large enough is cut into units (ranges of
// subtrees, the root's largest child cut at its children: a leading space is 69% of SmolLM2's
// trie), taken one at a time from a counter by its owner and by any thread of the fill that
// has run out of items. (A member name's start, 40-100 us at 49K tokens, is mostly rows and
// closures of the grammar rather than one walk, and is not cut.) A helper sets its bits in a buffer of its own, which the owner ORs
// into the mask once the helpers have left: the walks only ever set bits.
//
// The owner offers the walk only while a thread is waiting to help (checked between units),
// so a walk nobody can help costs its units' counter and nothing else.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace structgen {

// A walk's units, taken by its owner and its helpers.
class SharedWalk {
 public:
  // help(buf): a helper's part, taking units with take() until none is left and setting its
  // bits in `buf` (words uint32, zero on entry).
  SharedWalk(int64_t units, std::function<void(uint32_t*)> help) : units_(units), help_(std::move(help)) {}
  SharedWalk(const SharedWalk&) = delete;
  SharedWalk& operator=(const SharedWalk&) = delete;

  // The next unit, or -1 when every unit is taken.
  int64_t take() {
    const int64_t u = next_.fetch_add(1, std::memory_order_relaxed);
    return u < units_ ? u : -1;
  }

  // Whether some thread has taken a unit.
  bool started() const { return next_.load(std::memory_order_relaxed) > 0; }

 private:
  friend class WalkHelp;
  const int64_t units_;
  std::atomic<int64_t> next_{0};
  const std::function<void(uint32_t*)> help_;
  std::atomic<int> joined_{0};  // helpers that took a buffer
  std::exception_ptr error_;    // a helper's (under WalkHelp::mu_)
};

// Where the walks of one batch fill are offered and its idle threads wait to help.
class WalkHelp {
 public:
  WalkHelp(int threads, int64_t words) : slots_(threads > 1 ? threads - 1 : 0), words_(words) {}

  // The help of the batch fill whose item this thread runs (nullptr: none, walk alone).
  static WalkHelp* here() { return here_; }
  class Scope {  // sets here() for an item's mask
   public:
    explicit Scope(WalkHelp* h) : prev_(here_) { here_ = h; }
    ~Scope() { here_ = prev_; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    WalkHelp* prev_;
  };

  // -- the owner of a walk ------------------------------------------------------------------

  // Whether a thread waits to help (a relaxed read, between units).
  bool wanted() const { return waiting_.load(std::memory_order_relaxed) > 0; }

  // For the tests (_core._masks_with_a_waiting_helper): an owner offers its walk before its
  // first unit and lets a waiting helper take that unit, so that which thread walks which
  // unit is known (a helper's exception, say), not left to the machine's timing.
  bool helper_first() const { return helper_first_; }
  void set_helper_first(bool on) { helper_first_ = on; }

  // Offers `w` to the waiting threads; false if another walk is offered already.
  bool offer(SharedWalk& w) {
    // (the helpers' buffers are made by the first offer: most fills share no walk)
    std::call_once(made_, [this] {
      bufs_.reset(new uint32_t[static_cast<size_t>(slots_ > 0 ? slots_ : 1) * static_cast<size_t>(words_)]);
    });
    SharedWalk* none = nullptr;
    return open_.compare_exchange_strong(none, &w, std::memory_order_seq_cst);
  }

  // Ends the offer of `w` (every unit taken) and waits for its helpers to leave; then ORs
  // their bits into `mask` (`mask` nullptr: an exception unwinds the owner, nothing merged)
  // and rethrows the first exception a helper's units threw.
  void withdraw(SharedWalk& w, uint32_t* mask) {
    open_.store(nullptr, std::memory_order_seq_cst);
    // (a helper counts itself in before reading open_: once the count is zero after open_ is
    // cleared, no helper holds `w`)
    while (inside_.load(std::memory_order_seq_cst) != 0) pause();
    if (mask == nullptr) return;
    const int n = std::min(w.joined_.load(std::memory_order_acquire), slots_);
    for (int k = 0; k < n; ++k) {
      const uint32_t* b = bufs_.get() + static_cast<size_t>(k) * static_cast<size_t>(words_);
      for (int64_t i = 0; i < words_; ++i) mask[i] |= b[i];
    }
    if (w.error_) std::rethrow_exception(w.error_);
  }

  // -- a thread out of items ----------------------------------------------------------------

  // Helps the walks offered until `finished()` holds (every item of the fill done, or one
  // failed). Spins for kSpin, then polls every kPoll: an item that runs for milliseconds
  // (a large first visit with nothing to share) does not keep a core spinning meanwhile.
  template <class Finished>
  void help_until(Finished finished) {
    waiting_.fetch_add(1, std::memory_order_relaxed);
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    for (int k = 0;; ++k) {
      if (open_.load(std::memory_order_relaxed) != nullptr && join()) continue;
      if (finished()) break;
      if ((k & 63) == 63 && std::chrono::steady_clock::now() > spin_until)
        std::this_thread::sleep_for(kPoll);
      else
        pause();
    }
    waiting_.fetch_sub(1, std::memory_order_relaxed);
  }

  // Walks a helper has joined, in this process (for the tests).
  static int64_t shared() { return shared_.load(std::memory_order_relaxed); }

  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

 private:
  // Joins the walk on offer, if any, and takes its units until none is left.
  bool join() {
    inside_.fetch_add(1, std::memory_order_seq_cst);
    SharedWalk* w = open_.load(std::memory_order_seq_cst);
    bool helped = false;
    if (w != nullptr) {
      const int k = w->joined_.fetch_add(1, std::memory_order_acq_rel);
      if (k < slots_) {
        uint32_t* buf = bufs_.get() + static_cast<size_t>(k) * static_cast<size_t>(words_);
        std::memset(buf, 0, static_cast<size_t>(words_) * 4);
        try {
          w->help_(buf);
        } catch (...) {
          std::lock_guard<std::mutex> g(mu_);
          if (!w->error_) w->error_ = std::current_exception();
          while (w->take() >= 0) {
          }  // (the owner takes no more units either)
        }
        helped = true;
        shared_.fetch_add(1, std::memory_order_relaxed);
      }
      // (a slot past the last: more helpers than buffers, which a walk offered once cannot have)
    }
    inside_.fetch_sub(1, std::memory_order_seq_cst);
    return helped;
  }

  static constexpr std::chrono::microseconds kSpin{1000}, kPoll{50};
  static inline thread_local WalkHelp* here_ = nullptr;
  static inline std::atomic<int64_t> shared_{0};

  const int slots_;
  const int64_t words_;
  std::once_flag made_;
  std::unique_ptr<uint32_t[]> bufs_;  // a buffer per helper slot, slots_ * words_ (from the first offer)
  std::atomic<SharedWalk*> open_{nullptr};
  std::atomic<int> inside_{0};   // helpers inside join()
  std::atomic<int> waiting_{0};  // threads in help_until()
  bool helper_first_ = false;
  std::mutex mu_;
};

}  // namespace structgen
