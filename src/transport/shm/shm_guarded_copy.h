// guardedCopy(): the shm transport's memcpy, which survives the memory under
// it going away (private to libtent).
//
// A peer's object is a file in /dev/shm that any process of the same user
// can truncate. A mapped page past the new end raises SIGBUS on its next
// touch, and that may happen in the middle of a copy: checking the size
// first (fstat) leaves a window between the check and the memcpy. So the
// copy itself is guarded: a SIGBUS handler, installed once per process,
// returns a faulting guarded copy to its caller through a recovery point
// (sigsetjmp) the copying thread set up, and passes every other SIGBUS to
// the handler that was there before it (or to the default, which ends the
// process as it would have without this one).
//
// A handler installed later that does not pass SIGBUS on to the previous
// one takes this protection away (docs/shm.md).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mooncake::tent {

// Where a guarded copy faulted.
struct CopyFault {
    // The address SIGBUS reported.
    uintptr_t addr = 0;
};

// Copies `length` bytes from `src` to `dst`. True when every byte was
// copied. False when touching either range raised SIGBUS: the copy stopped
// part way (bytes before the fault may have been written) and `fault` says
// where. A SIGBUS at an address outside both ranges is not this copy's and
// goes to the previous handler.
bool guardedCopy(void* dst, const void* src, size_t length, CopyFault& fault);

}  // namespace mooncake::tent
