// The graph IR. A Graph owns Nodes and Values addressed by typed indices (NodeId, ValueId), never by pointers
// or names. A value has a type, one producer (node and output index), a placement and its consumers (sorted by
// node id, each consumer once). A node has an op, normalized attributes, data inputs, control inputs (nodes
// that must finish first), outputs and a category. Names are unique per graph and assigned at creation
// (a clash gets a ".N" suffix), so printing never invents names. Storage order is the text order; for a
// graph marked `scheduled` it is also the execution order.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lms/ir/attributes.h"
#include "lms/ir/types.h"
#include "lms/ops/op.h"

namespace lms {

struct NodeId {
  uint32_t v = UINT32_MAX;
  bool valid() const { return v != UINT32_MAX; }
  friend auto operator<=>(NodeId, NodeId) = default;
};
struct ValueId {
  uint32_t v = UINT32_MAX;
  bool valid() const { return v != UINT32_MAX; }
  friend auto operator<=>(ValueId, ValueId) = default;
};

enum class Category : uint8_t { fwd, bwd, upd, swap, recompute };
inline constexpr int kNumCategories = 5;
std::string_view category_name(Category c);
std::optional<Category> parse_category(std::string_view s);
std::string_view placement_name(Placement p);

struct Value {
  std::string name;  // unique in the graph, without the '%'
  TensorType type;
  NodeId producer;
  int output_index = 0;
  Placement placement = Placement::device;
  std::vector<NodeId> consumers;  // data consumers, sorted by id, each once
};

struct Node {
  Op op{};
  Attributes attrs;
  std::vector<ValueId> inputs;
  std::vector<NodeId> control_inputs;  // sorted by id, each once
  std::vector<ValueId> outputs;
  Category category = Category::fwd;
};

class Graph {
 public:
  explicit Graph(std::string name = "g") : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  bool scheduled() const { return scheduled_; }
  void set_scheduled(bool s) { scheduled_ = s; }

  size_t num_nodes() const { return nodes_.size(); }
  size_t num_values() const { return values_.size(); }
  const Node& node(NodeId n) const { return nodes_[n.v]; }
  const Value& value(ValueId v) const { return values_[v.v]; }
  Node& mutable_node(NodeId n) { return nodes_[n.v]; }
  const OpDef& def(NodeId n) const { return op_def(nodes_[n.v].op); }
  std::vector<NodeId> node_ids() const;  // 0..n-1

  // Adds a node with the given outputs (one name hint and type each) and no inputs. Names that clash get a
  // ".N" suffix; an empty hint becomes the op's name. Attributes are stored as given (normalize first).
  NodeId add_node(Op op, Attributes attrs, std::span<const TensorType> out_types,
                  std::span<const std::string> out_names, Category cat = Category::fwd);
  // Data inputs and control inputs; these keep the consumer lists up to date.
  void set_inputs(NodeId n, std::vector<ValueId> inputs);
  void replace_input(NodeId n, size_t index, ValueId v);
  void add_control_input(NodeId n, NodeId before);
  void set_placement(ValueId v, Placement p) { values_[v.v].placement = p; }

  // Graph outputs (the `return` line): values that are results of the program.
  const std::vector<ValueId>& outputs() const { return outputs_; }
  void set_outputs(std::vector<ValueId> outs) { outputs_ = std::move(outs); }

  std::optional<ValueId> find_value(std::string_view name) const;
  // The first output of a node (how text names a node, e.g. in `after(...)`).
  ValueId first_output(NodeId n) const { return nodes_[n.v].outputs.front(); }
  // Persistent values: outputs of persistent ops, and outputs of in-place ops aliasing persistent values.
  bool is_persistent(ValueId v) const;
  // The value whose storage `v` shares (itself unless it is an in-place op's aliasing output).
  ValueId storage_root(ValueId v) const;

  // Removes the nodes with dead[i] set (and their outputs), renumbering what remains in order. Dead nodes'
  // outputs must not be read by live nodes or be graph outputs.
  void erase_nodes(const std::vector<bool>& dead);
  // Reorders the node storage to `order` (a permutation of all node ids), renumbering nodes and values.
  void reorder(std::span<const NodeId> order);

 private:
  std::string unique_name(std::string_view hint);

  std::string name_;
  bool scheduled_ = false;
  std::vector<Node> nodes_;
  std::vector<Value> values_;
  std::vector<ValueId> outputs_;
  std::unordered_map<std::string, ValueId> by_name_;  // lookup only, never iterated for output
  std::unordered_map<std::string, uint32_t> next_suffix_;
};

}  // namespace lms
