// The cpu backend (see cpu_backend.h): arenas, stream threads, events, and per-node kernels.
#include "lms/backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "lms/backends/reference/kernels.h"
#include "lms/ir/verifier.h"
#include "lms/runtime/program.h"

namespace lms {

CpuBackend::CpuBackend(BackendOptions opts) : opts_(opts) {
  for (int s = 0; s < kNumStreams; ++s) streams_[s].thread = std::thread([this, s] { worker(s); });
}

CpuBackend::~CpuBackend() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (Stream& s : streams_) s.thread.join();
}

void CpuBackend::worker(int s) {
  Stream& st = streams_[s];
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !st.queue.empty(); });
    if (st.queue.empty()) return;  // stopping, and nothing left to run
    Task task = std::move(st.queue.front());
    st.queue.pop_front();
    // After a failure, later kernels would read garbage; only the event work still runs (it never fails on
    // its own and keeps other streams from waiting forever).
    if (first_error_ && !task.always) {
      cv_.notify_all();
      continue;
    }
    st.busy = true;
    lock.unlock();
    Result<void> r = task.work();
    lock.lock();
    st.busy = false;
    if (!r && !first_error_) first_error_ = r.error();
    cv_.notify_all();
  }
}

void CpuBackend::enqueue(StreamId s, Task t) {
  {
    std::lock_guard lock(mu_);
    streams_[static_cast<int>(s)].queue.push_back(std::move(t));
  }
  cv_.notify_all();
}

void CpuBackend::drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] {
    for (const Stream& s : streams_)
      if (!s.queue.empty() || s.busy) return false;
    return true;
  });
}

Result<void> CpuBackend::synchronize() {
  drain();
  std::lock_guard lock(mu_);
  if (first_error_) {
    Error e = std::move(*first_error_);
    first_error_.reset();
    return std::unexpected(std::move(e));
  }
  return {};
}

Result<void> CpuBackend::allocate_arenas(int64_t device_bytes, int64_t host_bytes) {
  return arenas_.allocate("cpu backend", device_bytes, host_bytes, opts_.device_budget_bytes);
}

Result<std::vector<int64_t>> CpuBackend::workspace_bytes(const Graph& g) {
  if (!dnnl_) dnnl_ = LMS_TRY(cpu::make_dnnl_context());
  const cpu::ValueLayoutsPtr layouts = LMS_TRY(layouts_of(g));
  return workspace_bytes_from_types(g, [&](NodeId n, const KernelCall& call) {
    return cpu::dnnl_workspace_bytes(*dnnl_, call, layouts.get(), &g.node(n));
  });
}

Result<cpu::ValueLayoutsPtr> CpuBackend::layouts_of(const Graph& g) {
  if (!opts_.cpu_blocked_layouts) return cpu::ValueLayoutsPtr();
  return cpu::assign_layouts(*dnnl_, g);
}

Result<void> CpuBackend::prepare(const Program& program) {
  LMS_TRY_VOID(arenas_.check_program("cpu backend", program));
  drain();  // nothing of an earlier program may still be running on the buffers being rebound
  if (!dnnl_) dnnl_ = LMS_TRY(cpu::make_dnnl_context());
  const Graph& g = program.graph();
  calls_.bind(program, arenas_.device(), arenas_.host());
  kernels_.clear();
  kernels_.resize(g.num_nodes());
  const cpu::ValueLayoutsPtr layouts = LMS_TRY(layouts_of(g));
  for (NodeId n : g.node_ids())
    kernels_[n.v] = LMS_TRY(cpu::prepare_dnnl_kernel(*dnnl_, calls_.call(n), layouts.get(), &g.node(n)));
  {
    std::lock_guard lock(mu_);
    records_enqueued_.assign(program.num_events(), 0);
    records_done_.assign(program.num_events(), 0);
  }
  times_.start.assign(g.num_nodes(), {});
  times_.end.assign(g.num_nodes(), {});
  prepared_ = &program;
  return {};
}

std::string CpuBackend::kernel_description(NodeId n) const {
  if (!prepared_ || n.v >= kernels_.size() || prepared_->graph().def(n).traits.source) return {};
  return kernels_[n.v] ? kernels_[n.v]->describe() : "reference kernel";
}

int64_t CpuBackend::dnnl_nodes() const {
  return std::ranges::count_if(kernels_, [](const auto& k) { return k != nullptr; });
}

int64_t CpuBackend::scratchpad_bytes() const {
  int64_t total = 0;
  for (const auto& k : kernels_)
    if (k) total += k->scratchpad_bytes();
  return total;
}

Result<void> CpuBackend::run_node(NodeId n) {
  times_.start[n.v] = std::chrono::steady_clock::now();
  // Not covered by a cpu kernel: the reference kernel (correct, slow) on this stream's thread.
  Result<void> r = kernels_[n.v] ? kernels_[n.v]->run() : run_reference_kernel(calls_.call(n));
  times_.end[n.v] = std::chrono::steady_clock::now();
  return r;
}

Result<void> CpuBackend::run(const Program& program, NodeId n) {
  if (&program != prepared_) return fail("cpu backend: run on a program that was not prepared");
  const Graph& g = program.graph();
  if (n.v >= g.num_nodes()) return fail("cpu backend: no node #{}", n.v);
  // Inputs are fed and parameters and state written by the executor; constants are kernels like any op.
  if (g.def(n).traits.source && g.node(n).op != Op::constant) return {};
  enqueue(program.stream(n), Task{[this, n] { return run_node(n); }});
  return {};
}

Result<void> CpuBackend::record(EventId e, StreamId stream) {
  if (static_cast<int>(stream) >= kNumStreams) return fail("cpu backend: no stream {}", static_cast<int>(stream));
  {
    std::lock_guard lock(mu_);
    if (e.v >= records_enqueued_.size())
      return fail("cpu backend: no event {} (the program has {})", e.v, records_enqueued_.size());
    ++records_enqueued_[e.v];
  }
  enqueue(stream, Task{[this, e]() -> Result<void> {
                         {
                           std::lock_guard lock(mu_);
                           ++records_done_[e.v];
                         }
                         cv_.notify_all();
                         return {};
                       },
                       true});
  return {};
}

Result<void> CpuBackend::wait(StreamId stream, EventId e) {
  if (static_cast<int>(stream) >= kNumStreams) return fail("cpu backend: no stream {}", static_cast<int>(stream));
  uint64_t target = 0;
  {
    std::lock_guard lock(mu_);
    if (e.v >= records_enqueued_.size())
      return fail("cpu backend: no event {} (the program has {})", e.v, records_enqueued_.size());
    target = records_enqueued_[e.v];
  }
  // Waiting on an event no record was enqueued for would wait forever: the Program is wrong.
  if (target == 0)
    return fail("cpu backend: {} waits on event {}, which was never recorded", stream_name(stream), e.v);
  enqueue(stream, Task{[this, e, target]() -> Result<void> {
                         std::unique_lock lock(mu_);
                         cv_.wait(lock, [&] { return records_done_[e.v] >= target; });
                         return {};
                       },
                       true});
  return {};
}

Result<void> CpuBackend::check_range(std::string_view what, int64_t offset, int64_t bytes) const {
  return arenas_.check_range("cpu backend", what, offset, bytes);
}

// The host-side copies and scans are synchronous: they wait for the streams first, so they never race with
// enqueued kernels on the same bytes.
Result<void> CpuBackend::copy_to_device(int64_t offset, const void* src, int64_t bytes) {
  LMS_TRY_VOID(check_range("copy_to_device", offset, bytes));
  drain();
  if (bytes > 0) std::memcpy(arenas_.device() + offset, src, static_cast<size_t>(bytes));
  return {};
}

Result<void> CpuBackend::copy_from_device(int64_t offset, void* dst, int64_t bytes) {
  LMS_TRY_VOID(check_range("copy_from_device", offset, bytes));
  drain();
  if (bytes > 0) std::memcpy(dst, arenas_.device() + offset, static_cast<size_t>(bytes));
  return {};
}

Result<void> CpuBackend::poison_device(int64_t offset, int64_t bytes, std::byte pattern) {
  LMS_TRY_VOID(check_range("poison_device", offset, bytes));
  drain();
  if (bytes > 0) std::memset(arenas_.device() + offset, std::to_integer<int>(pattern), static_cast<size_t>(bytes));
  return {};
}

Result<int64_t> CpuBackend::last_changed_byte(int64_t offset, int64_t bytes, std::byte pattern) {
  LMS_TRY_VOID(check_range("last_changed_byte", offset, bytes));
  drain();
  const std::byte* base = arenas_.device();
  for (int64_t i = offset + bytes - 1; i >= offset; --i)
    if (base[i] != pattern) return i;
  return int64_t{-1};
}

}  // namespace lms
