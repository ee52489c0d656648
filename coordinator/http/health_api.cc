// Liveness, readiness and metrics (docs/api.md): plain text for probes and
// for Prometheus, beside the JSON API. Liveness is the process answering;
// readiness is what the gRPC health service says (the database answered at
// the last maintenance pass) and a migrated schema.

#include <httplib.h>

#include "coordinator/http/api.h"
#include "coordinator/http/routes.h"
#include "coordinator/metrics/coordinator_metrics.h"
#include "coordinator/metrics/exposition.h"

namespace leapfrog::coord {

void register_health_api(HttpRoutes& routes, Store& store, metrics::CoordinatorMetrics* metrics) {
  routes.get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content("ok\n", "text/plain; charset=utf-8");
  });
  routes.get("/readyz", [&store, metrics](const httplib::Request&, httplib::Response& res) {
    const std::string why = metrics             ? metrics->not_ready()
                            : store.reachable() ? ""
                                                : "the database does not answer";
    res.set_header("Cache-Control", "no-store");
    res.status = why.empty() ? 200 : 503;
    res.set_content(why.empty() ? "ready\n" : "not ready: " + why + "\n",
                    "text/plain; charset=utf-8");
  });
  routes.get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    if (!metrics) {
      res.status = 404;
      res.set_content("this server keeps no metrics\n", "text/plain; charset=utf-8");
      return;
    }
    res.set_content(metrics->render(), leapfrog::metrics::kContentType);
  });
}

}  // namespace leapfrog::coord
