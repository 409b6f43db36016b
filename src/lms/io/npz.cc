// .npy encoding and parsing, and .npz archives on top of zip.h (npz.h). The .npy header is a Python dict
// literal, e.g. "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", padded with spaces to a
// multiple of 64 bytes and ending in '\n' (NumPy's NEP 1 format description). The parser accepts exactly the
// literal forms NumPy writes (quoted strings, True/False, tuples of integers) in any key order, and rejects
// everything else with an error naming it.
#include "lms/io/npz.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>

#include "lms/io/zip.h"

namespace lms {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kPreludeV1 = 10;   // magic (6) + version (2) + u16 header length
constexpr size_t kPreludeV2 = 12;   // magic (6) + version (2) + u32 header length
constexpr size_t kHeaderAlign = 64;  // NumPy aligns the data to 64 bytes
constexpr size_t kMaxHeaderV1 = 0xffff;
constexpr std::string_view kNpySuffix = ".npy";

// Every element type an .npy file may hold here, in NpyElement's order, with the LMS dtype of the same bytes
// where there is one (checkpoints take only those).
struct ElementCode {
  NpyElement element;
  std::string_view descr;
  int64_t bytes;
  std::optional<DType> dtype;
};
constexpr std::array<ElementCode, 10> kElementCodes = {{
    {NpyElement::b1, "|b1", 1, std::nullopt},
    {NpyElement::u1, "|u1", 1, std::nullopt},
    {NpyElement::i1, "|i1", 1, std::nullopt},
    {NpyElement::u2, "<u2", 2, std::nullopt},
    {NpyElement::i2, "<i2", 2, std::nullopt},
    {NpyElement::i4, "<i4", 4, DType::i32},
    {NpyElement::i8, "<i8", 8, DType::i64},
    {NpyElement::f2, "<f2", 2, DType::f16},
    {NpyElement::f4, "<f4", 4, DType::f32},
    {NpyElement::f8, "<f8", 8, DType::f64},
}};

constexpr bool in_element_order() {
  for (size_t i = 0; i < kElementCodes.size(); ++i)
    if (static_cast<size_t>(kElementCodes[i].element) != i) return false;
  return true;
}
static_assert(in_element_order(), "kElementCodes is indexed by NpyElement");

const ElementCode& code_of(NpyElement e) { return kElementCodes[static_cast<size_t>(e)]; }

std::optional<std::string_view> descr_of(DType t) {
  for (const ElementCode& c : kElementCodes)
    if (c.dtype == t) return c.descr;
  return std::nullopt;
}

Result<std::string> npy_header(const TensorType& t) {
  auto descr = descr_of(t.dtype);
  if (!descr) return fail("dtype {} has no NumPy equivalent (convert to f32 before saving)", dtype_name(t.dtype));
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape[i]);
  if (t.shape.size() == 1) shape += ",";  // Python's one-element tuple
  shape += ")";
  std::string dict = "{'descr': '" + std::string(*descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Version 1.0 unless the header needs more than a u16 length.
  const size_t prelude = dict.size() + 1 + kPreludeV1 <= kMaxHeaderV1 ? kPreludeV1 : kPreludeV2;
  const size_t total = (prelude + dict.size() + 1 + kHeaderAlign - 1) / kHeaderAlign * kHeaderAlign;
  dict.append(total - prelude - dict.size() - 1, ' ');
  dict += '\n';
  std::string out(kMagic);
  out += static_cast<char>(prelude == kPreludeV1 ? 1 : 2);
  out += '\0';
  const size_t len = dict.size();
  for (size_t i = 0; i < prelude - kMagic.size() - 2; ++i) out += static_cast<char>((len >> (8 * i)) & 0xff);
  return out + dict;
}

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// --- the header dict ------------------------------------------------------------------------------------------

// A cursor over the header text; each parse_* skips leading whitespace.
struct HeaderParser {
  std::string_view s;
  size_t i = 0;

  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  Result<std::string> string() {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return fail("expected a quoted string at offset {}", i);
    const char q = s[i++];
    const size_t end = s.find(q, i);
    if (end == std::string_view::npos) return fail("unterminated string at offset {}", i - 1);
    std::string out(s.substr(i, end - i));
    i = end + 1;
    return out;
  }
  Result<bool> boolean() {
    ws();
    for (auto [word, v] : {std::pair{std::string_view("True"), true}, {std::string_view("False"), false}})
      if (s.substr(i, word.size()) == word) {
        i += word.size();
        return v;
      }
    return fail("expected True or False at offset {}", i);
  }
  Result<Shape> tuple() {
    if (!eat('(')) return fail("expected a shape tuple at offset {}", i);
    Shape shape;
    while (!eat(')')) {
      ws();
      int64_t d = 0;
      auto [p, ec] = std::from_chars(s.data() + i, s.data() + s.size(), d);
      if (ec != std::errc() || d < 0) return fail("bad dimension in shape tuple at offset {}", i);
      i = static_cast<size_t>(p - s.data());
      if (i < s.size() && s[i] == 'L') ++i;  // Python 2 long literal
      shape.push_back(d);
      if (!eat(',')) {
        if (!eat(')')) return fail("expected ',' or ')' in shape tuple at offset {}", i);
        break;
      }
    }
    return shape;
  }
};

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

Result<NpyHeader> parse_header(std::string_view text) {
  HeaderParser p{text};
  if (!p.eat('{')) return fail("header is not a dict literal");
  NpyHeader h;
  bool seen_descr = false, seen_order = false, seen_shape = false;
  while (!p.eat('}')) {
    std::string key = LMS_TRY(p.string());
    if (!p.eat(':')) return fail("expected ':' after '{}'", key);
    if (key == "descr") {
      p.ws();
      if (p.i < text.size() && text[p.i] == '[') return fail("structured dtypes are not supported");
      h.descr = LMS_TRY(p.string());
      seen_descr = true;
    } else if (key == "fortran_order") {
      h.fortran_order = LMS_TRY(p.boolean());
      seen_order = true;
    } else if (key == "shape") {
      h.shape = LMS_TRY(p.tuple());
      seen_shape = true;
    } else {
      return fail("unexpected key '{}' (expected descr, fortran_order, shape)", key);
    }
    if (!p.eat(',')) {
      if (!p.eat('}')) return fail("expected ',' or '}}' after '{}'", key);
      break;
    }
  }
  if (!seen_descr || !seen_order || !seen_shape) return fail("header lacks descr, fortran_order or shape");
  return h;
}

Result<DType> dtype_of_descr(const std::string& descr) {
  for (const ElementCode& c : kElementCodes)
    if (c.descr == descr && c.dtype) return *c.dtype;
  if (!descr.empty() && descr[0] == '>')
    return fail("big-endian data ('{}') is not supported; save with arr.astype('<{}')", descr, descr.substr(1));
  return fail("unsupported dtype '{}' (supported: <f2, <f4, <f8, <i4, <i8)", descr);
}

std::string member_key(const std::string& name) {
  if (name.size() > kNpySuffix.size() && name.ends_with(kNpySuffix))
    return name.substr(0, name.size() - kNpySuffix.size());
  return name;
}

}  // namespace

Result<std::vector<std::byte>> encode_npy(const HostTensor& t) {
  std::string header = LMS_TRY(npy_header(t.type));
  std::vector<std::byte> out(header.size() + t.data.size());
  std::memcpy(out.data(), header.data(), header.size());
  if (!t.data.empty()) std::memcpy(out.data() + header.size(), t.data.data(), t.data.size());
  return out;
}

namespace {

// Where an .npy file's data start, and what its header says; the header's own errors are checked here.
struct NpyLayout {
  NpyHeader header;
  size_t data_offset = 0;
};

Result<NpyLayout> parse_layout(std::span<const std::byte> bytes, const std::string& where) {
  auto at = [&](size_t k) { return static_cast<uint8_t>(bytes[k]); };
  if (bytes.size() < kPreludeV1 || std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0)
    return fail_at(where, "not an .npy file (bad magic)");
  const int major = at(6), minor = at(7);
  if (major < 1 || major > 3 || minor != 0) return fail_at(where, "unsupported .npy version {}.{}", major, minor);
  const size_t prelude = major == 1 ? kPreludeV1 : kPreludeV2;
  if (bytes.size() < prelude) return fail_at(where, "truncated .npy header");
  size_t header_len = 0;
  for (size_t k = prelude; k-- > kMagic.size() + 2;) header_len = (header_len << 8) | at(k);
  if (header_len > bytes.size() - prelude)
    return fail_at(where, "truncated .npy header: {} bytes declared, {} present", header_len, bytes.size() - prelude);
  std::string_view text(reinterpret_cast<const char*>(bytes.data() + prelude), header_len);
  auto h = parse_header(text);
  if (!h) return fail_at(where, "bad .npy header: {}", h.error().what);
  if (h->fortran_order) return fail_at(where, "Fortran-order arrays are not supported; save np.ascontiguousarray(a)");
  return NpyLayout{std::move(*h), prelude + header_len};
}

// The data's byte count for `shape` at `element_bytes` each, checked against the `present` bytes after the
// header; `what` names the data in errors ("f32[3,4]").
Result<size_t> data_bytes(const Shape& shape, int64_t element_bytes, size_t present, const std::string& what,
                          const std::string& where) {
  int64_t total = element_bytes;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(total, d, &total)) return fail_at(where, "shape {} is too large", to_string(shape));
  const auto need = static_cast<size_t>(total);
  if (present < need) return fail_at(where, "truncated: expected {} bytes of {} data, got {}", need, what, present);
  if (present > need) return fail_at(where, "{} unexpected bytes after the {} data", present - need, what);
  return need;
}

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

Result<HostTensor> parse_npy(std::span<const std::byte> bytes, const std::string& where) {
  NpyLayout layout = LMS_TRY(parse_layout(bytes, where));
  auto dtype = dtype_of_descr(layout.header.descr);
  if (!dtype) return fail_at(where, "{}", dtype.error().what);
  TensorType type{*dtype, layout.header.shape};
  const size_t need = LMS_TRY(data_bytes(type.shape, dtype_size(*dtype), bytes.size() - layout.data_offset,
                                         to_string(type), where));
  HostTensor t(type);
  if (need > 0) std::memcpy(t.data.data(), bytes.data() + layout.data_offset, need);
  return t;
}

int64_t NpyArray::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool NpyArray::is_integer() const {
  return element != NpyElement::f2 && element != NpyElement::f4 && element != NpyElement::f8;
}

std::optional<DType> NpyArray::dtype() const { return code_of(element).dtype; }

int64_t NpyArray::element_bytes() const { return code_of(element).bytes; }

double NpyArray::get(int64_t i) const {
  const std::byte* p = data.data() + static_cast<size_t>(i * element_bytes());
  switch (element) {
    case NpyElement::b1: return load<uint8_t>(p) != 0 ? 1.0 : 0.0;
    case NpyElement::u1: return load<uint8_t>(p);
    case NpyElement::i1: return load<int8_t>(p);
    case NpyElement::u2: return load<uint16_t>(p);
    case NpyElement::i2: return load<int16_t>(p);
    case NpyElement::i4: return load<int32_t>(p);
    case NpyElement::i8: return static_cast<double>(load<int64_t>(p));
    case NpyElement::f2: return half_to_float(load<uint16_t>(p));
    case NpyElement::f4: return load<float>(p);
    case NpyElement::f8: return load<double>(p);
  }
  return 0;
}

Result<NpyArray> parse_npy_array(std::vector<std::byte> bytes, const std::string& where) {
  NpyLayout layout = LMS_TRY(parse_layout(bytes, where));
  NpyArray a;
  a.descr = layout.header.descr;
  a.shape = layout.header.shape;
  const ElementCode* code = nullptr;
  for (const ElementCode& c : kElementCodes)
    if (c.descr == a.descr) code = &c;
  if (code == nullptr) {
    if (!a.descr.empty() && a.descr[0] == '>')
      return fail_at(where, "big-endian data ('{}') is not supported; save with arr.astype('<{}')", a.descr,
                     a.descr.substr(1));
    std::string known;
    for (const ElementCode& c : kElementCodes) known += (known.empty() ? "" : ", ") + std::string(c.descr);
    return fail_at(where, "unsupported dtype '{}' (supported: {})", a.descr, known);
  }
  a.element = code->element;
  LMS_TRY_VOID(data_bytes(a.shape, code->bytes, bytes.size() - layout.data_offset,
                          fmt::format("{}{}", a.descr, to_string(a.shape)), where));
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(layout.data_offset));
  a.data = std::move(bytes);
  return a;
}

Result<HostTensor> read_npy(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return fail_at(path, "is a directory, not an .npy file");
  std::ifstream f(path, std::ios::binary);
  if (!f) return fail_at(path, "cannot open (missing file or no permission)");
  std::vector<char> buf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return fail_at(path, "read error");
  return parse_npy(std::as_bytes(std::span(buf)), path);
}

Result<void> write_npy(const std::string& path, const HostTensor& t) {
  auto header = npy_header(t.type);
  if (!header) return wrap(path, header.error());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return fail_at(path, "cannot open for writing");
  f.write(header->data(), static_cast<std::streamsize>(header->size()));
  f.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
  f.flush();
  if (!f) return fail_at(path, "write error (disk full?)");
  return {};
}

namespace {

// Every member of the archive at `path`, parsed by `parse(bytes, where)` into a T.
template <class T, class Parse>
Result<std::map<std::string, T>> read_members(const std::string& path, Parse parse) {
  zip::Reader reader = LMS_TRY(zip::Reader::open(path));
  std::map<std::string, T> out;
  for (const zip::Entry& e : reader.entries()) {
    const std::string key = member_key(e.name);
    if (out.contains(key)) return fail_at(path, "two members named '{}'", key);
    out.emplace(key, LMS_TRY(parse(LMS_TRY(reader.read(e)), path + ": member '" + e.name + "'")));
  }
  return out;
}

}  // namespace

Result<std::map<std::string, HostTensor>> read_npz(const std::string& path) {
  return read_members<HostTensor>(
      path, [](const std::vector<std::byte>& bytes, const std::string& where) { return parse_npy(bytes, where); });
}

Result<std::map<std::string, NpyArray>> read_npz_arrays(const std::string& path) {
  return read_members<NpyArray>(path, parse_npy_array);
}

Result<void> write_npz(const std::string& path, const std::map<std::string, HostTensor>& tensors) {
  std::vector<std::string> headers;
  headers.reserve(tensors.size());  // members keep spans into these strings
  std::vector<zip::WriteMember> members;
  for (const auto& [key, t] : tensors) {
    if (key.empty()) return fail_at(path, "an empty tensor name");
    auto header = npy_header(t.type);
    if (!header) return fail_at(path, "tensor '{}': {}", key, header.error().what);
    headers.push_back(std::move(*header));
    members.push_back({key + std::string(kNpySuffix), {as_bytes(headers.back()), std::span(t.data)}});
  }
  return zip::write_archive(path, members);
}

}  // namespace lms
