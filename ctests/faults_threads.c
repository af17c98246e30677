// A process that cannot start threads (pthread_create fails with EAGAIN): never fatal, work
// that can run runs, and a wait with no thread to be had is said on stderr.
//
// Each case runs in a child with the shim_pthread LD_PRELOAD shim making pthread_create
// fail the first K calls and whenever K threads made through it are alive:
// - K = 1, 2, 4: async work on a global queue and on serial queues, a group, a
//   dispatch_after and a timer source all complete (with K = 1 the one thread to be had
//   must serve both the events and the work);
// - K = 0 (no thread at all): the process is not killed, dispatch_sync still runs on the
//   caller, and after a few seconds the library prints `GrandCentral: cannot start a worker
//   thread (pthread_create: Resource temporarily unavailable); N items waiting`.
// Against the reference libdispatch the cases are run and reported, not failed
// (libdispatch retries pthread_create by sleeping in the submitting thread).
#include "check.h"
#include "fault_child.h"

static dispatch_queue_t global(void) { return dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0); }

static void arrive(void *context) { latch_arrive((latch_t *)context); }

static atomic_long ran;
static void count_item(void *context) {
    (void)context;
    atomic_fetch_add(&ran, 1);
}

#define ITEMS 200
#define SERIAL_QUEUES 8

static int case_work(void) {
    atomic_init(&ran, 0);
    dispatch_group_t group = dispatch_group_create();
    for (int i = 0; i < ITEMS; i++) dispatch_group_async_f(group, global(), NULL, count_item);
    dispatch_queue_t serial[SERIAL_QUEUES];
    for (int q = 0; q < SERIAL_QUEUES; q++) {
        serial[q] = dispatch_queue_create("faults.serial", NULL);
        for (int i = 0; i < ITEMS / SERIAL_QUEUES; i++) dispatch_group_async_f(group, serial[q], NULL, count_item);
    }
    latch_t after;
    latch_init(&after, 1);
    dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW, 20 * NSEC_PER_MSEC), global(), &after, arrive);
    latch_t ticks;
    latch_init(&ticks, 3);
    dispatch_source_t timer = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, 0, global());
    dispatch_set_context(timer, &ticks);
    dispatch_source_set_event_handler_f(timer, arrive);
    dispatch_source_set_timer(timer, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_MSEC), 10 * NSEC_PER_MSEC, 0);
    dispatch_resume(timer);

    CHECKF(dispatch_group_wait(group, dispatch_time(DISPATCH_TIME_NOW, 20 * NSEC_PER_SEC)) == 0,
           "%ld of %d items ran", atomic_load(&ran), 2 * ITEMS);
    CHECK_EQ(atomic_load(&ran), 2 * ITEMS);
    CHECKF(latch_wait(&after, 20), "dispatch_after did not fire");
    CHECKF(latch_wait(&ticks, 20), "the timer source fired %ld of 3 times", 3 - latch_count(&ticks));
    dispatch_source_cancel(timer);
    dispatch_release(timer);
    for (int q = 0; q < SERIAL_QUEUES; q++) dispatch_release(serial[q]);
    dispatch_release(group);
    printf("all %d items, the after and 3 timer ticks ran\n", 2 * ITEMS);
    return 0;
}

static int case_no_thread(void) {
    atomic_init(&ran, 0);
    for (int i = 0; i < 10; i++) dispatch_async_f(global(), NULL, count_item);
    dispatch_queue_t serial = dispatch_queue_create("faults.sync", NULL);
    dispatch_sync_f(serial, NULL, count_item);  // runs on this thread
    CHECK(atomic_load(&ran) >= 1);
    sleep_ms(3500);
    // Another start, past the report delay (onto an empty root: a push onto a root that
    // already has work waiting asks for no new thread). With no thread at all, only such
    // a start can report.
    dispatch_async_f(dispatch_get_global_queue(QOS_CLASS_UTILITY, 0), NULL, count_item);
    sleep_ms(200);
    dispatch_release(serial);
    printf("still alive with no thread to be had; %ld items ran\n", atomic_load(&ran));
    return 0;
}

int main(int argc, char **argv) {
    check_start("faults_threads", 240);
    if (argc > 1) {
        alarm(60);
        check_section(argv[1]);
        if (strcmp(argv[1], "work") == 0) return case_work();
        if (strcmp(argv[1], "no-thread") == 0) return case_no_thread();
        FAIL("no case %s", argv[1]);
    }
    static child_result_t result;
    static const int ks[] = {1, 2, 4};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        char name[64], fail[64], cap[64];
        snprintf(name, sizeof name, "pthread_create fails the first %d calls, at most %d alive", ks[i], ks[i]);
        snprintf(fail, sizeof fail, "GC_SHIM_PTHREAD_FAIL_FIRST=%d", ks[i]);
        snprintf(cap, sizeof cap, "GC_SHIM_PTHREAD_CAP=%d", ks[i]);
        const char *const environment[] = {fail, cap, NULL};
        check_section(name);
#ifdef GC_REFERENCE_LIBDISPATCH
        run_child_case("work", "shim_pthread", environment, &result);
        printf("   libdispatch: %s %d; output: %s", WIFEXITED(result.status) ? "exit" : "signal",
               WIFEXITED(result.status) ? WEXITSTATUS(result.status) : WTERMSIG(result.status), result.output);
#else
        expect_child_passes("work", "shim_pthread", environment, &result);
#endif
    }
    check_section("no thread can be started at all (K = 0)");
    static const char *const none[] = {"GC_SHIM_PTHREAD_CAP=0", NULL};
#ifdef GC_REFERENCE_LIBDISPATCH
    run_child_case("no-thread", "shim_pthread", none, &result);
    printf("   libdispatch: %s %d; output: %s", WIFEXITED(result.status) ? "exit" : "signal",
           WIFEXITED(result.status) ? WEXITSTATUS(result.status) : WTERMSIG(result.status), result.output);
#else
    expect_child_passes("no-thread", "shim_pthread", none, &result);
    const char *line = strstr(result.output, "GrandCentral: cannot start a worker thread (pthread_create: ");
    CHECKF(line != NULL, "no line saying that no worker thread can be started");
    CHECKF(strstr(line, "Resource temporarily unavailable); ") && strstr(line, " items waiting"),
           "the line is not the promised one");
    CHECKF(strstr(line + 1, "GrandCentral: cannot start a worker thread") == NULL, "the line was printed twice");
#endif
    check_pass();
    return 0;
}
