// The main queue: dispatch_main() never returns; it drains the main queue, one item at a
// time in FIFO order (per submitting thread), on the main thread; items submitted before
// dispatch_main, from worker threads, from main-queue items, by dispatch_after_f and by
// dispatch_sync_f from another thread all run there. The program ends by calling exit()
// from a main-queue item.
//
// libdispatch on Linux parks the main thread and drains the main queue on a worker
// thread instead; the main-thread check is GrandCentral's promise, skipped in the
// reference build.
#include "check.h"

enum { EARLY_ITEMS = 1000, WORKER_ITEMS = 1000, CHAIN_ITEMS = 100 };

static pthread_t main_thread;
static concurrency_t concurrency;
static atomic_long wrong_thread;
static atomic_long out_of_order;
static atomic_long wrong_label;
static const char *main_label;

// Written only by main-queue items (which run one at a time).
static long early_next, worker_next, chain_next;
static bool after_ran, sync_ran;
static int finish_polls;
#ifdef __BLOCKS__
static atomic_long block_items;
#endif

static void on_main_queue(void) {
    concurrency_enter(&concurrency);
#ifndef GC_REFERENCE_LIBDISPATCH
    if (!pthread_equal(pthread_self(), main_thread)) atomic_fetch_add(&wrong_thread, 1);
#endif
    const char *label = dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL);
    if (label == NULL || strcmp(label, main_label) != 0) atomic_fetch_add(&wrong_label, 1);
}

static void early_item(void *context) {
    on_main_queue();
    if ((long)(intptr_t)context != early_next++) atomic_fetch_add(&out_of_order, 1);
    concurrency_exit(&concurrency);
}

static void worker_item(void *context) {
    on_main_queue();
    if ((long)(intptr_t)context != worker_next++) atomic_fetch_add(&out_of_order, 1);
    concurrency_exit(&concurrency);
}

static void chain_item(void *context) {
    on_main_queue();
    long index = (long)(intptr_t)context;
    if (index != chain_next++) atomic_fetch_add(&out_of_order, 1);
    if (index + 1 < CHAIN_ITEMS) dispatch_async_f(dispatch_get_main_queue(), (void *)(intptr_t)(index + 1), chain_item);
    concurrency_exit(&concurrency);
}

static void sync_item(void *context) {
    on_main_queue();
    (void)context;
    sync_ran = true;
    concurrency_exit(&concurrency);
}

static void *worker(void *argument) {
    (void)argument;
    CHECK(dispatch_get_main_queue() == (dispatch_queue_t)argument);
    for (long i = 0; i < WORKER_ITEMS; i++) {
        dispatch_async_f(dispatch_get_main_queue(), (void *)(intptr_t)i, worker_item);
    }
    // A synchronous call from another thread runs on the main queue too.
    dispatch_sync_f(dispatch_get_main_queue(), NULL, sync_item);
    return NULL;
}

static void finish(void *context) {
    on_main_queue();
    (void)context;
    if ((early_next < EARLY_ITEMS || worker_next < WORKER_ITEMS || chain_next < CHAIN_ITEMS || !sync_ran)
        && ++finish_polls < 2000) {
        concurrency_exit(&concurrency);
        dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_MSEC), dispatch_get_main_queue(), NULL, finish);
        return;
    }
    check_section("everything submitted ran, one at a time, in order, on the main thread");
    CHECK_EQ(early_next, EARLY_ITEMS);
    CHECK_EQ(worker_next, WORKER_ITEMS);
    CHECK_EQ(chain_next, CHAIN_ITEMS);
    CHECK(after_ran);
    CHECK(sync_ran);
    CHECK_EQ(atomic_load(&out_of_order), 0);
    CHECK_EQ(atomic_load(&wrong_thread), 0);
    CHECK_EQ(atomic_load(&wrong_label), 0);
    CHECK_EQ(atomic_load(&concurrency.most), 1);
#ifdef __BLOCKS__
    CHECK_EQ(atomic_load(&block_items), 10);
#endif
    check_pass();
    exit(0);
}

static void after_item(void *context) {
    on_main_queue();
    (void)context;
    after_ran = true;
    concurrency_exit(&concurrency);
    dispatch_async_f(dispatch_get_main_queue(), NULL, finish);
}

int main(void) {
    check_start("main_queue", 50);
    main_thread = pthread_self();
    dispatch_queue_t main_queue = dispatch_get_main_queue();
    CHECK(main_queue != NULL);
    CHECK(dispatch_get_main_queue() == main_queue);
    main_label = dispatch_queue_get_label(main_queue);
    CHECK(main_label != NULL && main_label[0] != '\0');

    check_section("submitting to the main queue before dispatch_main");
    for (long i = 0; i < EARLY_ITEMS; i++) dispatch_async_f(main_queue, (void *)(intptr_t)i, early_item);
    dispatch_async_f(main_queue, (void *)0, chain_item);
    dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW, 50 * NSEC_PER_MSEC), main_queue, NULL, after_item);
#ifdef __BLOCKS__
    for (int i = 0; i < 10; i++) {
        dispatch_async(main_queue, ^{
            on_main_queue();
            atomic_fetch_add(&block_items, 1);
            concurrency_exit(&concurrency);
        });
    }
#endif
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, worker, main_queue) == 0);
    pthread_detach(thread);

    check_section("dispatch_main");
    dispatch_main();
    FAIL("dispatch_main returned");
}
