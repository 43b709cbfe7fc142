// TraceReader collects the convolution calls of a PyTorch profiler (Kineto / Chrome trace)
// JSON document as nlohmann's SAX parser streams it, keeping only what conversion needs: the
// convolution cpu_op events (their arguments interned once per distinct problem) and the
// (External id, dur) of kernel events. Memory grows with the convolutions found and the kernel
// count, not with the size of the trace.
//
// Finish() then applies conversion.md's rules: nested conv events on one thread are one call,
// described by its innermost backend op; a call's GPU time is the kernel time of its events'
// External ids; identical problems are merged and ranked by total GPU time.
//
// Single-threaded: one reader per document, fed by one parser.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/conv_call.h"

namespace ckprof {

// One distinct convolution problem of a trace, with the calls that had it.
struct TraceProblem {
  ConvCall call;            // the describing op and its arguments (named per the schema)
  int64_t gpu_time_ns = 0;  // summed kernel time of all its calls
  int64_t count = 0;        // number of calls
};

// The result of reading a trace.
struct TraceSummary {
  std::vector<TraceProblem> problems;  // ranked: most GPU time first, ties by first appearance
  size_t events = 0;                   // entries of traceEvents
  size_t conv_events = 0;              // conv cpu_op events (all nest levels)
  size_t calls = 0;                    // convolution calls (outermost events of nests)
};

class TraceReader {
 public:
  using json = nlohmann::ordered_json;

  TraceReader();
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  // nlohmann's SAX interface. The reader must see the whole document from its first event.
  bool null();
  bool boolean(bool val);
  bool number_integer(json::number_integer_t val);
  bool number_unsigned(json::number_unsigned_t val);
  bool number_float(json::number_float_t val, const json::string_t& s);
  bool string(json::string_t& val);
  bool binary(json::binary_t& val);
  bool start_object(std::size_t elements);
  bool key(json::string_t& val);
  bool end_object();
  bool start_array(std::size_t elements);
  bool end_array();
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex);

  // Whether the root object had a "traceEvents" list.
  bool saw_trace_events() const { return saw_trace_events_; }

  // Groups, merges and ranks what was read. Call once, after the document ended.
  TraceSummary Finish();

 private:
  enum class EventKey { kNone, kName, kCat, kPid, kTid, kTs, kDur, kArgs };
  enum class ArgsKey { kNone, kExternalId, kDims, kTypes, kStrides, kConcrete };

  // One conv cpu_op event, reduced to what nesting and merging need.
  struct ConvEvent {
    uint32_t thread;
    uint32_t problem;
    int64_t start_ns, end_ns;
    int64_t ext_id;
    bool has_ext_id;
    bool backend;
    uint64_t index;  // position in traceEvents
  };
  // The arguments of one distinct (op, arguments) pair, as recorded.
  struct RawCall {
    std::string name;
    std::vector<std::vector<int64_t>> dims, strides;
    std::vector<std::string> types, concrete;
  };
  struct Kernel {
    int64_t ext_id;
    int64_t dur_ns;
  };

  void Scalar(const std::string* text, int64_t int_value, bool is_int, double float_value,
              const std::string* float_text);
  void BeginEvent();
  void EndEvent();
  uint32_t InternCall();
  ConvCall MakeCall(const RawCall& raw) const;

  size_t depth_ = 0;
  bool root_key_events_ = false;  // the current root key is "traceEvents"
  bool in_events_ = false;        // inside the traceEvents array (depth 2)
  bool saw_trace_events_ = false;
  bool in_event_ = false;      // inside an event object (depth 3)
  bool in_args_ = false;       // inside its args (depth 4)
  bool capture_args_ = false;  // keep Input Dims etc. of this event
  EventKey event_key_ = EventKey::kNone;
  ArgsKey args_key_ = ArgsKey::kNone;
  ArgsKey field_ = ArgsKey::kNone;  // the args list being read (depth 5)

  // The event being read.
  std::string name_, cat_, pid_, tid_;
  int64_t ts_ns_ = 0, dur_ns_ = 0, ext_id_ = 0;
  bool has_ts_ = false, has_dur_ = false, has_ext_id_ = false;
  RawCall raw_;
  uint64_t event_index_ = 0;

  std::vector<ConvEvent> conv_events_;
  std::vector<Kernel> kernels_;
  std::vector<RawCall> calls_;
  std::unordered_map<std::string, uint32_t> call_ids_;
  std::unordered_map<std::string, uint32_t> thread_ids_;
  std::string key_buf_;
};

// Microseconds as written in a trace ("3743411230573.532", "12", "1.5e3") to integer
// nanoseconds, exactly for decimal text with up to 3 fractional digits.
int64_t MicrosTextToNanos(std::string_view text, double value);

}  // namespace ckprof
