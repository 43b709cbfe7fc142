// A Result<T> holds either a value or an error message naming what went wrong.
//
// Core logic returns Result instead of throwing (style.md: LevelDB's Status). The error text
// is meant for users: it names the record, field or file at fault and, where there is one,
// the fix. Result is a plain value type; any thread may use its own copies.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace ckprof {

// An error message, wrapped so that Result<std::string> stays unambiguous.
struct Error {
  std::string message;
};

inline Error MakeError(std::string message) { return Error{std::move(message)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const std::string& error() const { return std::get<1>(v_).message; }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an error message.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error.message)), ok_(false) {}  // NOLINT
  static Status Ok() { return Status(); }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
  bool ok_ = true;
};

}  // namespace ckprof
