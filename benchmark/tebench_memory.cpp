#include "tebench_memory.h"

#include <dirent.h>
#include <glog/logging.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "tent/runtime/platform.h"

namespace mooncake::tent::bench {

namespace {

uint64_t patternWord(uint64_t seed, uint64_t index) {
    // splitmix64 of (seed, index): cheap, and no two nearby words or seeds
    // share a value, so shifted or stale data never passes by accident.
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void fillHost(uint8_t* dst, size_t length, uint64_t seed) {
    size_t words = length / 8;
    for (size_t i = 0; i < words; ++i) {
        uint64_t w = patternWord(seed, i);
        std::memcpy(dst + i * 8, &w, 8);
    }
    if (length % 8) {
        uint64_t w = patternWord(seed, words);
        std::memcpy(dst + words * 8, &w, length % 8);
    }
}

bool verifyHost(const uint8_t* src, size_t length, uint64_t seed,
                size_t& bad_offset, uint8_t& expected, uint8_t& actual) {
    size_t words = (length + 7) / 8;
    for (size_t i = 0; i < words; ++i) {
        uint64_t want = patternWord(seed, i);
        size_t n = std::min<size_t>(8, length - i * 8);
        if (std::memcmp(src + i * 8, &want, n) == 0) continue;
        const auto* want_bytes = reinterpret_cast<const uint8_t*>(&want);
        for (size_t b = 0; b < n; ++b) {
            if (src[i * 8 + b] != want_bytes[b]) {
                bad_offset = i * 8 + b;
                expected = want_bytes[b];
                actual = src[i * 8 + b];
                return false;
            }
        }
    }
    return true;
}

Status allocateOne(TransferEngine& engine, const BenchOptions& options,
                   SegType type, const Location& location,
                   std::vector<LocalBuffer>& buffers) {
    MemoryOptions mem;
    mem.location = location;
    mem.type = options.xport_type;
    LocalBuffer buffer;
    buffer.length = options.total_buffer_size;
    buffer.type = type;
    buffer.location = location;
    Status s = engine.allocateLocalMemory(&buffer.addr, buffer.length, mem);
    if (!s.ok()) {
        return Status(s.code(), "allocating " + std::to_string(buffer.length) +
                                    " bytes at " + location + ": " +
                                    std::string(s.message()));
    }
    s = engine.registerLocalMemory(buffer.addr, buffer.length, mem);
    if (!s.ok()) {
        engine.freeLocalMemory(buffer.addr);
        return Status(s.code(), "registering " + std::to_string(buffer.length) +
                                    " bytes at " + location +
                                    " for --xport_type=" +
                                    transportTypeName(options.xport_type) +
                                    ": " + std::string(s.message()));
    }
    buffers.push_back(buffer);
    return Status::OK();
}

}  // namespace

int numaNodeCount() {
    DIR* dir = opendir("/sys/devices/system/node");
    if (!dir) return 1;
    int count = 0;
    while (dirent* entry = readdir(dir)) {
        const char* name = entry->d_name;
        if (std::strncmp(name, "node", 4) == 0 && std::isdigit(name[4])) {
            ++count;
        }
    }
    closedir(dir);
    return count > 0 ? count : 1;
}

Status allocateBuffers(TransferEngine& engine, const BenchOptions& options,
                       std::vector<LocalBuffer>& buffers) {
    for (SegType type : options.seg_types) {
        Status s;
        if (type == SegType::kDram) {
            int nodes = numaNodeCount();
            for (int node = 0; node < nodes && s.ok(); ++node) {
                s = allocateOne(engine, options, type,
                                "cpu:" + std::to_string(node), buffers);
            }
        } else {
            s = allocateOne(engine, options, type, "cuda:0", buffers);
        }
        if (!s.ok()) {
            releaseBuffers(engine, buffers);
            return s;
        }
    }
    return Status::OK();
}

void releaseBuffers(TransferEngine& engine, std::vector<LocalBuffer>& buffers) {
    for (LocalBuffer& buffer : buffers) {
        Status s = engine.unregisterLocalMemory(buffer.addr, buffer.length);
        LOG_IF(WARNING, !s.ok()) << "unregisterLocalMemory: " << s;
        s = engine.freeLocalMemory(buffer.addr);
        LOG_IF(WARNING, !s.ok()) << "freeLocalMemory: " << s;
    }
    buffers.clear();
}

// VRAM blocks are staged through host memory with the platform's copy: the
// pattern is computed on the CPU, which is plenty for a correctness check.
// A failed copy is logged and leaves the block unverifiable, which the
// check then reports as a mismatch.
void fillPattern(const LocalBuffer& buffer, void* dst, size_t length,
                 uint64_t seed) {
    if (buffer.type == SegType::kDram) {
        fillHost(static_cast<uint8_t*>(dst), length, seed);
        return;
    }
    std::vector<uint8_t> host(length);
    fillHost(host.data(), length, seed);
    Status s = currentPlatform()->copy(dst, host.data(), length);
    LOG_IF(ERROR, !s.ok()) << "filling a VRAM block: " << s;
}

void scrubBlock(const LocalBuffer& buffer, void* dst, size_t length) {
    if (buffer.type == SegType::kDram) {
        std::memset(dst, 0, length);
        return;
    }
    std::vector<uint8_t> zeros(length, 0);
    Status s = currentPlatform()->copy(dst, zeros.data(), length);
    LOG_IF(ERROR, !s.ok()) << "scrubbing a VRAM block: " << s;
}

bool verifyPattern(const LocalBuffer& buffer, const void* src, size_t length,
                   uint64_t seed, size_t& bad_offset, uint8_t& expected,
                   uint8_t& actual) {
    if (buffer.type == SegType::kDram) {
        return verifyHost(static_cast<const uint8_t*>(src), length, seed,
                          bad_offset, expected, actual);
    }
    std::vector<uint8_t> host(length);
    Status s = currentPlatform()->copy(host.data(), src, length);
    LOG_IF(ERROR, !s.ok()) << "reading a VRAM block back: " << s;
    return s.ok() &&
           verifyHost(host.data(), length, seed, bad_offset, expected, actual);
}

}  // namespace mooncake::tent::bench
