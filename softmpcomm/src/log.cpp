#include "log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mpcomm {
namespace detail {

namespace {

LogLevel parseLevel() {
    const char* value = std::getenv("MPCOMM_LOG_LEVEL");
    if (value == nullptr || *value == '\0') return LogLevel::kInfo;
    if (std::strcmp(value, "error") == 0) return LogLevel::kError;
    if (std::strcmp(value, "warn") == 0) return LogLevel::kWarn;
    if (std::strcmp(value, "info") == 0) return LogLevel::kInfo;
    if (std::strcmp(value, "debug") == 0) return LogLevel::kDebug;
    std::fprintf(stderr,
                 "[mpcomm] W invalid MPCOMM_LOG_LEVEL '%s' (expected error, "
                 "warn, info or debug); using info\n",
                 value);
    return LogLevel::kInfo;
}

const char* levelTag(LogLevel level) {
    switch (level) {
        case LogLevel::kError:
            return "E";
        case LogLevel::kWarn:
            return "W";
        case LogLevel::kInfo:
            return "I";
        case LogLevel::kDebug:
            return "D";
    }
    return "?";
}

}  // namespace

LogLevel currentLogLevel() {
    // A function-local static is initialised once even under concurrent
    // first use, so the environment is read exactly once per process.
    static const LogLevel level = parseLevel();
    return level;
}

bool logEnabled(LogLevel level) {
    return static_cast<int>(level) <= static_cast<int>(currentLogLevel());
}

void emitLog(LogLevel level, const std::string& message) {
    // One fprintf per line keeps lines from different threads whole.
    std::fprintf(stderr, "[mpcomm] %s %s\n", levelTag(level), message.c_str());
}

}  // namespace detail
}  // namespace mpcomm
