#pragma once
// Anonymous shared memory that forked actors write their records into.

#include <cstddef>

namespace leapfrog {

class SharedRegion {
 public:
  // Maps `bytes` of zeroed shared memory; pages are committed only when touched.
  // Throws std::system_error if the mapping fails.
  explicit SharedRegion(size_t bytes);
  ~SharedRegion();
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace leapfrog
