// Stress: 1,000,000 items over 1,000 queues (serial, concurrent with barriers, serial
// chains three deep, concurrent queues targeting serial ones, serial queues targeting
// concurrent ones), submitted from 2 threads. Checks, for every item, that it ran exactly
// once; for every serial queue, that each producer's items ran in submission order; for
// every serial chain, that no two of its items ran at once; and for every barrier, that it
// ran alone. Not a benchmark: no timing assertions, only a generous watchdog.
#include "check.h"

enum {
    PRODUCERS = 2,
    QUEUES = 1000,
    ITEMS_PER_PRODUCER = 500000,
    ITEMS = PRODUCERS * ITEMS_PER_PRODUCER,
    BARRIER_EVERY = 50,     // every 50th item a producer sends to a concurrent queue is a barrier
    SYNC_EVERY = 9973,      // and now and then an item is submitted with dispatch_sync_f
};

typedef enum {
    SERIAL,                 // 0..299: serial, on the default root queue
    CONCURRENT,             // 300..499: concurrent, with barriers
    SERIAL_ON_SERIAL,       // 500..649: serial, targeting serial queue q-500
    SERIAL_CHAIN,           // 650..749: serial -> serial 500+(q-650) -> serial q-650
    CONCURRENT_ON_SERIAL,   // 750..849: concurrent (with barriers) targeting serial q-750
    SERIAL_ON_CONCURRENT,   // 850..999: serial targeting concurrent 300+(q-850)
} queue_kind_t;

typedef struct {
    dispatch_queue_t queue;
    queue_kind_t kind;
    int domain;                     // serial domain: items in it never overlap (-1: none)
    bool fifo;                      // serial: each producer's items run in order
    bool barriers;
    atomic_long running;            // items of this queue running now (concurrent queues)
    atomic_int barrier_active;
    int last_seq[PRODUCERS];        // touched only by this (serial) queue's items
} stress_queue_t;

static stress_queue_t queues[QUEUES];
static atomic_int domain_running[QUEUES];
static atomic_uchar ran[ITEMS];
static atomic_long completed;
static atomic_long fifo_violations, exclusion_violations, barrier_violations;

static inline void decode(uintptr_t id, int *producer, int *queue, int *seq, bool *barrier) {
    int k = (int)(id % ITEMS_PER_PRODUCER);
    *producer = (int)(id / ITEMS_PER_PRODUCER);
    *queue = k % QUEUES;
    *seq = k / QUEUES;
    *barrier = queues[*queue].barriers && *seq % BARRIER_EVERY == BARRIER_EVERY - 1;
}

static void stress_item(void *context) {
    uintptr_t id = (uintptr_t)context;
    int producer, q, seq;
    bool barrier;
    decode(id, &producer, &q, &seq, &barrier);
    stress_queue_t *sq = &queues[q];

    if (sq->domain >= 0 && atomic_fetch_add(&domain_running[sq->domain], 1) != 0) {
        atomic_fetch_add(&exclusion_violations, 1);
    }
    if (sq->barriers) {
        long others = atomic_fetch_add(&sq->running, 1);
        if (barrier) {
            if (others != 0) atomic_fetch_add(&barrier_violations, 1);
            atomic_store(&sq->barrier_active, 1);
        } else if (atomic_load(&sq->barrier_active)) {
            atomic_fetch_add(&barrier_violations, 1);
        }
    }
    if (sq->fifo) {
        if (seq != sq->last_seq[producer] + 1) atomic_fetch_add(&fifo_violations, 1);
        sq->last_seq[producer] = seq;
    }
    atomic_fetch_add_explicit(&ran[id], 1, memory_order_relaxed);

    if (sq->barriers) {
        if (barrier) {
            if (atomic_load(&sq->running) != 1) atomic_fetch_add(&barrier_violations, 1);
            atomic_store(&sq->barrier_active, 0);
        }
        atomic_fetch_sub(&sq->running, 1);
    }
    if (sq->domain >= 0) atomic_fetch_sub(&domain_running[sq->domain], 1);
    atomic_fetch_add_explicit(&completed, 1, memory_order_release);
}

static void make_queues(void) {
    char label[64];
    for (int q = 0; q < QUEUES; q++) {
        stress_queue_t *sq = &queues[q];
        snprintf(label, sizeof label, "com.grandcentral.tests.stress.%d", q);
        for (int p = 0; p < PRODUCERS; p++) sq->last_seq[p] = -1;
        if (q < 300) {
            sq->kind = SERIAL;
            sq->queue = dispatch_queue_create(label, DISPATCH_QUEUE_SERIAL);
            sq->domain = q;
            sq->fifo = true;
        } else if (q < 500) {
            sq->kind = CONCURRENT;
            sq->queue = dispatch_queue_create(label, DISPATCH_QUEUE_CONCURRENT);
            sq->domain = -1;
            sq->barriers = true;
        } else if (q < 650) {
            sq->kind = SERIAL_ON_SERIAL;
            sq->queue = dispatch_queue_create_with_target(label, DISPATCH_QUEUE_SERIAL, queues[q - 500].queue);
            sq->domain = q - 500;
            sq->fifo = true;
        } else if (q < 750) {
            sq->kind = SERIAL_CHAIN;
            sq->queue = dispatch_queue_create_with_target(label, DISPATCH_QUEUE_SERIAL, queues[500 + (q - 650)].queue);
            sq->domain = q - 650;
            sq->fifo = true;
        } else if (q < 850) {
            sq->kind = CONCURRENT_ON_SERIAL;
            sq->queue = dispatch_queue_create(label, DISPATCH_QUEUE_CONCURRENT);
            dispatch_set_target_queue(sq->queue, queues[q - 750].queue);
            sq->domain = q - 750;
            sq->barriers = true;
        } else {
            sq->kind = SERIAL_ON_CONCURRENT;
            sq->queue = dispatch_queue_create_with_target(label, DISPATCH_QUEUE_SERIAL, queues[300 + (q - 850)].queue);
            sq->domain = q;   // a domain of its own: 850..999 are not used by the chains above
            sq->fifo = true;
        }
        CHECKF(sq->queue != NULL, "queue %d was not created", q);
    }
}

static void *producer(void *argument) {
    int p = (int)(intptr_t)argument;
    for (int k = 0; k < ITEMS_PER_PRODUCER; k++) {
        uintptr_t id = (uintptr_t)p * ITEMS_PER_PRODUCER + (uintptr_t)k;
        int producer_index, q, seq;
        bool barrier;
        decode(id, &producer_index, &q, &seq, &barrier);
        dispatch_queue_t queue = queues[q].queue;
        if (barrier) {
            dispatch_barrier_async_f(queue, (void *)id, stress_item);
        } else if (k % SYNC_EVERY == SYNC_EVERY - 1) {
            dispatch_sync_f(queue, (void *)id, stress_item);
        } else {
            dispatch_async_f(queue, (void *)id, stress_item);
        }
    }
    return NULL;
}

int main(void) {
    check_start("stress", 110);

    check_section("creating 1000 queues");
    make_queues();

    check_section("2 threads submit 1,000,000 items");
    uint64_t start = now_ns();
    pthread_t threads[PRODUCERS];
    for (int p = 0; p < PRODUCERS; p++) CHECK(pthread_create(&threads[p], NULL, producer, (void *)(intptr_t)p) == 0);
    for (int p = 0; p < PRODUCERS; p++) pthread_join(threads[p], NULL);
    uint64_t submitted = now_ns();

    check_section("every item runs");
    WAIT_FOR_COUNT(&completed, ITEMS, 90);
    uint64_t finished = now_ns();
    printf("   submitted in %.2f s, all ran after %.2f s\n", (double)(submitted - start) / 1e9,
           (double)(finished - start) / 1e9);
    sleep_ms(20);
    CHECK_EQ(atomic_load(&completed), ITEMS);

    check_section("each item ran exactly once");
    for (long id = 0; id < ITEMS; id++) {
        CHECKF(atomic_load(&ran[id]) == 1, "item %ld (producer %ld, queue %ld) ran %d times", id,
               id / ITEMS_PER_PRODUCER, (id % ITEMS_PER_PRODUCER) % QUEUES, atomic_load(&ran[id]));
    }

    check_section("serial queues kept each producer's order; serial chains and barriers ran alone");
    CHECK_EQ(atomic_load(&fifo_violations), 0);
    CHECK_EQ(atomic_load(&exclusion_violations), 0);
    CHECK_EQ(atomic_load(&barrier_violations), 0);
    for (int q = 0; q < QUEUES; q++) {
        if (!queues[q].fifo) continue;
        for (int p = 0; p < PRODUCERS; p++) {
            CHECKF(queues[q].last_seq[p] == ITEMS_PER_PRODUCER / QUEUES - 1,
                   "queue %d: producer %d's last item was %d", q, p, queues[q].last_seq[p]);
        }
    }

    check_section("releasing the queues");
    for (int q = QUEUES - 1; q >= 0; q--) dispatch_release(queues[q].queue);
    check_pass();
    return 0;
}
