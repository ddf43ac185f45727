// TransferEngine notifications between two engines in this process (tcp):
// plain send/receive with opaque bytes, the size and queue bounds and
// their errors, a submission's notification sent only once every task of
// it completed (and not at all when one was cancelled), the probe, and the
// methods that answer "not supported" as upstream does.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kit/request_builder.h"
#include "kit/wait_until.h"
#include "tent/common/config.h"
#include "tent/runtime/topology.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent {
namespace {

using testing::waitUntil;

std::shared_ptr<Config> tcpConfig() {
    auto conf = std::make_shared<Config>();
    conf->set("rpc_server_hostname", "127.0.0.1");
    conf->set("transports/mpcomm/enable", false);
    return conf;
}

class EngineNotifyTest : public ::testing::Test {
 protected:
    void SetUp() override {
        unsetenv("MC_TENT_CONF");
        ASSERT_NO_FATAL_FAILURE(start(tcpConfig(), tcpConfig()));
    }

    void start(std::shared_ptr<Config> initiator_conf,
               std::shared_ptr<Config> target_conf) {
        initiator_.reset();
        target_.reset();
        target_ = std::make_unique<TransferEngine>(target_conf);
        initiator_ = std::make_unique<TransferEngine>(initiator_conf);
        ASSERT_TRUE(target_->available());
        ASSERT_TRUE(initiator_->available());
        ASSERT_TRUE(
            initiator_->openSegment(target_id_, target_->getSegmentName())
                .ok());
    }

    // Everything the target received within the wait bound, once `count`
    // arrived (or the bound passed).
    std::vector<Notification> receiveAtLeast(size_t count) {
        std::vector<Notification> all;
        waitUntil([&] {
            std::vector<Notification> some;
            EXPECT_TRUE(target_->receiveNotification(some).ok());
            all.insert(all.end(), some.begin(), some.end());
            return all.size() >= count;
        });
        return all;
    }

    // A registered buffer of `size` bytes at each end (local_, remote_).
    void shareBuffers(size_t size) {
        ASSERT_TRUE(initiator_->allocateLocalMemory(&local_, size).ok());
        ASSERT_TRUE(initiator_->registerLocalMemory(local_, size).ok());
        ASSERT_TRUE(target_->allocateLocalMemory(&remote_, size).ok());
        ASSERT_TRUE(target_->registerLocalMemory(remote_, size).ok());
        shared_bytes_ = size;
    }

    void TearDown() override {
        if (shared_bytes_ == 0) return;
        EXPECT_TRUE(
            initiator_->unregisterLocalMemory(local_, shared_bytes_).ok());
        EXPECT_TRUE(
            target_->unregisterLocalMemory(remote_, shared_bytes_).ok());
    }

    // One tcp write of `length` bytes from local_ to the target's `address`.
    std::vector<Request> writeTo(uint64_t address, size_t length = 64) {
        return {testing::makeRequest(Request::WRITE, local_, target_id_,
                                     address, length, TCP)};
    }

    uint64_t remoteAddress() const {
        return reinterpret_cast<uint64_t>(remote_);
    }

    std::unique_ptr<TransferEngine> target_;
    std::unique_ptr<TransferEngine> initiator_;
    SegmentID target_id_ = 0;
    void* local_ = nullptr;
    void* remote_ = nullptr;
    size_t shared_bytes_ = 0;
};

TEST_F(EngineNotifyTest, AMessageArrivesWithItsBytesExactly) {
    Notification sent;
    sent.name = std::string("kv\0blk", 6);
    sent.msg = "\xff\xfe\x00\x01 not utf-8";
    sent.msg.push_back('\0');
    ASSERT_TRUE(initiator_->sendNotification(target_id_, sent).ok());
    std::vector<Notification> got = receiveAtLeast(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].name, sent.name);
    EXPECT_EQ(got[0].msg, sent.msg);
    // Taken once: the next receive finds nothing, and clears what the
    // caller's list held.
    std::vector<Notification> again{Notification{"stale", "stale"}};
    ASSERT_TRUE(target_->receiveNotification(again).ok());
    EXPECT_TRUE(again.empty());
}

TEST_F(EngineNotifyTest, MessagesArriveInTheOrderSent) {
    for (int i = 0; i < 50; ++i) {
        ASSERT_TRUE(
            initiator_->sendNotification(target_id_, {"n", std::to_string(i)})
                .ok());
    }
    std::vector<Notification> got = receiveAtLeast(50);
    ASSERT_EQ(got.size(), 50u);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(got[i].msg, std::to_string(i));
}

TEST_F(EngineNotifyTest, AnOversizedMessageIsRefusedNamingTheLimit) {
    auto conf = tcpConfig();
    conf->set("notification/max_message_bytes", 16);
    ASSERT_NO_FATAL_FAILURE(start(conf, tcpConfig()));
    Status s = initiator_->sendNotification(
        target_id_, {"name", std::string(13, 'x')});  // 17 bytes
    ASSERT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_EQ(s.message(),
              "notification of 17 bytes exceeds "
              "notification/max_message_bytes=16");
    EXPECT_TRUE(
        initiator_->sendNotification(target_id_, {"name", "12345678"}).ok());
    // A submission's notification is held to the same limit, before any
    // task is submitted.
    ASSERT_NO_FATAL_FAILURE(shareBuffers(4096));
    BatchID batch = initiator_->allocateBatch(1);
    s = initiator_->submitTransfer(batch, writeTo(remoteAddress()),
                                   {"name", std::string(13, 'x')});
    ASSERT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_EQ(s.message(),
              "submitTransfer: notification of 17 bytes exceeds "
              "notification/max_message_bytes=16");
    std::vector<TransferStatus> none;
    ASSERT_TRUE(initiator_->getTransferStatus(batch, none).ok());
    EXPECT_TRUE(none.empty());
    ASSERT_TRUE(initiator_->freeBatch(batch).ok());
}

TEST_F(EngineNotifyTest, TheTargetsOwnSizeLimitIsNamedInItsRefusal) {
    auto target_conf = tcpConfig();
    target_conf->set("notification/max_message_bytes", 8);
    ASSERT_NO_FATAL_FAILURE(start(tcpConfig(), target_conf));
    Status s = initiator_->sendNotification(target_id_, {"n", "123456789"});
    ASSERT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_EQ(s.message(), "Notify to " + target_->getSegmentName() +
                               " (timeout 5000 ms): peer refused Notify: "
                               "InvalidArgument: notification of 10 bytes "
                               "exceeds notification/max_message_bytes=8");
    std::vector<Notification> got;
    ASSERT_TRUE(target_->receiveNotification(got).ok());
    EXPECT_TRUE(got.empty());
}

TEST_F(EngineNotifyTest, AFullQueueRefusesUntilTheTargetReceives) {
    auto target_conf = tcpConfig();
    target_conf->set("notification/max_pending_per_peer", 3);
    ASSERT_NO_FATAL_FAILURE(start(tcpConfig(), target_conf));
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(initiator_->sendNotification(target_id_, {"n", "m"}).ok());
    }
    Status s = initiator_->sendNotification(target_id_, {"n", "m"});
    ASSERT_TRUE(s.IsTooManyRequests()) << s;
    EXPECT_EQ(s.message(), "Notify to " + target_->getSegmentName() +
                               " (timeout 5000 ms): peer refused Notify: "
                               "TooManyRequests: target holds "
                               "notification/max_pending_per_peer=3 "
                               "undelivered notifications from host "
                               "127.0.0.1");
    std::vector<Notification> got;
    ASSERT_TRUE(target_->receiveNotification(got).ok());
    EXPECT_EQ(got.size(), 3u);
    EXPECT_TRUE(initiator_->sendNotification(target_id_, {"n", "m"}).ok());
}

TEST_F(EngineNotifyTest, BadLimitsAreNamedAtConstruction) {
    auto conf = tcpConfig();
    conf->set("notification/max_pending_per_peer", 0);
    TransferEngine engine(conf);
    EXPECT_FALSE(engine.available());
    std::vector<Notification> got;
    Status s = engine.receiveNotification(got);
    EXPECT_EQ(s.message(),
              "TransferEngine is not available: "
              "notification/max_pending_per_peer must be positive, got 0");
}

TEST_F(EngineNotifyTest, ASubmissionsNotificationFollowsItsData) {
    void* local = nullptr;
    void* remote = nullptr;
    const size_t kSize = 1 << 20;
    ASSERT_TRUE(initiator_->allocateLocalMemory(&local, kSize).ok());
    ASSERT_TRUE(target_->allocateLocalMemory(&remote, kSize).ok());
    ASSERT_TRUE(initiator_->registerLocalMemory(local, kSize).ok());
    ASSERT_TRUE(target_->registerLocalMemory(remote, kSize).ok());
    std::memset(local, 0x5a, kSize);
    std::memset(remote, 0, kSize);
    BatchID batch = initiator_->allocateBatch(4);
    std::vector<Request> requests;
    for (size_t i = 0; i < 4; ++i) {
        requests.push_back(testing::makeRequest(
            Request::WRITE, static_cast<char*>(local) + i * (kSize / 4),
            target_id_, reinterpret_cast<uint64_t>(remote) + i * (kSize / 4),
            kSize / 4, TCP));
    }
    ASSERT_TRUE(
        initiator_->submitTransfer(batch, requests, {"done", "batch-1"}).ok());
    TransferStatus overall;
    ASSERT_TRUE(waitUntil([&] {
        EXPECT_TRUE(initiator_->progressBatch(batch, overall).ok());
        return overall.s != PENDING;
    }));
    EXPECT_EQ(overall.s, COMPLETED);
    EXPECT_EQ(overall.transferred_bytes, kSize);
    std::vector<Notification> got = receiveAtLeast(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].name, "done");
    EXPECT_EQ(got[0].msg, "batch-1");
    const auto* bytes = static_cast<const uint8_t*>(remote);
    for (size_t i = 0; i < kSize; ++i) ASSERT_EQ(bytes[i], 0x5a) << i;
    ASSERT_TRUE(initiator_->freeBatch(batch).ok());
    ASSERT_TRUE(initiator_->unregisterLocalMemory(local, kSize).ok());
    ASSERT_TRUE(target_->unregisterLocalMemory(remote, kSize).ok());
}

TEST_F(EngineNotifyTest, ASubmissionsNotificationWaitsOutAFullTarget) {
    auto target_conf = tcpConfig();
    target_conf->set("notification/max_pending_per_peer", 2);
    ASSERT_NO_FATAL_FAILURE(start(tcpConfig(), target_conf));
    ASSERT_NO_FATAL_FAILURE(shareBuffers(4096));
    // Six completed submissions while the target receives nothing: it
    // takes two and refuses the rest as full until it receives.
    const int kSubmissions = 6;
    for (int i = 0; i < kSubmissions; ++i) {
        BatchID batch = initiator_->allocateBatch(1);
        std::vector<Request> requests = writeTo(remoteAddress(), 4096);
        ASSERT_TRUE(initiator_
                        ->submitTransfer(batch, requests,
                                         {"done", "n" + std::to_string(i)})
                        .ok());
        TransferStatus overall;
        ASSERT_TRUE(waitUntil([&] {
            EXPECT_TRUE(initiator_->progressBatch(batch, overall).ok());
            return overall.s != PENDING;
        }));
        ASSERT_EQ(overall.s, COMPLETED);
        ASSERT_TRUE(initiator_->freeBatch(batch).ok());
    }
    // The refused ones are asked again, not dropped, and keep their order.
    std::vector<Notification> got = receiveAtLeast(kSubmissions);
    ASSERT_EQ(got.size(), static_cast<size_t>(kSubmissions));
    for (int i = 0; i < kSubmissions; ++i) {
        EXPECT_EQ(got[i].msg, "n" + std::to_string(i));
    }
}

TEST_F(EngineNotifyTest, AFailedSubmissionSendsNoNotification) {
    ASSERT_NO_FATAL_FAILURE(shareBuffers(4096));
    BatchID failing = initiator_->allocateBatch(1);
    // Outside what the target registered: the write is refused there.
    ASSERT_TRUE(
        initiator_->submitTransfer(failing, writeTo(0x1000), {"failed", "x"})
            .ok());
    // Freeing waits for the task and settles its notification.
    ASSERT_TRUE(initiator_->freeBatch(failing).ok());
    // Sent after it on the same ordered queue: had the first been sent, it
    // would arrive first.
    BatchID good = initiator_->allocateBatch(1);
    ASSERT_TRUE(
        initiator_
            ->submitTransfer(good, writeTo(remoteAddress()), {"after", "y"})
            .ok());
    ASSERT_TRUE(initiator_->freeBatch(good).ok());
    std::vector<Notification> got = receiveAtLeast(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].name, "after");
}

TEST_F(EngineNotifyTest, AFullSendQueueHoldsBackTheNextSubmission) {
    // Room for one notification in the initiator's queue: a submission
    // holds it from submit until its notification is sent or dropped.
    auto initiator_conf = tcpConfig();
    initiator_conf->set("notification/max_pending_total", 1);
    initiator_conf->set("rpc/timeout_ms", 200);
    ASSERT_NO_FATAL_FAILURE(start(initiator_conf, tcpConfig()));
    ASSERT_NO_FATAL_FAILURE(shareBuffers(4096));
    const uint64_t good = remoteAddress();
    BatchID first = initiator_->allocateBatch(1);
    ASSERT_TRUE(
        initiator_->submitTransfer(first, writeTo(good), {"first", "a"}).ok());
    // Not read yet, so its notification still holds the room: the next
    // submission waits rpc/timeout_ms for it, then is refused whole.
    BatchID second = initiator_->allocateBatch(1);
    Status refused =
        initiator_->submitTransfer(second, writeTo(good), {"second", "b"});
    EXPECT_EQ(refused.code(), Status::Code::kTooManyRequests);
    EXPECT_NE(refused.ToString().find("notification/max_pending_total=1 "
                                      "notifications are waiting to be sent "
                                      "or to complete; no room for 1 more "
                                      "within rpc/timeout_ms=200"),
              std::string::npos)
        << refused.ToString();
    std::vector<TransferStatus> none;
    ASSERT_TRUE(initiator_->getTransferStatus(second, none).ok());
    EXPECT_TRUE(none.empty());
    // Freeing the first sends its notification; one whose task fails gives
    // its room back unsent; each leaves room for the next.
    ASSERT_TRUE(initiator_->freeBatch(first).ok());
    ASSERT_TRUE(
        initiator_->submitTransfer(second, writeTo(0x1000), {"failed", "x"})
            .ok());
    ASSERT_TRUE(initiator_->freeBatch(second).ok());
    BatchID third = initiator_->allocateBatch(1);
    ASSERT_TRUE(
        initiator_->submitTransfer(third, writeTo(good), {"third", "c"}).ok());
    ASSERT_TRUE(initiator_->freeBatch(third).ok());
    std::vector<Notification> got = receiveAtLeast(2);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].name, "first");
    EXPECT_EQ(got[1].name, "third");
}

TEST_F(EngineNotifyTest, ProbeAnswersForALiveEngineAndNamesADeadOne) {
    EXPECT_TRUE(initiator_->probePeerAliveByID(target_id_).ok());
    const std::string name = target_->getSegmentName();
    target_.reset();
    Status s = initiator_->probePeerAliveByID(target_id_);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(std::string(s.message()).find("Probe to " + name),
              std::string::npos)
        << s;
}

TEST_F(EngineNotifyTest, UnsupportedMethodsAnswerAsUpstream) {
    std::string handle;
    EXPECT_TRUE(initiator_->exportLocalSegment(handle).IsNotImplemented());
    SegmentID id = 0;
    EXPECT_TRUE(initiator_->importRemoteSegment(id, "h").IsNotImplemented());
    std::vector<NicLoadStats> stats{NicLoadStats{}};
    EXPECT_TRUE(initiator_->getNicLoadStats(stats).IsNotImplemented());
    EXPECT_TRUE(stats.empty());
}

TEST_F(EngineNotifyTest, TheTopologyIsTheOneDiscovered) {
    std::shared_ptr<Topology> topology = initiator_->getLocalTopology();
    ASSERT_NE(topology, nullptr);
    Json::Value parsed;
    Json::CharReaderBuilder builder;
    std::string text = initiator_->getLocalTopologyString();
    std::string errors;
    std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
    ASSERT_TRUE(
        reader->parse(text.data(), text.data() + text.size(), &parsed, &errors))
        << errors;
    EXPECT_EQ(parsed, topology->toJson());
    auto conf = tcpConfig();
    conf->set("metadata_type", "etcd");
    TransferEngine unavailable(conf);
    EXPECT_EQ(unavailable.getLocalTopology(), nullptr);
    EXPECT_EQ(unavailable.getLocalTopologyString(), "{}");
}

}  // namespace
}  // namespace mooncake::tent
