// Links against the installed library and calls into it: init on port 0 must
// be refused with MPCOMM_ERR_INVALID_ARG.
#include <mpcomm.h>

#include <cstdio>

int main() {
    mpcomm::MPComm comm;
    int rc = comm.init("consumer", "", 0);
    std::printf("init(port 0) -> %d\n", rc);
    return rc == mpcomm::MPCOMM_ERR_INVALID_ARG ? 0 : 1;
}
