// Concurrent queues fed by one producer that keeps letting the queue go idle, so items
// often meet an idle queue with width to spare (where GrandCentral hands them straight to
// the target without a drain, as libdispatch's concurrent push does) and as often meet a
// busy one (where they go through the drain): the width is never exceeded, a queue of
// width 1 runs its items one at a time in submission order, a barrier runs after every
// item before it and before every item after it, and a suspended queue starts nothing.
#include "check.h"

enum { ITEMS = 100000, BURST = 7 };

typedef struct {
    concurrency_t concurrency;
    atomic_long started;        // items that have begun, in the order they began
    atomic_long finished;
    atomic_long out_of_order;   // width 1: items that began out of submission order
    atomic_long barrier_faults; // a barrier saw an earlier item unfinished or a later one begun
} state_t;

static state_t state;

static void item(void *context) {
    long index = (long)(intptr_t)context;
    concurrency_enter(&state.concurrency);
    long position = atomic_fetch_add(&state.started, 1);
    if (position != index) atomic_fetch_add(&state.out_of_order, 1);
    concurrency_exit(&state.concurrency);
    atomic_fetch_add(&state.finished, 1);
}

/// A barrier submitted after `context` items: all of them have finished, and since it runs
/// alone, exactly that many have started.
static void barrier(void *context) {
    long before = (long)(intptr_t)context;
    if (atomic_load(&state.finished) != before || atomic_load(&state.started) != before) {
        atomic_fetch_add(&state.barrier_faults, 1);
    }
}

static void reset(void) {
    atomic_store(&state.concurrency.running, 0);
    atomic_store(&state.concurrency.most, 0);
    atomic_store(&state.started, 0);
    atomic_store(&state.finished, 0);
    atomic_store(&state.out_of_order, 0);
    atomic_store(&state.barrier_faults, 0);
}

/// Submits ITEMS items in bursts of BURST; between bursts waits, every so often, for the
/// queue to run dry, so the next burst's first item finds it idle. With `barriers`, every
/// 50th submission is a barrier (which does not count as an item).
static void feed(dispatch_queue_t q, bool barriers) {
    long items = 0;
    for (long n = 0; items < ITEMS; n++) {
        if (barriers && n % 50 == 49) {
            dispatch_barrier_async_f(q, (void *)(intptr_t)items, barrier);
            continue;
        }
        dispatch_async_f(q, (void *)(intptr_t)items, item);
        items++;
        if (items % BURST == 0 && (items / BURST) % 3 == 0) {
            while (atomic_load(&state.finished) < items) sched_yield();
        }
    }
    WAIT_FOR_COUNT(&state.finished, ITEMS, 60.0);
}

static void width_one_is_fifo(void) {
    check_section("width 1 (set_width on a concurrent queue): one at a time, in order");
    reset();
    dispatch_queue_t q = dispatch_queue_create("concurrent-push.w1", DISPATCH_QUEUE_CONCURRENT);
    dispatch_queue_set_width(q, 1);
    feed(q, false);
    CHECK_EQ(atomic_load(&state.concurrency.most), 1);
    CHECK_EQ(atomic_load(&state.out_of_order), 0);
    dispatch_release(q);
}

static void width_two_with_barriers(void) {
    check_section("width 2 with barriers: width kept, barriers exclusive");
    reset();
    dispatch_queue_t q = dispatch_queue_create("concurrent-push.w2", DISPATCH_QUEUE_CONCURRENT);
    dispatch_queue_set_width(q, 2);
    feed(q, true);
    CHECK(atomic_load(&state.concurrency.most) <= 2);
    CHECK_EQ(atomic_load(&state.barrier_faults), 0);
    dispatch_release(q);
}

static void suspended_starts_nothing(void) {
    check_section("an idle suspended concurrent queue starts nothing until resumed");
    reset();
    dispatch_queue_t q = dispatch_queue_create("concurrent-push.suspended", DISPATCH_QUEUE_CONCURRENT);
    for (long round = 0; round < 200; round++) {
        dispatch_suspend(q);
        long base = round * 5;
        for (long i = 0; i < 5; i++) dispatch_async_f(q, (void *)(intptr_t)-1, item);
        sleep_ms(round % 20 == 0 ? 2 : 0);
        CHECK_EQ(atomic_load(&state.started), base);
        dispatch_resume(q);
        WAIT_FOR_COUNT(&state.finished, base + 5, 10.0);
    }
    dispatch_release(q);
}

int main(void) {
    check_start("concurrent_push", 240);
    width_one_is_fifo();
    width_two_with_barriers();
    suspended_starts_nothing();
    check_pass();
    return 0;
}
