#include "transfer_table.h"

namespace mpcomm {
namespace detail {

void Transfer::sliceDone(int status) {
    if (status != MPCOMM_SUCCESS) {
        int expected = MPCOMM_SUCCESS;
        error_.compare_exchange_strong(expected, status,
                                       std::memory_order_relaxed);
    }
    // acq_rel: the last finisher must observe every other slice's error and
    // byte count before publishing completion with a release store.
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1)
        done_.store(true, std::memory_order_release);
}

TransferResult Transfer::result() const {
    TransferResult result;
    result.error_code = error_.load(std::memory_order_relaxed);
    result.bytes_transferred =
        static_cast<size_t>(bytes_.load(std::memory_order_relaxed));
    return result;
}

TransferHandle TransferTable::create(std::shared_ptr<Transfer>* transfer) {
    auto created = std::make_shared<Transfer>();
    std::lock_guard<std::mutex> lock(mu_);
    TransferHandle handle = next_handle_++;
    table_[handle] = created;
    *transfer = std::move(created);
    return handle;
}

TransferHandle TransferTable::createFailed(int error_code) {
    std::shared_ptr<Transfer> transfer;
    TransferHandle handle = create(&transfer);
    transfer->finishPosting(error_code);
    return handle;
}

std::shared_ptr<Transfer> TransferTable::find(TransferHandle handle) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = table_.find(handle);
    return it == table_.end() ? nullptr : it->second;
}

void TransferTable::release(TransferHandle handle) {
    std::lock_guard<std::mutex> lock(mu_);
    table_.erase(handle);
}

size_t TransferTable::size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return table_.size();
}

}  // namespace detail
}  // namespace mpcomm
