// Signal sources' C half (see CGrandCentralSignal.h): the catching handler, its
// install/restore, the library threads' signal masks, and the event thread's signalfd.
//
// Which signals library threads block (the rule stated in source.h). As libdispatch does
// (its workers' SigBlk is fffffffe3bfbea27), every thread the library starts blocks the
// asynchronous signals: all but SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV and SIGSYS (the
// kernel directs them at the faulting thread; blocked, they kill the process), SIGPIPE
// (directed at the writing thread) and SIGPROF (profilers sample each thread), on top of
// the mask the program had when it loaded the library. So a program's handler for a
// signal sent to the process runs on one of the program's threads, never in the middle of
// a work item. The exception: a worker leaves unblocked each signal a source watches
// (unless the program's mask blocked it), so that a raise() from a work item, which is
// directed at that worker, reaches the source; each worker brings its mask up to date
// before the next work item it takes from a root queue (`gc_signal_generation`), and a
// worker that activates a source does so at once. The event thread blocks every signal (its signalfd reads what is
// pending on it). Rejected: leaving the program's mask on the workers (the program's
// handlers then run inside work items, the complaint libdispatch's rule answers), and
// blocking the watched signals too (a raise() from a work item then stays pending on the
// worker, libdispatch's behaviour: the source never sees it).
//
// Why a handler at all. Linux's signalfd only reads a signal that is pending, and a signal
// is only left pending if every thread that could take it blocks it. A library cannot block
// signals in the program's threads, so the signal usually lands in some thread that does
// not block it. The library therefore catches it there, with this handler, and re-sends it
// with tgkill to the event thread, which blocks every signal: it stays pending on that
// thread until the event thread's signalfd reads it. A signal the program blocks in every
// thread never reaches a handler; it stays pending for the process, and the signalfd reads
// that too. The handler also calls the handler the program had installed, so installing a
// source does not silence the program's own (Darwin's sources do not interfere with
// handlers either; libdispatch on Linux replaces them). A process-directed signal caught
// on a worker (a watched one) has the program's handler run on the main thread instead:
// the library re-queues it there (rt_tgsigqueueinfo) marked `GC_SIGNAL_FORWARDED` in
// si_errno, so the handler that takes it there does not count it a second time and gives
// the program's handler the original siginfo.
//
// State, and who may touch it:
// - `gc_signal_lock` guards `gc_watchers` (sources per signal), `gc_installed` (whether the
//   library's handler is installed for the signal and owes a restore) and every write to
//   `gc_saved` and `gc_saved_slot`. Signals are rare; a mutex is fine here.
// - The handler takes no lock (it can run in any thread, in the middle of anything). It
//   reads `gc_event_thread` and `gc_saved[signo][gc_saved_slot[signo]]`, all written
//   before the sigaction() that installs it. Each signal has two saved slots: an install
//   writes the slot the handler is not reading and then publishes it (release; the handler
//   loads the index with acquire), so a handler still running from an earlier install
//   reads a stable record unless two further installs happen during its one invocation.
#define _GNU_SOURCE 1
#include "CGrandCentralSignal.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t gc_signal_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned gc_watchers[GC_SIGNAL_MAX + 1];
static bool gc_installed[GC_SIGNAL_MAX + 1];
static struct sigaction gc_saved[GC_SIGNAL_MAX + 1][2];
static _Atomic int gc_saved_slot[GC_SIGNAL_MAX + 1];
/// The kernel thread id of the event thread (0 before the first watch).
static _Atomic int32_t gc_event_thread;

// Library threads' masks. `gc_initial_sigmask` is written once, by the constructor, before
// any library thread exists. `gc_watched_bits` (bit signo - 1: a source watches the
// signal) is written under `gc_signal_lock`, before the release increment of
// `gc_signal_generation`; a worker that loads the generation with acquire and then the
// bits applies a mask at least as new as that generation.
static sigset_t gc_initial_sigmask;
static _Atomic uint64_t gc_watched_bits;
_Atomic uint32_t gc_signal_generation;
/// What this thread is: 0 a program's thread, 1 a library thread (asynchronous signals
/// blocked), 2 a worker (watched signals unblocked as well).
static __thread int gc_thread_role;

/// Marks a signal the handler re-queued to the main thread, in si_errno (which the kernel
/// leaves 0 for kill(), tgkill() and sigqueue()): the high half is this tag, the low half
/// the original si_code + 0x100. The re-queued copy has si_code SI_QUEUE, since the kernel
/// lets a thread send another a signal with si_code >= 0 only as itself (EPERM).
#define GC_SIGNAL_FORWARDED 0x47430000
#define GC_SIGNAL_FORWARDED_MASK 0xffff0000

__attribute__((constructor)) static void gc_capture_initial_sigmask(void) {
    pthread_sigmask(SIG_SETMASK, NULL, &gc_initial_sigmask);
}

/// The program's mask plus every asynchronous signal.
static void gc_library_mask(sigset_t *mask) {
    sigfillset(mask);  // glibc leaves out its internal signals (32, 33)
    static const int synchronous[] = { SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV, SIGSYS, SIGPIPE, SIGPROF };
    for (size_t i = 0; i < sizeof synchronous / sizeof synchronous[0]; i++) {
        if (!sigismember(&gc_initial_sigmask, synchronous[i])) sigdelset(mask, synchronous[i]);
    }
}

void gc_signal_enter_library_thread(void) {
    sigset_t mask;
    gc_library_mask(&mask);
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
    gc_thread_role = 1;
}

uint32_t gc_signal_update_worker_mask(void) {
    uint32_t generation = atomic_load_explicit(&gc_signal_generation, memory_order_acquire);
    uint64_t watched = atomic_load_explicit(&gc_watched_bits, memory_order_relaxed);
    sigset_t mask;
    gc_library_mask(&mask);
    for (int signo = 1; signo <= GC_SIGNAL_MAX; signo++) {
        if ((watched & (1ull << (signo - 1))) && !sigismember(&gc_initial_sigmask, signo)) sigdelset(&mask, signo);
    }
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
    gc_thread_role = 2;
    return generation;
}

/// Under `gc_signal_lock`: publishes the watched set after a change to `gc_watchers`, and
/// brings the calling thread's mask up to date if it is a worker (a source activated by a
/// work item catches a raise() from that same item).
static void gc_publish_watched(void) {
    uint64_t bits = 0;
    for (int signo = 1; signo <= GC_SIGNAL_MAX; signo++) {
        if (gc_watchers[signo] > 0 && gc_installed[signo]) bits |= 1ull << (signo - 1);
    }
    atomic_store_explicit(&gc_watched_bits, bits, memory_order_relaxed);
    atomic_fetch_add_explicit(&gc_signal_generation, 1, memory_order_release);
    if (gc_thread_role == 2) (void)gc_signal_update_worker_mask();
}

static bool gc_is_function(const struct sigaction *action) {
    return action->sa_handler != SIG_DFL && action->sa_handler != SIG_IGN;
}

static void gc_signal_catch(int signo, siginfo_t *info, void *context);

static bool gc_is_ours(const struct sigaction *action) {
    return (action->sa_flags & SA_SIGINFO) && action->sa_sigaction == gc_signal_catch;
}

// The library's handler. Async-signal-safe: atomics, plain reads, syscalls.
//
// The signal is re-sent before the program's handler is called, so a program handler that
// does not return (siglongjmp, exit) does not cost the source its event.
static void gc_signal_catch(int signo, siginfo_t *info, void *context) {
    int saved_errno = errno;
    if (signo < 1 || signo > GC_SIGNAL_MAX) return;
    int32_t event_thread = atomic_load_explicit(&gc_event_thread, memory_order_acquire);
    int slot = atomic_load_explicit(&gc_saved_slot[signo], memory_order_acquire);
    const struct sigaction *program = &gc_saved[signo][slot];
    bool forwarded = info && (info->si_errno & GC_SIGNAL_FORWARDED_MASK) == GC_SIGNAL_FORWARDED;
    pid_t pid = (pid_t)syscall(SYS_getpid);
    int failure = 0;
    if (!forwarded && event_thread > 0 && syscall(SYS_tgkill, pid, (pid_t)event_thread, signo) != 0) {
        failure = errno;
    }
    if (failure == ESRCH) {
        // No event thread in this process: a child forked from the program, which has the
        // handler but not the thread. It gets the program's disposition back, and a signal
        // whose default action is due gets it: sent again to this thread, blocked until
        // this handler returns, then acted on.
        sigaction(signo, program, NULL);
        if (program->sa_handler == SIG_DFL) {
            syscall(SYS_tgkill, (pid_t)syscall(SYS_getpid), (pid_t)syscall(SYS_gettid), signo);
        }
    }
    if (gc_is_function(program)) {
        siginfo_t copy;
        if (forwarded) {
            copy = *info;
            copy.si_code = (info->si_errno & 0xffff) - 0x100;
            copy.si_errno = 0;
            info = &copy;
        } else if (gc_thread_role != 0 && info && info->si_code != SI_TKILL && info->si_code >= -0x100
                   && info->si_code < 0x100) {
            // Sent to the process and taken by a worker (which leaves watched signals
            // unblocked): the program's handler runs on the main thread, not in a work
            // item. Only if that send fails (the main thread is gone) does it run here.
            copy = *info;
            copy.si_errno = GC_SIGNAL_FORWARDED | ((info->si_code + 0x100) & 0xffff);
            copy.si_code = SI_QUEUE;
            if (syscall(SYS_rt_tgsigqueueinfo, pid, pid, signo, &copy) == 0) {
                errno = saved_errno;
                return;
            }
        }
        if (program->sa_flags & SA_SIGINFO) {
            program->sa_sigaction(signo, info, context);
        } else {
            program->sa_handler(signo);
        }
    }
    errno = saved_errno;
}

int32_t gc_signal_block_all_in_thread(void) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, NULL);
    return (int32_t)syscall(SYS_gettid);
}

int gc_signal_watch(int signo, int32_t event_thread) {
    if (signo < 1 || signo > GC_SIGNAL_MAX) return -EINVAL;
    int rc = 0;
    pthread_mutex_lock(&gc_signal_lock);
    atomic_store_explicit(&gc_event_thread, event_thread, memory_order_release);
    if (gc_watchers[signo]++ == 0) {
        struct sigaction old;
        if (sigaction(signo, NULL, &old) != 0) {
            rc = -errno;
        } else if (gc_is_ours(&old)) {
            // Only if a restore was skipped and the program put ours back: keep what was
            // saved, it is still the program's.
            gc_installed[signo] = true;
        } else {
            int next = 1 - atomic_load_explicit(&gc_saved_slot[signo], memory_order_relaxed);
            gc_saved[signo][next] = old;
            atomic_store_explicit(&gc_saved_slot[signo], next, memory_order_release);
            struct sigaction ours;
            memset(&ours, 0, sizeof ours);
            ours.sa_sigaction = gc_signal_catch;
            if (gc_is_function(&old)) {
                // Run as the program asked its handler to run: its mask, its restart and
                // stack choices.
                ours.sa_mask = old.sa_mask;
                ours.sa_flags = SA_SIGINFO | (old.sa_flags & (SA_RESTART | SA_ONSTACK | SA_NODEFER));
            } else {
                sigemptyset(&ours.sa_mask);
                ours.sa_flags = SA_SIGINFO | SA_RESTART;
            }
            if (sigaction(signo, &ours, NULL) != 0) {
                rc = -errno;
            } else {
                gc_installed[signo] = true;
            }
        }
        gc_publish_watched();
    }
    pthread_mutex_unlock(&gc_signal_lock);
    return rc;
}

void gc_signal_unwatch(int signo) {
    if (signo < 1 || signo > GC_SIGNAL_MAX) return;
    pthread_mutex_lock(&gc_signal_lock);
    if (gc_watchers[signo] > 0 && --gc_watchers[signo] == 0 && gc_installed[signo]) {
        // The watched set drops the signal first; each worker blocks it again at its next
        // work item (a parked worker keeps it unblocked until then).
        gc_publish_watched();
        gc_installed[signo] = false;
        struct sigaction current;
        // A disposition the program set after ours is its newer choice: it stays.
        if (sigaction(signo, NULL, &current) == 0 && gc_is_ours(&current)) {
            int slot = atomic_load_explicit(&gc_saved_slot[signo], memory_order_relaxed);
            sigaction(signo, &gc_saved[signo][slot], NULL);
        }
    }
    pthread_mutex_unlock(&gc_signal_lock);
}

int gc_signalfd_update(int fd, uint64_t mask) {
    sigset_t set;
    sigemptyset(&set);
    for (int signo = 1; signo <= GC_SIGNAL_MAX; signo++) {
        // sigaddset refuses the C library's internal signals; they are never read.
        if (mask & (1ull << (signo - 1))) sigaddset(&set, signo);
    }
    int result = signalfd(fd, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    return result < 0 ? -errno : result;
}

int gc_signalfd_read(int fd, int32_t *signals, int capacity) {
    struct signalfd_siginfo info[16];
    if (capacity > 16) capacity = 16;
    if (capacity <= 0) return -EINVAL;
    ssize_t n;
    do {
        n = read(fd, info, sizeof info[0] * (size_t)capacity);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    int count = (int)((size_t)n / sizeof info[0]);
    for (int i = 0; i < count; i++) signals[i] = (int32_t)info[i].ssi_signo;
    return count;
}
