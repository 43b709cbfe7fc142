// File input and output for commands and the daemon: reading inputs that may be gzipped, and
// writing outputs atomically so that a failed run never leaves a half-written file.
//
// All functions return a Result/Status whose error names the file and the OS reason; none
// throws. Any thread may call them (no shared state).
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"

namespace ckprof {

// True when data starts with the gzip magic bytes (1f 8b).
bool HasGzipMagic(std::string_view data);

// Decompresses a whole gzip buffer (concatenated members allowed). Errors say the data is
// corrupt or truncated.
Result<std::string> Gunzip(std::string_view data);

// The same, bounded: an error once the data inflates past `max_bytes`. `head_ok`, when given, is
// asked once about the first MiB inflated (all of it, when less): false ends the inflating with
// the error "declined".
Result<std::string> GunzipAtMost(std::string_view data, uint64_t max_bytes,
                                 const std::function<bool(std::string_view head)>& head_ok = {});

// Compresses data into one gzip member (level 1-9).
Result<std::string> Gzip(std::string_view data, int level = 6);

// The same on up to `threads` threads: a member for each piece of 8 MiB or more, one after the
// other (gzip's concatenation, which Gunzip, the converter and gunzip read whole). A large
// submit's input is compressed so (at level 1, zlib's ~230 MB/s a core here).
Result<std::string> GzipOnThreads(std::string_view data, int level, unsigned threads);

// Reads a whole file as it is on disk, without decompressing.
Result<std::string> ReadFileBytes(const std::string& path);

// Reads what `fd` gives until its end (a file, a pipe), straight into the string's memory: a
// regular file's size is allocated at once (a 500 MB input read a byte at a time through a
// stream took 1.3 s). The error is the OS reason alone ("Is a directory").
Result<std::string> ReadFdBytes(int fd);

// A regular file mapped read-only: a large input compressed straight from its pages, not from a
// copy (ckprof submit: 0.4 s less for 500 MB). Reading the view of a file that is cut short
// meanwhile raises SIGBUS: the caller says what happened (the client, SigbusExit).
class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  // False, nothing mapped, for what is not a regular file of `min_bytes` or more, or cannot be
  // opened or mapped (the caller reads it as it would otherwise, and reports its error).
  bool Map(const std::string& path, size_t min_bytes);
  std::string_view view() const { return {static_cast<const char*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Reads a whole file. Content that is gzipped (by name ".gz" or by its magic bytes) is
// decompressed transparently. Errors: "cannot open FILE: No such file or directory", ...
Result<std::string> ReadInputFile(const std::string& path);

// Writes content to path atomically: a temporary file in the same directory, fsync, rename.
// On any error the temporary file is removed and an existing file at path is left untouched.
// A new file gets mode 0644 (minus nothing); an existing file keeps its mode.
Status WriteFileAtomic(const std::string& path, std::string_view content);

// Writes a file atomically in pieces: a temporary file in the same directory, then fsync and
// rename on Commit(). Destroyed without Commit(), it removes the temporary file, so a failed
// or interrupted write never leaves a partial file at the path. Single-threaded.
class AtomicFileWriter {
 public:
  AtomicFileWriter() = default;
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Creates the temporary file. Errors: "cannot write PATH: cannot create a temporary file
  // in DIR: <reason>". A path that is a device, a FIFO or a socket (/dev/null, /dev/stdout,
  // a named pipe) is written in place: renaming a file over it would replace it (as root,
  // /dev/null itself).
  Status Open(const std::string& path);
  // Appends data (buffered). After an error, further calls return the same error.
  Status Write(std::string_view data);
  // Flushes, fsyncs and renames the temporary file over the path.
  Status Commit();

 private:
  Status Flush();
  Status Fail(const std::string& what, int err);

  std::string path_, tmp_;
  int fd_ = -1;
  bool in_place_ = false;  // not a regular file: written directly, nothing renamed
  std::string buf_;
  Status status_;
};

// A std::istream over gzipped JSON held in memory, inflated a chunk at a time: memory stays one
// chunk however large the data inflates (runs of whitespace between JSON tokens are cut to one
// character, since the JSON parser keeps every character of a gap). Stops with an error past
// `max_bytes` inflated (a gzip bomb). `gz` must outlive the reader. Single-threaded.
class GzipMemoryReader {
 public:
  GzipMemoryReader(std::string_view gz, uint64_t max_bytes);
  ~GzipMemoryReader();
  GzipMemoryReader(const GzipMemoryReader&) = delete;
  GzipMemoryReader& operator=(const GzipMemoryReader&) = delete;
  std::istream& stream();
  // Ok, or why the stream ended early (corrupt data, over max_bytes).
  Status status() const;

 private:
  class Buffer;
  std::unique_ptr<Buffer> buf_;
  std::unique_ptr<std::istream> stream_;
};

// Where character `stream_offset` of a GzipMemoryReader's stream (whitespace runs cut) stands in
// the inflated data: its byte offset there, line and column. For error messages: it inflates `gz`
// again, up to that character (the end of the data when the stream is shorter).
struct InflatedPosition {
  uint64_t offset = 0;
  uint64_t line = 1, column = 1;
};
InflatedPosition LocateInGzipStream(std::string_view gz, uint64_t stream_offset);

// A std::istream over a file that may be gzipped (detected by its magic bytes, not its name),
// read in chunks so that memory does not grow with the file. Used for streaming parsers.
// Single-threaded; the reader owns the file descriptor and closes it on destruction.
class InputFileReader {
 public:
  InputFileReader();
  ~InputFileReader();
  InputFileReader(const InputFileReader&) = delete;
  InputFileReader& operator=(const InputFileReader&) = delete;

  // Opens path. Errors: "cannot open FILE: <reason>".
  Status Open(const std::string& path);
  // The decompressed content as a stream. Valid after a successful Open.
  std::istream& stream();
  // Ok, or the read/decompression error met so far ("FILE: corrupt gzip data: ...").
  // A read error ends the stream early, so check this after consuming it.
  Status status() const;
  // Bytes of the file itself read so far (compressed size for gzip files).
  uint64_t file_bytes_read() const;
  // Bytes delivered by stream() so far (decompressed).
  uint64_t bytes_delivered() const;
  bool gzipped() const;

 private:
  class Buffer;
  std::unique_ptr<Buffer> buf_;
  std::unique_ptr<std::istream> stream_;
};

}  // namespace ckprof
