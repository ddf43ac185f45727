// SegmentPublisher: keeps the local segment descriptor in a metadata store
// (metadata_type etcd or redis) under storeSegmentKey(name), as
// {"holder":{...},"segment":<descriptor>}, for as long as this process
// lives.
//
// - claim() takes the name at start-up: refused, naming the holder, when a
//   live process holds it. A holder on this machine whose pid is gone is
//   replaced at once; a holder on another machine is waited for up to one
//   TTL (its key lapses if it is dead).
// - publishChange() (the segment manager's publish listener, so every
//   registration and attribute change) hands the latest snapshot to the
//   thread that writes it, and waits for that write up to `wait_ms`
//   (metadata/store_timeout_ms), so that a registration is in the store
//   when the call returns, as it is with p2p. It does not wait while the
//   store is known to be down; a write that outlives the wait still lands.
// - The thread also renews the TTL or lease every ttl_ms / 3. When the
//   store fails it retries every kRetryMs and, once the store answers,
//   writes the descriptor again (the key may have lapsed meanwhile).
// - Every write is a compare-and-set against the value this process wrote
//   last, so a process never overwrites a name another one took over.
// - stop() ends the thread and deletes the key if it is still ours.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/store_health.h"
#include "tent/runtime/metastore.h"
#include "tent/runtime/segment_manager.h"

namespace mooncake::tent {

class SegmentPublisher {
 public:
    // Retry period while the store is unreachable.
    static constexpr int kRetryMs = 500;

    // `rpc_address` is only part of the holder's identity, for messages.
    SegmentPublisher(std::shared_ptr<MetaStore> store,
                     std::shared_ptr<StoreHealth> health,
                     std::shared_ptr<SegmentManager> segments, int ttl_ms,
                     int wait_ms, std::string rpc_address);
    ~SegmentPublisher();
    SegmentPublisher(const SegmentPublisher&) = delete;
    SegmentPublisher& operator=(const SegmentPublisher&) = delete;

    // Takes the local segment's name (see above). Synchronous.
    Status claim();
    // Writes the latest snapshot now (synchronous), then starts the thread.
    Status start();
    void publishChange();
    void stop();

    // "pid P on machine M (rpc A, incarnation I)": the text a refused
    // process reads about the holder.
    static std::string describeHolder(const std::string& record);

 private:
    std::string record() const;
    // One write of the latest snapshot; `taken` when another process
    // holds the name now.
    Status publish(bool& taken);
    void run();

    const std::shared_ptr<MetaStore> store_;
    const std::shared_ptr<StoreHealth> health_;
    const std::shared_ptr<SegmentManager> segments_;
    const int ttl_ms_;
    const int wait_ms_;
    const std::string rpc_address_;
    std::string name_;
    std::string key_;
    // The value this process wrote last ("" before the claim); only the
    // thread touches it once started.
    std::string last_;

    std::mutex mu_;
    std::condition_variable cv_;
    std::condition_variable written_cv_;
    // Changes handed over, and the last of them written (or failed).
    uint64_t requested_ = 0;
    uint64_t settled_ = 0;
    bool stopping_ = false;
    bool taken_ = false;  // another process holds the name now
    std::thread thread_;
};

}  // namespace mooncake::tent
