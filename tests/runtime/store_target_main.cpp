// tent_store_target: the target process of tent_store_engine_test. It
// brings up an engine on a metadata store, registers one buffer filled
// with pattern `seed`, prints "READY <segment name> <address>" (or "ERROR
// <status>") on stdout, and serves until its stdin closes; a line "rereg"
// on stdin registers the buffer again with the next pattern.
//
// Usage: tent_store_target <redis|etcd> <servers> <segment name | "">
//            <tcp|mpcomm> <ttl_ms> <seed>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "kit/store_engine_support.h"

using namespace mooncake::tent;

int main(int argc, char** argv) {
    if (argc != 7) {
        std::cerr << "usage: " << argv[0]
                  << " <redis|etcd> <servers> <name> <tcp|mpcomm> <ttl_ms> "
                     "<seed>\n";
        return 2;
    }
    const TransportType xport = parseTransportType(argv[4]);
    auto conf = testing::storeEngineConfig(argv[1], argv[2], argv[3], xport,
                                           std::atoi(argv[5]));
    TransferEngine engine(conf);
    if (!engine.available()) {
        // An unavailable engine answers every call with why it is.
        SegmentID handle = 0;
        std::cout << "ERROR " << engine.openSegment(handle, "-").message()
                  << std::endl;
        return 1;
    }
    void* buf = nullptr;
    Status s = engine.allocateLocalMemory(&buf, testing::kStoreBufferSize);
    if (s.ok()) {
        testing::fillPattern(buf, testing::kStoreBufferSize,
                             static_cast<uint8_t>(std::atoi(argv[6])));
        s = engine.registerLocalMemory(buf, testing::kStoreBufferSize);
    }
    if (!s.ok()) {
        std::cout << "ERROR " << s.ToString() << std::endl;
        return 1;
    }
    std::cout << "READY " << engine.getSegmentName() << " "
              << reinterpret_cast<uintptr_t>(buf) << std::endl;
    // "rereg" unregisters the buffer, fills it with the next pattern and
    // registers it again at the same address; EOF ends the process.
    uint8_t seed = static_cast<uint8_t>(std::atoi(argv[6]));
    std::string command;
    while (std::getline(std::cin, command)) {
        if (command != "rereg") continue;
        s = engine.unregisterLocalMemory(buf, testing::kStoreBufferSize);
        testing::fillPattern(buf, testing::kStoreBufferSize, ++seed);
        if (s.ok()) {
            s = engine.registerLocalMemory(buf, testing::kStoreBufferSize);
        }
        std::cout << (s.ok() ? "REREG" : "ERROR " + s.ToString()) << std::endl;
    }
    engine.unregisterLocalMemory(buf, testing::kStoreBufferSize);
    engine.freeLocalMemory(buf);
    return 0;
}
