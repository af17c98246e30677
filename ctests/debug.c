// dispatch_debug/dispatch_debugv: print one line to stderr that names the object (a
// queue's label) and carries the formatted message. Nothing else is printed and nothing
// about the object changes.
#include "check.h"

static dispatch_queue_t queue;
static dispatch_group_t group;
static dispatch_semaphore_t semaphore;

static void debug_queue(void *context) {
    (void)context;
    dispatch_debug(queue, "hello %d from %s", 42, "the test");
}

static void debugv_helper(dispatch_object_t object, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    dispatch_debugv(object, format, ap);
    va_end(ap);
}

static void debugv_queue(void *context) {
    (void)context;
    debugv_helper(queue, "value=%ld", 1234567L);
}

static void debug_others(void *context) {
    (void)context;
    dispatch_debug(group, "group %s", "message");
    dispatch_debug(semaphore, "semaphore %s", "message");
}

static void debug_main_queue(void *context) {
    (void)context;
    dispatch_debug(dispatch_get_main_queue(), "main");
}

static int count_lines(const char *text) {
    int lines = 0;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    return lines;
}

static void expect_one_line(const char *output, const char *label, const char *message) {
    CHECKF(count_lines(output) == 1 && output[strlen(output) - 1] == '\n',
           "expected exactly one line on stderr, got: \"%s\"", output);
    CHECKF(strstr(output, label) != NULL, "the line does not name the queue \"%s\": \"%s\"", label, output);
    CHECKF(strstr(output, message) != NULL, "the line lacks the message \"%s\": \"%s\"", message, output);
}

int main(void) {
#ifdef GC_REFERENCE_LIBDISPATCH
    setenv("LIBDISPATCH_LOG", "stderr", 1);   // libdispatch logs elsewhere by default
#endif
    check_start("debug", 30);
    queue = dispatch_queue_create("com.grandcentral.tests.debug-label", NULL);
    group = dispatch_group_create();
    semaphore = dispatch_semaphore_create(0);
    char output[4096];
#ifdef GC_REFERENCE_LIBDISPATCH
    dispatch_debug(group, "warm-up");   // libdispatch opens its log with a banner line
#endif

    check_section("dispatch_debug prints one line naming the queue, with the message");
    capture_stderr(debug_queue, NULL, output, sizeof output);
    printf("   %s", output);
    expect_one_line(output, "com.grandcentral.tests.debug-label", "hello 42 from the test");

    check_section("dispatch_debugv takes a va_list");
    capture_stderr(debugv_queue, NULL, output, sizeof output);
    printf("   %s", output);
    expect_one_line(output, "com.grandcentral.tests.debug-label", "value=1234567");

    check_section("groups and semaphores print one line each");
    capture_stderr(debug_others, NULL, output, sizeof output);
    printf("   %s", output);
    CHECKF(count_lines(output) == 2, "expected two lines, got: \"%s\"", output);
    CHECK(strstr(output, "group message") != NULL);
    CHECK(strstr(output, "semaphore message") != NULL);

    check_section("the main queue's line names the target libdispatch reports");
    // libdispatch targets the main queue at the default-QoS overcommit root (its line
    // reads `target = com.apple.root.default-qos.overcommit[0x…]`; ours quotes the label).
    capture_stderr(debug_main_queue, NULL, output, sizeof output);
    printf("   %s", output);
    expect_one_line(output, "com.apple.main-thread", "main");
    const char *target = strstr(output, "target = ");
    CHECKF(target != NULL, "the main queue's line names no target: \"%s\"", output);
    target += strlen("target = ");
    if (*target == '"') target++;
    CHECKF(strncmp(target, "com.apple.root.default-qos.overcommit", strlen("com.apple.root.default-qos.overcommit")) == 0,
           "the main queue's target is not com.apple.root.default-qos.overcommit: \"%s\"", output);

    check_section("the queue still works afterwards");
    dispatch_sync_f(queue, NULL, noop_function);
    CHECK_STR(dispatch_queue_get_label(queue), "com.grandcentral.tests.debug-label");
    dispatch_release(queue);
    dispatch_release(group);
    dispatch_release(semaphore);
    check_pass();
    return 0;
}
