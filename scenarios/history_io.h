#pragma once
// JSON Lines serialisation of a History (docs/history-format.md).

#include <iosfwd>
#include <stdexcept>
#include <string>

#include "scenarios/history.h"

namespace leapfrog {

// A history file that does not follow the format. The message names the line.
class HistoryFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Writes the header line, then every record ordered by invoke time.
void write_history(const History& h, std::ostream& out);

// Reads a history; throws HistoryFormatError("line N: ...") on malformed input.
History read_history(std::istream& in);

// errno <-> portable name ("EACCES"); 0 <-> "ok". Unknown names map to -1.
std::string errno_name(int err);
int errno_from_name(const std::string& name);

}  // namespace leapfrog
