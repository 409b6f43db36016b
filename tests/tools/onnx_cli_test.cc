// `lms` with an ONNX model file: `train` starts from the file's weights (a step with learning rate 0 saves them
// back unchanged), `maxbatch` searches an exported model's batch, the model is planned for training by default,
// swapping imported models is bit-exact, and options that describe built-in models, or files that are not ONNX
// models, are one-line errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "lms/io/npz.h"
#include "tools/cli_util.h"

namespace {

namespace fs = std::filesystem;

using lms::testing::CmdResult;
using lms::testing::expect_one_error_line;
using lms::testing::temp_dir;

CmdResult lms(const std::string& args) { return lms::testing::run_lms(args); }

const std::string kCnn = std::string(LMS_SOURCE_DIR) + "/tests/fixtures/onnx_cnn.onnx";

#if LMS_HAVE_ONNX_FILES
TEST(OnnxCommand, TrainingStartsFromTheFilesWeights) {
  const fs::path saved = temp_dir() / "onnx_cnn_trained.npz";
  CmdResult r = lms("train " + kCnn + " --device reference --batch 4 --steps 1 --lr 0 --json --save " + saved.string());
  ASSERT_EQ(r.status, 0) << r.err;
  auto ckpt = lms::read_npz(saved.string());
  ASSERT_TRUE(ckpt.has_value()) << ckpt.error().str();
  auto fixture = lms::read_npz(std::string(LMS_SOURCE_DIR) + "/tests/fixtures/onnx_cnn.npz");
  ASSERT_TRUE(fixture.has_value()) << fixture.error().str();
  int compared = 0;
  for (const auto& [name, t] : *fixture) {
    if (name == "x" || name == "labels" || name == "loss" || name.starts_with("grad/")) continue;
    ASSERT_TRUE(ckpt->contains(name)) << name;
    EXPECT_EQ(ckpt->at(name).data, t.data) << name << ": with lr 0 the parameter stays the file's";
    ++compared;
  }
  EXPECT_EQ(compared, 10);
  // The batch norm's running statistics are state of the trained model, named after the normalized value.
  EXPECT_TRUE(ckpt->contains("bn1_BatchNormalization_output_0.running_mean"));
  fs::remove(saved);
}

TEST(OnnxCommand, PlanAndMaxBatch) {
  CmdResult plan = lms("plan " + kCnn + " --batch 64 --budget 1GiB --json");
  ASSERT_EQ(plan.status, 0) << plan.err;
  auto p = nlohmann::json::parse(plan.out);
  EXPECT_TRUE(p["fits"].get<bool>());
  EXPECT_GT(p["param_bytes"].get<int64_t>(), 0);
  CmdResult mb = lms("maxbatch " + kCnn + " --budget 1MiB --strategy none --json");
  ASSERT_EQ(mb.status, 0) << mb.err;
  const int64_t max_batch = nlohmann::json::parse(mb.out)["max_batch"];
  EXPECT_GT(max_batch, 8);
  // The answer is what plan says: that batch fits and the next does not.
  EXPECT_EQ(lms("plan " + kCnn + " --batch " + std::to_string(max_batch) + " --budget 1MiB").status, 0);
  CmdResult past = lms("plan " + kCnn + " --batch " + std::to_string(max_batch + 1) + " --budget 1MiB");
  EXPECT_NE(past.status, 0);
  EXPECT_NE(past.out.find("does NOT fit"), std::string::npos) << past.out;
}

// Swapping is bit-exact on imported models whose ops came from fusions and the newer activations: the GPT-2
// export (fused layer norms, tanh GELU), the mobile-activation CNN (sigmoid, tanh, clamp, the hard activations,
// padding folded into a pool), and the transformers, upsampling and normalizations whose import writes constants
// as state and resizes, strided slices, padding, instance norm and leaky relu with other ops (ViT, Swin, LLaMA
// with frozen rotary tables, the upsampling segmenter, nnU-Net's blocks, einsum attention, exp and log, BERT with
// its mask and token types held), trained under a budget that makes tflms and auto swap, give the unconstrained
// run's losses bit for bit.
TEST(OnnxCommand, SwappingImportedModelsIsBitExact) {
  const std::string fixtures = std::string(LMS_SOURCE_DIR) + "/tests/fixtures/";
  const struct {
    std::string file, batch, budget, extra;
  } cases[] = {{"onnx_gpt2.onnx", "4", "140KiB", ""},
               {"onnx_act.onnx", "8", "150KiB", ""},
               {"onnx_vit.onnx", "4", "160KiB", ""},
               {"onnx_swin.onnx", "8", "1300KiB", ""},
               {"onnx_llama.onnx", "2", "95KiB", " --frozen '*_cached'"},
               {"onnx_upsample.onnx", "4", "75KiB", ""},
               {"onnx_nnunet.onnx", "4", "55KiB", ""},
               {"onnx_einsum.onnx", "8", "10KiB", ""},
               {"onnx_explog.onnx", "64", "40KiB", ""},
               {"onnx_bert.onnx", "8", "150KiB", " --dim seq=8 --input-value attention_mask=1,token_type_ids=0"}};
  for (const auto& c : cases) {
    auto train = [&](const std::string& strategy, const std::string& budget) {
      CmdResult r = lms("train " + fixtures + c.file + " --device reference --steps 2 --batch " + c.batch +
                        " --strategy " + strategy + " --budget " + budget + " --json" + c.extra);
      EXPECT_EQ(r.status, 0) << c.file << " " << strategy << ": " << r.err;
      return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
    };
    const nlohmann::json free = train("none", "100GiB");
    ASSERT_TRUE(free.contains("losses")) << c.file;
    for (const char* strategy : {"tflms", "auto"}) {
      const nlohmann::json tight = train(strategy, c.budget);
      ASSERT_TRUE(tight.contains("losses")) << c.file << " " << strategy;
      EXPECT_GT(tight["swap_out_bytes"].get<int64_t>(), 0) << c.file << " " << strategy << ": nothing was swapped";
      EXPECT_EQ(tight["losses"], free["losses"]) << c.file << " " << strategy;
    }
  }
}
#endif

// A model that cannot train at batch 1 (batch norm over a 1x1 map, as DeepLabV3's image pooling has; PyTorch
// refuses it too) is searched from batch 2.
TEST(OnnxCommand, MaxBatchStartsWhereTheModelTrains) {
  const std::string file = std::string(LMS_SOURCE_DIR) + "/tests/fixtures/onnx_upsample.onnx";
  const CmdResult one = lms("plan " + file + " --batch 1 --budget 1GiB");
  EXPECT_NE(one.status, 0);
  EXPECT_NE(one.err.find("must be at least 2 (values per channel in the batch)"), std::string::npos) << one.err;
  const CmdResult r = lms("maxbatch " + file + " --budget 256KiB --json --verbose");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("batch      1: refused, starting at 2"), std::string::npos) << r.err;
  const int64_t max_batch = nlohmann::json::parse(r.out)["max_batch"].get<int64_t>();
  EXPECT_GE(max_batch, 2);
  EXPECT_EQ(lms("plan " + file + " --batch " + std::to_string(max_batch) + " --budget 256KiB").status, 0);
  EXPECT_NE(lms("plan " + file + " --batch " + std::to_string(max_batch + 1) + " --budget 256KiB").status, 0);
}

TEST(OnnxCommand, BadInputIsOneErrorLine) {
  const fs::path not_onnx = temp_dir() / "not_a_model.onnx";
  std::ofstream(not_onnx) << "graph g {\n}\n";
  expect_one_error_line(lms("stats " + not_onnx.string()), "not_a_model.onnx", "text in an .onnx file");
  expect_one_error_line(lms("stats /nonexistent/model.onnx"), "/nonexistent/model.onnx", "missing file");
  fs::remove(not_onnx);
  const fs::path folder = temp_dir() / "folder.onnx";
  fs::create_directories(folder);
  expect_one_error_line(lms("stats " + folder.string()), "folder.onnx", "a directory");
#if LMS_HAVE_ONNX_FILES
  expect_one_error_line(lms("stats " + folder.string()), "is a directory", "a directory");
  const fs::path empty = temp_dir() / "empty.onnx";
  std::ofstream(empty).close();
  expect_one_error_line(lms("stats " + empty.string()), "the file is empty", "an empty file");
  fs::remove(empty);
  expect_one_error_line(lms("stats " + kCnn + " --image 32"), "--image does not apply to an ONNX model", "--image");
  expect_one_error_line(lms("train " + kCnn + " --device reference --steps 1 --classes 3"),
                        "--classes does not apply", "--classes");
  expect_one_error_line(lms("stats " + kCnn + " --frozen conv1.weight,bn9.*"), "frozen 'bn9.*' matches no float",
                        "--frozen typo");
  const CmdResult r = lms("stats " + kCnn + " --frozen 'conv1.*' --json");
  EXPECT_EQ(r.status, 0) << r.err;
  const std::string bert = std::string(LMS_SOURCE_DIR) + "/tests/fixtures/onnx_bert.onnx";
  expect_one_error_line(lms("stats " + bert), "(hold the others at a value: --input-value NAME=V", "two inputs");
  expect_one_error_line(lms("opt " + bert + " --passes verify --input-value attention_mask"), "expected NAME=VALUE",
                        "--input-value syntax");
  expect_one_error_line(lms("stats " + bert + " --input-value attention_mask=1,token_type_ids=x"),
                        "--input-value 'token_type_ids=x': expected NAME=VALUE", "--input-value number");
  expect_one_error_line(lms("stats " + bert + " --dim seq=8 --input-value mask=1,token_type_ids=0"),
                        "an input value for 'mask', which is not an input of the model", "--input-value typo");
  const CmdResult held =
      lms("opt " + bert + " --passes verify --batch 3 --dim seq=8 --input-value attention_mask=1,token_type_ids=0");
  EXPECT_EQ(held.status, 0) << held.err;
  EXPECT_NE(held.out.find("%x = input() : i64[3,8]"), std::string::npos) << held.out;
  // Exported with a symbolic sequence length: its size is given by name, or the error says how.
  expect_one_error_line(lms("stats " + bert + " --input-value attention_mask=1,token_type_ids=0"),
                        "dimension 1 is symbolic ('seq'): give its size (--dim seq=N)", "--dim missing");
  expect_one_error_line(lms("stats " + bert + " --dim length=8 --input-value attention_mask=1,token_type_ids=0"),
                        "a size for dimension 'length', which no input of the model has past the batch (its symbolic "
                        "ones: 'seq')", "--dim typo");
  const CmdResult longer =
      lms("opt " + bert + " --passes verify --batch 3 --dim seq=6 --input-value attention_mask=1,token_type_ids=0");
  EXPECT_EQ(longer.status, 0) << longer.err;
  EXPECT_NE(longer.out.find("%x = input() : i64[3,6]"), std::string::npos) << longer.out;
#endif
  expect_one_error_line(lms("stats --model mlp --frozen x"), "--frozen applies to ONNX models only", "built-in");
  expect_one_error_line(lms("stats --model mlp --input-value m=1"), "--input-value applies to ONNX models only",
                        "built-in");
  fs::remove(folder);
}

}  // namespace
