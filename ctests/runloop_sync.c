// dispatch_sync onto a run-loop queue (_dispatch_runloop_root_queue_create_4CF), or onto a
// serial queue that targets one, from another thread runs the function on the loop's thread
// (the one calling _dispatch_runloop_root_queue_perform_4CF), as an async item there would
// run: like the main queue, a run-loop queue's work belongs to one thread. (A merge of the
// run-loop queues with the sync hand-off once lent such calls to the caller: 4,000 of
// 6,000 ran on the caller's thread.) The loop's thread waits on the queue's descriptor
// where there is one; libdispatch builds _dispatch_runloop_root_queue_get_port_4CF for
// Darwin only, so the reference build polls. (libdispatch itself traps on such a sync:
// ctests/run-reference.sh skips this test.)
#include "check.h"

#include <poll.h>

#ifdef GC_REFERENCE_LIBDISPATCH
dispatch_queue_t _dispatch_runloop_root_queue_create_4CF(const char *label, unsigned long flags);
bool _dispatch_runloop_root_queue_perform_4CF(dispatch_queue_t queue);
#else
#include <dispatch/runloop_private.h>
#endif

enum { ROUNDS = 3000 };

static dispatch_queue_t runloop_queue;
static atomic_int loop_tid, stop_loop;
static atomic_long wrong_thread, ran;

static void *loop_main(void *context) {
    (void)context;
    atomic_store(&loop_tid, gettid());
#ifndef GC_REFERENCE_LIBDISPATCH
    int fd = _dispatch_runloop_root_queue_get_port_4CF(runloop_queue);
#endif
    while (!atomic_load(&stop_loop)) {
#ifndef GC_REFERENCE_LIBDISPATCH
        struct pollfd wait = {fd, POLLIN, 0};
        poll(&wait, 1, 10);
        uint64_t value;
        if (wait.revents & POLLIN) { ssize_t r = read(fd, &value, sizeof value); (void)r; }
#else
        usleep(50);
#endif
        while (_dispatch_runloop_root_queue_perform_4CF(runloop_queue)) {}
    }
    return NULL;
}

static void on_loop(void *context) {
    (void)context;
    if (gettid() != atomic_load(&loop_tid)) atomic_fetch_add(&wrong_thread, 1);
    atomic_fetch_add(&ran, 1);
}

int main(void) {
    check_start("runloop_sync", 120);
    check_section("dispatch_sync onto a run-loop queue, and onto a queue targeting it, runs on the loop's thread");
    runloop_queue = _dispatch_runloop_root_queue_create_4CF("com.grandcentral.tests.runloop-sync", 0);
    CHECK(runloop_queue != NULL);
    dispatch_queue_t above = dispatch_queue_create("com.grandcentral.tests.runloop-sync.above", NULL);
    dispatch_set_target_queue(above, runloop_queue);
    pthread_t loop;
    CHECK(pthread_create(&loop, NULL, loop_main, NULL) == 0);
    while (!atomic_load(&loop_tid)) usleep(100);
    for (long i = 0; i < ROUNDS; i++) {
        dispatch_async_f(runloop_queue, NULL, on_loop);
        dispatch_sync_f(runloop_queue, NULL, on_loop);
        dispatch_sync_f(above, NULL, on_loop);
    }
    atomic_store(&stop_loop, 1);
    pthread_join(loop, NULL);
    printf("   %ld calls, %ld on a thread other than the loop's\n", atomic_load(&ran), atomic_load(&wrong_thread));
    CHECK_EQ(atomic_load(&ran), 3 * ROUNDS);
    CHECK_EQ(atomic_load(&wrong_thread), 0);
    check_pass();
    return 0;
}
