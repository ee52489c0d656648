#pragma once
// `leapfrog serve` and `leapfrog up`: the coordinator process.

#include <string>
#include <vector>

namespace leapfrog::cli {

struct ServeOptions {
  // Folder for the embedded database, the token and the address file.
  std::string data_dir = "/var/tmp/leapfrog";
  // Existing PostgreSQL server (libpq URL); empty: the embedded one.
  std::string database;
  std::string listen = "127.0.0.1:7070";
  std::string token_file;  // default: <data_dir>/token, generated if missing
  int agents = 0;          // local agents to start (`up`)
  int vms = 0;             // VMs to boot (`up --vms`), with vm_kernel
  std::string vm_kernel;
  int lease_ms = 10000;    // lease length without a heartbeat
  int retain_days = 0;     // retention: trim outcomes older than this (0 keeps all)
  int heartbeat_ms = 2000; // how often agents heartbeat
  // Dashboard and JSON API (HOST:PORT, port 0: a free one); written to <data_dir>/http.
  std::string http_listen = "127.0.0.1:0";
  // Build caches (`kernel build --cache-dir`) whose logs the dashboard shows,
  // besides $LEAPFROG_CACHE or /var/cache/leapfrog.
  std::vector<std::string> build_caches;
  // Host header values the HTTP server answers besides 127.0.0.1/localhost.
  std::vector<std::string> http_allowed_hosts;
  // Built dashboard assets; empty: <folder of the executable>/../dashboard/dist.
  std::string dashboard_dir;
  // Nightly exports (coordinator/export/nightly.h): each finished scheduled
  // campaign written to this folder in each format; empty: none.
  std::string export_dir;
  std::vector<std::string> export_formats;  // empty: kcidb
  // KCIDB origin of the exports (nightly files and the HTTP route).
  std::string export_origin = "leapfrog";
  // Notifications (coordinator/notify/): the SMTP server of e-mail
  // subscriptions (smtp:// or smtps://; empty: mails wait until one is set),
  // its sender and login (the password read from a file), and the base of the
  // links in messages (empty: the HTTP address).
  std::string smtp_url;
  std::string smtp_from = "leapfrog@localhost";
  std::string smtp_user;
  std::string smtp_password_file;
  bool smtp_require_tls = false;
  std::string link_base;
  // Where webhooks may go (`--webhook-allow`: host names, addresses, CIDR
  // networks); empty: public addresses only (notify/webhook_policy.h).
  std::vector<std::string> webhook_allow;
  int notify_retry_ms = 10'000;       // first retry after a failed delivery, then doubling
  int notify_poll_ms = 1000;          // outbox poll
  int notify_unserved_after_s = 600;  // a nightly's jobs waiting this long with no agent
};

// Runs until SIGINT/SIGTERM; returns the exit code. Throws on setup failure.
int serve(const ServeOptions& opts);

}  // namespace leapfrog::cli
