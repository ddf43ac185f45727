// tent_memcpy_bw: single-threaded memcpy bandwidth per block size, the
// ceiling scripts/bench.sh sets next to tebench's figures.
//
// Each block size doubles from --start_block_size to --max_block_size. The
// copies walk through a source and a destination arena of --arena_size
// bytes (or two blocks, if larger), block after block, so that large
// enough arenas make the copy stream from memory the way a transfer out of
// a registered buffer does, instead of hitting the cache.
//
// Prints "memcpy <block_size> <GB/s>" per size, GB = 1e9 bytes.
#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

DEFINE_uint64(start_block_size, 65536, "First block size in bytes.");
DEFINE_uint64(max_block_size, 64ull << 20,
              "Last block size in bytes (doubling from start).");
DEFINE_uint64(arena_size, 256ull << 20,
              "Bytes of source and of destination that the copies cycle "
              "through.");
DEFINE_double(duration, 0.5, "Seconds of copying per block size.");

namespace {

using Clock = std::chrono::steady_clock;

double measure(std::vector<char>& src, std::vector<char>& dst, size_t block,
               double duration_s) {
    const size_t blocks = src.size() / block;
    const auto budget = std::chrono::duration<double>(duration_s);
    uint64_t copied = 0;
    Clock::time_point start = Clock::now();
    Clock::time_point now = start;
    for (size_t i = 0; now - start < budget; ++i) {
        size_t offset = (i % blocks) * block;
        std::memcpy(dst.data() + offset, src.data() + offset, block);
        copied += block;
        now = Clock::now();
    }
    // Reading one copied byte keeps the copies observable.
    volatile char sink = dst[copied % dst.size()];
    (void)sink;
    return copied / std::chrono::duration<double>(now - start).count() / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
    gflags::SetUsageMessage(
        "tent_memcpy_bw [--start_block_size=N --max_block_size=N "
        "--arena_size=N --duration=S]");
    gflags::ParseCommandLineFlags(&argc, &argv, true);
    if (FLAGS_start_block_size == 0 ||
        FLAGS_max_block_size < FLAGS_start_block_size ||
        !(FLAGS_duration > 0)) {
        std::fprintf(stderr,
                     "tent_memcpy_bw: need 0 < --start_block_size <= "
                     "--max_block_size and --duration > 0\n");
        return 1;
    }
    const size_t arena =
        std::max<uint64_t>(FLAGS_arena_size, 2 * FLAGS_max_block_size);
    // Filled, so that every page is mapped before the clock starts.
    std::vector<char> src(arena, 1), dst(arena, 0);
    for (uint64_t block = FLAGS_start_block_size; block <= FLAGS_max_block_size;
         block *= 2) {
        std::printf("memcpy %llu %.3f\n",
                    static_cast<unsigned long long>(block),
                    measure(src, dst, block, FLAGS_duration));
        std::fflush(stdout);
        if (block > FLAGS_max_block_size / 2) break;
    }
    return 0;
}
