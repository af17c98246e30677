// The drop-in's fork promise, checked the way a user meets it: a C program built the
// ordinary way against the toolchain (its headers, -ldispatch) keeps the pool busy and a
// timer armed, forks, and uses dispatch in the child: a serial queue, a group, a
// dispatch_after and a repeating timer source. Run through grandcentral-run only (on the
// toolchain's libdispatch such a child hangs or crashes): every child must exit 0 within its
// deadline, and the parent's pending work must never run in a child.
#include <dispatch/dispatch.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int in_child;
static atomic_long child_ticks;

static void parent_pending(void *context) {
    (void)context;
    if (atomic_load(&in_child)) {
        static const char message[] = "fork: the parent's pending work ran in the child\n";
        ssize_t r = write(2, message, sizeof message - 1);
        (void)r;
        _exit(3);
    }
}

static void spin(void *context) {
    (void)context;
    for (volatile int i = 0; i < 200000; i++) {}
}

static void tick(void *context) { (void)context; atomic_fetch_add(&child_ticks, 1); }
static void count(void *context) { atomic_fetch_add((atomic_long *)context, 1); }

static int child_main(void) {
    atomic_store(&in_child, 1);
    atomic_long done = 0;
    dispatch_queue_t queue = dispatch_queue_create("fork.child", NULL);
    dispatch_group_t group = dispatch_group_create();
    for (int i = 0; i < 100; i++) dispatch_group_async_f(group, queue, &done, count);
    for (int i = 0; i < 100; i++) dispatch_group_async_f(group, dispatch_get_global_queue(0, 0), &done, count);
    dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW, 5 * NSEC_PER_MSEC), queue, &done, count);
    dispatch_source_t timer = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, 0, queue);
    dispatch_source_set_event_handler_f(timer, tick);
    dispatch_source_set_timer(timer, DISPATCH_TIME_NOW, 2 * NSEC_PER_MSEC, 0);
    dispatch_activate(timer);
    if (dispatch_group_wait(group, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)) != 0) return 4;
    for (int i = 0; i < 1000 && (atomic_load(&done) < 201 || atomic_load(&child_ticks) < 5); i++) usleep(10000);
    if (atomic_load(&done) != 201) return 5;
    if (atomic_load(&child_ticks) < 5) return 6;
    dispatch_source_cancel(timer);
    return 0;
}

int main(void) {
    // A busy parent: pool threads, an armed timer, and work that will still be pending at
    // each fork (a serial queue held by a long item).
    dispatch_queue_t held = dispatch_queue_create("fork.held", NULL);
    dispatch_async_f(held, NULL, spin);
    dispatch_suspend(held);
    dispatch_async_f(held, NULL, parent_pending);
    dispatch_source_t timer = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER, 0, 0, dispatch_get_global_queue(0, 0));
    dispatch_source_set_event_handler_f(timer, spin);
    dispatch_source_set_timer(timer, DISPATCH_TIME_NOW, NSEC_PER_MSEC, 0);
    dispatch_activate(timer);
    for (int i = 0; i < 50; i++) dispatch_async_f(dispatch_get_global_queue(0, 0), NULL, spin);
    int failed = 0;
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < 10; i++) dispatch_async_f(dispatch_get_global_queue(0, 0), NULL, spin);
        pid_t child = fork();
        if (child < 0) return 2;
        if (child == 0) {
            alarm(30);
            _exit(child_main());
        }
        int status = 0;
        waitpid(child, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            printf("fork round %d: the child ended with status 0x%x\n", round, (unsigned)status);
            failed++;
        }
    }
    dispatch_source_cancel(timer);
    dispatch_resume(held);
    printf("fork: 10 children of a busy parent used dispatch, %d failed\n", failed);
    return failed != 0;
}
