// The hardware numbers the planner's cost model and time simulator use: a `DeviceModel` holds a device's
// memory, peak FLOP/s, memory bandwidth, host<->device link rate per direction, copy latency and launch
// overhead. Presets name real machines (shared/DEVICES.md gives the figures and their sources; docs/devices.md
// the table); `cpu-here` is this machine's CPU, measured at start-up by `measure_cpu_here`. This file is the
// only place a hardware constant appears. It does not measure GPUs, and it does not model contention between
// copies and compute for device-memory bandwidth (DEVICES.md: a link stream takes a share of it).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "lms/ir/types.h"
#include "lms/support/error.h"

namespace lms {

struct DeviceModel {
  std::string name;                // the preset name ("h100-pcie5") or "cpu-here"
  int64_t memory_bytes = 0;        // device memory in bytes (the named product's capacity)
  double peak_flops_f32 = 0;       // FLOP/s, dense FP32 without tensor cores (2 FLOPs per multiply-add)
  double peak_flops_f16 = 0;       // FLOP/s, dense FP16/BF16 on tensor cores; 0: same as peak_flops_f32
  double peak_flops_tf32 = 0;      // FLOP/s, dense TF32 on tensor cores (f32 with TF32 allowed); 0: none
  double memory_bytes_per_s = 0;   // device-memory bandwidth in bytes/s, counting bytes read plus written
  double h2d_bytes_per_s = 0;      // host-to-device copy rate in bytes/s (achieved, pinned memory)
  double d2h_bytes_per_s = 0;      // device-to-host copy rate in bytes/s (achieved, pinned memory)
  double copy_latency_s = 0;       // seconds a copy takes on top of bytes / rate (setup, synchronization)
  double launch_overhead_s = 0;    // seconds each non-copy op takes on top of its roofline time
  std::string source;              // one line: where the numbers come from

  // FLOP/s for arithmetic in `t`: peak_flops_f16 for f16 and bf16 (when set), peak_flops_f32 otherwise (the
  // presets carry no separate integer or f64 figures; f64 only runs on the reference backend).
  double peak_flops(DType t) const;
};

// The named presets, in the order of shared/DEVICES.md: v100-nvlink2, v100-pcie3, a100-pcie4, h100-pcie5,
// h200-pcie5, gh200-c2c. `cpu-here` is not among them (it is measured, see below).
std::span<const DeviceModel> device_presets();

// A preset by name, or `cpu-here` (measured with default options). Error: an unknown name; the message
// lists every known name.
Result<DeviceModel> device_model(std::string_view name);

// `m` with f32 arithmetic at its TF32 tensor-core rate (the cuda backend with TF32 allowed: f32 convolutions and
// matmuls on tensor cores; the element-wise ops it also speeds up in the model are memory-bound either way).
// Error: a device without TF32 (V100, cpu-here).
Result<DeviceModel> with_tf32(DeviceModel m);

struct CpuMeasureOptions {
  int64_t copy_bytes = int64_t{64} << 20;  // bytes per timed memcpy; well beyond the last-level cache, so it
                                           // measures DRAM rather than cache bandwidth
  int copy_repetitions = 3;                // timed memcpys; the fastest counts (>= 1)
  double gemm_seconds = 0.1;               // wall time the f32 product loop runs for the FLOP/s figure (> 0);
                                           // at least one product per thread always runs
  int threads = 0;                         // threads running the product loop; 0: hardware_concurrency()
  int latency_calls = 10000;               // tiny (64-byte) copies timed for the latency and launch figures
                                           // (>= 1)
};

// Measures this machine and returns a DeviceModel named "cpu-here" (Note [cpu-here] in device_model.cc):
//   memory_bytes       physical RAM (sysconf)
//   memory_bytes_per_s 2 x copy_bytes / best memcpy time (bytes read plus written)
//   h2d, d2h           copy_bytes / best memcpy time (a "copy to host" is a memcpy on a CPU)
//   peak_flops_f32     FLOP/s of a small blocked f32 matrix product written here, on `threads` threads: a
//                      lower bound on what oneDNN reaches (no explicit SIMD, no -march; compiler-vectorized)
//   copy_latency_s, launch_overhead_s  time of one tiny non-inlined memcpy call
// The numbers vary from run to run (they are measurements); the defaults take about 0.2 s. Errors: options
// out of range, an allocation failure.
Result<DeviceModel> measure_cpu_here(const CpuMeasureOptions& opts = {});

}  // namespace lms
