// Minimal sd_notify: sends READY=1 / STATUS= / WATCHDOG=1 / STOPPING=1 datagrams to
// $NOTIFY_SOCKET when systemd started us with Type=notify. A no-op otherwise. Any thread.
#pragma once

#include <chrono>
#include <string>

namespace ckprof {

// True when $NOTIFY_SOCKET is set.
bool SystemdNotifyEnabled();
void SystemdNotify(const std::string& state);
// Half of $WATCHDOG_USEC when the watchdog is on for this process, else zero.
std::chrono::microseconds SystemdWatchdogInterval();

}  // namespace ckprof
