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
#include "coordinator/triage/triage_engine.h"
#include "coordinator/wire_paths.h"

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
json outcome_row(const v1::OutcomeRecord& o) {
  return json{{"job_id", o.job_id()},
              {"attempt", o.attempt()},
              {"campaign_id", o.campaign_id()},
              {"scenario", o.spec().scenario()},
              {"fs", o.spec().fs()},
              {"seed", o.spec().seed()},
              {"verdict", verdict_name(o.outcome().verdict())},
              {"violation_count", o.outcome().violation_count()},
              {"error", o.outcome().error()},
              {"reported_at", iso_time(o.reported_at())}};
}

// The log through the cache it lies in, if any (else not readable, saying why).
json build_log_in(const std::vector<std::string>& caches, const std::string& path) {
  namespace sfs = std::filesystem;
  for (const auto& c : caches) {
    const sfs::path root = sfs::path(c).lexically_normal() / "kbuild" / "out";
    const sfs::path rel = sfs::path(path).lexically_normal().lexically_relative(root);
    if (!rel.empty() && *rel.begin() != "..") return build_log(c, path);
  }
  return build_log(caches.empty() ? "" : caches.front(), path);
}

json kernel_page(ApiContext& ctx, triage::TriageEngine* engine, const std::string& label,
                 const httplib::Request& req) {
  const auto kernels = ctx.store.list_kernels();
  auto it = std::find_if(kernels.begin(), kernels.end(),
                         [&](const v1::Kernel& k) { return k.label() == label; });
  if (it == kernels.end()) throw RequestError(ErrorKind::kNotFound, "no kernel \"" + label + "\"");

  // Its outcomes, a page at a time (?limit=&page=), filtered by the store.
  OutcomeQuery q;
  q.kernel_label = label;
  q.limit = query_uint(req, "limit", kRecentOutcomes, 1, kOutcomePage.max);
  q.page_token = query_page(req);
  const auto page = ctx.store.page_outcomes(q);
  json outcomes = json::array();
  for (const auto& o : page.items) outcomes.push_back(outcome_row(o));

  // Its issues: the first page; /api/issues?kernel=<label>&page= has the rest.
  json issues = json::array();
  std::string issues_next;
  if (engine) {
    v1::ListIssuesRequest lr;
    lr.set_limit(kKernelIssues);
    lr.set_kernel_label(label);
    const v1::ListIssuesResponse found = engine->list_issues(lr);  // outlives the loop
    issues_next = found.next_page_token();
    for (const auto& i : found.issues()) {
      for (const auto& k : i.kernels()) {
        if (k.kernel_label() != label) continue;
        issues.push_back(json{{"id", i.id()},
                              {"title", i.title()},
                              {"kind", i.kind()},
                              {"scenario", i.scenario()},
                              {"count", k.count()},
                              {"first_seen", iso_time(k.first_seen())},
                              {"last_seen", iso_time(k.last_seen())}});
        break;
      }
    }
  }
  return json{{"kernel", to_json(*it)},
              {"build_log", it->build_log_path().empty()
                                ? json(nullptr)
                                : build_log_in(ctx.options.build_caches, it->build_log_path())},
              {"outcomes", outcomes},
              {"outcomes_next_page", next_page(page.next_page_token)},
              {"issues", issues},
              {"issues_next_page", next_page(issues_next)}};
}

}  // namespace

json kernels_by_label(Store& store, const std::vector<std::string>& labels) {
  json out = json::object();
  for (const auto& l : labels) out[l] = nullptr;
  for (const auto& k : store.list_kernels())
    if (out.contains(k.label())) out[k.label()] = to_json(k);
  return out;
}

void register_kernel_api(ApiRouter& r, ApiContext ctx, triage::TriageEngine* engine) {
  r.get(R"(/api/kernels/([^/]+))", [ctx, engine](const httplib::Request& req) mutable {
    return kernel_page(ctx, engine, req.matches[1], req);
  });
}

}  // namespace leapfrog::coord
