#include "net/auth_handshake.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace mooncake::tent::net {

namespace {

Status clientError(const std::string& why) {
    return Status::RpcServiceError("auth handshake: " + why);
}

bool freshNonce(std::string& nonce) {
    nonce.assign(kAuthNonceBytes, '\0');
    return RAND_bytes(reinterpret_cast<unsigned char*>(&nonce[0]),
                      static_cast<int>(kAuthNonceBytes)) == 1;
}

std::string greeting(const char* magic, const std::string& nonce) {
    std::string out(magic, kAuthMagicBytes);
    out.push_back(static_cast<char>(kAuthVersion));
    out += nonce;
    return out;
}

bool sameMac(const std::string& a, const std::string& b) {
    // Constant time: how long a comparison takes must not tell an attacker
    // how many leading bytes it guessed right.
    return a.size() == kAuthMacBytes && b.size() == kAuthMacBytes &&
           CRYPTO_memcmp(a.data(), b.data(), kAuthMacBytes) == 0;
}

// Reads exactly `len` bytes into `out`; on failure the status names `what`
// and how far it got, so a log line tells a truncated handshake from a
// silent one.
Status readPart(int fd, size_t len, Deadline deadline, const char* what,
                std::string& out, bool* closed_out = nullptr) {
    out.assign(len, '\0');
    size_t got = 0;
    bool closed = false;
    Status s = recvAll(fd, &out[0], len, deadline, &got, &closed);
    if (closed_out) *closed_out = closed;
    if (s.ok()) return s;
    if (closed) {
        return Status::RpcServiceError(
            std::string("closed the connection after ") + std::to_string(got) +
            " of " + std::to_string(len) + " bytes of the " + what);
    }
    return Status::RpcServiceError(
        std::string(what) + ": " + std::string(s.message()) + " after " +
        std::to_string(got) + " of " + std::to_string(len) + " bytes");
}

// Bytes that are not ours, shown safely in a log line.
std::string printable(const std::string& bytes) {
    static const char kDigits[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : bytes) {
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
            out.push_back(static_cast<char>(c));
        } else {
            out += "\\x";
            out.push_back(kDigits[c >> 4]);
            out.push_back(kDigits[c & 15]);
        }
    }
    return out;
}

}  // namespace

std::string authMac(const std::string& token, const char* label,
                    const std::string& client_nonce,
                    const std::string& server_nonce) {
    std::string message(label);
    message += client_nonce;
    message += server_nonce;
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    if (!HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
              reinterpret_cast<const unsigned char*>(message.data()),
              message.size(), mac, &mac_len) ||
        mac_len != kAuthMacBytes) {
        return std::string();  // matches nothing (sameMac wants 32 bytes)
    }
    return std::string(reinterpret_cast<char*>(mac), mac_len);
}

Status readAuthToken(const Config& conf, std::string& token) {
    std::string source = kAuthTokenEnv;
    const char* env = std::getenv(kAuthTokenEnv);
    std::string value;
    if (env && *env) {
        value = env;
    } else {
        source = kAuthTokenKey;
        const Json::Value node = conf.getValue(kAuthTokenKey);
        if (!node.isNull() && !node.isString()) {
            return Status::InvalidArgument(
                std::string(kAuthTokenKey) +
                " must be a string (the cluster token), got a JSON " +
                (node.isObject()  ? "object"
                 : node.isArray() ? "array"
                 : node.isBool()  ? "boolean"
                                  : "number"));
        }
        if (node.isString()) value = node.asString();
    }
    if (value.size() > kMaxAuthTokenBytes) {
        return Status::InvalidArgument(
            source + " holds a token of " + std::to_string(value.size()) +
            " bytes; at most " + std::to_string(kMaxAuthTokenBytes) +
            " are allowed");
    }
    token = std::move(value);
    return Status::OK();
}

Status serverHandshake(int fd, const std::string& token, Deadline deadline) {
    // The magic first, alone: a client speaking the plain protocol is named
    // after 8 bytes, never waited on for the rest of a hello it will not
    // send.
    std::string magic, rest;
    CHECK_STATUS(readPart(fd, kAuthMagicBytes, deadline, "auth hello", magic));
    if (magic != std::string(kAuthHelloMagic, kAuthMagicBytes)) {
        return Status::RpcServiceError(
            "sent no auth hello (its first bytes are \"" + printable(magic) +
            "\"): a client without the cluster token?");
    }
    CHECK_STATUS(readPart(fd, kAuthGreetingBytes - kAuthMagicBytes, deadline,
                          "auth hello", rest));
    if (static_cast<uint8_t>(rest[0]) != kAuthVersion) {
        return Status::RpcServiceError(
            "auth hello of version " +
            std::to_string(static_cast<uint8_t>(rest[0])) + ", expected " +
            std::to_string(kAuthVersion));
    }
    const std::string client_nonce = rest.substr(1);
    std::string server_nonce;
    if (!freshNonce(server_nonce)) {
        return Status::RpcServiceError("RAND_bytes failed: no server nonce");
    }
    const std::string challenge = greeting(kAuthChallengeMagic, server_nonce);
    CHECK_STATUS(sendAll(fd, challenge.data(), challenge.size(), deadline));
    std::string proof;
    CHECK_STATUS(readPart(fd, kAuthMacBytes, deadline, "auth proof", proof));
    if (!sameMac(proof, authMac(token, kAuthClientLabel, client_nonce,
                                server_nonce))) {
        const char reject = kAuthReject;
        // Best effort: the client learns why before the close.
        (void)sendAll(fd, &reject, 1, deadline);
        return Status::RpcServiceError(
            "wrong token: its proof does not match the cluster token");
    }
    std::string verdict(1, kAuthAccept);
    verdict += authMac(token, kAuthServerLabel, client_nonce, server_nonce);
    return sendAll(fd, verdict.data(), verdict.size(), deadline);
}

Status clientHandshake(int fd, const std::string& token, Deadline deadline) {
    std::string client_nonce;
    if (!freshNonce(client_nonce)) {
        return clientError("RAND_bytes failed: no client nonce");
    }
    const std::string hello = greeting(kAuthHelloMagic, client_nonce);
    Status s = sendAll(fd, hello.data(), hello.size(), deadline);
    if (!s.ok()) return clientError("sending the hello: " + s.ToString());

    const std::string no_token_hint =
        " (has the server no cluster token, rpc/auth_token / " +
        std::string(kAuthTokenEnv) + "?)";
    std::string magic, rest;
    s = readPart(fd, kAuthMagicBytes, deadline, "auth challenge", magic);
    if (!s.ok()) {
        return clientError("the server sent no challenge: " +
                           std::string(s.message()) + no_token_hint);
    }
    if (magic != std::string(kAuthChallengeMagic, kAuthMagicBytes)) {
        return clientError("the server answered the hello with \"" +
                           printable(magic) + "\", not a challenge" +
                           no_token_hint);
    }
    s = readPart(fd, kAuthGreetingBytes - kAuthMagicBytes, deadline,
                 "auth challenge", rest);
    if (!s.ok()) return clientError(std::string(s.message()));
    if (static_cast<uint8_t>(rest[0]) != kAuthVersion) {
        return clientError("challenge of version " +
                           std::to_string(static_cast<uint8_t>(rest[0])) +
                           ", expected " + std::to_string(kAuthVersion));
    }
    const std::string server_nonce = rest.substr(1);
    const std::string proof =
        authMac(token, kAuthClientLabel, client_nonce, server_nonce);
    s = sendAll(fd, proof.data(), proof.size(), deadline);
    if (!s.ok()) return clientError("sending the proof: " + s.ToString());

    std::string verdict;
    bool closed = false;
    s = readPart(fd, 1, deadline, "auth verdict", verdict, &closed);
    if (!s.ok() && !closed) return clientError(std::string(s.message()));
    if (!s.ok() || verdict[0] == kAuthReject) {
        // A server closes right after 'R'; a close without it is the same
        // answer from an older or stricter peer.
        return clientError("the server refused our token: rpc/auth_token (or " +
                           std::string(kAuthTokenEnv) +
                           ") differs between the two engines");
    }
    if (verdict[0] != kAuthAccept) {
        return clientError("unexpected verdict byte \"" + printable(verdict) +
                           "\"");
    }
    std::string server_mac;
    s = readPart(fd, kAuthMacBytes, deadline, "auth verdict", server_mac);
    if (!s.ok()) return clientError(std::string(s.message()));
    if (!sameMac(server_mac, authMac(token, kAuthServerLabel, client_nonce,
                                     server_nonce))) {
        return clientError(
            "the server accepted us but could not prove it knows the cluster "
            "token: not an engine of this cluster");
    }
    return Status::OK();
}

Status connectWithToken(const std::string& host, uint16_t port,
                        const std::string& token, Deadline deadline,
                        int& fd_out) {
    int fd = -1;
    CHECK_STATUS(connectTo(host, port, deadline, fd));
    if (!token.empty()) {
        Status s = clientHandshake(fd, token, deadline);
        if (!s.ok()) {
            ::close(fd);
            return s;
        }
    }
    fd_out = fd;
    return Status::OK();
}

}  // namespace mooncake::tent::net
