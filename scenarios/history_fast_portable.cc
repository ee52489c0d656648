// read_history without the fast decoder, for the static VM agent: Debian
// ships simdjson as a shared library only. Every line takes the reference
// path (same results and messages, slower).

#include "scenarios/history_reader.h"

namespace leapfrog::history_detail {

std::unique_ptr<FastDecoder> make_fast_decoder() {
  return nullptr;
}

}  // namespace leapfrog::history_detail
