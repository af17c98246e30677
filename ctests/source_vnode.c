// Vnode sources (DISPATCH_SOURCE_TYPE_VNODE): on a temporary file, one source with every
// bit sees, step by step (each step waits for its bit before the next), a write that
// grows the file (WRITE | EXTEND), an overwrite that does not (WRITE alone), an attribute
// change (fchmod: ATTRIB), a second link and its removal (LINK), a rename (RENAME) and the
// unlink of the last name while the descriptor is still open (DELETE). A change made right
// after dispatch_activate() returns is seen. Two sources on one file, through two
// descriptors, each see only their own mask's bits, and cancelling one leaves the other
// working. A directory's source sees an entry created in it (WRITE). A descriptor that is
// not open gives a source that never fires. The cancel handler runs exactly once, with no
// event after it; dispatch_source_create returns NULL for undefined mask bits. Twenty
// files with a source each, written together, each report.
//
// Not run against the reference: the toolchain's libdispatch declares
// DISPATCH_SOURCE_TYPE_VNODE unavailable on Linux and does not export
// _dispatch_source_type_vnode, so this file does not build against it
// (ctests/run-reference.sh skips it). The expectations are Darwin's GCD (kqueue's
// EVFILT_VNODE), where Linux can tell: FUNLOCK is never reported here.
#include "check.h"

#include <sys/stat.h>

#define ALL_VNODE_BITS (DISPATCH_VNODE_DELETE | DISPATCH_VNODE_WRITE | DISPATCH_VNODE_EXTEND | \
                        DISPATCH_VNODE_ATTRIB | DISPATCH_VNODE_LINK | DISPATCH_VNODE_RENAME | \
                        DISPATCH_VNODE_REVOKE | DISPATCH_VNODE_FUNLOCK)

// MARK: - A probe: what the handlers saw

typedef struct {
    dispatch_source_t source;
    unsigned long mask;
    atomic_long events;
    atomic_ulong seen;          // or of the data delivered since the last reset
    atomic_ulong all;           // or of every delivered data
    atomic_long cancels;
    atomic_long events_at_cancel;
    latch_t cancelled;
} probe_t;

static void probe_event(void *context) {
    probe_t *probe = context;
    unsigned long data = dispatch_source_get_data(probe->source);
    atomic_fetch_or(&probe->seen, data);
    atomic_fetch_or(&probe->all, data);
    atomic_fetch_add(&probe->events, 1);
}

static void probe_cancel(void *context) {
    probe_t *probe = context;
    atomic_store(&probe->events_at_cancel, atomic_load(&probe->events));
    atomic_fetch_add(&probe->cancels, 1);
    latch_arrive(&probe->cancelled);
}

static dispatch_source_t make_probe_source(probe_t *probe, int fd, unsigned long mask, dispatch_queue_t queue) {
    memset(probe, 0, sizeof *probe);
    latch_init(&probe->cancelled, 1);
    probe->mask = mask;
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_VNODE, (uintptr_t)fd, mask, queue);
    CHECKF(source != NULL, "dispatch_source_create(VNODE, %d, 0x%lx) returned NULL", fd, mask);
    probe->source = source;
    dispatch_set_context(source, probe);
    dispatch_source_set_event_handler_f(source, probe_event);
    dispatch_source_set_cancel_handler_f(source, probe_cancel);
    return source;
}

/// Waits until every bit of `bits` was seen since the last reset.
static bool wait_for_bits(probe_t *probe, unsigned long bits, double seconds) {
    uint64_t deadline = now_ns() + (uint64_t)(seconds * 1e9);
    while ((atomic_load(&probe->seen) & bits) != bits) {
        if (now_ns() > deadline) return false;
        sleep_ms(1);
    }
    return true;
}

#define WAIT_FOR_BITS(probe, bits, what) \
    CHECKF(wait_for_bits((probe), (bits), 10), "%s: expected bits 0x%lx, saw 0x%lx", (what), \
           (unsigned long)(bits), (unsigned long)atomic_load(&(probe)->seen))

/// Lets late events of the previous step arrive, then forgets what was seen.
static void settle_and_reset(probe_t *probe) {
    sleep_ms(50);
    atomic_store(&probe->seen, 0);
}

/// Cancels, waits for the cancel handler, and checks it ran once and nothing followed.
static void cancel_and_check(probe_t *probe) {
    dispatch_source_cancel(probe->source);
    LATCH_WAIT(&probe->cancelled, 10, "the cancel handler");
    long events = atomic_load(&probe->events);
    CHECK_EQ(atomic_load(&probe->events_at_cancel), events);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&probe->cancels), 1);
    CHECK_EQ(atomic_load(&probe->events), events);
    CHECKF((atomic_load(&probe->all) & ~probe->mask) == 0, "data 0x%lx has bits outside the mask 0x%lx",
           (unsigned long)atomic_load(&probe->all), probe->mask);
    dispatch_release(probe->source);
    latch_destroy(&probe->cancelled);
}

static int make_temp_file(char *path, size_t size) {
    snprintf(path, size, "/tmp/gc-vnode-XXXXXX");
    int fd = mkstemp(path);
    CHECKF(fd >= 0, "mkstemp: %s", strerror(errno));
    return fd;
}

static void write_all(int fd, const char *text) {
    ssize_t n = write(fd, text, strlen(text));
    CHECK_EQ(n, (long)strlen(text));
}

// MARK: - Sections

static void every_change(void) {
    check_section("one source, every bit: write, overwrite, attrib, link, rename, delete, each seen");
    char path[64], second[80], renamed[80];
    int fd = make_temp_file(path, sizeof path);
    snprintf(second, sizeof second, "%s.link", path);
    snprintf(renamed, sizeof renamed, "%s.renamed", path);
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.vnode.every", NULL);
    static probe_t probe;
    dispatch_source_t source = make_probe_source(&probe, fd, ALL_VNODE_BITS, queue);
    dispatch_activate(source);
    // Right after activation: the watch is in place.
    write_all(fd, "hello, vnode\n");
    WAIT_FOR_BITS(&probe, DISPATCH_VNODE_WRITE | DISPATCH_VNODE_EXTEND, "a write that grows the file");
    CHECK_EQ(dispatch_source_get_handle(source), fd);
    CHECK_EQ(dispatch_source_get_mask(source), ALL_VNODE_BITS);

    settle_and_reset(&probe);
    CHECK_EQ(pwrite(fd, "H", 1, 0), 1);
    WAIT_FOR_BITS(&probe, DISPATCH_VNODE_WRITE, "an overwrite");
    sleep_ms(50);
    CHECKF((atomic_load(&probe.seen) & DISPATCH_VNODE_EXTEND) == 0, "an overwrite reported EXTEND");

    settle_and_reset(&probe);
    CHECK(fchmod(fd, 0640) == 0);
    WAIT_FOR_BITS(&probe, DISPATCH_VNODE_ATTRIB, "fchmod");
    sleep_ms(50);
    CHECKF((atomic_load(&probe.seen) & (DISPATCH_VNODE_DELETE | DISPATCH_VNODE_RENAME | DISPATCH_VNODE_LINK)) == 0,
           "fchmod reported 0x%lx", (unsigned long)atomic_load(&probe.seen));

    settle_and_reset(&probe);
    CHECK(link(path, second) == 0);
    WAIT_FOR_BITS(&probe, DISPATCH_VNODE_LINK, "link()");
    settle_and_reset(&probe);
    CHECK(unlink(second) == 0);
    WAIT_FOR_BITS(&probe, DISPATCH_VNODE_LINK, "unlink() of the second name");
    sleep_ms(50);
    CHECKF((atomic_load(&probe.seen) & DISPATCH_VNODE_DELETE) == 0, "removing one of two names reported DELETE");

    settle_and_reset(&probe);
    CHECK(rename(path, renamed) == 0);
    WAIT_FOR_BITS(&probe, DISPATCH_VNODE_RENAME, "rename()");
    sleep_ms(50);
    CHECKF((atomic_load(&probe.seen) & DISPATCH_VNODE_DELETE) == 0, "rename reported DELETE");

    settle_and_reset(&probe);
    CHECK(unlink(renamed) == 0);
    WAIT_FOR_BITS(&probe, DISPATCH_VNODE_DELETE, "unlink() of the last name, descriptor still open");

    cancel_and_check(&probe);
    CHECKF((atomic_load(&probe.all) & DISPATCH_VNODE_FUNLOCK) == 0, "FUNLOCK was reported");
    close(fd);
    dispatch_release(queue);
}

static void two_sources(void) {
    check_section("two sources on one file (two descriptors): each sees only its mask; one cancelled, the other works");
    char path[64];
    int fd = make_temp_file(path, sizeof path);
    int fd2 = open(path, O_RDONLY);
    CHECK(fd2 >= 0);
    static probe_t writes, attribs;
    dispatch_source_t a = make_probe_source(&writes, fd, DISPATCH_VNODE_WRITE,
                                            dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0));
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.vnode.b", NULL);
    dispatch_source_t b = make_probe_source(&attribs, fd2, DISPATCH_VNODE_ATTRIB, queue);
    dispatch_activate(a);
    dispatch_activate(b);

    write_all(fd, "data");
    WAIT_FOR_BITS(&writes, DISPATCH_VNODE_WRITE, "the WRITE source: a write");
    CHECK(fchmod(fd, 0604) == 0);
    WAIT_FOR_BITS(&attribs, DISPATCH_VNODE_ATTRIB, "the ATTRIB source: fchmod");
    sleep_ms(100);
    CHECK_EQ_U64(atomic_load(&writes.all), DISPATCH_VNODE_WRITE);
    CHECK_EQ_U64(atomic_load(&attribs.all), DISPATCH_VNODE_ATTRIB);

    // Cancel the WRITE source; the shared watch keeps serving the other one.
    cancel_and_check(&writes);
    settle_and_reset(&attribs);
    write_all(fd, "more");
    CHECK(fchmod(fd, 0600) == 0);
    WAIT_FOR_BITS(&attribs, DISPATCH_VNODE_ATTRIB, "the ATTRIB source after the other was cancelled");
    // And a new source on the same file joins the watch.
    static probe_t again;
    dispatch_source_t c = make_probe_source(&again, fd, DISPATCH_VNODE_WRITE | DISPATCH_VNODE_EXTEND,
                                            dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0));
    dispatch_activate(c);
    write_all(fd, "again");
    WAIT_FOR_BITS(&again, DISPATCH_VNODE_WRITE | DISPATCH_VNODE_EXTEND, "a third source: a write");
    cancel_and_check(&again);
    cancel_and_check(&attribs);
    dispatch_release(queue);
    close(fd);
    close(fd2);
    unlink(path);
}

static void directory(void) {
    check_section("a directory's source: an entry created in it is a WRITE");
    char dir[] = "/tmp/gc-vnode-dir-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    CHECK(fd >= 0);
    static probe_t probe;
    dispatch_source_t source = make_probe_source(&probe, fd, DISPATCH_VNODE_WRITE | DISPATCH_VNODE_LINK,
                                                 dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0));
    dispatch_activate(source);
    char child[96];
    snprintf(child, sizeof child, "%s/child", dir);
    int cfd = open(child, O_CREAT | O_WRONLY, 0600);
    CHECK(cfd >= 0);
    WAIT_FOR_BITS(&probe, DISPATCH_VNODE_WRITE, "a file created in the directory");
    settle_and_reset(&probe);
    // Writing into the child is not a change of the directory.
    write_all(cfd, "child data");
    close(cfd);
    sleep_ms(100);
    CHECK_EQ_U64(atomic_load(&probe.seen), 0);
    char sub[96];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    CHECK(mkdir(sub, 0700) == 0);
    WAIT_FOR_BITS(&probe, DISPATCH_VNODE_WRITE | DISPATCH_VNODE_LINK, "a subdirectory (the link count grows)");
    cancel_and_check(&probe);
    rmdir(sub);
    unlink(child);
    close(fd);
    rmdir(dir);
}

static void bad_descriptor(void) {
    check_section("a descriptor that is not open: the source never fires; cancel runs its handler once");
    int fd = 900;
    while (fcntl(fd, F_GETFD) >= 0) fd++;
    static probe_t probe;
    dispatch_source_t source = make_probe_source(&probe, fd, ALL_VNODE_BITS,
                                                 dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0));
    dispatch_activate(source);
    sleep_ms(100);
    CHECK_EQ(atomic_load(&probe.events), 0);
    cancel_and_check(&probe);
}

enum { MANY = 20 };

static void many_files(void) {
    check_section("20 files with a source each, written together: each reports WRITE, cancels once each");
    static probe_t probes[MANY];
    char paths[MANY][64];
    int fds[MANY];
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.vnode.many", DISPATCH_QUEUE_CONCURRENT);
    for (int i = 0; i < MANY; i++) {
        fds[i] = make_temp_file(paths[i], sizeof paths[i]);
        dispatch_activate(make_probe_source(&probes[i], fds[i], DISPATCH_VNODE_WRITE | DISPATCH_VNODE_DELETE, queue));
    }
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < MANY; i++) {
            atomic_store(&probes[i].seen, 0);
            write_all(fds[i], "x");
        }
        for (int i = 0; i < MANY; i++) WAIT_FOR_BITS(&probes[i], DISPATCH_VNODE_WRITE, "a write to one of many files");
    }
    for (int i = 0; i < MANY; i++) unlink(paths[i]);
    for (int i = 0; i < MANY; i++) WAIT_FOR_BITS(&probes[i], DISPATCH_VNODE_DELETE, "the unlink of one of many files");
    for (int i = 0; i < MANY; i++) {
        cancel_and_check(&probes[i]);
        close(fds[i]);
    }
    dispatch_release(queue);
}

enum { CHURN = 300 };

static atomic_long churn_cancels;
static void churn_cancelled(void *context) {
    (void)context;
    atomic_fetch_add(&churn_cancels, 1);
}

static void churn(void) {
    check_section("300 sources on one file activated, cancelled and released at once (each cancel handler still runs once) while a long-lived one keeps watching");
    char path[64];
    int fd = make_temp_file(path, sizeof path);
    static probe_t keeper;
    dispatch_source_t keep = make_probe_source(&keeper, fd, DISPATCH_VNODE_WRITE,
                                               dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0));
    dispatch_activate(keep);
    dispatch_queue_t queue = dispatch_queue_create("com.grandcentral.tests.vnode.churn", DISPATCH_QUEUE_CONCURRENT);
    atomic_store(&churn_cancels, 0);
    for (int i = 0; i < CHURN; i++) {
        dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_VNODE, (uintptr_t)fd,
                                                          i % 2 ? DISPATCH_VNODE_ATTRIB : DISPATCH_VNODE_WRITE,
                                                          queue);
        CHECK(source != NULL);
        dispatch_source_set_cancel_handler_f(source, churn_cancelled);
        dispatch_activate(source);
        if (i % 16 == 0) write_all(fd, "c");
        dispatch_source_cancel(source);
        dispatch_release(source);
    }
    WAIT_FOR_COUNT(&churn_cancels, CHURN, 10);
    // The shared watch survived every removal: the long-lived source still sees writes.
    settle_and_reset(&keeper);
    write_all(fd, "still watching");
    WAIT_FOR_BITS(&keeper, DISPATCH_VNODE_WRITE, "the long-lived source after the churn");
    sleep_ms(50);
    CHECK_EQ(atomic_load(&churn_cancels), CHURN);
    cancel_and_check(&keeper);
    dispatch_release(queue);
    close(fd);
    unlink(path);
}

static void rejected(void) {
    check_section("dispatch_source_create returns NULL for undefined mask bits");
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_VNODE, 0, 0x80, NULL) == NULL);
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_VNODE, 0, 0x200, NULL) == NULL);
    CHECK(dispatch_source_create(DISPATCH_SOURCE_TYPE_VNODE, 0, ALL_VNODE_BITS | 0x1000, NULL) == NULL);
    // Every defined bit, and no bit at all, are accepted.
    unsigned long masks[] = { ALL_VNODE_BITS, 0 };
    for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_VNODE, 0, masks[i], NULL);
        CHECKF(source != NULL, "mask 0x%lx was refused", masks[i]);
        dispatch_activate(source);
        dispatch_source_cancel(source);
        dispatch_release(source);
    }
}

#ifdef __BLOCKS__
static void blocks(void) {
    check_section("blocks: event and cancel handlers as blocks");
    char path[64];
    int fd = make_temp_file(path, sizeof path);
    dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_VNODE, (uintptr_t)fd,
                                                      DISPATCH_VNODE_WRITE | DISPATCH_VNODE_DELETE,
                                                      dispatch_get_global_queue(QOS_CLASS_DEFAULT, 0));
    CHECK(source != NULL);
    static atomic_ulong seen;
    static atomic_long cancels;
    static latch_t cancelled;
    latch_init(&cancelled, 1);
    dispatch_source_set_event_handler(source, ^{ atomic_fetch_or(&seen, dispatch_source_get_data(source)); });
    dispatch_source_set_cancel_handler(source, ^{
        atomic_fetch_add(&cancels, 1);
        latch_arrive(&cancelled);
    });
    dispatch_resume(source);
    write_all(fd, "block");
    unlink(path);
    uint64_t deadline = now_ns() + 10 * NSEC_PER_SEC;
    while (atomic_load(&seen) != (DISPATCH_VNODE_WRITE | DISPATCH_VNODE_DELETE) && now_ns() < deadline) sleep_ms(1);
    CHECK_EQ_U64(atomic_load(&seen), DISPATCH_VNODE_WRITE | DISPATCH_VNODE_DELETE);
    dispatch_source_cancel(source);
    LATCH_WAIT(&cancelled, 10, "the cancel handler (blocks)");
    sleep_ms(50);
    CHECK_EQ(atomic_load(&cancels), 1);
    dispatch_release(source);
    close(fd);
}
#endif

int main(void) {
    check_start("source_vnode", 50);
    rejected();
    every_change();
    two_sources();
    directory();
    bad_descriptor();
    many_files();
    churn();
#ifdef __BLOCKS__
    blocks();
#endif
    check_pass();
    return 0;
}
