// The tent_* C API in one process: lifecycle, a two-engine WRITE/READ,
// statuses, segment info, registration variants and the errors each call
// names; its configuration in c_api_config_test.cpp. tests/capi/ drives
// the installed library from plain C.
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
tent_status_t waitTask(tent_engine_t e, tent_batch_id_t batch, size_t task) {
    tent_status_t st{};
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    do {
        EXPECT_EQ(tent_task_status(e, batch, task, &st), 0)
            << tent_last_error();
        if (st.status != STATUS_PENDING) return st;
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
    tent_engine_t initiator = tent_create_engine();
    tent_engine_t target = tent_create_engine();
    ASSERT_NE(initiator, nullptr) << tent_last_error();
    ASSERT_NE(target, nullptr) << tent_last_error();
    EXPECT_EQ(tent_available(initiator), 1);

    char name[256];
    ASSERT_EQ(tent_segment_name(target, name, sizeof(name)), 0);
    EXPECT_NE(std::strchr(name, ':'), nullptr) << name;

    const size_t kLen = 1 << 20;
    void* remote = nullptr;
    ASSERT_EQ(tent_allocate_memory(target, &remote, kLen, "cpu:0"), 0)
        << tent_last_error();
    ASSERT_EQ(tent_register_memory(target, remote, kLen), 0)
        << tent_last_error();

    tent_segment_id_t seg = 0;
    ASSERT_EQ(tent_open_segment(initiator, &seg, name), 0) << tent_last_error();
    EXPECT_NE(seg, LOCAL_SEGMENT_ID);

    std::vector<unsigned char> src(kLen), back(kLen, 0);
    for (size_t i = 0; i < kLen; ++i)
        src[i] = static_cast<unsigned char>(i % 251);
    tent_batch_id_t batch = tent_allocate_batch(initiator, 4);
    ASSERT_NE(batch, 0u) << tent_last_error();

    tent_request_t reqs[2] = {};
    for (int i = 0; i < 2; ++i) {
        reqs[i].opcode = OPCODE_WRITE;
        reqs[i].source = src.data() + i * (kLen / 2);
        reqs[i].target_id = seg;
        reqs[i].target_offset =
            reinterpret_cast<uint64_t>(remote) + i * (kLen / 2);
        reqs[i].length = kLen / 2;
        reqs[i].priority = i;  // high, then medium
    }
    ASSERT_EQ(tent_submit(initiator, batch, reqs, 2), 0) << tent_last_error();
    for (size_t t = 0; t < 2; ++t) {
        tent_status_t st = waitTask(initiator, batch, t);
        EXPECT_EQ(st.status, STATUS_COMPLETED);
        EXPECT_EQ(st.transferred_bytes, kLen / 2);
    }
    EXPECT_EQ(std::memcmp(remote, src.data(), kLen), 0);

    tent_request_t read = {};
    read.opcode = OPCODE_READ;
    read.source = back.data();
    read.target_id = seg;
    read.target_offset = reinterpret_cast<uint64_t>(remote);
    read.length = kLen;
    read.transport_hint = TRANSPORT_TCP;
    ASSERT_EQ(tent_submit(initiator, batch, &read, 1), 0) << tent_last_error();
    EXPECT_EQ(waitTask(initiator, batch, 2).status, STATUS_COMPLETED);
    EXPECT_EQ(back, src);

    tent_status_t overall{};
    ASSERT_EQ(tent_overall_status(initiator, batch, &overall), 0);
    EXPECT_EQ(overall.status, STATUS_COMPLETED);
    EXPECT_EQ(overall.transferred_bytes, 2 * kLen);

    // The list: capacity 2 of 3 tasks writes two and reports three.
    tent_status_t list[4];
    std::memset(list, 0xff, sizeof(list));
    size_t count = 2;
    ASSERT_EQ(tent_task_status_list(initiator, batch, list, &count), 0)
        << tent_last_error();
    EXPECT_EQ(count, 3u);
    EXPECT_EQ(list[0].status, STATUS_COMPLETED);
    EXPECT_EQ(list[1].transferred_bytes, kLen / 2);
    EXPECT_EQ(list[2].status, -1) << "written past the capacity";
    count = 4;
    ASSERT_EQ(tent_task_status_list(initiator, batch, list, &count), 0);
    EXPECT_EQ(count, 3u);
    EXPECT_EQ(list[2].status, STATUS_COMPLETED);
    EXPECT_EQ(list[2].transferred_bytes, kLen);
    EXPECT_EQ(list[3].status, -1);

    // The initiator sees the target's buffer through segment info.
    tent_segment_info_t info{};
    ASSERT_EQ(tent_get_segment_info(initiator, seg, &info), 0)
        << tent_last_error();
    EXPECT_EQ(info.type, TYPE_MEMORY);
    ASSERT_EQ(info.num_buffers, 1);
    EXPECT_EQ(info.buffers[0].base, reinterpret_cast<uint64_t>(remote));
    EXPECT_EQ(info.buffers[0].length, kLen);
    EXPECT_GT(std::strlen(info.buffers[0].location), 0u);
    tent_free_segment_info(&info);
    EXPECT_EQ(info.buffers, nullptr);
    EXPECT_EQ(info.num_buffers, 0);

    EXPECT_EQ(tent_free_batch(initiator, batch), 0);
    EXPECT_EQ(tent_close_segment(initiator, seg), 0);
    EXPECT_EQ(tent_unregister_memory(target, remote, kLen), 0);
    EXPECT_EQ(tent_free_memory(target, remote), 0);
    tent_destroy_engine(initiator);
    tent_destroy_engine(target);
}

TEST_F(CApiTest, RegistrationVariants) {
    tent_engine_t e = tent_create_engine();
    ASSERT_NE(e, nullptr) << tent_last_error();
    std::vector<char> a(8192), b(4096), c(4096);

    ASSERT_EQ(tent_register_memory_with_perm(e, a.data(), a.size(),
                                             PERM_GLOBAL_READ_ONLY),
              0)
        << tent_last_error();
    void* addrs[2] = {b.data(), c.data()};
    size_t sizes[2] = {b.size(), c.size()};
    ASSERT_EQ(
        tent_register_memory_batch(e, addrs, sizes, 2, PERM_GLOBAL_READ_WRITE),
        0)
        << tent_last_error();

    tent_segment_info_t info{};
    ASSERT_EQ(tent_get_segment_info(e, LOCAL_SEGMENT_ID, &info), 0)
        << tent_last_error();
    EXPECT_EQ(info.num_buffers, 3);
    tent_free_segment_info(&info);

    // NULL sizes: each buffer's registered length.
    ASSERT_EQ(tent_unregister_memory_batch(e, addrs, nullptr, 2), 0)
        << tent_last_error();
    EXPECT_EQ(tent_unregister_memory(e, a.data(), a.size()), 0);
    ASSERT_EQ(tent_get_segment_info(e, LOCAL_SEGMENT_ID, &info), 0);
    EXPECT_EQ(info.num_buffers, 0);
    EXPECT_EQ(info.buffers, nullptr);

    tent_memory_options_t opts;
    std::memset(&opts, 0, sizeof(opts));
    opts.permission = PERM_GLOBAL_READ_WRITE;
    opts.transport_type = TRANSPORT_TCP;
    void* mem = nullptr;
    ASSERT_EQ(tent_allocate_memory_ex(e, &mem, 4096, &opts), 0)
        << tent_last_error();
    ASSERT_EQ(tent_register_memory_ex(e, mem, 4096, &opts), 0)
        << tent_last_error();
    ASSERT_EQ(tent_get_segment_info(e, LOCAL_SEGMENT_ID, &info), 0);
    ASSERT_EQ(info.num_buffers, 1);
    EXPECT_EQ(info.buffers[0].base, reinterpret_cast<uint64_t>(mem));
    EXPECT_EQ(info.buffers[0].length, 4096u);
    tent_free_segment_info(&info);
    EXPECT_EQ(tent_unregister_memory(e, mem, 0), 0) << tent_last_error();
    EXPECT_EQ(tent_free_memory(e, mem), 0) << tent_last_error();
    tent_destroy_engine(e);
}

TEST_F(CApiTest, MemoryOptionsAreCheckedFieldByField) {
    tent_engine_t e = tent_create_engine();
    ASSERT_NE(e, nullptr) << tent_last_error();
    std::vector<char> buf(4096);
    tent_memory_options_t opts;

    std::memset(&opts, 0, sizeof(opts));
    opts.permission = 3;
    EXPECT_EQ(tent_register_memory_ex(e, buf.data(), buf.size(), &opts), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_register_memory_ex: bad permission 3 "
              "(PERM_LOCAL_READ_WRITE 0, PERM_GLOBAL_READ_ONLY 1, "
              "PERM_GLOBAL_READ_WRITE 2)");

    std::memset(&opts, 0, sizeof(opts));
    opts.transport_type = 13;
    EXPECT_EQ(tent_register_memory_ex(e, buf.data(), buf.size(), &opts), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_register_memory_ex: bad transport_type 13");

    std::memset(&opts, 'x', sizeof(opts.location));
    EXPECT_EQ(tent_register_memory_ex(e, buf.data(), buf.size(), &opts), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_register_memory_ex: opts->location is not NUL-terminated "
              "within its 64 bytes");

    std::memset(&opts, 0, sizeof(opts));
    std::strcpy(opts.shm_path, "/dev/shm/kv");
    void* mem = nullptr;
    EXPECT_EQ(tent_allocate_memory_ex(e, &mem, 4096, &opts), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_allocate_memory_ex: shm_path \"/dev/shm/kv\" / shm_offset "
              "0 not supported: this engine has no file-backed buffers");
    EXPECT_EQ(mem, nullptr);

    EXPECT_EQ(tent_register_memory_with_perm(e, buf.data(), buf.size(), -1),
              -1);
    EXPECT_EQ(
        std::string(tent_last_error())
            .rfind("tent_register_memory_with_perm: bad permission -1", 0),
        0u)
        << tent_last_error();
    EXPECT_EQ(tent_register_memory_batch(e, nullptr, nullptr, 2, 0), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_register_memory_batch: addrs and sizes must not be NULL "
              "with count 2");
    tent_destroy_engine(e);
}

// Receives until `want` notifications arrived or the bound passed.
std::vector<tent_notifi_record> receiveNotifications(tent_engine_t e,
                                                     size_t want) {
    std::vector<tent_notifi_record> got;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
        tent_notifi_info info;
        info.num_records = -1;
        EXPECT_EQ(tent_recv_notifs(e, &info), 0) << tent_last_error();
        for (int i = 0; i < info.num_records; ++i)
            got.push_back(info.records[i]);
        tent_free_notifs(&info);
        EXPECT_EQ(info.records, nullptr);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return got;
}

TEST_F(CApiTest, NotificationsCancellationAndNicStats) {
    tent_engine_t initiator = tent_create_engine();
    tent_engine_t target = tent_create_engine();
    ASSERT_NE(initiator, nullptr) << tent_last_error();
    ASSERT_NE(target, nullptr) << tent_last_error();
    char name[256];
    ASSERT_EQ(tent_segment_name(target, name, sizeof(name)), 0);

    const size_t kLen = 64 << 10;
    std::vector<unsigned char> remote(kLen, 0), src(kLen);
    for (size_t i = 0; i < kLen; ++i) src[i] = static_cast<uint8_t>(i * 13);
    void* addrs[1] = {remote.data()};
    size_t sizes[1] = {kLen};
    tent_memory_options_t opts;
    std::memset(&opts, 0, sizeof(opts));
    opts.permission = PERM_GLOBAL_READ_WRITE;
    ASSERT_EQ(tent_register_memory_batch_ex(target, addrs, sizes, 1, &opts), 0)
        << tent_last_error();
    tent_segment_id_t seg = 0;
    ASSERT_EQ(tent_open_segment(initiator, &seg, name), 0) << tent_last_error();

    tent_batch_id_t batch = tent_allocate_batch(initiator, 4);
    tent_request_t w = {};
    w.opcode = OPCODE_WRITE;
    w.source = src.data();
    w.target_id = seg;
    w.target_offset = reinterpret_cast<uint64_t>(remote.data());
    w.length = kLen;
    ASSERT_EQ(tent_submit_notif(initiator, batch, &w, 1, "kv", "block 7"), 0)
        << tent_last_error();
    EXPECT_EQ(waitTask(initiator, batch, 0).status, STATUS_COMPLETED);
    std::vector<tent_notifi_record> got = receiveNotifications(target, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_STREQ(got[0].name, "kv");
    EXPECT_STREQ(got[0].msg, "block 7");
    EXPECT_EQ(got[0].handle, LOCAL_SEGMENT_ID);
    EXPECT_EQ(std::memcmp(remote.data(), src.data(), kLen), 0);

    const std::string longest(4095, 'm');
    ASSERT_EQ(tent_send_notifs(initiator, seg, "", longest.c_str()), 0)
        << tent_last_error();
    got = receiveNotifications(target, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(std::string(got[0].name), "");
    EXPECT_EQ(std::string(got[0].msg), longest);
    const std::string too_long(4096, 'm');
    EXPECT_EQ(tent_send_notifs(initiator, seg, "n", too_long.c_str()), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_send_notifs: name of 1 bytes / message of 4096 bytes "
              "exceeds the 255 / 4095 a tent_notifi_record holds");
    EXPECT_EQ(tent_send_notifs(initiator, seg, nullptr, "x"), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_send_notifs: name and message must not be NULL");

    // Cancel racing a small write: it returns at once and the task ends
    // CANCELED, or COMPLETED when the write finished before the cancel
    // (CancelOfATaskNotYetStartedEndsItCanceledAtOnce pins the case where
    // the cancel must win); a final one stays as it was.
    ASSERT_EQ(tent_submit(initiator, batch, &w, 1), 0) << tent_last_error();
    ASSERT_EQ(tent_cancel_task(initiator, batch, 1), 0) << tent_last_error();
    tent_status_t st = waitTask(initiator, batch, 1);
    EXPECT_TRUE(st.status == STATUS_CANCELED || st.status == STATUS_COMPLETED)
        << st.status;
    ASSERT_EQ(tent_cancel_task(initiator, batch, 0), 0) << tent_last_error();
    ASSERT_EQ(tent_task_status(initiator, batch, 0, &st), 0);
    EXPECT_EQ(st.status, STATUS_COMPLETED);
    EXPECT_EQ(tent_cancel_task(initiator, batch, 9), -1);
    EXPECT_NE(std::string(tent_last_error()).find("9"), std::string::npos)
        << tent_last_error();

    tent_nic_load_stat_t stats[2];
    size_t count = 2;
    EXPECT_EQ(tent_get_nic_load_stats(initiator, stats, &count), -1);
    EXPECT_EQ(std::string(tent_last_error()).rfind("NotImplemented: ", 0), 0u)
        << tent_last_error();

    EXPECT_EQ(tent_free_batch(initiator, batch), 0) << tent_last_error();
    EXPECT_EQ(tent_close_segment(initiator, seg), 0);
    EXPECT_EQ(tent_unregister_memory_batch(target, addrs, sizes, 1), 0);
    tent_destroy_engine(initiator);
    tent_destroy_engine(target);
}

// A task no transport has started: the cancel must win, at once. TCP with
// one worker, busy with a 64 MiB READ submitted ahead of it, keeps the
// second task queued; the cancel drops it, it reads CANCELED when the call
// returns, and its buffer (a canary pattern) is never written, though the
// READ ahead of it moves the target's bytes (0x77) meanwhile. On its own
// thread: tent_set_config() stays for the thread's later engines.
TEST_F(CApiTest, CancelOfATaskNotYetStartedEndsItCanceledAtOnce) {
    std::thread([] {
        const size_t kBig = 64u << 20;
        const size_t kSmall = 1u << 20;
        tent_set_config("rpc_server_hostname", "127.0.0.1");
        tent_set_config("transports/shm/enable", "false");
        tent_engine_t target = tent_create_engine();
        ASSERT_NE(target, nullptr) << tent_last_error();
        tent_set_config("transports/tcp/workers", "1");
        tent_engine_t initiator = tent_create_engine();
        ASSERT_NE(initiator, nullptr) << tent_last_error();
        char name[256];
        ASSERT_EQ(tent_segment_name(target, name, sizeof(name)), 0);

        std::vector<unsigned char> remote(kBig, 0x77), big(kBig, 0);
        std::vector<unsigned char> queued(kSmall, 0xA5);
        ASSERT_EQ(tent_register_memory(target, remote.data(), kBig), 0)
            << tent_last_error();
        ASSERT_EQ(tent_register_memory(initiator, big.data(), kBig), 0)
            << tent_last_error();
        ASSERT_EQ(tent_register_memory(initiator, queued.data(), kSmall), 0)
            << tent_last_error();
        tent_segment_id_t seg = 0;
        ASSERT_EQ(tent_open_segment(initiator, &seg, name), 0)
            << tent_last_error();
        tent_request_t reads[2] = {};
        for (int i = 0; i < 2; ++i) {
            reads[i].opcode = OPCODE_READ;
            reads[i].target_id = seg;
            reads[i].target_offset = reinterpret_cast<uint64_t>(remote.data());
        }
        reads[0].source = big.data();
        reads[0].length = kBig;
        reads[1].source = queued.data();
        reads[1].length = kSmall;
        tent_batch_id_t batch = tent_allocate_batch(initiator, 2);
        ASSERT_EQ(tent_submit(initiator, batch, reads, 2), 0)
            << tent_last_error();
        ASSERT_EQ(tent_cancel_task(initiator, batch, 1), 0)
            << tent_last_error();
        tent_status_t st{};
        ASSERT_EQ(tent_task_status(initiator, batch, 1, &st), 0);
        EXPECT_EQ(st.status, STATUS_CANCELED);
        EXPECT_EQ(waitTask(initiator, batch, 0).status, STATUS_COMPLETED);
        EXPECT_EQ(big[kBig - 1], 0x77);
        // The READ ahead of it is done and the worker idle: nothing is left
        // that could still write the cancelled task's buffer.
        for (size_t i = 0; i < kSmall; ++i) {
            ASSERT_EQ(queued[i], 0xA5) << "byte " << i;
        }
        ASSERT_EQ(tent_task_status(initiator, batch, 1, &st), 0);
        EXPECT_EQ(st.status, STATUS_CANCELED);
        EXPECT_EQ(tent_free_batch(initiator, batch), 0) << tent_last_error();
        tent_destroy_engine(initiator);
        tent_destroy_engine(target);
    }).join();
}

TEST_F(CApiTest, LastErrorNamesTheProblem) {
    tent_engine_t e = tent_create_engine();
    ASSERT_NE(e, nullptr) << tent_last_error();

    std::vector<char> buf(4096);
    EXPECT_EQ(tent_unregister_memory(e, buf.data(), buf.size()), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "InvalidArgument: unregisterLocalMemory: " +
                  addrText(buf.data()) + " is not registered");

    tent_batch_id_t batch = tent_allocate_batch(e, 1);
    tent_request_t bad = {};
    bad.opcode = 7;
    EXPECT_EQ(tent_submit(e, batch, &bad, 1), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_submit: request 0 has bad opcode 7");
    bad.opcode = OPCODE_READ;
    bad.priority = 3;
    EXPECT_EQ(tent_submit(e, batch, &bad, 1), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_submit: request 0 has bad priority 3 (0 high, 1 medium, 2 "
              "low)");
    bad.priority = 0;
    bad.transport_hint = 13;
    EXPECT_EQ(tent_submit(e, batch, &bad, 1), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_submit: request 0 has bad transport_hint 13");
    EXPECT_EQ(tent_submit(e, batch, nullptr, 1), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_submit: entries is NULL with count 1");

    tent_request_t two[2] = {};
    EXPECT_EQ(tent_submit(e, batch, two, 2), -1);
    EXPECT_NE(std::string(tent_last_error()).find("TooManyRequests"),
              std::string::npos)
        << tent_last_error();

    char tiny[2];
    EXPECT_EQ(tent_segment_name(e, tiny, sizeof(tiny)), -1);
    EXPECT_NE(std::string(tent_last_error()).find("too small"),
              std::string::npos)
        << tent_last_error();

    size_t count = 1;
    EXPECT_EQ(tent_task_status_list(e, batch, nullptr, &count), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_task_status_list: statuses is NULL with count 1");
    EXPECT_EQ(tent_allocate_batch(e, 0), 0u);
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_allocate_batch: batch_size must be positive");

    tent_status_t st{};
    EXPECT_EQ(tent_task_status(nullptr, 1, 0, &st), -1);
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_task_status: engine handle is NULL");
    EXPECT_EQ(tent_available(nullptr), 0);
    tent_set_config(nullptr, "x");
    EXPECT_EQ(std::string(tent_last_error()),
              "tent_set_config: key is NULL or empty");
    EXPECT_EQ(tent_free_batch(e, batch), 0);
    tent_destroy_engine(e);
}

}  // namespace
