// The target side: the handshake listener, its accept thread, and one
// thread per accepted connection serving HELLO, QUERY and one-sided
// PUT / GET requests against the MemoryTable.
//
// The listener trusts no client: each header is checked against its type's
// real size before anything is allocated or read (wire.h checkRequest), a
// connection that has not said HELLO, and a control connection, must
// complete each frame within the idle timeout, every connection must
// complete a started frame (or 256 KiB chunk) within it, and accept() backs
// off instead of spinning when descriptors or memory run out. At most
// max_connections are served at once (config.h, SOFTMPCOMM_MAX_CONNECTIONS,
// says which one a newcomer displaces at the cap), so threads and memory
// stay bounded however many clients connect.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "memory_table.h"
#include "protocol.h"

namespace mpcomm {
namespace detail {

// How long accept() waits before retrying after EMFILE / ENFILE / ENOBUFS /
// ENOMEM or a failed thread start: long enough not to spin on a listen
// queue it cannot drain, short enough to pick up a freed descriptor soon.
constexpr int kAcceptBackoffMs = 100;

struct ServerOptions {
    uint32_t rails = 1;
    uint64_t max_slice = kDefaultMaxTransferSize;  // largest PUT / GET
    int idle_timeout_ms = kDefaultIdleTimeoutMs;
    int max_connections = kDefaultMaxConnections;
    int send_buffer_bytes = 0;  // of data connections; 0: the kernel's
};

class Server {
 public:
    Server(std::string host_id, const ServerOptions& options,
           MemoryTable* memory);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Binds 0.0.0.0:port; MPCOMM_SUCCESS or MPCOMM_ERR_BIND.
    int listen(int port, std::string* error);
    int startAccepting();
    // Stops accepting; connections already accepted keep being served.
    void stopAccepting();
    // stopAccepting(), then closes every connection and joins its thread.
    void shutdown();

 private:
    // What a connection is doing, as far as the cap is concerned. The
    // serving thread moves it along; the accept loop may move an anonymous
    // or idle control connection to kEvicted (a compare-exchange, so a
    // connection that just became busy or a data connection is never
    // displaced).
    enum class Role { kAnonymous, kControlIdle, kControlBusy, kData, kEvicted };
    struct Conn {
        int fd = -1;
        std::thread thread;
        std::atomic<bool> finished{false};
        std::atomic<Role> role{Role::kAnonymous};
    };

    void acceptLoop();
    // Waits kAcceptBackoffMs, or less when stopAccepting() wakes it; false
    // when the loop must stop.
    bool backOff(const char* why, int* backoffs);
    void reapFinished();
    // With conns_mu_ held: whether a new connection may be served, after
    // displacing one (see ServerOptions::max_connections) if at the cap.
    bool admitLocked();
    // Moves `conn` from `from` to `to`; false when the accept loop evicted
    // it meanwhile (the caller then stops serving it).
    static bool advance(Conn* conn, Role from, Role to);
    void serve(Conn* conn);
    // Receives one header and checks it for `stage`; false (after a log line
    // for a malformed one) when the connection must be closed. `peer` is
    // empty before HELLO.
    bool readRequest(int fd, ConnStage stage, const Deadline& deadline,
                     const std::string& peer, FrameHeader* header);
    void serveControl(Conn* conn, const std::string& peer);
    void serveData(int fd, uint32_t rail, const std::string& peer);
    // Each returns false when the connection must be closed.
    bool handlePut(int fd, uint32_t rail, const FrameHeader& request,
                   std::vector<char>* drain);
    bool handleGet(int fd, uint32_t rail, const FrameHeader& request);
    // Sends one GET_DATA frame straight from the published buffer, each
    // send() inside `access`, followed in the same sendmsg() by `done` (the
    // successful GET_DONE, for the last frame; may be null). A withdrawal
    // sets *status to MPCOMM_ERR_REMOTE_ACCESS (the frame is then skipped,
    // or zero-filled if it had started, and `done` is not sent); *done_sent
    // tells whether it was. False when the connection must be closed.
    bool sendGetData(int fd, const FrameHeader& data, const char* source,
                     const uint8_t* done, MemoryTable::Access* access,
                     int* status, bool* done_sent);
    bool finishRequest(int fd, const FrameHeader& request, const char* op,
                       MsgType reply, int status);
    Deadline idleDeadline() const { return Deadline::in(idle_timeout_ms_); }

    const std::string host_id_;
    const uint32_t rails_;
    const RequestLimits limits_;
    const int idle_timeout_ms_;
    const int max_connections_;
    const int send_buffer_bytes_;
    MemoryTable* const memory_;
    int listen_fd_ = -1;
    int wake_pipe_[2] = {-1, -1};

    std::mutex accept_mu_;  // serialises start/stop of the accept thread
    std::thread accept_thread_;

    std::mutex conns_mu_;
    bool closing_ = false;
    uint64_t refused_in_a_row_ = 0;  // so a refusal burst logs once
    std::list<std::unique_ptr<Conn>> conns_;
};

}  // namespace detail
}  // namespace mpcomm
