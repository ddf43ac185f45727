// Registration of local memory with MPComm; the rules are in
// mpcomm_registration.h.
#include "mpcomm_registration.h"

#include <algorithm>

#include "tent/transport/mpcomm/mpcomm_task_mapping.h"

namespace mooncake::tent {

Status MpcommRegistration::add(BufferDesc& desc) {
    if (!gate_.enter()) {
        return Status::InvalidArgument(
            "MpcommTransport: not installed; cannot register buffer " +
            mpcommHexAddr(desc.addr));
    }
    MpcommGateTicket ticket(gate_);
    void* addr = reinterpret_cast<void*>(desc.addr);
    std::lock_guard<std::mutex> lock(mu_);
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

Status MpcommRegistration::add(std::vector<BufferDesc>& desc_list) {
    for (size_t i = 0; i < desc_list.size(); ++i) {
        Status st = add(desc_list[i]);
        if (!st.ok()) {
            for (size_t j = 0; j < i; ++j) remove(desc_list[j]);
            return st;
        }
    }
    return Status::OK();
}

Status MpcommRegistration::remove(BufferDesc& desc) {
    auto& types = desc.transports;
    types.erase(std::remove(types.begin(), types.end(), MPCOMM), types.end());
    if (!gate_.enter()) return Status::OK();
    MpcommGateTicket ticket(gate_);
    std::lock_guard<std::mutex> lock(mu_);
    if (registered_.erase(desc.addr) == 0) return Status::OK();
    void* addr = reinterpret_cast<void*>(desc.addr);
    adapter_->unpublishBuffer(addr);
    adapter_->unregisterMemory(addr);
    return Status::OK();
}

void MpcommRegistration::releaseAll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [addr, length] : registered_) {
        void* ptr = reinterpret_cast<void*>(addr);
        adapter_->unpublishBuffer(ptr);
        adapter_->unregisterMemory(ptr);
    }
    registered_.clear();
}

}  // namespace mooncake::tent
