// Webhook and SMTP delivery (senders.h).

#include "coordinator/notify/senders.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <mutex>

namespace leapfrog::coord::notify {

namespace {

std::string header_value(std::string s) {
  for (char& c : s)
    if (c == '\r' || c == '\n') c = ' ';
  return s;
}

std::string encoded_subject(const std::string& subject) {
  const std::string s = header_value(subject);
  bool ascii = true;
  for (unsigned char c : s) ascii = ascii && c < 0x80;
  if (ascii) return s;
  std::string out(4 * ((s.size() + 2) / 3) + 1, '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  out.resize(n);
  return "=?UTF-8?B?" + out + "?=";
}

// Every line end as CRLF.
std::string crlf(const std::string& text) {
  std::string out;
  out.reserve(text.size() + text.size() / 40);
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r') continue;
    if (text[i] == '\n') out += '\r';
    out += text[i];
  }
  return out;
}

void curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// A webhook's connection: only to an address its policy checked.
struct Pinned {
  const WebhookDestination& dest;
  bool refused = false;
};

curl_socket_t open_checked(void* data, curlsocktype purpose, curl_sockaddr* address) {
  auto* pinned = static_cast<Pinned*>(data);
  IpAddress a;
  if (purpose != CURLSOCKTYPE_IPCXN || !IpAddress::from_sockaddr(&address->addr, a) ||
      !WebhookPolicy::connects_to(pinned->dest, a)) {
    pinned->refused = true;
    return CURL_SOCKET_BAD;
  }
  return socket(address->family, address->socktype, address->protocol);
}

// The answer's body is never read: the first byte of it ends the transfer
// (the status is known by then).
size_t drop_body(char*, size_t, size_t, void*) {
  return 0;
}

struct Upload {
  const std::string& text;
  size_t at = 0;
};

size_t read_upload(char* buf, size_t size, size_t n, void* data) {
  auto* u = static_cast<Upload*>(data);
  const size_t len = std::min(size * n, u->text.size() - u->at);
  std::memcpy(buf, u->text.data() + u->at, len);
  u->at += len;
  return len;
}

}  // namespace

int post_webhook(const WebhookDestination& dest, const std::string& json,
                 const std::string& delivery_id, const std::string& event_key) {
  curl_once();
  CURL* curl = curl_easy_init();
  if (!curl) throw DeliveryError("cannot start libcurl");
  const std::string url = dest.url.url();
  // A name connects to the addresses checked, not to what a second lookup says.
  std::string resolve = dest.url.host + ":" + std::to_string(dest.url.port) + ":";
  for (size_t i = 0; i < dest.addresses.size(); ++i) {
    const auto& a = dest.addresses[i];
    resolve += (i ? "," : "") + (a.v6 ? "[" + a.text() + "]" : a.text());
  }
  curl_slist* pin = dest.url.host_is_ip ? nullptr : curl_slist_append(nullptr, resolve.c_str());
  curl_slist* headers = nullptr;
  for (const auto& h : std::vector<std::string>{"Content-Type: application/json",
                                                "X-Leapfrog-Delivery: " + delivery_id,
                                                "X-Leapfrog-Event: " + event_key, "Expect:"})
    headers = curl_slist_append(headers, h.c_str());
  Pinned pinned{dest};
  char error[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_PROXY, "");  // never $http_proxy
  if (pin) curl_easy_setopt(curl, CURLOPT_RESOLVE, pin);
  curl_easy_setopt(curl, CURLOPT_OPENSOCKETFUNCTION, open_checked);
  curl_easy_setopt(curl, CURLOPT_OPENSOCKETDATA, &pinned);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "leapfrog-notify");
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, json.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(json.size()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, drop_body);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  const CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_slist_free_all(pin);
  curl_easy_cleanup(curl);
  if (status >= 200 && status <= 299) return static_cast<int>(status);
  if (status >= 100 && status <= 599)
    throw DeliveryError("answered " + std::to_string(status / 100) + "xx");
  // Why, for the operator's log only: the subscriber learns no more than that.
  spdlog::info("notify.webhook_unreachable host=\"{}\" refused_address={} error=\"{}\"",
               dest.url.host, pinned.refused,
               error[0] ? std::string(error) : curl_easy_strerror(rc));
  throw DeliveryError("unreachable");
}

std::string mail_text(const SmtpOptions& smtp, const std::vector<std::string>& to,
                      const std::string& subject, const std::string& body,
                      const std::string& message_id) {
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S +0000", &tm);
  std::string rcpt;
  for (const auto& t : to) rcpt += (rcpt.empty() ? "" : ", ") + header_value(t);
  std::string m;
  m += "Date: " + std::string(date) + "\n";
  m += "From: Leapfrog <" + header_value(smtp.from) + ">\n";
  m += "To: " + rcpt + "\n";
  m += "Subject: " + encoded_subject(subject) + "\n";
  m += "Message-ID: <" + header_value(message_id) + ">\n";
  m += "MIME-Version: 1.0\n";
  m += "Content-Type: text/plain; charset=utf-8\n";
  m += "Content-Transfer-Encoding: 8bit\n";
  m += "Auto-Submitted: auto-generated\n";
  m += "\n" + body;
  if (m.back() != '\n') m += '\n';
  return crlf(m);
}

void send_mail(const SmtpOptions& smtp, const std::vector<std::string>& to,
               const std::string& subject, const std::string& body, const std::string& message_id) {
  if (smtp.url.empty())
    throw DeliveryError("no SMTP server: start the coordinator with --smtp-url smtp://HOST:PORT");
  curl_once();
  const std::string text = mail_text(smtp, to, subject, body, message_id);
  CURL* curl = curl_easy_init();
  if (!curl) throw DeliveryError("cannot start libcurl");
  curl_slist* rcpt = nullptr;
  for (const auto& t : to) rcpt = curl_slist_append(rcpt, ("<" + t + ">").c_str());
  char error[CURL_ERROR_SIZE] = "";
  Upload upload{text};
  const std::string from = "<" + smtp.from + ">";
  curl_easy_setopt(curl, CURLOPT_URL, smtp.url.c_str());
  curl_easy_setopt(curl, CURLOPT_MAIL_FROM, from.c_str());
  curl_easy_setopt(curl, CURLOPT_MAIL_RCPT, rcpt);
  curl_easy_setopt(curl, CURLOPT_READFUNCTION, read_upload);
  curl_easy_setopt(curl, CURLOPT_READDATA, &upload);
  curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(curl, CURLOPT_USE_SSL,
                   static_cast<long>(smtp.require_tls ? CURLUSESSL_ALL : CURLUSESSL_TRY));
  if (!smtp.user.empty()) {
    curl_easy_setopt(curl, CURLOPT_USERNAME, smtp.user.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, smtp.password.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, smtp.timeout_s);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  const CURLcode rc = curl_easy_perform(curl);
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(rcpt);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK)
    throw DeliveryError("mail through " + smtp.url + ": " +
                        (error[0] ? std::string(error) : curl_easy_strerror(rc)) +
                        (code ? " (server said " + std::to_string(code) + ")" : ""));
}

}  // namespace leapfrog::coord::notify
