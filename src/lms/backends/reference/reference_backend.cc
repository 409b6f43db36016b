// The reference backend (see reference_backend.h).
#include "lms/backends/reference/reference_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "lms/backends/reference/kernels.h"
#include "lms/runtime/program.h"

namespace lms {

Result<void> ReferenceBackend::allocate_arenas(int64_t device_bytes, int64_t host_bytes) {
  return arenas_.allocate("reference backend", device_bytes, host_bytes, opts_.device_budget_bytes);
}

Result<void> ReferenceBackend::prepare(const Program& program) {
  LMS_TRY_VOID(arenas_.check_program("reference backend", program));
  calls_.bind(program, arenas_.device(), arenas_.host());
  recorded_.assign(program.num_events(), false);
  prepared_ = &program;
  return {};
}

Result<void> ReferenceBackend::run(const Program& program, NodeId n) {
  if (&program != prepared_) return fail("reference backend: run on a program that was not prepared");
  const Graph& g = program.graph();
  if (n.v >= g.num_nodes()) return fail("reference backend: no node #{}", n.v);
  // Inputs are fed and parameters and state written by the executor; constants are kernels like any op.
  if (g.def(n).traits.source && g.node(n).op != Op::constant) return {};
  return run_reference_kernel(calls_.call(n));
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
  return arenas_.check_range("reference backend", what, offset, bytes);
}

Result<void> ReferenceBackend::copy_to_device(int64_t offset, const void* src, int64_t bytes) {
  LMS_TRY_VOID(check_range("copy_to_device", offset, bytes));
  if (bytes > 0) std::memcpy(arenas_.device() + offset, src, static_cast<size_t>(bytes));
  return {};
}

Result<void> ReferenceBackend::copy_from_device(int64_t offset, void* dst, int64_t bytes) {
  LMS_TRY_VOID(check_range("copy_from_device", offset, bytes));
  if (bytes > 0) std::memcpy(dst, arenas_.device() + offset, static_cast<size_t>(bytes));
  return {};
}

Result<void> ReferenceBackend::poison_device(int64_t offset, int64_t bytes, std::byte pattern) {
  LMS_TRY_VOID(check_range("poison_device", offset, bytes));
  if (bytes > 0) std::memset(arenas_.device() + offset, std::to_integer<int>(pattern), static_cast<size_t>(bytes));
  return {};
}

Result<int64_t> ReferenceBackend::last_changed_byte(int64_t offset, int64_t bytes, std::byte pattern) {
  LMS_TRY_VOID(check_range("last_changed_byte", offset, bytes));
  const std::byte* base = arenas_.device();
  for (int64_t i = offset + bytes - 1; i >= offset; --i)
    if (base[i] != pattern) return i;
  return int64_t{-1};
}

}  // namespace lms
