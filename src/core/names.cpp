// structgen._core member-name tracking: the lexer state of structgen.runtime.names and the mask
// clears that keep the member names of one object distinct.
//
// A grammar with free member names cannot say "each name once", so a matcher of such a grammar
// runs a small JSON lexer beside the automaton (NameState: the open containers, the decoded
// names written in each open object, the name being written) and clears from each mask the
// tokens that would close a name a second time in its object, or leave a name half written
// such that every way to end it repeats one (a dead end).
//
// Why native: these clears visit the quote-holding tokens a configuration's mask allows and
// feed each to the lexer; in Python that was most of a first-visit mask's time, and it held
// the GIL, so a batch of matchers filled by several threads ran them one after the other.
// Here a fill runs without the GIL (the searches' shortest completions are native too). The per-tokenizer tables (NameTables) are immutable and
// shared; the memos of a grammar (NameIndex) are guarded by one mutex held only around
// lookups and inserts, never while computing; the lexer state of a matcher is immutable
// (shared structure), so matchers' histories, rollbacks and forks just keep pointers.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <thread>
#include <vector>

#include "fa.hpp"
#include "index_view.hpp"
#include "lazy_gil.hpp"
#include "pool.hpp"
#include "pyslots.hpp"
#include "scratch.hpp"
#include "walk_share.hpp"

namespace py = pybind11;

namespace {

using structgen::IndexView;
using structgen::kUnreachableDist;

enum : uint8_t { kOutside = 0, kValue = 1, kKey = 2 };  // names.OUTSIDE, VALUE, KEY

// A decoded member name; nullopt: the body ended inside an escape (a lone high surrogate
// before the closing quote), which is a name of its own all the same (Python's None).
using Name = std::optional<std::string>;
using Names = std::vector<Name>;  // sorted (nullopt first), no duplicates

bool has_quote_or_backslash(const uint8_t* d, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (d[i] == '"' || d[i] == '\\') return true;
  return false;
}

bool has_structure(const uint8_t* d, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    switch (d[i]) {
      case '{': case '}': case '[': case ']': case '"': case ',': case ':':
        return true;
      default:
        break;
    }
  }
  return false;
}

// UTF-8 of a code point, surrogates included (Python's "surrogatepass").
void put_code_point(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int hex_digit(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

enum class Decoded { kName, kInsideEscape, kBadEscape };

// The name a JSON string body spells, as UTF-8 bytes (lone surrogates kept). kInsideEscape:
// `raw` ends inside an escape (or with a high surrogate whose low half may follow);
// kBadEscape: a \u escape with a non-hex digit (no JSON grammar writes one).
Decoded decode_name(const uint8_t* raw, size_t n, std::string& out) {
  out.clear();
  if (std::memchr(raw, '\\', n) == nullptr) {
    out.assign(reinterpret_cast<const char*>(raw), n);
    return Decoded::kName;
  }
  size_t i = 0;
  int32_t pending_high = -1;  // a \uD800-\uDBFF escape waiting for its low half
  while (i < n) {
    const uint8_t b = raw[i];
    if (b != '\\') {
      if (pending_high >= 0) {
        put_code_point(out, static_cast<uint32_t>(pending_high));
        pending_high = -1;
      }
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    if (i + 1 >= n) return Decoded::kInsideEscape;
    const uint8_t c = raw[i + 1];
    if (c == 'u') {
      if (i + 6 > n) return Decoded::kInsideEscape;
      int32_t cp = 0;
      for (size_t k = i + 2; k < i + 6; ++k) {
        const int h = hex_digit(raw[k]);
        if (h < 0) return Decoded::kBadEscape;
        cp = cp * 16 + h;
      }
      i += 6;
      if (pending_high >= 0) {
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
          put_code_point(out, 0x10000 + ((static_cast<uint32_t>(pending_high) - 0xD800) << 10) + (cp - 0xDC00));
          pending_high = -1;
          continue;
        }
        put_code_point(out, static_cast<uint32_t>(pending_high));
        pending_high = -1;
      }
      if (cp >= 0xD800 && cp <= 0xDBFF)
        pending_high = cp;
      else
        put_code_point(out, static_cast<uint32_t>(cp));
      continue;
    }
    if (pending_high >= 0) {
      put_code_point(out, static_cast<uint32_t>(pending_high));
      pending_high = -1;
    }
    switch (c) {
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      default: out.push_back(static_cast<char>(c)); break;  // " \ / and anything else: itself
    }
    i += 2;
  }
  if (pending_high >= 0) return Decoded::kInsideEscape;
  return Decoded::kName;
}

// The decoded name of raw bytes into `out` (nullopt: they end inside an escape), reusing its
// buffer: the fresh-name search decodes a name per node.
void decode_into(const uint8_t* raw, size_t n, Name& out) {
  switch (decode_name(raw, n, out.emplace())) {
    case Decoded::kName: return;
    case Decoded::kInsideEscape: out.reset(); return;
    default: throw std::invalid_argument("a member name holds a \\u escape with a non-hex digit");
  }
}

Name decode_or_none(const std::string& raw) {
  Name out;
  decode_into(reinterpret_cast<const uint8_t*>(raw.data()), raw.size(), out);
  return out;
}

// -- the lexer state ----------------------------------------------------------------------

struct Level;
using LevelPtr = std::shared_ptr<const Level>;

// A value made on first use by whichever thread needs it first and then shared, published
// once by compare-and-swap: levels and states are shared between threads. (std::atomic_load
// and atomic_store of a shared_ptr take a lock from a global pool on every call: about a
// third of a fresh state's memo key on a first pass.) A copy starts empty.
template <class T>
class Lazy {
 public:
  Lazy() = default;
  Lazy(const Lazy&) noexcept {}
  Lazy& operator=(const Lazy&) noexcept {
    reset();
    return *this;
  }
  ~Lazy() { reset(); }
  // the value, made by make(T&) into a fresh T if there is none yet
  template <class Make>
  const std::shared_ptr<const T>& get(Make&& make) const {
    const Slot* v = p_.load(std::memory_order_acquire);
    if (v == nullptr) {
      auto fresh = std::make_shared<T>();
      make(*fresh);
      auto* made = new Slot(std::move(fresh));
      if (p_.compare_exchange_strong(v, made, std::memory_order_acq_rel)) {
        v = made;
      } else {
        delete made;  // another thread's, equal, was published first (now in v)
      }
    }
    return *v;
  }
  // forget the value (the owner changed; not while another thread may read it)
  void reset() { delete p_.exchange(nullptr, std::memory_order_acq_rel); }

 private:
  using Slot = std::shared_ptr<const T>;
  mutable std::atomic<const Slot*> p_{nullptr};
};

// A part of memo keys that many keys share, hashed once: an object's names (put_names), a
// chain of containers (put_levels)
struct KeyBytes {
  std::string bytes;
  size_t hash = 0;
  // equal parts: one shared part, or two of equal bytes (nullptr: none)
  static bool same(const std::shared_ptr<const KeyBytes>& a, const std::shared_ptr<const KeyBytes>& b) {
    return a == b || (a != nullptr && b != nullptr && a->bytes == b->bytes);
  }
};

// An open container: an object with the names written in it so far, or an array.
struct Level {
  LevelPtr parent;
  bool object = false;
  std::shared_ptr<const Names> names;  // object: nullptr while no name is written
  // memo-key pieces made on first use (put_names of names; put_levels from here out), since
  // every clear of a fresh state writes them, object names and all
  Lazy<KeyBytes> names_key;
  Lazy<KeyBytes> chain_key;
  size_t count() const { return names ? names->size() : 0; }
};

bool has_name(const Names* names, const Name& name) {
  return names != nullptr && std::binary_search(names->begin(), names->end(), name);
}

// A state's memo key (fill_state_key) with its hash, made once per state: a clear's memo lookup
// then builds no string and hashes nothing. The containers' part is the level's, shared:
// most states of a first pass are new, and copying and hashing every open object's names
// for each was most of a first clear's key cost.
struct StateKey {
  std::shared_ptr<const KeyBytes> chain;  // nullptr: no open container
  std::string position;                   // put_position
  size_t hash = 0;
  bool operator==(const StateKey& o) const {
    return hash == o.hash && position == o.position &&
           KeyBytes::same(chain, o.chain);
  }
};

// names.NameState: immutable; a matcher keeps one per accepted step.
struct NameState {
  LevelPtr top;  // innermost open container (nullptr: none)
  bool expect_key = false;
  uint8_t mode = kOutside;
  bool esc = false;
  std::string key;  // raw bytes of the name being written (mode kKey)
  int64_t named = 0;  // names written in the open objects, all together
  // state_key() of this state, made on first use (reset by whatever changes the fields above)
  Lazy<struct StateKey> key_cache;

  const Names* top_names() const { return top && top->object ? top->names.get() : nullptr; }
  // decoded bytes of the name being written; nullopt inside an escape
  Name key_prefix() const {
    if (esc) return std::nullopt;
    return decode_or_none(key);
  }
};
using StatePtr = std::shared_ptr<const NameState>;

enum Fed { kDuplicate = 0, kSame = 1, kNew = 2 };

// The state after `d`: kDuplicate if `d` closes a name already written in its object; kSame
// when `d` cannot change names (inside a value string without quote or backslash, numbers,
// literals, whitespace); else kNew with the state in `out`.
Fed feed(const NameState& s, const uint8_t* d, size_t n, NameState& out) {
  uint8_t mode = s.mode;
  if (!s.esc) {
    if (mode == kValue) {
      if (!has_quote_or_backslash(d, n)) return kSame;
    } else if (mode == kKey) {
      if (!has_quote_or_backslash(d, n)) {
        out = s;
        out.key_cache.reset();
        out.key.append(reinterpret_cast<const char*>(d), n);
        return kNew;
      }
    } else if (!has_structure(d, n)) {
      return kSame;
    }
  }
  LevelPtr top = s.top;
  bool expect_key = s.expect_key, esc = s.esc;
  std::string key = s.key;
  int64_t named = s.named;
  size_t i = 0;
  while (i < n) {
    const uint8_t b = d[i];
    if (mode == kOutside) {
      switch (b) {
        case '"':
          if (top && top->object && expect_key) {
            mode = kKey;
            key.clear();
          } else {
            mode = kValue;
          }
          break;
        case '{':
          top = std::make_shared<const Level>(Level{top, true, nullptr});
          expect_key = true;
          break;
        case '[':
          top = std::make_shared<const Level>(Level{top, false, nullptr});
          break;
        case '}':
        case ']':
          if (top) {
            named -= static_cast<int64_t>(top->count());
            top = top->parent;
          }
          expect_key = false;
          break;
        case ':':
          expect_key = false;
          break;
        case ',':
          expect_key = top && top->object;
          break;
        default:
          break;
      }
      ++i;
      continue;
    }
    // inside a string: jump to the next quote or backslash
    if (esc) {
      esc = false;
      if (mode == kKey) key.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    size_t j = i;
    while (j < n && d[j] != '"' && d[j] != '\\') ++j;
    if (mode == kKey) key.append(reinterpret_cast<const char*>(d + i), j - i);
    if (j == n) break;
    if (d[j] == '\\') {
      esc = true;
      if (mode == kKey) key.push_back('\\');
      i = j + 1;
      continue;
    }
    // closing quote
    if (mode == kKey) {
      Name name = decode_or_none(key);
      const Names* names = top->names.get();
      if (has_name(names, name)) return kDuplicate;
      auto grown = std::make_shared<Names>();
      if (names != nullptr) *grown = *names;
      grown->insert(std::upper_bound(grown->begin(), grown->end(), name), std::move(name));
      top = std::make_shared<const Level>(Level{top->parent, true, std::move(grown)});
      ++named;
      key.clear();
      expect_key = false;
    }
    mode = kOutside;
    i = j + 1;
  }
  out.top = std::move(top);
  out.expect_key = expect_key;
  out.mode = mode;
  out.esc = esc;
  out.key = std::move(key);
  out.named = named;
  out.key_cache.reset();
  return kNew;
}

Fed feed(const NameState& s, const std::string& d, NameState& out) {
  return feed(s, reinterpret_cast<const uint8_t*>(d.data()), d.size(), out);
}

// A lexer pass over `d` from `s` that builds no state: where feed() would end (mode and
// expect_key) and, when `names` is set, whether it would find `d` writing a name twice in one
// object. The checks below skip most tokens by where they end (outside a name, say), and the
// duplicate check feeds hundreds of quote tokens per first visit: a built state copies an
// object's names whenever a name closes. Names closed by `d` itself are kept apart per object
// (an open object by its level, one that `d` opens by its number). kTooDeep when `d` opens
// more containers than this tracks: the caller then feeds.
enum Scan { kScanned = 0, kWritesDuplicate = 1, kTooDeep = 2 };

Scan scan(const NameState& s, const uint8_t* d, size_t n, bool names, uint8_t& mode_out, bool& expect_key_out) {
  uint8_t mode = s.mode;
  bool esc = s.esc, expect_key = s.expect_key;
  const Level* base = s.top.get();  // the innermost open container of `s` not closed by `d`
  int64_t opened[64];               // containers `d` opens: -1 an array, else the object's number
  int depth = 0;
  int64_t opens = 0;
  std::string key = names && mode == kKey ? s.key : std::string();
  std::vector<std::pair<const void*, Name>> added;  // (object, name) closed by `d`
  for (size_t i = 0; i < n; ++i) {
    const uint8_t b = d[i];
    if (mode == kOutside) {
      const bool any = depth > 0 || base != nullptr;
      const bool object = depth > 0 ? opened[depth - 1] >= 0 : base != nullptr && base->object;
      switch (b) {
        case '"':
          mode = any && object && expect_key ? kKey : kValue;
          key.clear();
          break;
        case '{':
        case '[':
          if (depth == 64) return kTooDeep;
          opened[depth++] = b == '{' ? opens++ : -1;
          if (b == '{') expect_key = true;
          break;
        case '}':
        case ']':
          if (depth > 0)
            --depth;
          else if (base != nullptr)
            base = base->parent.get();
          expect_key = false;
          break;
        case ':': expect_key = false; break;
        case ',': expect_key = any && object; break;
        default: break;
      }
      continue;
    }
    const bool in_key = names && mode == kKey;
    if (esc || b != '"') {
      if (in_key) key.push_back(static_cast<char>(b));
      esc = !esc && b == '\\';
      continue;
    }
    if (mode == kKey) {  // a closing quote
      if (names) {
        Name name = decode_or_none(key);
        // (an object `d` opened is named by its number, past the addresses: odd, below 128)
        const void* object = depth > 0 ? reinterpret_cast<const void*>(static_cast<uintptr_t>(2 * opened[depth - 1] + 1))
                                       : static_cast<const void*>(base);
        if (depth == 0 && base != nullptr && has_name(base->names.get(), name)) return kWritesDuplicate;
        for (const auto& [o, nm] : added)
          if (o == object && nm == name) return kWritesDuplicate;
        added.emplace_back(object, std::move(name));
      }
      expect_key = false;
    }
    mode = kOutside;
  }
  mode_out = mode;
  expect_key_out = expect_key;
  return kScanned;
}

// Whether feed() would find `d` writing a name twice in one object (scan(), else feed()).
bool writes_duplicate(const NameState& s, const uint8_t* d, size_t n) {
  uint8_t mode;
  bool expect_key;
  const Scan r = scan(s, d, n, true, mode, expect_key);
  if (r != kTooDeep) return r == kWritesDuplicate;
  NameState out;
  return feed(s, d, n, out) == kDuplicate;
}

void put_u32(std::string& k, uint64_t v) { k.append(reinterpret_cast<const char*>(&v), 4); }

void put_name(std::string& k, const Name& name) {
  if (!name) {
    k.push_back('N');
    return;
  }
  k.push_back('S');
  put_u32(k, name->size());
  k += *name;
}

void put_names(std::string& k, const Names* names) {
  put_u32(k, names ? names->size() : 0);
  if (names)
    for (const Name& nm : *names) put_name(k, nm);
}

// put_names of a level's names.
const std::shared_ptr<const KeyBytes>& names_key(const Level& l) {
  return l.names_key.get([&](KeyBytes& k) {
    put_names(k.bytes, l.names.get());
    k.hash = std::hash<std::string>()(k.bytes);
  });
}

void put_levels(std::string& k, const Level* top);

// put_levels of a (non-null) level, made once per level.
const std::shared_ptr<const KeyBytes>& chain_key_of(const Level* top) {
  return top->chain_key.get([&](KeyBytes& out) {
    if (top->object) {
      out.bytes.push_back('O');
      out.bytes += names_key(*top)->bytes;
    } else {
      out.bytes.push_back('A');
    }
    put_levels(out.bytes, top->parent.get());
    out.hash = std::hash<std::string>()(out.bytes);
  });
}

// A state key's first part: the open containers, innermost first, with each object's names.
void put_levels(std::string& k, const Level* top) {
  if (top != nullptr) k += chain_key_of(top)->bytes;
}

// A state key's second part: the lexer's position and the name being written.
void put_position(std::string& k, const NameState& s) {
  k.push_back('|');
  k.push_back(static_cast<char>(s.expect_key));
  k.push_back(static_cast<char>(s.mode));
  k.push_back(static_cast<char>(s.esc));
  put_u32(k, s.key.size());
  k += s.key;
}

// A key naming `s` by content (equal keys, equal states), with `chain` its containers' key
// (chain_key_of(s.top), or nullptr with no container open)
void fill_state_key(StateKey& k, const NameState& s, std::shared_ptr<const KeyBytes> chain) {
  k.chain = std::move(chain);
  put_position(k.position, s);
  const size_t h = k.chain == nullptr ? 0 : k.chain->hash;
  k.hash = h * 0x9E3779B97F4A7C15ull ^ std::hash<std::string>()(k.position);
}

// fill_state_key's key, made once per state: the clears' memo keys
const std::shared_ptr<const StateKey>& state_key(const NameState& s) {
  return s.key_cache.get(
      [&](StateKey& k) { fill_state_key(k, s, s.top == nullptr ? nullptr : chain_key_of(s.top.get())); });
}

bool starts_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && std::memcmp(s.data(), p.data(), p.size()) == 0;
}

// -- per tokenizer ------------------------------------------------------------------------

// A packed token bitmask, with the words that hold any of its tokens listed: the quote tokens
// are a few thousand of a vocabulary, so a fill visits those words only.
struct Bits {
  std::vector<uint32_t> w;
  std::vector<int32_t> nz;  // words with a token, ascending (made by index())
  uint32_t& operator[](size_t k) { return w[k]; }
  uint32_t operator[](size_t k) const { return w[k]; }
  void assign(size_t n, uint32_t v) { w.assign(n, v); }
  const uint32_t* data() const { return w.data(); }
  size_t size() const { return w.size(); }
  void index() {
    nz.clear();
    for (size_t k = 0; k < w.size(); ++k)
      if (w[k] != 0) nz.push_back(static_cast<int32_t>(k));
  }
};
using Ids = std::vector<int32_t>;

// The tokens that can close a name, by how many `"` bytes they hold, and the lookups of the
// dead-end check. Built once per vocabulary, read-only afterwards.
struct NameTables {
  int64_t words = 0;
  std::vector<std::string> tb;  // token bytes (empty: none, a special token)
  Bits at_least[3];             // [k], k = 1..2: tokens with at least k quote bytes ([0] unused, empty)
  Bits escaped;                 // quote tokens with a backslash before the first quote
  Bits two_or_escaped;          // at_least[2] | escaped
  // tokens holding a `,` or `{` and after it two quotes: between values where no name is
  // expected (after a colon, in an array), the only ones that can write a name
  Bits opens_name;
  // tokens holding, after their first quote, a `,` or `{` and then two more quotes: from
  // inside a string, the only ones that can write a name after the one they close (a member
  // name comes after a `,` or `{`, both its quotes after that)
  Bits second_names;
  Bits odd_or_second;           // escaped_odd | second_names
  Bits reopen;                  // at_least[2] tokens with an even number of quotes or a backslash
  Bits commas;                  // tokens holding a comma (the separators' dead-end check)
  Bits commas_quoted;           // ... and a quote or backslash: the only ones that leave a string
  // escaped | commas_quoted: inside a name that no written name of its object starts with,
  // the only tokens a clear may take (NameIndex::clears_nothing says why)
  Bits key_clearable;
  // the decoded bytes before a token's first unescaped quote -> the tokens closing a name
  // with them (inside a name whose bytes so far decode whole, the name it closes is those
  // bytes decoded, then these)
  // (keys are views of `tb` or of `decoded_keys`: a lookup by a view of a written name copies
  // nothing, where a string key cost an allocation per written name above 15 bytes)
  std::unordered_map<std::string_view, Ids> by_prefix;
  std::deque<std::string> decoded_keys;  // by_prefix's keys that are no token's bytes
  // escaped tokens whose bytes before their first unescaped quote do not decode alone (an
  // escape cut by the quote, a high surrogate waiting for its low half): always fed
  Bits escaped_odd;
  // the tokens without quote or backslash, sorted by their bytes (views of `tb`): the tokens
  // spelling a prefix of a name are found by narrowing one range a byte at a time, and the
  // search ends where no token goes on (a hash lookup of every prefix of every name was most
  // of an in-name dead-end check)
  std::vector<std::pair<std::string_view, int32_t>> plain_sorted;
  // bytes after the last quote -> quote tokens, with every prefix of such bytes a key (of no
  // tokens, or some): a piece that is no key is a prefix of none, and no longer piece is one
  std::unordered_map<std::string, Ids> by_tail;
  // tokens with exactly two quotes: the decoded name between them (nullopt: inside an escape);
  // tokens whose bytes between them are no JSON name body are left out (always fed)
  std::unordered_map<int32_t, Name> between;

  NameTables(const NameTables&) = delete;  // `plain_sorted` views the strings of `tb` in place
  NameTables& operator=(const NameTables&) = delete;
  NameTables(const py::sequence& token_bytes, int64_t w) : words(w) {
    if (w < 0) throw std::invalid_argument("words must be >= 0");
    const size_t n = py::len(token_bytes);
    if (static_cast<int64_t>(n) > w * 32) throw std::invalid_argument("more tokens than the mask has bits");
    tb.resize(n);
    py::object fast = py::reinterpret_steal<py::object>(PySequence_Fast(token_bytes.ptr(), "token_bytes must be a sequence"));
    if (!fast) throw py::error_already_set();
    PyObject** items = PySequence_Fast_ITEMS(fast.ptr());
    for (size_t i = 0; i < n; ++i) {
      if (items[i] == Py_None) continue;
      char* p;
      Py_ssize_t len;
      if (PyBytes_AsStringAndSize(items[i], &p, &len) < 0) throw py::error_already_set();
      tb[i].assign(p, static_cast<size_t>(len));
    }
    plain_sorted.reserve(n);
    for (size_t k = 1; k < 3; ++k) at_least[k].assign(w, 0);
    escaped.assign(w, 0);
    reopen.assign(w, 0);
    commas.assign(w, 0);
    commas_quoted.assign(w, 0);
    second_names.assign(w, 0);
    opens_name.assign(w, 0);
    escaped_odd.assign(w, 0);
    std::string dec;
    for (size_t i = 0; i < n; ++i) {
      const std::string& b = tb[i];
      if (b.empty()) continue;
      const size_t first = b.find('"');
      const int32_t id = static_cast<int32_t>(i);
      const uint32_t bit = uint32_t(1) << (i & 31);
      if (b.find(',') != std::string::npos) {
        commas[i >> 5] |= bit;
        if (b.find_first_of("\"\\") != std::string::npos) commas_quoted[i >> 5] |= bit;
      }
      if (first == std::string::npos) {
        if (b.find('\\') == std::string::npos) plain_sorted.emplace_back(std::string_view(b), id);
        continue;
      }
      const size_t last = b.rfind('"');
      const std::string tail = b.substr(last + 1);
      by_tail[tail].push_back(id);
      for (size_t k = 0; k < tail.size(); ++k) by_tail.try_emplace(tail.substr(0, k));
      const size_t count = static_cast<size_t>(std::count(b.begin(), b.end(), '"'));
      if (count == 2) {
        const auto* body = reinterpret_cast<const uint8_t*>(b.data()) + first + 1;
        switch (decode_name(body, last - first - 1, dec)) {
          case Decoded::kName: between.emplace(id, dec); break;
          case Decoded::kInsideEscape: between.emplace(id, std::nullopt); break;
          default: break;
        }
      }
      if ((count % 2 == 0 || b.find('\\') != std::string::npos) && count >= 2) reopen[i >> 5] |= bit;
      auto name_after = [&b](size_t from) {  // a `,` or `{` from `from` on, two quotes after it
        const size_t opener = b.find_first_of(",{", from);
        return opener != std::string::npos && std::count(b.begin() + static_cast<ptrdiff_t>(opener), b.end(), '"') >= 2;
      };
      if (name_after(first + 1)) second_names[i >> 5] |= bit;
      if (name_after(0)) opens_name[i >> 5] |= bit;
      for (size_t level = 1; level <= std::min<size_t>(count, 2); ++level) at_least[level][i >> 5] |= bit;
      const std::string_view pre = std::string_view(b).substr(0, first);
      if (pre.find('\\') == std::string_view::npos) {
        by_prefix[pre].push_back(id);
        continue;
      }
      escaped[i >> 5] |= bit;
      size_t closing = 0;  // the first quote no backslash escapes (none: the token closes no name)
      for (bool esc = false; closing < b.size(); ++closing) {
        if (esc)
          esc = false;
        else if (b[closing] == '\\')
          esc = true;
        else if (b[closing] == '"')
          break;
      }
      if (closing == b.size()) continue;
      if (decode_name(reinterpret_cast<const uint8_t*>(b.data()), closing, dec) == Decoded::kName)
        by_prefix[decoded_keys.emplace_back(dec)].push_back(id);
      else
        escaped_odd[i >> 5] |= bit;
    }
    std::sort(plain_sorted.begin(), plain_sorted.end());
    two_or_escaped.assign(w, 0);
    odd_or_second.assign(w, 0);
    key_clearable.assign(w, 0);
    for (int64_t k = 0; k < w; ++k) {
      two_or_escaped[k] = at_least[2][k] | escaped[k];
      odd_or_second[k] = escaped_odd[k] | second_names[k];
      key_clearable[k] = escaped[k] | commas_quoted[k];
    }
    for (size_t k = 1; k < 3; ++k) at_least[k].index();
    escaped.index();
    two_or_escaped.index();
    opens_name.index();
    second_names.index();
    odd_or_second.index();
    key_clearable.index();
    reopen.index();
    commas.index();
    commas_quoted.index();
  }
};

// bytes in the order the searches try them: printable ASCII first, as grammar completions
const std::vector<uint8_t>& byte_order() {
  static const std::vector<uint8_t> order = [] {
    std::vector<uint8_t> v;
    for (int b = 0x20; b < 0x7F; ++b) v.push_back(static_cast<uint8_t>(b));
    for (int b = 0; b < 0x20; ++b) v.push_back(static_cast<uint8_t>(b));
    for (int b = 0x7F; b < 0x100; ++b) v.push_back(static_cast<uint8_t>(b));
    return v;
  }();
  return order;
}

// Call fn(b) for each byte b whose row entry is not DEAD (0), in byte_order()'s order. Rows
// inside a declared name allow a few bytes of 256: found four at a compare (fa::equal_bits),
// where testing each byte in turn was a tenth of the name searches' instructions.
template <class Fn>
inline bool each_live_byte(const int32_t* row, Fn&& fn, int32_t dead = 0) {
  uint64_t live[4];
  fa::equal_bits(row, dead, live);  // the dead bytes, then flipped
  for (uint64_t& w : live) w = ~w;
  // byte_order(): printable ASCII [0x20, 0x7F), then [0, 0x20), then [0x7F, 0x100)
  static constexpr int kRanges[3][2] = {{0x20, 0x7F}, {0x00, 0x20}, {0x7F, 0x100}};
  for (const auto& rg : kRanges)
    for (int w = rg[0] >> 6; w <= (rg[1] - 1) >> 6; ++w) {
      uint64_t bits = live[w];
      const int lo = std::max(rg[0] - w * 64, 0), hi = std::min(rg[1] - w * 64, 64);
      bits &= (hi == 64 ? ~uint64_t(0) : (uint64_t(1) << hi) - 1) & ~((uint64_t(1) << lo) - 1);
      while (bits) {
        if (!fn(static_cast<uint8_t>(w * 64 + __builtin_ctzll(bits)))) return false;
        bits &= bits - 1;
      }
    }
  return true;
}

inline bool bit_at(const uint32_t* bits, int32_t t) { return (bits[t >> 5] >> (t & 31)) & 1u; }

// The row the clears work on, with the words they change listed: the memo's record of the
// changes is read from those words alone. (Diffing the whole row against its mask cost more
// than the clears themselves on most first visits, which change nothing.)
struct ClearedRow {
  uint32_t* w;
  int64_t words;                 // of the grammar's masks: tokens past them are never allowed
  std::vector<int32_t>& touched;  // word indexes, repeats allowed (a Scratch buffer)
  void clear(int32_t t) {
    if ((t >> 5) >= words) return;
    w[t >> 5] &= ~(uint32_t(1) << (t & 31));
    touched.push_back(t >> 5);
  }
};

// The key of a memoised clear: a configuration and a name state (by content).
struct ClearKey {
  int32_t cid = 0;
  std::shared_ptr<const StateKey> state;
  bool operator==(const ClearKey& o) const {
    return cid == o.cid && (state == o.state || *state == *o.state);
  }
  struct Hash {
    size_t operator()(const ClearKey& k) const {
      return static_cast<size_t>(k.state->hash ^ (static_cast<uint64_t>(k.cid) * 0x9E3779B97F4A7C15ull));
    }
  };
};

constexpr size_t kMemoCap = size_t(1) << 16;  // entries per memo of a grammar before it restarts
constexpr int64_t kNearNodes = 64;            // the dead-end check's first, short search
constexpr int64_t kFarNodes = 2000;           // ... and its bounded second one
constexpr ptrdiff_t kFewNames = 4;            // a name so far that at most this many names start with: candidates not memoised

// -- per grammar --------------------------------------------------------------------------

enum class Search { kFound, kNone, kUnknown };

struct Found {
  std::string written;  // bytes ending the name, closing quote included
  int32_t cid = 0;      // configuration and lexer state after them
  NameState state;
};

// The name clears of one grammar's configurations (one per TokenIndex) and their memos.
class NameIndex {
 public:
  NameIndex(py::object index, std::shared_ptr<const NameTables> tables, bool traps)
      : index_ref_(std::move(index)), ix_(index_ref_.cast<IndexView*>()), tables_(std::move(tables)), traps_(traps) {
    if (tables_ == nullptr) throw std::invalid_argument("tables are required");
    if (tables_->words < ix_->words()) throw std::invalid_argument("name tables narrower than the index's masks");
  }

  int64_t words() const { return ix_->words(); }
  void check_cid(int64_t cid) const {
    if (cid < 0 || cid >= ix_->num_configs()) throw py::index_error("configuration id out of range");
  }

  // Clear from `row` (the first `row_words` words of a row holding `cid`'s mask) the tokens
  // that repeat a name, or trap one, from `st`. No GIL needed. A row as wide as the mask is
  // read as the mask too: a mask the index keeps in part (StoredMask) has no whole copy to
  // point at unless one is made, and making one for each mask inside a name cost what
  // keeping them in part saved.
  void clear(const NameState& st, int32_t cid, uint32_t* row, int64_t row_words) {
    ClearKey key;
    if (!clear_if_memoised(st, cid, row, row_words, key)) clear_new(st, cid, row, row_words, std::move(key));
  }

  // clear() when its result is memoised (a lookup, no search); false, row untouched, if not.
  // `key` becomes the memo key, for clear_new().
  // The diff is applied under the lock (a few words), not handed out: a shared_ptr copy per
  // lookup wrote the reference count of the one empty diff most entries shared, a cache line
  // that the threads filling one batch took from each other at every row.
  bool clear_if_memoised(const NameState& st, int32_t cid, uint32_t* row, int64_t row_words, ClearKey& key) {
    if (clears_nothing(st, mask_of(cid, row, row_words)) || clear_unmemoised(st, cid, row, row_words)) return true;
    key.cid = cid;
    key.state = state_key(st);
    std::lock_guard<std::mutex> g(mu_);
    auto it = cleared_.find(key);
    if (it == cleared_.end()) return false;
    if (it->second != nullptr)
      for (const auto& [k, v] : *it->second)
        if (k < row_words) row[k] &= v;
    return true;
  }

  // clear() of a (cid, st) known not to be memoised: its mask was computed just now (no clear
  // of it can exist yet), or its memo was looked up already
  void clear_fresh(const NameState& st, int32_t cid, uint32_t* row, int64_t row_words) {
    if (clears_nothing(st, mask_of(cid, row, row_words)) || clear_unmemoised(st, cid, row, row_words)) return;
    clear_new(st, cid, row, row_words, ClearKey{cid, state_key(st)});
  }

  // Without traps (Grammar.names_can_trap false) the clears are the repeats alone
  // (clear_duplicate_closers: a few quote tokens fed to the lexer, the written names that
  // start with the name so far looked up): made on the row each time, with no memo. A memo
  // cost more than it saved: every accepted token makes a new name state, whose key (its
  // position and the open objects' names) was built for each lookup, and a first visit
  // stored a diff under the lock. Over the first passes of the masks corpus with SmolLM2, per
  // clear made (median CPU cycles): key 540, insert 300, the clear itself 430. False, row
  // untouched, where the memoised path decides (traps; a row narrower than the masks).
  bool clear_unmemoised(const NameState& st, int32_t cid, uint32_t* row, int64_t row_words) {
    const int64_t w = ix_->words();
    if (traps_ || row_words < w) return false;
    static thread_local std::vector<int32_t> touched_tl;
    structgen::Scratch<std::vector<int32_t>> touched(touched_tl);
    ClearedRow out{row, w, touched.value};
    // (the row read as the mask while it is cleared: a token cleared is never read again)
    clear_duplicate_closers(st, cid, row, out);
    return true;
  }

  // clear() of a (cid, st) not memoised yet, whose memo key clear_if_memoised() made
  void clear_new(const NameState& st, int32_t cid, uint32_t* row, int64_t row_words, ClearKey key) {
    structgen::LazyGil::release_here();  // (a first clear searches the grammar)
    const int64_t w = ix_->words();
    // the mask as it was (the diff is taken against it): a wide row's words before the clears
    static thread_local std::vector<uint32_t> before_tl;
    structgen::Scratch<std::vector<uint32_t>> before(before_tl);
    const uint32_t* mask;
    if (row_words >= w) {
      before.value.assign(row, row + w);
      mask = before.value.data();
    } else {
      mask = ix_->mask(cid);
    }
    // a row as wide as the mask is worked on in place; a narrower one through a copy
    std::vector<uint32_t> copy;
    if (row_words < w) copy.assign(mask, mask + w);
    static thread_local std::vector<int32_t> touched_tl;
    structgen::Scratch<std::vector<int32_t>> touched(touched_tl);
    ClearedRow out{row_words < w ? copy.data() : row, w, touched.value};
    clear_duplicate_closers(st, cid, mask, out);
    if (traps_) {
      clear_dead_names(st, cid, mask, out);
      clear_dead_separators(st, cid, mask, out);
    }
    std::sort(out.touched.begin(), out.touched.end());
    out.touched.erase(std::unique(out.touched.begin(), out.touched.end()), out.touched.end());
    // most first clears change nothing (a position inside a value, a name with no written
    // name to repeat): those keep no diff
    std::unique_ptr<Diff> diff;
    for (int32_t k : out.touched)
      if (out.w[k] != mask[k]) {
        if (diff == nullptr) diff = std::make_unique<Diff>();
        diff->emplace_back(k, out.w[k]);
      }
    if (row_words < w && diff != nullptr)
      for (const auto& [k, v] : *diff)
        if (k < row_words) row[k] &= v;
    std::lock_guard<std::mutex> g(mu_);
    if (cleared_.size() >= kMemoCap) cleared_.clear();
    cleared_.emplace(std::move(key), std::move(diff));
  }

  // `cid`'s mask: `row` itself when it is as wide (it holds the mask), else the index's
  const uint32_t* mask_of(int32_t cid, const uint32_t* row, int64_t row_words) {
    return row_words >= ix_->words() ? row : ix_->mask(cid);
  }

  // Whether no clear can take a token of `mask` from `st`, decided without a key or a memo:
  // inside a name (no escape pending) that no written name of its object starts with. Then
  // the name cannot close into a written one, nor can a name that goes on from it (no
  // candidates), and every other clear needs a token that writes or starts a name in an
  // object with names, or ends after a separator: it holds a comma (a name of this object or
  // an outer one comes after one; an object the token opens has no names yet) and, to leave
  // this string, a quote or backslash (commas_quoted). A backslash before the first quote
  // leaves the decoding to the lexer (escaped). So a declared name's last position, whose mask
  // holds closing quotes (`"`, `":`, `":"`), skips the key, memo and clears, which cost about
  // half as much as the mask itself.
  //
  // Without traps (Grammar.names_can_trap false) only repeats are cleared: a name written
  // whole needs a quote to open it and one to close it (between values: 2; inside a string,
  // the closing quote, then a `,` or `{` and a name's two quotes: second_names), or, inside a
  // name, only its closing quote where a written name starts with the name so far (any name
  // it closes does: see clear_duplicate_closers); an escape before the first quote between
  // values is the lexer's to decode.
  bool clears_nothing(const NameState& st, const uint32_t* mask) const {
    const NameTables& T = *tables_;
    if (!traps_) {
      if (st.esc) return false;
      switch (st.mode) {
        case kKey: return !may_trap(st) && !intersects(mask, T.second_names);
        case kValue: return !intersects(mask, T.second_names);
        default: return !intersects(mask, st.expect_key ? T.two_or_escaped : T.opens_name);
      }
    }
    if (st.mode != kKey || st.esc || may_trap(st)) return false;
    return !intersects(mask, T.key_clearable);
  }

  // Whether `mask` holds a token of `bits`; all-zero stretches of the mask are skipped 64
  // bytes at a time (a mask inside a name allows a few tokens).
  bool intersects(const uint32_t* mask, const Bits& bits) const {
    const int64_t w = std::min<int64_t>(ix_->words(), static_cast<int64_t>(bits.size()));
    const uint32_t* b = bits.data();
    if (static_cast<int64_t>(bits.nz.size()) * 8 < w) {  // a few hundred tokens: their words only
      for (int32_t k : bits.nz) {
        if (k >= w) break;
        if (mask[k] & b[k]) return true;
      }
      return false;
    }
    int64_t k = 0;
#if defined(__SSE2__)
    for (; k + 16 <= w; k += 16) {
      const auto* at = reinterpret_cast<const __m128i*>(mask + k);
      const __m128i any = _mm_or_si128(_mm_or_si128(_mm_loadu_si128(at), _mm_loadu_si128(at + 1)),
                                       _mm_or_si128(_mm_loadu_si128(at + 2), _mm_loadu_si128(at + 3)));
      if (_mm_movemask_epi8(_mm_cmpeq_epi8(any, _mm_setzero_si128())) == 0xFFFF) continue;
      for (int64_t j = k; j < k + 16; ++j)
        if (mask[j] & b[j]) return true;
    }
#endif
    for (; k < w; ++k)
      if (mask[k] & b[k]) return true;
    return false;
  }

  // words of a mask that the clears change, with their cleared values
  using Diff = std::vector<std::pair<int32_t, uint32_t>>;

  // A short text completing `cid` without writing a name twice in an object, from `st`
  // (names.distinct_completion); nullopt if none is found within `max_nodes` per search.
  std::optional<std::string> distinct_completion(int32_t cid, const NameState& st, int64_t max_nodes) {
    std::optional<std::string> text = completion(cid);
    if (!text) return std::nullopt;
    NameState tmp;
    if (feed(st, *text, tmp) != kDuplicate) return text;
    std::string out;
    // where the name being written started: (configuration, state, length of out) at its quote
    bool in_name = false;
    int32_t key_cid = 0;
    NameState key_state;
    size_t key_at = 0;
    if (st.mode == kKey) {  // already inside a name: its written part is fixed, search from here
      in_name = true;
      key_cid = cid;
      key_state = st;
    }
    int32_t c = cid;
    NameState cur = st;
    for (int64_t step = 0; step < (int64_t(1) << 20); ++step) {
      if (ix_->is_accepting(c)) return out;
      const int64_t d = ix_->config_dist(c);
      const int32_t* row = ix_->row(c);
      int best = -1;
      for (uint8_t b : byte_order())
        if (row[b] != 0 && ix_->config_dist(row[b]) == d - 1) {
          best = b;
          break;
        }
      if (best < 0) return std::nullopt;  // distances are exact: not reached
      const int32_t next = row[best];
      const uint8_t byte = static_cast<uint8_t>(best);
      NameState after;
      const Fed fed = feed(cur, &byte, 1, after);
      if (fed == kDuplicate) {
        if (!in_name) return std::nullopt;  // a name's opening quote was seen: not reached
        Found found;
        if (fresh_name(key_cid, key_state, max_nodes, &found) != Search::kFound) return std::nullopt;
        out.resize(key_at);
        out += found.written;
        c = found.cid;
        cur = std::move(found.state);
        in_name = false;
        continue;
      }
      if (fed == kSame) after = cur;
      if (cur.mode != kKey && after.mode == kKey) {
        in_name = true;
        key_cid = next;
        key_state = after;
        key_at = out.size() + 1;
      } else if (after.mode != kKey) {
        in_name = false;
      }
      out.push_back(static_cast<char>(byte));
      c = next;
      cur = std::move(after);
    }
    return std::nullopt;
  }

 private:
  // the grammar's shortest completion from `cid` (TokenIndex.shortest_completion), memoised
  std::optional<std::string> completion(int32_t cid) {
    {
      std::lock_guard<std::mutex> g(mu_);
      auto it = completions_.find(cid);
      if (it != completions_.end()) return it->second;
    }
    std::string text;
    std::optional<std::string> out;
    if (ix_->shortest_completion(cid, text)) out = std::move(text);
    std::lock_guard<std::mutex> g(mu_);
    if (completions_.size() >= kMemoCap) completions_.clear();
    completions_.emplace(cid, out);
    return out;
  }

  // visit(t) for every token t of `bits` set in `mask`, in order. A word is read once, before
  // its tokens are visited: a visit may clear its own token in `mask` (no list is built: a
  // first clear made two or three of them, each a few allocations).
  template <class Visit>
  void each_allowed(const uint32_t* mask, const Bits& bits, Visit&& visit) const {
    const int64_t w = ix_->words();
    for (int32_t k : bits.nz) {
      if (k >= w) break;
      uint32_t hits = mask[k] & bits[k];
      while (hits) {
        visit(static_cast<int32_t>(k * 32 + __builtin_ctz(hits)));
        hits &= hits - 1;
      }
    }
  }

  // The allowed tokens that would write a name twice in one object from `st`. A token closes
  // a name when it holds a quote ending one; from inside a name its first unescaped quote does
  // (looked up by the bytes before it: no per-token work). Any other way needs more quotes
  // (open and close a name: 2; from inside a string, close it, then a `,` or `{` and a name's
  // two quotes: NameTables::second_names), and those few tokens are fed to the lexer one by
  // one. Nothing written yet in any open object: only a token writing two names can repeat
  // one (second_names again).
  void clear_duplicate_closers(const NameState& st, int32_t cid, const uint32_t* mask, ClearedRow& row) {
    const NameTables& T = *tables_;
    // (nothing written in an open object, or inside a value string: only a token writing a
    // second name can repeat one)
    const Bits* simulate = &T.second_names;
    bool outside = false;
    if (st.named == 0) {
    } else if (st.mode == kKey) {
      const Name prefix = st.key_prefix();
      if (!prefix) {
        simulate = &T.at_least[1];
      } else {
        // The name so far decodes whole (no escape pending), so any name a token closes
        // starts with it: with no written name starting with it, only a token writing a
        // second name can repeat one. An escape before the first quote then changes nothing:
        // Llama-3 has 44 such tokens and a free name's mask takes them all, each fed to the
        // lexer on every first visit inside a name. A token closing the name into a written
        // one is cleared above by the decoded bytes before its quote (escaped ones too, but
        // for the few that do not decode alone).
        bool started = false;
        if (const Names* names = st.top_names())
          for (auto at = std::lower_bound(names->begin(), names->end(), prefix);
               at != names->end() && *at && starts_with(**at, *prefix); ++at) {
            started = true;
            auto it = T.by_prefix.find(std::string_view(**at).substr(prefix->size()));
            if (it != T.by_prefix.end())
              for (int32_t t : it->second) row.clear(t);
          }
        simulate = started ? &T.odd_or_second : &T.second_names;
      }
    } else if (st.mode == kOutside) {
      if (st.expect_key) {
        simulate = &T.at_least[2];
        outside = true;
      } else {  // (a string the token opens first is a value: a name comes after a `,` or `{`)
        simulate = &T.opens_name;
      }
    }
    // between strings, a two-quote token closes at most the one name between its quotes: it
    // can repeat a name only if one of the open objects has it
    const bool use_between = outside && !T.between.empty();
    // (each open object's names are sorted: searched in place, not gathered per call)
    auto written = [&st](const Name& name) {
      for (const Level* l = st.top.get(); l != nullptr; l = l->parent.get())
        if (l->object && has_name(l->names.get(), name)) return true;
      return false;
    };
    each_allowed(mask, *simulate, [&](int32_t t) {
      if (use_between) {
        auto it = T.between.find(t);
        if (it != T.between.end() && !written(it->second)) return;
      }
      if (!bit_at(row.w, t)) return;
      const std::string& bytes = T.tb[t];
      if (writes_duplicate(st, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())) row.clear(t);
    });
  }

  // Candidate tokens of the dead-end check from `st` (memoised per object names, name so far
  // and mode, but for a name so far that at most kFewNames written names start with): only a
  // name so far that is a prefix of a name already written can be trapped, so they are looked
  // up from the written names (plain tokens inside a name, by the bytes after their last quote
  // before one).
  // candidates()' memo key: the lexer's mode, the name so far and the object's names (its
  // level's key, hashed once per level: copying and hashing every name of a large object at
  // each lookup was most of a lookup)
  struct CandKey {
    uint8_t mode = 0;
    Name prefix;
    std::shared_ptr<const KeyBytes> names;  // nullptr: no names counted
    size_t hash = 0;
    bool operator==(const CandKey& o) const {
      return hash == o.hash && mode == o.mode && prefix == o.prefix &&
             KeyBytes::same(names, o.names);
    }
  };
  struct CandKeyHash {
    size_t operator()(const CandKey& k) const { return k.hash; }
  };

  // Append to `ids` the tokens of T.plain_sorted that spell a nonempty prefix of `rest`.
  static void plain_prefixes(const NameTables& T, std::string_view rest, Ids& ids) {
    using Entry = std::pair<std::string_view, int32_t>;
    auto lo = T.plain_sorted.begin(), hi = T.plain_sorted.end();
    for (size_t k = 0; k < rest.size() && lo != hi; ++k) {
      // [lo, hi): the tokens that start with rest[0, k), sorted; the one that is exactly that
      // comes first, then those going on with each byte in order
      const auto c = static_cast<unsigned char>(rest[k]);
      auto byte_at = [k](const Entry& e) {
        return e.first.size() > k ? static_cast<int>(static_cast<unsigned char>(e.first[k])) : -1;
      };
      lo = std::lower_bound(lo, hi, c, [&](const Entry& e, unsigned char v) { return byte_at(e) < v; });
      hi = std::upper_bound(lo, hi, c, [&](unsigned char v, const Entry& e) { return v < byte_at(e); });
      for (auto it = lo; it != hi && it->first.size() == k + 1; ++it) ids.push_back(it->second);
    }
  }

  // The candidates one written name brings, looked up once per grammar: at a name's start
  // (`in_key`) the plain tokens spelling a nonempty prefix of it; elsewhere the tokens whose
  // text after their last quote is a nonempty prefix of it (T.by_tail). An object's
  // candidates are the union over its names, and every name written makes a new set of names
  // (a memo miss in candidates()), where every written name was looked up again (candidates()
  // over the masks corpus's first passes with SmolLM2: 14.4M -> 11.8M instructions).
  std::shared_ptr<const Ids> pieces(bool in_key, const std::string& name) {
    auto& memo = pieces_[in_key ? 1 : 0];
    {
      std::lock_guard<std::mutex> g(mu_);
      auto it = memo.find(name);
      if (it != memo.end()) return it->second;
    }
    const NameTables& T = *tables_;
    Ids ids;
    if (in_key) {
      plain_prefixes(T, name, ids);
    } else {
      std::string piece;  // (the empty piece, every name's, is candidates()' to add once)
      for (size_t k = 1; k <= name.size(); ++k) {
        piece.assign(name, 0, k);
        auto it = T.by_tail.find(piece);
        // (no longer piece is a key either: T.by_tail holds every prefix of its keys)
        if (it == T.by_tail.end()) break;
        ids.insert(ids.end(), it->second.begin(), it->second.end());
      }
    }
    auto out = std::make_shared<const Ids>(std::move(ids));
    std::lock_guard<std::mutex> g(mu_);
    if (memo.size() >= kMemoCap) memo.clear();
    memo.emplace(name, out);
    return out;
  }

  std::shared_ptr<const Ids> candidates(const NameState& st, const Names* names, const Name& prefix) {
    // Inside a name only the names that start with the name so far count: a sorted range.
    Names::const_iterator from, to;
    if (names != nullptr) {
      from = names->begin(), to = names->end();
      if (st.mode == kKey) {
        from = std::lower_bound(from, to, prefix);
        to = from;
        while (to != names->end() && *to && starts_with(**to, *prefix)) ++to;
      }
    }
    // A few of them (a name being written usually starts one written name, or none) are
    // looked up faster than the memo's key is made: the key holds every name of the object,
    // and inside a name each token makes a name so far not seen before.
    const bool memo = names == nullptr || st.mode != kKey || to - from > kFewNames;
    CandKey key;
    if (memo) {
      key.mode = st.mode;
      key.prefix = prefix;
      if (names != nullptr) key.names = names_key(*st.top);  // names is st's innermost object's
      key.hash = (key.names == nullptr ? 0 : key.names->hash) * 0x9E3779B97F4A7C15ull ^
                 (prefix ? std::hash<std::string>()(*prefix) : 1) * 31 ^ key.mode;
      std::lock_guard<std::mutex> g(mu_);
      auto it = candidates_.find(key);
      if (it != candidates_.end()) return it->second;
    }
    Ids ids;
    if (names != nullptr) {
      // The pieces are prefixes of the names (inside a name: of what follows the name so far,
      // in the names that start with it), each name's looked up once per grammar (pieces()).
      const bool in_key = st.mode == kKey;
      const std::string& p = in_key ? *prefix : std::string();
      if (!in_key && from != to) {
        auto it = tables_->by_tail.find(std::string());
        if (it != tables_->by_tail.end()) ids.insert(ids.end(), it->second.begin(), it->second.end());
      }
      for (auto at = from; at != to; ++at) {
        const Name& name = *at;
        if (!name || !starts_with(*name, p)) continue;
        if (in_key && !p.empty()) {  // (a name so far is met once: not kept)
          plain_prefixes(*tables_, std::string_view(*name).substr(p.size()), ids);
          continue;
        }
        const std::shared_ptr<const Ids> own = pieces(in_key, *name);
        ids.insert(ids.end(), own->begin(), own->end());
      }
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    if (st.mode == kValue) {  // to reach a name, a token ends this string first: two quotes
      const uint32_t* two = tables_->at_least[2].data();
      ids.erase(std::remove_if(ids.begin(), ids.end(), [two](int32_t t) { return !bit_at(two, t); }), ids.end());
    }
    auto out = std::make_shared<const Ids>(std::move(ids));
    if (!memo) return out;
    std::lock_guard<std::mutex> g(mu_);
    if (candidates_.size() >= 4096) candidates_.clear();  // the same objects recur in one output
    candidates_.emplace(std::move(key), out);
    return out;
  }

  // The allowed tokens that leave a name half written such that every way to end it repeats
  // a name of its object (with propertyNames {"maxLength": 1} and `{"a":1,` written, `"a`),
  // each candidate checked by a bounded search.
  void clear_dead_names(const NameState& st, int32_t cid, const uint32_t* mask, ClearedRow& row) {
    if (st.mode == kKey && st.esc) return;
    const Names* names = st.top_names();
    const bool any = names != nullptr && !names->empty();
    // (inside a name, a token that ends it and starts the next can trap the next)
    if (!any && st.mode != kKey) return;
    Name prefix;
    if (st.mode == kKey) {
      prefix = st.key_prefix();
      if (!prefix) return;
    }
    std::shared_ptr<const Ids> cands = candidates(st, any ? names : nullptr, prefix);
    static thread_local Ids more_tl, ids_tl, live_tl;
    structgen::Scratch<Ids> ids(ids_tl), live_s(live_tl);
    const Ids* source = cands.get();
    if (st.mode == kKey) {
      // a token may also end this name and start the next one (`":1,"a`: an even number of
      // quotes, or escapes)
      structgen::Scratch<Ids> more(more_tl);
      each_allowed(mask, tables_->reopen, [&more](int32_t t) { more.value.push_back(t); });
      std::set_union(cands->begin(), cands->end(), more.value.begin(), more.value.end(),
                     std::back_inserter(ids.value));
      source = &ids.value;
    }
    const int64_t limit = ix_->words() * 32;
    Ids& live = live_s.value;
    for (int32_t t : *source)
      if (t < limit && bit_at(row.w, t)) live.push_back(t);
    const NameTables& T = *tables_;
    NameState after;
    Chains chains;
    for (int32_t t : live) {
      const std::string& bytes = T.tb[t];
      uint8_t mode_after;
      bool expect_after;
      if (scan(st, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), false, mode_after, expect_after) ==
              kScanned &&
          mode_after != kKey)
        continue;  // ends outside a name: nothing half written to trap
      // A token's last bytes of printable ASCII (no quote or backslash: a written name's
      // prefix, alone or after `,"`) lead from a configuration that stays alive on every
      // plain string (plain_total: a free name's states, the declared names' prefixes among
      // them) to such a configuration again, which ends_fresh() answers at once: the token is
      // never cleared. Only its head is stepped (the separator and the quote, rows its
      // candidates share), not a new byte row per byte of the prefix (with a few dozen names
      // written, most of a name start's first fill).
      // (the grammar's answer first, as above: no lexer state is made for the token)
      const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
      const auto n = static_cast<int64_t>(bytes.size());
      int64_t cut = n;
      while (cut > 0 && printable_byte(data[cut - 1])) --cut;
      const int32_t open = cut == 0 ? cid : ix_->step_bytes(cid, data, cut);
      if (open == 0) continue;
      if (cut < n && ix_->plain_total(open)) continue;
      const Fed fed = feed(st, bytes, after);
      if (fed == kDuplicate) continue;
      const NameState& a = fed == kSame ? st : after;
      if (a.mode != kKey) continue;
      // A name so far that no written name of its object starts with (the first name of an
      // object the token opens, say) ends fresh however it ends: the token is kept without
      // a search (the few hundred tokens of Llama-3 that end one name and start the next
      // were most of a name start's clears).
      if (!may_trap(a)) continue;
      const int32_t succ = cut == n ? open : ix_->step_bytes(open, data + cut, n - cut);
      if (succ == 0) continue;
      if (!ends_fresh(succ, a, chains)) row.clear(t);
    }
  }

  static bool printable_byte(uint8_t c) { return c >= 0x20 && c < 0x7F && c != '"' && c != '\\'; }

  // Whether a written name of the object whose name `a` is inside starts with the name so far
  // (or the name so far is inside an escape, not decided here): only then can every way to
  // end the name repeat one.
  static bool may_trap(const NameState& a) {
    const Names* names = a.top_names();
    if (names == nullptr || names->empty()) return false;
    const Name prefix = a.key_prefix();
    if (!prefix) return true;
    auto it = std::lower_bound(names->begin(), names->end(), prefix);
    return it != names->end() && *it && starts_with(**it, *prefix);
  }

  // The allowed tokens that end after a comma between members when the grammar's next name
  // can then only repeat one of the object's names (members in schema order, additional ones
  // after the declared ones: with `{"c":1,"d":1,"e":1` written and only "e" left to the
  // additional members, the token `,`): the next name would be a dead end. Checked when the
  // grammar takes the opening quote right after the token (else kept: the check is a clear,
  // never needed for soundness of the output, only against dead ends).
  void clear_dead_separators(const NameState& st, int32_t cid, const uint32_t* mask, ClearedRow& row) {
    if (st.named == 0 && st.mode != kKey) return;
    const NameTables& T = *tables_;
    const uint8_t quote = '"';
    NameState after;
    Chains chains;
    // only comma tokens can end after a separator: visited through their table, not the
    // whole mask (in a string value that is most of the vocabulary). Inside a string, past
    // any escape, a token without a quote or backslash stays in the string: not one of them.
    const bool in_string = st.mode != kOutside && !st.esc;
    // Most comma tokens that pass lead to a few (configuration, object) pairs at the next
    // name's start (`,` `",` `},` ...): each pair's answer is kept for this call, where a
    // memo lookup per token (its key hashed from the lexer state) and the configuration's
    // plain_total came to a tenth of a large object's first fills with Llama-3.
    struct Known {
      int32_t open;
      LevelPtr top;  // (held: its address names its object's names)
      bool fresh;
    };
    std::vector<Known> known;
    // (row.clear(t) clears the token being visited: each_allowed has read its word)
    each_allowed(row.w, in_string ? T.commas_quoted : T.commas, [&](int32_t t) {
      const std::string& bytes = T.tb[t];
      uint8_t mode_after;
      bool expect_after;
      if (scan(st, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), false, mode_after, expect_after) ==
              kScanned &&
          (mode_after != kOutside || !expect_after))
        return;  // not right after a separator
      // (the grammar's answer first: where a name may go on with any plain bytes after the
      // quote, as in every object that takes undeclared names, the next name ends fresh for
      // any names written, and the two lexer states this token would make are not needed)
      const int32_t succ =
          ix_->step_bytes(cid, reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int64_t>(bytes.size()));
      if (succ == 0) return;
      const int32_t open = ix_->step_bytes(succ, &quote, 1);
      if (open == 0 || ix_->plain_total(open)) return;
      const Fed fed = feed(st, bytes, after);
      if (fed == kDuplicate) return;
      const NameState& a = fed == kSame ? st : after;
      const Names* names = a.top_names();
      if (a.mode != kOutside || !a.expect_key || names == nullptr || names->empty()) return;
      NameState in_name;
      if (feed(a, &quote, 1, in_name) != kNew || in_name.mode != kKey) return;
      // (the name so far is empty and unescaped here: the configuration and the open
      // objects decide the answer)
      bool fresh = false, have = false;
      for (const Known& k : known)
        if (k.open == open && k.top == in_name.top) {
          fresh = k.fresh;
          have = true;
          break;
        }
      if (!have) {
        fresh = ends_fresh(open, in_name, chains);
        known.push_back({open, in_name.top, fresh});
      }
      if (!fresh) row.clear(t);
    });
  }

  // can_end_fresh's memo key: a configuration and a state by content. The containers' part
  // (every open object's names) is shared with the level that made it rather than copied and
  // hashed per key: the checks above look up a key per candidate token, nearly all in one
  // chain of containers, and copying and hashing the names was most of their cost.
  struct EndKey {
    int32_t cid;
    StateKey state;
    bool operator==(const EndKey& o) const { return cid == o.cid && state == o.state; }
  };
  struct EndKeyHash {
    size_t operator()(const EndKey& k) const {
      return k.state.hash ^ (static_cast<uint64_t>(k.cid) * 0x9E3779B97F4A7C15ull);
    }
  };
  // The chain key of one container chain, looked up once per chain in a clear (the
  // reference keeps the chain alive, so that its address names it).
  struct Chains {
    LevelPtr top;
    bool have = false;
    std::shared_ptr<const KeyBytes> chain;
  };

  // can_end_fresh(cid, a), memoised.
  bool ends_fresh(int32_t cid, const NameState& a, Chains& c) {
    // Inside a name whose configuration stays alive on every plain string (a free name's
    // states): the name has endings as long as any, every state of a trimmed rule can end,
    // so infinitely many names end it, and the object has written finitely many. (No search:
    // with Llama-3 the searches and their memo were most of a first name check.)
    if (ix_->plain_total(cid)) return true;
    if (!c.have || c.top != a.top) {
      c.top = a.top;
      c.have = true;
      c.chain = a.top ? chain_key_of(a.top.get()) : nullptr;
    }
    EndKey key{cid, StateKey()};
    fill_state_key(key.state, a, c.chain);
    {
      std::lock_guard<std::mutex> g(mu_);
      auto it = ends_.find(key);
      if (it != ends_.end()) return it->second;
    }
    const bool fresh = can_end_fresh(cid, a);
    std::lock_guard<std::mutex> g(mu_);
    if (ends_.size() >= kMemoCap) ends_.clear();
    ends_.emplace(std::move(key), fresh);
    return fresh;
  }

  // From inside a name: some way to end it gives a name its object does not have (or the
  // bounded search could not tell). A short search first: it usually ends at once (the name
  // can close here, or one more character makes it new) and needs no shortest completion of
  // the whole output.
  bool can_end_fresh(int32_t cid, const NameState& st) {
    const Search near = fresh_name(cid, st, kNearNodes, nullptr);
    if (near != Search::kUnknown) return near == Search::kFound;
    std::optional<std::string> text = completion(cid);
    NameState tmp;
    if (text && feed(st, *text, tmp) != kDuplicate) return true;
    return fresh_name(cid, st, kFarNodes, nullptr) != Search::kNone;
  }

  // A node of the search below: inside one name, so only the name's bytes and the escape
  // flag change from node to node (the open containers and their names never do). Nodes are
  // kept flat, bytes in one arena, so that a search allocates a few buffers rather than a
  // lexer state and two strings per node (this search ran on nearly every first visit inside
  // an object and was most of the name clears' cost).
  struct KeyNode {
    int32_t cid;  // (unused where frame.r >= 0)
    int32_t parent;  // index in the search's nodes, -1 for the start
    uint32_t off, len;  // the name's raw bytes: arena[off, off + len)
    bool esc;
    uint8_t byte;  // the byte from the parent
    // the node's configuration as a simple frame (IndexView::SimpleFrame) not made yet, when
    // frame.r >= 0: inside a declared name the search goes by the rule's DFA row, making no
    // configuration and no byte row for the nodes it passes
    structgen::IndexView::SimpleFrame frame;
  };

  // A closing quote after `n` ends the name with one its object lacks, at a configuration
  // that can still complete the output.
  bool closes_fresh(const KeyNode& n, const Names* names, const std::string& arena, Name& probe, int32_t& after) {
    if (n.esc) return false;
    const uint8_t quote = '"';
    int32_t t = -1;
    if (n.frame.r >= 0) {  // the quote's state first, its configuration once the name is new
      t = ix_->dfa_row(n.frame)[quote];
      if (t < 0) return false;
    } else {
      after = ix_->step_bytes(n.cid, &quote, 1);
      if (after == 0) return false;
    }
    decode_into(reinterpret_cast<const uint8_t*>(arena.data()) + n.off, n.len, probe);  // as feed() would
    if (has_name(names, probe)) return false;
    if (n.frame.r >= 0) {
      after = ix_->frame_config(n.frame.r, t, n.frame.p);
      if (after == 0) return false;
    }
    return ix_->can_complete(after);
  }

  // From inside a name (configuration `cid`, lexer state `st`): the shortest bytes that end
  // it with a name its object does not have (breadth first, printable ASCII first). kNone
  // when there is none, kUnknown when `max_nodes` names were tried.
  Search fresh_name(int32_t cid, const NameState& st, int64_t max_nodes, Found* found) {
    if (st.mode != kKey) throw std::logic_error("internal: a fresh-name search outside a name");
    const Names* names = st.top_names();
    static thread_local std::string arena_tl;
    static thread_local std::vector<KeyNode> nodes_tl;
    structgen::Scratch<std::string> arena_s(arena_tl);
    structgen::Scratch<std::vector<KeyNode>> nodes_s(nodes_tl);
    std::string& arena = arena_s.value;
    std::vector<KeyNode>& nodes = nodes_s.value;
    arena = st.key;
    nodes.push_back(KeyNode{cid, -1, 0, static_cast<uint32_t>(st.key.size()), st.esc, 0, {}});
    if (ix_->simple_frame(cid, nodes[0].frame)) nodes[0].cid = 0;
    Name probe;
    int32_t after = 0;
    auto done = [&](int32_t k) {
      if (found != nullptr) {
        std::string bytes;
        for (int32_t j = k; nodes[j].parent >= 0; j = nodes[j].parent) bytes.push_back(static_cast<char>(nodes[j].byte));
        std::reverse(bytes.begin(), bytes.end());
        bytes.push_back('"');
        found->written = bytes;
        found->cid = after;
        if (feed(st, bytes, found->state) == kSame) found->state = st;
      }
      return Search::kFound;
    };
    if (closes_fresh(nodes[0], names, arena, probe, after)) return done(0);
    int64_t tried = 0;
    size_t lo = 0, hi = 1;  // the current level: nodes[lo, hi)
    while (lo < hi) {
      for (size_t k = lo; k < hi; ++k) {
        const structgen::IndexView::SimpleFrame frame = nodes[k].frame;
        const bool by_dfa = frame.r >= 0;
        const int32_t* row = by_dfa ? ix_->dfa_row(frame) : ix_->row(nodes[k].cid);
        Search result = Search::kNone;
        const bool go_on = each_live_byte(row, [&](uint8_t b) {
          if (b == '"' && !nodes[k].esc) return true;
          if (++tried > max_nodes) {
            result = Search::kUnknown;
            return false;
          }
          const KeyNode& n = nodes[k];
          // (inside a name every byte but an unescaped quote is written: a backslash opens
          // an escape, the byte after it closes it)
          KeyNode child{row[b], static_cast<int32_t>(k), static_cast<uint32_t>(arena.size()), n.len + 1,
                        !n.esc && b == '\\', b, {}};
          if (by_dfa) {  // the next state's frame, or the configuration where it is not simple
            if (ix_->state_simple(frame.r, row[b])) {
              child.frame = {frame.r, row[b], frame.p};
              child.cid = 0;
            } else {
              child.cid = ix_->frame_config(frame.r, row[b], frame.p);
              if (child.cid == 0) return true;
            }
          } else if (ix_->simple_frame(child.cid, child.frame)) {
            child.cid = 0;
          }
          arena.append(arena, n.off, n.len);
          arena.push_back(static_cast<char>(b));
          nodes.push_back(child);
          if (closes_fresh(nodes.back(), names, arena, probe, after)) {
            result = done(static_cast<int32_t>(nodes.size() - 1));
            return false;
          }
          return true;
        }, by_dfa ? -1 : 0);
        if (!go_on) return result;
      }
      lo = hi;
      hi = nodes.size();
    }
    return Search::kNone;  // every name this position can end with is taken
  }

  py::object index_ref_;  // keeps the ConfigIndex alive
  IndexView* ix_;
  std::shared_ptr<const NameTables> tables_;
  const bool traps_;  // Grammar.names_can_trap: the dead-end clears run
  std::mutex mu_;
  std::unordered_map<int32_t, std::optional<std::string>> completions_;
  std::unordered_map<ClearKey, std::unique_ptr<const Diff>, ClearKey::Hash> cleared_;  // (null: nothing cleared)
  std::unordered_map<EndKey, bool, EndKeyHash> ends_;
  std::unordered_map<CandKey, std::shared_ptr<const Ids>, CandKeyHash> candidates_;
  std::unordered_map<std::string, std::shared_ptr<const Ids>> pieces_[2];  // [in_key] by name
};

// -- Python -------------------------------------------------------------------------------

py::object name_to_py(const Name& name) {
  if (!name) return py::none();
  return py::bytes(*name);
}

py::object names_to_py(const Names* names) {
  py::list items;
  if (names)
    for (const Name& nm : *names) items.append(name_to_py(nm));
  return py::reinterpret_steal<py::object>(PyFrozenSet_New(items.ptr()));
}

std::string as_bytes(const py::handle& data) {
  if (!PyBytes_Check(data.ptr())) {
    if (PyByteArray_Check(data.ptr()) || PyMemoryView_Check(data.ptr()))
      return py::bytes(py::reinterpret_borrow<py::object>(data)).cast<std::string>();
    throw py::type_error("expected bytes");
  }
  return data.cast<std::string>();
}

using u32w = py::array_t<uint32_t, py::array::c_style>;

// One row of a batch fill (structgen.runtime.batch): `row` (words of the bitmask) becomes
// `stop` (n words) if given, else the mask of configuration `cid` of `ix` less the name clears
// of `st` in `ni` (when given); zero words after n.
struct FillJob {
  uint32_t* row;
  const structgen::StoredMask* stop;
  int64_t n;
  structgen::IndexView* ix;
  int32_t cid;
  NameIndex* ni;
  const NameState* st;
  bool compute;  // a mask not computed yet is computed here (else the job is skipped)
  int64_t r;     // the row's index in the bitmask (its lane: BatchFill)
};

// The rows of one batch fill (structgen.runtime.batch), added as the caller reads its matchers
// (with the GIL held), then finished without it. Returns the jobs skipped (missing masks
// whose job says not to compute them).
//
// Each missing mask is an item of a fed pool loop (structgen::Pool::Feed) as soon as its row
// is read: the helpers compute while the caller reads the other matchers (about 21 us of a
// 0.26 ms first-visit step at batch 64 on 2 threads, which a second thread would otherwise
// spend idle). Rows of a configuration already taken by an item wait for it and are copied
// after the loop. With helpers running, the rows whose masks are memoised are items too, a few
// rows each, after the missing ones (the larger pieces first, leaving the small ones to even
// out the threads' ends: copy and name clears would otherwise be the caller's serial part);
// without, the threads copy them in pieces once they make 64 KB or more, else the caller
// does, and only the name clears not memoised (from a lexer state not met before, a search
// of the grammar) are shared out.
//
// Items are kept in lanes, one per thread, by row (row r in lane r % threads), and a thread
// takes from its own lane first, then from the others (Pool::lane). A serving batch keeps a
// request in one row and so in one lane from step to step: the bitmask row and the grammar's
// new masks stay in the cache of the core that wrote them last. Taken from one shared counter,
// every other item moved a 6 KB row (SmolLM2) and the masks it reads between the cores: a
// first-visit mask of a few microseconds cost a tenth more on 2 threads than on 1 (summed
// over a bench/batch.py walk: 9% more; 1.5% with lanes).
class BatchFill {
 public:
  BatchFill(size_t n, int64_t words, int threads)
      : lanes_(std::max(threads, 1)), cap_(static_cast<int64_t>(n)), jobs_(new FillJob[n]),
        items_(new Item[n * static_cast<size_t>(lanes_)]), lane_(new Lane[static_cast<size_t>(lanes_)]),
        words_(words), threads_(threads),
        help_(threads, words),
        body_([this](int64_t) {
          // the pool calls this once per item published (in any lane), so an item not taken
          // yet is always there to find, if not in this thread's lane then in another's; the
          // calls past the items (finish()'s help items) find none
          const int64_t at = take();
          if (at < 0) {
            help_.help_until([this] {
              return done_.load(std::memory_order_acquire) == real_ || failed_.load(std::memory_order_acquire);
            });
            return;
          }
          try {
            run(items_[static_cast<size_t>(at)]);
          } catch (...) {
            failed_.store(true, std::memory_order_release);
            throw;
          }
          done_.fetch_add(1, std::memory_order_acq_rel);
        }),
        feed_(threads, body_) {}

  // The next row (GIL held; rows are added in the order of the call's matchers).
  void add(const FillJob& j) {
    const int64_t k = added_++;
    jobs_[k] = j;
    const structgen::StoredMask* mask = j.stop != nullptr ? j.stop : j.ix->mask_if_ready(j.cid);
    if (mask != nullptr) {
      memoised_.emplace_back(k, mask);
    } else if (!j.compute) {
      skipped_.push_back(k);
    } else if (!taken_.emplace(j.ix, j.cid).second) {
      waiting_.push_back(k);  // its mask is an item already: copied once that is done
    } else {
      put({k, 0}, static_cast<int>(j.r % lanes_));
      feed_.publish(items_n_);
    }
  }

  // Fills every row added (GIL released).
  std::vector<int64_t> finish() {
    std::vector<int64_t> ready;  // memoised rows copied, their name clears still to compute
    bool shared_copy = false;
    if (feed_.started()) {
      // In chunks of about 32 KB of rows per lane: every item costs its taker two atomic
      // operations on lines the other thread writes too (hundreds of cycles each on this
      // kind of machine), and once most rows of a batch have ended, a step's items were
      // mostly stop-token rows of a few KB each.
      const int64_t per = std::max<int64_t>(1, (int64_t(32) << 10) / std::max<int64_t>(1, words_ * 4));
      chunked_.reserve(memoised_.size());
      for (int l = 0; l < lanes_; ++l) {
        const int64_t from = static_cast<int64_t>(chunked_.size());
        for (const auto& km : memoised_)
          if (jobs_[km.first].r % lanes_ == l) chunked_.push_back(km);
        const int64_t to = static_cast<int64_t>(chunked_.size());
        for (int64_t c = from; c < to; c += per) put({c, std::min(per, to - c)}, l);
      }
      // then one help item per helper: a thread that has run out of items helps the walks
      // still running (walk_share.hpp) until every item is done
      real_ = items_n_;
      final_.store(true, std::memory_order_release);
      feed_.publish(items_n_ + threads_ - 1);
    } else if (threads_ > 1 && static_cast<int64_t>(memoised_.size()) * words_ * 4 >= kSharedCopyBytes) {
      shared_copy = true;  // (below, once the feed has freed the pool)
    } else {
      for (const auto& [k, mask] : memoised_) {
        const FillJob& j = jobs_[k];
        if (threads_ > 1 && j.ni != nullptr) {
          copy(j, mask);
          ClearKey key;
          if (!j.ni->clear_if_memoised(*j.st, j.cid, j.row, words_, key)) ready.push_back(k);
        } else {
          write(j, mask);
        }
      }
    }
    feed_.finish();  // (with no helpers: the missing masks, in the caller)
    if (shared_copy) {
      // every mask memoised (most steps of a batch past its first tokens) and rows enough to
      // be worth a second core: the threads copy them in contiguous pieces. A warm walk of
      // 64 grammars over Llama-3's 128K tokens (16 KB rows): 9.2-9.5 ms on one thread, 9.2-9.6
      // on two before, 7.7-8.4 after; SmolLM2's 6 KB rows show no difference either way.
      const int64_t n = static_cast<int64_t>(memoised_.size());
      const int64_t pieces = std::min<int64_t>(n, 2 * static_cast<int64_t>(threads_));
      structgen::Pool::get().parallel_for(pieces, threads_, [&](int64_t p) {
        for (int64_t i = p * n / pieces; i < (p + 1) * n / pieces; ++i) {
          const auto& [k, mask] = memoised_[static_cast<size_t>(i)];
          write(jobs_[k], mask);
        }
      });
    }
    for (int64_t k : waiting_) ready.push_back(-1 - k);  // (the mask is memoised now)
    structgen::Pool::get().parallel_for(static_cast<int64_t>(ready.size()), threads_, [&](int64_t i) {
      const int64_t k = ready[static_cast<size_t>(i)];
      if (k < 0) {
        const FillJob& j = jobs_[-1 - k];
        if (const structgen::StoredMask* m = j.ix->mask_if_ready(j.cid))
          write(j, m);
        else  // (not reached: its item kept the mask, or failed and so did the fill)
          compute(j, false);
      } else {
        const FillJob& j = jobs_[k];
        j.ni->clear_fresh(*j.st, j.cid, j.row, words_);  // (looked up above)
      }
    });
    return std::move(skipped_);
  }

 private:
  struct Item {
    int64_t job;   // the row whose missing mask the item computes
    int64_t rows;  // > 0: the memoised rows chunked_[job, job + rows) instead, copied
  };
  struct TakenHash {
    size_t operator()(const std::pair<const structgen::IndexView*, int32_t>& k) const {
      return std::hash<const void*>()(k.first) * 31 + static_cast<size_t>(k.second);
    }
  };

  struct Lane {
    alignas(64) std::atomic<int64_t> n{0};  // items published (written by the caller only)
    alignas(64) std::atomic<int64_t> next{0};  // items taken
  };

  // An item into lane k (its rows' lane; the caller, before publishing the new total to the pool).
  void put(const Item& item, int k) {
    Lane& l = lane_[static_cast<size_t>(k)];
    const int64_t at = l.n.load(std::memory_order_relaxed);
    items_[static_cast<size_t>(k * cap_ + at)] = item;
    l.n.store(at + 1, std::memory_order_release);
    ++items_n_;
  }

  // The index of an item not taken yet, this thread's lane first; -1 once every item is
  // taken and no more come (a help item's call). Taken by compare-exchange, not fetch_add: a
  // thread from another lane may take from the same counter, which must never pass the lane's
  // published count.
  int64_t take() {
    const int own = structgen::Pool::lane() % lanes_;
    for (;;) {
      // (read before the lanes: a lane found empty after the last publication stays empty)
      const bool last = final_.load(std::memory_order_acquire);
      for (int d = 0; d < lanes_; ++d) {
        const int k = (own + d) % lanes_;
        Lane& l = lane_[static_cast<size_t>(k)];
        int64_t x = l.next.load(std::memory_order_relaxed);
        while (x < l.n.load(std::memory_order_acquire))
          if (l.next.compare_exchange_weak(x, x + 1, std::memory_order_acq_rel)) return k * cap_ + x;
      }
      if (last) return -1;
    }
  }

  void run(const Item& it) {
    if (it.rows > 0) {  // memoised rows (it.job: the first of them in chunked_)
      for (int64_t c = it.job; c < it.job + it.rows; ++c) {
        const auto& [k, mask] = chunked_[static_cast<size_t>(c)];
        write(jobs_[k], mask);
      }
      return;
    }
    // a missing mask, computed by this item (rows of its configuration wait), its walk
    // shared with threads out of items when it is large (walk_share.hpp)
    compute(jobs_[it.job], threads_ > 1);  // (one thread: nobody can help, the walk is not cut)
  }

  // job `j`'s row from its mask computed now (its walk shared with threads out of items when
  // `share`), then its first name clear
  void compute(const FillJob& j, bool share) {
    {
      structgen::WalkHelp::Scope scope(share ? &help_ : nullptr);
      j.ix->mask_into(j.cid, j.row);
    }
    if (words_ > j.n) std::memset(j.row + j.n, 0, static_cast<size_t>(words_ - j.n) * 4);
    if (j.ni != nullptr) j.ni->clear_fresh(*j.st, j.cid, j.row, words_);
  }

  void copy(const FillJob& j, const structgen::StoredMask* mask) const {
    mask->copy_to(j.row, j.n);
    if (words_ > j.n) std::memset(j.row + j.n, 0, static_cast<size_t>(words_ - j.n) * 4);
  }
  void write(const FillJob& j, const structgen::StoredMask* mask) const {
    copy(j, mask);
    if (j.ni != nullptr) j.ni->clear(*j.st, j.cid, j.row, words_);
  }

  // With no mask missing, the memoised rows are copied by the threads from this many bytes.
  static constexpr int64_t kSharedCopyBytes = int64_t(64) << 10;

  const int lanes_;
  const int64_t cap_;  // items a lane holds (every row, were all in one lane)
  // jobs_ and items_ are arrays sized once: the helpers read published entries while the
  // caller appends (a vector's growth would move them)
  std::unique_ptr<FillJob[]> jobs_;
  std::unique_ptr<Item[]> items_;  // lane k's items at [k * cap_, k * cap_ + lane_[k].n)
  std::unique_ptr<Lane[]> lane_;
  const int64_t words_;
  const int threads_;
  int64_t added_ = 0, items_n_ = 0;
  std::vector<std::pair<int64_t, const structgen::StoredMask*>> memoised_;
  std::vector<std::pair<int64_t, const structgen::StoredMask*>> chunked_;  // memoised_ by lane (helpers started)
  std::vector<int64_t> skipped_, waiting_;
  std::unordered_set<std::pair<const structgen::IndexView*, int32_t>, TakenHash> taken_;
  int64_t real_ = -1;                // the items, once final_ (the help items come after)
  std::atomic<bool> final_{false};   // every item is published
  std::atomic<int64_t> done_{0};     // items finished
  std::atomic<bool> failed_{false};  // an item threw
  structgen::WalkHelp help_;
  const std::function<void(int64_t)> body_;
  structgen::Pool::Feed feed_;  // (last: its destructor waits for helpers still using the above)
};

}  // namespace

// Where a bitmask's rows are: a C pointer and the geometry fill_one() needs, read from a numpy
// array (BitmaskRows::of_array) or remembered for a CPU torch tensor (TensorRows).
struct BitmaskRows {
  char* data = nullptr;
  int nd = 0;            // 1 or 2
  int64_t rows = 1;      // shape(0) of a 2-D bitmask
  int64_t words = 0;     // shape(nd - 1), int32 words a row
  int64_t row_step = 0;  // bytes between rows (2-D)

  // A writable int32 numpy array of 1 or 2 dimensions, whose last dimension is contiguous.
  static bool of_array(py::handle bitmask, BitmaskRows& out) {
    if (!py::isinstance<py::array>(bitmask)) return false;
    auto b = py::reinterpret_borrow<py::array>(bitmask);
    if (b.itemsize() != 4 || b.dtype().kind() != 'i' || !b.writeable()) return false;
    const int nd = static_cast<int>(b.ndim());
    if ((nd != 1 && nd != 2) || b.strides(nd - 1) != 4) return false;
    out = {static_cast<char*>(b.mutable_data()), nd, nd == 2 ? b.shape(0) : 1, b.shape(nd - 1),
           nd == 2 ? b.strides(0) : 0};
    return true;
  }
  // Row `index` (a Python int) if it is one of these rows, else nullptr.
  uint32_t* row(py::handle index) const {
    if (!PyLong_CheckExact(index.ptr())) return nullptr;
    const long long r = PyLong_AsLongLong(index.ptr());
    if (nd == 1 ? r != 0 : (r < 0 || r >= rows)) return nullptr;
    return reinterpret_cast<uint32_t*>(data + (nd == 2 ? r * row_step : 0));
  }
};

// Row `index` of a bitmask becomes configuration `cid`'s mask in `ix`, zero words after it,
// less the name clears of `st` when `ni` is given (fill_row, fill_matcher). False, writing
// nothing, for anything but the plain case.
static bool fill_one(const BitmaskRows& b, py::handle index, structgen::IndexView& ix, int32_t cid, NameIndex* ni,
                     const NameState* st, bool compute) {
  const int64_t words = b.words, n = ix.words();
  if (words < n) return false;
  uint32_t* const row = b.row(index);
  if (row == nullptr) return false;
  const structgen::StoredMask* mask = ix.mask_if_ready(cid);
  if (mask == nullptr && !compute) return false;
  auto copy = [&] {
    mask->copy_to(row, n);
    if (words > n) std::memset(row + n, 0, static_cast<size_t>(words - n) * 4);
  };
  if (mask != nullptr) {
    copy();  // a copy of a few KB: cheaper than releasing the GIL
    if (ni == nullptr) return true;
    // so is a memoised name clear (most fills inside an object after the first visit)
    ClearKey key;
    if (ni->clear_if_memoised(*st, cid, row, words, key)) return true;
    py::gil_scoped_release release;  // a first clear searches the grammar
    ni->clear_new(*st, cid, row, words, std::move(key));
    return true;
  }
  // a first visit walks the vocabulary, with the GIL released once it turns out long
  structgen::LazyGil gil;
  ix.mask_into(cid, row);
  if (words > n) std::memset(row + n, 0, static_cast<size_t>(words - n) * 4);
  if (ni != nullptr) ni->clear_fresh(*st, cid, row, words);
  return true;
}

// A matcher's position from its `_history` list and `_view` address (fill_matcher,
// accept_token); false where they are not what GrammarMatcher keeps there.
static bool read_position(PyObject* history, PyObject* view, structgen::IndexView*& ix, int32_t& cid) {
  if (!PyList_CheckExact(history) || PyList_GET_SIZE(history) == 0 || !PyLong_CheckExact(view)) return false;
  const long c = PyLong_AsLong(PyList_GET_ITEM(history, PyList_GET_SIZE(history) - 1));
  ix = reinterpret_cast<structgen::IndexView*>(PyLong_AsVoidPtr(view));
  if (c < 0 || c >= ix->num_configs()) return false;
  cid = static_cast<int32_t>(c);
  return true;
}

// Fields of a class with __slots__ read straight from the instance (GrammarMatcher's, in a
// batch fill): an attribute lookup per field and row was about a quarter of a warm 64-row
// call. The offsets are those of the member descriptors the class resolves the names to; a
// name that resolves to anything else (a subclass's property) leaves the class to getattr.
class SlotReader {
 public:
  explicit SlotReader(std::vector<const char*> names) : names_(std::move(names)), offsets_(names_.size(), -1) {}
  // The field `k` of `o`, borrowed; nullptr where it is not read from a slot here (another
  // class than the last one seen whose fields are not all slots, or an unset slot): the
  // caller then asks getattr, which gives the value or raises the error.
  PyObject* get(PyObject* o, size_t k) {
    PyTypeObject* t = Py_TYPE(o);
    if (t != type_) learn(t);
    if (!slots_) return nullptr;
    return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + offsets_[k]);
  }

 private:
  void learn(PyTypeObject* t) {
    // a reference to the class kept: a class freed and another made at its address would
    // otherwise be read with the first one's offsets
    Py_INCREF(t);
    Py_XDECREF(type_);
    type_ = t;
    slots_ = true;
    for (size_t k = 0; k < names_.size() && slots_; ++k) {
      offsets_[k] = structgen::slot_offset(reinterpret_cast<PyObject*>(t), names_[k]);
      slots_ = offsets_[k] >= 0;
    }
  }
  std::vector<const char*> names_;
  std::vector<Py_ssize_t> offsets_;
  PyTypeObject* type_ = nullptr;  // the last class seen (a reference held)
  bool slots_ = false;
};

// The object of `T` a pybind11 instance of exactly T's class holds (nullptr for anything else:
// the caller casts, which raises the error). Why: a cast looks the class up in pybind11's
// type registry every time (about 60 CPU cycles), and a fill casts a name index and a state,
// a batch fill two per row, an accepted token one.
template <class T>
const T* held(PyObject* o) {
  static PyTypeObject* const cls = reinterpret_cast<PyTypeObject*>(py::type::of<T>().ptr());  // (registered first)
  if (Py_TYPE(o) != cls) return nullptr;
  const auto* inst = reinterpret_cast<const py::detail::instance*>(o);
  if (!inst->simple_layout || !inst->simple_holder_constructed) return nullptr;
  return static_cast<const T*>(inst->simple_value_holder[0]);
}
template <class T>
T& held_or_cast(PyObject* o) {
  const T* v = held<T>(o);
  return v != nullptr ? const_cast<T&>(*v) : py::handle(o).cast<T&>();
}

// GrammarMatcher.fill_next_token_bitmask's usual case in one call: fill_row() with the
// matcher's slots read here (its position, names and index). False, writing nothing, where the
// Python method decides: a terminated matcher, a grammar with counters (its stack limit is
// synced first) or a background precompute, a matcher whose fields are not its own slots, and
// whatever fill_row() refuses.
static bool fill_matcher_impl(PyObject* m, const BitmaskRows& bitmask, py::handle index) {
  enum : size_t { kTerminated, kHistory, kNames, kNameIndex, kView, kCounted, kBackground };
  static SlotReader slots({"_terminated", "_history", "_names", "_name_index", "_view", "_counted", "_background"});
  PyObject* fields[7];
  for (size_t k = 0; k < 7; ++k)
    if ((fields[k] = slots.get(m, k)) == nullptr) return false;
  if (fields[kTerminated] != Py_False || fields[kCounted] != Py_False || fields[kBackground] != Py_None) return false;
  structgen::IndexView* ix;
  int32_t cid;
  if (!read_position(fields[kHistory], fields[kView], ix, cid)) return false;
  PyObject* names = fields[kNames];
  NameIndex* ni = nullptr;
  const NameState* st = nullptr;
  if (names != Py_None) {
    if (!PyList_CheckExact(names) || PyList_GET_SIZE(names) == 0) return false;
    ni = &held_or_cast<NameIndex>(fields[kNameIndex]);
    st = &held_or_cast<const NameState>(PyList_GET_ITEM(names, PyList_GET_SIZE(names) - 1));
  }
  return fill_one(bitmask, index, *ix, cid, ni, st, true);
}

// fill_matcher_impl as a plain CPython function (METH_FASTCALL) rather than a pybind11 one:
// pybind11's dispatcher (argument loaders, overload and keyword handling) cost about 0.1 us of
// a call whose usual case, a memoised mask copied, takes 0.2 us, and a first visit's median
// about 1.5 us (SmolLM2). Errors go through pybind11's exception translators as in any binding.
static PyObject* fill_matcher_fast(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "fill_matcher() takes 3 positional arguments (matcher, bitmask, index)");
    return nullptr;
  }
  try {
    BitmaskRows rows;
    return py::bool_(BitmaskRows::of_array(args[1], rows) && fill_matcher_impl(args[0], rows, args[2])).release().ptr();
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

// The CPU torch tensors last passed as bitmasks (allocate_token_bitmask's default), with the
// rows of the numpy view the Python method made of each. Why: torch's Tensor.numpy() takes
// about 1 us, several times a memoised fill, and a serving loop passes the same bitmask at
// every step; the Python method remembers a tensor here (remember_tensor) once it has its view,
// and later calls find its rows here. A remembered tensor is held weakly, and its rows are used
// only while its data_ptr() and dtype are those it had and, whenever its version counter has
// moved (any in-place op: fill_, resize_, transpose_, set_), its size() and stride() too; else
// the Python method reads the tensor anew. (A `.data` assignment of another view of the same
// memory and dtype moves neither: its old rows would still be filled.) Those reads cost about
// 0.15 us a fill, against the 1 us of a view. Under the GIL.
class TensorRows {
 public:
  static bool find(PyObject* tensor, BitmaskRows& out) {
    for (Entry& e : entries()) {
      if (e.ref == nullptr || PyWeakref_GetObject(e.ref) != tensor) continue;
      if (!e.current(tensor)) {
        e.clear();
        PyErr_Clear();  // (a failed call: the Python method reads the tensor and says what is wrong)
        return false;
      }
      out = e.rows;
      return true;
    }
    return false;
  }

  // Remembers `tensor`, whose numpy view `array` the caller has just made (nothing where the
  // view is not one fill_one() takes, or the tensor has no weak references).
  static void remember(PyObject* tensor, py::handle array) {
    BitmaskRows rows;
    if (!BitmaskRows::of_array(array, rows)) return;
    for (Entry& e : entries())
      if (e.ref != nullptr && PyWeakref_GetObject(e.ref) == tensor) e.clear();
    Entry& e = entries()[next_++ % kEntries];
    e.clear();
    // the type's data_ptr, dtype and _version descriptors, which current() calls directly
    PyTypeObject* const t = Py_TYPE(tensor);
    PyObject* d[3] = {_PyType_Lookup(t, name(kDataPtr)), _PyType_Lookup(t, name(kDtype)), _PyType_Lookup(t, name(kVersion))};
    if (d[0] == nullptr || d[1] == nullptr || d[2] == nullptr || Py_TYPE(d[1])->tp_descr_get == nullptr ||
        Py_TYPE(d[2])->tp_descr_get == nullptr)
      return;  // (not a torch tensor)
    e.type = reinterpret_cast<PyTypeObject*>(Py_NewRef(reinterpret_cast<PyObject*>(t)));
    e.data_ptr_d = Py_NewRef(d[0]);
    e.dtype_d = Py_NewRef(d[1]);
    e.version_d = Py_NewRef(d[2]);
    e.ref = PyWeakref_NewRef(tensor, nullptr);
    e.size = e.ref != nullptr ? PyObject_CallMethodNoArgs(tensor, name(kSize)) : nullptr;
    e.stride = e.size != nullptr ? PyObject_CallMethodNoArgs(tensor, name(kStride)) : nullptr;
    if (e.stride == nullptr || !e.memory(tensor, e.data, e.dtype) || e.data != rows.data) {
      e.clear();  // (the view is not the tensor's memory, or a read failed)
      PyErr_Clear();
      return;
    }
    e.rows = rows;
  }

 private:
  static constexpr size_t kEntries = 4;
  struct Entry {
    PyObject* ref = nullptr;     // weak reference to the tensor
    PyObject* size = nullptr;    // its size() when remembered
    PyObject* stride = nullptr;  // its stride()
    PyObject* dtype = nullptr;   // its dtype (torch's dtypes are one object each)
    void* data = nullptr;        // its data_ptr()
    long long version = -1;      // its _version when its size() and stride() were last found the same
    PyTypeObject* type = nullptr;  // its type, and the type's data_ptr, dtype and _version descriptors
    PyObject* data_ptr_d = nullptr;
    PyObject* dtype_d = nullptr;
    PyObject* version_d = nullptr;
    BitmaskRows rows;
    void clear() {
      Py_CLEAR(ref);
      Py_CLEAR(size);
      Py_CLEAR(stride);
      Py_CLEAR(dtype);
      Py_CLEAR(type);
      Py_CLEAR(data_ptr_d);
      Py_CLEAR(dtype_d);
      Py_CLEAR(version_d);
      data = nullptr;
    }
    // the tensor's data_ptr() and dtype (a new reference), read by the type's descriptors
    bool memory(PyObject* tensor, void*& ptr_out, PyObject*& dtype_out) const {
      PyObject* ptr = PyObject_CallOneArg(data_ptr_d, tensor);
      if (ptr == nullptr) return false;
      ptr_out = PyLong_AsVoidPtr(ptr);
      Py_DECREF(ptr);
      dtype_out = Py_TYPE(dtype_d)->tp_descr_get(dtype_d, tensor, reinterpret_cast<PyObject*>(type));
      return dtype_out != nullptr;
    }
    // whether the tensor still has the memory and geometry it had when remembered
    bool current(PyObject* tensor) {
      // (the descriptors of the tensor's type, called directly: a generic attribute lookup
      // each was a tenth of a memoised fill)
      if (Py_TYPE(tensor) != type) return false;
      void* now = nullptr;
      PyObject* dt = nullptr;
      if (!memory(tensor, now, dt)) return false;
      Py_DECREF(dt);  // (compared by identity: the dtype objects live as long as torch)
      if (now != data || dt != dtype) return false;
      PyObject* ver = Py_TYPE(version_d)->tp_descr_get(version_d, tensor, reinterpret_cast<PyObject*>(type));
      if (ver == nullptr) return false;
      const long long v = PyLong_AsLongLong(ver);
      Py_DECREF(ver);
      if (v == version) return true;
      for (auto [attr, was] : {std::pair{name(kSize), size}, std::pair{name(kStride), stride}}) {
        PyObject* got = PyObject_CallMethodNoArgs(tensor, attr);
        if (got == nullptr) return false;
        const int same = PyObject_RichCompareBool(got, was, Py_EQ);
        Py_DECREF(got);
        if (same != 1) return false;
      }
      version = v;
      return true;
    }
  };
  // the attribute names read, interned once (never freed: they outlive every call)
  enum Name { kSize, kStride, kVersion, kDtype, kDataPtr };
  static PyObject* name(Name n) {
    static PyObject* const names[] = {
        PyUnicode_InternFromString("size"), PyUnicode_InternFromString("stride"),
        PyUnicode_InternFromString("_version"), PyUnicode_InternFromString("dtype"),
        PyUnicode_InternFromString("data_ptr")};
    return names[n];
  }
  static std::array<Entry, kEntries>& entries() {
    static std::array<Entry, kEntries> e;
    return e;
  }
  static inline size_t next_ = 0;
};

// GrammarMatcher.fill_next_token_bitmask (fast_method): the usual case (a numpy bitmask, the
// index positional or left out, fill_matcher_impl taking it) without a Python frame; any other
// call goes, as it came, to the Python method `fallback` (other array kinds, counters, a
// background precompute, every error). Why: the frame around the one native call was about
// 80 ns of a memoised fill's 180, and the median first visit costs about 1.5 us (SmolLM2).
static PyObject* fill_method(PyObject* fallback, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static PyObject* const ndarray = py::object(py::module_::import("numpy").attr("ndarray")).release().ptr();
  static PyObject* const zero = PyLong_FromLong(0);
  if (kwnames == nullptr && (nargs == 2 || nargs == 3)) {
    try {
      BitmaskRows rows;
      const bool known = Py_TYPE(args[1]) == reinterpret_cast<PyTypeObject*>(ndarray)
                             ? BitmaskRows::of_array(args[1], rows)
                             : TensorRows::find(args[1], rows);
      if (known && fill_matcher_impl(args[0], rows, nargs == 3 ? args[2] : zero)) Py_RETURN_NONE;
    } catch (...) {
      py::detail::try_translate_exceptions();
      return nullptr;
    }
  }
  return PyObject_Vectorcall(fallback, args, static_cast<size_t>(nargs), kwnames);
}

void register_names(py::module_& m) {
  py::class_<NameState, std::shared_ptr<NameState>>(m, "NameState")
      .def(py::init<>())
      .def(
          "feed",
          [](std::shared_ptr<NameState> self, const py::handle& data) -> py::object {
            const std::string d = as_bytes(data);
            auto out = std::make_shared<NameState>();
            switch (feed(*self, d, *out)) {
              case kDuplicate: return py::none();
              case kSame: return py::cast(self);
              default: return py::cast(out);
            }
          },
          py::arg("data"))
      .def("key_prefix", [](const NameState& s) { return s.esc ? py::object(py::none()) : name_to_py(s.key_prefix()); })
      .def("top_names", [](const NameState& s) { return names_to_py(s.top_names()); })
      .def_property_readonly("stack",
                             [](const NameState& s) {
                               std::vector<const Level*> levels;
                               for (const Level* l = s.top.get(); l != nullptr; l = l->parent.get()) levels.push_back(l);
                               py::tuple out(levels.size());
                               for (size_t k = 0; k < levels.size(); ++k) {
                                 const Level* l = levels[levels.size() - 1 - k];
                                 out[k] = l->object ? names_to_py(l->names.get()) : py::object(py::none());
                               }
                               return out;
                             })
      .def_property_readonly("expect_key", [](const NameState& s) { return s.expect_key; })
      .def_property_readonly("mode", [](const NameState& s) { return static_cast<int>(s.mode); })
      .def_property_readonly("esc", [](const NameState& s) { return s.esc; })
      .def_property_readonly("key", [](const NameState& s) { return py::bytes(s.key); })
      .def_property_readonly("named", [](const NameState& s) { return s.named; })
      .def("__repr__", [](py::object self) {
        return py::str("NameState(stack={!r}, expect_key={}, mode={}, esc={}, key={!r})")
            .format(self.attr("stack"), self.attr("expect_key"), self.attr("mode"), self.attr("esc"), self.attr("key"));
      });
  m.def(
      "decode_name",
      [](const py::handle& raw) -> py::object {
        const std::string r = as_bytes(raw);
        return name_to_py(decode_or_none(r));
      },
      py::arg("raw"));
  py::class_<NameTables, std::shared_ptr<NameTables>>(m, "NameTables")
      .def(py::init<const py::sequence&, int64_t>(), py::arg("token_bytes"), py::arg("words"))
      .def_property_readonly("words", [](const NameTables& t) { return t.words; });
  py::class_<NameIndex, std::shared_ptr<NameIndex>>(m, "NameIndex")
      .def(py::init<py::object, std::shared_ptr<const NameTables>, bool>(), py::arg("index"), py::arg("tables"),
           py::arg("traps") = true)
      .def(
          "clear",
          [](NameIndex& ni, const NameState& st, int32_t cid, u32w& row) {
            if (row.ndim() != 1) throw std::invalid_argument("row must be 1-D");
            if (!row.writeable()) throw std::invalid_argument("row must be writable");
            ni.check_cid(cid);
            uint32_t* r = row.mutable_data();
            const int64_t n = row.shape(0);
            py::gil_scoped_release release;
            ni.clear(st, cid, r, n);
          },
          py::arg("state"), py::arg("cid"), py::arg("row").noconvert())
      .def(
          "distinct_completion",
          [](NameIndex& ni, int32_t cid, const NameState& st, int64_t max_nodes) -> py::object {
            ni.check_cid(cid);
            std::optional<std::string> out;
            {
              py::gil_scoped_release release;
              out = ni.distinct_completion(cid, st, max_nodes);
            }
            if (!out) return py::none();
            return py::bytes(*out);
          },
          py::arg("cid"), py::arg("state"), py::arg("max_nodes"));
  // GrammarMatcher.fill_next_token_bitmask in one call: row `index` of a numpy int32 bitmask
  // becomes configuration `cid`'s mask in `ix`, zero words after it, less the name clears of
  // `state` when `names` is given. A mask not computed yet is computed here, without the GIL,
  // when `compute` says so (the caller says no while a background precompute of the grammar
  // runs: its demand protocol is in Python). Returns false, writing nothing, for anything but
  // the plain case (another array kind, a row out of range, a narrow row, a bool index, a
  // missing mask not to compute): the matcher's checked path then fills the row or raises the
  // error that says what is wrong.
  m.def(
      "fill_row",
      [](py::handle bitmask, py::handle index, uintptr_t view, int32_t cid, py::handle names, py::handle state,
         bool compute) {
        // `view`: ConfigIndex.view, the address of the index's IndexView, which the caller keeps
        // alive (a pointer argument costs a fraction of a class argument's cast, on every fill)
        structgen::IndexView& ix = *reinterpret_cast<structgen::IndexView*>(view);
        if (cid < 0 || cid >= ix.num_configs()) throw py::index_error("configuration id out of range");
        NameIndex* ni = names.is_none() ? nullptr : &names.cast<NameIndex&>();
        const NameState* st = ni == nullptr ? nullptr : &state.cast<const NameState&>();
        BitmaskRows rows;
        return BitmaskRows::of_array(bitmask, rows) && fill_one(rows, index, ix, cid, ni, st, compute);
      },
      py::arg("bitmask"), py::arg("index"), py::arg("view"), py::arg("cid"), py::arg("names"), py::arg("state"),
      py::arg("compute"));
  // GrammarMatcher's Python method, having made the numpy view of a CPU torch tensor bitmask:
  // later fills with the same tensor find its rows natively (TensorRows).
  m.def(
      "remember_tensor", [](py::handle tensor, py::handle array) { TensorRows::remember(tensor.ptr(), array); },
      py::arg("tensor"), py::arg("array"));
  m.def("gil_releases", &structgen::LazyGil::releases,
        "How many times a fill on this thread released the GIL part way through a first visit.");
  m.def("walks_shared", &structgen::WalkHelp::shared,
        "How many large walks of batch fills a thread out of items has joined, in this process.");
  // For the tests: the masks of configurations cids[k] of indexes views[k] (none memoised
  // yet) computed one after the other as in a batch fill of two threads whose other thread
  // waits to help all along, so that a large walk is shared whatever the machine's load (in
  // a real batch the helper is a pool worker, which a loaded machine may not run before the
  // walk ends). With helper_first, the helper takes each shared walk's first unit
  // (WalkHelp::helper_first). Returns the masks and how many walks the helper joined.
  m.def(
      "_masks_with_a_waiting_helper",
      [](const py::list& view_list, const py::list& cid_list, bool helper_first) {
        if (view_list.size() != cid_list.size()) throw std::invalid_argument("views and cids differ in length");
        std::vector<structgen::IndexView*> ix;
        std::vector<int32_t> cids;
        int64_t words = 0;
        for (size_t k = 0; k < view_list.size(); ++k) {
          ix.push_back(reinterpret_cast<structgen::IndexView*>(view_list[k].cast<uintptr_t>()));
          cids.push_back(cid_list[k].cast<int32_t>());
          if (cids[k] < 0 || cids[k] >= ix[k]->num_configs()) throw py::index_error("configuration id out of range");
          if (ix[k]->mask_if_ready(cids[k]) != nullptr) throw std::invalid_argument("a mask is memoised already");
          words = std::max(words, ix[k]->words());
        }
        py::array_t<uint32_t> out({static_cast<py::ssize_t>(ix.size()), static_cast<py::ssize_t>(words)});
        uint32_t* rows = out.mutable_data();
        std::memset(rows, 0, ix.size() * static_cast<size_t>(words) * 4);  // (zero past a smaller vocabulary)
        const int64_t before = structgen::WalkHelp::shared();
        {
          py::gil_scoped_release release;
          structgen::WalkHelp help(2, words);
          help.set_helper_first(helper_first);
          std::atomic<bool> done{false};
          std::thread helper([&] { help.help_until([&] { return done.load(std::memory_order_acquire); }); });
          struct Stop {  // the helper leaves before `help` goes, whether the masks succeed or throw
            std::atomic<bool>& done;
            std::thread& helper;
            ~Stop() {
              done.store(true, std::memory_order_release);
              helper.join();
            }
          } stop{done, helper};
          while (!help.wanted()) std::this_thread::yield();
          structgen::WalkHelp::Scope share(&help);
          for (size_t k = 0; k < ix.size(); ++k) ix[k]->mask_into(cids[k], rows + k * words);
        }
        return py::make_tuple(out, structgen::WalkHelp::shared() - before);
      },
      py::arg("views"), py::arg("cids"), py::arg("helper_first") = false);
  // GrammarMatcher.fill_next_token_bitmask's usual case in one call (fill_matcher_fast).
  static PyMethodDef fill_matcher_def{"fill_matcher",
                                      reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fill_matcher_fast)),
                                      METH_FASTCALL, "fill_matcher(matcher, bitmask, index) -> bool"};
  PyObject* fill_matcher_fn = PyCFunction_NewEx(&fill_matcher_def, nullptr, nullptr);
  if (fill_matcher_fn == nullptr) throw py::error_already_set();
  m.add_object("fill_matcher", py::reinterpret_steal<py::object>(fill_matcher_fn));
  // fast_method(f): GrammarMatcher.fill_next_token_bitmask, a method whose usual case is native
  // (fill_method) and whose every other call is f's, with f's name and docstring.
  m.def(
      "fast_method",
      [](py::function fallback) {
        // made once per class: the method table and docstring live as long as the process
        auto* def = new PyMethodDef{"fill_next_token_bitmask",
                                    reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fill_method)),
                                    METH_FASTCALL | METH_KEYWORDS, nullptr};
        // (the signature line first: inspect.signature reads it as __text_signature__)
        py::object doc = fallback.attr("__doc__");
        def->ml_doc = (new std::string("fill_next_token_bitmask(self, bitmask, index=0)\n--\n\n" +
                                       (doc.is_none() ? std::string() : doc.cast<std::string>())))->c_str();
        PyObject* f = PyCFunction_NewEx(def, fallback.ptr(), nullptr);
        if (f == nullptr) throw py::error_already_set();
        PyObject* method = PyInstanceMethod_New(f);
        Py_DECREF(f);
        if (method == nullptr) throw py::error_already_set();
        return py::reinterpret_steal<py::object>(method);
      },
      py::arg("fallback"));
  // GrammarMatcher.accept_token's usual case in one call: the matcher's slots read here, the
  // token stepped through the configuration's byte rows, its member names fed, and the new
  // configuration (and name state) appended to the matcher's lists, trimmed to
  // max_rollback_tokens. Returns 1 (accepted), 0 (rejected, nothing changed) or -1 where the
  // Python path decides: a stop token, an id outside `token_bytes`, a matcher whose fields are
  // not its own slots, a step past the stack limit (the Python path raises the error).
  //
  // Why native: in Python the step took a dictionary memo of (configuration, token), an
  // attribute chain to the token's bytes, the name state's feed and two list appends, about
  // 0.8 us a token warm and three quarters of that on a first pass besides the rows computed.
  m.def(
      "accept_token",
      [](py::handle matcher, py::handle token, py::handle token_bytes) -> int {
        enum : size_t { kTerminated, kHistory, kNames, kView, kMaxRollback };
        static SlotReader slots({"_terminated", "_history", "_names", "_view", "_max_rollback"});
        PyObject* m = matcher.ptr();
        PyObject* fields[5];
        for (size_t k = 0; k < 5; ++k)
          if ((fields[k] = slots.get(m, k)) == nullptr) return -1;
        if (fields[kTerminated] == Py_True) return 0;
        if (fields[kTerminated] != Py_False || !PyLong_CheckExact(token.ptr()) || !PyTuple_CheckExact(token_bytes.ptr()))
          return -1;
        PyObject* history = fields[kHistory];
        PyObject* names = fields[kNames];
        structgen::IndexView* view;
        int32_t cur;
        if (!read_position(history, fields[kView], view, cur)) return -1;
        if (names != Py_None && (!PyList_CheckExact(names) || PyList_GET_SIZE(names) != PyList_GET_SIZE(history)))
          return -1;
        int overflow = 0;
        const long long t = PyLong_AsLongLongAndOverflow(token.ptr(), &overflow);
        if (overflow != 0 || t < 0 || t >= PyTuple_GET_SIZE(token_bytes.ptr())) return -1;
        structgen::IndexView& ix = *view;
        if (t < ix.words() * 32 && (ix.stop_mask()[t >> 5] >> (t & 31) & 1u)) return -1;  // a stop token
        PyObject* data = PyTuple_GET_ITEM(token_bytes.ptr(), t);
        if (data == Py_None) return 0;  // a special token: no bytes, never a step of the text
        if (!PyBytes_CheckExact(data)) return -1;
        const auto* d = reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(data));
        const auto n = static_cast<int64_t>(PyBytes_GET_SIZE(data));
        if (n == 0) return 0;
        int32_t nxt = ix.step_if_ready(cur, d, n);
        if (nxt < 0) {
          try {
            // a first visit steps the configurations' rows, computing those missing: the GIL
            // is released at the first row to compute (most steps inside a name or a string
            // go by the DFA rows of simple frames and compute none: lazy_gil.hpp)
            structgen::LazyGil gil;
            nxt = ix.step_bytes(cur, d, n);
          } catch (...) {  // (a configuration past the stack limit: the Python path raises LimitError)
            return -1;
          }
        }
        if (nxt == 0) return 0;  // DEAD
        py::object name_state;
        if (names != Py_None) {
          PyObject* last = PyList_GET_ITEM(names, PyList_GET_SIZE(names) - 1);
          const auto& st = held_or_cast<const NameState>(last);
          auto out = std::make_shared<NameState>();
          switch (feed(st, d, static_cast<size_t>(n), *out)) {
            case kDuplicate: return 0;  // writes a member name twice in one object
            case kSame: name_state = py::reinterpret_borrow<py::object>(last); break;
            default: name_state = py::cast(std::move(out));
          }
        }
        py::object cid = py::reinterpret_steal<py::object>(PyLong_FromLong(nxt));
        if (cid.ptr() == nullptr || PyList_Append(history, cid.ptr()) != 0) throw py::error_already_set();
        if (names != Py_None && PyList_Append(names, name_state.ptr()) != 0) throw py::error_already_set();
        PyObject* keep = fields[kMaxRollback];
        if (keep != Py_None) {
          const long long k = PyLong_AsLongLong(keep);
          if (k == -1 && PyErr_Occurred()) throw py::error_already_set();
          if (PyList_GET_SIZE(history) > k + 1) {
            if (PySequence_DelItem(history, 0) != 0) throw py::error_already_set();
            if (names != Py_None && PySequence_DelItem(names, 0) != 0) throw py::error_already_set();
          }
        }
        return 1;
      },
      py::arg("matcher"), py::arg("token"), py::arg("token_bytes"));
  // structgen.runtime.batch's fill: one row per matcher of `matchers` (GrammarMatcher or None:
  // row left alone), row rows[k] (default k) of a 2-D int32 bitmask. A terminated matcher's
  // row allows its stop tokens; any other becomes the mask of the matcher's configuration,
  // zero words after it, less its member-name clears. A mask not computed yet is computed
  // here by up to `threads` threads of the native pool, except for a grammar whose background
  // precompute is running when `compute` is false (its demand protocol is in Python): those
  // rows' positions in `matchers` are returned, unfilled.
  //
  // Why the matchers' fields are read here rather than by Python: this reading is the serial
  // part of a step, which the threads do not share. A Python loop over the rows cost about
  // 0.6 us a row; with the slots read here, a warm 64-row call went from about 70 to 51 us.
  m.def(
      "fill_matchers",
      [](py::array_t<int32_t, py::array::c_style>& bitmask, const py::list& matchers, const py::object& rows,
         int64_t stack_limit, bool compute, int threads) {
        if (bitmask.ndim() != 2) throw std::invalid_argument("bitmask must be 2-D (batch, words)");
        if (!bitmask.writeable()) throw std::invalid_argument("bitmask is read-only");
        const size_t n = matchers.size();
        py::list row_list;
        if (!rows.is_none()) {
          row_list = py::reinterpret_borrow<py::list>(rows);
          if (row_list.size() != n) throw std::invalid_argument("rows and matchers differ in length");
        }
        const int64_t batch = bitmask.shape(0), words = bitmask.shape(1);
        // the attribute names, interned once (never freed: they outlive every call)
        static PyObject* const k_index = PyUnicode_InternFromString("_index");
        static PyObject* const k_view = PyUnicode_InternFromString("_view");
        static PyObject* const k_terminated = PyUnicode_InternFromString("_terminated");
        static PyObject* const k_history = PyUnicode_InternFromString("_history");
        static PyObject* const k_names = PyUnicode_InternFromString("_names");
        static PyObject* const k_name_index = PyUnicode_InternFromString("_name_index");
        static PyObject* const k_compiled = PyUnicode_InternFromString("compiled");
        static PyObject* const k_background = PyUnicode_InternFromString("background");
        static PyObject* const k_finished = PyUnicode_InternFromString("finished");
        auto attr = [](PyObject* o, PyObject* name) {
          PyObject* v = PyObject_GetAttr(o, name);
          if (v == nullptr) throw py::error_already_set();
          return py::reinterpret_steal<py::object>(v);
        };
        // a matcher's fields: from its slots where they are slots (GrammarMatcher), else getattr
        enum : size_t { kIndexSlot, kTerminatedSlot, kHistorySlot, kNamesSlot, kNameIndexSlot, kViewSlot, kBackgroundSlot };
        static SlotReader slots({"_index", "_terminated", "_history", "_names", "_name_index", "_view", "_background"});
        static PyObject* const slot_names[] = {k_index, k_terminated, k_history, k_names, k_name_index, k_view};
        auto field = [&](PyObject* m, size_t k) {
          PyObject* v = slots.get(m, k);
          return v != nullptr ? py::reinterpret_borrow<py::object>(v) : attr(m, slot_names[k]);
        };
        auto last = [](const py::object& list, const char* what) {
          if (!PyList_Check(list.ptr()) || PyList_GET_SIZE(list.ptr()) == 0)
            throw std::invalid_argument(std::string("a matcher's ") + what + " is not a non-empty list");
          return py::reinterpret_borrow<py::object>(PyList_GET_ITEM(list.ptr(), PyList_GET_SIZE(list.ptr()) - 1));
        };
        struct Grammar {
          PyObject* index;  // the TokenIndex (borrowed: a matcher of the batch holds it)
          structgen::IndexView* ix;
          bool compute;
        };
        std::vector<Grammar> grammars;  // distinct indexes, in order of first use
        grammars.reserve(n);
        // Rows of one grammar often come together: the last one found is tried first, then a
        // table by address (open addressing, twice the rows' slots: a scan of the grammars
        // met so far cost a 64-row batch of distinct grammars about 2,000 comparisons a call).
        size_t last_hit = 0;
        size_t slots_n = 16;
        while (slots_n < 2 * n) slots_n *= 2;
        std::vector<int32_t> by_index(slots_n, -1);  // grammars' positions
        auto slot_of = [&](PyObject* index) {
          size_t h = (reinterpret_cast<uintptr_t>(index) >> 4) * 0x9E3779B97F4A7C15ull >> 20;
          for (;; ++h) {
            const int32_t g = by_index[h & (slots_n - 1)];
            if (g < 0 || grammars[static_cast<size_t>(g)].index == index) return h & (slots_n - 1);
          }
        };
        auto grammar_of = [&](PyObject* m, PyObject* index) -> const Grammar& {
          if (last_hit < grammars.size() && grammars[last_hit].index == index) return grammars[last_hit];
          const size_t at = slot_of(index);
          if (by_index[at] >= 0) return grammars[last_hit = static_cast<size_t>(by_index[at])];
          // (the matcher's copy of index._view: a slot, where the index's is a dict entry)
          PyObject* view = slots.get(m, kViewSlot);
          auto* ix = reinterpret_cast<structgen::IndexView*>(
              view != nullptr && PyLong_CheckExact(view) ? reinterpret_cast<uintptr_t>(PyLong_AsVoidPtr(view))
                                                         : attr(index, k_view).cast<uintptr_t>());
          if (ix->words() > words)
            throw std::invalid_argument("bitmask row has " + std::to_string(words) +
                                        " words but the vocabulary needs " + std::to_string(ix->words()));
          if (ix->counted()) ix->set_stack_limit(stack_limit);  // first visits may make configurations
          bool ready = compute;
          if (!ready) {
            // (the matcher's copy of compiled.background, a slot: two attribute reads per
            // grammar, every call, were a tenth of a 64-grammar call's serial part)
            PyObject* own = slots.get(m, kBackgroundSlot);
            py::object task = own != nullptr ? py::reinterpret_borrow<py::object>(own)
                                             : attr(attr(m, k_compiled).ptr(), k_background);
            ready = task.is_none() || attr(task.ptr(), k_finished).attr("is_set")().cast<bool>();
          }
          grammars.push_back({index, ix, ready});
          by_index[at] = static_cast<int32_t>(grammars.size() - 1);
          return grammars[last_hit = grammars.size() - 1];
        };
        std::vector<int64_t> position;  // of each job's matcher in `matchers`
        position.reserve(n);
        std::vector<py::object> keep;  // name indexes and states stay referenced without the GIL
        keep.reserve(2 * n);
        BatchFill fill(n, words, threads);  // (after keep: an error while reading waits for the helpers first)
        auto* B = reinterpret_cast<uint32_t*>(bitmask.mutable_data());
        for (size_t k = 0; k < n; ++k) {
          PyObject* m = PyList_GET_ITEM(matchers.ptr(), k);
          if (m == Py_None) continue;
          int64_t r = static_cast<int64_t>(k);
          if (!rows.is_none()) r = row_list[k].cast<int64_t>();
          if (r < 0 || r >= batch)
            throw std::invalid_argument("index " + std::to_string(r) + " is outside the bitmask's batch of " +
                                        std::to_string(batch));
          py::object index = field(m, kIndexSlot);
          const Grammar& g = grammar_of(m, index.ptr());
          FillJob j{B + r * words, nullptr, g.ix->words(), g.ix, 0, nullptr, nullptr, g.compute, r};
          if (field(m, kTerminatedSlot).ptr() == Py_True) {
            j.stop = g.ix->stop_stored();
            j.ix = nullptr;
          } else {
            j.cid = last(field(m, kHistorySlot), "history").cast<int32_t>();
            if (j.cid < 0 || j.cid >= j.ix->num_configs()) throw py::index_error("configuration id out of range");
            py::object names = field(m, kNamesSlot);
            if (!names.is_none()) {
              keep.push_back(field(m, kNameIndexSlot));
              j.ni = &held_or_cast<NameIndex>(keep.back().ptr());
              keep.push_back(last(names, "name states"));
              j.st = &held_or_cast<const NameState>(keep.back().ptr());
            }
          }
          fill.add(j);
          position.push_back(static_cast<int64_t>(k));
        }
        std::vector<int64_t> skipped;
        {
          py::gil_scoped_release release;
          skipped = fill.finish();
        }
        py::list out;
        for (int64_t k : skipped) out.append(position[static_cast<size_t>(k)]);
        return out;
      },
      py::arg("bitmask").noconvert(), py::arg("matchers"), py::arg("rows"), py::arg("stack_limit"),
      py::arg("compute"), py::arg("threads") = 1);
}
