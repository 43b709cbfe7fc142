// `ckprof convert`: PyTorch convolutions (replay-IR list or profiler trace) to a CK profiler
// configs file, with the original tool's console report.
#include <sys/stat.h>

#include <iostream>
#include <string>

#include "client/args.h"
#include "client/client_util.h"
#include "client/commands.h"
#include "common/convert.h"

namespace ckprof {
namespace {

constexpr const char* kDefaultInput = "build/test-data/conv_repros_ir.json";
constexpr const char* kDefaultOutput = "ck_profiler_configs.json";

constexpr const char* kDetails =
    "Inputs, recognised by content (not by name); gzipped files are read transparently:\n"
    "  replay-IR list       a JSON array of {op_name, replay_ir, metadata} records\n"
    "                       (TraceLens conv_repros_ir.json); configs keep the input order\n"
    "  profiler trace       a PyTorch profiler (Kineto) trace, recorded with\n"
    "                       record_shapes=True: each convolution call counts once, identical\n"
    "                       problems are merged and ranked by total GPU kernel time\n"
    "  CK configs file      an existing ck_profiler_configs.json: validated, written back\n"
    "\n"
    "Operations: aten::conv1d/conv2d/conv3d, convolution, _convolution, miopen_convolution,\n"
    "miopen_depthwise_convolution, miopen_convolution_transpose, cudnn_convolution,\n"
    "cudnn_convolution_transpose and convolution_backward. Any other record is skipped with a\n"
    "warning naming it and the reason; the rest still convert.\n"
    "\n"
    "Mapping: a forward convolution gives a profile_grouped_conv_fwd config;\n"
    "convolution_backward gives bwd_data for output_mask[0] and bwd_weight for output_mask[1].\n"
    "Transposed convolutions map to the equivalent CK problem: the forward transpose is a\n"
    "bwd_data problem, its backward is fwd + bwd_weight. K and C are per group.\n"
    "\n"
    "--data-type auto takes the input tensor's dtype (c10::Half -> fp16, c10::BFloat16 ->\n"
    "bf16, float -> fp32, anything else -> fp16 with a warning); the value written is CK's\n"
    "per-operation enum (bf16 is 2 for fwd/bwd_data, 5 for bwd_weight).\n"
    "--layout auto is nchw (CK layout 3, 3, 4 for fwd, bwd_data, bwd_weight) unless the input\n"
    "tensor's strides are channels-last, then nhwc (1, 1, 2).\n"
    "\n"
    "Output: a JSON array of configs (operation_type, profiler_args, metadata), written\n"
    "atomically. INPUT - reads stdin (plain or gzipped); OUTPUT - writes the configs to\n"
    "stdout and the report to stderr. Exit status: 0 when converted (even if some records\n"
    "were skipped), 1 when the input cannot be used, holds no convolution to profile (no\n"
    "file is written then) or the output cannot be written, 2 for a usage error.\n"
    "\n"
    "Examples:\n"
    "  ckprof convert examples/conv_repros_ir.json\n"
    "  ckprof convert trace.json.gz configs.json --data-type bf16 --quiet\n"
    "  ckprof convert trace.json.gz - | jq length\n";

// Converts INPUT: a file (streamed), or stdin ("-") read whole first.
Result<Conversion> Convert(const std::string& input, const ConvertOptions& options) {
  if (!IsStdio(input)) return ConvertFile(input, options);
  auto bytes = ReadStdinBytes();
  if (!bytes) return Error{bytes.error()};
  auto conv = ConvertText(*bytes, options);
  if (!conv) return Error{NameInput(conv.error(), InputLabel(input))};
  return conv;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

int UsageError(const std::string& msg) {
  std::cerr << "ckprof convert: " << msg << " (see 'ckprof convert --help')\n";
  return 2;
}

}  // namespace

int RunConvertCommand(const Args& args) {
  std::string input, output, data_type = "auto", layout = "auto";
  bool quiet = false;
  ArgParser parser("ckprof convert",
                   "Convert PyTorch convolutions into AMD Composable Kernel profiler configs.",
                   kDetails);
  parser.Positional("INPUT", &input, false,
                    "input file, - for stdin (default: " + std::string(kDefaultInput) + ")");
  parser.Positional(
      "OUTPUT", &output, false,
      "configs file to write, - for stdout (default: " + std::string(kDefaultOutput) + ")");
  parser.Option("--data-type", &data_type, "TYPE",
                "auto, fp16, bf16 or fp32, in any case (default: auto, from the input tensor's "
                "dtype)");
  parser.Option("--layout", &layout, "LAYOUT",
                "auto, nchw or nhwc, in any case (default: auto, nhwc for channels-last inputs)");
  parser.Flag("--quiet", &quiet, "print only the summary and where the configs went");
  if (auto rc = parser.Parse(args)) return *rc;

  ConvertOptions options;
  if (Lowercase(data_type) != "auto") {
    options.data_type = ParseDataTypeName(Lowercase(data_type));
    if (!options.data_type) {
      return UsageError("--data-type must be auto, fp16, bf16 or fp32, got '" + data_type + "'");
    }
  }
  if (Lowercase(layout) != "auto") {
    options.layout = ParseLayoutName(Lowercase(layout));
    if (!options.layout) {
      return UsageError("--layout must be auto, nchw or nhwc, got '" + layout + "'");
    }
  }
  if (input.empty()) {
    input = kDefaultInput;
    if (!FileExists(input)) {
      std::cerr << "ckprof convert: no INPUT given and the default " << input
                << " does not exist; pass a file, e.g. 'ckprof convert "
                   "examples/conv_repros_ir.json'\n";
      return 1;
    }
  }
  if (output.empty()) output = kDefaultOutput;

  auto conv = Convert(input, options);
  if (!conv) {
    std::cerr << "ckprof convert: " << conv.error() << "\n";
    return 1;
  }
  auto plural = [](size_t n, const char* word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
  };
  const bool to_stdout = IsStdio(output);
  if (!to_stdout && !conv->configs.empty()) {
    if (Status s = WriteConfigsFile(output, conv->configs); !s) {
      std::cerr << "ckprof convert: " << s.error() << "\n";
      return 1;
    }
  }
  // With the configs on stdout (piped into jq, say), the report goes to stderr.
  std::ostream& report = to_stdout ? std::cerr : std::cout;
  for (const auto& w : conv->warnings) std::cerr << "warning: " << w << "\n";
  if (quiet) {
    for (const auto& r : conv->records) {
      if (r.produced.empty()) std::cerr << "warning: " << SkipWarning(r) << "\n";
    }
  } else {
    report << "Input: " << InputLabel(input) << " (" << InputFormatName(conv->format) << ", ";
    if (conv->format == InputFormat::kTrace) {
      report << plural(conv->trace_calls, "convolution call") << ", "
             << plural(conv->records.size(), "unique problem");
    } else {
      report << plural(conv->records.size(), "record");
    }
    report << ")\n\n";
  }
  report << FormatConversionReport(*conv, quiet);
  // Nothing to profile: an error, as for submit, and no file of zero configs to mislead.
  if (conv->configs.empty()) {
    report.flush();
    std::cerr << "ckprof convert: " << InputLabel(input) << ": " << NoConfigsReason(*conv) << "; "
              << OutputLabel(output) << " not written\n";
    return 1;
  }
  if (to_stdout) {
    std::cout << FormatConfigsText(conv->configs) << std::flush;
    if (!std::cout) {
      std::cerr << "ckprof convert: cannot write the configs to stdout\n";
      return 1;
    }
  }
  report << (quiet ? "" : "\n") << (to_stdout ? "Wrote " : "Saved ")
         << plural(conv->configs.size(), "config") << " to " << OutputLabel(output) << "\n";
  return 0;
}

}  // namespace ckprof
