// Shape rules of every op family: for each op a normal case (strides, padding, dilation, groups, odd sizes
// where they apply) and every error its rule can give, checked for the key facts in the message. Error cases
// are tables, one row per error, so that adding a check to a rule means adding a row here. Also the registry:
// every op is fully defined and findable by name, and attribute normalization reports its errors. The tensor
// ops (linear algebra, reductions, losses, updates) are in shape_rules_tensor_test.cc.
#include "shape_test_util.h"

namespace lms {
namespace {
using namespace op_test;

TEST(OpsRegistry, EveryOpIsDefinedAndFindable) {
  ASSERT_EQ(all_op_defs().size(), static_cast<size_t>(kNumOps));
  for (const OpDef& d : all_op_defs()) {
    SCOPED_TRACE(std::string(d.name));
    EXPECT_FALSE(d.name.empty());
    EXPECT_FALSE(d.doc.empty());
    EXPECT_NE(d.shape, nullptr);
    EXPECT_NE(d.cost, nullptr);
    EXPECT_FALSE(d.outputs.empty());
    EXPECT_EQ(find_op(d.name), d.op);
    EXPECT_EQ(&op_def(d.op), &d);
    for (const AttrSpec& s : d.attrs) {
      EXPECT_FALSE(s.doc.empty()) << s.name;
      if (s.default_value) {
        EXPECT_EQ(kind_of(*s.default_value), s.kind) << s.name;
      }
    }
    if (d.traits.in_place) {
      ASSERT_EQ(d.aliases.size(), d.outputs.size());
      for (int a : d.aliases) EXPECT_LT(a, static_cast<int>(d.inputs.size()));
    }
  }
  EXPECT_FALSE(find_op("conv4d").has_value());
}

TEST(OpsRegistry, TraitsFollowTheFamilies) {
  for (const OpDef& d : all_op_defs()) {
    SCOPED_TRACE(std::string(d.name));
    // The optimizer updates, batch norm's running-statistics update and the dropout key's advance write
    // persistent values in place.
    bool update = d.op == Op::sgd_update || d.op == Op::momentum_update || d.op == Op::adam_update ||
                  d.op == Op::bn_running_update || d.op == Op::rng_advance;
    EXPECT_EQ(d.traits.in_place, update);
    if (update) {
      EXPECT_TRUE(d.traits.side_effecting);
      EXPECT_FALSE(d.traits.recomputable);
    } else if (!d.traits.source && !d.traits.is_copy) {
      EXPECT_TRUE(d.traits.recomputable);
    }
  }
  EXPECT_EQ(op_def(Op::adam_update).aliases, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(op_def(Op::momentum_update).aliases, (std::vector<int>{0, 1}));
  EXPECT_EQ(op_def(Op::sgd_update).aliases, (std::vector<int>{0}));
  EXPECT_EQ(op_def(Op::rng_advance).aliases, (std::vector<int>{0}));
  EXPECT_TRUE(op_def(Op::concat).variadic);
}

TEST(OpsRegistry, NormalizeAttrsErrors) {
  const OpDef& conv = op_def(Op::conv2d);
  auto unknown = normalize_attrs(conv, A({{"strides", L({2, 2})}}));
  ASSERT_FALSE(unknown);
  for (std::string_view f : {"conv2d", "strides", "stride, pad, dilation, groups"})
    EXPECT_NE(unknown.error().what.find(f), std::string::npos) << unknown.error().what;

  auto kind = normalize_attrs(conv, A({{"groups", L({2})}}));
  ASSERT_FALSE(kind);
  for (std::string_view f : {"groups", "int", "int list"})
    EXPECT_NE(kind.error().what.find(f), std::string::npos) << kind.error().what;

  auto missing = normalize_attrs(op_def(Op::sgd_update), {});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().what.find("'lr'"), std::string::npos) << missing.error().what;

  // An int is accepted for a float attribute, and attributes come back in declared order.
  auto ok = normalize_attrs(op_def(Op::adam_update), A({{"eps", I(0)}, {"lr", I(1)}}));
  ASSERT_TRUE(ok) << ok.error().str();
  ASSERT_EQ(ok->entries().size(), 2u);
  EXPECT_EQ(ok->entries()[0].first, "lr");
  EXPECT_EQ(ok->entries()[0].second, Attribute{1.0});
}

TEST(OpsRegistry, ArityAndRequiredAttributesWithoutNormalizing) {
  EXPECT_TRUE(gives(infer(Op::relu, {f32({2})}), {f32({2})}));
  expect_errors({{Op::conv2d, {f32({1, 1, 3, 3})}, {}, {"conv2d", "takes 2 inputs", "x, w", "got 1"}},
                 {Op::concat, {}, A({{"axis", I(0)}}), {"at least 1 input"}}});
  // A shape rule given raw attributes names the missing required one rather than reading it as zero.
  for (Op op : {Op::max_pool2d, Op::reshape, Op::transpose, Op::slice, Op::sgd_update}) {
    const OpDef& d = op_def(op);
    Types in(d.inputs.size(), f32({2, 2, 4, 4}));
    auto r = infer_types(op, in, Attributes{});
    ASSERT_FALSE(r) << d.name;
    EXPECT_NE(r.error().what.find("needs attribute"), std::string::npos) << r.error().what;
  }
}

TEST(ShapeSourcesAndCopies, TypesComeFromTheAnnotation) {
  Types declared{i64({32})};
  for (Op op : {Op::input, Op::param, Op::state, Op::constant}) {
    SCOPED_TRACE(std::string(op_name(op)));
    auto r = infer_types(op, {}, Attributes{}, declared);
    EXPECT_TRUE(gives(r, declared));
    auto none = infer_types(op, {}, Attributes{}, {});
    ASSERT_FALSE(none);
    EXPECT_NE(none.error().what.find("one type annotation"), std::string::npos) << none.error().what;
  }
  auto negative = infer_types(Op::param, {}, Attributes{}, Types{f32({2, -1})});
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.error().what.find("negative dimension"), std::string::npos) << negative.error().what;
  EXPECT_TRUE(gives(infer(Op::swap_out, {f16({3, 4})}), {f16({3, 4})}));
  EXPECT_TRUE(gives(infer(Op::swap_in, {i64({3})}), {i64({3})}));
}

TEST(ShapeElementwise, NormalAndErrors) {
  EXPECT_TRUE(gives(infer(Op::relu, {f32({2, 3})}), {f32({2, 3})}));
  EXPECT_TRUE(gives(infer(Op::gelu, {f16({5})}), {f16({5})}));
  EXPECT_TRUE(gives(infer(Op::gelu, {f32({5})}, A({{"approximate", std::string("tanh")}})), {f32({5})}));
  EXPECT_TRUE(gives(infer(Op::sigmoid, {f32({2, 3})}), {f32({2, 3})}));
  EXPECT_TRUE(gives(infer(Op::clamp, {f32({2, 3})}, A({{"min", 0.0}, {"max", 6.0}})), {f32({2, 3})}));
  EXPECT_TRUE(gives(infer(Op::clamp, {f32({2})}), {f32({2})}));  // no bounds: the identity
  EXPECT_TRUE(gives(infer(Op::sqrt, {f32({2, 3})}), {f32({2, 3})}));
  EXPECT_TRUE(gives(infer(Op::reciprocal, {f16({3})}), {f16({3})}));
  EXPECT_TRUE(gives(infer(Op::exp, {f32({2, 3})}), {f32({2, 3})}));
  EXPECT_TRUE(gives(infer(Op::log, {f16({3})}), {f16({3})}));
  EXPECT_TRUE(gives(infer(Op::softplus, {f32({2})}), {f32({2})}));
  EXPECT_TRUE(gives(infer(Op::tanh, {f16({4})}), {f16({4})}));
  EXPECT_TRUE(gives(infer(Op::scale, {f32({5})}, A({{"factor", 0.5}})), {f32({5})}));
  EXPECT_TRUE(gives(infer(Op::dropout, {f16({2, 3}), i64({})}, A({{"p", 0.1}})), {f16({2, 3})}));
  EXPECT_TRUE(gives(infer(Op::dropout, {f32({2}), i64({})}, A({{"p", 0}})), {f32({2})}));
  EXPECT_TRUE(gives(infer(Op::rng_advance, {i64({})}), {i64({})}));
  EXPECT_TRUE(gives(infer(Op::add, {f32({8, 1, 6}), f32({7, 1})}), {f32({8, 7, 6})}));
  EXPECT_TRUE(gives(infer(Op::mul, {f32({}), f32({3})}), {f32({3})}));
  EXPECT_TRUE(gives(infer(Op::bias_add, {f32({2, 3, 4}), f32({3})}), {f32({2, 3, 4})}));
  EXPECT_TRUE(gives(infer(Op::bias_add, {f32({2, 3, 4}), f32({4})}, A({{"axis", I(-1)}})), {f32({2, 3, 4})}));
  expect_errors({
      {Op::relu, {i32({2})}, {}, {"'relu'", "floating-point", "i32[2]"}},
      {Op::sigmoid, {i64({2})}, {}, {"'sigmoid'", "floating-point"}},
      {Op::clamp, {f32({2})}, A({{"min", 1.0}, {"max", 0.5}}), {"clamp bounds min = 1 and max = 0.5", "min <= max"}},
      {Op::gelu, {f32({2})}, A({{"approximate", std::string("fast")}}), {"gelu", "'approximate' = \"fast\"", "tanh"}},
      {Op::scale, {f32({2})}, {}, {"'scale'", "'factor'"}},
      {Op::dropout, {f32({2}), i64({})}, A({{"p", 1.0}}), {"dropout p = 1 must be in [0, 1)"}},
      {Op::dropout, {f32({2}), i64({})}, A({{"p", -0.1}}), {"dropout p = -0.1"}},
      {Op::dropout, {f32({2}), f32({})}, {}, {"dropout key must be i64[]", "got f32[]"}},
      {Op::dropout, {f32({2}), i64({2})}, {}, {"dropout key must be i64[]", "got i64[2]"}},
      {Op::dropout, {i32({2}), i64({})}, {}, {"'dropout'", "floating-point"}},
      {Op::rng_advance, {i32({})}, {}, {"rng_advance key must be i64[]", "got i32[]"}},
      {Op::add, {f32({2}), f16({2})}, {}, {"'add'", "differ in dtype"}},
      {Op::mul, {f32({2, 3}), f32({4})}, {}, {"'mul'", "cannot broadcast", "3 vs 4"}},
      {Op::bias_add, {f32({2, 3}), f32({3})}, A({{"axis", I(2)}}), {"bias_add axis 2", "out of range"}},
      {Op::bias_add, {f32({2, 3}), f32({2})}, {}, {"bias must be f32[3]", "got f32[2]"}},
  });
}

TEST(ShapeConv, Normal) {
  // ResNet stem: 224 + 2*3 - 6 - 1 = 223, floor(223/2) + 1 = 112.
  EXPECT_TRUE(gives(infer(Op::conv2d, {f32({8, 3, 224, 224}), f32({64, 3, 7, 7})},
                          A({{"stride", L({2, 2})}, {"pad", L({3, 3})}})),
                    {f32({8, 64, 112, 112})}));
  // Odd size, stride 2: floor((7 - 3)/2) + 1 = 3 and floor((8 + 2 - 2 - 1)/2) + 1 = 4; per-dim attributes.
  EXPECT_TRUE(gives(infer(Op::conv2d, {f32({1, 4, 7, 8}), f32({5, 4, 3, 3})},
                          A({{"stride", L({2, 2})}, {"pad", L({0, 1})}})),
                    {f32({1, 5, 3, 4})}));
  // Dilation 2 with pad 2 keeps the size: 32 + 4 - 2*2 - 1 + 1 = 32.
  EXPECT_TRUE(gives(infer(Op::conv2d, {f32({2, 8, 32, 32}), f32({8, 8, 3, 3})},
                          A({{"pad", L({2, 2})}, {"dilation", L({2, 2})}})),
                    {f32({2, 8, 32, 32})}));
  // Groups: Cin 8 = 4 * 2, and depthwise.
  EXPECT_TRUE(gives(infer(Op::conv2d, {f32({2, 8, 10, 10}), f32({16, 4, 3, 3})}, A({{"groups", I(2)}})),
                    {f32({2, 16, 8, 8})}));
  EXPECT_TRUE(gives(infer(Op::conv2d, {f16({1, 32, 5, 5}), f16({32, 1, 3, 3})}, A({{"groups", I(32)}})),
                    {f16({1, 32, 3, 3})}));
  // conv1d: floor((100 - 5)/3) + 1 = 32.
  EXPECT_TRUE(gives(infer(Op::conv1d, {f32({4, 2, 100}), f32({6, 2, 5})}, A({{"stride", L({3})}})),
                    {f32({4, 6, 32})}));
  // conv3d with the defaults, whose lists have three entries.
  EXPECT_TRUE(gives(infer(Op::conv3d, {f32({1, 1, 8, 9, 10}), f32({2, 1, 3, 3, 3})}), {f32({1, 2, 6, 7, 8})}));
  EXPECT_EQ(op_def(Op::conv3d).attrs[0].default_value, L({1, 1, 1}));
  EXPECT_EQ(op_def(Op::conv1d).attrs[1].default_value, L({0}));
}

TEST(ShapeConv, Errors) {
  Types x{f32({1, 3, 8, 8}), f32({4, 3, 3, 3})};
  expect_errors({
      {Op::conv2d, {f32({3, 8, 8}), f32({4, 3, 3, 3})}, {}, {"conv2d", "input must have rank 4", "f32[3,8,8]"}},
      {Op::conv2d, {f32({1, 3, 8, 8}), f32({4, 3, 3})}, {}, {"weight must have rank 4", "f32[4,3,3]"}},
      {Op::conv2d, {i32({1, 3, 8, 8}), i32({4, 3, 3, 3})}, {}, {"floating-point", "i32[1,3,8,8]"}},
      {Op::conv2d, {f32({1, 3, 8, 8}), f16({4, 3, 3, 3})}, {}, {"differ in dtype", "f16[4,3,3,3]"}},
      {Op::conv2d, {f32({1, 3, 8, 8}), f32({4, 3, 3, 0})}, {}, {"kernel size 0", "f32[4,3,3,0]"}},
      {Op::conv2d, x, A({{"groups", I(0)}}), {"'groups' = 0"}},
      {Op::conv2d, x, A({{"stride", L({1})}}), {"'stride'", "needs 2 entries", "got 1"}},
      {Op::conv3d, {f32({1, 1, 4, 4, 4}), f32({1, 1, 1, 1, 1})}, A({{"pad", L({0, 0})}}), {"conv3d", "'pad'", "3"}},
      {Op::conv2d, x, A({{"stride", L({1, 0})}}), {"'stride'", "entry 0", "minimum 1"}},
      {Op::conv2d, x, A({{"pad", L({-1, 0})}}), {"'pad'", "entry -1", "minimum 0"}},
      {Op::conv2d, x, A({{"dilation", L({0, 1})}}), {"'dilation'", "entry 0"}},
      {Op::conv2d, {f32({1, 3, 8, 8}), f32({4, 4, 3, 3})}, {},
       {"conv2d input channels 3 do not match weight's 4*groups=4"}},
      {Op::conv2d, {f32({1, 6, 8, 8}), f32({4, 2, 3, 3})}, A({{"groups", I(2)}}),
       {"input channels 6", "2*groups=4"}},
      {Op::conv2d, {f32({1, 4, 8, 8}), f32({5, 2, 3, 3})}, A({{"groups", I(2)}}),
       {"output channels 5", "groups=2"}},
      // floor((2 - (5 - 1) - 1)/1) + 1 = -2 along the first spatial dimension.
      {Op::conv2d, {f32({1, 3, 2, 9}), f32({4, 3, 5, 5})}, {}, {"output size -2", "dimension 0", "kernel 5"}},
      {Op::conv1d, {f32({1, 1, 5}), f32({1, 1, 3})}, A({{"dilation", L({3})}}),
       {"conv1d", "output size", "dilation 3"}},
  });
}

TEST(ShapeConvTranspose, Normal) {
  // (8 - 1)*2 - 2*1 + (4 - 1) + 0 + 1 = 16; Cout = 8.
  EXPECT_TRUE(gives(infer(Op::conv_transpose2d, {f32({2, 16, 8, 8}), f32({16, 8, 4, 4})},
                          A({{"stride", L({2, 2})}, {"pad", L({1, 1})}})),
                    {f32({2, 8, 16, 16})}));
  // output_pad recovers the even size a stride-2 conv maps to 7: 6*2 - 2 + 2 + 1 + 1 = 14.
  EXPECT_TRUE(gives(infer(Op::conv_transpose2d, {f32({1, 4, 7, 7}), f32({4, 2, 3, 3})},
                          A({{"stride", L({2, 2})}, {"pad", L({1, 1})}, {"output_pad", L({1, 0})}})),
                    {f32({1, 2, 14, 13})}));
  // Groups: Cout = 3 * 2; 4 + 2 + 1 = 7.
  EXPECT_TRUE(gives(infer(Op::conv_transpose1d, {f32({1, 4, 5}), f32({4, 3, 3})}, A({{"groups", I(2)}})),
                    {f32({1, 6, 7})}));
  // Dilation: 4 + 2*2 + 1 = 9; output_pad 1 is allowed by dilation 2 even with stride 1.
  EXPECT_TRUE(gives(infer(Op::conv_transpose1d, {f32({1, 1, 5}), f32({1, 1, 3})}, A({{"dilation", L({2})}})),
                    {f32({1, 1, 9})}));
  EXPECT_TRUE(gives(infer(Op::conv_transpose1d, {f32({1, 1, 5}), f32({1, 1, 3})},
                          A({{"dilation", L({2})}, {"output_pad", L({1})}})),
                    {f32({1, 1, 10})}));
  EXPECT_TRUE(gives(infer(Op::conv_transpose3d, {f32({1, 2, 3, 4, 5}), f32({2, 1, 2, 2, 2})}),
                    {f32({1, 1, 4, 5, 6})}));
}

TEST(ShapeConvTranspose, Errors) {
  expect_errors({
      {Op::conv_transpose2d, {f32({1, 3, 4, 4}), f32({4, 2, 3, 3})}, {},
       {"conv_transpose2d input channels 3", "weight's first dimension 4"}},
      {Op::conv_transpose1d, {f32({1, 3, 5}), f32({3, 1, 3})}, A({{"groups", I(2)}}),
       {"input channels 3", "not divisible by groups=2"}},
      {Op::conv_transpose1d, {f32({1, 2, 5}), f32({2, 1, 3})}, A({{"stride", L({2})}, {"output_pad", L({2})}}),
       {"output_pad 2", "stride 2", "dilation 1"}},
      {Op::conv_transpose2d, {f32({1, 2, 5, 5}), f32({2, 1, 3, 3})}, A({{"output_pad", L({0})}}),
       {"'output_pad'", "needs 2 entries"}},
      {Op::conv_transpose1d, {f32({1, 2, 5}), f32({2, 1, 3})}, A({{"output_pad", L({-1})}}), {"'output_pad'", "-1"}},
      // (1 - 1)*1 - 2*1 + 0 + 0 + 1 = -1.
      {Op::conv_transpose1d, {f32({1, 1, 1}), f32({1, 1, 1})}, A({{"pad", L({1})}}), {"output size -1", "pad 1"}},
      {Op::conv_transpose3d, {f32({1, 2, 3, 4}), f32({2, 1, 2, 2, 2})}, {}, {"input must have rank 5"}},
  });
}

TEST(ShapeNorm, BatchNorm) {
  EXPECT_TRUE(gives(infer(Op::batch_norm, {f32({8, 16, 32, 32}), f32({16}), f32({16})}),
                    {f32({8, 16, 32, 32}), f32({16}), f32({16})}));
  EXPECT_TRUE(gives(infer(Op::batch_norm, {f32({8, 5}), f32({5}), f32({5})}, A({{"momentum", 0.0}})),
                    {f32({8, 5}), f32({5}), f32({5})}));
  expect_errors({
      {Op::batch_norm, {f32({16}), f32({16}), f32({16})}, {}, {"batch_norm", "rank >= 2", "f32[16]"}},
      {Op::batch_norm, {i32({2, 3}), i32({3}), i32({3})}, {}, {"floating-point"}},
      {Op::batch_norm, {f32({2, 3, 4}), f32({4}), f32({3})}, {}, {"gamma must be f32[3]", "got f32[4]"}},
      {Op::batch_norm, {f32({2, 3, 4}), f32({3}), f16({3})}, {}, {"beta must be f32[3]", "got f16[3]"}},
      {Op::batch_norm, {f32({2, 3}), f32({3}), f32({3})}, A({{"eps", 0.0}}), {"'eps' = 0", "positive"}},
      {Op::batch_norm, {f32({2, 3}), f32({3}), f32({3})}, A({{"momentum", 1.5}}), {"'momentum' = 1.5"}},
  });
}

TEST(ShapeNorm, LayerNorm) {
  EXPECT_TRUE(gives(infer(Op::layer_norm, {f32({2, 5, 64}), f32({64}), f32({64})}),
                    {f32({2, 5, 64}), f32({2, 5}), f32({2, 5})}));
  EXPECT_TRUE(gives(infer(Op::layer_norm, {f32({7}), f32({7}), f32({7})}), {f32({7}), f32({}), f32({})}));
  expect_errors({
      {Op::layer_norm, {f32({}), f32({1}), f32({1})}, {}, {"layer_norm", "rank >= 1"}},
      {Op::layer_norm, {i64({2, 4}), i64({4}), i64({4})}, {}, {"floating-point", "i64[2,4]"}},
      {Op::layer_norm, {f32({2, 64}), f32({32}), f32({64})}, {}, {"gamma must be f32[64]", "last dimension"}},
      {Op::layer_norm, {f32({2, 4}), f32({4}), f32({4})}, A({{"eps", -1.0}}), {"'eps' = -1"}},
  });
}

TEST(ShapePool, Normal) {
  // ResNet max pool: floor((112 + 2 - 3)/2) + 1 = 56.
  EXPECT_TRUE(gives(infer(Op::max_pool2d, {f32({1, 64, 112, 112})},
                          A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}})),
                    {f32({1, 64, 56, 56})}));
  // Stride defaults to the kernel: floor((7 - 2)/2) + 1 = 3.
  EXPECT_TRUE(gives(infer(Op::avg_pool2d, {f32({1, 1, 7, 7})}, A({{"kernel", L({2, 2})}})), {f32({1, 1, 3, 3})}));
  EXPECT_TRUE(gives(infer(Op::max_pool1d, {f32({2, 3, 10})}, A({{"kernel", L({3})}, {"stride", L({1})}})),
                    {f32({2, 3, 8})}));
  // Odd size with padding: floor((9 + 4 - 4)/2) + 1 = 5.
  EXPECT_TRUE(gives(infer(Op::avg_pool1d, {f32({1, 1, 9})},
                          A({{"kernel", L({4})}, {"stride", L({2})}, {"pad", L({2})}, {"count_include_pad", false}})),
                    {f32({1, 1, 5})}));
  EXPECT_TRUE(gives(infer(Op::max_pool3d, {f32({1, 2, 4, 5, 6})}, A({{"kernel", L({2, 2, 2})}})),
                    {f32({1, 2, 2, 2, 3})}));
  EXPECT_TRUE(gives(infer(Op::avg_pool3d, {f32({1, 2, 4, 4, 4})},
                          A({{"kernel", L({2, 2, 2})}, {"stride", L({1, 2, 1})}})),
                    {f32({1, 2, 3, 2, 3})}));
  EXPECT_TRUE(gives(infer(Op::global_avg_pool, {f32({2, 512, 7, 7})}), {f32({2, 512})}));
  // ceil_mode (PyTorch's): squeezenet's 3x3/2 on 111: ceil((111 - 3)/2) + 1 = 55, floor gives 55 too; on 112 the
  // ceiling adds a window: floor 55, ceil 56.
  const Attributes ceil3x3 = A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"ceil_mode", true}});
  EXPECT_TRUE(gives(infer(Op::max_pool2d, {f32({1, 96, 111, 111})}, ceil3x3), {f32({1, 96, 55, 55})}));
  EXPECT_TRUE(gives(infer(Op::max_pool2d, {f32({1, 96, 112, 112})}, ceil3x3), {f32({1, 96, 56, 56})}));
  // The last window may not start in the right padding: 1-D 5 with kernel 2, stride 2, pad 1 gives ceil(5/2)+1 =
  // 4 windows starting at -1, 1, 3, 5; the one at 5 starts in the padding, so 3 (as PyTorch).
  EXPECT_TRUE(gives(infer(Op::avg_pool1d, {f32({1, 1, 5})},
                          A({{"kernel", L({2})}, {"stride", L({2})}, {"pad", L({1})}, {"ceil_mode", true}})),
                    {f32({1, 1, 3})}));
  EXPECT_TRUE(gives(infer(Op::avg_pool1d, {f32({1, 1, 6})},
                          A({{"kernel", L({2})}, {"stride", L({2})}, {"pad", L({1})}, {"ceil_mode", true}})),
                    {f32({1, 1, 4})}));
  EXPECT_TRUE(gives(infer(Op::global_avg_pool, {f16({2, 4, 3, 4, 5})}), {f16({2, 4})}));
}

// max_pool_argmax and max_pool_grad_by_argmax (the argmax-pool pass's pair): positions are i32 of the pooled
// shape; the gradient checks its window against x_shape as max_pool_grad does against x.
TEST(ShapePool, Argmax) {
  const Attributes w = A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}});
  EXPECT_TRUE(gives(infer(Op::max_pool_argmax, {f32({2, 64, 112, 112})}, w), {i32({2, 64, 56, 56})}));
  Attributes ceil = w;
  ceil.set("ceil_mode", true);
  EXPECT_TRUE(gives(infer(Op::max_pool_argmax, {f32({2, 64, 112, 112})}, ceil), {i32({2, 64, 57, 57})}));
  Attributes g = w;
  g.set("x_shape", L({2, 64, 112, 112}));
  EXPECT_TRUE(gives(infer(Op::max_pool_grad_by_argmax, {f32({2, 64, 56, 56}), i32({2, 64, 56, 56})}, g),
                    {f32({2, 64, 112, 112})}));
  Attributes wrong_x = w;
  wrong_x.set("x_shape", L({2, 64, 120, 112}));
  expect_errors({
      {Op::max_pool_argmax, {i32({1, 1, 8, 8})}, w, {"max_pool_argmax", "floating-point"}},
      {Op::max_pool_argmax, {f32({1, 1, 8, 8})}, A({{"kernel", L({3, 3})}}), {"needs attribute 'stride'"}},
      {Op::max_pool_grad_by_argmax, {f32({2, 64, 56, 56}), i64({2, 64, 56, 56})}, g, {"argmax must be i32"}},
      {Op::max_pool_grad_by_argmax, {f32({2, 64, 56, 56}), i32({2, 64, 56, 55})}, g, {"argmax must be i32"}},
      {Op::max_pool_grad_by_argmax, {f32({2, 64, 56, 56}), i32({2, 64, 56, 56})}, wrong_x, {"gives f32[2,64,60,56]"}},
  });
}

TEST(ShapePool, Errors) {
  Types x{f32({1, 1, 8, 8})};
  expect_errors({
      {Op::max_pool2d, x, {}, {"max_pool2d", "needs attribute 'kernel'"}},
      {Op::max_pool2d, {f32({1, 8, 8})}, A({{"kernel", L({2, 2})}}), {"input must have rank 4", "f32[1,8,8]"}},
      {Op::avg_pool2d, {i32({1, 1, 8, 8})}, A({{"kernel", L({2, 2})}}), {"avg_pool2d", "floating-point"}},
      {Op::max_pool2d, x, A({{"kernel", L({2})}}), {"'kernel'", "needs 2 entries"}},
      {Op::max_pool2d, x, A({{"kernel", L({})}}), {"'kernel'", "got 0"}},
      {Op::max_pool2d, x, A({{"kernel", L({0, 2})}}), {"'kernel'", "entry 0"}},
      {Op::max_pool2d, x, A({{"kernel", L({2, 2})}, {"stride", L({2, 2, 2})}}), {"'stride'", "needs 2 entries"}},
      {Op::max_pool2d, x, A({{"kernel", L({2, 2})}, {"stride", L({0, 2})}}), {"'stride'", "entry 0"}},
      {Op::max_pool2d, x, A({{"kernel", L({2, 2})}, {"pad", L({-1, 0})}}), {"'pad'", "entry -1"}},
      {Op::max_pool2d, x, A({{"kernel", L({3, 3})}, {"pad", L({1, 2})}}), {"pad 2", "dimension 1", "kernel 3"}},
      {Op::avg_pool2d, x, A({{"kernel", L({9, 2})}}), {"output size", "input 8", "kernel 9"}},
      {Op::global_avg_pool, {f32({2, 3})}, {}, {"global_avg_pool", "rank >= 3", "f32[2,3]"}},
      {Op::global_avg_pool, {i32({2, 3, 4})}, {}, {"floating-point"}},
  });
}

}  // namespace
}  // namespace lms
