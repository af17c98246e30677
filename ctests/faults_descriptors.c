// A process at its descriptor limit (RLIMIT_NOFILE reached, every open fails with EMFILE):
//
// - timers keep working: dispatch_after on the uptime and the wall clock and a repeating
//   timer source fire when the limit was reached before the first timer ("cold": the event
//   loop's own descriptors are made when the library is loaded) and after warm-up;
// - a signal source made at the limit, and raised from a work item, fires;
// - a read source on a descriptor opened before the limit fires;
// - no silently dead source: a process source (pidfd_open) and a vnode source (inotify)
//   whose registration fails for want of a descriptor are cancelled by the library (the
//   cancel handler runs, dispatch_source_testcancel is non-zero), as include/dispatch/
//   source.h promises; with GRANDCENTRAL_DEBUG set a line says why; the same for a process
//   source whose pidfd epoll refuses (epoll_ctl ENOSPC, injected by shim_epoll): cancelled,
//   never a false DISPATCH_PROC_EXIT;
// - dispatch_io: a channel made from a path at the limit reports EMFILE through its
//   handler, and dispatch_read/dispatch_write on descriptors opened before still work.
//
// Each case runs in a fresh child (fault_child.h). Against the reference libdispatch
// (GC_REFERENCE_LIBDISPATCH) the process and vnode cases are compiled out (libdispatch on
// Linux has no such sources), and the cases marked `reference_dies` are reported, not
// failed: libdispatch makes its epoll on first use and dies there (SIGILL) when the table
// is full (seen: timers-cold, signal-source, read-source, io; timers-warm passes).
#include "check.h"
#include "fault_child.h"

#include <sys/prctl.h>
#include <sys/stat.h>

#ifdef GC_REFERENCE_LIBDISPATCH
typedef void (*dispatch_io_handler_function_t)(void *context, bool done, dispatch_data_t data, int error);
typedef void (*dispatch_io_cleanup_function_t)(void *context, int error);
typedef void (*dispatch_io_convenience_handler_function_t)(void *context, dispatch_data_t data, int error);
dispatch_io_t dispatch_io_create_with_path_f(dispatch_io_type_t type, const char *path, int oflag,
		mode_t mode, dispatch_queue_t queue, void *context, dispatch_io_cleanup_function_t cleanup_handler);
void dispatch_io_read_f(dispatch_io_t channel, off_t offset, size_t length, dispatch_queue_t queue,
		void *context, dispatch_io_handler_function_t io_handler);
void dispatch_read_f(dispatch_fd_t fd, size_t length, dispatch_queue_t queue, void *context,
		dispatch_io_convenience_handler_function_t handler);
void dispatch_write_f(dispatch_fd_t fd, dispatch_data_t data, dispatch_queue_t queue, void *context,
		dispatch_io_convenience_handler_function_t handler);
dispatch_data_t dispatch_data_create_f(const void *buffer, size_t size, dispatch_queue_t queue,
		dispatch_function_t destructor);
#endif

/// The soft descriptor limit the cases lower the process to before filling it.
#define LIMIT 128

static dispatch_queue_t global(void) { return dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0); }

static void arrive(void *context) { latch_arrive((latch_t *)context); }

/// dispatch_after on both clocks and a timer source firing 3 times, at the limit.
static void check_timers(const char *when) {
    latch_t after;
    latch_init(&after, 2);
    dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW, 20 * NSEC_PER_MSEC), global(), &after, arrive);
    dispatch_after_f(dispatch_walltime(NULL, 30 * NSEC_PER_MSEC), global(), &after, arrive);
    CHECKF(latch_wait(&after, 10), "%s: dispatch_after (uptime and wall clock) did not fire", when);

    latch_t ticks;
    latch_init(&ticks, 3);
    dispatch_source_t timer = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, 0, global());
    dispatch_set_context(timer, &ticks);
    dispatch_source_set_event_handler_f(timer, arrive);
    dispatch_source_set_timer(timer, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_MSEC), 10 * NSEC_PER_MSEC,
                              NSEC_PER_MSEC);
    dispatch_resume(timer);
    CHECKF(latch_wait(&ticks, 10), "%s: a timer source fired %ld of 3 times", when, 3 - latch_count(&ticks));
    dispatch_source_cancel(timer);
    dispatch_release(timer);

    // A serial queue made and used at the limit.
    dispatch_queue_t serial = dispatch_queue_create("at the limit", NULL);
    latch_t ran;
    latch_init(&ran, 1);
    dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW, NSEC_PER_MSEC), serial, &ran, arrive);
    CHECKF(latch_wait(&ran, 10), "%s: dispatch_after onto a serial queue did not fire", when);
    dispatch_release(serial);
    printf("%s: timers fired at the descriptor limit\n", when);
}

static int case_timers_cold(void) {
    int filled = exhaust_descriptors(LIMIT);
    printf("filled the table with %d descriptors before any dispatch call\n", filled);
    check_timers("cold");
    return 0;
}

static int case_timers_warm(void) {
    latch_t warm;
    latch_init(&warm, 1);
    dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW, NSEC_PER_MSEC), global(), &warm, arrive);
    CHECK(latch_wait(&warm, 10));
    int filled = exhaust_descriptors(LIMIT);
    printf("filled the table with %d descriptors after a first dispatch_after\n", filled);
    check_timers("warm");
    // Freed descriptors are the program's again.
    release_descriptors(4);
    int fd = open("/dev/null", O_RDONLY);
    CHECKF(fd >= 0, "open after releasing descriptors: %s", strerror(errno));
    close(fd);
    return 0;
}

// MARK: Signal and read sources at the limit

static void raise_usr1(void *context) {
    (void)context;
    raise(SIGUSR1);
}

static int case_signal_source(void) {
    signal(SIGUSR1, SIG_IGN);
    exhaust_descriptors(LIMIT);
    latch_t got;
    latch_init(&got, 1);
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_SIGNAL, SIGUSR1, 0, global());
    dispatch_set_context(source, &got);
    dispatch_source_set_event_handler_f(source, arrive);
    dispatch_resume(source);
    for (int i = 0; i < 100 && latch_count(&got) > 0; i++) {
        dispatch_async_f(global(), NULL, raise_usr1);
        latch_wait(&got, 0.1);
    }
    CHECKF(latch_wait(&got, 5), "a signal source made at the limit never saw SIGUSR1 raised from a work item");
    dispatch_source_cancel(source);
    dispatch_release(source);
    printf("a signal source made at the limit fired\n");
    return 0;
}

static int case_read_source(void) {
    int fds[2];
    CHECK(pipe(fds) == 0);
    exhaust_descriptors(LIMIT);
    latch_t got;
    latch_init(&got, 1);
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_READ, (uintptr_t)fds[0], 0, global());
    dispatch_set_context(source, &got);
    dispatch_source_set_event_handler_f(source, arrive);
    dispatch_resume(source);
    CHECK(write(fds[1], "x", 1) == 1);
    CHECKF(latch_wait(&got, 10), "a read source made at the limit did not fire");
    dispatch_source_cancel(source);
    dispatch_release(source);
    printf("a read source made at the limit fired\n");
    return 0;
}

// MARK: Sources whose registration needs a descriptor

#ifndef GC_REFERENCE_LIBDISPATCH
typedef struct {
    latch_t cancelled;
    atomic_long events;
} watch_t;

static void count_event(void *context) { atomic_fetch_add(&((watch_t *)context)->events, 1); }
static void note_cancel(void *context) { latch_arrive(&((watch_t *)context)->cancelled); }

/// Makes `source` at the limit and checks that the library cancelled it.
static void expect_cancelled_by_library(dispatch_source_t source, const char *what) {
    watch_t watch;
    latch_init(&watch.cancelled, 1);
    atomic_init(&watch.events, 0);
    dispatch_set_context(source, &watch);
    dispatch_source_set_event_handler_f(source, count_event);
    dispatch_source_set_cancel_handler_f(source, note_cancel);
    dispatch_resume(source);
    CHECKF(latch_wait(&watch.cancelled, 10),
           "%s made at the descriptor limit: its cancel handler never ran (a silently dead source)", what);
    CHECKF(dispatch_source_testcancel(source) != 0, "%s: the cancel handler ran, but testcancel is 0", what);
    CHECK_EQ(atomic_load(&watch.events), 0);
    dispatch_release(source);
    printf("%s made at the limit was cancelled by the library\n", what);
}

static int case_process_source(void) {
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        pause();
        _exit(0);
    }
    exhaust_descriptors(LIMIT);
    expect_cancelled_by_library(
        dispatch_source_create(DISPATCH_SOURCE_TYPE_PROC, (uintptr_t)child, DISPATCH_PROC_EXIT, global()),
        "a process source");
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return 0;
}

/// Not a descriptor limit but its neighbour: epoll refuses the pidfd (ENOSPC, past
/// fs.epoll.max_user_watches; injected by shim_epoll). The source follows the same rule:
/// cancelled by the library, never a false DISPATCH_PROC_EXIT.
static int case_process_source_epoll(void) {
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        // Not holding the parent's output pipe, and gone with it if a check fails.
        close(STDOUT_FILENO);
        close(STDERR_FILENO);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        pause();
        _exit(0);
    }
    expect_cancelled_by_library(
        dispatch_source_create(DISPATCH_SOURCE_TYPE_PROC, (uintptr_t)child, DISPATCH_PROC_EXIT, global()),
        "a process source (epoll refused its pidfd)");
    CHECK_EQ(waitpid(child, NULL, WNOHANG), 0);  // it really is alive
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return 0;
}

static int case_vnode_source(void) {
    char path[] = "/tmp/gc-faults-vnode-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    exhaust_descriptors(LIMIT);
    expect_cancelled_by_library(
        dispatch_source_create(DISPATCH_SOURCE_TYPE_VNODE, (uintptr_t)fd, DISPATCH_VNODE_WRITE, global()),
        "a vnode source");
    close(fd);
    return 0;
}
#endif

// MARK: dispatch_io at the limit

typedef struct {
    latch_t done;
    atomic_int error;
    atomic_long bytes;
} io_result_t;

static void io_handler(void *context, bool done, dispatch_data_t data, int error) {
    io_result_t *r = context;
    if (data) atomic_fetch_add(&r->bytes, (long)dispatch_data_get_size(data));
    if (error) atomic_store(&r->error, error);
    if (done) latch_arrive(&r->done);
}

static void io_cleanup(void *context, int error) {
    (void)context;
    (void)error;
}

static void convenience_handler(void *context, dispatch_data_t data, int error) {
    io_result_t *r = context;
    if (data) atomic_fetch_add(&r->bytes, (long)dispatch_data_get_size(data));
    atomic_store(&r->error, error);
    latch_arrive(&r->done);
}

static void io_result_init(io_result_t *r) {
    latch_init(&r->done, 1);
    atomic_init(&r->error, 0);
    atomic_init(&r->bytes, 0);
}

static int case_io(void) {
    int fds[2];
    CHECK(pipe(fds) == 0);
    exhaust_descriptors(LIMIT);

    io_result_t opened;
    io_result_init(&opened);
    dispatch_io_t channel = dispatch_io_create_with_path_f(DISPATCH_IO_RANDOM, "/proc/self/status", O_RDONLY, 0,
                                                           global(), NULL, io_cleanup);
    CHECK(channel != NULL);
    dispatch_io_read_f(channel, 0, SIZE_MAX, global(), &opened, io_handler);
    CHECKF(latch_wait(&opened.done, 10), "a channel opened from a path at the limit never finished its read");
    CHECKF(atomic_load(&opened.error) == EMFILE, "the read of a path at the limit reported %d (%s), expected EMFILE",
           atomic_load(&opened.error), strerror(atomic_load(&opened.error)));
    dispatch_io_close(channel, DISPATCH_IO_STOP);
    dispatch_release(channel);
    printf("dispatch_io_create_with_path at the limit: EMFILE through the handler\n");

    io_result_t wrote, read;
    io_result_init(&wrote);
    io_result_init(&read);
    static char hello[] = "hello";
    dispatch_data_t data = dispatch_data_create_f(hello, 5, NULL, NULL);  // NULL: copied
    dispatch_write_f(fds[1], data, global(), &wrote, convenience_handler);
    dispatch_release(data);
    CHECKF(latch_wait(&wrote.done, 10), "dispatch_write at the limit never called its handler");
    dispatch_read_f(fds[0], 5, global(), &read, convenience_handler);
    CHECKF(latch_wait(&read.done, 10), "dispatch_read at the limit never called its handler");
    printf("dispatch_write/dispatch_read at the limit: errors %d/%d, %ld bytes read\n", atomic_load(&wrote.error),
           atomic_load(&read.error), atomic_load(&read.bytes));
    CHECK(atomic_load(&wrote.error) == 0 || atomic_load(&wrote.error) == EMFILE);
    CHECK(atomic_load(&read.error) == 0 || atomic_load(&read.error) == EMFILE);
    if (atomic_load(&read.error) == 0) CHECK_EQ(atomic_load(&read.bytes), 5);
    return 0;
}

// MARK: The parent

typedef struct {
    const char *name;
    int (*body)(void);
    /// The reference libdispatch is known to die in this case (reported, not failed).
    bool reference_dies;
} fault_case_t;

static const fault_case_t cases[] = {
    {"timers-cold", case_timers_cold, true},
    {"timers-warm", case_timers_warm, false},
    {"signal-source", case_signal_source, true},
    {"read-source", case_read_source, true},
#ifndef GC_REFERENCE_LIBDISPATCH
    {"process-source", case_process_source, false},
    {"process-source-epoll", case_process_source_epoll, false},
    {"vnode-source", case_vnode_source, false},
#endif
    {"io", case_io, true},
};

int main(int argc, char **argv) {
    check_start("faults_descriptors", 120);
    size_t count = sizeof cases / sizeof cases[0];
    if (argc > 1) {
        alarm(30);
        for (size_t i = 0; i < count; i++) {
            if (strcmp(argv[1], cases[i].name) == 0) {
                check_section(cases[i].name);
                return cases[i].body();
            }
        }
        FAIL("no case %s", argv[1]);
    }
    static child_result_t result;
    for (size_t i = 0; i < count; i++) {
        check_section(cases[i].name);
#ifdef GC_REFERENCE_LIBDISPATCH
        if (cases[i].reference_dies) {
            run_child_case(cases[i].name, NULL, NULL, &result);
            printf("   libdispatch: %s %d; output: %s", WIFEXITED(result.status) ? "exit" : "signal",
                   WIFEXITED(result.status) ? WEXITSTATUS(result.status) : WTERMSIG(result.status), result.output);
            continue;
        }
#endif
        if (strcmp(cases[i].name, "process-source-epoll") == 0) {
            static const char *const enospc[] = {"GC_SHIM_EPOLL_PIDFD_FAIL=28", NULL};
            expect_child_passes(cases[i].name, "shim_epoll", enospc, &result);
            continue;
        }
        expect_child_passes(cases[i].name, NULL, NULL, &result);
    }
#ifndef GC_REFERENCE_LIBDISPATCH
    check_section("the library says why it cancelled a source (GRANDCENTRAL_DEBUG)");
    static const char *const debug_on[] = {"GRANDCENTRAL_DEBUG=1", NULL};
    expect_child_passes("process-source", NULL, debug_on, &result);
    CHECKF(strstr(result.output, "GrandCentral: debug: source: ") && strstr(result.output, "pidfd_open")
               && strstr(result.output, "cancel"),
           "no debug line naming pidfd_open and the cancel");
#endif
    check_pass();
    return 0;
}
