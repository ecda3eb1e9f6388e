// What code outside config_index.cpp reads of a ConfigIndex (src/core/names.cpp's member-name
// clears): masks, byte rows, steps and completion distances, all callable without the GIL and
// from several threads at once (ConfigIndex's own thread rules apply).
#pragma once

#include <cstdint>
#include <string>

namespace structgen {

class IndexView {
 public:
  virtual ~IndexView() = default;
  virtual int64_t words() const = 0;
  virtual int64_t num_configs() const = 0;
  // the packed allowed-token mask of `cid` (words() uint32), computed on first use
  virtual const uint32_t* mask(int32_t cid) = 0;
  // mask(cid), also written to `out` (words() uint32): a first visit computes it there, so
  // a fill that wants the mask in its own row does not compute into scratch and copy
  virtual const uint32_t* mask_into(int32_t cid, uint32_t* out) = 0;
  // the mask of `cid` if it is computed already, else nullptr; never computes, takes no lock
  virtual const uint32_t* mask_if_ready(int32_t cid) const = 0;
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
