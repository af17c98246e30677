// Semaphores: a negative initial value gives NULL; a wait that times out returns non-zero
// (and not before its deadline); signal returns non-zero exactly when it woke a waiter;
// counts are conserved between producers and consumers; a semaphore of 1 is a lock.
#include "check.h"

static void creation(void) {
    check_section("dispatch_semaphore_create with a negative value returns NULL");
    CHECK(dispatch_semaphore_create(-1) == NULL);
    CHECK(dispatch_semaphore_create(LONG_MIN) == NULL);
    dispatch_semaphore_t zero = dispatch_semaphore_create(0);
    dispatch_semaphore_t many = dispatch_semaphore_create(1000);
    CHECK(zero != NULL && many != NULL);
    dispatch_release(zero);
    dispatch_release(many);
}

static void timeouts(void) {
    check_section("a wait that cannot succeed times out with non-zero, not before its deadline");
    dispatch_semaphore_t semaphore = dispatch_semaphore_create(0);
    CHECK(dispatch_semaphore_wait(semaphore, DISPATCH_TIME_NOW) != 0);
    uint64_t start = now_ns();
    CHECK(dispatch_semaphore_wait(semaphore, dispatch_time(DISPATCH_TIME_NOW, 50 * (int64_t)NSEC_PER_MSEC)) != 0);
    uint64_t waited = now_ns() - start;
    CHECKF(waited >= 50 * NSEC_PER_MSEC, "timed out after %llu us, before the 50 ms deadline",
           (unsigned long long)(waited / 1000));
    uint64_t real_start = realtime_ns();
    CHECK(dispatch_semaphore_wait(semaphore, dispatch_walltime(NULL, 30 * (int64_t)NSEC_PER_MSEC)) != 0);
    CHECK(realtime_ns() - real_start >= 30 * NSEC_PER_MSEC);
    CHECK(dispatch_semaphore_wait(semaphore, dispatch_time(DISPATCH_TIME_NOW, -(int64_t)NSEC_PER_SEC)) != 0);

    check_section("the timed-out waits left the count alone: one signal, one successful wait");
    CHECK_EQ(dispatch_semaphore_signal(semaphore), 0);
    CHECK_EQ(dispatch_semaphore_wait(semaphore, DISPATCH_TIME_NOW), 0);
    CHECK(dispatch_semaphore_wait(semaphore, DISPATCH_TIME_NOW) != 0);

    check_section("an initial value of 2 admits two waits, then times out");
    dispatch_semaphore_t two = dispatch_semaphore_create(2);
    CHECK_EQ(dispatch_semaphore_wait(two, DISPATCH_TIME_NOW), 0);
    CHECK_EQ(dispatch_semaphore_wait(two, DISPATCH_TIME_FOREVER), 0);
    CHECK(dispatch_semaphore_wait(two, dispatch_time(DISPATCH_TIME_NOW, 10 * (int64_t)NSEC_PER_MSEC)) != 0);
    dispatch_semaphore_signal(two);
    dispatch_semaphore_signal(two);   // back to its initial value before release
    dispatch_release(two);
    dispatch_release(semaphore);
}

// MARK: - Signal's result

typedef struct {
    dispatch_semaphore_t semaphore;
    atomic_int tid;
    atomic_long result;
    atomic_long returned;
} waiter_t;

static void *waiting_thread(void *argument) {
    waiter_t *waiter = argument;
    atomic_store(&waiter->tid, gettid());
    atomic_store(&waiter->result, dispatch_semaphore_wait(waiter->semaphore, DISPATCH_TIME_FOREVER));
    atomic_fetch_add(&waiter->returned, 1);
    return NULL;
}

static void signal_result(void) {
    check_section("signal with nobody waiting returns 0");
    dispatch_semaphore_t semaphore = dispatch_semaphore_create(0);
    CHECK_EQ(dispatch_semaphore_signal(semaphore), 0);
    CHECK_EQ(dispatch_semaphore_wait(semaphore, DISPATCH_TIME_NOW), 0);

    check_section("signal that wakes a blocked waiter returns non-zero, and the waiter returns 0");
    for (int round = 0; round < 3; round++) {
        waiter_t waiter = { semaphore, 0, -1, 0 };
        pthread_t thread;
        CHECK(pthread_create(&thread, NULL, waiting_thread, &waiter) == 0);
        while (atomic_load(&waiter.tid) == 0) sleep_ms(1);
        CHECKF(wait_until_blocked(atomic_load(&waiter.tid), 10), "the waiting thread never blocked");
        CHECK_EQ(atomic_load(&waiter.returned), 0);
        CHECK(dispatch_semaphore_signal(semaphore) != 0);
        pthread_join(thread, NULL);
        CHECK_EQ(atomic_load(&waiter.result), 0);
    }

    check_section("two blocked waiters: two signals wake both, each returning non-zero; a third returns 0");
    waiter_t waiters[2] = { { semaphore, 0, -1, 0 }, { semaphore, 0, -1, 0 } };
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        CHECK(pthread_create(&threads[i], NULL, waiting_thread, &waiters[i]) == 0);
        while (atomic_load(&waiters[i].tid) == 0) sleep_ms(1);
        CHECKF(wait_until_blocked(atomic_load(&waiters[i].tid), 10), "waiter %d never blocked", i);
    }
    CHECK(dispatch_semaphore_signal(semaphore) != 0);
    CHECK(dispatch_semaphore_signal(semaphore) != 0);
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    CHECK_EQ(dispatch_semaphore_signal(semaphore), 0);
    CHECK_EQ(dispatch_semaphore_wait(semaphore, DISPATCH_TIME_NOW), 0);
    dispatch_release(semaphore);
}

// MARK: - Producers and consumers

enum { SLOTS = 8, PRODUCERS = 2, CONSUMERS = 2, ITEMS_PER_PRODUCER = 50000 };

static struct {
    dispatch_semaphore_t free_slots;
    dispatch_semaphore_t full_slots;
    dispatch_semaphore_t lock;          // a semaphore of 1 guards the ring
    long ring[SLOTS];
    long head, tail, in_ring;
    long long consumed_sum;
    long consumed_count;
    long overflow;                      // the ring held more than SLOTS: a broken semaphore
} pc;

static void *producer(void *argument) {
    long id = (long)(intptr_t)argument;
    for (long i = 1; i <= ITEMS_PER_PRODUCER; i++) {
        dispatch_semaphore_wait(pc.free_slots, DISPATCH_TIME_FOREVER);
        dispatch_semaphore_wait(pc.lock, DISPATCH_TIME_FOREVER);
        pc.ring[pc.tail] = id * ITEMS_PER_PRODUCER + i;
        pc.tail = (pc.tail + 1) % SLOTS;
        if (++pc.in_ring > SLOTS) pc.overflow++;
        dispatch_semaphore_signal(pc.lock);
        dispatch_semaphore_signal(pc.full_slots);
    }
    return NULL;
}

static void *consumer(void *argument) {
    long count = (long)(intptr_t)argument;
    for (long i = 0; i < count; i++) {
        dispatch_semaphore_wait(pc.full_slots, DISPATCH_TIME_FOREVER);
        dispatch_semaphore_wait(pc.lock, DISPATCH_TIME_FOREVER);
        if (pc.in_ring-- <= 0) pc.overflow++;
        pc.consumed_sum += pc.ring[pc.head];
        pc.consumed_count++;
        pc.head = (pc.head + 1) % SLOTS;
        dispatch_semaphore_signal(pc.lock);
        dispatch_semaphore_signal(pc.free_slots);
    }
    return NULL;
}

static void producers_and_consumers(void) {
    check_section("a bounded buffer: 2 producers, 2 consumers, 100000 items, counts conserved");
    memset(&pc, 0, sizeof pc);
    pc.free_slots = dispatch_semaphore_create(SLOTS);
    pc.full_slots = dispatch_semaphore_create(0);
    pc.lock = dispatch_semaphore_create(1);
    pthread_t threads[PRODUCERS + CONSUMERS];
    long total = (long)PRODUCERS * ITEMS_PER_PRODUCER;
    for (long i = 0; i < CONSUMERS; i++) {
        CHECK(pthread_create(&threads[i], NULL, consumer, (void *)(intptr_t)(total / CONSUMERS)) == 0);
    }
    for (long i = 0; i < PRODUCERS; i++) {
        CHECK(pthread_create(&threads[CONSUMERS + i], NULL, producer, (void *)(intptr_t)i) == 0);
    }
    for (int i = 0; i < PRODUCERS + CONSUMERS; i++) pthread_join(threads[i], NULL);
    long long expected_sum = 0;
    for (long id = 0; id < PRODUCERS; id++) {
        for (long i = 1; i <= ITEMS_PER_PRODUCER; i++) expected_sum += id * ITEMS_PER_PRODUCER + i;
    }
    CHECK_EQ(pc.consumed_count, total);
    CHECK_EQ(pc.consumed_sum, expected_sum);
    CHECK_EQ(pc.overflow, 0);
    CHECK_EQ(pc.in_ring, 0);
    // Every slot is free again and nothing is left to consume.
    for (int i = 0; i < SLOTS; i++) CHECK_EQ(dispatch_semaphore_wait(pc.free_slots, DISPATCH_TIME_NOW), 0);
    CHECK(dispatch_semaphore_wait(pc.free_slots, DISPATCH_TIME_NOW) != 0);
    CHECK(dispatch_semaphore_wait(pc.full_slots, DISPATCH_TIME_NOW) != 0);
    for (int i = 0; i < SLOTS; i++) dispatch_semaphore_signal(pc.free_slots);
    dispatch_release(pc.free_slots);
    dispatch_release(pc.full_slots);
    dispatch_release(pc.lock);
}

// MARK: - Waiting from queue items

static dispatch_semaphore_t item_semaphore;
static atomic_long item_waits_done;

static void waiting_item(void *context) {
    (void)context;
    if (dispatch_semaphore_wait(item_semaphore, dispatch_time(DISPATCH_TIME_NOW, 20 * (int64_t)NSEC_PER_SEC)) == 0) {
        atomic_fetch_add(&item_waits_done, 1);
    }
}

static void signalling_item(void *context) {
    (void)context;
    dispatch_semaphore_signal(item_semaphore);
}

static void waits_in_queue_items(void) {
    check_section("items blocked in dispatch_semaphore_wait do not starve the items that signal them");
    item_semaphore = dispatch_semaphore_create(0);
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.sem-waiters", DISPATCH_QUEUE_CONCURRENT);
    for (int i = 0; i < 4; i++) dispatch_async_f(queue, NULL, waiting_item);
    for (int i = 0; i < 4; i++) dispatch_async_f(dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0), NULL, signalling_item);
    WAIT_FOR_COUNT(&item_waits_done, 4, 30);
    dispatch_release(queue);
    dispatch_release(item_semaphore);
}

#ifdef __BLOCKS__
static void blocks(void) {
    check_section("blocks: signal from a dispatched block wakes the waiting caller");
    dispatch_semaphore_t semaphore = dispatch_semaphore_create(0);
    __block int value = 0;
    dispatch_async(dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0), ^{
        value = 7;
        dispatch_semaphore_signal(semaphore);
    });
    CHECK_EQ(dispatch_semaphore_wait(semaphore, dispatch_time(DISPATCH_TIME_NOW, 10 * (int64_t)NSEC_PER_SEC)), 0);
    CHECK_EQ(value, 7);
    dispatch_release(semaphore);
}
#endif

int main(void) {
    check_start("semaphores", 55);
    creation();
    timeouts();
    signal_result();
    producers_and_consumers();
    waits_in_queue_items();
#ifdef __BLOCKS__
    blocks();
#endif
    check_pass();
    return 0;
}
