// The target side: the handshake listener, its accept thread, and one
// thread per accepted connection serving HELLO, QUERY and one-sided
// PUT / GET requests against the MemoryTable.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "memory_table.h"
#include "protocol.h"

namespace mpcomm {
namespace detail {

class Server {
 public:
    Server(std::string host_id, uint32_t rails, MemoryTable* memory);
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
    struct Conn {
        int fd = -1;
        std::thread thread;
        std::atomic<bool> finished{false};
    };

    void acceptLoop();
    void reapFinished();
    void serve(Conn* conn);
    void serveControl(int fd);
    void serveData(int fd, uint32_t rail);
    // Each returns false when the connection must be closed.
    bool handlePut(int fd, uint32_t rail, const FrameHeader& request);
    bool handleGet(int fd, uint32_t rail, const FrameHeader& request);

    const std::string host_id_;
    const uint32_t rails_;
    MemoryTable* const memory_;
    int listen_fd_ = -1;
    int wake_pipe_[2] = {-1, -1};

    std::mutex accept_mu_;  // serialises start/stop of the accept thread
    std::thread accept_thread_;

    std::mutex conns_mu_;
    bool closing_ = false;
    std::list<std::unique_ptr<Conn>> conns_;
};

}  // namespace detail
}  // namespace mpcomm
