#include "common/replay_ir.h"

#include <cmath>
#include <limits>

namespace ckprof {
namespace {

using json = nlohmann::ordered_json;

std::string Render(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::optional<int64_t> AsInt(const json& v) {
  if (v.is_number_unsigned()) {
    auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

std::optional<std::vector<int64_t>> AsIntList(const json& v) {
  if (!v.is_array()) return std::nullopt;
  std::vector<int64_t> out;
  out.reserve(v.size());
  for (const auto& e : v) {
    auto i = AsInt(e);
    if (!i) return std::nullopt;
    out.push_back(*i);
  }
  return out;
}

// Adds the arguments of one list (list_pos_args or list_kwargs). Returns an error or "".
std::string AddArgs(const json& list, std::string_view where, ConvCall* call) {
  if (list.is_object()) {  // {"name": value, ...}
    for (auto it = list.begin(); it != list.end(); ++it) {
      call->args.emplace_back(it.key(), ArgFromIrValue(it.value()));
    }
    return "";
  }
  if (!list.is_array()) return "replay_ir." + std::string(where) + " must be a list";
  for (size_t i = 0; i < list.size(); ++i) {
    const json& a = list[i];
    const std::string at = "replay_ir." + std::string(where) + "[" + std::to_string(i) + "]";
    if (!a.is_object()) return at + " must be an object";
    auto name = a.find("arg_name");
    if (name == a.end() || !name->is_string()) return at + " has no arg_name";
    auto value = a.find("value");
    call->args.emplace_back(name->get<std::string>(),
                            value == a.end() ? ArgValue::None() : ArgFromIrValue(*value));
  }
  return "";
}

}  // namespace

ArgValue ArgFromIrValue(const json& v) {
  if (v.is_null()) return ArgValue::None();
  if (v.is_boolean()) return ArgValue::Bool(v.get<bool>());
  if (auto i = AsInt(v)) return ArgValue::Int(*i);
  if (v.is_string()) return ArgValue::String(v.get<std::string>());
  if (v.is_array()) {
    if (auto ints = AsIntList(v)) return ArgValue::IntList(std::move(*ints));
    std::vector<bool> bools;
    for (const auto& e : v) {
      if (!e.is_boolean()) return ArgValue::Other(Render(v));
      bools.push_back(e.get<bool>());
    }
    return ArgValue::BoolList(std::move(bools));
  }
  if (v.is_object()) {
    auto shape = v.find("shape");
    if (shape == v.end()) return ArgValue::Other(Render(v));
    auto dims = AsIntList(*shape);
    if (!dims) return ArgValue::Other(Render(v));
    std::vector<int64_t> strides;
    if (auto s = v.find("strides"); s != v.end()) {
      if (auto st = AsIntList(*s); st) strides = std::move(*st);
    }
    std::string dtype;
    if (auto d = v.find("dtype"); d != v.end() && d->is_string()) dtype = d->get<std::string>();
    return ArgValue::Tensor(std::move(*dims), std::move(strides), std::move(dtype));
  }
  return ArgValue::Other(Render(v));
}

IrRecord ReadIrRecord(const json& record) {
  IrRecord r;
  if (!record.is_object()) {
    r.error =
        std::string("not a replay-IR record (a JSON ") + record.type_name() + ", not an object)";
    return r;
  }
  if (auto md = record.find("metadata"); md != record.end() && md->is_object()) {
    if (auto pr = md->find("priority_rank"); pr != md->end()) {
      if (auto i = AsInt(*pr)) {
        r.priority_rank = *i;
      } else if (pr->is_number_float() && std::isfinite(pr->get<double>()) &&
                 pr->get<double>() == std::floor(pr->get<double>()) &&
                 std::fabs(pr->get<double>()) < 1e15) {
        r.priority_rank = static_cast<int64_t>(pr->get<double>());
      } else {
        r.warning = "metadata.priority_rank is not an integer (" + Render(*pr) +
                    "); using the record's position";
      }
    }
    for (const char* key : {"gpu_time_us", "count"}) {
      if (auto it = md->find(key); it != md->end() && it->is_number()) {
        r.extra_metadata[key] = *it;
      }
    }
  }
  auto op = record.find("op_name");
  if (op == record.end()) {
    r.error = "missing op_name";
    return r;
  }
  if (!op->is_string()) {
    r.error = "op_name must be a string, got " + Render(*op);
    return r;
  }
  r.call.op_name = op->get<std::string>();
  if (!IsConvOpName(r.call.op_name)) {
    r.error = "not a convolution";
    return r;
  }
  auto ir = record.find("replay_ir");
  if (ir == record.end() || !ir->is_object()) {
    r.error = ir == record.end() ? "missing replay_ir" : "replay_ir must be an object";
    return r;
  }
  auto pos = ir->find("list_pos_args");
  if (pos == ir->end()) {
    r.error = "missing replay_ir.list_pos_args";
    return r;
  }
  if (std::string e = AddArgs(*pos, "list_pos_args", &r.call); !e.empty()) {
    r.error = e;
    return r;
  }
  if (auto kw = ir->find("list_kwargs"); kw != ir->end() && !kw->is_null()) {
    if (std::string e = AddArgs(*kw, "list_kwargs", &r.call); !e.empty()) {
      r.error = e;
      return r;
    }
  }
  return r;
}

}  // namespace ckprof
