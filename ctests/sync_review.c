// Regressions found by the adversarial review of the caller's-thread dispatch_sync.
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
#include "check.h"

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
    check_start("sync_review", 50);
    width_raised_under_a_serial_drain();
    more_sync_callers_than_threads();
    check_pass();
    return 0;
}
