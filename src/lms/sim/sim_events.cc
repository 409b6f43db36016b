// The text form of simulator events (see sim_events.h for the line format).
#include "lms/sim/sim_events.h"

#include <fmt/format.h>

#include "lms/ir/verifier.h"

namespace lms {

std::string RecordingEvents::label(const SimBuffer& b) const {
  switch (b.kind) {
    case SimBufferKind::tensor: return "%" + g_.value(b.value).name;
    case SimBufferKind::swap_in: return fmt::format("%{}@in{}", g_.value(b.value).name, b.group);
    case SimBufferKind::host_copy: return fmt::format("%{}@host", g_.value(b.value).name);
    case SimBufferKind::workspace: return fmt::format("ws({})", node_label(g_, b.node));
  }
  return "?";
}

void RecordingEvents::op_start(NodeId node, int level) {
  lines_.push_back(fmt::format("L{} {}", level, node_label(g_, node)));
}

void RecordingEvents::allocate(const SimBuffer& b, int64_t used) {
  lines_.push_back(fmt::format("+{} {} {} = {}", b.placement == Placement::device ? "dev" : "host", label(b),
                               b.bytes, used));
}

void RecordingEvents::free(const SimBuffer& b, int64_t used) {
  lines_.push_back(fmt::format("-{} {} {} = {}", b.placement == Placement::device ? "dev" : "host", label(b),
                               b.bytes, used));
}

void RecordingEvents::copy_start(const SimBuffer& dst) { lines_.push_back("copy " + label(dst)); }

void RecordingEvents::copy_end(const SimBuffer& dst) { lines_.push_back("done " + label(dst)); }

std::string RecordingEvents::text() const {
  std::string out;
  for (const std::string& l : lines_) {
    out += l;
    out += '\n';
  }
  return out;
}

}  // namespace lms
