// A source and a queue on one serial target: a serial queue Q and a DATA_ADD source S
// target the same serial queue T, which another thread suspends and resumes in a loop
// while 100,000 items go to Q and two threads merge 100,000 ones into S. Queues and
// sources share one drain engine (the drain lock, the budget and its yield, the
// clear-then-recheck unlock); this is the test of the two kinds together under
// suspension. Checks: every item ran exactly once and in order; S's handler saw the whole
// sum and never data 0; nothing on T ran concurrently with anything else on T (Q's items,
// S's handler); the cancel handler runs once, and no event handler after it. Counts only,
// no timing: the pauses only spread the work out so that suspensions land between items.
#include "check.h"

#define ITEMS 100000
#define MERGES 100000

static dispatch_queue_t T, Q;
static dispatch_source_t S;
static atomic_int inside;
static atomic_long next_item, items_ran, order_violations, overlap;
static atomic_ulong delivered;
static atomic_long handler_calls, zero_data, cancels, events_after_cancel;
static atomic_int stop_suspender;
static atomic_long suspensions;

static void enter_target(void) {
    if (atomic_exchange(&inside, 1) != 0) atomic_fetch_add(&overlap, 1);
}
static void leave_target(void) { atomic_store(&inside, 0); }

static void item(void *context) {
    enter_target();
    long i = (long)(intptr_t)context;
    if (atomic_load(&next_item) != i) atomic_fetch_add(&order_violations, 1);
    atomic_store(&next_item, i + 1);
    atomic_fetch_add(&items_ran, 1);
    busy_wait_ns(500);
    leave_target();
}

static void event(void *context) {
    (void)context;
    enter_target();
    unsigned long d = dispatch_source_get_data(S);
    if (d == 0) atomic_fetch_add(&zero_data, 1);
    if (atomic_load(&cancels) != 0) atomic_fetch_add(&events_after_cancel, 1);
    atomic_fetch_add(&delivered, d);
    atomic_fetch_add(&handler_calls, 1);
    leave_target();
}

static void cancelled(void *context) {
    (void)context;
    atomic_fetch_add(&cancels, 1);
}

static void *suspender(void *arg) {
    (void)arg;
    while (!atomic_load(&stop_suspender)) {
        dispatch_suspend(T);
        atomic_fetch_add(&suspensions, 1);
        busy_wait_ns(20000);
        dispatch_resume(T);
        busy_wait_ns(20000);
    }
    return NULL;
}

static void *merger(void *arg) {
    (void)arg;
    for (int i = 0; i < MERGES / 2; i++) {
        dispatch_source_merge_data(S, 1);
        busy_wait_ns(1000);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    check_start("source_shared_target", 100);
    for (int r = 0; r < rounds; r++) {
        check_section("Q and S share a serial target suspended and resumed by another thread");
        atomic_store(&next_item, 0); atomic_store(&items_ran, 0); atomic_store(&delivered, 0);
        atomic_store(&handler_calls, 0); atomic_store(&cancels, 0); atomic_store(&stop_suspender, 0);
        T = dispatch_queue_create("stress.target", NULL);
        Q = dispatch_queue_create_with_target("stress.q", NULL, T);
        S = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD, 0, 0, T);
        dispatch_source_set_event_handler_f(S, event);
        dispatch_source_set_cancel_handler_f(S, cancelled);
        dispatch_activate(S);
        pthread_t sus, m1, m2;
        pthread_create(&sus, NULL, suspender, NULL);
        pthread_create(&m1, NULL, merger, NULL);
        pthread_create(&m2, NULL, merger, NULL);
        for (long i = 0; i < ITEMS; i++) {
            dispatch_async_f(Q, (void *)(intptr_t)i, item);
            if (i % 64 == 0) busy_wait_ns(10000);
        }
        pthread_join(m1, NULL);
        pthread_join(m2, NULL);
        uint64_t give_up = now_ns() + 120000000000ull;
        while (atomic_load(&items_ran) < ITEMS || atomic_load(&delivered) < MERGES) {
            if (now_ns() > give_up) FAIL("gave up: items %ld of %d, sum %lu of %d", atomic_load(&items_ran), ITEMS,
                                         atomic_load(&delivered), MERGES);
            sleep_ms(1);
        }
        atomic_store(&stop_suspender, 1);
        pthread_join(sus, NULL);
        dispatch_source_cancel(S);
        give_up = now_ns() + 30000000000ull;
        while (atomic_load(&cancels) == 0) {
            if (now_ns() > give_up) FAIL("the cancel handler never ran");
            sleep_ms(1);
        }
        CHECK_EQ(atomic_load(&items_ran), ITEMS);
        CHECK_EQ(atomic_load(&order_violations), 0);
        CHECK_EQ(atomic_load(&overlap), 0);
        CHECK_EQ_U64(atomic_load(&delivered), MERGES);
        CHECK_EQ(atomic_load(&zero_data), 0);
        CHECK_EQ(atomic_load(&cancels), 1);
        CHECK_EQ(atomic_load(&events_after_cancel), 0);
        printf("round %d: %ld handler calls, %ld suspensions so far\n", r, atomic_load(&handler_calls),
               atomic_load(&suspensions));
        dispatch_release(S);
        dispatch_release(Q);
        dispatch_release(T);
    }
    check_pass();
    return 0;
}
