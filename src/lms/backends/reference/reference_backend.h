// The reference backend: the Backend interface in the plainest way. Both arenas are ordinary host memory,
// every call runs synchronously, in order, on the calling thread (so streams and events only need checking,
// not implementing), and each node is one call of run_reference_kernel (backends/reference/kernels.h) on
// pointers into the arenas. Slow and obviously correct: the oracle the other backends are tested against.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "lms/runtime/backend.h"
#include "lms/runtime/host_arenas.h"
#include "lms/runtime/kernel.h"

namespace lms {

class ReferenceBackend final : public Backend {
 public:
  explicit ReferenceBackend(BackendOptions opts = {}) : opts_(opts) {}

  std::string_view name() const override { return "reference"; }
  Result<void> allocate_arenas(int64_t device_bytes, int64_t host_bytes) override;
  int64_t device_arena_bytes() const override { return arenas_.device_bytes(); }
  int64_t host_arena_bytes() const override { return arenas_.host_bytes(); }
  std::byte* host_base() override { return arenas_.host(); }
  Result<void> prepare(const Program& program) override;
  Result<void> run(const Program& program, NodeId n) override;
  Result<void> record(EventId e, StreamId stream) override;
  Result<void> wait(StreamId stream, EventId e) override;
  Result<void> copy_to_device(int64_t offset, const void* src, int64_t bytes) override;
  Result<void> copy_from_device(int64_t offset, void* dst, int64_t bytes) override;
  Result<void> poison_device(int64_t offset, int64_t bytes, std::byte pattern) override;
  Result<int64_t> last_changed_byte(int64_t offset, int64_t bytes, std::byte pattern) override;
  Result<void> synchronize() override { return {}; }

  // The device arena as host memory (tests look inside it).
  std::byte* device_base() { return arenas_.device(); }

 private:
  Result<void> check_range(std::string_view what, int64_t offset, int64_t bytes) const;

  BackendOptions opts_;
  HostArenas arenas_;
  const Program* prepared_ = nullptr;
  BoundCalls calls_;  // every node's kernel call, bound at prepare time
  std::vector<bool> recorded_;  // by event: recorded at least once (waiting on one never recorded is a bug)
};

}  // namespace lms
