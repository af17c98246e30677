// Work-item blocks (block-only API): dispatch_block_create/_with_qos_class, perform,
// wait, notify, cancel, testcancel, and DISPATCH_BLOCK_BARRIER honoured by dispatch_async
// and dispatch_sync on a concurrent queue. Built only with clang -fblocks.
#include "check.h"
#include <Block.h>

#ifndef __BLOCKS__
#error "workitem.c needs -fblocks"
#endif

static void create_and_run(void) {
    check_section("a work-item block runs when called, submitted or performed");
    __block int runs = 0;
    dispatch_block_t block = dispatch_block_create(0, ^{ runs++; });
    CHECK(block != NULL);
    block();
    CHECK_EQ(runs, 1);
    Block_release(block);

    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.workitem", NULL);
    block = dispatch_block_create(0, ^{ runs++; });
    dispatch_async(queue, block);
    dispatch_sync(queue, ^{});
    CHECK_EQ(runs, 2);
    Block_release(block);

    block = dispatch_block_create_with_qos_class(0, QOS_CLASS_UTILITY, -2, ^{ runs++; });
    CHECK(block != NULL);
    dispatch_sync(queue, block);
    CHECK_EQ(runs, 3);
    Block_release(block);

    const dispatch_block_flags_t flags[] = {
        DISPATCH_BLOCK_DETACHED, DISPATCH_BLOCK_ASSIGN_CURRENT, DISPATCH_BLOCK_NO_QOS_CLASS,
        DISPATCH_BLOCK_INHERIT_QOS_CLASS, DISPATCH_BLOCK_ENFORCE_QOS_CLASS,
    };
    for (int i = 0; i < 5; i++) {
        block = dispatch_block_create(flags[i], ^{ runs++; });
        CHECK(block != NULL);
        dispatch_async(queue, block);
        Block_release(block);   // the queue keeps its own copy
    }
    dispatch_sync(queue, ^{});
    CHECK_EQ(runs, 8);

    check_section("dispatch_block_perform runs the block before returning");
    __block pthread_t ran_on;
    dispatch_block_perform(0, ^{ runs++; ran_on = pthread_self(); });
    CHECK_EQ(runs, 9);
    CHECK(pthread_equal(ran_on, pthread_self()));
    dispatch_block_perform(DISPATCH_BLOCK_BARRIER, ^{ runs++; });
    CHECK_EQ(runs, 10);

    check_section("a work-item block copied with Block_copy shares its completion");
    block = dispatch_block_create(0, ^{ runs++; });
    dispatch_block_t copy = Block_copy(block);
    Block_release(block);
    dispatch_async(queue, copy);
    CHECK_EQ(dispatch_block_wait(copy, dispatch_time(DISPATCH_TIME_NOW, 10 * (int64_t)NSEC_PER_SEC)), 0);
    CHECK_EQ(runs, 11);
    Block_release(copy);

    check_section("a work-item block released without ever running is fine");
    block = dispatch_block_create(0, ^{ runs += 1000; });
    Block_release(block);
    sleep_ms(10);
    CHECK_EQ(runs, 11);
    dispatch_release(queue);
}

static void wait_and_notify(void) {
    check_section("dispatch_block_wait: non-zero on timeout, 0 once the block finished");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.workitem-wait", DISPATCH_QUEUE_CONCURRENT);
    __block atomic_long finished = 0;
    dispatch_block_t slow = dispatch_block_create(0, ^{
        sleep_ms(100);
        atomic_store(&finished, 1);
    });
    CHECK(dispatch_block_wait(slow, DISPATCH_TIME_NOW) != 0);
    dispatch_async(queue, slow);
    uint64_t start = now_ns();
    CHECK(dispatch_block_wait(slow, dispatch_time(DISPATCH_TIME_NOW, 10 * (int64_t)NSEC_PER_MSEC)) != 0);
    CHECK(now_ns() - start >= 10 * NSEC_PER_MSEC);
    CHECK_EQ(dispatch_block_wait(slow, dispatch_time(DISPATCH_TIME_NOW, 10 * (int64_t)NSEC_PER_SEC)), 0);
    CHECK_EQ(atomic_load(&finished), 1);
    Block_release(slow);

    check_section("dispatch_block_notify runs on its queue after the block, also when registered late");
    dispatch_queue_t notify_queue = dispatch_queue_create("com.grandcentral.tests.workitem-notify", NULL);
    __block atomic_long body_done = 0, notify_runs = 0, notify_saw_body = 0;
    __block const char *notify_label = NULL;
    dispatch_block_t block = dispatch_block_create(0, ^{
        sleep_ms(20);
        atomic_store(&body_done, 1);
    });
    for (int i = 0; i < 3; i++) {
        dispatch_block_notify(block, notify_queue, ^{
            if (atomic_load(&body_done) == 1) atomic_fetch_add(&notify_saw_body, 1);
            notify_label = dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL);
            atomic_fetch_add(&notify_runs, 1);
        });
    }
    sleep_ms(20);
    CHECK_EQ(atomic_load(&notify_runs), 0);
    dispatch_async(queue, block);
    WAIT_FOR_COUNT(&notify_runs, 3, 10);
    CHECK_EQ(atomic_load(&notify_saw_body), 3);
    CHECK_STR(notify_label, "com.grandcentral.tests.workitem-notify");
    dispatch_block_notify(block, notify_queue, ^{ atomic_fetch_add(&notify_runs, 1); });
    WAIT_FOR_COUNT(&notify_runs, 4, 10);
    Block_release(block);
    dispatch_release(notify_queue);
    dispatch_release(queue);
}

static void cancellation(void) {
    check_section("cancel before running: the body never runs, waiters and notify still complete");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.workitem-cancel", NULL);
    __block atomic_long body_runs = 0, notify_runs = 0;
    dispatch_block_t block = dispatch_block_create(0, ^{ atomic_fetch_add(&body_runs, 1); });
    CHECK_EQ(dispatch_block_testcancel(block), 0);
    dispatch_block_notify(block, queue, ^{ atomic_fetch_add(&notify_runs, 1); });
    dispatch_suspend(queue);
    dispatch_async(queue, block);
    dispatch_block_cancel(block);
    CHECK(dispatch_block_testcancel(block) != 0);
    dispatch_resume(queue);
    CHECK_EQ(dispatch_block_wait(block, dispatch_time(DISPATCH_TIME_NOW, 10 * (int64_t)NSEC_PER_SEC)), 0);
    WAIT_FOR_COUNT(&notify_runs, 1, 10);
    dispatch_sync(queue, ^{});
    CHECK_EQ(atomic_load(&body_runs), 0);
    Block_release(block);

    check_section("cancel while running does not stop the running block");
    latch_t started, gate;
    latch_init(&started, 1);
    latch_init(&gate, 1);
    latch_t *started_ptr = &started, *gate_ptr = &gate;
    __block atomic_long completed = 0;
    block = dispatch_block_create(0, ^{
        latch_arrive(started_ptr);
        latch_wait(gate_ptr, 10);
        atomic_store(&completed, 1);
    });
    dispatch_async(queue, block);
    LATCH_WAIT(&started, 10, "the block to start");
    dispatch_block_cancel(block);
    CHECK(dispatch_block_testcancel(block) != 0);
    latch_arrive(&gate);
    CHECK_EQ(dispatch_block_wait(block, dispatch_time(DISPATCH_TIME_NOW, 10 * (int64_t)NSEC_PER_SEC)), 0);
    CHECK_EQ(atomic_load(&completed), 1);
    Block_release(block);
    latch_destroy(&started);
    latch_destroy(&gate);
    dispatch_release(queue);
}

static void barrier_flag(void) {
    check_section("DISPATCH_BLOCK_BARRIER makes dispatch_async on a concurrent queue a barrier");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.workitem-barrier", DISPATCH_QUEUE_CONCURRENT);
    for (int round = 0; round < 2; round++) {
        __block atomic_long before = 0, after = 0, running = 0, violations = 0;
        for (int i = 0; i < 20; i++) {
            dispatch_async(queue, ^{
                atomic_fetch_add(&running, 1);
                busy_wait_ns(100000);
                atomic_fetch_sub(&running, 1);
                atomic_fetch_add(&before, 1);
            });
        }
        dispatch_block_t barrier = dispatch_block_create(DISPATCH_BLOCK_BARRIER, ^{
            if (atomic_load(&before) != 20 || atomic_load(&running) != 0) atomic_fetch_add(&violations, 1);
            sleep_ms(10);
            if (atomic_load(&after) != 0) atomic_fetch_add(&violations, 1);
        });
        if (round == 0) {
            dispatch_async(queue, barrier);
        } else {
            dispatch_sync(queue, barrier);   // dispatch_sync honours the flag too
        }
        for (int i = 0; i < 20; i++) dispatch_async(queue, ^{ atomic_fetch_add(&after, 1); });
        CHECK_EQ(dispatch_block_wait(barrier, dispatch_time(DISPATCH_TIME_NOW, 20 * (int64_t)NSEC_PER_SEC)), 0);
        WAIT_FOR_COUNT(&after, 20, 20);
        CHECKF(atomic_load(&violations) == 0, "round %d: the DISPATCH_BLOCK_BARRIER block did not run alone", round);
        Block_release(barrier);
    }
    dispatch_release(queue);
}

static void with_groups(void) {
    check_section("a work-item block submitted with dispatch_group_async counts in the group");
    dispatch_group_t group = dispatch_group_create();
    dispatch_queue_t queue = dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0);
    __block atomic_long ran = 0;
    dispatch_block_t block = dispatch_block_create(0, ^{
        sleep_ms(20);
        atomic_fetch_add(&ran, 1);
    });
    dispatch_group_async(group, queue, block);
    CHECK_EQ(dispatch_group_wait(group, dispatch_time(DISPATCH_TIME_NOW, 10 * (int64_t)NSEC_PER_SEC)), 0);
    CHECK_EQ(atomic_load(&ran), 1);
    Block_release(block);
    dispatch_release(group);
}

int main(void) {
    check_start("workitem", 55);
    create_and_run();
    wait_and_notify();
    cancellation();
    barrier_flag();
    with_groups();
    check_pass();
    return 0;
}
