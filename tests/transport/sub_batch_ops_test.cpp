// The sub-batch and request checks tcp and shm share (sub_batch_ops.h):
// each refusal's exact text, and both transports answering a status read
// for a task they never had in the same words but for their name. Also the
// shared "no descriptor" text (segment.h).
#include "transport/sub_batch_ops.h"

#include <gtest/gtest.h>

#include <string>

#include "tent/runtime/segment.h"
#include "tent/transport/shm/shm_transport.h"
#include "tent/transport/tcp/tcp_transport.h"

namespace mooncake::tent {
namespace {

TEST(SubBatchOpsTest, RoomIsTheCapacityLeft) {
    EXPECT_TRUE(checkSubBatchRoom("tcp", 0, 4, 4).ok());
    EXPECT_TRUE(checkSubBatchRoom("tcp", 3, 1, 4).ok());
    EXPECT_TRUE(checkSubBatchRoom("tcp", 4, 0, 4).ok());
    EXPECT_EQ(checkSubBatchRoom("shm", 3, 2, 4),
              Status::TooManyRequests("shm transport: 2 requests exceed the "
                                      "sub-batch's remaining capacity 1"));
    // A count near SIZE_MAX cannot wrap around and fit.
    EXPECT_EQ(checkSubBatchRoom("tcp", 1, SIZE_MAX, 4),
              Status::TooManyRequests(
                  "tcp transport: " + std::to_string(SIZE_MAX) +
                  " requests exceed the sub-batch's remaining capacity 3"));
}

TEST(SubBatchOpsTest, TaskIdsAreTheSubmittedOnes) {
    EXPECT_TRUE(checkTaskId("tcp", 0, 1).ok());
    EXPECT_TRUE(checkTaskId("tcp", 2, 3).ok());
    for (int id : {-1, 3, 4}) {
        EXPECT_EQ(checkTaskId("shm", id, 3),
                  Status::InvalidArgument("shm transport: task id " +
                                          std::to_string(id) +
                                          " out of range (3 submitted)"));
    }
}

TEST(SubBatchOpsTest, ARequestIsAReadOrWriteWithASource) {
    char byte = 0;
    Request r;
    r.opcode = Request::WRITE;
    r.source = &byte;
    r.length = 1;
    EXPECT_TRUE(checkRequest(r).ok());
    r.opcode = static_cast<Request::OpCode>(7);
    EXPECT_EQ(checkRequest(r), Status::InvalidArgument("bad opcode 7"));
    r.opcode = Request::READ;
    r.source = nullptr;
    EXPECT_EQ(checkRequest(r),
              Status::InvalidArgument("null source for 1 bytes"));
    r.length = 0;
    EXPECT_TRUE(checkRequest(r).ok());
}

template <class T>
void expectNoTask(const char* name) {
    T transport;
    Transport::SubBatchRef batch = nullptr;
    ASSERT_TRUE(transport.allocateSubBatch(batch, 2).ok());
    TransferStatus status;
    EXPECT_EQ(transport.getTransferStatus(batch, 0, status),
              Status::InvalidArgument(std::string(name) +
                                      " transport: task id 0 out of range (0 "
                                      "submitted)"));
    EXPECT_TRUE(transport.freeSubBatch(batch).ok());
    EXPECT_EQ(transport.getTransferStatus(nullptr, 0, status),
              Status::InvalidArgument(std::string(name) +
                                      " transport: null sub-batch"));
}

TEST(SubBatchOpsTest, TcpAndShmRefuseAnUnknownTaskAlike) {
    expectNoTask<TcpTransport>("tcp");
    expectNoTask<ShmTransport>("shm");
}

// The one text the engine, notifications and tcp give for a segment id no
// descriptor backs.
TEST(SubBatchOpsTest, NoDescriptorNamesTheSegmentId) {
    EXPECT_EQ(noSegmentDescriptor(42),
              Status::InvalidArgument("no descriptor for segment id 42"));
    EXPECT_EQ(noSegmentDescriptor(UINT64_MAX),
              Status::InvalidArgument("no descriptor for segment id " +
                                      std::to_string(UINT64_MAX)));
}

}  // namespace
}  // namespace mooncake::tent
