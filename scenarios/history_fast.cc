// The fast line decoder of read_history (history_reader.h): simdjson's DOM
// parser on each operation line, and a cache from the raw text of an effect
// or query template to its id, so that only a template's first line goes
// through nlohmann. Anything this decoder does not fully understand is left
// to the reference decoder, which gives every error message.

#include <simdjson.h>

#include <array>
#include <string>
#include <string_view>
#include <unordered_map>

#include "scenarios/history_reader.h"

namespace leapfrog::history_detail {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

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

// The field a key names (-1: one the format does not read), by length
// first: this runs for every key of every line.
int field_of(std::string_view k) {
  auto is = [k](std::string_view name, Field f) { return k == name ? int{f} : -1; };
  switch (k.size()) {
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

// An integer element in [0, hi], as the reference's exact_integer accepts it.
bool unsigned_in(element e, uint64_t hi, uint64_t& out) {
  if (e.type() == element_type::INT64) {
    const int64_t v = e.get_int64().value_unsafe();
    if (v < 0 || static_cast<uint64_t>(v) > hi) return false;
    out = static_cast<uint64_t>(v);
    return true;
  }
  if (e.type() == element_type::UINT64) {
    out = e.get_uint64().value_unsafe();
    return out <= hi;
  }
  return false;
}

// An integer element in [lo, hi] (signed).
bool signed_in(element e, int64_t lo, int64_t hi, int64_t& out) {
  if (e.type() != element_type::INT64) return false;  // UINT64 is > INT64_MAX
  out = e.get_int64().value_unsafe();
  return out >= lo && out <= hi;
}

template <typename T>
bool u32(element e, T& out) {
  uint64_t v = 0;
  if (!unsigned_in(e, UINT32_MAX, v)) return false;
  out = static_cast<T>(v);
  return true;
}

void append_bytes(std::string& key, std::string_view s) {
  const auto n = static_cast<uint32_t>(s.size());
  key.append(reinterpret_cast<const char*>(&n), sizeof n);
  key.append(s);
}

template <typename T>
void append_raw(std::string& key, T v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// A template's value as an unambiguous byte string (tag, then contents), so
// that equal text gives equal keys without formatting it back to JSON.
void append_value(std::string& key, element e) {
  const auto type = e.type();
  key += static_cast<char>(type);
  switch (type) {
    case element_type::ARRAY: {
      const auto a = e.get_array().value_unsafe();
      append_raw(key, static_cast<uint32_t>(a.size()));
      for (element x : a) append_value(key, x);
      return;
    }
    case element_type::OBJECT: {
      const auto o = e.get_object().value_unsafe();
      append_raw(key, static_cast<uint32_t>(o.size()));
      for (auto field : o) {
        append_bytes(key, field.key);
        append_value(key, field.value);
      }
      return;
    }
    case element_type::STRING:
      append_bytes(key, e.get_string().value_unsafe());
      return;
    case element_type::INT64:
      append_raw(key, e.get_int64().value_unsafe());
      return;
    case element_type::UINT64:
      append_raw(key, e.get_uint64().value_unsafe());
      return;
    case element_type::DOUBLE:
      append_raw(key, e.get_double().value_unsafe());
      return;
    case element_type::BOOL:
      key += e.get_bool().value_unsafe() ? 't' : 'f';
      return;
    case element_type::NULL_VALUE:
      return;
  }
}

class SimdDecoder final : public FastDecoder {
 public:
  bool decode(std::string& line, size_t lineno, ReaderState& st) override {
    pending_ = Pending::None;
    if (line.capacity() < line.size() + simdjson::SIMDJSON_PADDING)
      line.reserve(line.size() + simdjson::SIMDJSON_PADDING);
    element doc;
    if (parser_.parse(line).get(doc)) return false;
    simdjson::dom::object obj;
    if (doc.get_object().get(obj)) return false;
    std::array<element, kFields> f;
    uint32_t seen = 0;
    for (auto field : obj) {
      const int i = field_of(field.key);
      if (i < 0) continue;
      if (seen & (1u << i)) return false;  // nlohmann keeps the last of duplicate keys
      seen |= 1u << i;
      f[i] = field.value;
    }
    auto has = [seen](Field x) { return (seen & (1u << x)) != 0; };
    constexpr uint32_t kRequired =
        1u << kType | 1u << kActor | 1u << kInvoke | 1u << kComplete | 1u << kResult;
    if ((seen & kRequired) != kRequired) return false;
    std::string_view type, result;
    if (f[kType].get_string().get(type) || f[kResult].get_string().get(result)) return false;
    const int err = errno_from_name(std::string(result));
    int64_t invoke = 0, complete = 0;
    if (!signed_in(f[kInvoke], -kMaxTimeNs, kMaxTimeNs, invoke) ||
        !signed_in(f[kComplete], -kMaxTimeNs, kMaxTimeNs, complete) || complete < invoke)
      return false;
    uint32_t actor = 0;
    if (!u32(f[kActor], actor) || actor >= st.h.header.actors.size()) return false;
    uint32_t round = 0;
    if (has(kRound) && !u32(f[kRound], round)) return false;

    if (type == "mutate") {
      std::string_view op;
      if (!has(kOp) || f[kOp].get_string().get(op) || !has(kSets) || !f[kSets].is_array())
        return false;
      key_.clear();
      append_bytes(key_, op);
      append_value(key_, f[kSets]);
      auto it = effects_.find(key_);
      if (it == effects_.end()) return miss(Pending::Effect);
      st.h.mutations.push_back(MutationRecord{actor, it->second, invoke, complete, err, round});
      st.mutation_lines.push_back(lineno);
      return true;
    }
    if (type == "lookup") {
      std::string_view op, path;
      uint32_t start = 0;
      if (!has(kOp) || f[kOp].get_string().get(op) || !has(kStart) || !u32(f[kStart], start) ||
          start >= st.h.header.nodes.size() || !has(kPath) || f[kPath].get_string().get(path) ||
          (!path.empty() && path[0] == '/'))
        return false;
      uint64_t access = 0;
      if (has(kAccess) && !unsigned_in(f[kAccess], 7, access)) return false;
      bool follow = true;
      if (has(kFollow) && f[kFollow].get_bool().get(follow)) return false;
      uint8_t resolve = 0;
      if (has(kResolve)) {
        simdjson::dom::array flags;
        if (f[kResolve].get_array().get(flags)) return false;
        for (element flag : flags) {
          std::string_view name;
          if (flag.get_string().get(name)) return false;
          uint8_t bit = 1;
          while ((bit & kResolveAll) && name != resolve_flag_name(bit)) bit = uint8_t(bit << 1);
          if (!(bit & kResolveAll)) return false;
          resolve |= bit;
        }
      }
      LookupRecord l;
      l.actor = actor;
      l.invoke = invoke;
      l.complete = complete;
      l.err = err;
      l.round = round;
      if (has(kDev) && !unsigned_in(f[kDev], UINT64_MAX, l.dev)) return false;
      if (has(kIno) && !unsigned_in(f[kIno], UINT64_MAX, l.ino)) return false;
      if (has(kEuid) || has(kEgid)) {
        if (!has(kEuid) || !has(kEgid) || !u32(f[kEuid], l.euid) || !u32(f[kEgid], l.egid))
          return false;
        l.has_ids = true;
      }
      key_.clear();
      append_bytes(key_, op);
      append_bytes(key_, path);
      key_.append(reinterpret_cast<const char*>(&start), sizeof start);
      key_ += static_cast<char>(access);
      key_ += follow ? 'f' : 'n';
      if (has(kResolve)) key_ += static_cast<char>(0x80 | resolve);
      auto it = queries_.find(key_);
      if (it == queries_.end()) return miss(Pending::Query);
      l.query = it->second;
      st.h.lookups.push_back(l);
      return true;
    }
    if (type == "read" || type == "seek") {
      OffsetRecord o;
      o.kind = type == "read" ? OffsetRecord::Kind::Read : OffsetRecord::Kind::Seek;
      o.actor = actor;
      o.invoke = invoke;
      o.complete = complete;
      o.err = err;
      if (has(kEpoch) && !u32(f[kEpoch], o.epoch)) return false;
      if (!has(kOffset) || !signed_in(f[kOffset], -2, INT64_MAX, o.offset)) return false;
      if (has(kLength) && !u32(f[kLength], o.length)) return false;
      st.h.offsets.push_back(o);
      return true;
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

  simdjson::dom::parser parser_;
  std::unordered_map<std::string, uint32_t> effects_, queries_;
  std::string key_;  // the raw template key of the line being decoded
  Pending pending_ = Pending::None;
};

}  // namespace

std::unique_ptr<FastDecoder> make_fast_decoder() {
  return std::make_unique<SimdDecoder>();
}

}  // namespace leapfrog::history_detail
