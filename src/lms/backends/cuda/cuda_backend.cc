// The cuda backend (see cuda_backend.h): arenas, streams, events, per-node kernels, timing and validation.
#include "lms/backends/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lms/backends/cuda/cuda_dnn.h"
#include "lms/backends/cuda/cuda_ops.h"
#include "lms/backends/cuda/kernel_fns.h"
#include "lms/ir/verifier.h"
#include "lms/runtime/host_arenas.h"
#include "lms/runtime/program.h"

namespace lms {

namespace {

// "cudaMalloc (device arena of 1073741824 bytes): out of memory". A failed call's error is also cleared from
// the runtime's last-error slot (a no-op for sticky errors), so that a later cudaGetLastError does not blame it
// on a kernel.
Result<void> check(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return {};
  (void)cudaGetLastError();
  return fail("cuda backend: {}: {}", what, cudaGetErrorString(e));
}

// The cache key of a call's workspace size: its op, attributes and operand types, all the size depends on.
std::string workspace_key(const KernelCall& call) {
  std::string key(op_def(call.op).name);
  for (const auto& [name, value] : call.attrs->entries()) key += fmt::format(" {}={}", name, to_string(value));
  for (const TensorRef& r : call.inputs) key += fmt::format(" {}", to_string(*r.type));
  key += " ->";
  for (const TensorRef& r : call.outputs) key += fmt::format(" {}", to_string(*r.type));
  return key;
}

// The host staging chunk last_changed_byte reads the arena through (validation mode only, not the hot path).
constexpr int64_t kScanChunkBytes = int64_t{64} << 20;

struct DeviceFree {
  void operator()(std::byte* p) const { cudaFree(p); }
};
struct HostFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};

}  // namespace

struct CudaBackend::Impl {
  BackendOptions opts;
  cudaDeviceProp props{};
  std::array<cudaStream_t, kNumStreams> streams{};
  cuda::DnnContextPtr dnn;
  // cuDNN/cuBLAS workspace sizes by workspace_key: planning asks for every node of every candidate graph (auto
  // plans exactly dozens of times per plan, maxbatch plans dozens of sizes), and each answer costs heuristics
  // queries; the answer depends on the key and the context's options alone.
  std::map<std::string, int64_t> workspace_cache;
  std::unique_ptr<std::byte, DeviceFree> device;
  std::unique_ptr<std::byte, HostFree> host;
  int64_t device_bytes = -1, host_bytes = -1;  // -1: not allocated
  std::unique_ptr<int32_t, HostFree> status;   // host-mapped status word (kernel_fns.h StatusCode)
  int32_t* status_on_device = nullptr;

  const Program* prepared = nullptr;
  BoundCalls calls;
  // By node: the prepared kernel (empty for sources and copies, which run() handles itself).
  std::vector<std::unique_ptr<cuda::DnnKernel>> dnn_kernels;
  std::vector<std::optional<cuda::OwnKernel>> own_kernels;
  std::vector<cudaEvent_t> events;           // the Program's events (no timing)
  std::vector<uint64_t> records;             // by event: records enqueued so far
  std::vector<cudaEvent_t> starts, ends;     // by node: timing events
  std::vector<NodeId> ran;                   // nodes enqueued since the last synchronize
  cudaEvent_t origin = nullptr;              // recorded before the first node of a step
  std::chrono::steady_clock::time_point origin_host;
  bool origin_recorded = false;
  NodeTimes times;

  ~Impl() {
    (void)cudaDeviceSynchronize();  // nothing may still run on memory about to be freed
    destroy_events();
    dnn.reset();
    for (cudaStream_t s : streams)
      if (s) cudaStreamDestroy(s);
  }

  void destroy_events() {
    for (auto* list : {&events, &starts, &ends})
      for (cudaEvent_t e : *list)
        if (e) cudaEventDestroy(e);
    events.clear();
    starts.clear();
    ends.clear();
    if (origin) cudaEventDestroy(origin);
    origin = nullptr;
  }

  cudaStream_t stream(StreamId s) const { return streams[static_cast<int>(s)]; }

  Result<void> sync_all() {
    for (cudaStream_t s : streams) LMS_TRY_VOID(check(cudaStreamSynchronize(s), "cudaStreamSynchronize"));
    return {};
  }

  Result<void> check_range(std::string_view what, int64_t offset, int64_t bytes) const {
    if (device_bytes < 0) return fail("cuda backend: {} before the arenas were allocated", what);
    if (offset < 0 || bytes < 0 || offset + bytes > device_bytes)
      return fail("cuda backend: {} of [{}, {}) is outside the device arena of {} bytes", what, offset, offset + bytes,
                  device_bytes);
    return {};
  }
};

CudaBackend::CudaBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaBackend::~CudaBackend() = default;

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(BackendOptions opts) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess)
    return fail("no usable CUDA GPU ({})", cudaGetErrorString(e));
  if (count == 0) return fail("no CUDA GPU found");
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  LMS_TRY_VOID(check(cudaSetDevice(0), "cudaSetDevice(0)"));
  LMS_TRY_VOID(check(cudaGetDeviceProperties(&impl->props, 0), "cudaGetDeviceProperties"));
  for (cudaStream_t& s : impl->streams)
    LMS_TRY_VOID(check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"));
  void* status = nullptr;
  LMS_TRY_VOID(check(cudaHostAlloc(&status, sizeof(int32_t), cudaHostAllocMapped), "cudaHostAlloc (status word)"));
  impl->status.reset(static_cast<int32_t*>(status));
  *impl->status = cuda::kStatusOk;
  void* on_device = nullptr;
  LMS_TRY_VOID(check(cudaHostGetDevicePointer(&on_device, status, 0), "cudaHostGetDevicePointer"));
  impl->status_on_device = static_cast<int32_t*>(on_device);
  cuda::DnnOptions dnn;
  dnn.max_workspace_bytes = opts.max_workspace_bytes;
  dnn.allow_tf32 = opts.allow_tf32;
  dnn.max_conv_batch = opts.max_conv_batch;
  dnn.conv_gemm = opts.conv_gemm;
  impl->dnn = LMS_TRY(cuda::make_dnn_context(impl->streams[static_cast<int>(StreamId::compute)], dnn));
  return std::unique_ptr<CudaBackend>(new CudaBackend(std::move(impl)));
}

std::string CudaBackend::device_description() const {
  return fmt::format("{}, {:.1f} GiB", impl_->props.name,
                     static_cast<double>(impl_->props.totalGlobalMem) / static_cast<double>(int64_t{1} << 30));
}

int64_t CudaBackend::device_arena_bytes() const { return impl_->device_bytes; }
int64_t CudaBackend::host_arena_bytes() const { return impl_->host_bytes; }
std::byte* CudaBackend::host_base() { return static_cast<std::byte*>(impl_->host.get()); }
const Backend::NodeTimes* CudaBackend::node_times() const { return &impl_->times; }

Result<void> CudaBackend::allocate_arenas(int64_t device_bytes, int64_t host_bytes) {
  Impl& m = *impl_;
  if (m.device_bytes >= 0) return fail("cuda backend: the arenas are already allocated");
  if (device_bytes < 0 || host_bytes < 0)
    return fail("cuda backend: arena sizes must not be negative ({} and {})", device_bytes, host_bytes);
  if (device_bytes > m.opts.device_budget_bytes)
    return fail("cuda backend: a device arena of {} bytes exceeds the budget of {} bytes", device_bytes,
                m.opts.device_budget_bytes);
  // One byte at least, so that an empty arena still has an address.
  void* d = nullptr;
  if (cudaError_t e = cudaMalloc(&d, static_cast<size_t>(std::max<int64_t>(device_bytes, 1))); e != cudaSuccess) {
    size_t free = 0, total = 0;
    cudaGetLastError();
    cudaMemGetInfo(&free, &total);
    return fail("cuda backend: cannot allocate the device arena of {} bytes ({}; {} of {} bytes free)", device_bytes,
                cudaGetErrorString(e), free, total);
  }
  m.device.reset(static_cast<std::byte*>(d));
  // The CUDA runtime, cuDNN and cuBLAS load kernels lazily, at their first launch, into device memory outside
  // the arena: an arena that leaves less than the reserve free would fail there, in the middle of a step.
  size_t free = 0, total = 0;
  LMS_TRY_VOID(check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo"));
  if (static_cast<int64_t>(free) < m.opts.cuda_reserve_bytes) {
    m.device.reset();
    return fail("cuda backend: a device arena of {} bytes leaves {} of the GPU's {} bytes free, less than the {} "
                "bytes kept for the kernels CUDA, cuDNN and cuBLAS load on first use: lower the budget",
                device_bytes, free, total, m.opts.cuda_reserve_bytes);
  }
  void* h = nullptr;
  if (cudaError_t e = cudaHostAlloc(&h, static_cast<size_t>(std::max<int64_t>(host_bytes, 1)), cudaHostAllocDefault);
      e != cudaSuccess) {
    m.device.reset();
    cudaGetLastError();
    return fail("cuda backend: cannot allocate the pinned host arena of {} bytes ({})", host_bytes,
                cudaGetErrorString(e));
  }
  m.host.reset(static_cast<std::byte*>(h));
  m.device_bytes = device_bytes;
  m.host_bytes = host_bytes;
  return {};
}

Result<std::vector<int64_t>> CudaBackend::workspace_bytes(const Graph& g) {
  return workspace_bytes_from_types(g, [&](NodeId, const KernelCall& call) -> Result<int64_t> {
    if (cuda::is_own_call(call)) return cuda::own_workspace_bytes(call);
    std::string key = workspace_key(call);
    if (auto it = impl_->workspace_cache.find(key); it != impl_->workspace_cache.end()) return it->second;
    const int64_t bytes = LMS_TRY(cuda::dnn_workspace_bytes(*impl_->dnn, call));
    impl_->workspace_cache.emplace(std::move(key), bytes);
    return bytes;
  });
}

Result<void> CudaBackend::prepare(const Program& program) {
  Impl& m = *impl_;
  m.prepared = nullptr;  // until this program's kernels are all made: a failure leaves nothing runnable
  if (m.device_bytes < 0) return fail("cuda backend: prepare before the arenas were allocated");
  if (program.device_arena_bytes() > m.device_bytes || program.host_arena_bytes() > m.host_bytes)
    return fail("cuda backend: the program needs arenas of {} and {} bytes, the allocated ones are {} and {}",
                program.device_arena_bytes(), program.host_arena_bytes(), m.device_bytes, m.host_bytes);
  LMS_TRY_VOID(m.sync_all());  // nothing of an earlier program may still run on the buffers being rebound
  const Graph& g = program.graph();
  m.calls.bind(program, m.device.get(), static_cast<std::byte*>(m.host.get()));
  m.dnn_kernels.clear();
  m.dnn_kernels.resize(g.num_nodes());
  m.own_kernels.assign(g.num_nodes(), std::nullopt);
  const cuda::Launcher launcher{false, m.stream(StreamId::compute), m.status_on_device};
  for (NodeId n : g.node_ids()) {
    const Op op = g.node(n).op;
    const bool copy = op == Op::swap_out || op == Op::swap_in;
    if (copy || (g.def(n).traits.source && op != Op::constant)) continue;
    if (program.stream(n) != StreamId::compute)
      return fail("cuda backend: {} runs on the {} stream; only copies may leave the compute stream",
                  node_label(g, n), stream_name(program.stream(n)));
    const KernelCall call = m.calls.call(n);
    auto own = cuda::prepare_own_kernel(call, launcher);
    if (!own) return wrap(node_label(g, n), own.error());
    if (*own) {
      m.own_kernels[n.v] = std::move(**own);
      continue;
    }
    auto dnn = cuda::prepare_dnn_kernel(*m.dnn, call);
    if (!dnn) return wrap(node_label(g, n), dnn.error());
    if (!*dnn) return fail("cuda backend: {} has no kernel", node_label(g, n));
    m.dnn_kernels[n.v] = std::move(*dnn);
  }
  m.destroy_events();
  auto make = [](cudaEvent_t& e, unsigned flags) { return check(cudaEventCreateWithFlags(&e, flags), "cudaEventCreate"); };
  m.events.assign(program.num_events(), nullptr);
  for (cudaEvent_t& e : m.events) LMS_TRY_VOID(make(e, cudaEventDisableTiming));
  m.starts.assign(g.num_nodes(), nullptr);
  m.ends.assign(g.num_nodes(), nullptr);
  for (auto* list : {&m.starts, &m.ends})
    for (cudaEvent_t& e : *list) LMS_TRY_VOID(make(e, cudaEventDefault));
  LMS_TRY_VOID(make(m.origin, cudaEventDefault));
  m.records.assign(program.num_events(), 0);
  m.times.start.assign(g.num_nodes(), {});
  m.times.end.assign(g.num_nodes(), {});
  m.ran.clear();
  m.origin_recorded = false;
  m.prepared = &program;
  return {};
}

Result<void> CudaBackend::run(const Program& program, NodeId n) {
  Impl& m = *impl_;
  if (&program != m.prepared) return fail("cuda backend: run on a program that was not prepared");
  const Graph& g = program.graph();
  if (n.v >= g.num_nodes()) return fail("cuda backend: no node #{}", n.v);
  const Op op = g.node(n).op;
  // Inputs are fed and parameters and state written by the executor; constants are kernels like any op.
  if (g.def(n).traits.source && op != Op::constant) return {};
  if (!m.origin_recorded) {  // the step's time origin, on the compute stream before its first node
    LMS_TRY_VOID(check(cudaEventRecord(m.origin, m.stream(StreamId::compute)), "cudaEventRecord"));
    m.origin_host = std::chrono::steady_clock::now();
    m.origin_recorded = true;
  }
  cudaStream_t s = m.stream(program.stream(n));
  LMS_TRY_VOID(check(cudaEventRecord(m.starts[n.v], s), "cudaEventRecord"));
  if (op == Op::swap_out || op == Op::swap_in) {
    const KernelCall call = m.calls.call(n);
    const int64_t bytes = call.outputs[0].type->bytes();
    LMS_TRY_VOID(check(cudaMemcpyAsync(call.outputs[0].data, call.inputs[0].data, static_cast<size_t>(bytes),
                                       op == Op::swap_out ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, s),
                       op == Op::swap_out ? "cudaMemcpyAsync (swap_out)" : "cudaMemcpyAsync (swap_in)"));
  } else if (m.own_kernels[n.v]) {
    LMS_TRY_VOID((*m.own_kernels[n.v])());
  } else {
    LMS_TRY_VOID(m.dnn_kernels[n.v]->run());
  }
  LMS_TRY_VOID(check(cudaEventRecord(m.ends[n.v], s), "cudaEventRecord"));
  m.ran.push_back(n);
  return {};
}

std::string CudaBackend::kernel_description(NodeId n) const {
  const Impl& m = *impl_;
  if (!m.prepared || n.v >= m.dnn_kernels.size()) return {};
  if (m.own_kernels[n.v]) return "own kernel";
  return m.dnn_kernels[n.v] ? m.dnn_kernels[n.v]->describe() : std::string();
}

Result<void> CudaBackend::record(EventId e, StreamId stream) {
  Impl& m = *impl_;
  if (static_cast<int>(stream) >= kNumStreams) return fail("cuda backend: no stream {}", static_cast<int>(stream));
  if (e.v >= m.events.size()) return fail("cuda backend: no event {} (the program has {})", e.v, m.events.size());
  LMS_TRY_VOID(check(cudaEventRecord(m.events[e.v], m.stream(stream)), "cudaEventRecord"));
  ++m.records[e.v];
  return {};
}

// CUDA's semantics are the Program's: a wait applies to the event's most recent record enqueued before it.
Result<void> CudaBackend::wait(StreamId stream, EventId e) {
  Impl& m = *impl_;
  if (static_cast<int>(stream) >= kNumStreams) return fail("cuda backend: no stream {}", static_cast<int>(stream));
  if (e.v >= m.events.size()) return fail("cuda backend: no event {} (the program has {})", e.v, m.events.size());
  // CUDA treats a never-recorded event as complete; for a Program that is a bug, not a no-op.
  if (m.records[e.v] == 0)
    return fail("cuda backend: {} waits on event {}, which was never recorded", stream_name(stream), e.v);
  return check(cudaStreamWaitEvent(m.stream(stream), m.events[e.v], 0), "cudaStreamWaitEvent");
}

Result<void> CudaBackend::synchronize() {
  Impl& m = *impl_;
  // The step's timing state ends here whatever happens: the next step records its own origin.
  const std::vector<NodeId> ran = std::exchange(m.ran, {});
  m.origin_recorded = false;
  LMS_TRY_VOID(m.sync_all());
  LMS_TRY_VOID(check(cudaGetLastError(), "a kernel"));
  const int32_t status = *m.status;
  *m.status = cuda::kStatusOk;
  if (status != cuda::kStatusOk)
    return fail("cuda backend: {} (the step's results are not valid)",
                status == cuda::kStatusBadId ? "an embedding id was outside the table"
                                             : "a cross-entropy label was outside [0, classes)");
  // Node times: each node's events relative to the step's origin event, placed on the host clock.
  for (NodeId n : ran) {
    float start_ms = 0, end_ms = 0;
    LMS_TRY_VOID(check(cudaEventElapsedTime(&start_ms, m.origin, m.starts[n.v]), "cudaEventElapsedTime"));
    LMS_TRY_VOID(check(cudaEventElapsedTime(&end_ms, m.origin, m.ends[n.v]), "cudaEventElapsedTime"));
    auto at = [&](float ms) {
      return m.origin_host + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double, std::milli>(ms));
    };
    m.times.start[n.v] = at(start_ms);
    m.times.end[n.v] = at(end_ms);
  }
  return {};
}

// The host-side copies and scans wait for the streams first, so they never race with enqueued kernels.
// A plain cudaMemcpy from pageable memory may return before its DMA lands, and it runs on the legacy stream,
// which the non-blocking streams do not wait for: the copy goes on the h2d stream, waited for before returning.
Result<void> CudaBackend::copy_to_device(int64_t offset, const void* src, int64_t bytes) {
  Impl& m = *impl_;
  LMS_TRY_VOID(m.check_range("copy_to_device", offset, bytes));
  LMS_TRY_VOID(m.sync_all());
  if (bytes == 0) return {};
  cudaStream_t s = m.stream(StreamId::h2d);
  LMS_TRY_VOID(check(
      cudaMemcpyAsync(m.device.get() + offset, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, s),
      "cudaMemcpyAsync (to the device)"));
  return check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

Result<bool> CudaBackend::pin_host_memory(void* p, int64_t bytes) {
  if (bytes <= 0) return false;
  LMS_TRY_VOID(check(cudaHostRegister(p, static_cast<size_t>(bytes), cudaHostRegisterDefault), "cudaHostRegister"));
  return true;
}

void CudaBackend::unpin_host_memory(void* p) {
  if (cudaHostUnregister(p) != cudaSuccess) (void)cudaGetLastError();  // never pinned: nothing to undo
}

Result<void> CudaBackend::copy_from_device(int64_t offset, void* dst, int64_t bytes) {
  LMS_TRY_VOID(impl_->check_range("copy_from_device", offset, bytes));
  LMS_TRY_VOID(impl_->sync_all());
  if (bytes == 0) return {};
  return check(cudaMemcpy(dst, impl_->device.get() + offset, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost),
               "cudaMemcpy (from the device)");
}

Result<void> CudaBackend::poison_device(int64_t offset, int64_t bytes, std::byte pattern) {
  LMS_TRY_VOID(impl_->check_range("poison_device", offset, bytes));
  LMS_TRY_VOID(impl_->sync_all());
  if (bytes == 0) return {};
  LMS_TRY_VOID(check(cudaMemset(impl_->device.get() + offset, std::to_integer<int>(pattern), static_cast<size_t>(bytes)),
                     "cudaMemset (poison)"));
  return check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

// Reads the range back from its end, a chunk at a time, and stops at the first chunk holding a changed byte.
Result<int64_t> CudaBackend::last_changed_byte(int64_t offset, int64_t bytes, std::byte pattern) {
  LMS_TRY_VOID(impl_->check_range("last_changed_byte", offset, bytes));
  LMS_TRY_VOID(impl_->sync_all());
  std::vector<std::byte> chunk(static_cast<size_t>(std::min(bytes, kScanChunkBytes)));
  for (int64_t end = offset + bytes; end > offset;) {
    const int64_t begin = std::max(offset, end - kScanChunkBytes);
    const auto n = static_cast<size_t>(end - begin);
    LMS_TRY_VOID(check(cudaMemcpy(chunk.data(), impl_->device.get() + begin, n, cudaMemcpyDeviceToHost),
                       "cudaMemcpy (scan)"));
    for (size_t i = n; i-- > 0;)
      if (chunk[i] != pattern) return begin + static_cast<int64_t>(i);
    end = begin;
  }
  return int64_t{-1};
}

}  // namespace lms
