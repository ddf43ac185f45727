// Every softmpcomm source includes the public header through this file. The
// library builds with hidden visibility so that only the mpcomm.h surface is
// exported; the fixed header carries no export macros, hence the pragma.
#pragma once

#pragma GCC visibility push(default)
#include "mpcomm.h"
#pragma GCC visibility pop
