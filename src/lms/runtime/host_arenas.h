// The device and host arenas of a backend whose "device" memory is ordinary host memory (reference, cpu): two
// aligned allocations of exactly the planned sizes, made once, refusing a device arena above the budget, plus
// the checks every such backend makes before touching them. `backend` names the backend in errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/runtime/kernel.h"

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

// Backend::workspace_bytes for a backend whose kernels size their scratch from a call's types and attributes:
// `bytes_of` sees each node (its id and its call, with null data pointers); the result is by NodeId, and an error
// names the node.
Result<std::vector<int64_t>> workspace_bytes_from_types(
    const Graph& g, const std::function<Result<int64_t>(NodeId, const KernelCall&)>& bytes_of);

// Every node's KernelCall with its buffers bound to arena addresses, built once when a Program is prepared so that
// running a node costs no lookups.
class BoundCalls {
 public:
  void bind(const Program& program, std::byte* device_base, std::byte* host_base);
  KernelCall call(NodeId n) const;

 private:
  struct Range {
    uint32_t first = 0, count = 0;  // [first, first + count) in refs_
  };
  const Graph* graph_ = nullptr;
  std::vector<TensorRef> refs_;
  struct Workspace {
    void* data = nullptr;
    int64_t bytes = 0;
  };
  std::vector<Range> inputs_, outputs_;  // by node
  std::vector<Workspace> workspaces_;    // by node
};

}  // namespace lms
