// CGrandCentralEvent: the OS calls of the event thread (epoll, timerfd, eventfd) and the
// one clock the base layer does not read (CLOCK_BOOTTIME). Swift's Glibc module does not
// import <sys/epoll.h>, <sys/timerfd.h> or <sys/eventfd.h>, and `struct epoll_event` is
// packed on x86_64, so the event thread makes these calls through the thin functions below
// and nowhere else (the event loop, Runtime/EventLoop*.swift, is their only caller). Keeping them in
// one place leaves room for a deterministic fake in tests later.
//
// Every function returns 0 (or a descriptor / count) on success and a negative errno on
// failure; none of them aborts. No dispatch_* names live here.
#ifndef CGRANDCENTRAL_EVENT_H
#define CGRANDCENTRAL_EVENT_H

#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

// Readiness bits, with epoll's values (checked by a static assertion in event.c).
#define GC_POLL_IN     0x001u   // EPOLLIN
#define GC_POLL_OUT    0x004u   // EPOLLOUT
#define GC_POLL_ERR    0x008u   // EPOLLERR
#define GC_POLL_HUP    0x010u   // EPOLLHUP
#define GC_POLL_RDHUP  0x2000u  // EPOLLRDHUP
#define GC_POLL_ONESHOT (1u << 30) // EPOLLONESHOT

// epoll_ctl operations.
#define GC_POLL_ADD 1           // EPOLL_CTL_ADD
#define GC_POLL_DEL 2           // EPOLL_CTL_DEL
#define GC_POLL_MOD 3           // EPOLL_CTL_MOD

// The clocks a timerfd can run on.
#define GC_CLOCK_UPTIME 0       // CLOCK_MONOTONIC, dispatch_time's default clock
#define GC_CLOCK_WALL   1       // CLOCK_REALTIME, dispatch_walltime
#define GC_CLOCK_BOOT   2       // CLOCK_BOOTTIME, libdispatch's private "monotonic" clock

/// One readiness report, unpacked (Swift cannot lay out the packed `struct epoll_event`).
typedef struct gc_poll_event_s {
    uint32_t events;
    uint64_t data;
} gc_poll_event_t;

// The event loop's own descriptors, made by a constructor when the library is loaded, so
// that a process that later reaches its descriptor limit still has working timers and
// signal sources (see EventLoop.swift). Slots of `gc_event_take_reserved`:
#define GC_RESERVED_POLL          0  // epoll_create1
#define GC_RESERVED_WAKEUP        1  // the wakeup eventfd (not yet in the epoll)
#define GC_RESERVED_TIMER_UPTIME  2  // timerfd on GC_CLOCK_UPTIME, in the epoll
#define GC_RESERVED_TIMER_WALL    3  // timerfd on GC_CLOCK_WALL, in the epoll
#define GC_RESERVED_TIMER_BOOT    4  // timerfd on GC_CLOCK_BOOT, in the epoll
#define GC_RESERVED_SIGNAL        5  // signalfd with an empty mask, in the epoll
#define GC_RESERVED_COUNT         6

/// Hands the reserved descriptors to the event loop, once per process: fills
/// `descriptors[GC_RESERVED_COUNT]`, each a descriptor or a negative errno. Descriptors the
/// constructor could not make are tried again now; in a child forked before the first call
/// all of them are made again (the parent's epoll instance would be shared). The timerfds
/// and the signalfd are registered in the epoll with generation 0 (data = descriptor).
/// A second call gets -EBUSY in every slot (tests that make a loop of their own).
void gc_event_take_reserved(int32_t *descriptors);

/// CLOCK_BOOTTIME in nanoseconds: like CLOCK_MONOTONIC, but it keeps counting in suspend.
uint64_t gc_boottime_ns(void);

/// epoll_create1(EPOLL_CLOEXEC).
int gc_poll_create(void);
/// epoll_ctl(poll, op, fd, {events, data}).
int gc_poll_control(int poll, int op, int fd, uint32_t events, uint64_t data);
/// epoll_wait into `events` (at most `capacity`, capped at 256), then unpacks them.
/// `timeout_ms < 0` waits forever. Returns the count, or -EINTR etc.
int gc_poll_wait(int poll, gc_poll_event_t *events, int capacity, int timeout_ms);

/// A non-blocking close-on-exec eventfd.
int gc_eventfd_create(void);
/// Adds 1 to the eventfd's counter (makes it readable).
int gc_eventfd_signal(int fd);
/// Resets the eventfd's counter (reads it); -EAGAIN when it was already 0.
int gc_eventfd_drain(int fd);

/// A non-blocking close-on-exec timerfd on one of the GC_CLOCK_* clocks.
int gc_timerfd_create(int clock);
/// Arms `fd` to expire once at the absolute instant `deadline_ns` on its clock; 0 disarms.
/// `cancel_on_set` asks the kernel to report a change of CLOCK_REALTIME (wall clock only).
int gc_timerfd_arm(int fd, uint64_t deadline_ns, bool cancel_on_set);
/// Reads the expiration count: 0 after an expiry, -EAGAIN when none is pending, -ECANCELED
/// when the wall clock was set (the timer must be re-armed).
int gc_timerfd_drain(int fd);

/// What a read source reports for descriptor `fd`: the bytes that can be read without
/// blocking (FIONREAD), for a regular file the bytes from the file position to the end,
/// for a listening socket its pending connections (gc_listening_socket_backlog), 0 when
/// none of these can be told (end of file, /dev/null, a descriptor in error).
uint64_t gc_descriptor_readable_bytes(int fd);
/// The connections waiting to be accepted on listening socket `fd`: the accept queue's
/// length for TCP (TCP_INFO), 1 for other families (Linux cannot tell; called when the
/// socket is readable, so one at least is pending), 0 when `fd` is not listening.
uint64_t gc_listening_socket_backlog(int fd);
/// What a write source reports for `fd`: an estimate of the buffer space (a pipe's
/// capacity minus what it holds, a socket's send buffer minus what is queued), 1 when it
/// cannot be told but the descriptor is writable.
uint64_t gc_descriptor_writable_bytes(int fd);

/// Which open file `fd` is: a hash of its device and inode numbers (fstat), 0 when fd is
/// not open. Two descriptors on the same file agree; a number that was closed and reused
/// for another file (almost always) does not.
uint64_t gc_descriptor_identity(int fd);

/// close(2), retrying nothing (Linux closes the descriptor even on EINTR).
int gc_descriptor_close(int fd);

#ifdef __cplusplus
}
#endif
#endif
