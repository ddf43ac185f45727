// The MPComm endpoint attribute and its parts: port, host, attribute.
#include "mpcomm_endpoint.h"

#include <algorithm>
#include <cctype>

namespace mooncake::tent {

namespace {

constexpr const char kPortRule[] = "expected a decimal integer in 1..65535";

bool isVersionToken(const std::string& token) {
    if (token.size() < 2 || token[0] != 'v') return false;
    return std::all_of(token.begin() + 1, token.end(),
                       [](unsigned char c) { return std::isdigit(c); });
}

bool isHostChar(unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '-' || c == '_';
}

}  // namespace

Status MpcommEndpoint::parsePort(const std::string& text, int& port) {
    if (text.empty()) {
        return Status::InvalidArgument(
            std::string("invalid MPComm TCP port '': ") + kPortRule);
    }
    long value = 0;
    for (unsigned char c : text) {
        if (!std::isdigit(c)) {
            return Status::InvalidArgument("invalid MPComm TCP port '" + text +
                                           "': " + kPortRule);
        }
        value = value * 10 + (c - '0');
        // Stop before overflow; anything this large is out of range.
        if (value > 65535) break;
    }
    if (value < 1 || value > 65535) {
        return Status::InvalidArgument("invalid MPComm TCP port '" + text +
                                       "': " + kPortRule);
    }
    port = static_cast<int>(value);
    return Status::OK();
}

Status MpcommEndpoint::parseAttr(const std::string& attr, std::string& addr,
                                 int& port) {
    auto invalid = [&attr](const std::string& why) {
        return Status::InvalidArgument("invalid MPComm endpoint attribute '" +
                                       attr + "': " + why);
    };
    if (attr.empty()) return invalid("empty, expected [v1:]<host>:<port>");
    if (attr.find_first_of("[]") != std::string::npos) {
        return invalid("IPv6 literals are not supported, only IPv4");
    }
    size_t colons = std::count(attr.begin(), attr.end(), ':');
    if (colons == 0) return invalid("missing ':<port>'");
    std::string rest = attr;
    if (colons >= 2) {
        std::string first = attr.substr(0, attr.find(':'));
        if (!isVersionToken(first)) {
            return invalid("IPv6 literals are not supported, only IPv4");
        }
        if (first != "v1") {
            return invalid("unsupported version '" + first +
                           "' (this build reads v1)");
        }
        rest = attr.substr(first.size() + 1);
        if (colons > 2) {
            return invalid("IPv6 literals are not supported, only IPv4");
        }
    }
    size_t colon = rest.find(':');
    std::string host = rest.substr(0, colon);
    if (host.empty()) return invalid("empty host");
    for (unsigned char c : host) {
        if (!isHostChar(c)) {
            return invalid("bad character in host '" + host + "'");
        }
    }
    int parsed_port = 0;
    Status st = parsePort(rest.substr(colon + 1), parsed_port);
    if (!st.ok()) return invalid(std::string(st.message()));
    addr = host;
    port = parsed_port;
    return Status::OK();
}

Status MpcommEndpoint::parseAdvertiseAddress(const std::string& text,
                                             std::string& host) {
    auto invalid = [&text](const std::string& why) {
        return Status::InvalidArgument("invalid MPComm advertise address '" +
                                       text + "': " + why);
    };
    if (text.empty()) return invalid("empty, expected an IPv4 address or host");
    if (text.find_first_of("[]") != std::string::npos ||
        std::count(text.begin(), text.end(), ':') > 1) {
        return invalid("IPv6 literals are not supported, only IPv4");
    }
    if (text.find(':') != std::string::npos) {
        return invalid("a port is not allowed; the port is MPCOMM_TCP_PORT");
    }
    for (unsigned char c : text) {
        if (!isHostChar(c)) return invalid("bad character in host");
    }
    host = text;
    return Status::OK();
}

std::string MpcommEndpoint::buildAttr(const std::string& local_segment_name,
                                      int tcp_port) {
    return kMpcommEndpointAttrPrefix + hostOf(local_segment_name) + ":" +
           std::to_string(tcp_port);
}

std::string MpcommEndpoint::hostOf(const std::string& segment_name) {
    size_t colon = segment_name.rfind(':');
    return colon == std::string::npos ? segment_name
                                      : segment_name.substr(0, colon);
}

}  // namespace mooncake::tent
