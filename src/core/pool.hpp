// A process-wide pool of worker threads for GIL-free parallel loops (structgen.runtime.batch's
// fill of the masks a batch is missing).
//
// Why native, and not Python's ThreadPoolExecutor: a batch step misses a dozen masks or so,
// each a first visit of tens of microseconds up to milliseconds. A Python pool paid a submit,
// a future and GIL hand-offs per task, and static shares left one thread idle while the other
// computed a large mask. Here the caller and the woken workers take items from one atomic
// counter, so the load balances itself, and waking a parked worker costs a futex. A futex
// round trip still costs tens of microseconds on a virtual machine, twice a loop (a worker
// woken, the caller woken when the worker is done): the caller spins for its helpers, and a
// worker spins after a loop for as long as the pool's recent gaps between loops say the next
// one comes (a decoding loop's step), within bounds, which catches the next step.
//
// A Feed is a loop whose items the caller publishes while it runs (the batch fill's missing
// masks, computed by the workers while the caller still reads the batch's matchers).
//
// One loop runs at a time: a caller finding the pool busy (another Python thread filling its
// own batch) runs its loop alone rather than wait. Workers are detached and never joined: the
// pool lives until the process ends, and a forked child (which has none of the parent's
// threads) builds a pool of its own.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <system_error>
#include <thread>


namespace structgen {

class Pool {
  struct Loop {
    const std::function<void(int64_t)>& body;
    // n and open are written by the caller while it publishes, next by every thread taking
    // an item: on one cache line, each helper's take stole the line the caller's next
    // publication writes
    alignas(64) std::atomic<int64_t> n{0};  // items published
    std::atomic<bool> open{false};          // more may be published (a Feed's loop until finish)
    alignas(64) std::atomic<int64_t> next{0};
    int wanted = 0;                // workers that may still join (under mu_)
    std::atomic<int> running{0};  // workers inside run() (incremented under mu_)
    std::exception_ptr error;     // the first one (under mu_)
  };

 public:
  // The pool of this process (made on first use; a forked child makes its own).
  static Pool& get() {
    static std::atomic<Pool*> pool{nullptr};
    static std::mutex made;
    std::lock_guard<std::mutex> g(made);
    Pool* p = pool.load();
    if (p == nullptr || p->pid_ != getpid()) {
      p = new Pool();  // a parent's pool, copied by fork, is left alone: its threads are not here
      pool.store(p);
    }
    return *p;
  }

  // The calling thread's lane in the loop it runs: 0 for the loop's caller, 1, 2... for its
  // helpers (distinct within a loop). A body that keeps per-lane work (BatchFill's rows, each
  // preferably filled by the core that filled it last) reads it; the pool assigns nothing by it.
  static int lane() { return lane_; }

  // body(i) for every i in [0, n), on up to `threads` threads counting the caller; returns
  // when every call has returned. The first exception a call throws is rethrown here, and
  // the items nobody had started by then are skipped.
  void parallel_for(int64_t n, int threads, const std::function<void(int64_t)>& body) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (threads <= 1 || n <= 1 || !busy.owns_lock()) {
      for (int64_t i = 0; i < n; ++i) body(i);
      return;
    }
    Loop loop{body};
    loop.n.store(n, std::memory_order_relaxed);
    start(loop, static_cast<int>(std::min<int64_t>(threads - 1, n - 1)));
    run(loop);
    join(loop);
    if (loop.error) std::rethrow_exception(loop.error);
  }

  // A loop over items that its caller publishes while the loop runs: the helpers start on the
  // first items while the caller is still finding the others (structgen.runtime.batch reads
  // its matchers with the GIL held, a serial part of each step that the helpers' first mask
  // now overlaps). Items are published in order, by count; the helpers are woken by the first
  // publication, so a feed that publishes nothing wakes nobody. With one thread, or the pool
  // busy with another caller's loop, finish() runs every item in the caller.
  class Feed {
   public:
    Feed(int threads, const std::function<void(int64_t)>& body)
        : pool_(get()), busy_(pool_.busy_, std::try_to_lock), loop_{body}, threads_(threads) {
      loop_.open.store(true, std::memory_order_relaxed);
    }
    Feed(const Feed&) = delete;
    Feed& operator=(const Feed&) = delete;
    // An exception while feeding: the helpers finish what was published, and are waited for
    // (the loop lives here).
    ~Feed() {
      close();
      if (started_) pool_.join(loop_);
    }

    // Items [0, count) may be taken from now on (count never decreases).
    void publish(int64_t count) {
      loop_.n.store(count, std::memory_order_release);
      if (!started_ && count > 0 && threads_ > 1 && busy_.owns_lock()) {
        pool_.start(loop_, threads_ - 1);
        started_ = true;
      }
    }

    // Whether helpers were woken (the caller may still publish more items).
    bool started() const { return started_; }

    // Ends the feed: the caller takes items with the helpers until none is left and waits for
    // them; the first exception an item threw is rethrown. The pool is free for other loops
    // once this returns.
    void finish() {
      close();
      pool_.run(loop_);
      if (started_) pool_.join(loop_);
      started_ = false;
      if (busy_.owns_lock()) busy_.unlock();
      if (loop_.error) std::rethrow_exception(loop_.error);
    }

   private:
    void close() { loop_.open.store(false, std::memory_order_release); }

    Pool& pool_;
    std::unique_lock<std::mutex> busy_;
    Loop loop_;
    int threads_;
    bool started_ = false;
  };

 private:
  Pool() : pid_(getpid()) {}

  // Spin until done() holds or `limit` has passed; returns done().
  template <class Done>
  static bool spin_until(std::chrono::microseconds limit, Done done) {
    if (done()) return true;
    const auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
      for (int k = 0; k < 64; ++k) {
        if (done()) return true;
        pause();
      }
      if (std::chrono::steady_clock::now() >= until) return done();
    }
  }

  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  // Publishes `loop` to up to `helpers` workers (started here if the pool has fewer) and
  // wakes the parked ones. The caller holds busy_.
  void start(Loop& loop, int helpers) {
    bool sleepers;
    {
      std::lock_guard<std::mutex> g(mu_);
      try {
        while (workers_ < helpers) {
          std::thread([this] { work(); }).detach();
          ++workers_;
        }
      } catch (const std::system_error&) {
        // no thread to be had (a process or memory limit): the workers there are do the loop
      }
      loop.wanted = std::min(helpers, workers_);
      loop_ = &loop;
      learn_gap();
      generation_.fetch_add(1, std::memory_order_release);
      sleepers = sleeping_ > 0;  // read with the new generation published: none is missed
    }
    if (sleepers) wake_.notify_all();
  }

  // Waits until the helpers of `loop` have left it (the caller has run out of items).
  void join(Loop& loop) {
    {
      std::lock_guard<std::mutex> g(mu_);
      loop_ = nullptr;  // workers that wake from now on find nothing to join
      ended_ = std::chrono::steady_clock::now();
    }
    // The helpers are finishing their last items: spin on their count a while before
    // sleeping (a futex round trip costs tens of microseconds on a virtual machine).
    if (!spin_until(kCallerSpin, [&] { return loop.running.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> g(mu_);
      done_.wait(g, [&] { return loop.running.load(std::memory_order_acquire) == 0; });
    }
  }

  // Takes items until none is left: an item not published yet is waited for while the loop
  // is open (its caller publishing); after an exception every later item is skipped.
  void run(Loop& loop) {
    for (;;) {
      const int64_t i = loop.next.fetch_add(1, std::memory_order_relaxed);
      if (i >= loop.n.load(std::memory_order_acquire)) {
        // (open is read before n: the count a closed loop ends with is published before it closes)
        while (loop.open.load(std::memory_order_acquire) && i >= loop.n.load(std::memory_order_acquire)) pause();
        if (i >= loop.n.load(std::memory_order_acquire)) return;
      }
      try {
        loop.body(i);
      } catch (...) {
        std::lock_guard<std::mutex> g(mu_);
        if (!loop.error) loop.error = std::current_exception();
        loop.next.store(std::numeric_limits<int64_t>::max() / 2, std::memory_order_relaxed);
      }
    }
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      // A decoding loop calls again within a step's Python work: a worker that has just
      // finished spins a little before parking, so the next call need not wake it.
      spin_until(std::chrono::microseconds(spin_us_.load(std::memory_order_relaxed)),
                 [&] { return generation_.load(std::memory_order_acquire) != seen; });
      std::unique_lock<std::mutex> g(mu_);
      if (generation_.load(std::memory_order_relaxed) == seen) {
        ++sleeping_;
        wake_.wait(g, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
        --sleeping_;
      }
      seen = generation_.load(std::memory_order_relaxed);
      Loop* loop = loop_;
      if (loop == nullptr || loop->wanted == 0) continue;
      lane_ = loop->wanted--;  // (1..wanted: distinct among the loop's helpers)
      loop->running.fetch_add(1, std::memory_order_relaxed);
      g.unlock();
      run(*loop);
      lane_ = 0;
      // the caller may return (and the loop go) as soon as the count reaches zero
      if (loop->running.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> d(mu_);
        done_.notify_all();
      }
    }
  }

  // The gap between the last loop's end and this one's start, kept for the workers' spin
  // (under mu_). A worker spins after a loop for about the Python work of a decoding step
  // between two calls (a batch's accepts and the next call's arguments), then parks: a
  // fixed 200 us parked it just before the next step of a 64-row batch (~0.2 ms of accepts)
  // and that step paid a wake-up (~40 us on a virtual machine) in its serial part. The spin
  // follows the longest of the last kGaps gaps, with a quarter more, between kMinSpin and
  // kMaxSpin; gaps longer than kMaxSpin (a model's forward pass between two steps) leave it
  // at kMinSpin, since no spin that long pays.
  void learn_gap() {
    if (ended_.time_since_epoch().count() == 0) return;  // the first loop: no gap yet
    const auto gap = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - ended_);
    gaps_[gap_at_++ % kGaps] = gap.count();
    int64_t longest = 0;
    for (int64_t g : gaps_) longest = std::max(longest, g);
    const int64_t spin = longest > kMaxSpin.count() ? kMinSpin.count()
                                                    : std::clamp<int64_t>(longest + longest / 4, kMinSpin.count(), kMaxSpin.count());
    spin_us_.store(spin, std::memory_order_relaxed);
  }

  // The caller spins while the helpers finish their last items (it has nothing else to do).
  static constexpr std::chrono::microseconds kCallerSpin{1000};
  static constexpr std::chrono::microseconds kMinSpin{200}, kMaxSpin{1000};
  static constexpr size_t kGaps = 4;

  static inline thread_local int lane_ = 0;

  const pid_t pid_;
  std::mutex busy_;  // held by the caller of the loop in progress
  std::mutex mu_;
  std::condition_variable wake_, done_;
  Loop* loop_ = nullptr;            // (under mu_)
  std::atomic<uint64_t> generation_{0};  // loops started (incremented under mu_)
  int workers_ = 0;                  // (under mu_)
  int sleeping_ = 0;                 // workers parked on wake_ (under mu_)
  std::chrono::steady_clock::time_point ended_{};  // when the last loop ended (under mu_)
  int64_t gaps_[kGaps] = {0, 0, 0, 0};             // the last gaps between loops, us (under mu_)
  size_t gap_at_ = 0;                              // (under mu_)
  std::atomic<int64_t> spin_us_{kMinSpin.count()};  // a worker's spin after a loop
};

}  // namespace structgen
