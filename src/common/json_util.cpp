#include "common/json_util.h"

#include <atomic>
#include <exception>
#include <memory>
#include <sstream>

namespace mooncake::tent {

namespace {

std::atomic<int> g_max_json_depth{kDefaultMaxJsonDepth};
std::atomic<size_t> g_max_json_values{kDefaultMaxJsonValues};

}  // namespace

std::string toCompactJson(const Json::Value& value) {
    Json::StreamWriterBuilder builder;
    builder["indentation"] = "";
    return Json::writeString(builder, value);
}

std::string foldJsonErrors(const std::string& errors) {
    std::istringstream in(errors);
    std::string line, out;
    while (std::getline(in, line)) {
        size_t begin = line.find_first_not_of(" \t\r");
        if (begin == std::string::npos) continue;
        size_t end = line.find_last_not_of(" \t\r");
        std::string text = line.substr(begin, end - begin + 1);
        if (text.rfind("* ", 0) == 0) {
            if (!out.empty()) out += "; ";
            out += text.substr(2);
        } else {
            if (!out.empty()) out += ": ";
            out += text;
        }
    }
    return out;
}

void setMaxJsonDepth(int depth) {
    if (depth < 1) depth = 1;
    if (depth > kMaxJsonDepthCeiling) depth = kMaxJsonDepthCeiling;
    g_max_json_depth.store(depth, std::memory_order_relaxed);
}

int maxJsonDepth() { return g_max_json_depth.load(std::memory_order_relaxed); }

void setMaxJsonValues(size_t values) {
    g_max_json_values.store(values < 1 ? 1 : values, std::memory_order_relaxed);
}

size_t maxJsonValues() {
    return g_max_json_values.load(std::memory_order_relaxed);
}

JsonShape scanJsonShape(const std::string& text) {
    JsonShape shape;
    int depth = 0;
    size_t separators = 0;
    const size_t n = text.size();
    for (size_t i = 0; i < n; ++i) {
        const char c = text[i];
        if (c == '"') {
            // Skip the string; a backslash escapes the next byte.
            for (++i; i < n && text[i] != '"'; ++i) {
                if (text[i] == '\\') ++i;
            }
        } else if (c == '/' && i + 1 < n && text[i + 1] == '/') {
            while (i < n && text[i] != '\n') ++i;
        } else if (c == '/' && i + 1 < n && text[i + 1] == '*') {
            size_t end = text.find("*/", i + 2);
            i = end == std::string::npos ? n : end + 1;
        } else if (c == '[' || c == '{') {
            ++separators;
            if (++depth > shape.depth) shape.depth = depth;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        } else if (c == ',') {
            ++separators;
        }
    }
    // Every value but the first follows a comma or opens a container.
    shape.values = separators + 1;
    return shape;
}

bool parseJsonText(const std::string& text, bool fail_if_extra,
                   Json::Value& out, std::string& errs) {
    // On failure `out` is null, never the part jsoncpp got through.
    out = Json::Value();
    const int limit = maxJsonDepth();
    const size_t max_values = maxJsonValues();
    // One linear pass, counting the whole text so that the message names
    // the value seen.
    const JsonShape shape = scanJsonShape(text);
    if (shape.depth > limit) {
        errs = "JSON nesting depth " + std::to_string(shape.depth) +
               " exceeds rpc/max_json_depth=" + std::to_string(limit);
        return false;
    }
    if (shape.values > max_values) {
        errs =
            "JSON text holds " + std::to_string(shape.values) +
            " values, above rpc/max_json_values=" + std::to_string(max_values);
        return false;
    }
    try {
        Json::CharReaderBuilder builder;
        if (fail_if_extra) builder["failIfExtra"] = true;
        builder["collectComments"] = false;
        // A second guard should the scan and jsoncpp ever count apart.
        builder["stackLimit"] = limit + 1;
        std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
        if (reader->parse(text.data(), text.data() + text.size(), &out,
                          &errs)) {
            return true;
        }
    } catch (const std::exception& e) {
        // Json::Exception derives from std::exception.
        errs = std::string("JSON parser gave up: ") + e.what();
    } catch (...) {
        errs = "JSON parser gave up";
    }
    out = Json::Value();
    return false;
}

std::string jsonStringOr(const Json::Value& v, const std::string& fallback) {
    return v.isString() ? v.asString() : fallback;
}

int64_t jsonInt64Or(const Json::Value& v, int64_t fallback) {
    return v.isIntegral() && !v.isBool() && v.isInt64() ? v.asInt64()
                                                        : fallback;
}

bool jsonBoolOr(const Json::Value& v, bool fallback) {
    return v.isBool() ? v.asBool() : fallback;
}

}  // namespace mooncake::tent
