// check.h: what every C conformance test shares.
//
// - CHECK macros that print `FAIL <test> [<section>] file:line: <what>` and exit 1;
// - a watchdog (SIGALRM) so a hang fails with the name of the section that hung,
//   well before CTest's own TIMEOUT kills the process silently;
// - waiting helpers built on pthreads, not on dispatch (a latch, polling an atomic with
//   a deadline), so a broken dispatch primitive fails its own test and not every test;
// - expect_client_bug(): fork, make a mistake in the child, and check that the child
//   died by SIGABRT/SIGTRAP/SIGILL after printing `GrandCentral: BUG IN CLIENT: <fn>:`.
//
// Each test program is built by ctests/CMakeLists.txt twice: with gcc -std=c11 (only
// the `_f` API is visible, block code sits under `#ifdef __BLOCKS__`) and with clang
// -fblocks (the block API as well). ctests/run-reference.sh builds the clang variant
// against the Swift toolchain's libdispatch with GC_REFERENCE_LIBDISPATCH defined, to
// show that what a test expects is what GCD does; the few places where GrandCentral
// promises more than libdispatch (the message of a client bug, the main queue drained
// on the main thread) are switched on GC_REFERENCE_LIBDISPATCH.
//
// Include this file first: it defines _GNU_SOURCE before any system header.
#ifndef GC_CTESTS_CHECK_H
#define GC_CTESTS_CHECK_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dispatch/dispatch.h>

#ifdef GC_REFERENCE_LIBDISPATCH
// The toolchain ships no private.h or benchmark.h; its libdispatch.so exports these.
#define DISPATCH_QUEUE_OVERCOMMIT 0x2ull
#define DISPATCH_QUEUE_WIDTH_ACTIVE_CPUS (-1)
#define DISPATCH_QUEUE_WIDTH_MAX_PHYSICAL_CPUS (-2)
#define DISPATCH_QUEUE_WIDTH_MAX_LOGICAL_CPUS (-3)
// Nor, on Linux, the QoS class names (libdispatch takes them as plain unsigned values).
#define QOS_CLASS_USER_INTERACTIVE 0x21
#define QOS_CLASS_USER_INITIATED 0x19
#define QOS_CLASS_DEFAULT 0x15
#define QOS_CLASS_UTILITY 0x11
#define QOS_CLASS_BACKGROUND 0x09
#define QOS_CLASS_UNSPECIFIED 0x00
void dispatch_queue_set_width(dispatch_queue_t dq, long width);
dispatch_queue_attr_t dispatch_queue_attr_make_with_overcommit(dispatch_queue_attr_t attr, bool overcommit);
uint64_t dispatch_benchmark_f(size_t count, void *ctxt, void (*func)(void *));
// Its queue.h also lacks the async_and_wait family, which the .so exports.
void dispatch_async_and_wait_f(dispatch_queue_t queue, void *context, dispatch_function_t work);
void dispatch_barrier_async_and_wait_f(dispatch_queue_t queue, void *context, dispatch_function_t work);
#ifdef __BLOCKS__
uint64_t dispatch_benchmark(size_t count, void (^block)(void));
void dispatch_async_and_wait(dispatch_queue_t queue, dispatch_block_t block);
void dispatch_barrier_async_and_wait(dispatch_queue_t queue, dispatch_block_t block);
#endif
#else
#include <dispatch/private.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GC_UNUSED __attribute__((unused))

// MARK: - Identity and failure

// Set by check_start() and check_section(); read by the failure paths and the watchdog.
static const char *volatile check_test_name GC_UNUSED = "?";
static const char *volatile check_section_name GC_UNUSED = "start";
static volatile unsigned check_watchdog_seconds GC_UNUSED;

__attribute__((noreturn, format(printf, 3, 4)))
static inline void check_fail(const char *file, int line, const char *format, ...) {
    fprintf(stderr, "FAIL %s [%s] %s:%d: ", check_test_name, check_section_name, file, line);
    va_list ap;
    va_start(ap, format);
    vfprintf(stderr, format, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    fflush(stdout);
    _exit(1);   // not exit(): worker threads may still be running items
}

#define CHECK(cond) \
    do { if (!(cond)) check_fail(__FILE__, __LINE__, "CHECK(%s)", #cond); } while (0)
#define CHECKF(cond, ...) \
    do { if (!(cond)) check_fail(__FILE__, __LINE__, __VA_ARGS__); } while (0)
#define CHECK_EQ(a, b) \
    do { \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b); \
        if (check_a_ != check_b_) \
            check_fail(__FILE__, __LINE__, "%s == %s (%lld != %lld)", #a, #b, check_a_, check_b_); \
    } while (0)
#define CHECK_EQ_U64(a, b) \
    do { \
        unsigned long long check_a_ = (unsigned long long)(a), check_b_ = (unsigned long long)(b); \
        if (check_a_ != check_b_) \
            check_fail(__FILE__, __LINE__, "%s == %s (0x%llx != 0x%llx)", #a, #b, check_a_, check_b_); \
    } while (0)
#define CHECK_STR(a, b) \
    do { \
        const char *check_a_ = (a), *check_b_ = (b); \
        if (check_a_ == NULL || strcmp(check_a_, check_b_) != 0) \
            check_fail(__FILE__, __LINE__, "%s is \"%s\", expected \"%s\"", #a, \
                       check_a_ ? check_a_ : "(null)", check_b_); \
    } while (0)
#define FAIL(...) check_fail(__FILE__, __LINE__, __VA_ARGS__)

static inline void check_watchdog_fired(int signo) {
    (void)signo;
    char buffer[512];
    int n = snprintf(buffer, sizeof buffer, "FAIL %s [%s]: hung (watchdog fired after %u s)\n",
                     check_test_name, check_section_name, check_watchdog_seconds);
    if (n > 0) {
        ssize_t ignored = write(STDERR_FILENO, buffer, (size_t)n < sizeof buffer ? (size_t)n : sizeof buffer - 1);
        (void)ignored;
    }
    _exit(3);
}

/// Names the test and arms the watchdog: the process fails after `seconds`.
static inline void check_start(const char *test_name, unsigned seconds) {
    check_test_name = test_name;
    check_watchdog_seconds = seconds;
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = check_watchdog_fired;
    sigaction(SIGALRM, &action, NULL);
    alarm(seconds);
}

/// Starts a named part of the test; failures and hangs report it.
static inline void check_section(const char *name) {
    check_section_name = name;
    printf("-- %s\n", name);
}

/// Prints the closing line; call last (dispatch_main tests call it before exit).
static inline void check_pass(void) {
    printf("PASS %s\n", check_test_name);
    fflush(stdout);
}

/// A work function that does nothing (flushes a queue with dispatch_sync_f).
static inline void noop_function(void *context) {
    (void)context;
}

// MARK: - Clocks

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void sleep_ms(unsigned ms) {
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/// Watches for something that must not happen: sleeps `floor_ms`, or three times
/// `control_ns` when that is longer. `control_ns` is a positive control measured in the same
/// run: how long the same thing took when it was meant to happen. A machine loaded enough
/// to delay it lengthens the watch with it, so "nothing happened" never means "it had no
/// time to happen".
static inline void quiet_period(uint64_t control_ns, unsigned floor_ms) {
    uint64_t ms = 3 * control_ns / 1000000u + 1;
    sleep_ms(ms > floor_ms ? (unsigned)ms : floor_ms);
}

/// Spins for `ns` nanoseconds without sleeping (keeps the thread runnable).
static inline void busy_wait_ns(uint64_t ns) {
    uint64_t end = now_ns() + ns;
    while (now_ns() < end) {}
}

// MARK: - Waiting without dispatch

/// A count-down latch on a pthread mutex and a CLOCK_MONOTONIC condition variable.
typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    long count;
} latch_t;

static inline void latch_init(latch_t *latch, long count) {
    pthread_mutex_init(&latch->mutex, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&latch->cond, &attr);
    pthread_condattr_destroy(&attr);
    latch->count = count;
}

static inline void latch_destroy(latch_t *latch) {
    pthread_cond_destroy(&latch->cond);
    pthread_mutex_destroy(&latch->mutex);
}

static inline void latch_arrive(latch_t *latch) {
    pthread_mutex_lock(&latch->mutex);
    if (latch->count > 0 && --latch->count == 0) pthread_cond_broadcast(&latch->cond);
    pthread_mutex_unlock(&latch->mutex);
}

static inline long latch_count(latch_t *latch) {
    pthread_mutex_lock(&latch->mutex);
    long count = latch->count;
    pthread_mutex_unlock(&latch->mutex);
    return count;
}

/// Waits until the count reaches zero; false after `seconds`.
static inline bool latch_wait(latch_t *latch, double seconds) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    long long ns = (long long)deadline.tv_nsec + (long long)(seconds * 1e9);
    deadline.tv_sec += (time_t)(ns / 1000000000LL);
    deadline.tv_nsec = (long)(ns % 1000000000LL);
    pthread_mutex_lock(&latch->mutex);
    int rc = 0;
    while (latch->count > 0 && rc != ETIMEDOUT) {
        rc = pthread_cond_timedwait(&latch->cond, &latch->mutex, &deadline);
    }
    bool done = latch->count == 0;
    pthread_mutex_unlock(&latch->mutex);
    return done;
}

#define LATCH_WAIT(latch, seconds, what) \
    CHECKF(latch_wait((latch), (seconds)), "timed out after %g s waiting for %s", (double)(seconds), (what))

/// Polls until `*value >= target`; false after `seconds`.
static inline bool wait_for_count(atomic_long *value, long target, double seconds) {
    uint64_t deadline = now_ns() + (uint64_t)(seconds * 1e9);
    while (atomic_load(value) < target) {
        if (now_ns() > deadline) return false;
        sleep_ms(1);
    }
    return true;
}

#define WAIT_FOR_COUNT(value, target, seconds) \
    CHECKF(wait_for_count((value), (target), (seconds)), \
           "timed out after %g s: %s reached %ld of %ld", (double)(seconds), #value, \
           atomic_load(value), (long)(target))

/// A rendezvous: each arriving item waits until `expected` have arrived (a pthread
/// condition variable, which the library cannot see), or gives up after 30 s.
typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    long arrived;
    long expected;
    atomic_long passed;    // items that saw everyone arrive
    atomic_long gave_up;   // items that timed out waiting
} rendezvous_t;

static inline void rendezvous_init(rendezvous_t *r, long expected) {
    pthread_mutex_init(&r->mutex, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cond, &attr);
    pthread_condattr_destroy(&attr);
    r->arrived = 0;
    r->expected = expected;
    atomic_store(&r->passed, 0);
    atomic_store(&r->gave_up, 0);
}

static inline long rendezvous_arrived(rendezvous_t *r) {
    pthread_mutex_lock(&r->mutex);
    long n = r->arrived;
    pthread_mutex_unlock(&r->mutex);
    return n;
}

static inline void rendezvous_item(void *context) {
    rendezvous_t *r = context;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += 30;
    pthread_mutex_lock(&r->mutex);
    if (++r->arrived >= r->expected) pthread_cond_broadcast(&r->cond);
    int rc = 0;
    while (r->arrived < r->expected && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&r->cond, &r->mutex, &deadline);
    bool all = r->arrived >= r->expected;
    pthread_mutex_unlock(&r->mutex);
    atomic_fetch_add(all ? &r->passed : &r->gave_up, 1);
}

/// Waits until every one of `n` rendezvous items has either passed or given up.
static inline void rendezvous_expect_all(rendezvous_t *r, long n, const char *what) {
    uint64_t deadline = now_ns() + 40ull * 1000000000ull;
    while (atomic_load(&r->passed) + atomic_load(&r->gave_up) < n) {
        CHECKF(now_ns() < deadline, "%s: %ld of %ld arrived, %ld passed", what, rendezvous_arrived(r), n,
               atomic_load(&r->passed));
        sleep_ms(1);
    }
    CHECKF(atomic_load(&r->passed) == n, "%s: only %ld of %ld items ran at once (%ld gave up)", what,
           atomic_load(&r->passed), n, atomic_load(&r->gave_up));
}

/// Every one of `parties` items submitted to `queue` blocks until all have arrived: all
/// pass only if they run at once.
static inline void expect_parallel(dispatch_queue_t queue, long parties, const char *what) {
    rendezvous_t r;
    rendezvous_init(&r, parties);
    for (long i = 0; i < parties; i++) dispatch_async_f(queue, &r, rendezvous_item);
    rendezvous_expect_all(&r, parties, what);
}

/// An item that holds its queue until the test opens the gate: blocking_item arrives at
/// `started`, waits (20 s at most) for `gate`, then counts itself `finished`.
typedef struct {
    latch_t started;
    latch_t gate;
    atomic_long finished;
} blocker_t;

static inline void blocking_item(void *context) {
    blocker_t *b = context;
    latch_arrive(&b->started);
    latch_wait(&b->gate, 20);
    atomic_fetch_add(&b->finished, 1);
}

/// Counts items running at once and remembers the most seen.
typedef struct {
    atomic_long running;
    atomic_long most;
} concurrency_t;

static inline void concurrency_enter(concurrency_t *c) {
    long now = atomic_fetch_add(&c->running, 1) + 1;
    long most = atomic_load(&c->most);
    while (now > most && !atomic_compare_exchange_weak(&c->most, &most, now)) {}
}

static inline void concurrency_exit(concurrency_t *c) {
    atomic_fetch_sub(&c->running, 1);
}

/// The scheduler state letter of thread `tid` from /proc ('S' when it sleeps in the kernel).
static inline char thread_state(pid_t tid) {
    char path[64], buffer[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return '?';
    ssize_t n = read(fd, buffer, sizeof buffer - 1);
    close(fd);
    if (n <= 0) return '?';
    buffer[n] = '\0';
    char *paren = strrchr(buffer, ')');
    return (paren && paren[1] == ' ') ? paren[2] : '?';
}

/// Waits until thread `tid` is asleep in the kernel; false after `seconds`.
static inline bool wait_until_blocked(pid_t tid, double seconds) {
    uint64_t deadline = now_ns() + (uint64_t)(seconds * 1e9);
    while (thread_state(tid) != 'S') {
        if (now_ns() > deadline) return false;
        sleep_ms(1);
    }
    sleep_ms(5);   // and still asleep a moment later, not passing through a syscall
    return thread_state(tid) == 'S';
}

// MARK: - Capturing stderr

/// Runs `body(context)` with stderr redirected into `buffer` (NUL-terminated).
static inline size_t capture_stderr(void (*body)(void *), void *context, char *buffer, size_t size) {
    char path[] = "/tmp/gc-ctests-stderr-XXXXXX";
    int fd = mkstemp(path);
    CHECKF(fd >= 0, "mkstemp: %s", strerror(errno));
    unlink(path);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    body(context);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    size_t used = 0;
    ssize_t n;
    while (used + 1 < size && (n = read(fd, buffer + used, size - 1 - used)) > 0) used += (size_t)n;
    buffer[used] = '\0';
    close(fd);
    return used;
}

// MARK: - Misuse

/// Forks; the child runs `mistake` with stderr captured and must die by SIGABRT, SIGTRAP
/// or SIGILL after printing `GrandCentral: BUG IN CLIENT: <function>:`, where <function>
/// is one of the '|'-separated names in `functions`. Call it before the parent process
/// has used dispatch at all: the child then starts from a clean library.
static inline void expect_client_bug(const char *functions, void (*mistake)(void)) {
    int pipe_fds[2];
    CHECKF(pipe(pipe_fds) == 0, "pipe: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t child = fork();
    CHECKF(child >= 0, "fork: %s", strerror(errno));
    if (child == 0) {
        close(pipe_fds[0]);
        dup2(pipe_fds[1], STDERR_FILENO);
        close(pipe_fds[1]);
        signal(SIGALRM, SIG_DFL);
        alarm(10);   // a mistake that hangs instead of crashing dies by SIGALRM
        mistake();
        fprintf(stderr, "the mistake returned normally\n");
        fflush(stderr);
        _exit(0);
    }
    close(pipe_fds[1]);
    // Read to EOF, keeping the first 64 KiB: closing the pipe early could kill the
    // child with SIGPIPE while it is still printing its crash report.
    static char output[65536];
    char discard[4096];
    size_t used = 0;
    for (;;) {
        bool full = used == sizeof output - 1;
        ssize_t n = full ? read(pipe_fds[0], discard, sizeof discard)
                         : read(pipe_fds[0], output + used, sizeof output - 1 - used);
        if (n == 0) break;
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (!full) used += (size_t)n;
    }
    output[used] = '\0';
    close(pipe_fds[0]);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}

    CHECKF(WIFSIGNALED(status),
           "expected a crash for %s, but the child exited with status %d; its stderr: \"%s\"",
           functions, WIFEXITED(status) ? WEXITSTATUS(status) : -1, output);
    int signo = WTERMSIG(status);
    CHECKF(signo != SIGALRM, "the child hung instead of reporting a bug in %s; its stderr: \"%s\"",
           functions, output);
#ifdef GC_REFERENCE_LIBDISPATCH
    // libdispatch crashes too, with its own wording (or a plain SIGSEGV for a NULL queue).
    printf("   child died by signal %d; stderr: %s%s", signo, used ? output : "(empty)",
           used && output[used - 1] == '\n' ? "" : "\n");
#else
    CHECKF(signo == SIGABRT || signo == SIGTRAP || signo == SIGILL,
           "the child died by signal %d (%s), expected SIGABRT, SIGTRAP or SIGILL; its stderr: \"%s\"",
           signo, strsignal(signo), output);
    bool found = false;
    const char *name = functions;
    while (*name && !found) {
        const char *bar = strchr(name, '|');
        size_t length = bar ? (size_t)(bar - name) : strlen(name);
        char expected[256];
        snprintf(expected, sizeof expected, "GrandCentral: BUG IN CLIENT: %.*s:", (int)length, name);
        found = strstr(output, expected) != NULL;
        name += length + (bar ? 1 : 0);
    }
    CHECKF(found, "the child's stderr lacks \"GrandCentral: BUG IN CLIENT: <%s>:\"; it was: \"%s\"",
           functions, output);
    // Only the bug line: a Swift runtime may add a long crash report after it.
    const char *line = strstr(output, "GrandCentral: BUG IN CLIENT: ");
    const char *end = strchr(line, '\n');
    printf("   child died by %s: %.*s\n", strsignal(signo), (int)(end ? end - line : (ptrdiff_t)strlen(line)), line);
#endif
}

// MARK: - Sections in processes of their own

/// One section of a test whose sections each run in a fresh process (they leave workers
/// behind, or need their own environment): its name (the argument that selects it), its
/// body, and the GRANDCENTRAL_THREAD_LIMIT its process gets (NULL: unset, the default).
typedef struct {
    const char *name;
    void (*run)(void);
    const char *thread_limit;
} check_process_section_t;

/// The whole `main` of such a test. With one argument, runs the section of that name
/// (watchdog `section_seconds`) and leaves by _exit(0), since workers may still be running
/// or parked; an unknown name returns 64. Without, re-executes itself once per section,
/// each in order (watchdog `driver_seconds_per_section` per section in all), and checks
/// that each child exited with 0.
static inline int check_run_process_sections(int argc, char **argv, const char *test_name,
                                             const check_process_section_t *sections, int count,
                                             unsigned section_seconds, unsigned driver_seconds_per_section) {
    if (argc == 2) {
        for (int i = 0; i < count; i++) {
            if (strcmp(argv[1], sections[i].name) != 0) continue;
            check_start(test_name, section_seconds);
            sections[i].run();
            fflush(stdout);
            _exit(0);
        }
        fprintf(stderr, "%s: no section %s\n", test_name, argv[1]);
        return 64;
    }
    check_start(test_name, driver_seconds_per_section * (unsigned)count);
    for (int i = 0; i < count; i++) {
        check_section(sections[i].name);
        pid_t child = fork();
        CHECK(child >= 0);
        if (child == 0) {
            if (sections[i].thread_limit) setenv("GRANDCENTRAL_THREAD_LIMIT", sections[i].thread_limit, 1);
            else unsetenv("GRANDCENTRAL_THREAD_LIMIT");
            execl("/proc/self/exe", argv[0], sections[i].name, (char *)NULL);
            _exit(127);
        }
        int status = 0;
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "section %s failed (status 0x%x)", sections[i].name,
               (unsigned)status);
    }
    check_pass();
    return 0;
}

#endif // GC_CTESTS_CHECK_H
