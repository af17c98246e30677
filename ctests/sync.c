// dispatch_sync_f and dispatch_async_and_wait_f: the work runs on the caller's thread when
// the queue is idle; a sync waits for earlier items on a serial queue but not for unrelated
// items running on a concurrent queue; nested syncs onto other queues work and see the
// right current queue; syncs from many threads onto one serial queue exclude each other.
#include "check.h"

typedef struct {
    pthread_t thread;
    char label[128];
    atomic_long ran;
} sync_probe_t;

static void probe(void *context) {
    sync_probe_t *p = context;
    p->thread = pthread_self();
    const char *label = dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL);
    snprintf(p->label, sizeof p->label, "%s", label ? label : "(null)");
    atomic_fetch_add(&p->ran, 1);
}

static void runs_on_caller_thread(void) {
    check_section("dispatch_sync_f on an idle queue runs on the caller's thread");
    dispatch_queue_t serial = dispatch_queue_create("com.grandcentral.tests.sync-serial", NULL);
    dispatch_queue_t concurrent = dispatch_queue_create("com.grandcentral.tests.sync-concurrent", DISPATCH_QUEUE_CONCURRENT);
    dispatch_queue_t global = dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0);
    dispatch_queue_t queues[] = { serial, concurrent, global };
    for (int i = 0; i < 3; i++) {
        sync_probe_t p;
        memset(&p, 0, sizeof p);
        dispatch_sync_f(queues[i], &p, probe);
        CHECK_EQ(atomic_load(&p.ran), 1);
        CHECKF(pthread_equal(p.thread, pthread_self()), "dispatch_sync_f onto %s ran on another thread",
               dispatch_queue_get_label(queues[i]));
        CHECK_STR(p.label, dispatch_queue_get_label(queues[i]));
    }

    check_section("dispatch_async_and_wait_f on an idle queue runs the work before returning");
    for (int i = 0; i < 3; i++) {
        sync_probe_t p;
        memset(&p, 0, sizeof p);
        dispatch_async_and_wait_f(queues[i], &p, probe);
        CHECK_EQ(atomic_load(&p.ran), 1);
        CHECK_STR(p.label, dispatch_queue_get_label(queues[i]));
    }
    dispatch_release(serial);
    dispatch_release(concurrent);
}

// MARK: - Ordering

static atomic_long earlier_done;

static void slow_earlier(void *context) {
    (void)context;
    sleep_ms(20);
    atomic_fetch_add(&earlier_done, 1);
}

static long seen_earlier;

static void read_earlier(void *context) {
    (void)context;
    seen_earlier = atomic_load(&earlier_done);
}

static void waits_for_earlier_items(void) {
    check_section("dispatch_sync_f on a serial queue runs after the items submitted before it");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.sync-after", NULL);
    atomic_store(&earlier_done, 0);
    for (int i = 0; i < 5; i++) dispatch_async_f(queue, NULL, slow_earlier);
    dispatch_sync_f(queue, NULL, read_earlier);
    CHECK_EQ(seen_earlier, 5);

    check_section("dispatch_async_and_wait_f on a serial queue runs after the items submitted before it");
    for (int i = 0; i < 5; i++) dispatch_async_f(queue, NULL, slow_earlier);
    dispatch_async_and_wait_f(queue, NULL, read_earlier);
    CHECK_EQ(seen_earlier, 10);
    dispatch_release(queue);
}

static void concurrent_sync_does_not_wait(void) {
    check_section("dispatch_sync_f on a concurrent queue does not wait for an unrelated running item");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.sync-concurrent-busy", DISPATCH_QUEUE_CONCURRENT);
    blocker_t b;
    latch_init(&b.started, 1);
    latch_init(&b.gate, 1);
    atomic_store(&b.finished, 0);
    dispatch_async_f(queue, &b, blocking_item);
    LATCH_WAIT(&b.started, 10, "the blocking item to start");
    sync_probe_t p;
    memset(&p, 0, sizeof p);
    dispatch_sync_f(queue, &p, probe);
    CHECK_EQ(atomic_load(&p.ran), 1);
    CHECK_EQ(atomic_load(&b.finished), 0);   // the gate is still closed

    check_section("dispatch_async_and_wait_f on a concurrent queue does not wait for it either");
    memset(&p, 0, sizeof p);
    dispatch_async_and_wait_f(queue, &p, probe);
    CHECK_EQ(atomic_load(&p.ran), 1);
    CHECK_EQ(atomic_load(&b.finished), 0);
    latch_arrive(&b.gate);
    WAIT_FOR_COUNT(&b.finished, 1, 10);
    dispatch_release(queue);
    latch_destroy(&b.started);
    latch_destroy(&b.gate);
}

// MARK: - Nesting

static dispatch_queue_t nest_queues[4];
static char nest_labels[4][128];
static long nest_depth_reached;

static void nested(void *context) {
    long depth = (long)(intptr_t)context;
    const char *label = dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL);
    snprintf(nest_labels[depth], sizeof nest_labels[depth], "%s", label ? label : "(null)");
    nest_depth_reached = depth;
    if (depth + 1 < 4) {
        if (depth % 2 == 0) {
            dispatch_sync_f(nest_queues[depth + 1], (void *)(intptr_t)(depth + 1), nested);
        } else {
            dispatch_async_and_wait_f(nest_queues[depth + 1], (void *)(intptr_t)(depth + 1), nested);
        }
    }
    // Back on this queue after the inner call returned.
    label = dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL);
    if (label == NULL || strcmp(label, nest_labels[depth]) != 0) nest_depth_reached = -100;
}

static void nested_sync(void) {
    check_section("nested syncs onto other queues run, each seeing its own queue");
    nest_queues[0] = dispatch_queue_create("com.grandcentral.tests.nest0", NULL);
    nest_queues[1] = dispatch_queue_create("com.grandcentral.tests.nest1", DISPATCH_QUEUE_CONCURRENT);
    // (Targeting nest0 itself would deadlock: the caller already holds it.)
    dispatch_queue_t nest_target = dispatch_queue_create("com.grandcentral.tests.nest-target", NULL);
    nest_queues[2] = dispatch_queue_create_with_target("com.grandcentral.tests.nest2", NULL, nest_target);
    nest_queues[3] = dispatch_queue_create("com.grandcentral.tests.nest3", NULL);
    dispatch_sync_f(nest_queues[0], (void *)0, nested);
    CHECK_EQ(nest_depth_reached, 3);
    for (int i = 0; i < 4; i++) CHECK_STR(nest_labels[i], dispatch_queue_get_label(nest_queues[i]));

    check_section("nested syncs from an item running asynchronously");
    nest_depth_reached = 0;
    memset(nest_labels, 0, sizeof nest_labels);
    dispatch_async_f(nest_queues[0], (void *)0, nested);
    dispatch_sync_f(nest_queues[0], NULL, noop_function);
    CHECK_EQ(nest_depth_reached, 3);
    for (int i = 0; i < 4; i++) CHECK_STR(nest_labels[i], dispatch_queue_get_label(nest_queues[i]));
    for (int i = 3; i >= 0; i--) dispatch_release(nest_queues[i]);
    dispatch_release(nest_target);
}

// MARK: - Mutual exclusion from many threads

enum { SYNC_THREADS = 4, SYNCS_PER_THREAD = 20000 };

static dispatch_queue_t exclusion_queue;
static long unprotected_counter;   // only ever touched inside dispatch_sync_f on exclusion_queue

static void increment(void *context) {
    (void)context;
    unprotected_counter++;
}

static void *sync_thread(void *argument) {
    (void)argument;
    for (int i = 0; i < SYNCS_PER_THREAD; i++) {
        if (i % 4 == 3) {
            dispatch_async_and_wait_f(exclusion_queue, NULL, increment);
        } else if (i % 4 == 2) {
            dispatch_async_f(exclusion_queue, NULL, increment);
        } else {
            dispatch_sync_f(exclusion_queue, NULL, increment);
        }
    }
    return NULL;
}

static void syncs_from_many_threads(void) {
    check_section("dispatch_sync_f from many threads onto one serial queue: each runs alone");
    exclusion_queue = dispatch_queue_create("com.grandcentral.tests.exclusion", NULL);
    pthread_t threads[SYNC_THREADS];
    for (int i = 0; i < SYNC_THREADS; i++) CHECK(pthread_create(&threads[i], NULL, sync_thread, NULL) == 0);
    for (int i = 0; i < SYNC_THREADS; i++) pthread_join(threads[i], NULL);
    dispatch_sync_f(exclusion_queue, NULL, noop_function);
    CHECK_EQ(unprotected_counter, (long)SYNC_THREADS * SYNCS_PER_THREAD);
    dispatch_release(exclusion_queue);
}

// MARK: - Sync behind a suspended target

typedef struct {
    dispatch_queue_t queue;
    atomic_long returned;
} held_sync_t;

static void *sync_onto_held_queue(void *argument) {
    held_sync_t *held = argument;
    dispatch_sync_f(held->queue, NULL, noop_function);
    atomic_fetch_add(&held->returned, 1);
    return NULL;
}

static void sync_waits_for_suspended_target(void) {
    check_section("dispatch_sync_f onto a queue whose target is suspended waits for the resume");
    dispatch_queue_t target = dispatch_queue_create("com.grandcentral.tests.held-target", NULL);
    held_sync_t held = { dispatch_queue_create_with_target("com.grandcentral.tests.held", NULL, target), 0 };
    dispatch_suspend(target);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, sync_onto_held_queue, &held) == 0);
    sleep_ms(100);
    CHECK_EQ(atomic_load(&held.returned), 0);
    dispatch_resume(target);
    WAIT_FOR_COUNT(&held.returned, 1, 10);
    pthread_join(thread, NULL);
    dispatch_release(held.queue);
    dispatch_release(target);
}

#ifdef __BLOCKS__
static void blocks(void) {
    check_section("blocks: dispatch_sync and dispatch_async_and_wait");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.sync-blocks", NULL);
    __block int value = 0;
    __block pthread_t ran_on;
    dispatch_sync(queue, ^{ value = 42; ran_on = pthread_self(); });
    CHECK_EQ(value, 42);
    CHECK(pthread_equal(ran_on, pthread_self()));
    dispatch_async(queue, ^{ sleep_ms(20); value = 1; });
    dispatch_sync(queue, ^{ value += 1; });
    CHECK_EQ(value, 2);
    dispatch_async(queue, ^{ sleep_ms(20); value = 10; });
    dispatch_async_and_wait(queue, ^{ value += 1; });
    CHECK_EQ(value, 11);
    dispatch_queue_t other = dispatch_queue_create("com.grandcentral.tests.sync-blocks-other", DISPATCH_QUEUE_CONCURRENT);
    __block const char *inner_label = NULL;
    dispatch_sync(queue, ^{
        dispatch_sync(other, ^{ inner_label = dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL); });
    });
    CHECK_STR(inner_label, "com.grandcentral.tests.sync-blocks-other");
    dispatch_release(other);
    dispatch_release(queue);
}
#endif

// MARK: - Regressions found by the review of the caller's-thread dispatch_sync (from sync_review.c)
//
// 1. A serial queue whose width is raised (dispatch_queue_set_width, private SPI) while
//    its drain, started in serial mode, is still running: a dispatch_sync that arrives
//    after the change asks for a unit of width and parks; the serial-mode drain reaching
//    it used to hand it the drain lock instead, the caller gave back a unit it never had
//    (inFlight wrapped to 65535) and the queue hung for good. (libdispatch refuses
//    dispatch_queue_set_width on a serial queue: GrandCentral-only.)
// 2. More worker threads than the pool's limit (64) each dispatch_sync onto one busy
//    serial queue that targets a concurrent queue. A sync caller releasing the queue
//    used to schedule a drain to pass it to the next waiter; that drain needs a worker,
//    and every worker was parked in such a sync: the program hung after the first sync.
//    libdispatch hands the queue from the releasing caller to the next waiter directly.

static atomic_int width_changed;
static atomic_long width_count;

static void width_slow(void *context) {
    (void)context;
    sleep_ms(100);
}

static void width_mark(void *context) {
    (void)context;
    atomic_store(&width_changed, 1);
}

static void width_inc(void *context) {
    (void)context;
    atomic_fetch_add(&width_count, 1);
}

static void width_raised_under_a_serial_drain(void) {
#ifndef GC_REFERENCE_LIBDISPATCH
    check_section("sync parked on a serial queue whose width was raised mid-drain");
    for (int round = 0; round < 3; round++) {
        atomic_store(&width_changed, 0);
        atomic_store(&width_count, 0);
        dispatch_queue_t queue = dispatch_queue_create("review.width", DISPATCH_QUEUE_SERIAL);
        dispatch_async_f(queue, NULL, width_slow);
        sleep_ms(20);                               // the drain runs, in serial mode
        dispatch_queue_set_width(queue, 3);         // a barrier behind width_slow
        dispatch_async_f(queue, NULL, width_mark);
        dispatch_async_f(queue, NULL, width_slow);  // keeps that drain going
        while (!atomic_load(&width_changed)) sleep_ms(1);
        dispatch_sync_f(queue, NULL, width_inc);    // asks for a unit; parks behind width_slow
        for (int i = 0; i < 10; i++) dispatch_async_f(queue, NULL, width_inc);
        dispatch_barrier_sync_f(queue, NULL, width_inc);
        CHECK_EQ(atomic_load(&width_count), 12);
        dispatch_release(queue);
    }
#endif
}

enum { CROWD = 150 };
static dispatch_queue_t crowd_serial;
static atomic_long crowd_count;

static void crowd_inc(void *context) {
    (void)context;
    atomic_fetch_add(&crowd_count, 1);
}

static void crowd_busy(void *context) {
    (void)context;
    sleep_ms(100);
}

static void crowd_sync(void *context) {
    (void)context;
    dispatch_sync_f(crowd_serial, NULL, crowd_inc);
}

static void more_sync_callers_than_threads(void) {
    check_section("more workers than the thread limit sync onto one busy serial queue");
    dispatch_queue_t concurrent = dispatch_queue_create("review.crowd.concurrent", DISPATCH_QUEUE_CONCURRENT);
    crowd_serial = dispatch_queue_create("review.crowd.serial", DISPATCH_QUEUE_SERIAL);
    dispatch_set_target_queue(crowd_serial, concurrent);
    dispatch_async_f(crowd_serial, NULL, crowd_busy);
    for (int i = 0; i < CROWD; i++) dispatch_async_f(concurrent, NULL, crowd_sync);
    WAIT_FOR_COUNT(&crowd_count, CROWD, 20.0);
    dispatch_release(crowd_serial);
    dispatch_release(concurrent);
}

int main(void) {
    check_start("sync", 55);
    runs_on_caller_thread();
    waits_for_earlier_items();
    concurrent_sync_does_not_wait();
    nested_sync();
    syncs_from_many_threads();
    sync_waits_for_suspended_target();
    width_raised_under_a_serial_drain();
    more_sync_callers_than_threads();
#ifdef __BLOCKS__
    blocks();
#endif
    check_pass();
    return 0;
}
