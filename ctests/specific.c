// Queue-specific data: dispatch_queue_set_specific/get_specific by key address;
// dispatch_get_specific from a running item walks the current queue's target chain;
// the destructor runs for a replaced or removed value and when the queue goes away.
#include "check.h"

static char key_a, key_b, key_c;   // keys are compared by address only

static atomic_long destroyed[8];

static void destroy(void *context) {
    long index = (long)(intptr_t)context;
    atomic_fetch_add(&destroyed[index], 1);
}

#define VALUE(i) ((void *)(intptr_t)(i))

static void set_and_get(void) {
    check_section("dispatch_queue_get_specific returns what was set, NULL for unknown keys");
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.specific", NULL);
    CHECK(dispatch_queue_get_specific(queue, &key_a) == NULL);
    dispatch_queue_set_specific(queue, &key_a, VALUE(1), NULL);
    dispatch_queue_set_specific(queue, &key_b, VALUE(2), NULL);
    CHECK(dispatch_queue_get_specific(queue, &key_a) == VALUE(1));
    CHECK(dispatch_queue_get_specific(queue, &key_b) == VALUE(2));
    CHECK(dispatch_queue_get_specific(queue, &key_c) == NULL);

    check_section("outside any queue dispatch_get_specific returns NULL");
    CHECK(dispatch_get_specific(&key_a) == NULL);
    dispatch_release(queue);
}

// MARK: - The target chain

typedef struct {
    void *a, *b, *c;
} seen_t;

static void look_up(void *context) {
    seen_t *seen = context;
    seen->a = dispatch_get_specific(&key_a);
    seen->b = dispatch_get_specific(&key_b);
    seen->c = dispatch_get_specific(&key_c);
}

static void target_chain(void) {
    check_section("dispatch_get_specific walks the target chain; the nearest queue wins");
    dispatch_queue_t root = dispatch_queue_create("com.grandcentral.tests.specific-root", NULL);
    dispatch_queue_t middle = dispatch_queue_create_with_target("com.grandcentral.tests.specific-middle", DISPATCH_QUEUE_CONCURRENT, root);
    dispatch_queue_t leaf = dispatch_queue_create_with_target("com.grandcentral.tests.specific-leaf", NULL, middle);
    dispatch_queue_set_specific(root, &key_a, VALUE(10), NULL);
    dispatch_queue_set_specific(root, &key_b, VALUE(11), NULL);
    dispatch_queue_set_specific(middle, &key_b, VALUE(20), NULL);
    seen_t seen;

    memset(&seen, 0xff, sizeof seen);
    dispatch_sync_f(leaf, &seen, look_up);
    CHECK(seen.a == VALUE(10));
    CHECK(seen.b == VALUE(20));
    CHECK(seen.c == NULL);

    memset(&seen, 0xff, sizeof seen);
    dispatch_async_f(leaf, &seen, look_up);
    dispatch_sync_f(leaf, NULL, noop_function);
    CHECK(seen.a == VALUE(10));
    CHECK(seen.b == VALUE(20));
    CHECK(seen.c == NULL);

    memset(&seen, 0xff, sizeof seen);
    dispatch_sync_f(root, &seen, look_up);
    CHECK(seen.a == VALUE(10));
    CHECK(seen.b == VALUE(11));
    CHECK(seen.c == NULL);

    check_section("a value set on the leaf shadows the chain");
    dispatch_queue_set_specific(leaf, &key_a, VALUE(30), NULL);
    memset(&seen, 0xff, sizeof seen);
    dispatch_sync_f(leaf, &seen, look_up);
    CHECK(seen.a == VALUE(30));
    CHECK(seen.b == VALUE(20));

    check_section("dispatch_queue_get_specific does not walk the chain");
    CHECK(dispatch_queue_get_specific(middle, &key_a) == NULL);
    CHECK(dispatch_queue_get_specific(leaf, &key_b) == NULL);

    check_section("a queue retargeted while inactive sees its new target's values");
    dispatch_queue_t other = dispatch_queue_create("com.grandcentral.tests.specific-other", NULL);
    dispatch_queue_set_specific(other, &key_c, VALUE(40), NULL);
    dispatch_queue_t late = dispatch_queue_create("com.grandcentral.tests.specific-late", DISPATCH_QUEUE_SERIAL_INACTIVE);
    dispatch_set_target_queue(late, other);
    dispatch_activate(late);
    memset(&seen, 0xff, sizeof seen);
    dispatch_sync_f(late, &seen, look_up);
    CHECK(seen.c == VALUE(40));
    CHECK(seen.a == NULL);

    dispatch_release(late);
    dispatch_release(other);
    dispatch_release(leaf);
    dispatch_release(middle);
    dispatch_release(root);
}

// MARK: - Destructors

static void destructors(void) {
    check_section("replacing a value runs the destructor on the old one, once");
    for (int i = 0; i < 8; i++) atomic_store(&destroyed[i], 0);
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.specific-destructors", NULL);
    dispatch_queue_set_specific(queue, &key_a, VALUE(1), destroy);
    dispatch_queue_set_specific(queue, &key_a, VALUE(2), destroy);
    WAIT_FOR_COUNT(&destroyed[1], 1, 10);
    CHECK(dispatch_queue_get_specific(queue, &key_a) == VALUE(2));

    check_section("setting NULL removes the value and runs the destructor");
    dispatch_queue_set_specific(queue, &key_a, NULL, destroy);
    WAIT_FOR_COUNT(&destroyed[2], 1, 10);
    CHECK(dispatch_queue_get_specific(queue, &key_a) == NULL);

    check_section("releasing the queue runs the destructors of the values it still holds");
    dispatch_queue_set_specific(queue, &key_a, VALUE(3), destroy);
    dispatch_queue_set_specific(queue, &key_b, VALUE(4), destroy);
    dispatch_queue_set_specific(queue, &key_c, VALUE(5), NULL);
    dispatch_release(queue);
    WAIT_FOR_COUNT(&destroyed[3], 1, 10);
    WAIT_FOR_COUNT(&destroyed[4], 1, 10);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&destroyed[1]), 1);
    CHECK_EQ(atomic_load(&destroyed[2]), 1);
    CHECK_EQ(atomic_load(&destroyed[3]), 1);
    CHECK_EQ(atomic_load(&destroyed[4]), 1);
    CHECK_EQ(atomic_load(&destroyed[0]), 0);
    CHECK_EQ(atomic_load(&destroyed[5]), 0);
}

#ifdef __BLOCKS__
static void blocks(void) {
    check_section("blocks: dispatch_get_specific inside dispatch_async and dispatch_sync");
    dispatch_queue_t target = dispatch_queue_create("com.grandcentral.tests.specific-blocks-target", NULL);
    dispatch_queue_t queue = dispatch_queue_create_with_target("com.grandcentral.tests.specific-blocks", NULL, target);
    dispatch_queue_set_specific(target, &key_a, VALUE(7), NULL);
    __block void *from_async = NULL, *from_sync = NULL;
    dispatch_async(queue, ^{ from_async = dispatch_get_specific(&key_a); });
    dispatch_sync(queue, ^{ from_sync = dispatch_get_specific(&key_a); });
    CHECK(from_async == VALUE(7));
    CHECK(from_sync == VALUE(7));
    dispatch_release(queue);
    dispatch_release(target);
}
#endif

int main(void) {
    check_start("specific", 55);
    set_and_get();
    target_chain();
    destructors();
#ifdef __BLOCKS__
    blocks();
#endif
    check_pass();
    return 0;
}
