// The cuda backend: the Backend interface on one NVIDIA GPU. The device arena is one cudaMalloc of exactly the
// planned size (refused above the budget); the host arena one pinned allocation (cudaHostAlloc), both made once
// by allocate_arenas, never on the hot path. Three CUDA streams (compute, device-to-host, host-to-device) run
// the Program's nodes, ordered by CUDA events exactly where the Program says; swap_out and swap_in are
// cudaMemcpyAsync on the copy streams between the arenas. `prepare` builds every node's kernel once:
// convolutions, batch norm, pooling and matmul on cuDNN and cuBLAS (cuda_dnn.h), everything else on the
// backend's own kernels (cuda_ops.h, kernel_fns.h); workspaces are planned buffers (workspace_bytes).
// Kernels that meet an id or label outside its range write 0 and flag it in a host-mapped status word that
// synchronize() turns into an error. Each node's start and end are CUDA timing events, read after synchronize
// (node_times). Outside the arenas the CUDA context and the cuDNN and cuBLAS handles hold device memory of their
// own, and the kernels CUDA and the libraries load on first use (lazily, during the first step) take more:
// allocate_arenas refuses an arena that leaves less than BackendOptions::cuda_reserve_bytes of the GPU free.
// This header includes no CUDA header.
#pragma once

#include <memory>
#include <string>

#include "lms/runtime/backend.h"

namespace lms {

class CudaBackend final : public Backend {
 public:
  // The backend on GPU 0. Errors: no usable GPU (the reason CUDA gives), or a library handle that cannot be made.
  static Result<std::unique_ptr<CudaBackend>> create(BackendOptions opts = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  Result<void> allocate_arenas(int64_t device_bytes, int64_t host_bytes) override;
  int64_t device_arena_bytes() const override;
  int64_t host_arena_bytes() const override;
  std::byte* host_base() override;
  Result<std::vector<int64_t>> workspace_bytes(const Graph& scheduled) override;
  Result<void> prepare(const Program& program) override;
  Result<void> run(const Program& program, NodeId n) override;
  std::string kernel_description(NodeId n) const override;
  Result<void> record(EventId e, StreamId stream) override;
  Result<void> wait(StreamId stream, EventId e) override;
  Result<void> copy_to_device(int64_t offset, const void* src, int64_t bytes) override;
  Result<bool> pin_host_memory(void* p, int64_t bytes) override;
  void unpin_host_memory(void* p) override;
  Result<void> copy_from_device(int64_t offset, void* dst, int64_t bytes) override;
  Result<void> poison_device(int64_t offset, int64_t bytes, std::byte pattern) override;
  Result<int64_t> last_changed_byte(int64_t offset, int64_t bytes, std::byte pattern) override;
  Result<void> synchronize() override;
  const NodeTimes* node_times() const override;

  // The GPU's name and memory, for reports ("NVIDIA H200, 139.8 GiB").
  std::string device_description() const;

 private:
  struct Impl;
  explicit CudaBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace lms
