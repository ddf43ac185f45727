// ClassicEngine: Mooncake's classic Python TransferEngine (the object that
// `from mooncake import engine; engine.TransferEngine()` gives) on this
// tree's TENT runtime. Method names, arguments and return values follow the
// classic binding; docs/python.md says where and why they differ.
//
// Error convention: the methods raise a StatusError for any refusal (bad
// argument, unknown segment, a range outside registered memory, a closed
// engine, any Status error before a byte moves); the binding
// (classic_module.cpp) logs it and returns classic's sentinel for the
// method (-1, 0, b"", ...). A transfer that was accepted and then failed or
// ran out of time returns the classic negative code (-1; -2 for
// transfer_check_status's timeout) and the runtime logs why. An unknown
// transport_hint raises ValueError, as classic's binding does.
//
// Threads: any method may be called from several Python threads. Waits run
// with the GIL released; the maps of held Python buffers are only touched
// with the GIL held, the segment and batch tables under mu_.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "py_support.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent::classic {

namespace py = pybind11;
using py_support::LocalMemory;

enum class Opcode { kRead = 0, kWrite = 1 };

class ClassicEngine {
 public:
    ClassicEngine();
    ~ClassicEngine();

    int initialize(const std::string& local_hostname,
                   const std::string& metadata_server,
                   const std::string& protocol, const std::string& device_name);
    int initializeExt(const std::string& local_hostname,
                      const std::string& metadata_server,
                      const std::string& protocol,
                      const std::string& device_name,
                      const std::string& metadata_type);
    // Ends the engine (an extension: classic engines end with the object).
    void close();

    int getRpcPort();
    std::string getSegmentName();
    uint64_t allocateManagedBuffer(size_t length);
    int freeManagedBuffer(uint64_t addr, size_t length);

    // `method` is the Python name, which errors name.
    int transferSync(const char* method, const std::string& target,
                     const py::handle& buffer, uint64_t peer_address,
                     std::optional<size_t> length, Opcode opcode,
                     const Notification* notify,
                     const std::string& transport_hint);
    int batchTransferSync(const char* method, const std::string& target,
                          const py::list& buffers,
                          const std::vector<uint64_t>& peer_addresses,
                          std::optional<std::vector<size_t>> lengths,
                          Opcode opcode, const Notification* notify,
                          const std::string& transport_hint);
    uint64_t batchTransferAsync(const char* method, const std::string& target,
                                const py::list& buffers,
                                const std::vector<uint64_t>& peer_addresses,
                                std::optional<std::vector<size_t>> lengths,
                                Opcode opcode,
                                const std::string& transport_hint);
    int getBatchTransferStatus(const std::vector<uint64_t>& batch_ids);
    int transferCheckStatus(uint64_t batch_id);

    int registerMemory(const py::handle& buffer, std::optional<size_t> capacity,
                       const std::string& location);
    int unregisterMemory(const py::handle& buffer);
    int batchRegisterMemory(const py::list& buffers,
                            std::optional<std::vector<size_t>> capacities,
                            const std::string& location);
    int batchUnregisterMemory(const py::list& buffers);

    std::string getLocalTopology(const std::optional<std::string>& device);
    uint64_t getFirstBufferAddress(const std::string& segment_name);
    // Classic's raw-address helpers, limited to memory this engine
    // allocated or registered. `src` is bytes, bytearray, any buffer
    // object, or a str (its UTF-8 bytes), as classic's char* takes.
    int writeBytesToBuffer(uint64_t dest, const py::object& src, size_t length);
    py::bytes readBytesFromBuffer(uint64_t source, size_t length);
    std::vector<Notification> getNotifies();
    int sendProbe(const std::string& peer_server_name);
    std::shared_ptr<TransferEngine> engine(const char* method) const;

 private:
    struct Pending {
        size_t tasks = 0;
        int64_t start_ns = 0;
        int64_t timeout_ns = 0;
    };
    struct Prepared {
        std::shared_ptr<TransferEngine> engine;
        std::vector<LocalMemory> memory;
        std::vector<Request> requests;
        uint64_t total_bytes = 0;
    };

    // Validates everything and resolves the target (GIL held on entry;
    // released around the network). Raises on any refusal.
    Prepared prepare(const char* method, const std::string& target,
                     const py::list& buffers,
                     const std::vector<uint64_t>& peer_addresses,
                     std::optional<std::vector<size_t>> lengths, Opcode opcode,
                     const std::string& transport_hint);
    SegmentID openCached(TransferEngine& engine, const std::string& target,
                         const char* method);
    void checkRemoteRange(TransferEngine& engine, SegmentID handle,
                          const std::string& target, uint64_t addr,
                          uint64_t length, const char* method);
    void checkLocalRange(TransferEngine& engine, uint64_t addr, uint64_t length,
                         const char* method);
    // Polls batch `id` to a final state or the deadline; frees it. Called
    // with the GIL released. 0 or -1.
    int waitAndFree(TransferEngine& engine, BatchID id, const Pending& p);
    void forgetBatch(BatchID id);  // GIL held

    mutable std::mutex mu_;
    std::shared_ptr<TransferEngine> engine_;
    bool closed_ = false;
    std::map<std::string, SegmentID> handles_;
    // allocate_managed_buffer's buffers: address -> length. Only these are
    // freed by free_managed_buffer.
    std::map<uint64_t, size_t> managed_;
    std::map<SegmentID, SegmentInfo> remote_info_;
    std::map<BatchID, Pending> pending_;
    // GIL-protected: views held for async batches and registered objects.
    std::map<BatchID, std::vector<LocalMemory>> batch_memory_;
    std::map<uint64_t, LocalMemory> registered_;
    int64_t transfer_timeout_ns_;
};

// Binds TransferEngine, TransferOpcode, TransferNotify into `m`.
void bindClassicEngine(py::module_& m);

}  // namespace mooncake::tent::classic
