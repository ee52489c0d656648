#pragma once
// Where code that learns a fact outside a store transaction (the scheduler)
// hands an event to the notifications (coordinator/notify/). Code inside a
// store transaction calls notify::publish(txn, ...) (outbox.h) instead, so
// the event commits with its fact.

#include "leapfrog/v1/notify.pb.h"

namespace leapfrog::coord::notify {

class EventSink {
 public:
  virtual ~EventSink() = default;
  // Stores `event` once by its key (set) and queues it for the matching
  // subscriptions; false if that key was stored before. Throws StoreError.
  virtual bool publish(const v1::Event& event) = 0;
};

}  // namespace leapfrog::coord::notify
