#pragma once

namespace ckprof {

// Gives freed heap memory back to the system (glibc's malloc_trim). After a million-config
// submit the trim walks gigabytes of freed heap, about a second: on the io thread that was a
// second's wait for every other user's request. No-ops where the C library has no malloc_trim.
//
// TrimHeapSoon: on a thread of its own (after large work in steps); one trim at a time, one
// asked for while another runs follows it.
void TrimHeapSoon();
// TrimHeap: on the calling thread, one that no other client waits for (the pool, after a
// submit: its submitter is answered once its memory is given back).
void TrimHeap();

// The daemon's heap without glibc's fastbins (mallopt M_MXFAST 0; the per-thread caches stay):
// a freed small chunk is merged at once rather than kept aside until a large allocation, which
// then merged them all -- a million configs' chunks, 70-300 ms on the io thread, at whatever
// request came next. Called once, before any thread starts.
void ConfigureHeap();

}  // namespace ckprof
