// The library's own allocations under a failing malloc (shim_malloc: only calls made from
// the library's code fail, so the C library and the Swift runtime keep working):
// - one failed malloc, at the 1st, 2nd, 5th, 50th and 250th allocation of a workload (a
//   dispatch_apply and 20,000 work items through dispatch_async_f and a group, queued on a
//   suspended queue so that all are in flight at once: GrandCentral allocates work-item
//   nodes 62 to a slab, about 320 allocations, however fast the machine runs them): the
//   library retries after a short wait and the workload completes, every item run once;
// - memory that stays gone: the process ends with "GrandCentral: out of memory: <what>" on
//   stderr (written without allocating) and SIGABRT, instead of a trap or SIGSEGV with no
//   message.
// Each case runs in a child (fault_child.h) that arms the shim after the library's startup.
// Against the reference libdispatch (GC_REFERENCE_LIBDISPATCH; the shim watches
// libdispatch's image) the single failures pass (it retries calloc after sleep(1)), and
// the persistent case is reported, not failed: libdispatch retries forever.
#include "check.h"
#include "fault_child.h"

#include <dlfcn.h>

#define ITEMS 20000

static dispatch_queue_t global(void) { return dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0); }

static atomic_long ran;
static atomic_long applied;

static void count_item(void *context) {
    (void)context;
    atomic_fetch_add(&ran, 1);
}

static void apply_item(void *context, size_t index) {
    (void)context, (void)index;
    atomic_fetch_add(&applied, 1);
}

static void arm(void) {
    void (*arm_shim)(long, int) = (void (*)(long, int))dlsym(RTLD_DEFAULT, "gc_shim_malloc_arm");
    CHECKF(arm_shim != NULL, "shim_malloc is not loaded");
    const char *nth = getenv("GC_FAULT_NTH");
    const char *persistent = getenv("GC_FAULT_PERSISTENT");
    CHECK(nth != NULL);
    arm_shim(atol(nth), persistent != NULL);
}

static long failures(void) {
    long (*count)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "gc_shim_malloc_failures");
    return count ? count() : -1;
}

static int case_workload(void) {
    // Warm up: the library's threads and the event loop exist before the fault.
    dispatch_group_t group = dispatch_group_create();
    dispatch_group_async_f(group, global(), NULL, count_item);
    CHECK_EQ(dispatch_group_wait(group, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)), 0);
    dispatch_queue_t held = dispatch_queue_create("faults.memory.held", DISPATCH_QUEUE_CONCURRENT);
    dispatch_suspend(held);
    atomic_store(&ran, 0);
    arm();
    dispatch_apply_f(1000, global(), NULL, apply_item);
    for (int i = 0; i < ITEMS; i++) dispatch_group_async_f(group, held, NULL, count_item);
    dispatch_resume(held);
    CHECKF(dispatch_group_wait(group, dispatch_time(DISPATCH_TIME_NOW, 60 * NSEC_PER_SEC)) == 0,
           "the workload did not finish: %ld of %d items ran", atomic_load(&ran), ITEMS);
    CHECK_EQ(atomic_load(&ran), ITEMS);
    CHECK_EQ(atomic_load(&applied), 1000);
    dispatch_release(group);
    dispatch_release(held);
    printf("workload complete (%ld items, %ld applied) after %ld failed malloc(s)\n", atomic_load(&ran),
           atomic_load(&applied), failures());
    return 0;
}

int main(int argc, char **argv) {
    check_start("faults_memory", 240);
    if (argc > 1) {
        alarm(90);
        check_section(argv[1]);
        if (strcmp(argv[1], "workload") == 0) return case_workload();
        FAIL("no case %s", argv[1]);
    }
    static child_result_t result;
#ifdef GC_REFERENCE_LIBDISPATCH
    static const char *const image = "GC_SHIM_MALLOC_IMAGE=libdispatch";
#else
    static const char *const image = "GC_SHIM_MALLOC_IMAGE=libgrandcentral";
#endif
    static const int points[] = {1, 2, 5, 50, 250};
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        char name[64], nth[64];
        snprintf(name, sizeof name, "one failed malloc, the %dth of the workload", points[i]);
        snprintf(nth, sizeof nth, "GC_FAULT_NTH=%d", points[i]);
        const char *const environment[] = {nth, image, NULL};
        check_section(name);
        expect_child_passes("workload", "shim_malloc", environment, &result);
        CHECKF(strstr(result.output, "after 1 failed malloc(s)") != NULL, "the fault was not injected exactly once");
    }

    check_section("memory that stays gone: the process ends with a message");
#ifndef GC_REFERENCE_LIBDISPATCH
    // From the 1st allocation (dispatch_apply's registry, made first) and from the 2nd
    // (work-item nodes: the apply's registry was had).
    static const struct { const char *nth, *what; } gone[] = {
        {"GC_FAULT_NTH=1", "GrandCentral: out of memory: dispatch_apply states\n"},
        {"GC_FAULT_NTH=2", "GrandCentral: out of memory: work-item nodes\n"},
    };
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) {
        const char *const environment[] = {gone[i].nth, "GC_FAULT_PERSISTENT=1", image, NULL};
        run_child_case("workload", "shim_malloc", environment, &result);
        printf("   %s: child %s %d; output: %s", gone[i].nth, WIFEXITED(result.status) ? "exit" : "signal",
               WIFEXITED(result.status) ? WEXITSTATUS(result.status) : WTERMSIG(result.status), result.output);
        CHECKF(WIFSIGNALED(result.status) && WTERMSIG(result.status) == SIGABRT, "the child did not abort");
        CHECKF(strstr(result.output, gone[i].what) != NULL, "no message '%s'", gone[i].what);
    }
#else
    printf("   skipped: libdispatch retries a failed calloc forever (the child would hang)\n");
#endif
    check_pass();
    return 0;
}
