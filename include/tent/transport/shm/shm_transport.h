// ShmTransport: same-host DRAM copies over POSIX shared memory
// (docs/shm.md). Opt-in: transports/shm/enable, default false.
//
// Exporter side: with shm loaded, the engine's allocateLocalMemory() (and
// allocateSharedMemory()) on host memory comes from allocateLocalMemory()
// here: a POSIX object /mooncake_<pid>_<8 hex>, mode 0600, mapped and held
// until freeLocalMemory() unmaps and unlinks it. Registering that memory
// publishes the object's name in BufferDesc::shm_path. A registration must
// start at the allocation's base (a shorter prefix is fine); a sub-range
// or a range running past the allocation is refused, naming both. Memory
// not allocated here (malloc) is left to the other transports: it is
// accepted without SHM in its transports, so shm is never chosen for it.
//
// Initiator side: the peer's object named by the target buffer's shm_path
// is mapped (ShmMappingCache: at most 32 per target, pinned while a copy
// runs), the peer address relocated into the mapping, and the bytes
// memcpy'd in submitTransferTasks(): a task is settled when that returns.
// Before each copy the object is probed; one unlinked, replaced or whose
// creator died is dropped and the descriptor is fetched again, once.
// Same host and same user only: the transport publishes its effective uid
// in transport_attrs[SHM], and routing picks shm only for a peer on this
// machine publishing the same one.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "tent/runtime/transport.h"

namespace mooncake::tent {

class ShmObject;
class ShmMappingCache;

class ShmTransport : public Transport {
 public:
    ShmTransport();
    ~ShmTransport() override;

    Status install(std::string& local_segment_name,
                   std::shared_ptr<ControlService> metadata,
                   std::shared_ptr<Topology> local_topology,
                   std::shared_ptr<Config> conf = nullptr) override;
    Status uninstall() override;

    Status allocateSubBatch(SubBatchRef& batch, size_t max_size) override;
    Status freeSubBatch(SubBatchRef& batch) override;
    // Same capacity: the states are emptied, nothing is allocated.
    Status recycleSubBatch(SubBatchRef& batch, size_t max_size) override;
    Status submitTransferTasks(
        SubBatchRef batch, const std::vector<Request>& request_list) override;
    Status getTransferStatus(SubBatchRef batch, int task_id,
                             TransferStatus& status) override;
    // Kept for the failed tasks only: a copy that succeeds keeps nothing.
    bool keepsTaskRequests() const override { return true; }
    Status getTaskRequest(SubBatchRef batch, int task_id,
                          Request& request) override;

    Status addMemoryBuffer(BufferDesc& desc,
                           const MemoryOptions& options) override;
    Status removeMemoryBuffer(BufferDesc& desc) override;

    Status allocateLocalMemory(void** addr, size_t size,
                               const MemoryOptions& options) override;
    Status freeLocalMemory(void* addr, size_t size) override;

    const char* getName() const override { return "shm"; }

    // The object name behind an allocation made here ("" for other memory).
    std::string objectNameOf(const void* addr) const;
    // Peer objects mapped for `target` now.
    size_t mappedObjects(SegmentID target) const;
    // Descriptor re-reads caused by a stale mapping, since install.
    uint64_t refetches() const { return refetches_.load(); }

    // For tests: the mapping cache's bound per target.
    explicit ShmTransport(size_t max_mapped_per_target);
    struct SubBatchImpl;

 private:
    // Copies one request; the error says why it could not.
    Status copyOne(const Request& request);
    // One look-up + probe + memcpy against `desc`; `stale` says the
    // mapping was dropped and a fresh descriptor may succeed.
    Status copyWith(const Request& request, const SegmentDesc& desc,
                    bool& stale);

    std::shared_ptr<ControlService> metadata_;
    std::atomic<bool> installed_{false};
    std::unique_ptr<ShmMappingCache> cache_;
    std::atomic<uint64_t> refetches_{0};

    mutable std::mutex exports_mu_;
    // Allocations made here, by base address.
    std::map<uint64_t, std::unique_ptr<ShmObject>> exports_;
};

}  // namespace mooncake::tent
