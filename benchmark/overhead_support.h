// What tent_transport_overhead and tent_provider_overhead share: a segment
// fetcher that answers from managers in this process, one batch through
// the Transport API, the per-request counter both report, and their
// main().
#pragma once

#include <benchmark/benchmark.h>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kit/descriptor_fetcher.h"
#include "tent/runtime/segment_manager.h"
#include "tent/runtime/transport.h"

namespace mooncake::tent::bench {

// Answers a descriptor request with another in-process SegmentManager's
// published snapshot (tests/kit/descriptor_fetcher.h).
using InProcessFetcher = testing::DescriptorFetcher;

// One batch through the Transport API: allocate a sub-batch, submit every
// request in one call, poll each task until it leaves PENDING (yielding
// between polls, as tebench does, so that a provider's threads get the
// cores of a small host), free the sub-batch. "" on success.
inline std::string runTransportBatch(Transport& transport,
                                     const std::vector<Request>& requests) {
    Transport::SubBatchRef batch = nullptr;
    Status s = transport.allocateSubBatch(batch, requests.size());
    if (s.ok()) s = transport.submitTransferTasks(batch, requests);
    TransferStatus status;
    status.s = COMPLETED;
    for (size_t t = 0; s.ok() && status.s == COMPLETED && t < requests.size();
         ++t) {
        for (;;) {
            s = transport.getTransferStatus(batch, static_cast<int>(t), status);
            if (!s.ok() || status.s != PENDING) break;
            std::this_thread::yield();
        }
    }
    if (batch != nullptr) transport.freeSubBatch(batch);
    if (!s.ok()) return s.ToString();
    if (status.s != COMPLETED) {
        return std::string("transfer ended ") + transferStatusName(status.s);
    }
    return "";
}

// Counts per-request time: iteration time (CPU time, or wall time for a
// case that asks for UseRealTime()) divided by the batch size.
inline void reportPerRequest(benchmark::State& state, int batch) {
    state.SetItemsProcessed(state.iterations() * batch);
    state.counters["per_request"] = benchmark::Counter(
        batch, benchmark::Counter::kIsIterationInvariantRate |
                   benchmark::Counter::kInvert);
}

// A benchmark program's main(): runs the cases, then `teardown` (which
// uninstalls what the cases built) while glog and the runtime are still
// up. The transport and the provider log every install and connection at
// INFO; only warnings show unless --minloglevel says otherwise.
inline int runBenchmarks(int argc, char** argv,
                         const std::function<void()>& teardown) {
    FLAGS_logtostderr = true;
    FLAGS_minloglevel = google::GLOG_WARNING;
    benchmark::Initialize(&argc, argv);
    gflags::ParseCommandLineFlags(&argc, &argv, true);
    google::InitGoogleLogging(argv[0]);
    benchmark::RunSpecifiedBenchmarks();
    teardown();
    benchmark::Shutdown();
    return 0;
}

}  // namespace mooncake::tent::bench
