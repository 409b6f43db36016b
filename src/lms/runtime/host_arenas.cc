// Host-memory arenas shared by the reference and cpu backends (see host_arenas.h).
#include "lms/runtime/host_arenas.h"

#include <algorithm>
#include <cstdlib>

#include "lms/ir/verifier.h"
#include "lms/plan/assignment.h"
#include "lms/runtime/program.h"
#include "lms/support/size.h"

namespace lms {

void HostArenas::FreeDeleter::operator()(std::byte* p) const { std::free(p); }

Result<void> HostArenas::allocate(std::string_view backend, int64_t device_bytes, int64_t host_bytes,
                                  int64_t budget_bytes) {
  if (device_bytes_ >= 0) return fail("{}: arenas are allocated once, and already were", backend);
  if (device_bytes < 0 || host_bytes < 0)
    return fail("{}: negative arena size (device {}, host {})", backend, device_bytes, host_bytes);
  if (device_bytes > budget_bytes)
    return fail("{}: device arena of {} exceeds the budget of {}", backend, format_size(device_bytes),
                format_size(budget_bytes));
  // aligned_alloc needs a size that is a multiple of the alignment, and a non-zero one to return a pointer.
  auto alloc = [](int64_t bytes) -> std::byte* {
    int64_t rounded = std::max<int64_t>(align_up(bytes), kArenaAlignment);
    return static_cast<std::byte*>(std::aligned_alloc(kArenaAlignment, static_cast<size_t>(rounded)));
  };
  Arena device(alloc(device_bytes)), host(alloc(host_bytes));
  if (!device || !host)
    return fail("{}: cannot allocate arenas of {} (device) and {} (host)", backend, format_size(device_bytes),
                format_size(host_bytes));
  device_ = std::move(device);
  host_ = std::move(host);
  device_bytes_ = device_bytes;
  host_bytes_ = host_bytes;
  return {};
}

Result<void> HostArenas::check_program(std::string_view backend, const Program& program) const {
  if (device_bytes_ < 0) return fail("{}: prepare before allocate_arenas", backend);
  if (program.device_arena_bytes() > device_bytes_ || program.host_arena_bytes() > host_bytes_)
    return fail("{}: the program needs arenas of {} and {}, but {} and {} were allocated", backend,
                program.device_arena_bytes(), program.host_arena_bytes(), device_bytes_, host_bytes_);
  return {};
}

Result<void> HostArenas::check_range(std::string_view backend, std::string_view what, int64_t offset,
                                     int64_t bytes) const {
  if (device_bytes_ < 0) return fail("{}: {} before allocate_arenas", backend, what);
  if (offset < 0 || bytes < 0 || offset > device_bytes_ - bytes)
    return fail("{}: {} of {} bytes at offset {} is outside the device arena of {} bytes", backend, what, bytes,
                offset, device_bytes_);
  return {};
}

void BoundCalls::bind(const Program& program, std::byte* device_base, std::byte* host_base) {
  const Graph& g = program.graph();
  graph_ = &g;
  refs_.clear();
  inputs_.assign(g.num_nodes(), Range{});
  outputs_.assign(g.num_nodes(), Range{});
  auto bind_values = [&](const std::vector<ValueId>& values) {
    Range r{static_cast<uint32_t>(refs_.size()), static_cast<uint32_t>(values.size())};
    for (ValueId v : values) {
      Location loc = program.location(v);
      std::byte* base = loc.placement == Placement::device ? device_base : host_base;
      refs_.push_back(TensorRef{&g.value(v).type, base + loc.offset});
    }
    return r;
  };
  workspaces_.assign(g.num_nodes(), Workspace{});
  for (NodeId n : g.node_ids()) {
    inputs_[n.v] = bind_values(g.node(n).inputs);
    outputs_[n.v] = bind_values(g.node(n).outputs);
    if (auto ws = program.workspace(n)) workspaces_[n.v] = Workspace{device_base + ws->offset, ws->bytes};
  }
}

KernelCall BoundCalls::call(NodeId n) const {
  const Node& node = graph_->node(n);
  KernelCall c;
  c.op = node.op;
  c.attrs = &node.attrs;
  c.inputs = std::span<const TensorRef>(refs_.data() + inputs_[n.v].first, inputs_[n.v].count);
  c.outputs = std::span<const TensorRef>(refs_.data() + outputs_[n.v].first, outputs_[n.v].count);
  c.workspace = workspaces_[n.v].data;
  c.workspace_bytes = workspaces_[n.v].bytes;
  return c;
}

Result<std::vector<int64_t>> workspace_bytes_from_types(
    const Graph& g, const std::function<Result<int64_t>(NodeId, const KernelCall&)>& bytes_of) {
  std::vector<int64_t> bytes(g.num_nodes(), 0);
  std::vector<TensorRef> ins, outs;
  for (NodeId n : g.node_ids()) {
    const Node& node = g.node(n);
    ins.clear();
    outs.clear();
    for (ValueId v : node.inputs) ins.push_back(TensorRef{&g.value(v).type, nullptr});
    for (ValueId v : node.outputs) outs.push_back(TensorRef{&g.value(v).type, nullptr});
    auto b = bytes_of(n, KernelCall{node.op, &node.attrs, ins, outs, nullptr, 0});
    if (!b) return wrap(node_label(g, n), b.error());
    bytes[n.v] = *b;
  }
  return bytes;
}

}  // namespace lms
