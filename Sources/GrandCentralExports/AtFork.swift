import CGrandCentral

// fork (private.h). The facts live in CGrandCentral/fork.c: gc_thread_create reports every
// thread the library starts, and a pthread_atfork child handler (registered with the first
// thread) records that the child was forked from a multithreaded process and resets the
// engine for the child (GrandCentral/Runtime/Fork.swift), so the child can use dispatch.
//
// On Linux, libdispatch's dispatch_atfork_prepare and _parent do nothing, nothing calls its
// dispatch_atfork_child for the program (the Darwin C library does that), and a child of a
// multithreaded parent still reports itself multithreaded and not a fork child, and hangs
// or crashes if it uses dispatch. Here, in such a child, _dispatch_is_fork_of_multithreaded_
// parent() is true and _dispatch_is_multithreaded() false until the child starts a thread
// of its own; dispatch_atfork_child, if a program calls it in the child, records the same
// facts again (the engine reset runs once, from the library's own handler).

@_cdecl("dispatch_atfork_prepare")
public func dispatch_atfork_prepare() {}

@_cdecl("dispatch_atfork_parent")
public func dispatch_atfork_parent() {}

@_cdecl("dispatch_atfork_child")
public func dispatch_atfork_child() { gc_fork_child_now() }

@_cdecl("_dispatch_is_multithreaded")
public func _dispatch_is_multithreaded() -> Bool { gc_is_multithreaded() }

@_cdecl("_dispatch_is_fork_of_multithreaded_parent")
public func _dispatch_is_fork_of_multithreaded_parent() -> Bool { gc_is_fork_child_of_multithreaded() }

@_cdecl("_dispatch_prohibit_transition_to_multithreaded")
public func _dispatch_prohibit_transition_to_multithreaded(_ prohibit: Bool) { gc_prohibit_multithreaded(prohibit) }
