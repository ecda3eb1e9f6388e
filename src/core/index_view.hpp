// What code outside config_index.cpp reads of a ConfigIndex (src/core/names.cpp's member-name
// clears): masks, byte rows, steps and completion distances, all callable without the GIL and
// from several threads at once (ConfigIndex's own thread rules apply).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

namespace structgen {

// A mask an index keeps (each distinct one once), readable without a lock. Most masks are
// kept whole; one whose set bits lie in a few 64-byte chunks (inside a name or a literal, a
// few tokens are allowed) keeps those chunks alone: writing 16 KB of zeros to cold memory for
// each such new mask at 128K tokens took as long as the walk that computed it.
struct StoredMask {
  // the whole mask (words() words): set from the start when kept whole, else made on the
  // first call that needs a pointer to all of it (IndexView::mask) and kept
  mutable std::atomic<const uint32_t*> dense{nullptr};
  const uint64_t* nonzero = nullptr;  // bit c: whole chunk c (16 words) has a set bit
  // kept in part: the chunks `nonzero` marks, 16 words each in order, then the words after
  // the last whole chunk; nullptr when kept whole
  const uint32_t* packed = nullptr;

  // the mask's first `n` words (n = words()) written to `out`
  void copy_to(uint32_t* out, int64_t n) const {
    if (packed == nullptr) {
      std::memcpy(out, dense.load(std::memory_order_acquire), static_cast<size_t>(n) * 4);
      return;
    }
    // every word written once: the runs of empty chunks zeroed between the kept ones (zeroing
    // the whole row first, then copying the kept chunks over it, was two fifths of a warm
    // 64-row batch fill's time)
    const int64_t chunks = n / 16, nzw = (chunks + 63) / 64;
    const uint32_t* from = packed;
    int64_t next = 0;  // the first chunk not written yet
    for (int64_t k = 0; k < nzw; ++k)
      for (uint64_t bits = nonzero[k]; bits != 0; bits &= bits - 1, from += 16) {
        const int64_t at = k * 64 + __builtin_ctzll(bits);
        if (at > next) std::memset(out + next * 16, 0, static_cast<size_t>(at - next) * 64);
        std::memcpy(out + at * 16, from, 64);
        next = at + 1;
      }
    if (chunks > next) std::memset(out + next * 16, 0, static_cast<size_t>(chunks - next) * 64);
    std::memcpy(out + chunks * 16, from, static_cast<size_t>(n - chunks * 16) * 4);
  }
};

class IndexView {
 public:
  virtual ~IndexView() = default;
  virtual int64_t words() const = 0;
  virtual int64_t num_configs() const = 0;
  // the packed allowed-token mask of `cid` (words() uint32), computed on first use
  virtual const uint32_t* mask(int32_t cid) = 0;
  // the mask of `cid` written to `out` (words() uint32): a first visit computes it there, so
  // a fill that wants the mask in its own row does not compute into scratch and copy
  virtual void mask_into(int32_t cid, uint32_t* out) = 0;
  // the mask of `cid` if it is computed already (StoredMask::copy_to writes it to a row),
  // else nullptr; never computes, takes no lock
  virtual const StoredMask* mask_if_ready(int32_t cid) const = 0;
  // the 256 successor configurations of `cid` (0: dead), computed on first use
  virtual const int32_t* row(int32_t cid) = 0;
  virtual int32_t step_bytes(int32_t cid, const uint8_t* data, int64_t n) = 0;
  // step_bytes where every row on the way is computed already, else -1; takes no lock
  virtual int32_t step_if_ready(int32_t cid, const uint8_t* data, int64_t n) const = 0;
  virtual bool is_accepting(int32_t cid) = 0;
  // whether the grammar has counters (whose configurations may hold many stacks), and the
  // limit on those stacks (counters.MAX_CONFIG_STACKS, which users may change)
  virtual bool counted() const = 0;
  virtual void set_stack_limit(int64_t n) = 0;
  // words() words allowing only the tokenizer's stop tokens (a terminated matcher's mask)
  virtual const uint32_t* stop_mask() const = 0;
  // the same, kept whole
  virtual const StoredMask* stop_stored() const = 0;
  // fewest bytes completing the text from `cid` (>= kUnreachable: none); the first call
  // computes the grammar's distances
  virtual int64_t config_dist(int32_t cid) = 0;
  // whether some text completes the output from `cid` (false for DEAD); without distances
  // where every rule state can reach its rule's end (a trimmed automaton)
  virtual bool can_complete(int32_t cid) = 0;
  // whether some stack of `cid` stays alive inside its top rule on every string of plain
  // bytes (then every plain string is a live continuation from `cid`)
  virtual bool plain_total(int32_t cid) = 0;
  // a shortest text completing the output from `cid` into `out`; false for DEAD
  virtual bool shortest_completion(int32_t cid, std::string& out) = 0;

  // A frame (rule r, DFA state s, parent stack p) that is a configuration's only stack, in a
  // state that reads a byte, calls nothing and cannot end its rule: the configuration after
  // a byte is then the frame of the DFA's next state alone. Searches step such frames by
  // the DFA's row instead of making every configuration on the way and its byte row.
  struct SimpleFrame {
    int32_t r = -1, s = 0, p = -1;
  };
  // whether `cid` is such a frame alone and has no byte row yet (then `f` is its frame)
  virtual bool simple_frame(int32_t cid, SimpleFrame& f) const = 0;
  // the DFA row of f's state: 256 next states, -1 dead
  virtual const int32_t* dfa_row(const SimpleFrame& f) const = 0;
  // whether state s of rule r is simple (a frame in it is a SimpleFrame)
  virtual bool state_simple(int32_t r, int32_t s) const = 0;
  // the configuration of frame (r, t, p) alone (what a byte row would hold for it)
  virtual int32_t frame_config(int32_t r, int32_t t, int32_t p) = 0;
};

constexpr int64_t kUnreachableDist = int64_t(1) << 60;  // automaton.UNREACHABLE

}  // namespace structgen
