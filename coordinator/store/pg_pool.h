#pragma once
// The connection pool under PgStore, the error policy every store call
// follows (run_in): lost connections become StoreError with unavailable()
// true and are replaced on the next call; a pooled connection found dead is
// retried once on a fresh one; serialization failures and deadlocks are
// retried; anything else is StoreError with unavailable() false. Also the
// group commit (PgGroupCommit) that lets concurrent calls share a statement
// or a transaction.

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "coordinator/store/pg_stats.h"
#include "coordinator/store/store.h"

namespace leapfrog::coord {

// A statement prepared on every pooled connection.
struct PgStatement {
  std::string name;
  std::string sql;
};

// A session setting (SET name = value) made on every pooled connection.
struct PgSetting {
  std::string name;
  std::string value;
};

// At most `size` connections, opened on demand; callers beyond wait for one.
class PgPool {
 public:
  PgPool(std::string url, int size, std::vector<PgStatement> statements,
         std::vector<PgSetting> settings = {});
  ~PgPool();

  // A connection lent to one call; returned to the pool when destroyed.
  class Handle {
   public:
    Handle(PgPool* pool, std::unique_ptr<pqxx::connection> conn, bool reused)
        : pool_(pool), conn_(std::move(conn)), reused_(reused) {}
    Handle(Handle&& o) noexcept
        : pool_(std::exchange(o.pool_, nullptr)),
          conn_(std::move(o.conn_)),
          reused_(o.reused_),
          broken_(o.broken_) {}
    Handle& operator=(Handle&&) = delete;
    ~Handle() {
      if (pool_) pool_->give_back(std::move(conn_), broken_);
    }
    pqxx::connection& conn() { return *conn_; }
    // Came from the pool, rather than connected for this call.
    bool reused() const { return reused_; }
    // Close the connection instead of returning it.
    void discard() { broken_ = true; }

   private:
    PgPool* pool_;
    std::unique_ptr<pqxx::connection> conn_;
    bool reused_;
    bool broken_ = false;
  };

  // An idle connection, or a new one while fewer than `size` are open; waits
  // otherwise. Throws what pqxx throws when it cannot connect.
  Handle acquire();
  // Closes every idle connection: once one was found dead, the others (from
  // the same server lifetime) are dead too.
  void drop_idle();
  // How many connections are open, idle and waited for (`name` names the pool).
  PgPoolUse use(const std::string& name);

 private:
  void give_back(std::unique_ptr<pqxx::connection> conn, bool broken);

  std::string url_;
  int size_;
  std::vector<PgStatement> statements_;
  std::vector<PgSetting> settings_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<pqxx::connection>> idle_;
  int open_ = 0;
  int waiting_ = 0;
  uint64_t waits_ = 0;
};

// Group commit: concurrent callers' requests written together. A caller
// queues its request; if no batch is being written, or fewer than `writers`
// are and at least `min_extra_batch` requests wait, it takes everything
// queued (up to `max_batch`) and writes it as one batch itself; otherwise it
// waits: the requests queued while a batch is being written form the next
// batch. Each caller gets its own result or error.
template <class Request, class Result>
class PgGroupCommit {
 public:
  // One queued request; the writer sets `result` or `error` on each.
  struct Item {
    explicit Item(const Request& r) : request(r) {}
    const Request& request;
    std::optional<Result> result;
    std::exception_ptr error;

   private:
    friend class PgGroupCommit;
    bool done = false;
    std::condition_variable cv;
  };
  using Batch = std::vector<Item*>;

  PgGroupCommit(int writers, size_t max_batch, size_t min_extra_batch = 1)
      : writers_(std::max(writers, 1)),
        max_batch_(std::max<size_t>(max_batch, 1)),
        min_extra_batch_(std::clamp<size_t>(min_extra_batch, 1, max_batch_)) {}

  // Queues `request` and returns its result once some caller's `write(batch)`
  // has handled it (write sets a result or an error on every item; what it
  // throws becomes the error of the items it left unset). Rethrows the
  // item's error.
  template <class Write>
  Result submit(const Request& request, Write&& write) {
    Item item(request);
    std::unique_lock<std::mutex> lock(mu_);
    queue_.push_back(&item);
    while (!item.done) {
      if (writing_ >= writers_ || (writing_ > 0 && queue_.size() < min_extra_batch_)) {
        item.cv.wait(lock);
        continue;
      }
      ++writing_;
      Batch batch;
      while (!queue_.empty() && batch.size() < max_batch_) {
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
      if (!queue_.empty() && writing_ < writers_) queue_.front()->cv.notify_one();
      lock.unlock();
      try {
        write(batch);
      } catch (...) {
        for (Item* i : batch) {
          if (!i->result && !i->error) i->error = std::current_exception();
        }
      }
      lock.lock();
      // Waiters cannot return (and destroy their item) before we unlock.
      for (Item* i : batch) {
        i->done = true;
        i->cv.notify_one();
      }
      --writing_;
      if (!queue_.empty()) queue_.front()->cv.notify_one();  // the next writer
    }
    lock.unlock();
    if (item.error) std::rethrow_exception(item.error);
    return std::move(*item.result);
  }

  // Requests waiting for a writer.
  size_t queued() {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
  }

 private:
  const int writers_;
  const size_t max_batch_;
  const size_t min_extra_batch_;
  std::mutex mu_;
  std::deque<Item*> queue_;
  int writing_ = 0;
};

// Group commit on threads of its own: callers queue a request with a
// callback and return at once; `writers` writer threads take what is queued
// (up to `max_batch`) and write it as one batch, and call each request's
// callback once the batch is written. While a batch is being written, another
// writer starts only once `min_extra_batch` requests wait. Unlike
// PgGroupCommit, no caller's thread waits for the database (a gRPC callback
// handler must not block).
template <class Request, class Result>
class PgBatchWriter {
 public:
  // One queued request; `write` sets `result` or `error` on each.
  struct Item {
    Request request;
    std::optional<Result> result;
    std::exception_ptr error;
    std::function<void(Item&)> done;
  };
  using Batch = std::vector<Item*>;
  using Write = std::function<void(Batch&)>;

  PgBatchWriter(int writers, size_t max_batch, size_t min_extra_batch, Write write)
      : writers_(std::max(writers, 1)),
        max_batch_(std::max<size_t>(max_batch, 1)),
        min_extra_batch_(std::clamp<size_t>(min_extra_batch, 1, max_batch_)),
        write_(std::move(write)) {
    for (int i = 0; i < writers_; ++i) threads_.emplace_back([this] { run(); });
  }
  // Writes what is still queued, then stops the writers.
  ~PgBatchWriter() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  PgBatchWriter(const PgBatchWriter&) = delete;
  PgBatchWriter& operator=(const PgBatchWriter&) = delete;

  // Queues `request`; `done(item)` runs on a writer thread once the item has
  // its result or error (what `write` throws becomes the error of the items
  // it left unset). `done` must not throw.
  void post(Request request, std::function<void(Item&)> done) {
    auto item =
        std::make_unique<Item>(Item{std::move(request), std::nullopt, nullptr, std::move(done)});
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(item.release());
      wake = ready();
    }
    if (wake) cv_.notify_one();
  }

  // As post, but waits for the result on this thread; rethrows the item's error.
  Result submit(Request request) {
    std::mutex mu;
    std::condition_variable cv;
    bool finished = false;
    std::optional<Result> result;
    std::exception_ptr error;
    post(std::move(request), [&](Item& item) {
      std::lock_guard<std::mutex> lock(mu);
      result = std::move(item.result);
      error = item.error;
      finished = true;
      cv.notify_one();  // under the lock: the waiter's cv lives until it sees `finished`
    });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return finished; });
    if (error) std::rethrow_exception(error);
    return std::move(*result);
  }

  // Requests waiting for a writer.
  size_t queued() {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
  }

 private:
  // Under mu_: a waiting writer may take a batch now.
  bool ready() const {
    if (queue_.empty() || writing_ >= writers_) return false;
    return writing_ == 0 || queue_.size() >= min_extra_batch_;
  }

  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return ready() || (stopping_ && queue_.empty()); });
      if (queue_.empty()) return;  // stopping, and everything was written
      ++writing_;
      Batch batch;
      while (!queue_.empty() && batch.size() < max_batch_) {
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
      const bool more = ready();
      lock.unlock();
      if (more) cv_.notify_one();
      try {
        write_(batch);
      } catch (...) {
        for (Item* i : batch) {
          if (!i->result && !i->error) i->error = std::current_exception();
        }
      }
      for (Item* i : batch) {
        if (!i->result && !i->error)
          i->error = std::make_exception_ptr(std::logic_error("batch writer set no result"));
        i->done(*i);
        delete i;
      }
      lock.lock();
      --writing_;
    }
  }

  const int writers_;
  const size_t max_batch_;
  const size_t min_extra_batch_;
  const Write write_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item*> queue_;
  int writing_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;  // last: started once the rest is initialised
};

// SQLSTATEs meaning the connection is gone or the server cannot serve now.
bool pg_connection_lost(const std::string& sqlstate);
// SQLSTATEs worth retrying the whole transaction for.
bool pg_transient(const std::string& sqlstate);
// A server message on one line (they span several, with tabs).
std::string pg_one_line(const char* message);
// StoreError(unavailable), logged once.
StoreError pg_unavailable(const char* call, const std::string& why);
// Inside a catch block: rethrows the current exception as a StoreError.
[[noreturn]] void pg_rethrow_as_store_error(const char* call);

// Runs `fn(txn)` on a pooled connection, with the error policy above, in a
// transaction of type Txn (pqxx::work, or pqxx::nontransaction for one
// autocommit statement); commits it and returns what `fn` returns. `call`
// names the store call in errors and logs.
template <class Txn, class F>
auto run_in(PgPool& pool, const char* call, F&& fn) {
  using R = std::invoke_result_t<F&, Txn&>;
  for (int attempt = 1;; ++attempt) {
    std::optional<PgPool::Handle> handle;
    try {
      handle.emplace(pool.acquire());
    } catch (...) {
      pg_rethrow_as_store_error(call);
    }
    bool retry_fresh = handle->reused() && attempt == 1;
    try {
      Txn txn(handle->conn());
      if constexpr (std::is_void_v<R>) {
        fn(txn);
        txn.commit();
        return;
      } else {
        R result = fn(txn);
        txn.commit();
        return result;
      }
    } catch (const pqxx::in_doubt_error& e) {
      handle->discard();
      throw pg_unavailable(call,
                           "the connection broke during commit; the change may or may not be "
                           "stored: " +
                               pg_one_line(e.what()));
    } catch (const pqxx::broken_connection& e) {
      handle->discard();
      // A pooled connection that died while idle (the server restarted): once more, fresh.
      if (!retry_fresh) throw pg_unavailable(call, pg_one_line(e.what()));
      pool.drop_idle();
    } catch (const pqxx::sql_error& e) {
      if (pg_connection_lost(e.sqlstate())) {
        handle->discard();
        if (!retry_fresh) throw pg_unavailable(call, pg_one_line(e.what()));
        pool.drop_idle();
      } else if (!pg_transient(e.sqlstate()) || attempt >= 3) {
        throw StoreError(std::string(call) + ": " + pg_one_line(e.what()), false);
      }
    } catch (const StoreError&) {
      throw;
    } catch (const std::exception& e) {
      throw StoreError(std::string(call) + ": " + pg_one_line(e.what()), false);
    }
  }
}

// `fn(txn)` in one transaction (BEGIN ... COMMIT).
template <class F>
auto run_transaction(PgPool& pool, const char* call, F&& fn) {
  return run_in<pqxx::work>(pool, call, std::forward<F>(fn));
}

// `fn(txn)` issuing ONE statement in autocommit: one round trip instead of
// three. A statement is atomic by itself; if the connection breaks while it
// runs, its outcome is unknown just as for a broken COMMIT (and the call may
// be retried once on a fresh connection, so only use it where a repeat is
// harmless: a lease nobody saw expires).
template <class F>
auto run_autocommit(PgPool& pool, const char* call, F&& fn) {
  return run_in<pqxx::nontransaction>(pool, call, std::forward<F>(fn));
}

}  // namespace leapfrog::coord
