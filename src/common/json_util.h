// Small jsoncpp helpers shared by the config loader, segment descriptors and
// the RPC frames (private to libtent).
#pragma once

#include <json/json.h>

#include <string>

namespace mooncake::tent {

// One-line JSON without indentation, as logged and sent on the wire.
std::string toCompactJson(const Json::Value& value);

// jsoncpp reports errors as "* Line 1, Column 2\n  Missing '}'...\n" blocks;
// this folds them into one line ("Line 1, Column 2: Missing '}' ...") so a
// Status message or a log line stays single-line.
std::string foldJsonErrors(const std::string& errors);

// Parses `text` (comments dropped; with `fail_if_extra`, text after the
// value is an error). False with jsoncpp's raw errors in `errs`; the caller
// words the Status, since each caller names its own source.
bool parseJsonText(const std::string& text, bool fail_if_extra,
                   Json::Value& out, std::string& errs);

}  // namespace mooncake::tent
