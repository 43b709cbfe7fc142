// The former home of the tests' helpers, which now live in tests/util/ by topic (files.h,
// commands.h, emulator.h, processes.h, users.h, launched_daemon.h, sql.h, requests.h,
// raw_client.h). This header only includes what it used to declare, for tests not yet moved
// to those headers: include what you use from tests/util/ instead, and delete this file once
// nothing includes it.
#pragma once

#include "tests/util/commands.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/launched_daemon.h"
#include "tests/util/processes.h"
#include "tests/util/sql.h"
#include "tests/util/users.h"
