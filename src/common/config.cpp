#include "tent/common/config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <type_traits>

#include "common/json_util.h"

namespace mooncake::tent {

namespace {

// "a//b/" and "/a/b" address the same key as "a/b": empty components are
// skipped so that callers composing paths need not care about separators.
std::vector<std::string> splitPath(const std::string& path) {
    std::vector<std::string> parts;
    std::string current;
    for (char c : path) {
        if (c == '/') {
            if (!current.empty()) parts.push_back(std::move(current));
            current.clear();
        } else {
            current.push_back(c);
        }
    }
    if (!current.empty()) parts.push_back(std::move(current));
    return parts;
}

const char* jsonTypeName(const Json::Value& v) {
    switch (v.type()) {
        case Json::nullValue:
            return "null";
        case Json::intValue:
        case Json::uintValue:
            return "integer";
        case Json::realValue:
            return "number";
        case Json::stringValue:
            return "string";
        case Json::booleanValue:
            return "boolean";
        case Json::arrayValue:
            return "array";
        case Json::objectValue:
            return "object";
    }
    return "unknown";
}

Status parseObject(const std::string& text, const std::string& source,
                   Json::Value& out) {
    std::string errs;
    Json::Value parsed;
    if (!parseJsonText(text, false, parsed, errs)) {
        return Status::MalformedJson("invalid JSON in " + source + ": " +
                                     foldJsonErrors(errs));
    }
    if (!parsed.isObject()) {
        return Status::MalformedJson("configuration in " + source +
                                     " must be a JSON object, got " +
                                     jsonTypeName(parsed));
    }
    out = std::move(parsed);
    return Status::OK();
}

Status readFile(const std::string& path, std::string& text) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return Status::InvalidArgument("cannot open configuration file " +
                                       path + ": " + std::strerror(errno));
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) {
        return Status::InvalidArgument("cannot read configuration file " +
                                       path);
    }
    text = ss.str();
    return Status::OK();
}

// An integer as the JSON text wrote it: 3.0 is a real, not an int, and
// reads as absent for the integer getters (jsoncpp's isInt() accepts it).
bool isInteger(const Json::Value* v) {
    return v && (v->type() == Json::intValue || v->type() == Json::uintValue);
}

}  // namespace

Config::Config(const Config& other) {
    std::shared_lock<std::shared_mutex> lock(other.mu_);
    root_ = other.root_;
}

Config& Config::operator=(const Config& other) {
    if (this == &other) return *this;
    Json::Value copy;
    {
        std::shared_lock<std::shared_mutex> lock(other.mu_);
        copy = other.root_;
    }
    std::unique_lock<std::shared_mutex> lock(mu_);
    root_ = std::move(copy);
    return *this;
}

Status Config::loadText(const std::string& json_text,
                        const std::string& source) {
    Json::Value parsed;
    CHECK_STATUS(parseObject(json_text, source, parsed));
    std::unique_lock<std::shared_mutex> lock(mu_);
    root_ = std::move(parsed);
    return Status::OK();
}

Status Config::loadFile(const std::string& path) {
    std::string text;
    CHECK_STATUS(readFile(path, text));
    return loadText(text, path);
}

const std::vector<std::string>& Config::identityKeys() {
    static const std::vector<std::string> keys = {
        "metadata_type", "metadata_servers", "local_segment_name",
        "rpc_server_hostname", "rpc_server_port"};
    return keys;
}

Status Config::applyEnvOverride() {
    const char* env = std::getenv("MC_TENT_CONF");
    if (!env || !*env) return Status::OK();
    std::string value(env);
    size_t first = value.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return Status::OK();

    Json::Value parsed;
    if (value[first] == '{') {
        CHECK_STATUS(parseObject(value, "MC_TENT_CONF", parsed));
    } else {
        std::string text;
        Status s = readFile(value, text);
        if (!s.ok()) {
            return Status(s.code(),
                          "MC_TENT_CONF: " + std::string(s.message()));
        }
        CHECK_STATUS(parseObject(text, "MC_TENT_CONF file " + value, parsed));
    }

    std::unique_lock<std::shared_mutex> lock(mu_);
    for (const std::string& key : identityKeys()) {
        if (!parsed.isMember(key) && root_.isMember(key)) {
            parsed[key] = root_[key];
        }
    }
    root_ = std::move(parsed);
    return Status::OK();
}

const Json::Value* Config::find(const std::string& path) const {
    const Json::Value* node = &root_;
    for (const std::string& part : splitPath(path)) {
        if (!node->isObject()) return nullptr;
        node = node->find(part.data(), part.data() + part.size());
        if (!node) return nullptr;
    }
    return node;
}

Json::Value Config::getValue(const std::string& path) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    const Json::Value* v = find(path);
    return v ? *v : Json::Value();
}

bool Config::contains(const std::string& path) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return find(path) != nullptr;
}

void Config::set(const std::string& path, const Json::Value& value) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    std::vector<std::string> parts = splitPath(path);
    if (parts.empty()) {
        // Only an object may become the root: get() paths assume one.
        if (value.isObject()) root_ = value;
        return;
    }
    Json::Value* node = &root_;
    for (const std::string& part : parts) {
        // A scalar in the way of a deeper key is replaced by an object,
        // as the caller's intent is clearly the nested key.
        if (!node->isObject()) *node = Json::Value(Json::objectValue);
        node = &(*node)[part];
    }
    *node = value;
}

std::string Config::dump() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    Json::StreamWriterBuilder builder;
    builder["indentation"] = "  ";
    return Json::writeString(builder, root_);
}

namespace {

// get<T>'s one rule: the value at the path when JSON holds a T there as
// written, else nothing (and the caller's default).
template <typename T>
std::optional<T> readAs(const Json::Value* v) {
    if (!v) return std::nullopt;
    if constexpr (std::is_same_v<T, bool>) {
        if (v->isBool()) return v->asBool();
    } else if constexpr (std::is_same_v<T, std::string>) {
        if (v->isString()) return v->asString();
    } else if constexpr (std::is_same_v<T, double>) {
        if (v->isNumeric()) return v->asDouble();
    } else if constexpr (std::is_same_v<T, int>) {
        if (isInteger(v) && v->isInt()) return v->asInt();
    } else if constexpr (std::is_same_v<T, int64_t>) {
        if (isInteger(v) && v->isInt64()) return v->asInt64();
    } else {
        static_assert(std::is_same_v<T, uint64_t>, "no get<T> for this T");
        if (isInteger(v) && v->isUInt64()) return v->asUInt64();
    }
    return std::nullopt;
}

}  // namespace

template <typename T>
T Config::get(const std::string& path, const T& default_value) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return readAs<T>(find(path)).value_or(default_value);
}

template bool Config::get<bool>(const std::string&, const bool&) const;
template int Config::get<int>(const std::string&, const int&) const;
template int64_t Config::get<int64_t>(const std::string&, const int64_t&) const;
template uint64_t Config::get<uint64_t>(const std::string&,
                                        const uint64_t&) const;
template double Config::get<double>(const std::string&, const double&) const;
template std::string Config::get<std::string>(const std::string&,
                                              const std::string&) const;

}  // namespace mooncake::tent
