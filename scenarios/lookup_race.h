#pragma once
// The engine shared by the lookup scenarios: a scenario's setup builds the tree
// on disk and describes it (TreeModel), lists mutation templates for the root
// mutator and lookup templates for the unprivileged observers; the engine races
// them, turns the records into a History, checks it and fills the outcome.

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

struct QueryTemplate {
  Query query;
  // Performs the lookup: fills invoke/complete/err with timed(), and on
  // success the observed st_dev/st_ino into a/b (left 0 when not observable).
  std::function<void(RawRecord&)> run;
};

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
  RawRecord r{};
  r.op = op;
  r.round = round;
  if (chained && env.recorded() > 0) r.invoke = env.last().complete;
  q.run(r);
  env.push(r);
}

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
// Converts race records into a History and checks it (used by lookup races and
// foffset). Writes the history file when asked.
void finish_outcome(Outcome& out, History& h, RaceResult& race, const RunContext& ctx);

}  // namespace leapfrog
