// A convenience for code that creates graphs (model builders, autodiff, tests): each call normalizes the
// attributes, infers output types with the op's shape rule and adds the node. The first error is kept
// (later calls become no-ops returning invalid ids), so a builder function can make many calls and check
// `error()` once at the end; the error names the node that failed.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "lms/ir/graph.h"

namespace lms {

class Builder {
 public:
  explicit Builder(Graph& g) : g_(g) {}

  Graph& graph() { return g_; }
  Category category() const { return cat_; }
  void set_category(Category c) { cat_ = c; }
  // Prefix for the names of values created from now on ("layer1.0." gives "%layer1.0.conv1").
  void set_prefix(std::string p) { prefix_ = std::move(p); }
  const std::string& prefix() const { return prefix_; }

  // Adds a node; returns its outputs (empty after an error). `name` is the first output's name hint; further
  // outputs are named "<name>.<output name>".
  std::vector<ValueId> add(Op op, std::vector<ValueId> inputs, Attributes attrs = {}, std::string name = "",
                           std::vector<TensorType> declared = {});
  // The single-output case.
  ValueId op(Op op, std::vector<ValueId> inputs, Attributes attrs = {}, std::string name = "");

  ValueId input(TensorType t, std::string name);
  ValueId param(TensorType t, std::string name, std::string init = "");
  ValueId state(TensorType t, std::string name, std::string init = "zeros");

  // x with dropout probability p, or x itself when p == 0. Every dropout of a graph reads its one key, the
  // i64[] state "dropout.key" (init "bits", made on first use; the training graph advances it every step), and
  // has seed = the number of dropouts before it, so each draws its own mask (docs/ops.md, Note [Dropout masks]).
  ValueId dropout(ValueId x, double p, std::string name);

  const TensorType& type(ValueId v) const { return g_.value(v).type; }
  bool ok() const { return !error_.has_value(); }
  const std::optional<Error>& error() const { return error_; }

 private:
  Graph& g_;
  Category cat_ = Category::fwd;
  std::string prefix_;
  std::optional<Error> error_;
};

// Attribute list literal: attrs({{"stride", IntList{2, 2}}, {"groups", int64_t{1}}}).
Attributes attrs(std::initializer_list<std::pair<std::string, Attribute>> list);

}  // namespace lms
