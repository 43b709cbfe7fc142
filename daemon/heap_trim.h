#pragma once

namespace ckprof {

// Gives freed heap memory back to the system (glibc's malloc_trim) on a thread of its own. After
// a million-config submit the trim walks gigabytes of freed heap, about a second: on the io
// thread that was a second's wait for every other user's request. One trim at a time; one asked
// for while another runs follows it. A no-op where the C library has no malloc_trim.
void TrimHeapSoon();

}  // namespace ckprof
