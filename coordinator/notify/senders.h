#pragma once
// The two ways out, both through libcurl: a webhook POST and a mail through
// an SMTP server. Each throws DeliveryError when the target did not take the
// message; the outbox then retries it later.

#include <stdexcept>
#include <string>
#include <vector>

#include "coordinator/notify/webhook_policy.h"

namespace leapfrog::coord::notify {

// The target did not take it: unreachable, refused, or answered other than
// 2xx. A webhook's error says no more than "unreachable" or the status class
// ("answered 5xx"): it is shown to every token holder, and must neither echo
// what the target said nor tell a closed port from a silent one.
class DeliveryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The coordinator's SMTP settings (`serve --smtp-url ...`).
struct SmtpOptions {
  // smtp://HOST[:PORT] (STARTTLS when offered; required with require_tls)
  // or smtps://HOST[:PORT]; empty: e-mail subscriptions cannot deliver.
  std::string url;
  // The envelope sender and From: header.
  std::string from = "leapfrog@localhost";
  // AUTH credentials; empty user: no AUTH.
  std::string user;
  std::string password;
  // Refuse to send (and to log in) without TLS.
  bool require_tls = false;
  long timeout_s = 30;
};

// POSTs `json` to `dest` (a URL and the addresses WebhookPolicy::check
// resolved and checked: the only ones a socket is opened to) with
// X-Leapfrog-Delivery (the same id on every retry of one delivery, for
// receivers that deduplicate) and X-Leapfrog-Event (the event's key).
// Redirects are not followed; the answer's body is not read. Returns the HTTP
// status (2xx).
int post_webhook(const WebhookDestination& dest, const std::string& json,
                 const std::string& delivery_id, const std::string& event_key);

// Sends one plain-text UTF-8 mail; `message_id` is the same on every retry.
void send_mail(const SmtpOptions& smtp, const std::vector<std::string>& to,
               const std::string& subject, const std::string& body, const std::string& message_id);

// The mail as sent (headers, a blank line, the body; CRLF line ends);
// header values lose any CR or LF, a non-ASCII subject is RFC 2047 encoded.
std::string mail_text(const SmtpOptions& smtp, const std::vector<std::string>& to,
                      const std::string& subject, const std::string& body,
                      const std::string& message_id);

}  // namespace leapfrog::coord::notify
