// bench_convert: how fast `ckprof convert` reads its inputs, and how much memory it needs.
//
// Generates a replay-IR list (100,000 records by default) and a Kineto-style trace (200 MB by
// default) in a temporary directory, then converts them and the real traces of tests/data with
// ConvertFile + WriteConfigsFile, and prints records/s, MB/s and peak RSS for each.
//
//   bench_convert [--ir-records N] [--trace-mb N] [--data DIR] [--keep]
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/convert.h"

namespace {

using ckprof::Conversion;
using json = nlohmann::ordered_json;

// Peak resident set size (VmHWM) in MiB, from /proc/self/status.
double PeakRssMiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  }
  return 0;
}

// Current resident set size (VmRSS) in MiB.
double RssMiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  }
  return 0;
}

// Resets VmHWM to the current RSS (Linux >= 4.0), so each measurement has its own peak.
bool ResetPeakRss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  return static_cast<bool>(out.flush());
}

double FileMiB(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<double>(st.st_size) / (1 << 20) : 0;
}

json Tensor(const std::vector<int64_t>& shape, const char* dtype, bool channels_last) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  if (channels_last) {
    strides[1] = 1;
    s = shape[1];
    for (size_t i = shape.size(); i-- > 2;) {
      strides[i] = s;
      s *= shape[i];
    }
    strides[0] = s;
  } else {
    for (size_t i = shape.size(); i-- > 0;) {
      strides[i] = s;
      s *= shape[i];
    }
  }
  return json{{"shape", shape}, {"dtype", dtype}, {"strides", strides}, {"init", "normal"}};
}

json Arg(const char* name, const char* type, json value) {
  return json{{"arg_name", name}, {"arg_type", type}, {"value", std::move(value)}};
}

// A varied IR record: forward (miopen, cudnn, depthwise, conv1d/3d), backward, transposed.
json IrRecord(size_t i) {
  const int64_t n = 1 + static_cast<int64_t>(i % 4) * 8;
  const int64_t c = 16 << (i % 5), k = 16 << ((i / 5) % 5), hw = 7 << (i % 4);
  const bool cl = i % 7 == 0;
  const char* dtype = i % 3 == 0 ? "c10::Half" : i % 3 == 1 ? "c10::BFloat16" : "float";
  json args = json::array();
  std::string op;
  switch (i % 6) {
    case 0:
    case 1:
      op = i % 2 ? "aten::miopen_convolution" : "aten::cudnn_convolution";
      args.push_back(Arg("self", "Tensor", Tensor({n, c, hw, hw}, dtype, cl)));
      args.push_back(Arg("weight", "Tensor", Tensor({k, c, 3, 3}, dtype, false)));
      if (op == "aten::miopen_convolution") args.push_back(Arg("bias", "Tensor?", nullptr));
      args.push_back(Arg("padding", "SymInt[]", {1, 1}));
      args.push_back(Arg("stride", "SymInt[]", {1 + int64_t(i % 2), 1 + int64_t(i % 2)}));
      args.push_back(Arg("dilation", "SymInt[]", {1, 1}));
      args.push_back(Arg("groups", "SymInt", 1));
      break;
    case 2:
      op = "aten::miopen_depthwise_convolution";
      args.push_back(Arg("self", "Tensor", Tensor({n, c, hw, hw}, dtype, cl)));
      args.push_back(Arg("weight", "Tensor", Tensor({c, 1, 3, 3}, dtype, false)));
      args.push_back(Arg("bias", "Tensor?", nullptr));
      args.push_back(Arg("padding", "SymInt[]", {1, 1}));
      args.push_back(Arg("stride", "SymInt[]", {1, 1}));
      args.push_back(Arg("dilation", "SymInt[]", {1, 1}));
      args.push_back(Arg("groups", "SymInt", c));
      break;
    case 3:
    case 4: {
      const bool transposed = i % 6 == 4;
      op = "aten::convolution_backward";
      args.push_back(
          Arg("grad_output", "Tensor", Tensor({n, transposed ? c : k, hw, hw}, dtype, cl)));
      args.push_back(Arg("input", "Tensor", Tensor({n, transposed ? k : c, hw, hw}, dtype, cl)));
      args.push_back(Arg("weight", "Tensor", Tensor({k, c, 3, 3}, dtype, false)));
      args.push_back(Arg("bias_sizes", "SymInt[]?", {0}));
      args.push_back(Arg("stride", "SymInt[]", {1, 1}));
      args.push_back(Arg("padding", "SymInt[]", {1, 1}));
      args.push_back(Arg("dilation", "SymInt[]", {1, 1}));
      args.push_back(Arg("transposed", "bool", transposed));
      args.push_back(Arg("output_padding", "SymInt[]", {0, 0}));
      args.push_back(Arg("groups", "SymInt", 1));
      args.push_back(Arg("output_mask", "bool[3]", {true, i % 4 != 0, false}));
      break;
    }
    default:
      op = i % 2 ? "aten::conv1d" : "aten::conv3d";
      if (op == "aten::conv1d") {
        args.push_back(Arg("input", "Tensor", Tensor({n, c, hw * 8}, dtype, false)));
        args.push_back(Arg("weight", "Tensor", Tensor({k, c, 5}, dtype, false)));
        args.push_back(Arg("bias", "Tensor?", nullptr));
        args.push_back(Arg("stride", "SymInt[]", {1}));
        args.push_back(Arg("padding", "SymInt[]", {2}));
        args.push_back(Arg("dilation", "SymInt[]", {1}));
      } else {
        args.push_back(Arg("input", "Tensor", Tensor({n, c, 8, hw, hw}, dtype, false)));
        args.push_back(Arg("weight", "Tensor", Tensor({k, c, 3, 3, 3}, dtype, false)));
        args.push_back(Arg("bias", "Tensor?", nullptr));
        args.push_back(Arg("stride", "SymInt[]", {1, 1, 1}));
        args.push_back(Arg("padding", "SymInt[]", {1, 1, 1}));
        args.push_back(Arg("dilation", "SymInt[]", {1, 1, 1}));
      }
      args.push_back(Arg("groups", "SymInt", 1));
  }
  return json{{"op_name", op},
              {"replay_ir", {{"list_pos_args", std::move(args)}, {"list_kwargs", json::array()}}},
              {"metadata", {{"priority_rank", i + 1}}}};
}

// Writes `records` IR records, laid out like TraceLens' files (indent 1).
void WriteIr(const std::string& path, size_t records) {
  std::ofstream out(path, std::ios::binary);
  out << "[\n";
  for (size_t i = 0; i < records; ++i) {
    std::string s = IrRecord(i).dump(1);
    // Indent the record by one space, as an element of the array.
    out << ' ';
    for (char ch : s) {
      out << ch;
      if (ch == '\n') out << ' ';
    }
    out << (i + 1 < records ? ",\n" : "\n");
  }
  out << "]\n";
}

// Writes a Kineto-like trace of about `mb` MiB: per step, a 4-level forward conv nest and a
// backward conv with their kernels, plus the bulk of a real trace (Python function events,
// other ops, runtime calls, flow events) that conversion must skip. Returns the event count.
size_t WriteTrace(const std::string& path, double mb) {
  std::ofstream out(path, std::ios::binary);
  out << "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n  \"traceEvents\": [\n";
  const auto target = static_cast<uint64_t>(mb * (1 << 20));
  uint64_t written = 0;
  size_t events = 0;
  int64_t ext = 1000;
  double ts = 3743411230573.532;
  char buf[2048];
  auto emit = [&](int n) {
    out << (events ? ",\n" : "") << buf;
    written += static_cast<uint64_t>(n) + 2;
    ++events;
  };
  for (size_t step = 0; written < target; ++step) {
    const int c = 64 << (step % 4), hw = 56 >> (step % 4), n = 10;
    const int k = c * (step % 3 == 0 ? 2 : 1);
    const char* ops[] = {"aten::conv2d", "aten::convolution", "aten::_convolution",
                         "aten::miopen_convolution"};
    double t = ts;
    for (int level = 0; level < 4; ++level) {
      const bool backend = level == 3;
      int len = std::snprintf(
          buf, sizeof(buf),
          "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"%s\", \"pid\": 542, \"tid\": 542, "
          "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"External id\": %lld, \"Record function "
          "id\": 0, \"Concrete Inputs\": [\"\", \"\", \"\", \"[%s]\", \"[%s]\", \"[1, 1]\", "
          "\"%s\"], \"Input type\": [\"c10::BFloat16\", \"c10::BFloat16\", \"\", "
          "\"ScalarList\", \"ScalarList\", \"ScalarList\", \"Scalar\"], \"Input Strides\": "
          "[[%d, %d, %d, 1], [%d, 9, 3, 1], [], [], [], [], []], \"Input Dims\": [[%d, %d, %d, "
          "%d], [%d, %d, 3, 3], [], [], [], [], []], \"Ev Idx\": %zu}}",
          ops[level], t + level * 2.5, 100.0 - level * 5, static_cast<long long>(ext + level),
          backend ? "1, 1" : "1, 1", backend ? "1, 1" : "1, 1", "1", c * hw * hw, hw * hw, hw,
          c * 9, n, c, hw, hw, k, c, events);
      emit(len);
    }
    for (int kern = 0; kern < 3; ++kern) {
      int len = std::snprintf(
          buf, sizeof(buf),
          "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void "
          "MIOpenConvUni<bf16>(int, float const*, float*)\", \"pid\": 2, \"tid\": 0, \"ts\": "
          "%.3f, \"dur\": %.3f, \"args\": {\"External id\": %lld, \"device\": 2, \"stream\": 0, "
          "\"correlation\": %lld, \"kind\": \"Dispatch Kernel\", \"grid\": [1024, 1, 1], "
          "\"block\": [256, 1, 1]}}",
          t + 30 + kern * 10, 8.125 + kern, static_cast<long long>(ext + 3),
          static_cast<long long>(ext + 100000 + kern));
      emit(len);
      len = std::snprintf(buf, sizeof(buf),
                          "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": "
                          "\"hipExtModuleLaunchKernel\", \"pid\": 542, \"tid\": 542, \"ts\": "
                          "%.3f, \"dur\": 4.2, \"args\": {\"External id\": %lld, \"cbid\": 0, "
                          "\"correlation\": %lld}}",
                          t + 20 + kern, static_cast<long long>(ext + 3),
                          static_cast<long long>(ext + 100000 + kern));
      emit(len);
      len = std::snprintf(buf, sizeof(buf),
                          "  {\"ph\": \"f\", \"id\": %lld, \"pid\": 2, \"tid\": 0, \"ts\": %.3f, "
                          "\"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}",
                          static_cast<long long>(ext + 100000 + kern), t + 30 + kern * 10);
      emit(len);
    }
    // Backward conv on the autograd thread.
    int len = std::snprintf(
        buf, sizeof(buf),
        "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::convolution_backward\", "
        "\"pid\": 542, \"tid\": 639, \"ts\": %.3f, \"dur\": 101.009, \"args\": {\"External id\": "
        "%lld, \"Record function id\": 0, \"Concrete Inputs\": [\"\", \"\", \"\", \"[0]\", \"[1, "
        "1]\", \"[1, 1]\", \"[1, 1]\", \"False\", \"[0, 0]\", \"1\", \"[True, True, False]\"], "
        "\"Input type\": [\"c10::BFloat16\", \"c10::BFloat16\", \"c10::BFloat16\", "
        "\"ScalarList\", \"ScalarList\", \"ScalarList\", \"ScalarList\", \"Scalar\", "
        "\"ScalarList\", \"Scalar\", \"ScalarList\"], \"Input Strides\": [[%d, %d, %d, 1], [%d, "
        "%d, %d, 1], [%d, 9, 3, 1], [], [], [], [], [], [], [], []], \"Input Dims\": [[%d, %d, "
        "%d, %d], [%d, %d, %d, %d], [%d, %d, 3, 3], [], [], [], [], [], [], [], []], \"Ev Idx\": "
        "%zu}}",
        t + 500, static_cast<long long>(ext + 4), k * hw * hw, hw * hw, hw, c * hw * hw, hw * hw,
        hw, c * 9, n, k, hw, hw, n, c, hw, hw, k, c, events);
    emit(len);
    len = std::snprintf(buf, sizeof(buf),
                        "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void "
                        "MIOpenCvBwdWrW<bf16>(int, float const*, float*)\", \"pid\": 2, \"tid\": "
                        "0, \"ts\": %.3f, \"dur\": 21.5, \"args\": {\"External id\": %lld, "
                        "\"device\": 2, \"stream\": 0, \"correlation\": 7}}",
                        t + 550, static_cast<long long>(ext + 4));
    emit(len);
    // The bulk of a real trace: Python function events and other ops with their kernels.
    for (int p = 0; p < 24; ++p) {
      len = std::snprintf(buf, sizeof(buf),
                          "  {\"ph\": \"X\", \"cat\": \"python_function\", \"name\": "
                          "\"torch/nn/modules/module.py(1747): _call_impl\", \"pid\": 542, "
                          "\"tid\": 542, \"ts\": %.3f, \"dur\": 250.25, \"args\": {\"Python parent "
                          "id\": %d, \"Python id\": %d, \"Python thread\": 0}}",
                          t - 10 - p, p, p + 1);
      emit(len);
    }
    for (int o = 0; o < 4; ++o) {
      len = std::snprintf(
          buf, sizeof(buf),
          "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::add_\", \"pid\": 542, "
          "\"tid\": 542, \"ts\": %.3f, \"dur\": 12.5, \"args\": {\"External id\": %lld, "
          "\"Record function id\": 0, \"Concrete Inputs\": [\"\", \"\", \"1\"], \"Input type\": "
          "[\"c10::BFloat16\", \"c10::BFloat16\", \"Scalar\"], \"Input Strides\": [[%d, %d, %d, "
          "1], [%d, %d, %d, 1], []], \"Input Dims\": [[%d, %d, %d, %d], [%d, %d, %d, %d], []], "
          "\"Ev Idx\": %zu}}",
          t + 200 + o * 20, static_cast<long long>(ext + 10 + o), c * hw * hw, hw * hw, hw,
          c * hw * hw, hw * hw, hw, n, c, hw, hw, n, c, hw, hw, events);
      emit(len);
      len = std::snprintf(buf, sizeof(buf),
                          "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void "
                          "at::native::vectorized_elementwise_kernel<8>(int)\", \"pid\": 2, "
                          "\"tid\": 0, \"ts\": %.3f, \"dur\": 3.679, \"args\": {\"External id\": "
                          "%lld, \"device\": 2, \"stream\": 0, \"correlation\": 9}}",
                          t + 210 + o * 20, static_cast<long long>(ext + 10 + o));
      emit(len);
    }
    ext += 20;
    ts += 1000;
  }
  out << "\n  ],\n  \"traceName\": \"generated\"\n}\n";
  return events;
}

struct Row {
  std::string name;
  double mib = 0;       // JSON text, decompressed
  double disk_mib = 0;  // the file as stored (gzipped or not)
  size_t items = 0;
  const char* unit = "";
  double seconds = 0;        // ConvertFile
  double write_seconds = 0;  // WriteConfigsFile (temporary file, fsync, rename)
  double base_mib = 0;       // RSS before the conversion
  double peak_mib = 0;       // peak RSS during it
  size_t configs = 0;
};

void PrintRow(const Row& r) {
  std::printf("%-30s %8.1f %8.1f %8zu %-7s %6.2f %10.0f %7.1f %7.3f %8.1f %8.1f %8zu\n",
              r.name.c_str(), r.disk_mib, r.mib, r.items, r.unit, r.seconds,
              r.seconds > 0 ? r.items / r.seconds : 0, r.seconds > 0 ? r.mib / r.seconds : 0,
              r.write_seconds, r.base_mib, r.peak_mib - r.base_mib, r.configs);
  std::fflush(stdout);
}

// Converts `path` `repeat` times (ConvertFile + WriteConfigsFile) and reports the mean.
Row Measure(const std::string& name, const std::string& path, const std::string& out_path,
            int repeat, size_t trace_events, double json_mib) {
  Row row;
  row.name = name;
  row.disk_mib = FileMiB(path);
  row.mib = json_mib > 0 ? json_mib : row.disk_mib;
  ::malloc_trim(0);
  row.base_mib = RssMiB();
  ResetPeakRss();
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < repeat; ++i) {
    const auto start = Clock::now();
    auto conv = ckprof::ConvertFile(path, ckprof::ConvertOptions{});
    const auto converted = Clock::now();
    if (!conv) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), conv.error().c_str());
      std::exit(1);
    }
    if (auto s = ckprof::WriteConfigsFile(out_path, conv->configs); !s) {
      std::fprintf(stderr, "%s\n", s.error().c_str());
      std::exit(1);
    }
    row.seconds += std::chrono::duration<double>(converted - start).count() / repeat;
    row.write_seconds += std::chrono::duration<double>(Clock::now() - converted).count() / repeat;
    row.configs = conv->configs.size();
    if (conv->format == ckprof::InputFormat::kTrace) {
      row.items = trace_events;
      row.unit = "events";
    } else {
      row.items = conv->records.size();
      row.unit = "records";
    }
  }
  row.peak_mib = PeakRssMiB();
  return row;
}

// Counts the traceEvents of a (possibly gzipped) trace, for the events/s column, and
// returns the size of its JSON text in *json_mib.
size_t CountEvents(const std::string& path, double* json_mib) {
  struct Counter {
    size_t depth = 0, events = 0;
    bool in_events = false, key_events = false;
    bool null() { return true; }
    bool boolean(bool) { return true; }
    bool number_integer(int64_t) { return true; }
    bool number_unsigned(uint64_t) { return true; }
    bool number_float(double, const std::string&) { return true; }
    bool string(std::string&) { return true; }
    bool binary(json::binary_t&) { return true; }
    bool key(std::string& k) {
      if (depth == 1) key_events = k == "traceEvents";
      return true;
    }
    bool start_object(size_t) {
      if (++depth == 3 && in_events) ++events;
      return true;
    }
    bool end_object() {
      --depth;
      return true;
    }
    bool start_array(size_t) {
      if (++depth == 2 && key_events) in_events = true;
      return true;
    }
    bool end_array() {
      if (depth-- == 2) in_events = false;
      return true;
    }
    bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) {
      return false;
    }
  } counter;
  std::string cmd = "gzip -dcf '" + path + "'";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return 0;
  std::string text;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) text.append(buf, n);
  ::pclose(pipe);
  *json_mib = static_cast<double>(text.size()) / (1 << 20);
  json::sax_parse(text.begin(), text.end(), &counter);
  return counter.events;
}

}  // namespace

int main(int argc, char** argv) {
  size_t ir_records = 100000;
  double trace_mb = 200;
  bool keep = false;
  // The repository's tests/data, found from this source file's path unless given.
  std::string data = std::filesystem::path(__FILE__).parent_path().parent_path() / "tests/data";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--ir-records" && i + 1 < argc) {
      ir_records = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--trace-mb" && i + 1 < argc) {
      trace_mb = std::atof(argv[++i]);
    } else if (a == "--data" && i + 1 < argc) {
      data = argv[++i];
    } else if (a == "--keep") {
      keep = true;
    } else {
      std::fprintf(stderr,
                   "usage: bench_convert [--ir-records N] [--trace-mb N] [--data DIR] [--keep]\n");
      return 2;
    }
  }
  std::string dir_template = (std::filesystem::temp_directory_path() / "bench-convert-XXXXXX");
  std::vector<char> dir_buf(dir_template.begin(), dir_template.end());
  dir_buf.push_back('\0');
  if (!::mkdtemp(dir_buf.data())) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string dir = dir_buf.data();
  const std::string ir_path = dir + "/ir.json", trace_path = dir + "/trace.json";
  const std::string out_path = dir + "/configs.json";

  std::fprintf(stderr, "generating %zu IR records and a %.0f MB trace in %s ...\n", ir_records,
               trace_mb, dir.c_str());
  WriteIr(ir_path, ir_records);
  const size_t trace_events = WriteTrace(trace_path, trace_mb);

  std::printf("%-30s %8s %8s %8s %-7s %6s %10s %7s %7s %8s %8s %8s\n", "input", "diskMiB",
              "jsonMiB", "items", "", "sec", "items/s", "MiB/s", "write s", "baseRSS", "+peakRSS",
              "configs");
  PrintRow(Measure("IR list (generated)", ir_path, out_path, 1, 0, 0));
  PrintRow(Measure("trace (generated)", trace_path, out_path, 1, trace_events, 0));
  struct Real {
    const char* name;
    const char* file;
    int repeat;
  } reals[] = {{"conv_repros_ir.json (real IR)", "conv_repros_ir.json", 50},
               {"resnet_mi300_trace.json.gz", "resnet_mi300_trace.json.gz", 5},
               {"vit_h100_trace.json.gz", "vit_h100_trace.json.gz", 20}};
  for (const auto& r : reals) {
    const std::string path = data + "/" + r.file;
    if (FileMiB(path) == 0) {
      std::fprintf(stderr, "skipping %s: not found (pass --data DIR)\n", path.c_str());
      continue;
    }
    double json_mib = 0;
    const size_t events = CountEvents(path, &json_mib);
    PrintRow(Measure(r.name, path, out_path, r.repeat, events, json_mib));
  }
  std::printf(
      "(sec, items/s, MiB/s: ConvertFile, over the JSON text (decompressed); items: IR\n"
      " records or trace events; write s: WriteConfigsFile, mostly its fsync;\n"
      " baseRSS: the benchmark's resident set before the conversion; +peakRSS: how far the\n"
      " conversion (ConvertFile + WriteConfigsFile) raised it at its peak)\n");
  if (!keep) std::filesystem::remove_all(dir);
  return 0;
}
