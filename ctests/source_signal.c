// Signal sources (DISPATCH_SOURCE_TYPE_SIGNAL): a source receives its signal sent by
// raise() from the main thread and from a dispatch worker and by kill() from another
// process, with the signal neither blocked nor ignored, and the default action does not
// kill the process; sequential sends count exactly, a burst counts at least once (the
// kernel merges a pending standard signal); two sources on one signal both get every
// delivery; a signal the program blocks reaches the source, also when every thread blocks
// it; dispatch_source_create refuses signal 0, 65 and a nonzero mask.
//
// GrandCentral promises more than libdispatch on Linux, which replaces the program's
// handler, keeps it after the last source is gone, installs it later (on its manager
// thread: a raise() right after dispatch_activate kills the process) and blocks signals in
// its worker threads (a raise() there never reaches the source); those checks are off in
// the reference build (GC_REFERENCE_LIBDISPATCH): a handler the program installed with
// sigaction (SA_SIGINFO and plain forms) keeps running alongside the source for signals
// sent to a thread (for kill() the event thread may take the instance first: source.h);
// cancelling the last source restores the program's disposition; a raise() right after
// activation and a raise() on a worker reach the source; a process posix_spawn()ed from
// a worker starts with the worker's mask (the asynchronous signals blocked, as in
// libdispatch, except one a source watches).
//
// The "blocked in every thread" case runs in a copy of this program exec'd with SIGUSR1
// already blocked: the library captures the program's mask when it loads and gives it to
// every thread it starts, so blocking in main() would come too late for its workers.
#include "check.h"

#include <spawn.h>
#include <sys/syscall.h>

extern char **environ;

#define SENDS 5

// MARK: - Counting

typedef struct {
    dispatch_source_t source;
    atomic_long total;      // sum of dispatch_source_get_data over the handler's calls
    atomic_long calls;
    atomic_long zero_data;  // calls that saw data 0 (never expected)
} counter_t;

static void count_event(void *context) {
    counter_t *counter = context;
    unsigned long data = dispatch_source_get_data(counter->source);
    if (data == 0) atomic_fetch_add(&counter->zero_data, 1);
    atomic_fetch_add(&counter->total, (long)data);
    atomic_fetch_add(&counter->calls, 1);
}

#ifdef GC_REFERENCE_LIBDISPATCH
static latch_t *registered_latch;
static void counter_registered(void *context) {
    (void)context;
    latch_arrive(registered_latch);
}
#endif

/// Creates and activates a counting source. GrandCentral catches the signal by the time
/// dispatch_activate returns, so the sections signal at once; libdispatch installs its
/// handler later, on its manager thread (a raise() right after activation kills the
/// process), so the reference build waits for the registration handler first.
static void counter_start(counter_t *counter, int signo, dispatch_queue_t queue) {
    atomic_store(&counter->total, 0);
    atomic_store(&counter->calls, 0);
    atomic_store(&counter->zero_data, 0);
    counter->source = dispatch_source_create(DISPATCH_SOURCE_TYPE_SIGNAL, (uintptr_t)signo, 0, queue);
    CHECK(counter->source != NULL);
    CHECK_EQ(dispatch_source_get_handle(counter->source), signo);
    dispatch_set_context(counter->source, counter);
    dispatch_source_set_event_handler_f(counter->source, count_event);
#ifdef GC_REFERENCE_LIBDISPATCH
    latch_t latch;
    latch_init(&latch, 1);
    registered_latch = &latch;
    dispatch_source_set_registration_handler_f(counter->source, counter_registered);
    dispatch_activate(counter->source);
    LATCH_WAIT(&latch, 10, "the registration handler");
    latch_destroy(&latch);
#else
    dispatch_activate(counter->source);
#endif
}

// The cancel handler runs with the source's context (the counter); the counter does not
// hold the latch, so the sections that wait for a cancel use this pair instead.
static latch_t *cancel_latch_for_counter;
static void counter_cancelled(void *context) {
    (void)context;
    latch_arrive(cancel_latch_for_counter);
}

static void counter_cancel_and_wait(counter_t *counter) {
    latch_t latch;
    latch_init(&latch, 1);
    cancel_latch_for_counter = &latch;
    dispatch_source_set_cancel_handler_f(counter->source, counter_cancelled);
    dispatch_source_cancel(counter->source);
    LATCH_WAIT(&latch, 10, "the cancel handler");
    CHECK(dispatch_source_testcancel(counter->source));
    dispatch_release(counter->source);
    counter->source = NULL;
    latch_destroy(&latch);
    CHECK_EQ(atomic_load(&counter->zero_data), 0);
    CHECK(atomic_load(&counter->calls) <= atomic_load(&counter->total));
}

// MARK: - Senders

typedef struct {
    int signo;
    latch_t done;
    pid_t thread;
} raise_job_t;

static void raise_signal(void *context) {
    raise_job_t *job = context;
    job->thread = (pid_t)syscall(SYS_gettid);
    CHECK_EQ(raise(job->signo), 0);
    latch_arrive(&job->done);
}

/// raise() on a dispatch worker (dispatch_async: dispatch_sync would run it on this
/// thread); returns once it has returned there. In the reference build it raises on the
/// calling thread instead: libdispatch's workers block signals, so a raise() there stays
/// pending on that worker and never reaches the source (GrandCentral's workers keep the
/// program's mask).
static void raise_on_worker(int signo) {
#ifdef GC_REFERENCE_LIBDISPATCH
    CHECK_EQ(raise(signo), 0);
    return;
#endif

    raise_job_t job = { .signo = signo };
    latch_init(&job.done, 1);
    dispatch_async_f(dispatch_get_global_queue(DISPATCH_QUEUE_PRIORITY_DEFAULT, 0), &job, raise_signal);
    LATCH_WAIT(&job.done, 10, "the worker's raise()");
    latch_destroy(&job.done);
    CHECK(job.thread != (pid_t)syscall(SYS_gettid));
}

/// kill(getppid(), signo) from a forked child; returns once the child has exited.
static void kill_from_child(int signo) {
    fflush(stdout);
    pid_t child = fork();
    CHECKF(child >= 0, "fork: %s", strerror(errno));
    if (child == 0) {
        _exit(kill(getppid(), signo) == 0 ? 0 : 1);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's kill failed (status %d)", status);
}

/// Sends SENDS signals with `send`, one at a time, each counted exactly before the next.
static void send_sequentially(counter_t *counter, int signo, void (*send)(int), const char *how) {
    long base = atomic_load(&counter->total);
    for (long i = 1; i <= SENDS; i++) {
        send(signo);
        WAIT_FOR_COUNT(&counter->total, base + i, 10);
        sleep_ms(2);
        CHECKF(atomic_load(&counter->total) == base + i, "%s: send %ld counted %ld times", how, i,
               atomic_load(&counter->total) - base - (i - 1));
    }
    printf("   %s: %d sends, %d counted\n", how, SENDS, SENDS);
}

static void raise_here(int signo) {
    CHECK_EQ(raise(signo), 0);
}

static void kill_process(int signo) {
    CHECK_EQ(kill(getpid(), signo), 0);
}

// MARK: - Dispositions and masks

static bool disposition_is(int signo, void (*handler)(int), void (*action)(int, siginfo_t *, void *)) {
    struct sigaction current;
    CHECK_EQ(sigaction(signo, NULL, &current), 0);
    if (action) return (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == action;
    return !(current.sa_flags & SA_SIGINFO) && current.sa_handler == handler;
}

static uint64_t mask_bits(const sigset_t *set) {
    uint64_t bits = 0;
    for (int signo = 1; signo <= 64; signo++) {
        if (sigismember(set, signo) == 1) bits |= 1ull << (signo - 1);
    }
    return bits;
}

typedef struct {
    int pipe_write;
    pid_t child;
    int error;
    latch_t done;
} spawn_job_t;

static void spawn_grep(void *context) {
    spawn_job_t *job = context;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, job->pipe_write, STDOUT_FILENO);
    char *argv[] = { "grep", "SigBlk", "/proc/self/status", NULL };
    job->error = posix_spawnp(&job->child, "grep", &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    latch_arrive(&job->done);
}

/// The blocked-signal mask of a process posix_spawn()ed from a dispatch worker.
static uint64_t spawned_child_mask(void) {
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    spawn_job_t job = { .pipe_write = fds[1] };
    latch_init(&job.done, 1);
    // dispatch_async: dispatch_sync would run it on this thread.
    dispatch_async_f(dispatch_get_global_queue(DISPATCH_QUEUE_PRIORITY_DEFAULT, 0), &job, spawn_grep);
    LATCH_WAIT(&job.done, 10, "the worker's posix_spawn()");
    latch_destroy(&job.done);
    close(fds[1]);
    CHECKF(job.error == 0, "posix_spawnp: %s", strerror(job.error));
    char line[256] = { 0 };
    size_t used = 0;
    ssize_t n;
    while (used < sizeof line - 1 && (n = read(fds[0], line + used, sizeof line - 1 - used)) > 0) used += (size_t)n;
    close(fds[0]);
    int status = 0;
    while (waitpid(job.child, &status, 0) < 0 && errno == EINTR) {}
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "grep failed: status %d, output \"%s\"", status, line);
    unsigned long long bits = 0;
    CHECKF(sscanf(line, "SigBlk: %llx", &bits) == 1, "unexpected output \"%s\"", line);
    return bits;
}

// MARK: - The program's own handlers

static volatile sig_atomic_t siginfo_handler_calls;
static volatile sig_atomic_t siginfo_handler_bad;
static volatile sig_atomic_t plain_handler_calls;

static void program_siginfo_handler(int signo, siginfo_t *info, void *ucontext) {
    (void)ucontext;
    if (info == NULL || info->si_signo != signo) siginfo_handler_bad = 1;
    siginfo_handler_calls++;
}

static void program_plain_handler(int signo) {
    (void)signo;
    plain_handler_calls++;
}

// MARK: - Sections

static void create_refuses_bad_input(void) {
    check_section("dispatch_source_create: NULL for signal 0 and 65 and a nonzero mask");
    dispatch_queue_t queue = dispatch_get_global_queue(DISPATCH_QUEUE_PRIORITY_DEFAULT, 0);
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_SIGNAL, 0, 0, queue) == NULL);
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_SIGNAL, 65, 0, queue) == NULL);
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_SIGNAL, SIGUSR1, 1, queue) == NULL);
    dispatch_source_t last = dispatch_source_create(DISPATCH_SOURCE_TYPE_SIGNAL, 64, 0, queue);
    CHECK(last != NULL);
    dispatch_source_cancel(last);
    dispatch_activate(last);
    dispatch_release(last);
}

static void default_disposition(void) {
    check_section("SIGUSR1, default action, not blocked: raise (main, worker), kill (child), burst");
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    CHECK_EQ(sigaction(SIGUSR1, &dfl, NULL), 0);
    dispatch_queue_t queue = dispatch_queue_create("tests.signal.usr1", NULL);
    counter_t counter;
    counter_start(&counter, SIGUSR1, queue);
    // At once: the handler is installed by dispatch_activate itself.
    raise_here(SIGUSR1);
    WAIT_FOR_COUNT(&counter.total, 1, 10);
    send_sequentially(&counter, SIGUSR1, raise_here, "raise() on the main thread");
    send_sequentially(&counter, SIGUSR1, raise_on_worker, "raise() on a dispatch worker");
    send_sequentially(&counter, SIGUSR1, kill_from_child, "kill(getppid()) from a forked child");
    send_sequentially(&counter, SIGUSR1, kill_process, "kill(getpid())");

    long base = atomic_load(&counter.total);
    for (int i = 0; i < 20; i++) raise_here(SIGUSR1);
    WAIT_FOR_COUNT(&counter.total, base + 1, 10);
    sleep_ms(100);
    long burst = atomic_load(&counter.total) - base;
    printf("   a burst of 20 raise() counted %ld (the kernel merges a pending signal)\n", burst);
    CHECK(burst >= 1 && burst <= 20);

    counter_cancel_and_wait(&counter);
#ifndef GC_REFERENCE_LIBDISPATCH
    CHECKF(disposition_is(SIGUSR1, SIG_DFL, NULL), "SIGUSR1 is not SIG_DFL again after the last source");
#endif
    dispatch_release(queue);
}

static void program_handlers_and_two_sources(void) {
    check_section("the program's handlers keep running; two sources on one signal both fire");
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = program_siginfo_handler;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    CHECK_EQ(sigaction(SIGUSR2, &action, NULL), 0);
    memset(&action, 0, sizeof action);
    action.sa_handler = program_plain_handler;
    sigemptyset(&action.sa_mask);
    CHECK_EQ(sigaction(SIGHUP, &action, NULL), 0);

    dispatch_queue_t queue = dispatch_queue_create("tests.signal.usr2", DISPATCH_QUEUE_CONCURRENT);
    counter_t first, second, hup;
    counter_start(&first, SIGUSR2, queue);
    counter_start(&second, SIGUSR2, queue);
    counter_start(&hup, SIGHUP, queue);

    // Signals sent to a thread (raise) always run the program's handler, in that thread,
    // before raise() returns.
    siginfo_handler_calls = 0;
    plain_handler_calls = 0;
    for (long i = 1; i <= SENDS; i++) {
        raise_here(SIGUSR2);
        WAIT_FOR_COUNT(&first.total, i, 10);
        WAIT_FOR_COUNT(&second.total, i, 10);
        raise_on_worker(SIGHUP);
        WAIT_FOR_COUNT(&hup.total, i, 10);
#ifndef GC_REFERENCE_LIBDISPATCH
        CHECK_EQ(siginfo_handler_calls, i);
        CHECK_EQ(plain_handler_calls, i);
#endif
    }
    // Sent to the process (kill from a child): the sources count each; the program's
    // handler runs unless the event thread's signalfd took the instance first (source.h).
    for (long i = 1; i <= SENDS; i++) {
        kill_from_child(SIGUSR2);
        WAIT_FOR_COUNT(&first.total, SENDS + i, 10);
        WAIT_FOR_COUNT(&second.total, SENDS + i, 10);
    }
    sleep_ms(20);
    CHECK_EQ(atomic_load(&first.total), 2 * SENDS);
    CHECK_EQ(atomic_load(&second.total), 2 * SENDS);
    CHECK_EQ(atomic_load(&hup.total), SENDS);
#ifndef GC_REFERENCE_LIBDISPATCH
    CHECK(siginfo_handler_calls >= SENDS && siginfo_handler_calls <= 2 * SENDS);
    CHECK_EQ(plain_handler_calls, SENDS);
    CHECK_EQ(siginfo_handler_bad, 0);
    printf("   SA_SIGINFO handler ran %d times (%d raise, %d kill), plain handler %d times, alongside the "
           "sources\n", (int)siginfo_handler_calls, SENDS, SENDS, (int)plain_handler_calls);
#endif

    // One of two cancelled: the other still fires, the library's handler stays.
    counter_cancel_and_wait(&first);
    raise_here(SIGUSR2);
    WAIT_FOR_COUNT(&second.total, 2 * SENDS + 1, 10);
    counter_cancel_and_wait(&second);
    counter_cancel_and_wait(&hup);
#ifndef GC_REFERENCE_LIBDISPATCH
    CHECKF(disposition_is(SIGUSR2, NULL, program_siginfo_handler),
           "SIGUSR2's disposition is not the program's SA_SIGINFO handler after the last source");
    CHECKF(disposition_is(SIGHUP, program_plain_handler, NULL),
           "SIGHUP's disposition is not the program's handler after the last source");
    // And the program's handler is what the signal reaches now.
    long calls = siginfo_handler_calls;
    raise_here(SIGUSR2);
    CHECK_EQ(siginfo_handler_calls, calls + 1);
    printf("   after the last source: the program's handlers are installed again\n");
#endif
    dispatch_release(queue);
}

static void blocked_in_main_thread(void) {
    check_section("SIGUSR1 blocked in the main thread: kill(getpid()) and a worker's raise() reach the source");
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, &set, &old), 0);
    dispatch_queue_t queue = dispatch_queue_create("tests.signal.blocked", NULL);
    counter_t counter;
    counter_start(&counter, SIGUSR1, queue);
    send_sequentially(&counter, SIGUSR1, kill_process, "kill(getpid())");
#ifndef GC_REFERENCE_LIBDISPATCH
    send_sequentially(&counter, SIGUSR1, raise_on_worker, "raise() on a dispatch worker");
#endif
    counter_cancel_and_wait(&counter);
    CHECK_EQ(pthread_sigmask(SIG_SETMASK, &old, NULL), 0);
    dispatch_release(queue);
}

static void spawn_mask(uint64_t program_mask) {
#ifndef GC_REFERENCE_LIBDISPATCH
    check_section("a process posix_spawn()ed from a worker has the worker's mask");
    // Workers block the asynchronous signals, as libdispatch's do (source.h), except one a
    // source watches (SIGUSR2 here); a spawned process inherits that mask.
    dispatch_queue_t queue = dispatch_queue_create("tests.signal.spawn", NULL);
    counter_t counter;
    counter_start(&counter, SIGUSR2, queue);
    uint64_t child = spawned_child_mask();
    printf("   program mask %016llx, spawned child's SigBlk %016llx\n", (unsigned long long)program_mask,
           (unsigned long long)child);
    uint64_t asynchronous = (1ull << (SIGUSR1 - 1)) | (1ull << (SIGTERM - 1)) | (1ull << (SIGINT - 1));
    CHECK_EQ_U64(child & (program_mask | asynchronous), program_mask | asynchronous);
    CHECK_EQ_U64(child & (1ull << (SIGUSR2 - 1)), 0);
    counter_cancel_and_wait(&counter);
    dispatch_release(queue);
#else
    (void)program_mask;
#endif
}

// MARK: - Churn

#define CHURN_THREADS 4
#define CHURN_ROUNDS 100
static atomic_long churn_cancels;

static void churn_cancelled(void *context) {
    (void)context;
    atomic_fetch_add(&churn_cancels, 1);
}

static void churn_round(void *context, size_t index) {
    (void)context;
    (void)index;
    for (int i = 0; i < CHURN_ROUNDS; i++) {
        dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_SIGNAL, SIGUSR2, 0,
                                                          dispatch_get_global_queue(DISPATCH_QUEUE_PRIORITY_DEFAULT, 0));
        CHECK(source != NULL);
        dispatch_source_set_cancel_handler_f(source, churn_cancelled);
        dispatch_activate(source);
        dispatch_source_cancel(source);
        dispatch_release(source);
    }
}

static void churn(void) {
    check_section("sources on one signal created, cancelled and released on 4 threads, signals meanwhile");
    // SIGUSR2 has the program's SA_SIGINFO handler (program_handlers_and_two_sources).
    atomic_store(&churn_cancels, 0);
    long calls = siginfo_handler_calls;
    dispatch_apply_f(CHURN_THREADS, dispatch_get_global_queue(DISPATCH_QUEUE_PRIORITY_DEFAULT, 0), NULL,
                     churn_round);
    for (int i = 0; i < 20; i++) raise_here(SIGUSR2);
    // Cancelled, then released at once: each cancel handler runs all the same.
    WAIT_FOR_COUNT(&churn_cancels, CHURN_THREADS * CHURN_ROUNDS, 20);
#ifndef GC_REFERENCE_LIBDISPATCH
    CHECKF(disposition_is(SIGUSR2, NULL, program_siginfo_handler),
           "SIGUSR2's disposition is not the program's handler after the churn");
    raise_here(SIGUSR2);
    CHECK_EQ(siginfo_handler_calls, calls + 21);
    printf("   %d sources, %ld cancel handlers; the program's handler is installed again\n",
           CHURN_THREADS * CHURN_ROUNDS, atomic_load(&churn_cancels));
#else
    (void)calls;
#endif
}

#ifdef __BLOCKS__
static void block_handlers(void) {
    check_section("block handlers (clang)");
    dispatch_queue_t queue = dispatch_queue_create("tests.signal.blocks", NULL);
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_SIGNAL, SIGUSR1, 0, queue);
    CHECK(source != NULL);
    __block long total = 0;
    atomic_long seen = 0;
    atomic_long *seen_p = &seen;
    dispatch_source_set_event_handler(source, ^{
        total += (long)dispatch_source_get_data(source);
        atomic_store(seen_p, total);
    });
    latch_t latch;
    latch_init(&latch, 1);
    latch_t *latch_p = &latch;
    dispatch_source_set_cancel_handler(source, ^{ latch_arrive(latch_p); });
#ifdef GC_REFERENCE_LIBDISPATCH
    latch_t registered;
    latch_init(&registered, 1);
    latch_t *registered_p = &registered;
    dispatch_source_set_registration_handler(source, ^{ latch_arrive(registered_p); });
#endif
    dispatch_resume(source);  // activates, as dispatch_activate does
#ifdef GC_REFERENCE_LIBDISPATCH
    LATCH_WAIT(&registered, 10, "the registration handler");
#endif
    for (long i = 1; i <= SENDS; i++) {
        raise_on_worker(SIGUSR1);
        WAIT_FOR_COUNT(&seen, i, 10);
    }
    dispatch_source_cancel(source);
    LATCH_WAIT(&latch, 10, "the cancel handler");
    CHECK_EQ(atomic_load(&seen), SENDS);
    dispatch_release(source);
    latch_destroy(&latch);
    dispatch_release(queue);
}
#endif

// MARK: - Blocked in every thread (the exec'd copy)

#define BLOCKED_EVERYWHERE "--blocked-everywhere"

/// Runs in a copy of this program started with SIGUSR1 blocked: every thread, the
/// library's included, blocks it, so a kill() leaves it pending for the process.
static int blocked_everywhere_child(void) {
    check_start("source_signal(blocked everywhere)", 30);
    check_section("SIGUSR1 blocked in every thread: kill(getpid()) reaches the source");
    sigset_t mask;
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, NULL, &mask), 0);
    CHECK(sigismember(&mask, SIGUSR1) == 1);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = program_siginfo_handler;
    action.sa_flags = SA_SIGINFO;
    CHECK_EQ(sigaction(SIGUSR1, &action, NULL), 0);
    dispatch_queue_t queue = dispatch_queue_create("tests.signal.everywhere", NULL);
    counter_t counter;
    counter_start(&counter, SIGUSR1, queue);
    send_sequentially(&counter, SIGUSR1, kill_process, "kill(getpid())");
    send_sequentially(&counter, SIGUSR1, kill_from_child, "kill(getppid()) from a forked child");
    // Blocked everywhere: no handler ran, the signalfd took every one.
    CHECK_EQ(siginfo_handler_calls, 0);
#ifndef GC_REFERENCE_LIBDISPATCH
    uint64_t child = spawned_child_mask();
    printf("   program mask %016llx, spawned child's SigBlk %016llx\n", (unsigned long long)mask_bits(&mask),
           (unsigned long long)child);
    CHECK_EQ_U64(child & mask_bits(&mask), mask_bits(&mask));
#endif
    counter_cancel_and_wait(&counter);
    dispatch_release(queue);
    check_pass();
    return 0;
}

static void blocked_everywhere(void) {
    check_section("SIGUSR1 blocked in every thread (a copy of this program exec'd with it blocked)");
    fflush(stdout);
    pid_t child = fork();
    CHECKF(child >= 0, "fork: %s", strerror(errno));
    if (child == 0) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGUSR1);
        sigprocmask(SIG_BLOCK, &set, NULL);
        char *argv[] = { "source_signal", BLOCKED_EVERYWHERE, NULL };
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the exec'd copy failed: %s %d",
           WIFSIGNALED(status) ? "signal" : "exit status", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], BLOCKED_EVERYWHERE) == 0) return blocked_everywhere_child();
    check_start("source_signal", 50);
    sigset_t initial;
    CHECK_EQ(pthread_sigmask(SIG_BLOCK, NULL, &initial), 0);
    create_refuses_bad_input();
    default_disposition();
    program_handlers_and_two_sources();
    blocked_in_main_thread();
    churn();
    spawn_mask(mask_bits(&initial));
#ifdef __BLOCKS__
    block_handlers();
#endif
    blocked_everywhere();
    check_pass();
    return 0;
}
