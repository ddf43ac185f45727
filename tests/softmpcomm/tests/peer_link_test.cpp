// PeerLink: which connection takes a slice, the order waiting slices get a
// slot in, and how a failed record completes them.
#include "peer_link.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "mpcomm.h"

namespace {

using mpcomm::MPCOMM_ERR_CONNECTION_LOST;
using mpcomm::MPCOMM_ERR_RETRY_EXCEEDED;
using mpcomm::MPCOMM_SUCCESS;
using mpcomm::detail::PeerLink;
using mpcomm::detail::Transfer;
using mpcomm::detail::WaitingSlice;

// A slice of its own one-slice transfer, told apart by `remote`.
WaitingSlice slice(uint64_t remote) {
    WaitingSlice s;
    s.transfer = std::make_shared<Transfer>();
    s.transfer->addSlices(1);
    s.transfer->finishPosting(MPCOMM_SUCCESS);
    s.remote = remote;
    s.length = 4096;
    s.rkeys = std::make_shared<const std::vector<uint32_t>>(1, 7u);
    return s;
}

TEST(PeerLink, FillsTheLeastBusyConnectionsUpToTheirSlotsThenQueues) {
    PeerLink link(3, 2);
    std::vector<int> placed;
    for (uint64_t i = 0; i < 6; ++i) {
        WaitingSlice s = slice(i);
        placed.push_back(link.place(&s));
        EXPECT_TRUE(s.transfer) << "placed: the caller posts it";
    }
    // Round the connections once, then once more: six slots in all.
    EXPECT_EQ(placed, (std::vector<int>{0, 1, 2, 0, 1, 2}));
    WaitingSlice seventh = slice(6), eighth = slice(7);
    std::shared_ptr<Transfer> t7 = seventh.transfer;
    EXPECT_EQ(link.place(&seventh), -1);
    EXPECT_EQ(link.place(&eighth), -1);
    EXPECT_FALSE(t7->isComplete()) << "waiting, not failed";

    // The first connection to finish gets the oldest waiting slice.
    WaitingSlice next;
    ASSERT_TRUE(link.takeNext(1, &next));
    EXPECT_EQ(next.remote, 6u);
    EXPECT_EQ(next.transfer, t7);
    ASSERT_TRUE(link.takeNext(2, &next));
    EXPECT_EQ(next.remote, 7u);
    // Nothing waits now: the slot is freed, and the next slice takes it.
    EXPECT_FALSE(link.takeNext(0, &next));
    WaitingSlice ninth = slice(8);
    EXPECT_EQ(link.place(&ninth), 0);
    WaitingSlice tenth = slice(9);
    EXPECT_EQ(link.place(&tenth), -1);
}

TEST(PeerLink, AWaitingSliceGoesBeforeANewOneEvenWhenASlotFrees) {
    PeerLink link(1, 1);
    WaitingSlice a = slice(1), b = slice(2);
    EXPECT_EQ(link.place(&a), 0);
    EXPECT_EQ(link.place(&b), -1);
    // Until the connection hands its slot on, a newcomer waits behind b.
    WaitingSlice c = slice(3);
    EXPECT_EQ(link.place(&c), -1);
    WaitingSlice next;
    ASSERT_TRUE(link.takeNext(0, &next));
    EXPECT_EQ(next.remote, 2u);
    ASSERT_TRUE(link.takeNext(0, &next));
    EXPECT_EQ(next.remote, 3u);
    EXPECT_FALSE(link.takeNext(0, &next));
}

TEST(PeerLink, FailingCompletesWaitingAndLaterSlicesWithTheFirstReason) {
    PeerLink link(2, 1);
    std::vector<std::shared_ptr<Transfer>> transfers;
    for (uint64_t i = 0; i < 5; ++i) {
        WaitingSlice s = slice(i);
        transfers.push_back(s.transfer);
        link.place(&s);
    }
    EXPECT_FALSE(link.failed());
    link.fail(MPCOMM_ERR_RETRY_EXCEEDED);
    link.fail(MPCOMM_ERR_CONNECTION_LOST);  // a knock-on: ignored
    EXPECT_TRUE(link.failed());
    // The two on connections are theirs to fail; the three waiting are done.
    for (size_t i = 0; i < transfers.size(); ++i)
        EXPECT_EQ(transfers[i]->isComplete(), i >= 2) << i;
    for (size_t i = 2; i < transfers.size(); ++i)
        EXPECT_EQ(transfers[i]->result().error_code, MPCOMM_ERR_RETRY_EXCEEDED);
    WaitingSlice late = slice(9);
    std::shared_ptr<Transfer> t = late.transfer;
    EXPECT_EQ(link.place(&late), -1);
    ASSERT_TRUE(t->isComplete());
    EXPECT_EQ(t->result().error_code, MPCOMM_ERR_RETRY_EXCEEDED);
    WaitingSlice next;
    EXPECT_FALSE(link.takeNext(0, &next));
}

}  // namespace
