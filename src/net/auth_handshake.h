// The cluster token: an optional shared secret that every connection to an
// engine's listeners (the RPC port and the TCP transport's data port) must
// prove it knows before the server parses a single frame of its protocol.
//
// With a token set, a connection starts with this exchange (sizes in bytes):
//
//   client -> server  hello:     "AUTHELLO" | version (1) | client nonce (32)
//   server -> client  challenge: "AUTHCHAL" | version (1) | server nonce (32)
//   client -> server  proof:     HMAC-SHA256(token, "tent-auth-v1 client" |
//                                            client nonce | server nonce)
//   server -> client  verdict:   'A' | HMAC-SHA256(token, "tent-auth-v1
//                                            server" | client nonce |
//                                            server nonce)
//                                or 'R' and the server closes.
//
// Nonces are fresh random bytes per connection, and both nonces and the
// direction are inside each MAC, so an answer recorded on one connection,
// or reflected from the other direction, matches on no other. The client
// checks the server's MAC too: a listener that does not know the token
// cannot pass for an engine of the cluster. The token itself never travels.
// Each side reads a fixed number of bytes, magic first, so a peer that
// speaks another protocol is told apart after 8 bytes and nothing it
// announces is ever allocated. Without a token nothing of this is sent: the
// wire is exactly the protocol's own.
//
// This unit is the only one that sees OpenSSL.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "net/socket_io.h"
#include "tent/common/config.h"
#include "tent/common/status.h"

namespace mooncake::tent::net {

// Where the token comes from: the environment variable, when set and not
// empty, wins over the config key (it keeps the secret out of config files).
constexpr char kAuthTokenKey[] = "rpc/auth_token";
constexpr char kAuthTokenEnv[] = "MC_TENT_AUTH_TOKEN";
// A longer token adds nothing to HMAC-SHA256's strength.
constexpr size_t kMaxAuthTokenBytes = 1024;

constexpr size_t kAuthMagicBytes = 8;
constexpr size_t kAuthNonceBytes = 32;
constexpr size_t kAuthMacBytes = 32;
constexpr uint8_t kAuthVersion = 1;
// hello and challenge: magic, version, nonce.
constexpr size_t kAuthGreetingBytes = kAuthMagicBytes + 1 + kAuthNonceBytes;
constexpr char kAuthHelloMagic[] = "AUTHELLO";
constexpr char kAuthChallengeMagic[] = "AUTHCHAL";
constexpr char kAuthAccept = 'A';
constexpr char kAuthReject = 'R';

// The cluster token of `conf` (MC_TENT_AUTH_TOKEN, else rpc/auth_token;
// empty: no token). A token longer than kMaxAuthTokenBytes, or a key that
// is not a string, is InvalidArgument naming the source and what it holds.
Status readAuthToken(const Config& conf, std::string& token);

// The server's half, on a freshly accepted `fd`, all within `deadline`.
// OK when the client proved the token. Otherwise the status says why in
// words for the log ("sent no auth hello ...", "wrong token ...", "closed
// after 12 of 41 handshake bytes", "... timed out"); the caller closes.
Status serverHandshake(int fd, const std::string& token, Deadline deadline);

// The client's half, on a freshly connected `fd`, within `deadline`. OK when
// the server accepted our proof and proved the token itself. Errors are
// RpcServiceError starting "auth handshake: ".
Status clientHandshake(int fd, const std::string& token, Deadline deadline);

// connectTo() and, with a non-empty `token`, clientHandshake(), within one
// deadline; the socket is closed on failure. An empty token connects
// exactly as connectTo() does.
Status connectWithToken(const std::string& host, uint16_t port,
                        const std::string& token, Deadline deadline,
                        int& fd_out);

// HMAC-SHA256(token, label | client nonce | server nonce): what each side
// sends. Exposed for the tests, which play a client or server by hand.
std::string authMac(const std::string& token, const char* label,
                    const std::string& client_nonce,
                    const std::string& server_nonce);
constexpr char kAuthClientLabel[] = "tent-auth-v1 client";
constexpr char kAuthServerLabel[] = "tent-auth-v1 server";

}  // namespace mooncake::tent::net
