// Collecting and writing the Chrome trace-event JSON of training steps (see trace.h).
#include "lms/runtime/trace.h"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

namespace lms {

namespace {

// A JSON string literal: quotes, backslashes and control characters escaped.
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// Nanoseconds as the trace's microseconds, exactly: "1234.567". Exact, so that a node's ts + dur is the time
// of the counter reported at its end, not a rounding away from it.
std::string micros(int64_t ns) {
  const uint64_t abs = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  return fmt::format("{}{}.{:03}", ns < 0 ? "-" : "", abs / 1000, abs % 1000);
}

std::string metadata(std::string_view what, int tid, std::string_view name) {
  return fmt::format(R"({{"name":{},"ph":"M","pid":{},"tid":{},"args":{{"name":{}}}}})", json_string(what), kTracePid,
                     tid, json_string(name));
}

}  // namespace

std::string trace_node_name(const Graph& g, NodeId n) {
  const Node& node = g.node(n);
  if (node.outputs.empty()) return fmt::format("node #{}", n.v);
  std::string name;
  for (ValueId v : node.outputs) name += (name.empty() ? "" : ", ") + g.value(v).name;
  return name;
}

int64_t TraceWriter::nanos(Clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin_).count();
}

void TraceWriter::complete(std::string name, std::string op, uint32_t node, StreamId stream, Clock::time_point start,
                           Clock::time_point end) {
  Event e;
  e.phase = 'X';
  e.name = std::move(name);
  e.op = std::move(op);
  e.node = node;
  e.tid = static_cast<int>(stream);
  e.ts = nanos(start);
  // A clock never runs backwards, but a caller could pass the points swapped: never write a negative duration.
  e.dur = std::max<int64_t>(0, nanos(end) - e.ts);
  e.step = step_;
  events_.push_back(std::move(e));
}

void TraceWriter::memory(Clock::time_point at, int64_t device_bytes, int64_t host_bytes) {
  for (auto [name, bytes] : {std::pair{kTraceDeviceCounter, device_bytes}, std::pair{kTraceHostCounter, host_bytes}}) {
    Event e;
    e.phase = 'C';
    e.name = name;
    e.ts = nanos(at);
    e.step = step_;
    e.bytes = bytes;
    events_.push_back(std::move(e));
  }
}

std::string TraceWriter::json() const {
  // Time order; events reported at the same instant keep their order (a node's allocation before its run).
  std::vector<const Event*> order;
  order.reserve(events_.size());
  for (const Event& e : events_) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const Event* a, const Event* b) { return a->ts < b->ts; });

  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  out += metadata("process_name", 0, process_);
  for (int s = 0; s < kNumStreams; ++s) {
    const StreamId stream = static_cast<StreamId>(s);
    const std::string track = std::string(stream_name(stream)) + (stream == StreamId::compute ? "" : " copy");
    out += ",\n" + metadata("thread_name", s, track);
    // Tracks in stream order (compute first), not in the order the viewer happens to meet them.
    out += fmt::format(",\n{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_index\":{}}}}}",
                       kTracePid, s, s);
  }
  for (const Event* e : order) {
    if (e->phase == 'X') {
      out += fmt::format(
          ",\n{{\"name\":{},\"cat\":\"node\",\"ph\":\"X\",\"ts\":{},\"dur\":{},\"pid\":{},\"tid\":{},"
          "\"args\":{{\"op\":{},\"node\":{},\"step\":{}}}}}",
          json_string(e->name), micros(e->ts), micros(e->dur), kTracePid, e->tid, json_string(e->op), e->node, e->step);
    } else {
      out += fmt::format(",\n{{\"name\":{},\"cat\":\"memory\",\"ph\":\"C\",\"ts\":{},\"pid\":{},"
                         "\"args\":{{\"bytes\":{}}}}}",
                         json_string(e->name), micros(e->ts), kTracePid, e->bytes);
    }
  }
  return out + "\n]}\n";
}

Result<void> TraceWriter::write(const std::filesystem::path& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return fail_at(path.string(), "cannot open the trace file for writing");
  const std::string text = json();
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  f.flush();
  if (!f) return fail_at(path.string(), "write error (disk full?)");
  return {};
}

Result<void> check_trace_path(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return fail_at("--trace " + path.string(), "is a directory");
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return fail_at("--trace " + path.string(), "cannot open for writing (missing directory or no permission)");
  return {};
}

}  // namespace lms
