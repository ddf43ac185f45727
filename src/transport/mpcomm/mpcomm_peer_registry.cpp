// The MPComm peer cache (rules in mpcomm_peer_registry.h) and the endpoint
// attribute's parsers.
#include "tent/transport/mpcomm/mpcomm_peer_registry.h"

#include <glog/logging.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>

namespace mooncake::tent {

namespace {

constexpr const char kPortRule[] = "expected a decimal integer in 1..65535";

bool isVersionToken(const std::string& token) {
    if (token.size() < 2 || token[0] != 'v') return false;
    return std::all_of(token.begin() + 1, token.end(),
                       [](unsigned char c) { return std::isdigit(c); });
}

bool isHostChar(unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '-' || c == '_';
}

}  // namespace

Status parseMpcommTcpPort(const std::string& text, int& port) {
    long value = 0;
    bool digits = true;
    for (unsigned char c : text) {
        digits = std::isdigit(c);
        if (!digits) break;
        value = value * 10 + (c - '0');
        if (value > 65535) break;  // before it overflows
    }
    if (!digits || value < 1 || value > 65535) {
        return Status::InvalidArgument("invalid MPComm TCP port '" + text +
                                       "': " + kPortRule);
    }
    port = static_cast<int>(value);
    return Status::OK();
}

Status parseMpcommEndpointAttr(const std::string& attr, std::string& addr,
                               int& port) {
    auto invalid = [&attr](const std::string& why) {
        return Status::InvalidArgument("invalid MPComm endpoint attribute '" +
                                       attr + "': " + why);
    };
    if (attr.empty()) return invalid("empty, expected [v1:]<host>:<port>");
    if (attr.find_first_of("[]") != std::string::npos) {
        return invalid("IPv6 literals are not supported, only IPv4");
    }
    size_t colons = std::count(attr.begin(), attr.end(), ':');
    if (colons == 0) return invalid("missing ':<port>'");
    std::string rest = attr;
    if (colons >= 2) {
        std::string first = attr.substr(0, attr.find(':'));
        if (!isVersionToken(first)) {
            return invalid("IPv6 literals are not supported, only IPv4");
        }
        if (first != "v1") {
            return invalid("unsupported version '" + first +
                           "' (this build reads v1)");
        }
        rest = attr.substr(first.size() + 1);
        if (colons > 2) {
            return invalid("IPv6 literals are not supported, only IPv4");
        }
    }
    size_t colon = rest.find(':');
    std::string host = rest.substr(0, colon);
    if (host.empty()) return invalid("empty host");
    for (unsigned char c : host) {
        if (!isHostChar(c)) {
            return invalid("bad character in host '" + host + "'");
        }
    }
    int parsed_port = 0;
    Status st = parseMpcommTcpPort(rest.substr(colon + 1), parsed_port);
    if (!st.ok()) return invalid(std::string(st.message()));
    addr = host;
    port = parsed_port;
    return Status::OK();
}

Status parseMpcommAdvertiseAddress(const std::string& text, std::string& host) {
    auto invalid = [&text](const std::string& why) {
        return Status::InvalidArgument("invalid MPComm advertise address '" +
                                       text + "': " + why);
    };
    if (text.empty()) return invalid("empty, expected an IPv4 address or host");
    if (text.find_first_of("[]") != std::string::npos ||
        std::count(text.begin(), text.end(), ':') > 1) {
        return invalid("IPv6 literals are not supported, only IPv4");
    }
    if (text.find(':') != std::string::npos) {
        return invalid("a port is not allowed; the port is MPCOMM_TCP_PORT");
    }
    for (unsigned char c : text) {
        if (!isHostChar(c)) return invalid("bad character in host");
    }
    host = text;
    return Status::OK();
}

std::string buildMpcommEndpointAttr(const std::string& local_segment_name,
                                    int tcp_port) {
    return "v1:" + mpcommHostOf(local_segment_name) + ":" +
           std::to_string(tcp_port);
}

std::string mpcommHostOf(const std::string& segment_name) {
    size_t colon = segment_name.rfind(':');
    return colon == std::string::npos ? segment_name
                                      : segment_name.substr(0, colon);
}

const char* mpcommPeerStateName(MpcommPeerState state) {
    switch (state) {
        case MpcommPeerState::CONNECTING:
            return "CONNECTING";
        case MpcommPeerState::CONNECTED_NO_KEYS:
            return "CONNECTED_NO_KEYS";
        case MpcommPeerState::READY:
            return "READY";
    }
    return "UNKNOWN";
}

struct MpcommPeerFlight {
    explicit MpcommPeerFlight(std::string host) : host_id(std::move(host)) {}
    const std::string host_id;
    bool done = false;  // guarded by Shared::mu, like the fields below
    Status result;
    size_t waiters = 0;
};

// Outlives the registry while flights run: each flight's thread holds it.
struct MpcommPeerRegistry::Shared {
    struct Peer {
        MpcommPeerState state = MpcommPeerState::CONNECTING;
        std::string addr;  // the endpoint connected (or being connected)
        int port = 0;
        uint64_t incarnation = 0;
        bool connected = false;  // connect() succeeded for `incarnation`
        bool keys_valid = false;
        uint64_t keys_epoch = 0;  // the epoch the keys were fetched for
        std::shared_ptr<MpcommPeerFlight> flight;  // null when idle
        // What readers see without `mu`; replaced with `incarnation`.
        std::shared_ptr<MpcommPeerLink> link;
        std::atomic<uint64_t>* links_lowered = nullptr;  // Shared's

        // The methods below run under `mu`.
        void publish() {
            bool ready = connected && state == MpcommPeerState::READY &&
                         keys_valid && !flight;
            setReady(ready ? keys_epoch + 1 : 0);
        }
        void retireLink() { setReady(0); }
        // The count goes up after the link says less, so a reader who read
        // the count before checking the link sees one or the other.
        void setReady(uint64_t value) {
            uint64_t before =
                link->ready_epoch.exchange(value, std::memory_order_acq_rel);
            if (value < before) {
                links_lowered->fetch_add(1, std::memory_order_acq_rel);
            }
        }
        // Holders of the old link never see the new incarnation ready.
        void relink() {
            retireLink();
            link = std::make_shared<MpcommPeerLink>(incarnation);
            publish();
        }
    };

    std::shared_ptr<MpcommAdapter> adapter;
    std::atomic<uint64_t> links_lowered{0};
    mutable std::mutex mu;
    std::condition_variable progress;  // a flight finished
    std::unordered_map<std::string, Peer> peers;
    // Mooncake's ensure(): per host, the ranges seen and their epoch.
    struct SeenRanges {
        uint64_t epoch = 0;
        std::vector<MpcommBufferRange> covered;
    };
    std::unordered_map<std::string, SeenRanges> seen_ranges;
    std::list<std::shared_ptr<MpcommPeerFlight>> running;
    std::vector<std::function<void()>> when_idle;
    // Taken out of when_idle and still running unlocked.
    size_t idle_work_running = 0;

    // Under `mu`.
    void launch(const std::shared_ptr<Shared>& self, Peer& peer,
                const std::shared_ptr<MpcommPeerFlight>& flight,
                bool need_connect, uint64_t epoch);
    void run(const std::shared_ptr<MpcommPeerFlight>& flight, std::string addr,
             int port, bool need_connect, uint64_t epoch);
};

namespace {

std::string endpointOf(const std::string& addr, int port) {
    return addr + ":" + std::to_string(port);
}

std::atomic<size_t> g_handshake_threads{0};

}  // namespace

void MpcommPeerRegistry::Shared::launch(
    const std::shared_ptr<Shared>& self, Peer& peer,
    const std::shared_ptr<MpcommPeerFlight>& flight, bool need_connect,
    uint64_t epoch) {
    peer.flight = flight;
    peer.publish();
    running.push_back(flight);
    std::string addr = peer.addr;
    int port = peer.port;
    try {
        // Detached: a provider call may never return.
        g_handshake_threads.fetch_add(1, std::memory_order_relaxed);
        std::thread([self = self, flight = flight, addr, port, need_connect,
                     epoch]() mutable {
            self->run(flight, addr, port, need_connect, epoch);
            // The adapter's destructor may still log: release first.
            self.reset();
            flight.reset();
            g_handshake_threads.fetch_sub(1, std::memory_order_release);
        }).detach();
    } catch (const std::system_error& e) {
        g_handshake_threads.fetch_sub(1, std::memory_order_relaxed);
        running.remove(flight);
        peer.flight.reset();
        peer.publish();
        flight->result = Status::InternalError(
            "cannot start an MPComm handshake thread for " + flight->host_id +
            ": " + e.what());
        flight->done = true;
    }
}

void MpcommPeerRegistry::Shared::run(
    const std::shared_ptr<MpcommPeerFlight>& flight, std::string addr, int port,
    bool need_connect, uint64_t epoch) {
    const std::string& host_id = flight->host_id;
    Status connect_status;
    if (need_connect) {
        connect_status = adapter->connect(host_id, addr, port);
        if (connect_status.ok()) {
            LOG(INFO) << "MpcommTransport: Connected to segment " << host_id;
        }
    }
    Status query_status;
    if (connect_status.ok()) {
        query_status = adapter->queryRemoteBuffer(host_id, addr, port);
        if (!query_status.ok()) {
            int native = 0;
            std::string code = mpcommNativeStatusOf(query_status, native)
                                   ? std::to_string(native)
                                   : "unknown";
            LOG(ERROR) << "MpcommTransport: Failed to query remote buffers "
                          "from "
                       << host_id << ", error=" << code;
        }
    }

    std::vector<std::function<void()>> idle_work;
    {
        std::lock_guard<std::mutex> lock(mu);
        auto it = peers.find(host_id);
        // Recorded even when every waiter gave up, but only in the entry
        // that started this flight.
        if (it != peers.end() && it->second.flight == flight) {
            Peer& peer = it->second;
            peer.flight.reset();
            if (!connect_status.ok()) {
                peer.retireLink();
                peers.erase(it);  // never established
            } else if (!query_status.ok()) {
                peer.connected = true;
                peer.state = MpcommPeerState::CONNECTED_NO_KEYS;
                peer.keys_valid = false;
            } else {
                peer.connected = true;
                peer.state = MpcommPeerState::READY;
                peer.keys_valid = true;
                peer.keys_epoch = epoch;
            }
            if (connect_status.ok()) peer.publish();
        }
        flight->result = connect_status.ok() ? query_status : connect_status;
        flight->done = true;
        running.remove(flight);
        if (running.empty() && !when_idle.empty()) {
            idle_work.swap(when_idle);
            ++idle_work_running;
        }
        progress.notify_all();
    }
    if (idle_work.empty()) return;
    for (auto& work : idle_work) work();
    std::lock_guard<std::mutex> lock(mu);
    --idle_work_running;
    progress.notify_all();
}

MpcommPeerRegistry::MpcommPeerRegistry(std::shared_ptr<MpcommAdapter> adapter)
    : shared_(std::make_shared<Shared>()),
      links_lowered_(&shared_->links_lowered) {
    shared_->adapter = std::move(adapter);
}

MpcommPeerRegistry::~MpcommPeerRegistry() = default;

MpcommPeerRegistry::Progress MpcommPeerRegistry::poll(
    const MpcommPeerView& view, Ticket& ticket, Status& error) {
    Shared& s = *shared_;
    std::lock_guard<std::mutex> lock(s.mu);
    auto start = [&](Shared::Peer& peer, bool need_connect) {
        ticket.flight_ = std::make_shared<MpcommPeerFlight>(view.host_id);
        s.launch(shared_, peer, ticket.flight_, need_connect,
                 view.registration_epoch);
        return Progress::kWaiting;
    };
    if (ticket.flight_) {
        if (!ticket.flight_->done) return Progress::kWaiting;
        std::shared_ptr<MpcommPeerFlight> flight = std::move(ticket.flight_);
        if (!flight->result.ok()) {
            error = flight->result;
            return Progress::kFailed;
        }
        // Succeeded: look again, the peer may have moved on.
    }
    auto it = s.peers.find(view.host_id);
    const bool known = it != s.peers.end();
    if (known && it->second.flight) {
        ticket.flight_ = it->second.flight;
        return Progress::kWaiting;
    }
    if (!known || (view.incarnation != 0 && it->second.incarnation != 0 &&
                   view.incarnation != it->second.incarnation)) {
        Shared::Peer& peer = s.peers[view.host_id];
        if (known) {
            LOG(INFO) << "MpcommTransport: segment " << view.host_id
                      << " restarted (incarnation " << std::hex
                      << peer.incarnation << " -> " << view.incarnation
                      << std::dec << "); reconnecting to "
                      << endpointOf(view.addr, view.port);
        }
        peer.links_lowered = &s.links_lowered;
        peer.state = MpcommPeerState::CONNECTING;
        peer.addr = view.addr;
        peer.port = view.port;
        peer.incarnation = view.incarnation;
        peer.connected = false;
        peer.keys_valid = false;
        if (known) {
            peer.relink();
        } else {
            peer.link = std::make_shared<MpcommPeerLink>(view.incarnation);
        }
        return start(peer, true);
    }
    Shared::Peer& peer = it->second;
    if (peer.incarnation == 0 && view.incarnation != 0) {
        peer.incarnation = view.incarnation;
        peer.relink();
    }
    if (!peer.connected) {
        // Only when a handshake thread could not be started.
        return start(peer, true);
    }
    if (peer.state == MpcommPeerState::READY && peer.keys_valid &&
        view.registration_epoch <= peer.keys_epoch) {
        ticket.link_ = peer.link;
        return Progress::kReady;
    }
    return start(peer, false);
}

bool MpcommPeerRegistry::waitForAny(const std::vector<Ticket*>& tickets,
                                    Clock::time_point deadline) {
    Shared& s = *shared_;
    std::unique_lock<std::mutex> lock(s.mu);
    auto any_done = [&tickets] {
        for (const Ticket* t : tickets) {
            if (!t->flight_ || t->flight_->done) return true;
        }
        return false;
    };
    if (any_done()) return true;
    for (Ticket* t : tickets) ++t->flight_->waiters;
    bool done = s.progress.wait_until(lock, deadline, any_done);
    for (Ticket* t : tickets) --t->flight_->waiters;
    return done;
}

Status MpcommPeerRegistry::handshakeTimeout(const MpcommPeerView& peer,
                                            int64_t timeout_ms) {
    return Status::RpcServiceError(
        "MPComm handshake with " + peer.host_id + " at " +
        endpointOf(peer.addr, peer.port) +
        " did not finish within transports/mpcomm/connect_timeout_ms=" +
        std::to_string(timeout_ms));
}

Status MpcommPeerRegistry::ensure(const MpcommPeerView& peer,
                                  Clock::time_point deadline,
                                  int64_t timeout_ms) {
    Ticket ticket;
    for (;;) {
        Status error;
        switch (poll(peer, ticket, error)) {
            case Progress::kReady:
                return Status::OK();
            case Progress::kFailed:
                return error;
            case Progress::kWaiting:
                break;
        }
        if (!waitForAny({&ticket}, deadline)) {
            return handshakeTimeout(peer, timeout_ms);
        }
    }
}

std::vector<std::string> MpcommPeerRegistry::drain(Clock::time_point deadline) {
    Shared& s = *shared_;
    std::unique_lock<std::mutex> lock(s.mu);
    for (auto& entry : s.peers) entry.second.retireLink();
    s.peers.clear();
    s.seen_ranges.clear();
    s.progress.wait_until(lock, deadline, [&s] { return s.running.empty(); });
    std::vector<std::string> stuck;
    for (const auto& flight : s.running) stuck.push_back(flight->host_id);
    return stuck;
}

void MpcommPeerRegistry::clear() { drain(Clock::now()); }

Status MpcommPeerRegistry::ensure(
    const std::string& host_id, const std::string& tcp_addr, int tcp_port,
    const std::vector<MpcommBufferRange>& buffers) {
    MpcommPeerView view;
    view.host_id = host_id;
    view.addr = tcp_addr;
    view.port = tcp_port;
    {
        std::lock_guard<std::mutex> lock(shared_->mu);
        auto [it, first] = shared_->seen_ranges.try_emplace(host_id);
        Shared::SeenRanges& seen = it->second;
        bool grew = false;
        for (const MpcommBufferRange& range : buffers) {
            bool covered = std::any_of(seen.covered.begin(), seen.covered.end(),
                                       [&range](const MpcommBufferRange& c) {
                                           return c.addr <= range.addr &&
                                                  range.addr + range.length <=
                                                      c.addr + c.length;
                                       });
            if (covered) continue;
            seen.covered.push_back(range);
            grew = true;
        }
        if (grew && !first) ++seen.epoch;
        view.registration_epoch = seen.epoch;
    }
    return ensure(view,
                  Clock::now() + std::chrono::milliseconds(kEnsureTimeoutMs),
                  kEnsureTimeoutMs);
}

void MpcommPeerRegistry::runWhenIdle(std::function<void()> fn) {
    {
        std::lock_guard<std::mutex> lock(shared_->mu);
        if (!shared_->running.empty()) {
            shared_->when_idle.push_back(std::move(fn));
            return;
        }
    }
    fn();
}

bool MpcommPeerRegistry::idle() const {
    std::lock_guard<std::mutex> lock(shared_->mu);
    return shared_->running.empty() && shared_->idle_work_running == 0;
}

size_t MpcommPeerRegistry::size() const {
    std::lock_guard<std::mutex> lock(shared_->mu);
    return shared_->peers.size();
}

bool MpcommPeerRegistry::contains(const std::string& host_id) const {
    std::lock_guard<std::mutex> lock(shared_->mu);
    return shared_->peers.count(host_id) != 0;
}

bool MpcommPeerRegistry::stateOf(const std::string& host_id,
                                 MpcommPeerState& state) const {
    std::lock_guard<std::mutex> lock(shared_->mu);
    auto it = shared_->peers.find(host_id);
    if (it == shared_->peers.end()) return false;
    state = it->second.state;
    return true;
}

size_t MpcommPeerRegistry::waiters(const std::string& host_id) const {
    std::lock_guard<std::mutex> lock(shared_->mu);
    auto it = shared_->peers.find(host_id);
    if (it == shared_->peers.end() || !it->second.flight) return 0;
    return it->second.flight->waiters;
}

size_t MpcommPeerRegistry::handshakeThreadsAlive() {
    return g_handshake_threads.load(std::memory_order_acquire);
}

size_t MpcommPeerRegistry::flightsRunning() const {
    std::lock_guard<std::mutex> lock(shared_->mu);
    return shared_->running.size();
}

}  // namespace mooncake::tent
