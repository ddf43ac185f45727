// Selection routing with MPCOMM loaded, and the transport table row.
#include <gtest/gtest.h>

#include <algorithm>

#include "kit/request_builder.h"
#include "tent/runtime/transport_selector.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"

namespace mooncake::tent {
namespace {

SegmentDesc peerWithBufferOn(std::vector<TransportType> transports) {
    return testing::oneBufferSegment("10.0.0.2:12346", std::move(transports));
}

Request requestInto(uint64_t addr) {
    return testing::makeRequest(Request::WRITE, nullptr, 1, addr, 64);
}

// What `selector` picks for `r` to a peer whose buffer is on TCP and
// MPCOMM (UNSPEC, with a test failure, when it picks nothing).
TransportType chosenBetweenTcpAndMpcomm(TransportSelector& selector,
                                        const Request& r) {
    TransportType chosen = UNSPEC;
    Status st = selector.select(r, peerWithBufferOn({TCP, MPCOMM}), chosen);
    EXPECT_TRUE(st.ok()) << st;
    return chosen;
}

TEST(MpcommSelection, APolicyNamingMpcommRoutesToIt) {
    Config conf;
    ASSERT_TRUE(conf.loadText(R"({
        "transports": {"mpcomm": {"enable": true}},
        "policy": [{"name": "mpcomm_memory", "segment_type": "memory",
                    "transports": ["mpcomm"]}]})")
                    .ok());
    TransportSelector selector;
    ASSERT_TRUE(selector.loadPolicy(conf).ok());
    selector.setLoaded({TCP, MPCOMM});
    EXPECT_EQ(chosenBetweenTcpAndMpcomm(selector, requestInto(0x10000)),
              MPCOMM);
}

TEST(MpcommSelection, AnMpcommHintRoutesToIt) {
    TransportSelector selector;
    selector.setLoaded({TCP, MPCOMM});
    Request r = requestInto(0x10000);
    r.transport_hint = MPCOMM;
    EXPECT_EQ(chosenBetweenTcpAndMpcomm(selector, r), MPCOMM);
}

TEST(MpcommSelection, TheDefaultOrderPicksTcpBeforeMpcomm) {
    TransportSelector selector;
    selector.setLoaded({TCP, MPCOMM});
    EXPECT_EQ(chosenBetweenTcpAndMpcomm(selector, requestInto(0x10000)), TCP);
}

TEST(MpcommSelection, MpcommIsNamedMpcommInBothDirections) {
    EXPECT_STREQ(transportTypeName(MPCOMM), "mpcomm");
    EXPECT_EQ(parseTransportType("mpcomm"), MPCOMM);
    EXPECT_EQ(static_cast<int>(MPCOMM), 12);
}

TEST(MpcommSelection, TheTransportTableListsMpcommAfterTcpAndBeforeTpu) {
    const auto& table = transportTable();
    auto find = [&table](TransportType type) {
        return std::find_if(
            table.begin(), table.end(),
            [type](const TransportEntry& e) { return e.type == type; });
    };
    auto mpcomm = find(MPCOMM);
    ASSERT_NE(mpcomm, table.end());
    EXPECT_STREQ(mpcomm->name, "mpcomm");
    auto tcp = find(TCP);
    ASSERT_NE(tcp, table.end());
    EXPECT_LT(tcp - table.begin(), mpcomm - table.begin());
    auto tpu = find(TPU);
    if (tpu != table.end()) {
        EXPECT_LT(mpcomm - table.begin(), tpu - table.begin());
    }
#ifdef TENT_HAVE_MPCOMM
    EXPECT_TRUE(mpcomm->enabled_by_default);
#else
    EXPECT_FALSE(mpcomm->enabled_by_default);
#endif
    std::unique_ptr<Transport> built = mpcomm->factory();
    ASSERT_NE(built, nullptr);
    EXPECT_STREQ(built->getName(), "mpcomm");
}

}  // namespace
}  // namespace mooncake::tent
