// The reference backend (see reference_backend.h).
#include "lms/backends/reference/reference_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "lms/backends/reference/kernels.h"
#include "lms/runtime/program.h"

namespace lms {

void ReferenceBackend::FreeDeleter::operator()(std::byte* p) const { std::free(p); }

Result<void> ReferenceBackend::allocate_arenas(int64_t device_bytes, int64_t host_bytes) {
  if (device_bytes_ >= 0) return fail("reference backend: arenas are allocated once, and already were");
  if (device_bytes < 0 || host_bytes < 0)
    return fail("reference backend: negative arena size (device {}, host {})", device_bytes, host_bytes);
  if (device_bytes > opts_.device_budget_bytes)
    return fail("reference backend: device arena of {} exceeds the budget of {}", format_size(device_bytes),
                format_size(opts_.device_budget_bytes));
  // aligned_alloc needs a size that is a multiple of the alignment, and a non-zero one to return a pointer.
  auto alloc = [](int64_t bytes) -> std::byte* {
    int64_t rounded = std::max<int64_t>(align_up(bytes), kArenaAlignment);
    return static_cast<std::byte*>(std::aligned_alloc(kArenaAlignment, static_cast<size_t>(rounded)));
  };
  Arena device(alloc(device_bytes)), host(alloc(host_bytes));
  if (!device || !host)
    return fail("reference backend: cannot allocate arenas of {} (device) and {} (host)", format_size(device_bytes),
                format_size(host_bytes));
  device_ = std::move(device);
  host_ = std::move(host);
  device_bytes_ = device_bytes;
  host_bytes_ = host_bytes;
  return {};
}

Result<void> ReferenceBackend::prepare(const Program& program) {
  if (device_bytes_ < 0) return fail("reference backend: prepare before allocate_arenas");
  if (program.device_arena_bytes() > device_bytes_ || program.host_arena_bytes() > host_bytes_)
    return fail("reference backend: the program needs arenas of {} and {}, but {} and {} were allocated",
                program.device_arena_bytes(), program.host_arena_bytes(), device_bytes_, host_bytes_);
  const Graph& g = program.graph();
  refs_.clear();
  node_refs_.assign(g.num_nodes(), NodeRefs{});
  auto ref = [&](ValueId v) {
    Location loc = program.location(v);
    std::byte* base = loc.placement == Placement::device ? device_.get() : host_.get();
    refs_.push_back(TensorRef{&g.value(v).type, base + loc.offset});
  };
  for (NodeId n : g.node_ids()) {
    NodeRefs& r = node_refs_[n.v];
    r.inputs_first = static_cast<uint32_t>(refs_.size());
    for (ValueId v : g.node(n).inputs) ref(v);
    r.inputs_count = static_cast<uint32_t>(g.node(n).inputs.size());
    r.outputs_first = static_cast<uint32_t>(refs_.size());
    for (ValueId v : g.node(n).outputs) ref(v);
    r.outputs_count = static_cast<uint32_t>(g.node(n).outputs.size());
  }
  recorded_.assign(program.num_events(), false);
  prepared_ = &program;
  return {};
}

Result<void> ReferenceBackend::run(const Program& program, NodeId n) {
  if (&program != prepared_) return fail("reference backend: run on a program that was not prepared");
  const Graph& g = program.graph();
  if (n.v >= g.num_nodes()) return fail("reference backend: no node #{}", n.v);
  const Node& node = g.node(n);
  const OpDef& d = g.def(n);
  // Inputs are fed and parameters and state written by the executor; constants are kernels like any op.
  if (d.traits.source && node.op != Op::constant) return {};
  const NodeRefs& r = node_refs_[n.v];
  KernelCall call;
  call.op = node.op;
  call.attrs = &node.attrs;
  call.inputs = std::span<const TensorRef>(refs_.data() + r.inputs_first, r.inputs_count);
  call.outputs = std::span<const TensorRef>(refs_.data() + r.outputs_first, r.outputs_count);
  return run_reference_kernel(call);
}

Result<void> ReferenceBackend::record(EventId e, StreamId stream) {
  if (static_cast<int>(stream) >= kNumStreams) return fail("reference backend: no stream {}", static_cast<int>(stream));
  if (e.v >= recorded_.size()) return fail("reference backend: no event {} (the program has {})", e.v, recorded_.size());
  recorded_[e.v] = true;  // everything before it on every stream has already run
  return {};
}

Result<void> ReferenceBackend::wait(StreamId stream, EventId e) {
  if (static_cast<int>(stream) >= kNumStreams) return fail("reference backend: no stream {}", static_cast<int>(stream));
  if (e.v >= recorded_.size()) return fail("reference backend: no event {} (the program has {})", e.v, recorded_.size());
  if (!recorded_[e.v]) return fail("reference backend: {} waits on event {}, which was never recorded",
                                   stream_name(stream), e.v);
  return {};
}

Result<void> ReferenceBackend::check_range(std::string_view what, int64_t offset, int64_t bytes) const {
  if (device_bytes_ < 0) return fail("reference backend: {} before allocate_arenas", what);
  if (offset < 0 || bytes < 0 || offset > device_bytes_ - bytes)
    return fail("reference backend: {} of {} bytes at offset {} is outside the device arena of {} bytes", what,
                bytes, offset, device_bytes_);
  return {};
}

Result<void> ReferenceBackend::copy_to_device(int64_t offset, const void* src, int64_t bytes) {
  LMS_TRY_VOID(check_range("copy_to_device", offset, bytes));
  if (bytes > 0) std::memcpy(device_.get() + offset, src, static_cast<size_t>(bytes));
  return {};
}

Result<void> ReferenceBackend::copy_from_device(int64_t offset, void* dst, int64_t bytes) {
  LMS_TRY_VOID(check_range("copy_from_device", offset, bytes));
  if (bytes > 0) std::memcpy(dst, device_.get() + offset, static_cast<size_t>(bytes));
  return {};
}

Result<void> ReferenceBackend::poison_device(int64_t offset, int64_t bytes, std::byte pattern) {
  LMS_TRY_VOID(check_range("poison_device", offset, bytes));
  if (bytes > 0) std::memset(device_.get() + offset, std::to_integer<int>(pattern), static_cast<size_t>(bytes));
  return {};
}

Result<int64_t> ReferenceBackend::last_changed_byte(int64_t offset, int64_t bytes, std::byte pattern) {
  LMS_TRY_VOID(check_range("last_changed_byte", offset, bytes));
  const std::byte* base = device_.get();
  for (int64_t i = offset + bytes - 1; i >= offset; --i)
    if (base[i] != pattern) return i;
  return int64_t{-1};
}

}  // namespace lms
