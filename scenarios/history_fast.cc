// The fast line decoder of read_history (history_reader.h): simdjson's
// On-Demand parser on each operation line where it lies in the reader's
// chunk (no copy, no DOM, no allocation per line). A line's record fields
// are parsed and validated here; its template fields (a mutation's op and
// sets, a lookup's op, start, path, access, follow, resolve) are kept as
// their raw text, and that text is looked up among the templates the
// reference decoder has already accepted: only a template's first line, and
// anything this decoder does not fully understand, goes through nlohmann,
// which gives every error message.

#include <simdjson.h>

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

// The field a raw key names (-1: one the format does not read, or a key with
// escapes), by length first: this runs for every key of every line. `k`
// points after the key's opening quote; stage 1 guarantees a closing one.
int field_of(const char* k) {
  size_t n = 0;
  while (n < 9 && k[n] != '"') {
    if (k[n] == '\\') return -1;
    ++n;
  }
  const std::string_view key(k, n);
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

void append_bytes(std::string& key, uint8_t tag, std::string_view s) {
  const auto n = static_cast<uint32_t>(s.size());
  key += static_cast<char>(tag);
  key.append(reinterpret_cast<const char*>(&n), sizeof n);
  key.append(s);
}

enum class Type : uint8_t { Mutate, Lookup, Read, Seek };

class SimdDecoder final : public FastDecoder {
 public:
  bool decode(std::string_view line, size_t lineno, ReaderState& st) override {
    pending_ = Pending::None;
    od::document doc;
    if (parser_.iterate(line.data(), line.size(), line.size() + kLinePadding).get(doc))
      return false;
    od::object obj;
    if (doc.get_object().get(obj)) return false;
    // The record's fields, parsed as they come (On-Demand reads forward only).
    uint32_t seen = 0;
    Type type = Type::Mutate;
    std::string_view result;
    int64_t invoke = 0, complete = 0, offset = 0;
    uint32_t actor = 0, round = 0, euid = 0, egid = 0, epoch = 0, length = 0;
    uint64_t dev = 0, ino = 0;
    key_.clear();
    for (auto field_result : obj) {
      od::field field;
      if (std::move(field_result).get(field)) return false;
      const int i = field_of(reinterpret_cast<const char*>(field.key().raw()));
      if (i < 0) return false;  // a field the reference ignores, unchecked here: its way
      const Field f = static_cast<Field>(i);
      if (seen & bit(f)) return false;  // nlohmann keeps the last of duplicate keys
      seen |= bit(f);
      od::value v = field.value();
      switch (f) {
        case kType: {
          std::string_view t;
          if (!plain_string(v.raw_json_token(), t)) return false;
          if (t == "lookup")
            type = Type::Lookup;
          else if (t == "mutate")
            type = Type::Mutate;
          else if (t == "read")
            type = Type::Read;
          else if (t == "seek")
            type = Type::Seek;
          else
            return false;
          break;
        }
        case kResult:
          if (!plain_string(v.raw_json_token(), result)) return false;
          break;
        case kActor:
          if (!u32(v, actor)) return false;
          break;
        case kInvoke:
          if (!time_of(v, invoke)) return false;
          break;
        case kComplete:
          if (!time_of(v, complete)) return false;
          break;
        case kRound:
          if (!u32(v, round)) return false;
          break;
        case kDev:
          if (v.get_uint64().get(dev)) return false;
          break;
        case kIno:
          if (v.get_uint64().get(ino)) return false;
          break;
        case kEuid:
          if (!u32(v, euid)) return false;
          break;
        case kEgid:
          if (!u32(v, egid)) return false;
          break;
        case kEpoch:
          if (!u32(v, epoch)) return false;
          break;
        case kLength:
          if (!u32(v, length)) return false;
          break;
        case kOffset:
          if (v.get_int64().get(offset) || offset < -2) return false;
          break;
        case kSets:
        case kResolve: {
          od::array a;
          std::string_view raw;
          if (v.get_array().get(a) || a.raw_json().get(raw)) return false;
          append_bytes(key_, f, trim(raw));
          break;
        }
        default:  // op, start, path, access, follow: the template's scalars
          append_bytes(key_, f, trim(v.raw_json_token()));
          break;
      }
    }
    // Nothing may follow the object.
    if (!doc.current_location().error()) return false;
    constexpr uint32_t kRequired =
        bit(kType) | bit(kActor) | bit(kInvoke) | bit(kComplete) | bit(kResult);
    if ((seen & kRequired) != kRequired || complete < invoke) return false;
    if (actor >= st.h.header.actors.size()) return false;
    const int err = errno_from_name(result);
    const uint32_t raw = seen & kRawFields;
    switch (type) {
      case Type::Mutate: {
        if ((raw & ~kMutateRaw) || raw != kMutateRaw) return false;
        auto it = effects_.find(key_);
        if (it == effects_.end()) return miss(Pending::Effect);
        st.h.mutations.push_back(MutationRecord{actor, it->second, invoke, complete, err, round});
        if (st.keep_mutation_lines) st.mutation_lines.push_back(lineno);
        return true;
      }
      case Type::Lookup: {
        if (raw & ~kLookupRaw) return false;
        LookupRecord l;
        l.actor = actor;
        l.invoke = invoke;
        l.complete = complete;
        l.err = err;
        l.round = round;
        l.dev = dev;
        l.ino = ino;
        if (seen & (bit(kEuid) | bit(kEgid))) {
          if ((seen & (bit(kEuid) | bit(kEgid))) != (bit(kEuid) | bit(kEgid))) return false;
          l.has_ids = true;
          l.euid = euid;
          l.egid = egid;
        }
        auto it = queries_.find(key_);
        if (it == queries_.end()) return miss(Pending::Query);
        l.query = it->second;
        st.h.lookups.push_back(l);
        return true;
      }
      case Type::Read:
      case Type::Seek: {
        if (raw || !(seen & bit(kOffset))) return false;
        OffsetRecord o;
        o.kind = type == Type::Read ? OffsetRecord::Kind::Read : OffsetRecord::Kind::Seek;
        o.actor = actor;
        o.epoch = epoch;
        o.invoke = invoke;
        o.complete = complete;
        o.err = err;
        o.offset = offset;
        o.length = length;
        st.h.offsets.push_back(o);
        return true;
      }
    }
    return false;
  }

  void learn(ReaderState& st) override {
    if (pending_ == Pending::Effect) effects_.emplace(key_, st.h.mutations.back().effect);
    if (pending_ == Pending::Query) queries_.emplace(key_, st.h.lookups.back().query);
    pending_ = Pending::None;
  }

 private:
  enum class Pending { None, Effect, Query };

  // A template seen for the first time: the reference decodes and validates
  // it, then learn() records its id under key_.
  bool miss(Pending p) {
    pending_ = p;
    return false;
  }

  od::parser parser_;
  std::unordered_map<std::string, uint32_t> effects_, queries_;
  std::string key_;  // the raw template key of the line being decoded
  Pending pending_ = Pending::None;
};

}  // namespace

std::unique_ptr<FastDecoder> make_fast_decoder() {
  return std::make_unique<SimdDecoder>();
}

}  // namespace leapfrog::history_detail
