// CGrandCentralSignal: what signal sources need from C. Swift cannot write a signal
// handler that is async-signal-safe (no allocation, no locks, no ARC) nor make the
// variadic tgkill syscall, and Glibc does not import <sys/signalfd.h>.
//
// Two halves:
// - the process-wide side, any thread: `gc_signal_watch`/`gc_signal_unwatch` count the
//   sources per signal and, on the first and last, install and restore the library's
//   catching handler (sigaction), under one mutex;
// - the event thread's side: block every signal in that thread, and a signalfd whose mask
//   it updates and reads.
//
// Every function returns 0 (or a descriptor / count) on success and a negative errno on
// failure; none of them aborts. No dispatch_* names live here.
#ifndef CGRANDCENTRAL_SIGNAL_H
#define CGRANDCENTRAL_SIGNAL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The highest signal number a source can watch (Linux's _NSIG - 1).
#define GC_SIGNAL_MAX 64

/// Every thread the library starts, first thing: blocks the asynchronous signals (all but
/// SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV, SIGSYS, SIGPIPE, SIGPROF) on top of the mask
/// the program had when it loaded the library. signal.c states the rule.
void gc_signal_enter_library_thread(void);
/// Workers: unblocks the signals sources watch (those the program's mask leaves open) and
/// blocks again those no longer watched. Returns the generation the mask now reflects.
uint32_t gc_signal_update_worker_mask(void);
/// Bumped (release) each time the set of watched signals changes; starts at 0 (nothing
/// watched: the mask every library thread starts with).
extern _Atomic uint32_t gc_signal_generation;
/// A worker, before each work item, compares this with the generation its mask reflects
/// (kept in a local of its loop: no thread-local access) and updates on a change.
static inline __attribute__((always_inline)) uint32_t gc_signal_generation_now(void) {
    return __atomic_load_n((uint32_t *)&gc_signal_generation, __ATOMIC_ACQUIRE);
}
/// Event thread, first thing it does: blocks every signal in the calling thread (so no
/// client handler ever runs there and a signal re-sent to it stays pending for its
/// signalfd) and returns its kernel thread id.
int32_t gc_signal_block_all_in_thread(void);

/// The first source for `signo` (1...GC_SIGNAL_MAX) makes the library catch it: saves the
/// program's disposition and installs a handler that re-sends the signal to thread
/// `event_thread` (a kernel thread id of this process, where every signal is blocked) and
/// calls the program's own handler if it had one. Later sources only count. Synchronous:
/// when this returns, the signal no longer has its default action. Returns 0, or -EINVAL
/// when the signal cannot be caught (SIGKILL, SIGSTOP, the C library's internal signals):
/// the source is counted anyway and `gc_signal_unwatch` must still be called.
int gc_signal_watch(int signo, int32_t event_thread);

/// The last source for `signo` is gone: the program's saved disposition is restored,
/// unless the program has replaced the library's handler since (its newer choice stays).
void gc_signal_unwatch(int signo);

/// Creates (fd < 0) or updates (fd >= 0) a non-blocking close-on-exec signalfd reading
/// the signals whose bit (1 << (signo - 1)) is set in `mask`. Returns the descriptor.
int gc_signalfd_update(int fd, uint64_t mask);

/// Reads pending signals from signalfd `fd`, storing at most `capacity` signal numbers
/// into `signals` (one per signal taken). Returns the count, -EAGAIN when none is pending.
int gc_signalfd_read(int fd, int32_t *signals, int capacity);

#ifdef __cplusplus
}
#endif
#endif
