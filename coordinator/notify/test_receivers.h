#pragma once
// What the notification tests deliver to, in the test: a webhook receiver
// (cpp-httplib on 127.0.0.1:0, on a thread of the test process) that records
// every POST and answers what the test says, a sink that stands for an
// internal service (any request counts, one fixed answer), and an SMTP sink
// (Debian's python3-aiosmtpd, testdata/smtp_sink.py) that keeps each mail in
// a folder.

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/process_util.h"

namespace leapfrog::notify_testing {

// One POST the receiver got, and what it answered.
struct Received {
  std::string delivery;  // X-Leapfrog-Delivery
  std::string event;     // X-Leapfrog-Event
  std::string body;
  int status = 0;
};

class WebhookReceiver {
 public:
  // `answer(request, index)` gives each POST's status (index from 0); it may
  // block (the test then holds the delivery open). Default: 200.
  explicit WebhookReceiver(std::function<int(const Received&, size_t)> answer = nullptr)
      : answer_(std::move(answer)) {
    server_.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      Received r{req.get_header_value("X-Leapfrog-Delivery"),
                 req.get_header_value("X-Leapfrog-Event"), req.body, 200};
      size_t index;
      {
        std::lock_guard<std::mutex> lock(mu_);
        index = seen_++;
      }
      if (answer_) r.status = answer_(r, index);
      res.status = r.status;
      res.set_content("{}", "application/json");
      {
        std::lock_guard<std::mutex> lock(mu_);
        received_.push_back(std::move(r));
      }
      cv_.notify_all();
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0) throw std::runtime_error("webhook receiver: cannot bind 127.0.0.1");
    // Bound and listening already: connections wait in the backlog until
    // the thread accepts them.
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~WebhookReceiver() {
    // stop() before the accept loop runs would leave it running.
    leapfrog::testing::poll_until([&] { return server_.is_running(); }, std::chrono::seconds(10),
                                  std::chrono::milliseconds(1));
    server_.stop();
    thread_.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }

  // POSTs answered so far (the status they got).
  std::vector<Received> received() const {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }
  // POSTs answered with a 2xx for this delivery id.
  size_t accepted(const std::string& delivery) const {
    std::lock_guard<std::mutex> lock(mu_);
    return std::count_if(received_.begin(), received_.end(), [&](const Received& r) {
      return r.delivery == delivery && r.status >= 200 && r.status < 300;
    });
  }
  // Waits until `n` POSTs were answered; false on timeout.
  bool wait_for(size_t n, std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return received_.size() >= n; });
  }

 private:
  std::function<int(const Received&, size_t)> answer_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  size_t seen_ = 0;
  std::vector<Received> received_;
};

// An internal service as a webhook must never reach it (issue 41 §2): on
// 127.0.0.1:0, it counts every request, whatever its method and path, and
// answers each with `status`, `body` and, if given, a Location header.
class RecordingSink {
 public:
  RecordingSink(int status, std::string body, std::string location = "")
      : status_(status), body_(std::move(body)), location_(std::move(location)) {
    server_.set_pre_routing_handler([this](const httplib::Request&, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++hits_;
      }
      res.status = status_;
      if (!location_.empty()) res.set_header("Location", location_);
      res.set_content(body_, "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0) throw std::runtime_error("recording sink: cannot bind 127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~RecordingSink() {
    leapfrog::testing::poll_until([&] { return server_.is_running(); }, std::chrono::seconds(10),
                                  std::chrono::milliseconds(1));
    server_.stop();
    thread_.join();
  }

  int port() const { return port_; }
  std::string url(const std::string& path = "/internal") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  // Requests answered so far.
  size_t hits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return hits_;
  }

 private:
  int status_;
  std::string body_, location_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  size_t hits_ = 0;
};

class SmtpSink {
 public:
  // Starts the sink writing into `dir`/mail, logging to `dir`; throws when
  // it does not come up.
  SmtpSink(const std::string& dir, const std::string& user, const std::string& password)
      : folder_(dir + "/mail") {
    std::filesystem::create_directories(folder_);
    proc_ = std::make_unique<leapfrog::testing::Proc>(
        std::vector<std::string>{"/usr/bin/python3", LEAPFROG_NOTIFY_TESTDATA "/smtp_sink.py", folder_, user,
                                 password},
        dir + "/smtp.out", dir + "/smtp.err");
    const bool up = leapfrog::testing::poll_until(
        [&] {
          const std::string out = leapfrog::testing::slurp(dir + "/smtp.out");
          if (out.find('\n') == std::string::npos) return proc_->exited();
          port_ = std::stoi(out);
          return true;
        },
        std::chrono::seconds(30));
    if (!up || port_ <= 0)
      throw std::runtime_error("the SMTP sink did not start: " +
                               leapfrog::testing::tail_of(dir + "/smtp.err"));
  }

  int port() const { return port_; }
  std::string url() const { return "smtp://127.0.0.1:" + std::to_string(port_); }

  // The mails received so far, in order.
  std::vector<std::string> mails() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(folder_, ec))
      if (e.path().extension() == ".eml") names.push_back(e.path());
    std::sort(names.begin(), names.end());
    std::vector<std::string> out;
    for (const auto& n : names) out.push_back(leapfrog::testing::slurp(n));
    return out;
  }
  bool wait_for(size_t n, std::chrono::milliseconds timeout) const {
    return leapfrog::testing::poll_until([&] { return mails().size() >= n; }, timeout);
  }

 private:
  std::string folder_;
  std::unique_ptr<leapfrog::testing::Proc> proc_;
  int port_ = 0;
};

// The header `name` of a mail ("" if absent).
inline std::string mail_header(const std::string& mail, const std::string& name) {
  const std::string head = mail.substr(0, mail.find("\r\n\r\n"));
  const std::string key = "\r\n" + name + ": ";
  const auto at = ("\r\n" + head).find(key);
  if (at == std::string::npos) return "";
  const auto start = at + key.size() - 2;
  return head.substr(start, head.find("\r\n", start) - start);
}

// The body of a mail.
inline std::string mail_body_of(const std::string& mail) {
  const auto at = mail.find("\r\n\r\n");
  return at == std::string::npos ? "" : mail.substr(at + 4);
}

// Whether the mail's subject and body name issue `issue`, kernel `kernel`,
// and its body carries `link`: what a reader needs to act on it.
inline bool mail_names(const std::string& mail, int64_t issue, const std::string& kernel,
                       const std::string& link) {
  const std::string subject = mail_header(mail, "Subject");
  const std::string body = mail_body_of(mail);
  const std::string id = "#" + std::to_string(issue);
  return subject.find(id) != std::string::npos && subject.find(kernel) != std::string::npos &&
         body.find(id) != std::string::npos && body.find(kernel) != std::string::npos &&
         body.find(link) != std::string::npos;
}

}  // namespace leapfrog::notify_testing
