// The compact storage layout (issue 23's storage target) against a real
// PostgreSQL: a database in the layout before each migration migrates, and
// reads back exactly what it read before; the layout checks fire on the old
// layout (their positive control), and a changed row shows in the read-back
// (the comparison's).

#include <gtest/gtest.h>

#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "coordinator/pg/test_postgres.h"
#include "coordinator/store/migrations.h"
#include "coordinator/store/pg_store.h"
#include "coordinator/store/pg_util.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono_literals;

const TimePoint kT0 = TimePoint(Duration(1'700'000'000'123'456));

v1::Capabilities host_caps() {
  v1::Capabilities c;
  c.set_kernel_label("host");
  c.add_filesystems("tmpfs");
  return c;
}

// An outcome with `n` violations, every third with a typed detail, and a
// run's strings as agents send them (the widening reason twice).
v1::Outcome violating(int n) {
  v1::Outcome o;
  o.set_verdict(n ? v1::VERDICT_VIOLATION : v1::VERDICT_PASS);
  o.set_ops(1000);
  o.set_violation_count(static_cast<uint64_t>(n));
  o.set_clock_source("tsc");
  o.mutable_widening()->set_reason(
      "the kernel has no /sys/kernel/leapfrog_widen (not built with `leapfrog kernel build "
      "--widen`) " +
      std::to_string(n));
  o.mutable_strategy()->set_widening("off (" + o.widening().reason() + ")");
  for (int i = 0; i < n; ++i) {
    auto* v = o.add_violations();
    v->set_kind(i % 2 ? v1::VIOLATION_KIND_STALE_GRANT : v1::VIOLATION_KIND_STALE_ENTRY);
    v->set_actor(static_cast<uint32_t>(i % 3));
    v->set_op("openat");
    v->set_path("a/b/" + std::to_string(i));
    v->set_step(i % 4 - 1);
    v->set_component("b");
    v->set_object("dir:/b");
    v->set_observed("granted");
    v->set_expected("EACCES");
    v->set_invoke_ns(1'000'000 + i);
    v->set_complete_ns(1'000'500 + i);
    if (i % 3 == 2) {
      auto* d = v->mutable_detail();
      d->set_record(static_cast<uint64_t>(i));
      d->add_versions()->set_value("mode=0700");
      d->add_history()->set_op("chmod");
    }
  }
  return o;
}

class PgCompactTest : public testing::PostgresSuite<PgCompactTest> {
 protected:
  void SetUp() override {
    url_ = pg_->url(fresh_database("compact"));
    store_ = std::make_unique<PgStore>(url_);
  }

  pqxx::result sql(const std::string& statement) {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    auto r = txn.exec(statement);
    txn.commit();
    return r;
  }
  std::string one(const std::string& statement) {
    const auto r = sql(statement);
    return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
  }

  // Every outcome of the campaign with its violations, as the store reads
  // them: the list (newest first) and a page of the outcome filter.
  std::string read_back(int64_t campaign) {
    std::string out;
    for (const auto& o : store_->find_outcomes({.campaign_id = campaign, .limit = 100}))
      out += o.SerializeAsString();
    OutcomeQuery q;
    q.campaign_id = campaign;
    q.with_violations = true;
    for (const auto& o : store_->page_outcomes(q).items) out += o.SerializeAsString();
    return out;
  }

  bool has_index(const std::string& name) {
    return one("SELECT count(*) FROM pg_indexes WHERE indexname = '" + name + "'") == "1";
  }

  std::string url_;
  std::unique_ptr<PgStore> store_;
};

// Migration 16: violations indexed by outcome (deduplicated), not by row;
// jobs_scenario_kernel dropped.
TEST_F(PgCompactTest, ViolationsIndexedByOutcomeMigrateAndReadBackIdentically) {
  std::vector<NewJob> jobs;
  for (int i = 0; i < 4; ++i) {
    NewJob j;
    j.spec.set_scenario("setattr-lookup");
    j.spec.set_fs("tmpfs");
    j.spec.set_seed(static_cast<uint64_t>(i));
    j.kernel_label = "host";
    jobs.push_back(j);
  }
  v1::CampaignSpec spec;
  spec.set_name("compact");
  const int64_t campaign = store_->create_campaign(spec, jobs, 0, kT0);
  std::vector<v1::Job> leased;
  for (int n : {600, 5, 0, 37}) {
    auto job = store_->lease_job("a", host_caps(), kT0, 30s);
    ASSERT_TRUE(job);
    ASSERT_EQ(store_->report_outcome("a", job->job_id(), job->attempt(), violating(n), kT0 + 1s),
              ReportResult::Stored);
    leased.push_back(*job);
  }
  ASSERT_EQ(one("SELECT count(*) FROM violations"), "642");
  // The new layout: no unique index on the rows, one on the outcome's key.
  EXPECT_TRUE(has_index("violations_outcome"));
  EXPECT_FALSE(has_index("violations_pkey"));
  EXPECT_FALSE(has_index("jobs_scenario_kernel"));
  // The rows of an outcome stay written once: a duplicate report adds none.
  EXPECT_EQ(store_->report_outcome("a", leased[0].job_id(), leased[0].attempt(), violating(600),
                                   kT0 + 2s),
            ReportResult::Duplicate);
  EXPECT_EQ(one("SELECT count(*) FROM violations"), "642");
  const std::string before = read_back(campaign);
  ASSERT_FALSE(before.empty());
  // The reads of one outcome's rows walk the new index.
  std::string plan;
  for (const auto& r :
       sql("SET enable_seqscan = off; EXPLAIN SELECT kind FROM violations WHERE job_id = " +
           std::to_string(leased[0].job_id()) + " AND attempt = 1 ORDER BY idx"))
    plan += r[0].as<std::string>() + "\n";

  // The layout before migration 16.
  store_.reset();
  sql("ALTER TABLE violations ADD PRIMARY KEY (job_id, attempt, idx);"
      " DROP INDEX violations_outcome;"
      " CREATE INDEX jobs_scenario_kernel ON jobs (scenario, kernel_label);"
      " DELETE FROM schema_migrations WHERE version = 16");
  // Positive control: the layout checks see the old layout.
  EXPECT_TRUE(has_index("violations_pkey"));
  EXPECT_TRUE(has_index("jobs_scenario_kernel"));
  EXPECT_FALSE(has_index("violations_outcome"));
  const auto pkey_size = std::stoll(one("SELECT pg_relation_size('violations_pkey')"));
  store_ = std::make_unique<PgStore>(url_);  // applies 16 again
  EXPECT_EQ(one("SELECT count(*) FROM schema_migrations WHERE version = 16"), "1");
  EXPECT_TRUE(has_index("violations_outcome"));
  EXPECT_FALSE(has_index("violations_pkey"));
  EXPECT_FALSE(has_index("jobs_scenario_kernel"));
  EXPECT_EQ(read_back(campaign), before);
  const auto new_size = std::stoll(one("SELECT pg_relation_size('violations_outcome')"));
  EXPECT_NE(plan.find("violations_outcome"), std::string::npos) << plan;
  // Deduplicated: a few entries for 642 rows, against one per row.
  EXPECT_LT(new_size * 2, pkey_size) << new_size << " vs " << pkey_size;

  // Positive control of the comparison: a changed row reads back changed.
  sql("UPDATE violations SET observed = 'denied' WHERE idx = 3 AND job_id = " +
      std::to_string(leased[1].job_id()));
  EXPECT_NE(read_back(campaign), before);
}

// The outcome value's codec: a packed value reads back as the message, a
// short one stays as it is, and a damaged one is an error, not a message.
TEST(OutcomePacking, PacksWhatShrinksAndRefusesWhatDoesNotUnpack) {
  const std::string raw = without_violations(violating(0));
  const std::string packed = pack_outcome(raw);
  ASSERT_EQ(packed[0], '\0');
  EXPECT_LT(packed.size(), raw.size() * 3 / 4) << raw.size();
  EXPECT_EQ(parse_outcome(packed).SerializeAsString(), raw);
  EXPECT_EQ(parse_outcome(raw).SerializeAsString(), raw);  // not packed: read as is
  v1::Outcome small;
  small.set_verdict(v1::VERDICT_PASS);
  EXPECT_EQ(pack_outcome(small.SerializeAsString()), small.SerializeAsString());
  EXPECT_EQ(pack_outcome(""), "");
  std::string damaged = packed;
  damaged.resize(damaged.size() / 2);
  EXPECT_THROW(parse_outcome(damaged), StoreError);
  EXPECT_THROW(parse_outcome(std::string("\0\x05junk!", 7)), StoreError);
}

// Migration 17: outcome values stored before are packed, and the store's
// reads (the list, a page) give the same outcomes.
TEST_F(PgCompactTest, OutcomeValuesStoredBeforeArePackedAndReadBackIdentically) {
  std::vector<NewJob> jobs;
  for (int i = 0; i < 3; ++i) {
    NewJob j;
    j.spec.set_scenario("setattr-lookup");
    j.spec.set_fs("tmpfs");
    j.spec.set_seed(static_cast<uint64_t>(i));
    j.kernel_label = "host";
    jobs.push_back(j);
  }
  v1::CampaignSpec spec;
  spec.set_name("packed");
  const int64_t campaign = store_->create_campaign(spec, jobs, 0, kT0);
  for (int n : {0, 7, 12}) {
    auto job = store_->lease_job("a", host_caps(), kT0, 30s);
    ASSERT_TRUE(job);
    ASSERT_EQ(store_->report_outcome("a", job->job_id(), job->attempt(), violating(n), kT0 + 1s),
              ReportResult::Stored);
  }
  auto packed = [&] { return one("SELECT count(*) FROM outcomes WHERE get_byte(outcome, 0) = 0"); };
  EXPECT_EQ(packed(), "3");  // the write path packs
  const std::string before = read_back(campaign);
  ASSERT_FALSE(before.empty());
  for (const auto& o : store_->find_outcomes({.campaign_id = campaign}))
    EXPECT_EQ(o.outcome().widening().reason().rfind("the kernel has no", 0), 0u);

  // The layout before migration 17: every value as the serialized message.
  store_.reset();
  {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    for (const auto& r : txn.exec("SELECT job_id, attempt, outcome FROM outcomes")) {
      const std::string raw = parse_outcome(r[2]).SerializeAsString();
      txn.exec_params("UPDATE outcomes SET outcome = $3 WHERE job_id = $1 AND attempt = $2",
                      r[0].as<int64_t>(), r[1].as<int>(), pqxx::binarystring(raw));
    }
    txn.exec("DELETE FROM schema_migrations WHERE version = 17");
    txn.commit();
  }
  EXPECT_EQ(packed(), "0");  // positive control: the check sees none packed
  const auto raw_bytes = std::stoll(one("SELECT sum(length(outcome)) FROM outcomes"));
  store_ = std::make_unique<PgStore>(url_);  // applies 17 again
  EXPECT_EQ(one("SELECT count(*) FROM schema_migrations WHERE version = 17"), "1");
  EXPECT_EQ(packed(), "3");
  EXPECT_LT(std::stoll(one("SELECT sum(length(outcome)) FROM outcomes")) * 4, raw_bytes * 3);
  EXPECT_EQ(read_back(campaign), before);
  {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    EXPECT_EQ(pack_stored_outcomes(txn), 0);  // nothing left to pack
  }

  // Positive control of the comparison: a changed value reads back changed.
  {
    pqxx::connection c(url_);
    pqxx::work txn(c);
    const auto r = txn.exec("SELECT job_id, attempt, outcome FROM outcomes LIMIT 1")[0];
    v1::Outcome o = parse_outcome(r[2]);
    o.set_ops(o.ops() + 1);
    txn.exec_params("UPDATE outcomes SET outcome = $3 WHERE job_id = $1 AND attempt = $2",
                    r[0].as<int64_t>(), r[1].as<int>(),
                    pqxx::binarystring(pack_outcome(o.SerializeAsString())));
    txn.commit();
  }
  EXPECT_NE(read_back(campaign), before);
}

}  // namespace
}  // namespace leapfrog::coord
