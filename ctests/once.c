// dispatch_once_f: the initializer runs exactly once however many threads race for it;
// every caller returns only after it has finished; the predicate then reads ~0l (the
// header's inline fast path depends on that value).
#include "check.h"

enum { THREADS = 16, ROUNDS = 50 };

typedef struct {
    dispatch_once_t predicate;
    atomic_long runs;
    atomic_long finished;      // set at the end of the initializer
} once_cell_t;

static once_cell_t cells[ROUNDS];
static pthread_barrier_t start_line;
static atomic_long returned_early;

static void slow_initializer(void *context) {
    once_cell_t *cell = context;
    atomic_fetch_add(&cell->runs, 1);
    sleep_ms(2);   // a window in which every other thread arrives
    atomic_store(&cell->finished, 1);
}

static void *racer(void *argument) {
    (void)argument;
    for (int round = 0; round < ROUNDS; round++) {
        pthread_barrier_wait(&start_line);
        dispatch_once_f(&cells[round].predicate, &cells[round], slow_initializer);
        if (atomic_load(&cells[round].finished) != 1) atomic_fetch_add(&returned_early, 1);
    }
    return NULL;
}

static void contention(void) {
    check_section("16 threads racing on 50 predicates: each initializer runs once, callers wait for it");
    memset(cells, 0, sizeof cells);
    pthread_barrier_init(&start_line, NULL, THREADS);
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&threads[i], NULL, racer, NULL) == 0);
    for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&start_line);
    for (int round = 0; round < ROUNDS; round++) {
        CHECKF(atomic_load(&cells[round].runs) == 1, "round %d: the initializer ran %ld times", round,
               atomic_load(&cells[round].runs));
        CHECKF(cells[round].predicate == ~0l, "round %d: the predicate is %ld, expected ~0l", round,
               (long)cells[round].predicate);
    }
    CHECK_EQ(atomic_load(&returned_early), 0);
}

static atomic_long plain_runs;

static void count_run(void *context) {
    (void)context;
    atomic_fetch_add(&plain_runs, 1);
}

static void predicate_values(void) {
    check_section("a fresh predicate is 0; after dispatch_once_f it is ~0l; later calls do nothing");
    static dispatch_once_t predicate;   // zero-initialized, as GCD requires
    CHECK_EQ(predicate, 0);
    dispatch_once_f(&predicate, NULL, count_run);
    CHECK_EQ(predicate, ~0l);
    for (int i = 0; i < 1000; i++) dispatch_once_f(&predicate, NULL, count_run);
    CHECK_EQ(atomic_load(&plain_runs), 1);

    check_section("a predicate already at ~0l never runs its initializer");
    dispatch_once_t done = ~0l;
    dispatch_once_f(&done, NULL, count_run);
    CHECK_EQ(atomic_load(&plain_runs), 1);

    check_section("independent predicates run independently");
    dispatch_once_t a = 0, b = 0;
    dispatch_once_f(&a, NULL, count_run);
    dispatch_once_f(&b, NULL, count_run);
    dispatch_once_f(&a, NULL, count_run);
    CHECK_EQ(atomic_load(&plain_runs), 3);
}

// MARK: - From queue items

static dispatch_once_t queue_predicate;
static atomic_long queue_runs;
static atomic_long queue_early;
static atomic_long queue_finished;

static void queue_initializer(void *context) {
    (void)context;
    atomic_fetch_add(&queue_runs, 1);
    sleep_ms(20);
    atomic_store(&queue_finished, 1);
}

static void once_from_apply(void *context, size_t index) {
    (void)context;
    (void)index;
    dispatch_once_f(&queue_predicate, NULL, queue_initializer);
    if (atomic_load(&queue_finished) != 1) atomic_fetch_add(&queue_early, 1);
}

static void from_dispatch_apply(void) {
    check_section("dispatch_once_f from 1000 dispatch_apply_f iterations");
    dispatch_apply_f(1000, DISPATCH_APPLY_AUTO, NULL, once_from_apply);
    CHECK_EQ(atomic_load(&queue_runs), 1);
    CHECK_EQ(atomic_load(&queue_early), 0);
    CHECK_EQ(queue_predicate, ~0l);
}

#ifdef __BLOCKS__
static void blocks(void) {
    check_section("blocks: dispatch_once");
    static dispatch_once_t predicate;
    __block int runs = 0;
    for (int i = 0; i < 100; i++) dispatch_once(&predicate, ^{ runs++; });
    CHECK_EQ(runs, 1);
    CHECK_EQ(predicate, ~0l);
    __block atomic_long racing_runs = 0;
    static dispatch_once_t racing;
    dispatch_apply(200, DISPATCH_APPLY_AUTO, ^(size_t i) {
        (void)i;
        dispatch_once(&racing, ^{
            sleep_ms(10);
            atomic_fetch_add(&racing_runs, 1);
        });
        if (atomic_load(&racing_runs) != 1) atomic_fetch_add(&racing_runs, 1000);
    });
    CHECK_EQ(atomic_load(&racing_runs), 1);
}
#endif

int main(void) {
    check_start("once", 55);
    contention();
    predicate_values();
    from_dispatch_apply();
#ifdef __BLOCKS__
    blocks();
#endif
    check_pass();
    return 0;
}
