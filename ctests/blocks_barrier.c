// A barrier work item (dispatch_block_create(DISPATCH_BLOCK_BARRIER, ...)) handed to a
// call that has no barrier twin — dispatch_after, dispatch_group_notify,
// dispatch_group_async — runs as a barrier on its concurrent queue: alone, after every
// item enqueued before it, before every item enqueued after it. And it is enqueued
// directly, where and when the call says, with no detour: a barrier notification
// registered before a plain one on the same group and queue runs before it.
#include "check.h"

#ifndef __BLOCKS__
int main(void) {
    puts("SKIP blocks_barrier: needs -fblocks");
    return 0;
}
#else
#include <Block.h>

static atomic_int active;      // plain items running now
static atomic_int in_barrier;  // 1 while a barrier item runs
static atomic_int violations;
static atomic_int barriers_done;

/// A plain item that takes a while, so that it is still running when the barrier is due.
static dispatch_block_t make_plain_item(unsigned ms) {
    return Block_copy(^{
        atomic_fetch_add(&active, 1);
        if (atomic_load(&in_barrier) != 0) atomic_fetch_add(&violations, 1);
        sleep_ms(ms);
        if (atomic_load(&in_barrier) != 0) atomic_fetch_add(&violations, 1);
        atomic_fetch_sub(&active, 1);
    });
}

/// A barrier work item that checks it runs alone, and that nothing starts while it runs.
static dispatch_block_t make_barrier_item(void) {
    return dispatch_block_create(DISPATCH_BLOCK_BARRIER, ^{
        atomic_store(&in_barrier, 1);
        if (atomic_load(&active) != 0) atomic_fetch_add(&violations, 1);
        sleep_ms(20);
        if (atomic_load(&active) != 0) atomic_fetch_add(&violations, 1);
        atomic_store(&in_barrier, 0);
        atomic_fetch_add(&barriers_done, 1);
    });
}

/// Plain items on `queue` that must all start after `expected_barriers` barriers are done.
static atomic_int followers_early;
static void submit_followers(dispatch_queue_t queue, dispatch_group_t group, int expected_barriers, int count) {
    for (int i = 0; i < count; i++) {
        dispatch_group_async(group, queue, ^{
            if (atomic_load(&barriers_done) < expected_barriers) atomic_fetch_add(&followers_early, 1);
            atomic_fetch_add(&active, 1);
            if (atomic_load(&in_barrier) != 0) atomic_fetch_add(&violations, 1);
            sleep_ms(2);
            atomic_fetch_sub(&active, 1);
        });
    }
}

static void reset(void) {
    atomic_store(&active, 0);
    atomic_store(&in_barrier, 0);
    atomic_store(&violations, 0);
    atomic_store(&barriers_done, 0);
    atomic_store(&followers_early, 0);
}

static void after_barrier(void) {
    check_section("dispatch_after with a barrier work item: it runs alone on a concurrent queue");
    reset();
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.after-barrier", DISPATCH_QUEUE_CONCURRENT);
    dispatch_group_t followers = dispatch_group_create();
    dispatch_block_t plain = make_plain_item(1500);
    for (int i = 0; i < 4; i++) dispatch_async(queue, plain);
    // Due while the plain items still run: the barrier waits for them.
    dispatch_block_t barrier = make_barrier_item();
    dispatch_after(dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_MSEC), queue, barrier);
    // By now the 10 ms timer has fired (the margin is for a heavily loaded machine: CI
    // failed once with 120 ms) and the barrier is enqueued behind the plain items, which
    // are still running: what comes next waits.
    sleep_ms(500);
    submit_followers(queue, followers, 1, 8);
    CHECK_EQ(dispatch_block_wait(barrier, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)), 0);
    CHECK_EQ(dispatch_group_wait(followers, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)), 0);
    dispatch_barrier_sync(queue, ^{});
    CHECK_EQ(atomic_load(&barriers_done), 1);
    CHECK_EQ(atomic_load(&violations), 0);
    CHECK_EQ(atomic_load(&followers_early), 0);
    Block_release(barrier);
    Block_release(plain);
    dispatch_release(followers);
    dispatch_release(queue);
}

static atomic_int late_notifications;

static void group_notify_barrier(void) {
    check_section("dispatch_group_notify with a barrier work item: it runs alone, and before later notifications");
    reset();
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.notify-barrier", DISPATCH_QUEUE_CONCURRENT);
    dispatch_queue_t elsewhere = dispatch_queue_create("com.grandcentral.tests.notify-work", DISPATCH_QUEUE_CONCURRENT);
    dispatch_group_t group = dispatch_group_create();
    dispatch_group_t followers = dispatch_group_create();
    dispatch_block_t plain = make_plain_item(60);
    // The group's work runs elsewhere; the notified queue is busy with plain items when
    // the group empties.
    dispatch_group_async(group, elsewhere, ^{ sleep_ms(20); });
    for (int i = 0; i < 4; i++) dispatch_async(queue, plain);
    dispatch_block_t barrier = make_barrier_item();
    dispatch_group_notify(group, queue, barrier);
    // Registered after the barrier on the same queue: submitted after it, so it runs
    // after it (a barrier holds back everything behind it).
    atomic_store(&late_notifications, 0);
    for (int i = 0; i < 4; i++) {
        dispatch_group_notify(group, queue, ^{
            if (atomic_load(&barriers_done) < 1) atomic_fetch_add(&late_notifications, 1);
            if (atomic_load(&in_barrier) != 0) atomic_fetch_add(&violations, 1);
        });
    }
    CHECK_EQ(dispatch_block_wait(barrier, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)), 0);
    submit_followers(queue, followers, 1, 8);
    CHECK_EQ(dispatch_group_wait(followers, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)), 0);
    dispatch_barrier_sync(queue, ^{});
    CHECK_EQ(atomic_load(&barriers_done), 1);
    CHECK_EQ(atomic_load(&violations), 0);
    CHECK_EQ(atomic_load(&late_notifications), 0);
    Block_release(barrier);
    Block_release(plain);
    dispatch_release(group);
    dispatch_release(followers);
    dispatch_release(elsewhere);
    dispatch_release(queue);
}

static void group_async_barrier(void) {
    check_section("dispatch_group_async with a barrier work item: it runs alone and is a member of the group");
    reset();
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.group-async-barrier", DISPATCH_QUEUE_CONCURRENT);
    dispatch_group_t group = dispatch_group_create();
    dispatch_group_t followers = dispatch_group_create();
    dispatch_block_t plain = make_plain_item(30);
    for (int i = 0; i < 4; i++) dispatch_async(queue, plain);
    dispatch_block_t barrier = make_barrier_item();
    dispatch_group_async(group, queue, barrier);
    submit_followers(queue, followers, 1, 8);
    // The group empties only once the barrier item has run.
    CHECK_EQ(dispatch_group_wait(group, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)), 0);
    CHECK_EQ(atomic_load(&barriers_done), 1);
    CHECK_EQ(dispatch_group_wait(followers, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)), 0);
    CHECK_EQ(atomic_load(&violations), 0);
    CHECK_EQ(atomic_load(&followers_early), 0);
    Block_release(barrier);
    Block_release(plain);
    dispatch_release(group);
    dispatch_release(followers);
    dispatch_release(queue);
}

static atomic_int out_of_order;
static atomic_long notified;

static void repeated_notify_order(void) {
    check_section("100 rounds: a barrier notification always runs before the plain one registered after it");
    reset();
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.notify-order", DISPATCH_QUEUE_CONCURRENT);
    atomic_store(&out_of_order, 0);
    atomic_store(&notified, 0);
    for (int round = 0; round < 100; round++) {
        dispatch_group_t group = dispatch_group_create();
        __block atomic_int barrier_ran = 0;
        dispatch_group_enter(group);
        dispatch_block_t barrier = dispatch_block_create(DISPATCH_BLOCK_BARRIER, ^{
            atomic_store(&barrier_ran, 1);
            atomic_fetch_add(&notified, 1);
        });
        dispatch_group_notify(group, queue, barrier);
        dispatch_group_notify(group, queue, ^{
            if (atomic_load(&barrier_ran) == 0) atomic_fetch_add(&out_of_order, 1);
            atomic_fetch_add(&notified, 1);
        });
        dispatch_group_leave(group);
        dispatch_barrier_sync(queue, ^{});
        Block_release(barrier);
        dispatch_release(group);
    }
    dispatch_barrier_sync(queue, ^{});
    WAIT_FOR_COUNT(&notified, 200, 10);
    CHECK_EQ(atomic_load(&out_of_order), 0);
    dispatch_release(queue);
}

int main(void) {
    check_start("blocks_barrier", 60);
    after_barrier();
    group_notify_barrier();
    group_async_barrier();
    repeated_notify_order();
    check_pass();
    return 0;
}
#endif
