// cmake-consumer: a program that finds GrandCentral with find_package(GrandCentral) and
// links GrandCentral::grandcentral. It sums 1..100 on a concurrent queue, one group item per
// number, folds the results through a serial queue, and checks the total.
#include <dispatch/dispatch.h>

#include <stdio.h>

static dispatch_queue_t serial;
static long total;

static void add(void *context) {
    total += (long)(size_t)context;
}

static void submit(void *context) {
    dispatch_async_f(serial, context, add);
}

static void read_total(void *context) {
    *(long *)context = total;
}

int main(void) {
    serial = dispatch_queue_create("consumer.total", DISPATCH_QUEUE_SERIAL);
    dispatch_queue_t workers = dispatch_queue_create("consumer.workers", DISPATCH_QUEUE_CONCURRENT);
    dispatch_group_t group = dispatch_group_create();
    for (size_t i = 1; i <= 100; i++)
        dispatch_group_async_f(group, workers, (void *)i, submit);
    if (dispatch_group_wait(group, dispatch_time(DISPATCH_TIME_NOW, 10 * (int64_t)NSEC_PER_SEC)) != 0) {
        fprintf(stderr, "cmake-consumer: FAILED: group did not finish within 10 s\n");
        return 1;
    }
    long seen = 0;
    dispatch_sync_f(serial, &seen, read_total);
    dispatch_release(group);
    dispatch_release(workers);
    dispatch_release(serial);
    printf("cmake-consumer: find_package(GrandCentral) works; 1 + ... + 100 = %ld%s\n",
           seen, seen == 5050 ? "" : " (expected 5050)");
    return seen == 5050 ? 0 : 1;
}
