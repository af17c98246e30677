// Barriers on a concurrent queue: a barrier starts only after every item submitted
// before it has finished, runs alone, and every item submitted after it waits for it.
// dispatch_barrier_async_f, dispatch_barrier_sync_f, dispatch_barrier_async_and_wait_f.
#include "check.h"

enum { OPS = 400, BARRIER_EVERY = 25 };

// Shared by the items of one run; every field is atomic because items run concurrently.
typedef struct {
    concurrency_t concurrency;   // items and barriers running now
    atomic_long items_finished;  // non-barrier items finished
    atomic_long barriers_finished;
    atomic_long violations;
    atomic_long all_finished;
    char first_violation[256];
    atomic_flag violation_recorded;
} barrier_run_t;

typedef struct {
    barrier_run_t *run;
    bool is_barrier;
    long items_before;     // non-barrier items submitted before this op
    long barriers_before;  // barriers submitted before this op
} barrier_op_t;

static void violation(barrier_run_t *run, const char *what, long expected, long seen) {
    if (!atomic_flag_test_and_set(&run->violation_recorded)) {
        snprintf(run->first_violation, sizeof run->first_violation, "%s: expected %ld, saw %ld", what, expected, seen);
    }
    atomic_fetch_add(&run->violations, 1);
}

static void run_op(void *context) {
    barrier_op_t *op = context;
    barrier_run_t *run = op->run;
    concurrency_enter(&run->concurrency);
    if (op->is_barrier) {
        long running = atomic_load(&run->concurrency.running);
        if (running != 1) violation(run, "items running alongside a barrier", 1, running);
        long finished = atomic_load(&run->items_finished);
        if (finished != op->items_before) violation(run, "items finished before a barrier started", op->items_before, finished);
        sleep_ms(2);
        running = atomic_load(&run->concurrency.running);
        if (running != 1) violation(run, "items started during a barrier", 1, running);
    } else {
        long barriers = atomic_load(&run->barriers_finished);
        if (barriers != op->barriers_before) violation(run, "barriers finished before an item started", op->barriers_before, barriers);
        busy_wait_ns(20000);
    }
    concurrency_exit(&run->concurrency);
    atomic_fetch_add(op->is_barrier ? &run->barriers_finished : &run->items_finished, 1);
    atomic_fetch_add(&run->all_finished, 1);
}

static barrier_run_t run;
static barrier_op_t ops[OPS];

static void barrier_async_interleaved(void) {
    check_section("dispatch_barrier_async_f: each barrier waits for earlier items and holds back later ones");
    memset(&run, 0, sizeof run);
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.barriers", DISPATCH_QUEUE_CONCURRENT);
    long items = 0, barriers = 0;
    for (int i = 0; i < OPS; i++) {
        bool is_barrier = i % BARRIER_EVERY == BARRIER_EVERY - 1;
        ops[i] = (barrier_op_t){ &run, is_barrier, items, barriers };
        if (is_barrier) {
            dispatch_barrier_async_f(queue, &ops[i], run_op);
            barriers++;
        } else {
            dispatch_async_f(queue, &ops[i], run_op);
            items++;
        }
    }
    WAIT_FOR_COUNT(&run.all_finished, OPS, 30);
    CHECKF(atomic_load(&run.violations) == 0, "%ld violations, first: %s", atomic_load(&run.violations), run.first_violation);
    CHECK_EQ(atomic_load(&run.barriers_finished), barriers);
    CHECK_EQ(atomic_load(&run.items_finished), items);
    printf("   most items running at once between barriers: %ld\n", atomic_load(&run.concurrency.most));
    dispatch_release(queue);
}

// MARK: - Synchronous barriers

typedef struct {
    dispatch_queue_t queue;
    atomic_long earlier_finished;
    atomic_long later_started;
    long earlier_seen_by_barrier;
    long later_started_during_barrier;
} sync_barrier_t;

static sync_barrier_t sync_state;

static void earlier_item(void *context) {
    (void)context;
    sleep_ms(5);
    atomic_fetch_add(&sync_state.earlier_finished, 1);
}

static void later_item(void *context) {
    (void)context;
    atomic_fetch_add(&sync_state.later_started, 1);
}

static void sync_barrier_body(void *context) {
    (void)context;
    sync_state.earlier_seen_by_barrier = atomic_load(&sync_state.earlier_finished);
    for (int i = 0; i < 10; i++) dispatch_async_f(sync_state.queue, NULL, later_item);
    sleep_ms(50);
    sync_state.later_started_during_barrier = atomic_load(&sync_state.later_started);
}

static void synchronous_barrier(const char *name, void (*submit)(dispatch_queue_t, void *, dispatch_function_t)) {
    check_section(name);
    memset(&sync_state, 0, sizeof sync_state);
    sync_state.queue = dispatch_queue_create("com.grandcentral.tests.sync-barrier", DISPATCH_QUEUE_CONCURRENT);
    for (int i = 0; i < 10; i++) dispatch_async_f(sync_state.queue, NULL, earlier_item);
    submit(sync_state.queue, NULL, sync_barrier_body);
    CHECK_EQ(sync_state.earlier_seen_by_barrier, 10);
    CHECK_EQ(sync_state.later_started_during_barrier, 0);
    WAIT_FOR_COUNT(&sync_state.later_started, 10, 30);
    dispatch_release(sync_state.queue);
}

static void barrier_on_serial_queue(void) {
    check_section("a barrier on a serial queue is an ordinary item in FIFO order");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.serial-barrier", NULL);
    memset(&run, 0, sizeof run);
    long items = 0, barriers = 0;
    for (int i = 0; i < 100; i++) {
        bool is_barrier = i % 3 == 0;
        ops[i] = (barrier_op_t){ &run, is_barrier, items, barriers };
        if (is_barrier) {
            dispatch_barrier_async_f(queue, &ops[i], run_op);
            barriers++;
        } else {
            dispatch_async_f(queue, &ops[i], run_op);
            items++;
        }
    }
    dispatch_barrier_sync_f(queue, NULL, noop_function);
    CHECK_EQ(atomic_load(&run.all_finished), 100);
    CHECKF(atomic_load(&run.violations) == 0, "%ld violations, first: %s", atomic_load(&run.violations), run.first_violation);
    CHECK_EQ(atomic_load(&run.concurrency.most), 1);
    dispatch_release(queue);
}

#ifdef __BLOCKS__
static void blocks(void) {
    check_section("blocks: dispatch_barrier_async, dispatch_barrier_sync, dispatch_barrier_async_and_wait");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.barrier-blocks", DISPATCH_QUEUE_CONCURRENT);
    __block atomic_long before = 0, after = 0, running = 0, violations = 0;
    for (int round = 0; round < 3; round++) {
        atomic_store(&before, 0);
        atomic_store(&after, 0);
        for (int i = 0; i < 20; i++) {
            dispatch_async(queue, ^{
                atomic_fetch_add(&running, 1);
                busy_wait_ns(50000);
                atomic_fetch_sub(&running, 1);
                atomic_fetch_add(&before, 1);
            });
        }
        void (^barrier)(void) = ^{
            if (atomic_load(&before) != 20 || atomic_load(&running) != 0) atomic_fetch_add(&violations, 1);
            sleep_ms(5);
            if (atomic_load(&after) != 0) atomic_fetch_add(&violations, 1);
        };
        if (round == 0) dispatch_barrier_async(queue, barrier);
        if (round == 1) dispatch_barrier_sync(queue, barrier);
        if (round == 2) dispatch_barrier_async_and_wait(queue, barrier);
        for (int i = 0; i < 20; i++) dispatch_async(queue, ^{ atomic_fetch_add(&after, 1); });
        WAIT_FOR_COUNT(&after, 20, 30);
        CHECKF(atomic_load(&violations) == 0, "round %d: the barrier block did not run alone", round);
    }
    dispatch_release(queue);
}
#endif

int main(void) {
    check_start("barriers", 55);
    barrier_async_interleaved();
    synchronous_barrier("dispatch_barrier_sync_f waits for earlier items and holds back later ones",
                        dispatch_barrier_sync_f);
    synchronous_barrier("dispatch_barrier_async_and_wait_f waits for earlier items and holds back later ones",
                        dispatch_barrier_async_and_wait_f);
    barrier_on_serial_queue();
#ifdef __BLOCKS__
    blocks();
#endif
    check_pass();
    return 0;
}
