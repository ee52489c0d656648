#include "scenarios/history_io.h"
#include "scenarios/history_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <istream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <tuple>
#include <type_traits>

namespace leapfrog {

using nlohmann::json;

namespace {

constexpr const char* kFormat = "leapfrog-history";
constexpr int kVersion = 1;

const std::pair<int, const char*> kErrnoNames[] = {
    {EACCES, "EACCES"}, {ENOENT, "ENOENT"}, {ENOTDIR, "ENOTDIR"}, {ELOOP, "ELOOP"},   {EPERM, "EPERM"},
    {EIO, "EIO"},       {EBUSY, "EBUSY"},   {EINVAL, "EINVAL"},   {ESTALE, "ESTALE"}, {EINTR, "EINTR"},
    {EEXIST, "EEXIST"}, {ENOTEMPTY, "ENOTEMPTY"}, {EXDEV, "EXDEV"}, {ENOMEM, "ENOMEM"}, {EAGAIN, "EAGAIN"},
};

json resolve_to_json(uint8_t resolve) {
  json a = json::array();
  for (uint8_t bit = 1; bit & kResolveAll; bit = uint8_t(bit << 1))
    if (resolve & bit) a.push_back(resolve_flag_name(bit));
  return a;
}

uint8_t resolve_from_json(const json& j) {
  if (!j.is_array()) throw HistoryFormatError("\"resolve\" must be an array of flag names");
  uint8_t out = 0;
  for (const auto& f : j) {
    const std::string name = f.is_string() ? f.get<std::string>() : "";
    uint8_t bit = 1;
    while ((bit & kResolveAll) && name != resolve_flag_name(bit)) bit = uint8_t(bit << 1);
    if (!(bit & kResolveAll))
      throw HistoryFormatError("unknown resolve flag \"" + name +
                               "\", want beneath|in-root|no-xdev|no-symlinks|no-magiclinks|cached");
    out |= bit;
  }
  return out;
}

json object_to_json(const ObjectKey& k) {
  json j{{"kind", to_string(k.kind)}};
  if (k.kind == ObjectKind::Entry) {
    j["dir"] = k.node;
    j["name"] = k.name;
  } else {
    j["node"] = k.node;
  }
  return j;
}

json value_to_json(const Value& v, ObjectKind kind) {
  if (kind == ObjectKind::Attr) {
    json acl = json::array();
    for (const auto& e : v.attr.acl)
      acl.push_back({{"tag", e.tag == AclEntry::Tag::User ? "user" : "group"}, {"id", e.id}, {"perms", e.perms}});
    json j{{"mode", v.attr.mode}, {"uid", v.attr.uid}, {"gid", v.attr.gid}};
    if (!acl.empty()) j["acl"] = acl;
    return j;
  }
  return json{{"node", v.target == kNoNode ? json(nullptr) : json(v.target)}};
}

json set_to_json(const ObjectSet& s) {
  return json{{"object", object_to_json(s.key)}, {"value", value_to_json(s.value, s.key.kind)}};
}

// An integer that fits T exactly: nlohmann would truncate 1.5 to 1 and wrap
// 2^63 into a negative int64_t without a word.
template <typename T>
T exact_integer(const json& v, const char* field) {
  using Lim = std::numeric_limits<T>;
  auto out_of_range = [field]() {
    return HistoryFormatError(std::string("field \"") + field + "\" must be an integer in [" +
                              std::to_string(Lim::min()) + ", " + std::to_string(Lim::max()) + "]");
  };
  if (!v.is_number_integer()) throw out_of_range();
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(Lim::max())) throw out_of_range();
    return static_cast<T>(u);
  }
  const int64_t i = v.get<int64_t>();
  if constexpr (std::is_signed_v<T>) {
    if (i < static_cast<int64_t>(Lim::min()) || i > static_cast<int64_t>(Lim::max()))
      throw out_of_range();
  } else {
    if (i < 0 || static_cast<uint64_t>(i) > static_cast<uint64_t>(Lim::max())) throw out_of_range();
  }
  return static_cast<T>(i);
}

// Field access that turns nlohmann's exceptions into messages naming the field.
template <typename T>
T get(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end()) throw HistoryFormatError(std::string("missing field \"") + field + "\"");
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return exact_integer<T>(*it, field);
  } else {
    try {
      return it->template get<T>();
    } catch (const json::exception&) {
      throw HistoryFormatError(std::string("field \"") + field + "\" has the wrong type");
    }
  }
}

// A time in nanoseconds, within the range the oracle reasons about.
TimeNs get_time(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end()) return get<TimeNs>(j, field);  // the missing-field message
  bool in_range = false;
  if (it->is_number_unsigned()) {
    in_range = it->get<uint64_t>() <= static_cast<uint64_t>(kMaxTimeNs);
  } else if (it->is_number_integer()) {
    const int64_t t = it->get<int64_t>();
    in_range = t >= -kMaxTimeNs && t <= kMaxTimeNs;
  }
  if (!in_range)
    throw HistoryFormatError(std::string("field \"") + field + "\" = " + it->dump() +
                             " is out of range, want an integer in [-2^60, 2^60] ns");
  return get<TimeNs>(j, field);
}

std::vector<uint32_t> get_ids(const json& j, const char* field) {
  std::vector<uint32_t> out;
  auto it = j.find(field);
  if (it == j.end()) return out;
  if (!it->is_array())
    throw HistoryFormatError(std::string("field \"") + field + "\" must be an array");
  for (const auto& v : *it) out.push_back(exact_integer<uint32_t>(v, field));
  return out;
}

template <typename T>
T get_or(const json& j, const char* field, T fallback) {
  return j.contains(field) ? get<T>(j, field) : fallback;
}

ObjectKind parse_object_kind(const std::string& s) {
  if (s == "attr") return ObjectKind::Attr;
  if (s == "entry") return ObjectKind::Entry;
  if (s == "parent") return ObjectKind::Parent;
  if (s == "mount") return ObjectKind::Mount;
  throw HistoryFormatError("unknown object kind \"" + s + "\", want attr|entry|parent|mount");
}

ObjectKey object_from_json(const json& j) {
  if (!j.is_object()) throw HistoryFormatError("\"object\" must be an object");
  ObjectKey k;
  k.kind = parse_object_kind(get<std::string>(j, "kind"));
  if (k.kind == ObjectKind::Entry) {
    k.node = get<NodeId>(j, "dir");
    k.name = get<std::string>(j, "name");
    if (k.name.empty() || k.name.find('/') != std::string::npos)
      throw HistoryFormatError("entry name \"" + k.name + "\" must be one non-empty path component");
  } else {
    k.node = get<NodeId>(j, "node");
  }
  return k;
}

Value value_from_json(const json& j, ObjectKind kind) {
  if (!j.is_object()) throw HistoryFormatError("\"value\" must be an object");
  Value v;
  if (kind == ObjectKind::Attr) {
    v.attr.mode = get<uint32_t>(j, "mode");
    v.attr.uid = get<uint32_t>(j, "uid");
    v.attr.gid = get<uint32_t>(j, "gid");
    if (j.contains("acl")) {
      if (!j.at("acl").is_array()) throw HistoryFormatError("\"acl\" must be an array");
      for (const auto& e : j.at("acl")) {
        if (!e.is_object()) throw HistoryFormatError("an acl entry must be an object");
        AclEntry a;
        const auto tag = get<std::string>(e, "tag");
        if (tag == "user") a.tag = AclEntry::Tag::User;
        else if (tag == "group") a.tag = AclEntry::Tag::Group;
        else throw HistoryFormatError("unknown acl tag \"" + tag + "\", want user|group");
        a.id = get<uint32_t>(e, "id");
        a.perms = get<uint8_t>(e, "perms");
        if (a.perms > 7) throw HistoryFormatError("acl \"perms\" must be rwx bits 0..7");
        v.attr.acl.push_back(a);
      }
    }
  } else {
    auto it = j.find("node");
    if (it == j.end()) throw HistoryFormatError("missing field \"node\"");
    v.target = it->is_null() ? kNoNode : get<NodeId>(j, "node");
  }
  return v;
}

ObjectSet set_from_json(const json& j) {
  ObjectSet s;
  if (!j.is_object() || !j.contains("object"))
    throw HistoryFormatError("a set needs an \"object\" and a \"value\"");
  s.key = object_from_json(j.at("object"));
  if (!j.contains("value")) throw HistoryFormatError("missing field \"value\"");
  s.value = value_from_json(j.at("value"), s.key.kind);
  return s;
}

NodeKind parse_node_kind(const std::string& s) {
  if (s == "dir") return NodeKind::Dir;
  if (s == "file") return NodeKind::File;
  if (s == "symlink") return NodeKind::Symlink;
  throw HistoryFormatError("unknown node kind \"" + s + "\", want dir|file|symlink");
}

std::string join_path(const std::vector<std::string>& comps) {
  std::string p;
  for (size_t i = 0; i < comps.size(); ++i) p += (i ? "/" : "") + comps[i];
  return p;
}

std::vector<std::string> split(const std::string& path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

json header_to_json(const HistoryHeader& h) {
  json nodes = json::array();
  for (const auto& n : h.nodes) {
    json j{{"id", n.id}, {"kind", to_string(n.kind)}, {"name", n.name}, {"dev", n.identity.dev}, {"ino", n.identity.ino}};
    if (n.identity.any_other_dev) j["any_other_dev"] = true;
    if (n.kind == NodeKind::Symlink) j["target"] = n.symlink_target;
    if (n.magic_target != kNoNode) j["magic"] = n.magic_target;
    nodes.push_back(std::move(j));
  }
  json initial = json::array();
  for (const auto& s : h.initial) initial.push_back(set_to_json(s));
  json actors = json::array();
  for (const auto& a : h.actors) {
    json actor{{"id", a.id},
               {"role", a.role},
               {"uid", a.cred.uid},
               {"gid", a.cred.gid},
               {"groups", a.cred.groups}};
    if (!a.align.empty()) actor["align"] = a.align;
    actors.push_back(std::move(actor));
  }
  json j{{"format", kFormat},     {"version", kVersion}, {"scenario", h.scenario},   {"seed", h.seed},
         {"fs", h.fs},            {"clock", h.clock_source}, {"epsilon_ns", h.epsilon_ns},
         {"base_dev", h.base_dev}, {"nodes", nodes},      {"initial", initial},      {"actors", actors}};
  if (h.block_size) {
    j["block_size"] = h.block_size;
    j["blocks"] = h.blocks;
  }
  return j;
}

// A json array field of the header (absent: empty).
const json& array_field(const json& j, const char* field) {
  static const json empty = json::array();
  auto it = j.find(field);
  if (it == j.end()) return empty;
  if (!it->is_array())
    throw HistoryFormatError(std::string("field \"") + field + "\" must be an array");
  return *it;
}

std::string object_text(const ObjectKey& k) {
  if (k.kind == ObjectKind::Entry)
    return "entry(dir " + std::to_string(k.node) + ", \"" + k.name + "\")";
  return std::string(to_string(k.kind)) + "(node " + std::to_string(k.node) + ")";
}

// The node ids a set refers to exist.
// The nodes `s` names are declared, and of the kinds its object needs: an
// entry lives in a directory, and ".." is of a directory and leads to one.
// A state no kernel can be in (".." leading to a symlink) has no right
// answer to judge against: the naive judge of fuzz/differential_fuzz.cc
// and the oracle each gave one, and they differed.
void check_set_nodes(const ObjectSet& s, const std::vector<Node>& nodes, const std::string& where) {
  const size_t n_nodes = nodes.size();
  if (s.key.node >= n_nodes)
    throw HistoryFormatError(
        where + ": " + object_text(s.key) + " refers to unknown node " +
        std::to_string(s.key.node) +
        (n_nodes ? ", want 0.." + std::to_string(n_nodes - 1) : ", and no node is declared"));
  if (s.key.kind != ObjectKind::Attr && s.value.target != kNoNode && s.value.target >= n_nodes)
    throw HistoryFormatError(where + ": the value of " + object_text(s.key) + " is unknown node " +
                             std::to_string(s.value.target));
  const bool needs_dir = s.key.kind == ObjectKind::Entry || s.key.kind == ObjectKind::Parent;
  if (needs_dir && nodes[s.key.node].kind != NodeKind::Dir)
    throw HistoryFormatError(where + ": " + object_text(s.key) + " is of node " +
                             std::to_string(s.key.node) + ", which is not a directory");
  if (s.key.kind == ObjectKind::Parent && s.value.target != kNoNode &&
      nodes[s.value.target].kind != NodeKind::Dir)
    throw HistoryFormatError(where + ": " + object_text(s.key) + " leads to node " +
                             std::to_string(s.value.target) +
                             ", which is not a directory (\"..\" always leads to one)");
}

HistoryHeader header_from_json(const json& j) {
  if (get_or<std::string>(j, "format", "") != kFormat)
    throw HistoryFormatError(std::string("not a history header: want \"format\": \"") + kFormat + "\"");
  const int version = get<int>(j, "version");
  if (version != kVersion)
    throw HistoryFormatError("unsupported version " + std::to_string(version) + ", want " + std::to_string(kVersion));
  HistoryHeader h;
  h.scenario = get_or<std::string>(j, "scenario", "");
  h.seed = get_or<uint64_t>(j, "seed", 0);
  h.fs = get_or<std::string>(j, "fs", "");
  h.clock_source = get_or<std::string>(j, "clock", "");
  h.epsilon_ns = get_or<TimeNs>(j, "epsilon_ns", 0);
  if (h.epsilon_ns < 0 || h.epsilon_ns > kMaxEpsilonNs)
    throw HistoryFormatError("\"epsilon_ns\" = " + std::to_string(h.epsilon_ns) +
                             " is out of range, want [0, 2^58]");
  h.base_dev = get_or<uint64_t>(j, "base_dev", 0);
  for (const auto& n : array_field(j, "nodes")) {
    if (!n.is_object())
      throw HistoryFormatError("nodes[" + std::to_string(h.nodes.size()) + "] must be an object");
    Node node;
    node.id = get<NodeId>(n, "id");
    if (node.id != h.nodes.size())
      throw HistoryFormatError("nodes[" + std::to_string(h.nodes.size()) + "] has id " +
                               std::to_string(node.id) + ", want " +
                               std::to_string(h.nodes.size()) + " (ids are 0..n-1 in order)");
    node.kind = parse_node_kind(get<std::string>(n, "kind"));
    node.name = get_or<std::string>(n, "name", "");
    node.identity.dev = get_or<uint64_t>(n, "dev", 0);
    node.identity.ino = get_or<uint64_t>(n, "ino", 0);
    node.identity.any_other_dev = get_or<bool>(n, "any_other_dev", false);
    if (node.kind == NodeKind::Symlink) {
      node.symlink_target = get<std::string>(n, "target");
      if (node.symlink_target.empty())
        throw HistoryFormatError("node " + std::to_string(node.id) +
                                 ": a symlink's \"target\" must not be empty");
    }
    node.magic_target = get_or<NodeId>(n, "magic", kNoNode);
    if (node.magic_target != kNoNode && node.kind != NodeKind::Symlink)
      throw HistoryFormatError("node " + std::to_string(node.id) +
                               ": only a symlink can be a magic link");
    h.nodes.push_back(std::move(node));
  }
  for (const auto& n : h.nodes) {
    if (n.magic_target != kNoNode && n.magic_target >= h.nodes.size())
      throw HistoryFormatError("node " + std::to_string(n.id) + ": magic link to unknown node " +
                               std::to_string(n.magic_target));
  }
  std::set<std::tuple<ObjectKind, NodeId, std::string>> given;
  for (const auto& s : array_field(j, "initial")) {
    const std::string where = "initial[" + std::to_string(h.initial.size()) + "]";
    ObjectSet set;
    try {
      set = set_from_json(s);
    } catch (const HistoryFormatError& e) {
      throw HistoryFormatError(where + ": " + e.what());
    }
    check_set_nodes(set, h.nodes, where);
    if (!given.emplace(set.key.kind, set.key.node, set.key.name).second)
      throw HistoryFormatError(where + ": initial value given twice for " + object_text(set.key));
    h.initial.push_back(std::move(set));
  }
  for (const auto& n : h.nodes) {
    if (n.kind == NodeKind::Dir && !given.count({ObjectKind::Attr, n.id, ""}))
      throw HistoryFormatError("directory node " + std::to_string(n.id) +
                               " has no initial attr (every directory needs one)");
  }
  for (const auto& a : array_field(j, "actors")) {
    if (!a.is_object())
      throw HistoryFormatError("actors[" + std::to_string(h.actors.size()) + "] must be an object");
    Actor actor;
    actor.id = get<uint32_t>(a, "id");
    if (actor.id != h.actors.size())
      throw HistoryFormatError("actors[" + std::to_string(h.actors.size()) + "] has id " +
                               std::to_string(actor.id) + ", want " +
                               std::to_string(h.actors.size()) + " (ids are 0..n-1 in order)");
    actor.role = get_or<std::string>(a, "role", "");
    actor.cred.uid = get<uint32_t>(a, "uid");
    actor.cred.gid = get<uint32_t>(a, "gid");
    actor.cred.groups = get_ids(a, "groups");
    actor.align = get_or<std::string>(a, "align", "");
    h.actors.push_back(std::move(actor));
  }
  h.block_size = get_or<uint32_t>(j, "block_size", 0);
  h.blocks = get_or<uint64_t>(j, "blocks", 0);
  return h;
}

}  // namespace

const char* resolve_flag_name(uint8_t bit) {
  switch (bit) {
    case kResolveBeneath:
      return "beneath";
    case kResolveInRoot:
      return "in-root";
    case kResolveNoXdev:
      return "no-xdev";
    case kResolveNoSymlinks:
      return "no-symlinks";
    case kResolveNoMagiclinks:
      return "no-magiclinks";
    case kResolveCached:
      return "cached";
  }
  return "?";
}

std::string errno_name(int err) {
  if (err == 0) return "ok";
  for (const auto& [v, n] : kErrnoNames)
    if (v == err) return n;
  return "E" + std::to_string(err);
}

int errno_from_name(std::string_view name) {
  if (name == "ok") return 0;
  for (const auto& [v, n] : kErrnoNames)
    if (name == n) return v;
  return -1;
}

HistoryWriter::HistoryWriter(std::ostream& out, const HistoryHeader& header,
                             const std::vector<Effect>& effects, const std::vector<Query>& queries)
    : out_(out), effects_(effects), queries_(queries) {
  out_ << header_to_json(header).dump() << '\n';
}

HistoryWriter::~HistoryWriter() = default;

void HistoryWriter::write(const MutationRecord& m) {
  while (effect_sets_.size() < effects_.size()) {
    json sets = json::array();
    for (const auto& s : effects_[effect_sets_.size()].sets) sets.push_back(set_to_json(s));
    effect_sets_.push_back(std::move(sets));
  }
  const json j = {{"type", "mutate"},   {"actor", m.actor},       {"op", effects_.at(m.effect).op},
                  {"invoke", m.invoke}, {"complete", m.complete}, {"result", errno_name(m.err)},
                  {"round", m.round},   {"sets", effect_sets_.at(m.effect)}};
  out_ << j.dump() << '\n';
}

void HistoryWriter::write(const LookupRecord& l) {
  const Query& q = queries_.at(l.query);
  json j = {{"type", "lookup"},
            {"actor", l.actor},
            {"op", q.op},
            {"start", q.start},
            {"path", join_path(q.path)},
            {"access", q.final_access},
            {"follow", q.follow_final},
            {"invoke", l.invoke},
            {"complete", l.complete},
            {"result", errno_name(l.err)},
            {"round", l.round}};
  if (q.openat2) j["resolve"] = resolve_to_json(q.resolve);
  if (l.err == 0 && (l.dev || l.ino)) {
    j["dev"] = l.dev;
    j["ino"] = l.ino;
  }
  if (l.err == 0 && l.has_ids) {
    j["euid"] = l.euid;
    j["egid"] = l.egid;
  }
  out_ << j.dump() << '\n';
}

void HistoryWriter::write(const OffsetRecord& o) {
  json j = {{"type", o.kind == OffsetRecord::Kind::Read ? "read" : "seek"},
            {"actor", o.actor},
            {"epoch", o.epoch},
            {"invoke", o.invoke},
            {"complete", o.complete},
            {"result", errno_name(o.err)},
            {"offset", o.offset}};
  if (o.kind == OffsetRecord::Kind::Read) j["length"] = o.length;
  out_ << j.dump() << '\n';
}

void write_history(const History& h, std::ostream& out) {
  HistoryWriter w(out, h.header, h.effects, h.queries);
  // Merge the three record streams by invoke time.
  struct Ref {
    TimeNs invoke;
    uint8_t stream;
    size_t index;
  };
  std::vector<Ref> refs;
  refs.reserve(h.mutations.size() + h.lookups.size() + h.offsets.size());
  for (size_t i = 0; i < h.mutations.size(); ++i) refs.push_back({h.mutations[i].invoke, 0, i});
  for (size_t i = 0; i < h.lookups.size(); ++i) refs.push_back({h.lookups[i].invoke, 1, i});
  for (size_t i = 0; i < h.offsets.size(); ++i) refs.push_back({h.offsets[i].invoke, 2, i});
  std::stable_sort(refs.begin(), refs.end(),
                   [](const Ref& a, const Ref& b) { return a.invoke < b.invoke; });
  for (const Ref& ref : refs) {
    if (ref.stream == 0)
      w.write(h.mutations[ref.index]);
    else if (ref.stream == 1)
      w.write(h.lookups[ref.index]);
    else
      w.write(h.offsets[ref.index]);
  }
}

namespace history_detail {

bool LineReader::next(std::string_view& line, size_t lineno) {
  for (;;) {
    // (An empty buffer has no data() to search.)
    const void* nl =
        end_ > scan_ ? std::memchr(buf_.data() + scan_, '\n', end_ - scan_) : nullptr;
    const size_t n = nl ? static_cast<const char*>(nl) - (buf_.data() + pos_) : end_ - pos_;
    if (n > limits_.max_line_bytes)
      throw HistoryFormatError("line " + std::to_string(lineno) + ": longer than " +
                               std::to_string(limits_.max_line_bytes) + " bytes (the line limit)");
    if (nl) {
      line = std::string_view(buf_.data() + pos_, n);
      pos_ = scan_ = pos_ + n + 1;
      return true;
    }
    scan_ = end_;
    if (!fill()) {
      if (pos_ == end_) return false;
      line = std::string_view(buf_.data() + pos_, end_ - pos_);
      pos_ = scan_ = end_;
      return true;
    }
  }
}

bool LineReader::fill() {
  if (eof_) return false;
  if (total_ >= limits_.max_bytes) {
    // One more byte tells a file of exactly max_bytes from a longer one.
    if (in_.rdbuf()->sgetc() == std::char_traits<char>::eof()) {
      eof_ = true;
      return false;
    }
    throw HistoryFormatError("input longer than " + std::to_string(limits_.max_bytes) +
                             " bytes (the size limit)");
  }
  // The unread part (a line in progress) moves to the front; the buffer
  // grows only for a line longer than what is left of it.
  if (pos_ > 0) {
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    end_ -= pos_;
    scan_ -= pos_;
    pos_ = 0;
  }
  const size_t want = static_cast<size_t>(std::min<uint64_t>(chunk_, limits_.max_bytes - total_));
  if (buf_.size() < end_ + want + kLinePadding) buf_.resize(end_ + want + kLinePadding);
  in_.read(buf_.data() + end_, static_cast<std::streamsize>(want));
  const auto got = in_.gcount();
  if (got <= 0) {
    eof_ = true;
    return false;
  }
  end_ += static_cast<size_t>(got);
  total_ += static_cast<uint64_t>(got);
  return true;
}

namespace {

// Refuses two successful mutations of one object whose windows overlap: the
// oracle orders an object's versions by invoke, which is only sound when
// each mutation completed before the next began (windows may touch).
void check_overlaps(const History& h, const std::vector<size_t>& lines) {
  struct Use {
    std::tuple<ObjectKind, NodeId, std::string> key;
    TimeNs invoke, complete;
    size_t line;
  };
  std::vector<Use> uses;
  for (size_t i = 0; i < h.mutations.size(); ++i) {
    const MutationRecord& m = h.mutations[i];
    if (m.err != 0) continue;
    for (const auto& set : h.effects[m.effect].sets)
      uses.push_back({{set.key.kind, set.key.node, set.key.name}, m.invoke, m.complete, lines[i]});
  }
  std::sort(uses.begin(), uses.end(), [](const Use& a, const Use& b) {
    return std::tie(a.key, a.invoke, a.complete, a.line) <
           std::tie(b.key, b.invoke, b.complete, b.line);
  });
  // Within one object, the use that completes latest so far.
  const Use* latest = nullptr;
  for (const Use& u : uses) {
    if (latest && latest->key == u.key && u.invoke < latest->complete) {
      const ObjectKey k{std::get<0>(u.key), std::get<1>(u.key), std::get<2>(u.key)};
      const size_t a = std::min(latest->line, u.line), b = std::max(latest->line, u.line);
      throw HistoryFormatError(
          "line " + std::to_string(a) + " and line " + std::to_string(b) + ": mutations of " +
          object_text(k) + " overlap in time ([" + std::to_string(latest->invoke) + ", " +
          std::to_string(latest->complete) + "] and [" + std::to_string(u.invoke) + ", " +
          std::to_string(u.complete) + "]); the mutations of one object must follow each other");
    }
    if (!latest || latest->key != u.key || u.complete > latest->complete) latest = &u;
  }
}

}  // namespace

void decode_line_reference(std::string_view line, size_t lineno, ReaderState& st) {
  try {
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error& e) {
      throw HistoryFormatError(std::string("not valid JSON: ") + e.what());
    }
    if (!j.is_object()) throw HistoryFormatError("want a JSON object");
    if (!st.have_header) {
      st.h.header = header_from_json(j);
      for (const auto& s : st.h.header.initial)
        if (s.key.kind == ObjectKind::Attr || s.key.kind == ObjectKind::Parent)
          st.initial_attr_parent.emplace(s.key.kind, s.key.node);
      st.have_header = true;
      return;
    }
    const auto type = get<std::string>(j, "type");
    const int err = errno_from_name(get<std::string>(j, "result"));
    const TimeNs invoke = get_time(j, "invoke");
    const TimeNs complete = get_time(j, "complete");
    if (complete < invoke) throw HistoryFormatError("\"complete\" is before \"invoke\"");
    const uint32_t actor = get<uint32_t>(j, "actor");
    if (actor >= st.h.header.actors.size())
      throw HistoryFormatError("actor " + std::to_string(actor) + " is not declared in the header");
    if (type == "mutate") {
      if (!j.contains("sets") || !j.at("sets").is_array())
        throw HistoryFormatError("missing array \"sets\"");
      const std::string key = get<std::string>(j, "op") + j.at("sets").dump();
      auto [it, inserted] =
          st.effect_ids.try_emplace(key, static_cast<uint32_t>(st.h.effects.size()));
      if (inserted) {
        Effect e;
        e.op = get<std::string>(j, "op");
        for (const auto& s : j.at("sets")) {
          const std::string where = "sets[" + std::to_string(e.sets.size()) + "]";
          ObjectSet set;
          try {
            set = set_from_json(s);
          } catch (const HistoryFormatError& e) {
            throw HistoryFormatError(where + ": " + e.what());
          }
          check_set_nodes(set, st.h.header.nodes, where);
          if ((set.key.kind == ObjectKind::Attr || set.key.kind == ObjectKind::Parent) &&
              !st.initial_attr_parent.count({set.key.kind, set.key.node}))
            throw HistoryFormatError(where + ": " + object_text(set.key) +
                                     " has no initial value in the header");
          e.sets.push_back(std::move(set));
        }
        st.h.effects.push_back(std::move(e));
      }
      MutationRecord m;
      m.actor = actor;
      m.effect = it->second;
      m.invoke = invoke;
      m.complete = complete;
      m.err = err;
      m.round = get_or<uint32_t>(j, "round", 0);
      st.h.mutations.push_back(m);
      if (st.keep_mutation_lines) st.mutation_lines.push_back(lineno);
    } else if (type == "lookup") {
      Query q;
      q.op = get<std::string>(j, "op");
      q.start = get<NodeId>(j, "start");
      if (q.start >= st.h.header.nodes.size())
        throw HistoryFormatError("start node " + std::to_string(q.start) +
                                 " is not declared in the header");
      const std::string path = get<std::string>(j, "path");
      if (!path.empty() && path[0] == '/')
        throw HistoryFormatError("path \"" + path +
                                 "\" is absolute, want one relative to \"start\"");
      q.path = split(path);
      q.final_access = get_or<uint8_t>(j, "access", 0);
      if (q.final_access > 7) throw HistoryFormatError("\"access\" must be rwx bits 0..7");
      q.follow_final = get_or<bool>(j, "follow", true);
      if (j.contains("resolve")) {
        q.openat2 = true;
        q.resolve = resolve_from_json(j.at("resolve"));
      }
      const std::string key = q.op + '\0' + std::to_string(q.start) + '\0' + join_path(q.path) +
                              '\0' + std::to_string(q.final_access) + (q.follow_final ? "f" : "n") +
                              (q.openat2 ? "r" + std::to_string(q.resolve) : "");
      auto [it, inserted] =
          st.query_ids.try_emplace(key, static_cast<uint32_t>(st.h.queries.size()));
      if (inserted) st.h.queries.push_back(std::move(q));
      LookupRecord l;
      l.actor = actor;
      l.query = it->second;
      l.invoke = invoke;
      l.complete = complete;
      l.err = err;
      l.round = get_or<uint32_t>(j, "round", 0);
      l.dev = get_or<uint64_t>(j, "dev", 0);
      l.ino = get_or<uint64_t>(j, "ino", 0);
      if (j.contains("euid") || j.contains("egid")) {
        l.has_ids = true;
        l.euid = get<uint32_t>(j, "euid");
        l.egid = get<uint32_t>(j, "egid");
      }
      st.h.lookups.push_back(l);
    } else if (type == "read" || type == "seek") {
      OffsetRecord o;
      o.kind = type == "read" ? OffsetRecord::Kind::Read : OffsetRecord::Kind::Seek;
      o.actor = actor;
      o.epoch = get_or<uint32_t>(j, "epoch", 0);
      o.invoke = invoke;
      o.complete = complete;
      o.err = err;
      o.offset = get<int64_t>(j, "offset");
      if (o.offset < -2) throw HistoryFormatError("\"offset\" must be -2, -1 or a byte offset");
      o.length = get_or<uint32_t>(j, "length", 0);
      st.h.offsets.push_back(o);
    } else {
      throw HistoryFormatError("unknown record type \"" + type +
                               "\", want mutate|lookup|read|seek");
    }
  } catch (const HistoryFormatError& e) {
    throw HistoryFormatError("line " + std::to_string(lineno) + ": " + e.what());
  } catch (const json::exception& e) {
    throw HistoryFormatError("line " + std::to_string(lineno) + ": " + e.what());
  }
}

void finish(ReaderState& st) {
  if (!st.have_header) throw HistoryFormatError("line 1: empty history, want a header line");
  if (st.keep_mutation_lines) check_overlaps(st.h, st.mutation_lines);
}

void read_lines(std::istream& in, const ReadLimits& limits, bool fast, ReaderState& st,
                size_t chunk, LineSink* sink) {
  std::unique_ptr<FastDecoder> decoder = fast ? make_fast_decoder() : nullptr;
  LineReader reader(in, limits, chunk);
  std::string_view line;
  size_t lineno = 0;
  while (reader.next(line, lineno + 1)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    // The header and every line the fast decoder refuses go to the reference.
    const bool tried = decoder && st.have_header;
    if (!tried || !decoder->decode(line, lineno, st)) {
      decode_line_reference(line, lineno, st);
      if (tried) decoder->learn(st);
    }
    if (sink) sink->after_line(st, lineno);
  }
  finish(st);
}

}  // namespace history_detail

namespace {

History read(std::istream& in, const ReadLimits& limits, bool fast) {
  history_detail::ReaderState st;
  history_detail::read_lines(in, limits, fast, st);
  return std::move(st.h);
}

}  // namespace

History read_history(std::istream& in, const ReadLimits& limits) {
  return read(in, limits, true);
}

History read_history_reference(std::istream& in, const ReadLimits& limits) {
  return read(in, limits, false);
}

}  // namespace leapfrog
