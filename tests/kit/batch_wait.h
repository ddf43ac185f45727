// Bounded wait for every task of a batch to leave PENDING.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "kit/wait_until.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent::testing {

// Polls the status of tasks 0..states.size()-1 of `batch` into `states`
// until none is PENDING (then true) or `bound` passes (then false). A status
// read that fails counts as not final, so it ends as a timeout.
inline bool waitTasksFinal(TransferEngine& engine, BatchID batch,
                           std::vector<TransferStatus>& states,
                           std::chrono::milliseconds bound = kWaitBound) {
    return waitUntil(
        [&] {
            for (size_t k = 0; k < states.size(); ++k) {
                if (!engine.getTransferStatus(batch, k, states[k]).ok()) {
                    return false;
                }
                if (states[k].s == PENDING) return false;
            }
            return true;
        },
        bound);
}

// Cancels the even tasks of `batch` while another thread polls the batch's
// overall status, then waits as waitTasksFinal() does; the poller is joined
// before it returns. True when every task left PENDING within `bound`.
inline bool cancelEvenTasksWhilePolling(
    TransferEngine& engine, BatchID batch, std::vector<TransferStatus>& states,
    std::chrono::milliseconds bound = kWaitBound) {
    std::atomic<bool> stop{false};
    std::thread poller([&] {
        while (!stop.load()) {
            TransferStatus overall;
            (void)engine.getTransferStatus(batch, overall);
        }
    });
    for (size_t k = 0; k < states.size(); k += 2) {
        (void)engine.cancelTransfer(batch, k);
    }
    const bool settled = waitTasksFinal(engine, batch, states, bound);
    stop = true;
    poller.join();
    return settled;
}

}  // namespace mooncake::tent::testing
