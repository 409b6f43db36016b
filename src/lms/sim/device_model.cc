// Device presets (figures from shared/DEVICES.md, each with its source) and the cpu-here measurement.
//
// Note [Preset figures]
// Each GPU preset is the SXM module of its generation with the named host link (DGX-1 V100 and DGX A100 reach
// the host over PCIe 3 and 4, HGX H100/H200 over PCIe 5; the AC922 over NVLink 2.0; GH200 over NVLink-C2C).
// Compute and HBM figures are vendor datasheet peaks, as DEVICES.md lists them; achieved rates are lower
// (large GEMMs 70-90% of peak), which measured profiles will correct. Memory is the product's nominal
// capacity in GiB (HBM capacities are binary; the driver shows slightly less, e.g. ~0.5 GiB reserved).
// Link rates are the ACHIEVED per-direction rates DEVICES.md states for pinned copies over PCIe (3: ~12.5,
// 4: ~25, 5: ~52 GB/s, about 80% of the raw rate). For the NVLinks DEVICES.md gives only the raw rate, so we
// take the same 80%: NVLink 2.0 75 -> 60 GB/s, NVLink-C2C 450 -> 360 GB/s (an assumption, not a measurement).
// Copy latency (10 us) and launch overhead (5 us) are assumptions of the usual order for CUDA (a
// cudaMemcpyAsync plus event, a kernel launch), not datasheet figures.
//
// Note [cpu-here]
// On a CPU the "device" is main memory, so a copy to or from the "host" is a memcpy: h2d and d2h are the
// memcpy rate (bytes copied per second) and memory_bytes_per_s counts its bytes read plus written (2x), as
// the roofline does. The FLOP/s figure comes from a 64x64x64 f32 product in i-k-j order (inner loop unit
// stride, so g++ vectorizes it at -O2 without -march) repeated on every thread for a fixed time: honest but
// plain, so it is a lower bound on oneDNN's blocked, JIT-compiled kernels. Copy latency and launch overhead
// are the time of one tiny memcpy through a non-inlinable call: a CPU "launch" is a function call, far below
// a GPU's. All calls go through a volatile function pointer so that the compiler cannot drop or fold them.
#include "lms/sim/device_model.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace lms {

namespace {

constexpr double kGB = 1e9;                  // decimal: link and memory rates are quoted in GB/s
constexpr double kTFLOPS = 1e12;
constexpr int64_t kGiB = int64_t{1} << 30;   // binary: HBM capacities
constexpr double kCopyLatencyS = 10e-6;      // assumption (Note [Preset figures])
constexpr double kLaunchOverheadS = 5e-6;    // assumption (Note [Preset figures])
constexpr double kNvlinkAchieved = 0.8;      // achieved / raw for NVLink, as for PCIe (Note [Preset figures])

const std::array<DeviceModel, 6>& presets() {
  static const std::array<DeviceModel, 6> kPresets = {{
      {.name = "v100-nvlink2",
       .memory_bytes = 16 * kGiB,             // V100 SXM2 16 GB (the TFLMS paper's AC922)
       .peak_flops_f32 = 15.7 * kTFLOPS,      // V100 SXM2 datasheet FP32
       .peak_flops_f16 = 125 * kTFLOPS,       // V100 SXM2 datasheet FP16 tensor
       .memory_bytes_per_s = 900 * kGB,       // V100 SXM2 datasheet HBM2
       .h2d_bytes_per_s = kNvlinkAchieved * 75 * kGB,  // NVLink 2.0 POWER9-V100, 3 bricks x 25 GB/s each way
       .d2h_bytes_per_s = kNvlinkAchieved * 75 * kGB,
       .copy_latency_s = kCopyLatencyS,
       .launch_overhead_s = kLaunchOverheadS,
       .source = "NVIDIA V100 datasheet (SXM2 16 GB); NVLink 2.0 75 GB/s/dir (IBM AC922) at 80% achieved"},
      {.name = "v100-pcie3",
       .memory_bytes = 16 * kGiB,             // V100 SXM2 16 GB
       .peak_flops_f32 = 15.7 * kTFLOPS,      // V100 SXM2 datasheet FP32
       .peak_flops_f16 = 125 * kTFLOPS,       // V100 SXM2 datasheet FP16 tensor
       .memory_bytes_per_s = 900 * kGB,       // V100 SXM2 datasheet HBM2
       .h2d_bytes_per_s = 12.5 * kGB,         // PCIe 3.0 x16: 15.75 raw, ~12.5 achieved (DEVICES.md)
       .d2h_bytes_per_s = 12.5 * kGB,
       .copy_latency_s = kCopyLatencyS,
       .launch_overhead_s = kLaunchOverheadS,
       .source = "NVIDIA V100 datasheet (SXM2 16 GB); PCIe 3.0 x16 ~12.5 GB/s/dir achieved"},
      {.name = "a100-pcie4",
       .memory_bytes = 40 * kGiB,             // A100 40 GB
       .peak_flops_f32 = 19.5 * kTFLOPS,      // A100 datasheet FP32
       .peak_flops_f16 = 312 * kTFLOPS,       // A100 datasheet BF16/FP16 tensor, dense
       .peak_flops_tf32 = 156 * kTFLOPS,      // A100 datasheet TF32 tensor, dense
       .memory_bytes_per_s = 1555 * kGB,      // A100 40 GB datasheet HBM2
       .h2d_bytes_per_s = 25 * kGB,           // PCIe 4.0 x16: 31.5 raw, ~25 achieved (DEVICES.md)
       .d2h_bytes_per_s = 25 * kGB,
       .copy_latency_s = kCopyLatencyS,
       .launch_overhead_s = kLaunchOverheadS,
       .source = "NVIDIA A100 datasheet (40 GB); PCIe 4.0 x16 ~25 GB/s/dir achieved"},
      {.name = "h100-pcie5",
       .memory_bytes = 80 * kGiB,             // H100 SXM 80 GB
       .peak_flops_f32 = 67 * kTFLOPS,        // H100 SXM datasheet FP32
       .peak_flops_f16 = 989 * kTFLOPS,       // H100 SXM datasheet BF16/FP16 tensor, dense
       .peak_flops_tf32 = 495 * kTFLOPS,      // H100 SXM datasheet TF32 tensor, dense
       .memory_bytes_per_s = 3350 * kGB,      // H100 SXM datasheet HBM3
       .h2d_bytes_per_s = 52 * kGB,           // PCIe 5.0 x16: 63 raw, ~50-55 achieved (DEVICES.md)
       .d2h_bytes_per_s = 52 * kGB,
       .copy_latency_s = kCopyLatencyS,
       .launch_overhead_s = kLaunchOverheadS,
       .source = "NVIDIA H100 datasheet (SXM 80 GB); PCIe 5.0 x16 ~52 GB/s/dir achieved"},
      {.name = "h200-pcie5",
       .memory_bytes = 141 * kGiB,            // H200 SXM 141 GB
       .peak_flops_f32 = 67 * kTFLOPS,        // H200 datasheet FP32 (as H100)
       .peak_flops_f16 = 989 * kTFLOPS,       // H200 datasheet BF16/FP16 tensor, dense (as H100)
       .peak_flops_tf32 = 495 * kTFLOPS,      // H200 datasheet TF32 tensor, dense (as H100)
       .memory_bytes_per_s = 4800 * kGB,      // H200 datasheet HBM3e
       .h2d_bytes_per_s = 52 * kGB,           // PCIe 5.0 x16: 63 raw, ~50-55 achieved (DEVICES.md)
       .d2h_bytes_per_s = 52 * kGB,
       .copy_latency_s = kCopyLatencyS,
       .launch_overhead_s = kLaunchOverheadS,
       .source = "NVIDIA H200 datasheet (SXM 141 GB); PCIe 5.0 x16 ~52 GB/s/dir achieved"},
      {.name = "gh200-c2c",
       .memory_bytes = 96 * kGiB,             // GH200 Hopper part, 96 GB HBM3 version
       .peak_flops_f32 = 67 * kTFLOPS,        // GH200 datasheet FP32 (as H100)
       .peak_flops_f16 = 989 * kTFLOPS,       // GH200 datasheet BF16/FP16 tensor, dense (as H100)
       .peak_flops_tf32 = 495 * kTFLOPS,      // GH200 datasheet TF32 tensor, dense (as H100)
       .memory_bytes_per_s = 4000 * kGB,      // GH200 datasheet HBM3, "about 4,000 GB/s"
       .h2d_bytes_per_s = kNvlinkAchieved * 450 * kGB,  // NVLink-C2C 900 GB/s both ways = 450 each
       .d2h_bytes_per_s = kNvlinkAchieved * 450 * kGB,
       .copy_latency_s = kCopyLatencyS,
       .launch_overhead_s = kLaunchOverheadS,
       .source = "NVIDIA GH200 datasheet (96 GB HBM3); NVLink-C2C 450 GB/s/dir at 80% achieved"},
  }};
  return kPresets;
}

constexpr std::string_view kCpuHere = "cpu-here";

// Seconds since `start`.
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// memcpy behind a volatile pointer: the compiler can neither inline it nor drop a copy nobody reads.
void* (*volatile g_copy)(void*, const void*, size_t) = std::memcpy;

// The product block (Note [cpu-here]): three 16 KiB matrices, resident in L1/L2.
constexpr int kGemmN = 64;
constexpr double kGemmFlops = 2.0 * kGemmN * kGemmN * kGemmN;
// Small inputs keep the accumulators far from overflow and denormals, which would change the speed.
constexpr float kGemmInput = 1e-3f;

// c += a * b for kGemmN x kGemmN row-major blocks.
void gemm_block(const float* __restrict a, const float* __restrict b, float* __restrict c) {
  for (int i = 0; i < kGemmN; ++i)
    for (int k = 0; k < kGemmN; ++k) {
      const float aik = a[i * kGemmN + k];
      for (int j = 0; j < kGemmN; ++j) c[i * kGemmN + j] += aik * b[k * kGemmN + j];
    }
}
void (*volatile g_gemm)(const float*, const float*, float*) = gemm_block;

using Buffer = std::unique_ptr<char, decltype(&std::free)>;

// Best bytes/s of `opts.copy_repetitions` memcpys of `opts.copy_bytes`.
Result<double> measure_memcpy(const CpuMeasureOptions& opts) {
  const size_t n = static_cast<size_t>(opts.copy_bytes);
  Buffer src(static_cast<char*>(std::malloc(n)), &std::free), dst(static_cast<char*>(std::malloc(n)), &std::free);
  if (!src || !dst) return fail("cpu-here: cannot allocate 2 x {} bytes for the memcpy measurement", n);
  // Touch every page first, so the timed copies do not include page faults.
  std::memset(src.get(), 1, n);
  std::memset(dst.get(), 0, n);
  double best = 0;
  for (int r = 0; r < opts.copy_repetitions; ++r) {
    auto start = std::chrono::steady_clock::now();
    g_copy(dst.get(), src.get(), n);
    const double s = seconds_since(start);
    if (s > 0) best = std::max(best, static_cast<double>(n) / s);
  }
  if (best <= 0) return fail("cpu-here: the memcpy of {} bytes took no measurable time", n);
  return best;
}

// FLOP/s of gemm_block running for opts.gemm_seconds on each of `threads` threads.
double measure_gemm(const CpuMeasureOptions& opts, int threads) {
  std::vector<int64_t> products(static_cast<size_t>(threads), 0);
  std::atomic<double> checksum{0};  // read by nobody; keeps the results observable
  auto work = [&](size_t t) {
    std::vector<float> a(kGemmN * kGemmN, kGemmInput), b(kGemmN * kGemmN, kGemmInput), c(kGemmN * kGemmN, 0);
    auto start = std::chrono::steady_clock::now();
    do {
      g_gemm(a.data(), b.data(), c.data());
      ++products[t];
    } while (seconds_since(start) < opts.gemm_seconds);
    checksum.fetch_add(c[0]);
  };
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (size_t t = 1; t < products.size(); ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& th : pool) th.join();
  const double s = seconds_since(start);
  double total = 0;
  for (int64_t p : products) total += static_cast<double>(p) * kGemmFlops;
  return total / s;
}

// Seconds per call of a 64-byte memcpy through g_copy.
double measure_tiny_copy(const CpuMeasureOptions& opts) {
  std::array<char, 64> src{}, dst{};
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < opts.latency_calls; ++i) g_copy(dst.data(), src.data(), src.size());
  return seconds_since(start) / opts.latency_calls;
}

}  // namespace

Result<DeviceModel> with_tf32(DeviceModel m) {
  if (m.peak_flops_tf32 <= 0) return fail("device model {} has no TF32 tensor cores", m.name);
  m.peak_flops_f32 = std::max(m.peak_flops_f32, m.peak_flops_tf32);
  m.source += "; f32 at the TF32 tensor-core rate";
  return m;
}

double DeviceModel::peak_flops(DType t) const {
  if ((t == DType::f16 || t == DType::bf16) && peak_flops_f16 > 0) return peak_flops_f16;
  return peak_flops_f32;
}

std::span<const DeviceModel> device_presets() { return presets(); }

Result<DeviceModel> device_model(std::string_view name) {
  for (const DeviceModel& m : presets())
    if (m.name == name) return m;
  if (name == kCpuHere) return measure_cpu_here();
  std::string known;
  for (const DeviceModel& m : presets()) known += m.name + ", ";
  return fail("unknown device model '{}' (known: {}{})", name, known, kCpuHere);
}

Result<DeviceModel> measure_cpu_here(const CpuMeasureOptions& opts) {
  if (opts.copy_bytes < 1) return fail("cpu-here: copy_bytes must be >= 1, got {}", opts.copy_bytes);
  if (opts.copy_repetitions < 1)
    return fail("cpu-here: copy_repetitions must be >= 1, got {}", opts.copy_repetitions);
  if (!(opts.gemm_seconds > 0)) return fail("cpu-here: gemm_seconds must be > 0, got {}", opts.gemm_seconds);
  if (opts.threads < 0) return fail("cpu-here: threads must be >= 0, got {}", opts.threads);
  if (opts.latency_calls < 1) return fail("cpu-here: latency_calls must be >= 1, got {}", opts.latency_calls);

  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return fail("cpu-here: sysconf cannot tell the physical memory size");
  const int threads =
      opts.threads > 0 ? opts.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  const double copy_rate = LMS_TRY(measure_memcpy(opts));
  const double flops = measure_gemm(opts, threads);
  const double call_s = measure_tiny_copy(opts);
  return DeviceModel{
      .name = std::string(kCpuHere),
      .memory_bytes = static_cast<int64_t>(pages) * page_size,
      .peak_flops_f32 = flops,
      .peak_flops_f16 = 0,
      .memory_bytes_per_s = 2 * copy_rate,
      .h2d_bytes_per_s = copy_rate,
      .d2h_bytes_per_s = copy_rate,
      .copy_latency_s = call_s,
      .launch_overhead_s = call_s,
      .source = fmt::format("measured here: memcpy of {} bytes (best of {}), {}^3 f32 product on {} threads "
                            "for {} s, {} tiny copies",
                            opts.copy_bytes, opts.copy_repetitions, kGemmN, threads, opts.gemm_seconds,
                            opts.latency_calls),
  };
}

}  // namespace lms
