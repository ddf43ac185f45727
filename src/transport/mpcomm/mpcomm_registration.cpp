// Registration of local memory with MPComm: register + publish on add,
// unpublish + unregister on remove, all or nothing for a list.
#include <algorithm>

#include "tent/transport/mpcomm/mpcomm_transport.h"

namespace mooncake::tent {

Status MpcommTransport::addMemoryBuffer(BufferDesc& desc,
                                        const MemoryOptions& options) {
    if (!gate_.enter()) {
        return Status::InvalidArgument(
            "MpcommTransport: not installed; cannot register buffer " +
            mpcommHexAddr(desc.addr));
    }
    MpcommGateTicket ticket(gate_);
    void* addr = reinterpret_cast<void*>(desc.addr);
    std::lock_guard<std::mutex> lock(buffers_mu_);
    if (registered_.count(desc.addr) == 0) {
        CHECK_STATUS(adapter_->registerMemory(addr, desc.length));
        // NUMA placement is left to MPComm (-1).
        Status st = adapter_->publishBuffer(addr, desc.length, -1);
        if (!st.ok()) {
            adapter_->unregisterMemory(addr);
            return st;
        }
        registered_[desc.addr] = desc.length;
    }
    if (std::find(desc.transports.begin(), desc.transports.end(), MPCOMM) ==
        desc.transports.end()) {
        desc.transports.push_back(MPCOMM);
    }
    return Status::OK();
}

Status MpcommTransport::addMemoryBuffer(std::vector<BufferDesc>& desc_list,
                                        const MemoryOptions& options) {
    for (size_t i = 0; i < desc_list.size(); ++i) {
        Status st = addMemoryBuffer(desc_list[i], options);
        if (!st.ok()) {
            // All or nothing: take back what this call registered.
            for (size_t j = 0; j < i; ++j) removeMemoryBuffer(desc_list[j]);
            return st;
        }
    }
    return Status::OK();
}

Status MpcommTransport::removeMemoryBuffer(BufferDesc& desc) {
    auto& types = desc.transports;
    types.erase(std::remove(types.begin(), types.end(), MPCOMM), types.end());
    // Uninstalled: shutdown already released every registration.
    if (!gate_.enter()) return Status::OK();
    MpcommGateTicket ticket(gate_);
    std::lock_guard<std::mutex> lock(buffers_mu_);
    if (registered_.erase(desc.addr) == 0) return Status::OK();
    void* addr = reinterpret_cast<void*>(desc.addr);
    adapter_->unpublishBuffer(addr);
    adapter_->unregisterMemory(addr);
    return Status::OK();
}

}  // namespace mooncake::tent
