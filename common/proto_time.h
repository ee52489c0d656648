#pragma once
// Conversions between the protos' Timestamp and Duration and microsecond
// time: the resolution the coordinator's clock keeps (coordinator/clock.h's
// TimePoint and Duration are these types).

#include <google/protobuf/duration.pb.h>
#include <google/protobuf/timestamp.pb.h>

#include <chrono>
#include <cmath>
#include <cstdint>

namespace leapfrog {

using MicrosTime = std::chrono::time_point<std::chrono::system_clock, std::chrono::microseconds>;
using Micros = std::chrono::microseconds;

inline google::protobuf::Timestamp to_proto(MicrosTime t) {
  google::protobuf::Timestamp ts;
  const int64_t us = t.time_since_epoch().count();
  ts.set_seconds(us / 1'000'000);
  ts.set_nanos(static_cast<int32_t>((us % 1'000'000) * 1000));
  return ts;
}

inline MicrosTime from_proto(const google::protobuf::Timestamp& ts) {
  return MicrosTime(Micros(ts.seconds() * 1'000'000 + ts.nanos() / 1000));
}

inline google::protobuf::Duration to_proto(Micros d) {
  google::protobuf::Duration out;
  out.set_seconds(d.count() / 1'000'000);
  out.set_nanos(static_cast<int32_t>((d.count() % 1'000'000) * 1000));
  return out;
}

inline Micros from_proto(const google::protobuf::Duration& d) {
  return Micros(d.seconds() * 1'000'000 + d.nanos() / 1000);
}

// A Duration in seconds, to the nanosecond: as JSON and reports print it.
inline double seconds_of(const google::protobuf::Duration& d) {
  return static_cast<double>(d.seconds()) + d.nanos() / 1e9;
}

// A Duration of `ns` nanoseconds (seconds and nanos of one sign), and back.
inline google::protobuf::Duration duration_of_ns(int64_t ns) {
  google::protobuf::Duration out;
  out.set_seconds(ns / 1'000'000'000);
  out.set_nanos(static_cast<int32_t>(ns % 1'000'000'000));
  return out;
}

inline int64_t ns_of(const google::protobuf::Duration& d) {
  return d.seconds() * 1'000'000'000 + d.nanos();
}

// A Duration of `s` seconds, rounded to the nanosecond.
inline google::protobuf::Duration duration_of_seconds(double s) {
  return duration_of_ns(std::llround(s * 1e9));
}

}  // namespace leapfrog
