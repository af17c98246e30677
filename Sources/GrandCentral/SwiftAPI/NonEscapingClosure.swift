import CGrandCentral

// A non-escaping closure, lent to other threads for the length of one call without a heap
// allocation (CGrandCentral/closure.c explains how and why: withoutActuallyEscaping
// allocates twice per call). `body` gets a pointer to the closure's two words, which
// gc_closure_call_void/_index/_range call; it must not keep the pointer past its return.
//
// These declarations bind to the C functions by name; the C side receives the closure
// argument exactly as Swift passes it (function, context) because it is compiled with
// Swift's calling convention. One declaration per closure type, each its own C symbol.

@_silgen_name("gc_with_closure_void")
func withLentClosure(_ work: () -> Void,
                     _ body: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void,
                     _ argument: UnsafeMutableRawPointer?)

@_silgen_name("gc_with_closure_index")
func withLentClosure(_ work: (Int) -> Void,
                     _ body: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void,
                     _ argument: UnsafeMutableRawPointer?)
