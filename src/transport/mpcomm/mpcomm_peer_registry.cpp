#include "tent/transport/mpcomm/mpcomm_peer_registry.h"

#include <glog/logging.h>

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

Status parseMpcommTcpPort(const std::string& text, int& port) {
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

Status parseMpcommEndpointAttr(const std::string& attr, std::string& addr,
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
    Status st = parseMpcommTcpPort(rest.substr(colon + 1), parsed_port);
    if (!st.ok()) return invalid(std::string(st.message()));
    addr = host;
    port = parsed_port;
    return Status::OK();
}

std::string buildMpcommEndpointAttr(const std::string& local_segment_name,
                                    int tcp_port) {
    size_t colon = local_segment_name.rfind(':');
    std::string host = colon == std::string::npos
                           ? local_segment_name
                           : local_segment_name.substr(0, colon);
    return "v1:" + host + ":" + std::to_string(tcp_port);
}

const char* mpcommPeerStateName(MpcommPeerState state) {
    switch (state) {
        case MpcommPeerState::CONNECTING:
            return "CONNECTING";
        case MpcommPeerState::CONNECTED_NO_KEYS:
            return "CONNECTED_NO_KEYS";
        case MpcommPeerState::READY:
            return "READY";
    }
    return "UNKNOWN";
}

MpcommPeerRegistry::MpcommPeerRegistry(std::shared_ptr<MpcommAdapter> adapter)
    : adapter_(std::move(adapter)) {}

bool MpcommPeerRegistry::covers(
    const std::vector<MpcommBufferRange>& keys,
    const std::vector<MpcommBufferRange>& published) {
    for (const auto& range : published) {
        bool covered = std::any_of(
            keys.begin(), keys.end(), [&range](const MpcommBufferRange& k) {
                return k.addr <= range.addr &&
                       range.addr + range.length <= k.addr + k.length;
            });
        if (!covered) return false;
    }
    return true;
}

Status MpcommPeerRegistry::ensure(
    const std::string& host_id, const std::string& tcp_addr, int tcp_port,
    const std::vector<MpcommBufferRange>& published) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        auto it = peers_.find(host_id);
        if (it == peers_.end()) {
            Peer& peer = peers_[host_id];
            peer.addr = tcp_addr;
            peer.port = tcp_port;
            return runFlight(lock, host_id, true, published);
        }
        Peer& peer = it->second;
        // Current keys serve this caller even while a refresh runs.
        if (peer.state == MpcommPeerState::READY &&
            covers(peer.covered, published)) {
            return Status::OK();
        }
        if (peer.flight) {
            std::shared_ptr<Flight> flight = peer.flight;
            ++flight->waiters;
            flight_done_.wait(lock, [&flight] { return flight->done; });
            --flight->waiters;
            if (!flight->result.ok()) return flight->result;
            continue;  // re-check coverage against the fresh keys
        }
        return runFlight(lock, host_id, false, published);
    }
}

Status MpcommPeerRegistry::runFlight(
    std::unique_lock<std::mutex>& lock, const std::string& host_id,
    bool need_connect, const std::vector<MpcommBufferRange>& published) {
    auto flight = std::make_shared<Flight>();
    Peer& peer = peers_[host_id];
    peer.flight = flight;
    const std::string addr = peer.addr;
    const int port = peer.port;
    lock.unlock();

    // The adapter is called without the lock: a handshake has no timeout,
    // and other peers must not wait for this one.
    Status connect_status;
    if (need_connect) {
        connect_status = adapter_->connect(host_id, addr, port);
        if (connect_status.ok()) {
            LOG(INFO) << "MpcommTransport: Connected to segment " << host_id;
        }
    }
    Status query_status;
    if (connect_status.ok()) {
        query_status = adapter_->queryRemoteBuffer(host_id, addr, port);
        if (!query_status.ok()) {
            int native = 0;
            std::string code = mpcommNativeStatusOf(query_status, native)
                                   ? std::to_string(native)
                                   : "unknown";
            LOG(ERROR) << "MpcommTransport: Failed to query remote buffers "
                          "from "
                       << host_id << ", error=" << code;
        }
    }

    lock.lock();
    Status result = connect_status.ok() ? query_status : connect_status;
    auto it = peers_.find(host_id);
    if (it != peers_.end() && it->second.flight == flight) {
        Peer& entry = it->second;
        entry.flight.reset();
        if (!connect_status.ok()) {
            // Never connected: nothing to keep, the next call retries the
            // whole handshake.
            peers_.erase(it);
        } else if (!query_status.ok()) {
            entry.state = MpcommPeerState::CONNECTED_NO_KEYS;
            entry.covered.clear();
        } else {
            entry.state = MpcommPeerState::READY;
            entry.covered = published;
        }
    }
    flight->result = result;
    flight->done = true;
    flight_done_.notify_all();
    return result;
}

void MpcommPeerRegistry::clear() {
    std::lock_guard<std::mutex> lock(mu_);
    peers_.clear();
}

size_t MpcommPeerRegistry::size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return peers_.size();
}

bool MpcommPeerRegistry::contains(const std::string& host_id) const {
    std::lock_guard<std::mutex> lock(mu_);
    return peers_.count(host_id) != 0;
}

bool MpcommPeerRegistry::stateOf(const std::string& host_id,
                                 MpcommPeerState& state) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = peers_.find(host_id);
    if (it == peers_.end()) return false;
    state = it->second.state;
    return true;
}

size_t MpcommPeerRegistry::waiters(const std::string& host_id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = peers_.find(host_id);
    if (it == peers_.end() || !it->second.flight) return 0;
    return it->second.flight->waiters;
}

}  // namespace mooncake::tent
