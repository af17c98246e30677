// Groups: dispatch_group_async_f + wait; enter/leave; notify runs exactly once after every
// member finished; a wait that times out returns non-zero; notify on an empty group runs;
// a group can be reused after it emptied; an item behind the members that waits for the
// group sees every member leave.
#include "check.h"

static atomic_long finished;

static void member(void *context) {
    (void)context;
    busy_wait_ns(2000);
    atomic_fetch_add(&finished, 1);
}

static void async_and_wait(void) {
    check_section("dispatch_group_async_f onto several queues, then wait: all finished");
    atomic_store(&finished, 0);
    dispatch_group_t group = dispatch_group_create();
    CHECK(group != NULL);
    dispatch_queue_t serial = dispatch_queue_create("com.grandcentral.tests.group-serial", NULL);
    dispatch_queue_t concurrent = dispatch_queue_create("com.grandcentral.tests.group-concurrent", DISPATCH_QUEUE_CONCURRENT);
    dispatch_queue_t global = dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0);
    for (int i = 0; i < 3000; i++) {
        dispatch_queue_t queue = i % 3 == 0 ? serial : i % 3 == 1 ? concurrent : global;
        dispatch_group_async_f(group, queue, NULL, member);
    }
    CHECK_EQ(dispatch_group_wait(group, dispatch_time(DISPATCH_TIME_NOW, 30 * (int64_t)NSEC_PER_SEC)), 0);
    CHECK_EQ(atomic_load(&finished), 3000);
    CHECK_EQ(dispatch_group_wait(group, DISPATCH_TIME_NOW), 0);
    CHECK_EQ(dispatch_group_wait(group, DISPATCH_TIME_FOREVER), 0);
    dispatch_release(serial);
    dispatch_release(concurrent);
    dispatch_release(group);
}

// MARK: - Enter and leave

typedef struct {
    dispatch_group_t group;
    atomic_long left;
} leaver_t;

static void *leave_later(void *argument) {
    leaver_t *leaver = argument;
    sleep_ms(30);
    atomic_fetch_add(&leaver->left, 1);
    dispatch_group_leave(leaver->group);
    return NULL;
}

static void enter_and_leave(void) {
    check_section("dispatch_group_enter/leave from other threads; wait returns once all left");
    leaver_t leaver = { dispatch_group_create(), 0 };
    pthread_t threads[3];
    for (int i = 0; i < 3; i++) dispatch_group_enter(leaver.group);
    for (int i = 0; i < 3; i++) CHECK(pthread_create(&threads[i], NULL, leave_later, &leaver) == 0);
    CHECK_EQ(dispatch_group_wait(leaver.group, DISPATCH_TIME_FOREVER), 0);
    CHECK_EQ(atomic_load(&leaver.left), 3);
    for (int i = 0; i < 3; i++) pthread_join(threads[i], NULL);

    check_section("a wait that times out returns non-zero, not before its deadline");
    dispatch_group_enter(leaver.group);
    CHECK(dispatch_group_wait(leaver.group, DISPATCH_TIME_NOW) != 0);
    uint64_t start = now_ns();
    CHECK(dispatch_group_wait(leaver.group, dispatch_time(DISPATCH_TIME_NOW, 50 * (int64_t)NSEC_PER_MSEC)) != 0);
    CHECK(now_ns() - start >= 50 * NSEC_PER_MSEC);
    CHECK(dispatch_group_wait(leaver.group, dispatch_walltime(NULL, 10 * (int64_t)NSEC_PER_MSEC)) != 0);
    dispatch_group_leave(leaver.group);
    CHECK_EQ(dispatch_group_wait(leaver.group, DISPATCH_TIME_NOW), 0);

    check_section("an empty group: wait returns 0 at once");
    dispatch_group_t empty = dispatch_group_create();
    CHECK_EQ(dispatch_group_wait(empty, DISPATCH_TIME_NOW), 0);
    dispatch_release(empty);
    dispatch_release(leaver.group);
}

// MARK: - Notify

typedef struct {
    atomic_long runs;
    long finished_at_notify;
    char label[128];
} notify_probe_t;

static void notified(void *context) {
    notify_probe_t *probe = context;
    probe->finished_at_notify = atomic_load(&finished);
    const char *label = dispatch_queue_get_label(DISPATCH_CURRENT_QUEUE_LABEL);
    snprintf(probe->label, sizeof probe->label, "%s", label ? label : "(null)");
    atomic_fetch_add(&probe->runs, 1);
}

static void slow_member(void *context) {
    (void)context;
    sleep_ms(1);
    atomic_fetch_add(&finished, 1);
}

static void notify(void) {
    check_section("notify runs once, on its queue, after every member finished");
    atomic_store(&finished, 0);
    dispatch_group_t group = dispatch_group_create();
    dispatch_queue_t notify_queue = dispatch_queue_create("com.grandcentral.tests.notify", NULL);
    dispatch_queue_t work = dispatch_queue_create("com.grandcentral.tests.notify-work", DISPATCH_QUEUE_CONCURRENT);
    for (int i = 0; i < 200; i++) dispatch_group_async_f(group, work, NULL, slow_member);
    dispatch_group_enter(group);   // held open until every notify is registered
    static notify_probe_t probes[3];
    memset(probes, 0, sizeof probes);
    for (int i = 0; i < 3; i++) dispatch_group_notify_f(group, notify_queue, &probes[i], notified);
    sleep_ms(20);
    for (int i = 0; i < 3; i++) CHECK_EQ(atomic_load(&probes[i].runs), 0);
    dispatch_group_leave(group);
    for (int i = 0; i < 3; i++) {
        WAIT_FOR_COUNT(&probes[i].runs, 1, 30);
    }
    sleep_ms(50);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(atomic_load(&probes[i].runs), 1);
        CHECK_EQ(probes[i].finished_at_notify, 200);
        CHECK_STR(probes[i].label, "com.grandcentral.tests.notify");
    }

    check_section("notify on an empty group runs");
    dispatch_group_t empty = dispatch_group_create();
    notify_probe_t on_empty;
    memset(&on_empty, 0, sizeof on_empty);
    dispatch_group_notify_f(empty, notify_queue, &on_empty, notified);
    WAIT_FOR_COUNT(&on_empty.runs, 1, 10);
    dispatch_release(empty);

    check_section("a group is reusable: a second round notifies again, the first notify does not rerun");
    atomic_store(&finished, 0);
    notify_probe_t second;
    memset(&second, 0, sizeof second);
    for (int i = 0; i < 50; i++) dispatch_group_async_f(group, work, NULL, slow_member);
    dispatch_group_notify_f(group, notify_queue, &second, notified);
    WAIT_FOR_COUNT(&second.runs, 1, 30);
    CHECK_EQ(second.finished_at_notify, 50);
    sleep_ms(20);
    for (int i = 0; i < 3; i++) CHECK_EQ(atomic_load(&probes[i].runs), 1);

    check_section("releasing a group with a pending notify still runs it");
    notify_probe_t after_release;
    memset(&after_release, 0, sizeof after_release);
    atomic_store(&finished, 0);
    dispatch_group_t transient = dispatch_group_create();
    for (int i = 0; i < 20; i++) dispatch_group_async_f(transient, work, NULL, slow_member);
    dispatch_group_notify_f(transient, notify_queue, &after_release, notified);
    dispatch_release(transient);
    WAIT_FOR_COUNT(&after_release.runs, 1, 30);
    CHECK_EQ(after_release.finished_at_notify, 20);

    dispatch_release(group);
    dispatch_release(work);
    dispatch_release(notify_queue);
}

// MARK: - Waiting from inside items

static dispatch_group_t inner_group;
static atomic_long outer_saw_all;

static void outer_waits(void *context) {
    (void)context;
    if (dispatch_group_wait(inner_group, dispatch_time(DISPATCH_TIME_NOW, 20 * (int64_t)NSEC_PER_SEC)) == 0
        && atomic_load(&finished) == 100) {
        atomic_fetch_add(&outer_saw_all, 1);
    }
}

static void wait_inside_items(void) {
    check_section("an item waiting on a group does not keep the group's members from running");
    atomic_store(&finished, 0);
    inner_group = dispatch_group_create();
    dispatch_group_enter(inner_group);
    dispatch_queue_t global = dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0);
    for (int i = 0; i < 2; i++) dispatch_async_f(global, NULL, outer_waits);
    for (int i = 0; i < 100; i++) dispatch_group_async_f(inner_group, global, NULL, member);
    dispatch_group_leave(inner_group);
    WAIT_FOR_COUNT(&outer_saw_all, 2, 30);
    dispatch_release(inner_group);
}

// MARK: - A waiter queued behind the members

static dispatch_group_t behind_group;
static atomic_long behind_members, behind_ok, behind_done;

static void behind_member(void *context) {
    (void)context;
    atomic_fetch_add(&behind_members, 1);
}

static void waits_behind_members(void *context) {
    long expected = (long)(intptr_t)context;
    if (dispatch_group_wait(behind_group, dispatch_time(DISPATCH_TIME_NOW, 5 * (int64_t)NSEC_PER_SEC)) == 0
        && atomic_load(&behind_members) == expected) {
        atomic_fetch_add(&behind_ok, 1);
    }
    atomic_fetch_add(&behind_done, 1);
}

// Members, then on the same queue an item (not a member) that waits for the group: the
// worker that ran the last members must have left the group before it runs the waiter
// (a worker applies the leaves of a run of one group's items together, ThreadPool).
static void waiter_behind_members(void) {
    check_section("an item queued behind a group's members that waits for the group sees them all leave");
    enum { ROUNDS = 2000, MEMBERS = 8 };
    dispatch_queue_t global = dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0);
    atomic_store(&behind_members, 0);
    // About 3 s on an idle machine, 47 s once at a load average of 40: the rounds stop at a
    // 12 s budget, with a floor of 20.
    uint64_t end = now_ns() + 12 * NSEC_PER_SEC;
    long round = 1;
    for (; round <= ROUNDS && now_ns() < end; round++) {
        behind_group = dispatch_group_create();
        for (int i = 0; i < MEMBERS; i++) dispatch_group_async_f(behind_group, global, NULL, behind_member);
        dispatch_async_f(global, (void *)(intptr_t)(round * MEMBERS), waits_behind_members);
        WAIT_FOR_COUNT(&behind_done, round, 30);
        CHECKF(atomic_load(&behind_ok) == round, "round %ld: the waiter timed out or saw %ld of %ld members",
               round, atomic_load(&behind_members), round * MEMBERS);
        dispatch_release(behind_group);
    }
    printf("   %ld of %d rounds in the budget\n", round - 1, ROUNDS);
    CHECKF(round - 1 >= 20, "only %ld rounds in 12 s", round - 1);
}

#ifdef __BLOCKS__
static void blocks(void) {
    check_section("blocks: dispatch_group_async and dispatch_group_notify");
    dispatch_group_t group = dispatch_group_create();
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.group-blocks", DISPATCH_QUEUE_CONCURRENT);
    __block atomic_long done = 0;
    __block atomic_long notified_runs = 0;
    __block long seen = -1;
    for (int i = 0; i < 500; i++) dispatch_group_async(group, queue, ^{ atomic_fetch_add(&done, 1); });
    dispatch_group_notify(group, queue, ^{
        seen = atomic_load(&done);
        atomic_fetch_add(&notified_runs, 1);
    });
    WAIT_FOR_COUNT(&notified_runs, 1, 30);
    CHECK_EQ(seen, 500);
    CHECK_EQ(dispatch_group_wait(group, DISPATCH_TIME_FOREVER), 0);
    dispatch_release(queue);
    dispatch_release(group);
}
#endif

// MARK: - Rounds (from regressions.c)

// --- a notification registered after the group was re-entered waits for that round ----
static atomic_long round_notified;

static void count_notify(void *context) {
    (void)context;
    atomic_fetch_add(&round_notified, 1);
}

static void test_group_rounds(void) {
    check_section("group notify belongs to its round");
    dispatch_group_t g = dispatch_group_create();
    dispatch_queue_t q = dispatch_get_global_queue(0, 0);
    dispatch_group_enter(g);
    dispatch_group_notify_f(g, q, NULL, count_notify);
    uint64_t start = now_ns();
    dispatch_group_leave(g);                 // round 1 ends: its notification fires
    WAIT_FOR_COUNT(&round_notified, 1, 10.0);
    uint64_t control = now_ns() - start;     // the positive control: how long a due notify took
    dispatch_group_enter(g);
    dispatch_group_notify_f(g, q, NULL, count_notify);
    quiet_period(control, 50);
    CHECK_EQ(atomic_load(&round_notified), 1);     // round 2 is still open
    dispatch_group_leave(g);
    WAIT_FOR_COUNT(&round_notified, 2, 10.0);
    dispatch_release(g);
}

// MARK: - Lifetime: a group holds itself while entered

static atomic_long lifetime_finalized;
static atomic_long lifetime_left;

static void lifetime_finalizer(void *context) {
    (void)context;
    atomic_fetch_add(&lifetime_finalized, 1);
}

static void lifetime_leave(void *context) {
    dispatch_group_t g = context;
    atomic_fetch_add(&lifetime_left, 1);
    dispatch_group_leave(g);
}

static void lifetime(void) {
    check_section("a group released while entered lives until its last leave, then is disposed once");
    enum { rounds = 100000 };
    dispatch_queue_t q = dispatch_get_global_queue(0, 0);
    for (int i = 0; i < rounds; i++) {
        dispatch_group_t g = dispatch_group_create();
        dispatch_set_context(g, &lifetime_finalized);
        dispatch_set_finalizer_f(g, lifetime_finalizer);
        dispatch_group_enter(g);
        // The leave races with the release below: either may come first.
        dispatch_async_f(q, g, lifetime_leave);
        dispatch_release(g);
    }
    WAIT_FOR_COUNT(&lifetime_left, rounds, 60);
    WAIT_FOR_COUNT(&lifetime_finalized, rounds, 60);

    check_section("a group released while entered is not disposed before its leave");
    // The positive control: how long an idle group's finalizer takes to run after release.
    atomic_store(&lifetime_finalized, 0);
    dispatch_group_t control_group = dispatch_group_create();
    dispatch_set_context(control_group, &lifetime_finalized);
    dispatch_set_finalizer_f(control_group, lifetime_finalizer);
    uint64_t start = now_ns();
    dispatch_release(control_group);
    WAIT_FOR_COUNT(&lifetime_finalized, 1, 30);
    uint64_t control = now_ns() - start;
    atomic_store(&lifetime_finalized, 0);
    dispatch_group_t g = dispatch_group_create();
    dispatch_set_context(g, &lifetime_finalized);
    dispatch_set_finalizer_f(g, lifetime_finalizer);
    dispatch_group_enter(g);
    dispatch_group_enter(g);
    dispatch_release(g);
    dispatch_group_leave(g);
    quiet_period(control, 50);
    CHECK_EQ(atomic_load(&lifetime_finalized), 0);
    dispatch_group_leave(g);
    WAIT_FOR_COUNT(&lifetime_finalized, 1, 30);
}

int main(void) {
    check_start("groups", 55);
    async_and_wait();
    enter_and_leave();
    notify();
    wait_inside_items();
    waiter_behind_members();
    test_group_rounds();
    lifetime();
#ifdef __BLOCKS__
    blocks();
#endif
    check_pass();
    return 0;
}
