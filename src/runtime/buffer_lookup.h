// BufferLookup: the buffer look-ups of one engine submission (see
// SubmissionRouter).
#pragma once

#include <cstdint>

#include "tent/runtime/segment.h"

namespace mooncake::tent {

inline bool containsRange(const BufferDesc& buf, uint64_t addr,
                          uint64_t length) {
    // Written without addr + length, as SegmentDesc::findBuffer().
    return addr >= buf.addr && addr - buf.addr <= buf.length &&
           length <= buf.length - (addr - buf.addr);
}

// Buffer look-ups of one submission into one descriptor snapshot. A batch
// mostly walks its buffers in order, or stays in one, so the previous hit
// and its successor are tried before findBuffer() searches them; and a
// range found in none (an unregistered source) is remembered, so that a
// batch from one unregistered buffer walks the list once.
class BufferLookup {
 public:
    void reset() {
        last_ = nullptr;
        missed_length_ = 0;
    }

    const BufferDesc* find(const SegmentDesc& desc, uint64_t addr,
                           uint64_t length) {
        if (last_ != nullptr) {
            if (containsRange(*last_, addr, length)) return last_;
            // last_ is set only for memory segments.
            const auto& buffers = desc.getMemory().buffers;
            const BufferDesc* next = last_ + 1;
            if (next < buffers.data() + buffers.size() &&
                containsRange(*next, addr, length)) {
                last_ = next;
                return next;
            }
        }
        // Only the same range: a shorter one may still fit a buffer.
        if (missed_length_ != 0 && addr == missed_addr_ &&
            length == missed_length_) {
            return nullptr;
        }
        const BufferDesc* found = desc.findBuffer(addr, length);
        if (found != nullptr) {
            last_ = found;
        } else {
            missed_addr_ = addr;
            missed_length_ = length;
        }
        return found;
    }

 private:
    const BufferDesc* last_ = nullptr;
    uint64_t missed_addr_ = 0;
    uint64_t missed_length_ = 0;
};

}  // namespace mooncake::tent
