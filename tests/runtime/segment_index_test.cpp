// SegmentDesc::findBuffer() through the address index (indexBuffers()):
// every answer is the one the walk over `buffers` in list order gives.
#include <gtest/gtest.h>

#include <vector>

#include "tent/runtime/segment.h"
#include "tent/runtime/segment_manager.h"

namespace mooncake::tent {
namespace {

SegmentDesc withBuffers(
    const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
    SegmentDesc seg;
    for (const auto& [addr, length] : ranges) {
        BufferDesc b;
        b.addr = addr;
        b.length = length;
        seg.getMemory().buffers.push_back(b);
    }
    return seg;
}

// The buffer at `index` of `seg`, or null for -1.
const BufferDesc* at(const SegmentDesc& seg, int index) {
    return index < 0 ? nullptr : &seg.getMemory().buffers[index];
}

TEST(SegmentIndexTest, DisjointBuffersOutOfOrderAreBisected) {
    // Out of address order, one of them empty, one ending at 2^64 - 1.
    SegmentDesc seg = withBuffers({{5000, 1000},
                                   {1000, 100},
                                   {3000, 0},
                                   {UINT64_MAX - 10, 10},
                                   {1100, 900}});
    seg.getMemory().indexBuffers();
    ASSERT_EQ(seg.getMemory().by_addr, (std::vector<uint32_t>{1, 4, 2, 0, 3}));
    EXPECT_EQ(seg.findBuffer(1000, 100), at(seg, 1));
    EXPECT_EQ(seg.findBuffer(1050, 50), at(seg, 1));
    // Across two adjacent buffers: neither holds it alone.
    EXPECT_EQ(seg.findBuffer(1050, 51), nullptr);
    EXPECT_EQ(seg.findBuffer(1100, 900), at(seg, 4));
    EXPECT_EQ(seg.findBuffer(1999, 1), at(seg, 4));
    EXPECT_EQ(seg.findBuffer(2000, 1), nullptr);
    EXPECT_EQ(seg.findBuffer(3000, 1), nullptr);
    EXPECT_EQ(seg.findBuffer(5999, 1), at(seg, 0));
    EXPECT_EQ(seg.findBuffer(999, 2), nullptr);
    EXPECT_EQ(seg.findBuffer(0, 1), nullptr);
    EXPECT_EQ(seg.findBuffer(UINT64_MAX - 5, 5), at(seg, 3));
    EXPECT_EQ(seg.findBuffer(UINT64_MAX - 5, UINT64_MAX), nullptr);
    // An empty range on a boundary is answered in list order: buffer 1
    // ends where buffer 4 starts and comes first in the list.
    EXPECT_EQ(seg.findBuffer(1100, 0), at(seg, 1));
    EXPECT_EQ(seg.findBuffer(3000, 0), at(seg, 2));
}

TEST(SegmentIndexTest, OverlappingBuffersKeepTheFirstInListOrder) {
    SegmentDesc seg = withBuffers({{1000, 4000}, {2000, 100}, {2000, 50}});
    seg.getMemory().indexBuffers();
    EXPECT_TRUE(seg.getMemory().by_addr.empty());
    EXPECT_EQ(seg.findBuffer(2000, 50), at(seg, 0));
    // Two buffers starting at one address count as overlapping too.
    SegmentDesc same = withBuffers({{2000, 100}, {2000, 0}});
    same.getMemory().indexBuffers();
    EXPECT_TRUE(same.getMemory().by_addr.empty());
    EXPECT_EQ(same.findBuffer(2000, 10), at(same, 0));
}

TEST(SegmentIndexTest, AnIndexOfAnotherSizeIsNotUsed) {
    SegmentDesc seg = withBuffers({{1000, 100}});
    seg.getMemory().indexBuffers();
    BufferDesc later;
    later.addr = 5000;
    later.length = 10;
    seg.getMemory().buffers.push_back(later);
    EXPECT_EQ(seg.findBuffer(5000, 10), at(seg, 1));
    EXPECT_EQ(seg.findBuffer(1000, 100), at(seg, 0));
}

TEST(SegmentIndexTest, ParsedAndUpdatedDescriptorsAreIndexed) {
    SegmentDesc seg = withBuffers({{5000, 10}, {1000, 100}});
    SegmentDesc parsed;
    ASSERT_TRUE(segmentFromJson(segmentToJson(seg), parsed).ok());
    EXPECT_EQ(parsed.getMemory().by_addr, (std::vector<uint32_t>{1, 0}));
    EXPECT_EQ(parsed.findBuffer(5005, 5), &parsed.getMemory().buffers[0]);

    SegmentManager mgr("10.0.0.1:15000", nullptr);
    ASSERT_TRUE(mgr.updateLocal([](SegmentDesc& d) {
                       for (uint64_t a : {3000u, 1000u, 2000u}) {
                           BufferDesc b;
                           b.addr = a;
                           b.length = 1000;
                           d.getMemory().buffers.push_back(b);
                       }
                       return Status::OK();
                   })
                    .ok());
    SegmentDescRef local = mgr.getLocal();
    EXPECT_EQ(local->getMemory().by_addr, (std::vector<uint32_t>{1, 2, 0}));
    EXPECT_EQ(local->findBuffer(2500, 500), &local->getMemory().buffers[2]);
}

}  // namespace
}  // namespace mooncake::tent
