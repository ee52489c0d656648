// PgStore's VM launchers (migration 10): registrations with the key of their
// secret, the agent names each claimed, and the lease a boot failure ends.
// Rare calls: plain parameterised statements, not prepared ones.

#include <pqxx/pqxx>

#include "coordinator/store/pg_pool.h"
#include "coordinator/store/pg_store.h"
#include "coordinator/store/pg_util.h"

namespace leapfrog::coord {

std::string PgStore::register_launcher(const std::string& name, const std::string& kernel_label,
                                       const std::string& key, TimePoint now) {
  return run_transaction(*pool_, "register_launcher", [&](pqxx::work& txn) {
    return txn
        .exec_params1(
            "INSERT INTO launchers (id, name, kernel_label, secret_sha256, registered_at)"
            " VALUES (gen_random_uuid()::text, $1, $2, $3, lf_ts($4::bigint)) RETURNING id",
            clean(name), clean(kernel_label), clean(key), us(now))[0]
        .as<std::string>();
  });
}

std::optional<LauncherRecord> PgStore::find_launcher(const std::string& id) {
  return run_transaction(
      *pool_, "find_launcher", [&](pqxx::work& txn) -> std::optional<LauncherRecord> {
        auto r = txn.exec_params("SELECT secret_sha256, kernel_label FROM launchers WHERE id = $1",
                                 clean(id));
        if (r.empty()) return std::nullopt;
        return LauncherRecord{clean(id), r[0][0].as<std::string>(), r[0][1].as<std::string>()};
      });
}

ClaimResult PgStore::claim_agent_name(const std::string& launcher_id, const std::string& agent_name,
                                      TimePoint now) {
  return run_transaction(*pool_, "claim_agent_name", [&](pqxx::work& txn) {
    if (txn.exec_params("SELECT 1 FROM launchers WHERE id = $1", clean(launcher_id)).empty())
      return ClaimResult::UnknownLauncher;
    // Inserted first: two launchers claiming one name meet on its key.
    auto mine = txn.exec_params(
        "INSERT INTO launcher_claims (agent_name, launcher_id, claimed_at)"
        " SELECT $1::text, $2::text, lf_ts($3::bigint)"
        " WHERE NOT EXISTS (SELECT 1 FROM agents WHERE name = $1::text)"
        " ON CONFLICT (agent_name) DO NOTHING RETURNING 1",
        clean(agent_name), clean(launcher_id), us(now));
    if (!mine.empty()) return ClaimResult::Claimed;
    auto held = txn.exec_params("SELECT launcher_id FROM launcher_claims WHERE agent_name = $1",
                                clean(agent_name));
    if (held.empty()) return ClaimResult::TakenByAgent;
    return held[0][0].as<std::string>() == clean(launcher_id) ? ClaimResult::Claimed
                                                              : ClaimResult::TakenByLauncher;
  });
}

std::optional<AgentClaim> PgStore::agent_claim(const std::string& agent_name) {
  return run_transaction(*pool_, "agent_claim", [&](pqxx::work& txn) -> std::optional<AgentClaim> {
    auto r = txn.exec_params(
        "SELECT c.launcher_id, lf_us(c.claimed_at), a.capabilities, lf_us(a.registered_at)"
        " FROM launcher_claims c LEFT JOIN agents a ON a.name = c.agent_name"
        " WHERE c.agent_name = $1",
        clean(agent_name));
    if (r.empty()) return std::nullopt;
    AgentClaim claim;
    claim.launcher_id = r[0][0].as<std::string>();
    claim.claimed_at = TimePoint(Duration(r[0][1].as<int64_t>()));
    if (!r[0][2].is_null()) {
      claim.agent = parse<v1::Capabilities>(r[0][2], "agent capabilities");
      claim.registered_at = TimePoint(Duration(r[0][3].as<int64_t>()));
    }
    return claim;
  });
}

AgentJob PgStore::lease_queued_job(const std::string& holder, const std::string& kernel_label,
                                   TimePoint now, Duration lease) {
  return run_autocommit(*pool_, "lease_queued_job", [&](pqxx::nontransaction& txn) {
    // As lease_job, for any file system and release: no job of the kernel
    // can run. No key is recorded (kTrustedCaller).
    auto r = txn.exec_params(
        "UPDATE jobs SET state = 'leased', attempt = attempt + 1, agent_id = $1,"
        "  lease_deadline = lf_ts($2::bigint)"
        " WHERE id = (SELECT id FROM jobs WHERE state = 'queued' AND kernel_label = $3"
        "  AND build IS NULL ORDER BY kernel_label, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
        " RETURNING id, attempt",
        clean(holder), us(now + lease), clean(kernel_label));
    AgentJob out;
    out.agent_id = clean(holder);
    if (!r.empty()) {
      out.job_id = r[0][0].as<int64_t>();
      out.attempt = r[0][1].as<uint32_t>();
    }
    return out;
  });
}

}  // namespace leapfrog::coord
