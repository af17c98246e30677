// Work-item blocks (block-only API), the checks that blocks_workitem.c does not make.
// blocks_workitem.c (from the blocks shim's author, run as blocks_workitem.clang) covers
// direct calls, async/sync + wait, wait timing out then succeeding, repeated runs,
// cancel before and during a run, perform, notify after a run and after release, copies
// sharing state, DISPATCH_BLOCK_BARRIER through dispatch_async/group_async/after/sync,
// invalid flags and QoS, and the misuse crashes. This file adds: every creation flag
// and dispatch_block_create_with_qos_class submitted through the queue API; perform on
// the caller's thread; several notifications, each once, only after the body, on their
// own queue; notify for a block cancelled before it ran; a timed-out wait is not early;
// one run racing one wait, many times.
// Built only with clang -fblocks.
#include "check.h"
#include <Block.h>

#ifndef __BLOCKS__
#error "workitem.c needs -fblocks"
#endif

static void flags_and_qos(void) {
    check_section("work-item blocks made with every flag, or with a QoS class, run through the queue API");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.workitem", NULL);
    dispatch_queue_t concurrent = dispatch_queue_create("com.grandcentral.tests.workitem-concurrent", DISPATCH_QUEUE_CONCURRENT);
    __block atomic_long runs = 0;
    const dispatch_block_flags_t flags[] = {
        0, DISPATCH_BLOCK_BARRIER, DISPATCH_BLOCK_DETACHED, DISPATCH_BLOCK_ASSIGN_CURRENT,
        DISPATCH_BLOCK_NO_QOS_CLASS, DISPATCH_BLOCK_INHERIT_QOS_CLASS, DISPATCH_BLOCK_ENFORCE_QOS_CLASS,
        DISPATCH_BLOCK_BARRIER | DISPATCH_BLOCK_DETACHED,
    };
    const int count = (int)(sizeof flags / sizeof flags[0]);
    for (int i = 0; i < count; i++) {
        dispatch_block_t block = dispatch_block_create(flags[i], ^{ atomic_fetch_add(&runs, 1); });
        CHECKF(block != NULL, "dispatch_block_create(0x%lx) returned NULL", (unsigned long)flags[i]);
        dispatch_async(queue, block);
        dispatch_async(concurrent, block);
        Block_release(block);   // the queues hold their own copies
    }
    const dispatch_qos_class_t classes[] = {
        QOS_CLASS_USER_INTERACTIVE, QOS_CLASS_USER_INITIATED, QOS_CLASS_DEFAULT, QOS_CLASS_UTILITY, QOS_CLASS_BACKGROUND,
    };
    for (int i = 0; i < 5; i++) {
        dispatch_block_t block = dispatch_block_create_with_qos_class(0, classes[i], -i, ^{ atomic_fetch_add(&runs, 1); });
        CHECKF(block != NULL, "dispatch_block_create_with_qos_class(0x%x, %d) returned NULL", (unsigned)classes[i], -i);
        dispatch_sync(queue, block);
        dispatch_async(dispatch_get_global_queue(classes[i], 0), block);
        Block_release(block);
    }
    WAIT_FOR_COUNT(&runs, 2 * count + 10, 20);
    dispatch_barrier_sync(concurrent, ^{});
    dispatch_sync(queue, ^{});
    sleep_ms(20);
    CHECK_EQ(atomic_load(&runs), 2 * count + 10);
    dispatch_release(concurrent);
    dispatch_release(queue);

    check_section("dispatch_block_perform runs the block on the caller's thread before returning");
    __block pthread_t ran_on;
    __block int performed = 0;
    dispatch_block_perform(DISPATCH_BLOCK_ASSIGN_CURRENT, ^{
        performed++;
        ran_on = pthread_self();
    });
    CHECK_EQ(performed, 1);
    CHECK(pthread_equal(ran_on, pthread_self()));
}

static void notifications(void) {
    check_section("three notifications: none before the body, each once after it, on their queue");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.workitem-run", DISPATCH_QUEUE_CONCURRENT);
    dispatch_queue_t notify_queue = dispatch_queue_create("com.grandcentral.tests.workitem-notify", NULL);
    __block atomic_long body_done = 0, notify_runs = 0, notify_saw_body = 0, notify_on_its_queue = 0;
    dispatch_block_t block = dispatch_block_create(0, ^{
        sleep_ms(20);
        atomic_store(&body_done, 1);
    });
    for (int i = 0; i < 3; i++) {
        dispatch_block_notify(block, notify_queue, ^{
            if (atomic_load(&body_done) == 1) atomic_fetch_add(&notify_saw_body, 1);
            const char *label = dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL);
            if (label && strcmp(label, "com.grandcentral.tests.workitem-notify") == 0) {
                atomic_fetch_add(&notify_on_its_queue, 1);
            }
            atomic_fetch_add(&notify_runs, 1);
        });
    }
    sleep_ms(30);
    CHECK_EQ(atomic_load(&notify_runs), 0);
    dispatch_async(queue, block);
    WAIT_FOR_COUNT(&notify_runs, 3, 10);
    sleep_ms(30);
    CHECK_EQ(atomic_load(&notify_runs), 3);
    CHECK_EQ(atomic_load(&notify_saw_body), 3);
    CHECK_EQ(atomic_load(&notify_on_its_queue), 3);
    Block_release(block);

    check_section("a block cancelled before it ran still notifies, once dequeued");
    __block atomic_long cancelled_body = 0, cancelled_notified = 0;
    block = dispatch_block_create(0, ^{ atomic_fetch_add(&cancelled_body, 1); });
    dispatch_block_notify(block, notify_queue, ^{ atomic_fetch_add(&cancelled_notified, 1); });
    dispatch_suspend(queue);
    dispatch_async(queue, block);
    dispatch_block_cancel(block);
    dispatch_resume(queue);
    WAIT_FOR_COUNT(&cancelled_notified, 1, 10);
    dispatch_barrier_sync(queue, ^{});
    CHECK_EQ(atomic_load(&cancelled_body), 0);
    Block_release(block);

    check_section("a timed-out dispatch_block_wait returns non-zero, not before its deadline");
    dispatch_block_t never_run = dispatch_block_create(0, ^{});
    uint64_t start = now_ns();
    CHECK(dispatch_block_wait(never_run, dispatch_time(DISPATCH_TIME_NOW, 30 * (int64_t)NSEC_PER_MSEC)) != 0);
    CHECK(now_ns() - start >= 30 * NSEC_PER_MSEC);
    Block_release(never_run);
    dispatch_release(notify_queue);
    dispatch_release(queue);
}

// The one run and the one wait of an item race each other: whichever comes second must
// see the first (no false "ran more than once"/"waited on more than once" crash), the wait
// must return 0 after the body, and a release racing nothing must not finish early.
#define RACE_ROUNDS 100000
static void run_and_wait_race(void) {
    check_section("one run racing one dispatch_block_wait, 100000 rounds: each wait returns 0 after its body");
    dispatch_queue_t queue = dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0);
    __block atomic_long bodies = 0;
    long late = 0;
    for (long round = 0; round < RACE_ROUNDS; round++) {
        __block atomic_int ran = 0;
        dispatch_block_t block = dispatch_block_create(0, ^{
            atomic_store(&ran, 1);
            atomic_fetch_add(&bodies, 1);
        });
        dispatch_async(queue, block);
        if (dispatch_block_wait(block, DISPATCH_TIME_FOREVER) != 0 || atomic_load(&ran) != 1) late++;
        Block_release(block);
    }
    CHECKF(late == 0, "%ld of %d waits returned before their body ran", late, RACE_ROUNDS);
    CHECK_EQ(atomic_load(&bodies), RACE_ROUNDS);
}

int main(void) {
    check_start("workitem", 55);
    flags_and_qos();
    notifications();
    run_and_wait_race();
    check_pass();
    return 0;
}
