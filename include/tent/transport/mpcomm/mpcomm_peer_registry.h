// Peer cache of the MPComm transport, and the endpoint attribute format.
//
// Which peers are connected, whose keys are current, and who may talk to a
// peer's handshake listener at any moment. Keyed by MPComm host id (the
// peer's segment name) rather than SegmentID: reopening a segment yields a
// new SegmentID for the same peer, and a second connect() to a connected
// peer would replace MPComm's connection record (dropping its keys, leaking
// its queue pairs).
//
// Connection and keys are tracked separately. A connection is never closed
// or repeated once established; a failed key query leaves the peer in
// CONNECTED_NO_KEYS and the next ensure() queries again, over the endpoint
// that was connected. A connect() that failed leaves nothing behind, so the
// next ensure() performs the full handshake.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tent/common/status.h"
#include "tent/transport/mpcomm/mpcomm_adapter.h"

namespace mooncake::tent {

// Decimal 1..65535, digits only (no sign, no spaces, no suffix). The error
// quotes the rejected text.
Status parseMpcommTcpPort(const std::string& text, int& port);

// "[v1:]<host>:<port>". No prefix reads as v1; another version ("v2:...")
// is rejected, as is an IPv6 literal. A two-part attribute is always
// <host>:<port>, so a host named like "v2" or "vm01" is not a version.
Status parseMpcommEndpointAttr(const std::string& attr, std::string& addr,
                               int& port);

// "v1:<host>:<port>", host being the part of the local segment name before
// its last ':' (the whole name when it has none).
std::string buildMpcommEndpointAttr(const std::string& local_segment_name,
                                    int tcp_port);

// One buffer a peer publishes, [addr, addr + length).
struct MpcommBufferRange {
    uint64_t addr = 0;
    uint64_t length = 0;
};

enum class MpcommPeerState {
    CONNECTING,         // the first handshake is in flight
    CONNECTED_NO_KEYS,  // connected; the key query failed or is due
    READY,              // connected, keys fetched
};

const char* mpcommPeerStateName(MpcommPeerState state);

class MpcommPeerRegistry {
 public:
    explicit MpcommPeerRegistry(std::shared_ptr<MpcommAdapter> adapter);

    // Makes `host_id` usable: connects on first use, fetches its keys, and
    // refetches them when a range in `published` (what the peer publishes
    // now, as far as the caller knows) is not covered by the ranges that
    // were published at the last successful query. A range that disappeared
    // triggers nothing. tcp_addr/tcp_port are used for the first connect;
    // later queries go to the endpoint that was connected.
    //
    // Single-flight per host id: while one caller talks to the peer, the
    // others wait and receive its result; only the waiters whose ranges are
    // still not covered afterwards go on to query.
    Status ensure(const std::string& host_id, const std::string& tcp_addr,
                  int tcp_port,
                  const std::vector<MpcommBufferRange>& published);

    // Forgets every peer (uninstall). Callers in ensure() must be drained.
    void clear();
    size_t size() const;
    bool contains(const std::string& host_id) const;
    bool stateOf(const std::string& host_id, MpcommPeerState& state) const;

    // Diagnostics (and tests): callers of ensure() now waiting for another
    // caller's handshake or query with `host_id`.
    size_t waiters(const std::string& host_id) const;

 private:
    // One handshake or query in progress; waiters share its result.
    struct Flight {
        bool done = false;
        Status result;
        size_t waiters = 0;  // callers blocked on this flight
    };
    struct Peer {
        MpcommPeerState state = MpcommPeerState::CONNECTING;
        std::string addr;  // the endpoint connected (or being connected)
        int port = 0;
        std::vector<MpcommBufferRange> covered;  // published at last query
        std::shared_ptr<Flight> flight;          // null when idle
    };

    static bool covers(const std::vector<MpcommBufferRange>& keys,
                       const std::vector<MpcommBufferRange>& published);
    // Runs connect (when `need_connect`) and the key query without the
    // lock; returns the result and updates the entry under it.
    Status runFlight(std::unique_lock<std::mutex>& lock,
                     const std::string& host_id, bool need_connect,
                     const std::vector<MpcommBufferRange>& published);

    std::shared_ptr<MpcommAdapter> adapter_;
    mutable std::mutex mu_;
    std::condition_variable flight_done_;
    std::unordered_map<std::string, Peer> peers_;
};

}  // namespace mooncake::tent
