// Data sources (DISPATCH_SOURCE_TYPE_DATA_ADD, DATA_OR, DATA_REPLACE): merges from many
// threads coalesce into the exact total (add), the union of the bits (or) or the latest
// value (replace); merging 0 fires nothing; data merged before activation is delivered
// after it; dispatch_source_get_data outside the handler returns the last value delivered.
#include "check.h"

#define MERGE_THREADS 4
#define MERGES_PER_THREAD 25000

typedef struct {
    dispatch_source_t source;
    atomic_long calls;
    atomic_ulong total;         // DATA_ADD: sum of the data; DATA_OR: or of the data
    atomic_ulong last;          // the latest data
    atomic_long zero_data;
    atomic_long cancels;
} data_probe_t;

static void add_event(void *context) {
    data_probe_t *probe = context;
    unsigned long data = dispatch_source_get_data(probe->source);
    if (data == 0) atomic_fetch_add(&probe->zero_data, 1);
    atomic_fetch_add(&probe->total, data);
    atomic_store(&probe->last, data);
    atomic_fetch_add(&probe->calls, 1);
}

static void or_event(void *context) {
    data_probe_t *probe = context;
    unsigned long data = dispatch_source_get_data(probe->source);
    if (data == 0) atomic_fetch_add(&probe->zero_data, 1);
    atomic_fetch_or(&probe->total, data);
    atomic_store(&probe->last, data);
    atomic_fetch_add(&probe->calls, 1);
}

static void probe_cancelled(void *context) {
    data_probe_t *probe = context;
    atomic_fetch_add(&probe->cancels, 1);
}

static dispatch_source_t probe_source(data_probe_t *probe, dispatch_source_type_t type, dispatch_function_t event,
                                      dispatch_queue_t queue) {
    memset(probe, 0, sizeof *probe);
    dispatch_source_t source = dispatch_source_create(type, 0, 0, queue);
    CHECK(source != NULL);
    probe->source = source;
    dispatch_set_context(source, probe);
    dispatch_source_set_event_handler_f(source, event);
    dispatch_source_set_cancel_handler_f(source, probe_cancelled);
    return source;
}

static void probe_finish(data_probe_t *probe) {
    dispatch_source_cancel(probe->source);
    WAIT_FOR_COUNT(&probe->cancels, 1, 10);
    dispatch_release(probe->source);
}

// MARK: - Merging from threads

typedef struct {
    dispatch_source_t source;
    int index;
    bool or_bits;
    latch_t *start;
} merger_t;

static void *merger_main(void *context) {
    merger_t *merger = context;
    latch_arrive(merger->start);
    latch_wait(merger->start, 10);
    for (int i = 0; i < MERGES_PER_THREAD; i++) {
        uintptr_t value = merger->or_bits ? (uintptr_t)1 << (merger->index * 8 + i % 8) : (uintptr_t)(i % 7 + 1);
        dispatch_source_merge_data(merger->source, value);
        if (i % 1000 == 0) sched_yield();
    }
    return NULL;
}

static void run_mergers(dispatch_source_t source, bool or_bits) {
    pthread_t threads[MERGE_THREADS];
    merger_t mergers[MERGE_THREADS];
    latch_t start;
    latch_init(&start, MERGE_THREADS);
    for (int t = 0; t < MERGE_THREADS; t++) {
        mergers[t] = (merger_t){ source, t, or_bits, &start };
        CHECK_EQ(pthread_create(&threads[t], NULL, merger_main, &mergers[t]), 0);
    }
    for (int t = 0; t < MERGE_THREADS; t++) pthread_join(threads[t], NULL);
    latch_destroy(&start);
}

static bool wait_for_total(atomic_ulong *total, unsigned long wanted, double seconds) {
    uint64_t deadline = now_ns() + (uint64_t)(seconds * 1e9);
    while (atomic_load(total) != wanted) {
        if (now_ns() > deadline) return false;
        sleep_ms(1);
    }
    return true;
}

static void add_exact_total(void) {
    check_section("DATA_ADD: 100,000 merges from 4 threads add up to the exact total; calls <= merges");
    unsigned long expected = 0;
    for (int i = 0; i < MERGES_PER_THREAD; i++) expected += (unsigned long)(i % 7 + 1);
    expected *= MERGE_THREADS;
    // A serial target, and a concurrent one (the handler must still be serialized).
    dispatch_queue_t queues[2] = {
        dispatch_queue_create("com.grandcentral.tests.source-data.add", NULL),
        dispatch_queue_create("com.grandcentral.tests.source-data.add-concurrent", DISPATCH_QUEUE_CONCURRENT),
    };
    for (int q = 0; q < 2; q++) {
        static data_probe_t probe;
        dispatch_source_t source = probe_source(&probe, DISPATCH_SOURCE_TYPE_DATA_ADD, add_event, queues[q]);
        dispatch_activate(source);
        run_mergers(source, false);
        CHECKF(wait_for_total(&probe.total, expected, 20), "the handlers saw a total of %lu, expected %lu",
               atomic_load(&probe.total), expected);
        sleep_ms(20);
        CHECK_EQ(atomic_load(&probe.total), expected);
        long calls = atomic_load(&probe.calls);
        printf("   %s target: %d merges, %ld handler calls, total %lu\n", q ? "concurrent" : "serial",
               MERGE_THREADS * MERGES_PER_THREAD, calls, expected);
        CHECK(calls >= 1 && calls <= MERGE_THREADS * MERGES_PER_THREAD);
        CHECK_EQ(atomic_load(&probe.zero_data), 0);
        probe_finish(&probe);
        dispatch_release(queues[q]);
    }
}

static void or_bits(void) {
    check_section("DATA_OR: bits merged from 4 threads are or-ed; every call sees some bits");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-data.or", NULL);
    static data_probe_t probe;
    dispatch_source_t source = probe_source(&probe, DISPATCH_SOURCE_TYPE_DATA_OR, or_event, queue);
    dispatch_activate(source);
    run_mergers(source, true);
    CHECK(wait_for_total(&probe.total, 0xFFFFFFFFul, 20));
    CHECK_EQ(atomic_load(&probe.zero_data), 0);
    probe_finish(&probe);
    // Coalesced while suspended: one call with the union (a fresh source: the one above
    // may still hold merges of bits it has already delivered).
    source = probe_source(&probe, DISPATCH_SOURCE_TYPE_DATA_OR, or_event, queue);
    dispatch_activate(source);
    dispatch_suspend(source);
    long calls = atomic_load(&probe.calls);
    dispatch_source_merge_data(source, 0x10);
    dispatch_source_merge_data(source, 0x01);
    dispatch_source_merge_data(source, 0x10);
    dispatch_source_merge_data(source, 0x100);
    sleep_ms(30);
    CHECK_EQ(atomic_load(&probe.calls), calls);
    dispatch_resume(source);
    WAIT_FOR_COUNT(&probe.calls, calls + 1, 10);
    sleep_ms(30);
    CHECK_EQ(atomic_load(&probe.calls), calls + 1);
    CHECK_EQ(atomic_load(&probe.last), 0x111);
    probe_finish(&probe);
    dispatch_release(queue);
}

static void replace_latest(void) {
    check_section("DATA_REPLACE: the latest value is delivered; merging 0 does not fire");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-data.replace", NULL);
    static data_probe_t probe;
    dispatch_source_t source = probe_source(&probe, DISPATCH_SOURCE_TYPE_DATA_REPLACE, add_event, queue);
    dispatch_activate(source);
    dispatch_suspend(source);
    dispatch_source_merge_data(source, 5);
    dispatch_source_merge_data(source, 7);
    dispatch_source_merge_data(source, 9);
    dispatch_resume(source);
    WAIT_FOR_COUNT(&probe.calls, 1, 10);
    sleep_ms(30);
    CHECK_EQ(atomic_load(&probe.calls), 1);
    CHECK_EQ(atomic_load(&probe.last), 9);
    dispatch_source_merge_data(source, 0);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&probe.calls), 1);
    dispatch_source_merge_data(source, 3);
    WAIT_FOR_COUNT(&probe.calls, 2, 10);
    CHECK_EQ(atomic_load(&probe.last), 3);
    // Merging 0 into DATA_ADD and DATA_OR fires nothing either.
    static data_probe_t add, or_probe;
    dispatch_source_t a = probe_source(&add, DISPATCH_SOURCE_TYPE_DATA_ADD, add_event, queue);
    dispatch_source_t o = probe_source(&or_probe, DISPATCH_SOURCE_TYPE_DATA_OR, or_event, queue);
    dispatch_activate(a);
    dispatch_activate(o);
    dispatch_source_merge_data(a, 0);
    dispatch_source_merge_data(o, 0);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&add.calls), 0);
    CHECK_EQ(atomic_load(&or_probe.calls), 0);
    CHECK_EQ(atomic_load(&probe.zero_data), 0);
    probe_finish(&probe);
    probe_finish(&add);
    probe_finish(&or_probe);
    dispatch_release(queue);
}

static void merged_before_activation(void) {
    check_section("data merged before activation is delivered after it, in one call");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-data.inactive", NULL);
    static data_probe_t probe;
    dispatch_source_t source = probe_source(&probe, DISPATCH_SOURCE_TYPE_DATA_ADD, add_event, queue);
    dispatch_source_merge_data(source, 3);
    dispatch_source_merge_data(source, 4);
    sleep_ms(30);
    CHECK_EQ(atomic_load(&probe.calls), 0);
    dispatch_activate(source);
    WAIT_FOR_COUNT(&probe.calls, 1, 10);
    sleep_ms(30);
    CHECK_EQ(atomic_load(&probe.calls), 1);
    CHECK_EQ(atomic_load(&probe.last), 7);
    probe_finish(&probe);
    dispatch_release(queue);
}

static void get_data_outside_handler(void) {
    check_section("get_data outside the handler: 0 before any delivery, then the last delivered value");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-data.get", NULL);
    static data_probe_t probe;
    dispatch_source_t source = probe_source(&probe, DISPATCH_SOURCE_TYPE_DATA_ADD, add_event, queue);
    CHECK_EQ(dispatch_source_get_data(source), 0);
    dispatch_activate(source);
    dispatch_source_merge_data(source, 42);
    WAIT_FOR_COUNT(&probe.calls, 1, 10);
    dispatch_sync_f(queue, NULL, noop_function);  // the handler has returned
    CHECK_EQ(dispatch_source_get_data(source), 42);
    dispatch_source_merge_data(source, 8);
    WAIT_FOR_COUNT(&probe.calls, 2, 10);
    dispatch_sync_f(queue, NULL, noop_function);
    CHECK_EQ(dispatch_source_get_data(source), 8);
    // Handle and mask are what the source was created with.
    CHECK_EQ(dispatch_source_get_handle(source), 0);
    CHECK_EQ(dispatch_source_get_mask(source), 0);
    probe_finish(&probe);
    dispatch_release(queue);
}

#ifdef __BLOCKS__
static void block_handler(void) {
    check_section("block handler: DATA_ADD with a block sees the merged values");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.source-data.block", NULL);
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, queue);
    __block unsigned long total = 0;
    __block atomic_long done = 0;
    dispatch_source_set_event_handler(source, ^{ total += dispatch_source_get_data(source); });
    dispatch_source_set_cancel_handler(source, ^{ atomic_store(&done, 1); });
    dispatch_activate(source);
    for (int i = 1; i <= 1000; i++) dispatch_source_merge_data(source, (uintptr_t)i);
    uint64_t deadline = now_ns() + 10 * NSEC_PER_SEC;
    for (;;) {
        __block unsigned long seen = 0;
        dispatch_sync(queue, ^{ seen = total; });
        if (seen == 500500 || now_ns() > deadline) break;
        sleep_ms(1);
    }
    dispatch_source_cancel(source);
    WAIT_FOR_COUNT(&done, 1, 10);
    CHECK_EQ(total, 500500);
    dispatch_release(source);
    dispatch_release(queue);
}
#endif

int main(void) {
    check_start("source_data", 50);
    add_exact_total();
    or_bits();
    replace_latest();
    merged_before_activation();
    get_data_outside_handler();
#ifdef __BLOCKS__
    block_handler();
#endif
    check_pass();
    return 0;
}
