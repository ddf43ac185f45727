// TcpTransport: the embedded default data path (plain POSIX sockets).
//
// Target side: a listener on 0.0.0.0 (ephemeral port) whose endpoint
// "<host>:<port>" is published under transport_attrs[TCP]. Each accepted
// connection is served by its own thread, one frame at a time; a frame's
// remote range must lie wholly within ONE buffer registered here, else the
// request is refused with an error reply and no memory is touched.
//
// Initiator side: submitted tasks go to a queue drained by a small worker
// pool; each worker keeps one connection per peer endpoint, so up to
// `transports/tcp/workers` requests are in flight. A task's state is an
// atomic that getTransferStatus() polls. Every socket operation is bounded
// by `transports/tcp/timeout_ms`; a dropped connection fails the task on it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "tent/runtime/transport.h"

namespace mooncake::tent {

class TcpTransport : public Transport {
 public:
    TcpTransport();
    ~TcpTransport() override;

    Status install(std::string& local_segment_name,
                   std::shared_ptr<ControlService> metadata,
                   std::shared_ptr<Topology> local_topology,
                   std::shared_ptr<Config> conf = nullptr) override;
    Status uninstall() override;

    Status allocateSubBatch(SubBatchRef& batch, size_t max_size) override;
    Status freeSubBatch(SubBatchRef& batch) override;
    Status submitTransferTasks(
        SubBatchRef batch, const std::vector<Request>& request_list) override;
    Status getTransferStatus(SubBatchRef batch, int task_id,
                             TransferStatus& status) override;

    Status addMemoryBuffer(BufferDesc& desc,
                           const MemoryOptions& options) override;
    Status removeMemoryBuffer(BufferDesc& desc) override;

    const char* getName() const override { return "tcp"; }

    // The endpoint published in transport_attrs[TCP]; empty before install.
    std::string endpoint() const { return endpoint_; }
    uint16_t listenPort() const { return listen_port_; }

    // Shared with the task worker and the connection server (tcp_*.cpp).
    struct Task;
    struct Settings {
        int timeout_ms = 5000;
        int workers = 4;
    };

 private:
    void acceptLoop();
    void serveConnection(int fd, std::shared_ptr<std::atomic<bool>> done);
    void reapServers();
    void workerLoop();
    void runTask(Task& task, std::map<std::string, int>& connections);
    // True when [addr, addr+length) lies within one registered buffer.
    bool rangeRegistered(uint64_t addr, uint64_t length) const;
    // False once uninstall() began: the caller closes the socket itself.
    bool trackSocket(int fd);
    void untrackSocket(int fd);
    void failQueued();

    Settings settings_;
    std::shared_ptr<ControlService> metadata_;
    std::string endpoint_;
    uint16_t listen_port_ = 0;
    int listen_fd_ = -1;
    std::atomic<bool> running_{false};

    // Registered ranges: base -> length. Held shared while a server
    // thread touches the memory so removeMemoryBuffer() waits for it.
    mutable std::shared_mutex buffers_mu_;
    std::map<uint64_t, uint64_t> buffers_;

    std::thread acceptor_;
    std::mutex conn_mu_;
    // One thread per accepted connection; `done` is set as it exits so
    // acceptLoop() can join finished ones instead of accumulating them.
    struct Server {
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> done;
    };
    std::vector<Server> servers_;
    // Every open socket (served and dialled), so uninstall() can shut them
    // down and unblock the threads waiting on them.
    std::set<int> sockets_;

    std::mutex queue_mu_;
    std::condition_variable queue_cv_;
    std::deque<std::shared_ptr<Task>> queue_;
    std::vector<std::thread> workers_;
};

}  // namespace mooncake::tent
