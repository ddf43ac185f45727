// Peer cache of the MPComm transport, and the endpoint attribute format.
//
// Which peers are connected, whose keys are current, and who may talk to a
// peer's handshake listener at any moment. Keyed by MPComm host id (the
// peer's segment name) rather than SegmentID: reopening a segment yields a
// new SegmentID for the same peer, and a second connect() to a connected
// peer would replace MPComm's connection record (dropping its keys, leaking
// its queue pairs).
//
// RULES
//  - Identity. A peer is a (host id, incarnation) pair; the incarnation
//    changes with every process start. A peer seen with a new incarnation is
//    a restarted process: the one case in which connect() is issued again
//    for a host id (MPComm replaces the dead record; a real libmpcomm leaks
//    that record's queue pairs, one set per restart). Incarnation 0 means
//    "unknown" and matches any.
//  - Keys. Keys are current while the peer's registration epoch is at most
//    the epoch they were fetched for; a higher epoch queries again over the
//    established connection, never reconnects. Two compares per request.
//  - Single flight. At most one handshake or query per host id runs at a
//    time, on its own thread; every caller that needs one joins it.
//  - Bounded waits. Callers wait for a flight with a deadline and never
//    under the registry's lock. A flight whose waiters gave up still records
//    its outcome when it finishes.
//  - Never-established connections are not cached: a failed connect()
//    forgets the peer, so the next call performs the whole handshake. A
//    failed query leaves it CONNECTED_NO_KEYS; the next call queries again.
//  - Lock-free fast path. Each entry publishes a MpcommPeerLink that answers
//    "would poll() say kReady for this view?" without the registry's lock,
//    so a request to a connected peer takes no global lock. A link belongs
//    to one (host id, incarnation); a restart, a failed connect or drain()
//    retires it for good, and a flight clears it while it runs, so a stale
//    link only ever sends its holder back to poll().
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

// What buildMpcommEndpointAttr() puts before the host.
inline constexpr char kMpcommEndpointAttrPrefix[] = "v1:";

// Decimal 1..65535, digits only (no sign, no spaces, no suffix). The error
// quotes the rejected text.
Status parseMpcommTcpPort(const std::string& text, int& port);

// "[v1:]<host>:<port>". No prefix reads as v1; another version ("v2:...")
// is rejected, as is an IPv6 literal. A two-part attribute is always
// <host>:<port>, so a host named like "v2" or "vm01" is not a version.
Status parseMpcommEndpointAttr(const std::string& attr, std::string& addr,
                               int& port);

// A host to advertise: an IPv4 address or a host name, with the endpoint
// attribute's host rules; no port and no IPv6 literal.
Status parseMpcommAdvertiseAddress(const std::string& text, std::string& host);

// "v1:<host>:<port>", host being the part of the local segment name before
// its last ':' (the whole name when it has none).
std::string buildMpcommEndpointAttr(const std::string& local_segment_name,
                                    int tcp_port);

// "10.0.0.1:12345" -> "10.0.0.1"; a name without ':' is all host.
std::string mpcommHostOf(const std::string& segment_name);

// A remote buffer, as Mooncake's ensure() names what a peer publishes.
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

// What a peer's descriptor says about it and where it listens.
struct MpcommPeerView {
    std::string host_id;
    std::string addr;
    int port = 0;
    uint64_t incarnation = 0;
    uint64_t registration_epoch = 0;
};

// One handshake or key query in progress (private to the registry).
struct MpcommPeerFlight;

// What poll() would answer for a peer, readable without the registry's
// lock. Written by the registry under its lock; read by anyone.
struct MpcommPeerLink {
    explicit MpcommPeerLink(uint64_t inc) : incarnation(inc) {}
    // The entry's incarnation when the link was made; a new incarnation
    // gets a new link, so this never changes.
    const uint64_t incarnation;
    // 0 while not ready (connecting, querying, no keys, retired); else the
    // registration epoch the keys were fetched for, plus one.
    std::atomic<uint64_t> ready_epoch{0};

    // True when poll(view) would return kReady right now without starting
    // anything. False sends the caller to poll(), never the reverse.
    bool readyFor(const MpcommPeerView& view) const {
        uint64_t ready = ready_epoch.load(std::memory_order_acquire);
        if (ready == 0 || view.registration_epoch >= ready) return false;
        // An unknown incarnation on the link is adopted by poll(); only
        // poll() may do that, so it stays the slow path.
        return incarnation != 0 &&
               (view.incarnation == 0 || view.incarnation == incarnation);
    }
};

class MpcommPeerRegistry {
 public:
    using Clock = std::chrono::steady_clock;

    // A caller's place in line for one peer: the flight it joined, if any.
    // Default-constructed for a first poll(); poll() keeps it current.
    class Ticket {
     public:
        // After poll() returned kReady: the peer's link, for readyFor()
        // checks that skip poll() next time.
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

    // Never blocks. kReady: `peer` is connected with keys for its epoch.
    // kFailed: the flight this ticket joined failed; `error` says why.
    // kWaiting: a flight for this peer runs (started now if one was
    // needed); call again after waitForAny().
    Progress poll(const MpcommPeerView& peer, Ticket& ticket, Status& error);

    // Until the flight of one of `tickets` finishes (true) or `deadline`
    // passes (false). Never holds anything a flight needs while waiting.
    bool waitForAny(const std::vector<Ticket*>& tickets,
                    Clock::time_point deadline);

    // poll() + waitForAny() until ready, failed or `deadline`. On the
    // deadline: handshakeTimeout(peer, timeout_ms).
    Status ensure(const MpcommPeerView& peer, Clock::time_point deadline,
                  int64_t timeout_ms);
    // RpcServiceError "MPComm handshake with <host> at <addr>:<port> did not
    // finish within transports/mpcomm/connect_timeout_ms=<timeout_ms>".
    static Status handshakeTimeout(const MpcommPeerView& peer,
                                   int64_t timeout_ms);

    // Mooncake's form of ensure(), for callers that know a peer by its
    // buffers rather than by its descriptor: blocks, at most
    // kEnsureTimeoutMs, until `host_id` (at tcp_addr:tcp_port when it is
    // not connected yet) is connected with keys for `buffers`. A range
    // that no earlier call for `host_id` covered counts as a
    // re-registration (the keys are queried again, over the connection);
    // ranges that went away do not. The incarnation is unknown.
    static constexpr int64_t kEnsureTimeoutMs = 10000;
    Status ensure(const std::string& host_id, const std::string& tcp_addr,
                  int tcp_port, const std::vector<MpcommBufferRange>& buffers);

    // uninstall(): forgets every peer and waits up to `deadline` for the
    // flights still running. Returns the host ids of those that did not
    // finish; they keep running and record nothing.
    std::vector<std::string> drain(Clock::time_point deadline);
    // Mooncake's name for drain() without the wait: forgets every peer
    // now; flights still running record nothing.
    void clear();
    // Runs `fn` once no flight runs any more: now, or on the thread of the
    // last one to finish. While it is pending, idle() is false.
    void runWhenIdle(std::function<void()> fn);
    bool idle() const;

    // Counts every time a link came to say less than it did (a peer no
    // longer ready, or ready for an older epoch). A reader who reads this
    // before finding a link ready knows, while the count stays the same,
    // that every link it found ready still is, without reading the links
    // again.
    uint64_t linksLowered() const {
        return links_lowered_->load(std::memory_order_acquire);
    }

    size_t size() const;
    bool contains(const std::string& host_id) const;
    bool stateOf(const std::string& host_id, MpcommPeerState& state) const;
    // Diagnostics (and tests): callers now waiting for a flight of
    // `host_id`, and flights running in all.
    size_t waiters(const std::string& host_id) const;
    size_t flightsRunning() const;
    // Handshake threads alive in this process, across every registry,
    // including those a drain abandoned. A thread stops counting only after
    // its last action, so a caller that reads 0 has seen all their effects
    // (their logging included) happen before it.
    static size_t handshakeThreadsAlive();

 private:
    struct Shared;
    std::shared_ptr<Shared> shared_;
    const std::atomic<uint64_t>* const links_lowered_;  // in *shared_
};

}  // namespace mooncake::tent
