// Tests of reading inputs (plain, gzipped, broken), atomic writing, and the `ckprof convert`
// command as a user runs it: output file, console report, exit codes and messages.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/configs_list_reader.h"
#include "common/convert.h"
#include "common/file_util.h"
#include "tests/util/commands.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"

namespace ckprof {
namespace {

using testing::BinPath;
using testing::CommandResult;
using testing::DataPath;
using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;
using testing::WriteFile;

std::string Gzip(const std::string& data) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, data.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(FileUtil, ReadsPlainAndGzippedFiles) {
  TempDir dir;
  std::string big(3 << 20, 'x');  // several chunks
  for (size_t i = 0; i < big.size(); i += 97) big[i] = static_cast<char>('a' + i % 26);
  WriteFile(dir.File("plain.txt"), big);
  WriteFile(dir.File("packed.gz"), Gzip(big));
  WriteFile(dir.File("packed.json"), Gzip(big));  // gzip content without the .gz name
  WriteFile(dir.File("two.gz"), Gzip("first ") + Gzip("second"));
  WriteFile(dir.File("empty"), "");
  for (const char* name : {"plain.txt", "packed.gz", "packed.json"}) {
    auto r = ReadInputFile(dir.File(name));
    ASSERT_TRUE(r.ok()) << name << ": " << r.error();
    EXPECT_TRUE(*r == big) << name;
  }
  auto two = ReadInputFile(dir.File("two.gz"));
  ASSERT_TRUE(two.ok()) << two.error();
  EXPECT_EQ(*two, "first second");
  auto empty = ReadInputFile(dir.File("empty"));
  ASSERT_TRUE(empty.ok()) << empty.error();
  EXPECT_EQ(*empty, "");
  auto unzipped = Gunzip(Gzip("hello"));
  ASSERT_TRUE(unzipped.ok()) << unzipped.error();
  EXPECT_EQ(*unzipped, "hello");
}

// A large input compressed on several threads: a member a piece, read back whole.
TEST(FileUtil, GzipOnThreadsWritesMembersThatReadAsOne) {
  std::string big(20 << 20, 'x');  // two pieces of 8 MiB or more
  for (size_t i = 0; i < big.size(); i += 89) big[i] = static_cast<char>('a' + i % 26);
  auto gz = GzipOnThreads(big, 1, 4);
  ASSERT_TRUE(gz.ok()) << gz.error();
  auto one = ckprof::Gzip(big, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_NE(*gz, *one);  // members, not one stream
  auto back = Gunzip(*gz);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_TRUE(*back == big);
  // Small data, or one thread: one member.
  EXPECT_EQ(*GzipOnThreads(big, 1, 1), *one);
  EXPECT_EQ(*GzipOnThreads("hello", 1, 4), *ckprof::Gzip("hello", 1));
}

// Bytes as they are: a regular file read into a string of its size, a pipe of several
// chunks, an empty file; a directory's error names it and the reason.
TEST(FileUtil, ReadsBytesOfFilesAndPipesWhole) {
  TempDir dir;
  std::string big(3 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 101) big[i] = static_cast<char>('a' + i % 26);
  WriteFile(dir.File("big.bin"), big);
  WriteFile(dir.File("empty"), "");
  auto file = ReadFileBytes(dir.File("big.bin"));
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_TRUE(*file == big);
  EXPECT_LT(file->capacity(), big.size() + big.size() / 4 + (1 << 20));
  auto empty = ReadFileBytes(dir.File("empty"));
  ASSERT_TRUE(empty.ok()) << empty.error();
  EXPECT_EQ(*empty, "");
  auto directory = ReadFileBytes(dir.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.error(), "cannot read " + dir.path() + ": Is a directory");
  auto missing = ReadFileBytes(dir.File("missing"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error(), "cannot open " + dir.File("missing") + ": No such file or directory");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::thread writer([&] {
    for (size_t at = 0; at < big.size();) {
      const ssize_t n = write(fds[1], big.data() + at, std::min<size_t>(big.size() - at, 70001));
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    close(fds[1]);
  });
  auto piped = ReadFdBytes(fds[0]);
  writer.join();
  close(fds[0]);
  ASSERT_TRUE(piped.ok()) << piped.error();
  EXPECT_TRUE(*piped == big);
}

// A large regular file is mapped as it is; what is small, not regular or missing is not.
TEST(FileUtil, MapsLargeRegularFilesOnly) {
  TempDir dir;
  std::string big(2 << 20, 'y');
  big[12345] = 'z';
  WriteFile(dir.File("big.bin"), big);
  WriteFile(dir.File("small.bin"), "tiny");
  MappedFile mapped;
  ASSERT_TRUE(mapped.Map(dir.File("big.bin"), 1 << 20));
  EXPECT_TRUE(mapped.view() == big);
  EXPECT_FALSE(mapped.Map(dir.File("big.bin"), 1 << 20)) << "one mapping a MappedFile";
  for (const std::string& path : {dir.File("small.bin"), dir.path(), dir.File("missing")}) {
    MappedFile other;
    EXPECT_FALSE(other.Map(path, 1 << 20)) << path;
    EXPECT_TRUE(other.view().empty());
  }
  MappedFile tiny;
  EXPECT_TRUE(tiny.Map(dir.File("small.bin"), 1));
  EXPECT_EQ(tiny.view(), "tiny");
}

TEST(FileUtil, ReadErrorsNameTheFileAndReason) {
  TempDir dir;
  const std::string packed = Gzip(ReadFile(DataPath("conv_repros_ir.json")));
  WriteFile(dir.File("truncated.gz"), packed.substr(0, packed.size() / 2));
  std::string corrupt = packed;
  corrupt[corrupt.size() / 2] ^= 0x55;
  corrupt[corrupt.size() / 2 + 1] ^= 0x55;
  WriteFile(dir.File("corrupt.gz"), corrupt);
  struct Case {
    std::string path;
    std::string error;
  } cases[] = {
      {dir.File("missing.json"),
       "cannot open " + dir.File("missing.json") + ": No such file or directory"},
      {dir.path(), "cannot read " + dir.path() + ": it is a directory"},
      {dir.File("truncated.gz"),
       dir.File("truncated.gz") + ": truncated gzip data (unexpected end of file)"},
      {dir.File("corrupt.gz"), dir.File("corrupt.gz") + ": corrupt gzip data"},
  };
  for (const auto& tc : cases) {
    auto r = ReadInputFile(tc.path);
    ASSERT_FALSE(r.ok()) << tc.path;
    EXPECT_EQ(r.error().rfind(tc.error, 0), 0u) << r.error();
  }
}

TEST(FileUtil, WriteFileAtomicWritesDevicesAndPipesInPlace) {
  // `ckprof convert in.json /dev/null` (or --output /dev/null) as root once renamed a regular
  // file over /dev/null. A device or a FIFO is written in place and stays what it is.
  TempDir dir;
  const std::string fifo = dir.File("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // so that the write opens
  ASSERT_GE(reader, 0);
  ASSERT_TRUE(WriteFileAtomic(fifo, "through the pipe").ok());
  char buf[64] = {};
  EXPECT_EQ(::read(reader, buf, sizeof buf), 16);
  EXPECT_EQ(std::string(buf), "through the pipe");
  ::close(reader);
  struct stat st;
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(DirEntries(dir.path()), std::vector<std::string>{"pipe"});  // no temp left
  if (getuid() == 0) {
    const std::string null = dir.File("null");
    ASSERT_EQ(::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
    ASSERT_TRUE(WriteFileAtomic(null, "gone").ok());
    ASSERT_EQ(::stat(null.c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device was replaced by a file";
  }
}

TEST(FileUtil, WriteFileAtomicReplacesWholeOrNothing) {
  TempDir dir;
  const std::string path = dir.File("out.json");
  ASSERT_TRUE(WriteFileAtomic(path, "first").ok());
  EXPECT_EQ(ReadFile(path), "first");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  ASSERT_TRUE(WriteFileAtomic(path, "second").ok());
  EXPECT_EQ(ReadFile(path), "second");
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // an existing file keeps its mode
  EXPECT_EQ(DirEntries(dir.path()), std::vector<std::string>{"out.json"});  // no temp left

  // A failing write leaves nothing behind.
  Status s = WriteFileAtomic(dir.File("no/such/dir/out.json"), "x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("No such file or directory"), std::string::npos) << s.error();
  std::filesystem::create_directory(dir.File("sub"));
  s = WriteFileAtomic(dir.File("sub"), "x");  // renaming a file over a directory fails
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(DirEntries(dir.path()), (std::vector<std::string>{"out.json", "sub"}));
  EXPECT_TRUE(std::filesystem::is_empty(dir.File("sub")));

  // An abandoned writer removes its temporary file.
  {
    AtomicFileWriter w;
    ASSERT_TRUE(w.Open(dir.File("abandoned.json")).ok());
    ASSERT_TRUE(w.Write("partial").ok());
  }
  EXPECT_EQ(DirEntries(dir.path()), (std::vector<std::string>{"out.json", "sub"}));
}

TEST(ConvertFile, StreamsGzippedFilesAndLocatesJsonErrors) {
  TempDir dir;
  const std::string ir = ReadFile(DataPath("conv_repros_ir.json"));
  WriteFile(dir.File("ir.json.gz"), Gzip(ir));
  auto zipped = ConvertFile(dir.File("ir.json.gz"), {});
  auto plain = ConvertFile(DataPath("conv_repros_ir.json"), {});
  ASSERT_TRUE(zipped.ok()) << zipped.error();
  ASSERT_TRUE(plain.ok()) << plain.error();
  EXPECT_EQ(FormatConfigsText(zipped->configs), FormatConfigsText(plain->configs));

  // A syntax error deep in a gzipped file: line and column of the decompressed text.
  std::string broken = ir;
  const size_t at = broken.find("\"arg_name\": \"weight\"", broken.size() / 2);
  ASSERT_NE(at, std::string::npos);
  broken.insert(at, "@");
  size_t line = 1 + static_cast<size_t>(std::count(broken.begin(), broken.begin() + at, '\n'));
  size_t column = at - broken.rfind('\n', at - 1);
  WriteFile(dir.File("broken.json.gz"), Gzip(broken));
  auto bad = ConvertFile(dir.File("broken.json.gz"), {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().rfind(dir.File("broken.json.gz") + ": not valid JSON at line " +
                                  std::to_string(line) + ", column " + std::to_string(column) +
                                  ": syntax error",
                              0),
            0u)
      << bad.error();
}

// nlohmann's lexer takes a NUL byte for the end of the input; the converter must not stop there
// silently. The first fault in input order is reported: a NUL (with its line, column and byte
// offset) unless a syntax error comes before it.
TEST(ConvertText, NulByteIsAnErrorNamingItsOffset) {
  const std::string configs = testing::FwdConfigsText(1);
  struct Case {
    const char* name;
    std::string text;
    std::string error;  // the whole message
  } cases[] = {
      {"after a complete list", std::string("[]\0[1]", 6),
       "input: not valid JSON at line 1, column 3: a NUL byte (byte offset 2)"},
      {"after a configs file", configs + std::string("\0 anything", 10),
       "input: not valid JSON at line " +
           std::to_string(1 + std::count(configs.begin(), configs.end(), '\n')) +
           ", column 1: a NUL byte (byte offset " + std::to_string(configs.size()) + ")"},
      {"last byte", std::string("[]\n\0", 4),
       "input: not valid JSON at line 2, column 1: a NUL byte (byte offset 3)"},
      {"inside a string", std::string("[\"a\0b\"]", 7),
       "input: not valid JSON at line 1, column 4: a NUL byte (byte offset 3)"},
      {"mid-list", std::string("[1,\0]", 5),
       "input: not valid JSON at line 1, column 4: a NUL byte (byte offset 3)"},
      {"a syntax error first", std::string("[1,,]\0", 6),
       "input: not valid JSON at line 1, column 4: syntax error while parsing value - "
       "unexpected ','; expected '[', '{', or a literal"},
  };
  for (const auto& tc : cases) {
    auto r = ConvertText(tc.text, {});
    ASSERT_FALSE(r.ok()) << tc.name << ": accepted " << r->configs.size() << " config(s)";
    EXPECT_EQ(r.error(), tc.error) << tc.name;
  }
  // Gzipped: the place in the inflated text (the reader cuts runs of whitespace; the message
  // counts them).
  auto zipped = ConvertText(Gzip(configs + std::string("\0", 1)), {});
  ASSERT_FALSE(zipped.ok());
  EXPECT_EQ(zipped.error(),
            "input: not valid JSON at line " +
                std::to_string(1 + std::count(configs.begin(), configs.end(), '\n')) +
                ", column 1 of the inflated input: a NUL byte (byte offset " +
                std::to_string(configs.size()) + ")");
  // A syntax error in gzipped text is placed in the inflated text too.
  auto broken = ConvertText(Gzip("[\n    1,\n        ,\n]"), {});
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().rfind("input: not valid JSON at line 3, column 9 of the inflated input: "
                                 "syntax error",
                                 0),
            0u)
      << broken.error();
  // Without the NUL, the same text converts.
  EXPECT_TRUE(ConvertText(configs, {}).ok());
}

TEST(ConvertFile, NulByteIsAnErrorNamingItsOffset) {
  TempDir dir;
  // Far past the reader's first chunk (64 KiB), so that offsets add up over chunks.
  const std::string text = "[" + std::string(200000, ' ') + "]\n  ";
  const std::string with_nul = text + std::string("\0[]", 3);
  WriteFile(dir.File("nul.json"), with_nul);
  WriteFile(dir.File("nul.json.gz"), Gzip(with_nul));
  for (const char* name : {"nul.json", "nul.json.gz"}) {
    auto r = ConvertFile(dir.File(name), {});
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.error(), dir.File(name) + ": not valid JSON at line 2, column 3: a NUL byte " +
                             "(byte offset " + std::to_string(text.size()) + ")");
  }
  WriteFile(dir.File("clean.json"), text);
  EXPECT_TRUE(ConvertFile(dir.File("clean.json"), {}).ok());
}

// A configs list of about 9 MiB whose metadata strings hold what a cut must not fall into:
// commas, braces, brackets, quotes, backslashes and a whole config's text.
std::string LargeConfigsText(int n) {
  std::vector<CkConfig> configs;
  for (int i = 1; i <= n; ++i) {
    CkConfig c =
        testing::Conv3x3(i % 3 == 0 ? ConvOp::kBwdWeight : ConvOp::kFwd, 2 + i % 7, 8 + i, 8, 14);
    c.metadata["priority_rank"] = i;
    c.metadata["note"] = "}, {\"operation_type\": \"profile_grouped_conv_fwd\"}, [\\\"" +
                         std::to_string(i) + "\\\\\"]";
    c.metadata["shapes"] = {{{"a", ",]}"}}, {{"b", "\\"}}};
    configs.push_back(c);
  }
  return ConfigsToText(configs);
}

// Text with `from` replaced by `to` at its first place at or after `at` (a fraction of the text).
std::string ReplaceAfter(std::string text, double at, const std::string& from,
                         const std::string& to) {
  const size_t pos = text.find(from, static_cast<size_t>(static_cast<double>(text.size()) * at));
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

// Expects `many` to be the same conversion as `one`: configs, records, report and warnings.
void ExpectSameConversion(const Result<Conversion>& many, const Result<Conversion>& one) {
  ASSERT_TRUE(many.ok()) << many.error();
  ASSERT_TRUE(one.ok()) << one.error();
  EXPECT_EQ(many->format, one->format);
  EXPECT_EQ(many->configs.size(), one->configs.size());
  EXPECT_EQ(FormatConfigsText(many->configs), FormatConfigsText(one->configs));
  EXPECT_EQ(FormatConversionReport(*many, false), FormatConversionReport(*one, false));
  EXPECT_EQ(many->warnings, one->warnings);
}

// A large configs list is read on several threads (ConvertText's `threads`). The outcome must be
// the one-thread outcome whatever the input: the same configs, records and report, and for a
// faulty input the same message, line and column included. (This one also runs under TSan.)
TEST(ConvertText, LargeConfigsListIsReadOnTwoThreadsAsOnOne) {
  const std::string text = LargeConfigsText(9000);  // over 4 MiB gzipped, whitespace cut
  auto one = ConvertText(text, {}, 1);
  ASSERT_TRUE(one.ok()) << one.error();
  EXPECT_EQ(one->configs.size(), 9000u);
  EXPECT_EQ(one->reader_threads, 1u);
  auto two = ConvertText(text, {}, 2);
  ExpectSameConversion(two, one);
  EXPECT_EQ(two->reader_threads, 2u);
  auto zipped = ConvertText(Gzip(text), {}, 2);
  ExpectSameConversion(zipped, one);
  EXPECT_EQ(zipped->reader_threads, 2u);
}

// A gzipped list is inflated as it is, up to the bound; past it, or no configs list (its
// first MiB tells), or corrupt: not here (the streamed reading reads or refuses it).
TEST(ConvertText, AGzippedListIsInflatedWholeUpToTheBound) {
  const std::string text = LargeConfigsText(3000);
  const std::string gz = Gzip(text);
  auto whole = InflateConfigsList(gz);
  ASSERT_TRUE(whole.has_value());
  EXPECT_TRUE(*whole == text);
  auto at_bound = InflateConfigsList(gz, text.size());
  ASSERT_TRUE(at_bound.has_value());
  EXPECT_EQ(at_bound->size(), text.size());
  EXPECT_FALSE(InflateConfigsList(gz, text.size() - 1).has_value());
  std::string trace = "{\"traceEvents\": [" + std::string(3 << 20, ' ') + "]}";
  EXPECT_FALSE(InflateConfigsList(Gzip(trace)).has_value());
  EXPECT_FALSE(InflateConfigsList(gz.substr(0, gz.size() / 2)).has_value());
  std::string with_nul = text;
  with_nul[text.size() / 2] = '\0';
  EXPECT_FALSE(InflateConfigsList(Gzip(with_nul)).has_value());
}

TEST(ConvertText, ALargeConfigsListTakesAThreadPer2MiB) {
  const std::string text = LargeConfigsText(12000);
  ASSERT_GT(text.size(), size_t{8} << 20);  // 4 parts of 2 MiB or more
  auto one = ConvertText(text, {}, 1);
  const std::string zipped = Gzip(text);
  for (unsigned threads : {3u, 4u, 16u}) {
    for (bool gz : {false, true}) {
      SCOPED_TRACE(std::to_string(threads) + " threads" + (gz ? ", gzipped" : ""));
      auto many = ConvertText(gz ? zipped : text, {}, threads);
      ExpectSameConversion(many, one);
      // No more threads than there are 2 MiB of text (gzipped too: inflated as it is).
      EXPECT_EQ(many->reader_threads, std::min<size_t>(threads, text.size() >> 21));
    }
  }
}

// Elements that the fast reader of a large list declines (valid JSON it does not read as
// nlohmann does: UTF-8, \u escapes, many keys, deep nesting, a float past 64-bit integers)
// are read by the document reader instead: the same conversion as on one thread.
TEST(ConvertText, ALargeConfigsListWithWhatTheFastReaderDeclinesReadsTheSame) {
  std::string text = LargeConfigsText(6000);  // 2 parts
  text = ReplaceAfter(text, 0.1,
                      "\"note\": ", "\"who\": \"Jos\u00e9 \\u00e9 caf\xc3\xa9\", \"note\": ");
  text = ReplaceAfter(text, 0.6, "\"note\": ", "\"big\": 18446744073709551616, \"note\": ");
  std::string keys;
  for (int i = 0; i < 40; ++i)
    keys += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ", ";
  text = ReplaceAfter(text, 0.8, "\"note\": ", keys + "\"note\": ");
  text = ReplaceAfter(text, 0.9, "\"note\": ",
                      "\"deep\": " + std::string(40, '[') + std::string(40, ']') + ", \"note\": ");
  auto one = ConvertText(text, {}, 1);
  ASSERT_TRUE(one.ok()) << one.error();
  auto two = ConvertText(text, {}, 2);
  ExpectSameConversion(two, one);
  EXPECT_EQ(two->reader_threads, 2u);
}

// A large list gzipped in members (a submit's, compressed on several threads) is cut anywhere,
// an element's middle too: read as the plain text is.
TEST(ConvertText, ALargeConfigsListGzippedInMembersReadsAsThePlainText) {
  const std::string text = LargeConfigsText(6000);
  const std::string members =
      Gzip(text.substr(0, text.size() / 2)) + Gzip(text.substr(text.size() / 2));
  auto one = ConvertText(text, {}, 1);
  ASSERT_TRUE(one.ok()) << one.error();
  ExpectSameConversion(ConvertText(members, {}, 2), one);
  ExpectSameConversion(ConvertText(members, {}, 1), one);
}

TEST(ConvertText, FaultsInALargeConfigsListReadAsOnOneThread) {
  // Faults late in the list, where another thread reads: each gives the one-thread message.
  const std::string small = LargeConfigsText(6000);  // 2 parts
  const std::string fwd = "\"operation_type\": \"profile_grouped_conv_fwd\"";
  struct Case {
    const char* name;
    std::string text;
    bool gzipped_too;  // also compare the gzipped reading (its messages place faults otherwise)
  } cases[] = {
      {"an invalid config", ReplaceAfter(small, 0.8, "\"K\": ", "\"K\": -"), true},
      {"a config missing a field", ReplaceAfter(small, 0.6, "\"C\": 8,", ""), false},
      {"a syntax error", ReplaceAfter(small, 0.7, "\"C\": 8,", "\"C\": 8,,"), true},
      {"an IR record", ReplaceAfter(small, 0.9, fwd, "\"op_name\": \"aten::conv2d\""), false},
      {"a number for a config", ReplaceAfter(small, 0.55, "\n  {", "\n  7, {"), false},
      {"a NUL byte", ReplaceAfter(small, 0.75, "\"C\"", std::string("\"C\0\"", 4)), true},
      {"text after the list", small + "\n[]", false},
      {"an unclosed list", small.substr(0, small.rfind(']')), false},
      {"a list nested too deep",
       ReplaceAfter(small, 0.65, "\"C\": 8",
                    "\"C\": 8, \"x\": " + std::string(600, '[') + std::string(600, ']')),
       false},
  };
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.name);
    auto expected = ConvertText(tc.text, {}, 1);
    ASSERT_FALSE(expected.ok());
    EXPECT_EQ(ConvertText(tc.text, {}, 2).error(), expected.error());
    if (tc.gzipped_too) {
      const std::string gz = Gzip(tc.text);
      auto expected_gz = ConvertText(gz, {}, 1);
      ASSERT_FALSE(expected_gz.ok());
      EXPECT_EQ(ConvertText(gz, {}, 2).error(), expected_gz.error());
    }
  }

  // A large replay-IR list is not a configs list: it is read on one thread, as before.
  std::string ir = "[";
  for (int i = 0; ir.size() < (size_t{5} << 20); ++i) {
    if (i) ir += ",\n";
    ir += R"({"op_name": "aten::conv2d", "inputs": [{"shape": [2, 8, 14, 14], "dtype": "float"},)"
          R"( {"shape": [16, 8, 3, 3], "dtype": "float"}], "padding": "x"})";
  }
  ir += "]";
  auto ir_many = ConvertText(ir, {}, 4);
  ExpectSameConversion(ir_many, ConvertText(ir, {}, 1));
  EXPECT_EQ(ir_many->reader_threads, 1u);
  EXPECT_EQ(ir_many->format, InputFormat::kReplayIr);
}

TEST(ConvertFile, PeakMemoryIsNotTheTraceSize) {
  // The reader keeps conv events and kernel (id, time) pairs, not the document: a trace with
  // 200,000 non-conv events converts, and what it produced is the one problem.
  std::string trace = R"({"traceEvents": [)";
  for (int i = 0; i < 200000; ++i) {
    trace += R"({"ph": "X", "cat": "python_function", "name": "f", "pid": 1, "tid": 1, "ts": )" +
             std::to_string(i) + R"(, "dur": 1, "args": {"Python id": 1}}, )";
  }
  trace += R"({"ph": "X", "cat": "cpu_op", "name": "aten::cudnn_convolution", "pid": 1, "tid": 1,
    "ts": 5, "dur": 1, "args": {"External id": 9, "Concrete Inputs": ["", "", "[0, 0]", "[1, 1]",
    "[1, 1]", "1", "False", "False", "True"], "Input type": ["float", "float", "ScalarList",
    "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"], "Input Strides":
    [[48, 16, 4, 1], [3, 1, 1, 1], [], [], [], [], [], [], []], "Input Dims": [[1, 3, 4, 4],
    [2, 3, 1, 1], [], [], [], [], [], [], []]}}]})";
  auto conv = ConvertText(trace, {});
  ASSERT_TRUE(conv.ok()) << conv.error();
  ASSERT_EQ(conv->configs.size(), 1u);
  EXPECT_EQ(conv->configs[0].data_type, 0);
  EXPECT_EQ(conv->configs[0].K, 2);
}

class ConvertCommand : public ::testing::Test {
 protected:
  CommandResult Run(std::vector<std::string> args, const std::string& cwd = "",
                    const std::string& input = "") {
    args.insert(args.begin(), {BinPath("ckprof"), "convert"});
    return RunCommand(args, {}, cwd, input);
  }
  TempDir dir_;
};

TEST_F(ConvertCommand, ConvertsAndReports) {
  const std::string out = dir_.File("configs.json");
  auto r = Run({DataPath("conv_repros_ir.json"), out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto expected = ConvertFile(DataPath("conv_repros_ir.json"), {});
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(ReadFile(out), FormatConfigsText(expected->configs));
  EXPECT_EQ(ReadFile(out), ConfigsToText(expected->configs));
  EXPECT_NE(
      r.out.find("Input: " + DataPath("conv_repros_ir.json") + " (replay-IR list, 22 records)\n"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\n✓ [1/22] Converted: aten::convolution_backward (rank 1) → bwd_data + "
                       "bwd_weight\n✓ [2/22] Converted: aten::miopen_convolution (rank 2) → fwd\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("✓ [17/22] Converted: aten::convolution_backward (rank 17) → "
                       "bwd_weight\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(FormatConversionReport(*expected, true)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Saved 32 configs to " + out), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
}

TEST_F(ConvertCommand, QuietPrintsOnlyTheSummaryAndWarnsOnStderr) {
  const std::string in = dir_.File("in.json");
  const std::string ir = ReadFile(DataPath("conv_repros_ir.json"));
  WriteFile(in, R"([{"op_name": "aten::addmm"},)" + ir.substr(ir.find('[') + 1));
  auto r = Run({in, dir_.File("out.json"), "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Operations: 22 converted + 1 skipped; configs: 11 + 10 + 11; numbers in one column; and
  // where the configs went, quiet or not.
  EXPECT_EQ(r.out,
            "Total PyTorch operations:         23\n"
            "  ✓ Converted:                    22\n"
            "  ⚠ Skipped:                       1\n"
            "Total CK profiler configs:        32\n"
            "  ✓ Forward convolutions:         11\n"
            "  ✓ Backward data convolutions:   10\n"
            "  ✓ Backward weight convolutions: 11\n"
            "Saved 32 configs to " +
                dir_.File("out.json") + "\n");
  EXPECT_EQ(r.err, "warning: record 1 (aten::addmm) skipped: not a convolution\n");
}

TEST_F(ConvertCommand, TraceWithOptions) {
  const std::string out = dir_.File("vit.json");
  auto r = Run({DataPath("vit_h100_trace.json.gz"), out, "--data-type", "fp16", "--layout=nhwc"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(PyTorch profiler trace, 1 convolution call, 1 unique problem)"),
            std::string::npos)
      << r.out;
  auto configs = ConfigsFromJson(nlohmann::ordered_json::parse(ReadFile(out)));
  ASSERT_TRUE(configs.ok()) << configs.error();
  ASSERT_EQ(configs->size(), 1u);
  EXPECT_EQ((*configs)[0].data_type, 1);
  EXPECT_EQ((*configs)[0].layout, 1);
}

TEST_F(ConvertCommand, UnusableInputExitsOneWithOneMessage) {
  WriteFile(dir_.File("bad.json"), "[\n  {\"op_name\": 1},\n  oops\n]\n");
  WriteFile(dir_.File("obj.json"), "{\"hello\": 1}");
  struct Case {
    std::string input;
    std::string error;
  } cases[] = {
      {dir_.File("missing.json"), "ckprof convert: cannot open " + dir_.File("missing.json") +
                                      ": No such file or directory\n"},
      {dir_.File("bad.json"), "ckprof convert: " + dir_.File("bad.json") +
                                  ": not valid JSON at line 3, column 3: syntax error while "
                                  "parsing value - invalid literal\n"},
      {dir_.File("obj.json"),
       "ckprof convert: " + dir_.File("obj.json") +
           ": neither a replay-IR list (a JSON array of records with op_name) nor a PyTorch "
           "profiler trace (a JSON object with traceEvents); the object has no traceEvents list\n"},
  };
  for (const auto& tc : cases) {
    auto r = Run({tc.input, dir_.File("out.json")});
    EXPECT_EQ(r.exit_code, 1) << tc.input;
    EXPECT_EQ(r.err, tc.error);
    EXPECT_EQ(r.out, "");
    EXPECT_FALSE(std::filesystem::exists(dir_.File("out.json")));
  }
}

TEST_F(ConvertCommand, DefaultInputMissingSuggestsAFile) {
  auto r = Run({}, dir_.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "ckprof convert: no INPUT given and the default build/test-data/conv_repros_ir.json "
            "does not exist; pass a file, e.g. 'ckprof convert examples/conv_repros_ir.json'\n");
  // With the default input in place, the defaults are used for both paths.
  std::filesystem::create_directories(dir_.File("build/test-data"));
  std::filesystem::copy_file(DataPath("conv_repros_ir.json"),
                             dir_.File("build/test-data/conv_repros_ir.json"));
  r = Run({"--quiet"}, dir_.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir_.File("ck_profiler_configs.json")));
}

TEST_F(ConvertCommand, UnwritableOutputExitsOne) {
  auto r = Run({DataPath("conv_repros_ir.json"), dir_.File("no/dir/out.json")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("ckprof convert: cannot write " + dir_.File("no/dir/out.json")),
            std::string::npos)
      << r.err;
}

TEST_F(ConvertCommand, HelpAndUsageErrors) {
  auto help = Run({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* s : {"usage: ckprof convert [INPUT] [OUTPUT]", "--data-type TYPE", "--layout",
                        "--quiet", "build/test-data/conv_repros_ir.json",
                        "ck_profiler_configs.json", "profiler trace", "convolution_backward"}) {
    EXPECT_NE(help.out.find(s), std::string::npos) << s;
  }
  struct Case {
    std::vector<std::string> args;
    std::string error;
  } cases[] = {
      {{"--data-type", "fp8"}, "--data-type must be auto, fp16, bf16 or fp32, got 'fp8'"},
      {{"--layout", "nchwc"}, "--layout must be auto, nchw or nhwc, got 'nchwc'"},
      {{"--frobnicate"}, "unknown option --frobnicate"},
      {{"a", "b", "c"}, "unexpected argument 'c'"},
  };
  for (const auto& tc : cases) {
    auto r = Run(tc.args);
    EXPECT_EQ(r.exit_code, 2) << tc.error;
    EXPECT_NE(r.err.find(tc.error), std::string::npos) << r.err;
  }
}

// Issue 17.13: an input with no convolution to profile is an error, as on submit: exit 1, the
// reason (with the record_shapes hint for a trace without shapes), and no file of zero configs.
TEST_F(ConvertCommand, NoConvolutionExitsOneKeepsTheHintAndWritesNothing) {
  const std::string shapeless =
      R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::cudnn_convolution",
      "pid": 7, "tid": 1, "ts": 100, "dur": 10, "args": {"External id": 5}}]})";
  struct Case {
    std::string name, text, error;
  } cases[] = {
      {"shapeless trace", shapeless,
       "no convolution to profile (its one record was skipped); the trace may have been "
       "recorded without record_shapes=True: profile with "
       "torch.profiler.profile(record_shapes=True)"},
      {"trace without convolutions",
       R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 7,
       "tid": 1, "ts": 100, "dur": 10, "args": {}}]})",
       "no convolution to profile"},
      {"IR list without convolutions", R"([{"op_name": "aten::addmm"}, {"op_name": "aten::mm"}])",
       "no convolution to profile (all 2 records were skipped)"},
      {"empty list", "[]", "no convolution to profile"},
  };
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.name);
    const std::string in = dir_.File("in.json"), out = dir_.File("out.json");
    WriteFile(in, tc.text);
    for (const bool quiet : {false, true}) {
      auto r = quiet ? Run({in, out, "--quiet"}) : Run({in, out});
      EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
      EXPECT_NE(
          r.err.find("ckprof convert: " + in + ": " + tc.error + "; " + out + " not written\n"),
          std::string::npos)
          << r.err;
      EXPECT_FALSE(std::filesystem::exists(out));
      EXPECT_EQ(r.out.find("Saved"), std::string::npos) << r.out;
    }
    auto piped = Run({in, "-"});
    EXPECT_EQ(piped.exit_code, 1);
    EXPECT_EQ(piped.out, "");  // not even "[]"
  }
  // Each skipped record still says why, quiet or not.
  WriteFile(dir_.File("in.json"), shapeless);
  auto loud = Run({dir_.File("in.json"), dir_.File("out.json")});
  EXPECT_NE(loud.out.find("⚠ [1/1] Skipped: aten::cudnn_convolution (rank 1): the trace has no "
                          "argument shapes (profile with record_shapes=True)"),
            std::string::npos)
      << loud.out;
}

// Issue 17.17: "-" is stdin (plain or gzipped) and stdout; with the configs on stdout the
// report goes to stderr, so that the output can be piped into jq.
TEST_F(ConvertCommand, DashIsStdinAndStdout) {
  const std::string ir = ReadFile(DataPath("conv_repros_ir.json"));
  auto expected = ConvertText(ir, {});
  ASSERT_TRUE(expected.ok());
  for (const auto& [name, input] :
       {std::pair<std::string, std::string>{"plain", ir}, {"gzipped", Gzip(ir)}}) {
    SCOPED_TRACE(name);
    auto r = Run({"-", "-"}, "", input);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, FormatConfigsText(expected->configs));
    EXPECT_NE(r.err.find("Input: stdin (replay-IR list, 22 records)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Wrote 32 configs to stdout\n"), std::string::npos) << r.err;
    const std::string out = dir_.File(name + ".json");
    auto to_file = Run({"-", out, "--quiet"}, "", input);
    ASSERT_EQ(to_file.exit_code, 0) << to_file.err;
    EXPECT_EQ(ReadFile(out), FormatConfigsText(expected->configs));
    EXPECT_NE(to_file.out.find("Saved 32 configs to " + out), std::string::npos);
  }
  // A gzipped trace from a file, to stdout.
  auto from_file = Run({DataPath("resnet_mi300_trace.json.gz"), "-", "--quiet"});
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  auto configs = ConfigsFromJson(nlohmann::ordered_json::parse(from_file.out));
  ASSERT_TRUE(configs.ok()) << configs.error();
  EXPECT_EQ(configs->size(), 32u);
  // Errors name stdin.
  auto bad = Run({"-", dir_.File("x.json")}, "", "[\n  oops\n]\n");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err,
            "ckprof convert: stdin: not valid JSON at line 2, column 3: syntax error while "
            "parsing value - invalid literal\n");
}

// Issue 17.21: --layout and --data-type are accepted in any case.
TEST_F(ConvertCommand, LayoutAndDataTypeInAnyCase) {
  for (const char* layout : {"nhwc", "NHWC", "Nhwc"}) {
    SCOPED_TRACE(layout);
    const std::string out = dir_.File("out.json");
    auto r = Run({DataPath("vit_h100_trace.json.gz"), out, "--layout", layout, "--data-type",
                  std::string(layout) == "NHWC" ? "FP16" : "Fp16", "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto configs = ConfigsFromJson(nlohmann::ordered_json::parse(ReadFile(out)));
    ASSERT_TRUE(configs.ok()) << configs.error();
    ASSERT_EQ(configs->size(), 1u);
    EXPECT_EQ((*configs)[0].layout, 1);
    EXPECT_EQ((*configs)[0].data_type, 1);
  }
  auto bad = Run({"--layout", "NCHWC"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--layout must be auto, nchw or nhwc, got 'NCHWC'"), std::string::npos);
}

}  // namespace
}  // namespace ckprof
