// Engine promises from issue 16 (found by review), each against sleeping work around it:
// - a data source on a global queue keeps being drained while the other items on that
//   queue sleep in short naps (the pool gives its drain a thread: workers that are mostly
//   asleep are replaced, as blocked ones are);
// - a dispatch_apply on the utility global queue whose iterations wait for each other
//   completes while the default global queue is kept full of sleeping items (a root whose
//   work is left waiting behind higher-QoS roots gets a thread);
//
// Each section runs in a fresh process (this program re-executes itself with the
// section's name), so that threads one section created do not help the next.
#include "check.h"

// MARK: - A data source beside sleeping producers

// Four producers on the default global queue (more than the CPUs of the machines this runs
// on) each loop: a 200 µs nap, then a merge into a DATA_ADD source that targets the same
// queue. The source's handler must keep running while they do. libdispatch runs it
// thousands of times a second once its monitor has added threads for the sleepers (it adds
// one a second); GrandCentral used to leave the source's drain queued behind the producers
// for as long as they ran (0 runs in 10 s).
static atomic_long source_runs, producers_stop, producers_done;
static dispatch_source_t data_source;

static void data_handler(void *context) {
    (void)context;
    atomic_fetch_add(&source_runs, 1);
}

static void napping_producer(void *context) {
    (void)context;
    while (!atomic_load(&producers_stop)) {
        usleep(200);
        dispatch_source_merge_data(data_source, 1);
    }
    atomic_fetch_add(&producers_done, 1);
}

static void section_data_source_beside_sleepers(void) {
    check_section("a DATA_ADD source on the default global queue runs beside 4 napping producers");
    enum { PRODUCERS = 4, WANTED = 500 };
    dispatch_queue_t q = dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0);
    data_source = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, q);
    CHECK(data_source != NULL);
    dispatch_source_set_event_handler_f(data_source, data_handler);
    dispatch_resume(data_source);
    uint64_t start = now_ns();
    for (int i = 0; i < PRODUCERS; i++) dispatch_async_f(q, NULL, napping_producer);
    // Generous: libdispatch gets there in 2-4 s on 2 loaded CPUs.
    bool reached = wait_for_count(&source_runs, WANTED, 15.0);
    long runs = atomic_load(&source_runs);
    atomic_store(&producers_stop, 1);
    printf("   the handler ran %ld times in %.2f s\n", runs, (double)(now_ns() - start) / 1e9);
    CHECKF(reached, "the handler ran only %ld times in 15 s while the producers napped", runs);
    WAIT_FOR_COUNT(&producers_done, PRODUCERS, 10.0);
    dispatch_source_cancel(data_source);
    dispatch_release(data_source);
}

// MARK: - An apply on the utility queue beside a default queue full of sleepers

// The default global queue is kept full: 8 items in flight, each naps 2 ms and submits the
// next. Then dispatch_apply on the utility global queue runs 2 iterations that wait for
// each other (up to 10 s): the apply's helper must get a thread although every worker could
// be kept busy by the default queue's sleepers. libdispatch completes at once.
static atomic_long feeder_stop, feeder_items, iterations_arrived, iterations_met;
static dispatch_queue_t default_queue;

static void sleeping_feeder(void *context) {
    (void)context;
    usleep(2000);
    atomic_fetch_add(&feeder_items, 1);
    if (!atomic_load(&feeder_stop)) dispatch_async_f(default_queue, NULL, sleeping_feeder);
}

static void meeting_iteration(void *context, size_t index) {
    long parties = (long)(intptr_t)context;
    (void)index;
    atomic_fetch_add(&iterations_arrived, 1);
    uint64_t deadline = now_ns() + 10ull * 1000000000ull;
    while (atomic_load(&iterations_arrived) < parties && now_ns() < deadline) usleep(100);
    if (atomic_load(&iterations_arrived) >= parties) atomic_fetch_add(&iterations_met, 1);
}

static void section_apply_beside_sleepers(void) {
    check_section("dispatch_apply on the utility queue: iterations that meet, beside a full default queue");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 2) {
        printf("   skipped: one CPU (an apply has no helper there, in libdispatch either)\n");
        return;
    }
    enum { IN_FLIGHT = 8, PARTIES = 2 };
    default_queue = dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0);
    for (int i = 0; i < IN_FLIGHT; i++) dispatch_async_f(default_queue, NULL, sleeping_feeder);
    sleep_ms(50);
    uint64_t start = now_ns();
    dispatch_apply_f(PARTIES, dispatch_get_global_queue(QOS_CLASS_UTILITY, 0), (void *)(intptr_t)PARTIES,
                     meeting_iteration);
    double seconds = (double)(now_ns() - start) / 1e9;
    printf("   %ld of %d iterations met, in %.3f s (%ld sleepers ran meanwhile)\n", atomic_load(&iterations_met),
           PARTIES, seconds, atomic_load(&feeder_items));
    atomic_store(&feeder_stop, 1);
    CHECKF(atomic_load(&iterations_met) == PARTIES, "only %ld of %d iterations met: the apply's helper got no thread",
           atomic_load(&iterations_met), PARTIES);
}

// MARK: - Driver

static const struct {
    const char *name;
    void (*run)(void);
} sections[] = {
    {"data-source-beside-sleepers", section_data_source_beside_sleepers},
    {"apply-beside-sleepers", section_apply_beside_sleepers},
};
enum { SECTION_COUNT = sizeof sections / sizeof sections[0] };

int main(int argc, char **argv) {
    if (argc == 2) {
        for (int i = 0; i < SECTION_COUNT; i++) {
            if (strcmp(argv[1], sections[i].name) != 0) continue;
            check_start("engine_promises", 100);
            sections[i].run();
            fflush(stdout);
            _exit(0);   // workers may still be running sleepers
        }
        fprintf(stderr, "engine_promises: no section %s\n", argv[1]);
        return 64;
    }
    check_start("engine_promises", 110 * SECTION_COUNT);
    for (int i = 0; i < SECTION_COUNT; i++) {
        check_section(sections[i].name);
        pid_t child = fork();
        CHECK(child >= 0);
        if (child == 0) {
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
