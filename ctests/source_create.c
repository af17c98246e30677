// dispatch_source_create's handle and mask rules, row by row as source.h's table states
// them: a handle or mask bit a type cannot use gives NULL (a timer or data source with a
// handle it has no use for included); the boundary values of each accepted range give a
// source, and dispatch_source_get_handle/get_mask return what was passed. Each source made
// is cancelled before it is activated (so nothing is registered) and then released.
#include "check.h"

#include <limits.h>

typedef struct {
    const char *type_name;
    dispatch_source_type_t type;
    uintptr_t handle;
    uintptr_t mask;
    bool accepted;
} row_t;

#define ROW(kind, handle, mask, accepted) { #kind, DISPATCH_SOURCE_TYPE_##kind, (uintptr_t)(handle), (uintptr_t)(mask), accepted }
#define ALL_BITS (~(uintptr_t)0)

static const row_t rows[] = {
    // Data sources: handle 0, mask 0.
    ROW(DATA_ADD, 0, 0, true),
    ROW(DATA_ADD, 1, 0, false),
    ROW(DATA_ADD, 5, 0, false),
    ROW(DATA_ADD, ALL_BITS, 0, false),
    ROW(DATA_ADD, 0, 1, false),
    ROW(DATA_ADD, 0, ALL_BITS, false),
    ROW(DATA_OR, 0, 0, true),
    ROW(DATA_OR, 5, 0, false),
    ROW(DATA_OR, 0, 2, false),
    ROW(DATA_REPLACE, 0, 0, true),
    ROW(DATA_REPLACE, 5, 0, false),
    ROW(DATA_REPLACE, 0, 0x80000000ul, false),
    // Read and write: a descriptor 0 ... INT_MAX, mask 0.
    ROW(READ, 0, 0, true),
    ROW(READ, 1000, 0, true),
    ROW(READ, INT_MAX, 0, true),
    ROW(READ, (uintptr_t)INT_MAX + 1, 0, false),
    ROW(READ, UINT_MAX, 0, false),
    ROW(READ, ALL_BITS, 0, false),
    ROW(READ, 0, 1, false),
    ROW(READ, 0, ALL_BITS, false),
    ROW(WRITE, 1, 0, true),
    ROW(WRITE, INT_MAX, 0, true),
    ROW(WRITE, (uintptr_t)INT_MAX + 1, 0, false),
    ROW(WRITE, ALL_BITS, 0, false),
    ROW(WRITE, 1, 4, false),
    // Signals: 1 ... 64, mask 0.
    ROW(SIGNAL, 0, 0, false),
    ROW(SIGNAL, 1, 0, true),
    ROW(SIGNAL, SIGUSR1, 0, true),
    ROW(SIGNAL, 64, 0, true),
    ROW(SIGNAL, 65, 0, false),
    ROW(SIGNAL, 1000, 0, false),
    ROW(SIGNAL, ALL_BITS, 0, false),
    ROW(SIGNAL, SIGUSR1, 1, false),
    // Timers: handle 0 ... 3; mask within STRICT | 0x2.
    ROW(TIMER, 0, 0, true),
    ROW(TIMER, 1, 0, true),
    ROW(TIMER, 2, 0, true),
    ROW(TIMER, 3, 0, true),
    ROW(TIMER, 4, 0, false),
    ROW(TIMER, 5, 0, false),
    ROW(TIMER, 64, 0, false),
    ROW(TIMER, INT_MAX, 0, false),
    ROW(TIMER, ALL_BITS, 0, false),
    ROW(TIMER, 0, DISPATCH_TIMER_STRICT, true),
    ROW(TIMER, 0, 2, true),
    ROW(TIMER, 0, 3, true),
    ROW(TIMER, 3, DISPATCH_TIMER_STRICT | 2, true),
    ROW(TIMER, 4, DISPATCH_TIMER_STRICT, false),
    ROW(TIMER, 0, 4, false),
    ROW(TIMER, 0, 8, false),
    ROW(TIMER, 0, ALL_BITS, false),
    ROW(TIMER, 5, DISPATCH_TIMER_STRICT, false),
#ifndef GC_REFERENCE_LIBDISPATCH
    // Process and vnode sources (libdispatch on Linux has neither).
    ROW(PROC, 0, DISPATCH_PROC_EXIT, false),
    ROW(PROC, 1, DISPATCH_PROC_EXIT, true),
    ROW(PROC, INT_MAX, DISPATCH_PROC_EXIT, true),
    ROW(PROC, (uintptr_t)INT_MAX + 1, DISPATCH_PROC_EXIT, false),
    ROW(PROC, ALL_BITS, DISPATCH_PROC_EXIT, false),
    ROW(PROC, 1, 0, true),
    ROW(PROC, 1, DISPATCH_PROC_EXIT | DISPATCH_PROC_FORK | DISPATCH_PROC_EXEC | DISPATCH_PROC_SIGNAL, true),
    ROW(PROC, 1, 1, false),
    ROW(PROC, 1, ALL_BITS, false),
    ROW(VNODE, 0, DISPATCH_VNODE_WRITE, true),
    ROW(VNODE, INT_MAX, DISPATCH_VNODE_WRITE, true),
    ROW(VNODE, (uintptr_t)INT_MAX + 1, DISPATCH_VNODE_WRITE, false),
    ROW(VNODE, ALL_BITS, DISPATCH_VNODE_WRITE, false),
    ROW(VNODE, 0, 0, true),
    ROW(VNODE, 0, DISPATCH_VNODE_DELETE | DISPATCH_VNODE_WRITE | DISPATCH_VNODE_EXTEND | DISPATCH_VNODE_ATTRIB |
        DISPATCH_VNODE_LINK | DISPATCH_VNODE_RENAME | DISPATCH_VNODE_REVOKE | DISPATCH_VNODE_FUNLOCK, true),
    ROW(VNODE, 0, 0x80, false),
    ROW(VNODE, 0, 0x200, false),
    ROW(VNODE, 0, ALL_BITS, false),
#endif
};

int main(void) {
    check_start("source_create", 60);
    check_section("every row of source.h's table");
    dispatch_queue_t queue = dispatch_queue_create("gc.test.source-create", NULL);
    int wrong = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row_t *row = &rows[i];
        dispatch_source_t source = dispatch_source_create(row->type, row->handle, row->mask, queue);
        bool made = source != NULL;
        if (made != row->accepted) {
            fprintf(stderr, "   %s handle 0x%lx mask 0x%lx: %s, expected %s\n", row->type_name,
                    (unsigned long)row->handle, (unsigned long)row->mask, made ? "a source" : "NULL",
                    row->accepted ? "a source" : "NULL");
            wrong++;
        }
        if (!source) continue;
        CHECK_EQ_U64(dispatch_source_get_handle(source), row->handle);
        dispatch_source_cancel(source);   // before activation: nothing gets registered
        dispatch_activate(source);
        dispatch_release(source);
    }
    printf("   %zu rows, %d wrong\n", sizeof rows / sizeof rows[0], wrong);
    CHECK_EQ(wrong, 0);
    dispatch_sync_f(queue, NULL, noop_function);
    dispatch_release(queue);
    check_pass();
    return 0;
}
