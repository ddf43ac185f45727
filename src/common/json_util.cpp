#include "common/json_util.h"

#include <memory>
#include <sstream>

namespace mooncake::tent {

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

bool parseJsonText(const std::string& text, bool fail_if_extra,
                   Json::Value& out, std::string& errs) {
    Json::CharReaderBuilder builder;
    if (fail_if_extra) builder["failIfExtra"] = true;
    builder["collectComments"] = false;
    std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
    return reader->parse(text.data(), text.data() + text.size(), &out, &errs);
}

}  // namespace mooncake::tent
