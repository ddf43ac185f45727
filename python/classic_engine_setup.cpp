// ClassicEngine: initialize() and close(), which map classic's arguments
// (hostname, metadata connection string, protocol) onto a TENT Config.
#include <glog/logging.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "classic_engine.h"
#include "tent/runtime/transport.h"

namespace mooncake::tent::classic {

namespace {

using Code = Status::Code;
using py_support::fail;

const char kP2PHandshake[] = "P2PHANDSHAKE";

std::vector<std::string> splitList(const std::string& text) {
    std::vector<std::string> out;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (!item.empty()) out.push_back(item);
    }
    return out;
}

}  // namespace

int ClassicEngine::initialize(const std::string& local_hostname,
                              const std::string& metadata_server,
                              const std::string& protocol,
                              const std::string& device_name) {
    // Classic's connection string: "P2PHANDSHAKE", "<type>://<servers>",
    // or bare servers, which mean etcd. An http one is a URL, passed whole.
    if (metadata_server == kP2PHandshake) {
        return initializeExt(local_hostname, metadata_server, protocol,
                             device_name, "p2p");
    }
    if (metadata_server.compare(0, 7, "http://") == 0) {
        return initializeExt(local_hostname, metadata_server, protocol,
                             device_name, "http");
    }
    const size_t pos = metadata_server.find("://");
    if (pos == std::string::npos) {
        return initializeExt(local_hostname, metadata_server, protocol,
                             device_name, "etcd");
    }
    return initializeExt(local_hostname, metadata_server.substr(pos + 3),
                         protocol, device_name, metadata_server.substr(0, pos));
}

int ClassicEngine::initializeExt(const std::string& local_hostname,
                                 const std::string& metadata_server,
                                 const std::string& protocol,
                                 const std::string& device_name,
                                 const std::string& metadata_type) {
    const char* method = "initialize";
    auto conf = std::make_shared<Config>();
    std::string type = metadata_server == kP2PHandshake ? "p2p" : metadata_type;
    if (type == "P2PHANDSHAKE") type = "p2p";
    if (type != "p2p" && type != "etcd" && type != "redis" && type != "http") {
        fail(Code::kInvalidArgument, method,
             "metadata type '" + metadata_type +
                 "' is not supported here (P2PHANDSHAKE, etcd://, redis://, "
                 "http://)");
    }
    conf->set("metadata_type", type);
    if (type != "p2p") {
        // http servers are URLs ("http://host:port/path"), kept whole.
        std::string servers = metadata_server;
        const size_t pos = servers.find("://");
        if (pos != std::string::npos && type != "http") {
            servers = servers.substr(pos + 3);
        }
        conf->set("metadata_servers", servers);
    }
    // "host" or "host:port". As upstream, with P2PHANDSHAKE the port is not
    // bound: the engine serves on a free port, which get_rpc_port() and the
    // segment name ("host:<that port>") report, so engines given the same
    // name all start. With a store the port is the RPC server's preferred
    // one.
    std::string host = local_hostname;
    const size_t colon = host.rfind(':');
    if (colon != std::string::npos) {
        const std::string port = host.substr(colon + 1);
        host = host.substr(0, colon);
        char* end = nullptr;
        long value = std::strtol(port.c_str(), &end, 10);
        if (port.empty() || *end != '\0' || value < 0 || value > 65535) {
            fail(Code::kInvalidArgument, method,
                 "local_hostname '" + local_hostname +
                     "' has a bad port (host or host:port)");
        }
        if (type != "p2p")
            conf->set("rpc_server_port", static_cast<int>(value));
    }
    if (!host.empty()) conf->set("rpc_server_hostname", host);

    // The protocol names the transports to load: a comma list of this
    // build's transport table (tcp, mpcomm), every other one disabled.
    std::vector<std::string> wanted = splitList(protocol);
    if (wanted.empty()) {
        fail(Code::kInvalidArgument, method, "protocol is empty");
    }
    std::string known;
    for (const TransportEntry& e : transportTable()) {
        known += (known.empty() ? "" : ", ") + std::string(e.name);
    }
    for (const std::string& name : wanted) {
        bool found = false;
        for (const TransportEntry& e : transportTable()) {
            found = found || name == e.name;
        }
        if (!found) {
            fail(Code::kInvalidArgument, method,
                 "protocol '" + name + "' is not a transport of this build (" +
                     known + ")");
        }
    }
    for (const TransportEntry& e : transportTable()) {
        bool on =
            std::find(wanted.begin(), wanted.end(), e.name) != wanted.end();
        conf->set(std::string("transports/") + e.name + "/enable", on);
    }
    if (!device_name.empty()) {
        LOG(INFO) << "initialize: device_name '" << device_name
                  << "' is not a filter here; MPComm takes its devices "
                     "from the topology or MPCOMM_NIC_FILTER";
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (engine_ || closed_) {
            fail(Code::kInvalidArgument, method,
                 engine_ ? "the TransferEngine is already initialized as " +
                               engine_->getSegmentName()
                         : "the TransferEngine is closed");
        }
    }
    std::shared_ptr<TransferEngine> engine;
    {
        py::gil_scoped_release release;
        engine = std::make_shared<TransferEngine>(conf);
    }
    if (!engine->available()) return -1;  // the runtime logged why
    std::vector<std::string> loaded = engine->getSupportedTransports();
    for (const std::string& name : wanted) {
        if (std::find(loaded.begin(), loaded.end(), name) == loaded.end()) {
            LOG(ERROR) << "initialize: transport " << name
                       << " did not install (see the 'skipped' line above)";
            py::gil_scoped_release release;
            engine.reset();
            return -1;
        }
    }
    std::lock_guard<std::mutex> lock(mu_);
    engine_ = std::move(engine);
    return 0;
}

void ClassicEngine::close() {
    std::shared_ptr<TransferEngine> engine;
    {
        std::lock_guard<std::mutex> lock(mu_);
        engine.swap(engine_);
        closed_ = true;
        handles_.clear();
        remote_info_.clear();
        pending_.clear();
    }
    {
        // Teardown ends every batch before the memory of async batches and
        // registrations is let go below.
        py::gil_scoped_release release;
        engine.reset();
    }
    batch_memory_.clear();
    registered_.clear();
}

}  // namespace mooncake::tent::classic
