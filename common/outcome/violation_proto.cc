#include "common/outcome/violation_proto.h"

#include "common/ktap/words.h"
#include "scenarios/outcome.h"

namespace leapfrog {

using nlohmann::json;

namespace {

v1::NodeKind node_kind_from(const std::string& k) {
  if (k == "file") return v1::NODE_KIND_FILE;
  if (k == "dir") return v1::NODE_KIND_DIR;
  if (k == "symlink") return v1::NODE_KIND_SYMLINK;
  if (k == "absent") return v1::NODE_KIND_ABSENT;
  return v1::NODE_KIND_UNSPECIFIED;
}

std::string to_string(v1::NodeKind k) {
  switch (k) {
    case v1::NODE_KIND_FILE:
      return "file";
    case v1::NODE_KIND_DIR:
      return "dir";
    case v1::NODE_KIND_SYMLINK:
      return "symlink";
    case v1::NODE_KIND_ABSENT:
      return "absent";
    default:
      return "";
  }
}

void versions_from(const json& j, google::protobuf::RepeatedPtrField<v1::PossibleVersion>* out) {
  if (!j.is_array()) return;
  for (const auto& v : j) {
    v1::PossibleVersion* p = out->Add();
    p->set_value(v.value("value", ""));
    if (v.contains("from") && !v["from"].is_null()) p->set_from_ns(v["from"].get<int64_t>());
    if (v.contains("to") && !v["to"].is_null()) p->set_to_ns(v["to"].get<int64_t>());
    p->set_node_kind(node_kind_from(v.value("node_kind", "")));
  }
}

std::vector<PossibleVersion> versions_of(
    const google::protobuf::RepeatedPtrField<v1::PossibleVersion>& vs) {
  std::vector<PossibleVersion> out;
  for (const auto& v : vs)
    out.push_back(PossibleVersion{v.value(), v.has_from_ns() ? v.from_ns() : kTimeMin,
                                  v.has_to_ns() ? v.to_ns() : kTimeMax, to_string(v.node_kind())});
  return out;
}

}  // namespace

v1::ViolationDetail detail_from_json(const json& v) {
  v1::ViolationDetail d;
  d.set_record(v.value("record", uint64_t{0}));
  d.set_epsilon_ns(v.value("epsilon_ns", int64_t{0}));
  versions_from(v.value("versions", json::array()), d.mutable_versions());
  for (const auto& s : v.value("steps", json::array())) {
    v1::StepTrace* t = d.add_steps();
    t->set_step(s.value("step", 0));
    t->set_component(s.value("component", ""));
    t->set_object(s.value("object", ""));
    versions_from(s.value("versions", json::array()), t->mutable_versions());
  }
  for (const auto& m : v.value("history", json::array())) {
    v1::MutationTrace* t = d.add_history();
    t->set_actor(m.value("actor", 0u));
    t->set_op(m.value("op", ""));
    t->set_object(m.value("object", ""));
    t->set_value(m.value("value", ""));
    t->set_invoke_ns(m.value("invoke", int64_t{0}));
    t->set_complete_ns(m.value("complete", int64_t{0}));
    t->set_err(m.value("err", 0));
    t->set_node_kind(node_kind_from(m.value("node_kind", "")));
  }
  return d;
}

json violation_json(const v1::Violation& v) {
  if (!v.has_detail()) return nullptr;
  const v1::ViolationDetail& d = v.detail();
  Violation out;
  out.actor = v.actor();
  out.record = d.record();
  out.op = v.op();
  out.path = v.path();
  out.invoke = v.invoke_ns();
  out.complete = v.complete_ns();
  out.epsilon = d.epsilon_ns();
  out.step = v.step();
  out.component = v.component();
  out.object = v.object();
  out.observed = v.observed();
  out.expected = v.expected();
  out.versions = versions_of(d.versions());
  for (const auto& s : d.steps())
    out.steps.push_back(StepTrace{s.step(), s.component(), s.object(), versions_of(s.versions())});
  for (const auto& m : d.history())
    out.history.push_back(MutationTrace{m.actor(), m.op(), m.object(), m.value(), m.invoke_ns(),
                                        m.complete_ns(), m.err(), to_string(m.node_kind())});
  json j = to_json(out);
  j["kind"] = ktap::violation_kind_word(v.kind());
  return j;
}

}  // namespace leapfrog
