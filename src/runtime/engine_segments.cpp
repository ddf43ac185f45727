// TransferEngineImpl segments: opening peers and describing them.
#include "runtime/transfer_engine_impl.h"

namespace mooncake::tent {

Status TransferEngineImpl::openSegment(SegmentID& handle,
                                       const std::string& segment_name) {
    if (!available()) return notAvailable();
    if (segment_name.empty()) {
        return Status::InvalidArgument("openSegment: segment name is empty");
    }
    CHECK_STATUS(segments_->openRemote(handle, segment_name));
    for (const Loaded& loaded : transports_) {
        loaded.transport->warmupSegment(handle);
    }
    return Status::OK();
}

Status TransferEngineImpl::closeSegment(SegmentID handle) {
    if (!available()) return notAvailable();
    if (handle == LOCAL_SEGMENT_ID) {
        return Status::InvalidArgument(
            "closeSegment: the local segment (id 0) cannot be closed");
    }
    return segments_->closeRemote(handle);
}

Status TransferEngineImpl::getSegmentInfo(SegmentID handle, SegmentInfo& info) {
    if (!available()) return notAvailable();
    SegmentDescRef desc;
    if (handle == LOCAL_SEGMENT_ID) {
        desc = segments_->getLocal();
    } else {
        // Always fresh: callers ask this to see what the peer registered
        // just now, which a cached copy may not show yet.
        CHECK_STATUS(segments_->getRemote(desc, handle));
    }
    info = SegmentInfo();
    info.type = desc->type == SegmentType::File ? SegmentInfo::File
                                                : SegmentInfo::Memory;
    if (desc->type != SegmentType::Memory) return Status::OK();
    for (const BufferDesc& b : desc->getMemory().buffers) {
        SegmentInfo::Buffer buffer;
        buffer.base = b.addr;
        buffer.length = b.length;
        buffer.location = b.location;
        info.buffers.push_back(buffer);
    }
    return Status::OK();
}

}  // namespace mooncake::tent
