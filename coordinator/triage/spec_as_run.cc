#include "coordinator/triage/spec_as_run.h"

#include <vector>

#include "scenarios/widen_request.h"

namespace leapfrog::coord::triage {

v1::ScenarioSpec spec_as_run(const v1::ScenarioSpec& spec, const v1::Outcome& outcome) {
  v1::ScenarioSpec s = spec;
  if (!outcome.has_strategy()) return s;
  const v1::RaceStrategy& st = outcome.strategy();
  switch (st.alignment()) {
    case v1::ALIGNMENT_FUZZY:
      s.set_align("fuzzy");
      break;
    case v1::ALIGNMENT_FREE:
      s.set_align("free");
      break;
    case v1::ALIGNMENT_BOTH:
      s.set_align("both");
      break;
    default:
      break;  // not reported: as the job said
  }
  if (st.observers() > 0) s.set_observers(st.observers());
  s.set_pin(st.pinned() ? v1::CPU_PINNING_ON : v1::CPU_PINNING_OFF);
  // The delay points exactly as the run set them (off when it set none),
  // whatever the seed would choose on another kernel or a later agent.
  if (outcome.has_widening()) {
    std::vector<WidenPoint> points;
    if (outcome.widening().on())
      for (const auto& p : outcome.widening().points())
        points.push_back(WidenPoint{p.name(), p.probability_ppm(), p.delay_ns(), p.uid(), 0});
    s.set_widen(widen::format_request(points));
  }
  return s;
}

}  // namespace leapfrog::coord::triage
