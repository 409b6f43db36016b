// The Backend interface: what the executor needs from a device, and nothing more (ggml's backend interface
// is the model of smallness). A backend owns two arenas allocated once at exactly the planned sizes (device
// memory, refusing more than its budget; host memory, pinned where that matters), runs one node of a Program
// on that node's stream, copies bytes in and out of the device arena, and orders its streams with events.
// Streams: compute, device-to-host and host-to-device; a backend may run them concurrently (cpu: threads,
// cuda: streams), and everything it is asked to do is enqueued on a stream and complete after
// `synchronize()`. The reference backend does everything synchronously, in order, on the calling thread.
// The executor drives a backend; the backend never decides where memory goes (the Program says).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/support/error.h"
#include "lms/support/size.h"

namespace lms {

class Program;

// Streams, numbered; each node of a Program runs on one of them.
enum class StreamId : uint8_t { compute = 0, d2h = 1, h2d = 2 };
inline constexpr int kNumStreams = 3;
std::string_view stream_name(StreamId s);

// An event: recorded on one stream after some work, waited on by another before later work. A Program
// numbers its events 0..num_events-1.
struct EventId {
  uint32_t v = UINT32_MAX;
  friend auto operator<=>(EventId, EventId) = default;
};

// cuda: which convolutions run as cuBLAS gemms instead of cuDNN (backends/cuda/conv_gemm.cc; ungrouped ones with at
// most 3 spatial dimensions): none, the 1x1 unpadded ones (any stride), or those and every strided one (slower than
// cuDNN for resnet50's strided 3x3 and 7x7 ones on an H200, docs/results.md).
enum class ConvGemm : uint8_t { off, one_by_one, strided };

struct BackendOptions {
  int64_t device_budget_bytes = kUnlimitedBytes;  // allocate_arenas refuses a device arena larger than this
  int64_t max_workspace_bytes = int64_t{256} << 20;  // cuda: the largest workspace one node's algorithm may use
  bool allow_tf32 = false;  // cuda: f32 convolutions and matmuls may use TF32 tensor cores (not bit-comparable)
  int64_t max_conv_batch = 0;  // cuda: at most this many samples per cuDNN convolution call (0: the whole batch
                               // unless its workspace passes max_workspace_bytes)
  ConvGemm conv_gemm = ConvGemm::one_by_one;  // cuda: the convolutions (all passes) on cuBLAS gemms, not cuDNN
  int64_t cuda_reserve_bytes = int64_t{512} << 20;  // cuda: GPU memory that must stay free beside the device arena
                                                   // for the kernels CUDA, cuDNN and cuBLAS load on first use
  bool cpu_blocked_layouts = true;  // cpu: activations between convolutions, batch norms and elementwise ops stay in
                                    // oneDNN's blocked layouts (false: every value in the IR's plain layout)
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;

  // Allocates the device and host arenas, once, at exactly these sizes. Error if the device arena exceeds
  // the budget, if memory is not available, or if the arenas already exist.
  virtual Result<void> allocate_arenas(int64_t device_bytes, int64_t host_bytes) = 0;
  virtual int64_t device_arena_bytes() const = 0;
  virtual int64_t host_arena_bytes() const = 0;
  // The host arena as host memory (every backend keeps it addressable by the host).
  virtual std::byte* host_base() = 0;

  // The scratch bytes each node of `scheduled` needs for its kernel (oneDNN scratchpads, cuDNN workspaces), by
  // NodeId, from types and attributes alone: compile() plans them as buffers so that nothing allocates on the
  // side. Backends whose kernels need none return an empty vector.
  virtual Result<std::vector<int64_t>> workspace_bytes(const Graph& scheduled) {
    (void)scheduled;
    return std::vector<int64_t>{};
  }

  // One-time setup for a program (per-node kernel descriptors, events). The program must outlive the
  // backend's use of it; `run` accepts only the prepared program.
  virtual Result<void> prepare(const Program& program) = 0;

  // Enqueues node `n` of the prepared program on its stream. Its inputs are in the arenas at the program's
  // offsets; its outputs go there too. Source ops: inputs and persistent values are written by the executor
  // (copy_to_device); constants are filled by the backend.
  virtual Result<void> run(const Program& program, NodeId n) = 0;

  // How node `n` of the prepared program runs, in a few words, for `lms profile`: the library, primitive or
  // algorithm the backend chose (cuda: cuDNN's algorithm and workspace, batch chunks, a cuBLAS gemm layout; cpu:
  // oneDNN's implementation). Empty when the backend has nothing to say (sources, copies, the reference backend).
  virtual std::string kernel_description(NodeId /*n*/) const { return {}; }

  // Events: `record` marks the point after everything enqueued so far on `stream`; `wait` makes later work
  // on `stream` start only after that point is reached.
  virtual Result<void> record(EventId e, StreamId stream) = 0;
  virtual Result<void> wait(StreamId stream, EventId e) = 0;

  // Copies between host memory and the device arena at `offset` (bounds-checked), synchronously with
  // respect to the host: after the call the bytes have arrived.
  virtual Result<void> copy_to_device(int64_t offset, const void* src, int64_t bytes) = 0;
  virtual Result<void> copy_from_device(int64_t offset, void* dst, int64_t bytes) = 0;

  // Page-locks `bytes` of host memory at `p` (not the host arena) so that copy_to_device from it is one DMA,
  // until unpin_host_memory(p); for buffers reused every step (the trainer's batch), pinned once at start-up.
  // True when pinned; the default pins nothing and says false (host backends copy with memcpy either way).
  // Error: the memory cannot be pinned (copies from it still work, only slower).
  virtual Result<bool> pin_host_memory(void* /*p*/, int64_t /*bytes*/) { return false; }
  virtual void unpin_host_memory(void* /*p*/) {}

  // Validation support (docs/runtime.md, "measured peak"): fills [offset, offset + bytes) of the device arena
  // with `pattern`, and finds the highest byte in a range that no longer holds it (-1 when all still do).
  virtual Result<void> poison_device(int64_t offset, int64_t bytes, std::byte pattern) = 0;
  virtual Result<int64_t> last_changed_byte(int64_t offset, int64_t bytes, std::byte pattern) = 0;

  // Waits until everything enqueued on every stream has finished; reports the first failure of any of it.
  virtual Result<void> synchronize() = 0;

  // When and how long each node of the last step really ran, by NodeId (read after synchronize), for a backend
  // that runs nodes after run() returns (on stream threads); nodes it never ran (sources) keep a default
  // time_point. nullptr: the backend runs a node inside run(), so the caller's clock around run() is its time.
  struct NodeTimes {
    std::vector<std::chrono::steady_clock::time_point> start, end;
  };
  virtual const NodeTimes* node_times() const { return nullptr; }
};

}  // namespace lms
