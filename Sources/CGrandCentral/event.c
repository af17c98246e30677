// The event thread's OS calls: epoll, timerfd, eventfd (see CGrandCentralEvent.h).
#define _GNU_SOURCE 1  // F_GETPIPE_SZ
#include "CGrandCentralEvent.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <sys/stat.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

_Static_assert(GC_POLL_IN == EPOLLIN, "GC_POLL_IN");
_Static_assert(GC_POLL_OUT == EPOLLOUT, "GC_POLL_OUT");
_Static_assert(GC_POLL_ERR == EPOLLERR, "GC_POLL_ERR");
_Static_assert(GC_POLL_HUP == EPOLLHUP, "GC_POLL_HUP");
_Static_assert(GC_POLL_RDHUP == EPOLLRDHUP, "GC_POLL_RDHUP");
_Static_assert(GC_POLL_ONESHOT == EPOLLONESHOT, "GC_POLL_ONESHOT");
_Static_assert(GC_POLL_ADD == EPOLL_CTL_ADD, "GC_POLL_ADD");
_Static_assert(GC_POLL_DEL == EPOLL_CTL_DEL, "GC_POLL_DEL");
_Static_assert(GC_POLL_MOD == EPOLL_CTL_MOD, "GC_POLL_MOD");

static clockid_t gc_clock_id(int clock) {
    switch (clock) {
    case GC_CLOCK_WALL: return CLOCK_REALTIME;
    case GC_CLOCK_BOOT: return CLOCK_BOOTTIME;
    default: return CLOCK_MONOTONIC;
    }
}

uint64_t gc_boottime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int gc_poll_create(void) {
    int fd = epoll_create1(EPOLL_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int gc_poll_control(int poll, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev = { .events = events, .data.u64 = data };
    return epoll_ctl(poll, op, fd, &ev) < 0 ? -errno : 0;
}

int gc_poll_wait(int poll, gc_poll_event_t *events, int capacity, int timeout_ms) {
    struct epoll_event raw[256];
    if (capacity > 256) capacity = 256;
    if (capacity <= 0) return -EINVAL;
    int n = epoll_wait(poll, raw, capacity, timeout_ms);
    if (n < 0) return -errno;
    for (int i = 0; i < n; i++) {
        events[i].events = raw[i].events;
        events[i].data = raw[i].data.u64;
    }
    return n;
}

int gc_eventfd_create(void) {
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return fd < 0 ? -errno : fd;
}

int gc_eventfd_signal(int fd) {
    uint64_t one = 1;
    for (;;) {
        ssize_t n = write(fd, &one, sizeof one);
        if (n == (ssize_t)sizeof one) return 0;
        if (n < 0 && errno == EINTR) continue;
        // EAGAIN: the counter is at its maximum, so the descriptor is readable anyway.
        return n < 0 ? -errno : -EIO;
    }
}

int gc_eventfd_drain(int fd) {
    uint64_t value;
    for (;;) {
        ssize_t n = read(fd, &value, sizeof value);
        if (n == (ssize_t)sizeof value) return 0;
        if (n < 0 && errno == EINTR) continue;
        return n < 0 ? -errno : -EIO;
    }
}

int gc_timerfd_create(int clock) {
    int fd = timerfd_create(gc_clock_id(clock), TFD_CLOEXEC | TFD_NONBLOCK);
    return fd < 0 ? -errno : fd;
}

int gc_timerfd_arm(int fd, uint64_t deadline_ns, bool cancel_on_set) {
    struct itimerspec spec = {0};
    spec.it_value.tv_sec = (time_t)(deadline_ns / 1000000000ull);
    spec.it_value.tv_nsec = (long)(deadline_ns % 1000000000ull);
    int flags = TFD_TIMER_ABSTIME;
    if (cancel_on_set && deadline_ns != 0) flags |= TFD_TIMER_CANCEL_ON_SET;
    return timerfd_settime(fd, flags, &spec, NULL) < 0 ? -errno : 0;
}

int gc_timerfd_drain(int fd) {
    uint64_t expirations;
    for (;;) {
        ssize_t n = read(fd, &expirations, sizeof expirations);
        if (n == (ssize_t)sizeof expirations) return 0;
        if (n < 0 && errno == EINTR) continue;
        return n < 0 ? -errno : -EIO;
    }
}

int gc_descriptor_close(int fd) {
    return close(fd) < 0 ? -errno : 0;
}

uint64_t gc_descriptor_readable_bytes(int fd) {
    struct stat st;
    bool known = fstat(fd, &st) == 0;
    if (known && S_ISREG(st.st_mode)) {
        off_t position = lseek(fd, 0, SEEK_CUR);
        if (position < 0 || position >= st.st_size) return 0;
        return (uint64_t)(st.st_size - position);
    }
    int available = 0;
    if (ioctl(fd, FIONREAD, &available) == 0) return available > 0 ? (uint64_t)available : 0;
    // FIONREAD fails (EINVAL) on a listening socket; its data is the pending connections.
    if (known && S_ISSOCK(st.st_mode)) return gc_listening_socket_backlog(fd);
    return 0;
}

uint64_t gc_listening_socket_backlog(int fd) {
    int listening = 0, protocol = 0;
    socklen_t length = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0 || !listening) return 0;
    length = sizeof protocol;
    if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &length) == 0 && protocol == IPPROTO_TCP) {
        // On a listening TCP socket Linux reports the accept queue's length in tcpi_unacked
        // (and its limit in tcpi_sacked).
        struct tcp_info info;
        length = sizeof info;
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) == 0 &&
            length >= offsetof(struct tcp_info, tcpi_unacked) + sizeof info.tcpi_unacked) {
            return info.tcpi_unacked;
        }
    }
    // Other families (Unix-domain, ...) cannot tell: the socket is readable, so at least one.
    return 1;
}

uint64_t gc_descriptor_writable_bytes(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return 1;
    if (S_ISFIFO(st.st_mode)) {
        int capacity = fcntl(fd, F_GETPIPE_SZ);
        int queued = 0;
        if (capacity > 0 && ioctl(fd, FIONREAD, &queued) == 0 && queued < capacity) {
            return (uint64_t)(capacity - queued);
        }
        return 1;
    }
    if (S_ISSOCK(st.st_mode)) {
        int capacity = 0, queued = 0;
        socklen_t length = sizeof capacity;
        if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &capacity, &length) == 0 &&
            ioctl(fd, SIOCOUTQ, &queued) == 0 && queued < capacity) {
            return (uint64_t)(capacity - queued);
        }
        return 1;
    }
    return 1;
}

uint64_t gc_descriptor_identity(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return 0;
    uint64_t identity = (uint64_t)st.st_ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)st.st_dev;
    return identity ? identity : 1;
}

// MARK: - The event loop's descriptors, made when the library is loaded

#include <signal.h>
#include <sys/signalfd.h>

static int32_t gc_reserved[GC_RESERVED_COUNT] = { -1, -1, -1, -1, -1, -1 };
static pid_t gc_reserved_pid;
static bool gc_reserved_taken;

/// Makes the descriptors that are still missing (-1 or a negative errno): the epoll
/// instance, the wakeup eventfd, a timerfd per clock and an empty signalfd, each but the
/// epoll and the eventfd registered with the epoll (generation 0: data is the descriptor).
static void gc_reserve_missing(void) {
    if (gc_reserved[GC_RESERVED_POLL] < 0) gc_reserved[GC_RESERVED_POLL] = gc_poll_create();
    if (gc_reserved[GC_RESERVED_WAKEUP] < 0) gc_reserved[GC_RESERVED_WAKEUP] = gc_eventfd_create();
    int poll = gc_reserved[GC_RESERVED_POLL];
    for (int slot = GC_RESERVED_TIMER_UPTIME; slot < GC_RESERVED_COUNT; slot++) {
        if (gc_reserved[slot] >= 0) continue;
        if (poll < 0) {
            gc_reserved[slot] = poll;  // nothing to register it with: try again at the take
            continue;
        }
        int fd;
        if (slot == GC_RESERVED_SIGNAL) {
            sigset_t none;
            sigemptyset(&none);
            fd = signalfd(-1, &none, SFD_NONBLOCK | SFD_CLOEXEC);
            if (fd < 0) fd = -errno;
        } else {
            fd = gc_timerfd_create(slot - GC_RESERVED_TIMER_UPTIME);
        }
        if (fd >= 0) {
            int rc = gc_poll_control(poll, GC_POLL_ADD, fd, GC_POLL_IN, (uint64_t)(uint32_t)fd);
            if (rc < 0) {
                close(fd);
                fd = rc;
            }
        }
        gc_reserved[slot] = fd;
    }
    gc_reserved_pid = getpid();
}

__attribute__((constructor)) static void gc_reserve_at_load(void) { gc_reserve_missing(); }

void gc_event_take_reserved(int32_t *descriptors) {
    if (gc_reserved_taken) {
        for (int slot = 0; slot < GC_RESERVED_COUNT; slot++) descriptors[slot] = -EBUSY;
        return;
    }
    gc_reserved_taken = true;
    if (gc_reserved_pid != getpid()) {
        // A child forked before the loop was taken: the epoll instance is shared with the
        // parent (a registration here would show up there). Make the child its own.
        for (int slot = 0; slot < GC_RESERVED_COUNT; slot++) {
            if (gc_reserved[slot] >= 0) close(gc_reserved[slot]);
            gc_reserved[slot] = -1;
        }
    }
    gc_reserve_missing();
    for (int slot = 0; slot < GC_RESERVED_COUNT; slot++) descriptors[slot] = gc_reserved[slot];
}
