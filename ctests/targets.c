// Target queues and suspension: a concurrent queue targeting a serial queue runs its
// items one at a time; queues sharing a serial target exclude each other; suspension holds
// back items not yet started (never the one running) and nests; suspending a target holds
// back the queues that target it; an inactive queue runs nothing until dispatch_activate,
// and its target may still be changed while inactive.
#include "check.h"

static void count_item(void *context) {
    atomic_fetch_add((atomic_long *)context, 1);
}

static concurrency_t exclusive;
static atomic_long exclusive_done;

static void exclusive_item(void *context) {
    (void)context;
    concurrency_enter(&exclusive);
    busy_wait_ns(20000);
    concurrency_exit(&exclusive);
    atomic_fetch_add(&exclusive_done, 1);
}

static void concurrent_targeting_serial(void) {
    check_section("a concurrent queue targeting a serial queue runs one item at a time");
    memset(&exclusive, 0, sizeof exclusive);
    atomic_store(&exclusive_done, 0);
    dispatch_queue_t serial = dispatch_queue_create("com.grandcentral.tests.serial-target", NULL);
    dispatch_queue_t concurrent = dispatch_queue_create("com.grandcentral.tests.concurrent-on-serial", DISPATCH_QUEUE_CONCURRENT);
    dispatch_set_target_queue(concurrent, serial);
    for (int i = 0; i < 500; i++) dispatch_async_f(concurrent, NULL, exclusive_item);
    WAIT_FOR_COUNT(&exclusive_done, 500, 30);
    CHECK_EQ(atomic_load(&exclusive.most), 1);

    check_section("dispatch_queue_create_with_target: same, and queues sharing a serial target exclude each other");
    memset(&exclusive, 0, sizeof exclusive);
    atomic_store(&exclusive_done, 0);
    dispatch_queue_t a = dispatch_queue_create_with_target("com.grandcentral.tests.a", DISPATCH_QUEUE_CONCURRENT, serial);
    dispatch_queue_t b = dispatch_queue_create_with_target("com.grandcentral.tests.b", NULL, serial);
    dispatch_queue_t c = dispatch_queue_create_with_target("com.grandcentral.tests.c", NULL, b);
    for (int i = 0; i < 300; i++) {
        dispatch_async_f(a, NULL, exclusive_item);
        dispatch_async_f(b, NULL, exclusive_item);
        dispatch_async_f(c, NULL, exclusive_item);
        dispatch_async_f(serial, NULL, exclusive_item);
    }
    WAIT_FOR_COUNT(&exclusive_done, 1200, 30);
    CHECK_EQ(atomic_load(&exclusive.most), 1);

    check_section("a concurrent queue targeting a concurrent queue still runs items at the same time");
    dispatch_queue_t outer = dispatch_queue_create("com.grandcentral.tests.outer", DISPATCH_QUEUE_CONCURRENT);
    dispatch_queue_t inner = dispatch_queue_create_with_target("com.grandcentral.tests.inner", DISPATCH_QUEUE_CONCURRENT, outer);
    memset(&exclusive, 0, sizeof exclusive);
    atomic_store(&exclusive_done, 0);
    for (int i = 0; i < 2000; i++) dispatch_async_f(inner, NULL, exclusive_item);
    WAIT_FOR_COUNT(&exclusive_done, 2000, 30);
    printf("   most items at once through a concurrent target: %ld\n", atomic_load(&exclusive.most));
    dispatch_release(inner);
    dispatch_release(outer);
    dispatch_release(a);
    dispatch_release(b);
    dispatch_release(c);
    dispatch_release(concurrent);
    dispatch_release(serial);
}

// MARK: - Suspension

static long resumed_order[1000];
static long resumed_next;   // written only by items of the serial queue under test

static void record_resumed(void *context) {
    resumed_order[resumed_next++] = (long)(intptr_t)context;
}

static void suspension(void) {
    check_section("dispatch_suspend does not stop the running item, and holds back the next");
    blocker_t blocker;
    latch_init(&blocker.started, 1);
    latch_init(&blocker.gate, 1);
    atomic_store(&blocker.finished, 0);
    atomic_long later = 0;
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.suspend", NULL);
    dispatch_async_f(queue, &blocker, blocking_item);
    LATCH_WAIT(&blocker.started, 10, "the first item to start");
    dispatch_suspend(queue);
    dispatch_async_f(queue, &later, count_item);
    latch_arrive(&blocker.gate);
    WAIT_FOR_COUNT(&blocker.finished, 1, 10);
    sleep_ms(100);
    CHECK_EQ(atomic_load(&later), 0);

    check_section("suspensions nest: two suspends need two resumes");
    dispatch_suspend(queue);
    dispatch_resume(queue);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&later), 0);
    dispatch_resume(queue);
    WAIT_FOR_COUNT(&later, 1, 10);

    check_section("a suspended queue keeps FIFO order once resumed");
    dispatch_suspend(queue);
    resumed_next = 0;
    atomic_long done = 0;
    for (long i = 0; i < 1000; i++) dispatch_async_f(queue, (void *)(intptr_t)i, record_resumed);
    dispatch_async_f(queue, &done, count_item);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&done), 0);
    CHECK_EQ(resumed_next, 0);
    dispatch_resume(queue);
    WAIT_FOR_COUNT(&done, 1, 10);
    CHECK_EQ(resumed_next, 1000);
    for (long i = 0; i < 1000; i++) CHECK_EQ(resumed_order[i], i);
    dispatch_release(queue);
    latch_destroy(&blocker.started);
    latch_destroy(&blocker.gate);

    check_section("suspending a concurrent queue holds back its pending items");
    dispatch_queue_t concurrent = dispatch_queue_create("com.grandcentral.tests.suspend-concurrent", DISPATCH_QUEUE_CONCURRENT);
    atomic_long ran = 0;
    dispatch_suspend(concurrent);
    for (int i = 0; i < 100; i++) dispatch_async_f(concurrent, &ran, count_item);
    sleep_ms(100);
    CHECK_EQ(atomic_load(&ran), 0);
    dispatch_resume(concurrent);
    WAIT_FOR_COUNT(&ran, 100, 10);
    dispatch_release(concurrent);

    check_section("suspending a target queue holds back queues that target it");
    dispatch_queue_t target = dispatch_queue_create("com.grandcentral.tests.suspended-target", NULL);
    dispatch_queue_t child = dispatch_queue_create_with_target("com.grandcentral.tests.child", NULL, target);
    dispatch_queue_t grandchild = dispatch_queue_create_with_target("com.grandcentral.tests.grandchild", DISPATCH_QUEUE_CONCURRENT, child);
    atomic_long via_target = 0;
    dispatch_suspend(target);
    dispatch_async_f(child, &via_target, count_item);
    dispatch_async_f(grandchild, &via_target, count_item);
    sleep_ms(100);
    CHECK_EQ(atomic_load(&via_target), 0);
    dispatch_resume(target);
    WAIT_FOR_COUNT(&via_target, 2, 10);
    dispatch_release(grandchild);
    dispatch_release(child);
    dispatch_release(target);
}

// MARK: - Inactive queues

static long inactive_order[100];
static long inactive_next;

static void record_order(void *context) {
    inactive_order[inactive_next++] = (long)(intptr_t)context;
}

static void inactive_queues(void) {
    check_section("an inactive queue runs nothing until dispatch_activate, then runs in FIFO order");
    dispatch_queue_attr_t attr = dispatch_queue_attr_make_initially_inactive(DISPATCH_QUEUE_SERIAL);
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.inactive", attr);
    inactive_next = 0;
    for (long i = 0; i < 100; i++) dispatch_async_f(queue, (void *)(intptr_t)i, record_order);
    atomic_long last = 0;
    dispatch_async_f(queue, &last, count_item);
    sleep_ms(100);
    CHECK_EQ(atomic_load(&last), 0);
    CHECK_EQ(inactive_next, 0);
    dispatch_activate(queue);
    WAIT_FOR_COUNT(&last, 1, 10);
    CHECK_EQ(inactive_next, 100);
    for (long i = 0; i < 100; i++) CHECK_EQ(inactive_order[i], i);
    dispatch_activate(queue);   // activating an active queue does nothing
    dispatch_sync_f(queue, &last, count_item);
    CHECK_EQ(atomic_load(&last), 2);
    dispatch_release(queue);

    check_section("DISPATCH_QUEUE_CONCURRENT_INACTIVE and DISPATCH_QUEUE_SERIAL_INACTIVE");
    dispatch_queue_t concurrent = dispatch_queue_create("com.grandcentral.tests.concurrent-inactive", DISPATCH_QUEUE_CONCURRENT_INACTIVE);
    dispatch_queue_t serial = dispatch_queue_create("com.grandcentral.tests.serial-inactive", DISPATCH_QUEUE_SERIAL_INACTIVE);
    atomic_long ran = 0;
    for (int i = 0; i < 50; i++) {
        dispatch_async_f(concurrent, &ran, count_item);
        dispatch_async_f(serial, &ran, count_item);
    }
    sleep_ms(100);
    CHECK_EQ(atomic_load(&ran), 0);
    dispatch_activate(concurrent);
    WAIT_FOR_COUNT(&ran, 50, 10);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&ran), 50);
    dispatch_activate(serial);
    WAIT_FOR_COUNT(&ran, 100, 10);
    dispatch_release(concurrent);
    dispatch_release(serial);

    check_section("dispatch_set_target_queue on an inactive queue takes effect at activation");
    dispatch_queue_t target = dispatch_queue_create("com.grandcentral.tests.new-target", NULL);
    dispatch_queue_t inactive = dispatch_queue_create("com.grandcentral.tests.retargeted", DISPATCH_QUEUE_SERIAL_INACTIVE);
    dispatch_set_target_queue(inactive, target);
    atomic_long retargeted = 0;
    dispatch_async_f(inactive, &retargeted, count_item);
    dispatch_suspend(target);
    dispatch_activate(inactive);
    sleep_ms(100);
    CHECK_EQ(atomic_load(&retargeted), 0);   // held back by its new, suspended target
    dispatch_resume(target);
    WAIT_FOR_COUNT(&retargeted, 1, 10);

    check_section("an inactive concurrent queue retargeted at a serial queue runs serially");
    memset(&exclusive, 0, sizeof exclusive);
    atomic_store(&exclusive_done, 0);
    dispatch_queue_t wide = dispatch_queue_create("com.grandcentral.tests.wide", DISPATCH_QUEUE_CONCURRENT_INACTIVE);
    dispatch_set_target_queue(wide, target);
    for (int i = 0; i < 200; i++) dispatch_async_f(wide, NULL, exclusive_item);
    dispatch_activate(wide);
    WAIT_FOR_COUNT(&exclusive_done, 200, 30);
    CHECK_EQ(atomic_load(&exclusive.most), 1);
    dispatch_release(wide);
    dispatch_release(inactive);
    dispatch_release(target);
}

#ifdef __BLOCKS__
static void blocks(void) {
    check_section("blocks: suspend/resume and activate with dispatch_async");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.blocks-inactive", DISPATCH_QUEUE_SERIAL_INACTIVE);
    __block atomic_long ran = 0;
    dispatch_async(queue, ^{ atomic_fetch_add(&ran, 1); });
    sleep_ms(50);
    CHECK_EQ(atomic_load(&ran), 0);
    dispatch_activate(queue);
    WAIT_FOR_COUNT(&ran, 1, 10);
    dispatch_suspend(queue);
    dispatch_async(queue, ^{ atomic_fetch_add(&ran, 1); });
    sleep_ms(50);
    CHECK_EQ(atomic_load(&ran), 1);
    dispatch_resume(queue);
    dispatch_sync(queue, ^{});
    CHECK_EQ(atomic_load(&ran), 2);
    dispatch_release(queue);
}
#endif

// A drain that is running when the queue is suspended stops before the next item, even one
// pushed after dispatch_suspend returned while the drain was between its suspension check
// and its pop. The window is a few nanoseconds; 200,000 rounds (a few seconds), each with
// one short item of varying length in front, saw it 28 to 270 times per run against the
// library before the fix (14d12b4), with 2 CPUs.
enum { SUSPEND_RACE_ROUNDS = 200000 };
static atomic_int race_resumed;
static atomic_long race_early;

static void spin_for(void *context) {
    long n = (long)(intptr_t)context;
    for (volatile long k = 0; k < n; k++) {}
}

static void after_resume(void *context) {
    if (!atomic_load(&race_resumed)) atomic_fetch_add(&race_early, 1);
    dispatch_semaphore_signal((dispatch_semaphore_t)context);
}

static void suspend_while_draining(void) {
    check_section("an item pushed after dispatch_suspend waits for the resume, though a drain is running");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.suspend-race", NULL);
    dispatch_semaphore_t ran = dispatch_semaphore_create(0);
    for (long round = 0; round < SUSPEND_RACE_ROUNDS; round++) {
        dispatch_async_f(queue, (void *)(intptr_t)(round % 97 * 3), spin_for);
        atomic_store(&race_resumed, 0);
        dispatch_suspend(queue);
        dispatch_async_f(queue, ran, after_resume);
        for (volatile int k = 0; k < 2000; k++) {}
        atomic_store(&race_resumed, 1);
        dispatch_resume(queue);
        dispatch_semaphore_wait(ran, DISPATCH_TIME_FOREVER);
    }
    CHECKF(atomic_load(&race_early) == 0, "%ld of %d items ran on a suspended queue", atomic_load(&race_early),
           SUSPEND_RACE_ROUNDS);
    dispatch_release(ran);
    dispatch_release(queue);
}

int main(void) {
    check_start("targets", 55);
    concurrent_targeting_serial();
    suspension();
    suspend_while_draining();
    inactive_queues();
#ifdef __BLOCKS__
    blocks();
#endif
    check_pass();
    return 0;
}
