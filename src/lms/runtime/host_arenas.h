// The device and host arenas of a backend whose "device" memory is ordinary host memory (reference, cpu): two
// aligned allocations of exactly the planned sizes, made once, refusing a device arena above the budget, plus
// the checks every such backend makes before touching them. `backend` names the backend in errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "lms/support/error.h"

namespace lms {

class Program;

class HostArenas {
 public:
  Result<void> allocate(std::string_view backend, int64_t device_bytes, int64_t host_bytes, int64_t budget_bytes);
  // The program's arenas fit the allocated ones (and they were allocated).
  Result<void> check_program(std::string_view backend, const Program& program) const;
  // [offset, offset + bytes) lies inside the device arena; `what` names the access in the error.
  Result<void> check_range(std::string_view backend, std::string_view what, int64_t offset, int64_t bytes) const;

  std::byte* device() const { return device_.get(); }
  std::byte* host() const { return host_.get(); }
  int64_t device_bytes() const { return device_bytes_; }  // -1 before allocate
  int64_t host_bytes() const { return host_bytes_; }

 private:
  struct FreeDeleter {
    void operator()(std::byte* p) const;
  };
  using Arena = std::unique_ptr<std::byte, FreeDeleter>;
  Arena device_, host_;
  int64_t device_bytes_ = -1, host_bytes_ = -1;  // -1: not allocated
};

}  // namespace lms
