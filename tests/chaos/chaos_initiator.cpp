// tent_chaos_initiator: the initiator half of scripts/chaos.sh.
//
// Runs consistency rounds against one target segment until --duration_s
// passes: WRITE --batch_size blocks of a per-round pattern, READ them back
// into a cleared buffer, compare. Each round appends "<unix ms> ok|fail|
// corrupt" to --events. A round with a failed task is "fail" (the target
// may be restarting); a round whose tasks all completed but whose bytes
// differ is "corrupt", which makes the exit status 1. After a failed round
// the target's buffer address is read again (a restarted target may have
// allocated it elsewhere).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include "tent/common/config.h"
#include "tent/transfer_engine.h"

DEFINE_string(target_seg_name, "", "segment name of the target");
DEFINE_string(transport, "mpcomm", "transport to use (mpcomm or tcp)");
DEFINE_double(duration_s, 60, "how long to run rounds");
DEFINE_uint64(block_size, 256 << 10, "bytes per request");
DEFINE_uint64(batch_size, 8, "requests per WRITE and per READ batch");
DEFINE_string(events, "", "file to append one line per round to");
DEFINE_int64(connect_timeout_ms, 1500, "transports/mpcomm/connect_timeout_ms");
DEFINE_int64(cache_ttl_ms, 1000, "metadata/cache_ttl_ms");
DEFINE_int64(retry_backoff_ms, 20,
             "pause after a failed round, so a dead target is not hammered");

namespace {

using namespace mooncake::tent;
using Clock = std::chrono::steady_clock;

int64_t unixMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

uint8_t patternByte(size_t i, uint64_t seed) {
    return static_cast<uint8_t>((i * 131 + seed * 7 + 1) ^ (i >> 11));
}

// Every task of `requests` finished COMPLETED (bounded by `deadline`).
bool runBatch(TransferEngine& engine, const std::vector<Request>& requests,
              Clock::time_point deadline) {
    BatchID batch = engine.allocateBatch(requests.size());
    if (batch == 0) return false;
    bool ok = engine.submitTransfer(batch, requests).ok();
    for (size_t i = 0; ok && i < requests.size(); ++i) {
        TransferStatus st;
        do {
            ok = engine.getTransferStatus(batch, i, st).ok();
        } while (ok && (st.s == PENDING || st.s == INITIAL) &&
                 Clock::now() < deadline);
        ok = ok && st.s == COMPLETED;
    }
    engine.freeBatch(batch);
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    gflags::ParseCommandLineFlags(&argc, &argv, true);
    google::InitGoogleLogging(argv[0]);
    if (FLAGS_target_seg_name.empty() || FLAGS_events.empty()) {
        std::cerr << "chaos_initiator: --target_seg_name and --events are "
                     "required\n";
        return 2;
    }
    TransportType xport = parseTransportType(FLAGS_transport);
    auto conf = std::make_shared<Config>();
    conf->set("rpc_server_hostname", std::string("127.0.0.1"));
    conf->set("transports/tcp/enable", xport == TCP);
    conf->set("transports/mpcomm/enable", xport == MPCOMM);
    conf->set("transports/mpcomm/connect_timeout_ms", FLAGS_connect_timeout_ms);
    conf->set("metadata/cache_ttl_ms", FLAGS_cache_ttl_ms);
    TransferEngine engine(conf);
    if (!engine.available()) {
        std::cerr << "chaos_initiator: engine not available\n";
        return 1;
    }
    const size_t total = FLAGS_block_size * FLAGS_batch_size;
    void* local = nullptr;
    if (!engine.allocateLocalMemory(&local, total).ok() ||
        !engine.registerLocalMemory(local, total).ok()) {
        std::cerr << "chaos_initiator: cannot register local memory\n";
        return 1;
    }
    auto* bytes = static_cast<uint8_t*>(local);
    std::ofstream events(FLAGS_events, std::ios::app);
    SegmentID target = 0;
    bool opened = false;
    uint64_t base = 0;
    bool need_info = true;
    uint64_t rounds = 0, failed = 0, corrupt = 0;
    const auto end = Clock::now() + std::chrono::milliseconds(
                                        int64_t(FLAGS_duration_s * 1000));
    while (Clock::now() < end) {
        ++rounds;
        bool ok = true;
        if (!opened) {
            opened = engine.openSegment(target, FLAGS_target_seg_name).ok();
            ok = opened;
        }
        if (ok && need_info) {
            SegmentInfo info;
            ok = engine.getSegmentInfo(target, info).ok() &&
                 !info.buffers.empty() && info.buffers[0].length >= total;
            if (ok) base = info.buffers[0].base;
            need_info = !ok;
        }
        bool match = true;
        if (ok) {
            for (size_t i = 0; i < total; ++i)
                bytes[i] = patternByte(i, rounds);
            std::vector<Request> writes, reads;
            for (uint64_t b = 0; b < FLAGS_batch_size; ++b) {
                Request r;
                r.opcode = Request::WRITE;
                r.source = bytes + b * FLAGS_block_size;
                r.target_id = target;
                r.target_offset = base + b * FLAGS_block_size;
                r.length = FLAGS_block_size;
                r.transport_hint = xport;
                writes.push_back(r);
                r.opcode = Request::READ;
                reads.push_back(r);
            }
            auto deadline = Clock::now() + std::chrono::seconds(30);
            ok = runBatch(engine, writes, deadline);
            if (ok) {
                std::memset(bytes, 0, total);
                ok = runBatch(engine, reads, deadline);
            }
            for (size_t i = 0; ok && match && i < total; ++i) {
                match = bytes[i] == patternByte(i, rounds);
            }
        }
        const char* verdict = !ok ? "fail" : (match ? "ok" : "corrupt");
        events << unixMs() << " " << verdict << "\n" << std::flush;
        if (!ok) {
            ++failed;
            need_info = true;
            std::this_thread::sleep_for(
                std::chrono::milliseconds(FLAGS_retry_backoff_ms));
        } else if (!match) {
            ++corrupt;
        }
    }
    std::cout << "chaos_initiator: " << rounds << " rounds, " << failed
              << " failed, " << corrupt << " with wrong bytes\n";
    engine.unregisterLocalMemory(local, total);
    engine.freeLocalMemory(local);
    return corrupt == 0 ? 0 : 1;
}
