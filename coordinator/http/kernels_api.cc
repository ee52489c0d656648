// Kernel endpoints (docs/api.md "Kernels"): one kernel with its patch series,
// build record and whole build log, and what was found on it; plus the
// kernels-by-label map the finding views (jobs, issues) carry.

#include <fcntl.h>
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iterator>

#include "coordinator/http/api.h"
#include "coordinator/http/api_json.h"
#include "coordinator/http/http_server.h"
#include "coordinator/http/proto_json.h"
#include "coordinator/triage/triage_engine.h"
#include "coordinator/wire_paths.h"
#include "leapfrog/v1/http.pb.h"

namespace leapfrog::coord {

using nlohmann::json;

namespace {

// The log's bytes from `fd` (a regular file): the last kBuildLogCap of them,
// from a whole line on.
void read_tail(int fd, uintmax_t size, json& out) {
  const uintmax_t skip = size > kBuildLogCap ? size - kBuildLogCap : 0;
  std::string text(static_cast<size_t>(size - skip), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n =
        ::pread(fd, text.data() + got, text.size() - got, static_cast<off_t>(skip + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  if (skip > 0) {  // start on a whole line
    const size_t nl = text.find('\n');
    if (nl != std::string::npos) text.erase(0, nl + 1);
  }
  out["readable"] = true;
  out["size"] = size;
  out["truncated"] = skip > 0;
  out["text"] = text;  // the reply replaces bytes that are not UTF-8
}

}  // namespace

json build_log(const std::string& cache_dir, const std::string& path) {
  json out{{"path", path},       {"readable", false}, {"size", 0},
           {"truncated", false}, {"text", ""},        {"error", ""}};
  namespace sfs = std::filesystem;
  // The path is a client's word: nothing outside <cache>/kbuild/out/ is even
  // looked at, so the answer says nothing about other files.
  const sfs::path root = sfs::path(cache_dir).lexically_normal() / "kbuild" / "out";
  const sfs::path p(path);
  const sfs::path rel = p.lexically_normal().lexically_relative(root);
  const bool shaped = !cache_dir.empty() && build_log_path_problem(path).empty() && !rel.empty() &&
                      std::distance(rel.begin(), rel.end()) == 2 && *rel.begin() != "..";
  if (!shaped) {
    out["error"] = "\"" + path + "\" is not in this coordinator's build cache (" + root.string() +
                   "/); the log stays on the machine that built the kernel";
    return out;
  }
  // Resolve symbolic links and check again: the file must really be there.
  std::error_code ec;
  const sfs::path real_root = sfs::canonical(root, ec);
  const sfs::path real = ec ? sfs::path() : sfs::canonical(p, ec);
  if (ec) {
    out["error"] = "cannot read \"" + path + "\" on the coordinator: " + ec.message();
    return out;
  }
  const std::string prefix = real_root.string() + "/";
  if (real.string().compare(0, prefix.size(), prefix) != 0) {
    out["error"] = "\"" + path + "\" leads out of this coordinator's build cache";
    return out;
  }
  const int fd = ::open(real.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    out["error"] = "cannot open \"" + path + "\" on the coordinator: " + std::strerror(errno);
    return out;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    out["error"] = "\"" + path + "\" is not a regular file";
  } else {
    read_tail(fd, static_cast<uintmax_t>(st.st_size), out);
  }
  ::close(fd);
  return out;
}

namespace {

constexpr uint32_t kRecentOutcomes = 50;
constexpr uint32_t kKernelIssues = 100;

// One outcome as a row of the kernel page: no violations, no console.
v1::KernelOutcome outcome_row(const v1::OutcomeRecord& o) {
  v1::KernelOutcome out;
  out.set_job_id(o.job_id());
  out.set_attempt(o.attempt());
  out.set_campaign_id(o.campaign_id());
  *out.mutable_spec() = o.spec();
  out.set_verdict(o.outcome().verdict());
  out.set_violation_count(o.outcome().violation_count());
  out.set_error(o.outcome().error());
  *out.mutable_reported_at() = o.reported_at();
  return out;
}

// The log through the cache it lies in, if any (else not readable, saying why).
v1::BuildLog build_log_in(const std::vector<std::string>& caches, const std::string& path) {
  namespace sfs = std::filesystem;
  std::string cache = caches.empty() ? "" : caches.front();
  for (const auto& c : caches) {
    const sfs::path root = sfs::path(c).lexically_normal() / "kbuild" / "out";
    const sfs::path rel = sfs::path(path).lexically_normal().lexically_relative(root);
    if (!rel.empty() && *rel.begin() != "..") {
      cache = c;
      break;
    }
  }
  const json j = build_log(cache, path);
  v1::BuildLog out;
  out.set_path(j["path"].get<std::string>());
  out.set_readable(j["readable"].get<bool>());
  out.set_size(j["size"].get<uint64_t>());
  out.set_truncated(j["truncated"].get<bool>());
  out.set_text(j["text"].get<std::string>());
  out.set_error(j["error"].get<std::string>());
  return out;
}

v1::KernelPage kernel_page(ApiContext& ctx, triage::TriageEngine* engine, const std::string& label,
                           const httplib::Request& req) {
  const auto kernels = ctx.store.list_kernels();
  auto it = std::find_if(kernels.begin(), kernels.end(),
                         [&](const v1::Kernel& k) { return k.label() == label; });
  if (it == kernels.end()) throw RequestError(ErrorKind::kNotFound, "no kernel \"" + label + "\"");
  v1::KernelPage out;
  *out.mutable_kernel() = shown(*it);
  if (!it->build_log_path().empty())
    *out.mutable_build_log() = build_log_in(ctx.options.build_caches, it->build_log_path());

  // Its outcomes, a page at a time (?limit=&page=), filtered by the store.
  OutcomeQuery q;
  q.kernel_label = label;
  q.limit = query_uint(req, "limit", kRecentOutcomes, 1, kOutcomePage.max);
  q.page_token = query_page(req);
  const auto page = ctx.store.page_outcomes(q);
  for (const auto& o : page.items) *out.add_outcomes() = outcome_row(o);
  out.set_outcomes_next_page_token(page.next_page_token);

  // Its issues: the first page; /api/issues?kernel=<label>&page= has the rest.
  if (engine) {
    v1::ListIssuesRequest lr;
    lr.set_limit(kKernelIssues);
    lr.set_kernel_label(label);
    const v1::ListIssuesResponse found = engine->list_issues(lr);
    out.set_issues_next_page_token(found.next_page_token());
    for (const auto& i : found.issues()) {
      for (const auto& k : i.kernels()) {
        if (k.kernel_label() != label) continue;
        v1::KernelIssue* row = out.add_issues();
        *row->mutable_issue() = i;
        row->mutable_issue()->clear_example_violation();
        *row->mutable_on_kernel() = k;
        break;
      }
    }
  }
  return out;
}

}  // namespace

void add_kernels(Store& store, const std::vector<std::string>& labels,
                 google::protobuf::Map<std::string, v1::Kernel>& out) {
  if (labels.empty()) return;
  for (const auto& k : store.list_kernels())
    if (std::find(labels.begin(), labels.end(), k.label()) != labels.end())
      out[k.label()] = shown(k);
}

void register_kernel_api(ApiRouter& r, ApiContext ctx, triage::TriageEngine* engine) {
  r.get(R"(/api/kernels/([^/]+))", [ctx, engine](const httplib::Request& req) mutable {
    return proto_json(kernel_page(ctx, engine, req.matches[1], req));
  });
}

}  // namespace leapfrog::coord
