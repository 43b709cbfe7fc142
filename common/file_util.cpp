#include "common/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <streambuf>
#include <vector>

#include "common/json_util.h"
#include "common/parallel.h"

namespace ckprof {
namespace {

constexpr size_t kChunk = 256 * 1024;

std::string ErrnoText(int err) { return std::strerror(err); }

std::string DirName(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Reads up to n bytes, retrying on EINTR. Returns -1 on error (errno set).
ssize_t ReadSome(int fd, char* data, size_t n) {
  for (;;) {
    ssize_t r = ::read(fd, data, n);
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t w = ::write(fd, data.data(), data.size());
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(w));
  }
  return true;
}

// Incremental gzip decompression: feed compressed bytes, collect output. Handles
// concatenated members; anything after the last member that is not another member is ignored.
class Inflater {
 public:
  Inflater() {
    std::memset(&zs_, 0, sizeof(zs_));
    ok_ = inflateInit2(&zs_, 15 + 16) == Z_OK;
    if (!ok_) error_ = "cannot initialise zlib";
  }
  ~Inflater() { inflateEnd(&zs_); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Decompresses as much of `in` as fits into out[0, out_size). Returns bytes written to out;
  // *consumed says how much of `in` was used. Sets error() on corrupt data.
  size_t Run(std::string_view in, size_t* consumed, char* out, size_t out_size) {
    *consumed = 0;
    if (!ok_ || finished_) {
      *consumed = in.size();
      return 0;
    }
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs_.avail_in = static_cast<uInt>(in.size());
    zs_.next_out = reinterpret_cast<Bytef*>(out);
    zs_.avail_out = static_cast<uInt>(out_size);
    while (zs_.avail_out > 0) {
      int rc = inflate(&zs_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        in_member_ = false;
        // Another member follows only if the magic bytes do.
        if (zs_.avail_in >= 2 && zs_.next_in[0] == 0x1f && zs_.next_in[1] == 0x8b) {
          inflateReset(&zs_);
          in_member_ = true;
          continue;
        }
        if (zs_.avail_in == 1 && zs_.next_in[0] == 0x1f) break;  // maybe a split magic
        if (zs_.avail_in > 0) finished_ = true;                  // trailing bytes that are not gzip
        break;
      }
      if (rc == Z_BUF_ERROR) break;  // no progress possible: needs more input
      if (rc != Z_OK) {
        ok_ = false;
        error_ = std::string("corrupt gzip data: ") + (zs_.msg ? zs_.msg : "inflate failed");
        break;
      }
    }
    *consumed = in.size() - zs_.avail_in;
    if (finished_) *consumed = in.size();
    return out_size - zs_.avail_out;
  }

  // To call at the end of the input: an unfinished member means a truncated file.
  void Finish() {
    if (ok_ && in_member_ && !finished_) {
      ok_ = false;
      error_ = "truncated gzip data (unexpected end of file)";
    }
  }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }

 private:
  z_stream zs_;
  bool ok_ = false;
  bool in_member_ = true;
  bool finished_ = false;
  std::string error_;
};

}  // namespace

bool HasGzipMagic(std::string_view data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
         static_cast<unsigned char>(data[1]) == 0x8b;
}

Result<std::string> Gunzip(std::string_view data) { return GunzipAtMost(data, UINT64_MAX); }

Result<std::string> GunzipAtMost(std::string_view data, uint64_t max_bytes,
                                 const std::function<bool(std::string_view)>& head_ok) {
  constexpr size_t kHead = size_t{1} << 20;
  Inflater inf;
  std::string out;
  size_t have = 0;
  bool asked = !head_ok;
  while (true) {
    // Inflated straight into the string, grown by half again each time it fills.
    // (Never past a byte over `max_bytes`: enough to tell it is over.)
    if (have == out.size()) {
      const uint64_t room = max_bytes - have;
      uint64_t grow = std::max(kChunk, have / 2);
      if (grow > room) grow = room + 1;
      out.resize(have + static_cast<size_t>(grow));
    }
    size_t consumed = 0;
    const size_t n = inf.Run(data, &consumed, out.data() + have, out.size() - have);
    have += n;
    data.remove_prefix(consumed);
    if (!inf.ok()) return MakeError(inf.error());
    if (have > max_bytes) return MakeError("inflates past " + std::to_string(max_bytes) + " bytes");
    const bool end = (n == 0 && consumed == 0) || (data.empty() && have < out.size());
    if (!asked && (have >= kHead || end)) {
      asked = true;
      if (!head_ok(std::string_view(out.data(), have))) return MakeError("declined");
    }
    if (end) break;
  }
  inf.Finish();
  if (!inf.ok()) return MakeError(inf.error());
  out.resize(have);
  if (out.capacity() > have + have / 4 + kChunk) out.shrink_to_fit();
  return out;
}

Result<std::string> Gzip(std::string_view data, int level) {
  z_stream zs;
  std::memset(&zs, 0, sizeof zs);
  if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return MakeError("cannot initialise zlib");
  }
  std::string out;
  std::vector<char> chunk(kChunk);
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    const size_t take = std::min<size_t>(data.size(), 1u << 30);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    zs.avail_in = static_cast<uInt>(take);
    const int flush = take == data.size() ? Z_FINISH : Z_NO_FLUSH;
    do {
      zs.next_out = reinterpret_cast<Bytef*>(chunk.data());
      zs.avail_out = static_cast<uInt>(chunk.size());
      rc = deflate(&zs, flush);
      if (rc == Z_STREAM_ERROR) {
        deflateEnd(&zs);
        return MakeError("gzip compression failed");
      }
      out.append(chunk.data(), chunk.size() - zs.avail_out);
    } while (zs.avail_out == 0);
    data.remove_prefix(take - zs.avail_in);
  }
  deflateEnd(&zs);
  return out;
}

Result<std::string> GzipOnThreads(std::string_view data, int level, unsigned threads) {
  constexpr size_t kPieceBytes = size_t{8} << 20;
  const size_t pieces =
      std::clamp<size_t>(data.size() / kPieceBytes, 1, std::max<size_t>(threads, 1));
  if (pieces == 1) return Gzip(data, level);
  std::vector<std::string> members(pieces), errors(pieces);
  const size_t each = data.size() / pieces;
  RunInParallel(pieces, [&](size_t k) {
    const size_t begin = k * each;
    const size_t end = k + 1 == pieces ? data.size() : begin + each;
    auto gz = Gzip(data.substr(begin, end - begin), level);
    if (gz) {
      members[k] = std::move(*gz);
    } else {
      errors[k] = gz.error();
    }
  });
  size_t total = 0;
  for (size_t k = 0; k < pieces; ++k) {
    if (!errors[k].empty()) return MakeError(errors[k]);
    total += members[k].size();
  }
  std::string out;
  out.reserve(total);
  for (auto& m : members) {
    out += m;
    std::string().swap(m);
  }
  return out;
}

Result<std::string> ReadFdBytes(int fd) {
  // (Read into the string itself: resized, and grown only when a read has filled it.)
  std::string out;
  struct stat st {};
  const bool sized = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
  out.resize(sized ? static_cast<size_t>(st.st_size) + 1 : kChunk);  // +1: the end seen at once
  size_t have = 0;
  for (;;) {
    if (have == out.size()) out.resize(have + std::max(kChunk, have / 2));
    const ssize_t n = ReadSome(fd, out.data() + have, out.size() - have);
    if (n < 0) return MakeError(ErrnoText(errno));
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  out.resize(have);
  if (out.capacity() > have + have / 4 + kChunk) out.shrink_to_fit();
  return out;
}

Result<std::string> ReadFileBytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MakeError("cannot open " + path + ": " + ErrnoText(errno));
  auto out = ReadFdBytes(fd);
  ::close(fd);
  if (!out) return MakeError("cannot read " + path + ": " + out.error());
  return out;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) munmap(data_, size_);
}

bool MappedFile::Map(const std::string& path, size_t min_bytes) {
  if (data_ != nullptr) return false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
      static_cast<uint64_t>(st.st_size) < min_bytes) {
    ::close(fd);
    return false;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // (the mapping keeps the file)
  if (p == MAP_FAILED) return false;
  (void)madvise(p, size, MADV_SEQUENTIAL);
  data_ = p;
  size_ = size;
  return true;
}

Result<std::string> ReadInputFile(const std::string& path) {
  InputFileReader reader;
  if (Status s = reader.Open(path); !s) return Error{s.error()};
  std::string out;
  std::vector<char> chunk(kChunk);
  std::istream& in = reader.stream();
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    out.append(chunk.data(), static_cast<size_t>(in.gcount()));
  }
  if (Status s = reader.status(); !s) return Error{s.error()};
  return out;
}

Status WriteFileAtomic(const std::string& path, std::string_view content) {
  AtomicFileWriter w;
  if (Status s = w.Open(path); !s) return s;
  if (Status s = w.Write(content); !s) return s;
  return w.Commit();
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    if (!in_place_) ::unlink(tmp_.c_str());
  }
}

Status AtomicFileWriter::Fail(const std::string& what, int err) {
  if (fd_ >= 0) {
    ::close(fd_);
    if (!in_place_) ::unlink(tmp_.c_str());
    fd_ = -1;
  }
  status_ = MakeError("cannot write " + path_ + ": " + what + ": " + ErrnoText(err));
  return status_;
}

Status AtomicFileWriter::Open(const std::string& path) {
  path_ = path;
  if (path.empty()) return status_ = MakeError("cannot write: empty output path");
  struct stat target;
  if (::stat(path.c_str(), &target) == 0 && !S_ISREG(target.st_mode) && !S_ISDIR(target.st_mode)) {
    in_place_ = true;
    fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) return status_ = MakeError("cannot write " + path + ": " + ErrnoText(errno));
    return status_;
  }
  std::string templ = path + ".tmp.XXXXXX";
  std::vector<char> name(templ.begin(), templ.end());
  name.push_back('\0');
  fd_ = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd_ < 0) {
    return status_ = MakeError("cannot write " + path + ": cannot create a temporary file in " +
                               DirName(path) + ": " + ErrnoText(errno));
  }
  tmp_ = name.data();
  struct stat st;
  mode_t mode = 0644;
  if (::stat(path.c_str(), &st) == 0) mode = st.st_mode & 07777;
  if (::fchmod(fd_, mode) != 0) return Fail("chmod", errno);
  return status_;
}

Status AtomicFileWriter::Flush() {
  if (!status_.ok()) return status_;
  if (fd_ < 0) return status_ = MakeError("cannot write " + path_ + ": not open");
  if (!WriteAll(fd_, buf_)) return Fail("write", errno);
  buf_.clear();
  return status_;
}

Status AtomicFileWriter::Write(std::string_view data) {
  if (!status_.ok()) return status_;
  buf_.append(data);
  if (buf_.size() >= kChunk) return Flush();
  return status_;
}

Status AtomicFileWriter::Commit() {
  if (Status s = Flush(); !s) return s;
  if (in_place_) {  // a device or a pipe: nothing to make durable, nothing to rename
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0)
      return status_ = MakeError("cannot write " + path_ + ": close: " + ErrnoText(errno));
    return status_;
  }
  if (::fsync(fd_) != 0) return Fail("fsync", errno);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    return status_ = MakeError("cannot write " + path_ + ": close: " + ErrnoText(err));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    return status_ = MakeError("cannot write " + path_ + ": " + ErrnoText(err));
  }
  // Make the rename itself durable; failure here is not worth failing the write for.
  int dfd = ::open(DirName(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return status_;
}

// The streambuf behind InputFileReader: raw reads from the descriptor, inflated when the
// file starts with the gzip magic.
class InputFileReader::Buffer : public std::streambuf {
 public:
  ~Buffer() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Open(const std::string& path) {
    path_ = path;
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return MakeError("cannot open " + path + ": " + ErrnoText(errno));
    struct stat st;
    if (::fstat(fd_, &st) == 0 && S_ISDIR(st.st_mode)) {
      return MakeError("cannot read " + path + ": it is a directory");
    }
    raw_.resize(kChunk);
    // Peek at the first bytes to decide between plain and gzip.
    if (!Fill()) return status_;
    gzipped_ = HasGzipMagic(std::string_view(raw_.data() + raw_pos_, raw_len_ - raw_pos_));
    if (gzipped_) {
      inflater_ = std::make_unique<Inflater>();
      out_.resize(kChunk);
    }
    return Status::Ok();
  }

  const Status& status() const { return status_; }
  uint64_t file_bytes() const { return file_bytes_; }
  uint64_t delivered() const { return delivered_ + static_cast<uint64_t>(gptr() - eback()); }
  bool gzipped() const { return gzipped_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    delivered_ += static_cast<uint64_t>(egptr() - eback());
    setg(nullptr, nullptr, nullptr);
    if (!status_.ok() || fd_ < 0) return traits_type::eof();
    if (!gzipped_) {
      if (raw_pos_ >= raw_len_ && !Fill()) return traits_type::eof();
      if (raw_pos_ >= raw_len_) return traits_type::eof();
      char* b = raw_.data() + raw_pos_;
      setg(b, b, raw_.data() + raw_len_);
      raw_pos_ = raw_len_;
      return traits_type::to_int_type(*gptr());
    }
    while (true) {
      if (raw_pos_ >= raw_len_ && !eof_) {
        if (!Fill()) return traits_type::eof();
        eof_ = raw_len_ == 0;
      }
      size_t consumed = 0;
      size_t n = inflater_->Run(std::string_view(raw_.data() + raw_pos_, raw_len_ - raw_pos_),
                                &consumed, out_.data(), out_.size());
      raw_pos_ += consumed;
      if (!inflater_->ok()) {
        status_ = MakeError(path_ + ": " + inflater_->error());
        return traits_type::eof();
      }
      if (n > 0) {
        setg(out_.data(), out_.data(), out_.data() + n);
        return traits_type::to_int_type(*gptr());
      }
      if (raw_pos_ < raw_len_ && consumed == 0) {
        // No progress with input left: only the first byte of a next member's magic remains.
        // Move it to the front and read more; at the end of the file, ignore it.
        size_t left = raw_len_ - raw_pos_;
        std::memmove(raw_.data(), raw_.data() + raw_pos_, left);
        raw_pos_ = 0;
        raw_len_ = left;
        ssize_t r = eof_ ? 0 : ReadSome(fd_, raw_.data() + left, raw_.size() - left);
        if (r < 0) {
          status_ = MakeError("cannot read " + path_ + ": " + ErrnoText(errno));
          return traits_type::eof();
        }
        if (r == 0) return traits_type::eof();
        file_bytes_ += static_cast<uint64_t>(r);
        raw_len_ = left + static_cast<size_t>(r);
        continue;
      }
      if (eof_ && raw_pos_ >= raw_len_) {
        inflater_->Finish();
        if (!inflater_->ok()) status_ = MakeError(path_ + ": " + inflater_->error());
        return traits_type::eof();
      }
    }
  }

 private:
  // Reads the next chunk of the file into raw_. False on a read error (status_ set).
  bool Fill() {
    ssize_t r = ReadSome(fd_, raw_.data(), raw_.size());
    if (r < 0) {
      status_ = MakeError("cannot read " + path_ + ": " + ErrnoText(errno));
      return false;
    }
    file_bytes_ += static_cast<uint64_t>(r);
    raw_pos_ = 0;
    raw_len_ = static_cast<size_t>(r);
    return true;
  }

  std::string path_;
  int fd_ = -1;
  bool gzipped_ = false;
  bool eof_ = false;
  std::vector<char> raw_, out_;
  size_t raw_pos_ = 0, raw_len_ = 0;
  std::unique_ptr<Inflater> inflater_;
  Status status_;
  uint64_t file_bytes_ = 0, delivered_ = 0;
};

namespace {

// Which inflated characters GzipMemoryReader keeps: one whitespace character of each run outside
// JSON strings. The JSON parser keeps every character of a gap between tokens, so a gigabyte of
// blanks would cost a gigabyte.
class WhitespaceCompactor {
 public:
  bool Keep(char c) {
    const bool ws = strings_.Outside(c) && (c == ' ' || c == '\n' || c == '\r' || c == '\t');
    if (ws && last_ws_) return false;
    last_ws_ = ws;
    return true;
  }

 private:
  JsonStringState strings_;
  bool last_ws_ = false;
};

}  // namespace

class GzipMemoryReader::Buffer : public std::streambuf {
 public:
  Buffer(std::string_view gz, uint64_t max_bytes) : in_(gz), max_(max_bytes), out_(kChunk) {}
  const Status& status() const { return status_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    while (status_.ok()) {
      size_t consumed = 0;
      size_t n = inflater_.Run(in_, &consumed, out_.data(), out_.size());
      in_.remove_prefix(consumed);
      if (!inflater_.ok()) {
        status_ = MakeError(inflater_.error());
        break;
      }
      if (n > 0) {
        delivered_ += n;
        if (delivered_ > max_) {
          status_ =
              MakeError("the gzip data inflates to more than " + std::to_string(max_) + " bytes");
          break;
        }
        n = CompactWhitespace(out_.data(), n);
        if (n == 0) continue;
        setg(out_.data(), out_.data(), out_.data() + n);
        return traits_type::to_int_type(*gptr());
      }
      if (consumed == 0) {
        inflater_.Finish();
        if (!inflater_.ok()) status_ = MakeError(inflater_.error());
        break;
      }
    }
    return traits_type::eof();
  }

  // Keeps what compactor_ keeps, in place; returns the new length.
  size_t CompactWhitespace(char* p, size_t n) {
    size_t w = 0;
    for (size_t i = 0; i < n; ++i) {
      if (compactor_.Keep(p[i])) p[w++] = p[i];
    }
    return w;
  }

 private:
  WhitespaceCompactor compactor_;
  std::string_view in_;
  uint64_t max_;
  uint64_t delivered_ = 0;
  std::vector<char> out_;
  Inflater inflater_;
  Status status_;
};

GzipMemoryReader::GzipMemoryReader(std::string_view gz, uint64_t max_bytes)
    : buf_(std::make_unique<Buffer>(gz, max_bytes)),
      stream_(std::make_unique<std::istream>(buf_.get())) {}
GzipMemoryReader::~GzipMemoryReader() = default;
std::istream& GzipMemoryReader::stream() { return *stream_; }
Status GzipMemoryReader::status() const { return buf_->status(); }

InflatedPosition LocateInGzipStream(std::string_view gz, uint64_t stream_offset) {
  Inflater inflater;
  WhitespaceCompactor compactor;
  InflatedPosition pos;
  uint64_t kept = 0;
  std::vector<char> out(kChunk);
  while (inflater.ok()) {
    size_t consumed = 0;
    const size_t n = inflater.Run(gz, &consumed, out.data(), out.size());
    gz.remove_prefix(consumed);
    for (size_t i = 0; i < n; ++i) {
      const char c = out[i];
      if (compactor.Keep(c) && kept++ == stream_offset) return pos;
      ++pos.offset;
      if (c == '\n') {
        ++pos.line;
        pos.column = 1;
      } else {
        ++pos.column;
      }
    }
    if (n == 0 && consumed == 0) break;
  }
  return pos;
}

InputFileReader::InputFileReader() : buf_(std::make_unique<Buffer>()) {}
InputFileReader::~InputFileReader() = default;

Status InputFileReader::Open(const std::string& path) {
  Status s = buf_->Open(path);
  if (s.ok()) stream_ = std::make_unique<std::istream>(buf_.get());
  return s;
}

std::istream& InputFileReader::stream() { return *stream_; }
Status InputFileReader::status() const { return buf_->status(); }
uint64_t InputFileReader::file_bytes_read() const { return buf_->file_bytes(); }
uint64_t InputFileReader::bytes_delivered() const { return buf_->delivered(); }
bool InputFileReader::gzipped() const { return buf_->gzipped(); }

}  // namespace ckprof
