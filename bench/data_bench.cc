// Filling training batches from an npz archive (src/lms/data/npz_data.cc): uint8 volumes and labels converted to
// a 3-D segmenter's f32 inputs and i64 labels (batch 2 of [1,64,64,64]: 2 x 262,144 elements each), and the same
// volumes stored as f32 (one memcpy a row). The archive is written to the temp directory first.
#include <benchmark/benchmark.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "lms/data/data.h"
#include "lms/io/zip.h"

namespace {

constexpr int64_t kSamples = 16;
constexpr int64_t kSide = 64;
constexpr int64_t kVoxels = kSide * kSide * kSide;
constexpr int64_t kBatch = 2;

// An .npy member: header then `data`.
std::vector<std::byte> npy(const std::string& descr, const std::string& shape, std::vector<std::byte> data) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const size_t total = (10 + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - 10 - dict.size() - 1, ' ');
  dict += '\n';
  std::string header = std::string("\x93NUMPY\x01\x00", 8);
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>(dict.size() >> 8);
  header += dict;
  std::vector<std::byte> out(header.size() + data.size());
  std::memcpy(out.data(), header.data(), header.size());
  std::memcpy(out.data() + header.size(), data.data(), data.size());
  return out;
}

std::string write_archive(bool f32_inputs) {
  const std::string path =
      (std::filesystem::temp_directory_path() / (f32_inputs ? "lms_data_bench_f32.npz" : "lms_data_bench_u1.npz"))
          .string();
  std::vector<std::byte> x(static_cast<size_t>(kSamples * kVoxels) * (f32_inputs ? 4 : 1));
  std::vector<std::byte> y(static_cast<size_t>(kSamples * kVoxels));
  for (size_t i = 0; i < y.size(); ++i) {
    y[i] = static_cast<std::byte>(i % 3);
    if (f32_inputs) {
      const float v = static_cast<float>(i % 251);
      std::memcpy(x.data() + i * 4, &v, 4);
    } else {
      x[i] = static_cast<std::byte>(i % 251);
    }
  }
  const std::string shape = "(" + std::to_string(kSamples) + ", 64, 64, 64)";
  const std::vector<std::byte> xm = npy(f32_inputs ? "<f4" : "|u1", shape, std::move(x));
  const std::vector<std::byte> ym = npy("|u1", shape, std::move(y));
  const lms::zip::WriteMember members[] = {{"x_train.npy", {std::span(xm)}}, {"y_train.npy", {std::span(ym)}}};
  auto w = lms::zip::write_archive(path, members);
  if (!w) throw std::runtime_error(w.error().str());
  return path;
}

void fill(benchmark::State& state, bool f32_inputs) {
  lms::DataOptions o;
  o.kind = "npz";
  o.file = write_archive(f32_inputs);
  o.classes = 3;
  auto source = lms::open_data(o, {lms::DType::f32, {kBatch, 1, kSide, kSide, kSide}},
                               {lms::DType::i64, {kBatch, kSide, kSide, kSide}});
  if (!source) throw std::runtime_error(source.error().str());
  lms::HostTensor x, labels;
  int64_t i = 0;
  for (auto _ : state) {
    auto r = (*source)->train_batch(0, i++ % (*source)->train_batches(), x, labels);
    if (!r) throw std::runtime_error(r.error().str());
    benchmark::DoNotOptimize(x.data.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch * kVoxels);
  std::filesystem::remove(o.file);
}

void BM_FillUint8Volumes(benchmark::State& state) { fill(state, false); }
void BM_FillFloatVolumes(benchmark::State& state) { fill(state, true); }
BENCHMARK(BM_FillUint8Volumes)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FillFloatVolumes)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
