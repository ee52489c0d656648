// A year of nightlies (issue 23): the dashboard's read routes as the
// database grows. A fresh embedded PostgreSQL is filled by the generator of
// growth_fill.h through the store's own write path (not the RPC) to 10⁵
// outcomes, then 10⁶ and 10⁷ while --max-outcomes allows, spread over 365
// nights; failures are grouped into issues by the real triage engine. At each
// size every read route of the dashboard is timed through the real HTTP
// server, one request at a time and then from 20 clients at once (p50, p95,
// p99 in ms), with its answer's size and the database's size. At the largest
// size, each route runs once more with auto_explain on (ANALYZE, BUFFERS,
// nested statements) and every plan it ran is written to --plans FILE; a
// sequential scan of outcomes or violations is called out.
//
// Usage: leapfrog_growth_bench [--max-outcomes N] [--plans FILE]
//        [--requests N] [--clients N] [--sizes-only] [--time-from N]
// --time-from N fills straight through the sizes below N (10⁵ and 10⁶ for
// --time-from 10000000), measuring only from N on. --lease-round N: leases
// asked for at once per kernel (1: one at a time). --fill-buffers SIZE runs
// the fill and the grouping with that shared_buffers (and max_wal_size 16GB,
// checkpoint_timeout 1h), and restarts the server with PostgreSQL's defaults
// before each size's routes are timed, so the read figures stay those of a
// default server. --days N spreads the outcomes over N nights instead of
// 365: fewer, larger nightlies (10⁶ over 30 days makes campaigns of ~33,000
// jobs, the size of a nightly at 10⁷ over a year).
// --sizes-only stops after the sizes of the first step (no routes, no plans):
// every table and index with its bytes per outcome, and each big table's
// average stored bytes per column.
// Runs as root (PostgreSQL then runs as `postgres`), with fsync off (the
// figures are of reads); its folder under /var/tmp is removed at the end.

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/growth_fill.h"
#include "coordinator/http/http_server.h"
#include "coordinator/pg/embedded_postgres.h"
#include "coordinator/pg/test_dir.h"
#include "coordinator/store/pg_store.h"
#include "coordinator/store/pg_util.h"
#include "coordinator/triage/pg_triage_store.h"
#include "coordinator/triage/triage_engine.h"

namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;
namespace coord = leapfrog::coord;

struct Args {
  uint64_t max_outcomes = 100000;
  std::string plans;  // where the plans go ("" : growth-plans.txt in the cwd)
  int requests = 30;  // sequential requests per route
  int clients = 20;   // concurrent clients
  int per_client = 3;
  bool sizes_only = false;  // the sizes of the first step, no routes or plans
  uint64_t time_from = 0;   // sizes below this are passed through, not measured
  size_t lease_round = 32;  // GrowthWorld::lease_round
  int days = 365;           // GrowthWorld::days
  std::string fill_buffers;  // shared_buffers while filling ("": the default throughout)
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--max-outcomes") {
      a.max_outcomes = std::stoull(value());
      if (a.max_outcomes < 1000 || a.max_outcomes > 100000000)
        throw std::invalid_argument("bad --max-outcomes, want 1000..100000000");
    } else if (arg == "--plans") {
      a.plans = value();
    } else if (arg == "--requests") {
      a.requests = std::stoi(value());
    } else if (arg == "--clients") {
      a.clients = std::stoi(value());
    } else if (arg == "--sizes-only") {
      a.sizes_only = true;
    } else if (arg == "--time-from") {
      a.time_from = std::stoull(value());
    } else if (arg == "--lease-round") {
      a.lease_round = std::stoul(value());
      if (a.lease_round < 1 || a.lease_round > 1000)
        throw std::invalid_argument("bad --lease-round, want 1..1000");
    } else if (arg == "--days") {
      a.days = std::stoi(value());
      if (a.days < 1 || a.days > 3650) throw std::invalid_argument("bad --days, want 1..3650");
    } else if (arg == "--fill-buffers") {
      a.fill_buffers = value();
      if (a.fill_buffers.find_first_not_of("0123456789kMGB") != std::string::npos)
        throw std::invalid_argument("bad --fill-buffers, want a size such as 4GB");
    } else {
      throw std::invalid_argument("unknown argument \"" + arg +
                                  "\"; want --max-outcomes N, --plans FILE, --requests N, "
                                  "--clients N, --sizes-only, --time-from N, --lease-round N, "
                                  "--fill-buffers SIZE, --days N");
    }
  }
  if (a.requests < 1 || a.clients < 1) throw std::invalid_argument("want positive counts");
  return a;
}

// The sizes measured: 10⁵, 10⁶, 10⁷ up to the maximum, and the maximum;
// none below `from` but the maximum.
std::vector<uint64_t> steps_to(uint64_t max, uint64_t from) {
  std::vector<uint64_t> out;
  for (uint64_t s = 100000; s < max; s *= 10)
    if (s >= from) out.push_back(s);
  out.push_back(max);
  return out;
}

struct Route {
  std::string name;
  std::string path;
};

struct Timing {
  std::vector<double> ms;
  size_t bytes = 0;
  int failed = 0;
  double q(double p) const {
    return ms.empty() ? 0.0 : ms[static_cast<size_t>(p * static_cast<double>(ms.size() - 1))];
  }
};

double get_once(httplib::Client& c, const std::string& path, size_t* bytes) {
  const auto t0 = SteadyClock::now();
  auto res = c.Get(path.c_str());
  const double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
  if (!res || res->status != 200) return -1;
  if (bytes) *bytes = res->body.size();
  return ms;
}

Timing sequential(int port, const std::string& path, int n) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  Timing t;
  get_once(c, path, nullptr);  // warm: plans and caches
  const auto until = SteadyClock::now() + 60s;
  for (int i = 0; i < n && SteadyClock::now() < until; ++i) {
    const double ms = get_once(c, path, &t.bytes);
    if (ms < 0)
      ++t.failed;
    else
      t.ms.push_back(ms);
  }
  std::sort(t.ms.begin(), t.ms.end());
  return t;
}

Timing concurrent(int port, const std::string& path, int clients, int per_client) {
  std::vector<std::vector<double>> got(static_cast<size_t>(clients));
  std::atomic<int> failed{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i)
    threads.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(120, 0);
      while (!go) std::this_thread::yield();
      for (int r = 0; r < per_client; ++r) {
        const double ms = get_once(c, path, nullptr);
        if (ms < 0)
          ++failed;
        else
          got[static_cast<size_t>(i)].push_back(ms);
      }
    });
  go = true;
  for (auto& t : threads) t.join();
  Timing t;
  for (const auto& g : got) t.ms.insert(t.ms.end(), g.begin(), g.end());
  t.failed = failed;
  std::sort(t.ms.begin(), t.ms.end());
  return t;
}

std::string one(pqxx::connection& c, const std::string& sql) {
  pqxx::work txn(c);
  auto r = txn.exec(sql);
  return r.empty() || r[0][0].is_null() ? "" : r[0][0].c_str();
}

// The routes, with ids found in the data as the dashboard would follow them.
std::vector<Route> routes_of(const std::string& url) {
  pqxx::connection c(url);
  const std::string campaign = one(c, "SELECT max(id) FROM campaigns");
  const std::string mid = one(c,
                              "SELECT id FROM campaigns ORDER BY created_at, id"
                              " OFFSET (SELECT count(*) / 2 FROM campaigns) LIMIT 1");
  const std::string job = one(c, "SELECT max(job_id) FROM outcomes WHERE verdict <> 1");
  const std::string issue = one(c, "SELECT max(id) FROM issues");
  return {
      {"overview", "/api/overview"},
      {"campaigns", "/api/campaigns"},
      // The dashboard's campaign page asks for 200 jobs a page.
      {"campaign (latest)", "/api/campaigns/" + campaign + "?limit=200"},
      {"job (with violations)", "/api/jobs/" + job},
      {"outcomes", "/api/outcomes"},
      {"outcomes failed", "/api/outcomes?failed=1"},
      {"outcomes campaign (mid-year)", "/api/outcomes?campaign=" + mid},
      {"outcomes scenario", "/api/outcomes?scenario=exec-setid"},
      {"outcomes kernel", "/api/outcomes?kernel=v6.6"},
      {"outcomes failed+kernel+scenario", "/api/outcomes?failed=1&kernel=v6.6&scenario=exec-setid"},
      {"agents", "/api/agents"},
      {"kernels", "/api/kernels"},
      {"kernel v6.6", "/api/kernels/v6.6"},
      {"schedules", "/api/schedules"},
      {"scaling compare", "/api/scaling?kernel=v6.1&kernel=v6.6"},
      {"issues", "/api/issues"},
      {"issues kind+status", "/api/issues?kind=violation&status=new"},
      {"issues kernel", "/api/issues?kernel=v6.6"},
      {"issue (latest)", "/api/issues/" + issue},
      {"actions", "/api/actions"},
  };
}

// Where each byte is: every table, TOAST table and index of the schema with
// its size and bytes per outcome, then each big table's columns with their
// average stored size (pg_column_size, on up to 20,000 rows).
void print_sizes(pqxx::connection& c, uint64_t outcomes) {
  pqxx::nontransaction n(c);
  const double per = static_cast<double>(std::max<uint64_t>(outcomes, 1));
  std::printf("   %-34s %12s %10s\n", "relation", "bytes", "/outcome");
  for (const auto& row :
       n.exec("SELECT coalesce(t.relname || ' (toast)', c.relname), c.relkind,"
              " pg_relation_size(c.oid) FROM pg_class c"
              " LEFT JOIN pg_class t ON t.reltoastrelid = c.oid"
              " WHERE c.relkind IN ('r', 'i', 't') AND (c.relnamespace = 'public'::regnamespace"
              "  OR t.relnamespace = 'public'::regnamespace) AND pg_relation_size(c.oid) > 0"
              " ORDER BY 3 DESC")) {
    const auto bytes = row[2].as<long long>();
    std::printf("   %-34s %12lld %10.1f%s\n", row[0].c_str(), bytes,
                static_cast<double>(bytes) / per,
                row[1].as<std::string>() == "i" ? "  (index)" : "");
  }
  for (const char* table :
       {"outcomes", "jobs", "violations", "violation_details", "cells", "cell_verdicts"}) {
    std::string sql = "SELECT count(*)";
    std::vector<std::string> cols;
    for (const auto& col :
         n.exec_params("SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass"
                       " AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                       table)) {
      cols.push_back(col[0].as<std::string>());
      sql += ", avg(coalesce(pg_column_size(\"" + cols.back() + "\"), 0))";
    }
    sql +=
        ", avg(pg_column_size(s.*)) FROM (SELECT * FROM " + std::string(table) + " LIMIT 20000) s";
    const auto r = n.exec(sql)[0];
    std::printf("   %s (%s rows sampled): row %.1f bytes;", table, r[0].c_str(),
                r[r.size() - 1].is_null() ? 0.0 : r[r.size() - 1].as<double>());
    for (size_t i = 0; i < cols.size(); ++i)
      std::printf(
          " %s %.1f", cols[i].c_str(),
          r[static_cast<int>(i) + 1].is_null() ? 0.0 : r[static_cast<int>(i) + 1].as<double>());
    std::printf("\n");
  }
  // The outcome value as stored (migration 17 packs it) and as the message.
  size_t stored = 0, message = 0, count = 0;
  for (const auto& row : n.exec("SELECT outcome FROM outcomes LIMIT 2000")) {
    const pqxx::binarystring b(row[0]);
    stored += b.size();
    message += coord::parse_outcome(b.str()).ByteSizeLong();
    ++count;
  }
  if (count)
    std::printf("   outcome value: %.1f bytes stored, %.1f as the message\n",
                static_cast<double>(stored) / count, static_cast<double>(message) / count);
}

// What the server log gained since `from`.
std::string log_since(const std::string& path, std::streamoff from) {
  std::ifstream in(path);
  in.seekg(from);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::streamoff log_size(const std::string& path) {
  std::ifstream in(path, std::ios::ate);
  return in.tellg();
}

// The coordinator's read side over `url`: store, triage, HTTP.
struct ReadSide {
  coord::SystemClock clock;
  coord::PgStore store;
  coord::triage::PgTriageStore triage_store;
  coord::triage::TriageEngine engine;
  coord::HttpServer http;
  explicit ReadSide(const std::string& url)
      : store(url),
        triage_store(url),
        engine(store, triage_store, clock, nullptr),
        http(store, clock, coord::HttpOptions{}, &engine) {}
};

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse_args(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "leapfrog_growth_bench: %s\n", e.what());
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  coord::testing::TestDir dir;
  coord::EmbeddedPostgresOptions po;
  po.for_tests = true;  // fsync off: these are reads
  coord::EmbeddedPostgres pg(po);
  pg.start(dir / "pg");
  const std::string url = pg.url();
  const std::string log_path = dir / "pg/leapfrog-postgres.log";

  auto side = std::make_unique<ReadSide>(url);
  leapfrog::bench::GrowthWorld world;
  world.lease_round = args.lease_round;
  world.days = args.days;
  leapfrog::bench::GrowthFiller filler(side->store, world, side->clock.now());
  filler.setup();
  auto admin_conn = std::make_unique<pqxx::connection>(url);
  uint64_t analyzed = 0;
  filler.after_campaign = [&](uint64_t jobs) {
    if (jobs < 2 * analyzed) return;
    pqxx::nontransaction(*admin_conn).exec("ANALYZE jobs");
    analyzed = jobs;
  };
  // The server's settings for the fill (`tuned`) or PostgreSQL's defaults:
  // a restart, with the read side and the admin connection made again.
  bool tuned = false;
  auto tune = [&](bool on) {
    if (args.fill_buffers.empty() || on == tuned) return;
    {
      pqxx::nontransaction n(*admin_conn);
      if (on) {
        n.exec("ALTER SYSTEM SET shared_buffers = '" + args.fill_buffers + "'");
        n.exec("ALTER SYSTEM SET max_wal_size = '16GB'");
        n.exec("ALTER SYSTEM SET checkpoint_timeout = '1h'");
      } else {
        n.exec("ALTER SYSTEM RESET ALL");
      }
    }
    admin_conn.reset();
    side.reset();
    pg.restart();
    side = std::make_unique<ReadSide>(url);
    filler.use(side->store);
    admin_conn = std::make_unique<pqxx::connection>(url);
    tuned = on;
    std::fprintf(stderr, "  server restarted with %s (shared_buffers %s)\n",
                 on ? "the fill's settings" : "the defaults",
                 one(*admin_conn, "SHOW shared_buffers").c_str());
  };

  std::printf("%-34s %9s %8s %8s %8s %8s %8s %8s %10s\n", "route", "outcomes", "seq p50", "p95",
              "p99", "20c p50", "p95", "p99", "bytes");
  for (const uint64_t target : steps_to(args.max_outcomes, args.time_from)) {
    tune(true);
    const auto t0 = SteadyClock::now();
    filler.grow_to(target);
    const double fill_s = std::chrono::duration<double>(SteadyClock::now() - t0).count();
    const auto t1 = SteadyClock::now();
    // A pass groups up to a horizon taken by the pass before it: go on
    // until passes in a row find nothing.
    for (int idle = 0; idle < 3;) idle = side->engine.group_failures().outcomes > 0 ? 0 : idle + 1;
    const double triage_s = std::chrono::duration<double>(SteadyClock::now() - t1).count();
    pqxx::nontransaction(*admin_conn).exec("VACUUM ANALYZE");
    std::printf(
        "\n== %llu outcomes (fill %.0f s, triage %.0f s): database %s, outcomes %s,"
        " violations %s, %s violation rows, %s issues ==\n",
        static_cast<unsigned long long>(filler.outcomes()), fill_s, triage_s,
        one(*admin_conn, "SELECT pg_size_pretty(pg_database_size(current_database()))").c_str(),
        one(*admin_conn, "SELECT pg_size_pretty(pg_total_relation_size('outcomes'))").c_str(),
        one(*admin_conn, "SELECT pg_size_pretty(pg_total_relation_size('violations'))").c_str(),
        one(*admin_conn, "SELECT count(*) FROM violations").c_str(),
        one(*admin_conn, "SELECT count(*) FROM issues").c_str());
    // Where the bytes are: the largest tables (with their TOAST and indexes)
    // and, per table, the bytes per row.
    for (const auto& row :
         pqxx::nontransaction(*admin_conn)
             .exec("SELECT c.relname, pg_size_pretty(pg_total_relation_size(c.oid)),"
                   " pg_size_pretty(pg_indexes_size(c.oid)), c.reltuples::bigint,"
                   " CASE WHEN c.reltuples > 0 THEN (pg_total_relation_size(c.oid) / "
                   "c.reltuples)::bigint"
                   " END FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                   " WHERE c.relkind = 'r' AND n.nspname = 'public'"
                   " ORDER BY pg_total_relation_size(c.oid) DESC LIMIT 6"))
      std::printf("   %-18s %10s (indexes %s), %s rows, %s bytes/row\n", row[0].c_str(),
                  row[1].c_str(), row[2].c_str(), row[3].c_str(),
                  row[4].is_null() ? "-" : row[4].c_str());
    print_sizes(*admin_conn, filler.outcomes());
    if (args.sizes_only) return 0;
    tune(false);
    for (const auto& r : routes_of(url)) {
      const Timing s = sequential(side->http.port(), r.path, args.requests);
      const Timing c = concurrent(side->http.port(), r.path, args.clients, args.per_client);
      std::printf("%-34s %9llu %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %10zu%s\n", r.name.c_str(),
                  static_cast<unsigned long long>(filler.outcomes()), s.q(0.5), s.q(0.95),
                  s.q(0.99), c.q(0.5), c.q(0.95), c.q(0.99), s.bytes,
                  s.failed + c.failed ? "  (failures)" : "");
      std::fflush(stdout);
    }
  }

  // Plans at the largest size: every statement each route runs, with
  // ANALYZE and BUFFERS, from auto_explain in the server log.
  {
    pqxx::nontransaction n(*admin_conn);
    for (const char* s :
         {"session_preload_libraries = 'auto_explain'", "auto_explain.log_min_duration = 0",
          "auto_explain.log_analyze = on", "auto_explain.log_buffers = on",
          "auto_explain.log_nested_statements = on", "auto_explain.log_timing = on"})
      n.exec(std::string("ALTER DATABASE leapfrog SET ") + s);
  }
  side.reset();  // new connections pick the settings up
  side = std::make_unique<ReadSide>(url);
  const std::string plans_path = args.plans.empty() ? "growth-plans.txt" : args.plans;
  std::ofstream plans(plans_path, std::ios::trunc);
  std::printf("\n== plans at %llu outcomes: %s ==\n",
              static_cast<unsigned long long>(filler.outcomes()), plans_path.c_str());
  for (const auto& r : routes_of(url)) {
    httplib::Client c("127.0.0.1", side->http.port());
    c.set_read_timeout(300, 0);
    get_once(c, r.path, nullptr);  // the first run plans; the second is the one kept
    const auto from = log_size(log_path);
    get_once(c, r.path, nullptr);
    std::this_thread::sleep_for(200ms);  // the server writes its log after answering
    const std::string log = log_since(log_path, from);
    plans << "=== " << r.name << ": GET " << r.path << " ===\n" << log << "\n";
    for (const char* table : {"outcomes", "violations", "jobs"}) {
      const std::string seq = std::string("Seq Scan on ") + table;
      if (log.find(seq) != std::string::npos)
        std::printf("%-34s %s\n", r.name.c_str(), seq.c_str());
    }
  }
  {
    pqxx::nontransaction n(*admin_conn);
    n.exec("ALTER DATABASE leapfrog RESET ALL");
  }
  // What each index of the big tables served over the whole run (fill,
  // triage, every route): one never scanned is one no statement needed.
  std::this_thread::sleep_for(1500ms);  // backends flush their counters when idle
  std::printf("\n== index scans over the run ==\n");
  for (const auto& row :
       pqxx::nontransaction(*admin_conn)
           .exec("SELECT relname, indexrelname, idx_scan FROM pg_stat_user_indexes"
                 " WHERE relname IN ('outcomes', 'jobs', 'violations', 'violation_details')"
                 " ORDER BY relname, indexrelname"))
    std::printf("   %-18s %-28s %s\n", row[0].c_str(), row[1].c_str(), row[2].c_str());
  side.reset();
  return 0;
}
