// A Swift closure that must not escape, handed to other threads for the length of one
// call, without a heap allocation.
//
// The Swift API's concurrentPerform (and sync, when it has to wait) runs the caller's
// non-escaping closure on other threads while the caller waits, so the engine needs the
// closure in memory it can point at. Swift's own way, withoutActuallyEscaping, wraps the
// closure in two heap objects to check afterwards that it did not escape (measured: two
// allocations per call, in release builds too). Here the closure is passed, as Swift
// passes any closure argument, in two words — its function and its context — to a C
// function that uses Swift's calling convention (clang's swiftcall), which stores them in a
// struct on its own stack and calls `body` with a pointer to it. The engine calls the
// closure through that pointer with gc_closure_call_*, again under Swift's convention
// (the context travels in the swift_context register, as a closure's does). Everything runs
// before gc_with_closure_* returns, so the closure is used only while its caller is on the
// stack: it does not escape, and nothing is retained or allocated.
//
// The Swift side declares these with @_silgen_name (SwiftAPI/NonEscapingClosure.swift),
// one declaration per closure type; the C symbols are private to the library.
#include <stddef.h>

#if !__has_attribute(swiftcall) || !__has_attribute(swift_context)
#error "CGrandCentral needs clang's swiftcall and swift_context attributes (build it with the Swift toolchain's clang)"
#endif

#define GC_SWIFTCALL __attribute__((swiftcall))
#define GC_SWIFT_CONTEXT __attribute__((swift_context))

/// A closure's two words, as Swift passes a closure argument.
typedef struct {
    void *function;
    void *context;
} gc_swift_closure_t;

typedef void (*gc_closure_body_t)(gc_swift_closure_t *closure, void *argument);

// A `() -> Void` closure: `function(context)`.
typedef GC_SWIFTCALL void (*gc_void_function_t)(void *GC_SWIFT_CONTEXT);
// A `(Int) -> Void` closure: `function(index, context)`.
typedef GC_SWIFTCALL void (*gc_index_function_t)(long, void *GC_SWIFT_CONTEXT);

__attribute__((visibility("hidden")))
GC_SWIFTCALL void gc_with_closure_void(void *function, void *context, gc_closure_body_t body, void *argument) {
    gc_swift_closure_t closure = { function, context };
    body(&closure, argument);
}

__attribute__((visibility("hidden")))
GC_SWIFTCALL void gc_with_closure_index(void *function, void *context, gc_closure_body_t body, void *argument) {
    gc_swift_closure_t closure = { function, context };
    body(&closure, argument);
}

/// Calls a `() -> Void` closure stored by gc_with_closure_void.
__attribute__((visibility("hidden")))
void gc_closure_call_void(void *raw) {
    gc_swift_closure_t *closure = raw;
    ((gc_void_function_t)closure->function)(closure->context);
}

/// Calls a `(Int) -> Void` closure stored by gc_with_closure_index with `index`.
__attribute__((visibility("hidden")))
void gc_closure_call_index(void *raw, long index) {
    gc_swift_closure_t *closure = raw;
    ((gc_index_function_t)closure->function)(index, closure->context);
}

/// Calls a `(Int) -> Void` closure with every index in start..<end: one load of the
/// closure per chunk of a concurrentPerform.
__attribute__((visibility("hidden")))
void gc_closure_call_range(void *raw, long start, long end) {
    gc_swift_closure_t *closure = raw;
    gc_index_function_t function = (gc_index_function_t)closure->function;
    void *context = closure->context;
    for (long i = start; i < end; i++) function(i, context);
}
