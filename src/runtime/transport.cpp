// The Transport base: the defaults every transport shares. It names no
// transport; the table of concrete ones is in transport_loader.cpp.
#include "tent/runtime/transport.h"

#include <string>

namespace mooncake::tent {

Status Transport::install(std::string& local_segment_name,
                          std::shared_ptr<ControlService> metadata,
                          std::shared_ptr<Topology> local_topology,
                          std::shared_ptr<Config> conf) {
    return Status::OK();
}

Status Transport::uninstall() { return Status::OK(); }

Status Transport::recycleSubBatch(SubBatchRef& batch, size_t max_size) {
    Status s = freeSubBatch(batch);
    batch = nullptr;  // a transport's free may leave it set when it failed
    if (!s.ok()) return s;
    return allocateSubBatch(batch, max_size);
}

Status Transport::unsupported(const char* operation) const {
    return Status::NotImplemented(std::string(getName()) +
                                  " transport does not support " + operation);
}

Status Transport::addMemoryBuffer(BufferDesc& desc,
                                  const MemoryOptions& options) {
    return unsupported("addMemoryBuffer");
}

Status Transport::addMemoryBuffer(std::vector<BufferDesc>& desc_list,
                                  const MemoryOptions& options) {
    for (BufferDesc& desc : desc_list) {
        CHECK_STATUS(addMemoryBuffer(desc, options));
    }
    return Status::OK();
}

Status Transport::removeMemoryBuffer(BufferDesc& desc) {
    return unsupported("removeMemoryBuffer");
}

}  // namespace mooncake::tent
