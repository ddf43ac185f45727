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

// A slice of its own one-slice transfer, told apart by `remote`: a PUT of
// `length` bytes, or a GET.
WaitingSlice slice(uint64_t remote, uint64_t length = 4096,
                   bool is_get = false) {
    WaitingSlice s;
    s.transfer = std::make_shared<Transfer>();
    s.transfer->addSlices(1);
    s.transfer->finishPosting(MPCOMM_SUCCESS);
    s.remote = remote;
    s.length = length;
    s.is_get = is_get;
    s.rkeys = std::make_shared<const std::vector<uint32_t>>(1, 7u);
    return s;
}

TEST(PeerLink, FillsTheLeastBusyConnectionsUpToTheirSlotsThenQueues) {
    PeerLink link(3, 2, 0);
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
    ASSERT_TRUE(link.takeNext(1, false, 4096, &next));
    EXPECT_EQ(next.remote, 6u);
    EXPECT_EQ(next.transfer, t7);
    ASSERT_TRUE(link.takeNext(2, false, 4096, &next));
    EXPECT_EQ(next.remote, 7u);
    // Nothing waits now: the slot is freed, and the next slice takes it.
    EXPECT_FALSE(link.takeNext(0, false, 4096, &next));
    WaitingSlice ninth = slice(8);
    EXPECT_EQ(link.place(&ninth), 0);
    WaitingSlice tenth = slice(9);
    EXPECT_EQ(link.place(&tenth), -1);
}

TEST(PeerLink, AWaitingSliceGoesBeforeANewOneEvenWhenASlotFrees) {
    PeerLink link(1, 1, 0);
    WaitingSlice a = slice(1), b = slice(2);
    EXPECT_EQ(link.place(&a), 0);
    EXPECT_EQ(link.place(&b), -1);
    // Until the connection hands its slot on, a newcomer waits behind b.
    WaitingSlice c = slice(3);
    EXPECT_EQ(link.place(&c), -1);
    WaitingSlice next;
    ASSERT_TRUE(link.takeNext(0, false, 4096, &next));
    EXPECT_EQ(next.remote, 2u);
    ASSERT_TRUE(link.takeNext(0, false, 4096, &next));
    EXPECT_EQ(next.remote, 3u);
    EXPECT_FALSE(link.takeNext(0, false, 4096, &next));
}

TEST(PeerLink, APutJoinsABusyConnectionOnlyWhileThePutsOnItFitTheBudget) {
    constexpr uint64_t kBudget = 512 << 10;
    PeerLink link(2, 2, kBudget);
    // Two 256 KiB PUTs fit one connection's budget together: the slot
    // count still spreads them first.
    WaitingSlice a = slice(1, 256 << 10), b = slice(2, 256 << 10);
    WaitingSlice c = slice(3, 256 << 10);
    EXPECT_EQ(link.place(&a), 0);
    EXPECT_EQ(link.place(&b), 1);
    EXPECT_EQ(link.place(&c), 0);
    // 512 KiB beside 256 KiB is over the budget on either connection, so
    // the PUT waits; a GET posted behind it waits too, though it would fit.
    WaitingSlice big = slice(4, 512 << 10);
    EXPECT_EQ(link.place(&big), -1);
    WaitingSlice get = slice(5, 1 << 20, true);
    EXPECT_EQ(link.place(&get), -1) << "waiting slices go first";

    // Connection 0 finishes one of its two 256 KiB PUTs: 256 KiB stay on
    // it, so the 512 KiB one still does not fit and keeps waiting.
    WaitingSlice next;
    EXPECT_FALSE(link.takeNext(0, false, 256 << 10, &next));
    // Connection 1 finishes its only slice: empty, it takes any slice.
    ASSERT_TRUE(link.takeNext(1, false, 256 << 10, &next));
    EXPECT_EQ(next.remote, 4u);
    // Connection 0 finishes its other PUT; the GET, next in line, takes it.
    ASSERT_TRUE(link.takeNext(0, false, 256 << 10, &next));
    EXPECT_EQ(next.remote, 5u);
    EXPECT_TRUE(next.is_get);

    // A GET is not counted against the budget, and joins a connection
    // whose PUTs fill it; a PUT that would overrun it waits.
    PeerLink single(1, 3, kBudget);
    WaitingSlice full = slice(6, kBudget), small = slice(7, 4096);
    WaitingSlice read = slice(8, 4 << 20, true);
    EXPECT_EQ(single.place(&full), 0);
    EXPECT_EQ(single.place(&read), 0);
    EXPECT_EQ(single.place(&small), -1);
    // The GET finishing leaves the full PUT: the small one still waits.
    EXPECT_FALSE(single.takeNext(0, true, 4 << 20, &next));
    ASSERT_TRUE(single.takeNext(0, false, kBudget, &next));
    EXPECT_EQ(next.remote, 7u);

    // A PUT larger than the budget never fits whole beside anything, so
    // only the slot count bounds it.
    PeerLink large(1, 2, kBudget);
    WaitingSlice l1 = slice(9, 4 << 20), l2 = slice(10, 4 << 20);
    WaitingSlice l3 = slice(11, 4096);
    EXPECT_EQ(large.place(&l1), 0);
    EXPECT_EQ(large.place(&l2), 0);
    EXPECT_EQ(large.place(&l3), -1) << "both slots taken";
    // With no budget (0), only the slot count bounds a connection.
    PeerLink unbounded(1, 2, 0);
    WaitingSlice x = slice(12, kBudget), y = slice(13, kBudget);
    EXPECT_EQ(unbounded.place(&x), 0);
    EXPECT_EQ(unbounded.place(&y), 0);
}

TEST(PeerLink, FailingCompletesWaitingAndLaterSlicesWithTheFirstReason) {
    PeerLink link(2, 1, 0);
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
    EXPECT_FALSE(link.takeNext(0, false, 4096, &next));
}

}  // namespace
