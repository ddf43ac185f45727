#include "kit/descriptor_fetcher.h"

namespace mooncake::tent::testing {

std::shared_ptr<DescriptorFetcher> DescriptorFetcher::fixedEndpoint(
    TransportType type, std::string endpoint) {
    return std::make_shared<DescriptorFetcher>(
        [type, endpoint = std::move(endpoint)](const std::string&, int,
                                               SegmentDesc& out) {
            if (!endpoint.empty()) {
                out.getMemory().transport_attrs[type] = endpoint;
            }
        });
}

std::shared_ptr<DescriptorFetcher> DescriptorFetcher::numberedFetches() {
    return std::make_shared<DescriptorFetcher>([](const std::string&, int call,
                                                  SegmentDesc& out) {
        out.getMemory().transport_attrs[TCP] = "fetch#" + std::to_string(call);
    });
}

void DescriptorFetcher::add(const std::string& name,
                            std::shared_ptr<SegmentManager> sm) {
    std::lock_guard<std::mutex> lock(mu_);
    peers_[name] = std::move(sm);
}

Status DescriptorFetcher::fetch(const std::string& name, SegmentDesc& out) {
    int call = ++fetches;
    if (fail_next_.exchange(false)) {
        return Status::RpcServiceError("peer " + name + " is down");
    }
    std::shared_ptr<SegmentManager> peer;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = peers_.find(name);
        if (it != peers_.end()) peer = it->second.lock();
    }
    if (peer) {
        out = *peer->getLocal();
        return Status::OK();
    }
    if (!synthesize_) {
        return Status::MetadataError("no segment named " + name);
    }
    out = SegmentDesc();
    out.name = name;
    synthesize_(name, call, out);
    return Status::OK();
}

}  // namespace mooncake::tent::testing
