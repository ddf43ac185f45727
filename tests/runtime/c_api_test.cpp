// The tent_* C API: lifecycle, a two-engine WRITE/READ, statuses, errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tent/transfer_engine.h"

namespace {

std::string addrText(const void* p) {
    std::ostringstream os;
    os << p;
    return os.str();
}

// Polls one task until it leaves PENDING; the bound turns a hang into a
// failure.
tent_status waitTask(tent_engine_t e, tent_batch_id_t batch, size_t task) {
    tent_status st{};
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    do {
        EXPECT_EQ(tent_get_status(e, batch, task, &st), 0) << tent_last_error();
        if (st.status != TENT_STATUS_PENDING) return st;
        std::this_thread::yield();
    } while (std::chrono::steady_clock::now() < deadline);
    ADD_FAILURE() << "task " << task << " still PENDING after 60 s";
    return st;
}

class CApiTest : public ::testing::Test {
 protected:
    void SetUp() override { ::unsetenv("MC_TENT_CONF"); }
};

TEST_F(CApiTest, TwoEnginesWriteAndReadBack) {
    tent_engine_t initiator = tent_create_engine(nullptr);
    tent_engine_t target = tent_create_engine(nullptr);
    ASSERT_NE(initiator, nullptr) << tent_last_error();
    ASSERT_NE(target, nullptr) << tent_last_error();
    EXPECT_EQ(tent_available(initiator), 1);

    char name[256];
    ASSERT_EQ(tent_segment_name(target, name, sizeof(name)), 0);
    EXPECT_NE(std::strchr(name, ':'), nullptr) << name;

    const size_t kLen = 1 << 20;
    void* remote = nullptr;
    ASSERT_EQ(tent_allocate_memory(target, &remote, kLen), 0)
        << tent_last_error();
    ASSERT_EQ(tent_register_memory(target, remote, kLen), 0)
        << tent_last_error();

    tent_segment_id_t seg = 0;
    ASSERT_EQ(tent_open_segment(initiator, &seg, name), 0) << tent_last_error();
    EXPECT_NE(seg, 0u);

    std::vector<unsigned char> src(kLen), back(kLen, 0);
    for (size_t i = 0; i < kLen; ++i)
        src[i] = static_cast<unsigned char>(i % 251);
    tent_batch_id_t batch = tent_allocate_batch(initiator, 4);
    ASSERT_NE(batch, 0u) << tent_last_error();

    tent_request reqs[2];
    for (int i = 0; i < 2; ++i) {
        reqs[i].opcode = OPCODE_WRITE;
        reqs[i].source = src.data() + i * (kLen / 2);
        reqs[i].target_id = seg;
        reqs[i].target_offset =
            reinterpret_cast<uint64_t>(remote) + i * (kLen / 2);
        reqs[i].length = kLen / 2;
        reqs[i].transport_hint = TRANSPORT_UNSPEC;
    }
    ASSERT_EQ(tent_submit(initiator, batch, reqs, 2), 0) << tent_last_error();
    for (size_t t = 0; t < 2; ++t) {
        tent_status st = waitTask(initiator, batch, t);
        EXPECT_EQ(st.status, TENT_STATUS_COMPLETED);
        EXPECT_EQ(st.transferred_bytes, kLen / 2);
    }
    EXPECT_EQ(std::memcmp(remote, src.data(), kLen), 0);

    tent_request read{};
    read.opcode = OPCODE_READ;
    read.source = back.data();
    read.target_id = seg;
    read.target_offset = reinterpret_cast<uint64_t>(remote);
    read.length = kLen;
    read.transport_hint = TRANSPORT_TCP;
    ASSERT_EQ(tent_submit(initiator, batch, &read, 1), 0) << tent_last_error();
    tent_status st = waitTask(initiator, batch, 2);
    EXPECT_EQ(st.status, TENT_STATUS_COMPLETED);
    EXPECT_EQ(back, src);

    tent_status overall{};
    ASSERT_EQ(tent_get_overall_status(initiator, batch, &overall), 0);
    EXPECT_EQ(overall.status, TENT_STATUS_COMPLETED);
    EXPECT_EQ(overall.transferred_bytes, 2 * kLen);

    EXPECT_EQ(tent_free_batch(initiator, batch), 0);
    EXPECT_EQ(tent_close_segment(initiator, seg), 0);
    EXPECT_EQ(tent_unregister_memory(target, remote, kLen), 0);
    EXPECT_EQ(tent_free_memory(target, remote), 0);
    tent_destroy_engine(initiator);
    tent_destroy_engine(target);
}

TEST_F(CApiTest, LastErrorNamesTheProblem) {
    tent_engine_t e = tent_create_engine(nullptr);
    ASSERT_NE(e, nullptr) << tent_last_error();

    std::vector<char> buf(4096);
    EXPECT_EQ(tent_unregister_memory(e, buf.data(), buf.size()), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "InvalidArgument: unregisterLocalMemory: " +
                  addrText(buf.data()) + " is not registered");

    tent_batch_id_t batch = tent_allocate_batch(e, 1);
    tent_request bad{};
    bad.opcode = 7;
    EXPECT_EQ(tent_submit(e, batch, &bad, 1), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_submit: request 0 has bad opcode 7");

    tent_request two[2] = {};
    EXPECT_EQ(tent_submit(e, batch, two, 2), -1);
    EXPECT_NE(std::string(tent_last_error()).find("TooManyRequests"),
              std::string::npos)
        << tent_last_error();

    char tiny[2];
    EXPECT_EQ(tent_segment_name(e, tiny, sizeof(tiny)), -1);
    EXPECT_NE(std::string(tent_last_error()).find("too small"),
              std::string::npos)
        << tent_last_error();

    tent_status st{};
    EXPECT_EQ(tent_get_status(nullptr, 1, 0, &st), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_get_status: engine handle is NULL");
    tent_destroy_engine(e);

    EXPECT_EQ(tent_create_engine("/nonexistent/tent.json"), nullptr);
    EXPECT_NE(std::string(tent_last_error()).find("/nonexistent/tent.json"),
              std::string::npos)
        << tent_last_error();
}

}  // namespace
