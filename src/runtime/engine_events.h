// Engine events a metrics layer may read (private header). Kept minimal:
// the engine counts failovers per (from, to) transport pair in
// FailoverCounters (runtime/failover.h); TransferEngineImpl::
// failoverCounters() hands them out, to be read at any time.
#pragma once

#include "runtime/failover.h"
