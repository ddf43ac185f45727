// DescriptorFetcher: the one SegmentFetcher of the suites and the overhead
// benchmarks. It answers a descriptor request, in this order:
//
//   failNext()       the next fetch fails with RpcServiceError naming the
//                    segment, as an unreachable peer's would;
//   add(name, sm)    `name` resolves to that in-process SegmentManager's
//                    published snapshot, the way the p2p metadata RPC would
//                    with a real peer;
//   the synthesizer  any other name gets a descriptor the test describes
//                    (fixedEndpoint(), numberedFetches(), or its own);
//                    without one, MetadataError naming the segment.
//
// Every call is counted, failed ones too.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "tent/runtime/segment_manager.h"

namespace mooncake::tent::testing {

class DescriptorFetcher : public SegmentFetcher {
 public:
    // Fills `out` (already cleared, `out.name` set) for segment `name`;
    // `call` is this fetch's number, counting from 1.
    using Synthesizer = std::function<void(const std::string& name, int call,
                                           SegmentDesc& out)>;

    DescriptorFetcher() = default;
    explicit DescriptorFetcher(Synthesizer synthesize)
        : synthesize_(std::move(synthesize)) {}

    // Every name is a segment whose `type` endpoint is `endpoint`; an empty
    // one publishes no endpoint at all.
    static std::shared_ptr<DescriptorFetcher> fixedEndpoint(
        TransportType type, std::string endpoint);
    // Every name is a segment whose TCP attribute is "fetch#<call>", so a
    // test sees which fetch produced the descriptor it holds.
    static std::shared_ptr<DescriptorFetcher> numberedFetches();

    // Later fetches of `name` read `sm`'s published descriptor.
    void add(const std::string& name, std::shared_ptr<SegmentManager> sm);
    void failNext() { fail_next_ = true; }
    Status fetch(const std::string& name, SegmentDesc& out) override;

    int calls() const { return fetches.load(); }
    // Every fetch() call; read by tests while submitting threads fetch.
    std::atomic<int> fetches{0};

 private:
    std::mutex mu_;
    // Weak: the managers own this fetcher, so strong references would form
    // a cycle and leak both.
    std::map<std::string, std::weak_ptr<SegmentManager>> peers_;
    Synthesizer synthesize_;
    std::atomic<bool> fail_next_{false};
};

}  // namespace mooncake::tent::testing
