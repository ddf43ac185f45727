// tebench: the buffers a process allocates and registers, and the payload
// pattern --check_consistency writes and verifies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tebench_options.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent::bench {

struct LocalBuffer {
    void* addr = nullptr;
    size_t length = 0;
    SegType type = SegType::kDram;
    Location location;
};

// Number of NUMA nodes from sysfs; 1 when sysfs does not say.
int numaNodeCount();

// One buffer of --total_buffer_size per NUMA node for DRAM (the guide: "one
// buffer of --total_buffer_size per NUMA node") and one on GPU 0 for VRAM,
// each allocated through the engine and registered with MemoryOptions.type
// = --xport_type. On failure everything allocated so far is released.
Status allocateBuffers(TransferEngine& engine, const BenchOptions& options,
                       std::vector<LocalBuffer>& buffers);
void releaseBuffers(TransferEngine& engine, std::vector<LocalBuffer>& buffers);

// A pattern that differs per seed and per 8-byte word, so that a block
// landing at the wrong offset or a stale block is caught, not only a
// corrupted byte.
void fillPattern(const LocalBuffer& buffer, void* dst, size_t length,
                 uint64_t seed);
// Overwrites [dst, dst+length) so that a read that does not land is seen.
void scrubBlock(const LocalBuffer& buffer, void* dst, size_t length);
// Returns true when [src, src+length) holds the pattern for `seed`; else sets
// the first bad byte offset and the expected/actual byte values.
bool verifyPattern(const LocalBuffer& buffer, const void* src, size_t length,
                   uint64_t seed, size_t& bad_offset, uint8_t& expected,
                   uint8_t& actual);

}  // namespace mooncake::tent::bench
