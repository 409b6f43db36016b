// Random graphs that pass the shape rules, for property tests that run them (tests/plan/assignment_test.cc,
// tests/runtime/tflms_random_test.cc): relu, add, mul and matmul with shapes that fit, parameters with
// in-place sgd updates ordered after their readers by control edges, inputs anywhere.
#pragma once

#include <algorithm>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "lms/ir/builder.h"

namespace lms {

inline constexpr int64_t kMaxDim = 24;  // matrix sides 1..kMaxDim: sizes from 4 bytes to a few KiB, mostly unaligned

// A random graph that passes the shape rules. Every op's output is fully written by its kernel, and with
// positive inputs and "ones" parameters every activation is positive (relu, add, mul and matmul keep it so).
inline Graph random_valid_graph(std::mt19937& rng, int num_ops) {
  Graph g("random");
  Builder b(g);
  auto dim = [&] { return std::uniform_int_distribution<int64_t>(1, kMaxDim)(rng); };
  auto one_in = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng) == 0; };
  std::vector<ValueId> values, params;
  auto pick = [&](const std::vector<ValueId>& from) {
    return from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)];
  };
  auto shape = [&](ValueId v) { return g.value(v).type.shape; };
  auto with_shape = [&](const std::vector<int64_t>& s, bool rows_only) {
    std::vector<ValueId> out;
    for (ValueId v : values)
      if (rows_only ? shape(v)[0] == s[1] : shape(v) == s) out.push_back(v);
    return out;
  };
  int counter = 0;
  auto name = [&](const char* what) { return fmt::format("{}{}", what, counter++); };
  auto new_param = [&](int64_t r, int64_t c) {
    ValueId p = b.param(TensorType{DType::f32, {r, c}}, name("w"), "ones");
    params.push_back(p);
    values.push_back(p);
    return p;
  };
  values.push_back(b.input(TensorType{DType::f32, {dim(), dim()}}, name("x")));
  for (int i = 0; i < num_ops; ++i) {
    ValueId a = pick(values);
    std::vector<int64_t> s = shape(a);
    switch (std::uniform_int_distribution<int>(0, 6)(rng)) {
      case 0: values.push_back(b.input(TensorType{DType::f32, {dim(), dim()}}, name("x"))); break;
      case 1: values.push_back(b.op(Op::relu, {a}, {}, name("r"))); break;
      case 2:
      case 3: {
        std::vector<ValueId> same = with_shape(s, false);
        ValueId other = one_in(4) ? new_param(s[0], s[1]) : pick(same);
        values.push_back(b.op(one_in(2) ? Op::add : Op::mul, {a, other}, {}, name("e")));
        break;
      }
      case 4:
      case 5: {
        std::vector<ValueId> fit = with_shape(s, true);
        ValueId rhs = fit.empty() || one_in(3) ? new_param(s[1], dim()) : pick(fit);
        values.push_back(b.op(Op::matmul, {a, rhs}, {}, name("m")));
        break;
      }
      case 6: {
        // An in-place update of a parameter by a same-shaped activation, after every other reader of it.
        if (params.empty()) break;
        ValueId w = pick(params);
        std::vector<ValueId> grads;
        for (ValueId v : with_shape(shape(w), false))
          if (std::find(params.begin(), params.end(), v) == params.end()) grads.push_back(v);
        if (grads.empty()) break;
        ValueId w_new = b.op(Op::sgd_update, {w, pick(grads)}, attrs({{"lr", 0.01}}), name("u"));
        NodeId upd = g.value(w_new).producer;
        for (NodeId reader : g.value(w).consumers)
          if (reader != upd) g.add_control_input(upd, reader);
        std::erase(params, w);  // updated once, and read by nothing after, as in a training graph
        std::erase(values, w);
        break;
      }
    }
    EXPECT_TRUE(b.ok()) << b.error()->str();
  }
  std::vector<ValueId> outs = {values.back()};
  if (one_in(2)) outs.push_back(pick(values));
  std::erase_if(outs, [&](ValueId v) { return g.def(g.value(v).producer).traits.persistent; });
  std::sort(outs.begin(), outs.end());
  outs.erase(std::unique(outs.begin(), outs.end()), outs.end());
  g.set_outputs(outs);
  return g;
}

}  // namespace lms
