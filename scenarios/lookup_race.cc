#include "scenarios/lookup_race.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <system_error>

#include "scenarios/history_io.h"
#include "scenarios/lookup_recorder.h"
#include "scenarios/sys/posix_ops.h"

namespace leapfrog {

void identify(TreeModel& model, NodeId n, const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0)
    throw fs::SetupError("cannot stat \"" + path +
                         "\" to record its identity: " + std::strerror(errno));
  model.set_identity(
      n, NodeIdentity{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), false});
}

Outcome begin_outcome(const RunContext& ctx) {
  Outcome out;
  out.scenario = ctx.opts.scenario;
  out.seed = ctx.opts.seed;
  out.fs = ctx.ws.name();
  out.params = ctx.params;
  out.observers = ctx.observers;
  out.strategy = ctx.strategy;
  out.clock_source = clock_source();
  out.epsilon_ns = ctx.opts.epsilon;
  return out;
}

// Records per actor in flight between an actor and the judge (kRaceRing,
// lookup_race.h).
// Lookups the judge takes at a time in a live run.
constexpr size_t kLiveBatch = size_t{1} << 14;

static RaceConfig race_config(const RunContext& ctx) {
  RaceConfig cfg;
  cfg.iterations = ctx.opts.iterations;
  cfg.duration = ctx.opts.iterations ? kMaxDuration : ctx.opts.duration;
  cfg.fuzzy = ctx.strategy.alignment != Alignment::Free;
  cfg.pin_cpus = ctx.strategy.pin_cpus;
  cfg.warmup = ctx.opts.iterations
                   ? static_cast<uint32_t>(std::min<uint64_t>(256, ctx.opts.iterations / 8))
                   : 256;
  // The records go to the judge as the race runs: each actor's buffer is a
  // ring of this many (LookupRecorder holds as many more per actor).
  cfg.capacity = kRaceRing;
  return cfg;
}

void fill_header(HistoryHeader& h, const Outcome& out, const RunContext& ctx) {
  h.scenario = ctx.opts.scenario;
  h.seed = ctx.opts.seed;
  h.fs = ctx.ws.name();
  h.clock_source = out.clock_source;
  h.epsilon_ns = ctx.opts.epsilon;
  h.base_dev = ctx.ws.lookup_dev();
}

// The race's figures; false (the outcome an error) if the race failed.
bool take_race(Outcome& out, const RaceResult& race) {
  out.rounds = race.rounds;
  out.duration_s = race.elapsed_s;
  out.timing = race.timing;
  out.backpressure_s = race.stalled_s;
  out.backpressure_waits = race.stalls;
  if (race.error.empty()) return true;
  out.verdict = "error";
  out.error = race.error;
  return false;
}

// The verdict out.check earned, with its notes.
void judge_outcome(Outcome& out) {
  out.notes.insert(out.notes.end(), out.check.notes.begin(), out.check.notes.end());
  if (out.check.unjudged)
    out.notes.push_back(std::to_string(out.check.unjudged) +
                        " records had results outside the model and were not judged");
  if (out.backpressure_waits)
    out.notes.push_back("judging fell behind the race: the actors waited " +
                        std::to_string(out.backpressure_waits) + " times, " +
                        std::to_string(out.backpressure_s) + " s in all, for it to catch up");
  // A live run earns "pass" as `check` does: a race that judged nothing, or
  // whose lookups ran out of search budget, is inconclusive, never clean.
  std::string why;
  out.verdict = earned_verdict(out.check, why);
  if (!why.empty()) out.error = why;
}

void note_ops(Outcome& out) {
  out.ops_per_sec = out.duration_s > 0 ? static_cast<double>(out.ops) / out.duration_s : 0;
  if (out.ops == 0) {
    out.verdict = "error";
    out.error = "the run recorded no operations: nothing was checked (is the duration too short?)";
  }
}

namespace {

// One lookup of an observer's mix as its hot loop reads it.
struct HotQuery {
  const QueryTemplate* tmpl;  // Custom lookups call its run
  uint32_t op;                // index into the queries
  LookupCall call;
  int at;
  uint32_t path;  // offset of the NUL-terminated path from the block's start
};

// What an observer reads every round, in one small contiguous block: a
// header, its queries, their paths. Copied into the batch's stack frame, so a
// round touches the frame's page, the code, the record's page and nothing else
// beyond what a bare loop of the same system calls touches (each page costs a
// page-table walk after every system call on these machines).
class ObserverMix {
 public:
  struct Header {
    uint32_t n;  // queries
    uint32_t bytes;
  };

  ObserverMix(const std::vector<QueryTemplate>& queries, const std::vector<uint32_t>& mine) {
    if (mine.empty()) throw std::invalid_argument("an observer needs at least one query");
    size_t bytes = sizeof(Header) + mine.size() * sizeof(HotQuery);
    for (uint32_t q : mine) {
      if (q >= queries.size())
        throw std::invalid_argument("observer query " + std::to_string(q) + " out of range (" +
                                    std::to_string(queries.size()) + " queries)");
      bytes += queries[q].path.size() + 1;
    }
    // Aligned to its size (up to a page) so that a small block never straddles
    // two pages.
    size_t align = alignof(HotQuery);
    while (align < bytes && align < 4096) align *= 2;
    bytes_ = (bytes + align - 1) / align * align;
    data_.reset(static_cast<std::byte*>(std::aligned_alloc(align, bytes_)));
    if (!data_) throw std::bad_alloc();
    std::memset(data_.get(), 0, bytes_);
    auto* h = reinterpret_cast<Header*>(data_.get());
    h->n = static_cast<uint32_t>(mine.size());
    h->bytes = static_cast<uint32_t>(bytes_);
    auto* hot = reinterpret_cast<HotQuery*>(data_.get() + sizeof(Header));
    size_t text = sizeof(Header) + mine.size() * sizeof(HotQuery);
    for (size_t i = 0; i < mine.size(); ++i) {
      const QueryTemplate& q = queries[mine[i]];
      hot[i] = HotQuery{&q, mine[i], q.call, q.at, static_cast<uint32_t>(text)};
      std::memcpy(data_.get() + text, q.path.c_str(), q.path.size() + 1);
      text += q.path.size() + 1;
    }
  }

  const std::byte* data() const { return data_.get(); }
  size_t bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte[], Free> data_;
  size_t bytes_ = 0;
};

// The observer's rounds first .. first + n - 1 (n = 1: one round of step).
// Per round it touches its frame, its code and the record slot; the actor's
// env (rng, record count) is read once per batch. Aligned to a power of two
// above its size (~1.3 KB) so that its code lies in one page.
[[gnu::hot, gnu::aligned(2048)]] void observe_rounds(ActorEnv& env, const ObserverMix& mix,
                                                     uint32_t first, uint32_t n, bool chained) {
  // Blocks larger than this are read in place: a larger frame is no cheaper.
  constexpr size_t kFrameBytes = 1024;
  alignas(64) std::byte frame[kFrameBytes];
  const std::byte* base = mix.data();
  if (mix.bytes() <= kFrameBytes) {
    std::memcpy(frame, base, mix.bytes());
    base = frame;
  }
  const auto* h = reinterpret_cast<const ObserverMix::Header*>(base);
  const auto* hot = reinterpret_cast<const HotQuery*>(base + sizeof(ObserverMix::Header));
  const uint32_t nq = h->n;
  Rng rng = env.rng();
  RawRecord* slot = &env.next();
  TimeNs last = chained && env.recorded() > 0 ? env.last().complete : 0;
  for (uint32_t i = 0; i < n; ++i) {
    const HotQuery& q = hot[nq == 1 ? 0 : rng.below(nq)];
    RawRecord r = perform_lookup(q.call, q.at, reinterpret_cast<const char*>(base + q.path),
                                 *q.tmpl, last);
    r.op = q.op;
    r.round = first + i;
    slot[i] = r;
    if (chained) last = r.complete;
  }
  env.rng() = rng;
  env.commit(n);
}

}  // namespace

void set_observer_step(ActorSpec& o, const std::vector<QueryTemplate>& queries,
                       const std::vector<uint32_t>& mine, bool chained) {
  auto mix = std::make_shared<const ObserverMix>(queries, mine);
  o.step = [mix, chained](ActorEnv& env, uint32_t round) {
    observe_rounds(env, *mix, round, 1, chained);
  };
  o.steps = [mix, chained](ActorEnv& env, uint32_t first, uint32_t n) {
    observe_rounds(env, *mix, first, n, chained);
  };
}

Outcome run_lookup_race(RacePlan& plan, RunContext& ctx) {
  Outcome out = begin_outcome(ctx);
  if (plan.queries.empty()) throw std::logic_error("a lookup race needs queries");

  std::vector<ActorSpec> actors;
  const bool has_mutator = !plan.mutations.empty();
  if (has_mutator) {
    ActorSpec m;
    m.role = ActorRole::Mutator;
    m.step = [&plan, cur = uint32_t{0}](ActorEnv& env, uint32_t round) mutable {
      if (plan.mutate_probability < 1.0 && !env.rng().chance(plan.mutate_probability)) return;
      RawRecord r{};
      r.op = cur;
      r.round = round;
      const auto& t = plan.mutations[cur];
      if (t.prepare) t.prepare();
      timed(r, [&] { return t.apply(); });
      env.push(r);
      if (r.err == 0) cur = (cur + 1) % static_cast<uint32_t>(plan.mutations.size());
    };
    actors.push_back(std::move(m));
  }
  for (size_t i = 0; i < plan.observers.size(); ++i) {
    ActorSpec o;
    o.role = ActorRole::Observer;
    const Cred cred = plan.observers[i];
    const std::string cwd = plan.observer_cwd;
    o.prepare = [cred, cwd] {
      if (!cwd.empty() && chdir(cwd.c_str()) != 0)
        throw std::system_error(errno, std::generic_category(), "chdir " + cwd);
      sys::drop_privileges(cred);
    };
    std::vector<uint32_t> mine;
    if (i < plan.observer_queries.size()) mine = plan.observer_queries[i];
    if (mine.empty())
      for (uint32_t q = 0; q < plan.queries.size(); ++q) mine.push_back(q);
    // Mixed alignment: the first observers meet the mutator at the
    // barrier, the others run free (and chain their windows).
    o.free_running = i >= ctx.strategy.aligned;
    set_observer_step(o, plan.queries, mine, o.free_running);
    actors.push_back(std::move(o));
  }
  const auto align_of = [&](const ActorSpec& a) {
    return ctx.strategy.alignment == Alignment::Free || a.free_running ? "free" : "fuzzy";
  };

  History h;  // the header and templates; the records go to the recorder
  plan.model.fill_header(h.header);
  uint32_t id = 0;
  if (has_mutator)
    h.header.actors.push_back(Actor{id, "mutator", Cred{0, 0, {}}, align_of(actors[id])}), ++id;
  for (const auto& c : plan.observers)
    h.header.actors.push_back(Actor{id, "observer", c, align_of(actors[id])}), ++id;
  for (const auto& m : plan.mutations) h.effects.push_back(m.effect);
  for (const auto& q : plan.queries) h.queries.push_back(q.query);
  fill_header(h.header, out, ctx);

  LookupRecorder::Shape shape;
  shape.has_mutator = has_mutator;
  for (const auto& q : plan.queries) shape.reports_ids.push_back(q.reports_ids);
  // Only an aligned observer's round is the mutator's round.
  for (const auto& a : actors)
    shape.aligned_observer.push_back(ctx.strategy.alignment != Alignment::Free &&
                                     a.role == ActorRole::Observer && !a.free_running);
  std::ofstream history;
  if (!ctx.opts.history_path.empty()) {
    history.open(ctx.opts.history_path);
    if (!history)
      throw UsageError("cannot write history file \"" + ctx.opts.history_path + "\"");
  }
  WindowOptions judging;
  judging.batch = kLiveBatch;
  LookupRecorder recorder(h, std::move(shape), history.is_open() ? &history : nullptr,
                          ctx.opts.progress, judging);
  RaceResult race = run_race(actors, race_config(ctx), ctx.opts.seed, &recorder);
  if (!take_race(out, race)) return out;
  out.check = recorder.finish();
  if (history.is_open() && !history.flush())
    throw UsageError("writing history file \"" + ctx.opts.history_path + "\" failed");
  out.ops = recorder.mutations() + recorder.lookups();
  out.mutations = recorder.mutations();
  out.race_window_hits = recorder.race_window_hits();
  note_ops(out);
  if (out.ops == 0) return out;
  // Without a violation the outcome keeps its defaults (-1, 0).
  if (out.check.first_violation_at < kTimeMax) {
    out.first_violation_ns = out.check.first_violation_at - recorder.first_invoke();
    out.ops_to_first_violation = recorder.lookups_to_first_violation();
  }
  judge_outcome(out);
  return out;
}

}  // namespace leapfrog
