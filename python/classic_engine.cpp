#include "classic_engine.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <thread>

namespace mooncake::tent::classic {

namespace {

using py_support::check;
using py_support::fail;
using Code = Status::Code;

int64_t nowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

std::string hex(uint64_t v) {
    std::ostringstream os;
    os << "0x" << std::hex << v;
    return os.str();
}

// Classic's MC_TRANSFER_TIMEOUT: seconds, at least 5, 30 when unset. A
// wait's deadline adds one ns per byte (1 GiB/s), as classic does.
int64_t transferTimeoutNs() {
    const int64_t kNs = 1000LL * 1000 * 1000;
    const char* env = std::getenv("MC_TRANSFER_TIMEOUT");
    if (env == nullptr) return 30 * kNs;
    return std::max<int64_t>(5, std::atoll(env)) * kNs;
}

TransportType parseHint(const std::string& name, const char* method) {
    if (name.empty()) return UNSPEC;
    TransportType type = parseTransportType(name);
    if (type == UNSPEC && name != "unspec") {
        // A ValueError, not a sentinel: classic's binding throws here too.
        throw py::value_error(
            std::string(method) + ": unknown transport_hint '" + name +
            "' (tcp, mpcomm, shm, rdma, ..., unspec, or empty for none)");
    }
    return type;
}

}  // namespace

ClassicEngine::ClassicEngine() : transfer_timeout_ns_(transferTimeoutNs()) {}

ClassicEngine::~ClassicEngine() {
    std::shared_ptr<TransferEngine> engine;
    {
        std::lock_guard<std::mutex> lock(mu_);
        engine.swap(engine_);
    }
    // The runtime's teardown is bounded but may wait on peers.
    py::gil_scoped_release release;
    engine.reset();
}

std::shared_ptr<TransferEngine> ClassicEngine::engine(
    const char* method) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (!engine_) {
        fail(Code::kInvalidEntry, method,
             closed_ ? "the TransferEngine is closed"
                     : "the TransferEngine is not initialized (call "
                       "initialize() first)");
    }
    return engine_;
}

int ClassicEngine::getRpcPort() {
    return engine("get_rpc_port")->getRpcServerPort();
}

std::string ClassicEngine::getSegmentName() {
    return engine("get_segment_name")->getSegmentName();
}

uint64_t ClassicEngine::allocateManagedBuffer(size_t length) {
    auto eng = engine("allocate_managed_buffer");
    py::gil_scoped_release release;
    void* addr = nullptr;
    check(eng->allocateLocalMemory(&addr, length), "allocate_managed_buffer");
    Status s = eng->registerLocalMemory(addr, length);
    if (!s.ok()) {
        eng->freeLocalMemory(addr);
        check(s, "allocate_managed_buffer");
    }
    std::lock_guard<std::mutex> lock(mu_);
    managed_[reinterpret_cast<uint64_t>(addr)] = length;
    return reinterpret_cast<uint64_t>(addr);
}

int ClassicEngine::freeManagedBuffer(uint64_t addr, size_t length) {
    const char* method = "free_managed_buffer";
    auto eng = engine(method);
    py::gil_scoped_release release;
    {
        // Checked before anything is unregistered: memory the caller
        // registered itself must stay registered.
        std::lock_guard<std::mutex> lock(mu_);
        auto it = managed_.find(addr);
        if (it == managed_.end() || it->second != length) {
            fail(Code::kInvalidArgument, method,
                 "[" + hex(addr) + ", +" + std::to_string(length) +
                     ") is not a buffer allocate_managed_buffer returned");
        }
    }
    void* ptr = reinterpret_cast<void*>(addr);
    check(eng->unregisterLocalMemory(ptr, length), method);
    check(eng->freeLocalMemory(ptr), method);
    std::lock_guard<std::mutex> lock(mu_);
    managed_.erase(addr);
    return 0;
}

SegmentID ClassicEngine::openCached(TransferEngine& engine,
                                    const std::string& target,
                                    const char* method) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = handles_.find(target);
        if (it != handles_.end()) return it->second;
    }
    SegmentID handle = 0;
    // The runtime's message names the segment.
    check(engine.openSegment(handle, target), method);
    std::lock_guard<std::mutex> lock(mu_);
    handles_.emplace(target, handle);
    return handle;
}

void ClassicEngine::checkRemoteRange(TransferEngine& engine, SegmentID handle,
                                     const std::string& target, uint64_t addr,
                                     uint64_t length, const char* method) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = remote_info_.find(handle);
        if (it != remote_info_.end() &&
            py_support::segmentContains(it->second, addr, length)) {
            return;
        }
    }
    // Not in the cached list: the peer may have registered it since.
    SegmentInfo info;
    check(engine.getSegmentInfo(handle, info), method);
    const bool ok = py_support::segmentContains(info, addr, length);
    {
        std::lock_guard<std::mutex> lock(mu_);
        remote_info_[handle] = info;
    }
    if (!ok) {
        fail(Code::kAddressNotRegistered, method,
             "range [" + hex(addr) + ", +" + std::to_string(length) +
                 ") is outside every buffer segment '" + target +
                 "' registered");
    }
}

void ClassicEngine::checkLocalRange(TransferEngine& engine, uint64_t addr,
                                    uint64_t length, const char* method) {
    SegmentInfo info;
    check(engine.getSegmentInfo(LOCAL_SEGMENT_ID, info), method);
    if (!py_support::segmentContains(info, addr, length)) {
        fail(Code::kAddressNotRegistered, method,
             "local range [" + hex(addr) + ", +" + std::to_string(length) +
                 ") is not inside registered memory (register_memory() it "
                 "first)");
    }
}

ClassicEngine::Prepared ClassicEngine::prepare(
    const char* method, const std::string& target, const py::list& buffers,
    const std::vector<uint64_t>& peer_addresses,
    std::optional<std::vector<size_t>> lengths, Opcode opcode,
    const std::string& transport_hint) {
    Prepared p;
    p.engine = engine(method);
    const size_t n = buffers.size();
    if (peer_addresses.size() != n || (lengths && lengths->size() != n)) {
        fail(Code::kInvalidArgument, method,
             "buffers (" + std::to_string(n) + "), peer_buffer_addresses (" +
                 std::to_string(peer_addresses.size()) + ") and lengths (" +
                 (lengths ? std::to_string(lengths->size()) : "None") +
                 ") differ in length");
    }
    const TransportType hint = parseHint(transport_hint, method);
    const char* written_as =
        opcode == Opcode::kRead ? "the destination of a READ" : nullptr;
    for (size_t i = 0; i < n; ++i) {
        std::optional<size_t> length;
        if (lengths) length = (*lengths)[i];
        p.memory.push_back(
            py_support::localMemory(buffers[i], length, written_as, method));
        p.total_bytes += p.memory.back().length;
    }
    py::gil_scoped_release release;
    const SegmentID handle = openCached(*p.engine, target, method);
    for (size_t i = 0; i < n; ++i) {
        const LocalMemory& m = p.memory[i];
        checkLocalRange(*p.engine, m.addr, m.length, method);
        checkRemoteRange(*p.engine, handle, target, peer_addresses[i], m.length,
                         method);
        Request r;
        r.opcode = opcode == Opcode::kRead ? Request::READ : Request::WRITE;
        r.source = reinterpret_cast<void*>(m.addr);
        r.target_id = handle;
        r.target_offset = peer_addresses[i];
        r.length = m.length;
        r.transport_hint = hint;
        p.requests.push_back(r);
    }
    return p;
}

int ClassicEngine::waitAndFree(TransferEngine& engine, BatchID id,
                               const Pending& p) {
    int result = -1;
    for (int polls = 0;; ++polls) {
        TransferStatus overall;
        Status s = engine.getTransferStatus(id, overall);
        if (!s.ok()) {
            LOG(WARNING) << "batch " << id << ": " << s.message();
            break;
        }
        if (overall.s == COMPLETED) {
            result = 0;
            break;
        }
        if (overall.s == FAILED || overall.s == CANCELED ||
            overall.s == INVALID || overall.s == TIMEOUT) {
            LOG(WARNING) << "batch " << id << " ended "
                         << transferStatusName(overall.s);
            break;
        }
        if (nowNs() - p.start_ns > p.timeout_ns) {
            LOG(WARNING) << "batch " << id << " not done within "
                         << p.timeout_ns / 1000000 << " ms";
            break;
        }
        // Poll back-off: spin briefly for short transfers, then 1 ms steps.
        if (polls < 100) {
            std::this_thread::yield();
        } else {
            std::this_thread::sleep_for(
                std::chrono::microseconds(std::min(1000, 10 * (polls - 99))));
        }
    }
    Status s = engine.freeBatch(id);
    if (!s.ok()) LOG(WARNING) << "batch " << id << ": " << s.message();
    std::lock_guard<std::mutex> lock(mu_);
    pending_.erase(id);
    return result;
}

int ClassicEngine::transferSync(const char* method, const std::string& target,
                                const py::handle& buffer, uint64_t peer_address,
                                std::optional<size_t> length, Opcode opcode,
                                const Notification* notify,
                                const std::string& transport_hint) {
    py::list buffers;
    buffers.append(buffer);
    std::optional<std::vector<size_t>> lengths;
    if (length) lengths = std::vector<size_t>{*length};
    return batchTransferSync(method, target, buffers, {peer_address}, lengths,
                             opcode, notify, transport_hint);
}

int ClassicEngine::batchTransferSync(
    const char* method, const std::string& target, const py::list& buffers,
    const std::vector<uint64_t>& peer_addresses,
    std::optional<std::vector<size_t>> lengths, Opcode opcode,
    const Notification* notify, const std::string& transport_hint) {
    Prepared p = prepare(method, target, buffers, peer_addresses, lengths,
                         opcode, transport_hint);
    std::optional<Notification> notifi;
    if (notify) notifi = *notify;
    // p.memory (the held views) outlives the wait: released with the GIL.
    py::gil_scoped_release release;
    BatchID id = p.engine->allocateBatch(p.requests.size());
    if (id == 0) {
        fail(Code::kTooManyRequests, method,
             "cannot allocate a batch of " + std::to_string(p.requests.size()));
    }
    Status s = notifi ? p.engine->submitTransfer(id, p.requests, *notifi)
                      : p.engine->submitTransfer(id, p.requests);
    if (!s.ok()) {
        p.engine->freeBatch(id);
        check(s, method);
    }
    Pending pending{p.requests.size(), nowNs(),
                    transfer_timeout_ns_ + static_cast<int64_t>(p.total_bytes)};
    return waitAndFree(*p.engine, id, pending);
}

uint64_t ClassicEngine::batchTransferAsync(
    const char* method, const std::string& target, const py::list& buffers,
    const std::vector<uint64_t>& peer_addresses,
    std::optional<std::vector<size_t>> lengths, Opcode opcode,
    const std::string& transport_hint) {
    Prepared p = prepare(method, target, buffers, peer_addresses, lengths,
                         opcode, transport_hint);
    BatchID id = 0;
    {
        py::gil_scoped_release release;
        id = p.engine->allocateBatch(p.requests.size());
        if (id == 0) {
            fail(Code::kTooManyRequests, method,
                 "cannot allocate a batch of " +
                     std::to_string(p.requests.size()));
        }
        Status s = p.engine->submitTransfer(id, p.requests);
        if (!s.ok()) {
            p.engine->freeBatch(id);
            check(s, method);
        }
        std::lock_guard<std::mutex> lock(mu_);
        pending_[id] =
            Pending{p.requests.size(), nowNs(),
                    transfer_timeout_ns_ + static_cast<int64_t>(p.total_bytes)};
    }
    // The views stay held until the batch is freed.
    batch_memory_[id] = std::move(p.memory);
    return id;
}

void ClassicEngine::forgetBatch(BatchID id) { batch_memory_.erase(id); }

int ClassicEngine::getBatchTransferStatus(
    const std::vector<uint64_t>& batch_ids) {
    const char* method = "get_batch_transfer_status";
    auto eng = engine(method);
    std::vector<std::pair<BatchID, Pending>> batches;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (uint64_t id : batch_ids) {
            auto it = pending_.find(id);
            if (it == pending_.end()) {
                fail(Code::kInvalidArgument, method,
                     "batch " + std::to_string(id) +
                         " is not a pending batch of this engine");
            }
            batches.emplace_back(id, it->second);
        }
    }
    int result = 0;
    {
        py::gil_scoped_release release;
        for (const auto& [id, pending] : batches) {
            if (waitAndFree(*eng, id, pending) != 0) result = -1;
        }
    }
    for (const auto& batch : batches) forgetBatch(batch.first);
    return result;
}

int ClassicEngine::transferCheckStatus(uint64_t batch_id) {
    const char* method = "transfer_check_status";
    auto eng = engine(method);
    Pending pending;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = pending_.find(batch_id);
        if (it == pending_.end()) {
            fail(Code::kInvalidArgument, method,
                 "batch " + std::to_string(batch_id) +
                     " is not a pending batch of this engine");
        }
        pending = it->second;
    }
    TransferStatus overall;
    {
        py::gil_scoped_release release;
        check(eng->getTransferStatus(batch_id, overall), method);
    }
    if (overall.s == TIMEOUT) return -2;
    if (overall.s != COMPLETED && overall.s != FAILED &&
        overall.s != CANCELED && overall.s != INVALID) {
        return 0;
    }
    int result = 0;
    {
        py::gil_scoped_release release;
        result = waitAndFree(*eng, batch_id, pending);
    }
    forgetBatch(batch_id);
    return result == 0 ? 1 : -1;
}

}  // namespace mooncake::tent::classic
