// freeTcpPort: a TCP port nothing listens on now.
#pragma once

namespace mooncake::tent::testing {

// The kernel's pick for a listener on port 0, closed before returning;
// 0 when no listener could be opened. Another process could take the port
// in between; the window is a few instructions.
int freeTcpPort();

}  // namespace mooncake::tent::testing
