// The run loop's hooks (<dispatch/runloop_private.h>), as Foundation's CFRunLoop uses them
// on Linux: the main queue's descriptor is an eventfd that becomes readable when main-queue
// work is queued while nobody is in dispatch_main; _dispatch_main_queue_callback_4CF runs,
// on the main thread, the items that were queued when it was called, in order, each once,
// with the main queue as the current queue; what those items queue waits for the next call
// (and the descriptor is readable again); a callback inside an item does nothing. And the
// thread-bound run-loop queues: _perform_4CF runs one item on the calling thread and says
// whether more wait.
//
// libdispatch exports these names but its public headers do not declare them; the
// reference build declares them here. _dispatch_runloop_root_queue_get_port_4CF is built
// for Darwin only in libdispatch, so the reference build waits without the descriptor.
#include "check.h"

#include <poll.h>

#ifdef GC_REFERENCE_LIBDISPATCH
void libdispatch_init(void);
int _dispatch_get_main_queue_handle_4CF(void);
int _dispatch_get_main_queue_port_4CF(void);
void _dispatch_main_queue_callback_4CF(void *msg);
dispatch_queue_t _dispatch_runloop_root_queue_create_4CF(const char *label, unsigned long flags);
bool _dispatch_runloop_root_queue_perform_4CF(dispatch_queue_t queue);
void _dispatch_runloop_root_queue_wakeup_4CF(dispatch_queue_t queue);
#else
#include <dispatch/runloop_private.h>
#endif

enum { MAIN_ITEMS = 1000, WORKER_ITEMS = 100000, RUNLOOP_ITEMS = 100000 };

static pthread_t main_thread;
static const char *main_label;

/// True once `fd` is readable, within `ms`.
static bool readable(int fd, int ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n;
    do { n = poll(&p, 1, ms); } while (n < 0 && errno == EINTR);
    return n == 1 && (p.revents & POLLIN);
}

/// Reads the eventfd's count, as CFRunLoop does before it calls the callback.
static void clear(int fd) {
    uint64_t value;
    ssize_t ignored = read(fd, &value, sizeof value);
    (void)ignored;
}

// MARK: - The main queue

static atomic_long wrong_place;   // an item not on the main thread, or not on the main queue
static long main_next, worker_next, main_ran, worker_ran, out_of_order;

static void check_on_main_queue(void) {
    if (!pthread_equal(pthread_self(), main_thread)) atomic_fetch_add(&wrong_place, 1);
    const char *label = dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL);
    if (label == NULL || strcmp(label, main_label) != 0) atomic_fetch_add(&wrong_place, 1);
}

static void main_item(void *context) {
    check_on_main_queue();
    if ((long)(intptr_t)context != main_next++) out_of_order++;
    main_ran++;
}

static void worker_item(void *context) {
    check_on_main_queue();
    if ((long)(intptr_t)context != worker_next++) out_of_order++;
    worker_ran++;
}

static void *worker_submits(void *unused) {
    (void)unused;
    for (long i = 0; i < WORKER_ITEMS; i++) dispatch_async_f(dispatch_get_main_queue(), (void *)(intptr_t)i, worker_item);
    return NULL;
}

static void drains_fifo_on_main_thread(int fd) {
    check_section("queued main-queue work makes the descriptor readable; the callback runs it in order, once, on the main thread");
    CHECKF(!readable(fd, 0), "the descriptor is readable with no main-queue work");
    pthread_t worker;
    CHECK_EQ(pthread_create(&worker, NULL, worker_submits, NULL), 0);
    for (long i = 0; i < MAIN_ITEMS; i++) dispatch_async_f(dispatch_get_main_queue(), (void *)(intptr_t)i, main_item);
    uint64_t deadline = now_ns() + 30ull * 1000000000ull;
    while (main_ran < MAIN_ITEMS || worker_ran < WORKER_ITEMS) {
        CHECKF(now_ns() < deadline, "timed out: %ld of %d main and %ld of %d worker items ran",
               main_ran, MAIN_ITEMS, worker_ran, WORKER_ITEMS);
        if (!readable(fd, 1000)) continue;
        clear(fd);
        _dispatch_main_queue_callback_4CF(NULL);
    }
    pthread_join(worker, NULL);
    // Nothing is left: a spare callback runs nothing and the count stays.
    _dispatch_main_queue_callback_4CF(NULL);
    CHECK_EQ(main_ran, MAIN_ITEMS);
    CHECK_EQ(worker_ran, WORKER_ITEMS);
    CHECK_EQ(out_of_order, 0);
    CHECK_EQ(atomic_load(&wrong_place), 0);
}

static int turn_log[8];
static int turn_count;

static void later_item(void *context) {
    check_on_main_queue();
    turn_log[turn_count++] = (int)(intptr_t)context;
}

static void requeueing_item(void *context) {
    check_on_main_queue();
    turn_log[turn_count++] = (int)(intptr_t)context;
    dispatch_async_f(dispatch_get_main_queue(), (void *)(intptr_t)3, later_item);
}

static void nesting_item(void *context) {
    check_on_main_queue();
    turn_log[turn_count++] = (int)(intptr_t)context;
    _dispatch_main_queue_callback_4CF(NULL);   // inside a drain: must run nothing
    turn_log[turn_count++] = 10 + (int)(intptr_t)context;
}

static void one_turn_at_a_time(int fd) {
    check_section("items queued by a callback's items wait for the next call, which the descriptor announces");
    turn_count = 0;
    dispatch_async_f(dispatch_get_main_queue(), (void *)(intptr_t)1, requeueing_item);
    dispatch_async_f(dispatch_get_main_queue(), (void *)(intptr_t)2, later_item);
    CHECK(readable(fd, 10000));
    clear(fd);
    _dispatch_main_queue_callback_4CF(NULL);
    CHECK_EQ(turn_count, 2);
    CHECK_EQ(turn_log[0], 1);
    CHECK_EQ(turn_log[1], 2);
    CHECKF(readable(fd, 10000), "the descriptor was not made readable for the item queued during the call");
    clear(fd);
    _dispatch_main_queue_callback_4CF(NULL);
    CHECK_EQ(turn_count, 3);
    CHECK_EQ(turn_log[2], 3);

    check_section("a callback inside a main-queue item runs nothing");
    turn_count = 0;
    dispatch_async_f(dispatch_get_main_queue(), (void *)(intptr_t)1, nesting_item);
    dispatch_async_f(dispatch_get_main_queue(), (void *)(intptr_t)2, later_item);
    CHECK(readable(fd, 10000));
    clear(fd);
    _dispatch_main_queue_callback_4CF(NULL);
    CHECK_EQ(turn_count, 3);
    CHECK_EQ(turn_log[0], 1);
    CHECK_EQ(turn_log[1], 11);
    CHECK_EQ(turn_log[2], 2);
    CHECK_EQ(atomic_load(&wrong_place), 0);
}

// MARK: - Run-loop queues

static dispatch_queue_t loop_queue;
static long loop_next, loop_ran, loop_out_of_order;
static atomic_long loop_wrong_place;

static void loop_item(void *context) {
    if (!pthread_equal(pthread_self(), main_thread)) atomic_fetch_add(&loop_wrong_place, 1);
    const char *label = dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL);
    if (label == NULL || strcmp(label, "com.grandcentral.tests.runloop") != 0) atomic_fetch_add(&loop_wrong_place, 1);
    if ((long)(intptr_t)context != loop_next++) loop_out_of_order++;
    loop_ran++;
}

static void *worker_submits_to_loop(void *unused) {
    (void)unused;
    for (long i = 0; i < RUNLOOP_ITEMS; i++) dispatch_async_f(loop_queue, (void *)(intptr_t)i, loop_item);
    return NULL;
}

static void runloop_queues(void) {
    check_section("a run loop's queue: perform runs one item on the calling thread, in order, and says whether more wait");
    CHECK(_dispatch_runloop_root_queue_create_4CF("bad flags", 1) == NULL);
    loop_queue = _dispatch_runloop_root_queue_create_4CF("com.grandcentral.tests.runloop", 0);
    CHECK(loop_queue != NULL);
    CHECK_STR(dispatch_queue_get_label(loop_queue), "com.grandcentral.tests.runloop");
    CHECK(!_dispatch_runloop_root_queue_perform_4CF(loop_queue));   // empty
#ifndef GC_REFERENCE_LIBDISPATCH
    int port = _dispatch_runloop_root_queue_get_port_4CF(loop_queue);
    CHECK(port >= 0);
    CHECK(!readable(port, 0));
#endif
    pthread_t worker;
    CHECK_EQ(pthread_create(&worker, NULL, worker_submits_to_loop, NULL), 0);
    uint64_t deadline = now_ns() + 30ull * 1000000000ull;
    while (loop_ran < RUNLOOP_ITEMS) {
        CHECKF(now_ns() < deadline, "timed out: %ld of %d items ran", loop_ran, RUNLOOP_ITEMS);
#ifndef GC_REFERENCE_LIBDISPATCH
        if (!readable(port, 1000)) continue;
        clear(port);
#endif
        long before = loop_ran;
        bool more = _dispatch_runloop_root_queue_perform_4CF(loop_queue);
        CHECKF(loop_ran <= before + 1, "one perform ran %ld items", loop_ran - before);
        while (more) {
            before = loop_ran;
            more = _dispatch_runloop_root_queue_perform_4CF(loop_queue);
            CHECKF(loop_ran == before + 1, "a perform after 'more' ran %ld items", loop_ran - before);
        }
    }
    pthread_join(worker, NULL);
    CHECK(!_dispatch_runloop_root_queue_perform_4CF(loop_queue));
    CHECK_EQ(loop_ran, RUNLOOP_ITEMS);
    CHECK_EQ(loop_out_of_order, 0);
    CHECK_EQ(atomic_load(&loop_wrong_place), 0);

    check_section("wakeup makes a run loop's queue's descriptor readable");
    _dispatch_runloop_root_queue_wakeup_4CF(loop_queue);
#ifndef GC_REFERENCE_LIBDISPATCH
    CHECK(readable(port, 10000));
    clear(port);
#endif
    CHECK(!_dispatch_runloop_root_queue_perform_4CF(loop_queue));   // a spare wakeup runs nothing

#ifndef GC_REFERENCE_LIBDISPATCH
    // GrandCentral keeps dispatch_suspend's promise here too; libdispatch's perform runs
    // the item of a suspended run-loop queue (observed), so the reference build skips this.
    check_section("a suspended run loop's queue runs nothing; its resume announces the work");
    long before = loop_ran;
    // Queued before the suspension (the queue already wants its loop) and after it.
    dispatch_async_f(loop_queue, (void *)(intptr_t)loop_next, loop_item);
    dispatch_suspend(loop_queue);
    dispatch_async_f(loop_queue, (void *)(intptr_t)(loop_next + 1), loop_item);
    CHECK(!_dispatch_runloop_root_queue_perform_4CF(loop_queue));
    CHECK_EQ(loop_ran, before);
    clear(port);
    dispatch_resume(loop_queue);
    CHECKF(readable(port, 10000), "the resume did not make the descriptor readable");
    clear(port);
    CHECK(_dispatch_runloop_root_queue_perform_4CF(loop_queue));
    CHECK(!_dispatch_runloop_root_queue_perform_4CF(loop_queue));
    CHECK_EQ(loop_ran, before + 2);
    CHECK_EQ(loop_out_of_order, 0);
#endif
    dispatch_release(loop_queue);
}

int main(void) {
    check_start("runloop", 120);
    main_thread = pthread_self();
    main_label = dispatch_queue_get_label(dispatch_get_main_queue());

    check_section("libdispatch_init may be called any number of times; the descriptor is one eventfd");
    libdispatch_init();
    libdispatch_init();
    int fd = _dispatch_get_main_queue_handle_4CF();
    CHECK(fd >= 0);
    CHECK_EQ(_dispatch_get_main_queue_handle_4CF(), fd);
    CHECK_EQ(_dispatch_get_main_queue_port_4CF(), fd);

    drains_fifo_on_main_thread(fd);
    one_turn_at_a_time(fd);
    runloop_queues();
    check_pass();
    return 0;
}
