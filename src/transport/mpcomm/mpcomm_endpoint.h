// The MPComm endpoint attribute's parsers (private to the transport). The
// public names, with their rules, are parseMpcommTcpPort(),
// parseMpcommEndpointAttr(), parseMpcommAdvertiseAddress() and
// buildMpcommEndpointAttr() in mpcomm_peer_registry.h, where Mooncake's
// registry header declares them; each calls the function here.
#pragma once

#include <string>

#include "tent/transport/mpcomm/mpcomm_peer_registry.h"

namespace mooncake::tent {

class MpcommEndpoint {
 public:
    static Status parsePort(const std::string& text, int& port);
    static Status parseAttr(const std::string& attr, std::string& addr,
                            int& port);
    static Status parseAdvertiseAddress(const std::string& text,
                                        std::string& host);
    static std::string buildAttr(const std::string& local_segment_name,
                                 int tcp_port);
    // "10.0.0.1:12345" -> "10.0.0.1"; a name without ':' is all host.
    static std::string hostOf(const std::string& segment_name);
};

}  // namespace mooncake::tent
