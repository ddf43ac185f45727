// Endpoint attribute and port parsing, and the adapter's error helpers.
#include <gtest/gtest.h>

#include "tent/transport/mpcomm/mpcomm_adapter.h"
#include "tent/transport/mpcomm/mpcomm_peer_registry.h"

namespace mooncake::tent {
namespace {

TEST(MpcommPortParser, AcceptsDecimalPortsFromOneTo65535) {
    int port = 0;
    ASSERT_TRUE(parseMpcommTcpPort("1", port).ok());
    EXPECT_EQ(port, 1);
    ASSERT_TRUE(parseMpcommTcpPort("13579", port).ok());
    EXPECT_EQ(port, 13579);
    ASSERT_TRUE(parseMpcommTcpPort("65535", port).ok());
    EXPECT_EQ(port, 65535);
}

TEST(MpcommPortParser, RejectsEveryMalformedOrOutOfRangeValueNamingIt) {
    for (const std::string bad :
         {"", "abc", "13579x", "0", "-1", "65536", " 80", "+80", "1e3",
          "99999999999999999999"}) {
        int port = 4242;
        Status st = parseMpcommTcpPort(bad, port);
        EXPECT_TRUE(st.IsInvalidArgument()) << bad;
        EXPECT_EQ(st.message(), "invalid MPComm TCP port '" + bad +
                                    "': expected a decimal integer in "
                                    "1..65535");
        EXPECT_EQ(port, 4242) << "a rejected value must not be written";
    }
}

TEST(MpcommEndpointParser, ReadsTheV1Form) {
    std::string addr;
    int port = 0;
    ASSERT_TRUE(parseMpcommEndpointAttr("v1:10.0.0.1:13579", addr, port).ok());
    EXPECT_EQ(addr, "10.0.0.1");
    EXPECT_EQ(port, 13579);
}

TEST(MpcommEndpointParser, ReadsAnUnprefixedAttributeAsV1) {
    std::string addr;
    int port = 0;
    ASSERT_TRUE(parseMpcommEndpointAttr("10.0.0.7:2000", addr, port).ok());
    EXPECT_EQ(addr, "10.0.0.7");
    EXPECT_EQ(port, 2000);
}

TEST(MpcommEndpointParser, DoesNotMistakeAHostnameStartingWithVForAVersion) {
    std::string addr;
    int port = 0;
    ASSERT_TRUE(parseMpcommEndpointAttr("vnode1:13579", addr, port).ok());
    EXPECT_EQ(addr, "vnode1");
    EXPECT_EQ(port, 13579);
    ASSERT_TRUE(parseMpcommEndpointAttr("v2:13579", addr, port).ok());
    EXPECT_EQ(addr, "v2");
    ASSERT_TRUE(parseMpcommEndpointAttr("v1:vm01:80", addr, port).ok());
    EXPECT_EQ(addr, "vm01");
    EXPECT_EQ(port, 80);
}

TEST(MpcommEndpointParser, RejectsAnotherVersionNamingIt) {
    std::string addr = "unchanged";
    int port = 1;
    Status st = parseMpcommEndpointAttr("v2:10.0.0.1:13579", addr, port);
    EXPECT_TRUE(st.IsInvalidArgument());
    EXPECT_EQ(st.message(),
              "invalid MPComm endpoint attribute 'v2:10.0.0.1:13579': "
              "unsupported version 'v2' (this build reads v1)");
    EXPECT_EQ(addr, "unchanged");
    EXPECT_EQ(port, 1);
}

TEST(MpcommEndpointParser, RejectsIpv6Literals) {
    for (const std::string bad :
         {"[::1]:13579", "v1:[fe80::1]:13579", "::1:13579", "v1:::1:13579",
          "fe80::1:13579"}) {
        std::string addr;
        int port = 0;
        Status st = parseMpcommEndpointAttr(bad, addr, port);
        EXPECT_TRUE(st.IsInvalidArgument()) << bad;
        EXPECT_EQ(st.message(), "invalid MPComm endpoint attribute '" + bad +
                                    "': IPv6 literals are not supported, "
                                    "only IPv4");
    }
}

TEST(MpcommEndpointParser, RejectsMissingOrBadPartsNamingTheAttribute) {
    struct Case {
        std::string attr;
        std::string why;
    };
    for (const Case& c : std::vector<Case>{
             {"", "empty, expected [v1:]<host>:<port>"},
             {"10.0.0.1", "missing ':<port>'"},
             {":13579", "empty host"},
             {"v1::13579", "empty host"},
             {"10.0.0.1:0",
              "invalid MPComm TCP port '0': expected a decimal integer in "
              "1..65535"},
             {"v1:10.0.0.1:abc",
              "invalid MPComm TCP port 'abc': expected a decimal integer in "
              "1..65535"},
             {"host name:80", "bad character in host 'host name'"},
         }) {
        std::string addr;
        int port = 0;
        Status st = parseMpcommEndpointAttr(c.attr, addr, port);
        EXPECT_TRUE(st.IsInvalidArgument()) << c.attr;
        EXPECT_EQ(st.message(), "invalid MPComm endpoint attribute '" + c.attr +
                                    "': " + c.why);
    }
}

TEST(MpcommEndpointBuilder, PublishesV1WithTheHostPartOfTheSegmentName) {
    EXPECT_EQ(buildMpcommEndpointAttr("10.0.0.2:12346", 13579),
              "v1:10.0.0.2:13579");
    EXPECT_EQ(buildMpcommEndpointAttr("node7", 2000), "v1:node7:2000");
    std::string addr;
    int port = 0;
    ASSERT_TRUE(
        parseMpcommEndpointAttr(
            buildMpcommEndpointAttr("10.0.0.2:12346", 13580), addr, port)
            .ok());
    EXPECT_EQ(addr, "10.0.0.2");
    EXPECT_EQ(port, 13580);
}

TEST(MpcommAdapterErrors,
     ProviderFailuresNameTheOperationAndKeepTheNativeCode) {
    Status st = mpcommProviderError(
        "connect to 10.0.0.1:13579 (host 10.0.0.1:12345)", -4);
    EXPECT_TRUE(st.IsRdmaError());
    EXPECT_EQ(st.message(),
              "MPComm connect to 10.0.0.1:13579 (host 10.0.0.1:12345) "
              "failed, error=-4");
    int native = 0;
    ASSERT_TRUE(mpcommNativeStatusOf(st, native));
    EXPECT_EQ(native, -4);
    EXPECT_FALSE(
        mpcommNativeStatusOf(Status::NotImplemented("no code"), native));
    EXPECT_FALSE(mpcommNativeStatusOf(Status::OK(), native));
}

#ifndef TENT_HAVE_MPCOMM
TEST(MpcommAdapterStub, WithoutUseMpcommTheDefaultAdapterIsUnavailable) {
    auto adapter = createDefaultMpcommAdapter();
    ASSERT_NE(adapter, nullptr);
    EXPECT_FALSE(adapter->available());
    const std::string reason =
        "MPComm support is not compiled in (built with USE_MPCOMM=OFF; "
        "rebuild with -DUSE_MPCOMM=ON -DMPCOMM_ROOT=<prefix>)";
    EXPECT_EQ(adapter->unavailableReason(), reason);
    Status st = adapter->init("10.0.0.1:1", "", 13579);
    EXPECT_TRUE(st.IsNotImplemented());
    EXPECT_EQ(st.message(), reason);
    EXPECT_EQ(adapter->connect("h", "10.0.0.1", 1).message(), reason);
    EXPECT_EQ(adapter->queryRemoteBuffer("h", "10.0.0.1", 1).message(), reason);
    EXPECT_EQ(adapter->registerMemory(nullptr, 0).message(), reason);
    EXPECT_EQ(adapter->putAsync(0, "h", 0, 1), kInvalidMpcommTransferHandle);
    EXPECT_EQ(adapter->getAsync(0, "h", 0, 1), kInvalidMpcommTransferHandle);
    // Teardown calls are harmless on the stub.
    adapter->releaseTransfer(kInvalidMpcommTransferHandle);
    adapter->stopAcceptThread();
    adapter->shutdown();
    adapter->shutdown();
}
#endif

TEST(MpcommAdapterTypes, NeutralTypesHaveTheirDocumentedDefaults) {
    EXPECT_EQ(kInvalidMpcommTransferHandle, 0u);
    MpcommTransferOutcome outcome;
    EXPECT_FALSE(outcome.ok);
    EXPECT_EQ(outcome.bytes_transferred, 0u);
    EXPECT_EQ(outcome.native_status, 0);
}

}  // namespace
}  // namespace mooncake::tent
