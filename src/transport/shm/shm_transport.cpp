#include "tent/transport/shm/shm_transport.h"

#include <glog/logging.h>
#include <unistd.h>

#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tent/runtime/memory_location.h"
#include "tent/runtime/segment_manager.h"
#include "transport/shm/shm_guarded_copy.h"
#include "transport/shm/shm_mapping_cache.h"
#include "transport/shm/shm_object.h"
#include "transport/sub_batch_ops.h"

namespace mooncake::tent {

// Copies run in submitTransferTasks(), so a task's state is final before
// the call returns; the lock only orders submit against status reads
// from other threads.
struct ShmTransport::SubBatchImpl : public Transport::SubBatch {
    explicit SubBatchImpl(size_t cap) : capacity(cap) {}
    size_t size() const override {
        std::lock_guard<std::mutex> lock(mu);
        return states.size();
    }
    const size_t capacity;
    mutable std::mutex mu;
    std::vector<TransferStatus> states;
    // The requests of the tasks that read FAILED, by task id, for a
    // failover to re-issue.
    std::vector<std::pair<size_t, Request>> failed;
};

namespace {

// `read` of one of this transport's sub-batches, under its lock, once
// `task_id` is known to be one of its tasks.
template <typename Sub, typename Read>
Status readTask(Transport::SubBatchRef batch, int task_id, Read read) {
    Sub* sub = nullptr;
    CHECK_STATUS(subBatchOf("shm", batch, sub));
    std::lock_guard<std::mutex> lock(sub->mu);
    CHECK_STATUS(checkTaskId("shm", task_id, sub->states.size()));
    return read(*sub);
}

std::string hex(uint64_t v) {
    std::ostringstream os;
    os << "0x" << std::hex << v;
    return os.str();
}

// "[0x<addr>, +0x<length>)", as the other transports write ranges.
std::string rangeText(uint64_t addr, uint64_t length) {
    std::ostringstream os;
    os << "[0x" << std::hex << addr << ", +0x" << length << ")";
    return os.str();
}

const char* probeText(ShmObject::Probe p) {
    switch (p) {
        case ShmObject::Probe::kUnlinked:
            return "was unlinked";
        case ShmObject::Probe::kReplaced:
            return "was replaced by another object of that name";
        case ShmObject::Probe::kCreatorGone:
            return "has no live creator";
        default:
            return "is live";
    }
}

}  // namespace

ShmTransport::ShmTransport() : cache_(std::make_unique<ShmMappingCache>()) {}

ShmTransport::ShmTransport(size_t max_mapped_per_target)
    : cache_(std::make_unique<ShmMappingCache>(max_mapped_per_target)) {}

ShmTransport::~ShmTransport() { uninstall(); }

Status ShmTransport::install(std::string& local_segment_name,
                             std::shared_ptr<ControlService> metadata,
                             std::shared_ptr<Topology> local_topology,
                             std::shared_ptr<Config> conf) {
    if (installed_.load()) {
        return Status::InvalidArgument("shm transport is already installed");
    }
    if (!metadata) {
        return Status::InvalidArgument(
            "shm transport needs the engine's ControlService to publish its "
            "user id");
    }
    SegmentManager& segments = metadata->segmentManager();
    const std::string uid = std::to_string(geteuid());
    Status s = segments.updateLocal([&](SegmentDesc& desc) {
        desc.getMemory().transport_attrs[SHM] = uid;
        return Status::OK();
    });
    if (s.ok()) s = segments.synchronizeLocal();
    if (!s.ok()) {
        return Status(s.code(), "shm transport cannot publish its user id: " +
                                    std::string(s.message()));
    }
    metadata_ = std::move(metadata);
    caps = Capabilities();
    caps.dram_to_dram = true;
    refetches_.store(0);
    installed_.store(true);
    LOG(INFO) << "ShmTransport: same-host copies for uid " << uid;
    return Status::OK();
}

Status ShmTransport::uninstall() {
    if (!installed_.exchange(false)) return Status::OK();
    // Copies run inside submitTransferTasks(), which the engine has
    // stopped calling; pins still held keep their mappings until released.
    cache_->clear();
    return Status::OK();
}

Status ShmTransport::allocateLocalMemory(void** addr, size_t size,
                                         const MemoryOptions& options) {
    if (!addr) {
        return Status::InvalidArgument("shm allocateLocalMemory: addr is null");
    }
    MemoryLocation where;
    Status s = parseMemoryLocation(options.location, &where);
    if (!s.ok()) {
        return Status::InvalidArgument("shm allocateLocalMemory: " +
                                       std::string(s.message()));
    }
    if (where.device()) {
        return Status::InvalidArgument(
            "shm transport allocates host memory only, not " +
            options.location);
    }
    std::unique_ptr<ShmObject> object;
    CHECK_STATUS(ShmObject::create(size, object));
    void* base = object->addr();
    std::lock_guard<std::mutex> lock(exports_mu_);
    exports_[reinterpret_cast<uint64_t>(base)] = std::move(object);
    *addr = base;
    return Status::OK();
}

Status ShmTransport::freeLocalMemory(void* addr, size_t size) {
    std::unique_ptr<ShmObject> object;
    {
        std::lock_guard<std::mutex> lock(exports_mu_);
        auto it = exports_.find(reinterpret_cast<uint64_t>(addr));
        if (it == exports_.end()) {
            return Status::InvalidArgument(
                "shm freeLocalMemory: " +
                hex(reinterpret_cast<uint64_t>(addr)) +
                " was not allocated by the shm transport");
        }
        object = std::move(it->second);
        exports_.erase(it);
    }
    // Unmapped and unlinked here, outside the lock.
    object.reset();
    return Status::OK();
}

std::string ShmTransport::objectNameOf(const void* addr) const {
    std::lock_guard<std::mutex> lock(exports_mu_);
    auto it = exports_.find(reinterpret_cast<uint64_t>(addr));
    return it == exports_.end() ? std::string() : it->second->name();
}

size_t ShmTransport::mappedObjects(SegmentID target) const {
    return cache_->mapped(target);
}

Status ShmTransport::addMemoryBuffer(BufferDesc& desc,
                                     const MemoryOptions& options) {
    if (desc.length == 0) {
        return Status::InvalidArgument("shm transport cannot register " +
                                       rangeText(desc.addr, desc.length) +
                                       ": length is zero");
    }
    // Peers map what shm registers as host memory; device memory at the
    // same address would be a different thing.
    MemoryLocation where;
    Status parsed = parseMemoryLocation(desc.location, &where);
    if (!parsed.ok()) {
        return Status::InvalidArgument("shm transport cannot register " +
                                       rangeText(desc.addr, desc.length) +
                                       ": " + std::string(parsed.message()));
    }
    if (where.device()) {
        return Status::InvalidArgument(
            "shm transport cannot register " +
            rangeText(desc.addr, desc.length) + ": it is device memory at " +
            desc.location + "; shm carries host memory only");
    }
    std::lock_guard<std::mutex> lock(exports_mu_);
    // The allocation at or below desc.addr, and the next one above it.
    auto above = exports_.upper_bound(desc.addr);
    if (above != exports_.end() && above->first - desc.addr < desc.length) {
        return Status::InvalidArgument(
            "shm transport cannot register " +
            rangeText(desc.addr, desc.length) +
            ": it runs into shared "
            "allocation " +
            above->second->name() + " at " + hex(above->first) +
            "; register from that allocation's base instead");
    }
    if (above == exports_.begin()) return Status::OK();  // not shared memory
    auto at = std::prev(above);
    const ShmObject& object = *at->second;
    const uint64_t offset = desc.addr - at->first;
    if (offset >= object.length()) return Status::OK();  // not shared memory
    // Both refusals name the range and the allocation it falls in.
    auto refuse = [&](const std::string& relation, const std::string& tail) {
        return Status::InvalidArgument(
            "shm transport cannot register " +
            rangeText(desc.addr, desc.length) + ": " + relation +
            " shared allocation " + object.name() + " at " + hex(at->first) +
            " (length " + std::to_string(object.length()) + ")" + tail);
    };
    if (offset != 0) {
        return refuse("a sub-range of",
                      "; only a prefix starting at its base can be registered");
    }
    if (desc.length > object.length()) {
        return refuse(
            "it overflows",
            " by " + std::to_string(desc.length - object.length()) + " bytes");
    }
    desc.shm_path = object.name();
    for (TransportType t : desc.transports) {
        if (t == SHM) return Status::OK();
    }
    desc.transports.push_back(SHM);
    return Status::OK();
}

Status ShmTransport::removeMemoryBuffer(BufferDesc& desc) {
    // Nothing to fence: peers copy into the object by themselves, and the
    // object lives until freeLocalMemory() unlinks it.
    return Status::OK();
}

Status ShmTransport::allocateSubBatch(SubBatchRef& batch, size_t max_size) {
    return newSubBatch<SubBatchImpl>("shm", batch, max_size);
}

Status ShmTransport::freeSubBatch(SubBatchRef& batch) {
    return deleteSubBatch<SubBatchImpl>(batch);
}

Status ShmTransport::recycleSubBatch(SubBatchRef& batch, size_t max_size) {
    auto* sub = static_cast<SubBatchImpl*>(batch);
    if (sub == nullptr || sub->capacity != max_size) {
        return Transport::recycleSubBatch(batch, max_size);
    }
    // Copies finish inside submitTransferTasks(): no task is in flight.
    std::lock_guard<std::mutex> lock(sub->mu);
    sub->states.clear();
    sub->failed.clear();
    return Status::OK();
}

Status ShmTransport::submitTransferTasks(
    SubBatchRef batch, const std::vector<Request>& request_list) {
    SubBatchImpl* sub = nullptr;
    CHECK_STATUS(subBatchOf("shm", batch, sub));
    if (!installed_.load()) {
        return Status::InvalidArgument("shm transport is not installed");
    }
    size_t first = 0;
    {
        std::lock_guard<std::mutex> lock(sub->mu);
        CHECK_STATUS(checkSubBatchRoom("shm", sub->states.size(),
                                       request_list.size(), sub->capacity));
        first = sub->states.size();
        sub->states.resize(first + request_list.size(),
                           TransferStatus{PENDING, 0});
    }
    for (size_t i = 0; i < request_list.size(); ++i) {
        Status s = copyOne(request_list[i]);
        if (!s.ok()) {
            LOG(WARNING) << "ShmTransport: task failed: " << s.message();
        }
        std::lock_guard<std::mutex> lock(sub->mu);
        sub->states[first + i] =
            s.ok() ? TransferStatus{COMPLETED, request_list[i].length}
                   : TransferStatus{FAILED, 0};
        if (!s.ok()) sub->failed.emplace_back(first + i, request_list[i]);
    }
    return Status::OK();
}

Status ShmTransport::getTaskRequest(SubBatchRef batch, int task_id,
                                    Request& request) {
    return readTask<SubBatchImpl>(batch, task_id, [&](SubBatchImpl& sub) {
        for (const auto& [id, kept] : sub.failed) {
            if (id == static_cast<size_t>(task_id)) {
                request = kept;
                return Status::OK();
            }
        }
        return Status::InvalidArgument(
            "shm: task " + std::to_string(task_id) +
            " did not fail, and only a failed task's request is kept");
    });
}

Status ShmTransport::getTransferStatus(SubBatchRef batch, int task_id,
                                       TransferStatus& status) {
    return readTask<SubBatchImpl>(batch, task_id, [&](SubBatchImpl& sub) {
        status = sub.states[task_id];
        return Status::OK();
    });
}

Status ShmTransport::copyOne(const Request& r) {
    CHECK_STATUS(checkRequest(r));
    SegmentManager& segments = metadata_->segmentManager();
    SegmentDescRef desc;
    CHECK_STATUS(segments.getRemoteCached(desc, r.target_id));
    bool stale = false;
    Status s = copyWith(r, *desc, stale);
    if (!stale) return s;
    // The mapping was dropped: the peer freed (and perhaps reallocated)
    // the memory. One fresh read of its descriptor says where it is now.
    refetches_.fetch_add(1);
    desc.reset();
    Status fetched = segments.getRemote(desc, r.target_id);
    if (!fetched.ok()) {
        return Status(fetched.code(), std::string(s.message()) +
                                          "; reading the descriptor again "
                                          "failed: " +
                                          std::string(fetched.message()));
    }
    return copyWith(r, *desc, stale);
}

Status ShmTransport::copyWith(const Request& r, const SegmentDesc& desc,
                              bool& stale) {
    stale = false;
    if (desc.type != SegmentType::Memory) {
        return Status::InvalidArgument("segment " + desc.name +
                                       " is a file segment");
    }
    const BufferDesc* buf = desc.findBuffer(r.target_offset, r.length);
    if (!buf) {
        return Status::InvalidArgument("no buffer of segment " + desc.name +
                                       " contains " +
                                       rangeText(r.target_offset, r.length));
    }
    if (buf->shm_path.empty()) {
        return Status::InvalidArgument(
            "buffer " + rangeText(buf->addr, buf->length) + " of segment " +
            desc.name + " is not shared memory");
    }
    ShmMappingCache::Pin pin;
    Status s = cache_->acquire(r.target_id, buf->shm_path, buf->length, pin);
    if (!s.ok()) {
        stale = true;  // gone between the descriptor and the open
        return s;
    }
    ShmObject::Probe probe = pin->probe();
    if (probe != ShmObject::Probe::kLive) {
        cache_->drop(r.target_id, buf->shm_path);
        stale = true;
        return Status::InvalidArgument("shm object " + buf->shm_path +
                                       " of segment " + desc.name + " " +
                                       probeText(probe));
    }
    char* peer =
        static_cast<char*>(pin->addr()) + (r.target_offset - buf->addr);
    // Guarded: a process of this user may shrink the object under the
    // copy, and an unguarded touch past its end is SIGBUS in this process.
    CopyFault fault;
    const bool copied = r.opcode == Request::WRITE
                            ? guardedCopy(peer, r.source, r.length, fault)
                            : guardedCopy(r.source, peer, r.length, fault);
    if (copied) return Status::OK();
    const auto base = reinterpret_cast<uintptr_t>(pin->addr());
    if (fault.addr >= base && fault.addr - base < pin->length()) {
        // The mapping is useless now; the next copy opens the object again
        // and is told its size.
        cache_->drop(r.target_id, buf->shm_path);
        return Status::InvalidArgument(
            "shm object " + buf->shm_path + " of segment " + desc.name +
            " shrank under the " +
            (r.opcode == Request::WRITE ? "write" : "read") +
            ": SIGBUS at byte " + std::to_string(fault.addr - base) +
            " of its " + std::to_string(pin->length()) +
            " mapped bytes; the task failed part way");
    }
    return Status::InvalidArgument(
        "the local buffer " +
        rangeText(reinterpret_cast<uint64_t>(r.source), r.length) +
        " of a copy with shm object " + buf->shm_path + " raised SIGBUS at " +
        hex(fault.addr) +
        " (a truncated file or shm mapping); the task failed part way");
}

}  // namespace mooncake::tent
