// Misuse: each mistake runs in a forked child, which must die by SIGABRT, SIGTRAP or
// SIGILL after printing `GrandCentral: BUG IN CLIENT: <function>: <what>` (DESIGN.md, hard
// rule 6). The parent never touches dispatch itself, so every child starts from a fresh
// library. In the reference build (libdispatch) only "the child crashed" is checked.
#include "check.h"

// Hidden from the compiler so that -Wnonnull cannot see the NULL.
static volatile dispatch_queue_t null_queue;

static void null_queue_async_f(void) {
    dispatch_async_f(null_queue, NULL, noop_function);
}

static void sleep_item(void *context) {
    (void)context;
    sleep_ms(3000);
}

static void over_release(void) {
    // The queue stays alive while its item runs, so the second release hits a live
    // object whose references are all gone: the library can see it is one too many.
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.over-release", NULL);
    dispatch_async_f(queue, NULL, sleep_item);
    sleep_ms(50);
    dispatch_release(queue);
    dispatch_release(queue);
    sleep_ms(5000);
}

static void over_release_group(void) {
    dispatch_group_t group = dispatch_group_create();
    dispatch_retain(group);
    dispatch_release(group);
    dispatch_group_enter(group);   // a member keeps the group alive internally
    dispatch_release(group);
    dispatch_release(group);
    sleep_ms(5000);
}

static void unbalanced_leave(void) {
    dispatch_group_t group = dispatch_group_create();
    dispatch_group_leave(group);
}

static void unbalanced_leave_after_enter(void) {
    dispatch_group_t group = dispatch_group_create();
    dispatch_group_enter(group);
    dispatch_group_leave(group);
    dispatch_group_leave(group);
}

static void resume_not_suspended(void) {
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.over-resume", NULL);
    dispatch_resume(queue);
}

static void resume_once_too_often(void) {
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.over-resume-2", DISPATCH_QUEUE_CONCURRENT);
    dispatch_suspend(queue);
    dispatch_suspend(queue);
    dispatch_resume(queue);
    dispatch_resume(queue);
    dispatch_resume(queue);
}

static dispatch_queue_t current_queue;

static void sync_onto_current(void *context) {
    (void)context;
    dispatch_sync_f(current_queue, NULL, noop_function);
}

static void sync_onto_queue_being_drained_by_sync(void) {
    current_queue = dispatch_queue_create("com.grandcentral.tests.self-sync", NULL);
    dispatch_sync_f(current_queue, NULL, sync_onto_current);
}

static void sync_onto_queue_being_drained_by_worker(void) {
    current_queue = dispatch_queue_create("com.grandcentral.tests.self-sync-async", NULL);
    dispatch_async_f(current_queue, NULL, sync_onto_current);
    sleep_ms(5000);
}

static void dispose_semaphore_in_use(void) {
    dispatch_semaphore_t semaphore = dispatch_semaphore_create(1);
    dispatch_semaphore_wait(semaphore, DISPATCH_TIME_FOREVER);
    dispatch_release(semaphore);   // below its initial value: a resource is still taken
    sleep_ms(5000);
}

#ifdef __BLOCKS__
static void null_queue_async_block(void) {
    dispatch_async(null_queue, ^{});
}

static volatile dispatch_block_t null_block;

static void null_block_async(void) {
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.null-block", NULL);
    dispatch_async(queue, null_block);
    sleep_ms(5000);
}

static void sync_block_onto_current(void) {
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.self-sync-block", NULL);
    dispatch_sync(queue, ^{
        dispatch_sync(queue, ^{});
    });
}
#endif

// MARK: - Deadlocks through a target or a barrier (from regressions.c)

// --- dispatch_sync from the main thread onto a queue that targets the main queue -------
static void sync_onto_main_chain(void) {
    dispatch_queue_t q = dispatch_queue_create_with_target("regress.main-child", NULL, dispatch_get_main_queue());
    dispatch_sync_f(q, NULL, noop_function);
}

// --- a non-barrier dispatch_sync onto a concurrent queue from its own barrier ----------
static dispatch_queue_t barrier_queue;

static void sync_from_barrier(void *context) {
    (void)context;
    dispatch_sync_f(barrier_queue, NULL, noop_function);
}

static void sync_under_own_barrier(void) {
    barrier_queue = dispatch_queue_create("regress.barrier-self", DISPATCH_QUEUE_CONCURRENT);
    dispatch_barrier_sync_f(barrier_queue, NULL, sync_from_barrier);
}

// --- a NULL handle or a handle of the wrong kind (GrandCentral only: libdispatch checks
// neither, and may count on whatever the handle points at) -------------------------------
static volatile dispatch_semaphore_t null_semaphore;

static void null_semaphore_signal(void) {
    dispatch_semaphore_signal(null_semaphore);
}

// The main queue's handle is a data symbol, zero-filled: the semaphore's fast path reads
// its kind byte before comparing it with the symbols (GrandCentralExports/Handles.swift).
static void main_queue_as_semaphore(void) {
    dispatch_semaphore_wait((dispatch_semaphore_t)(void *)dispatch_get_main_queue(), DISPATCH_TIME_NOW);
}

static void empty_data_as_group(void) {
    dispatch_group_enter((dispatch_group_t)(void *)dispatch_data_empty);
}

static void group_as_semaphore(void) {
    dispatch_semaphore_signal((dispatch_semaphore_t)(void *)dispatch_group_create());
}

int main(void) {
    check_start("misuse", 55);

    check_section("dispatch_async_f with a NULL queue");
    expect_client_bug("dispatch_async_f", null_queue_async_f);

    check_section("dispatch_release one time too many (queue)");
    expect_client_bug("dispatch_release", over_release);

    check_section("dispatch_release one time too many (group)");
    expect_client_bug("dispatch_release", over_release_group);

    check_section("dispatch_group_leave without an enter");
    expect_client_bug("dispatch_group_leave", unbalanced_leave);

    check_section("dispatch_group_leave once more than enter");
    expect_client_bug("dispatch_group_leave", unbalanced_leave_after_enter);

    check_section("dispatch_resume of a queue that is not suspended");
    expect_client_bug("dispatch_resume", resume_not_suspended);

    check_section("dispatch_resume once more than dispatch_suspend");
    expect_client_bug("dispatch_resume", resume_once_too_often);

    check_section("dispatch_sync_f onto the serial queue the caller is draining (inside dispatch_sync_f)");
    expect_client_bug("dispatch_sync_f|dispatch_sync", sync_onto_queue_being_drained_by_sync);

    check_section("dispatch_sync_f onto the serial queue the caller is draining (inside an async item)");
    expect_client_bug("dispatch_sync_f|dispatch_sync", sync_onto_queue_being_drained_by_worker);

    check_section("releasing a semaphore whose value is below its initial value");
    expect_client_bug("dispatch_release|dispatch_semaphore_dispose", dispose_semaphore_in_use);

#ifndef GC_REFERENCE_LIBDISPATCH
    check_section("dispatch_sync from the main thread onto a queue that targets the main queue");
    expect_client_bug("dispatch_sync_f|dispatch_sync", sync_onto_main_chain);
    check_section("a non-barrier dispatch_sync onto a concurrent queue from its own barrier");
    expect_client_bug("dispatch_sync_f|dispatch_sync", sync_under_own_barrier);
    check_section("dispatch_semaphore_signal with a NULL semaphore");
    expect_client_bug("dispatch_semaphore_signal", null_semaphore_signal);
    check_section("dispatch_semaphore_wait on the main queue");
    expect_client_bug("dispatch_semaphore_wait", main_queue_as_semaphore);
    check_section("dispatch_group_enter on dispatch_data_empty");
    expect_client_bug("dispatch_group_enter", empty_data_as_group);
    check_section("dispatch_semaphore_signal on a group");
    expect_client_bug("dispatch_semaphore_signal", group_as_semaphore);
#endif

#ifdef __BLOCKS__
    check_section("blocks: dispatch_async with a NULL queue");
    expect_client_bug("dispatch_async|dispatch_async_f", null_queue_async_block);

    check_section("blocks: dispatch_async with a NULL block");
    expect_client_bug("dispatch_async", null_block_async);

    check_section("blocks: dispatch_sync onto the queue the caller is draining");
    expect_client_bug("dispatch_sync|dispatch_sync_f", sync_block_onto_current);
#endif
    check_pass();
    return 0;
}
