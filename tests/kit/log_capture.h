// LogCapture: collects the text of glog messages while it is alive, so that
// tests can assert the exact log lines the spec names.
#pragma once

#include <glog/logging.h>

#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mooncake::tent::testing {

class LogCapture : public google::LogSink {
 public:
    LogCapture() {
        FLAGS_minloglevel = 0;
        google::AddLogSink(this);
    }
    ~LogCapture() override { google::RemoveLogSink(this); }

    void send(google::LogSeverity severity, const char*, const char*, int,
              const google::LogMessageTime&, const char* message,
              size_t length) override {
        std::lock_guard<std::mutex> lock(mu_);
        entries_.emplace_back(severity, std::string(message, length));
    }

    // Every message, in order.
    std::vector<std::string> lines() { return select(-1, ""); }
    // Messages of exactly `severity` (e.g. google::GLOG_WARNING).
    std::vector<std::string> linesAt(google::LogSeverity severity) {
        return select(severity, "");
    }
    std::vector<std::string> linesStartingWith(const std::string& prefix) {
        return select(-1, prefix);
    }
    int count(const std::string& exact) {
        int n = 0;
        for (const auto& line : lines()) n += line == exact ? 1 : 0;
        return n;
    }
    int countContaining(const std::string& part) {
        int n = 0;
        for (const auto& line : lines()) {
            n += line.find(part) != std::string::npos ? 1 : 0;
        }
        return n;
    }

 private:
    std::vector<std::string> select(int severity, const std::string& prefix) {
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<std::string> out;
        for (const auto& [sev, text] : entries_) {
            if (severity >= 0 && sev != severity) continue;
            if (text.rfind(prefix, 0) != 0) continue;
            out.push_back(text);
        }
        return out;
    }

    std::mutex mu_;
    std::vector<std::pair<google::LogSeverity, std::string>> entries_;
};

}  // namespace mooncake::tent::testing
