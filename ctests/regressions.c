// Regression tests for bugs found by review of the queue engine. Each section names the
// behaviour it pins down; libdispatch behaves the same way (ctests/run-reference.sh).
#include "check.h"

#include <dispatch/dispatch.h>
#include <dispatch/private.h>

// --- dispatch_apply on a concurrent queue waits behind an earlier barrier -------------
static atomic_int in_barrier;
static atomic_int overlapping;

static void long_barrier(void *context) {
    (void)context;
    atomic_store(&in_barrier, 1);
    sleep_ms(200);
    atomic_store(&in_barrier, 0);
}

static void apply_iteration(void *context, size_t index) {
    (void)context;
    (void)index;
    if (atomic_load(&in_barrier)) atomic_fetch_add(&overlapping, 1);
    sleep_ms(1);
}

static void test_apply_respects_barrier(void) {
    check_section("apply waits behind a barrier");
    dispatch_queue_t q = dispatch_queue_create("regress.apply", DISPATCH_QUEUE_CONCURRENT);
    dispatch_barrier_async_f(q, NULL, long_barrier);
    sleep_ms(30);
    dispatch_apply_f(20, q, NULL, apply_iteration);
    CHECK_EQ(atomic_load(&overlapping), 0);
    dispatch_release(q);
}

// --- dispatch_queue_set_width on a live queue: nothing lost, new width honoured -------
static atomic_long width_ran;
static concurrency_t width_concurrency;

static void width_item(void *context) {
    (void)context;
    concurrency_enter(&width_concurrency);
    sleep_ms(20);
    concurrency_exit(&width_concurrency);
    atomic_fetch_add(&width_ran, 1);
}

static void test_set_width_live(void) {
    check_section("set_width on a queue with items in flight");
    dispatch_queue_t q = dispatch_queue_create("regress.width", DISPATCH_QUEUE_CONCURRENT);
    dispatch_queue_set_width(q, 2);
    for (int i = 0; i < 3; i++) dispatch_async_f(q, NULL, width_item);
    sleep_ms(5);
    dispatch_queue_set_width(q, 1);
    WAIT_FOR_COUNT(&width_ran, 3, 10.0);
    // After the change, items run one at a time.
    atomic_store(&width_concurrency.most, 0);
    for (int i = 0; i < 6; i++) dispatch_async_f(q, NULL, width_item);
    WAIT_FOR_COUNT(&width_ran, 9, 10.0);
    CHECK_EQ(atomic_load(&width_concurrency.most), 1);
    dispatch_release(q);
}

// --- dispatch_apply from inside items of a width-limited queue, onto that queue -------
static dispatch_queue_t narrow_queue;
static atomic_long nested_iterations;
static atomic_long nested_done;

static void nested_iteration(void *context, size_t index) {
    (void)context;
    (void)index;
    atomic_fetch_add(&nested_iterations, 1);
}

static void apply_from_item(void *context) {
    (void)context;
    dispatch_apply_f(8, narrow_queue, NULL, nested_iteration);
    atomic_fetch_add(&nested_done, 1);
}

static void test_apply_inside_width_limited_queue(void) {
    check_section("apply from items that hold all of a queue's width");
    narrow_queue = dispatch_queue_create("regress.narrow", DISPATCH_QUEUE_CONCURRENT);
    dispatch_queue_set_width(narrow_queue, 2);
    dispatch_async_f(narrow_queue, NULL, apply_from_item);
    dispatch_async_f(narrow_queue, NULL, apply_from_item);
    WAIT_FOR_COUNT(&nested_done, 2, 10.0);
    CHECK_EQ(atomic_load(&nested_iterations), 16);
    dispatch_release(narrow_queue);
}

// --- a notification registered after the group was re-entered waits for that round ----
static atomic_long notified;

static void count_notify(void *context) {
    (void)context;
    atomic_fetch_add(&notified, 1);
}

static void test_group_rounds(void) {
    check_section("group notify belongs to its round");
    dispatch_group_t g = dispatch_group_create();
    dispatch_queue_t q = dispatch_get_global_queue(0, 0);
    dispatch_group_enter(g);
    dispatch_group_notify_f(g, q, NULL, count_notify);
    dispatch_group_leave(g);                 // round 1 ends: its notification fires
    WAIT_FOR_COUNT(&notified, 1, 10.0);
    dispatch_group_enter(g);
    dispatch_group_notify_f(g, q, NULL, count_notify);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&notified), 1);     // round 2 is still open
    dispatch_group_leave(g);
    WAIT_FOR_COUNT(&notified, 2, 10.0);
    dispatch_release(g);
}

// --- dispatch_sync from the main thread onto a queue that targets the main queue -------
static void sync_onto_main_chain(void) {
    dispatch_queue_t q = dispatch_queue_create_with_target("regress.main-child", NULL, dispatch_get_main_queue());
    dispatch_sync_f(q, NULL, noop_function);
}

// --- a non-barrier dispatch_sync onto a concurrent queue from its own barrier ----------
static dispatch_queue_t barrier_queue;

static void sync_from_barrier(void *context) {
    (void)context;
    dispatch_sync_f(barrier_queue, NULL, noop_function);
}

static void sync_under_own_barrier(void) {
    barrier_queue = dispatch_queue_create("regress.barrier-self", DISPATCH_QUEUE_CONCURRENT);
    dispatch_barrier_sync_f(barrier_queue, NULL, sync_from_barrier);
}

int main(void) {
    check_start("regressions", 50);
    test_apply_respects_barrier();
    test_set_width_live();
    test_group_rounds();
    test_apply_inside_width_limited_queue();
#ifndef GC_REFERENCE_LIBDISPATCH
    check_section("deadlocks are reported, not silent");
    expect_client_bug("dispatch_sync_f|dispatch_sync", sync_onto_main_chain);
    expect_client_bug("dispatch_sync_f|dispatch_sync", sync_under_own_barrier);
#endif
    check_pass();
    return 0;
}
