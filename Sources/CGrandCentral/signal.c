// Signal sources' C half (see CGrandCentralSignal.h): the catching handler, its
// install/restore, and the event thread's signalfd.
//
// Why a handler at all. Linux's signalfd only reads a signal that is pending, and a signal
// is only left pending if every thread that could take it blocks it. A library cannot block
// signals in the program's threads (nor in its own workers: processes they spawn would
// inherit the mask), so the signal usually lands in some thread that does not block it. The
// library therefore catches it there, with this handler, and re-sends it with tgkill to the
// event thread, which blocks every signal: it stays pending on that thread until the
// event thread's signalfd reads it. A signal the program blocks in every thread never
// reaches a handler; it stays pending for the process, and the signalfd reads that too.
// The handler also calls the handler the program had installed, so installing a source does
// not silence the program's own (Darwin's sources do not interfere with handlers either;
// libdispatch on Linux replaces them).
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
    int failure = 0;
    if (event_thread > 0 && syscall(SYS_tgkill, (pid_t)syscall(SYS_getpid), (pid_t)event_thread, signo) != 0) {
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
    }
    pthread_mutex_unlock(&gc_signal_lock);
    return rc;
}

void gc_signal_unwatch(int signo) {
    if (signo < 1 || signo > GC_SIGNAL_MAX) return;
    pthread_mutex_lock(&gc_signal_lock);
    if (gc_watchers[signo] > 0 && --gc_watchers[signo] == 0 && gc_installed[signo]) {
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
