// Group lease (pg_lease.h).

#include "coordinator/store/pg_lease.h"

#include <exception>
#include <map>
#include <tuple>
#include <vector>

#include "coordinator/store/pg_rows.h"
#include "coordinator/store/pg_util.h"

namespace leapfrog::coord {

void write_leases(PgPool& pool, LeaseBatch& batch) {
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<LeaseBatch::value_type>>
      groups;
  for (auto* item : batch) {
    groups[{item->request.kernel_label, item->request.filesystems, item->request.release}]
        .push_back(item);
  }
  for (auto& [caps, items] : groups) {
    try {
      std::vector<std::optional<v1::Job>> jobs =
          run_autocommit(pool, "lease_job", [&](pqxx::nontransaction& txn) {
            std::vector<std::optional<v1::Job>> out(items.size());
            if (items.size() == 1) {
              const PgLease& l = items[0]->request;
              auto r = txn.exec_prepared("lease_job", l.agent_id, l.deadline_us, l.kernel_label,
                                         l.filesystems, l.release, l.key);
              if (!r.empty()) out[0] = job_from_row(r[0]);
              return out;
            }
            std::vector<std::string> agents, keys;
            std::vector<int64_t> deadlines;
            for (const auto* item : items) {
              agents.push_back(item->request.agent_id);
              deadlines.push_back(item->request.deadline_us);
              keys.push_back(item->request.key);
            }
            for (const auto& r :
                 txn.exec_prepared("lease_jobs", text_array(agents), number_array(deadlines),
                                   std::get<0>(caps), std::get<1>(caps),
                                   static_cast<int64_t>(items.size()), std::get<2>(caps),
                                   text_array(keys))) {
              out.at(r[6].as<size_t>() - 1) = job_from_row(r);
            }
            return out;
          });
      for (size_t i = 0; i < items.size(); ++i) items[i]->result = std::move(jobs[i]);
    } catch (const StoreError& e) {
      for (auto* item : items) item->error = std::make_exception_ptr(e);
    } catch (...) {
      for (auto* item : items) item->error = std::current_exception();
    }
  }
}

}  // namespace leapfrog::coord
