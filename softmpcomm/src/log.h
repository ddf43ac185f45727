// Minimal stderr logging gated by MPCOMM_LOG_LEVEL, so the library stays
// free of dependencies that the real libmpcomm does not impose on consumers.
#pragma once

#include <sstream>
#include <string>

namespace mpcomm {
namespace detail {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// Reads MPCOMM_LOG_LEVEL once (error / warn / info / debug, default info).
LogLevel currentLogLevel();
bool logEnabled(LogLevel level);
void emitLog(LogLevel level, const std::string& message);

class LogLine {
 public:
    explicit LogLine(LogLevel level) : level_(level) {}
    ~LogLine() { emitLog(level_, stream_.str()); }
    std::ostringstream& stream() { return stream_; }

 private:
    LogLevel level_;
    std::ostringstream stream_;
};

}  // namespace detail
}  // namespace mpcomm

// A one-shot for-loop rather than if/else, so the macro nests safely under
// an unbraced if without a dangling-else.
#define MPCOMM_LOG(level)                                                     \
    for (bool mpcomm_log_once_ =                                              \
             ::mpcomm::detail::logEnabled(::mpcomm::detail::LogLevel::level); \
         mpcomm_log_once_; mpcomm_log_once_ = false)                          \
    ::mpcomm::detail::LogLine(::mpcomm::detail::LogLevel::level).stream()
