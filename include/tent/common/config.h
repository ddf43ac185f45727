// Config: the engine's JSON configuration, addressed by slash paths.
//
//   conf->get("transports/mpcomm/enable", true)
//   conf->set("transports/tcp/enable", false)
//
// Thread-safe: readers take a shared lock, writers an exclusive one.
#pragma once

#include <json/json.h>

#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "tent/common/status.h"

namespace mooncake::tent {

class Config {
 public:
    Config() = default;
    Config(const Config& other);
    Config& operator=(const Config& other);

    // Replaces the whole configuration with `json_text` (an object).
    // `source` names where it came from for error messages.
    Status loadText(const std::string& json_text,
                    const std::string& source = "<string>");
    // Reads a JSON file; the error names the path.
    Status loadFile(const std::string& path);
    // MC_TENT_CONF, when set, is JSON text (starts with '{') or a file path.
    // It replaces the configuration wholesale except the metadata identity
    // keys (kIdentityKeys), which keep their current values unless the
    // override sets them. Invalid JSON is an error naming MC_TENT_CONF.
    Status applyEnvOverride();

    static const std::vector<std::string>& identityKeys();

    template <typename T>
    T get(const std::string& path, const T& default_value) const;
    // get("a/b", "x") with a string literal default.
    // Defined below the extern template declarations, so that calling
    // get<std::string> here does not ask for an implicit instantiation.
    std::string get(const std::string& path, const char* default_value) const;
    Json::Value getValue(const std::string& path) const;
    bool contains(const std::string& path) const;

    void set(const std::string& path, const Json::Value& value);
    template <typename T>
    void set(const std::string& path, const T& value) {
        set(path, Json::Value(value));
    }

    std::string dump() const;

 private:
    const Json::Value* find(const std::string& path) const;

    mutable std::shared_mutex mu_;
    Json::Value root_{Json::objectValue};
};

// Defined in config.cpp for bool, int, int64_t, uint64_t, double and
// std::string. A present value of the wrong type yields the default.
extern template bool Config::get<bool>(const std::string&, const bool&) const;
extern template int Config::get<int>(const std::string&, const int&) const;
extern template int64_t Config::get<int64_t>(const std::string&,
                                             const int64_t&) const;
extern template uint64_t Config::get<uint64_t>(const std::string&,
                                               const uint64_t&) const;
extern template double Config::get<double>(const std::string&,
                                           const double&) const;
extern template std::string Config::get<std::string>(const std::string&,
                                                     const std::string&) const;

inline std::string Config::get(const std::string& path,
                               const char* default_value) const {
    return get<std::string>(path, std::string(default_value));
}

}  // namespace mooncake::tent
