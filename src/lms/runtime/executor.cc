// Running steps of a Program (see executor.h).
#include "lms/runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "lms/ir/verifier.h"
#include "lms/runtime/init.h"
#include "lms/runtime/program_check.h"

namespace lms {

Result<Executor> Executor::create(const Program& program, Backend& backend, ExecutorOptions opts) {
  if (opts.measure_touched) LMS_TRY_VOID(check_program_races(program));
  LMS_TRY_VOID(backend.allocate_arenas(program.device_arena_bytes(), program.host_arena_bytes()));
  LMS_TRY_VOID(backend.prepare(program));
  Executor ex(program, backend, opts);
  const Graph& g = program.graph();
  const MemoryPlan& plan = program.memory();
  ex.uses_.assign(plan.buffers.size(), 0);
  ex.own_times_.start.assign(g.num_nodes(), {});
  ex.own_times_.end.assign(g.num_nodes(), {});
  ex.pinned_.assign(plan.buffers.size(), false);
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const BufferLife& life = plan.buffers[b].life;
    ex.pinned_[b] = life.persistent;
    if (life.persistent && life.placement == Placement::device)
      ex.persistent_top_ = std::max(ex.persistent_top_, plan.buffers[b].offset + life.bytes);
  }
  for (ValueId v : g.outputs()) ex.pinned_[plan.buffer_of_value[v.v]] = true;
  std::vector<int32_t> touched;
  for (NodeId n : g.node_ids()) {
    touched.clear();
    for (ValueId v : g.node(n).inputs) touched.push_back(plan.buffer_of_value[v.v]);
    // An output aliasing an input is a use of the input's buffer (already listed); a fresh output is not.
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (int32_t b : touched) ex.uses_[b]++;
  }
  return ex;
}

Result<void> Executor::write(ValueId v, const HostTensor& t) {
  const Graph& g = program_->graph();
  const Value& val = g.value(v);
  if (t.type != val.type)
    return fail_at("%" + val.name, "has type {} but the tensor given is {}", to_string(val.type), to_string(t.type));
  if (static_cast<int64_t>(t.data.size()) != val.type.bytes())
    return fail_at("%" + val.name, "tensor holds {} bytes, its type needs {}", t.data.size(), val.type.bytes());
  Location loc = program_->location(v);
  if (loc.placement == Placement::host) {
    std::memcpy(backend_->host_base() + loc.offset, t.data.data(), t.data.size());
    return {};
  }
  return backend_->copy_to_device(loc.offset, t.data.data(), loc.bytes);
}

Result<HostTensor> Executor::read(ValueId v) const {
  const Graph& g = program_->graph();
  if (v.v >= g.num_values()) return fail("read: no value #{}", v.v);
  const Value& val = g.value(v);
  bool output = std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
  if (!g.is_persistent(v) && !output)
    return fail_at("%" + val.name, "is neither persistent nor a graph output; its space is reused during a step");
  HostTensor t(val.type);
  Location loc = program_->location(v);
  if (loc.placement == Placement::host) {
    std::memcpy(t.data.data(), backend_->host_base() + loc.offset, t.data.size());
    return t;
  }
  LMS_TRY_VOID(backend_->copy_from_device(loc.offset, t.data.data(), loc.bytes));
  return t;
}

Result<void> Executor::initialize(uint64_t seed, const std::map<std::string, HostTensor>* given) {
  const Graph& g = program_->graph();
  for (ValueId v : program_->persistent_values()) {
    const Value& val = g.value(v);
    auto it = given ? given->find(val.name) : std::map<std::string, HostTensor>::const_iterator{};
    if (given && it != given->end()) {
      if (it->second.type != val.type)
        return fail("initial value of %{}: the tensor given is {}, the value is {}", val.name,
                    to_string(it->second.type), to_string(val.type));
      LMS_TRY_VOID(write(v, it->second));
      continue;
    }
    HostTensor t = LMS_TRY(initial_value(g, v, seed));
    LMS_TRY_VOID(write(v, t));
  }
  initialized_ = true;
  return {};
}

Result<void> check_checkpoint(const Program& program, const std::map<std::string, HostTensor>& values,
                              bool allow_unused) {
  const Graph& g = program.graph();
  for (ValueId v : program.persistent_values()) {
    const Value& val = g.value(v);
    auto it = values.find(val.name);
    if (it == values.end()) return fail("checkpoint has no value for %{} ({})", val.name, to_string(val.type));
    const HostTensor& t = it->second;
    if (t.type != val.type)
      return fail("checkpoint: %{} has type {} but the tensor given is {}", val.name, to_string(val.type),
                  to_string(t.type));
    if (static_cast<int64_t>(t.data.size()) != val.type.bytes())
      return fail("checkpoint: %{} tensor holds {} bytes, its type needs {}", val.name, t.data.size(),
                  val.type.bytes());
  }
  if (!allow_unused) {
    for (const auto& [name, t] : values) {
      auto v = g.find_value(name);
      if (!v || !g.is_persistent(*v) || g.storage_root(*v) != *v)
        return fail("checkpoint value '{}' is not a parameter or state of graph '{}'", name, g.name());
    }
  }
  return {};
}

Result<void> Executor::load(const std::map<std::string, HostTensor>& values, bool allow_unused) {
  LMS_TRY_VOID(check_checkpoint(*program_, values, allow_unused));
  const Graph& g = program_->graph();
  for (ValueId v : program_->persistent_values())
    if (auto w = write(v, values.at(g.value(v).name)); !w) return wrap("checkpoint", w.error());
  initialized_ = true;
  return {};
}

Result<std::map<std::string, HostTensor>> Executor::persistent_values() const {
  std::map<std::string, HostTensor> out;
  for (ValueId v : program_->persistent_values()) out.emplace(program_->graph().value(v).name, LMS_TRY(read(v)));
  return out;
}

Result<void> Executor::feed(std::span<const Feed> feeds) {
  const Graph& g = program_->graph();
  const std::vector<ValueId>& inputs = program_->inputs();
  std::vector<bool> fed(g.num_values(), false);
  for (const Feed& f : feeds) {
    if (!f.value.valid() || f.value.v >= g.num_values() || g.node(g.value(f.value).producer).op != Op::input)
      return fail("feed: value #{} is not an input of graph '{}'", f.value.v, g.name());
    const std::string where = "feed %" + g.value(f.value).name;
    if (f.tensor == nullptr) return fail_at(where, "no tensor given");
    if (fed[f.value.v]) return fail_at(where, "fed twice");
    fed[f.value.v] = true;
    if (auto w = write(f.value, *f.tensor); !w) return wrap("feed", w.error());
  }
  for (ValueId v : inputs)
    if (!fed[v.v]) return fail("feed: input %{} ({}) was not fed", g.value(v).name, to_string(g.value(v).type));
  return {};
}

Result<void> Executor::issue_all(int64_t& max_live, TraceWriter* trace) {
  const Graph& g = program_->graph();
  const MemoryPlan& plan = program_->memory();
  // Live device bytes as the step proceeds: persistent buffers and the fed inputs from the start, others from
  // their first write until their last use completes.
  std::vector<int> remaining = uses_;
  std::vector<bool> live(plan.buffers.size(), false);
  int64_t live_bytes = 0;
  int64_t live_host_bytes = 0;  // only for the trace
  auto make_live = [&](int32_t b) {
    if (live[b]) return;
    live[b] = true;
    (plan.buffers[b].life.placement == Placement::device ? live_bytes : live_host_bytes) += plan.buffers[b].life.bytes;
  };
  for (size_t b = 0; b < plan.buffers.size(); ++b)
    if (plan.buffers[b].life.persistent || plan.buffers[b].life.input) make_live(static_cast<int32_t>(b));
  max_live = live_bytes;
  using Clock = TraceWriter::Clock;
  if (trace) trace->memory(Clock::now(), live_bytes, live_host_bytes);

  std::vector<int32_t> touched;
  for (NodeId n : g.node_ids()) {
    const StreamId s = program_->stream(n);
    for (EventId e : program_->waits(n)) LMS_TRY_VOID(backend_->wait(s, e));
    const std::pair before{live_bytes, live_host_bytes};
    for (ValueId v : g.node(n).outputs) make_live(plan.buffer_of_value[v.v]);
    // A workspace lives only while its node runs.
    const int32_t workspace = plan.workspace_of_node.empty() ? -1 : plan.workspace_of_node[n.v];
    if (workspace >= 0) make_live(workspace);
    max_live = std::max(max_live, live_bytes);
    const bool timed = trace || opts_.time_nodes;
    const Clock::time_point start = timed ? Clock::now() : Clock::time_point{};
    if (trace && std::pair{live_bytes, live_host_bytes} != before) trace->memory(start, live_bytes, live_host_bytes);
    if (auto r = backend_->run(*program_, n); !r) return wrap(node_label(g, n), r.error());
    if (auto e = program_->recorded(n)) LMS_TRY_VOID(backend_->record(*e, s));
    const Clock::time_point end = timed ? Clock::now() : Clock::time_point{};
    // A backend that runs a node inside `run` (reference) is timed here; one that runs it later on a stream
    // thread reports its own times (Backend::node_times). Both are read after synchronize (step()).
    if (timed && !backend_->node_times()) {
      own_times_.start[n.v] = start;
      own_times_.end[n.v] = end;
    }

    touched.clear();
    for (ValueId v : g.node(n).inputs) touched.push_back(plan.buffer_of_value[v.v]);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (int32_t b : touched) remaining[b]--;
    for (ValueId v : g.node(n).outputs) touched.push_back(plan.buffer_of_value[v.v]);
    if (workspace >= 0) touched.push_back(workspace);
    const std::pair held{live_bytes, live_host_bytes};
    for (int32_t b : touched) {
      if (live[b] && remaining[b] == 0 && !pinned_[b]) {
        live[b] = false;
        (plan.buffers[b].life.placement == Placement::device ? live_bytes : live_host_bytes) -= plan.buffers[b].life.bytes;
      }
    }
    if (trace && std::pair{live_bytes, live_host_bytes} != held) trace->memory(end, live_bytes, live_host_bytes);
  }
  return {};
}

Result<StepResult> Executor::step(std::span<const Feed> feeds, TraceWriter* trace) {
  if (!initialized_) return fail("step: parameters and state were never written (initialize or load first)");
  const int64_t arena = program_->device_arena_bytes();
  const int64_t region = program_->memory().persistent_end;
  if (opts_.measure_touched && arena > region) LMS_TRY_VOID(backend_->poison_device(region, arena - region, kPoisonByte));

  StepResult r;
  auto start = std::chrono::steady_clock::now();
  LMS_TRY_VOID(feed(feeds));
  r.feed_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  LMS_TRY_VOID(issue_all(r.max_live_bytes, trace));
  LMS_TRY_VOID(backend_->synchronize());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (trace || opts_.time_nodes) {
    const Backend::NodeTimes* times = backend_->node_times() ? backend_->node_times() : &own_times_;
    const Graph& g = program_->graph();
    if (opts_.time_nodes) r.node_seconds.assign(g.num_nodes(), 0.0);
    for (NodeId n : g.node_ids()) {
      if (times->start[n.v] == TraceWriter::Clock::time_point{}) continue;  // not run (a source on cpu)
      if (trace)
        trace->complete(trace_node_name(g, n), std::string(op_name(g.node(n).op)), n.v, program_->stream(n),
                        times->start[n.v], times->end[n.v]);
      if (opts_.time_nodes)
        r.node_seconds[n.v] = std::chrono::duration<double>(times->end[n.v] - times->start[n.v]).count();
    }
  }

  if (opts_.measure_touched) {
    int64_t last = arena > region ? LMS_TRY(backend_->last_changed_byte(region, arena - region, kPoisonByte)) : -1;
    r.touched_bytes = std::max(persistent_top_, last + 1);
  }
  for (ValueId v : program_->graph().outputs()) r.outputs.push_back(LMS_TRY(read(v)));
  return r;
}

}  // namespace lms
