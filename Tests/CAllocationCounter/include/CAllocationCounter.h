// Counts the process's heap allocations, for tests that promise a hot path makes none.
//
// The test executable defines malloc, calloc, realloc, memalign, aligned_alloc and
// posix_memalign; the dynamic linker binds every library's calls (the Swift runtime's
// swift_slowAlloc among them) to these definitions, which count and forward to glibc's own
// allocator (__libc_malloc, …). free is glibc's, untouched.
//
// Under AddressSanitizer or ThreadSanitizer, whose runtimes own malloc, nothing is
// defined and gc_test_allocations_counted() is 0: the tests that need a count skip there.
#ifndef C_ALLOCATION_COUNTER_H
#define C_ALLOCATION_COUNTER_H

/// 1 when allocations are being counted (the counting allocator is installed).
int gc_test_allocations_counted(void);

/// Allocations the calling thread has made so far.
long gc_test_thread_allocations(void);

/// Allocations every thread has made while the process-wide count was switched on.
long gc_test_process_allocations(void);

/// Switches the process-wide count on (1) or off (0); it costs an atomic add per
/// allocation while on, so it is off unless a test measures.
void gc_test_count_process_allocations(int on);

#endif
