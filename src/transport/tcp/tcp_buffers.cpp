#include "transport/tcp/tcp_buffers.h"

#include <glog/logging.h>
#include <sys/socket.h>

#include <chrono>
#include <sstream>

namespace mooncake::tent {

std::string hexRange(uint64_t addr, uint64_t length) {
    std::ostringstream os;
    os << "[0x" << std::hex << addr << ", +0x" << length << ")";
    return os.str();
}

TcpBufferTable::Pin::Pin(TcpBufferTable* table, std::shared_ptr<Entry> entry,
                         int fd)
    : table_(table), entry_(std::move(entry)), fd_(fd) {}

TcpBufferTable::Pin::Pin(Pin&& other) noexcept
    : table_(other.table_), entry_(std::move(other.entry_)), fd_(other.fd_) {
    other.table_ = nullptr;
}

TcpBufferTable::Pin::~Pin() { release(); }

void TcpBufferTable::Pin::release() {
    if (entry_) table_->unpin(*entry_, fd_);
    entry_.reset();
}

bool TcpBufferTable::Pin::retiring() const {
    return entry_ && entry_->retiring.load(std::memory_order_acquire);
}

bool TcpBufferTable::Pin::device() const { return entry_ && entry_->device; }

Status TcpBufferTable::add(uint64_t base, uint64_t length, bool device) {
    if (length > UINT64_MAX - base) {
        return Status::InvalidArgument("buffer " + hexRange(base, length) +
                                       " wraps past the end of the address "
                                       "space");
    }
    auto entry = std::make_shared<Entry>();
    entry->base = base;
    entry->length = length;
    entry->device = device;
    std::lock_guard<std::mutex> lock(mu_);
    // A replaced entry keeps its in-flight pins: they hold it alive and
    // unpin against it, and no new access can find it.
    buffers_[base] = std::move(entry);
    return Status::OK();
}

TcpBufferTable::Pin TcpBufferTable::pin(uint64_t addr, uint64_t length,
                                        int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    // The candidate is the buffer with the greatest base <= addr;
    // overlapping registrations are not merged, so a range spanning two
    // buffers is refused. Written without addr + length so that a range
    // near 2^64 cannot wrap around and appear contained.
    auto it = buffers_.upper_bound(addr);
    if (it == buffers_.begin()) return Pin();
    --it;
    const Entry& e = *it->second;
    uint64_t offset = addr - e.base;
    if (offset > e.length || length > e.length - offset) return Pin();
    it->second->fds.insert(fd);
    ++active_;
    return Pin(this, it->second, fd);
}

void TcpBufferTable::unpin(Entry& entry, int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entry.fds.find(fd);
    if (it != entry.fds.end()) entry.fds.erase(it);
    --active_;
    // Only remove() waits, and only for an entry it retired.
    if (entry.fds.empty() && entry.retiring.load()) released_.notify_all();
}

Status TcpBufferTable::remove(uint64_t base, uint64_t length, int wait_ms,
                              int leave_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = buffers_.find(base);
    if (it == buffers_.end()) {
        return Status::InvalidArgument("tcp transport has no buffer at " +
                                       hexRange(base, length));
    }
    std::shared_ptr<Entry> entry = std::move(it->second);
    buffers_.erase(it);
    entry->retiring.store(true, std::memory_order_release);
    auto idle = [&] { return entry->fds.empty(); };
    const auto bound = std::chrono::milliseconds(wait_ms);
    if (released_.wait_for(lock, bound, idle)) return Status::OK();
    // Still in flight after the bound: a peer stalled mid-request. Its
    // socket stays open while it holds the pin (the server closes it only
    // after the handler returns), so shutting it down is safe and makes
    // the blocked recv()/send() return at once.
    LOG(WARNING) << "TcpTransport: unregistering buffer "
                 << hexRange(entry->base, entry->length) << ": "
                 << entry->fds.size()
                 << " peer access(es) still in flight after "
                    "transports/tcp/unregister_wait_ms="
                 << wait_ms << " ms; closing their connections";
    for (int fd : entry->fds) ::shutdown(fd, SHUT_RDWR);
    // From here no peer is waited for, only our own serving threads, which
    // leave as soon as they are scheduled: a bound of its own, since
    // wait_ms (patience with peers, possibly a few ms) would turn a busy
    // host into a failure.
    const auto leave_bound = std::chrono::milliseconds(leave_ms);
    if (released_.wait_for(lock, leave_bound, idle)) return Status::OK();
    return Status::InternalError(
        "tcp transport: buffer " + hexRange(entry->base, entry->length) +
        " is still accessed by " + std::to_string(entry->fds.size()) +
        " connection(s) transports/tcp/unregister_timeout_ms=" +
        std::to_string(leave_ms) + " ms after shutting them down");
}

size_t TcpBufferTable::activeAccesses() const {
    std::lock_guard<std::mutex> lock(mu_);
    return active_;
}

}  // namespace mooncake::tent
