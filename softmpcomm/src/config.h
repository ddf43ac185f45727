// The MPCOMM_* and SOFTMPCOMM_* environment variables softmpcomm honours,
// read and validated once per init() so a bad value fails initialisation
// instead of being silently replaced by a default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mpcomm {
namespace detail {

constexpr int kMaxQpsPerConnection = 16;
// MPCOMM_QPS_PER_CONNECTION when unset (the real library's is 1). One TCP
// connection carries about what one core can copy, so a single data
// connection per peer would make softmpcomm, not the path under test, the
// limit; two let one transfer's slices move in parallel. Each connection
// costs a sender and a reader thread here and a server thread at the
// target, and on a 2-core host four connections' threads took the cores
// from the copies: two beat four in 41 of 48 interleaved tebench cases
// (median 1.13x; docs/performance.md, "Data connections per peer").
constexpr int kDefaultQpsPerConnection = 2;
// A transfer is striped over the peer's data connections in slices of at
// least this many bytes. Each slice costs a request, a completion and a
// wake-up on both ends; on loopback, 64 KiB slices cost about twice the CPU
// per byte of unstriped 256 KiB requests, so only transfers large enough to
// amortise that are split.
constexpr uint64_t kMinStripeSize = 1ull << 20;
// MPCOMM_MAX_OUTSTANDING_PER_QP: slices one data connection carries at once;
// more wait for the first connection to finish one (peer_link.h). The real
// library's default is 256 work requests, which an RDMA NIC serves in
// parallel; a TCP connection serves its slices strictly one after another,
// so softmpcomm defaults to 2: one being moved and the next request
// already at the target, and the rest free to go to whichever connection
// gets there first. A PUT that fits the send buffer (below) takes a second
// slot only while the PUTs on the connection still fit it (peer_link.h).
constexpr uint32_t kDefaultMaxOutstandingPerQp = 2;
constexpr uint32_t kMaxMaxOutstandingPerQp = 65536;
constexpr uint64_t kDefaultMaxTransferSize = 1ull << 30;  // 1 GiB

// The bounds on every wait. Each is an environment variable so tests (and
// users on slow links) can move it; each default is what the real library's
// behaviour suggests.
//
// SOFTMPCOMM_PROGRESS_TIMEOUT_MS: a data connection with outstanding slices
// that neither sends nor receives a byte for this long is dead, its slices
// fail with MPCOMM_ERR_RETRY_EXCEEDED (an RC QP's retry timeout).
constexpr int kDefaultProgressTimeoutMs = 4000;
// SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS: each step of connect() and
// queryRemoteBuffer() (TCP connect, HELLO exchange, query exchange).
constexpr int kDefaultHandshakeTimeoutMs = 5000;
// SOFTMPCOMM_IDLE_TIMEOUT_MS: the listener drops a connection that has not
// completed a frame within this long (before HELLO and on control
// connections), or that trickles one frame (or one 256 KiB payload chunk)
// for longer on any connection.
constexpr int kDefaultIdleTimeoutMs = 30000;
// Upper bound of the three: one day keeps millisecond arithmetic in an int.
constexpr uint64_t kMaxTimeoutMs = 24ull * 3600 * 1000;
// SOFTMPCOMM_MAX_CONNECTIONS: connections the listener serves at once (each
// has a thread). At the cap a newcomer displaces the oldest connection that
// has not said HELLO, else the oldest control connection waiting for its
// next query; data connections are never displaced (an idle QP is a peer's
// working state), so with none to displace the newcomer is refused.
constexpr int kDefaultMaxConnections = 1024;
constexpr int kMaxMaxConnections = 65536;
// SOFTMPCOMM_SEND_BUFFER_BYTES: SO_SNDBUF of every data connection, both
// ends; 0 leaves the kernel's autotuning. An autotuned buffer lets the
// sending end copy megabytes of payload into kernel memory ahead of the
// reader; on loopback they have left the cache by the time the reader
// copies them out, which halved what softmpcomm moved at 1 MiB and above.
// 512 KiB (which the kernel doubles) keeps what is in flight on one
// connection within what the reader is about to take. It is also the put
// budget of a connection: the PUT payloads a connection carries at once
// when it carries more than one slice (peer_link.h).
constexpr uint64_t kDefaultSendBufferBytes = 512 * 1024;
constexpr uint64_t kMinSendBufferBytes = 64 * 1024;
constexpr uint64_t kMaxSendBufferBytes = 1ull << 30;

struct Config {
    std::vector<std::string> rails;  // never empty after loadConfig()
    int qps_per_connection = kDefaultQpsPerConnection;
    int max_outstanding_per_qp = kDefaultMaxOutstandingPerQp;
    uint64_t max_transfer_size = kDefaultMaxTransferSize;
    int progress_timeout_ms = kDefaultProgressTimeoutMs;
    int handshake_timeout_ms = kDefaultHandshakeTimeoutMs;
    int idle_timeout_ms = kDefaultIdleTimeoutMs;
    int max_connections = kDefaultMaxConnections;
    int send_buffer_bytes = static_cast<int>(kDefaultSendBufferBytes);
};

// Splits a comma list, trimming blanks and dropping empty names.
std::vector<std::string> splitRailList(const std::string& list);

// Parses a decimal unsigned integer; false for empty, signs, junk or overflow.
bool parseUnsigned(const std::string& text, uint64_t* value);

// Builds the configuration from device_names and the environment. On failure
// returns false and fills *error with a message naming the bad value.
bool loadConfig(const std::string& device_names, Config* config,
                std::string* error);

}  // namespace detail
}  // namespace mpcomm
