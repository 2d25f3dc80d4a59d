#pragma once
// Status and StatusOr<T>: errors travel in return values, never as exceptions.
// Third-party code that throws is wrapped at the call site; the Python boundary turns a
// non-ok Status into an exception and the CLI prints "error: <message>".

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "base/check.h"

namespace trainprof {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller asked for something malformed (usage errors)
  kNotFound,            // a file, run, node or series that does not exist
  kDataLoss,            // stored or imported data is corrupt or truncated
  kFailedPrecondition,  // e.g. a store written by a newer format version
  kUnavailable,         // a resource that may come back (disk full, busy database)
  kInternal,
  kUnimplemented,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code>: <message>", for logs.
  std::string ToString() const;
  // Returns a copy whose message is prefixed with `context`: "<context>: <message>".
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    TP_CHECK(!status_.ok());
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    TP_CHECK(ok());
    return *value_;
  }
  const T& value() const& {
    TP_CHECK(ok());
    return *value_;
  }
  T&& value() && {
    TP_CHECK(ok());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace trainprof

#define TP_STATUS_CONCAT_INNER(a, b) a##b
#define TP_STATUS_CONCAT(a, b) TP_STATUS_CONCAT_INNER(a, b)

// Returns early from the enclosing function when `expr` yields a non-ok Status.
#define TP_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::trainprof::Status tp_status_ = (expr); \
    if (!tp_status_.ok()) return tp_status_; \
  } while (0)

// `TP_ASSIGN_OR_RETURN(auto x, MaybeX());` declares x from an ok StatusOr or returns its status.
#define TP_ASSIGN_OR_RETURN(lhs, expr) \
  TP_ASSIGN_OR_RETURN_IMPL(TP_STATUS_CONCAT(tp_statusor_, __LINE__), lhs, expr)
#define TP_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
