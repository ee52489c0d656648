// The fast line decoder of read_history (history_reader.h). Each operation
// line is decoded where it lies in the reader's chunk (no copy, no DOM, no
// allocation per line), by the first of three tiers that takes it:
//   1. a strict scanner of the flat objects write_history writes, 8 bytes
//      at a time (known keys, strings without escapes, integers);
//   2. simdjson's On-Demand parser (escapes, UTF-8, spacing, big numbers);
//   3. the reference decoder (nlohmann), which gives every error message.
// A line's record fields are parsed and validated in tiers 1 and 2; its
// template fields (a mutation's op and sets, a lookup's op, start, path,
// access, follow, resolve) are kept as their raw text, looked up among the
// templates the reference has already accepted: only a template's first
// line, anything unusual and every error go through nlohmann.

#include <simdjson.h>

#include <array>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "scenarios/history_reader.h"

namespace leapfrog::history_detail {
namespace {

static_assert(kLinePadding >= simdjson::SIMDJSON_PADDING);

namespace od = simdjson::ondemand;

enum Field : uint8_t {
  kType,
  kActor,
  kOp,
  kInvoke,
  kComplete,
  kResult,
  kRound,
  kSets,
  kStart,
  kPath,
  kAccess,
  kFollow,
  kResolve,
  kDev,
  kIno,
  kEuid,
  kEgid,
  kEpoch,
  kOffset,
  kLength,
  kFields
};

constexpr uint32_t bit(Field f) {
  return 1u << f;
}

// Fields kept as raw text: valid only as part of a template key the
// reference accepted, so each type allows only those of its own templates.
constexpr uint32_t kRawFields =
    bit(kOp) | bit(kSets) | bit(kStart) | bit(kPath) | bit(kAccess) | bit(kFollow) | bit(kResolve);
constexpr uint32_t kMutateRaw = bit(kOp) | bit(kSets);
constexpr uint32_t kLookupRaw = kRawFields & ~bit(kSets);

// The field a key names (-1: one the format does not read), by length
// first: this runs for every key of every line.
int field_of(std::string_view key) {
  const char* k = key.data();
  const size_t n = key.size();
  auto is = [key](std::string_view name, Field f) { return key == name ? int{f} : -1; };
  switch (n) {
    case 2:
      return is("op", kOp);
    case 3:
      return k[0] == 'd' ? is("dev", kDev) : is("ino", kIno);
    case 4:
      switch (k[0]) {
        case 't':
          return is("type", kType);
        case 's':
          return is("sets", kSets);
        case 'p':
          return is("path", kPath);
        case 'e':
          return k[1] == 'u' ? is("euid", kEuid) : is("egid", kEgid);
      }
      return -1;
    case 5:
      switch (k[0]) {
        case 'a':
          return is("actor", kActor);
        case 'r':
          return is("round", kRound);
        case 's':
          return is("start", kStart);
        case 'e':
          return is("epoch", kEpoch);
      }
      return -1;
    case 6:
      switch (k[0]) {
        case 'i':
          return is("invoke", kInvoke);
        case 'r':
          return is("result", kResult);
        case 'a':
          return is("access", kAccess);
        case 'f':
          return is("follow", kFollow);
        case 'o':
          return is("offset", kOffset);
        case 'l':
          return is("length", kLength);
      }
      return -1;
    case 7:
      return is("resolve", kResolve);
    case 8:
      return is("complete", kComplete);
  }
  return -1;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// A string token's content if it has no escape and no control character (so
// it is valid JSON and reads as itself), else false.
bool plain_string(std::string_view token, std::string_view& out) {
  token = trim(token);
  if (token.size() < 2 || token.front() != '"' || token.back() != '"') return false;
  out = token.substr(1, token.size() - 2);
  for (const char c : out)
    if (c == '\\' || static_cast<unsigned char>(c) < 0x20) return false;
  return true;
}

template <typename T>
bool u32(od::value& v, T& out) {
  uint64_t x = 0;
  if (v.get_uint64().get(x) || x > UINT32_MAX) return false;
  out = static_cast<T>(x);
  return true;
}

bool time_of(od::value& v, int64_t& out) {
  return !v.get_int64().get(out) && out >= -kMaxTimeNs && out <= kMaxTimeNs;
}

// A template's key as it is built: the tag, length and raw text of each of
// its fields, in the line's order, so that equal text gives equal keys.
class KeyBuf {
 public:
  void clear() {
    n_ = 0;
    ok_ = true;
  }
  void add(uint8_t tag, std::string_view s) {
    const auto len = static_cast<uint32_t>(s.size());
    if (!ok_ || s.size() > sizeof buf_ - n_ - 5) {
      ok_ = false;  // a template this long always takes the reference's way
      return;
    }
    buf_[n_] = static_cast<char>(tag);
    std::memcpy(buf_ + n_ + 1, &len, sizeof len);
    std::memcpy(buf_ + n_ + 5, s.data(), s.size());
    n_ += 5 + s.size();
  }
  bool ok() const { return ok_; }
  std::string_view view() const { return {buf_, n_}; }

 private:
  char buf_[16384];
  size_t n_ = 0;
  bool ok_ = true;
};

struct KeyHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
// Templates by key; the last one found is looked at first (lines of one
// template tend to come in runs).
class TemplateIds {
 public:
  // The id learned for `key`, or nullptr.
  const uint32_t* find(std::string_view key) {
    if (last_ && key == last_->first) return &last_->second;
    auto it = ids_.find(key);
    if (it == ids_.end()) return nullptr;
    last_ = &*it;
    return &it->second;
  }
  void learn(std::string_view key, uint32_t id) { ids_.emplace(std::string(key), id); }

 private:
  std::unordered_map<std::string, uint32_t, KeyHash, std::equal_to<>> ids_;
  const std::pair<const std::string, uint32_t>* last_ = nullptr;
};

enum class Type : uint8_t { Mutate, Lookup, Read, Seek };

inline uint64_t load8(const char* p) {
  uint64_t x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

// The index of the first byte of `x` (in memory order) equal to `b`, or 8.
inline unsigned first_byte(uint64_t x, uint8_t b) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  const uint64_t y = x ^ (kOnes * b);
  const uint64_t t = (y - kOnes) & ~y & (kOnes << 7);
  return t ? static_cast<unsigned>(__builtin_ctzll(t)) / 8 : 8;
}

// The number of leading ASCII digits (in memory order) of x, 0..8.
inline unsigned digit_run(uint64_t x) {
  constexpr uint64_t kHigh = 0xF0F0F0F0F0F0F0F0ULL;
  const uint64_t t =
      ((x & kHigh) | (((x + 0x0606060606060606ULL) & kHigh) >> 4)) ^ 0x3333333333333333ULL;
  return t ? static_cast<unsigned>(__builtin_ctzll(t)) / 8 : 8;
}

// Eight ASCII digits (or zero bytes before them, as leading zeros), the first
// in the lowest byte, as a number.
inline uint64_t eight_digits(uint64_t x) {
  x = (x & 0x0F0F0F0F0F0F0F0FULL) * 2561 >> 8;
  x = (x & 0x00FF00FF00FF00FFULL) * 6553601 >> 16;
  return (x & 0x0000FFFF0000FFFFULL) * 42949672960001ULL >> 32;
}

constexpr uint64_t kPow10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

// A key of at most 8 bytes as a little-endian word.
constexpr uint64_t word(std::string_view k) {
  uint64_t w = 0;
  for (size_t i = 0; i < k.size(); ++i) w |= uint64_t{static_cast<unsigned char>(k[i])} << (8 * i);
  return w;
}

// field_of for a key of n (1..8) bytes read as a word (zero bytes after it).
int field_of_word(unsigned n, uint64_t w) {
  // (Constants, so that no word is computed at run time.)
  constexpr uint64_t kOpWord = word("op"), kDevWord = word("dev"), kInoWord = word("ino"),
                     kResolveWord = word("resolve"), kCompleteWord = word("complete");
  auto is = [w](uint64_t k, Field f) { return w == k ? int{f} : -1; };
  switch (n) {
    case 2:
      return is(kOpWord, kOp);
    case 3:
      return w == kDevWord ? int{kDev} : is(kInoWord, kIno);
    case 4:
      switch (w) {
        case word("type"):
          return kType;
        case word("sets"):
          return kSets;
        case word("path"):
          return kPath;
        case word("euid"):
          return kEuid;
        case word("egid"):
          return kEgid;
      }
      return -1;
    case 5:
      switch (w) {
        case word("actor"):
          return kActor;
        case word("round"):
          return kRound;
        case word("start"):
          return kStart;
        case word("epoch"):
          return kEpoch;
      }
      return -1;
    case 6:
      switch (w) {
        case word("invoke"):
          return kInvoke;
        case word("result"):
          return kResult;
        case word("access"):
          return kAccess;
        case word("follow"):
          return kFollow;
        case word("offset"):
          return kOffset;
        case word("length"):
          return kLength;
      }
      return -1;
    case 7:
      return is(kResolveWord, kResolve);
    case 8:
      return is(kCompleteWord, kComplete);
  }
  return -1;
}

// What a line holds: its record fields, and (in key) its template's raw text.
struct Parsed {
  uint32_t seen = 0;  // bit(Field) of each field present
  Type type = Type::Mutate;
  std::string_view result;
  int64_t invoke = 0, complete = 0, offset = 0;
  uint32_t actor = 0, round = 0, euid = 0, egid = 0, epoch = 0, length = 0;
  uint64_t dev = 0, ino = 0;
};

bool type_of(std::string_view t, Type& out) {
  if (t == "lookup")
    out = Type::Lookup;
  else if (t == "mutate")
    out = Type::Mutate;
  else if (t == "read")
    out = Type::Read;
  else if (t == "seek")
    out = Type::Seek;
  else
    return false;
  return true;
}

class SimdDecoder final : public FastDecoder {
 public:
  bool decode(std::string_view line, size_t lineno, ReaderState& st) override {
    pending_ = Pending::None;
    Parsed p;
    key_.clear();
    if (!scan(line, p)) {
      p = Parsed{};
      key_.clear();
      if (!on_demand(line, p)) return false;
    }
    return append(p, lineno, st);
  }

  void learn(ReaderState& st) override {
    if (pending_ == Pending::Effect) effects_.learn(key_.view(), st.h.mutations.back().effect);
    if (pending_ == Pending::Query) queries_.learn(key_.view(), st.h.lookups.back().query);
    pending_ = Pending::None;
  }

 private:
  // The first tier: a strict scanner of the flat objects write_history
  // writes (known keys, strings without escapes, integers, literals, and
  // the arrays of a template). A record's values are checked here; a
  // template's are checked by being the text of a template the reference
  // accepted. Whatever it accepts is JSON that nlohmann reads the same;
  // anything else (escapes, exotic numbers, unknown keys) goes to On-Demand.
  // It reads 8 bytes at a time where it can: every line is followed by
  // kLinePadding readable bytes.
  bool scan(std::string_view line, Parsed& p) {
    const char* c = line.data();
    const char* const end = c + line.size();
    // (*c at end is padding, readable.)
    auto ws = [&] {
      while (static_cast<unsigned char>(*c) <= ' ' && c < end &&
             (*c == ' ' || *c == '\t' || *c == '\r'))
        ++c;
    };
    // From an opening quote past the closing one; false at an escape.
    auto string = [&] {
      for (++c; c < end; c += 8) {
        const uint64_t x = load8(c);
        const unsigned q = first_byte(x, '"'), b = first_byte(x, '\\');
        if (b < q) return false;
        if (q < 8) {
          c += q + 1;
          return c <= end;
        }
      }
      return false;
    };
    ws();
    if (c == end || *c != '{') return false;
    ++c;
    for (;;) {
      ws();
      if (c == end || *c != '"') return false;
      // Every known key is at most 8 bytes: one word holds it.
      const uint64_t x = load8(c + 1);
      const unsigned n = first_byte(x, '"');
      if (n == 8 && (c + 9 >= end || c[9] != '"')) return false;
      if (n == 0 || c + 1 + n >= end) return false;
      const int i = field_of_word(n, n == 8 ? x : x & ((uint64_t{1} << (8 * n)) - 1));
      if (i < 0) return false;
      c += n + 2;
      const Field f = static_cast<Field>(i);
      if (p.seen & bit(f)) return false;
      p.seen |= bit(f);
      ws();
      if (c == end || *c != ':') return false;
      ++c;
      ws();
      if (c == end) return false;
      const char* v = c;
      bool number = false, negative = false;
      uint64_t magnitude = 0;
      switch (*c) {
        case '"':
          if (!string()) return false;
          break;
        case '[':
        case '{':
          if (!bracketed(c, end)) return false;
          break;
        case 't':
        case 'n':
          if (end - c < 4 || (std::memcmp(c, "true", 4) && std::memcmp(c, "null", 4))) return false;
          c += 4;
          break;
        case 'f':
          if (end - c < 5 || std::memcmp(c, "false", 5)) return false;
          c += 5;
          break;
        default: {
          negative = *c == '-';
          if (negative) ++c;
          const char* d = c;
          // Eight digits at a time; past 19 the sum may wrap: On-Demand's.
          for (;;) {
            uint64_t x = load8(c);
            const auto k = static_cast<unsigned>(std::min<ptrdiff_t>(digit_run(x), end - c));
            if (k) {
              if (k < 8) x <<= 8 * (8 - k);
              magnitude = magnitude * kPow10[k] + eight_digits(x);
              c += k;
            }
            if (k < 8) break;
          }
          const size_t digits = static_cast<size_t>(c - d);
          if (digits == 0 || digits > 19 || (*d == '0' && digits > 1)) return false;
          number = true;
          break;
        }
      }
      if (!field(f, std::string_view(v, static_cast<size_t>(c - v)), number, negative, magnitude,
                 p))
        return false;
      ws();
      if (c == end) return false;
      if (*c == '}') break;
      if (*c != ',') return false;
      ++c;
    }
    ++c;
    ws();
    return c == end;
  }

  // From an opening bracket past its match, over strings; the text is
  // taken only as a learned template's, which was valid JSON.
  static bool bracketed(const char*& c, const char* end) {
    int depth = 0;
    for (; c < end; ++c) {
      if (*c == '"') {
        for (++c; c < end && *c != '"'; ++c)
          if (*c == '\\' && ++c == end) return false;
        if (c == end) return false;
      } else if (*c == '[' || *c == '{') {
        ++depth;
      } else if ((*c == ']' || *c == '}') && --depth == 0) {
        ++c;
        return true;
      }
    }
    return false;
  }

  // One field of a scanned line: `token` is its value's text, and a number's
  // sign and magnitude when `number`.
  bool field(Field f, std::string_view token, bool number, bool negative, uint64_t m, Parsed& p) {
    auto u32 = [&](uint32_t& out) {
      if (!number || negative || m > UINT32_MAX) return false;  // "-0" is left to On-Demand
      out = static_cast<uint32_t>(m);
      return true;
    };
    auto time = [&](int64_t& out) {
      if (!number || m > static_cast<uint64_t>(kMaxTimeNs)) return false;
      out = negative ? -static_cast<int64_t>(m) : static_cast<int64_t>(m);
      return true;
    };
    switch (f) {
      case kType:
        return token[0] == '"' && type_of(token.substr(1, token.size() - 2), p.type);
      case kResult: {
        if (token[0] != '"') return false;
        p.result = token.substr(1, token.size() - 2);
        for (const char ch : p.result)  // a record's own text: checked here
          if (ch < 0x20 || ch == 0x7f || static_cast<unsigned char>(ch) >= 0x80) return false;
        return true;
      }
      case kInvoke:
        return time(p.invoke);
      case kComplete:
        return time(p.complete);
      case kOffset:
        if (!number || (negative ? m > 2 : m > uint64_t{INT64_MAX})) return false;
        p.offset = negative ? -static_cast<int64_t>(m) : static_cast<int64_t>(m);
        return true;
      case kDev:
      case kIno:
        if (!number || negative) return false;
        (f == kDev ? p.dev : p.ino) = m;
        return true;
      case kActor:
        return u32(p.actor);
      case kRound:
        return u32(p.round);
      case kEuid:
        return u32(p.euid);
      case kEgid:
        return u32(p.egid);
      case kEpoch:
        return u32(p.epoch);
      case kLength:
        return u32(p.length);
      case kSets:
      case kResolve:
        if (token[0] != '[') return false;
        key_.add(f, token);
        return true;
      default:  // op, start, path, access, follow: the template's scalars
        key_.add(f, token);
        return true;
    }
  }

  // The second tier: simdjson On-Demand, for lines the scanner leaves.
  bool on_demand(std::string_view line, Parsed& p) {
    od::document doc;
    if (parser_.iterate(line.data(), line.size(), line.size() + kLinePadding).get(doc))
      return false;
    od::object obj;
    if (doc.get_object().get(obj)) return false;
    for (auto field_result : obj) {
      od::field field;
      if (std::move(field_result).get(field)) return false;
      // A raw key: up to its closing quote (stage 1 found one); one with an
      // escape is not a field this decoder knows.
      const char* k = reinterpret_cast<const char*>(field.key().raw());
      size_t n = 0;
      while (n < 9 && k[n] != '"' && k[n] != '\\') ++n;
      if (k[n] != '"') return false;
      const int i = field_of(std::string_view(k, n));
      if (i < 0) return false;  // a field the reference ignores, unchecked here: its way
      const Field f = static_cast<Field>(i);
      if (p.seen & bit(f)) return false;  // nlohmann keeps the last of duplicate keys
      p.seen |= bit(f);
      od::value v = field.value();
      switch (f) {
        case kType: {
          std::string_view t;
          if (!plain_string(v.raw_json_token(), t) || !type_of(t, p.type)) return false;
          break;
        }
        case kResult:
          if (!plain_string(v.raw_json_token(), p.result)) return false;
          break;
        case kActor:
          if (!u32(v, p.actor)) return false;
          break;
        case kInvoke:
          if (!time_of(v, p.invoke)) return false;
          break;
        case kComplete:
          if (!time_of(v, p.complete)) return false;
          break;
        case kRound:
          if (!u32(v, p.round)) return false;
          break;
        case kDev:
          if (v.get_uint64().get(p.dev)) return false;
          break;
        case kIno:
          if (v.get_uint64().get(p.ino)) return false;
          break;
        case kEuid:
          if (!u32(v, p.euid)) return false;
          break;
        case kEgid:
          if (!u32(v, p.egid)) return false;
          break;
        case kEpoch:
          if (!u32(v, p.epoch)) return false;
          break;
        case kLength:
          if (!u32(v, p.length)) return false;
          break;
        case kOffset:
          if (v.get_int64().get(p.offset) || p.offset < -2) return false;
          break;
        case kSets:
        case kResolve: {
          od::array a;
          std::string_view raw;
          if (v.get_array().get(a) || a.raw_json().get(raw)) return false;
          key_.add(f, trim(raw));
          break;
        }
        default:  // op, start, path, access, follow: the template's scalars
          key_.add(f, trim(v.raw_json_token()));
          break;
      }
    }
    // Nothing may follow the object.
    return doc.current_location().error() != simdjson::SUCCESS;
  }

  // The record of a parsed line, if its template is known.
  bool append(const Parsed& p, size_t lineno, ReaderState& st) {
    constexpr uint32_t kRequired =
        bit(kType) | bit(kActor) | bit(kInvoke) | bit(kComplete) | bit(kResult);
    if ((p.seen & kRequired) != kRequired || p.complete < p.invoke) return false;
    if (p.actor >= st.h.header.actors.size()) return false;
    const int err = errno_from_name(p.result);
    const uint32_t raw = p.seen & kRawFields;
    if (!key_.ok()) return false;
    switch (p.type) {
      case Type::Mutate: {
        if (raw != kMutateRaw) return false;
        const uint32_t* id = effects_.find(key_.view());
        if (!id) return miss(Pending::Effect);
        st.h.mutations.push_back(MutationRecord{p.actor, *id, p.invoke, p.complete, err, p.round});
        if (st.keep_mutation_lines) st.mutation_lines.push_back(lineno);
        return true;
      }
      case Type::Lookup: {
        if (raw & ~kLookupRaw) return false;
        LookupRecord l;
        l.actor = p.actor;
        l.invoke = p.invoke;
        l.complete = p.complete;
        l.err = err;
        l.round = p.round;
        l.dev = p.dev;
        l.ino = p.ino;
        constexpr uint32_t kIds = bit(kEuid) | bit(kEgid);
        if (p.seen & kIds) {
          if ((p.seen & kIds) != kIds) return false;
          l.has_ids = true;
          l.euid = p.euid;
          l.egid = p.egid;
        }
        const uint32_t* id = queries_.find(key_.view());
        if (!id) return miss(Pending::Query);
        l.query = *id;
        st.h.lookups.push_back(l);
        return true;
      }
      case Type::Read:
      case Type::Seek: {
        if (raw || !(p.seen & bit(kOffset))) return false;
        OffsetRecord o;
        o.kind = p.type == Type::Read ? OffsetRecord::Kind::Read : OffsetRecord::Kind::Seek;
        o.actor = p.actor;
        o.epoch = p.epoch;
        o.invoke = p.invoke;
        o.complete = p.complete;
        o.err = err;
        o.offset = p.offset;
        o.length = p.length;
        st.h.offsets.push_back(o);
        return true;
      }
    }
    return false;
  }

  enum class Pending { None, Effect, Query };

  // A template seen for the first time: the reference decodes and validates
  // it, then learn() records its id under key_.
  bool miss(Pending p) {
    pending_ = p;
    return false;
  }

  od::parser parser_;
  TemplateIds effects_, queries_;
  KeyBuf key_;  // the raw template key of the line being decoded
  Pending pending_ = Pending::None;
};

}  // namespace

std::unique_ptr<FastDecoder> make_fast_decoder() {
  return std::make_unique<SimdDecoder>();
}

}  // namespace leapfrog::history_detail
