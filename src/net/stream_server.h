// StreamServer: the accept loop and connection bookkeeping behind every
// listener in libtent (the p2p metadata RPC and the TCP transport's target
// side), with the limits that keep a hostile or broken client from hurting
// anyone but itself.
//
// Event-driven (asio): a fixed pool of `<prefix>/server_threads` threads
// runs the accept loop, waits for every connection's next request and
// serves it, so an open connection costs a socket, not a thread. A request
// is served by the protocol's FrameHandler on a pool thread, blocking up
// to its frame deadline; so at most server_threads requests are served at
// once, and a client trickling a request holds one thread until
// `<prefix>/frame_timeout_ms`. A connection is IDLE while it waits for the
// first byte of its next request, BUSY while the FrameHandler serves that
// request, and is closed when:
//   - it stays idle past `<prefix>/idle_timeout_ms` (checked by a sweep
//     every quarter of the shorter deadline, at most every second);
//   - one request (reading it and writing its reply) takes longer than
//     `<prefix>/frame_timeout_ms`: the handler gets that deadline, so a
//     client trickling one byte at a time is dropped when it fires;
//   - the handler says so (malformed request, I/O error);
//   - `<prefix>/max_connections` are open and a new client arrives: the
//     longest-idle connection is closed to admit it (a flood of idle
//     sockets cannot lock out well-behaved clients, which reconnect); when
//     none is idle the newcomer is refused. A connection whose next
//     request has arrived but is not read yet is not idle: its client is
//     waiting for an answer;
//   - with a cluster token (ServerLimits::auth_token), the client fails the
//     handshake of net/auth_handshake.h or does not finish it within
//     frame_timeout_ms of being accepted: closed with a WARNING naming the
//     peer, before any of its bytes reach the FrameHandler. A connection in
//     its handshake counts as idle, so it is the first to go at
//     max_connections.
// accept() failing with EMFILE/ENFILE/ENOBUFS/ENOMEM backs off for
// kAcceptBackoffMs instead of spinning on a listener that stays readable.
// Requests are never allocated by what a client announces: each protocol
// caps a request by its type's real size before reading it (see the
// handlers in src/rpc/ and src/transport/tcp/).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "net/socket_io.h"
#include "tent/common/config.h"
#include "tent/common/status.h"

namespace mooncake::tent::net {

// How long accept() rests after running out of descriptors or memory:
// long enough not to spin, short enough to pick up again as soon as
// connections close.
constexpr int kAcceptBackoffMs = 100;

// Accepted sockets a server may hold beyond max_connections: connections
// closed (evicted, timed out) whose last step has not run yet. At that
// many, accepting pauses until one is gone, so a flood of connections
// costs at most max_connections + kClosingSlack sockets.
constexpr int kClosingSlack = 16;
// The largest <prefix>/linger_us: a lingering thread is a thread the other
// connections and stop() wait for.
constexpr int kMaxLingerUs = 100000;

struct ServerLimits {
    int idle_timeout_ms = 60000;
    int frame_timeout_ms = 10000;
    int max_connections = 256;
    // Threads that accept, wait for and serve every connection.
    int server_threads = 4;
    // How long a thread that answered a request waits on the same
    // connection for its next one before handing it back to the event loop
    // (0: never). A client streaming requests over a connection then
    // meets the same thread each time, as with a thread per connection,
    // instead of a wake-up of the event loop and another of a pool thread
    // per request, which on a loaded host halved the TCP transport's
    // bandwidth. The owner sets the default (TcpTransport: 1000 µs; the
    // RPC server, whose clients send one request at a time: 0).
    int linger_us = 0;
    // The longest a thread keeps one connection across requests before it
    // goes back to the event loop, so that other connections get a turn.
    int linger_turn_ms = 10;
    // Each accepted socket's send buffer (setSendBuffer; 0: the kernel's).
    // Not read by readServerLimits: the owner decides, as TcpTransport does
    // from transports/tcp/send_buffer_bytes.
    int send_buffer_bytes = 0;
    // Where the values come from ("rpc", "transports/tcp"); log lines name
    // the key that fired.
    std::string key_prefix;
    // The cluster token (net/auth_handshake.h); empty: none. With one, each
    // connection must pass the handshake within frame_timeout_ms before
    // the FrameHandler sees a byte of it. Not read by readServerLimits:
    // every listener takes the one token readAuthToken() finds.
    std::string auth_token;
};

// Reads <prefix>/idle_timeout_ms, <prefix>/frame_timeout_ms,
// <prefix>/max_connections, <prefix>/server_threads, <prefix>/linger_us
// and <prefix>/linger_turn_ms over the defaults already in `limits`; a
// value out of range (not positive, linger_us negative, or above 65536
// connections, 64 threads, kMaxLingerUs or 60000 ms) is InvalidArgument
// naming the key.
Status readServerLimits(const Config& conf, const std::string& prefix,
                        ServerLimits& limits);

class StreamServer {
 public:
    struct Connection {
        int fd = -1;
        std::string peer;  // "a.b.c.d:port", for log lines
    };
    // Serves one request whose first byte is readable on conn.fd; reading
    // it and writing the reply must finish by `deadline`. Returns false to
    // close the connection.
    using FrameHandler =
        std::function<bool(const Connection& conn, Deadline deadline)>;

    struct Stats {
        uint64_t accepted = 0;
        uint64_t refused = 0;      // at max_connections with none idle
        uint64_t evicted = 0;      // idle ones closed to admit a newcomer
        uint64_t idle_closed = 0;  // closed by idle_timeout_ms
        uint64_t accept_backoffs = 0;
        uint64_t auth_refused = 0;  // failed or unfinished token handshakes
        // Requests served by the thread that answered the one before on
        // the same connection, without the event loop (linger_us).
        uint64_t lingered = 0;
        size_t open = 0;     // connections being served now
        size_t idle = 0;     // of which waiting for their next request
        size_t threads = 0;  // the pool, while running
    };

    // `name` prefixes log lines ("RpcServer", "TcpTransport").
    StreamServer(std::string name, FrameHandler handler);
    ~StreamServer();
    StreamServer(const StreamServer&) = delete;
    StreamServer& operator=(const StreamServer&) = delete;

    // Takes ownership of the listening socket `listen_fd` (closed by
    // stop(), or here on failure). Restartable after stop().
    Status start(int listen_fd, const ServerLimits& limits);
    // Stops accepting, shuts every connection down and joins the pool;
    // returns within the time a handler needs to notice a shut down socket.
    void stop();
    bool running() const { return running_.load(); }
    // True from the start of stop(): a handler whose socket fails now was
    // shut down on purpose and need not log it.
    bool stopping() const { return stopping_.load(); }
    // The limits of the current (or last) start(); stable while running.
    const ServerLimits& limits() const { return limits_; }
    Stats stats() const;

    // Test seam, set before start(): called on a pool thread each time a
    // connection turns idle, before the server waits for its next request,
    // so a test can hold it there (holding that thread).
    using IdleHook = std::function<void(const Connection& conn)>;
    void setIdleHookForTest(IdleHook hook) { idle_hook_ = std::move(hook); }

 private:
    enum State : int { kIdle, kBusy, kClosing, kDone };
    struct Conn;  // a connection and its asio watch (stream_server.cpp)
    struct Loop;  // the io_context, its pool, the listener's watch
    using ConnRef = std::shared_ptr<Conn>;

    // On the accept strand: waits for the listener, accepts what is
    // pending, rests kAcceptBackoffMs when out of descriptors or memory.
    void armAccept();
    void acceptPending();
    // Makes room for one more connection; false when none can be evicted.
    // Caller holds conns_mu_.
    bool admit(const std::string& newcomer);
    // A connection's steps, each on a pool thread, one at a time.
    void turnIdle(const ConnRef& conn);  // the idle hook, then the wait
    void awaitRequest(const ConnRef& conn);
    void onReadable(const ConnRef& conn);
    // After an answer: waits up to linger_us (never past `turn_end`) for
    // the connection's next request; true when it has arrived, to be
    // served on this thread without a trip through the event loop.
    bool lingerForNext(Conn& conn, Deadline turn_end);
    // The token handshake of a new connection; false to close it.
    bool authenticate(Conn& conn);
    // Shuts `conn` down and forgets it; its socket closes with its last
    // reference.
    void finish(const ConnRef& conn);
    // Closes connections idle (or silent in their handshake) past their
    // deadline; re-arms itself.
    void armSweep();
    void sweep();

    const std::string name_;
    const FrameHandler handler_;
    IdleHook idle_hook_;
    ServerLimits limits_;

    std::mutex lifecycle_mu_;  // serializes start()/stop()
    std::atomic<bool> running_{false};
    std::atomic<bool> stopping_{false};
    int listen_fd_ = -1;
    std::unique_ptr<Loop> loop_;

    mutable std::mutex conns_mu_;
    std::condition_variable conns_cv_;  // conns_ emptied, accept finished
    std::list<ConnRef> conns_;
    bool accepting_ = false;  // under conns_mu_: the accept loop is armed
    // Under conns_mu_: accepting waits for conns_ to shrink below
    // max_connections + kClosingSlack.
    bool accept_paused_ = false;

    std::atomic<uint64_t> accepted_{0}, refused_{0}, evicted_{0},
        idle_closed_{0}, accept_backoffs_{0}, auth_refused_{0}, lingered_{0};
};

}  // namespace mooncake::tent::net
