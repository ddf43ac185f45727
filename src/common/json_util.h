// Small jsoncpp helpers shared by the config loader, segment descriptors and
// the RPC frames (private to libtent).
#pragma once

#include <json/json.h>

#include <cstdint>
#include <string>

namespace mooncake::tent {

// One-line JSON without indentation, as logged and sent on the wire.
std::string toCompactJson(const Json::Value& value);

// jsoncpp reports errors as "* Line 1, Column 2\n  Missing '}'...\n" blocks;
// this folds them into one line ("Line 1, Column 2: Missing '}' ...") so a
// Status message or a log line stays single-line.
std::string foldJsonErrors(const std::string& errors);

// rpc/max_json_depth: how many arrays and objects may be open at once in
// any JSON text parsed from outside (RPC frames, peer replies, store
// values, configuration files). jsoncpp recurses once per level and throws
// past its own stack limit; the limit is checked before it runs.
inline constexpr int kDefaultMaxJsonDepth = 64;
// The highest accepted setting: jsoncpp's own recursion limit.
inline constexpr int kMaxJsonDepthCeiling = 1000;

// rpc/max_json_values: how many values (scalars, arrays and objects) one
// JSON text may hold. jsoncpp spends about a hundred bytes per value, so
// this bounds the memory a parse can take whatever the text's size limit.
// 2^20 is over ten times what a descriptor of 65,536 buffers needs.
inline constexpr size_t kDefaultMaxJsonValues = size_t(1) << 20;

// The limits are process-wide (every parse goes through parseJsonText,
// most with no Config at hand); an engine sets them from its
// configuration when its control plane is configured.
void setMaxJsonDepth(int depth);
int maxJsonDepth();
void setMaxJsonValues(size_t values);
size_t maxJsonValues();

// What parseJsonText checks before jsoncpp runs: the deepest nesting of
// arrays and objects and the number of values, outside strings and
// comments. One linear pass, no allocation; a malformed text gives some
// count, and jsoncpp then reports what is wrong with it.
struct JsonShape {
    int depth = 0;
    size_t values = 0;
};
JsonShape scanJsonShape(const std::string& text);

// Parses `text` (comments dropped; with `fail_if_extra`, text after the
// value is an error). False with jsoncpp's raw errors in `errs`; the caller
// words the Status, since each caller names its own source. Text nested
// deeper than maxJsonDepth() or with more than maxJsonValues() values is
// refused before parsing, errs naming the limit and the value seen; no
// exception leaves this function, and on failure `out` is null.
bool parseJsonText(const std::string& text, bool fail_if_extra,
                   Json::Value& out, std::string& errs);

// Accessors for values from outside that never throw (jsoncpp's asString()
// throws on an object, asInt64() on a string): the member's value when it
// has the wanted type, else `fallback`.
std::string jsonStringOr(const Json::Value& v, const std::string& fallback);
int64_t jsonInt64Or(const Json::Value& v, int64_t fallback);
bool jsonBoolOr(const Json::Value& v, bool fallback);

}  // namespace mooncake::tent
