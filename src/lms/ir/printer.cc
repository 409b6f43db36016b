// The IR text printer. Everything is appended to one reserved std::string through fmt::format_to, because
// graphs of a few thousand nodes (resnet152 at batch 256) are printed by every golden test and `lms opt`
// run; a stream per token would dominate those. The spelling of each piece is decided elsewhere and only
// assembled here: attribute values by to_string(Attribute), dtypes by dtype_name, categories by
// category_name, so the parser and the printer cannot disagree about them.
#include "lms/ir/printer.h"

#include <iterator>

#include <fmt/format.h>

namespace lms {

namespace {

using Out = std::back_insert_iterator<std::string>;

void append_name(std::string& out, const Graph& g, ValueId v) {
  out += '%';
  out += g.value(v).name;
}

// A list of value references separated by ", ".
template <class Range, class NameOf>
void append_refs(std::string& out, const Range& items, NameOf name_of) {
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += ", ";
    first = false;
    out += '%';
    out += name_of(item);
  }
}

// `f32[8,16]`, identical to to_string(TensorType) without the temporary strings.
void append_type(std::string& out, const TensorType& t) {
  out += dtype_name(t.dtype);
  fmt::format_to(Out(out), "[{}]", fmt::join(t.shape, ","));
}

void append_node(std::string& out, const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  append_refs(out, n.outputs, [&](ValueId v) -> const std::string& { return g.value(v).name; });
  out += " = ";
  out += op_name(n.op);
  out += '(';
  append_refs(out, n.inputs, [&](ValueId v) -> const std::string& { return g.value(v).name; });
  out += ')';
  if (!n.control_inputs.empty()) {
    // A node is named by its first output; the stored order (sorted by node id) is the printed order.
    out += " after(";
    append_refs(out, n.control_inputs,
                [&](NodeId c) -> const std::string& { return g.value(g.first_output(c)).name; });
    out += ')';
  }
  if (!n.attrs.empty()) {
    out += " {";
    bool first = true;
    for (const auto& [name, value] : n.attrs.entries()) {
      if (!first) out += ", ";
      first = false;
      out += name;
      out += " = ";
      out += to_string(value);
    }
    out += '}';
  }
  out += " : ";
  bool first = true;
  for (ValueId v : n.outputs) {
    if (!first) out += ", ";
    first = false;
    const Value& val = g.value(v);
    append_type(out, val.type);
    // Device is the default placement and is left out, so ordinary graphs read without noise.
    if (val.placement == Placement::host) out += " @host";
  }
  out += " #";
  out += category_name(n.category);
}

}  // namespace

std::string print_node(const Graph& g, NodeId n) {
  std::string out;
  append_node(out, g, n);
  return out;
}

std::string print_graph(const Graph& g) { return print_graph(g, {}); }

std::string print_graph(const Graph& g, std::span<const std::string> notes) {
  std::string out;
  // About 80 bytes per node is typical (names, one type, a category); one reservation avoids regrowth for
  // most graphs, and the string still grows correctly for long attribute lists.
  constexpr size_t kBytesPerNodeGuess = 96;
  out.reserve(64 + g.num_nodes() * kBytesPerNodeGuess);
  out += "graph ";
  out += g.name();
  out += g.scheduled() ? " scheduled {\n" : " {\n";
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    out += "  ";
    append_node(out, g, NodeId{static_cast<uint32_t>(i)});
    if (i < notes.size() && !notes[i].empty()) {
      out += "  // ";
      out += notes[i];
    }
    out += '\n';
  }
  if (!g.outputs().empty()) {
    out += "  return ";
    bool first = true;
    for (ValueId v : g.outputs()) {
      if (!first) out += ", ";
      first = false;
      append_name(out, g, v);
    }
    out += '\n';
  }
  out += "}\n";
  return out;
}

}  // namespace lms
