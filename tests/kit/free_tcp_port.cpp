#include "kit/free_tcp_port.h"

#include <unistd.h>

#include <cstdint>

#include "net/socket_io.h"

namespace mooncake::tent::testing {

int freeTcpPort() {
    int fd = -1;
    uint16_t port = 0;
    if (!net::listenOn(0, fd, port).ok()) return 0;
    close(fd);
    return port;
}

}  // namespace mooncake::tent::testing
