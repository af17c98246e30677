// A read source on a listening socket fires with the number of pending connections as its
// data (at least 1 while any is pending), so an accept loop that accepts `data`
// connections per call accepts them all. GrandCentral reports the accept queue's length
// for TCP (kqueue's behaviour on Darwin); libdispatch on Linux reports 1, which such a
// loop also survives (one connection per call); a Unix-domain socket reports 1 here too.
#include "check.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>

#define CLIENTS 40

typedef struct {
    dispatch_source_t source;
    int listener;
    atomic_long accepted;
    atomic_long calls;
    atomic_long zero_calls;         // calls with data 0 while connections were pending
    atomic_long failed_accepts;     // accept() found nothing although data promised one
    atomic_ulong most;              // the largest data seen
    int accepted_fds[CLIENTS];
    atomic_long cancels;
} listen_probe_t;

static void listen_event(void *context) {
    listen_probe_t *probe = context;
    unsigned long data = dispatch_source_get_data(probe->source);
    atomic_fetch_add(&probe->calls, 1);
    if (data > atomic_load(&probe->most)) atomic_store(&probe->most, data);
    if (data == 0) atomic_fetch_add(&probe->zero_calls, 1);
    // Trust the data: accept exactly that many.
    for (unsigned long i = 0; i < data; i++) {
        int fd = accept(probe->listener, NULL, NULL);
        if (fd < 0) {
            atomic_fetch_add(&probe->failed_accepts, 1);
            break;
        }
        long n = atomic_fetch_add(&probe->accepted, 1);
        if (n < CLIENTS) probe->accepted_fds[n] = fd; else close(fd);
    }
}

static void listen_cancelled(void *context) {
    listen_probe_t *probe = context;
    atomic_fetch_add(&probe->cancels, 1);
}

static int tcp_listener(struct sockaddr_in *address) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECKF(fd >= 0, "socket: %s", strerror(errno));
    memset(address, 0, sizeof *address);
    address->sin_family = AF_INET;
    address->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECKF(bind(fd, (struct sockaddr *)address, sizeof *address) == 0, "bind: %s", strerror(errno));
    socklen_t length = sizeof *address;
    CHECK(getsockname(fd, (struct sockaddr *)address, &length) == 0);
    CHECKF(listen(fd, 128) == 0, "listen: %s", strerror(errno));
    return fd;
}

static int unix_listener(struct sockaddr_un *address) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECKF(fd >= 0, "socket: %s", strerror(errno));
    memset(address, 0, sizeof *address);
    address->sun_family = AF_UNIX;
    // An abstract address: nothing to clean up in the file system.
    snprintf(address->sun_path + 1, sizeof address->sun_path - 1, "gc-test-source-listen-%d", (int)getpid());
    CHECKF(bind(fd, (struct sockaddr *)address, sizeof *address) == 0, "bind: %s", strerror(errno));
    CHECKF(listen(fd, 128) == 0, "listen: %s", strerror(errno));
    return fd;
}

/// Connects CLIENTS clients in bursts (all of a burst pending before the source is even
/// activated, for the first), while an accept loop that trusts the data serves them.
static void accept_loop(const char *name, bool tcp) {
    check_section(name);
    struct sockaddr_in in_address;
    struct sockaddr_un un_address;
    int listener = tcp ? tcp_listener(&in_address) : unix_listener(&un_address);
    struct sockaddr *address = tcp ? (struct sockaddr *)&in_address : (struct sockaddr *)&un_address;
    socklen_t address_length = tcp ? sizeof in_address : sizeof un_address;

    int clients[CLIENTS];
    int connected = 0;
    // The first burst waits in the accept queue before the source exists.
    for (; connected < CLIENTS / 4; connected++) {
        clients[connected] = socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM, 0);
        CHECK(clients[connected] >= 0);
        CHECKF(connect(clients[connected], address, address_length) == 0, "connect: %s", strerror(errno));
    }

    listen_probe_t probe;
    memset(&probe, 0, sizeof probe);
    probe.listener = listener;
    dispatch_queue_t queue = dispatch_queue_create("gc.test.source-listen", NULL);
    probe.source = dispatch_source_create(DISPATCH_SOURCE_TYPE_READ, (uintptr_t)listener, 0, queue);
    CHECK(probe.source != NULL);
    dispatch_set_context(probe.source, &probe);
    dispatch_source_set_event_handler_f(probe.source, listen_event);
    dispatch_source_set_cancel_handler_f(probe.source, listen_cancelled);
    dispatch_activate(probe.source);

    WAIT_FOR_COUNT(&probe.accepted, CLIENTS / 4, 20);
    // The rest in bursts of five.
    while (connected < CLIENTS) {
        for (int i = 0; i < 5 && connected < CLIENTS; i++, connected++) {
            clients[connected] = socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM, 0);
            CHECK(clients[connected] >= 0);
            CHECKF(connect(clients[connected], address, address_length) == 0, "connect: %s", strerror(errno));
        }
        WAIT_FOR_COUNT(&probe.accepted, connected, 20);
    }
    dispatch_source_cancel(probe.source);
    WAIT_FOR_COUNT(&probe.cancels, 1, 10);
    printf("   %d connections accepted in %ld calls; largest data %lu; %ld calls with 0, %ld accepts that found "
           "nothing\n", CLIENTS, atomic_load(&probe.calls), atomic_load(&probe.most), atomic_load(&probe.zero_calls),
           atomic_load(&probe.failed_accepts));
    CHECK_EQ(atomic_load(&probe.accepted), CLIENTS);
    CHECK_EQ(atomic_load(&probe.failed_accepts), 0);
    CHECK(atomic_load(&probe.most) >= 1);
#ifndef GC_REFERENCE_LIBDISPATCH
    // The first burst was all pending when the source started: TCP reports its size.
    if (tcp) CHECKF(atomic_load(&probe.most) >= CLIENTS / 4, "largest data %lu", atomic_load(&probe.most));
#endif
    dispatch_release(probe.source);
    dispatch_release(queue);
    for (int i = 0; i < CLIENTS; i++) {
        close(clients[i]);
        close(probe.accepted_fds[i]);
    }
    close(listener);
}

int main(void) {
    check_start("source_listen", 60);
    accept_loop("TCP: an accept loop that accepts `data` connections per call", true);
    accept_loop("Unix-domain: an accept loop that accepts `data` connections per call", false);
    check_pass();
    return 0;
}
