#include "common/convert.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <istream>
#include <iterator>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <streambuf>

#include "common/configs_list_reader.h"
#include "common/file_util.h"
#include "common/json_util.h"
#include "common/replay_ir.h"
#include "common/trace_reader.h"

namespace ckprof {
namespace {

constexpr size_t kMaxUndecidedElements = 1000;

using json = nlohmann::ordered_json;

// Builds one JSON value from SAX events (an element of the root array). Objects with many keys
// are appended to without the linear duplicate search of ordered_json, so that a hostile
// object cannot make building quadratic; small objects keep "last key wins".
class ElementBuilder {
 public:
  void StartContainer(json value) {
    if (stack_.empty()) {
      root_ = std::move(value);
      stack_.push_back(&root_);
      return;
    }
    stack_.push_back(Add(std::move(value)));
  }
  void Key(std::string key) { key_ = std::move(key); }
  void Value(json value) { Add(std::move(value)); }
  // Closes a container; true when that completed the element.
  bool EndContainer() {
    stack_.pop_back();
    return stack_.empty();
  }
  json Take() { return std::move(root_); }

 private:
  json* Add(json value) {
    json* parent = stack_.back();
    if (parent->is_array()) {
      parent->push_back(std::move(value));
      return &parent->back();
    }
    auto& obj = parent->get_ref<json::object_t&>();
    if (obj.size() <= 32) {
      for (auto& kv : obj) {
        if (kv.first == key_) {
          kv.second = std::move(value);
          return &kv.second;
        }
      }
    }
    auto& items = static_cast<json::object_t::Container&>(obj);
    items.emplace_back(std::move(key_), std::move(value));
    return &items.back().second;
  }

  json root_;
  std::vector<json*> stack_;
  std::string key_;
};

// A stream that ends at the first NUL byte of another and remembers where it was. nlohmann's
// lexer takes NUL for the end of the input, so "[...]\0anything" would otherwise convert
// without a word about what follows; the caller reports the NUL instead (JSON text never holds
// a raw NUL: inside strings it must be escaped).
class NulStopBuffer : public std::streambuf {
 public:
  explicit NulStopBuffer(std::streambuf* in) : in_(in), buf_(1 << 16) {}
  // The 0-based offset of the first NUL byte, once the stream has reached it.
  std::optional<uint64_t> nul_offset() const { return nul_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    offset_ += static_cast<uint64_t>(egptr() - eback());
    setg(nullptr, nullptr, nullptr);
    if (nul_) return traits_type::eof();
    const std::streamsize got = in_->sgetn(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    if (got <= 0) return traits_type::eof();
    size_t len = static_cast<size_t>(got);
    if (const void* nul = std::memchr(buf_.data(), '\0', len)) {
      len = static_cast<size_t>(static_cast<const char*>(nul) - buf_.data());
      nul_ = offset_ + len;
      if (len == 0) return traits_type::eof();
    }
    setg(buf_.data(), buf_.data(), buf_.data() + len);
    return traits_type::to_int_type(*gptr());
  }

 private:
  std::streambuf* in_;
  std::vector<char> buf_;
  uint64_t offset_ = 0;  // of eback() in the stream
  std::optional<uint64_t> nul_;
};

// The error for a NUL byte at `offset`; `where` is its "line L, column C".
std::string NulError(std::string_view who, const std::string& where, uint64_t offset) {
  return std::string(who) + ": not valid JSON at " + where + ": a NUL byte (byte offset " +
         std::to_string(offset) + ")";
}

std::string ProducedText(const std::vector<ConvOp>& ops) {
  std::string s;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i) s += " + ";
    s += ShortOpName(ops[i]);
  }
  return s;
}

std::string RecordPrefix(const RecordOutcome& r) {
  return "record " + std::to_string(r.position) + " (" + r.op_name + ")";
}

// Sets the metadata of a converted config, in the order conversion.md shows.
void SetMetadata(CkConfig* c, int64_t rank, const std::string& op_name, const json& extra) {
  c->metadata = json::object();
  c->metadata["priority_rank"] = rank;
  c->metadata["pytorch_op"] = op_name;
  c->metadata["description"] = Describe(*c);
  for (auto it = extra.begin(); it != extra.end(); ++it) c->metadata[it.key()] = it.value();
}

// Converts one call into the outcome and configs of one record.
void ConvertCall(const ConvCall& call, const ConvertOptions& options, const json& extra,
                 RecordOutcome* out, Conversion* conv) {
  CallMapping m = MapConvCall(call, options);
  for (const auto& w : m.warnings) conv->warnings.push_back(RecordPrefix(*out) + ": " + w);
  if (m.configs.empty()) {
    out->skip_reason = m.skip_reason;
    return;
  }
  for (auto& c : m.configs) {
    SetMetadata(&c, out->priority_rank, out->op_name, extra);
    out->produced.push_back(c.op);
    conv->configs.push_back(std::move(c));
  }
}

// The SAX handler for a whole input document. It decides the format from the root value:
// an object goes to the TraceReader; the elements of an array are built one at a time and
// converted as IR records (or read as configs) before the next one is parsed.
//
// A handler may also read a run of a configs list's elements, handed to it as the list
// "[" + run + "]" (ConvertConfigsListInParts): `first_index` is then the index of the run's first
// element in the whole list, and `configs_only` takes every element for a config.
class DocumentHandler {
 public:
  explicit DocumentHandler(const ConvertOptions& options, size_t first_index = 0,
                           bool configs_only = false)
      : options_(options),
        first_index_(first_index),
        array_kind_(configs_only ? ArrayKind::kConfigs : ArrayKind::kUndecided) {}

  bool null() {
    return Scalar(json(nullptr), [&] { return trace_.null(); });
  }
  bool boolean(bool v) {
    return Scalar(json(v), [&] { return trace_.boolean(v); });
  }
  bool number_integer(json::number_integer_t v) {
    return Scalar(json(v), [&] { return trace_.number_integer(v); });
  }
  bool number_unsigned(json::number_unsigned_t v) {
    return Scalar(json(v), [&] { return trace_.number_unsigned(v); });
  }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return Scalar(json(v), [&] { return trace_.number_float(v, s); });
  }
  bool string(json::string_t& v) {
    if (mode_ == Mode::kTrace) return trace_.string(v);
    return Scalar(json(std::move(v)), [] { return true; });
  }
  bool binary(json::binary_t&) { return true; }

  bool start_object(std::size_t n) {
    if (++depth_ > kMaxInputDepth) return TooDeep();
    if (mode_ == Mode::kStart) mode_ = Mode::kTrace;
    if (mode_ == Mode::kTrace) return trace_.start_object(n);
    builder_.StartContainer(json::object());
    return true;
  }
  bool start_array(std::size_t n) {
    if (++depth_ > kMaxInputDepth) return TooDeep();
    if (mode_ == Mode::kStart) {
      mode_ = Mode::kArray;
      return true;
    }
    if (mode_ == Mode::kTrace) return trace_.start_array(n);
    builder_.StartContainer(json::array());
    return true;
  }
  bool key(json::string_t& k) {
    if (mode_ == Mode::kTrace) return trace_.key(k);
    builder_.Key(k);
    return true;
  }
  bool end_object() {
    --depth_;
    if (mode_ == Mode::kTrace) return trace_.end_object();
    if (builder_.EndContainer()) return Element(builder_.Take());
    return true;
  }
  bool end_array() {
    --depth_;
    if (mode_ == Mode::kTrace) return trace_.end_array();
    if (depth_ == 0) return true;  // the root array
    if (builder_.EndContainer()) return Element(builder_.Take());
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) {
    parse_failed_ = true;
    error_position_ = position;
    std::string what = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..."
    if (auto col = what.find("column "); col != std::string::npos) {
      if (auto colon = what.find(": ", col); colon != std::string::npos) {
        what = what.substr(colon + 2);
      }
    } else if (what.rfind("[json.exception.", 0) == 0) {
      if (auto close = what.find("] "); close != std::string::npos) what = what.substr(close + 2);
    }
    // Drop nlohmann's "; last read: '...'": it echoes raw input, escaped, and the line and
    // column say where the error is.
    if (auto last = what.find("; last read: "); last != std::string::npos) what.resize(last);
    parse_message_ = what;
    return false;
  }

  // True when the parse, fed the input up to a NUL byte at `offset`, failed for no reason
  // before it: the NUL is then the input's first fault, and the error to report.
  bool FirstFaultIsNulAt(uint64_t offset) const {
    // A parse error's position counts the offending character: it is at position - 1.
    return !too_deep_ && abort_error_.empty() && (!parse_failed_ || error_position_ > offset);
  }

  // The outcome, once sax_parse returned. `name` names the input in errors ("input", a path);
  // `line_column` turns a parse error's byte position into "line L, column C".
  Result<Conversion> Finish(std::string_view name,
                            const std::function<std::string(size_t)>& line_column) {
    const std::string who(name);
    if (too_deep_) {
      return MakeError(who + ": JSON nested deeper than " + std::to_string(kMaxInputDepth) +
                       " levels");
    }
    if (!abort_error_.empty()) return MakeError(who + ": " + abort_error_);
    if (parse_failed_) {
      return MakeError(who + ": not valid JSON at " + line_column(error_position_) + ": " +
                       parse_message_);
    }
    const std::string neither =
        who +
        ": neither a replay-IR list (a JSON array of records with op_name) nor a PyTorch "
        "profiler trace (a JSON object with traceEvents)";
    switch (mode_) {
      case Mode::kStart:
      case Mode::kScalar:
        return MakeError(neither + "; got a single JSON value");
      case Mode::kTrace: {
        if (!trace_.saw_trace_events())
          return MakeError(neither + "; the object has no traceEvents list");
        TraceSummary summary = trace_.Finish();
        conv_.format = InputFormat::kTrace;
        conv_.trace_calls = summary.calls;
        for (size_t i = 0; i < summary.problems.size(); ++i) {
          const TraceProblem& p = summary.problems[i];
          RecordOutcome out;
          out.position = i + 1;
          out.op_name = p.call.op_name;
          out.priority_rank = static_cast<int64_t>(i + 1);
          out.gpu_time_us = static_cast<double>(p.gpu_time_ns) / 1000.0;
          out.count = p.count;
          json extra = json::object();
          extra["gpu_time_us"] = out.gpu_time_us;
          extra["count"] = p.count;
          if (p.call.args.empty()) {
            out.skip_reason = std::string(kNoShapesReason);
          } else {
            ConvertCall(p.call, options_, extra, &out, &conv_);
          }
          conv_.records.push_back(std::move(out));
        }
        return std::move(conv_);
      }
      case Mode::kArray:
        if (array_kind_ == ArrayKind::kUndecided && elements_ > 0) {
          return MakeError(neither + "; its " + std::to_string(elements_) + " element" +
                           (elements_ == 1 ? " has" : "s have") +
                           " neither op_name nor operation_type");
        }
        conv_.format =
            array_kind_ == ArrayKind::kConfigs ? InputFormat::kConfigs : InputFormat::kReplayIr;
        return std::move(conv_);
    }
    return MakeError(neither);
  }

 private:
  enum class Mode { kStart, kArray, kTrace, kScalar };
  enum class ArrayKind { kUndecided, kReplayIr, kConfigs };

  template <typename TraceFn>
  bool Scalar(json value, TraceFn trace_fn) {
    switch (mode_) {
      case Mode::kStart:
        mode_ = Mode::kScalar;
        return true;
      case Mode::kScalar:
        return true;
      case Mode::kTrace:
        return trace_fn();
      case Mode::kArray:
        if (depth_ == 1) return Element(std::move(value));
        builder_.Value(std::move(value));
        return true;
    }
    return true;
  }

  bool TooDeep() {
    too_deep_ = true;
    return false;
  }

  // One element of the root array, complete.
  bool Element(json element) {
    const size_t index = first_index_ + elements_++;
    if (array_kind_ == ArrayKind::kUndecided && element.is_object()) {
      if (element.contains("op_name")) {
        array_kind_ = ArrayKind::kReplayIr;
      } else if (element.contains("operation_type")) {
        if (!first_config_error_.empty()) {
          abort_error_ = first_config_error_;
          return false;
        }
        array_kind_ = ArrayKind::kConfigs;
      }
    }
    if (array_kind_ == ArrayKind::kConfigs) {
      if (Status st = AddListConfig(std::move(element), index, &conv_); !st) {
        abort_error_ = st.error();
        return false;
      }
      return true;
    }
    if (array_kind_ == ArrayKind::kUndecided && index >= kMaxUndecidedElements) {
      // A list that never shows a record is not an input; stop before its skipped elements
      // (one outcome and warning each) cost more memory than the input itself.
      abort_error_ = "the first " + std::to_string(kMaxUndecidedElements) +
                     " elements of the list are neither replay-IR records (with op_name) nor "
                     "CK configs (with operation_type)";
      return false;
    }
    if (array_kind_ == ArrayKind::kUndecided && first_config_error_.empty()) {
      auto c = ConfigFromJson(element, index);
      first_config_error_ =
          c ? "config " + std::to_string(index + 1) + ": not a config" : c.error();
    }
    ConvertIrElement(element, index);
    return true;
  }

  void ConvertIrElement(const json& element, size_t index) {
    IrRecord r = ReadIrRecord(element);
    RecordOutcome out;
    out.position = index + 1;
    out.op_name = r.call.op_name.empty() ? "(no op_name)" : r.call.op_name;
    out.priority_rank = r.priority_rank.value_or(static_cast<int64_t>(index + 1));
    if (!r.warning.empty()) conv_.warnings.push_back(RecordPrefix(out) + ": " + r.warning);
    if (!r.error.empty()) {
      out.skip_reason = r.error;
    } else {
      ConvertCall(r.call, options_, r.extra_metadata, &out, &conv_);
    }
    conv_.records.push_back(std::move(out));
  }

  const ConvertOptions& options_;
  const size_t first_index_;
  Mode mode_ = Mode::kStart;
  size_t depth_ = 0;
  bool too_deep_ = false;
  bool parse_failed_ = false;
  size_t error_position_ = 0;
  std::string parse_message_;
  std::string abort_error_;
  TraceReader trace_;
  ElementBuilder builder_;
  ArrayKind array_kind_;
  size_t elements_ = 0;
  std::string first_config_error_;
  Conversion conv_;
};

// "line L, column C" of the character at byte position `position` (nlohmann counts the
// offending character, so it sits at offset position - 1).
struct LineCounter {
  size_t line = 1, column = 1, offset = 0;
  void Feed(std::string_view chunk, size_t stop) {
    for (char ch : chunk) {
      if (offset >= stop) return;
      ++offset;
      if (ch == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
  }
  std::string Text() const {
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
  }
};

std::string LineColumnOfText(std::string_view text, size_t position) {
  LineCounter lc;
  lc.Feed(text, position == 0 ? 0 : position - 1);
  return lc.Text();
}

std::string LineColumnOfFile(const std::string& path, size_t position) {
  InputFileReader reader;
  LineCounter lc;
  const size_t stop = position == 0 ? 0 : position - 1;
  if (reader.Open(path).ok()) {
    std::vector<char> buf(1 << 16);
    std::istream& in = reader.stream();
    while (lc.offset < stop && in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      lc.Feed(std::string_view(buf.data(), static_cast<size_t>(in.gcount())), stop);
    }
  }
  return lc.Text();
}

// The characters of a few strings in a row, as one input for nlohmann's parser, uncopied.
class PiecesIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  PiecesIterator() = default;
  PiecesIterator(const std::string_view* pieces, size_t count, size_t piece)
      : pieces_(pieces), count_(count), piece_(piece) {
    Settle();
  }
  reference operator*() const { return *p_; }
  PiecesIterator& operator++() {
    if (++p_ == end_) {
      ++piece_;
      Settle();
    }
    return *this;
  }
  PiecesIterator operator++(int) {
    PiecesIterator old = *this;
    ++*this;
    return old;
  }
  bool operator==(const PiecesIterator& o) const { return piece_ == o.piece_ && p_ == o.p_; }

 private:
  // Moves to the first character of the first non-empty piece from piece_ on (or the end).
  void Settle() {
    while (piece_ < count_ && pieces_[piece_].empty()) ++piece_;
    p_ = piece_ < count_ ? pieces_[piece_].data() : nullptr;
    end_ = piece_ < count_ ? p_ + pieces_[piece_].size() : nullptr;
  }

  const std::string_view* pieces_ = nullptr;
  size_t count_ = 0, piece_ = 0;
  const char* p_ = nullptr;
  const char* end_ = nullptr;
};

}  // namespace

Status AddListConfig(json&& element, size_t index, Conversion* conv) {
  auto c = ConfigFromJson(std::move(element), index);
  if (!c) return Error{c.error()};
  RecordOutcome out;
  out.position = index + 1;
  auto op = c->metadata.find("pytorch_op");
  out.op_name = op != c->metadata.end() && op->is_string() ? op->get<std::string>()
                                                           : std::string(OperationTypeName(c->op));
  out.priority_rank = c->priority_rank();
  out.produced.push_back(c->op);
  conv->records.push_back(std::move(out));
  conv->configs.push_back(std::move(*c));
  return Status::Ok();
}

std::optional<Conversion> ConvertConfigsRun(const std::string_view* pieces, size_t count,
                                            size_t first_index,
                                            const ConvertOptions& options) noexcept {
  try {
    DocumentHandler handler(options, first_index, /*configs_only=*/true);
    (void)json::sax_parse(PiecesIterator(pieces, count, 0), PiecesIterator(pieces, count, count),
                          &handler);
    auto c = handler.Finish("input", [](size_t) { return std::string(); });
    if (c && c->format == InputFormat::kConfigs && c->warnings.empty()) return std::move(*c);
  } catch (...) {  // e.g. a bad_alloc: the one-thread reading says what went wrong
  }
  return std::nullopt;
}

namespace {

Result<Conversion> ConvertTextImpl(std::string_view text, const ConvertOptions& options,
                                   bool allow_gzip, unsigned threads) {
  if (allow_gzip && HasGzipMagic(text)) {
    if (threads > 1 && text.size() >= kPartsMinBytes / 64) {  // configs compress ~25 to 1
      if (auto inflated = InflateConfigsList(text)) {
        if (auto c = ConvertConfigsListInParts(*inflated, options, threads)) return std::move(*c);
      }
    }
    // Streamed, never inflated whole: memory follows the convolutions found, and a gzip bomb
    // stops at the cap.
    GzipMemoryReader reader(text, kMaxInflatedInputBytes);
    NulStopBuffer nul_stop(reader.stream().rdbuf());
    std::istream in(&nul_stop);
    DocumentHandler handler(options);
    (void)json::sax_parse(in, &handler);
    if (Status s = reader.status(); !s) return MakeError("input: " + s.error());
    // The parser saw the inflated text with runs of whitespace cut: positions are found again
    // in the inflated text itself.
    auto where = [&](uint64_t stream_offset) {
      const InflatedPosition p = LocateInGzipStream(text, stream_offset);
      return std::pair{"line " + std::to_string(p.line) + ", column " + std::to_string(p.column) +
                           " of the inflated input",
                       p.offset};
    };
    if (auto nul = nul_stop.nul_offset(); nul && handler.FirstFaultIsNulAt(*nul)) {
      auto [line_column, offset] = where(*nul);
      return MakeError(NulError("input", line_column, offset));
    }
    return handler.Finish("input", [&](size_t pos) { return where(pos == 0 ? 0 : pos - 1).first; });
  }
  // The parser sees the text up to its first NUL byte, which is reported unless an error
  // comes before it.
  const size_t nul = text.find('\0');
  if (nul == std::string_view::npos) {
    if (auto c = ConvertConfigsListInParts(text, options, threads)) return std::move(*c);
  }
  const std::string_view head = text.substr(0, nul);
  DocumentHandler handler(options);
  (void)json::sax_parse(head.begin(), head.end(), &handler);
  if (nul != std::string_view::npos && handler.FirstFaultIsNulAt(nul)) {
    return MakeError(NulError("input", LineColumnOfText(text, nul + 1), nul));
  }
  return handler.Finish("input", [&](size_t pos) { return LineColumnOfText(text, pos); });
}

}  // namespace

std::string_view InputFormatName(InputFormat f) {
  switch (f) {
    case InputFormat::kReplayIr:
      return "replay-IR list";
    case InputFormat::kTrace:
      return "PyTorch profiler trace";
    case InputFormat::kConfigs:
      return "CK configs file";
  }
  return "";
}

Result<Conversion> ConvertText(std::string_view text, const ConvertOptions& options,
                               unsigned threads) {
  try {
    return ConvertTextImpl(text, options, true, threads);
  } catch (const std::bad_alloc&) {
    return MakeError("input: out of memory while converting");
  } catch (const std::exception& e) {
    return MakeError(std::string("input: ") + e.what());
  }
}

Result<Conversion> ConvertFile(const std::string& path, const ConvertOptions& options) {
  try {
    InputFileReader reader;
    if (Status s = reader.Open(path); !s) return Error{s.error()};
    NulStopBuffer nul_stop(reader.stream().rdbuf());
    std::istream in(&nul_stop);
    DocumentHandler handler(options);
    (void)json::sax_parse(in, &handler);
    // A read or gzip error ends the stream early; report it rather than the parse error.
    if (Status s = reader.status(); !s) return Error{s.error()};
    if (auto nul = nul_stop.nul_offset(); nul && handler.FirstFaultIsNulAt(*nul)) {
      return MakeError(NulError(path, LineColumnOfFile(path, *nul + 1), *nul));
    }
    return handler.Finish(path, [&](size_t pos) { return LineColumnOfFile(path, pos); });
  } catch (const std::bad_alloc&) {
    return MakeError(path + ": out of memory while converting");
  } catch (const std::exception& e) {
    return MakeError(path + ": " + e.what());
  }
}

std::string FormatRecordLine(const RecordOutcome& r, size_t total, InputFormat format) {
  std::string s = r.produced.empty() ? "⚠ [" : "✓ [";
  s.append(std::to_string(r.position)).append("/").append(std::to_string(total)).append("] ");
  if (r.produced.empty()) {
    s.append("Skipped: ");
  } else {
    s.append(format == InputFormat::kConfigs ? "Loaded: " : "Converted: ");
  }
  s.append(r.op_name).append(" (rank ").append(std::to_string(r.priority_rank)).append(")");
  if (r.produced.empty()) return s.append(": ").append(r.skip_reason);
  return s.append(" → ").append(ProducedText(r.produced));
}

std::string SkipWarning(const RecordOutcome& r) {
  return RecordPrefix(r) + " skipped: " + r.skip_reason;
}

std::string FormatConversionReport(const Conversion& c, bool quiet) {
  std::string s;
  size_t fwd = 0, bwd_data = 0, bwd_weight = 0, skipped = 0;
  for (const auto& cfg : c.configs) {
    switch (cfg.op) {
      case ConvOp::kFwd:
        ++fwd;
        break;
      case ConvOp::kBwdData:
        ++bwd_data;
        break;
      case ConvOp::kBwdWeight:
        ++bwd_weight;
        break;
    }
  }
  for (const auto& r : c.records) {
    if (r.produced.empty()) ++skipped;
    if (!quiet) s += FormatRecordLine(r, c.records.size(), c.format) + "\n";
  }
  if (!quiet && !c.records.empty()) s += "\n";
  // Operations are the input's records and add up to their total; configs are what they
  // became (a backward call may give two) and add up to theirs. Numbers share one column.
  const std::string numbers[] = {std::to_string(c.records.size()),
                                 std::to_string(c.records.size() - skipped),
                                 std::to_string(skipped),
                                 std::to_string(c.configs.size()),
                                 std::to_string(fwd),
                                 std::to_string(bwd_data),
                                 std::to_string(bwd_weight)};
  size_t width = 0;
  for (const auto& n : numbers) width = std::max(width, n.size());
  const char* const labels[] = {"Total PyTorch operations:",
                                "  ✓ Converted:",
                                "  ⚠ Skipped:",
                                "Total CK profiler configs:",
                                "  ✓ Forward convolutions:",
                                "  ✓ Backward data convolutions:",
                                "  ✓ Backward weight convolutions:"};
  // Columns on a terminal: code points (each mark here is one column), not bytes.
  auto columns = [](std::string_view text) {
    return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char ch) {
      return (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
    }));
  };
  size_t label_width = 0;
  for (const char* l : labels) label_width = std::max(label_width, columns(l));
  for (size_t i = 0; i < std::size(labels); ++i) {
    s += labels[i];
    s += std::string(label_width - columns(labels[i]) + 1 + width - numbers[i].size(), ' ');
    s += numbers[i] + "\n";
  }
  return s;
}

std::string NoConfigsReason(size_t records, size_t without_shapes) {
  std::string s = "no convolution to profile";
  if (records == 1) s += " (its one record was skipped)";
  if (records > 1) s += " (all " + std::to_string(records) + " records were skipped)";
  if (without_shapes > 0) {
    s += "; the trace may have been recorded without record_shapes=True: profile with "
         "torch.profiler.profile(record_shapes=True)";
  }
  return s;
}

std::string NoConfigsReason(const Conversion& c) {
  if (!c.configs.empty()) return "";
  size_t without_shapes = 0;
  for (const auto& r : c.records) without_shapes += r.skip_reason == kNoShapesReason ? 1 : 0;
  return NoConfigsReason(c.records.size(), without_shapes);
}

}  // namespace ckprof
