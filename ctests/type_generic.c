// The type-generic calls of <dispatch/object.h>: dispatch_wait on a group and a semaphore
// (with a timeout that expires and one that does not), and, with blocks, dispatch_notify
// on a group and a work item, dispatch_wait on a work item, dispatch_cancel and
// dispatch_testcancel. Each must reach the type's own function.
#include "check.h"

#if !defined(dispatch_wait)
#error "<dispatch/object.h> defines dispatch_wait as a _Generic macro in C11"
#endif

static void signal_semaphore(void *context) {
    sleep_ms(20);
    dispatch_semaphore_signal((dispatch_semaphore_t)context);
}

static void leave_group(void *context) {
    sleep_ms(20);
    dispatch_group_leave((dispatch_group_t)context);
}

static void wait_on_group(void) {
    check_section("dispatch_wait on a group: times out while it is busy, returns 0 once it is empty");
    dispatch_group_t group = dispatch_group_create();
    CHECK_EQ(dispatch_wait(group, DISPATCH_TIME_NOW), 0);
    dispatch_group_enter(group);
    CHECK(dispatch_wait(group, DISPATCH_TIME_NOW) != 0);
    uint64_t start = now_ns();
    CHECK(dispatch_wait(group, dispatch_time(DISPATCH_TIME_NOW, 30 * NSEC_PER_MSEC)) != 0);
    CHECK(now_ns() - start >= 25 * NSEC_PER_MSEC);
    dispatch_async_f(dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0), group, leave_group);
    CHECK_EQ(dispatch_wait(group, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)), 0);
    CHECK_EQ(dispatch_wait(group, DISPATCH_TIME_FOREVER), 0);
    dispatch_release(group);
}

static void wait_on_semaphore(void) {
    check_section("dispatch_wait on a semaphore: times out with no unit, takes one once signalled");
    dispatch_semaphore_t semaphore = dispatch_semaphore_create(1);
    CHECK_EQ(dispatch_wait(semaphore, DISPATCH_TIME_NOW), 0);  // takes the one unit
    uint64_t start = now_ns();
    CHECK(dispatch_wait(semaphore, dispatch_time(DISPATCH_TIME_NOW, 30 * NSEC_PER_MSEC)) != 0);
    CHECK(now_ns() - start >= 25 * NSEC_PER_MSEC);
    dispatch_async_f(dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0), semaphore, signal_semaphore);
    CHECK_EQ(dispatch_wait(semaphore, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)), 0);
    dispatch_semaphore_signal(semaphore);  // back to its initial value before release
    dispatch_release(semaphore);
}

#ifdef __BLOCKS__
#include <Block.h>

static char notify_queue_key;
static char notify_queue_marker;

static void notify_group(void) {
    check_section("dispatch_notify on a group: the block runs once, on the queue, after the group empties");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.generic-notify", NULL);
    dispatch_queue_set_specific(queue, &notify_queue_key, &notify_queue_marker, NULL);
    dispatch_group_t group = dispatch_group_create();
    atomic_long left = 0, notified = 0, on_queue = 0, early = 0;
    atomic_long *left_p = &left, *notified_p = &notified, *on_queue_p = &on_queue, *early_p = &early;
    dispatch_group_enter(group);
    dispatch_notify(group, queue, ^{
        if (atomic_load(left_p) == 0) atomic_fetch_add(early_p, 1);
        if (dispatch_get_specific(&notify_queue_key) == &notify_queue_marker) atomic_fetch_add(on_queue_p, 1);
        atomic_fetch_add(notified_p, 1);
    });
    sleep_ms(30);
    CHECK_EQ(atomic_load(&notified), 0);
    atomic_store(&left, 1);
    dispatch_group_leave(group);
    WAIT_FOR_COUNT(&notified, 1, 10);
    sleep_ms(20);
    CHECK_EQ(atomic_load(&notified), 1);
    CHECK_EQ(atomic_load(&on_queue), 1);
    CHECK_EQ(atomic_load(&early), 0);
    dispatch_release(group);
    dispatch_release(queue);
}

static void block_forms(void) {
    check_section("dispatch_wait, dispatch_notify, dispatch_cancel and dispatch_testcancel on work items");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.generic-blocks", NULL);
    atomic_long ran = 0, notified = 0;
    atomic_long *ran_p = &ran, *notified_p = &notified;
    dispatch_block_t item = dispatch_block_create(0, ^{
        sleep_ms(20);
        atomic_fetch_add(ran_p, 1);
    });
    dispatch_notify(item, queue, ^{ atomic_fetch_add(notified_p, 1); });
    CHECK(dispatch_wait(item, dispatch_time(DISPATCH_TIME_NOW, 5 * NSEC_PER_MSEC)) != 0);  // not run yet
    dispatch_async(queue, item);
    CHECK_EQ(dispatch_wait(item, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)), 0);
    CHECK_EQ(atomic_load(&ran), 1);
    WAIT_FOR_COUNT(&notified, 1, 10);
    Block_release(item);

    dispatch_block_t cancelled = dispatch_block_create(0, ^{ atomic_fetch_add(ran_p, 1); });
    CHECK_EQ(dispatch_testcancel(cancelled), 0);
    dispatch_cancel(cancelled);
    CHECK(dispatch_testcancel(cancelled) != 0);
    dispatch_async(queue, cancelled);
    CHECK_EQ(dispatch_wait(cancelled, DISPATCH_TIME_FOREVER), 0);
    CHECK_EQ(atomic_load(&ran), 1);  // the cancelled item's body never ran
    Block_release(cancelled);
    dispatch_release(queue);
}
#endif

int main(void) {
    check_start("type_generic", 60);
    wait_on_group();
    wait_on_semaphore();
#ifdef __BLOCKS__
    notify_group();
    block_forms();
#endif
    check_pass();
    return 0;
}
