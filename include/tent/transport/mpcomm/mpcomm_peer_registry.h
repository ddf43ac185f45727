// Peer cache of the MPComm transport, and the endpoint attribute format.
// Keyed by MPComm host id (the peer's segment name), not SegmentID:
// reopening a segment yields a new SegmentID for the same peer, and a second
// connect() to a connected peer would replace MPComm's connection record.
//
// RULES
//  - A peer is (host id, incarnation); a new incarnation is a restarted
//    process, the one case in which connect() is issued again for a host
//    id. Incarnation 0 means "unknown" and matches any.
//  - Keys are current while the peer's registration epoch is at most the
//    epoch they were fetched for; a higher one queries again over the
//    connection, never reconnects.
//  - At most one handshake or query per host id runs at a time, on its own
//    thread; every caller that needs one joins it, and waits with a
//    deadline, never under the registry's lock. A flight whose waiters gave
//    up still records its outcome.
//  - A failed connect() forgets the peer; a failed query leaves it
//    CONNECTED_NO_KEYS.
//  - Each entry publishes a MpcommPeerLink that answers "would poll() say
//    kReady?" without the lock. A restart, a failed connect or drain()
//    retires it, and a flight clears it while it runs, so a stale link only
//    sends its holder back to poll().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tent/common/status.h"
#include "tent/transport/mpcomm/mpcomm_adapter.h"

namespace mooncake::tent {

// Decimal 1..65535, digits only; the error quotes the rejected text.
Status parseMpcommTcpPort(const std::string& text, int& port);

// "[v1:]<host>:<port>"; another version or an IPv6 literal is rejected. A
// two-part attribute is always <host>:<port> (a host "v2" is no version).
Status parseMpcommEndpointAttr(const std::string& attr, std::string& addr,
                               int& port);

// An IPv4 address or host name, with the attribute's host rules.
Status parseMpcommAdvertiseAddress(const std::string& text, std::string& host);

// "v1:<host>:<port>", host being mpcommHostOf(local_segment_name).
std::string buildMpcommEndpointAttr(const std::string& local_segment_name,
                                    int tcp_port);

// "10.0.0.1:12345" -> "10.0.0.1"; a name without ':' is all host.
std::string mpcommHostOf(const std::string& segment_name);

struct MpcommBufferRange {
    uint64_t addr{0};
    uint64_t length{0};
};

enum class MpcommPeerState {
    CONNECTING,         // the first handshake is in flight
    CONNECTED_NO_KEYS,  // connected; the key query failed or is due
    READY,              // connected, keys fetched
};

const char* mpcommPeerStateName(MpcommPeerState state);

struct MpcommPeerView {
    std::string host_id;
    std::string addr;
    int port = 0;
    uint64_t incarnation = 0;
    uint64_t registration_epoch = 0;
};

struct MpcommPeerFlight;

// Written by the registry under its lock; read by anyone.
struct MpcommPeerLink {
    explicit MpcommPeerLink(uint64_t inc) : incarnation(inc) {}
    const uint64_t incarnation;  // a new incarnation gets a new link
    // 0 while not ready; else the epoch the keys were fetched for, plus 1.
    std::atomic<uint64_t> ready_epoch{0};

    // True when poll(view) would return kReady now without starting
    // anything.
    bool readyFor(const MpcommPeerView& view) const {
        uint64_t ready = ready_epoch.load(std::memory_order_acquire);
        if (ready == 0 || view.registration_epoch >= ready) return false;
        // Only poll() may adopt an unknown incarnation.
        return incarnation != 0 &&
               (view.incarnation == 0 || view.incarnation == incarnation);
    }
};

class MpcommPeerRegistry {
 public:
    using Clock = std::chrono::steady_clock;

    // A caller's place in line for one peer; poll() keeps it current.
    class Ticket {
     public:
        // After kReady: the peer's link, for readyFor() checks.
        const std::shared_ptr<const MpcommPeerLink>& link() const {
            return link_;
        }

     private:
        friend class MpcommPeerRegistry;
        std::shared_ptr<MpcommPeerFlight> flight_;
        std::shared_ptr<const MpcommPeerLink> link_;
    };

    enum class Progress { kReady, kFailed, kWaiting };

    explicit MpcommPeerRegistry(std::shared_ptr<MpcommAdapter> adapter);
    ~MpcommPeerRegistry();
    MpcommPeerRegistry(const MpcommPeerRegistry&) = delete;
    MpcommPeerRegistry& operator=(const MpcommPeerRegistry&) = delete;

    // Never blocks. kReady: connected with keys for `peer`'s epoch.
    // kFailed: the flight this ticket joined failed (`error`). kWaiting: a
    // flight runs (started now if needed); call again after waitForAny().
    Progress poll(const MpcommPeerView& peer, Ticket& ticket, Status& error);

    // Until one of `tickets`' flights finishes (true) or `deadline`.
    bool waitForAny(const std::vector<Ticket*>& tickets,
                    Clock::time_point deadline);

    // poll() + waitForAny() until ready, failed or `deadline`.
    Status ensure(const MpcommPeerView& peer, Clock::time_point deadline,
                  int64_t timeout_ms);
    // RpcServiceError "MPComm handshake with <host> at <addr>:<port> did not
    // finish within transports/mpcomm/connect_timeout_ms=<timeout_ms>".
    static Status handshakeTimeout(const MpcommPeerView& peer,
                                   int64_t timeout_ms);

    // Mooncake's ensure(), knowing a peer by its buffers: at most
    // kEnsureTimeoutMs. A range no earlier call for `host_id` covered is a
    // re-registration (keys queried again); the incarnation is unknown.
    static constexpr int64_t kEnsureTimeoutMs = 10000;
    Status ensure(const std::string& host_id, const std::string& tcp_addr,
                  int tcp_port, const std::vector<MpcommBufferRange>& buffers);

    // Forgets every peer and waits up to `deadline` for the flights still
    // running; returns the host ids of those that did not finish (they
    // record nothing). clear() is Mooncake's drain() without the wait.
    std::vector<std::string> drain(Clock::time_point deadline);
    void clear();
    // Runs `fn` once no flight runs: now, or on the last one's thread.
    // While it is pending, idle() is false.
    void runWhenIdle(std::function<void()> fn);
    bool idle() const;

    // Counts every time a link came to say less. While it stays the same,
    // every link a reader found ready after reading it still is.
    uint64_t linksLowered() const {
        return links_lowered_->load(std::memory_order_acquire);
    }

    size_t size() const;
    bool contains(const std::string& host_id) const;
    bool stateOf(const std::string& host_id, MpcommPeerState& state) const;
    // Diagnostics: callers waiting for `host_id`'s flight; flights running.
    size_t waiters(const std::string& host_id) const;
    size_t flightsRunning() const;
    // Handshake threads alive in this process, abandoned ones included; a
    // thread stops counting after its last action (its logging included).
    static size_t handshakeThreadsAlive();

 private:
    struct Shared;
    std::shared_ptr<Shared> shared_;
    const std::atomic<uint64_t>* const links_lowered_;  // in *shared_
};

}  // namespace mooncake::tent
