// Process sources (DISPATCH_SOURCE_TYPE_PROC): a source sees a forked child exit (the
// data has DISPATCH_PROC_EXIT, the handle is the pid) without reaping it, so the
// program's own waitpid() still gets the status; a process that is not our child (a
// grandchild whose parent has exited) is seen exiting too; a child that already exited
// and was not reaped counts as exited; a pid with no process reports EXIT at once; a
// mask without EXIT reports nothing; the cancel handler runs exactly once, after the
// event; dispatch_source_create returns NULL for pid 0 and for undefined mask bits.
// Twenty children with a source each, exiting together, each report exactly once.
//
// Not run against the reference: the toolchain's libdispatch declares
// DISPATCH_SOURCE_TYPE_PROC unavailable on Linux and does not export
// _dispatch_source_type_proc, so this file does not build against it
// (ctests/run-reference.sh skips it). The expectations are Darwin's GCD: EXIT for an
// exited process, a synthetic EXIT for a pid that does not exist (libdispatch turns
// kqueue's ESRCH into NOTE_EXIT), no reaping.
#include "check.h"

// MARK: - A probe: what the handlers saw

typedef struct {
    dispatch_source_t source;
    atomic_long events;
    atomic_ulong data;          // or of every delivered data
    atomic_ulong handle;        // dispatch_source_get_handle in the handler
    atomic_long cancels;
    atomic_long events_at_cancel;
    latch_t fired;
    latch_t cancelled;
} probe_t;

static void probe_init(probe_t *probe) {
    memset(probe, 0, sizeof *probe);
    latch_init(&probe->fired, 1);
    latch_init(&probe->cancelled, 1);
}

static void probe_destroy(probe_t *probe) {
    latch_destroy(&probe->fired);
    latch_destroy(&probe->cancelled);
}

static void probe_event(void *context) {
    probe_t *probe = context;
    atomic_fetch_or(&probe->data, dispatch_source_get_data(probe->source));
    atomic_store(&probe->handle, dispatch_source_get_handle(probe->source));
    atomic_fetch_add(&probe->events, 1);
    latch_arrive(&probe->fired);
}

static void probe_cancel(void *context) {
    probe_t *probe = context;
    atomic_store(&probe->events_at_cancel, atomic_load(&probe->events));
    atomic_fetch_add(&probe->cancels, 1);
    latch_arrive(&probe->cancelled);
}

static dispatch_source_t make_probe_source(probe_t *probe, pid_t pid, unsigned long mask, dispatch_queue_t queue) {
    probe_init(probe);
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_PROC, (uintptr_t)pid, mask, queue);
    CHECKF(source != NULL, "dispatch_source_create(PROC, %d, 0x%lx) returned NULL", (int)pid, mask);
    probe->source = source;
    dispatch_set_context(source, probe);
    dispatch_source_set_event_handler_f(source, probe_event);
    dispatch_source_set_cancel_handler_f(source, probe_cancel);
    return source;
}

/// Cancels, waits for the cancel handler, and checks it ran once, after `events` events.
static void cancel_and_check(probe_t *probe, long events) {
    dispatch_source_cancel(probe->source);
    LATCH_WAIT(&probe->cancelled, 10, "the cancel handler");
    sleep_ms(50);   // anything late would show up now
    CHECK_EQ(atomic_load(&probe->cancels), 1);
    CHECK_EQ(atomic_load(&probe->events), events);
    CHECK_EQ(atomic_load(&probe->events_at_cancel), events);
    dispatch_release(probe->source);
    probe_destroy(probe);
}

// MARK: - Children under control

/// Forks a child that waits until `*release_fd` is written (or closed), then exits with
/// `status`.
static pid_t fork_waiting_child(int status, int *release_fd) {
    int fds[2];
    CHECKF(pipe(fds) == 0, "pipe: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECKF(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(fds[1]);
        char byte;
        while (read(fds[0], &byte, 1) < 0 && errno == EINTR) {}
        _exit(status);
    }
    close(fds[0]);
    *release_fd = fds[1];
    return pid;
}

static void release_child(int release_fd) {
    char byte = 'x';
    ssize_t n = write(release_fd, &byte, 1);
    CHECK_EQ(n, 1);
    close(release_fd);
}

static void reap(pid_t pid, int expected_status) {
    int status = 0;
    pid_t got;
    while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {}
    CHECKF(got == pid, "waitpid(%d) returned %d (%s): the library must not reap the child", (int)pid, (int)got,
           got < 0 ? strerror(errno) : "");
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == expected_status,
           "child %d: status 0x%x, expected exit %d", (int)pid, status, expected_status);
}

// MARK: - Sections

static void child_exit(void) {
    check_section("a child's exit: EXIT once, handle is the pid; waitpid() still gets its status");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.proc.child", NULL);
    int release_fd;
    pid_t pid = fork_waiting_child(7, &release_fd);
    static probe_t probe;
    dispatch_source_t source = make_probe_source(&probe, pid, DISPATCH_PROC_EXIT, queue);
    dispatch_activate(source);
    sleep_ms(200);
    CHECKF(atomic_load(&probe.events) == 0, "the source fired before the child exited");
    release_child(release_fd);
    LATCH_WAIT(&probe.fired, 10, "the child's exit");
    CHECK_EQ_U64(atomic_load(&probe.data), DISPATCH_PROC_EXIT);
    CHECK_EQ(atomic_load(&probe.handle), pid);
    CHECK_EQ(dispatch_source_get_handle(source), pid);
    CHECK_EQ(dispatch_source_get_mask(source), DISPATCH_PROC_EXIT);
    reap(pid, 7);
    sleep_ms(100);   // an exit is reported once
    cancel_and_check(&probe, 1);
    dispatch_release(queue);
}

static void non_child_exit(void) {
    check_section("a process that is not our child: its exit is seen");
    int pid_pipe[2], release_pipe[2];
    CHECK(pipe(pid_pipe) == 0);
    CHECK(pipe(release_pipe) == 0);
    fflush(stdout);
    fflush(stderr);
    pid_t middle = fork();
    CHECK(middle >= 0);
    if (middle == 0) {
        pid_t grandchild = fork();
        if (grandchild == 0) {
            close(release_pipe[1]);
            char byte;
            while (read(release_pipe[0], &byte, 1) < 0 && errno == EINTR) {}
            _exit(0);
        }
        ssize_t ignored = write(pid_pipe[1], &grandchild, sizeof grandchild);
        (void)ignored;
        _exit(grandchild > 0 ? 0 : 1);   // the grandchild is re-parented
    }
    close(pid_pipe[1]);
    close(release_pipe[0]);
    pid_t grandchild = 0;
    CHECK_EQ(read(pid_pipe[0], &grandchild, sizeof grandchild), (long)sizeof grandchild);
    close(pid_pipe[0]);
    reap(middle, 0);
    CHECK(grandchild > 0);
    CHECK_EQ(waitpid(grandchild, NULL, WNOHANG), -1);   // not ours
    CHECK_EQ(errno, ECHILD);

    static probe_t probe;
    dispatch_source_t source = make_probe_source(&probe, grandchild, DISPATCH_PROC_EXIT | DISPATCH_PROC_FORK,
                                                 dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0));
    dispatch_activate(source);
    sleep_ms(100);
    CHECKF(atomic_load(&probe.events) == 0, "the source fired before the process exited");
    release_child(release_pipe[1]);
    LATCH_WAIT(&probe.fired, 10, "the exit of a process that is not our child");
    CHECK_EQ_U64(atomic_load(&probe.data), DISPATCH_PROC_EXIT);
    CHECK_EQ(atomic_load(&probe.handle), grandchild);
    cancel_and_check(&probe, 1);
}

static void zombie_and_gone(void) {
    check_section("an exited, unreaped child reports EXIT at once; so does a pid with no process");
    int release_fd;
    pid_t pid = fork_waiting_child(3, &release_fd);
    release_child(release_fd);
    // Wait until it is a zombie, without reaping it.
    siginfo_t info;
    memset(&info, 0, sizeof info);
    CHECK(waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) == 0);
    static probe_t zombie;
    dispatch_source_t source = make_probe_source(&zombie, pid, DISPATCH_PROC_EXIT,
                                                 dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0));
    dispatch_activate(source);
    LATCH_WAIT(&zombie.fired, 10, "the zombie's exit");
    CHECK_EQ_U64(atomic_load(&zombie.data), DISPATCH_PROC_EXIT);
    cancel_and_check(&zombie, 1);
    reap(pid, 3);

    // Reaped: the pid names no process now (a reuse within these microseconds would
    // need the whole pid space to wrap).
    static probe_t gone;
    source = make_probe_source(&gone, pid, DISPATCH_PROC_EXIT, dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0));
    dispatch_activate(source);
    LATCH_WAIT(&gone.fired, 10, "EXIT for a pid with no process");
    CHECK_EQ_U64(atomic_load(&gone.data), DISPATCH_PROC_EXIT);
    cancel_and_check(&gone, 1);
}

static void mask_without_exit(void) {
    check_section("a mask without EXIT (FORK | EXEC | SIGNAL) never fires; cancel still runs its handler");
    int release_fd;
    pid_t pid = fork_waiting_child(0, &release_fd);
    static probe_t probe;
    dispatch_source_t source = make_probe_source(
        &probe, pid, DISPATCH_PROC_FORK | DISPATCH_PROC_EXEC | DISPATCH_PROC_SIGNAL,
        dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0));
    dispatch_activate(source);
    release_child(release_fd);
    reap(pid, 0);
    sleep_ms(200);
    cancel_and_check(&probe, 0);
}

static void cancel_before_exit(void) {
    check_section("cancelled before the process exits: no event, the cancel handler once");
    int release_fd;
    pid_t pid = fork_waiting_child(0, &release_fd);
    static probe_t probe;
    dispatch_source_t source = make_probe_source(&probe, pid, DISPATCH_PROC_EXIT,
                                                 dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0));
    dispatch_activate(source);
    sleep_ms(20);
    cancel_and_check(&probe, 0);
    release_child(release_fd);
    reap(pid, 0);
}

enum { MANY = 20 };

static void many_children(void) {
    check_section("20 children with a source each, exiting together: each reports exactly once");
    static probe_t probes[MANY];
    pid_t pids[MANY];
    int release_fds[MANY];
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.proc.many",
                                                   DISPATCH_QUEUE_CONCURRENT);
    for (int i = 0; i < MANY; i++) {
        pids[i] = fork_waiting_child(i, &release_fds[i]);
        dispatch_source_t source = make_probe_source(&probes[i], pids[i], DISPATCH_PROC_EXIT, queue);
        dispatch_activate(source);
    }
    for (int i = 0; i < MANY; i++) release_child(release_fds[i]);
    for (int i = 0; i < MANY; i++) {
        LATCH_WAIT(&probes[i].fired, 10, "a child's exit");
        CHECK_EQ(atomic_load(&probes[i].handle), pids[i]);
    }
    for (int i = 0; i < MANY; i++) reap(pids[i], i);
    for (int i = 0; i < MANY; i++) cancel_and_check(&probes[i], 1);
    dispatch_release(queue);
}

enum { CHURN = 200 };

static atomic_long churn_events, churn_cancels;
static void churn_event(void *context) {
    (void)context;
    atomic_fetch_add(&churn_events, 1);
}
static void churn_cancelled(void *context) {
    (void)context;
    atomic_fetch_add(&churn_cancels, 1);
}

static void churn(void) {
    check_section("200 sources on a live child activated, cancelled and released at once: no event, each cancel handler still runs once");
    int release_fd;
    pid_t pid = fork_waiting_child(0, &release_fd);
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.proc.churn", DISPATCH_QUEUE_CONCURRENT);
    atomic_store(&churn_events, 0);
    atomic_store(&churn_cancels, 0);
    for (int i = 0; i < CHURN; i++) {
        dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_PROC, (uintptr_t)pid,
                                                          DISPATCH_PROC_EXIT, queue);
        CHECK(source != NULL);
        dispatch_source_set_event_handler_f(source, churn_event);
        dispatch_source_set_cancel_handler_f(source, churn_cancelled);
        dispatch_activate(source);
        dispatch_source_cancel(source);
        dispatch_release(source);
    }
    WAIT_FOR_COUNT(&churn_cancels, CHURN, 10);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&churn_cancels), CHURN);
    CHECK_EQ(atomic_load(&churn_events), 0);
    release_child(release_fd);
    reap(pid, 0);
    dispatch_release(queue);
}

static void rejected(void) {
    check_section("dispatch_source_create returns NULL for pid 0 and for undefined mask bits");
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_PROC, 0, DISPATCH_PROC_EXIT, NULL) == NULL);
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_PROC, (uintptr_t)getpid(), 0x1, NULL) == NULL);
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_PROC, (uintptr_t)getpid(),
                                 DISPATCH_PROC_EXIT | 0x100, NULL) == NULL);
    // Every defined bit together is accepted.
    dispatch_source_t all = dispatch_source_create(
        DISPATCH_SOURCE_TYPE_PROC, (uintptr_t)getpid(),
        DISPATCH_PROC_EXIT | DISPATCH_PROC_FORK | DISPATCH_PROC_EXEC | DISPATCH_PROC_SIGNAL, NULL);
    CHECK(all != NULL);
    dispatch_activate(all);
    dispatch_source_cancel(all);
    dispatch_release(all);
}

#ifdef __BLOCKS__
static void blocks(void) {
    check_section("blocks: event and cancel handlers as blocks");
    int release_fd;
    pid_t pid = fork_waiting_child(5, &release_fd);
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_PROC, (uintptr_t)pid,
                                                      DISPATCH_PROC_EXIT,
                                                      dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0));
    CHECK(source != NULL);
    static atomic_long events, cancels;
    static atomic_ulong data;
    static latch_t fired, cancelled;
    latch_init(&fired, 1);
    latch_init(&cancelled, 1);
    dispatch_source_set_event_handler(source, ^{
        atomic_fetch_or(&data, dispatch_source_get_data(source));
        atomic_fetch_add(&events, 1);
        latch_arrive(&fired);
    });
    dispatch_source_set_cancel_handler(source, ^{
        atomic_fetch_add(&cancels, 1);
        latch_arrive(&cancelled);
    });
    dispatch_resume(source);
    release_child(release_fd);
    LATCH_WAIT(&fired, 10, "the child's exit (blocks)");
    CHECK_EQ_U64(atomic_load(&data), DISPATCH_PROC_EXIT);
    reap(pid, 5);
    dispatch_source_cancel(source);
    LATCH_WAIT(&cancelled, 10, "the cancel handler (blocks)");
    sleep_ms(50);
    CHECK_EQ(atomic_load(&events), 1);
    CHECK_EQ(atomic_load(&cancels), 1);
    dispatch_release(source);
}
#endif

int main(void) {
    check_start("source_proc", 50);
    rejected();
    child_exit();
    non_child_exit();
    zombie_and_gone();
    mask_without_exit();
    cancel_before_exit();
    many_children();
    churn();
#ifdef __BLOCKS__
    blocks();
#endif
    check_pass();
    return 0;
}
