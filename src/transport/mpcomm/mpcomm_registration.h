// Registration of local memory with MPComm (private to the transport):
// register + publish on add, unpublish + unregister on remove, all or
// nothing for a list, and everything released at uninstall().
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "mpcomm_call_gate.h"
#include "tent/runtime/segment.h"
#include "tent/transport/mpcomm/mpcomm_adapter.h"

namespace mooncake::tent {

class MpcommRegistration {
 public:
    // `adapter` may be null (install() then refuses); both outlive this.
    MpcommRegistration(MpcommAdapter* adapter, MpcommCallGate& gate)
        : adapter_(adapter), gate_(gate) {}

    // Registers and publishes `desc` once (a second add of the same
    // address only tags it) and adds MPCOMM to desc.transports. Refused
    // while the transport is not installed.
    Status add(BufferDesc& desc);
    // All or nothing: a failure takes back what this call registered.
    Status add(std::vector<BufferDesc>& desc_list);
    // Drops MPCOMM from desc.transports; unpublishes and unregisters the
    // address if this transport registered it. OK when not installed:
    // shutdown already released every registration.
    Status remove(BufferDesc& desc);
    // uninstall(), with the gate closed: releases every registration.
    void releaseAll();

 private:
    MpcommAdapter* const adapter_;
    MpcommCallGate& gate_;
    std::mutex mu_;
    std::map<uint64_t, uint64_t> registered_;  // addr -> length
};

}  // namespace mooncake::tent
