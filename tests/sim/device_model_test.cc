// Device models (sim/device_model.h): every preset named in shared/DEVICES.md resolves with positive numbers,
// an unknown name lists the known ones, peak FLOP/s by dtype, and the cpu-here measurement is plausible and
// quick.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lms/sim/device_model.h"

namespace lms {
namespace {

const std::vector<std::string> kPresetNames = {"v100-nvlink2", "v100-pcie3", "a100-pcie4",
                                               "h100-pcie5",   "h200-pcie5", "gh200-c2c"};

void expect_positive(const DeviceModel& m) {
  SCOPED_TRACE(m.name);
  EXPECT_GT(m.memory_bytes, 0);
  EXPECT_GT(m.peak_flops_f32, 0);
  EXPECT_GE(m.peak_flops_f16, 0);
  EXPECT_GT(m.memory_bytes_per_s, 0);
  EXPECT_GT(m.h2d_bytes_per_s, 0);
  EXPECT_GT(m.d2h_bytes_per_s, 0);
  EXPECT_GT(m.copy_latency_s, 0);
  EXPECT_GT(m.launch_overhead_s, 0);
  EXPECT_FALSE(m.source.empty());
}

TEST(DeviceModel, PresetsAreTheNamesOfDevicesMd) {
  std::vector<std::string> names;
  for (const DeviceModel& m : device_presets()) names.push_back(m.name);
  EXPECT_EQ(names, kPresetNames);
}

TEST(DeviceModel, EveryPresetResolvesWithPositiveNumbers) {
  for (const std::string& name : kPresetNames) {
    auto m = device_model(name);
    ASSERT_TRUE(m.has_value()) << m.error().str();
    EXPECT_EQ(m->name, name);
    expect_positive(*m);
    EXPECT_GT(m->peak_flops_f16, m->peak_flops_f32) << name;  // every preset has tensor cores
  }
}

TEST(DeviceModel, PresetFiguresFromDevicesMd) {
  const DeviceModel v100 = *device_model("v100-pcie3");
  EXPECT_EQ(v100.memory_bytes, int64_t{16} << 30);
  EXPECT_DOUBLE_EQ(v100.peak_flops_f32, 15.7e12);
  EXPECT_DOUBLE_EQ(v100.memory_bytes_per_s, 900e9);
  EXPECT_DOUBLE_EQ(v100.h2d_bytes_per_s, 12.5e9);
  const DeviceModel h200 = *device_model("h200-pcie5");
  EXPECT_EQ(h200.memory_bytes, int64_t{141} << 30);
  EXPECT_DOUBLE_EQ(h200.memory_bytes_per_s, 4800e9);
  EXPECT_DOUBLE_EQ(h200.d2h_bytes_per_s, 52e9);
  // The links rank as DEVICES.md has them: PCIe 3 < PCIe 4 < PCIe 5 < NVLink 2.0 < NVLink-C2C.
  EXPECT_LT(v100.h2d_bytes_per_s, device_model("a100-pcie4")->h2d_bytes_per_s);
  EXPECT_LT(device_model("a100-pcie4")->h2d_bytes_per_s, h200.h2d_bytes_per_s);
  EXPECT_LT(h200.h2d_bytes_per_s, device_model("v100-nvlink2")->h2d_bytes_per_s);
  EXPECT_LT(device_model("v100-nvlink2")->h2d_bytes_per_s, device_model("gh200-c2c")->h2d_bytes_per_s);
}

TEST(DeviceModel, UnknownNameListsTheNames) {
  auto m = device_model("tpu-v9");
  ASSERT_FALSE(m.has_value());
  const std::string msg = m.error().str();
  EXPECT_NE(msg.find("tpu-v9"), std::string::npos) << msg;
  for (const std::string& name : kPresetNames) EXPECT_NE(msg.find(name), std::string::npos) << msg;
  EXPECT_NE(msg.find("cpu-here"), std::string::npos) << msg;
}

TEST(DeviceModel, PeakFlopsPerDtype) {
  const DeviceModel h100 = *device_model("h100-pcie5");
  EXPECT_DOUBLE_EQ(h100.peak_flops(DType::f32), 67e12);
  EXPECT_DOUBLE_EQ(h100.peak_flops(DType::f16), 989e12);
  EXPECT_DOUBLE_EQ(h100.peak_flops(DType::bf16), 989e12);
  EXPECT_DOUBLE_EQ(h100.peak_flops(DType::f64), 67e12);
  EXPECT_DOUBLE_EQ(h100.peak_flops(DType::i32), 67e12);
  DeviceModel no_tensor_cores = h100;
  no_tensor_cores.peak_flops_f16 = 0;  // 0: same as f32
  EXPECT_DOUBLE_EQ(no_tensor_cores.peak_flops(DType::f16), 67e12);
  EXPECT_DOUBLE_EQ(no_tensor_cores.peak_flops(DType::bf16), 67e12);
}

// (How long the measurement takes, about 0.2 s, is not asserted: a timed test fails on a loaded machine.)
TEST(DeviceModel, CpuHereMeasuresPlausibleNumbers) {
  auto m = device_model("cpu-here");
  ASSERT_TRUE(m.has_value()) << m.error().str();
  EXPECT_EQ(m->name, "cpu-here");
  expect_positive(*m);
  // Wide ranges: any machine this runs on, debug builds included.
  EXPECT_GE(m->memory_bytes, int64_t{256} << 20);
  EXPECT_LE(m->memory_bytes, int64_t{1} << 46);
  EXPECT_GE(m->peak_flops_f32, 1e8);
  EXPECT_LE(m->peak_flops_f32, 1e14);
  EXPECT_EQ(m->peak_flops_f16, 0);
  EXPECT_GE(m->h2d_bytes_per_s, 1e8);
  EXPECT_LE(m->h2d_bytes_per_s, 1e12);
  EXPECT_EQ(m->h2d_bytes_per_s, m->d2h_bytes_per_s);
  EXPECT_EQ(m->memory_bytes_per_s, 2 * m->h2d_bytes_per_s);  // bytes read plus written
  EXPECT_LT(m->copy_latency_s, 1e-4);
  EXPECT_LT(m->launch_overhead_s, 1e-4);
}

TEST(DeviceModel, CpuHereOptionsOutOfRange) {
  CpuMeasureOptions bad;
  bad.copy_repetitions = 0;
  auto m = measure_cpu_here(bad);
  ASSERT_FALSE(m.has_value());
  EXPECT_NE(m.error().str().find("copy_repetitions"), std::string::npos) << m.error().str();
  bad = {};
  bad.gemm_seconds = 0;
  EXPECT_FALSE(measure_cpu_here(bad).has_value());
}

}  // namespace
}  // namespace lms
