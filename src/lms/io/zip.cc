// ZIP reading and writing for .npz files (zip.h). Every multi-byte field is little-endian and is encoded and
// decoded byte by byte, so the code is independent of the host's byte order. Reading trusts nothing: every
// offset and size from the file is checked against the file's size before it is used, and a member's claimed
// uncompressed size is bounded by what its compressed size can possibly expand to, so a corrupt archive gives
// an error instead of a huge allocation.
#include "lms/io/zip.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <limits>

#include <zlib.h>

namespace lms::zip {

namespace {

// Record signatures.
constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
// Fixed record sizes (without their variable-length names, extras and comments).
constexpr uint64_t kLocalHeaderSize = 30;
constexpr uint64_t kCentralHeaderSize = 46;
constexpr uint64_t kEndSize = 22;
constexpr uint64_t kZip64EndSize = 56;
constexpr uint64_t kZip64LocatorSize = 20;
constexpr uint64_t kMaxCommentSize = 0xffff;
// The ZIP64 extended-information extra field.
constexpr uint16_t kZip64ExtraId = 0x0001;
// "Version needed to extract": 2.0 for stored/deflate, 4.5 for ZIP64.
constexpr uint16_t kVersionDefault = 20;
constexpr uint16_t kVersionZip64 = 45;
// Fields that say "the real value is in the ZIP64 record".
constexpr uint32_t kMask32 = 0xffffffffu;
constexpr uint16_t kMask16 = 0xffffu;
// DOS date of 1980-01-01 (day 1, month 1, year 0 = 1980) and time 00:00:00: a fixed timestamp makes output
// reproducible.
constexpr uint16_t kDosDate = (1 << 5) | 1;
constexpr uint16_t kDosTime = 0;
constexpr uint16_t kFlagEncrypted = 1;
constexpr uint16_t kMethodStored = 0;
constexpr uint16_t kMethodDeflated = 8;
// Deflate cannot expand data by more than this factor (RFC 1951: 258 bytes from a 2-bit-ish code, zlib's
// documented 1032:1 maximum), plus a small constant for tiny streams.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr uint64_t kDeflateSlack = 64;
// zlib counts in 32-bit uInt: feed it at most this much at a time.
constexpr uint64_t kZlibChunk = uint64_t{1} << 30;

// --- encoding -----------------------------------------------------------------------------------------------

struct Bytes {
  std::vector<std::byte> b;
  void u16(uint64_t v) {
    for (int i = 0; i < 2; ++i) b.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
  }
  void u32(uint64_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
  }
  void str(const std::string& s) {
    for (char c : s) b.push_back(static_cast<std::byte>(c));
  }
  void append(const Bytes& o) { b.insert(b.end(), o.b.begin(), o.b.end()); }
};

uint32_t crc_of(std::span<const std::span<const std::byte>> pieces) {
  uLong crc = crc32_z(0, Z_NULL, 0);
  for (auto p : pieces)  // skip empty pieces: crc32_z(crc, NULL, 0) restarts at 0 instead of returning crc
    if (!p.empty()) crc = crc32_z(crc, reinterpret_cast<const Bytef*>(p.data()), p.size());
  return static_cast<uint32_t>(crc);
}

struct Written {
  std::string name;
  uint32_t crc = 0;
  uint64_t size = 0;
  uint64_t offset = 0;
};

// --- decoding -----------------------------------------------------------------------------------------------

uint64_t le(const std::byte* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

Result<std::vector<std::byte>> read_at(std::ifstream& f, uint64_t offset, uint64_t n, uint64_t file_size,
                                       const std::string& path, std::string_view what) {
  if (offset > file_size || n > file_size - offset)
    return fail_at(path, "truncated: {} needs bytes {}..{} but the file has {}", what, offset, offset + n, file_size);
  std::vector<std::byte> buf(n);
  f.clear();
  f.seekg(static_cast<std::streamoff>(offset));
  f.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(n));
  if (!f) return fail_at(path, "read error at byte {} ({})", offset, what);
  return buf;
}

// Applies a central header's ZIP64 extra field: each 32-bit field that holds 0xffffffff is replaced, in the
// order uncompressed size, compressed size, local header offset.
Result<void> apply_zip64_extra(std::span<const std::byte> extra, Entry& e, bool size64, bool csize64, bool off64) {
  size_t i = 0;
  while (i + 4 <= extra.size()) {
    const uint64_t id = le(&extra[i], 2), len = le(&extra[i + 2], 2);
    if (i + 4 + len > extra.size()) break;
    if (id == kZip64ExtraId) {
      const std::byte* p = &extra[i + 4];
      uint64_t left = len;
      for (auto [wanted, field] : {std::pair{size64, &e.size}, {csize64, &e.compressed_size},
                                   {off64, &e.local_header_offset}}) {
        if (!wanted) continue;
        if (left < 8) return fail("member '{}': ZIP64 extra field too short", e.name);
        *field = le(p, 8);
        p += 8;
        left -= 8;
      }
      return {};
    }
    i += 4 + len;
  }
  if (size64 || csize64 || off64) return fail("member '{}': sizes need a ZIP64 extra field, none found", e.name);
  return {};
}

Result<std::vector<std::byte>> inflate_raw(std::span<const std::byte> in, uint64_t size, const std::string& name) {
  std::vector<std::byte> out(size);
  z_stream s{};
  if (inflateInit2(&s, -MAX_WBITS) != Z_OK) return fail("member '{}': zlib inflateInit2 failed", name);
  uint64_t in_done = 0, out_done = 0;
  std::byte spare{};
  Result<std::vector<std::byte>> result = std::move(out);
  while (true) {
    if (s.avail_in == 0 && in_done < in.size()) {
      const uint64_t n = std::min<uint64_t>(kZlibChunk, in.size() - in_done);
      s.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data() + in_done));
      s.avail_in = static_cast<uInt>(n);
      in_done += n;
    }
    // Past `size`, one spare byte of room lets inflate reveal data longer than the directory claims.
    if (out_done < size) {
      s.next_out = reinterpret_cast<Bytef*>(result->data() + out_done);
      s.avail_out = static_cast<uInt>(std::min<uint64_t>(kZlibChunk, size - out_done));
    } else {
      s.next_out = reinterpret_cast<Bytef*>(&spare);
      s.avail_out = 1;
    }
    const uInt room = s.avail_out;
    const int rc = inflate(&s, Z_NO_FLUSH);
    const uint64_t produced = room - s.avail_out;
    if (out_done >= size && produced > 0) {
      result = fail("member '{}': deflate data is longer than its recorded size {}", name, size);
      break;
    }
    out_done += produced;
    if (rc == Z_STREAM_END) {
      if (out_done != size)
        result = fail("member '{}': deflate data decodes to {} bytes, recorded size {}", name, out_done, size);
      break;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && !(s.avail_in == 0 && in_done == in.size())) continue;
    if (rc == Z_BUF_ERROR)
      result = fail("member '{}': truncated deflate data ({} of {} bytes decoded)", name, out_done, size);
    else
      result = fail("member '{}': corrupt deflate data ({})", name, s.msg ? s.msg : "zlib error");
    break;
  }
  inflateEnd(&s);
  return result;
}

}  // namespace

Result<void> write_archive(const std::string& path, std::span<const WriteMember> members,
                           const WriteOptions& options) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return fail_at(path, "cannot open for writing");
  const uint64_t limit = options.zip64_threshold;
  auto put = [&](std::span<const std::byte> b) {
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  };
  uint64_t pos = 0;
  std::vector<Written> written;
  for (const WriteMember& m : members) {
    if (m.name.size() > kMask16) return fail_at(path, "member name of {} bytes is too long", m.name.size());
    Written w{m.name, crc_of(m.pieces), 0, pos};
    for (auto p : m.pieces) w.size += p.size();
    const bool z64 = w.size >= limit;
    Bytes h;
    h.u32(kLocalHeaderSig);
    h.u16(z64 ? kVersionZip64 : kVersionDefault);
    h.u16(0);  // flags
    h.u16(kMethodStored);
    h.u16(kDosTime);
    h.u16(kDosDate);
    h.u32(w.crc);
    h.u32(z64 ? kMask32 : w.size);  // compressed size
    h.u32(z64 ? kMask32 : w.size);  // uncompressed size
    h.u16(m.name.size());
    h.u16(z64 ? 4 + 16 : 0);
    h.str(m.name);
    if (z64) {
      h.u16(kZip64ExtraId);
      h.u16(16);
      h.u64(w.size);
      h.u64(w.size);
    }
    put(h.b);
    for (auto p : m.pieces) put(p);
    pos += h.b.size() + w.size;
    written.push_back(std::move(w));
  }

  const uint64_t cd_offset = pos;
  Bytes cd;
  for (const Written& w : written) {
    const bool size64 = w.size >= limit, off64 = w.offset >= limit;
    Bytes extra;
    if (size64 || off64) {
      extra.u16(kZip64ExtraId);
      extra.u16((size64 ? 16 : 0) + (off64 ? 8 : 0));
      if (size64) {
        extra.u64(w.size);
        extra.u64(w.size);
      }
      if (off64) extra.u64(w.offset);
    }
    cd.u32(kCentralHeaderSig);
    cd.u16(size64 || off64 ? kVersionZip64 : kVersionDefault);  // made by (MS-DOS attributes)
    cd.u16(size64 || off64 ? kVersionZip64 : kVersionDefault);  // needed
    cd.u16(0);
    cd.u16(kMethodStored);
    cd.u16(kDosTime);
    cd.u16(kDosDate);
    cd.u32(w.crc);
    cd.u32(size64 ? kMask32 : w.size);
    cd.u32(size64 ? kMask32 : w.size);
    cd.u16(w.name.size());
    cd.u16(extra.b.size());
    cd.u16(0);  // comment
    cd.u16(0);  // disk
    cd.u16(0);  // internal attributes
    cd.u32(0);  // external attributes
    cd.u32(off64 ? kMask32 : w.offset);
    cd.str(w.name);
    cd.append(extra);
  }
  const uint64_t cd_size = cd.b.size(), count = written.size();
  const bool end64 = count >= kMask16 || cd_size >= limit || cd_offset >= limit;
  if (end64) {
    const uint64_t end64_offset = cd_offset + cd_size;
    cd.u32(kZip64EndSig);
    cd.u64(kZip64EndSize - 12);  // size of the rest of this record
    cd.u16(kVersionZip64);
    cd.u16(kVersionZip64);
    cd.u32(0);
    cd.u32(0);
    cd.u64(count);
    cd.u64(count);
    cd.u64(cd_size);
    cd.u64(cd_offset);
    cd.u32(kZip64LocatorSig);
    cd.u32(0);
    cd.u64(end64_offset);
    cd.u32(1);  // total disks
  }
  cd.u32(kEndSig);
  cd.u16(0);
  cd.u16(0);
  cd.u16(end64 ? kMask16 : count);
  cd.u16(end64 ? kMask16 : count);
  cd.u32(end64 ? kMask32 : cd_size);
  cd.u32(end64 ? kMask32 : cd_offset);
  cd.u16(0);  // comment length
  put(cd.b);
  f.flush();
  if (!f) return fail_at(path, "write error (disk full?)");
  return {};
}

Result<Reader> Reader::open(const std::string& path) {
  Reader r;
  r.path_ = path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return fail_at(path, "is a directory, not a zip archive");
  r.file_.open(path, std::ios::binary);
  if (!r.file_) return fail_at(path, "cannot open (missing file or no permission)");
  r.file_.seekg(0, std::ios::end);
  r.file_size_ = static_cast<uint64_t>(r.file_.tellg());
  if (r.file_size_ < kEndSize) return fail_at(path, "not a zip archive ({} bytes, too short)", r.file_size_);

  // The end record is the last 22 bytes plus a comment of up to 65535 bytes: search backwards for it.
  const uint64_t tail_size = std::min(r.file_size_, kEndSize + kMaxCommentSize);
  auto tail = LMS_TRY(read_at(r.file_, r.file_size_ - tail_size, tail_size, r.file_size_, path, "end record"));
  int64_t at = -1;
  for (int64_t i = static_cast<int64_t>(tail_size - kEndSize); i >= 0; --i)
    if (le(&tail[i], 4) == kEndSig) {
      at = i;
      break;
    }
  if (at < 0) return fail_at(path, "not a zip archive (no end-of-central-directory record)");
  const std::byte* e = &tail[at];
  const uint64_t end_offset = r.file_size_ - tail_size + static_cast<uint64_t>(at);
  if (le(e + 4, 2) != 0 || le(e + 6, 2) != 0) return fail_at(path, "multi-disk zip archives are not supported");
  uint64_t count = le(e + 10, 2), cd_size = le(e + 12, 4), cd_offset = le(e + 16, 4);
  if (count == kMask16 || cd_size == kMask32 || cd_offset == kMask32) {
    if (end_offset < kZip64LocatorSize) return fail_at(path, "ZIP64 end-of-central-directory locator missing");
    auto loc = LMS_TRY(read_at(r.file_, end_offset - kZip64LocatorSize, kZip64LocatorSize, r.file_size_, path,
                               "ZIP64 locator"));
    if (le(loc.data(), 4) != kZip64LocatorSig) return fail_at(path, "ZIP64 end-of-central-directory locator missing");
    auto z = LMS_TRY(read_at(r.file_, le(&loc[8], 8), kZip64EndSize, r.file_size_, path, "ZIP64 end record"));
    if (le(z.data(), 4) != kZip64EndSig) return fail_at(path, "bad ZIP64 end-of-central-directory record");
    count = le(&z[32], 8);
    cd_size = le(&z[40], 8);
    cd_offset = le(&z[48], 8);
  }
  auto cd = LMS_TRY(read_at(r.file_, cd_offset, cd_size, r.file_size_, path, "central directory"));
  uint64_t p = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (cd_size - p < kCentralHeaderSize || le(&cd[p], 4) != kCentralHeaderSig)
      return fail_at(path, "corrupt central directory (entry {} of {})", i, count);
    const std::byte* h = &cd[p];
    const uint64_t flags = le(h + 8, 2), name_len = le(h + 28, 2), extra_len = le(h + 30, 2),
                   comment_len = le(h + 32, 2);
    if (cd_size - p - kCentralHeaderSize < name_len + extra_len + comment_len)
      return fail_at(path, "corrupt central directory (entry {} runs past its end)", i);
    Entry en;
    en.method = static_cast<uint16_t>(le(h + 10, 2));
    en.crc32 = static_cast<uint32_t>(le(h + 16, 4));
    en.compressed_size = le(h + 20, 4);
    en.size = le(h + 24, 4);
    en.local_header_offset = le(h + 42, 4);
    en.name.assign(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_len);
    std::span<const std::byte> extra(h + kCentralHeaderSize + name_len, extra_len);
    if (auto ok = apply_zip64_extra(extra, en, en.size == kMask32, en.compressed_size == kMask32,
                                    en.local_header_offset == kMask32);
        !ok)
      return wrap(path, ok.error());
    if (flags & kFlagEncrypted) return fail_at(path, "member '{}' is encrypted", en.name);
    if (en.method != kMethodStored && en.method != kMethodDeflated)
      return fail_at(path, "member '{}' uses compression method {} (only stored (0) and deflate (8) are supported)",
                     en.name, en.method);
    r.entries_.push_back(std::move(en));
    p += kCentralHeaderSize + name_len + extra_len + comment_len;
  }
  return r;
}

Result<std::vector<std::byte>> Reader::read(const Entry& e) {
  const std::string where = path_ + ": member '" + e.name + "'";
  auto h = LMS_TRY(read_at(file_, e.local_header_offset, kLocalHeaderSize, file_size_, where, "local header"));
  if (le(h.data(), 4) != kLocalHeaderSig) return fail_at(where, "bad local header signature");
  const uint64_t data_offset = e.local_header_offset + kLocalHeaderSize + le(&h[26], 2) + le(&h[28], 2);
  if (e.method == kMethodStored && e.compressed_size != e.size)
    return fail_at(where, "stored member with compressed size {} != size {}", e.compressed_size, e.size);
  if (e.method == kMethodDeflated && e.size > e.compressed_size * kMaxDeflateRatio + kDeflateSlack)
    return fail_at(where, "recorded size {} is impossible for {} bytes of deflate data", e.size, e.compressed_size);
  auto raw = LMS_TRY(read_at(file_, data_offset, e.compressed_size, file_size_, where, "data"));
  std::vector<std::byte> out;
  if (e.method == kMethodStored) {
    out = std::move(raw);
  } else {
    auto inflated = inflate_raw(raw, e.size, e.name);
    if (!inflated) return wrap(path_, inflated.error());
    out = std::move(*inflated);
  }
  const std::span<const std::byte> whole(out);
  if (crc_of(std::span(&whole, 1)) != e.crc32) return fail_at(where, "CRC-32 mismatch (corrupt data)");
  return out;
}

}  // namespace lms::zip
