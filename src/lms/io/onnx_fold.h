// Constant evaluation of the ONNX operators that exports use for shape arithmetic and attention masks, on host
// tensors: broadcasting Add/Sub/Mul/Div/Mod/Equal, elementwise Neg/Sqrt/Reciprocal/Pow/..., Not, Where, Expand, Tile,
// Transpose, Concat, ScatterND, Slice and Range. The importer (io/onnx_import.cc) calls these when every input of
// a node is a constant, so a mask computed from a registered buffer (`mask[:, :, :T, :T] == 0`) or positions from
// `arange(T)` become plain constants it can recognise. Booleans are i64 0/1, as the reader widens them. Results
// are limited to kMaxFoldElements elements.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "lms/runtime/tensor.h"
#include "lms/support/error.h"

namespace lms {

constexpr int64_t kMaxFoldElements = int64_t{1} << 26;  // 512 MiB of i64: far past any mask or shape list

// NumPy broadcasting of two shapes (aligned at the right; each pair equal or one of them 1).
Result<Shape> broadcast_shapes(const Shape& a, const Shape& b);

// `op` is "Add", "Sub", "Mul", "Div" (integer division truncates; by zero is an error), "Mod" (integers; the
// remainder takes the divisor's sign, ONNX's fmod = 0), "Fmod" (the dividend's sign, ONNX's fmod = 1) or "Equal"
// (an i64 0/1 result). The result has a's dtype and the broadcast shape.
Result<HostTensor> fold_binary(std::string_view op, const HostTensor& a, const HostTensor& b);

// Expand: x broadcast to the broadcast of its shape and `shape` (ONNX Expand is two-way: a 1 in `shape` keeps
// x's dim).
Result<HostTensor> fold_expand(const HostTensor& x, const Shape& shape);

// Tile: x repeated repeats[k] times along each axis k.
Result<HostTensor> fold_tile(const HostTensor& x, std::span<const int64_t> repeats);

// Transpose: out dim k is x's dim perm[k].
Result<HostTensor> fold_transpose(const HostTensor& x, std::span<const int64_t> perm);

// Concat along `axis` (negative counts from the end): same dtype and rank, dims equal but the axis.
Result<HostTensor> fold_concat(std::span<const HostTensor* const> parts, int64_t axis);

// ScatterND without reduction: `data` with, for each index tuple (the last dim of `indices`, k <= rank of data),
// the addressed slice of rank r - k replaced by the matching entry of `updates`.
Result<HostTensor> fold_scatter_nd(const HostTensor& data, const HostTensor& indices, const HostTensor& updates);

// Neg, Sqrt, Reciprocal, Relu, Sigmoid, Tanh of a float constant, or Pow by a one-element `exponent` (`op`
// "Pow"): computed in double and rounded once to the dtype.
Result<HostTensor> fold_unary(std::string_view op, const HostTensor& x, double exponent = 1);

// Logical not: 1 where x is 0, else 0 (i64).
HostTensor fold_not(const HostTensor& x);

// Where(cond, a, b) with broadcasting; the result has a's dtype.
Result<HostTensor> fold_where(const HostTensor& cond, const HostTensor& a, const HostTensor& b);

// The elements an ONNX Slice takes along each axis of `shape`: the first, the step between them and how many.
struct SliceBounds {
  std::vector<int64_t> first, step;
  Shape count;  // the sliced shape
};
// ONNX Slice: for each listed axis (negative counts from the end), elements start, start+step, ... before end,
// with ONNX's clamping of out-of-range starts and ends. `axes` empty means 0, 1, ..., starts.size()-1; `steps`
// empty means ones.
Result<SliceBounds> slice_bounds(const Shape& shape, std::span<const int64_t> starts, std::span<const int64_t> ends,
                                 std::span<const int64_t> axes, std::span<const int64_t> steps);
// That slice of a constant.
Result<HostTensor> fold_slice(const HostTensor& x, std::span<const int64_t> starts, std::span<const int64_t> ends,
                              std::span<const int64_t> axes, std::span<const int64_t> steps);

// ONNX Range: start, start+delta, ... while before limit, in the dtype of `start`.
Result<HostTensor> fold_range(const HostTensor& start, const HostTensor& limit, const HostTensor& delta);

// Whether `masked` (nonzero = masked out), broadcast to `scores`' shape, masks exactly the entries [..., i, j]
// with j > i of every matrix: a causal attention mask.
bool is_causal_mask(const HostTensor& masked, const Shape& scores);

}  // namespace lms
