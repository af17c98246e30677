// <dispatch/private.h>: dispatch_queue_set_width limits how many items of a concurrent
// queue run at once; the DISPATCH_QUEUE_WIDTH_* values; the DISPATCH_QUEUE_OVERCOMMIT
// global queue and dispatch_queue_attr_make_with_overcommit queues run work even when
// every item blocks.
#include "check.h"

static concurrency_t concurrency;
static atomic_long done;

static void tracked_item(void *context) {
    (void)context;
    concurrency_enter(&concurrency);
    sleep_ms(5);
    concurrency_exit(&concurrency);
    atomic_fetch_add(&done, 1);
}

static long most_at_once(dispatch_queue_t queue, int items) {
    memset(&concurrency, 0, sizeof concurrency);
    atomic_store(&done, 0);
    for (int i = 0; i < items; i++) dispatch_async_f(queue, NULL, tracked_item);
    WAIT_FOR_COUNT(&done, items, 30);
    return atomic_load(&concurrency.most);
}

static void width(void) {
    check_section("dispatch_queue_set_width(queue, 1) makes a concurrent queue run one item at a time");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.width", DISPATCH_QUEUE_CONCURRENT);
    long unlimited = most_at_once(queue, 40);
    printf("   unlimited: at most %ld at once\n", unlimited);
    dispatch_queue_set_width(queue, 1);
    CHECK_EQ(most_at_once(queue, 40), 1);

    check_section("dispatch_queue_set_width(queue, 2) allows at most 2");
    dispatch_queue_set_width(queue, 2);
    long two = most_at_once(queue, 40);
    CHECKF(two >= 1 && two <= 2, "width 2, but %ld items ran at once", two);
    dispatch_release(queue);

    check_section("width set before any item: a concurrent queue of width 3 runs at most 3");
    dispatch_queue_t three = dispatch_queue_create("com.grandcentral.tests.width3", DISPATCH_QUEUE_CONCURRENT);
    dispatch_queue_set_width(three, 3);
    long seen = most_at_once(three, 60);
    CHECKF(seen >= 1 && seen <= 3, "width 3, but %ld items ran at once", seen);
    dispatch_release(three);

    check_section("DISPATCH_QUEUE_WIDTH_ACTIVE_CPUS/MAX_LOGICAL_CPUS/MAX_PHYSICAL_CPUS stay within the CPU count");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const long special[] = {
        DISPATCH_QUEUE_WIDTH_ACTIVE_CPUS, DISPATCH_QUEUE_WIDTH_MAX_LOGICAL_CPUS, DISPATCH_QUEUE_WIDTH_MAX_PHYSICAL_CPUS,
    };
    CHECK_EQ(DISPATCH_QUEUE_WIDTH_ACTIVE_CPUS, -1);
    CHECK_EQ(DISPATCH_QUEUE_WIDTH_MAX_PHYSICAL_CPUS, -2);
    CHECK_EQ(DISPATCH_QUEUE_WIDTH_MAX_LOGICAL_CPUS, -3);
    for (int i = 0; i < 3; i++) {
        dispatch_queue_t q = dispatch_queue_create("com.grandcentral.tests.width-cpus", DISPATCH_QUEUE_CONCURRENT);
        dispatch_queue_set_width(q, special[i]);
        long most = most_at_once(q, 8 * (int)cpus);
        CHECKF(most >= 1 && most <= cpus, "width %ld: %ld items at once with %ld CPUs online", special[i], most, cpus);
        dispatch_release(q);
    }
}

// MARK: - Overcommit

static void count_item(void *context) {
    atomic_fetch_add((atomic_long *)context, 1);
}

static void overcommit(void) {
    check_section("the DISPATCH_QUEUE_OVERCOMMIT global queue exists and runs items");
    dispatch_queue_t queue = dispatch_get_global_queue(DISPATCH_QUEUE_PRIORITY_DEFAULT, DISPATCH_QUEUE_OVERCOMMIT);
    CHECK(queue != NULL);
    CHECK(dispatch_get_global_queue(QOS_CLASS_DEFAULT, DISPATCH_QUEUE_OVERCOMMIT) == queue);
    atomic_long ran = 0;
    for (int i = 0; i < 1000; i++) dispatch_async_f(queue, &ran, count_item);
    WAIT_FOR_COUNT(&ran, 1000, 30);
    CHECK(dispatch_get_global_queue(QOS_CLASS_UTILITY, DISPATCH_QUEUE_OVERCOMMIT) != NULL);
    CHECK(dispatch_get_global_queue(QOS_CLASS_USER_INITIATED, DISPATCH_QUEUE_OVERCOMMIT) != NULL);
    CHECK(dispatch_get_global_queue(QOS_CLASS_BACKGROUND, DISPATCH_QUEUE_OVERCOMMIT) != NULL);

    check_section("on the overcommit queue, 4 items that block on each other all run at once");
    expect_parallel(queue, 4, "overcommit global queue");

    check_section("a serial queue made with dispatch_queue_attr_make_with_overcommit runs items in order");
    dispatch_queue_attr_t attr = dispatch_queue_attr_make_with_overcommit(DISPATCH_QUEUE_SERIAL, true);
    dispatch_queue_t serial = dispatch_queue_create("com.grandcentral.tests.overcommit-serial", attr);
    CHECK(serial != NULL);
    memset(&concurrency, 0, sizeof concurrency);
    atomic_store(&done, 0);
    for (int i = 0; i < 50; i++) dispatch_async_f(serial, NULL, tracked_item);
    WAIT_FOR_COUNT(&done, 50, 30);
    CHECK_EQ(atomic_load(&concurrency.most), 1);
    dispatch_release(serial);
}

// MARK: - Width changed on a live queue (from regressions.c)

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

int main(void) {
    check_start("private", 55);
    width();
    test_set_width_live();
    overcommit();
    check_pass();
    return 0;
}
