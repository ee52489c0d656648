// Webhook and SMTP delivery (senders.h).

#include "coordinator/notify/senders.h"

#include <curl/curl.h>
#include <httplib.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <mutex>

namespace leapfrog::coord::notify {

int post_webhook(const std::string& url, const std::string& json, const std::string& delivery_id,
                 const std::string& event_key) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos ||
      (url.compare(0, scheme, "http") != 0 && url.compare(0, scheme, "https") != 0))
    throw DeliveryError("bad webhook URL \"" + url + "\"");
  const size_t path_at = url.find('/', scheme + 3);
  const std::string origin = url.substr(0, path_at);
  const std::string path = path_at == std::string::npos ? "/" : url.substr(path_at);
  httplib::Client client(origin);
  client.set_connection_timeout(10);
  client.set_read_timeout(30);
  client.set_write_timeout(30);
  httplib::Headers headers = {{"X-Leapfrog-Delivery", delivery_id},
                              {"X-Leapfrog-Event", event_key},
                              {"User-Agent", "leapfrog-notify"}};
  auto res = client.Post(path, headers, json, "application/json");
  if (!res) throw DeliveryError("POST " + url + ": " + httplib::to_string(res.error()));
  if (res->status < 200 || res->status > 299)
    throw DeliveryError("POST " + url + " answered " + std::to_string(res->status) + ": " +
                        res->body.substr(0, 200));
  return res->status;
}

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
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
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
