// An item runs at the nice value of its queue's QoS class, as under libdispatch on Linux:
// background (and maintenance) 10, utility 2, default (and unspecified) 0, user-initiated
// and user-interactive -2, on the global queues, overcommit or not, and on serial queues
// made with a QoS attribute. The item reads its own thread's nice value
// (getpriority(PRIO_PROCESS, gettid())), as a program would.
//
// Sections, each a child (fault_child.h) whose main thread is set up before any dispatch call:
// - plain, a main thread at nice 19, a main thread under SCHED_IDLE: items of each class one
//   after another, in an order that makes one worker go from 10 back down to -2 (a worker
//   serves every class here), then 10^5 items spread over the classes at once, each checking
//   its own nice value.
// - an unprivileged process (uid nobody, RLIMIT_NICE 0): a thread may raise its nice value
//   but never lower it. GrandCentral then keeps every worker at the value it started at, so
//   a default item never runs at a background item's 10; libdispatch raises its background
//   threads to 10 one way, and threads started from them stay there (printed, not asserted,
//   in the reference build).
// Lowering a nice value below 0 needs CAP_SYS_NICE (CI runs as root) or RLIMIT_NICE; the
// expected values are clamped as the kernel's rule allows (see `nice_floor`).
#include "check.h"
#include "fault_child.h"

#include <grp.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#define QOS_CLASS_MAINTENANCE_ 0x05

typedef struct {
    const char *name;
    long qos;
    int nice;  // libdispatch's value (as root)
} qos_case_t;

static const qos_case_t classes[] = {
    {"background", QOS_CLASS_BACKGROUND, 10},       {"user-interactive", QOS_CLASS_USER_INTERACTIVE, -2},
    {"utility", QOS_CLASS_UTILITY, 2},              {"maintenance", QOS_CLASS_MAINTENANCE_, 10},
    {"user-initiated", QOS_CLASS_USER_INITIATED, -2}, {"default", QOS_CLASS_DEFAULT, 0},
    {"unspecified", QOS_CLASS_UNSPECIFIED, 0},
};
#define CLASS_COUNT ((int)(sizeof classes / sizeof classes[0]))

static int thread_nice(void) {
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
    return errno ? 99 : nice;
}

/// The lowest nice value a thread here may set: -20 with CAP_SYS_NICE (bit 23 of CapEff in
/// /proc/self/status), else 20 - RLIMIT_NICE.
static int nice_floor(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long caps = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "CapEff:", 7) == 0) caps = strtoull(line + 7, NULL, 16);
    }
    if (f) fclose(f);
    if (caps & (1ull << 23)) return -20;
    struct rlimit limit;
    CHECK(getrlimit(RLIMIT_NICE, &limit) == 0);
    rlim_t r = limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > 40 ? 40 : limit.rlim_cur;
    return 20 - (int)r;
}

/// What an item of class `c` should see. `start`: the main thread's nice value before any
/// dispatch call (what library threads inherit). Returns 100 when nothing is promised.
static int expected_nice(const qos_case_t *c, int start) {
    int floor = nice_floor();
    // A worker serves every class, so it follows the classes only if it can come back down
    // to 0 (libdispatch's threads each serve one class and need only their own value).
    if (floor <= 0) return c->nice > floor ? c->nice : floor;
#ifdef GC_REFERENCE_LIBDISPATCH
    (void)start;
    return 100;
#else
    return start;
#endif
}

typedef struct {
    int nice, policy;
    latch_t done;
} look_t;

static void look(void *context) {
    look_t *look = context;
    look->nice = thread_nice();
    look->policy = sched_getscheduler(0);
    latch_arrive(&look->done);
}

static int observe(dispatch_queue_t queue, int *policy) {
    look_t result;
    latch_init(&result.done, 1);
    dispatch_async_f(queue, &result, look);
    CHECKF(latch_wait(&result.done, 20), "an item did not run");
    latch_destroy(&result.done);
    *policy = result.policy;
    return result.nice;
}

static dispatch_queue_t queue_of(const qos_case_t *c, int flavour) {
    if (flavour == 0) return dispatch_get_global_queue(c->qos, 0);
    if (flavour == 1) return dispatch_get_global_queue(c->qos, DISPATCH_QUEUE_OVERCOMMIT);
    return dispatch_queue_create("qos_priority.serial",
                                 dispatch_queue_attr_make_with_qos_class(DISPATCH_QUEUE_SERIAL, (dispatch_qos_class_t)c->qos, 0));
}

static const char *const flavours[] = {"global", "global overcommit", "serial"};

static bool policy_promised(void) {
#ifdef GC_REFERENCE_LIBDISPATCH
    return false;  // libdispatch's threads keep SCHED_IDLE (seen)
#else
    return nice_floor() <= 0;  // leaving SCHED_IDLE needs the same privilege
#endif
}

/// One item of each class and flavour after another, twice.
static void check_each_class(const char *what, int start) {
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < CLASS_COUNT; i++) {
            for (int flavour = 0; flavour < 3; flavour++) {
                const qos_case_t *c = &classes[i];
                dispatch_queue_t queue = queue_of(c, flavour);
                CHECKF(queue != NULL, "%s: no %s queue for %s", what, flavours[flavour], c->name);
                int policy = 0;
                int nice = observe(queue, &policy);
                if (flavour == 2) dispatch_release(queue);
                int expected = expected_nice(c, start);
                printf("%s: %s %s: nice %d (expected %s%d), policy %d\n", what, flavours[flavour], c->name, nice,
                       expected == 100 ? "nothing; libdispatch as root: " : "", expected == 100 ? c->nice : expected,
                       policy);
                if (expected != 100) {
                    CHECKF(nice == expected, "%s: an item on the %s %s queue ran at nice %d, expected %d", what,
                           flavours[flavour], c->name, nice, expected);
                }
                if (policy_promised()) {
                    CHECKF(policy == SCHED_OTHER, "%s: an item on the %s %s queue ran under policy %d", what,
                           flavours[flavour], c->name, policy);
                }
            }
        }
    }
}

typedef struct {
    int expected;
    atomic_long *ran, *wrong;
    atomic_int *last_wrong;
} stress_t;

static void stress_item(void *context) {
    stress_t *s = context;
    int nice = thread_nice();
    if (s->expected != 100 && nice != s->expected) {
        atomic_fetch_add(s->wrong, 1);
        atomic_store(s->last_wrong, nice);
    }
    atomic_fetch_add(s->ran, 1);
}

/// 10^5 items over every class and both global flavours at once: workers change class all
/// the time; every item checks its own nice value.
static void check_mixed(const char *what, int start) {
    enum { N = 100000 };
    static atomic_long ran, wrong;
    static atomic_int last_wrong;
    static stress_t contexts[CLASS_COUNT];
    atomic_store(&ran, 0);
    atomic_store(&wrong, 0);
    for (int i = 0; i < CLASS_COUNT; i++) {
        contexts[i] = (stress_t){expected_nice(&classes[i], start), &ran, &wrong, &last_wrong};
    }
    dispatch_group_t group = dispatch_group_create();
    for (long i = 0; i < N; i++) {
        int c = (int)(i % CLASS_COUNT);
        dispatch_queue_t queue = dispatch_get_global_queue(classes[c].qos, (i / CLASS_COUNT) % 2 ? DISPATCH_QUEUE_OVERCOMMIT : 0);
        dispatch_group_async_f(group, queue, &contexts[c], stress_item);
    }
    CHECKF(dispatch_group_wait(group, dispatch_time(DISPATCH_TIME_NOW, 120 * NSEC_PER_SEC)) == 0,
           "%s: %ld of %d mixed items ran", what, atomic_load(&ran), N);
    dispatch_release(group);
    printf("%s: %d mixed items, %ld at a nice value other than their class's (last seen %d)\n", what, N,
           atomic_load(&wrong), atomic_load(&last_wrong));
    CHECK_EQ(atomic_load(&ran), N);
    CHECKF(atomic_load(&wrong) == 0, "%s: %ld of %d items ran at another class's nice value (one at %d)", what,
           atomic_load(&wrong), N, atomic_load(&last_wrong));
}

static int run_checks(const char *what) {
    int start = thread_nice();
    printf("%s: main thread at nice %d, policy %d; lowest settable nice %d\n", what, start, sched_getscheduler(0),
           nice_floor());
    check_each_class(what, start);
    check_mixed(what, start);
    return 0;
}

static int case_nice(void) {
    CHECK(setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19) == 0);
    return run_checks("main thread at nice 19");
}

static int case_idle(void) {
    struct sched_param param = {.sched_priority = 0};
    CHECK(sched_setscheduler(0, SCHED_IDLE, &param) == 0);
    return run_checks("main thread under SCHED_IDLE");
}

/// As root: become nobody (no capabilities, RLIMIT_NICE 0) and start this program again,
/// so the library loads in an unprivileged process. Exit status 77: cannot (not root, or
/// nobody may not run this build's files).
static int case_drop(void) {
    struct rlimit none = {0, 0};
    if (geteuid() != 0) return 77;
    if (setrlimit(RLIMIT_NICE, &none) != 0 || setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0) {
        return 77;
    }
    execl("/proc/self/exe", check_test_name, "unprivileged", (char *)NULL);
    return 77;
}

static void submit_from_background(void *context) {
    look_t *inner = context;
    dispatch_async_f(dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0), &inner[0], look);
    dispatch_async_f(dispatch_get_global_queue(QOS_CLASS_USER_INITIATED, 0), &inner[1], look);
}

/// Unprivileged: a background item first, then a default and a user-initiated one that the
/// background item submits (a thread started from it inherits its nice value), then the rest.
static int case_unprivileged(void) {
    CHECKF(nice_floor() > 0, "expected no way to lower a nice value, found floor %d", nice_floor());
    int start = thread_nice();
    static look_t inner[2];
    latch_init(&inner[0].done, 1);
    latch_init(&inner[1].done, 1);
    dispatch_async_f(dispatch_get_global_queue(QOS_CLASS_BACKGROUND, 0), inner, submit_from_background);
    CHECK(latch_wait(&inner[0].done, 20) && latch_wait(&inner[1].done, 20));
    printf("unprivileged: default and user-initiated items submitted from a background item: nice %d and %d\n",
           inner[0].nice, inner[1].nice);
#ifndef GC_REFERENCE_LIBDISPATCH
    CHECKF(inner[0].nice == start && inner[1].nice == start,
           "unprivileged: items submitted from a background item ran at nice %d and %d, not %d", inner[0].nice,
           inner[1].nice, start);
#endif
    return run_checks("unprivileged");
}

int main(int argc, char **argv) {
    check_start("qos_priority", 300);
    if (argc > 1) {
        alarm(120);
        check_section(argv[1]);
        if (strcmp(argv[1], "plain") == 0) return run_checks("plain");
        if (strcmp(argv[1], "nice") == 0) return case_nice();
        if (strcmp(argv[1], "idle") == 0) return case_idle();
        if (strcmp(argv[1], "drop") == 0) return case_drop();
        if (strcmp(argv[1], "unprivileged") == 0) return case_unprivileged();
        FAIL("no case %s", argv[1]);
    }
    static child_result_t result;
    check_section("each class, the main thread as started");
    expect_child_passes("plain", NULL, NULL, &result);
    check_section("a main thread at nice 19");
    if (nice_floor() <= 0) {
        expect_child_passes("nice", NULL, NULL, &result);
    } else {
        printf("   skipped: raising a thread's priority back needs CAP_SYS_NICE or RLIMIT_NICE >= 20\n");
    }
    check_section("a main thread under SCHED_IDLE");
    expect_child_passes("idle", NULL, NULL, &result);
    check_section("an unprivileged process");
    run_child_case("drop", NULL, NULL, &result);
    if (WIFEXITED(result.status) && WEXITSTATUS(result.status) == 77) {
        printf("   skipped: not root, or uid nobody cannot run this build\n");
    } else {
        printf("%s", result.output);
        CHECKF(WIFEXITED(result.status) && WEXITSTATUS(result.status) == 0, "the unprivileged case failed (status %d)",
               result.status);
    }
    check_pass();
    return 0;
}
