// dispatch_apply_f: every index runs exactly once and all have finished when the call
// returns; DISPATCH_APPLY_AUTO; nested applies; apply on a serial queue runs the indices
// one at a time, in order; zero iterations run nothing.
#include "check.h"

enum { ITERATIONS = 100000, OUTER = 8, INNER = 500 };

static atomic_int hits[ITERATIONS];
static atomic_long calls;

static void hit(void *context, size_t index) {
    (void)context;
    atomic_fetch_add(&hits[index], 1);
    atomic_fetch_add(&calls, 1);
}

static void expect_every_index_once(size_t n, const char *where) {
    CHECKF(atomic_load(&calls) == (long)n, "%s: %ld calls for %zu iterations", where, atomic_load(&calls), n);
    for (size_t i = 0; i < n; i++) {
        CHECKF(atomic_load(&hits[i]) == 1, "%s: index %zu ran %d times", where, i, atomic_load(&hits[i]));
    }
}

static void reset(void) {
    for (size_t i = 0; i < ITERATIONS; i++) atomic_store(&hits[i], 0);
    atomic_store(&calls, 0);
}

static void every_index_once(void) {
    check_section("every index runs exactly once, all finished when dispatch_apply_f returns");
    struct { dispatch_queue_t queue; const char *name; } cases[] = {
        { DISPATCH_APPLY_AUTO, "DISPATCH_APPLY_AUTO" },
        { dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0), "the default global queue" },
        { dispatch_get_global_queue(QOS_CLASS_UTILITY, 0), "the utility global queue" },
        { dispatch_queue_create("com.grandcentral.tests.apply-concurrent", DISPATCH_QUEUE_CONCURRENT), "a concurrent queue" },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        reset();
        dispatch_apply_f(ITERATIONS, cases[c].queue, NULL, hit);
        expect_every_index_once(ITERATIONS, cases[c].name);
        reset();
        dispatch_apply_f(1, cases[c].queue, NULL, hit);
        expect_every_index_once(1, cases[c].name);
        reset();
        dispatch_apply_f(0, cases[c].queue, NULL, hit);
        CHECK_EQ(atomic_load(&calls), 0);
    }
    dispatch_release(cases[3].queue);
}

// MARK: - Serial queue

static long serial_order[1000];
static long serial_next;
static concurrency_t serial_concurrency;

static void serial_step(void *context, size_t index) {
    (void)context;
    concurrency_enter(&serial_concurrency);
    serial_order[serial_next++] = (long)index;
    concurrency_exit(&serial_concurrency);
}

static void apply_on_serial_queue(void) {
    check_section("dispatch_apply_f on a serial queue runs the indices one at a time, in order");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.apply-serial", NULL);
    serial_next = 0;
    memset(&serial_concurrency, 0, sizeof serial_concurrency);
    dispatch_apply_f(1000, queue, NULL, serial_step);
    CHECK_EQ(serial_next, 1000);
    for (long i = 0; i < 1000; i++) CHECK_EQ(serial_order[i], i);
    CHECK_EQ(atomic_load(&serial_concurrency.most), 1);
    dispatch_release(queue);
}

// MARK: - Nesting

static atomic_int pairs[OUTER][INNER];

typedef struct {
    size_t outer;
} inner_context_t;

static void inner_step(void *context, size_t index) {
    inner_context_t *inner = context;
    atomic_fetch_add(&pairs[inner->outer][index], 1);
}

static void outer_step(void *context, size_t index) {
    dispatch_queue_t queue = context;
    inner_context_t inner = { index };
    dispatch_apply_f(INNER, queue, &inner, inner_step);
    // The inner apply has finished every one of its indices.
    for (size_t i = 0; i < INNER; i++) {
        if (atomic_load(&pairs[index][i]) != 1) atomic_store(&pairs[index][i], -1000);
    }
}

static void nested_apply(void) {
    check_section("nested dispatch_apply_f: every (outer, inner) pair runs exactly once");
    dispatch_queue_t queues[] = {
        DISPATCH_APPLY_AUTO,
        dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0),
        dispatch_queue_create("com.grandcentral.tests.apply-nested", DISPATCH_QUEUE_CONCURRENT),
    };
    for (size_t q = 0; q < 3; q++) {
        memset(pairs, 0, sizeof pairs);
        dispatch_apply_f(OUTER, queues[q], queues[q], outer_step);
        for (size_t o = 0; o < OUTER; o++) {
            for (size_t i = 0; i < INNER; i++) {
                CHECKF(atomic_load(&pairs[o][i]) == 1, "queue case %zu: pair (%zu, %zu) ran %d times", q, o, i,
                       atomic_load(&pairs[o][i]));
            }
        }
    }
    dispatch_release(queues[2]);
}

// MARK: - Apply from within a queue item

static atomic_long from_item_done;

static void apply_from_item(void *context) {
    (void)context;
    reset();
    dispatch_apply_f(10000, DISPATCH_APPLY_AUTO, NULL, hit);
    atomic_store(&from_item_done, 1);
}

static void apply_inside_queue_item(void) {
    check_section("dispatch_apply_f called from an item on a serial queue");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.apply-caller", NULL);
    dispatch_async_f(queue, NULL, apply_from_item);
    WAIT_FOR_COUNT(&from_item_done, 1, 30);
    expect_every_index_once(10000, "apply inside an item");
    dispatch_release(queue);
}

// MARK: - Order on a concurrent queue

// An apply's helpers are items of its queue: a barrier submitted before the apply runs
// before any of its iterations, and a suspended queue runs none of them until resumed. The
// helpers of the apply before are often still queued when the next one starts (a caller
// that does two iterations alone outruns the pool); they must not help the next one.
// 100,000 rounds: a review found e01369d's leftover helpers joining the next apply in about
// 1 round of 10.
enum { ORDER_ROUNDS = 100000, SUSPEND_ROUNDS = 3000 };

static atomic_int barrier_ran, queue_resumed;
static atomic_long ran_early, ran_suspended;
static dispatch_queue_t order_queue;

static void nothing(void *context, size_t index) { (void)context; (void)index; }
static void mark_barrier(void *context) { (void)context; atomic_store(&barrier_ran, 1); }
static void after_barrier(void *context, size_t index) {
    (void)context; (void)index;
    if (!atomic_load(&barrier_ran)) atomic_fetch_add(&ran_early, 1);
}
static void after_resume(void *context, size_t index) {
    (void)context; (void)index;
    if (!atomic_load(&queue_resumed)) atomic_fetch_add(&ran_suspended, 1);
}
static void *apply_on_suspended(void *arg) {
    (void)arg;
    dispatch_apply_f(2, order_queue, NULL, after_resume);
    return NULL;
}

static void order_on_concurrent_queue(void) {
    check_section("a barrier before an apply on a concurrent queue runs before its iterations");
    order_queue = dispatch_queue_create("com.grandcentral.tests.apply-order", DISPATCH_QUEUE_CONCURRENT);
    for (int round = 0; round < ORDER_ROUNDS; round++) {
        dispatch_apply_f(2, order_queue, NULL, nothing);
        atomic_store(&barrier_ran, 0);
        dispatch_barrier_async_f(order_queue, NULL, mark_barrier);
        dispatch_apply_f(2, order_queue, NULL, after_barrier);
    }
    CHECKF(atomic_load(&ran_early) == 0, "%ld iterations ran before the barrier submitted before their apply",
           atomic_load(&ran_early));

    check_section("an apply on a suspended concurrent queue runs nothing until it resumes");
    for (int round = 0; round < SUSPEND_ROUNDS; round++) {
        dispatch_apply_f(2, order_queue, NULL, nothing);
        dispatch_suspend(order_queue);
        atomic_store(&queue_resumed, 0);
        pthread_t thread;
        CHECK_EQ(pthread_create(&thread, NULL, apply_on_suspended, NULL), 0);
        usleep(50);
        atomic_store(&queue_resumed, 1);
        dispatch_resume(order_queue);
        CHECK_EQ(pthread_join(thread, NULL), 0);
    }
    CHECKF(atomic_load(&ran_suspended) == 0, "%ld iterations ran on the suspended queue", atomic_load(&ran_suspended));
    dispatch_release(order_queue);
}

#ifdef __BLOCKS__
static void blocks(void) {
    check_section("blocks: dispatch_apply, nested and on a serial queue");
    reset();
    dispatch_apply(ITERATIONS, DISPATCH_APPLY_AUTO, ^(size_t i) { hit(NULL, i); });
    expect_every_index_once(ITERATIONS, "dispatch_apply");
    __block atomic_long total = 0;
    dispatch_apply(10, dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0), ^(size_t outer) {
        dispatch_apply(100, DISPATCH_APPLY_AUTO, ^(size_t inner) {
            atomic_fetch_add(&total, (long)(outer * 100 + inner));
        });
    });
    CHECK_EQ(atomic_load(&total), 999L * 1000 / 2);
    dispatch_queue_t serial = dispatch_queue_create("com.grandcentral.tests.apply-blocks-serial", NULL);
    __block long next = 0;
    __block long misordered = 0;
    dispatch_apply(500, serial, ^(size_t i) {
        if ((long)i != next) misordered++;
        next++;
    });
    CHECK_EQ(next, 500);
    CHECK_EQ(misordered, 0);
    dispatch_release(serial);
}
#endif

// MARK: - Regressions (from regressions.c): apply and barriers, apply inside a narrow queue

// --- dispatch_apply on a concurrent queue waits behind an earlier barrier -------------
static atomic_int in_barrier;
static atomic_int overlapping;

static void long_barrier(void *context) {
    (void)context;
    atomic_store(&in_barrier, 1);
    sleep_ms(200);
    atomic_store(&in_barrier, 0);
}

static void apply_iteration(void *context, size_t index) {
    (void)context;
    (void)index;
    if (atomic_load(&in_barrier)) atomic_fetch_add(&overlapping, 1);
    sleep_ms(1);
}

static void test_apply_respects_barrier(void) {
    check_section("apply waits behind a barrier");
    dispatch_queue_t q = dispatch_queue_create("regress.apply", DISPATCH_QUEUE_CONCURRENT);
    dispatch_barrier_async_f(q, NULL, long_barrier);
    sleep_ms(30);
    dispatch_apply_f(20, q, NULL, apply_iteration);
    CHECK_EQ(atomic_load(&overlapping), 0);
    dispatch_release(q);
}

// --- dispatch_apply from inside items of a width-limited queue, onto that queue -------
static dispatch_queue_t narrow_queue;
static atomic_long nested_iterations;
static atomic_long nested_done;

static void nested_iteration(void *context, size_t index) {
    (void)context;
    (void)index;
    atomic_fetch_add(&nested_iterations, 1);
}

static void apply_from_narrow_item(void *context) {
    (void)context;
    dispatch_apply_f(8, narrow_queue, NULL, nested_iteration);
    atomic_fetch_add(&nested_done, 1);
}

static void test_apply_inside_width_limited_queue(void) {
    check_section("apply from items that hold all of a queue's width");
    narrow_queue = dispatch_queue_create("regress.narrow", DISPATCH_QUEUE_CONCURRENT);
    dispatch_queue_set_width(narrow_queue, 2);
    dispatch_async_f(narrow_queue, NULL, apply_from_narrow_item);
    dispatch_async_f(narrow_queue, NULL, apply_from_narrow_item);
    WAIT_FOR_COUNT(&nested_done, 2, 10.0);
    CHECK_EQ(atomic_load(&nested_iterations), 16);
    dispatch_release(narrow_queue);
}

int main(void) {
    check_start("apply", 55);
    every_index_once();
    apply_on_serial_queue();
    nested_apply();
    apply_inside_queue_item();
    order_on_concurrent_queue();
    test_apply_respects_barrier();
    test_apply_inside_width_limited_queue();
#ifdef __BLOCKS__
    blocks();
#endif
    check_pass();
    return 0;
}
