// The roofline cost model: predicted seconds for each op of a graph on a DeviceModel. A compute op takes
// launch_overhead + max(flops / peak_flops(dtype), (bytes_read + bytes_written) / memory_bytes_per_s), with
// flops and bytes from the op's own cost function (OpDef::cost) and the dtype of its first floating-point
// input (else of its first output); a copy op (trait is_copy: swap_out, swap_in) takes copy_latency + bytes
// moved / the link rate of its direction (d2h for an output placed on the host, h2d otherwise); a source
// (input, param, state, constant) takes 0. Precondition: the graph's types are inferred (built or parsed and
// verified) and the model's rates are positive. It does not model overlap between streams or contention
// for memory bandwidth (the time simulator's job), kernel efficiency below peak, or fusion.
// Measured times (`lms profile`, by node name) override the roofline for the nodes they name, and for the recompute
// clones of those nodes (the same op on the same shapes; on an H200 a clone of resnet50's stem at batch 768 was
// predicted 2.7 ms by the roofline and took 27 ms, its original's time); a profile that
// recorded each node's work (flops and bytes) also predicts the same graph at another size (batch, resolution):
// the measured time above the launch overhead scales with the roofline's, so each node keeps its measured
// efficiency.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/sim/device_model.h"

namespace lms {

// Predicted seconds for node `n` of `g` on `m`.
double op_seconds(const Graph& g, NodeId n, const DeviceModel& m);

// A node's measured time, with the work the roofline counted for it then (absent: used as is, at any size).
struct MeasuredNode {
  double seconds = 0;
  std::optional<Cost> cost;  // flops and bytes when measured
};

// Measured nodes by name, each named by its first output (`lms profile` writes them).
using MeasuredTimes = std::unordered_map<std::string, MeasuredNode>;

// The measured entry for node n (which has an output): its own name's, or for a recompute clone
// (passes/recompute.cc names it `<original>.re` or `<original>.re<k>`) its original's, through clones of clones;
// null: none.
const MeasuredNode* measured_entry(const Graph& g, const Node& n, const MeasuredTimes& measured);

// Seconds for every node, indexed by NodeId: where `measured` names the node, the measured time (scaled as
// above when the node's work differs from the recorded one), else op_seconds.
std::vector<double> op_times(const Graph& g, const DeviceModel& m, const MeasuredTimes* measured = nullptr);

}  // namespace lms
