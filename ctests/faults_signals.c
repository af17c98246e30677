// Which signals library threads block (source.h): every asynchronous signal, as
// libdispatch's workers do, so a program's handler for a signal sent to the process runs
// on one of the program's threads, never in the middle of a work item; a worker leaves
// unblocked only the signals a source watches, so a raise() from a work item (directed at
// that worker) still reaches the source, and a process-directed instance a worker takes
// has the program's handler run on the main thread.
//
// Sections, with the workers kept busy by spinning work items throughout:
// - the library threads' masks (/proc/self/task/*/status SigBlk) hold SIGUSR1, SIGINT,
//   SIGTERM, SIGHUP, SIGCHLD and SIGALRM, and the workers leave SIGSEGV and SIGPIPE open;
// - a flood of kill(getpid(), SIGUSR1) from a program thread, the program handling SIGUSR1
//   with no source: the handler ran, and never on a library thread;
// - SIGUSR2 watched by a source and handled by the program: a flood of kill(getpid()), then
//   sequential kill()s each counted by the source, then sequential raise()s from work
//   items each counted; the program's handler never ran on a library thread for a
//   process-directed instance, and for a raise() ran on the raising thread.
//
// The reference build (libdispatch) replaces the program's handler for a watched signal
// and keeps watched signals blocked in its workers (a raise() there never reaches the
// source): those checks are off there.
#include "check.h"

#include <dirent.h>
#include <inttypes.h>
#include <sys/syscall.h>

#define FLOOD 20000
#define ROUNDS 200
#define SPINNERS 4

static pid_t main_tid;
static _Atomic pid_t flooder_tid;
static _Atomic pid_t raising_tid;

static pid_t gettid_raw(void) { return (pid_t)syscall(SYS_gettid); }

// MARK: - Handlers (async-signal-safe: atomics and a syscall)

static atomic_long usr1_calls, usr1_on_library;
static atomic_long usr2_other_code;
static atomic_long usr2_calls, usr2_on_library, usr2_raised_elsewhere, usr2_raised_calls;

static bool on_program_thread(pid_t tid) { return tid == main_tid || tid == atomic_load(&flooder_tid); }

static void usr1_handler(int signo, siginfo_t *info, void *context) {
    (void)signo, (void)info, (void)context;
    atomic_fetch_add(&usr1_calls, 1);
    if (!on_program_thread(gettid_raw())) atomic_fetch_add(&usr1_on_library, 1);
}

static void usr2_handler(int signo, siginfo_t *info, void *context) {
    (void)signo, (void)context;
    pid_t tid = gettid_raw();
    atomic_fetch_add(&usr2_calls, 1);
    if (info->si_code == SI_TKILL) {
        // raise(): the thread that raised it runs the handler, as raise() promises.
        atomic_fetch_add(&usr2_raised_calls, 1);
        if (tid != atomic_load(&raising_tid) && !on_program_thread(tid)) atomic_fetch_add(&usr2_raised_elsewhere, 1);
    } else {
        // kill(): the program's handler sees SI_USER and no errno, also when the library
        // re-queued it from a worker to the main thread.
        if (info->si_code != SI_USER || info->si_errno != 0) atomic_fetch_add(&usr2_other_code, 1);
        if (!on_program_thread(tid)) atomic_fetch_add(&usr2_on_library, 1);
    }
}

static void install(int signo, void (*handler)(int, siginfo_t *, void *)) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = handler;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    CHECK_EQ(sigaction(signo, &action, NULL), 0);
}

// MARK: - Busy workers

static atomic_bool spinning;
static atomic_long spins;
static latch_t spinners_done;

static dispatch_queue_t global(void) { return dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0); }

static void spin(void *context) {
    (void)context;
    if (!atomic_load(&spinning)) {
        latch_arrive(&spinners_done);
        return;
    }
    atomic_fetch_add(&spins, 1);
    busy_wait_ns(200 * 1000);
    dispatch_async_f(global(), NULL, spin);
}

static void spinners_start(void) {
    atomic_store(&spinning, true);
    latch_init(&spinners_done, SPINNERS);
    for (int i = 0; i < SPINNERS; i++) dispatch_async_f(global(), NULL, spin);
}

static void spinners_stop(void) {
    atomic_store(&spinning, false);
    LATCH_WAIT(&spinners_done, 30, "the spinning work items");
    latch_destroy(&spinners_done);
}

// MARK: - Masks

static uint64_t sigbit(int signo) { return 1ull << (signo - 1); }

/// Checks every thread but the main thread (the program has no other now): each is the
/// library's. Returns how many were checked.
static int check_library_masks(void) {
    DIR *dir = opendir("/proc/self/task");
    CHECK(dir != NULL);
    int checked = 0, open_synchronous = 0;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        pid_t tid = (pid_t)atoi(entry->d_name);
        if (tid <= 0 || tid == main_tid) continue;
        char path[64], line[256];
        snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
        FILE *f = fopen(path, "r");
        if (!f) continue;  // a worker that retired meanwhile
        uint64_t blocked = 0;
        bool found = false;
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "SigBlk:", 7) == 0) found = sscanf(line + 7, "%" SCNx64, &blocked) == 1;
        }
        fclose(f);
        if (!found) continue;
        printf("   thread %d SigBlk %016llx\n", (int)tid, (unsigned long long)blocked);
        uint64_t must = sigbit(SIGUSR1) | sigbit(SIGINT) | sigbit(SIGTERM) | sigbit(SIGHUP) | sigbit(SIGCHLD) | sigbit(SIGALRM);
        CHECKF((blocked & must) == must, "thread %d leaves asynchronous signals open: SigBlk %016llx", (int)tid,
               (unsigned long long)blocked);
        if ((blocked & (sigbit(SIGSEGV) | sigbit(SIGPIPE))) == 0) open_synchronous++;
        checked++;
    }
    closedir(dir);
    // The workers (spinning now); the event thread blocks every signal.
    CHECKF(open_synchronous >= 1, "no library thread leaves SIGSEGV and SIGPIPE open");
    return checked;
}

// MARK: - Senders

static void *flood(void *context) {
    int signo = (int)(intptr_t)context;
    atomic_store(&flooder_tid, gettid_raw());
    for (int i = 0; i < FLOOD; i++) CHECK_EQ(kill(getpid(), signo), 0);
    return NULL;
}

static void run_flood(int signo) {
    pthread_t thread;
    CHECK_EQ(pthread_create(&thread, NULL, flood, (void *)(intptr_t)signo), 0);
    CHECK_EQ(pthread_join(thread, NULL), 0);
    sleep_ms(100);  // the last instances are handled
}

static atomic_long usr2_counted;

static void count_usr2(void *context) {
    dispatch_source_t source = context;
    atomic_fetch_add(&usr2_counted, (long)dispatch_source_get_data(source));
}

#ifdef GC_REFERENCE_LIBDISPATCH
static latch_t registered;
static void on_registered(void *context) {
    (void)context;
    latch_arrive(&registered);
}
#endif

typedef struct {
    latch_t done;
} raise_job_t;

static void raise_usr2(void *context) {
    raise_job_t *job = context;
    atomic_store(&raising_tid, gettid_raw());
    CHECK_EQ(raise(SIGUSR2), 0);
    latch_arrive(&job->done);
}

int main(void) {
    check_start("faults_signals", 240);
    main_tid = gettid_raw();
    install(SIGUSR1, usr1_handler);
    install(SIGUSR2, usr2_handler);
    spinners_start();

    check_section("library threads block the asynchronous signals");
    WAIT_FOR_COUNT(&spins, 4 * SPINNERS, 30);  // workers exist (a loaded machine starts them late)
    int checked = check_library_masks();
    CHECK(checked >= 1);
    printf("   %d library threads checked\n", checked);

    check_section("a flood of kill(SIGUSR1) with a program handler: never on a library thread");
    run_flood(SIGUSR1);
    printf("   %d sent, handler ran %ld times, %ld on a library thread\n", FLOOD, atomic_load(&usr1_calls),
           atomic_load(&usr1_on_library));
    CHECK(atomic_load(&usr1_calls) > 0);
    CHECK_EQ(atomic_load(&usr1_on_library), 0);

    check_section("SIGUSR2 with a source and a program handler");
    dispatch_queue_t queue = dispatch_queue_create("tests.faults.signals", NULL);
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_SIGNAL, SIGUSR2, 0, queue);
    CHECK(source != NULL);
    dispatch_set_context(source, source);
    dispatch_source_set_event_handler_f(source, count_usr2);
#ifdef GC_REFERENCE_LIBDISPATCH
    latch_init(&registered, 1);
    dispatch_source_set_registration_handler_f(source, on_registered);
    dispatch_activate(source);
    LATCH_WAIT(&registered, 10, "the registration handler");
#else
    dispatch_activate(source);
#endif
    run_flood(SIGUSR2);
    WAIT_FOR_COUNT(&usr2_counted, 1, 10);
    printf("   flood: %d sent, %ld counted, handler ran %ld times, %ld on a library thread\n", FLOOD,
           atomic_load(&usr2_counted), atomic_load(&usr2_calls), atomic_load(&usr2_on_library));
    sleep_ms(100);
    long base = atomic_load(&usr2_counted);
    for (int i = 1; i <= ROUNDS; i++) {
        CHECK_EQ(kill(getpid(), SIGUSR2), 0);
        WAIT_FOR_COUNT(&usr2_counted, base + i, 10);
    }
    CHECK_EQ(atomic_load(&usr2_counted), base + ROUNDS);
    printf("   %d kill()s each counted once\n", ROUNDS);
#ifndef GC_REFERENCE_LIBDISPATCH
    base = atomic_load(&usr2_counted);
    for (int i = 1; i <= ROUNDS; i++) {
        raise_job_t job;
        latch_init(&job.done, 1);
        dispatch_async_f(global(), &job, raise_usr2);
        LATCH_WAIT(&job.done, 10, "a work item's raise()");
        latch_destroy(&job.done);
        WAIT_FOR_COUNT(&usr2_counted, base + i, 10);
    }
    printf("   %d raise()s from work items each counted once; handler ran %ld times for them\n", ROUNDS,
           atomic_load(&usr2_raised_calls));
    CHECK_EQ(atomic_load(&usr2_raised_calls), ROUNDS);
    CHECK_EQ(atomic_load(&usr2_raised_elsewhere), 0);
    CHECK(atomic_load(&usr2_calls) > 0);
    CHECK_EQ(atomic_load(&usr2_other_code), 0);
    CHECK_EQ(atomic_load(&usr2_on_library), 0);
#endif
    spinners_stop();
    dispatch_source_cancel(source);
    dispatch_release(source);
    dispatch_release(queue);
    check_pass();
    return 0;
}
