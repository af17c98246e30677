// Objects: retain/release, context, and the finalizer, which runs once, on the object's
// target queue, after the last reference is gone and every item submitted has run.
#include "check.h"

static atomic_long finalized;
static char finalizer_queue_label[128];

static void record_finalizer(void *context) {
    atomic_long *count = context;
    const char *label = dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL);
    snprintf(finalizer_queue_label, sizeof finalizer_queue_label, "%s", label ? label : "(null)");
    atomic_fetch_add(count, 1);
}

static void count_item(void *context) {
    atomic_fetch_add((atomic_long *)context, 1);
}

static atomic_long slow_items_done;
static long items_done_when_finalized = -1;

static void slow_item(void *context) {
    (void)context;
    sleep_ms(1);
    atomic_fetch_add(&slow_items_done, 1);
}

static void finalizer_after_items(void *context) {
    items_done_when_finalized = atomic_load(&slow_items_done);
    atomic_fetch_add((atomic_long *)context, 1);
}

static void context_round_trip(void) {
    check_section("get/set context on a queue, a group and a semaphore");
    int a = 1, b = 2, c = 3;
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.context", DISPATCH_QUEUE_SERIAL);
    dispatch_group_t group = dispatch_group_create();
    dispatch_semaphore_t semaphore = dispatch_semaphore_create(0);
    CHECK(queue != NULL && group != NULL && semaphore != NULL);
    CHECK(dispatch_get_context(queue) == NULL);
    CHECK(dispatch_get_context(group) == NULL);
    CHECK(dispatch_get_context(semaphore) == NULL);
    dispatch_set_context(queue, &a);
    dispatch_set_context(group, &b);
    dispatch_set_context(semaphore, &c);
    CHECK(dispatch_get_context(queue) == &a);
    CHECK(dispatch_get_context(group) == &b);
    CHECK(dispatch_get_context(semaphore) == &c);
    dispatch_set_context(queue, &c);
    CHECK(dispatch_get_context(queue) == &c);
    dispatch_set_context(queue, NULL);
    CHECK(dispatch_get_context(queue) == NULL);
    dispatch_release(queue);
    dispatch_release(group);
    dispatch_release(semaphore);
}

static void retain_release_keeps_object_alive(void) {
    check_section("retain/release: object stays usable until the last release");
    atomic_long ran = 0, finalizer_ran = 0;
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.retain", NULL);
    dispatch_set_context(queue, &finalizer_ran);
    dispatch_set_finalizer_f(queue, record_finalizer);
    for (int i = 0; i < 10; i++) dispatch_retain(queue);
    for (int i = 0; i < 10; i++) dispatch_release(queue);
    // Still alive: one reference (the creator's) is left.
    dispatch_async_f(queue, &ran, count_item);
    dispatch_sync_f(queue, &ran, count_item);
    CHECK_EQ(atomic_load(&ran), 2);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&finalizer_ran), 0);
    dispatch_release(queue);
    WAIT_FOR_COUNT(&finalizer_ran, 1, 10);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&finalizer_ran), 1);
}

static void finalizer_runs_on_target_queue(void) {
    check_section("a queue's finalizer runs once on its target queue after the last release");
    atomic_store(&finalized, 0);
    dispatch_queue_t target = dispatch_queue_create("com.grandcentral.tests.finalizer-target", NULL);
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.finalized", NULL);
    dispatch_set_target_queue(queue, target);
    dispatch_set_context(queue, &finalized);
    dispatch_set_finalizer_f(queue, record_finalizer);
    dispatch_retain(queue);
    dispatch_release(queue);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&finalized), 0);
    dispatch_release(queue);
    WAIT_FOR_COUNT(&finalized, 1, 10);
    CHECK_STR(finalizer_queue_label, "com.grandcentral.tests.finalizer-target");
    sleep_ms(50);
    CHECK_EQ(atomic_load(&finalized), 1);
    dispatch_release(target);
}

static void finalizer_waits_for_pending_items(void) {
    check_section("releasing a queue with pending items: every item runs, then the finalizer");
    atomic_long finalizer_ran = 0;
    atomic_store(&slow_items_done, 0);
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.pending", NULL);
    dispatch_set_context(queue, &finalizer_ran);
    dispatch_set_finalizer_f(queue, finalizer_after_items);
    for (int i = 0; i < 100; i++) dispatch_async_f(queue, NULL, slow_item);
    dispatch_release(queue);
    WAIT_FOR_COUNT(&finalizer_ran, 1, 20);
    CHECK_EQ(atomic_load(&slow_items_done), 100);
    CHECK_EQ(items_done_when_finalized, 100);
}

static void group_and_semaphore_finalizers(void) {
    check_section("groups and semaphores run their finalizer after the last release");
    atomic_long group_finalized = 0, semaphore_finalized = 0;
    dispatch_group_t group = dispatch_group_create();
    dispatch_set_context(group, &group_finalized);
    dispatch_set_finalizer_f(group, count_item);
    dispatch_semaphore_t semaphore = dispatch_semaphore_create(3);
    dispatch_set_context(semaphore, &semaphore_finalized);
    dispatch_set_finalizer_f(semaphore, count_item);
    dispatch_retain(group);
    dispatch_retain(semaphore);
    dispatch_release(group);
    dispatch_release(semaphore);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&group_finalized), 0);
    CHECK_EQ(atomic_load(&semaphore_finalized), 0);
    dispatch_release(group);
    dispatch_release(semaphore);
    WAIT_FOR_COUNT(&group_finalized, 1, 10);
    WAIT_FOR_COUNT(&semaphore_finalized, 1, 10);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&group_finalized), 1);
    CHECK_EQ(atomic_load(&semaphore_finalized), 1);
}

// MARK: - Finalizers: called as finalizer(context), on the target queue, only with a context

static char finalizer_target_key;
static char finalizer_target_marker;

struct finalizer_record {
    atomic_long calls;
    atomic_long on_target;   // calls that saw the target queue's specific
    atomic_long seen_context_ok;
};

static struct finalizer_record *finalizer_expected_context;
static atomic_long null_context_calls;

static void recording_finalizer(void *context) {
    if (context == NULL) {
        atomic_fetch_add(&null_context_calls, 1);
        return;
    }
    struct finalizer_record *record = context;
    if (dispatch_get_specific(&finalizer_target_key) == &finalizer_target_marker) {
        atomic_fetch_add(&record->on_target, 1);
    }
    if (record == finalizer_expected_context) atomic_fetch_add(&record->seen_context_ok, 1);
    atomic_fetch_add(&record->calls, 1);
}

/// Sets context and finalizer on `object`, targets it at `target`, takes and drops an extra
/// reference (the finalizer must not run then), drops the last one and checks that the
/// finalizer ran once, with the context, on `target`.
static void check_finalizer_on_target(dispatch_object_t object, dispatch_queue_t target, const char *what) {
    check_section(what);
    struct finalizer_record record;
    atomic_init(&record.calls, 0);
    atomic_init(&record.on_target, 0);
    atomic_init(&record.seen_context_ok, 0);
    finalizer_expected_context = &record;
    dispatch_set_target_queue(object, target);
    dispatch_set_context(object, &record);
    dispatch_set_finalizer_f(object, recording_finalizer);
    dispatch_retain(object);
    dispatch_release(object);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&record.calls), 0);
    dispatch_release(object);
    WAIT_FOR_COUNT(&record.calls, 1, 10);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&record.calls), 1);
    CHECK_EQ(atomic_load(&record.seen_context_ok), 1);
    CHECK_EQ(atomic_load(&record.on_target), 1);
}

static void finalizers_run_with_context_on_target(void) {
    dispatch_queue_t target = dispatch_queue_create("com.grandcentral.tests.finalizer-specific", NULL);
    dispatch_queue_set_specific(target, &finalizer_target_key, &finalizer_target_marker, NULL);
    check_finalizer_on_target(dispatch_queue_create("com.grandcentral.tests.finalized-serial", NULL), target,
                              "a serial queue's finalizer: once, with its context, on its target, after the last release");
    check_finalizer_on_target(dispatch_queue_create("com.grandcentral.tests.finalized-concurrent", DISPATCH_QUEUE_CONCURRENT),
                              target, "a concurrent queue's finalizer: once, with its context, on its target");
    check_finalizer_on_target(dispatch_group_create(), target,
                              "a group's finalizer: once, with its context, on the target set with dispatch_set_target_queue");
    check_finalizer_on_target(dispatch_semaphore_create(2), target,
                              "a semaphore's finalizer: once, with its context, on the target set with dispatch_set_target_queue");
    dispatch_release(target);
}

static void finalizer_skipped_without_context(void) {
    check_section("a finalizer is not called when the object's context is NULL");
    atomic_store(&null_context_calls, 0);
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.no-context", NULL);
    dispatch_group_t group = dispatch_group_create();
    dispatch_semaphore_t semaphore = dispatch_semaphore_create(0);
    dispatch_set_finalizer_f(queue, recording_finalizer);
    dispatch_set_finalizer_f(group, recording_finalizer);
    dispatch_set_finalizer_f(semaphore, recording_finalizer);
    // A context set and then cleared counts as none.
    int unused;
    dispatch_set_context(group, &unused);
    dispatch_set_context(group, NULL);
    dispatch_release(queue);
    dispatch_release(group);
    dispatch_release(semaphore);
    // Something that does run on the default global queue, after the releases: any
    // finalizer submitted there would have been submitted before it.
    atomic_long flushed = 0;
    dispatch_async_f(dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0), &flushed, count_item);
    WAIT_FOR_COUNT(&flushed, 1, 10);
    sleep_ms(100);
    CHECK_EQ(atomic_load(&null_context_calls), 0);
}

static void group_semaphore_finalizer_default_queue(void) {
    check_section("without a target set, a group's finalizer runs on a global queue");
    struct finalizer_record record;
    atomic_init(&record.calls, 0);
    atomic_init(&record.on_target, 0);
    atomic_init(&record.seen_context_ok, 0);
    finalizer_expected_context = &record;
    dispatch_group_t group = dispatch_group_create();
    dispatch_set_context(group, &record);
    dispatch_set_finalizer_f(group, recording_finalizer);
    dispatch_release(group);
    WAIT_FOR_COUNT(&record.calls, 1, 10);
    CHECK_EQ(atomic_load(&record.seen_context_ok), 1);
    CHECK_EQ(atomic_load(&record.on_target), 0);
}

static void object_union_accepts_every_type(void) {
    check_section("dispatch_object_t takes queues, groups and semaphores without casts");
    dispatch_queue_t queue = dispatch_queue_create(NULL, NULL);
    dispatch_group_t group = dispatch_group_create();
    dispatch_semaphore_t semaphore = dispatch_semaphore_create(0);
    dispatch_retain(queue);
    dispatch_retain(group);
    dispatch_retain(semaphore);
    dispatch_release(queue);
    dispatch_release(group);
    dispatch_release(semaphore);
    dispatch_release(queue);
    dispatch_release(group);
    dispatch_release(semaphore);
    // Global queues and the main queue ignore retain and release.
    dispatch_queue_t global = dispatch_get_global_queue(DISPATCH_QUEUE_PRIORITY_DEFAULT, 0);
    for (int i = 0; i < 3; i++) dispatch_release(global);
    for (int i = 0; i < 3; i++) dispatch_retain(global);
    dispatch_release(dispatch_get_main_queue());
    atomic_long ran = 0;
    dispatch_sync_f(global, &ran, count_item);
    CHECK_EQ(atomic_load(&ran), 1);
}

#ifdef __BLOCKS__
static void blocks_capture_and_release(void) {
    check_section("blocks: a submitted block's captures live until it has run");
    atomic_long finalizer_ran = 0;
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.blocks", NULL);
    dispatch_set_context(queue, &finalizer_ran);
    dispatch_set_finalizer_f(queue, count_item);
    __block long sum = 0;
    for (long i = 1; i <= 100; i++) {
        long captured = i;
        dispatch_async(queue, ^{ sum += captured; });
    }
    dispatch_sync(queue, ^{});
    CHECK_EQ(sum, 5050);
    dispatch_release(queue);
    WAIT_FOR_COUNT(&finalizer_ran, 1, 10);
}
#endif

int main(void) {
    check_start("objects", 50);
    context_round_trip();
    retain_release_keeps_object_alive();
    finalizer_runs_on_target_queue();
    finalizer_waits_for_pending_items();
    group_and_semaphore_finalizers();
    finalizers_run_with_context_on_target();
    finalizer_skipped_without_context();
    group_semaphore_finalizer_default_queue();
    object_union_accepts_every_type();
#ifdef __BLOCKS__
    blocks_capture_and_release();
#endif
    check_pass();
    return 0;
}
