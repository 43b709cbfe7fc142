// Reading one record of a TraceLens replay-IR list (conv_repros_ir.json, docs: shared
// conversion.md): the operator name, its arguments by name (list_pos_args and list_kwargs
// together) and the metadata conversion keeps.
//
// Pure functions; any thread may call them.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/conv_call.h"

namespace ckprof {

// One IR record as conversion sees it.
struct IrRecord {
  ConvCall call;                         // op_name ("" when missing) and the arguments
  std::optional<int64_t> priority_rank;  // metadata.priority_rank when it is an integer
  nlohmann::ordered_json extra_metadata = nlohmann::ordered_json::object();  // gpu_time_us, count
  std::string error;    // why the record cannot be used; empty when fine
  std::string warning;  // e.g. a priority_rank that is not an integer
};

// Reads a record. Never throws: a malformed record comes back with `error` set. A record whose
// op is not a convolution is not read further (its arguments may be of any shape).
IrRecord ReadIrRecord(const nlohmann::ordered_json& record);

// An IR argument value: null -> kNone; {"shape": [...], "strides": [...], "dtype": ...} ->
// kTensor; integer, bool, string, list of integers or of bools as such; anything else kOther.
ArgValue ArgFromIrValue(const nlohmann::ordered_json& value);

}  // namespace ckprof
