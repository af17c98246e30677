// The C ABI of time.h: dispatch_time and dispatch_walltime. The encoding and the
// saturation rules live in Time/DispatchClock.swift.
import Glibc

/// `dispatch_time_t dispatch_time(dispatch_time_t when, int64_t delta)`
@_cdecl("dispatch_time")
public func dispatch_time(_ when: UInt64, _ delta: Int64) -> UInt64 {
    DispatchClock.time(when, delta)
}

/// `dispatch_time_t dispatch_walltime(const struct timespec *when, int64_t delta)`
@_cdecl("dispatch_walltime")
public func dispatch_walltime(_ when: UnsafePointer<timespec>?, _ delta: Int64) -> UInt64 {
    DispatchClock.walltime(when, delta)
}
