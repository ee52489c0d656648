#include "common/ktap/words.h"

#include <cctype>

namespace leapfrog::ktap {

std::string verdict_word(v1::Verdict v) {
  std::string n = v1::Verdict_Name(v);
  if (n.rfind("VERDICT_", 0) == 0) n = n.substr(8);
  for (char& c : n) c = c == '_' ? '-' : static_cast<char>(std::tolower(c));
  return n;
}

std::string alignment_name(v1::Alignment a) {
  switch (a) {
    case v1::ALIGNMENT_FUZZY:
      return "fuzzy";
    case v1::ALIGNMENT_FREE:
      return "free";
    case v1::ALIGNMENT_BOTH:
      return "both";
    default:
      return "";
  }
}

}  // namespace leapfrog::ktap
