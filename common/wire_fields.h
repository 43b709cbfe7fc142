// Field lists for the wire structs: each struct of the protocol names its fields once, in a
// `VisitFields(S& s, V& v)` overload (S is the struct, const or not), and that one list both
// writes it (to a DOM with ToDom, or straight into text with AppendObject) and reads it back
// (FromDom). A visitor V offers:
//   v(key, field)                     a field, always written
//   v.Nullable(key, field, present)   written as null when !present; null reads as the default
//   v.Omittable(key, field, present)  written only when present
//   v.Derived(key, value)             written only (computed from other fields)
// Fields may be integers, doubles, bools, strings, std::vector<int>/<std::string>, enums with
// EnumName/ParseEnum overloads (common/states.h), ordered_json, and other structs with a
// VisitFields (alone, in a vector or in an optional).
//
// Reading is tolerant, for JSON the daemon produced: a missing, null or ill-typed field keeps
// its default (the client trusts the shape, not the values). Plain functions; any thread.
#pragma once

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/json_util.h"
#include "common/result.h"

namespace ckprof {
namespace wire {

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};
template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

class DomWriter;
// True for the structs that have a field list.
template <typename T>
concept HasFields = requires(const T& x, DomWriter& w) {
  VisitFields(x, w);
};

// A vector of structs with field lists.
template <typename T>
struct IsFieldVector : std::false_type {};
template <typename T>
struct IsFieldVector<std::vector<T>> : std::bool_constant<HasFields<T>> {};

// A JSON value of `v` (DOM).
template <typename T>
nlohmann::json ToValue(const T& v);

class DomWriter {
 public:
  explicit DomWriter(nlohmann::json& out) : out_(out) {}
  template <typename T>
  void operator()(const char* key, const T& v) {
    out_[key] = ToValue(v);
  }
  template <typename T>
  void Nullable(const char* key, const T& v, bool present) {
    out_[key] = present ? ToValue(v) : nlohmann::json(nullptr);
  }
  template <typename T>
  void Omittable(const char* key, const T& v, bool present) {
    if (present) out_[key] = ToValue(v);
  }
  template <typename T>
  void Derived(const char* key, const T& v) {
    out_[key] = ToValue(v);
  }

 private:
  nlohmann::json& out_;
};

template <typename T>
nlohmann::json ToValue(const T& v) {
  using U = std::decay_t<T>;
  if constexpr (std::is_same_v<U, nlohmann::ordered_json>) {
    return nlohmann::json::parse(v.dump());
  } else if constexpr (std::is_floating_point_v<U>) {
    // Non-finite numbers are written as null, as DumpJson writes them.
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  } else if constexpr (std::is_enum_v<U>) {
    return nlohmann::json(std::string(EnumName(v)));
  } else if constexpr (IsOptional<U>::value) {
    return v ? ToValue(*v) : nlohmann::json(nullptr);
  } else if constexpr (HasFields<U>) {
    nlohmann::json j = nlohmann::json::object();
    DomWriter w(j);
    VisitFields(v, w);
    return j;
  } else if constexpr (IsFieldVector<U>::value) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : v) a.push_back(ToValue(e));
    return a;
  } else {
    return nlohmann::json(v);
  }
}

class StreamWriter;
template <typename T>
void AppendValue(std::string& out, const T& v);

// Writes the fields straight into text (the daemon's per-task events, results).
class StreamWriter {
 public:
  explicit StreamWriter(JsonObjectWriter& w) : w_(w) {}
  template <typename T>
  void operator()(const char* key, const T& v) {
    Write(key, v);
  }
  template <typename T>
  void Nullable(const char* key, const T& v, bool present) {
    if (present) {
      Write(key, v);
    } else {
      w_.Field(key, nullptr);
    }
  }
  template <typename T>
  void Omittable(const char* key, const T& v, bool present) {
    if (present) Write(key, v);
  }
  template <typename T>
  void Derived(const char* key, const T& v) {
    Write(key, v);
  }

 private:
  template <typename T>
  void Write(const char* key, const T& v) {
    using U = std::decay_t<T>;
    if constexpr (std::is_same_v<U, nlohmann::ordered_json>) {
      w_.RawField(key, DumpJson(v));
    } else if constexpr (std::is_enum_v<U>) {
      w_.Field(key, EnumName(v));
    } else if constexpr (HasFields<U> || IsOptional<U>::value || IsVector<U>::value) {
      if constexpr (std::is_same_v<U, std::vector<int>>) {
        w_.Field(key, v);
      } else {
        AppendValue(w_.Key(key), v);
      }
    } else {
      w_.Field(key, v);
    }
  }
  JsonObjectWriter& w_;
};

template <typename T>
void AppendValue(std::string& out, const T& v) {
  using U = std::decay_t<T>;
  if constexpr (IsOptional<U>::value) {
    if (v) {
      AppendValue(out, *v);
    } else {
      out += "null";
    }
  } else if constexpr (HasFields<U>) {
    JsonObjectWriter w(out);
    StreamWriter sw(w);
    VisitFields(v, sw);
  } else if constexpr (IsFieldVector<U>::value) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      AppendValue(out, v[i]);
    }
    out += ']';
  } else {
    out += DumpJson(ToValue(v));
  }
}

// True when a JSON number converts to the integer type T without undefined behaviour: nlohmann
// casts a float such as 1e300 with static_cast, which is UB outside T's range.
template <typename T>
bool FitsInteger(const nlohmann::json& v) {
  if (!v.is_number()) return false;
  if (!v.is_number_float()) {
    if (v.is_number_unsigned()) {
      return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
    }
    const int64_t i = v.get<int64_t>();
    if constexpr (std::is_signed_v<T>) {
      return i >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
             i <= static_cast<int64_t>(std::numeric_limits<T>::max());
    } else {
      return i >= 0 && static_cast<uint64_t>(i) <= std::numeric_limits<T>::max();
    }
  }
  const double d = v.get<double>();
  const double limit = std::ldexp(1.0, std::numeric_limits<T>::digits);  // 2^31, 2^63, 2^32...
  return std::isfinite(d) && d > (std::is_signed_v<T> ? -limit - 1 : -1.0) && d < limit;
}

// Reads `j` into `out` when it has the right type; leaves `out` as it was otherwise.
template <typename T>
void ReadValue(const nlohmann::json& j, T* out);

class DomReader {
 public:
  explicit DomReader(const nlohmann::json& in) : in_(in) {}
  template <typename T>
  void operator()(const char* key, T& v) {
    Read(key, v);
  }
  template <typename T>
  void Nullable(const char* key, T& v, bool) {
    Read(key, v);
  }
  template <typename T>
  void Omittable(const char* key, T& v, bool) {
    Read(key, v);
  }
  template <typename T>
  void Derived(const char*, const T&) {}

 private:
  template <typename T>
  void Read(const char* key, T& v) {
    auto it = in_.find(key);
    if (it != in_.end() && !it->is_null()) ReadValue(*it, &v);
  }
  const nlohmann::json& in_;
};

template <typename T>
void ReadValue(const nlohmann::json& j, T* out) {
  using U = std::decay_t<T>;
  if constexpr (std::is_same_v<U, bool>) {
    if (j.is_boolean()) *out = j.get<bool>();
  } else if constexpr (std::is_integral_v<U>) {
    if (FitsInteger<U>(j)) *out = j.get<U>();
  } else if constexpr (std::is_floating_point_v<U>) {
    if (j.is_number()) *out = j.get<U>();
  } else if constexpr (std::is_same_v<U, std::string>) {
    if (j.is_string()) *out = j.get<std::string>();
  } else if constexpr (std::is_same_v<U, nlohmann::ordered_json>) {
    if (j.is_object()) *out = nlohmann::ordered_json::parse(j.dump());
  } else if constexpr (std::is_enum_v<U>) {
    if (j.is_string()) ParseEnum(j.get_ref<const std::string&>(), out);
  } else if constexpr (IsOptional<U>::value) {
    if (j.is_null()) return;
    typename U::value_type v{};
    ReadValue(j, &v);
    *out = std::move(v);
  } else if constexpr (HasFields<U>) {
    if (!j.is_object()) return;
    DomReader r(j);
    VisitFields(*out, r);
  } else if constexpr (IsVector<U>::value) {
    if (!j.is_array()) return;
    U v;
    for (const auto& e : j) {
      typename U::value_type x{};
      // A list of numbers or strings is taken whole or not at all.
      using E = typename U::value_type;
      if constexpr (std::is_same_v<E, std::string>) {
        if (!e.is_string()) return;
      } else if constexpr (std::is_integral_v<E>) {
        if (!FitsInteger<E>(e)) return;
      } else if constexpr (std::is_floating_point_v<E>) {
        if (!e.is_number()) return;
      }
      ReadValue(e, &x);
      v.push_back(std::move(x));
    }
    *out = std::move(v);
  } else {
    static_assert(sizeof(U) == 0, "no wire reading for this type");
  }
}

}  // namespace wire

// The DOM of a struct with a field list.
template <typename T>
requires wire::HasFields<T> nlohmann::json ToDom(const T& x) { return wire::ToValue(x); }

// Appends the struct as one JSON object, without a DOM.
template <typename T>
requires wire::HasFields<T>
void AppendObject(std::string& out, const T& x) { wire::AppendValue(out, x); }

// Reads a struct from a JSON object (tolerant: see above); an error only when it is not one.
template <typename T>
requires wire::HasFields<T> Result<T> FromDom(const nlohmann::json& j, std::string_view what) {
  if (!j.is_object()) return MakeError(std::string(what) + " must be an object");
  T x{};
  wire::ReadValue(j, &x);
  return x;
}

}  // namespace ckprof
