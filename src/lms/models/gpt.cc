// The GPT builder: a GPT-2 style decoder-only transformer with pre-layer-norm blocks. Token ids x i64[B, seq] are
// embedded with wte [vocab, hidden] plus the learned positions wpe [seq, hidden] (added directly, broadcasting over the
// batch). Each block: ln_1, fused qkv linear, heads split to [B, heads, seq, d], causal softmax(q k^T / sqrt(d)) v,
// heads merged, output projection, residual; ln_2, 4x MLP with gelu (exact erf, or with --gelu tanh the tanh
// approximation GPT-2 was trained with), residual. A final ln_f, logits against wte (tied, GPT-2's choice) or a
// separate lm_head, and the mean cross-entropy of next-token labels i64[B, seq]. With --dropout p > 0, dropout where
// nanoGPT has it: on the embeddings, the attention probabilities, and the attention and MLP outputs before each
// residual add. Defaults are GPT-2 small (124,439,808 parameters). Weights draw from normal(0.02); the residual
// projections from normal(0.02 / sqrt(2 layers)) as in GPT-2.
#include <cmath>

#include <fmt/format.h>

#include "lms/models/layers.h"

namespace lms::models {

namespace {

constexpr int64_t kDefaultLayers = 12;
constexpr int64_t kDefaultHidden = 768;
constexpr int64_t kDefaultHeads = 12;
constexpr int64_t kDefaultSeq = 1024;
constexpr int64_t kDefaultVocab = 50257;
constexpr int64_t kMlpExpansion = 4;
// At most this many blocks (GPT-3 has 96): a graph of about 100 training nodes a block stays one that plans in
// minutes, and an absurd count is an error rather than a graph built until memory runs out.
constexpr int64_t kMaxLayers = 1000;
constexpr double kInitStd = 0.02;

struct Config {
  int64_t batch, layers, hidden, heads, seq, vocab;
  std::string init;           // normal(0.02)
  std::string residual_init;  // normal(0.02 / sqrt(2 layers)) for the projections feeding the residual stream
  Attributes gelu;            // the MLP activation's attributes: none (erf) or approximate = "tanh"
  double dropout = 0;         // drop probability (0: no dropout ops)
};

// [B, seq, hidden] -> [B, heads, seq, d] for columns [start, start + hidden) of qkv [B, seq, 3 hidden].
ValueId split_head(Builder& b, const Config& c, ValueId qkv, int64_t start, const std::string& name) {
  ValueId s = b.op(Op::slice, {qkv}, attrs({{"axis", int64_t{2}}, {"start", start}, {"end", start + c.hidden}}),
                   "attn." + name);
  ValueId r = b.op(Op::reshape, {s}, attrs({{"shape", IntList{c.batch, c.seq, c.heads, c.hidden / c.heads}}}),
                   "attn." + name + ".heads");
  return b.op(Op::transpose, {r}, attrs({{"perm", IntList{0, 2, 1, 3}}}), "attn." + name + ".t");
}

// Causal multi-head self-attention on x [B, seq, hidden], projected back to [B, seq, hidden].
ValueId attention(Builder& b, const Config& c, ValueId x) {
  ValueId qkv = linear(b, x, 3 * c.hidden, "attn.qkv", /*bias=*/true, c.init);
  ValueId q = split_head(b, c, qkv, 0, "q");
  ValueId k = split_head(b, c, qkv, c.hidden, "k");
  ValueId v = split_head(b, c, qkv, 2 * c.hidden, "v");
  ValueId scores = b.op(Op::matmul, {q, k}, attrs({{"transpose_b", true}}), "attn.scores");
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(c.hidden / c.heads));
  ValueId scaled = b.op(Op::scale, {scores}, attrs({{"factor", inv_sqrt_d}}), "attn.scaled");
  ValueId probs = b.op(Op::softmax, {scaled}, attrs({{"axis", int64_t{-1}}, {"causal", true}}), "attn.probs");
  probs = b.dropout(probs, c.dropout, "attn.probs.drop");
  ValueId ctx = b.op(Op::matmul, {probs, v}, {}, "attn.ctx");
  ValueId merged = b.op(Op::transpose, {ctx}, attrs({{"perm", IntList{0, 2, 1, 3}}}), "attn.ctx.t");
  merged = b.op(Op::reshape, {merged}, attrs({{"shape", IntList{c.batch, c.seq, c.hidden}}}), "attn.merge");
  return b.dropout(linear(b, merged, c.hidden, "attn.proj", /*bias=*/true, c.residual_init), c.dropout, "attn.drop");
}

ValueId mlp(Builder& b, const Config& c, ValueId x) {
  ValueId h = linear(b, x, kMlpExpansion * c.hidden, "mlp.fc", /*bias=*/true, c.init);
  h = b.op(Op::gelu, {h}, c.gelu, "mlp.gelu");
  return b.dropout(linear(b, h, c.hidden, "mlp.proj", /*bias=*/true, c.residual_init), c.dropout, "mlp.drop");
}

}  // namespace

Result<void> build_gpt(Graph& g, const ModelOptions& o) {
  Config c;
  c.batch = o.batch;
  c.layers = LMS_TRY(positive("layers", o.layers.value_or(kDefaultLayers)));
  if (c.layers > kMaxLayers) return fail_at("layers", "must be at most {}, got {}", kMaxLayers, c.layers);
  c.hidden = LMS_TRY(positive("hidden-size", o.hidden_size.value_or(kDefaultHidden)));
  c.heads = LMS_TRY(positive("heads", o.heads.value_or(kDefaultHeads)));
  c.seq = LMS_TRY(positive("seq", o.seq.value_or(kDefaultSeq)));
  c.vocab = LMS_TRY(positive("vocab", o.vocab.value_or(kDefaultVocab)));
  if (c.hidden % c.heads != 0)
    return fail_at("heads", "{} heads do not divide hidden-size {}", c.heads, c.hidden);
  if (c.hidden > kMaxElements / kMlpExpansion)
    return fail_at("hidden-size", "{} is too large (at most {})", c.hidden, kMaxElements / kMlpExpansion);
  int64_t tokens = 0;
  if (__builtin_mul_overflow(c.batch, c.seq, &tokens) || tokens > kMaxElements)
    return fail_at("seq", "batch {} x seq {} tokens is too many", c.batch, c.seq);
  if (o.gelu == "tanh") {
    c.gelu = attrs({{"approximate", std::string("tanh")}});
  } else if (!o.gelu.empty() && o.gelu != "erf") {
    return fail_at("gelu", "must be erf or tanh, got '{}'", o.gelu);
  }
  c.dropout = LMS_TRY(dropout_probability(o));
  c.init = fmt::format("normal({})", kInitStd);
  c.residual_init = fmt::format("normal({:.6g})", kInitStd / std::sqrt(2.0 * static_cast<double>(c.layers)));

  Builder b(g);
  ValueId x = b.input(TensorType{DType::i64, {c.batch, c.seq}}, "x");
  ValueId labels = b.input(TensorType{DType::i64, {c.batch, c.seq}}, "labels");
  ValueId wte = b.param(TensorType{o.dtype, {c.vocab, c.hidden}}, "wte", c.init);
  ValueId wpe = b.param(TensorType{o.dtype, {c.seq, c.hidden}}, "wpe", c.init);
  ValueId tokens_emb = b.op(Op::embedding, {wte, x}, {}, "tok_emb");
  ValueId h = b.dropout(b.op(Op::add, {tokens_emb, wpe}, {}, "emb"), c.dropout, "emb.drop");
  for (int64_t i = 0; i < c.layers; ++i) {
    b.set_prefix(fmt::format("h.{}.", i));
    ValueId a = attention(b, c, layer_norm(b, h, "ln_1"));
    h = b.op(Op::add, {h, a}, {}, "res_1");
    ValueId m = mlp(b, c, layer_norm(b, h, "ln_2"));
    h = b.op(Op::add, {h, m}, {}, "res_2");
  }
  b.set_prefix("");
  // The tokens are flattened before the head, not after it: the head's matmul then writes the logits in the
  // loss's [B*S, V] shape, and no copy of the largest activation (nor of its gradient) is made to reshape it.
  h = b.op(Op::reshape, {h}, attrs({{"shape", IntList{tokens, c.hidden}}}), "flat");
  h = layer_norm(b, h, "ln_f");
  ValueId logits = o.untied ? linear(b, h, c.vocab, "lm_head", /*bias=*/false, c.init)
                            : b.op(Op::matmul, {h, wte}, attrs({{"transpose_b", true}}), "lm_head");
  ValueId flat_labels = b.op(Op::reshape, {labels}, attrs({{"shape", IntList{tokens}}}), "labels.flat");
  ValueId loss = b.op(Op::cross_entropy, {logits, flat_labels}, {}, "loss");
  return finish(g, b, loss);
}

}  // namespace lms::models
