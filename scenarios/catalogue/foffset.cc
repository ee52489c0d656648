// foffset: N actors share one open file description and read it block by block
// (sometimes asking lseek(fd, 0, SEEK_CUR) where they are). Every 8-byte word
// of the file holds its own offset, so each read shows where it really started:
// a block read twice, a block skipped or a torn position is a torn-offset.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>
#include <vector>

#include "scenarios/catalogue/catalogue.h"
#include "scenarios/catalogue/common.h"
#include "scenarios/lookup_race.h"
#include "scenarios/offset_recorder.h"
#include "scenarios/shared_region.h"
#include "scenarios/sys/posix_ops.h"

namespace leapfrog::catalogue {
namespace {

struct Shared {
  // The round in which every peer rewinds (set by whoever hit the end of the
  // file in the round before, so all peers see it after the round barrier).
  std::atomic<uint32_t> rewind_at{UINT32_MAX};
  std::atomic<uint32_t> epoch{0};
};

class Foffset : public Scenario {
 public:
  const char* name() const override { return "foffset"; }
  const char* summary() const override {
    return "N actors read one shared fd block by block (and lseek SEEK_CUR); each block must be "
           "read exactly once";
  }
  std::vector<ParamSpec> params() const override {
    return {
        {"block_size", 64, 8, 4096, "bytes per read (a multiple of 8)"},
        {"blocks", 4096, 16, 1 << 20, "blocks in the file; the actors rewind together at its end"},
        {"seek_pct", 10, 0, 50, "chance in % that an operation is lseek(fd, 0, SEEK_CUR)"}};
  }
  uint32_t default_observers() const override { return 2; }
  // The peers rewind the shared file together at a barrier of their own.
  bool mixed_alignment() const override { return false; }

  Outcome run(RunContext& ctx) const override {
    const uint32_t bs = static_cast<uint32_t>(ctx.param("block_size"));
    const uint64_t blocks = static_cast<uint64_t>(ctx.param("blocks"));
    const double seek_p = static_cast<double>(ctx.param("seek_pct")) / 100.0;
    if (bs % 8)
      throw UsageError("parameter \"block_size\" must be a multiple of 8, got " +
                       std::to_string(bs));
    DiskTree disk(ctx.ws);
    write_file(disk.m("f"), bs, blocks);
    const int fd = ::open(disk.l("f").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw fs::SetupError("open shared file: " + std::string(std::strerror(errno)));
    SharedRegion region(sizeof(Shared));
    auto* shared = new (region.data()) Shared();
    const bool fuzzy = ctx.strategy.alignment != Alignment::Free;

    std::vector<ActorSpec> actors;
    for (uint32_t i = 0; i < ctx.observers; ++i) {
      ActorSpec a;
      a.role = ActorRole::Peer;
      const Cred cred = ctx.opts.observer;
      a.prepare = [cred] { sys::drop_privileges(cred); };
      a.step = [fd, bs, seek_p, shared, fuzzy, buf = std::vector<uint64_t>(bs / 8)](
                   ActorEnv& env, uint32_t round) mutable {
        if (fuzzy && shared->rewind_at.load(std::memory_order_acquire) == round) {
          if (!env.peer_barrier()) return;
          if (env.id() == 0) {
            ::lseek(fd, 0, SEEK_SET);
            shared->epoch.fetch_add(1);
          }
          if (!env.peer_barrier()) return;
        }
        const uint32_t epoch = shared->epoch.load(std::memory_order_acquire);
        RawRecord r{};
        r.round = round;
        if (env.rng().chance(seek_p)) {
          off_t pos = 0;
          timed(r, [&] {
            pos = ::lseek(fd, 0, SEEK_CUR);
            return pos < 0 ? errno : 0;
          });
          r.a = static_cast<uint64_t>(pos);
          r.aux = epoch << 1 | 1;
          env.push(r);
          return;
        }
        ssize_t n = 0;
        timed(r, [&] {
          n = ::read(fd, buf.data(), bs);
          return n < 0 ? errno : 0;
        });
        r.aux = epoch << 1;
        r.b = n > 0 ? static_cast<uint64_t>(n) : 0;
        if (n == 0) {
          r.a = static_cast<uint64_t>(int64_t{-1});
          if (fuzzy)
            shared->rewind_at.store(round + 1, std::memory_order_release);
          else
            env.request_stop();
        } else if (n > 0) {
          r.a = static_cast<uint64_t>(decode(buf.data(), static_cast<size_t>(n)));
        }
        env.push(r);
      };
      actors.push_back(std::move(a));
    }

    Outcome out = begin_outcome(ctx);
    RaceConfig cfg;
    cfg.iterations = ctx.opts.iterations;
    cfg.duration = ctx.opts.iterations ? kMaxDuration : ctx.opts.duration;
    cfg.fuzzy = fuzzy;
    cfg.pin_cpus = ctx.strategy.pin_cpus;
    // The records go to the recorder as the race runs, which judges each pass
    // over the file once every peer has left it: a run of any length holds
    // about a pass.
    cfg.capacity = kRaceRing;

    HistoryHeader header;
    fill_header(header, out, ctx);
    header.block_size = bs;
    header.blocks = blocks;
    for (uint32_t i = 0; i < ctx.observers; ++i)
      header.actors.push_back(Actor{i, "peer", ctx.opts.observer, fuzzy ? "fuzzy" : "free"});
    std::ofstream history;
    if (!ctx.opts.history_path.empty()) {
      history.open(ctx.opts.history_path);
      if (!history)
        throw UsageError("cannot write history file \"" + ctx.opts.history_path + "\"");
    }
    OffsetRecorder recorder(header, ctx.observers, fuzzy, history.is_open() ? &history : nullptr,
                            ctx.opts.progress);
    RaceResult race = run_race(actors, cfg, ctx.opts.seed, &recorder);
    ::close(fd);
    if (take_race(out, race)) {
      out.check = recorder.finish();
      if (history.is_open() && !history.flush())
        throw UsageError("writing history file \"" + ctx.opts.history_path + "\" failed");
      out.ops = recorder.ops();
      out.race_window_hits = recorder.race_window_hits();
      note_ops(out);
      if (out.ops > 0) {
        out.first_violation_ns = recorder.first_violation_ns();
        out.ops_to_first_violation = recorder.ops_to_first_violation();
        judge_outcome(out);
      }
    }
    shared->~Shared();
    return out;
  }

 private:
  // The offset the block starts at, or -2 if its words are not one block's.
  static int64_t decode(const uint64_t* words, size_t bytes) {
    if (bytes % 8) return -2;
    const uint64_t first = words[0];
    for (size_t j = 1; j < bytes / 8; ++j)
      if (words[j] != first + 8 * j) return -2;
    return static_cast<int64_t>(first);
  }

  static void write_file(const std::string& path, uint32_t bs, uint64_t blocks) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw fs::SetupError("create \"" + path + "\": " + std::strerror(errno));
    std::vector<uint64_t> chunk(8192);
    const uint64_t total = static_cast<uint64_t>(bs) * blocks;
    for (uint64_t off = 0; off < total;) {
      const uint64_t bytes = std::min<uint64_t>(chunk.size() * 8, total - off);
      for (uint64_t j = 0; j < bytes / 8; ++j) chunk[j] = off + 8 * j;
      if (::write(fd, chunk.data(), bytes) != static_cast<ssize_t>(bytes)) {
        ::close(fd);
        throw fs::SetupError("write \"" + path + "\": " + std::strerror(errno));
      }
      off += bytes;
    }
    ::close(fd);
  }
};

}  // namespace

std::unique_ptr<Scenario> make_foffset() {
  return std::make_unique<Foffset>();
}

}  // namespace leapfrog::catalogue
