#pragma once
// What the HTTP server answers, once ConnectionServer has parsed a request:
// handlers written against cpp-httplib's Request and Response, matched by
// method and by a regular expression over the whole path (captures in
// req.matches), as cpp-httplib matched them; then the dashboard's files.

#include <httplib.h>

#include <functional>
#include <regex>
#include <string>
#include <vector>

namespace leapfrog::coord {

class HttpRoutes {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  // Answers `method` requests whose path matches `pattern`; a GET route
  // answers HEAD too.
  void add(const std::string& method, const std::string& pattern, Handler handler);
  void get(const std::string& pattern, Handler handler) { add("GET", pattern, std::move(handler)); }
  // Serves the files under `dir` to GET and HEAD requests no route takes
  // (a path ending in "/" names its index.html), one byte range at most.
  void serve_files(const std::string& dir);
  // Answers `req` with the first route that matches, else a file, else 404.
  void answer(httplib::Request& req, httplib::Response& res) const;

 private:
  bool answer_file(const httplib::Request& req, httplib::Response& res) const;

  struct Route {
    std::string method;
    std::regex pattern;
    Handler handler;
  };
  std::vector<Route> routes_;
  std::string files_dir_;
};

}  // namespace leapfrog::coord
