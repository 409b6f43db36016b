// The cpu backend: the Backend interface on the host CPU with oneDNN kernels. Both arenas are ordinary aligned
// host allocations of exactly the planned sizes (the device one refused above the budget, like the reference
// backend). Each of the three streams (compute, d2h, h2d) is a worker thread running its queue in order, so
// copies really overlap compute the way the copy engines of a GPU would; events order the streams exactly as
// the Program says (a wait enqueued after k records of an event waits for the k-th record to complete, CUDA's
// semantics). `prepare` builds every node's oneDNN primitive once (backends/cpu/dnnl_kernels.h); ops oneDNN
// does not cover yet run the reference kernel on the node's stream thread. dnnl.hpp stays out of this header.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "lms/backends/cpu/dnnl_kernels.h"
#include "lms/runtime/backend.h"
#include "lms/runtime/host_arenas.h"
#include "lms/runtime/kernel.h"

namespace lms {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(BackendOptions opts = {});
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  std::string_view name() const override { return "cpu"; }
  Result<void> allocate_arenas(int64_t device_bytes, int64_t host_bytes) override;
  int64_t device_arena_bytes() const override { return arenas_.device_bytes(); }
  int64_t host_arena_bytes() const override { return arenas_.host_bytes(); }
  std::byte* host_base() override { return arenas_.host(); }
  Result<std::vector<int64_t>> workspace_bytes(const Graph& scheduled) override;
  Result<void> prepare(const Program& program) override;
  Result<void> run(const Program& program, NodeId n) override;
  std::string kernel_description(NodeId n) const override;
  Result<void> record(EventId e, StreamId stream) override;
  Result<void> wait(StreamId stream, EventId e) override;
  Result<void> copy_to_device(int64_t offset, const void* src, int64_t bytes) override;
  Result<void> copy_from_device(int64_t offset, void* dst, int64_t bytes) override;
  Result<void> poison_device(int64_t offset, int64_t bytes, std::byte pattern) override;
  Result<int64_t> last_changed_byte(int64_t offset, int64_t bytes, std::byte pattern) override;
  const NodeTimes* node_times() const override { return &times_; }
  Result<void> synchronize() override;

  // The device arena as host memory (tests look inside it).
  std::byte* device_base() { return arenas_.device(); }
  // Nodes of the prepared program that run a oneDNN primitive or an own loop, and the bytes of their
  // workspaces (planned buffers when the program was compiled with this backend).
  int64_t dnnl_nodes() const;
  int64_t scratchpad_bytes() const;

 private:
  // A unit of work on a stream. `always` work (event records and waits) runs even after an earlier failure on
  // the stream, so that other streams waiting on its events never hang.
  struct Task {
    std::function<Result<void>()> work;
    bool always = false;
  };
  // One stream: a thread running its queue in order.
  struct Stream {
    std::deque<Task> queue;
    bool busy = false;  // a task is running
    std::thread thread;
  };

  void enqueue(StreamId s, Task t);
  void worker(int s);
  // The layout of every value of `g` (null: all plain, when opts_.cpu_blocked_layouts is off).
  Result<cpu::ValueLayoutsPtr> layouts_of(const Graph& g);
  void drain();  // waits until every queue is empty and idle
  Result<void> check_range(std::string_view what, int64_t offset, int64_t bytes) const;
  Result<void> run_node(NodeId n);

  BackendOptions opts_;
  HostArenas arenas_;
  const Program* prepared_ = nullptr;
  BoundCalls calls_;  // every node's kernel call, bound at prepare time
  cpu::DnnlContextPtr dnnl_;
  std::vector<std::unique_ptr<cpu::DnnlKernel>> kernels_;  // by node; null: the reference kernel runs
  NodeTimes times_;  // by node: written by the node's stream thread, read after synchronize

  // Streams and events share one mutex: the work per lock is tiny next to a kernel.
  std::mutex mu_;
  std::condition_variable cv_;
  Stream streams_[kNumStreams];
  bool stopping_ = false;
  std::vector<uint64_t> records_enqueued_;  // by event: records enqueued so far (host side)
  std::vector<uint64_t> records_done_;      // by event: records completed on their stream
  std::optional<Error> first_error_;        // the first failure since the last synchronize
};

}  // namespace lms
