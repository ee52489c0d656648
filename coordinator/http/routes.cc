#include "coordinator/http/routes.h"

#include <filesystem>
#include <fstream>
#include <iterator>

namespace leapfrog::coord {

namespace {

// The dashboard's file types (a Vite build), and a few more.
std::string content_type_of(const std::filesystem::path& path) {
  static const std::vector<std::pair<std::string, std::string>> kTypes = {
      {".html", "text/html"},        {".js", "text/javascript"},    {".mjs", "text/javascript"},
      {".css", "text/css"},          {".json", "application/json"}, {".map", "application/json"},
      {".svg", "image/svg+xml"},     {".png", "image/png"},         {".ico", "image/x-icon"},
      {".woff2", "font/woff2"},      {".woff", "font/woff"},        {".txt", "text/plain"},
      {".wasm", "application/wasm"},
  };
  const std::string ext = path.extension().string();
  for (const auto& [e, type] : kTypes)
    if (e == ext) return type;
  return "application/octet-stream";
}

// Whether `path` names something under the served folder: absolute, and no
// segment that climbs ("..") or that another system reads as a separator.
bool plain_path(const std::string& path) {
  if (path.empty() || path[0] != '/') return false;
  size_t at = 1;
  while (at <= path.size()) {
    const size_t end = std::min(path.find('/', at), path.size());
    const std::string segment = path.substr(at, end - at);
    if (segment == ".." || segment == "." || segment.find('\\') != std::string::npos ||
        segment.find('\0') != std::string::npos)
      return false;
    at = end + 1;
  }
  return true;
}

}  // namespace

void HttpRoutes::add(const std::string& method, const std::string& pattern, Handler handler) {
  routes_.push_back({method, std::regex(pattern), std::move(handler)});
}

void HttpRoutes::serve_files(const std::string& dir) {
  files_dir_ = dir;
}

void HttpRoutes::answer(httplib::Request& req, httplib::Response& res) const {
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  for (const auto& r : routes_) {
    if (r.method != method || !std::regex_match(req.path, req.matches, r.pattern)) continue;
    r.handler(req, res);
    if (res.status == -1) res.status = 200;
    return;
  }
  if (answer_file(req, res)) return;
  res.status = 404;
}

bool HttpRoutes::answer_file(const httplib::Request& req, httplib::Response& res) const {
  namespace fs = std::filesystem;
  if (files_dir_.empty() || (req.method != "GET" && req.method != "HEAD")) return false;
  if (!plain_path(req.path)) return false;
  std::string name = files_dir_ + req.path;
  if (name.back() == '/') name += "index.html";
  std::error_code ec;
  if (!fs::is_regular_file(name, ec)) return false;
  std::ifstream in(name, std::ios::binary);
  if (!in) return false;
  std::string body{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  res.status = 200;
  if (req.ranges.size() == 1) {
    // "bytes=a-b", "bytes=a-" or the suffix "bytes=-n" (-1: absent).
    const auto size = static_cast<ssize_t>(body.size());
    auto [first, last] = req.ranges[0];
    if (first == -1) {
      first = std::max<ssize_t>(0, size - last);
      last = size - 1;
    }
    if (last == -1 || last >= size) last = size - 1;
    if (first >= size || first > last) {
      res.status = 416;
      res.set_header("Content-Range", "bytes */" + std::to_string(size));
      return true;
    }
    res.status = 206;
    res.set_header("Content-Range", "bytes " + std::to_string(first) + "-" + std::to_string(last) +
                                        "/" + std::to_string(size));
    body = body.substr(static_cast<size_t>(first), static_cast<size_t>(last - first + 1));
  }
  res.set_header("Content-Type", content_type_of(name));
  res.body = std::move(body);
  return true;
}

}  // namespace leapfrog::coord
