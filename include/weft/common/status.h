#pragma once
// Status / StatusOr: how errors cross every weft library boundary (one choice, used everywhere).
// A Status is cheap to copy; a StatusOr<T> holds either a value or a non-OK Status.
// Thread-safety: value types, no shared state.
#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace weft {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad input: spec, file content, option value (CLI exit code 2)
  kNotFound,            // missing file, unknown preset name (CLI exit code 2)
  kFailedPrecondition,  // inconsistent combination of valid inputs (CLI exit code 2)
  kResourceExhausted,   // infeasible memory, budget exhausted without a result (CLI exit code 2)
  kDeadlineExceeded,    // a time budget ran out
  kCancelled,           // interrupted by the caller
  kInternal,            // a bug in weft (CLI exit code 1)
  kUnimplemented,       // a feature that is not available for this input
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: model.modules[0].num_layers = 0; must be > 0"
  std::string ToString() const;

  // Returns a copy whose message is "<prefix>: <message>" (used to add file names / field paths).
  Status WithPrefix(std::string_view prefix) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgumentError(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status FailedPreconditionError(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status ResourceExhaustedError(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status DeadlineExceededError(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status CancelledError(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status UnimplementedError(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }

// True for the codes that mean "the user's input is wrong" (CLI exit code 2).
bool IsUserError(const Status& status);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : data_(status) { assert(!status.ok()); }  // NOLINT
  StatusOr(Status&& status) : data_(std::move(status)) {                     // NOLINT
    assert(!std::get<Status>(data_).ok());
  }
  StatusOr(const T& value) : data_(value) {}       // NOLINT
  StatusOr(T&& value) : data_(std::move(value)) {}  // NOLINT
  template <typename U>
    requires(std::is_constructible_v<T, U&&> && !std::is_same_v<std::decay_t<U>, T> &&
             !std::is_same_v<std::decay_t<U>, Status> && !std::is_same_v<std::decay_t<U>, StatusOr>)
  StatusOr(U&& value) : data_(T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(data_); }
  Status status() const { return ok() ? OkStatus() : std::get<Status>(data_); }

  const T& value() const& { assert(ok()); return std::get<T>(data_); }
  T& value() & { assert(ok()); return std::get<T>(data_); }
  T&& value() && { assert(ok()); return std::move(std::get<T>(data_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<Status, T> data_;
};

}  // namespace weft

#define WEFT_STATUS_CONCAT_INNER(a, b) a##b
#define WEFT_STATUS_CONCAT(a, b) WEFT_STATUS_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define WEFT_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::weft::Status weft_status_tmp_ = (expr);       \
    if (!weft_status_tmp_.ok()) return weft_status_tmp_; \
  } while (0)

// `WEFT_ASSIGN_OR_RETURN(auto x, F());` declares x from a StatusOr or returns its error.
#define WEFT_ASSIGN_OR_RETURN(lhs, expr) \
  WEFT_ASSIGN_OR_RETURN_IMPL(WEFT_STATUS_CONCAT(weft_statusor_, __LINE__), lhs, expr)
#define WEFT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
