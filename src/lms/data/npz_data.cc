// NumPy archives as training data (`lms train --data FILE.npz`): an .npz holding x_train and y_train, and
// optionally x_test and y_test, the layout of Keras's dataset files (mnist.npz). Every member is read into host
// memory and checked when the source opens, so a bad file fails before the first step rather than during the
// run: the sample counts of x and y agree, each array's sample shape fits the model's input (the same shape, the
// same without 1-sized dims, or a flat input with as many elements), labels are integers in [0, classes), integer
// inputs (token ids) too, float inputs are finite. Values are converted to the model's dtypes row by row as
// batches are filled (uint8 images become 0..255 floats: normalizing is the file's business); a row whose dtype
// already matches is one memcpy.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <span>

#include "lms/data/sources.h"
#include "lms/io/npz.h"

namespace lms::data {

namespace {

struct SplitArrays {
  NpyArray x, y;
  int64_t count = 0;  // samples
};

Shape without_ones(const Shape& s) {
  Shape out;
  std::copy_if(s.begin(), s.end(), std::back_inserter(out), [](int64_t d) { return d != 1; });
  return out;
}

int64_t elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Whether samples of shape `have` can feed a model input whose samples have shape `want`, element for element
// in row-major order: only when that cannot reorder anything (so an NHWC image never feeds an NCHW input).
bool sample_fits(const Shape& have, const Shape& want) {
  if (have == want || without_ones(have) == without_ones(want)) return true;
  return want.size() == 1 && elements(have) == want[0];
}

Shape sample_shape(const Shape& s) { return Shape(s.begin() + 1, s.end()); }

std::string describe(const NpyArray& a) { return fmt::format("'{}' {}", a.descr, to_string(a.shape)); }

// The member `key`, or an error listing the members there are.
Result<NpyArray> take(std::map<std::string, NpyArray>& members, const std::string& key, const std::string& path) {
  auto it = members.find(key);
  if (it == members.end()) {
    std::string names;
    for (const auto& [name, a] : members) names += (names.empty() ? "" : ", ") + name;
    return fail_at(path, "no member '{}' (members: {}); npz data needs x_train and y_train, and optionally x_test and "
                   "y_test", key, names.empty() ? "none" : names);
  }
  NpyArray a = std::move(it->second);
  members.erase(it);
  return a;
}

// Whether every element of `a` lies in [lo, hi] (NaN never does): one pass over the stored type, a few GB/s.
template <class T>
bool all_within_as(const NpyArray& a, double lo, double hi) {
  const std::span<const T> values(reinterpret_cast<const T*>(a.data.data()), static_cast<size_t>(a.size()));
  bool ok = true;
  for (T v : values) ok &= static_cast<double>(v) >= lo && static_cast<double>(v) <= hi;
  return ok;
}

bool all_within(const NpyArray& a, double lo, double hi) {
  switch (a.element) {
    case NpyElement::b1:
    case NpyElement::u1: return all_within_as<uint8_t>(a, lo, hi);
    case NpyElement::i1: return all_within_as<int8_t>(a, lo, hi);
    case NpyElement::u2: return all_within_as<uint16_t>(a, lo, hi);
    case NpyElement::i2: return all_within_as<int16_t>(a, lo, hi);
    case NpyElement::i4: return all_within_as<int32_t>(a, lo, hi);
    case NpyElement::i8: return all_within_as<int64_t>(a, lo, hi);
    case NpyElement::f4: return all_within_as<float>(a, lo, hi);
    case NpyElement::f8: return all_within_as<double>(a, lo, hi);
    case NpyElement::f2: break;
  }
  for (int64_t i = 0, n = a.size(); i < n; ++i)
    if (const double v = a.get(i); !(v >= lo && v <= hi)) return false;
  return true;
}

// Checks one array against the model input it feeds (%labels or %x); `what` is the member's name.
Result<void> check_array(const NpyArray& a, const TensorType& model, bool labels, int64_t classes,
                         const std::string& what, const std::string& path) {
  const char* input = labels ? "labels" : "x";
  if (a.shape.empty()) return fail_at(path, "{} is a scalar; it needs a sample dimension (dim 0)", what);
  const Shape want = sample_shape(model.shape);
  if (const Shape have = sample_shape(a.shape); !sample_fits(have, want)) {
    // The same dims in another order: most likely channels-last images for a channels-first input.
    Shape sorted_have = without_ones(have), sorted_want = without_ones(want);
    std::ranges::sort(sorted_have);
    std::ranges::sort(sorted_want);
    return fail_at(path, "{} holds samples of shape {}, but the model's %{} takes {} per sample{}", what,
                   to_string(have), input, to_string(want),
                   sorted_have == sorted_want ? " (the same dims in another order: channels-last data need a transpose "
                                                "to channels-first, e.g. a.transpose(0, 3, 1, 2), before saving)"
                                              : "");
  }
  const int64_t per_sample = elements(want);
  const bool integer_input = !is_float(model.dtype);
  if (integer_input && !a.is_integer())
    return fail_at(path, "{} holds {} values, but the model's %{} takes {} {}", what, a.descr, input,
                   dtype_name(model.dtype), labels ? "class indices" : "token ids");
  // Class indices in [0, classes), float inputs finite; the walk that names the first bad value runs only when
  // the typed scan found one.
  const double lo = integer_input ? 0 : -std::numeric_limits<double>::max();
  const double hi = integer_input ? static_cast<double>(classes - 1) : std::numeric_limits<double>::max();
  if (all_within(a, lo, hi)) return {};
  for (int64_t i = 0, n = a.size(); i < n; ++i) {
    const double v = a.get(i);
    if (integer_input && !(v >= lo && v <= hi))
      return fail_at(path, "{}: sample {} holds {}, outside [0, {}] (the model has {} classes)", what, i / per_sample,
                     v, classes - 1, classes);
    if (!std::isfinite(v)) return fail_at(path, "{}: sample {} holds {}", what, i / per_sample, v);
  }
  return {};
}

Result<std::optional<SplitArrays>> take_split(std::map<std::string, NpyArray>& members, const std::string& name,
                                              bool required, const TensorType& x, const TensorType& labels,
                                              int64_t classes, const std::string& path) {
  const std::string xk = "x_" + name, yk = "y_" + name;
  if (!required && !members.contains(xk) && !members.contains(yk)) return std::nullopt;
  if (!required && members.contains(xk) != members.contains(yk))
    return fail_at(path, "{} without {}: give both or neither", members.contains(xk) ? xk : yk,
                   members.contains(xk) ? yk : xk);
  SplitArrays s;
  s.x = LMS_TRY(take(members, xk, path));
  s.y = LMS_TRY(take(members, yk, path));
  LMS_TRY_VOID(check_array(s.x, x, /*labels=*/false, classes, xk, path));
  LMS_TRY_VOID(check_array(s.y, labels, /*labels=*/true, classes, yk, path));
  if (s.x.shape[0] != s.y.shape[0])
    return fail_at(path, "{} has {} samples ({}), {} has {} ({})", xk, s.x.shape[0], describe(s.x), yk, s.y.shape[0],
                   describe(s.y));
  s.count = s.x.shape[0];
  return s;
}

// dst[i] = src[i] for n elements stored as Src (memcpy'd in: the archive gives no alignment guarantee).
template <class Src, class Dst>
void convert_as(const std::byte* src, int64_t n, Dst* dst) {
  for (int64_t i = 0; i < n; ++i) {
    Src v;
    std::memcpy(&v, src + i * static_cast<int64_t>(sizeof(Src)), sizeof(Src));
    dst[i] = static_cast<Dst>(v);
  }
}

// n elements of `a` from `first` into dst, each converted by a loop over the stored type (about ten times the
// rate of going through double element by element: a segmenter's uint8 volumes are millions a step).
template <class Dst>
void convert(const NpyArray& a, int64_t first, int64_t n, Dst* dst) {
  const std::byte* src = a.data.data() + first * a.element_bytes();
  switch (a.element) {
    case NpyElement::b1:  // any nonzero byte is true, as NpyArray::get reads it
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<Dst>(src[i] != std::byte{0} ? 1 : 0);
      return;
    case NpyElement::u1: return convert_as<uint8_t>(src, n, dst);
    case NpyElement::i1: return convert_as<int8_t>(src, n, dst);
    case NpyElement::u2: return convert_as<uint16_t>(src, n, dst);
    case NpyElement::i2: return convert_as<int16_t>(src, n, dst);
    case NpyElement::i4: return convert_as<int32_t>(src, n, dst);
    case NpyElement::i8: return convert_as<int64_t>(src, n, dst);
    case NpyElement::f4: return convert_as<float>(src, n, dst);
    case NpyElement::f8: return convert_as<double>(src, n, dst);
    case NpyElement::f2:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<Dst>(a.get(first + i));
      return;
  }
}

// Copies sample `sample` of `a` into row `row` of `t`: one memcpy when the bytes already match, else converted.
void copy_row(const NpyArray& a, int64_t sample, int64_t row, HostTensor& t) {
  const int64_t n = t.type.num_elements() / t.type.shape[0];
  if (a.dtype() == t.type.dtype) {
    const auto bytes = static_cast<size_t>(n * dtype_size(t.type.dtype));
    std::memcpy(t.data.data() + static_cast<size_t>(row) * bytes, a.data.data() + static_cast<size_t>(sample) * bytes,
                bytes);
    return;
  }
  switch (t.type.dtype) {
    case DType::f32: return convert(a, sample * n, n, t.as<float>().data() + row * n);
    case DType::f64: return convert(a, sample * n, n, t.as<double>().data() + row * n);
    case DType::i32: return convert(a, sample * n, n, t.as<int32_t>().data() + row * n);
    case DType::i64: return convert(a, sample * n, n, t.as<int64_t>().data() + row * n);
    case DType::f16:
    case DType::bf16: break;  // no backend trains these (check_backend_dtypes); rounded by HostTensor::set
  }
  for (int64_t i = 0; i < n; ++i) t.set(row * n + i, a.get(sample * n + i));
}

class NpzSource final : public DataSource {
 public:
  NpzSource(const TensorType& x, const TensorType& labels, uint64_t seed, SplitArrays train,
            std::optional<SplitArrays> test)
      : DataSource(x, labels, seed), train_(std::move(train)), test_(std::move(test)) {}

  std::string_view kind() const override { return "npz"; }
  int64_t size(Split s) const override {
    if (s == Split::train) return train_.count;
    return test_ ? test_->count : 0;
  }

 protected:
  void fill(Split split, int64_t sample, int64_t row, HostTensor& x, HostTensor& labels) const override {
    const SplitArrays& d = split == Split::train ? train_ : *test_;
    copy_row(d.x, sample, row, x);
    copy_row(d.y, sample, row, labels);
  }

 private:
  SplitArrays train_;
  std::optional<SplitArrays> test_;
};

}  // namespace

Result<std::unique_ptr<DataSource>> open_npz(const DataOptions& o, const TensorType& x, const TensorType& labels) {
  if (o.file.empty()) return fail("npz data: no archive given (lms train --data FILE.npz)");
  std::map<std::string, NpyArray> members = LMS_TRY(read_npz_arrays(o.file));
  std::optional<SplitArrays> train = LMS_TRY(take_split(members, "train", true, x, labels, o.classes, o.file));
  std::optional<SplitArrays> test = LMS_TRY(take_split(members, "test", false, x, labels, o.classes, o.file));
  return std::make_unique<NpzSource>(x, labels, o.seed, std::move(*train), std::move(test));
}

}  // namespace lms::data
