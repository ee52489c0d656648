#pragma once
// The engine shared by the lookup scenarios: a scenario's setup builds the tree
// on disk and describes it (TreeModel), lists mutation templates for the root
// mutator and lookup templates for the unprivileged observers; the engine races
// them, turns the records into a History, checks it and fills the outcome.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <string>
#include <vector>

#include "scenarios/clock.h"
#include "scenarios/race.h"
#include "scenarios/scenario.h"
#include "scenarios/tree_model.h"

namespace leapfrog {

// Runs `call` between two clock reads; fills invoke, complete and err. A caller
// that already holds a time read before the call (see observe()) may preset
// r.invoke to it; a non-zero invoke is kept and only the completion is read.
template <typename Call>
inline void timed(RawRecord& r, Call&& call) {
  if (r.invoke == 0) r.invoke = now_ns();
  const int rc = call();
  r.complete = now_ns();
  r.err = rc;
}

struct MutationTemplate {
  Effect effect;
  // Performs the mutation; returns 0 or errno. Runs as root on the hot path.
  std::function<int()> apply;
  // Optional untimed preparation just before apply (e.g. create the symlink
  // that apply renames into place); its changes must be invisible to lookups.
  std::function<void()> prepare;
};

// The lookups observe() makes itself, inline: the three of the query mix.
// Custom: the template's run function.
enum class LookupCall : uint8_t { Custom, Stat, Access, Open };

struct QueryTemplate {
  Query query;
  // Custom lookups: fills invoke/complete/err with timed(), and on success
  // the observed st_dev/st_ino into a/b (left 0 when not observable).
  std::function<void(RawRecord&)> run;
  // The common lookups are not called through `run`: on the hot path an
  // indirect call into a heap-held closure costs about as much as the rest
  // of the recording (bench/harness_bench.cc).
  LookupCall call = LookupCall::Custom;
  int at = AT_FDCWD;  // dirfd, or AT_FDCWD
  std::string path;
  // Custom lookups that run a program reporting its credentials: `run`
  // leaves the effective uid in a and gid in b (LookupRecord::euid/egid).
  bool reports_ids = false;
};

// Performs a lookup and returns its record with invoke, complete, err, a and b
// filled (the rest zero); invoke: as for timed(). `call`, `at` and `path` are
// q's, passed apart so that a hot loop can keep them in its own frame. The
// record is built in registers and stored by the caller after the last system
// call: after each call the CPU walks the page tables again for every page it
// touches (no PCID under page-table isolation), so touching the record's page
// between open and fstat would cost a walk more.
inline RawRecord perform_lookup(LookupCall call, int at, const char* path, const QueryTemplate& q,
                                TimeNs invoke) {
  RawRecord r{};
  r.invoke = invoke;
  struct stat st;
  switch (call) {
    case LookupCall::Stat:
      timed(r, [&] { return fstatat(at, path, &st, 0) == 0 ? 0 : errno; });
      if (r.err == 0) {
        r.a = st.st_dev;
        r.b = st.st_ino;
      }
      return r;
    case LookupCall::Access:
      timed(r, [&] { return faccessat(at, path, R_OK, 0) == 0 ? 0 : errno; });
      return r;
    case LookupCall::Open: {
      int fd = -1;
      timed(r, [&] {
        fd = openat(at, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        return fd >= 0 ? 0 : errno;
      });
      if (fd >= 0) {
        if (fstat(fd, &st) == 0) {
          r.a = st.st_dev;
          r.b = st.st_ino;
        }
        close(fd);
      }
      return r;
    }
    case LookupCall::Custom:
      break;
  }
  q.run(r);
  return r;
}

// One observer operation: runs `q` (template index `op`) and pushes its record.
//
// chained (free-running alignment only): the record's invoke is the completion
// time of the actor's previous record instead of a fresh clock read, so each
// lookup costs one clock read, not two. That time was read before this call
// was issued, so the window [invoke, complete] still contains the whole call;
// it only grows by the few instructions between two calls (the untimed tail
// of the previous query, drawing the next one). The oracle's verdict is
// monotone in the windows: a wider window admits more versions of every
// object, never fewer, so a legal run stays legal (no false violation), and a
// stale result that no version in the wider window explains is still caught.
// Under fuzzy alignment the actors wait at a barrier and a swept delay between
// calls; chaining would stretch every window over that wait, so it is off.
inline void observe(ActorEnv& env, const QueryTemplate& q, uint32_t op, uint32_t round,
                    bool chained) {
  const TimeNs invoke = chained && env.recorded() > 0 ? env.last().complete : 0;
  RawRecord r = perform_lookup(q.call, q.at, q.path.c_str(), q, invoke);
  r.op = op;
  r.round = round;
  env.push(r);
}

// Makes `o` an observer that each round makes one lookup of `mine` (indexes
// into `queries`, which must outlive the race), drawn by the actor's rng, as
// observe() does: sets o.step, and o.steps for free-running batches. Throws
// std::invalid_argument if `mine` is empty or names a query that is not there.
void set_observer_step(ActorSpec& o, const std::vector<QueryTemplate>& queries,
                       const std::vector<uint32_t>& mine, bool chained);

struct RacePlan {
  TreeModel model;
  // Applied in order, cyclically; a failed mutation is retried next round.
  std::vector<MutationTemplate> mutations;
  // Per round the mutator mutates with this probability (else it sits out),
  // so that stable stretches alternate with changes.
  double mutate_probability = 1.0;
  std::vector<QueryTemplate> queries;
  // Observer i runs only queries in observer_queries[i] when given.
  std::vector<std::vector<uint32_t>> observer_queries;
  std::vector<Cred> observers;  // one entry per observer
  std::string observer_cwd;     // observers chdir here (the lookup root)
  // Which lookups add_query_mix adds: 1 stat, 2 access, 4 open (the "ops"
  // parameter of the scenarios that take it).
  uint32_t query_ops = 7;
};

// Sets the identity of `n` from lstat(path) (as seen through the lookup view).
// Throws fs::SetupError if the path cannot be stat'ed.
void identify(TreeModel& model, NodeId n, const std::string& path);

// Races the plan and returns the checked outcome.
Outcome run_lookup_race(RacePlan& plan, RunContext& ctx);

// Shared by every scenario's run(): fills the outcome's identifying fields.
Outcome begin_outcome(const RunContext& ctx);

// Records per actor in flight between an actor and a race's sink: each
// actor's buffer is a ring of this many.
inline constexpr uint64_t kRaceRing = uint64_t{1} << 15;

// The history's identifying header fields (scenario, seed, fs, clock,
// epsilon, base device), from the run.
void fill_header(HistoryHeader& h, const Outcome& out, const RunContext& ctx);

// The race's figures into `out`; false (the outcome an error) if the race failed.
bool take_race(Outcome& out, const RaceResult& race);

// ops_per_sec from ops and duration; an error when nothing was recorded.
void note_ops(Outcome& out);

// The verdict out.check earned, with its notes (and the backpressure's).
void judge_outcome(Outcome& out);

}  // namespace leapfrog
